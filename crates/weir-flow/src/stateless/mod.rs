//! The stateless engine: a process group marked `engine: stateless` runs as one transaction
//! per trigger.
//!
//! ```no_run
//! use weir_flow::{definition::Flow, engine::Engine};
//!
//! // A group with `engine: stateless` runs here; traditional groups of the same file run
//! // beside it, on the same runtime and repositories.
//! let flow = Flow::load("examples/flows/amqp-to-postgres.yaml".as_ref()).expect("a valid flow");
//! for warning in weir_flow::stateless::warnings(&flow) {
//!     eprintln!("warning: {warning}");
//! }
//! let engine = Engine::start(flow, "target/flow-repo".as_ref()).expect("repository opens");
//! engine.stop().expect("clean stop");
//! ```
//!
//! The rules (NiFi's stateless engine):
//!
//! - **One trigger.** Each source of the group (a processor without incoming connections,
//!   or an input port fed by a traditional group) is triggered once. The group then runs to
//!   completion before more data enters: every flow file reaches an output port or is
//!   auto-terminated. Components run upstream first, each as long as it has input, so a
//!   sink sees the whole trigger's data as one batch. A component that makes no progress
//!   (MergeContent waiting for a full bin) makes the sources trigger again, within the same
//!   transaction, until the timeout.
//! - **In-memory queues.** Connections inside the group are FIFO queues of the
//!   transaction, in memory, with no thresholds, swapping or journal; content written inside
//!   the group lives in the transaction's memory too.
//! - **Commit.** When every queue is empty, the transaction commits: flow files that leave
//!   the group through output ports into traditional connections, and the inputs taken from
//!   them, are written in one journal frame; provenance events, held until now, are
//!   recorded; then the sources' completion hooks run, and broker sources acknowledge. A
//!   commit without a journal frame leaves its events to the copy's provenance backlog,
//!   recorded by the copy's next wait or commit, or before it rests (see `backlog.rs`): the
//!   acknowledgements do not wait for the encoding.
//! - **Rollback.** A flow file reaching an output port marked `failure: true`, a processor
//!   that fails or panics, or the group's timeout rolls back everything: flow files in flight
//!   are dropped, sources are told to give their data back (AMQP requeues, JetStream naks),
//!   penalized for a timeout or a failing processor. Inputs from a traditional group go to the
//!   connection leaving the group's failure port when there is one, else back to their queue,
//!   penalized. SEND and REMOTE_INVOCATION events are recorded even on rollback: the data
//!   did leave (but for a destination whose writes roll back with the group, which reports
//!   with `Session::report_on_commit`).
//! - **Before the commit.** Hooks given with `Session::before_commit` (a database's COMMIT
//!   of the group's open transaction) run before the commit's journal frame and before any
//!   completion hook, so before a source acknowledges; one that fails rolls back.
//! - **Copies.** `concurrency: N` runs N copies of the group, each one task on Weir's shared
//!   runtime with its own processor instances (a MergeContent per copy holds its own bins).
//!   A copy's task runs on the runtime's blocking pool, since processors block, and keeps its
//!   thread from one transaction to the next.
//! - **Scheduling.** The source with the shortest timer period sets the group's schedule;
//!   CRON is refused at validation.
//!
//! The timeout is checked between triggers: a trigger blocked in I/O ends by its own
//! time-outs (connection and read time-outs of the connectors) before the transaction rolls
//! back.

mod backlog;
mod transaction;

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::definition::{ComponentKind, Flow, Schedule};
use crate::engine::BulletinLevel;
use crate::engine::session::EngineSession;
use crate::engine::{Completion, EngineError, Shared, session_factory};
use crate::processors::Processor;
use crate::provenance::ProvenanceEvent;
use crate::repository::journal::{Op, Txn};
pub(crate) use backlog::ProvenanceBacklog;
pub(crate) use transaction::{Absorbed, Transaction};

/// Processor types that send data out of the flow: a group with more than one of them is
/// valid, but only the last may be non-idempotent.
const DESTINATIONS: &[&str] = &[
    "PutFile",
    "PutDatabaseRecord",
    "PublishAMQP",
    "PublishJetStream",
    "InvokeHTTP",
];

