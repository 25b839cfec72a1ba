//! Provenance: what happened to every flow file, as events in an append-only store with an
//! index by flow file, component and time.
//!
//! Events are written in the flow-file journal's frame of the session that made them (so a
//! committed session's events are durable with it) and then inserted into a `fjall` keyspace:
//! one partition of events by id, and three index partitions. Insertion runs on the store's
//! own writer thread, off the commit path (it costs tens of microseconds per event, more
//! than the rest of a simple processor's work); queries, lineage and [`sync`] wait for the
//! events handed over before them, so a reader always sees what was committed before it
//! asked.
//!
//! Event ids are `transaction id << 20 | index`, so inserting the events of a replayed frame
//! again at recovery is idempotent. Retention by age and size is applied at each checkpoint,
//! oldest first.
//!
//! [`sync`]: ProvenanceRepository::sync

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fjall::{Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode};
use serde::{Deserialize, Serialize};

/// The kinds of provenance event, as NiFi names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::upper_case_acronyms, non_camel_case_types)]
pub enum EventType {
    /// A flow file made from nothing (GenerateFlowFile).
    CREATE,
    /// Data received from outside (GetFile, ListenHTTP).
    RECEIVE,
    /// Content fetched from outside into an existing flow file.
    FETCH,
    /// Data sent outside (PutFile, InvokeHTTP).
    SEND,
    /// Removed by the flow (auto-termination).
    DROP,
    /// Removed by a queue's expiration.
    EXPIRE,
    /// Routed to a relationship by a routing processor.
    ROUTE,
    /// Attributes changed.
    ATTRIBUTES_MODIFIED,
    /// Content changed.
    CONTENT_MODIFIED,
    /// A copy made (one relationship to several connections).
    CLONE,
    /// Children made from a parent (SplitText).
    FORK,
    /// One child made from several parents (MergeContent).
    JOIN,
    /// A remote service invoked (InvokeHTTP's response).
    REMOTE_INVOCATION,
}

impl EventType {
    /// Parses an event type's name.
    pub fn parse(name: &str) -> Option<EventType> {
        use EventType::*;
        Some(match name.to_ascii_uppercase().as_str() {
            "CREATE" => CREATE,
            "RECEIVE" => RECEIVE,
            "FETCH" => FETCH,
            "SEND" => SEND,
            "DROP" => DROP,
            "EXPIRE" => EXPIRE,
            "ROUTE" => ROUTE,
            "ATTRIBUTES_MODIFIED" => ATTRIBUTES_MODIFIED,
            "CONTENT_MODIFIED" => CONTENT_MODIFIED,
            "CLONE" => CLONE,
            "FORK" => FORK,
            "JOIN" => JOIN,
            "REMOTE_INVOCATION" => REMOTE_INVOCATION,
            _ => return None,
        })
    }
}

/// One provenance event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvenanceEvent {
    /// Unique, increasing id (set at commit).
    pub id: u64,
    /// What happened.
    pub event_type: EventType,
    /// When (ms since the epoch).
    pub time_ms: i64,
    /// The flow file's `uuid`.
    pub flowfile: String,
    /// The component's name (or the queue's key for EXPIRE).
    pub component: String,
    /// The component's type.
    pub component_type: String,
    /// The flow file's attributes after the event (shared with the flow file, not copied).
    pub attributes: crate::flowfile::Attributes,
    /// Content size after the event.
    pub size: u64,
    /// Parents' uuids (FORK, JOIN, CLONE).
    pub parents: Vec<String>,
    /// Children's uuids (FORK, JOIN, CLONE).
    pub children: Vec<String>,
    /// The relationship (ROUTE) or another detail.
    pub details: Option<String>,
    /// Where data went or came from (SEND, RECEIVE, FETCH, REMOTE_INVOCATION).
    pub transit_uri: Option<String>,
}

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
}

/// Which events a query returns.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Only this flow file's events.
    pub flowfile: Option<String>,
    /// Only this component's events.
    pub component: Option<String>,
    /// Only events at or after this time (ms).
    pub since_ms: Option<i64>,
    /// Only events at or before this time (ms).
    pub until_ms: Option<i64>,
    /// Only events of this type.
    pub event_type: Option<EventType>,
}

/// A flow file's lineage: the flow files it is related to through FORK, JOIN and CLONE
/// (parents up to the roots, children down to the leaves) and all their events.
#[derive(Debug, Clone, Serialize)]
pub struct Lineage {
    /// The flow file asked about.
    pub flowfile: String,
    /// Its parents (direct).
    pub parents: Vec<String>,
    /// Its children (direct).
    pub children: Vec<String>,
    /// Every related flow file.
    pub flowfiles: Vec<String>,
    /// Every event of every related flow file, oldest first.
    pub events: Vec<ProvenanceEvent>,
}

/// The provenance store.
pub struct ProvenanceRepository {
    store: Store,
    /// Batches of events for the writer thread; `None` once dropped.
    writer: Option<SyncSender<Vec<ProvenanceEvent>>>,
    progress: Arc<WriterProgress>,
    thread: Option<JoinHandle<()>>,
    max_age: Duration,
    max_size: u64,
}

