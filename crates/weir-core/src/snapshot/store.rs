//! Where snapshots are kept: the [`SnapshotStore`] trait and the local-disk store.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::crash;
use super::format::SnapshotError;

/// Keeps snapshot files. The coordinator writes a snapshot's parts, then publishes its
/// manifest; a snapshot exists only once [`publish`](Self::publish) has returned. Processors
/// never see the store, so an object store can back it without touching them.
///
/// Snapshots are grouped by job name and numbered by id.
pub trait SnapshotStore: Send + Sync + 'static {
    /// Writes one part of snapshot `id`. It need not be durable until `publish`.
    ///
    /// # Errors
    /// The write failed.
    fn write_part(&self, job: &str, id: u64, file: &str, bytes: &[u8])
    -> Result<(), SnapshotError>;

    /// Makes every part of snapshot `id` durable, then its manifest, atomically: after a crash
    /// the manifest is either absent or whole.
    ///
    /// # Errors
    /// A write or sync failed; the snapshot does not exist.
    fn publish(&self, job: &str, id: u64, manifest: &[u8]) -> Result<(), SnapshotError>;

    /// The ids of the job's snapshots, complete or not, newest first.
    ///
    /// # Errors
    /// The store cannot be listed.
    fn ids(&self, job: &str) -> Result<Vec<u64>, SnapshotError>;

    /// Reads snapshot `id`'s manifest; `Ok(None)` when it has none (it never completed).
    ///
    /// # Errors
    /// The manifest exists but cannot be read.
    fn read_manifest(&self, job: &str, id: u64) -> Result<Option<Vec<u8>>, SnapshotError>;

    /// Reads one part of snapshot `id`.
    ///
    /// # Errors
    /// The part cannot be read.
    fn read_part(&self, job: &str, id: u64, file: &str) -> Result<Vec<u8>, SnapshotError>;

    /// Removes snapshot `id` and its parts.
    ///
    /// # Errors
    /// The removal failed.
    fn remove(&self, job: &str, id: u64) -> Result<(), SnapshotError>;

    /// The names of the jobs with snapshots here.
    ///
    /// # Errors
    /// The store cannot be listed.
    fn jobs(&self) -> Result<Vec<String>, SnapshotError>;

    /// Where snapshot `id`'s `file` lives, for messages.
    fn location(&self, job: &str, id: u64, file: &str) -> PathBuf;
}

/// Snapshots in a local folder: `<root>/snapshots/<job>/<id>/`, one file per vertex instance
/// plus `manifest`; [`LocalDirStore::savepoints`] keeps savepoints the same way under
/// `<root>/savepoints/`.
///
/// `publish` syncs every part and the folder, writes the manifest to a temporary file, syncs
/// it, renames it into place and syncs the folder: a crash leaves either no manifest or a
/// whole one.
#[derive(Debug, Clone)]
pub struct LocalDirStore {
    root: PathBuf,
    /// `snapshots` or `savepoints`.
    folder: &'static str,
}

const MANIFEST: &str = "manifest";

impl LocalDirStore {
    /// A store under `root` (the `--state-dir`). Folders are created when first written.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalDirStore {
            root: root.into(),
            folder: "snapshots",
        }
    }

    /// The savepoint store under `root`: `<root>/savepoints/<job>/<id>/`, beside the
    /// snapshots of [`LocalDirStore::new`] and never pruned by a job.
    pub fn savepoints(root: impl Into<PathBuf>) -> Self {
        LocalDirStore {
            root: root.into(),
            folder: "savepoints",
        }
    }

    /// The store holding the snapshot folder `dir` (`<root>/snapshots/<job>/<id>` or
    /// `<root>/savepoints/<job>/<id>`), with the job's folder name and the id: what a
    /// command line's snapshot path names. `None` when `dir` is not laid out so.
    pub fn at(dir: &Path) -> Option<(LocalDirStore, String, u64)> {
        let id = dir.file_name()?.to_str()?.parse().ok()?;
        let job_dir = dir.parent()?;
        let job = job_dir.file_name()?.to_str()?.to_string();
        let folder_dir = job_dir.parent()?;
        let folder = match folder_dir.file_name()?.to_str()? {
            "snapshots" => "snapshots",
            "savepoints" => "savepoints",
            _ => return None,
        };
        let root = folder_dir.parent()?.to_path_buf();
        Some((LocalDirStore { root, folder }, job, id))
    }

    fn job_dir(&self, job: &str) -> PathBuf {
        self.root.join(self.folder).join(file_safe(job))
    }

    fn snapshot_dir(&self, job: &str, id: u64) -> PathBuf {
        self.job_dir(job).join(format!("{id:010}"))
    }
}

