//! The flow repositories, on plain files: the flow-file write-ahead log ([`journal`]), the
//! content repository ([`content`]) and swap files ([`swap`]). Provenance has its own store
//! ([`crate::provenance`]) but its events travel in the journal's frames.

pub mod content;
pub mod frame;
pub mod journal;
pub mod swap;

use std::fs::File;
use std::io;
use std::path::Path;

/// Makes a rename or a new file in `dir` durable.
///
/// # Errors
/// I/O errors opening or syncing the directory.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    crate::faults::step(crate::faults::Step::SyncDir, dir, || {
        File::open(dir)?.sync_all()
    })
}