/// The keyspace and its partitions: cheap to clone (shared handles).
#[derive(Clone)]
struct Store {
    keyspace: Keyspace,
    events: PartitionHandle,
    by_flowfile: PartitionHandle,
    by_component: PartitionHandle,
    by_time: PartitionHandle,
}

/// How far the writer thread has got: batches handed over, and batches written.
#[derive(Default)]
struct WriterProgress {
    counts: Mutex<(u64, u64)>,
    written: Condvar,
}

/// Batches handed to the writer at most before `insert` waits: bounds the memory of events
/// not yet indexed when the store falls behind.
const WRITER_QUEUE: usize = 256;

impl std::fmt::Debug for ProvenanceRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvenanceRepository")
            .finish_non_exhaustive()
    }
}

fn index_key(prefix: &str, id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 9);
    k.extend_from_slice(prefix.as_bytes());
    k.push(0);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn time_key(time_ms: i64, id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    k.extend_from_slice(&(time_ms.max(0) as u64).to_be_bytes());
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn id_of(key: &[u8]) -> u64 {
    u64::from_be_bytes(key[key.len() - 8..].try_into().expect("8 bytes"))
}

impl Store {
    /// Inserts `events` and their index entries in one batch.
    fn write(&self, events: &[ProvenanceEvent]) -> Result<(), ProvenanceError> {
        let mut batch = self.keyspace.batch();
        // One buffer for every event's encoding: growing a fresh one per event cost more
        // than the encoding itself.
        let mut buffer = Vec::with_capacity(1024);
        for e in events {
            buffer.clear();
            buffer = postcard::to_extend(e, buffer)?;
            batch.insert(&self.events, e.id.to_be_bytes(), buffer.as_slice());
            for uuid in std::iter::once(&e.flowfile)
                .chain(&e.parents)
                .chain(&e.children)
            {
                batch.insert(&self.by_flowfile, index_key(uuid, e.id), []);
            }
            batch.insert(&self.by_component, index_key(&e.component, e.id), []);
            batch.insert(&self.by_time, time_key(e.time_ms, e.id), []);
        }
        batch.commit()?;
        // The journal holds these events until the next checkpoint; handing them to the OS
        // is enough until then.
        self.keyspace.persist(PersistMode::Buffer)?;
        Ok(())
    }
}

impl ProvenanceRepository {
    /// Opens (or creates) the store in `dir`, with retention by age and size.
    ///
    /// # Errors
    /// [`ProvenanceError::Store`], for instance when another process has it open.
    pub fn open(dir: &Path, max_age: Duration, max_size: u64) -> Result<Self, ProvenanceError> {
        let keyspace = Config::new(dir).open()?;
        let opts = PartitionCreateOptions::default;
        let store = Store {
            events: keyspace.open_partition("events", opts())?,
            by_flowfile: keyspace.open_partition("by_flowfile", opts())?,
            by_component: keyspace.open_partition("by_component", opts())?,
            by_time: keyspace.open_partition("by_time", opts())?,
            keyspace,
        };
        let (writer, batches) = sync_channel::<Vec<ProvenanceEvent>>(WRITER_QUEUE);
        let progress = Arc::new(WriterProgress::default());
        let thread = {
            let (store, progress) = (store.clone(), Arc::clone(&progress));
            std::thread::Builder::new()
                .name("weir-provenance".into())
                .spawn(move || {
                    for events in batches {
                        if let Err(e) = store.write(&events) {
                            tracing::warn!(
                                "provenance: {} events not indexed (the journal keeps them until the next checkpoint): {e}",
                                events.len()
                            );
                        }
                        let mut counts = progress.counts.lock().unwrap_or_else(|e| e.into_inner());
                        counts.1 += 1;
                        progress.written.notify_all();
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

    /// Hands committed events to the writer thread, which inserts them (idempotent: an event
    /// id is written once). Returns at once unless the writer is far behind; a failure to
    /// insert is logged by the writer (the journal still holds the events).
    ///
    /// # Errors
    /// [`ProvenanceError::Writer`] if the writer thread is gone.
    pub fn insert(&self, events: Vec<ProvenanceEvent>) -> Result<(), ProvenanceError> {
        if events.is_empty() {
            return Ok(());
        }
        let Some(writer) = &self.writer else {
            return Err(ProvenanceError::Writer("the store is closed".into()));
        };
        self.progress
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0 += 1;
        writer
            .send(events)
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

    fn event(&self, id: u64) -> Result<Option<ProvenanceEvent>, ProvenanceError> {
        match self.store.events.get(id.to_be_bytes())? {
            Some(v) => Ok(Some(postcard::from_bytes(&v)?)),
            None => Ok(None),
        }
    }

    fn ids_with_prefix(
        &self,
        part: &PartitionHandle,
        prefix: &str,
    ) -> Result<Vec<u64>, ProvenanceError> {
        let mut p = prefix.as_bytes().to_vec();
        p.push(0);
        let mut ids = Vec::new();
        for kv in part.prefix(p) {
            let (k, _) = kv?;
            ids.push(id_of(&k));
        }
        Ok(ids)
    }

    /// Events matching `query`, oldest first, at most `limit`.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn query(
        &self,
        query: &Query,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceError> {
        self.flush();
        // Start from the narrowest index, filter the rest.
        let ids: Vec<u64> = if let Some(ff) = &query.flowfile {
            self.ids_with_prefix(&self.store.by_flowfile, ff)?
        } else if let Some(c) = &query.component {
            self.ids_with_prefix(&self.store.by_component, c)?
        } else if let Some(since) = query.since_ms {
            let mut ids = Vec::new();
            for kv in self.store.by_time.range(time_key(since, 0)..) {
                ids.push(id_of(&kv?.0));
            }
            ids
        } else {
            let mut ids = Vec::new();
            for kv in self.store.events.iter() {
                ids.push(id_of(&kv?.0));
            }
            ids
        };
        let mut ids = ids;
        ids.sort_unstable();
        ids.dedup();
        let mut out = Vec::new();
        for id in ids {
            let Some(e) = self.event(id)? else { continue };
            let keep = query.flowfile.as_ref().is_none_or(|f| {
                &e.flowfile == f || e.parents.contains(f) || e.children.contains(f)
            }) && query.component.as_ref().is_none_or(|c| &e.component == c)
                && query.since_ms.is_none_or(|s| e.time_ms >= s)
                && query.until_ms.is_none_or(|u| e.time_ms <= u)
                && query.event_type.is_none_or(|t| e.event_type == t);
            if keep {
                out.push(e);
                if out.len() >= limit {
                    break;
                }
            }
        }
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
        while let Some(ff) = todo.pop_front() {
            if !seen.insert(ff.clone()) || seen.len() > MAX_FLOWFILES {
                continue;
            }
            for id in self.ids_with_prefix(&self.store.by_flowfile, &ff)? {
                let Some(e) = self.event(id)? else { continue };
                if e.flowfile == ff || e.parents.contains(&ff) {
                    // ff's own events, and events where ff is a parent: its children.
                    for c in &e.children {
                        if ff == flowfile {
                            children.insert(c.clone());
                        }
                        todo.push_back(c.clone());
                    }
                    if e.event_type == EventType::JOIN && e.flowfile != ff {
                        todo.push_back(e.flowfile.clone());
                        if ff == flowfile {
                            children.insert(e.flowfile.clone());
                        }
                    }
                }
                if e.children.contains(&ff) || (e.event_type == EventType::JOIN && e.flowfile == ff)
                {
                    // ff is a child here: walk up to its parents (and from them, its siblings).
                    let parent_list: Vec<String> = if e.children.contains(&ff) && e.flowfile != ff {
                        vec![e.flowfile.clone()]
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
                if e.flowfile == ff || e.parents.contains(&ff) || e.children.contains(&ff) {
                    events.insert(e.id, e);
                }
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
    /// size. Returns how many were removed.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<u64, ProvenanceError> {
        self.flush();
        let cutoff = now_ms - self.max_age.as_millis() as i64;
        let mut size: u64 = self.store.keyspace.disk_space();
        let mut removed = 0;
        let mut batch = self.store.keyspace.batch();
        for kv in self.store.events.iter() {
            let (k, v) = kv?;
            let e: ProvenanceEvent = postcard::from_bytes(&v)?;
            if e.time_ms >= cutoff && size <= self.max_size {
                break;
            }
            size = size.saturating_sub(v.len() as u64 + 64);
            batch.remove(&self.store.events, k);
            for uuid in std::iter::once(&e.flowfile)
                .chain(&e.parents)
                .chain(&e.children)
            {
                batch.remove(&self.store.by_flowfile, index_key(uuid, e.id));
            }
            batch.remove(&self.store.by_component, index_key(&e.component, e.id));
            batch.remove(&self.store.by_time, time_key(e.time_ms, e.id));
            removed += 1;
        }
        batch.commit()?;
        Ok(removed)
    }

    /// Number of stored events.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn len(&self) -> Result<usize, ProvenanceError> {
        self.flush();
        Ok(self.store.events.len()?)
    }

    /// True when no event is stored.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn is_empty(&self) -> Result<bool, ProvenanceError> {
        self.flush();
        Ok(self.store.events.is_empty()?)
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

    fn event(id: u64, flowfile: &str) -> ProvenanceEvent {
        ProvenanceEvent {
            id,
            event_type: EventType::ROUTE,
            time_ms: 1_000 + id as i64,
            flowfile: flowfile.to_string(),
            component: "route".into(),
            component_type: "RouteOnAttribute".into(),
            attributes: BTreeMap::from([("k".to_string(), id.to_string())]).into(),
            size: id,
            parents: vec![],
            children: vec![],
            details: Some("even".into()),
            transit_uri: None,
        }
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
}
