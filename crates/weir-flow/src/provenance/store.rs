//! The keyspace of the provenance store: its partitions, how a write becomes a chunk with
//! its span and index entries, how a chunk is removed, and the store's format.

use super::chunk::Part;
use super::flowfile_index::FlowFileIndex;
use super::*;
use fjall::{Keyspace, PartitionHandle, PersistMode};
use rustc_hash::FxHashSet;
use std::path::Path;

/// The keyspace and its partitions: cheap to clone (shared handles).
#[derive(Clone)]
pub(super) struct Store {
    pub(super) keyspace: Keyspace,
    /// Key: [`chunk_key`]; value: the chunk's events in id order, each a [`StoredEventRef`]
    /// (read as a `Vec<StoredEvent>`).
    pub(super) chunks: PartitionHandle,
    /// Which chunks name a flow file (see `provenance/flowfile_index.rs`).
    pub(super) index: FlowFileIndex,
    /// Key: a chunk's key; value: its [`Span`].
    pub(super) spans: PartitionHandle,
}

/// The store's format: the events of a write are one chunk, which holds each text and map
/// once (see `provenance/chunk.rs`), summarized by a span, and the index by flow file is a
/// list per chunk folded into runs (see `provenance/flowfile_index.rs`). The first released
/// format; its number counts the unreleased ones before it.
pub(super) const FORMAT: u8 = 6;

/// Encodes `events` as parts, one per id class (journal ids, and the top-bit ids of events
/// recorded without a journal frame), so that a chunk's id range stays narrow. Sorts them by
/// id (they mostly come in id order) and drops repeated ids.
///
/// # Errors
/// [`ProvenanceError::Chunk`] for a part too large to store.
pub(super) fn encode_parts(
    events: &mut Vec<&ProvenanceEvent>,
) -> Result<Vec<Part>, ProvenanceError> {
    events.sort_by_key(|e| e.id);
    events.dedup_by_key(|e| e.id);
    let split = events.partition_point(|e| e.id >> 63 == 0);
    [&events[..split], &events[split..]]
        .into_iter()
        .filter(|class| !class.is_empty())
        .map(chunk::encode)
        .collect()
}

impl Store {
    /// Inserts `parts` in one store batch (see [`Store::add`]), first folding the index's
    /// unfolded lists into run `next_run` (and counting it) once `unfolded`, the entries in
    /// them, which it counts, has reached [`flowfile_index::FOLD_AT`].
    pub(super) fn write(
        &self,
        parts: &[Part],
        unfolded: &mut usize,
        next_run: &mut u64,
    ) -> Result<(), ProvenanceError> {
        let mut batch = self.keyspace.batch();
        if *unfolded >= flowfile_index::FOLD_AT {
            // In the same batch: a list is folded exactly when it is removed.
            self.index.fold(&mut batch, *next_run)?;
            *next_run += 1;
            *unfolded = 0;
        }
        *unfolded += self.add(&mut batch, parts)?;
        batch.commit()?;
        // The journal holds these events until the next checkpoint; handing them to the OS
        // is enough until then.
        self.keyspace.persist(PersistMode::Buffer)?;
        Ok(())
    }

    /// Adds `parts` to `batch`: per id class a chunk, its parts one after another, with its
    /// span and its list of the flow files it names. Returns the number of index entries
    /// added (flow files named, per chunk).
    pub(super) fn add(
        &self,
        batch: &mut fjall::Batch,
        parts: &[Part],
    ) -> Result<usize, ProvenanceError> {
        let mut value = Vec::new();
        let mut entries = 0;
        for direct in [false, true] {
            let class: Vec<&Part> = parts
                .iter()
                .filter(|p| (p.first_id >> 63 == 1) == direct)
                .collect();
            let (Some(first), Some(last)) = (
                class.iter().map(|p| p.first_id).min(),
                class.iter().map(|p| p.last_id).max(),
            ) else {
                continue;
            };
            let key = chunk_key(first, last);
            let bytes = match class.as_slice() {
                [one] => one.bytes.as_slice(),
                _ => {
                    value.clear();
                    for p in &class {
                        value.extend_from_slice(&p.bytes);
                    }
                    value.as_slice()
                }
            };
            batch.insert(&self.chunks, key, bytes);
            // A flow file named by several parts gets one index entry.
            let mut named: FxHashSet<&[u8]> = FxHashSet::default();
            let uuids = class
                .iter()
                .flat_map(|p| p.uuids())
                .filter(|uuid| class.len() == 1 || named.insert(uuid));
            entries += self.index.add(batch, &key, uuids);
            let mut span = Span {
                min_time_ms: i64::MAX,
                max_time_ms: i64::MIN,
                components: Vec::new(),
                events: 0,
            };
            for p in &class {
                span.min_time_ms = span.min_time_ms.min(p.min_time_ms);
                span.max_time_ms = span.max_time_ms.max(p.max_time_ms);
                span.events += p.events;
                for c in &p.components {
                    if !span.components.contains(c) {
                        span.components.push(c.clone());
                    }
                }
            }
            batch.insert(&self.spans, key, postcard::to_allocvec(&span)?);
        }
        Ok(entries)
    }

