//! Provenance: what happened to every flow file, as events in an append-only store with an
//! index by flow file and a summary per written batch for time and component.
//!
//! Events are written in the flow-file journal's frame of the session that made them (so a
//! committed session's events are durable with it) and then inserted into a `fjall` keyspace:
//! one partition of events by id (`records`), one index partition by flow file (lineage needs
//! every event of a uuid), and one partition of *spans*: per written batch, the id range it
//! covers, its earliest and latest time and the components in it. A query by time or
//! component scans only the spans that may match and filters their events, so an event costs
//! two store writes instead of one per index. A flow file's events mostly share one attribute
//! map: in a written batch only the last event holding a map stores it, the others store that
//! event's id (retention removes events in id order, so the holder outlives them), and an
//! event whose map is its own stores only what differs from the map of the flow file's next
//! event in the batch (a processor mostly changes an attribute or two). The index
//! has one entry per flow file and written batch, keyed by the flow file's last event of the
//! batch, whose value lists its earlier ones: retention removes that entry with its key's
//! event, after the others. Insertion
//! runs on the store's own writer thread, off the commit path; queries, lineage and [`sync`]
//! wait for the events handed over before them, so a reader always sees what was committed
//! before it asked.
//!
//! Event ids are `transaction id << 20 | index`, so inserting the events of a replayed frame
//! again at recovery is idempotent (an index entry of the replay that names the same events
//! again only repeats them; readers drop repeated ids). Retention by age and size is applied at each checkpoint,
//! oldest first.
//!
//! The store records its format; a store of the earlier format (partition `events`, every
//! event with its attributes, an index entry per event by time and by component) is
//! converted when opened, a chunk of events per store batch so that an interrupted
//! conversion resumes; one of an unknown format is refused.
//!
//! [`sync`]: ProvenanceRepository::sync

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fjall::{Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::flowfile::SmolStr;

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
    /// The flow file's `uuid` (shared with its `uuid` attribute, not copied).
    pub flowfile: SmolStr,
    /// The component's name (or the queue's key for EXPIRE).
    pub component: SmolStr,
    /// The component's type.
    pub component_type: SmolStr,
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
    /// An event names the event holding its attributes, and that one is missing.
    #[error(
        "provenance event {id}: its attributes are stored with event {holder}, which is missing"
    )]
    MissingAttributes {
        /// The event read.
        id: u64,
        /// The event that should hold its attributes.
        holder: u64,
    },
    /// The store on disk has a format this version does not read.
    #[error(
        "provenance store has format {found}, this version reads format {FORMAT}: move the directory away to start a new store"
    )]
    Format {
        /// The format recorded in the store.
        found: u8,
    },
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
    /// Key: first and last event id (big-endian); value: a [`Span`].
    spans: PartitionHandle,
}

/// How an event's attributes are stored: `A` is the map, `S` a name or value.
#[derive(Serialize, Deserialize)]
enum StoredAttributes<A, S> {
    /// In full.
    Inline(A),
    /// The same map as this later event's, written with it.
    SameAs(u64),
    /// The map of `base`, a later event of the same flow file written with it, with `set`
    /// added or replaced and `removed` taken out (format 3).
    Changed {
        base: u64,
        set: Vec<(S, S)>,
        removed: Vec<S>,
    },
}

/// What [`StoredAttributes::Changed`] holds besides its base: entries set, names removed.
type Changes<S> = (Vec<(S, S)>, Vec<S>);