/// Indices of the components that belong to stateless groups.
pub fn members(flow: &Flow) -> BTreeSet<usize> {
    flow.processors
        .iter()
        .enumerate()
        .filter(|(_, c)| flow.stateless_groups.contains(&c.group))
        .map(|(i, _)| i)
        .collect()
}

/// The warnings a valid flow deserves: stateless groups with more than one source or more
/// than one destination.
pub fn warnings(flow: &Flow) -> Vec<String> {
    let mut out = Vec::new();
    for g in &flow.stateless {
        let plan = GroupPlan::new(flow, g);
        if plan.sources.len() > 1 {
            out.push(format!(
                "stateless group `{}` has {} sources; each trigger runs them all in one transaction, and a rollback gives back the data of every one",
                g.name,
                plan.sources.len()
            ));
        }
        let destinations: Vec<&str> = plan
            .components
            .iter()
            .map(|&c| &flow.processors[c])
            .filter(|c| DESTINATIONS.contains(&c.type_name()))
            .map(|c| c.name.as_str())
            .collect();
        if destinations.len() > 1 {
            out.push(format!(
                "stateless group `{}` has {} destinations ({}); a rollback after one has sent data sends it again, so every destination before the last must be idempotent",
                g.name,
                destinations.len(),
                destinations.join(", ")
            ));
        }
    }
    out
}

/// What the engine needs to know of one stateless group.
#[derive(Debug)]
struct GroupPlan {
    name: String,
    /// Every component of the group, upstream first.
    components: Vec<usize>,
    /// Components triggered once per transaction.
    sources: Vec<usize>,
    /// Per connection of the flow: true when both ends are in the group.
    internal: Arc<Vec<bool>>,
    /// Connections leaving the group from a failure port.
    failure_exits: Vec<usize>,
    timeout: Duration,
    concurrency: usize,
    /// The shortest timer period among the sources.
    period: Duration,
    /// The sources' penalty (the longest), for inputs given back after a timeout.
    penalty: Duration,
    /// The sources' yield (the shortest), to rest after an empty trigger or a rollback.
    yield_duration: Duration,
}

impl GroupPlan {
    fn new(flow: &Flow, g: &crate::definition::StatelessGroup) -> GroupPlan {
        let in_group = |i: usize| flow.processors[i].group == g.name;
        let members: Vec<usize> = (0..flow.processors.len())
            .filter(|&i| in_group(i))
            .collect();
        let internal: Vec<bool> = flow
            .connections
            .iter()
            .map(|c| in_group(c.from) && in_group(c.to))
            .collect();
        // Upstream first (Kahn's order over the group's own connections; a cycle keeps the
        // rest in definition order).
        let mut indegree: Vec<usize> = vec![0; flow.processors.len()];
        for (i, c) in flow.connections.iter().enumerate() {
            if internal[i] {
                indegree[c.to] += 1;
            }
        }
        let mut order = Vec::new();
        let mut ready: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| indegree[m] == 0)
            .collect();
        while let Some(n) = (!ready.is_empty()).then(|| ready.remove(0)) {
            order.push(n);
            for (i, c) in flow.connections.iter().enumerate() {
                if internal[i] && c.from == n {
                    indegree[c.to] -= 1;
                    if indegree[c.to] == 0 {
                        ready.push(c.to);
                    }
                }
            }
        }
        for &m in &members {
            if !order.contains(&m) {
                order.push(m);
            }
        }
        let sources: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| {
                let incoming: Vec<usize> = (0..flow.connections.len())
                    .filter(|&i| flow.connections[i].to == m)
                    .collect();
                match flow.processors[m].kind {
                    ComponentKind::Port => incoming.iter().any(|&i| !internal[i]),
                    ComponentKind::Processor(_) => incoming.is_empty(),
                }
            })
            .collect();
        let failure_exits = flow
            .connections
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                !internal[*i] && in_group(c.from) && flow.processors[c.from].failure_port
            })
            .map(|(i, _)| i)
            .collect();
        let period = sources
            .iter()
            .filter_map(|&s| match flow.processors[s].schedule {
                Schedule::Timer(p) => Some(p),
                Schedule::Cron(_) => None,
            })
            .min()
            .unwrap_or(Duration::ZERO);
        let penalty = sources
            .iter()
            .map(|&s| flow.processors[s].penalty)
            .max()
            .unwrap_or(Duration::from_secs(30));
        let yield_duration = sources
            .iter()
            .map(|&s| flow.processors[s].yield_duration)
            .min()
            .unwrap_or(Duration::from_secs(1));
        GroupPlan {
            name: g.name.clone(),
            components: order,
            sources,
            internal: Arc::new(internal),
            failure_exits,
            timeout: g.timeout,
            concurrency: g.concurrency,
            period,
            penalty,
            yield_duration,
        }
    }
}

