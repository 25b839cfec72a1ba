//! The disk steps of Weir's flows: making writes durable (`sync_dir`, `sync_together`) and
//! the fault injection every disk step goes through ([`faults`]), shared by the flow
//! repositories and the processors that write files.
//!
//! ```
//! let dir = std::env::temp_dir();
//! weir_flow_disk::sync_dir(&dir).expect("a directory syncs");
//! ```

pub mod faults;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Makes a rename or a new file in `dir` durable.
///
/// # Errors
/// I/O errors opening or syncing the directory.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    faults::step(faults::Step::SyncDir, dir, || File::open(dir)?.sync_all())
}

/// Syncs the data of `files` (each with its path, for fault injection and errors) and waits
/// for all of them: several at once on the shared runtime's blocking pool, so that the disk
/// sees every write together and the file system commits its journal once rather than once
/// per file in turn. Costs a blocking-pool task per file when there are several.
///
/// # Errors
/// The first I/O error; every sync has ended when this returns.
pub fn sync_together(files: &[(PathBuf, Arc<File>)]) -> io::Result<()> {
    let pool = match weir_runtime::runtime() {
        Ok(handle) if files.len() > 1 => handle,
        _ => {
            for (path, file) in files {
                faults::step(faults::Step::Sync, path, || file.sync_data())?;
            }
            return Ok(());
        }
    };
    let (tx, rx) = std::sync::mpsc::channel();
    for (path, file) in files {
        let (tx, path, file) = (tx.clone(), path.clone(), Arc::clone(file));
        pool.spawn_blocking(move || {
            let _ = tx.send(faults::step(faults::Step::Sync, &path, || file.sync_data()));
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