/// The changes that turn `base` into `map`: entries to set, then names to remove. `None`
/// when they are not much smaller than `map` itself.
fn changes_from<'a>(
    map: &'a crate::flowfile::Attributes,
    base: &'a crate::flowfile::Attributes,
) -> Option<Changes<&'a str>> {
    let (mut set, mut removed) = (Vec::new(), Vec::new());
    let (mut m, mut b) = (map.iter().peekable(), base.iter().peekable());
    loop {
        match (m.peek(), b.peek()) {
            (None, None) => break,
            (Some(&(k, v)), None) => {
                set.push((k, v));
                m.next();
            }
            (None, Some(&(k, _))) => {
                removed.push(k);
                b.next();
            }
            (Some(&(mk, mv)), Some(&(bk, bv))) => match mk.cmp(bk) {
                std::cmp::Ordering::Less => {
                    set.push((mk, mv));
                    m.next();
                }
                std::cmp::Ordering::Greater => {
                    removed.push(bk);
                    b.next();
                }
                std::cmp::Ordering::Equal => {
                    if mv != bv {
                        set.push((mk, mv));
                    }
                    m.next();
                    b.next();
                }
            },
        }
    }
    (2 * (set.len() + removed.len()) < map.len()).then_some((set, removed))
}

/// An event as written: [`ProvenanceEvent`]'s fields in its order (borrowed), with
/// [`StoredAttributes`] for its attributes.
#[derive(Serialize)]
struct StoredEventRef<'a> {
    id: u64,
    event_type: EventType,
    time_ms: i64,
    flowfile: &'a str,
    component: &'a str,
    component_type: &'a str,
    attributes: StoredAttributes<&'a crate::flowfile::Attributes, &'a str>,
    size: u64,
    parents: &'a [String],
    children: &'a [String],
    details: Option<&'a str>,
    transit_uri: Option<&'a str>,
}

/// An event as read back; see [`StoredEventRef`].
#[derive(Deserialize)]
struct StoredEvent {
    id: u64,
    event_type: EventType,
    time_ms: i64,
    flowfile: SmolStr,
    component: SmolStr,
    component_type: SmolStr,
    attributes: StoredAttributes<crate::flowfile::Attributes, String>,
    size: u64,
    parents: Vec<String>,
    children: Vec<String>,
    details: Option<String>,
    transit_uri: Option<String>,
}

impl StoredEvent {
    fn into_event(self, attributes: crate::flowfile::Attributes) -> ProvenanceEvent {
        ProvenanceEvent {
            id: self.id,
            event_type: self.event_type,
            time_ms: self.time_ms,
            flowfile: self.flowfile,
            component: self.component,
            component_type: self.component_type,
            attributes,
            size: self.size,
            parents: self.parents,
            children: self.children,
            details: self.details,
            transit_uri: self.transit_uri,
        }
    }
}

fn encode(
    e: &ProvenanceEvent,
    attributes: StoredAttributes<&crate::flowfile::Attributes, &str>,
    buffer: Vec<u8>,
) -> Result<Vec<u8>, ProvenanceError> {
    let stored = StoredEventRef {
        id: e.id,
        event_type: e.event_type,
        time_ms: e.time_ms,
        flowfile: &e.flowfile,
        component: &e.component,
        component_type: &e.component_type,
        attributes,
        size: e.size,
        parents: &e.parents,
        children: &e.children,
        details: e.details.as_deref(),
        transit_uri: e.transit_uri.as_deref(),
    };
    Ok(postcard::to_extend(&stored, buffer)?)
}

/// What the events of one written id range hold, for queries by time and component.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Span {
    min_time_ms: i64,
    max_time_ms: i64,
    components: Vec<String>,
}

/// The store's format: 2 since events are summarized by span instead of indexed by time and
/// by component, and share their attribute maps; 3 since a flow file's index entry, keyed by
/// its last event of a write, lists its earlier events of that write in its value, and an
/// event may store its attributes as changes from a later event's. A store of format 2
/// (every index value empty, no changes) reads as format 3; its marker is raised when opened.
const FORMAT: u8 = 3;
/// The format whose stores read as they are.
const FORMAT_2: u8 = 2;
/// The events partition of format 1, converted into `records` when such a store is opened.
const FORMAT_1_EVENTS: &str = "events";
/// The index partitions of format 1, removed when such a store is opened.
const FORMAT_1_INDEXES: [&str; 2] = ["by_component", "by_time"];
/// Events per span when converting a store of format 1.
const CONVERTED_SPAN: usize = 4096;

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

