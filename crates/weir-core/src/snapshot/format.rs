//! The on-disk format of snapshot parts and manifests.
//!
//! Every file is one frame of [`weir_frame`]:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `WEIRSNAP` |
//! | 2 | format version, little-endian ([`FORMAT_VERSION`]) |
//! | 2 | kind, little-endian: 0 a part, 1 a manifest |
//! | 4 | CRC32C of the payload, little-endian |
//! | 8 | payload length, little-endian |
//! | n | payload |
//!
//! A part's payload is the postcard encoding of one instance's `Vec<SnapshotEntry>`; a
//! manifest's is JSON, so that it can be read by eye. A frame whose magic, version, length or
//! checksum is wrong is refused with the file's path.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weir_frame::FileFormat;

use super::{Guarantee, SnapshotEntry};

/// The version written into every frame; a reader refuses any other.
pub const FORMAT_VERSION: u16 = 1;

/// Snapshot parts and manifests, framed by [`weir_frame`].
const SNAPSHOT_FILE: FileFormat =
    FileFormat::new(b"WEIRSNAP", FORMAT_VERSION, "snapshot file", "frame kind");
const KIND_PART: u16 = 0;
const KIND_MANIFEST: u16 = 1;

/// What can go wrong reading or writing a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The store could not read or write a file.
    #[error("snapshot I/O on {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is damaged: a partial write, a flipped bit, a truncation.
    #[error("snapshot file {path} is damaged: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The snapshot was taken of another pipeline.
    #[error(
        "the snapshot in {path} does not match this job at vertex '{vertex}': {reason}; remove the state directory or restore the pipeline that took it"
    )]
    Mismatch {
        /// The snapshot's folder.
        path: PathBuf,
        /// The vertex that differs.
        vertex: String,
        /// How it differs.
        reason: String,
    },
    /// The snapshot was taken under another guarantee than the run asks for: its positions
    /// and sink state mean what that guarantee made of them.
    #[error(
        "the snapshot in {path} was taken under --guarantee {snapshot}, and this run asks for {run}; run again with --guarantee {snapshot} to resume from it, or remove the state directory to start over"
    )]
    GuaranteeMismatch {
        /// The snapshot's folder.
        path: PathBuf,
        /// The guarantee it was taken under.
        snapshot: super::Guarantee,
        /// The guarantee of this run.
        run: super::Guarantee,
    },
}

/// One instance's file in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    /// The instance's index in its vertex.
    pub instance: usize,
    /// The file name inside the snapshot's folder.
    pub file: String,
    /// The file's size.
    pub bytes: u64,
    /// How many entries it holds.
    pub entries: u64,
}

/// One vertex of the snapshotted job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VertexInfo {
    /// The vertex name, as the DAG gives it.
    pub name: String,
    /// Its instance count when the snapshot was taken.
    pub parallelism: usize,
    /// Its instances' files.
    pub parts: Vec<PartInfo>,
}

/// What a complete snapshot holds. Written last: a snapshot without a valid manifest does not
/// exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The job's name.
    pub job: String,
    /// The snapshot id, increasing within a job's life (across restarts).
    pub id: u64,
    /// When phase 1 started, in milliseconds since the Unix epoch.
    pub taken_at_ms: u64,
    /// From the request to the last instance's save, in milliseconds.
    pub duration_ms: u64,
    /// The longest time one instance spent aligning barriers, in milliseconds.
    pub alignment_ms: u64,
    /// Whether every instance had finished: the job's output is complete once it commits.
    pub terminal: bool,
    /// The guarantee the job ran with.
    pub guarantee: Guarantee,
    /// Whether it was taken as a savepoint ([`JobMonitor::stop_with_savepoint`]): a copy is
    /// kept in the savepoint store, beyond the job's retention. Absent in older manifests.
    ///
    /// [`JobMonitor::stop_with_savepoint`]: crate::JobMonitor::stop_with_savepoint
    #[serde(default)]
    pub savepoint: bool,
    /// Every vertex in DAG order.
    pub vertices: Vec<VertexInfo>,
}

