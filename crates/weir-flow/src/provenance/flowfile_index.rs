//! The index by flow file (format 6): which chunks name a flow file, written as one list per
//! chunk and folded, every [`FOLD_AT`] entries, into runs sorted by the flow file's hash.
//!
//! ```text
//! chunk_flowfiles  chunk key              -> hash*            (u64, little-endian) a chunk
//!                                                             not yet folded: its flow files
//! flowfile_runs    bucket (u16), run (u64) -> (hash, chunk key)*, by hash: one run's entries
//!                                                             whose hash is in the bucket
//! flowfile_run_ends run (u64)             -> the greatest first id of the run's chunks
//! ```
//!
//! A flow file's hash is the XXH3 64-bit hash of its uuid; its bucket, the hash's top
//! [`BUCKET_BITS`] bits. A write of a hundred flow files so adds one store entry, in chunk
//! order, instead of a hundred at random places in the store's memtable (which was about a
//! quarter of the provenance writer's work); a fold of 65,536 entries writes
//! [`BUCKETS`] values of about 1.5 KB each.
//!
//! A look-up reads, for the flow file's bucket, one value per run (binary search in it) and
//! the lists of the chunks not yet folded (a few hundred, read once per query or lineage, see
//! [`Unfolded`]); its chunks are then decoded and their events filtered by the uuid itself,
//! so two uuids with one hash only cost a chunk read. An entry whose chunk retention removed
//! is skipped; retention removes a run once every chunk it names is gone.
//!
//! Only the provenance writer thread folds, so a run's number is the last one plus one.

use fjall::{Batch, PartitionHandle};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::{ChunkKey, ProvenanceError, first_of};

/// Bits of a hash that name its bucket.
const BUCKET_BITS: u32 = 10;
/// Buckets per run.
pub(super) const BUCKETS: u16 = 1 << BUCKET_BITS;
/// Entries (a flow file named by a chunk) in unfolded lists at which the writer folds them.
pub(super) const FOLD_AT: usize = 65_536;
/// Bytes of a run's entry: the hash and the chunk key.
const ENTRY: usize = 8 + 16;

/// A flow file's hash: XXH3 (a specified, stable function: stored hashes stay valid).
pub(super) fn hash_of(uuid: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(uuid)
}

fn bucket(hash: u64) -> u16 {
    (hash >> (64 - BUCKET_BITS)) as u16
}

fn run_key(bucket: u16, run: u64) -> [u8; 10] {
    let mut k = [0; 10];
    k[..2].copy_from_slice(&bucket.to_be_bytes());
    k[2..].copy_from_slice(&run.to_be_bytes());
    k
}

/// The hashes of an unfolded list, or of a damaged one as far as it is whole (a look-up
/// then misses only the flow files of the damaged end; a fold warns).
fn hashes(list: &[u8]) -> impl Iterator<Item = u64> + '_ {
    list.chunks_exact(8)
        .map(|h| u64::from_le_bytes(h.try_into().expect("8 bytes")))
}

/// A big-endian number stored as `what` (a run's number or end).
fn number_of(bytes: &[u8], what: &str) -> Result<u64, ProvenanceError> {
    bytes
        .try_into()
        .map(u64::from_be_bytes)
        .map_err(|_| ProvenanceError::Chunk(format!("{what} of {} bytes", bytes.len())))
}

/// A chunk key as stored in a key or a run entry.
fn chunk_key_of(bytes: &[u8]) -> Result<ChunkKey, ProvenanceError> {
    bytes
        .try_into()
        .map_err(|_| ProvenanceError::Chunk(format!("a chunk key of {} bytes", bytes.len())))
}

/// The partitions of the index.
#[derive(Clone)]
pub(super) struct FlowFileIndex {
    pub(super) unfolded: PartitionHandle,
    pub(super) runs: PartitionHandle,
    pub(super) run_ends: PartitionHandle,
}

/// The unfolded lists, read once for the look-ups of one query or lineage.
#[derive(Default)]
pub(super) struct Unfolded(Option<FxHashMap<u64, SmallVec<[ChunkKey; 2]>>>);

