//! Savepoints: snapshots taken on request and kept, to stop a job and start it again later,
//! from that point or from another one, as Flink's savepoints do.
//!
//! [`JobMonitor::stop_with_savepoint`](crate::JobMonitor::stop_with_savepoint) asks the
//! coordinator for a snapshot at once (not at the next interval). It is written to the job's
//! store like any other, so the same job resumes from it, and to the savepoint store of
//! [`SnapshotConfig::savepoints`](super::SnapshotConfig::savepoints), which no job prunes;
//! its manifest says `savepoint`. Once it is durable the job is cancelled.
//!
//! To start from a chosen snapshot, a caller copies it into the job's store with
//! [`copy_snapshot`] after removing the job's other snapshots, so that every later restart
//! of that run resumes on the chosen line of history.

use std::path::PathBuf;

use super::format::{Manifest, SnapshotError};
use super::restore::verify;
use super::store::SnapshotStore;

/// A savepoint that was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Savepoint {
    /// Its snapshot id (the same in the job's store and the savepoint store).
    pub id: u64,
    /// Its folder in the savepoint store.
    pub location: PathBuf,
}

/// Why no savepoint was taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SavepointError {
    /// The job takes no snapshots, or has nowhere to keep savepoints.
    #[error(
        "the job takes no savepoints: run it with snapshots and a savepoint store (--state-dir)"
    )]
    NotConfigured,
    /// The job ended (completed, failed, was cancelled or restarted) before the savepoint
    /// was durable.
    #[error("the job ended before its savepoint was written")]
    Ended,
    /// Writing the savepoint failed; the job goes on.
    #[error("the savepoint could not be written: {0}")]
    Failed(String),
}

/// Copies complete snapshot `id` of `from_job` in `from` to `to` as snapshot `id` of
/// `to_job`, checking every part's checksum on the way; the copy's manifest names `to_job`.
/// Returns the copy's manifest. Cost: every part read and written once.
///
/// # Errors
/// [`SnapshotError::Corrupt`] when the snapshot is incomplete or damaged (naming the file),
/// or an I/O error of either store.
pub fn copy_snapshot(
    from: &dyn SnapshotStore,
    from_job: &str,
    id: u64,
    to: &dyn SnapshotStore,
    to_job: &str,
) -> Result<Manifest, SnapshotError> {
    let Some(mut manifest) = verify(from, from_job, id)? else {
        return Err(SnapshotError::Corrupt {
            path: from.location(from_job, id, "manifest"),
            reason: "the snapshot is incomplete (it has no manifest)".into(),
        });
    };
    for part in manifest.vertices.iter().flat_map(|v| &v.parts) {
        let bytes = from.read_part(from_job, id, &part.file)?;
        to.write_part(to_job, id, &part.file, &bytes)?;
    }
    manifest.job = to_job.to_string();
    to.publish(to_job, id, &manifest.encode())?;
    Ok(manifest)
}
