//! The flow repositories, on plain files: the flow-file write-ahead log ([`journal`]), the
//! content repository ([`content`]) and swap files ([`swap`]). Provenance has its own store
//! ([`crate::provenance`]) but its events travel in the journal's frames.

pub mod content;
pub mod frame;
pub mod journal;
pub mod swap;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Makes a rename or a new file in `dir` durable.
///
/// # Errors
/// I/O errors opening or syncing the directory.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    crate::faults::step(crate::faults::Step::SyncDir, dir, || {
        File::open(dir)?.sync_all()
    })
}

/// Syncs the data of `files` (each with its path, for fault injection and errors) and waits
/// for all of them: several at once on the shared runtime's blocking pool, so that the disk
/// sees every write together and the file system commits its journal once rather than once
/// per file in turn. Costs a blocking-pool task per file when there are several.
///
/// # Errors
/// The first I/O error; every sync has ended when this returns.
pub(crate) fn sync_together(files: &[(PathBuf, Arc<File>)]) -> io::Result<()> {
    use crate::faults::{self, Step};
    let pool = match weir_runtime::runtime() {
        Ok(handle) if files.len() > 1 => handle,
        _ => {
            for (path, file) in files {
                faults::step(Step::Sync, path, || file.sync_data())?;
            }
            return Ok(());
        }
    };
    let (tx, rx) = std::sync::mpsc::channel();
    for (path, file) in files {
        let (tx, path, file) = (tx.clone(), path.clone(), Arc::clone(file));
        pool.spawn_blocking(move || {
            let _ = tx.send(faults::step(Step::Sync, &path, || file.sync_data()));
        });
    }
    drop(tx);
    let mut result = Ok(());
    // Every sync is waited for, so that none is still running when the caller goes on.
    for r in rx {
        if let Err(e) = r
            && result.is_ok()
        {
            result = Err(e);
        }
    }
    result
}