/// The copies' tasks and every processor instance they run.
type Started = (Vec<tokio::task::JoinHandle<()>>, Vec<Arc<dyn Processor>>);

/// One copy's processors, by component index.
type CopyProcessors = Vec<(usize, Arc<dyn Processor>)>;

/// A copy's source processors, in the plan's order: every transaction of the copy holds
/// them (see [`Transaction::work_ahead`]).
type CopySources = Arc<[Arc<dyn Processor>]>;

/// Component `c`'s processor in `procs`.
fn processor_of(procs: &CopyProcessors, c: usize) -> Arc<dyn Processor> {
    procs
        .iter()
        .find(|(i, _)| *i == c)
        .map(|(_, p)| Arc::clone(p))
        .expect("every component of the group has a processor")
}

/// Builds and starts every copy of every stateless group: one task per copy on `runtime`'s
/// blocking pool, for the copy's life.
/// Returns the tasks and every processor instance (to stop them with the flow).
pub(crate) fn start(
    shared: &Arc<Shared>,
    runtime: &tokio::runtime::Handle,
) -> Result<Started, EngineError> {
    let mut tasks = Vec::new();
    let mut all = Vec::new();
    for g in &shared.flow.stateless {
        let plan = Arc::new(GroupPlan::new(&shared.flow, g));
        for _copy in 0..plan.concurrency {
            let mut procs: CopyProcessors = Vec::new();
            for &i in &plan.components {
                let c = &shared.flow.processors[i];
                let p = shared
                    .flow
                    .registry
                    .build(c)
                    .map_err(|e| EngineError::Start {
                        name: c.name.clone(),
                        reason: e.to_string(),
                    })?;
                let _enter = runtime.enter();
                p.start(session_factory(Arc::clone(shared), i))
                    .map_err(|e| EngineError::Start {
                        name: c.name.clone(),
                        reason: e.to_string(),
                    })?;
                all.push(Arc::clone(&p));
                procs.push((i, p));
            }
            let (s, p, r) = (Arc::clone(shared), Arc::clone(&plan), runtime.clone());
            tasks.push(runtime.spawn_blocking(move || run_copy(s, p, Arc::new(procs), r)));
        }
    }
    Ok((tasks, all))
}

