//! Saving a map to a directory and loading it back: one file per partition, each with a
//! CRC32C, so that a map survives a restart as a small embedded store.
//!
//! A file is one frame of [`weir_frame`]:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `WEIRMAP\0` |
//! | 2 | format version, little-endian ([`MAP_FORMAT_VERSION`]) |
//! | 2 | partition number, little-endian |
//! | 4 | CRC32C of the payload, little-endian |
//! | 8 | payload length, little-endian |
//! | n | payload: the postcard encoding of the partition's `Vec<(K, V)>` |
//!
//! Files are named `partition-NNN.wmap`. Each is written to a temporary file, synced and
//! renamed into place, and the directory is synced last, so a crash leaves every file whole
//! (old or new).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use weir_frame::FileFormat;

use crate::MapError;
use crate::map::{MapKey, MapValue, PartitionedMap};

/// The version written into every map file; a reader refuses any other.
pub const MAP_FORMAT_VERSION: u16 = 1;

/// Map partition files, framed by [`weir_frame`].
const MAP_FILE: FileFormat =
    FileFormat::new(b"WEIRMAP\0", MAP_FORMAT_VERSION, "map file", "partition");

/// What a save or a load did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PersistStats {
    /// Partition files written or read.
    pub partitions: usize,
    /// Entries written or read.
    pub entries: usize,
    /// Bytes written or read.
    pub bytes: u64,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> MapError + '_ {
    move |e| MapError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The file of `partition` in `dir`.
pub fn partition_file(dir: &Path, partition: u32) -> PathBuf {
    dir.join(format!("partition-{partition:03}.wmap"))
}

fn frame(partition: u32, payload: &[u8]) -> Vec<u8> {
    MAP_FILE.frame(partition as u16, payload)
}

fn unframe<'a>(path: &Path, partition: u32, bytes: &'a [u8]) -> Result<&'a [u8], MapError> {
    MAP_FILE
        .unframe(partition as u16, bytes)
        .map_err(|e| MapError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

fn sync_dir(dir: &Path) -> Result<(), MapError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

impl<K, V> PartitionedMap<K, V>
where
    K: MapKey + Serialize + DeserializeOwned,
    V: MapValue + Serialize + DeserializeOwned,
{
    /// Saves every partition to `dir` (created if needed), one file per partition, each
    /// durable before this returns. Each partition is a consistent copy taken on its owner;
    /// calls keep running meanwhile, so the files together are not one instant unless the
    /// map is quiet.
    ///
    /// # Errors
    /// [`MapError::Io`] naming the file; [`MapError::CalledFromOwner`].
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<PersistStats, MapError> {
        let dir = dir.as_ref();
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let count = self.service().table().partition_count();
        let mut stats = PersistStats::default();
        for partition in 0..count {
            let store = self.partition_snapshot(partition).wait_as("save")?;
            let entries: Vec<(&K, &V)> = store.iter().collect();
            let payload = postcard::to_stdvec(&entries).map_err(|e| MapError::Io {
                path: partition_file(dir, partition),
                message: format!("an entry does not encode: {e}"),
            })?;
            let bytes = frame(partition, &payload);
            let path = partition_file(dir, partition);
            let tmp = path.with_extension("tmp");
            let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
            f.write_all(&bytes).map_err(io_err(&tmp))?;
            f.sync_all().map_err(io_err(&tmp))?;
            drop(f);
            fs::rename(&tmp, &path).map_err(io_err(&path))?;
            stats.partitions += 1;
            stats.entries += entries.len();
            stats.bytes += bytes.len() as u64;
        }
        sync_dir(dir)?;
        Ok(stats)
    }

    /// Loads a map saved by [`save`](Self::save) from `dir`, putting every saved entry
    /// (entries already in the map stay unless a saved one replaces them). Every file is read
    /// and checked before anything is put, so a damaged or missing file leaves the map as it
    /// was.
    ///
    /// # Errors
    /// [`MapError::Io`] or [`MapError::Corrupt`] naming the file (a missing partition file, a
    /// checksum mismatch, an entry of another partition); [`MapError::CalledFromOwner`].
    pub fn load(&self, dir: impl AsRef<Path>) -> Result<PersistStats, MapError> {
        let dir = dir.as_ref();
        let partitioner = self.service().table().partitioner();
        let mut parts = Vec::new();
        let mut stats = PersistStats::default();
        for partition in 0..partitioner.count() {
            let path = partition_file(dir, partition);
            let bytes = fs::read(&path).map_err(io_err(&path))?;
            let payload = unframe(&path, partition, &bytes)?;
            let entries: Vec<(K, V)> =
                postcard::from_bytes(payload).map_err(|e| MapError::Corrupt {
                    path: path.clone(),
                    reason: format!("entries do not decode: {e}"),
                })?;
            if let Some(i) = entries
                .iter()
                .position(|(k, _)| partitioner.partition_of(k) != partition)
            {
                return Err(MapError::Corrupt {
                    path,
                    reason: format!(
                        "entry {i} belongs to partition {}, not {partition} (saved with another partitioning?)",
                        partitioner.partition_of(&entries[i].0)
                    ),
                });
            }
            stats.partitions += 1;
            stats.entries += entries.len();
            stats.bytes += bytes.len() as u64;
            parts.push((partition, entries));
        }
        let pending: Vec<_> = parts
            .into_iter()
            .map(|(p, entries)| self.put_partition_async(p, entries))
            .collect();
        for p in pending {
            p.wait_as("load")?;
        }
        Ok(stats)
    }
}
