//! The engines' sessions (`EngineSession`, the flow API's [`Session`]): a processor's unit
//! of work, committed as one journal frame or rolled back.
//!
//! A session gets flow files from the processor's incoming queues, creates, clones, reads
//! and writes them, sets attributes, and transfers each to a relationship (or removes it).
//! [`Session::commit`] writes one frame holding every change and the provenance events they
//! make, waits until it is durable, and only then moves the flow files into their next
//! queues. [`Session::rollback`] returns what it took to its queues, penalized if asked, and
//! leaves no trace: content written by the session is never referred to.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use super::Shared;
use crate::definition::ComponentKind;
use crate::flowfile::{Attributes, ContentClaim, FlowFile, SmolStr, int_value};
use crate::provenance::{EventType, ProvenanceEvent};
use crate::repository::journal::{FileIdentity, Op, RepositoryError, StateMap, Txn};
use crate::stateless::Transaction;
pub use weir_flow_api::session::{
    BeforeCommitHook, CommitRefused, Committed, Completion, CompletionHook, FlowFileRef, Session,
    SessionError,
};

impl From<RepositoryError> for SessionError {
    fn from(e: RepositoryError) -> SessionError {
        SessionError::Repository(Box::new(e))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Destination {
    Undecided,
    /// The index of one of the component's relationships.
    Relationship(usize),
    Removed,
    /// Back to its queue untouched (MergeContent's bins that are not ready).
    Returned,
}

#[derive(Debug)]
struct Record {
    flowfile: FlowFile,
    /// Where it came from and what it was, for a flow file taken from a queue.
    original: Option<(u32, FlowFile)>,
    destination: Destination,
    /// How it came to be, for a flow file the session created.
    origin: Origin,
    /// Attributes changed since it was taken or since its last explicit event.
    attributes_changed: bool,
    content_changed: bool,
    penalized: bool,
    /// An explicit event (RECEIVE, SEND, ...) already covers it.
    reported: bool,
}

impl Record {
    /// The record of `ff`, just taken from queue `q`.
    fn taken(q: usize, ff: FlowFile) -> Record {
        Record {
            original: Some((q as u32, ff.clone())),
            flowfile: ff,
            destination: Destination::Undecided,
            origin: Origin::Queue,
            attributes_changed: false,
            content_changed: false,
            penalized: false,
            reported: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Origin {
    Queue,
    Created,
    Child(String),
    Clone(String),
    Join(Vec<String>),
}

/// The engines' [`Session`]: in the traditional engine, or inside a stateless group's
/// transaction. See the [module docs](self).
pub(crate) struct EngineSession {
    shared: Arc<Shared>,
    component: usize,
    /// The component's name, made once for the session's events instead of once per event.
    component_name: SmolStr,
    clock: SessionClock,
    /// Set when the session works inside a stateless group's transaction: queues inside the
    /// group and new content are in memory, and the commit is the transaction's.
    transaction: Option<Arc<Transaction>>,
    completions: Vec<CompletionHook>,
    before_commit: Vec<BeforeCommitHook>,
    /// Events recorded only if the work commits (see [`Session::report_on_commit`]).
    commit_only_events: Vec<ProvenanceEvent>,
    records: Vec<Record>,
    expired: Vec<(u32, FlowFile)>,
    events: Vec<ProvenanceEvent>,
    new_claims: Vec<ContentClaim>,
    source_deletions: Vec<(String, FileIdentity)>,
    /// The component's state as set in this session, written with its commit.
    new_state: Option<StateMap>,
}

/// A fresh random uuid, formatted without an intermediate `String`.
pub(crate) fn new_uuid() -> SmolStr {
    let mut buf = uuid::Uuid::encode_buffer();
    SmolStr::new(uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf))
}

/// A new flow file's map: a source's `source_entries` and the core attributes (but
/// `fileSize`, which is derived from the content: see [`crate::flowfile::FILE_SIZE`]), in
/// name order at once (five inserts cost as much as the rest of creating it), with room for
/// a source's few. The source's come first: they mostly sort
/// before the core names (`amqp$...`), so the map is in order as built; a core name among
/// them gives way to the core attribute, and of a source's entries with one name the last is
/// kept.
fn new_attributes(
    source_entries: impl IntoIterator<Item = (SmolStr, SmolStr)>,
    uuid: SmolStr,
    now: i64,
    lineage: i64,
) -> Attributes {
    let mut entries = Vec::with_capacity(16);
    entries.extend(source_entries);
    let entry_date = int_value(now);
    // A new lineage starts now: the same text, formatted once.
    let lineage_start = if lineage == now {
        entry_date.clone()
    } else {
        int_value(lineage)
    };
    Attributes::from_entries_then(
        entries,
        [
            (SmolStr::new_static("entryDate"), entry_date),
            (SmolStr::new_static("filename"), uuid.clone()),
            (SmolStr::new_static("lineageStartDate"), lineage_start),
            (SmolStr::new_static("path"), SmolStr::new_static("./")),
            (SmolStr::new_static("uuid"), uuid),
        ],
    )
}

/// Milliseconds since the epoch. Straight from the system clock: going through a calendar
/// date and back cost three times as much.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A session's reading of the clock for its events' times: read at the first use, then again
/// every [`SessionClock::USES`] uses, at the end of each wait on an outside service, at
/// commit, and whenever the session creates a flow file (whose entry date is read exactly,
/// so that flow files made in different milliseconds are told apart by their dates). A
/// reading costs about 35 ns (a vDSO call); one per event was a thirtieth of a stateless
/// copy's time. An event's time may lag its moment by what the session did for the flow
/// files since the last reading (for a stateless batch, a few microseconds each), and is
/// never before the entry date of a flow file the session created before it.
struct SessionClock {
    /// The clock read ([`now_ms`] but in tests).
    read: fn() -> i64,
    ms: std::cell::Cell<i64>,
    /// Uses since the reading; 0: read at the next use.
    uses: std::cell::Cell<u32>,
}

impl Default for SessionClock {
    fn default() -> SessionClock {
        SessionClock {
            read: now_ms,
            ms: Default::default(),
            uses: Default::default(),
        }
    }
}

impl SessionClock {
    /// Uses of one reading.
    const USES: u32 = 32;

    /// The time, in milliseconds since the epoch.
    fn now_ms(&self) -> i64 {
        let uses = self.uses.get();
        if uses == 0 {
            self.ms.set((self.read)());
        }
        self.uses.set((uses + 1) % Self::USES);
        self.ms.get()
    }

    /// The time read now, and kept for the uses after this one.
    fn read_now(&self) -> i64 {
        let now = (self.read)();
        self.ms.set(now);
        self.uses.set(1);
        now
    }

    /// The next use reads the clock again.
    fn refresh(&self) {
        self.uses.set(0);
    }
}

impl EngineSession {
    pub(crate) fn new(shared: Arc<Shared>, component: usize) -> EngineSession {
        EngineSession {
            component_name: SmolStr::new(&shared.flow.processors[component].name),
            clock: SessionClock::default(),
            shared,
            component,
            transaction: None,
            completions: Vec::new(),
            before_commit: Vec::new(),
            commit_only_events: Vec::new(),
            records: Vec::new(),
            expired: Vec::new(),
            events: Vec::new(),
            new_claims: Vec::new(),
            source_deletions: Vec::new(),
            new_state: None,
        }
    }

    /// A session inside a stateless transaction.
    pub(crate) fn in_transaction(
        shared: Arc<Shared>,
        component: usize,
        transaction: Arc<Transaction>,
    ) -> EngineSession {
        let mut s = EngineSession::new(shared, component);
        s.transaction = Some(transaction);
        s
    }

    fn push_new(&mut self, flowfile: FlowFile, origin: Origin) -> FlowFileRef {
        self.records.push(Record {
            flowfile,
            original: None,
            destination: Destination::Undecided,
            origin,
            attributes_changed: false,
            content_changed: false,
            penalized: false,
            reported: false,
        });
        FlowFileRef::new(self.records.len() - 1)
    }

    fn fresh(&self, attributes: Attributes, lineage_start: Option<i64>) -> FlowFile {
        self.fresh_with(attributes, lineage_start, [])
    }

    /// [`fresh`](Self::fresh); when `attributes` is empty, a source's own `source_entries`
    /// join the core attributes in the same map.
    fn fresh_with(
        &self,
        mut attributes: Attributes,
        lineage_start: Option<i64>,
        source_entries: impl IntoIterator<Item = (SmolStr, SmolStr)>,
    ) -> FlowFile {
        let now = self.clock.read_now();
        let uuid = new_uuid();
        let lineage = lineage_start.unwrap_or(now);
        if attributes.is_empty() {
            attributes = new_attributes(source_entries, uuid, now, lineage);
        } else {
            attributes.insert("uuid", uuid.clone());
            attributes.insert_if_absent("filename", || uuid);
            attributes.insert_if_absent("path", || SmolStr::new_static("./"));
            attributes.insert("entryDate", int_value(now));
            attributes.insert("lineageStartDate", int_value(lineage));
            // Derived from the content; a copied map may still hold an old one.
            attributes.remove(crate::flowfile::FILE_SIZE);
        }
        FlowFile {
            id: self.shared.repo.next_id(),
            attributes,
            claim: None,
            entry_date: now,
            lineage_start: lineage,
            queue_seq: 0,
        }
    }

    /// The transaction holding this session's in-memory content.
    fn memory(&self) -> Result<&Transaction, SessionError> {
        self.transaction.as_deref().ok_or_else(|| {
            SessionError::Content(io::Error::other(
                "in-memory content outside a stateless transaction",
            ))
        })
    }

    /// Holds `data` as new content: in a stateless transaction's memory as it is, else
    /// written to the content repository and remembered as this session's (a rollback
    /// releases it). `None` for no bytes.
    fn store(&mut self, data: bytes::Bytes) -> Result<Option<ContentClaim>, SessionError> {
        if data.is_empty() {
            return Ok(None);
        }
        if let Some(t) = &self.transaction {
            return Ok(Some(t.write(data)));
        }
        self.write_to_repository(&data).map(Some)
    }

    /// Writes `data` to the content repository as one of this session's new claims (a
    /// rollback releases it).
    fn write_to_repository(&mut self, data: &[u8]) -> Result<ContentClaim, SessionError> {
        let c = self.shared.repo.content().write(data)?;
        self.new_claims.push(c);
        Ok(c)
    }

    /// Gives `ff` the content `claim`, just written (and, when in the repository, already
    /// among the session's new claims). Its `fileSize` follows: it is derived, not set.
    fn set_claim(&mut self, ff: FlowFileRef, claim: Option<ContentClaim>) {
        let r = &mut self.records[ff.index()];
        r.flowfile.claim = claim;
        r.content_changed = true;
    }

    fn event(
        &self,
        ff: &FlowFile,
        event_type: EventType,
        details: Option<SmolStr>,
        transit_uri: Option<SmolStr>,
    ) -> ProvenanceEvent {
        let c = &self.shared.flow.processors[self.component];
        ProvenanceEvent {
            id: 0,
            event_type,
            time_ms: self.clock.now_ms(),
            flowfile: ff.shared_uuid(),
            component: self.component_name.clone(),
            component_type: SmolStr::new_static(c.type_name()),
            attributes: ff.attributes.clone(),
            size: ff.size(),
            parents: vec![],
            children: vec![],
            details,
            transit_uri,
        }
    }

    /// Commits: one durable frame, then the flow files move on. Returns how many flow files
    /// and content bytes it took in and sent out.
    ///
    /// # Errors
    /// [`SessionError`]; the session is rolled back (inputs back in their queues, not
    /// penalized) before the error is returned.
    pub fn commit(mut self) -> Result<Committed, SessionError> {
        match self.build() {
            Ok(plan) => self.finish(plan),
            Err(e) => {
                self.rollback(false);
                Err(e)
            }
        }
    }

    fn build(&mut self) -> Result<Plan, SessionError> {
        // The events made here carry the commit's time.
        self.clock.refresh();
        let shared = Arc::clone(&self.shared);
        let comp = &shared.flow.processors[self.component];
        let mut plan = Plan::default();
        plan.enqueue.reserve(self.records.len());
        // Derived events first (FORK/JOIN/CLONE), grouped per parent.
        let mut forks: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut events = std::mem::take(&mut self.events);
        // About an event per flow file in all, counting those reported already (growing a
        // vector of events copies them).
        events.reserve(self.records.len().saturating_sub(events.len()));
        for r in &self.records {
            if r.destination == Destination::Undecided {
                return Err(SessionError::NotTransferred(r.flowfile.uuid().to_string()));
            }
            match &r.origin {
                Origin::Child(p) => forks
                    .entry(p.clone())
                    .or_default()
                    .push(r.flowfile.uuid().to_string()),
                Origin::Clone(p) => {
                    let mut e = self.event(&r.flowfile, EventType::CLONE, None, None);
                    e.flowfile = SmolStr::new(p);
                    e.parents = vec![p.clone()];
                    e.children = vec![r.flowfile.uuid().to_string()];
                    events.push(e);
                }
                Origin::Join(parents) => {
                    let mut e = self.event(&r.flowfile, EventType::JOIN, None, None);
                    e.parents = parents.clone();
                    e.children = vec![r.flowfile.uuid().to_string()];
                    events.push(e);
                }
                Origin::Created if !r.reported => {
                    events.push(self.event(&r.flowfile, EventType::CREATE, None, None))
                }
                Origin::Created => {}
                Origin::Queue => {
                    if r.content_changed {
                        events.push(self.event(
                            &r.flowfile,
                            EventType::CONTENT_MODIFIED,
                            None,
                            None,
                        ));
                    } else if r.attributes_changed {
                        // As NiFi: every event carries the attributes, so ATTRIBUTES_MODIFIED
                        // only when no explicit event already shows the changed ones.
                        events.push(self.event(
                            &r.flowfile,
                            EventType::ATTRIBUTES_MODIFIED,
                            None,
                            None,
                        ));
                    }
                }
            }
        }
        for (parent, children) in forks {
            let parent_ff = self
                .records
                .iter()
                .find(|r| r.flowfile.uuid() == parent)
                .map(|r| r.flowfile.clone());
            let mut e = match &parent_ff {
                Some(p) => self.event(p, EventType::FORK, None, None),
                None => self.event(&self.records[0].flowfile, EventType::FORK, None, None),
            };
            e.flowfile = SmolStr::new(&parent);
            e.parents = vec![parent];
            e.children = children;
            events.push(e);
        }
        let penalty_until = Instant::now() + comp.penalty;
        // Inside a stateless transaction nothing goes to the journal here: the transaction
        // moves the flow files in memory and journals only what leaves the group, at its
        // commit (with their enqueue sequence then).
        let journaled = self.transaction.is_none();
        // The connections of each relationship, looked up once per session.
        let routes: Vec<Vec<usize>> = comp
            .relationships
            .iter()
            .map(|rel| {
                shared.outgoing[self.component]
                    .iter()
                    .copied()
                    .filter(|&c| {
                        shared.flow.connections[c]
                            .relationships
                            .iter()
                            .any(|x| x == rel)
                    })
                    .collect()
            })
            .collect();
        let mut auto_terminated: Vec<Option<SmolStr>> = vec![None; comp.relationships.len()];
        let records = std::mem::take(&mut self.records);
        for r in &records {
            if r.destination == Destination::Returned {
                if let Some((q, orig)) = &r.original {
                    plan.returned.push((*q, orig.clone()));
                }
                continue;
            }
            if let Some((q, orig)) = &r.original
                && journaled
            {
                plan.acks.push((*q as usize, orig.size()));
                if let Some(c) = orig.claim {
                    plan.ref_changes.push((c.file, -1));
                }
            }
            let destinations: &[usize] = match &r.destination {
                Destination::Relationship(i) => &routes[*i],
                _ => &[],
            };
            if destinations.is_empty() {
                // Removed, or auto-terminated.
                if r.original.is_some() || r.origin != Origin::Queue {
                    let detail = match &r.destination {
                        // Formatted once per relationship and session, shared per flow file.
                        Destination::Relationship(i) => Some(
                            auto_terminated[*i]
                                .get_or_insert_with(|| {
                                    SmolStr::from(format!(
                                        "Auto-Terminated by {} Relationship",
                                        comp.relationships[*i]
                                    ))
                                })
                                .clone(),
                        ),
                        _ => None,
                    };
                    events.push(self.event(&r.flowfile, EventType::DROP, detail, None));
                }
                if r.original.is_some() && journaled {
                    plan.ops.push(Op::Delete { id: r.flowfile.id });
                }
                continue;
            }
            for (i, &conn) in destinations.iter().enumerate() {
                let mut ff = r.flowfile.clone();
                if i > 0 {
                    // One relationship, several connections: each gets a clone.
                    ff.id = shared.repo.next_id();
                    let uuid = new_uuid();
                    let mut e = self.event(&r.flowfile, EventType::CLONE, None, None);
                    e.parents = vec![r.flowfile.uuid().to_string()];
                    e.children = vec![uuid.to_string()];
                    events.push(e);
                    ff.attributes.insert("uuid", uuid);
                }
                if journaled {
                    ff.queue_seq = shared.repo.next_seq();
                    if let Some(c) = ff.claim {
                        plan.ref_changes.push((c.file, 1));
                    }
                    plan.ops.push(Op::Put {
                        queue: conn as u32,
                        flowfile: ff.clone(),
                    });
                }
                plan.committed.bytes_out += ff.size();
                plan.enqueue
                    .push((conn, ff, r.penalized.then_some(penalty_until)));
                plan.committed.flowfiles_out += 1;
            }
        }
        self.records = records;
        for (q, ff) in &self.expired {
            plan.acks.push((*q as usize, ff.size()));
            if let Some(c) = ff.claim {
                plan.ref_changes.push((c.file, -1));
            }
            plan.ops.push(Op::Delete { id: ff.id });
            let mut e = self.event(
                ff,
                EventType::EXPIRE,
                Some("Expiration Threshold exceeded".into()),
                None,
            );
            e.component = SmolStr::new(&shared.flow.connections[*q as usize].key);
            e.component_type = "Connection".into();
            events.push(e);
        }
        // The session's holds on the content it wrote end with the commit: what it sent on
        // is counted above, per flow file, in the same net change.
        plan.ref_changes
            .extend(self.new_claims.iter().map(|c| (c.file, -1)));
        plan.ops.extend(self.post_commit_ops());
        plan.events = events;
        for (_, original) in self
            .records
            .iter()
            .filter(|r| r.destination != Destination::Returned)
            .filter_map(|r| r.original.as_ref())
        {
            plan.committed.flowfiles_in += 1;
            plan.committed.bytes_in += original.size();
        }
        Ok(plan)
    }

    /// The ops the session's frame holds besides its flow files: source files to delete
    /// once it is durable, and the component's new state.
    fn post_commit_ops(&mut self) -> Vec<Op> {
        let state = self.new_state.take().map(|state| Op::SetState {
            component: self.component_name.to_string(),
            state,
        });
        std::mem::take(&mut self.source_deletions)
            .into_iter()
            .map(|(path, identity)| Op::DeleteSource { path, identity })
            .chain(state)
            .collect()
    }

    fn finish(mut self, plan: Plan) -> Result<Committed, SessionError> {
        if let Some(t) = self.transaction.take() {
            debug_assert!(
                self.new_claims.is_empty(),
                "a transaction's content is in its memory"
            );
            // By reference: most originals come from the group's own queues and are not
            // kept, and moving every record out to drop it costs a copy of each.
            let taken = self
                .records
                .iter()
                .filter(|r| r.destination != Destination::Returned)
                .filter_map(|r| r.original.as_ref())
                .filter(|(q, _)| !t.is_internal(*q as usize))
                .cloned()
                .collect();
            self.records.clear();
            let expired = std::mem::take(&mut self.expired);
            // The deletions and the new state were made into ops by `build`: they wait for
            // the group's commit.
            let repository_ops = plan
                .ops
                .into_iter()
                .filter(|op| matches!(op, Op::DeleteSource { .. } | Op::SetState { .. }))
                .collect();
            t.absorb(
                crate::stateless::Absorbed {
                    enqueue: plan.enqueue,
                    returned: plan.returned,
                    events: plan.events,
                    commit_only_events: std::mem::take(&mut self.commit_only_events),
                    taken,
                    expired,
                    completions: std::mem::take(&mut self.completions),
                    before_commit: std::mem::take(&mut self.before_commit),
                    repository_ops,
                },
                &self.shared,
            );
            return Ok(plan.committed);
        }
        let shared = Arc::clone(&self.shared);
        let mut returned: BTreeMap<u32, Vec<FlowFile>> = BTreeMap::new();
        for (q, ff) in plan.returned {
            returned.entry(q).or_default().push(ff);
        }
        self.records
            .retain(|r| r.destination != Destination::Returned);
        for (q, list) in returned {
            shared.queues[q as usize].requeue(list, None);
        }
        if let Err(e) = run_before_commit(std::mem::take(&mut self.before_commit)) {
            self.rollback(false);
            return Err(SessionError::BeforeCommit(e));
        }
        if plan.ops.is_empty() && plan.events.is_empty() {
            self.records.clear();
            // Content written for flow files given back goes with the holds on it.
            shared.repo.content().adjust_refs(&plan.ref_changes);
            self.new_claims.clear();
            for hook in self.completions.drain(..) {
                hook(Completion::Committed);
            }
            return Ok(Committed::default());
        }
        let events = match shared.repo.commit(Txn {
            ops: plan.ops,
            events: plan.events,
        }) {
            Ok(e) => e,
            Err(e) => {
                self.rollback(false);
                return Err(e.into());
            }
        };
        shared.repo.content().adjust_refs(&plan.ref_changes);
        // Provenance before the flow files move on: whoever sees one in its next queue (an
        // observer, a test) and then queries provenance finds its events.
        if let Err(e) = shared.provenance.insert(events) {
            tracing::warn!("provenance insert failed (the journal keeps the events): {e}");
        }
        let mut acks: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
        for (q, bytes) in plan.acks {
            let a = acks.entry(q).or_default();
            a.0 += 1;
            a.1 += bytes;
        }
        for (q, (n, bytes)) in acks {
            shared.queues[q].acknowledge(n, bytes);
            shared.wake_upstream(q);
        }
        let mut by_queue: BTreeMap<usize, Vec<(FlowFile, Option<Instant>)>> = BTreeMap::new();
        for (q, ff, until) in plan.enqueue {
            by_queue.entry(q).or_default().push((ff, until));
        }
        for (q, list) in by_queue {
            if let Err(e) = shared.queues[q].enqueue_with_penalties(&shared.repo, list) {
                shared.fail(format!(
                    "swapping out queue {}: {e}",
                    shared.flow.connections[q].key
                ));
            }
            shared.wake_downstream(q);
        }
        for hook in self.completions.drain(..) {
            hook(Completion::Committed);
        }
        self.records.clear();
        // Committed as EXPIRE: dropping the session must not give them back.
        self.expired.clear();
        self.new_claims.clear();
        shared.note_activity();
        Ok(plan.committed)
    }

    /// Rolls back: flow files taken go back to their queues (penalized for the processor's
    /// penalty if `penalize`), new content is released.
    pub fn rollback(mut self, penalize: bool) {
        self.rollback_in_place(penalize);
    }

    fn rollback_in_place(&mut self, penalize: bool) {
        self.before_commit.clear();
        self.commit_only_events.clear();
        if let Some(t) = self.transaction.take() {
            // Inside a stateless transaction a processor's rollback rolls back the whole
            // transaction: what the session took from outside the group and its hooks go to
            // the transaction, which settles them.
            // Expired flow files were taken too (counted in flight): they go back with the
            // rest, and expire at a later try.
            let taken = self
                .records
                .drain(..)
                .filter_map(|r| r.original)
                .filter(|(q, _)| !t.is_internal(*q as usize))
                .chain(self.expired.drain(..))
                .collect();
            t.absorb_rollback(
                taken,
                std::mem::take(&mut self.completions),
                std::mem::take(&mut self.events),
            );
            return;
        }
        let penalty = self.shared.flow.processors[self.component].penalty;
        for hook in self.completions.drain(..) {
            hook(Completion::RolledBack {
                penalty: penalize.then_some(penalty),
            });
        }
        let until =
            penalize.then(|| Instant::now() + self.shared.flow.processors[self.component].penalty);
        let mut by_queue: BTreeMap<u32, Vec<FlowFile>> = BTreeMap::new();
        for r in self.records.drain(..) {
            if let Some((q, orig)) = r.original {
                by_queue.entry(q).or_default().push(orig);
            }
        }
        for (q, ff) in self.expired.drain(..) {
            by_queue.entry(q).or_default().push(ff);
        }
        for (q, list) in by_queue {
            self.shared.queues[q as usize].requeue(list, until);
            self.shared.wake_downstream(q as usize);
        }
        self.shared
            .repo
            .content()
            .release_uncommitted(&self.new_claims);
        self.new_claims.clear();
        self.events.clear();
        self.source_deletions.clear();
        self.new_state = None;
    }
}

impl Session for EngineSession {
    fn component_name(&self) -> &str {
        &self.shared.flow.processors[self.component].name
    }

    fn get(&mut self) -> Result<Option<FlowFileRef>, SessionError> {
        Ok(self.get_batch(1)?.into_iter().next())
    }

    fn get_batch(&mut self, max: usize) -> Result<Vec<FlowFileRef>, SessionError> {
        let mut out = Vec::new();
        let now = Instant::now();
        for &q in &self.shared.incoming[self.component] {
            if out.len() >= max {
                break;
            }
            let room = max - out.len();
            if let Some(t) = self.transaction.as_ref().filter(|t| t.is_internal(q)) {
                let (records, events) = (&mut self.records, &mut self.events);
                t.poll_with(q, room, |taken| {
                    // Room for the batch and about an event per flow file, at once: grown a
                    // step at a time, these were reallocated about seven times for 100.
                    out.reserve(taken.len());
                    records.reserve(taken.len());
                    events.reserve(taken.len());
                    for ff in taken {
                        out.push(FlowFileRef::new(records.len()));
                        records.push(Record::taken(q, ff));
                    }
                });
                continue;
            }
            let (got, expired) = self.shared.queues[q].poll(&self.shared.repo, room, now)?;
            self.expired
                .extend(expired.into_iter().map(|f| (q as u32, f)));
            out.reserve(got.len());
            self.records.reserve(got.len());
            self.events.reserve(got.len());
            for ff in got {
                out.push(FlowFileRef::new(self.records.len()));
                self.records.push(Record::taken(q, ff));
            }
        }
        Ok(out)
    }

    fn reserve(&mut self, flowfiles: usize) {
        self.records.reserve(flowfiles);
        self.events.reserve(flowfiles);
    }

    fn create(&mut self) -> FlowFileRef {
        let ff = self.fresh(Attributes::new(), None);
        self.push_new(ff, Origin::Created)
    }

    fn create_from(
        &mut self,
        attributes: &mut dyn Iterator<Item = (SmolStr, SmolStr)>,
        content: bytes::Bytes,
    ) -> Result<FlowFileRef, SessionError> {
        let claim = self.store(content)?;
        let mut ff = self.fresh_with(Attributes::new(), None, attributes);
        ff.claim = claim;
        Ok(self.push_new(ff, Origin::Created))
    }

    fn create_child(&mut self, parent: FlowFileRef) -> FlowFileRef {
        let p = &self.records[parent.index()].flowfile;
        let (attrs, lineage, puuid) = (p.attributes.clone(), p.lineage_start, p.uuid().to_string());
        let ff = self.fresh(attrs, Some(lineage));
        self.push_new(ff, Origin::Child(puuid))
    }

    fn create_joined(&mut self, parents: &[FlowFileRef]) -> FlowFileRef {
        let mut common: Option<Attributes> = None;
        let mut lineage = i64::MAX;
        for p in parents {
            let ff = &self.records[p.index()].flowfile;
            lineage = lineage.min(ff.lineage_start);
            match &mut common {
                None => common = Some(ff.attributes.clone()),
                Some(c) => c.retain(|k, v| ff.attributes.get(k) == Some(v)),
            }
        }
        let uuids = parents
            .iter()
            .map(|p| self.records[p.index()].flowfile.uuid().to_string())
            .collect();
        let ff = self.fresh(common.unwrap_or_default(), Some(lineage));
        self.push_new(ff, Origin::Join(uuids))
    }

    fn clone_flowfile(&mut self, original: FlowFileRef) -> FlowFileRef {
        let o = self.records[original.index()].flowfile.clone();
        let mut ff = self.fresh(o.attributes.clone(), Some(o.lineage_start));
        ff.claim = o.claim;
        self.push_new(ff, Origin::Clone(o.uuid().to_string()))
    }

    fn flowfile(&self, ff: FlowFileRef) -> &FlowFile {
        &self.records[ff.index()].flowfile
    }

    fn wait_on(
        &self,
        runtime: &tokio::runtime::Handle,
        work: Pin<&mut (dyn Future<Output = ()> + '_)>,
    ) {
        // Events after the wait read the clock again.
        self.clock.refresh();
        let Some(txn) = &self.transaction else {
            return runtime.block_on(work);
        };
        runtime.block_on(async {
            let mut work = std::pin::pin!(work);
            let first =
                std::future::poll_fn(|cx| std::task::Poll::Ready(work.as_mut().poll(cx))).await;
            if let std::task::Poll::Ready(done) = first {
                return done;
            }
            txn.work_ahead();
            work.await
        })
    }

    fn attribute(&self, ff: FlowFileRef, name: &str) -> Option<Cow<'_, str>> {
        self.records[ff.index()].flowfile.attribute(name)
    }

    fn set_attribute(&mut self, ff: FlowFileRef, name: SmolStr, value: SmolStr) {
        if name == "uuid" {
            return;
        }
        let r = &mut self.records[ff.index()];
        r.flowfile.attributes.insert(name, value);
        r.attributes_changed = true;
    }

    fn remove_attribute(&mut self, ff: FlowFileRef, name: &str) {
        let r = &mut self.records[ff.index()];
        if r.flowfile.attributes.remove(name).is_some() {
            r.attributes_changed = true;
        }
    }

    fn read(&self, ff: FlowFileRef) -> Result<bytes::Bytes, SessionError> {
        match &self.records[ff.index()].flowfile.claim {
            None => Ok(bytes::Bytes::new()),
            Some(c) if Transaction::is_memory_claim(c) => Ok(self.memory()?.read(c)),
            Some(c) => Ok(self.shared.repo.content().read(c)?.into()),
        }
    }

    fn read_into(&self, ff: FlowFileRef, f: &mut dyn FnMut(&[u8])) -> Result<(), SessionError> {
        match &self.records[ff.index()].flowfile.claim {
            None => {
                f(&[]);
                Ok(())
            }
            Some(c) if Transaction::is_memory_claim(c) => {
                self.memory()?.read_with(c, |b| f(b.map_or(&[], |b| b)));
                Ok(())
            }
            Some(c) => {
                f(&self.shared.repo.content().read(c)?);
                Ok(())
            }
        }
    }

    fn write(&mut self, ff: FlowFileRef, data: &[u8]) -> Result<(), SessionError> {
        if self.transaction.is_some() {
            // Held in memory: one copy into a buffer of its own.
            return self.write_bytes(ff, bytes::Bytes::copy_from_slice(data));
        }
        let claim = if data.is_empty() {
            None
        } else {
            Some(self.write_to_repository(data)?)
        };
        self.set_claim(ff, claim);
        Ok(())
    }

    fn write_bytes(&mut self, ff: FlowFileRef, data: bytes::Bytes) -> Result<(), SessionError> {
        let claim = self.store(data)?;
        self.set_claim(ff, claim);
        Ok(())
    }

    fn write_from(
        &mut self,
        ff: FlowFileRef,
        source: &mut std::fs::File,
        len_hint: u64,
    ) -> Result<(), SessionError> {
        if self.transaction.is_some() {
            let mut data = Vec::with_capacity(len_hint as usize);
            io::Read::read_to_end(source, &mut data)?;
            return self.write_bytes(ff, data.into());
        }
        let claim = self.shared.repo.content().write_from(source, len_hint)?;
        self.new_claims.push(claim);
        let claim = (claim.len > 0).then_some(claim);
        let r = &mut self.records[ff.index()];
        r.flowfile.claim = claim;
        r.content_changed = true;
        Ok(())
    }

    fn export(&self, ff: FlowFileRef, out: &mut std::fs::File) -> Result<(), SessionError> {
        match &self.records[ff.index()].flowfile.claim {
            None => Ok(()),
            Some(c) if Transaction::is_memory_claim(c) => {
                let memory = self.memory()?;
                Ok(memory.read_with(c, |b| io::Write::write_all(out, b.map_or(&[], |b| b)))?)
            }
            Some(c) => Ok(self.shared.repo.content().copy_to(c, out)?),
        }
    }

    fn transfer(&mut self, ff: FlowFileRef, relationship: &str) -> Result<(), SessionError> {
        let Some(i) = self.shared.flow.processors[self.component]
            .relationships
            .iter()
            .position(|r| r == relationship)
        else {
            return Err(SessionError::UnknownRelationship(relationship.to_string()));
        };
        self.records[ff.index()].destination = Destination::Relationship(i);
        Ok(())
    }

    fn give_back(&mut self, ff: FlowFileRef) {
        if self.records[ff.index()].original.is_some() {
            self.records[ff.index()].destination = Destination::Returned;
        }
    }

    fn remove(&mut self, ff: FlowFileRef) {
        self.records[ff.index()].destination = Destination::Removed;
    }

    fn penalize(&mut self, ff: FlowFileRef) {
        self.records[ff.index()].penalized = true;
    }

    fn report_on_commit(
        &mut self,
        ff: FlowFileRef,
        event_type: EventType,
        transit_uri: Option<SmolStr>,
        details: Option<SmolStr>,
    ) {
        if self.transaction.is_none() {
            return self.report(ff, event_type, transit_uri, details);
        }
        self.records[ff.index()].attributes_changed = false;
        let e = self.event(
            &self.records[ff.index()].flowfile,
            event_type,
            details,
            transit_uri,
        );
        self.commit_only_events.push(e);
    }

    fn report(
        &mut self,
        ff: FlowFileRef,
        event_type: EventType,
        transit_uri: Option<SmolStr>,
        details: Option<SmolStr>,
    ) {
        if matches!(
            event_type,
            EventType::RECEIVE | EventType::CREATE | EventType::FETCH
        ) {
            self.records[ff.index()].reported = true;
        }
        // The event carries the attributes as they are now.
        self.records[ff.index()].attributes_changed = false;
        let e = self.event(
            &self.records[ff.index()].flowfile,
            event_type,
            details,
            transit_uri,
        );
        self.events.push(e);
    }

    fn len(&self) -> usize {
        self.records.len()
    }

    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.expired.is_empty()
    }

    fn add_completion_hook(&mut self, hook: CompletionHook) {
        self.completions.push(hook);
    }

    fn add_before_commit_hook(&mut self, hook: BeforeCommitHook) {
        self.before_commit.push(hook);
    }

    fn delete_source_on_commit(&mut self, path: String, identity: FileIdentity) {
        self.source_deletions.push((path, identity));
    }

    fn state(&self) -> StateMap {
        if let Some(state) = &self.new_state {
            return state.clone();
        }
        let name = &self.component_name;
        self.transaction
            .as_ref()
            .and_then(|t| t.pending_state(name))
            .unwrap_or_else(|| self.shared.repo.state(name))
    }

    fn set_state(&mut self, state: StateMap) {
        self.new_state = Some(state);
    }

    fn is_pass_through(&self) -> bool {
        matches!(
            self.shared.flow.processors[self.component].kind,
            ComponentKind::Port
        )
    }

    fn commit(self: Box<Self>) -> Result<Committed, SessionError> {
        EngineSession::commit(*self)
    }

    fn rollback(self: Box<Self>, penalize: bool) {
        EngineSession::rollback(*self, penalize);
    }
}

/// Runs `hooks` in order, all of them; the first error.
pub(crate) fn run_before_commit(hooks: Vec<BeforeCommitHook>) -> Result<(), CommitRefused> {
    let mut result = Ok(());
    for hook in hooks {
        if let Err(e) = hook()
            && result.is_ok()
        {
            result = Err(e);
        }
    }
    result
}

impl Drop for EngineSession {
    fn drop(&mut self) {
        // A session dropped without commit (a panic unwinding through the processor) rolls
        // back, penalized.
        if !self.records.is_empty() || !self.expired.is_empty() || !self.completions.is_empty() {
            self.rollback_in_place(true);
        }
    }
}

#[derive(Default)]
struct Plan {
    ops: Vec<Op>,
    events: Vec<ProvenanceEvent>,
    acks: Vec<(usize, u64)>,
    enqueue: Vec<(usize, FlowFile, Option<Instant>)>,
    ref_changes: Vec<(u64, i64)>,
    returned: Vec<(u32, FlowFile)>,
    committed: Committed,
}

#[cfg(test)]
mod tests {
    use super::{SmolStr, new_attributes};

    /// A stateless transaction that rolls back gives back the expired flow files its session
    /// took (they were counted in flight), instead of dropping them: they expire at a later
    /// try, once, and the queue's count comes back to zero.
    #[test]
    fn a_stateless_rollback_gives_back_the_expired_flow_files_it_took() {
        use crate::engine::Engine;
        use crate::flowfile::FlowFile;
        use crate::stateless::Transaction;
        use std::sync::Arc;
        use weir_flow_api::session::Session as _;
        let dir = tempfile::tempdir().unwrap();
        // The sink stopped: nothing but the session below takes from its queue.
        let yaml = "flow: x\nsettings: { sync: none }\ngroups:\n  - name: g\n    processors:\n      - { name: gen, type: GenerateFlowFile, schedule: { strategy: timer, period: 1 h } }\n      - { name: sink, type: UpdateAttribute, auto_terminate: [success] }\n    connections:\n      - { from: gen, relationships: [success], to: sink, expiration: 1 s }\n";
        let flow = crate::definition::Flow::parse(yaml, "x.yaml").unwrap();
        let engine = Engine::start(flow, dir.path()).unwrap();
        engine.monitor().set_running("sink", false).unwrap();
        let shared = Arc::clone(&engine.shared);
        let (q, sink) = (0, shared.flow.component("sink").unwrap());
        let old = FlowFile {
            id: shared.repo.next_id(),
            attributes: Default::default(),
            claim: None,
            entry_date: chrono::Utc::now().timestamp_millis() - 3_600_000,
            lineage_start: 0,
            queue_seq: shared.repo.next_seq(),
        };
        // Taken by a session of the port inside a transaction of our own, before the group's
        // copy can: the queue's lock orders the two.
        let internal = Arc::new(vec![false; shared.flow.connections.len()]);
        let backlog = Arc::new(crate::stateless::ProvenanceBacklog::new(Arc::clone(
            &shared.provenance,
        )));
        let txn = Arc::new(Transaction::new(internal, Arc::new([]), backlog));
        let mut session =
            super::EngineSession::in_transaction(Arc::clone(&shared), sink, Arc::clone(&txn));
        shared.queues[q].enqueue(&shared.repo, vec![old]).unwrap();
        // The generator's flow file too, if it came already: fresh.
        let got = session.get_batch(10).unwrap();
        assert_eq!(session.expired.len(), 1, "taken as expired");
        session.rollback(true);
        let parts = txn.take_parts();
        assert_eq!(
            parts.taken.len(),
            got.len() + 1,
            "the expired flow file is among what goes back"
        );
        engine.stop().unwrap();
    }

    fn entries(list: &[(&str, &str)]) -> Vec<(SmolStr, SmolStr)> {
        list.iter()
            .map(|(k, v)| (SmolStr::new(k), SmolStr::new(v)))
            .collect()
    }

    #[test]
    fn a_new_map_holds_the_sources_entries_and_the_core_attributes_in_name_order() {
        let uuid = SmolStr::new("0b6f0c55-60b5-4d8b-9f7e-4f3c4b2f1a11");
        let map = new_attributes(
            entries(&[("amqp$exchange", "ex"), ("amqp$routingKey", "q.even")]),
            uuid.clone(),
            1_000,
            900,
        );
        let names: Vec<&str> = map.keys().collect();
        assert_eq!(
            names,
            [
                "amqp$exchange",
                "amqp$routingKey",
                "entryDate",
                "filename",
                "lineageStartDate",
                "path",
                "uuid"
            ]
        );
        assert_eq!(map.get("amqp$routingKey"), Some("q.even"));
        assert_eq!(map.get("entryDate"), Some("1000"));
        assert_eq!(map.get("lineageStartDate"), Some("900"));
        assert_eq!(map.get("filename"), Some(uuid.as_str()));
    }

    #[test]
    fn a_source_cannot_replace_core_attributes_and_its_last_entry_of_a_name_wins() {
        let uuid = SmolStr::new("0b6f0c55-60b5-4d8b-9f7e-4f3c4b2f1a11");
        let map = new_attributes(
            entries(&[
                ("uuid", "forged"),
                ("zeta", "1"),
                ("filename", "forged"),
                ("jetstream.subject", "a"),
                ("zeta", "2"),
            ]),
            uuid.clone(),
            1_000,
            1_000,
        );
        assert_eq!(map.get("uuid"), Some(uuid.as_str()));
        assert_eq!(map.get("filename"), Some(uuid.as_str()));
        assert_eq!(map.get("zeta"), Some("2"));
        assert_eq!(map.get("jetstream.subject"), Some("a"));
        assert_eq!(map.get("lineageStartDate"), Some("1000"));
        // Derived from the content, not held (see `FlowFile::attribute`).
        assert_eq!(map.get("fileSize"), None);
        assert_eq!(map.len(), 7);
        let names: Vec<&str> = map.keys().collect();
        assert!(names.is_sorted(), "{names:?}");
    }
    #[test]
    fn event_times_agree_with_the_calendar_clock() {
        let before = chrono::Utc::now().timestamp_millis();
        let now = super::now_ms();
        let after = chrono::Utc::now().timestamp_millis();
        assert!(
            before <= now && now <= after,
            "{before} <= {now} <= {after}"
        );
    }

    #[test]
    fn a_sessions_clock_reads_again_after_its_uses_and_when_refreshed() {
        use std::sync::atomic::{AtomicI64, Ordering};
        // A clock that counts its readings.
        static READINGS: AtomicI64 = AtomicI64::new(0);
        let clock = super::SessionClock {
            read: || READINGS.fetch_add(1, Ordering::SeqCst) + 1,
            ..Default::default()
        };
        let uses = super::SessionClock::USES as usize;
        let times: Vec<i64> = (0..2 * uses).map(|_| clock.now_ms()).collect();
        assert!(times[..uses].iter().all(|&t| t == 1), "{times:?}");
        assert!(times[uses..].iter().all(|&t| t == 2), "{times:?}");
        clock.refresh();
        assert_eq!(clock.now_ms(), 3, "a refresh reads at the next use");
        assert_eq!(clock.now_ms(), 3);
        assert_eq!(clock.read_now(), 4, "a flow file's date is read exactly");
        assert_eq!(clock.now_ms(), 4, "and the events after it use it");
        assert_eq!(READINGS.load(Ordering::SeqCst), 4);
    }
}