/// How long an idle group waits before it triggers its sources again, unless woken.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// One copy's life: its transactions one after another, all on one thread of the runtime's
/// blocking pool (processors block), so that a transaction starts and ends without a
/// hand-off between threads. The waits between transactions (the schedule, the rest after
/// an idle trigger) run on the runtime's timers and wakers through `runtime`.
fn run_copy(
    shared: Arc<Shared>,
    plan: Arc<GroupPlan>,
    procs: Arc<CopyProcessors>,
    runtime: tokio::runtime::Handle,
) {
    let waker = plan.sources.first().map(|&s| &shared.wakers[s]);
    let sources: CopySources = plan
        .sources
        .iter()
        .map(|&s| processor_of(&procs, s))
        .collect();
    // Dropped (and so recorded) when the copy ends, however it ends.
    let backlog = Arc::new(ProvenanceBacklog::new(Arc::clone(&shared.provenance)));
    let mut next_tick = tokio::time::Instant::now();
    loop {
        if shared.stopping() {
            return;
        }
        if !plan.period.is_zero() {
            backlog.record();
            let tick = shared.unless_stopped(tokio::time::sleep_until(next_tick));
            if runtime.block_on(tick).is_none() {
                return;
            }
            next_tick = tokio::time::Instant::now() + plan.period;
        }
        if shared.stopping() {
            return;
        }
        if shared.repo.poisoned().is_some() {
            backlog.record();
            runtime.block_on(shared.unless_stopped(tokio::time::sleep(IDLE_WAIT)));
            continue;
        }
        shared.running_triggers.fetch_add(1, Ordering::SeqCst);
        // A panic outside the processors (they are caught per trigger) ends this transaction
        // only, as a rollback would; the copy carries on.
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run_transaction(&shared, &plan, &procs, &sources, &backlog)
        }));
        shared.running_triggers.fetch_sub(1, Ordering::SeqCst);
        let rest = match outcome {
            Ok(Outcome::Committed) => Duration::ZERO,
            Ok(Outcome::Idle) if plan.period.is_zero() => plan.yield_duration.min(IDLE_WAIT),
            Ok(Outcome::Idle) => Duration::ZERO,
            Ok(Outcome::RolledBack) | Err(_) => plan.yield_duration,
        };
        if !rest.is_zero() {
            backlog.record();
            match waker {
                Some(w) => {
                    let _ = runtime
                        .block_on(shared.unless_stopped(tokio::time::timeout(rest, w.notified())));
                }
                None => {
                    runtime.block_on(shared.unless_stopped(tokio::time::sleep(rest)));
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    Idle,
    RolledBack,
}

/// Why a transaction rolls back.
#[derive(Debug)]
enum Reason {
    /// A flow file reached a failure port: the port's component index, the flow file.
    FailurePort(usize, String),
    ProcessorFailed(String),
    Timeout,
    Stopping,
    CommitFailed(String),
}

/// Triggers `component` once in `txn`. Returns whether it consumed or produced anything.
fn trigger_once(
    shared: &Arc<Shared>,
    txn: &Arc<Transaction>,
    component: usize,
    processor: &dyn Processor,
) -> Result<bool, String> {
    let before = txn.progress();
    let mut session = EngineSession::in_transaction(Arc::clone(shared), component, Arc::clone(txn));
    let name = &shared.flow.processors[component].name;
    // The group's rollback logs the failure; the bulletin keeps it beside the processor.
    let failed = |why: String| {
        shared.stats[component]
            .failures
            .fetch_add(1, Ordering::Relaxed);
        let mut kept = why.clone();
        kept.push_str("; the group's transaction rolls back");
        shared.keep_bulletin(component, BulletinLevel::Warning, kept);
        Err(why)
    };
    shared.stats[component]
        .tasks
        .fetch_add(1, Ordering::Relaxed);
    let run = || {
        crate::faults::trigger(name);
        processor.trigger(&mut session)
    };
    match std::panic::catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(_)) => match session.commit() {
            Ok(committed) => {
                shared.count(component, &committed);
                Ok(txn.progress() != before)
            }
            Err(e) => failed(format!("processor `{name}`: {e}")),
        },
        Ok(Err(e)) => {
            session.rollback(true);
            failed(format!("processor `{name}` failed: {e}"))
        }
        Err(panic) => {
            session.rollback(true);
            failed(format!(
                "processor `{name}` panicked: {}",
                crate::engine::panic_text(&*panic)
            ))
        }
    }
}