fn span_key(first: u64, last: u64) -> [u8; 16] {
    let mut k = [0; 16];
    k[..8].copy_from_slice(&first.to_be_bytes());
    k[8..].copy_from_slice(&last.to_be_bytes());
    k
}

/// Adds to `batch` one span per id class (journal ids, and the top-bit ids of events
/// recorded without a journal frame) of `events`, so that a span's range stays narrow.
fn add_spans<'a>(
    batch: &mut fjall::Batch,
    spans: &PartitionHandle,
    events: impl IntoIterator<Item = &'a ProvenanceEvent>,
) -> Result<(), ProvenanceError> {
    let mut classes: [Option<(u64, u64, Span)>; 2] = [None, None];
    for e in events {
        let (first, last, span) = classes[(e.id >> 63) as usize].get_or_insert_with(|| {
            (
                e.id,
                e.id,
                Span {
                    min_time_ms: e.time_ms,
                    max_time_ms: e.time_ms,
                    components: Vec::new(),
                },
            )
        });
        *first = (*first).min(e.id);
        *last = (*last).max(e.id);
        span.min_time_ms = span.min_time_ms.min(e.time_ms);
        span.max_time_ms = span.max_time_ms.max(e.time_ms);
        // A batch names a handful of components: a linear search beats a set.
        if !span.components.iter().any(|c| *c == e.component) {
            span.components.push(e.component.to_string());
        }
    }
    for (first, last, span) in classes.into_iter().flatten() {
        batch.insert(spans, span_key(first, last), postcard::to_allocvec(&span)?);
    }
    Ok(())
}

fn id_of(key: &[u8]) -> u64 {
    u64::from_be_bytes(key[key.len() - 8..].try_into().expect("8 bytes"))
}

impl Store {
    /// Inserts the events of `batches`, their flow-file index entries and their spans in one
    /// store batch.
    fn write(&self, batches: &[Vec<ProvenanceEvent>]) -> Result<(), ProvenanceError> {
        let mut batch = self.keyspace.batch();
        // One buffer for every event's encoding: growing a fresh one per event cost more
        // than the encoding itself.
        let mut buffer = Vec::with_capacity(1024);
        // The last event of this write holding each map stores it (the events hold their
        // maps, so an address is not reused meanwhile).
        // (Fx hashing: these maps are per write and their keys are not chosen by anyone
        // outside, and SipHash cost as much as the rest of the bookkeeping.)
        let events = batches.iter().map(Vec::len).sum();
        let mut holders: FxHashMap<*const (), u64> =
            FxHashMap::with_capacity_and_hasher(events, Default::default());
        for e in batches.iter().flatten() {
            let holder = holders.entry(e.attributes.as_ptr()).or_insert(e.id);
            *holder = (*holder).max(e.id);
        }
        // A flow file's map mostly differs from its next event's by an attribute or two:
        // an event whose map is stored nowhere else stores only the changes from the map of
        // the flow file's next event in this write (a later id, so retention keeps it longer).
        let mut next: FxHashMap<&str, (u64, &crate::flowfile::Attributes)> =
            FxHashMap::with_capacity_and_hasher(events, Default::default());
        let mut stored = Vec::with_capacity(events);
        for e in batches.iter().flatten().rev() {
            let holder = holders[&e.attributes.as_ptr()];
            let later = next.insert(&e.flowfile, (e.id, &e.attributes));
            let attributes = if holder != e.id {
                StoredAttributes::SameAs(holder)
            } else if let Some((base, base_map)) = later.filter(|(base, _)| *base > e.id)
                && let Some((set, removed)) = changes_from(&e.attributes, base_map)
            {
                StoredAttributes::Changed { base, set, removed }
            } else {
                StoredAttributes::Inline(&e.attributes)
            };
            stored.push((e, attributes));
        }
        for (e, attributes) in stored.into_iter().rev() {
            buffer.clear();
            buffer = encode(e, attributes, buffer)?;
            batch.insert(&self.events, e.id.to_be_bytes(), buffer.as_slice());
        }
        // One index entry per flow file and write, not per event: a flow file crossing a
        // stateless group has six events in one write, and the index's random keys are the
        // costliest inserts of the store.
        let mut index: FxHashMap<&str, Vec<u64>> =
            FxHashMap::with_capacity_and_hasher(events, Default::default());
        for e in batches.iter().flatten() {
            for uuid in std::iter::once(e.flowfile.as_str())
                .chain(e.parents.iter().map(String::as_str))
                .chain(e.children.iter().map(String::as_str))
            {
                // Room for a flow file's events of a stateless transaction without regrowing.
                index
                    .entry(uuid)
                    .or_insert_with(|| Vec::with_capacity(8))
                    .push(e.id);
            }
        }
        for (uuid, mut ids) in index {
            ids.sort_unstable();
            ids.dedup();
            let last = ids.pop().expect("a flow file here has an event");
            let mut earlier = Vec::with_capacity(ids.len() * 8);
            for id in &ids {
                earlier.extend_from_slice(&id.to_be_bytes());
            }
            batch.insert(&self.by_flowfile, index_key(uuid, last), earlier);
        }
        add_spans(&mut batch, &self.spans, batches.iter().flatten())?;
        batch.commit()?;
        // The journal holds these events until the next checkpoint; handing them to the OS
        // is enough until then.
        self.keyspace.persist(PersistMode::Buffer)?;
        Ok(())
    }

