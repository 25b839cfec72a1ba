//! Swap files: a batch of a queue's lowest-priority flow files, written to disk so that a
//! long queue does not hold them in memory. The flow-file repository logs a swap-out after
//! the file is durable and a swap-in when it is read back; the file is deleted at the next
//! checkpoint, once no journal frame refers to it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weir_frame::FileFormat;

use super::sync_dir;
use crate::faults::{self, Step};
use crate::flowfile::{FlowFile, SortKey};

/// Swap files, framed by [`weir_frame`]: the payload is the postcard encoding of the batch.
const SWAP_FILE: FileFormat = FileFormat::new(b"WEIRSWAP", 1, "swap file", "kind");

/// Flow files per swap file, as in NiFi.
pub const SWAP_BATCH: usize = 10_000;

/// What the repository remembers of a swap file (the flow files stay on disk).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwapInfo {
    /// The swap file's number.
    pub id: u64,
    /// The queue it belongs to (index in the repository's queue table).
    pub queue: u32,
    /// Flow files in it.
    pub count: u64,
    /// Their content bytes.
    pub bytes: u64,
    /// The highest-priority key in it, so that dequeue order holds across swapping.
    pub min_key: SortKey,
    /// Largest flow-file id in it (ids are recovered as the maximum plus one).
    pub max_id: u64,
    /// Largest enqueue sequence in it.
    pub max_seq: u64,
    /// Claim files its flow files refer to, with counts (reference counts are rebuilt from
    /// these without reading the file).
    pub claims: Vec<(u64, u64)>,
}

/// The path of swap file `id` in `dir`.
pub fn swap_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016}.swap"))
}

/// Writes `flowfiles` as swap file `id`: temp file, fsync, rename, directory fsync.
///
/// # Errors
/// I/O errors; nothing is logged then and the flow files stay in memory.
pub fn write(dir: &Path, id: u64, flowfiles: &[FlowFile]) -> io::Result<()> {
    let payload = postcard::to_allocvec(flowfiles).map_err(io::Error::other)?;
    let tmp = dir.join(format!("{id:016}.swap.tmp"));
    let mut f = faults::create(&tmp)?;
    let framed = SWAP_FILE.frame(0, &payload);
    faults::step(Step::Write, &tmp, || f.write_all(&framed))?;
    faults::step(Step::Sync, &tmp, || f.sync_all())?;
    faults::rename(&tmp, &swap_path(dir, id))?;
    sync_dir(dir)
}

/// Reads swap file `id`.
///
/// # Errors
/// I/O errors, or [`io::ErrorKind::InvalidData`] for a damaged or truncated file (its
/// frame says which field is wrong).
pub fn read(dir: &Path, id: u64) -> io::Result<Vec<FlowFile>> {
    let path = swap_path(dir, id);
    let bytes = fs::read(&path)?;
    let bad = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", path.display()),
        )
    };
    let payload = SWAP_FILE
        .unframe(0, &bytes)
        .map_err(|e| bad(e.to_string()))?;
    postcard::from_bytes(payload).map_err(|e| bad(e.to_string()))
}