/// Runs one transaction of a copy to its end (on the copy's thread).
fn run_transaction(
    shared: &Arc<Shared>,
    plan: &GroupPlan,
    procs: &CopyProcessors,
    sources: &CopySources,
    backlog: &Arc<ProvenanceBacklog>,
) -> Outcome {
    let processor = |c: usize| processor_of(procs, c);
    let txn = Arc::new(Transaction::new(
        Arc::clone(&plan.internal),
        Arc::clone(sources),
        Arc::clone(backlog),
    ));
    let deadline = Instant::now() + plan.timeout;
    let trigger_sources = |txn: &Arc<Transaction>| -> Result<bool, String> {
        let mut any = false;
        for &s in &plan.sources {
            any |= trigger_once(shared, txn, s, &*processor(s))?;
        }
        Ok(any)
    };
    match trigger_sources(&txn) {
        Err(e) => return rollback(shared, plan, &txn, Reason::ProcessorFailed(e)),
        Ok(_) if txn.is_untouched() => {
            // Nothing came in: settle the hooks (none expected) and rest.
            txn.settle(Completion::Committed);
            return Outcome::Idle;
        }
        Ok(_) => {}
    }
    let mut stuck: BTreeSet<usize> = BTreeSet::new();
    loop {
        if let Some((port, flowfile)) = txn.failure() {
            return rollback(shared, plan, &txn, Reason::FailurePort(port, flowfile));
        }
        if Instant::now() >= deadline {
            return rollback(shared, plan, &txn, Reason::Timeout);
        }
        if shared.stopping() {
            return rollback(shared, plan, &txn, Reason::Stopping);
        }
        let with_input: Vec<usize> = plan
            .components
            .iter()
            .copied()
            .filter(|&c| txn.has_input(&shared.incoming[c]))
            .collect();
        if with_input.is_empty() {
            return commit(shared, plan, &txn);
        }
        let next = with_input.iter().copied().find(|c| !stuck.contains(c));
        match next {
            Some(c) => match trigger_once(shared, &txn, c, &*processor(c)) {
                Err(e) => return rollback(shared, plan, &txn, Reason::ProcessorFailed(e)),
                Ok(true) => stuck.clear(),
                Ok(false) => {
                    stuck.insert(c);
                }
            },
            None => {
                // Everything with input waits for more (MergeContent's bins): trigger the
                // sources again, within this transaction.
                match trigger_sources(&txn) {
                    Err(e) => return rollback(shared, plan, &txn, Reason::ProcessorFailed(e)),
                    Ok(true) => stuck.clear(),
                    Ok(false) => {
                        // Nothing new: give time-based rules (a bin's age) a moment.
                        std::thread::sleep(Duration::from_millis(10));
                        stuck.clear();
                    }
                }
            }
        }
    }
}

static DIRECT_EVENTS: AtomicU64 = AtomicU64::new(0);

/// Ids for events recorded without a journal frame: the top bit set, then the time in ms
/// and a counter, so they never meet the journal's ids (which run on from 0).
pub(super) fn direct_event_ids(events: &mut [ProvenanceEvent]) {
    let now = chrono::Utc::now().timestamp_millis().max(0) as u64;
    for e in events {
        let n = DIRECT_EVENTS.fetch_add(1, Ordering::Relaxed) & 0xF_FFFF;
        e.id = (1 << 63) | ((now & ((1 << 43) - 1)) << 20) | n;
    }
}