    /// Checks the store's format; converts a store of format 1: its events, a chunk per store
    /// batch, move to `records` with their spans, then its time and component indexes go.
    fn check_format(&self, meta: &PartitionHandle) -> Result<(), ProvenanceError> {
        let found = meta.get("format")?;
        match found.as_deref() {
            None | Some([FORMAT | FORMAT_2]) => {}
            Some(other) => {
                return Err(ProvenanceError::Format {
                    found: other.first().copied().unwrap_or(0),
                });
            }
        }
        if self.keyspace.partition_exists(FORMAT_1_EVENTS) {
            let old = self
                .keyspace
                .open_partition(FORMAT_1_EVENTS, PartitionCreateOptions::default())?;
            loop {
                let mut chunk = Vec::with_capacity(CONVERTED_SPAN);
                for kv in old.iter().take(CONVERTED_SPAN) {
                    chunk.push(postcard::from_bytes::<ProvenanceEvent>(&kv?.1)?);
                }
                if chunk.is_empty() {
                    break;
                }
                let mut batch = self.keyspace.batch();
                for e in &chunk {
                    let value = encode(e, StoredAttributes::Inline(&e.attributes), Vec::new())?;
                    batch.insert(&self.events, e.id.to_be_bytes(), value);
                    batch.remove(&old, e.id.to_be_bytes());
                }
                add_spans(&mut batch, &self.spans, &chunk)?;
                batch.commit()?;
            }
            self.keyspace.persist(PersistMode::SyncAll)?;
            self.keyspace.delete_partition(old)?;
        }
        for name in FORMAT_1_INDEXES {
            if self.keyspace.partition_exists(name) {
                let old = self
                    .keyspace
                    .open_partition(name, PartitionCreateOptions::default())?;
                self.keyspace.delete_partition(old)?;
            }
        }
        if found.as_deref() != Some(&[FORMAT]) {
            meta.insert("format", [FORMAT])?;
            self.keyspace.persist(PersistMode::SyncAll)?;
        }
        Ok(())
    }

    /// Decodes a stored event, reading its attributes from their holder when it names one.
    fn decode(&self, bytes: &[u8]) -> Result<ProvenanceEvent, ProvenanceError> {
        let mut stored: StoredEvent = postcard::from_bytes(bytes)?;
        let first = std::mem::replace(&mut stored.attributes, StoredAttributes::SameAs(0));
        let attributes = self.resolve(stored.id, first)?;
        Ok(stored.into_event(attributes))
    }