/// A job name as a folder name: anything but letters, digits, `-`, `_` and `.` becomes `_`.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError + '_ {
    move |source| SnapshotError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn sync_dir(dir: &Path) -> Result<(), SnapshotError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

impl SnapshotStore for LocalDirStore {
    fn write_part(
        &self,
        job: &str,
        id: u64,
        file: &str,
        bytes: &[u8],
    ) -> Result<(), SnapshotError> {
        let dir = self.snapshot_dir(job, id);
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let path = dir.join(file);
        fs::write(&path, bytes).map_err(io(&path))?;
        crash::step("part-written");
        Ok(())
    }

    fn publish(&self, job: &str, id: u64, manifest: &[u8]) -> Result<(), SnapshotError> {
        let dir = self.snapshot_dir(job, id);
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        for entry in fs::read_dir(&dir).map_err(io(&dir))? {
            let path = entry.map_err(io(&dir))?.path();
            File::open(&path)
                .and_then(|f| f.sync_data())
                .map_err(io(&path))?;
        }
        // The parts' names too, before a manifest can name them.
        sync_dir(&dir)?;
        crash::step("parts-synced");
        let tmp = dir.join("manifest.tmp");
        let mut f = File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(manifest).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        crash::step("manifest-written");
        let path = dir.join(MANIFEST);
        fs::rename(&tmp, &path).map_err(io(&path))?;
        crash::step("manifest-renamed");
        sync_dir(&dir)?;
        // The snapshot's own folder may be new: make its entry in the job's folder durable.
        sync_dir(&self.job_dir(job))?;
        crash::step("published");
        Ok(())
    }

    fn ids(&self, job: &str) -> Result<Vec<u64>, SnapshotError> {
        let dir = self.job_dir(job);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&dir)(e)),
        };
        let mut ids: Vec<u64> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io(&dir))?;
            if let Some(id) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                ids.push(id);
            }
        }
        ids.sort_unstable_by(|a, b| b.cmp(a));
        Ok(ids)
    }

    fn read_manifest(&self, job: &str, id: u64) -> Result<Option<Vec<u8>>, SnapshotError> {
        let path = self.snapshot_dir(job, id).join(MANIFEST);
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        }
    }

    fn read_part(&self, job: &str, id: u64, file: &str) -> Result<Vec<u8>, SnapshotError> {
        let path = self.snapshot_dir(job, id).join(file);
        fs::read(&path).map_err(io(&path))
    }

    fn remove(&self, job: &str, id: u64) -> Result<(), SnapshotError> {
        let dir = self.snapshot_dir(job, id);
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(&dir)(e)),
        }
    }

    fn jobs(&self) -> Result<Vec<String>, SnapshotError> {
        let dir = self.root.join(self.folder);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&dir)(e)),
        };
        let mut jobs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io(&dir))?;
            if let Some(name) = entry.file_name().to_str() {
                jobs.push(name.to_string());
            }
        }
        jobs.sort();
        Ok(jobs)
    }

    fn location(&self, job: &str, id: u64, file: &str) -> PathBuf {
        self.snapshot_dir(job, id).join(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_published_snapshots_have_a_manifest_and_ids_come_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalDirStore::new(dir.path());
        store.write_part("j/1", 1, "a-0", b"one").unwrap();
        store.publish("j/1", 1, b"m1").unwrap();
        store.write_part("j/1", 2, "a-0", b"two").unwrap();
        assert_eq!(store.ids("j/1").unwrap(), vec![2, 1]);
        assert_eq!(store.read_manifest("j/1", 1).unwrap().unwrap(), b"m1");
        assert_eq!(store.read_manifest("j/1", 2).unwrap(), None);
        assert_eq!(store.read_part("j/1", 2, "a-0").unwrap(), b"two");
        assert_eq!(store.jobs().unwrap(), vec!["j_1".to_string()]);
        store.remove("j/1", 2).unwrap();
        assert_eq!(store.ids("j/1").unwrap(), vec![1]);
        assert!(
            !dir.path()
                .join("snapshots/j_1/0000000001/manifest.tmp")
                .exists()
        );
    }
}