fn commit(shared: &Arc<Shared>, plan: &GroupPlan, txn: &Arc<Transaction>) -> Outcome {
    let mut parts = txn.take_parts();
    // Destinations' own commits first (a database's COMMIT): only then is the data safe to
    // acknowledge, and a failure rolls the whole transaction back.
    if let Err(e) =
        crate::engine::session::run_before_commit(std::mem::take(&mut parts.before_commit))
    {
        let always = rollback_events(parts.always, parts.events);
        return rollback_parts(
            shared,
            plan,
            txn,
            Reason::CommitFailed(e.to_string()),
            parts.taken,
            parts.completions,
            always,
        );
    }
    let mut events = parts.events;
    events.extend(parts.commit_only_events);
    events.push(parts.always);
    if parts.taken.is_empty() && parts.outputs.is_empty() && parts.repository_ops.is_empty() {
        // Encoded, handed over and freed while the copy next waits, and the content freed
        // then too: nothing reads it after the commit.
        txn.backlog().hold(events, txn.take_content());
    } else {
        // The journal frame holds the events as one list, with the frame's ids.
        let events: Vec<ProvenanceEvent> = events.into_iter().flatten().collect();
        // Flow files leave the group into traditional connections, or inputs came from
        // them: one journal frame for all, as a session commit would.
        let mut ops = Vec::new();
        let mut refs = Vec::new();
        let mut acks: std::collections::BTreeMap<usize, (u64, u64)> = Default::default();
        for (q, ff) in &parts.taken {
            let a = acks.entry(*q as usize).or_default();
            a.0 += 1;
            a.1 += ff.size();
            if let Some(c) = ff.claim {
                refs.push((c.file, -1));
            }
            ops.push(Op::Delete { id: ff.id });
        }
        let mut enqueue: std::collections::BTreeMap<
            usize,
            Vec<(crate::flowfile::FlowFile, Option<Instant>)>,
        > = Default::default();
        let mut new_claims = Vec::new();
        for (conn, mut ff) in parts.outputs {
            if let Some(c) = ff.claim
                && Transaction::is_memory_claim(&c)
            {
                match shared.repo.content().write(&txn.read(&c)) {
                    Ok(durable) => {
                        new_claims.push(durable);
                        ff.claim = Some(durable);
                    }
                    Err(e) => {
                        shared.repo.content().release_uncommitted(&new_claims);
                        return rollback_parts(
                            shared,
                            plan,
                            txn,
                            Reason::CommitFailed(e.to_string()),
                            parts.taken,
                            parts.completions,
                            Vec::new(),
                        );
                    }
                }
            }
            ff.queue_seq = shared.repo.next_seq();
            if let Some(c) = ff.claim {
                refs.push((c.file, 1));
            }
            ops.push(Op::Put {
                queue: conn as u32,
                flowfile: ff.clone(),
            });
            enqueue.entry(conn).or_default().push((ff, None));
        }
        // Source files taken inside the group go once this frame is durable; the states set
        // inside it are written with it.
        ops.extend(parts.repository_ops);
        // A taken flow file that also leaves keeps its id: its Put moves it, so no Delete.
        let moved: BTreeSet<u64> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Put { flowfile, .. } => Some(flowfile.id),
                _ => None,
            })
            .collect();
        ops.retain(|o| !matches!(o, Op::Delete { id } if moved.contains(id)));
        // The holds on the content written here end with the commit (see content.rs).
        refs.extend(new_claims.iter().map(|c| (c.file, -1)));
        match shared.repo.commit(Txn { ops, events }) {
            Ok(events) => {
                shared.repo.content().adjust_refs(&refs);
                // Provenance before the flow files move on, as a session commit does.
                if let Err(e) = shared.provenance.insert(events) {
                    tracing::warn!("provenance insert failed (the journal keeps the events): {e}");
                }
                for (q, (n, bytes)) in acks {
                    shared.queues[q].acknowledge(n, bytes);
                    shared.wake_upstream(q);
                }
                for (q, list) in enqueue {
                    if let Err(e) = shared.queues[q].enqueue_with_penalties(&shared.repo, list) {
                        shared.fail(format!(
                            "swapping out queue {}: {e}",
                            shared.flow.connections[q].key
                        ));
                    }
                    shared.wake_downstream(q);
                }
            }
            Err(e) => {
                shared.repo.content().release_uncommitted(&new_claims);
                return rollback_parts(
                    shared,
                    plan,
                    txn,
                    Reason::CommitFailed(e.to_string()),
                    parts.taken,
                    parts.completions,
                    Vec::new(),
                );
            }
        }
    }
    for hook in parts.completions {
        hook(Completion::Committed);
    }
    shared.note_activity();
    Outcome::Committed
}

fn rollback(
    shared: &Arc<Shared>,
    plan: &GroupPlan,
    txn: &Arc<Transaction>,
    reason: Reason,
) -> Outcome {
    let parts = txn.take_parts();
    let always = rollback_events(parts.always, parts.events);
    rollback_parts(
        shared,
        plan,
        txn,
        reason,
        parts.taken,
        parts.completions,
        always,
    )
}

/// Of the committed sessions' events, those a rollback records too, after `always` (events
/// recorded only at a commit are not among them).
fn rollback_events(
    mut always: Vec<ProvenanceEvent>,
    events: Vec<Vec<ProvenanceEvent>>,
) -> Vec<ProvenanceEvent> {
    for batch in events {
        always.extend(batch.into_iter().filter(transaction::recorded_on_rollback));
    }
    always
}

