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
//! Here: the repository (opening, the writer thread, retention). `store.rs`: the keyspace,
//! its partitions and how a chunk is added and removed; `queries.rs`: queries and lineage;
//! `types.rs`: the error, a chunk's key and span; `chunk.rs` and `flowfile_index.rs` as
//! above; `tests.rs`: the store's tests.
//!
//! [`sync`]: ProvenanceRepository::sync

use chunk::Part;
use fjall::{Config, PartitionCreateOptions, PersistMode};
use flowfile_index::FlowFileIndex;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
pub use weir_flow_api::provenance::{
    EventType, Lineage, LineageFrontier, LineageLimits, ProvenanceEvent, Query,
};

mod chunk;
mod flowfile_index;
#[cfg(test)]
mod lineage_tests;
mod queries;
mod store;
#[cfg(test)]
mod tests;
mod types;

use store::{FORMAT, Store, encode_parts, remove_half_created_partitions};
pub use types::ProvenanceError;
use types::{ChunkKey, Span, chunk_key, first_of};

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