impl Manifest {
    /// The total size of the parts, in bytes.
    pub fn bytes(&self) -> u64 {
        self.vertices
            .iter()
            .flat_map(|v| &v.parts)
            .map(|p| p.bytes)
            .sum()
    }
}

fn frame(kind: u16, payload: &[u8]) -> Vec<u8> {
    SNAPSHOT_FILE.frame(kind, payload)
}

fn unframe<'a>(path: &Path, kind: u16, bytes: &'a [u8]) -> Result<&'a [u8], SnapshotError> {
    SNAPSHOT_FILE
        .unframe(kind, bytes)
        .map_err(|e| SnapshotError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

/// Encodes one instance's entries as a part file.
///
/// Cost: one pass over the entries plus a CRC32C of the result (several GB/s).
pub(crate) fn encode_part(entries: &[SnapshotEntry]) -> Vec<u8> {
    let payload = postcard::to_stdvec(entries).expect("entries always encode");
    frame(KIND_PART, &payload)
}

/// Decodes a part file read from `path`.
/// Checks a part file's frame (kind, length and checksum) without decoding its entries.
///
/// # Errors
/// [`SnapshotError::Corrupt`], naming `path`.
pub(crate) fn check_part(path: &Path, bytes: &[u8]) -> Result<(), SnapshotError> {
    unframe(path, KIND_PART, bytes).map(drop)
}

pub(crate) fn decode_part(path: &Path, bytes: &[u8]) -> Result<Vec<SnapshotEntry>, SnapshotError> {
    let payload = unframe(path, KIND_PART, bytes)?;
    postcard::from_bytes(payload).map_err(|e| SnapshotError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("entries do not decode: {e}"),
    })
}

impl Manifest {
    /// The manifest as a file.
    pub fn encode(&self) -> Vec<u8> {
        frame(
            KIND_MANIFEST,
            &serde_json::to_vec_pretty(self).expect("a manifest always encodes"),
        )
    }

    /// Reads a manifest file's bytes, checking its frame.
    ///
    /// # Errors
    /// [`SnapshotError::Corrupt`], naming `path`.
    pub fn decode(path: &Path, bytes: &[u8]) -> Result<Manifest, SnapshotError> {
        let payload = unframe(path, KIND_MANIFEST, bytes)?;
        serde_json::from_slice(payload).map_err(|e| SnapshotError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("manifest does not parse: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<SnapshotEntry> {
        vec![
            SnapshotEntry {
                partition: Some(7),
                key: b"k".to_vec(),
                value: vec![1, 2, 3],
            },
            SnapshotEntry {
                partition: None,
                key: vec![],
                value: vec![9; 100],
            },
        ]
    }

    #[test]
    fn a_part_round_trips_and_any_damage_is_refused() {
        let path = Path::new("part");
        let bytes = encode_part(&entries());
        assert_eq!(decode_part(path, &bytes).unwrap(), entries());
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 0x10;
            assert!(
                decode_part(path, &flipped).is_err(),
                "a flipped bit at byte {i} went unnoticed"
            );
        }
        for len in 0..bytes.len() {
            assert!(
                decode_part(path, &bytes[..len]).is_err(),
                "truncated to {len}"
            );
        }
    }

    #[test]
    fn a_manifest_is_not_a_part_and_names_its_file() {
        let manifest = Manifest {
            job: "j".into(),
            id: 3,
            taken_at_ms: 1,
            duration_ms: 2,
            alignment_ms: 0,
            terminal: false,
            guarantee: Guarantee::ExactlyOnce,
            savepoint: false,
            vertices: vec![],
        };
        let bytes = manifest.encode();
        assert_eq!(Manifest::decode(Path::new("m"), &bytes).unwrap(), manifest);
        let err = decode_part(Path::new("/x/manifest"), &bytes).unwrap_err();
        assert!(err.to_string().contains("/x/manifest"), "{err}");
        assert!(err.to_string().contains("kind"), "{err}");
    }
}