fn rollback_parts(
    shared: &Arc<Shared>,
    plan: &GroupPlan,
    txn: &Arc<Transaction>,
    reason: Reason,
    taken: Vec<(u32, crate::flowfile::FlowFile)>,
    completions: Vec<crate::engine::CompletionHook>,
    always: Vec<ProvenanceEvent>,
) -> Outcome {
    // Every rollback is a bulletin (logged at WARN, kept for `flow status`, the API and the
    // metrics, and counted as a failure) on the component it is about: the failure port,
    // or the group's first source for a timeout or a failed commit. A failing processor
    // has its own already (`trigger_once`).
    let inputs = taken.len();
    let given_back = format!(
        "rolling back; {} completion hook(s) told, {inputs} input(s) from outside the group given back",
        completions.len()
    );
    let note = |component: usize, text: String| {
        shared.stats[component]
            .failures
            .fetch_add(1, Ordering::Relaxed);
        shared.bulletin(component, BulletinLevel::Warning, text);
    };
    let first_source = plan.sources.first().copied();
    let (penalize, to_failure) = match &reason {
        Reason::FailurePort(port, flowfile) => {
            note(
                *port,
                format!(
                    "stateless group `{}`: {flowfile} reached failure port `{}`; {given_back}",
                    plan.name, shared.flow.processors[*port].name
                ),
            );
            (false, true)
        }
        Reason::ProcessorFailed(why) => {
            tracing::warn!("stateless group `{}`: {why}; {given_back}", plan.name);
            (true, true)
        }
        Reason::Timeout => {
            let text = format!(
                "stateless group `{}`: the transaction took longer than its timeout of {:?}; {given_back}, penalized",
                plan.name, plan.timeout
            );
            match first_source {
                Some(s) => note(s, text),
                None => tracing::warn!("{text}"),
            }
            (true, false)
        }
        Reason::Stopping => (false, false),
        Reason::CommitFailed(why) => {
            let text = format!(
                "stateless group `{}`: commit failed: {why}; {given_back}",
                plan.name
            );
            match first_source {
                Some(s) => note(s, text),
                None => tracing::warn!("{text}"),
            }
            (true, false)
        }
    };
    // The data left already: SEND and REMOTE_INVOCATION stay recorded.
    txn.backlog().record_now(vec![always]);
    let penalty = penalize.then_some(plan.penalty);
    for hook in completions {
        hook(Completion::RolledBack { penalty });
    }
    if !taken.is_empty() {
        give_back_inputs(shared, plan, taken, penalty, to_failure);
    }
    shared.note_activity();
    Outcome::RolledBack
}

/// Inputs that came from traditional connections: to the failure port's connections when
/// the group has them and the rollback was a failure, else back to their queues.
fn give_back_inputs(
    shared: &Arc<Shared>,
    plan: &GroupPlan,
    taken: Vec<(u32, crate::flowfile::FlowFile)>,
    penalty: Option<Duration>,
    to_failure: bool,
) {
    if to_failure && !plan.failure_exits.is_empty() {
        let mut ops = Vec::new();
        let mut acks: std::collections::BTreeMap<usize, (u64, u64)> = Default::default();
        let mut enqueue = Vec::new();
        let mut extra_refs: Vec<(u64, i64)> = Vec::new();
        for (q, ff) in &taken {
            let a = acks.entry(*q as usize).or_default();
            a.0 += 1;
            a.1 += ff.size();
            for (i, &exit) in plan.failure_exits.iter().enumerate() {
                let mut out = ff.clone();
                if i > 0 {
                    if let Some(c) = out.claim {
                        extra_refs.push((c.file, 1));
                    }
                    out.id = shared.repo.next_id();
                    out.attributes
                        .insert("uuid", crate::engine::session::new_uuid());
                }
                out.queue_seq = shared.repo.next_seq();
                ops.push(Op::Put {
                    queue: exit as u32,
                    flowfile: out.clone(),
                });
                enqueue.push((exit, out));
            }
        }
        if shared
            .repo
            .commit(Txn {
                ops,
                events: vec![],
            })
            .is_ok()
        {
            shared.repo.content().adjust_refs(&extra_refs);
            for (q, (n, bytes)) in acks {
                shared.queues[q].acknowledge(n, bytes);
            }
            for (q, ff) in enqueue {
                if let Err(e) =
                    shared.queues[q].enqueue_with_penalties(&shared.repo, vec![(ff, None)])
                {
                    shared.fail(format!(
                        "swapping out queue {}: {e}",
                        shared.flow.connections[q].key
                    ));
                }
                shared.wake_downstream(q);
            }
            return;
        }
    }
    let until = penalty.map(|p| Instant::now() + p);
    let mut by_queue: std::collections::BTreeMap<u32, Vec<crate::flowfile::FlowFile>> =
        Default::default();
    for (q, ff) in taken {
        by_queue.entry(q).or_default().push(ff);
    }
    for (q, list) in by_queue {
        shared.queues[q as usize].requeue(list, until);
        shared.wake_downstream(q as usize);
    }
}