    /// The map of event `id` stored as `attributes`: read through the later events it
    /// refers to (each a larger id, so the walk ends), then their changes applied.
    fn resolve(
        &self,
        id: u64,
        mut attributes: StoredAttributes<crate::flowfile::Attributes, String>,
    ) -> Result<crate::flowfile::Attributes, ProvenanceError> {
        let mut changes: Vec<Changes<String>> = Vec::new();
        let mut at = id;
        let mut map = loop {
            let base = match attributes {
                StoredAttributes::Inline(a) => break a,
                StoredAttributes::SameAs(holder) => holder,
                StoredAttributes::Changed { base, set, removed } => {
                    changes.push((set, removed));
                    base
                }
            };
            let missing = ProvenanceError::MissingAttributes { id, holder: base };
            if base <= at {
                return Err(missing);
            }
            let Some(held) = self.events.get(base.to_be_bytes())? else {
                return Err(missing);
            };
            attributes = postcard::from_bytes::<StoredEvent>(&held)?.attributes;
            at = base;
        };
        // The change nearest the map first, the event's own last.
        for (set, removed) in changes.into_iter().rev() {
            for k in removed {
                map.remove(&k);
            }
            map.extend(set);
        }
        Ok(map)
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
        let meta = keyspace.open_partition("meta", opts())?;
        let store = Store {
            events: keyspace.open_partition("records", opts())?,
            by_flowfile: keyspace.open_partition("by_flowfile", opts())?,
            spans: keyspace.open_partition("spans", opts())?,
            keyspace,
        };
        store.check_format(&meta)?;
        let (writer, batches) = sync_channel::<Vec<ProvenanceEvent>>(WRITER_QUEUE);
        let progress = Arc::new(WriterProgress::default());
        let thread = {
            let (store, progress) = (store.clone(), Arc::clone(&progress));
            std::thread::Builder::new()
                .name("weir-provenance".into())
                .spawn(move || {
                    let mut pending = Vec::new();
                    for events in &batches {
                        // Whatever else is already waiting goes in the same store batch:
                        // one journal write and one span for all of it.
                        pending.push(events);
                        while pending.len() < WRITER_QUEUE {
                            match batches.try_recv() {
                                Ok(more) => pending.push(more),
                                Err(_) => break,
                            }
                        }
                        if let Err(e) = store.write(&pending) {
                            tracing::warn!(
                                "provenance: {} events not indexed (the journal keeps them until the next checkpoint): {e}",
                                pending.iter().map(Vec::len).sum::<usize>()
                            );
                        }
                        let mut counts = progress.counts.lock().unwrap_or_else(|e| e.into_inner());
                        counts.1 += pending.len() as u64;
                        progress.written.notify_all();
                        drop(counts);
                        pending.clear();
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
            Some(v) => Ok(Some(self.store.decode(&v)?)),
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
            let (k, v) = kv?;
            ids.push(id_of(&k));
            // The flow file's earlier events of the same write (format 3).
            ids.extend(
                v.chunks_exact(8)
                    .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes"))),
            );
        }
        Ok(ids)
    }

    /// Id ranges, merged and in order, of the spans that may hold events of `query`'s
    /// component and time.
    fn span_ranges(&self, query: &Query) -> Result<Vec<(u64, u64)>, ProvenanceError> {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for kv in self.store.spans.iter() {
            let (k, v) = kv?;
            let span: Span = postcard::from_bytes(&v)?;
            let matches = query.since_ms.is_none_or(|s| span.max_time_ms >= s)
                && query.until_ms.is_none_or(|u| span.min_time_ms <= u)
                && query
                    .component
                    .as_ref()
                    .is_none_or(|c| span.components.contains(c));
            if matches {
                ranges.push((id_of(&k[..8]), id_of(&k)));
            }
        }
        // Spans are keyed by their first id, so in order; they may overlap (a replayed frame
        // written again, batches handed over out of id order).
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (first, last) in ranges {
            match merged.last_mut() {
                Some(m) if first <= m.1 => m.1 = m.1.max(last),
                _ => merged.push((first, last)),
            }
        }
        Ok(merged)
    }

    /// Events matching `query`, oldest first, at most `limit`.
    ///
    /// A query by flow file reads that flow file's index entries; one by component or time
    /// reads the events of the spans that may match (a batch's worth per span); one with
    /// neither reads every event until `limit`.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn query(
        &self,
        query: &Query,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceError> {
        self.flush();
        let keep =
            |e: &ProvenanceEvent| {
                query.flowfile.as_ref().is_none_or(|f| {
                    e.flowfile == f || e.parents.contains(f) || e.children.contains(f)
                }) && query.component.as_ref().is_none_or(|c| e.component == c)
                    && query.since_ms.is_none_or(|s| e.time_ms >= s)
                    && query.until_ms.is_none_or(|u| e.time_ms <= u)
                    && query.event_type.is_none_or(|t| e.event_type == t)
            };
        let mut out = Vec::new();
        if let Some(ff) = &query.flowfile {
            let mut ids = self.ids_with_prefix(&self.store.by_flowfile, ff)?;
            ids.sort_unstable();
            ids.dedup();
            for id in ids {
                let Some(e) = self.event(id)? else { continue };
                if keep(&e) {
                    out.push(e);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            return Ok(out);
        }
        let ranges =
            if query.component.is_some() || query.since_ms.is_some() || query.until_ms.is_some() {
                self.span_ranges(query)?
            } else {
                vec![(0, u64::MAX)]
            };
        for (first, last) in ranges {
            for kv in self
                .store
                .events
                .range(first.to_be_bytes()..=last.to_be_bytes())
            {
                let e = self.store.decode(&kv?.1)?;
                if keep(&e) {
                    out.push(e);
                    if out.len() >= limit {
                        return Ok(out);
                    }
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
        let mut last_removed = None;
        let mut batch = self.store.keyspace.batch();
        for kv in self.store.events.iter() {
            let (k, v) = kv?;
            // Only the fields the indexes use: the attributes are not needed.
            let e: StoredEvent = postcard::from_bytes(&v)?;
            if e.time_ms >= cutoff && size <= self.max_size {
                break;
            }
            size = size.saturating_sub(v.len() as u64 + 64);
            batch.remove(&self.store.events, k);
            // An index entry goes with the last event it names (its key), the others before.
            for uuid in std::iter::once(e.flowfile.as_str())
                .chain(e.parents.iter().map(String::as_str))
                .chain(e.children.iter().map(String::as_str))
            {
                batch.remove(&self.store.by_flowfile, index_key(uuid, e.id));
            }
            last_removed = Some(e.id);
            removed += 1;
        }
        // Events go oldest id first, so a span ending at or before the last removed id is
        // empty now.
        if let Some(last_removed) = last_removed {
            for kv in self.store.spans.iter() {
                let (k, _) = kv?;
                if id_of(&k[..8]) > last_removed {
                    break;
                }
                if id_of(&k) <= last_removed {
                    batch.remove(&self.store.spans, k);
                }
            }
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
            flowfile: flowfile.into(),
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
            .events
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

    #[test]
    fn a_store_of_the_first_format_is_converted_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        {
            // The first format: events, and an index entry per event by flow file, component
            // and time; no format recorded.
            let keyspace = Config::new(dir.path()).open().unwrap();
            let opts = PartitionCreateOptions::default;
            let events = keyspace.open_partition("events", opts()).unwrap();
            let by_flowfile = keyspace.open_partition("by_flowfile", opts()).unwrap();
            let by_component = keyspace.open_partition("by_component", opts()).unwrap();
            let by_time = keyspace.open_partition("by_time", opts()).unwrap();
            for id in 0..5u64 {
                let e = event(id, "ff-old");
                events
                    .insert(id.to_be_bytes(), postcard::to_allocvec(&e).unwrap())
                    .unwrap();
                by_flowfile.insert(index_key("ff-old", id), []).unwrap();
                by_component.insert(index_key("route", id), []).unwrap();
                let mut time = (e.time_ms as u64).to_be_bytes().to_vec();
                time.extend_from_slice(&id.to_be_bytes());
                by_time.insert(time, []).unwrap();
            }
            keyspace.persist(PersistMode::SyncAll).unwrap();
        }
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        for name in FORMAT_1_INDEXES.into_iter().chain([FORMAT_1_EVENTS]) {
            assert!(!store.store.keyspace.partition_exists(name), "{name} left");
        }
        let q = Query {
            component: Some("route".into()),
            since_ms: Some(1_003),
            ..Query::default()
        };
        assert_eq!(ids(&store.query(&q, usize::MAX).unwrap()), [3, 4]);
        assert_eq!(store.lineage("ff-old").unwrap().events.len(), 5);
        drop(store);
        // Opened again, it is of the current format and nothing is converted twice.
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        assert_eq!(store.store.spans.len().unwrap(), 1);
        assert_eq!(store.len().unwrap(), 5);
    }

    #[test]
    fn a_flow_file_has_one_index_entry_per_write_and_stores_of_format_2_still_read() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
            // Six events of "ff-a" and two of "ff-b", interleaved, in one write.
            let events: Vec<ProvenanceEvent> = (0..8)
                .map(|i| event(i, if i % 4 == 3 { "ff-b" } else { "ff-a" }))
                .collect();
            store.insert(events).unwrap();
            store.len().unwrap();
            assert_eq!(store.store.by_flowfile.len().unwrap(), 2);
            assert_eq!(
                ids(&store.lineage("ff-a").unwrap().events),
                [0, 1, 2, 4, 5, 6]
            );
            // A store of format 2: an index entry per event, with an empty value.
            store
                .store
                .events
                .insert(
                    20u64.to_be_bytes(),
                    encode(
                        &event(20, "ff-a"),
                        StoredAttributes::Inline(&event(20, "ff-a").attributes),
                        Vec::new(),
                    )
                    .unwrap(),
                )
                .unwrap();
            store
                .store
                .by_flowfile
                .insert(index_key("ff-a", 20), [])
                .unwrap();
            let meta = store
                .store
                .keyspace
                .open_partition("meta", PartitionCreateOptions::default())
                .unwrap();
            meta.insert("format", [FORMAT_2]).unwrap();
            store.store.keyspace.persist(PersistMode::SyncAll).unwrap();
        }
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        let q = Query {
            flowfile: Some("ff-a".into()),
            ..Query::default()
        };
        assert_eq!(
            ids(&store.query(&q, usize::MAX).unwrap()),
            [0, 1, 2, 4, 5, 6, 20]
        );
        let meta = store
            .store
            .keyspace
            .open_partition("meta", PartitionCreateOptions::default())
            .unwrap();
        assert_eq!(meta.get("format").unwrap().as_deref(), Some(&[FORMAT][..]));
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
        assert_eq!(store.query(&Query::default(), usize::MAX).unwrap(), events);
        // Only the last event of "ff" holds its map in full: the others are a few bytes.
        let stored = stored_bytes(&store);
        assert!(stored < 2 * 20 * 60, "{stored} bytes");
        // Retention (cutoff 1_004) removes the earliest events, never a base before them.
        assert_eq!(store.enforce_retention(2_004).unwrap(), 4);
        assert_eq!(
            store.query(&Query::default(), usize::MAX).unwrap(),
            events[4..]
        );
        let ff: Vec<ProvenanceEvent> = events[4..]
            .iter()
            .filter(|e| e.flowfile == "ff")
            .cloned()
            .collect();
        assert_eq!(store.lineage("ff").unwrap().events, ff);
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
        assert_eq!(store.query(&Query::default(), usize::MAX).unwrap(), events);
        // Stored once: the three others name the last.
        let stored = stored_bytes(&store);
        assert!(stored < 11_000, "{stored} bytes");
        // Retention (cutoff 1_002) removes the events naming the holder before the holder.
        assert_eq!(store.enforce_retention(2_002).unwrap(), 2);
        assert_eq!(
            store.query(&Query::default(), usize::MAX).unwrap(),
            events[2..]
        );
        assert_eq!(store.lineage("ff").unwrap().events, events[2..]);
    }
}
