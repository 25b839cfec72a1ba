//! Provenance: what happened to every flow file, as events in an append-only store with an
//! index by flow file and a summary per written chunk for time and component.
//!
//! Events are written in the flow-file journal's frame of the session that made them (so a
//! committed session's events are durable with it) and then inserted into a `fjall` keyspace
//! a *chunk* at a time: the events of one write (the batches handed over since the last one),
//! in id order, are one value of the `chunks` partition, keyed by their first and last id.
//! Beside it go one *span* (its earliest and latest time, the components in it and how many
//! events it holds, for queries by time and component) and one list of the flow files named
//! in it (as the flow file, a parent or a child; lineage needs every event of a uuid), which
//! the writer folds into the index by flow file (see `provenance/flowfile_index.rs`). A write
//! of a stateless transaction's hundred flow files, six events each, is so three store
//! entries instead of seven hundred: the store's memtable inserts were the costliest part of
//! writing events. A query reads the chunks its index entries or spans name and filters
//! their events.
//!
//! A chunk holds each text and each attribute map once (see `provenance/chunk.rs`): a flow file's six
//! events through a group name its uuid once, and its map is stored in full once and then as
//! the attribute or two each processor changed. A chunk is decoded as a whole, so these
//! references never leave it. Retention removes events oldest chunk first; a chunk it only
//! partly removes is written again with the events left. The committing thread encodes its
//! events (they are in its cache, and it frees them where they were made: about a third of
//! the CPU time of encoding them on another thread); the store's own writer thread writes
//! them, off the commit path. Queries,
//! lineage and [`sync`] wait for the events handed over before them, so a reader always
//! sees what was committed before it asked.
//!
//! Event ids run on from frame to frame of the journal (a frame's first event id plus the
//! event's index in it), so a frame may hold any number. The events of a frame replayed at recovery
//! are written again in a chunk of their own; readers drop repeated ids. Retention by age and
//! size is applied at each checkpoint, oldest first.
//!
//! The store records its format; one of another format is refused.
//!
//! [`sync`]: ProvenanceRepository::sync

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fjall::{Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

pub use weir_flow_api::provenance::{EventType, Lineage, ProvenanceEvent, Query};

mod chunk;
mod flowfile_index;

use chunk::Part;
use flowfile_index::{FlowFileIndex, Unfolded};

/// A provenance store error.
#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    /// The `fjall` keyspace failed.
    #[error("provenance store: {0}")]
    Store(#[from] fjall::Error),
    /// An event could not be encoded or decoded.
    #[error("provenance event encoding: {0}")]
    Encoding(#[from] postcard::Error),
    /// The writer thread could not start, or is gone.
    #[error("provenance writer: {0}")]
    Writer(String),
    /// The store's folder could not be read or tidied before opening it.
    #[error("provenance store {path}: {source}")]
    Io {
        /// The file or folder at fault.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A stored chunk is malformed: an index in it points nowhere.
    #[error("provenance chunk: {0}")]
    Chunk(String),
    /// The store on disk has a format this version does not read.
    #[error(
        "provenance store has format {found}, this version reads format {FORMAT}: move the directory away to start a new store"
    )]
    Format {
        /// The format recorded in the store.
        found: u8,
    },
}

/// The provenance store.
pub struct ProvenanceRepository {
    store: Store,
    /// Batches of events for the writer thread, several per hand-over; `None` once dropped.
    writer: Option<crossbeam_channel::Sender<HandOver>>,
    progress: Arc<WriterProgress>,
    thread: Option<JoinHandle<()>>,
    max_age: Duration,
    max_size: u64,
}

/// The keyspace and its partitions: cheap to clone (shared handles).
#[derive(Clone)]
struct Store {
    keyspace: Keyspace,
    /// Key: [`chunk_key`]; value: the chunk's events in id order, each a [`StoredEventRef`]
    /// (read as a `Vec<StoredEvent>`).
    chunks: PartitionHandle,
    /// Which chunks name a flow file (see `provenance/flowfile_index.rs`).
    index: FlowFileIndex,
    /// Key: a chunk's key; value: its [`Span`].
    spans: PartitionHandle,
}

/// What the events of one chunk hold, for queries by time and component.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Span {
    min_time_ms: i64,
    max_time_ms: i64,
    components: Vec<String>,
    /// How many events the chunk holds.
    events: u64,
}

/// The store's format: the events of a write are one chunk, which holds each text and map
/// once (see `provenance/chunk.rs`), summarized by a span, and the index by flow file is a
/// list per chunk folded into runs (see `provenance/flowfile_index.rs`). The first released
/// format; its number counts the unreleased ones before it.
const FORMAT: u8 = 6;

/// How far the writer thread has got: hand-overs made, and hand-overs written.
#[derive(Default)]
struct WriterProgress {
    counts: Mutex<(u64, u64)>,
    written: Condvar,
}

/// Hand-overs waiting for the writer at most before `insert` waits: bounds the memory of
/// events not yet indexed when the store falls behind.
const WRITER_QUEUE: usize = 256;

/// Committed events on their way to the writer thread, encoded by the thread that made them.
type HandOver = Vec<Part>;

impl std::fmt::Debug for ProvenanceRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvenanceRepository")
            .finish_non_exhaustive()
    }
}

