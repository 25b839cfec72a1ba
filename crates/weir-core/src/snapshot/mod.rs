//! Snapshots: a job's state, saved consistently while it runs, so that it can resume after a
//! failure or a killed process.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use weir_core::snapshot::{Guarantee, LocalDirStore, SnapshotConfig};
//! use weir_core::JobConfig;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Arc::new(LocalDirStore::new(dir.path()));
//! let config = JobConfig::default()
//!     .with_name("orders")
//!     .with_snapshots(SnapshotConfig::new(store, Duration::from_secs(1), Guarantee::ExactlyOnce));
//! # let _ = config;
//! ```
//!
//! # The barrier path
//!
//! Every `interval` the job's [`coordinator`] asks for snapshot *n*. A source
//! saves its state (its read position) between two calls, then sends the barrier of *n* in
//! band on every output, after everything it emitted before. A vertex with several inputs
//! *aligns* (exactly-once): an input queue that delivered barrier *n* is not read again until
//! every input has delivered it; then the vertex saves its state and forwards the barrier.
//! With at-least-once, inputs are not held back: a vertex saves once every input delivered the
//! barrier, and items that overtook it are replayed after a restore.
//!
//! # Two phases
//!
//! Phase 1 is every processor's [`save_to_snapshot`](crate::Processor::save_to_snapshot),
//! where a transactional sink also prepares its output. When every instance saved, the
//! coordinator writes the parts and the manifest to the [`SnapshotStore`]; once the manifest is
//! durable the snapshot exists, and phase 2 calls
//! [`snapshot_commit_finish`](crate::Processor::snapshot_commit_finish) on every instance,
//! which makes the prepared output visible. A restore runs phase 2 again, so commits are
//! idempotent.
//!
//! When every instance has finished, the coordinator takes a last, *terminal* snapshot of
//! their final state and commits it before the job completes.
//!
//! # Keyed state and rescaling
//!
//! An entry saved with a partition ([`SnapshotWriter::put_keyed`]) is restored to the instance
//! that owns that partition at the new parallelism, so a job can be restored with more or fewer
//! instances, keys moving with their partitions. Other entries go to every instance of the
//! vertex, which keeps what is its own.

pub mod coordinator;
pub mod crash;
mod format;
mod restore;
mod savepoint;
mod store;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use coordinator::SnapshotStats;
pub use format::{FORMAT_VERSION, Manifest, PartInfo, SnapshotError, VertexInfo};
pub use restore::{Restored, load_latest, verify};
pub use savepoint::{Savepoint, SavepointError, copy_snapshot};
pub use store::{LocalDirStore, SnapshotStore};

pub(crate) use format::encode_part;

/// One saved piece of a processor's state.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SnapshotEntry {
    /// The key partition (`0..271`) the entry belongs to, for keyed state that moves with its
    /// partition when the job is restored at another parallelism; `None` for an instance's own
    /// state, which every instance of the vertex receives on restore.
    pub partition: Option<u16>,
    /// The entry's key, for example an encoded grouping key.
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// The encoded state.
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
}

/// Collects the entries a processor saves in
/// [`Processor::save_to_snapshot`](crate::Processor::save_to_snapshot).
#[derive(Debug, Default)]
pub struct SnapshotWriter {
    entries: Vec<SnapshotEntry>,
}

impl SnapshotWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry of this instance's own state: every instance of the vertex receives it on
    /// restore, and keeps what is its own.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.entries.push(SnapshotEntry {
            partition: None,
            key,
            value,
        });
    }

    /// Adds an entry of keyed state in `partition`: on restore it goes to the instance that
    /// owns the partition then.
    pub fn put_keyed(&mut self, partition: u16, key: Vec<u8>, value: Vec<u8>) {
        self.entries.push(SnapshotEntry {
            partition: Some(partition),
            key,
            value,
        });
    }

    /// The entries saved so far.
    pub fn into_entries(self) -> Vec<SnapshotEntry> {
        self.entries
    }

    /// How many entries were saved.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing was saved.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Holds a job's snapshots back: while any hold is taken, the coordinator starts no new
/// snapshot. A stage whose state cannot be saved (a batch aggregation, a sort, a hash join's
/// table, an unkeyed `map_stateful`) takes a hold for as long as it keeps state, as a hash
/// join's open build side does in Jet; its job then snapshots only before and after it.
///
/// Cheap to clone; a [`SnapshotHold`] releases its hold when dropped.
#[derive(Debug, Clone, Default)]
pub struct SnapshotHolds {
    count: Arc<std::sync::atomic::AtomicUsize>,
    /// Whether the job takes snapshots at all; without, holds cost nothing.
    active: bool,
}

impl SnapshotHolds {
    /// Holds for a job that takes snapshots.
    pub(crate) fn active() -> Self {
        SnapshotHolds {
            count: Arc::default(),
            active: true,
        }
    }