    /// [`Store::add`] for events not yet encoded.
    pub(super) fn add_events(
        &self,
        batch: &mut fjall::Batch,
        events: &[&ProvenanceEvent],
    ) -> Result<(), ProvenanceError> {
        let parts = encode_parts(&mut events.to_vec())?;
        self.add(batch, &parts).map(drop)
    }

    /// Removes the chunk `key`, with its span and its unfolded list (a run's entries naming
    /// it are skipped until the run goes, see [`FlowFileIndex::remove_runs_before`]).
    pub(super) fn remove(&self, batch: &mut fjall::Batch, key: &ChunkKey) {
        batch.remove(&self.chunks, *key);
        batch.remove(&self.spans, *key);
        self.index.remove(batch, key);
    }

    /// Checks the store's format: a new store is given the current one, a store of another
    /// is refused.
    pub(super) fn check_format(&self, meta: &PartitionHandle) -> Result<(), ProvenanceError> {
        match meta.get("format")?.as_deref() {
            Some([FORMAT]) => Ok(()),
            None => {
                meta.insert("format", [FORMAT])?;
                self.keyspace.persist(PersistMode::SyncAll)?;
                Ok(())
            }
            Some(other) => Err(ProvenanceError::Format {
                found: other.first().copied().unwrap_or(0),
            }),
        }
    }

    /// The decoded chunk `key`, if stored, as queries show it: each event's attributes with
    /// `fileSize`, the event's size (the store keeps it once, as the event's size, not in
    /// every map: see [`crate::flowfile::FILE_SIZE`]).
    pub(super) fn chunk(
        &self,
        key: &[u8],
    ) -> Result<Option<Vec<ProvenanceEvent>>, ProvenanceError> {
        let Some(mut events) = self
            .chunks
            .get(key)?
            .map(|v| chunk::decode(&v))
            .transpose()?
        else {
            return Ok(None);
        };
        for e in &mut events {
            e.attributes.insert(
                crate::flowfile::FILE_SIZE,
                crate::flowfile::int_value(e.size),
            );
        }
        Ok(Some(events))
    }
}

/// Removes the partitions whose creation a crash cut short, so that the store opens.
///
/// The store (fjall 2) creates a partition's tree by writing its `manifest` file and then its
/// `levels` file; it takes the first as the sign of a whole partition, and a process killed
/// between the two leaves a store that no later open can read (`levels`: no such file). Such a
/// partition was never handed out, so nothing was written to it: removing its folder, as the
/// store itself does with a partition that has no `manifest` yet, loses nothing, and the open
/// creates it again. `levels` is otherwise only ever replaced by a rename, so a partition that
/// lacks it is always one of these. Cost: one directory listing and two `stat`s per
/// partition.
pub(super) fn remove_half_created_partitions(dir: &Path) -> Result<(), ProvenanceError> {
    let partitions = dir.join("partitions");
    let entries = match std::fs::read_dir(&partitions) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(ProvenanceError::Io {
                path: partitions,
                source,
            });
        }
    };
    for entry in entries {
        let path = entry
            .map_err(|source| ProvenanceError::Io {
                path: partitions.clone(),
                source,
            })?
            .path();
        if path.is_dir() && path.join("manifest").exists() && !path.join("levels").exists() {
            tracing::info!(
                "provenance: removing {}, a partition whose creation was interrupted",
                path.display()
            );
            std::fs::remove_dir_all(&path).map_err(|source| ProvenanceError::Io {
                path: path.clone(),
                source,
            })?;
        }
    }
    Ok(())
}