/// What the look-ups of one query or lineage have read: chunks decoded, and the index's
/// unfolded lists.
#[derive(Default)]
struct Lookups {
    chunks: FxHashMap<ChunkKey, Vec<ProvenanceEvent>>,
    unfolded: Unfolded,
}

/// A chunk's key: its first and last event id, big-endian, so chunks sort by first id.
type ChunkKey = [u8; 16];

fn chunk_key(first: u64, last: u64) -> ChunkKey {
    let mut k = [0; 16];
    k[..8].copy_from_slice(&first.to_be_bytes());
    k[8..].copy_from_slice(&last.to_be_bytes());
    k
}

/// The first id of a chunk key.
fn first_of(key: &[u8]) -> u64 {
    u64::from_be_bytes(key[..8].try_into().expect("8 bytes"))
}

/// The uuids an event names: its flow file, its parents and its children.
fn uuids_of(e: &ProvenanceEvent) -> impl Iterator<Item = &str> {
    std::iter::once(e.flowfile.as_str())
        .chain(e.parents.iter().map(String::as_str))
        .chain(e.children.iter().map(String::as_str))
}

/// Encodes `events` as parts, one per id class (journal ids, and the top-bit ids of events
/// recorded without a journal frame), so that a chunk's id range stays narrow. Sorts them by
/// id (they mostly come in id order) and drops repeated ids.
///
/// # Errors
/// [`ProvenanceError::Chunk`] for a part too large to store.
fn encode_parts(events: &mut Vec<&ProvenanceEvent>) -> Result<Vec<Part>, ProvenanceError> {
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
    fn write(
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
    fn add(&self, batch: &mut fjall::Batch, parts: &[Part]) -> Result<usize, ProvenanceError> {
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
    fn add_events(
        &self,
        batch: &mut fjall::Batch,
        events: &[&ProvenanceEvent],
    ) -> Result<(), ProvenanceError> {
        let parts = encode_parts(&mut events.to_vec())?;
        self.add(batch, &parts).map(drop)
    }

    /// Removes the chunk `key`, with its span and its unfolded list (a run's entries naming
    /// it are skipped until the run goes, see [`FlowFileIndex::remove_runs_before`]).
    fn remove(&self, batch: &mut fjall::Batch, key: &ChunkKey) {
        batch.remove(&self.chunks, *key);
        batch.remove(&self.spans, *key);
        self.index.remove(batch, key);
    }

    /// Checks the store's format: a new store is given the current one, a store of another
    /// is refused.
    fn check_format(&self, meta: &PartitionHandle) -> Result<(), ProvenanceError> {
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
    fn chunk(&self, key: &[u8]) -> Result<Option<Vec<ProvenanceEvent>>, ProvenanceError> {
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
fn remove_half_created_partitions(dir: &Path) -> Result<(), ProvenanceError> {
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

impl ProvenanceRepository {
    /// Opens (or creates) the store in `dir`, with retention by age and size.
    ///
    /// # Errors
    /// [`ProvenanceError::Store`], for instance when another process has it open.
    pub fn open(dir: &Path, max_age: Duration, max_size: u64) -> Result<Self, ProvenanceError> {
        remove_half_created_partitions(dir)?;
        let keyspace = Config::new(dir).open()?;
        let opts = PartitionCreateOptions::default;
        let meta = keyspace.open_partition("meta", opts())?;
        let store = Store {
            chunks: keyspace.open_partition("chunks", opts())?,
            index: FlowFileIndex {
                unfolded: keyspace.open_partition("chunk_flowfiles", opts())?,
                runs: keyspace.open_partition("flowfile_runs", opts())?,
                run_ends: keyspace.open_partition("flowfile_run_ends", opts())?,
            },
            spans: keyspace.open_partition("chunk_spans", opts())?,
            keyspace,
        };
        store.check_format(&meta)?;
        let (mut unfolded, mut next_run) = (store.index.unfolded_len()?, store.index.next_run()?);
        let (writer, hand_overs) = crossbeam_channel::bounded::<HandOver>(WRITER_QUEUE);
        let progress = Arc::new(WriterProgress::default());
        let thread = {
            let (store, progress) = (store.clone(), Arc::clone(&progress));
            std::thread::Builder::new()
                .name("weir-provenance".into())
                .spawn(move || {
                    let mut parts = Vec::new();
                    for first in &hand_overs {
                        // Whatever else is already waiting goes in the same store batch:
                        // one journal write and one span for all of it.
                        parts.extend(first);
                        let mut received = 1;
                        while received < WRITER_QUEUE {
                            match hand_overs.try_recv() {
                                Ok(more) => {
                                    parts.extend(more);
                                    received += 1;
                                }
                                Err(_) => break,
                            }
                        }
                        if let Err(e) = store.write(&parts, &mut unfolded, &mut next_run) {
                            tracing::warn!(
                                "provenance: {} events not indexed (the journal keeps them until the next checkpoint): {e}",
                                parts.iter().map(|p: &Part| p.events).sum::<u64>()
                            );
                        }
                        let mut counts = progress.counts.lock().unwrap_or_else(|e| e.into_inner());
                        counts.1 += received as u64;
                        progress.written.notify_all();
                        drop(counts);
                        parts.clear();
                    }
                })
                .map_err(|e| ProvenanceError::Writer(e.to_string()))?
        };
        Ok(ProvenanceRepository {
            store,
            writer: Some(writer),
            progress,
            thread: Some(thread),
            max_age,
            max_size,
        })
    }

    /// Encodes committed events here, on the thread that made them (they are still in its
    /// cache, and it frees them where they were allocated), and hands them to the writer
    /// thread, which stores them (idempotent: an event id is read once however often it is
    /// written). Returns once they are handed over, unless the writer is far behind; a
    /// failure to store them is logged by the writer (the journal still holds the events).
    ///
    /// Cost: about 1.6 K instructions per event of a stateless transaction (see
    /// `provenance/chunk.rs`).
    ///
    /// # Errors
    /// [`ProvenanceError::Writer`] if the writer thread is gone; [`ProvenanceError::Chunk`]
    /// for events too large to store as one write.
    pub fn insert(&self, events: Vec<ProvenanceEvent>) -> Result<(), ProvenanceError> {
        if events.is_empty() {
            return Ok(());
        }
        self.insert_batches(vec![events])
    }

    /// [`insert`](Self::insert) for several batches at once (a stateless transaction's
    /// sessions' events): one hand-over of one part per id class, so that a flow file's
    /// events across the batches are written as changes to one another, and no copy of the
    /// events into one vector.
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub fn insert_batches(
        &self,
        batches: Vec<Vec<ProvenanceEvent>>,
    ) -> Result<(), ProvenanceError> {
        if batches.iter().all(Vec::is_empty) {
            return Ok(());
        }
        let Some(writer) = &self.writer else {
            return Err(ProvenanceError::Writer("the store is closed".into()));
        };
        let mut events: Vec<&ProvenanceEvent> = batches.iter().flatten().collect();
        let hand_over = encode_parts(&mut events)?;
        // Freed here, where they were made, before the hand-over.
        drop(batches);
        self.progress
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0 += 1;
        writer
            .send(hand_over)
            .map_err(|_| ProvenanceError::Writer("the writer thread ended".into()))
    }

    /// Waits until every batch handed to [`insert`](Self::insert) before this call is written.
    fn flush(&self) {
        let counts = self
            .progress
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let target = counts.0;
        let _written = self
            .progress
            .written
            .wait_while(counts, |c| c.1 < target)
            .unwrap_or_else(|e| e.into_inner());
    }
    /// Makes every inserted event durable (before the journal that holds them is dropped).
    ///
    /// # Errors
    /// [`ProvenanceError::Store`].
    pub fn sync(&self) -> Result<(), ProvenanceError> {
        self.flush();
        self.store.keyspace.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    /// The keys of the chunks that may name flow file `uuid`, in order, each once.
    fn chunks_of(
        &self,
        uuid: &str,
        unfolded: &mut Unfolded,
    ) -> Result<Vec<ChunkKey>, ProvenanceError> {
        let mut keys = Vec::new();
        self.store.index.chunks_of(uuid, unfolded, &mut keys)?;
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    /// The events naming flow file `uuid` (as the flow file, a parent or a child), by id,
    /// each once; what it reads is kept in `cache` for the next call.
    fn events_of(
        &self,
        uuid: &str,
        cache: &mut Lookups,
    ) -> Result<BTreeMap<u64, ProvenanceEvent>, ProvenanceError> {
        let mut out = BTreeMap::new();
        for key in self.chunks_of(uuid, &mut cache.unfolded)? {
            let events = match cache.chunks.entry(key) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let Some(events) = self.store.chunk(&key)? else {
                        continue;
                    };
                    v.insert(events)
                }
            };
            for e in events.iter() {
                if uuids_of(e).any(|u| u == uuid) {
                    out.entry(e.id).or_insert_with(|| e.clone());
                }
            }
        }
        Ok(out)
    }

    /// Events matching `query`, oldest first, at most `limit`.
    ///
    /// A query by flow file reads the chunks its index entries name; one by component or
    /// time reads the chunks whose spans may match; one with neither reads every chunk until
    /// `limit`.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn query(
        &self,
        query: &Query,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceError> {
        self.flush();
        let keep = |e: &ProvenanceEvent| {
            query.component.as_ref().is_none_or(|c| e.component == c)
                && query.since_ms.is_none_or(|s| e.time_ms >= s)
                && query.until_ms.is_none_or(|u| e.time_ms <= u)
                && query.event_type.is_none_or(|t| e.event_type == t)
        };
        if let Some(ff) = &query.flowfile {
            return Ok(self
                .events_of(ff, &mut Lookups::default())?
                .into_values()
                .filter(keep)
                .take(limit)
                .collect());
        }
        let mut out = Vec::new();
        // Chunks come by first id but may overlap (a replayed frame written again, batches
        // handed over out of id order): an event waits here until no later chunk can hold
        // an earlier one.
        let mut pending: BTreeMap<u64, ProvenanceEvent> = BTreeMap::new();
        for kv in self.store.spans.iter() {
            let (k, v) = kv?;
            let span: Span = postcard::from_bytes(&v)?;
            let matches = query.since_ms.is_none_or(|s| span.max_time_ms >= s)
                && query.until_ms.is_none_or(|u| span.min_time_ms <= u)
                && query
                    .component
                    .as_ref()
                    .is_none_or(|c| span.components.contains(c));
            if !matches {
                continue;
            }
            let first = first_of(&k);
            while let Some(e) = pending.first_entry()
                && *e.key() < first
            {
                out.push(e.remove());
                if out.len() >= limit {
                    return Ok(out);
                }
            }
            for e in self.store.chunk(&k)?.unwrap_or_default() {
                if keep(&e) {
                    pending.entry(e.id).or_insert(e);
                }
            }
        }
        out.extend(pending.into_values());
        out.truncate(limit);
        Ok(out)
    }

    /// The lineage of `flowfile`: related flow files through parent and child links, and all
    /// their events.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn lineage(&self, flowfile: &str) -> Result<Lineage, ProvenanceError> {
        const MAX_FLOWFILES: usize = 100_000;
        self.flush();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut events: BTreeMap<u64, ProvenanceEvent> = BTreeMap::new();
        let mut todo = VecDeque::from([flowfile.to_string()]);
        let (mut parents, mut children) = (BTreeSet::new(), BTreeSet::new());
        // Related flow files mostly share chunks (a fork's children are written with it).
        let mut cache = Lookups::default();
        while let Some(ff) = todo.pop_front() {
            if !seen.insert(ff.clone()) || seen.len() > MAX_FLOWFILES {
                continue;
            }
            for e in self.events_of(&ff, &mut cache)?.into_values() {
                if e.flowfile == ff || e.parents.contains(&ff) {
                    // ff's own events, and events where ff is a parent: its children.
                    for c in &e.children {
                        if ff == flowfile {
                            children.insert(c.clone());
                        }
                        todo.push_back(c.clone());
                    }
                    if e.event_type == EventType::JOIN && e.flowfile != ff {
                        todo.push_back(e.flowfile.to_string());
                        if ff == flowfile {
                            children.insert(e.flowfile.to_string());
                        }
                    }
                }
                if e.children.contains(&ff) || (e.event_type == EventType::JOIN && e.flowfile == ff)
                {
                    // ff is a child here: walk up to its parents (and from them, its siblings).
                    let parent_list: Vec<String> = if e.children.contains(&ff) && e.flowfile != ff {
                        vec![e.flowfile.to_string()]
                    } else {
                        e.parents.clone()
                    };
                    for p in parent_list.into_iter().chain(e.parents.iter().cloned()) {
                        if p != ff {
                            if ff == flowfile {
                                parents.insert(p.clone());
                            }
                            todo.push_back(p);
                        }
                    }
                }
                events.insert(e.id, e);
            }
        }
        let mut events: Vec<ProvenanceEvent> = events.into_values().collect();
        events.sort_by_key(|e| (e.time_ms, e.id));
        Ok(Lineage {
            flowfile: flowfile.to_string(),
            parents: parents.into_iter().collect(),
            children: children.into_iter().collect(),
            flowfiles: seen.into_iter().collect(),
            events,
        })
    }

    /// Removes events older than the maximum age and, oldest first, events beyond the maximum
    /// size, chunk by chunk; a chunk only partly removed is written again with the events
    /// left. Returns how many were removed.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<u64, ProvenanceError> {
        self.flush();
        let cutoff = now_ms - self.max_age.as_millis() as i64;
        let mut size: u64 = self.store.keyspace.disk_space();
        let mut removed = 0;
        let mut batch = self.store.keyspace.batch();
        // The first id of the last chunk read: every chunk with a smaller one is removed (a
        // run naming this one, or one of the same first id, is left for a later call).
        // Chunks written while this runs come after every chunk it reads.
        let mut kept = 0;
        for kv in self.store.chunks.iter() {
            let (k, v) = kv?;
            let key: ChunkKey = k.as_ref().try_into().expect("16 bytes");
            kept = first_of(&key);
            let events = chunk::decode(&v)?;
            // Each event's share of the chunk, and of the store's per-entry overhead.
            let share = v.len() as u64 / events.len().max(1) as u64 + 64;
            let gone = events
                .iter()
                .take_while(|e| {
                    let expired = e.time_ms < cutoff || size > self.max_size;
                    if expired {
                        size = size.saturating_sub(share);
                    }
                    expired
                })
                .count();
            if gone == 0 {
                break;
            }
            self.store.remove(&mut batch, &key);
            removed += gone as u64;
            if gone < events.len() {
                let left: Vec<&ProvenanceEvent> = events[gone..].iter().collect();
                self.store.add_events(&mut batch, &left)?;
                break;
            }
        }
        if removed > 0 {
            self.store.index.remove_runs_before(&mut batch, kept)?;
        }
        batch.commit()?;
        Ok(removed)
    }

    /// Number of stored events (an event of a frame replayed at recovery counts again until
    /// retention removes it): read from the spans, no event is decoded.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn len(&self) -> Result<usize, ProvenanceError> {
        self.flush();
        let mut n = 0;
        for kv in self.store.spans.iter() {
            n += postcard::from_bytes::<Span>(&kv?.1)?.events as usize;
        }
        Ok(n)
    }

    /// True when no event is stored.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn is_empty(&self) -> Result<bool, ProvenanceError> {
        self.flush();
        Ok(self.store.chunks.is_empty()?)
    }
}

impl Drop for ProvenanceRepository {
    /// Lets the writer finish what it was handed, so that nothing committed is left out.
    fn drop(&mut self) {
        drop(self.writer.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A ROUTE event of `flowfile` by "route" at time 1000 + `id`, with `attributes`.
    pub(super) fn event_with(
        id: u64,
        flowfile: &str,
        attributes: crate::flowfile::Attributes,
    ) -> ProvenanceEvent {
        ProvenanceEvent {
            id,
            event_type: EventType::ROUTE,
            time_ms: 1_000 + id as i64,
            flowfile: flowfile.into(),
            component: "route".into(),
            component_type: "RouteOnAttribute".into(),
            attributes,
            size: id,
            parents: vec![],
            children: vec![],
            details: Some("even".into()),
            transit_uri: None,
        }
    }

    /// `events` as a query returns them: each map with `fileSize`, the event's size.
    fn as_queried(events: &[ProvenanceEvent]) -> Vec<ProvenanceEvent> {
        events
            .iter()
            .cloned()
            .map(|mut e| {
                e.attributes.insert(
                    crate::flowfile::FILE_SIZE,
                    crate::flowfile::int_value(e.size),
                );
                e
            })
            .collect()
    }

    fn event(id: u64, flowfile: &str) -> ProvenanceEvent {
        event_with(
            id,
            flowfile,
            BTreeMap::from([("k".to_string(), id.to_string())]).into(),
        )
    }

    #[test]
    fn a_query_sees_every_event_inserted_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        // Many small batches, so that the writer is surely behind when the query comes.
        for b in 0..500u64 {
            store
                .insert(
                    (0..4)
                        .map(|i| event(b * 4 + i, &format!("ff-{b}")))
                        .collect(),
                )
                .unwrap();
        }
        let all = store.query(&Query::default(), usize::MAX).unwrap();
        assert_eq!(all.len(), 2_000);
        assert_eq!(store.len().unwrap(), 2_000);
        let one = store
            .query(
                &Query {
                    flowfile: Some("ff-499".into()),
                    ..Query::default()
                },
                10,
            )
            .unwrap();
        assert_eq!(
            one.iter().map(|e| e.id).collect::<Vec<_>>(),
            [1996, 1997, 1998, 1999]
        );
        assert_eq!(store.lineage("ff-7").unwrap().events.len(), 4);
    }

    #[test]
    fn events_of_both_id_classes_encoded_on_either_thread_read_back_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        // Journal ids and ids of events recorded without a frame, in batches of several flow
        // files, some named again in later batches, some handed over several at once: writes
        // of several parts each.
        let mut ids = Vec::new();
        for b in 0..300u64 {
            let first = if b % 3 == 0 {
                4 * b
            } else {
                (1 << 63) | (4 * b)
            };
            let batch = (0..3)
                .map(|i| event(first + i, &format!("ff-{}", (b + i) % 50)))
                .collect();
            let last = vec![event(first + 3, "ff-x")];
            // Every other pair of batches handed over at once, as a stateless transaction
            // hands over its sessions'.
            if b % 2 == 0 {
                store.insert_batches(vec![batch, last])
            } else {
                store.insert(batch).and_then(|()| store.insert(last))
            }
            .unwrap();
            ids.extend(first..first + 4);
        }
        ids.sort_unstable();
        let all = store.query(&Query::default(), usize::MAX).unwrap();
        assert_eq!(all.iter().map(|e| e.id).collect::<Vec<_>>(), ids);
        assert_eq!(store.len().unwrap(), 1_200);
        // ff-7 is named three times in every fifty batches.
        assert_eq!(store.lineage("ff-7").unwrap().events.len(), 18);
        assert_eq!(store.lineage("ff-x").unwrap().events.len(), 300);
    }

    #[test]
    fn events_handed_over_before_a_drop_are_written() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
            for b in 0..100u64 {
                store.insert(vec![event(b, "ff")]).unwrap();
            }
            store.insert(Vec::new()).unwrap();
        }
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        assert_eq!(store.len().unwrap(), 100);
    }

    #[test]
    fn a_store_killed_while_creating_its_partitions_opens() {
        let dir = tempfile::tempdir().unwrap();
        drop(ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap());
        // What a kill between the tree's two files leaves: `manifest` but no `levels`.
        let spans = dir.path().join("partitions").join("chunk_spans");
        std::fs::remove_file(spans.join("levels")).unwrap();
        assert!(spans.join("manifest").exists());
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        route_and_send(&store);
        drop(store);
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        assert_eq!(store.len().unwrap(), 20);
        let put = Query {
            component: Some("put".into()),
            ..Query::default()
        };
        assert_eq!(store.query(&put, usize::MAX).unwrap().len(), 1);
    }

    fn route_and_send(store: &ProvenanceRepository) {
        // Two written batches: ids 0..10 at times 1000..1010, ids 100..110 at 2100..2110,
        // with a SEND by "put" in the second only.
        store
            .insert((0..10).map(|i| event(i, "ff-a")).collect())
            .unwrap();
        // Written before the next is handed over, so that the two are separate spans.
        store.len().unwrap();
        let mut second: Vec<ProvenanceEvent> = (100..110).map(|i| event(i, "ff-b")).collect();
        second[5].component = "put".into();
        second[5].event_type = EventType::SEND;
        store.insert(second).unwrap();
    }

    /// The bytes of every stored event.
    fn stored_bytes(store: &ProvenanceRepository) -> usize {
        store
            .store
            .chunks
            .iter()
            .map(|kv| kv.unwrap().1.len())
            .sum()
    }

    fn ids(events: &[ProvenanceEvent]) -> Vec<u64> {
        events.iter().map(|e| e.id).collect()
    }

    #[test]
    fn queries_by_time_and_component_find_exactly_their_events() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        route_and_send(&store);
        let q = |query: Query| ids(&store.query(&query, usize::MAX).unwrap());
        assert_eq!(
            q(Query {
                since_ms: Some(1_005),
                until_ms: Some(1_101),
                ..Query::default()
            }),
            [5, 6, 7, 8, 9, 100, 101]
        );
        assert_eq!(
            q(Query {
                until_ms: Some(1_002),
                ..Query::default()
            }),
            [0, 1, 2]
        );
        assert_eq!(
            q(Query {
                component: Some("put".into()),
                ..Query::default()
            }),
            [105]
        );
        assert_eq!(
            q(Query {
                component: Some("route".into()),
                since_ms: Some(1_108),
                ..Query::default()
            }),
            [108, 109]
        );
        assert!(
            q(Query {
                component: Some("nobody".into()),
                ..Query::default()
            })
            .is_empty()
        );
        let limited = store
            .query(
                &Query {
                    component: Some("route".into()),
                    ..Query::default()
                },
                3,
            )
            .unwrap();
        assert_eq!(ids(&limited), [0, 1, 2]);
    }

    #[test]
    fn retention_removes_old_events_and_their_spans() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            ProvenanceRepository::open(dir.path(), Duration::from_millis(1_000), u64::MAX).unwrap();
        route_and_send(&store);
        // Cutoff 1_100: the first batch (times 1000..1009) goes.
        assert_eq!(store.enforce_retention(2_100).unwrap(), 10);
        assert_eq!(store.store.spans.len().unwrap(), 1);
        let since = Query {
            since_ms: Some(0),
            ..Query::default()
        };
        assert_eq!(
            ids(&store.query(&since, usize::MAX).unwrap()),
            (100..110).collect::<Vec<_>>()
        );
    }

    /// Folds the index's unfolded lists into run `run` while the writer is idle. Tests use
    /// runs from 2^40 on, which the writer (counting from the last run) never reaches in a
    /// test.
    fn fold(store: &ProvenanceRepository, run: u64) -> usize {
        store.flush();
        let mut batch = store.store.keyspace.batch();
        let folded = store.store.index.fold(&mut batch, (1 << 40) + run).unwrap();
        batch.commit().unwrap();
        folded
    }

    /// The ids of flow file `ff`'s events, by a query and by its lineage.
    fn ids_of(store: &ProvenanceRepository, ff: &str) -> (Vec<u64>, Vec<u64>) {
        let q = Query {
            flowfile: Some(ff.into()),
            ..Query::default()
        };
        (
            ids(&store.query(&q, usize::MAX).unwrap()),
            ids(&store.lineage(ff).unwrap().events),
        )
    }

    #[test]
    fn the_writer_folds_lists_into_a_run_and_look_ups_read_both() {
        let dir = tempfile::tempdir().unwrap();
        let per_write = 4096;
        let writes = flowfile_index::FOLD_AT / per_write + 1;
        {
            let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
            for w in 0..writes {
                let events = (0..per_write)
                    .map(|i| {
                        let id = (w * per_write + i) as u64;
                        event(id, &format!("ff-{id}"))
                    })
                    .collect();
                store.insert(events).unwrap();
            }
            store.flush();
            // The write after the one that reached FOLD_AT folded every list before its own.
            assert_eq!(store.store.index.run_ends.len().unwrap(), 1);
            assert_eq!(store.store.index.unfolded_len().unwrap(), per_write);
            assert!(store.store.index.runs.len().unwrap() > 1000);
            // One more write stays in its list.
            store.insert(vec![event(1 << 30, "ff-0")]).unwrap();
            assert_eq!(ids_of(&store, "ff-0").0, [0, 1 << 30]);
        }
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        let last = (writes * per_write - 1) as u64;
        for id in [0, 1, 4095, 4096, last] {
            let (query, lineage) = ids_of(&store, &format!("ff-{id}"));
            assert_eq!(query, if id == 0 { vec![0, 1 << 30] } else { vec![id] });
            assert_eq!(lineage, query);
        }
        assert_eq!(ids_of(&store, "ff-none").0, Vec::<u64>::new());
        assert_eq!(store.store.index.next_run().unwrap(), 1);
    }

    #[test]
    fn a_damaged_run_is_an_error_naming_it_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        store.insert(vec![event(0, "ff-a")]).unwrap();
        fold(&store, 0);
        // ff-a's bucket of run 2^40 cut short by a byte.
        let (k, v) = store.store.index.runs.first_key_value().unwrap().unwrap();
        store.store.index.runs.insert(k, &v[..v.len() - 1]).unwrap();
        let q = Query {
            flowfile: Some("ff-a".into()),
            ..Query::default()
        };
        let e = store.query(&q, 10).unwrap_err().to_string();
        assert!(e.contains("a run's bucket of 23 bytes"), "{e}");
        assert!(store.lineage("ff-a").is_err());
    }

    #[test]
    fn a_damaged_list_is_folded_as_far_as_it_is_whole_and_writes_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        store.insert(vec![event(0, "ff-a")]).unwrap();
        store.flush();
        let unfolded = &store.store.index.unfolded;
        let (k, v) = unfolded.first_key_value().unwrap().unwrap();
        unfolded.insert(k, [&v[..], &[1, 2, 3]].concat()).unwrap();
        unfolded.insert(b"short key", [0; 8]).unwrap();
        assert_eq!(fold(&store, 0), 1);
        assert!(store.store.index.unfolded.is_empty().unwrap());
        store.insert(vec![event(1, "ff-a")]).unwrap();
        assert_eq!(ids_of(&store, "ff-a"), (vec![0, 1], vec![0, 1]));
    }

    #[test]
    fn retention_removes_a_run_once_its_chunks_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::ZERO, u64::MAX).unwrap();
        store
            .insert((0..10).map(|i| event(i, "ff-a")).collect())
            .unwrap();
        assert_eq!(fold(&store, 0), 1);
        store
            .insert((10..20).map(|i| event(i, "ff-a")).collect())
            .unwrap();
        assert_eq!(fold(&store, 1), 1);
        store
            .insert((20..30).map(|i| event(i, "ff-a")).collect())
            .unwrap();
        // Times are 1000 + id: a cutoff at 1015 takes the first chunk and half the second.
        assert_eq!(store.enforce_retention(1_015).unwrap(), 15);
        assert_eq!(ids_of(&store, "ff-a").0, (15..30).collect::<Vec<_>>());
        // The first run names only the removed chunk; the second is kept, as the chunk it
        // names was only partly removed (written again, with a list of its own).
        assert_eq!(store.store.index.run_ends.len().unwrap(), 1);
        assert_eq!(store.enforce_retention(1_030).unwrap(), 15);
        assert_eq!(ids_of(&store, "ff-a").0, Vec::<u64>::new());
        assert_eq!(store.store.index.unfolded_len().unwrap(), 0);
        assert!(store.store.index.runs.is_empty().unwrap());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Writes of a few flow files' events, folds and retention in any order: a query by
        /// flow file returns exactly its events not yet removed, as the store is and once
        /// opened again.
        #[test]
        fn a_flow_files_events_are_found_through_any_folds_and_retention(
            steps in proptest::collection::vec(
                prop_oneof![
                    proptest::collection::vec(0..5usize, 1..12).prop_map(Step::Write),
                    Just(Step::Fold),
                    (0..8u64).prop_map(Step::Retain),
                ],
                1..16,
            )
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut store = ProvenanceRepository::open(dir.path(), Duration::ZERO, u64::MAX).unwrap();
            let (mut next_id, mut cutoff, mut runs) = (0u64, 0u64, 0u64);
            let mut model: Vec<(u64, usize)> = Vec::new();
            for (i, step) in steps.iter().enumerate() {
                match step {
                    Step::Write(ffs) => {
                        let events = ffs.iter().map(|&ff| {
                            model.push((next_id, ff));
                            next_id += 1;
                            event(next_id - 1, &format!("ff-{ff}"))
                        }).collect();
                        store.insert(events).unwrap();
                    }
                    Step::Fold => {
                        fold(&store, runs);
                        runs += 1;
                    }
                    Step::Retain(more) => {
                        cutoff = (cutoff + more).min(next_id);
                        store.enforce_retention(1_000 + cutoff as i64).unwrap();
                        model.retain(|&(id, _)| id >= cutoff);
                    }
                }
                if i == steps.len() / 2 {
                    drop(store);
                    store = ProvenanceRepository::open(dir.path(), Duration::ZERO, u64::MAX).unwrap();
                }
                for ff in 0..5 {
                    let want: Vec<u64> =
                        model.iter().filter(|m| m.1 == ff).map(|m| m.0).collect();
                    let (query, lineage) = ids_of(&store, &format!("ff-{ff}"));
                    prop_assert_eq!(&query, &want);
                    prop_assert_eq!(&lineage, &want);
                }
            }
        }
    }

    /// A step of the property above.
    #[derive(Debug, Clone)]
    enum Step {
        /// Events of these flow files, one each, in one write.
        Write(Vec<usize>),
        /// The unfolded lists folded into a run.
        Fold,
        /// Retention's cutoff moved on by this many ids.
        Retain(u64),
    }

    #[test]
    fn a_write_is_one_chunk_with_one_list_of_its_flow_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        // Six events of "ff-a" and two of "ff-b", interleaved, in one write.
        let events: Vec<ProvenanceEvent> = (0..8)
            .map(|i| event(i, if i % 4 == 3 { "ff-b" } else { "ff-a" }))
            .collect();
        store.insert(events).unwrap();
        assert_eq!(store.len().unwrap(), 8);
        assert_eq!(store.store.chunks.len().unwrap(), 1);
        assert_eq!(store.store.index.unfolded_len().unwrap(), 2);
        assert_eq!(store.store.index.unfolded.len().unwrap(), 1);
        assert_eq!(
            ids(&store.lineage("ff-a").unwrap().events),
            [0, 1, 2, 4, 5, 6]
        );
        // A second write of ff-a: a second chunk, found by its own list.
        store.insert(vec![event(20, "ff-a")]).unwrap();
        let q = Query {
            flowfile: Some("ff-a".into()),
            ..Query::default()
        };
        assert_eq!(
            ids(&store.query(&q, usize::MAX).unwrap()),
            [0, 1, 2, 4, 5, 6, 20]
        );
        assert_eq!(ids(&store.query(&q, 2).unwrap()), [0, 1]);
    }

    #[test]
    fn overlapping_chunks_read_in_id_order_and_each_event_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        store
            .insert([0, 10, 20].map(|i| event(i, "ff")).to_vec())
            .unwrap();
        store.len().unwrap();
        // Handed over out of id order, and a replay of event 10.
        store
            .insert([5, 10, 15].map(|i| event(i, "ff")).to_vec())
            .unwrap();
        assert_eq!(
            ids(&store.query(&Query::default(), usize::MAX).unwrap()),
            [0, 5, 10, 15, 20]
        );
        assert_eq!(ids(&store.query(&Query::default(), 3).unwrap()), [0, 5, 10]);
        assert_eq!(
            ids(&store.lineage("ff").unwrap().events),
            [0, 5, 10, 15, 20]
        );
    }

    #[test]
    fn a_flow_files_changing_maps_are_stored_as_changes_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            ProvenanceRepository::open(dir.path(), Duration::from_millis(1_000), u64::MAX).unwrap();
        // Six events of one flow file, as through a group: each processor sets, changes or
        // removes an attribute of a map of twenty; the last two share a map. Another flow
        // file's events come between.
        let mut map: BTreeMap<String, String> = (0..20)
            .map(|i| (format!("attribute.{i}"), "v".repeat(50)))
            .collect();
        let mut events = Vec::new();
        for i in 0..6u64 {
            match i {
                1 => drop(map.insert("parity".into(), "even".into())),
                2 => drop(map.insert("attribute.3".into(), "changed".into())),
                3 => drop(map.remove("attribute.7")),
                4 => drop(map.insert("row.count".into(), "1".into())),
                _ => {}
            }
            let attributes: crate::flowfile::Attributes = map.clone().into();
            let shared = if i == 5 {
                events
                    .last()
                    .map(|e: &ProvenanceEvent| e.attributes.clone())
            } else {
                None
            };
            events.push(ProvenanceEvent {
                attributes: shared.unwrap_or(attributes),
                ..event(2 * i, "ff")
            });
            events.push(event(2 * i + 1, "other"));
        }
        store.insert(events.clone()).unwrap();
        assert_eq!(
            store.query(&Query::default(), usize::MAX).unwrap(),
            as_queried(&events)
        );
        // Only the last event of "ff" holds its map in full: the others are a few bytes.
        let stored = stored_bytes(&store);
        assert!(stored < 2 * 20 * 60, "{stored} bytes");
        // Retention (cutoff 1_004) removes the earliest events, never a base before them.
        assert_eq!(store.enforce_retention(2_004).unwrap(), 4);
        assert_eq!(
            store.query(&Query::default(), usize::MAX).unwrap(),
            as_queried(&events[4..])
        );
        let ff: Vec<ProvenanceEvent> = events[4..]
            .iter()
            .filter(|e| e.flowfile == "ff")
            .cloned()
            .collect();
        assert_eq!(store.lineage("ff").unwrap().events, as_queried(&ff));
    }

    #[test]
    fn a_store_of_an_unknown_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let keyspace = Config::new(dir.path()).open().unwrap();
            let meta = keyspace
                .open_partition("meta", PartitionCreateOptions::default())
                .unwrap();
            meta.insert("format", [9]).unwrap();
            keyspace.persist(PersistMode::SyncAll).unwrap();
        }
        let err = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap_err();
        assert!(matches!(err, ProvenanceError::Format { found: 9 }), "{err}");
        assert!(err.to_string().contains("format 9"), "{err}");
    }

    #[test]
    fn events_sharing_an_attribute_map_store_it_once_and_read_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            ProvenanceRepository::open(dir.path(), Duration::from_millis(1_000), u64::MAX).unwrap();
        let attributes: crate::flowfile::Attributes =
            BTreeMap::from([("big".to_string(), "x".repeat(10_000))]).into();
        let events: Vec<ProvenanceEvent> = (0..4)
            .map(|i| ProvenanceEvent {
                attributes: attributes.clone(),
                ..event(i, "ff")
            })
            .collect();
        store.insert(events.clone()).unwrap();
        assert_eq!(
            store.query(&Query::default(), usize::MAX).unwrap(),
            as_queried(&events)
        );
        // Stored once: the three others name the last.
        let stored = stored_bytes(&store);
        assert!(stored < 11_000, "{stored} bytes");
        // Retention (cutoff 1_002) removes the events naming the holder before the holder.
        assert_eq!(store.enforce_retention(2_002).unwrap(), 2);
        assert_eq!(
            store.query(&Query::default(), usize::MAX).unwrap(),
            as_queried(&events[2..])
        );
        assert_eq!(
            store.lineage("ff").unwrap().events,
            as_queried(&events[2..])
        );
    }
}