impl FlowFileIndex {
    /// Adds the list of chunk `key` naming `uuids` (each once) to `batch`; returns how many
    /// entries it holds.
    pub(super) fn add<'u>(
        &self,
        batch: &mut Batch,
        key: &ChunkKey,
        uuids: impl Iterator<Item = &'u [u8]>,
    ) -> usize {
        let mut list: Vec<u8> = Vec::new();
        for uuid in uuids {
            list.extend_from_slice(&hash_of(uuid).to_le_bytes());
        }
        let n = list.len() / 8;
        batch.insert(&self.unfolded, *key, list);
        n
    }

    /// Removes chunk `key`'s unfolded list, if it has one.
    pub(super) fn remove(&self, batch: &mut Batch, key: &ChunkKey) {
        batch.remove(&self.unfolded, *key);
    }

    /// Entries in unfolded lists now.
    pub(super) fn unfolded_len(&self) -> Result<usize, ProvenanceError> {
        let mut n = 0;
        for kv in self.unfolded.iter() {
            n += kv?.1.len() / 8;
        }
        Ok(n)
    }

    /// The number the next run takes.
    pub(super) fn next_run(&self) -> Result<u64, ProvenanceError> {
        Ok(match self.run_ends.last_key_value()? {
            Some((k, _)) => number_of(&k, "a run number")? + 1,
            None => 0,
        })
    }

    /// Folds every unfolded list into run `run` in `batch`, removing the lists; returns how
    /// many entries it folded (none: nothing is added).
    ///
    /// Cost: a sort of the entries and [`BUCKETS`] values written, about 1.5 KB each at
    /// [`FOLD_AT`] entries.
    pub(super) fn fold(&self, batch: &mut Batch, run: u64) -> Result<usize, ProvenanceError> {
        let mut entries: Vec<(u64, ChunkKey)> = Vec::new();
        let mut max_first = None;
        for kv in self.unfolded.iter() {
            let (k, v) = kv?;
            batch.remove(&self.unfolded, k.clone());
            // A damaged list is folded as far as it is whole (or not at all), with a
            // warning: failing the fold would fail every write after it.
            let Ok(key) = chunk_key_of(&k) else {
                tracing::warn!(
                    "provenance index: a flow-file list under a key of {} bytes, dropped",
                    k.len()
                );
                continue;
            };
            if v.len() % 8 != 0 {
                tracing::warn!(
                    "provenance index: the flow-file list of chunk {}..{} has {} bytes, its last {} dropped",
                    first_of(&key),
                    u64::from_be_bytes(key[8..].try_into().expect("8 bytes")),
                    v.len(),
                    v.len() % 8
                );
            }
            entries.extend(hashes(&v).map(|h| (h, key)));
            max_first = max_first.max(Some(first_of(&key)));
        }
        let Some(max_first) = max_first else {
            return Ok(0);
        };
        entries.sort_unstable();
        entries.dedup();
        let mut value = Vec::new();
        for group in entries.chunk_by(|a, b| bucket(a.0) == bucket(b.0)) {
            value.clear();
            for (h, key) in group {
                value.extend_from_slice(&h.to_le_bytes());
                value.extend_from_slice(key);
            }
            batch.insert(
                &self.runs,
                run_key(bucket(group[0].0), run),
                value.as_slice(),
            );
        }
        batch.insert(&self.run_ends, run.to_be_bytes(), max_first.to_be_bytes());
        Ok(entries.len())
    }

    /// Removes in `batch` every run all of whose chunks have a first id below `kept` (the
    /// first id of the oldest chunk retention keeps).
    pub(super) fn remove_runs_before(
        &self,
        batch: &mut Batch,
        kept: u64,
    ) -> Result<(), ProvenanceError> {
        for kv in self.run_ends.iter() {
            let (k, v) = kv?;
            if number_of(&v, "a run end")? >= kept {
                continue;
            }
            let run = number_of(&k, "a run number")?;
            for b in 0..BUCKETS {
                batch.remove(&self.runs, run_key(b, run));
            }
            batch.remove(&self.run_ends, k);
        }
        Ok(())
    }

    /// Pushes onto `out` the keys of the chunks that may name the flow file `uuid` (its
    /// hash's), in no order and maybe twice.
    pub(super) fn chunks_of(
        &self,
        uuid: &str,
        unfolded: &mut Unfolded,
        out: &mut Vec<ChunkKey>,
    ) -> Result<(), ProvenanceError> {
        let h = hash_of(uuid.as_bytes());
        for kv in self.runs.prefix(bucket(h).to_be_bytes()) {
            let (_, v) = kv?;
            if v.len() % ENTRY != 0 {
                return Err(ProvenanceError::Chunk(format!(
                    "a run's bucket of {} bytes",
                    v.len()
                )));
            }
            let (entries, _) = v.as_chunks::<ENTRY>();
            let hash = |e: &[u8; ENTRY]| u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
            // The first entry of the hash, then every one after it with the same hash.
            let first = entries.partition_point(|e| hash(e) < h);
            for e in entries[first..].iter().take_while(|e| hash(e) == h) {
                out.push(e[8..].try_into().expect("16 bytes"));
            }
        }
        let lists = match &mut unfolded.0 {
            Some(lists) => lists,
            empty => {
                let mut lists: FxHashMap<u64, SmallVec<[ChunkKey; 2]>> = FxHashMap::default();
                for kv in self.unfolded.iter() {
                    let (k, v) = kv?;
                    let key = chunk_key_of(&k)?;
                    for h in hashes(&v) {
                        lists.entry(h).or_default().push(key);
                    }
                }
                empty.insert(lists)
            }
        };
        out.extend(lists.get(&h).into_iter().flatten().copied());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_and_its_bucket_are_stable() {
        // Stored hashes must mean the same in every version: XXH3's published value.
        assert_eq!(hash_of(b""), 0x2d06_8005_38d3_94c2);
        assert!(bucket(u64::MAX) == BUCKETS - 1 && bucket(0) == 0);
    }
}