    /// Takes a hold until the returned guard is dropped. In a job without snapshots, the
    /// guard does nothing.
    pub fn hold(&self) -> SnapshotHold {
        if self.active {
            self.count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        SnapshotHold {
            holds: self.active.then(|| Arc::clone(&self.count)),
        }
    }

    /// Whether any hold is taken.
    pub(crate) fn held(&self) -> bool {
        self.count.load(std::sync::atomic::Ordering::Acquire) > 0
    }
}

/// One hold on a job's snapshots; see [`SnapshotHolds`]. Released on drop.
#[derive(Debug, Default)]
pub struct SnapshotHold {
    holds: Option<Arc<std::sync::atomic::AtomicUsize>>,
}

impl Drop for SnapshotHold {
    fn drop(&mut self) {
        if let Some(holds) = self.holds.take() {
            holds.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

/// What a restarted job may see again, or miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Guarantee {
    /// Every item affects the state and the committed output exactly once. Vertices with
    /// several inputs align barriers; sources must be able to replay.
    #[default]
    ExactlyOnce,
    /// Nothing is lost, but items after a barrier may be processed again after a restore.
    /// No alignment.
    AtLeastOnce,
    /// No snapshots: a failure loses the job's state.
    None,
}

impl std::fmt::Display for Guarantee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Guarantee::ExactlyOnce => "exactly-once",
            Guarantee::AtLeastOnce => "at-least-once",
            Guarantee::None => "none",
        })
    }
}

impl std::str::FromStr for Guarantee {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "exactly-once" => Ok(Guarantee::ExactlyOnce),
            "at-least-once" => Ok(Guarantee::AtLeastOnce),
            "none" => Ok(Guarantee::None),
            other => Err(format!(
                "unknown guarantee '{other}': expected exactly-once, at-least-once or none"
            )),
        }
    }
}

/// How a job takes snapshots and restarts; set it in [`JobConfig::snapshots`].
///
/// [`JobConfig::snapshots`]: crate::JobConfig::snapshots
#[derive(Clone)]
pub struct SnapshotConfig {
    /// Where snapshots go. The job's name ([`JobConfig::name`](crate::JobConfig::name)) names
    /// its folder: a job submitted again under the same name resumes from the newest complete
    /// snapshot there.
    pub store: Arc<dyn SnapshotStore>,
    /// Time between the end of one snapshot and the start of the next.
    pub interval: Duration,
    /// Exactly-once or at-least-once.
    pub guarantee: Guarantee,
    /// How a failing job is restarted from its last snapshot.
    pub restart: RestartPolicy,
    /// How many complete snapshots to keep (at least 1). Default 2.
    pub keep: usize,
    /// Where savepoints go: a snapshot taken by [`JobMonitor::stop_with_savepoint`] is also
    /// written here, and no job prunes it. `None` (the default): savepoints are refused.
    ///
    /// [`JobMonitor::stop_with_savepoint`]: crate::JobMonitor::stop_with_savepoint
    pub savepoints: Option<Arc<dyn SnapshotStore>>,
}

impl SnapshotConfig {
    /// Snapshots into `store` every `interval`, with the default restart policy and the last 2
    /// snapshots kept.
    pub fn new(store: Arc<dyn SnapshotStore>, interval: Duration, guarantee: Guarantee) -> Self {
        SnapshotConfig {
            store,
            interval,
            guarantee,
            restart: RestartPolicy::default(),
            keep: 2,
            savepoints: None,
        }
    }

    /// These settings, with savepoints written to `store` as well (see
    /// [`SnapshotConfig::savepoints`]).
    pub fn with_savepoints(mut self, store: Arc<dyn SnapshotStore>) -> Self {
        self.savepoints = Some(store);
        self
    }
}

impl std::fmt::Debug for SnapshotConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotConfig")
            .field("interval", &self.interval)
            .field("guarantee", &self.guarantee)
            .field("restart", &self.restart)
            .field("keep", &self.keep)
            .field("savepoints", &self.savepoints.is_some())
            .finish_non_exhaustive()
    }
}

/// How many times, and how soon, a failed job is restarted from its last complete snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts before the job fails for good with its last cause. 0: never restart.
    pub attempts: u32,
    /// The pause before the first restart; it doubles with each further one.
    pub backoff: Duration,
    /// The longest pause.
    pub max_backoff: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            attempts: 3,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl RestartPolicy {
    /// No restarts: a failure ends the job.
    pub fn never() -> Self {
        RestartPolicy {
            attempts: 0,
            ..RestartPolicy::default()
        }
    }

    /// The pause before restart number `attempt` (1-based).
    pub fn pause(&self, attempt: u32) -> Duration {
        weir_backoff::Backoff::new(self.backoff, 2.0, self.max_backoff)
            .pause(attempt.saturating_sub(1))
    }
}
