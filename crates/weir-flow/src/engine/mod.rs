//! The traditional engine: every queue durable, every processor's work a session.
//!
//! Processors run on Weir's shared tokio runtime ([`weir_runtime::runtime`]): each
//! concurrent task of a processor is an async task that waits for its schedule (timer, CRON
//! or as fast as possible), for input and for room downstream, and then runs the processor's
//! trigger on the runtime's blocking pool, since triggers read files and wait for the
//! journal. There is no thread system of the engine's own.
//!
//! A trigger that returns an error or panics rolls its session back with its inputs
//! penalized, and the processor yields; the engine goes on. This holds for custom processor
//! types too ([`crate::processors::registry`]). A poisoned repository holds the
//! sources back, tries one checkpoint, and stops the run with the cause.

mod monitor;
pub mod queue;
pub mod session;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::Notify;

use crate::definition::{ComponentKind, Flow, Schedule};
use crate::processors::{Processor, Trigger};
use crate::provenance::ProvenanceRepository;
use crate::repository::journal::{FlowFileRepository, RepositoryError};
pub use monitor::{
    Bulletin, BulletinLevel, ConnectionView, ControlError, FlowMonitor, FlowState, GroupView,
    MonitoredFlow, ProcessorView, ProvenanceUnavailable, RunState,
};
use queue::Queue;
use session::EngineSession;
pub use session::{
    BeforeCommitHook, CommitRefused, Committed, Completion, CompletionHook, FlowFileRef, Session,
    SessionError,
};
pub use weir_flow_api::session::{SessionFactory, SessionSource};

/// Why the engine could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The flow-file repository failed.
    #[error(transparent)]
    Repository(#[from] RepositoryError),
    /// The provenance store failed.
    #[error(transparent)]
    Provenance(#[from] crate::provenance::ProvenanceError),
    /// A processor could not start (a port in use, a bad directory).
    #[error("processor `{name}` cannot start: {reason}")]
    Start {
        /// The processor.
        name: String,
        /// Why.
        reason: String,
    },
    /// The shared runtime could not start.
    #[error("runtime: {0}")]
    Runtime(String),
    /// The run failed (for instance, the repository was poisoned).
    #[error("the flow stopped: {0}")]
    Failed(String),
}

/// Counters of one component, bumped once per session or trigger, never per flow file.
#[derive(Debug)]
pub struct ComponentStats {
    /// Flow files taken from queues and committed.
    pub flowfiles_in: AtomicU64,
    /// Flow files sent to connections.
    pub flowfiles_out: AtomicU64,
    /// Content bytes of the flow files taken.
    pub bytes_in: AtomicU64,
    /// Content bytes of the flow files sent.
    pub bytes_out: AtomicU64,
    /// Sessions committed.
    pub commits: AtomicU64,
    /// Triggers that failed or panicked (rolled back).
    pub failures: AtomicU64,
    /// Tasks run: a trigger (or a run of triggers within the run duration) of the
    /// traditional engine, one trigger of a stateless group's member.
    pub tasks: AtomicU64,
    /// Whether the processor is scheduled (started). A stopped one is not triggered, and a
    /// source that takes data outside triggers (ListenHTTP) is held back.
    scheduled: AtomicBool,
    /// The latest warnings and errors, oldest first, at most [`monitor::BULLETINS_KEPT`].
    bulletins: Mutex<std::collections::VecDeque<Bulletin>>,
}

impl Default for ComponentStats {
    fn default() -> Self {
        ComponentStats {
            flowfiles_in: AtomicU64::new(0),
            flowfiles_out: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            tasks: AtomicU64::new(0),
            scheduled: AtomicBool::new(true),
            bulletins: Mutex::new(std::collections::VecDeque::new()),
        }
    }
}

pub(crate) struct Shared {
    pub(crate) flow: Flow,
    pub(crate) repo: FlowFileRepository,
    /// Held as well by each stateless copy's provenance backlog, until the copy ends.
    pub(crate) provenance: Arc<ProvenanceRepository>,
    pub(crate) queues: Vec<Queue>,
    pub(crate) incoming: Vec<Vec<usize>>,
    pub(crate) outgoing: Vec<Vec<usize>>,
    pub(crate) wakers: Vec<Notify>,
    pub(crate) stats: Vec<ComponentStats>,
    stop: AtomicBool,
    /// Turns true with `stop`: waits that no queue wakes (a timer's period, a CRON time)
    /// end on it, so that a stop never waits for the next tick.
    stop_signal: tokio::sync::watch::Sender<bool>,
    failure: Mutex<Option<String>>,
    last_activity: Mutex<Instant>,
    pub(crate) running_triggers: AtomicUsize,
    dir: PathBuf,
}

impl Shared {
    pub(crate) fn wake_downstream(&self, queue: usize) {
        self.wakers[self.flow.connections[queue].to].notify_one();
    }

    pub(crate) fn wake_upstream(&self, queue: usize) {
        self.wakers[self.flow.connections[queue].from].notify_waiters();
    }

    pub(crate) fn note_activity(&self) {
        *self.last_activity.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    pub(crate) fn fail(&self, cause: String) {
        tracing::error!("{cause}");
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(cause);
        }
        self.request_stop();
    }

    /// Stops every task: the flag, the signal, and a wake-up for whatever waits on a queue.
    fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.stop_signal.send_replace(true);
        for w in &self.wakers {
            w.notify_waiters();
        }
    }

    /// Runs `work` until it completes, or until the engine stops: `None` then. Every wait
    /// that nothing else would end at a stop goes through this.
    pub(crate) async fn unless_stopped<F: std::future::Future>(
        &self,
        work: F,
    ) -> Option<F::Output> {
        let mut stopped = self.stop_signal.subscribe();
        tokio::select! {
            out = work => Some(out),
            _ = stopped.wait_for(|s| *s) => None,
        }
    }

    /// The failure that stopped the run, if any.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// A new session for `component`.
    pub(crate) fn session(self: &Arc<Self>, component: usize) -> EngineSession {
        EngineSession::new(Arc::clone(self), component)
    }

    /// Records a committed session's counts; a session that moved nothing counts nothing.
    pub(crate) fn count(&self, component: usize, committed: &Committed) {
        if committed.is_empty() {
            return;
        }
        let s = &self.stats[component];
        s.flowfiles_in
            .fetch_add(committed.flowfiles_in, Ordering::Relaxed);
        s.flowfiles_out
            .fetch_add(committed.flowfiles_out, Ordering::Relaxed);
        s.bytes_in.fetch_add(committed.bytes_in, Ordering::Relaxed);
        s.bytes_out
            .fetch_add(committed.bytes_out, Ordering::Relaxed);
        s.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Logs a component's warning or error and keeps it as a bulletin for observers.
    pub(crate) fn bulletin(&self, component: usize, level: BulletinLevel, message: String) {
        let (job, processor) = (&self.flow.name, &self.flow.processors[component].name);
        match level {
            BulletinLevel::Warning => tracing::warn!(%job, %processor, "{message}"),
            BulletinLevel::Error => tracing::error!(%job, %processor, "{message}"),
        }
        self.keep_bulletin(component, level, message);
    }

    /// Keeps a bulletin for observers without logging it (the caller logs it its own way).
    pub(crate) fn keep_bulletin(&self, component: usize, level: BulletinLevel, message: String) {
        let mut kept = self.stats[component]
            .bulletins
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if kept.len() >= monitor::BULLETINS_KEPT {
            kept.pop_front();
        }
        kept.push_back(Bulletin {
            time_ms: chrono::Utc::now().timestamp_millis(),
            level,
            message,
        });
    }

    /// True when a connection out of `component` to another component is full: back
    /// pressure holds the component. A full connection back to itself (a failure
    /// relationship looped for retries) does not: only the component drains it, so it
    /// holding itself back would never end.
    pub(crate) fn backed_up(&self, component: usize) -> bool {
        self.outgoing[component]
            .iter()
            .any(|&q| self.flow.connections[q].to != component && self.queues[q].is_full())
    }

    /// Whether `component` is scheduled (not stopped by a user).
    pub(crate) fn scheduled(&self, component: usize) -> bool {
        self.stats[component].scheduled.load(Ordering::Relaxed)
    }
}

/// The engine's sessions for one component, made outside triggers (ListenHTTP's request
/// handlers, MergeContent's held bins) through a [`SessionFactory`].
struct ComponentSessions {
    shared: Arc<Shared>,
    component: usize,
}

/// A factory of `component`'s sessions.
pub(crate) fn session_factory(shared: Arc<Shared>, component: usize) -> SessionFactory {
    SessionFactory::new(Arc::new(ComponentSessions { shared, component }))
}

impl SessionSource for ComponentSessions {
    fn session(&self) -> Box<dyn Session> {
        Box::new(self.shared.session(self.component))
    }

    fn held_back(&self) -> bool {
        self.shared.stopping()
            || !self.shared.scheduled(self.component)
            || self.shared.repo.poisoned().is_some()
            || self.shared.backed_up(self.component)
    }

    fn count(&self, committed: &Committed) {
        self.shared.count(self.component, committed);
    }
}

/// A running flow. See the [module docs](self).
pub struct Engine {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    processors: Vec<Arc<dyn Processor>>,
    runtime: tokio::runtime::Handle,
}

/// A snapshot of a running flow, for the status line and `weir flow status`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Status {
    /// The flow's name.
    pub flow: String,
    /// Per connection: key, queued count, queued bytes, swapped out, highest count reached.
    pub connections: Vec<ConnectionStatus>,
    /// Per component: name, type, in, out, commits, failures.
    pub components: Vec<ComponentStatus>,
}

/// One connection in a [`Status`].
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ConnectionStatus {
    /// The connection's key.
    pub key: String,
    /// Queued flow files.
    pub count: u64,
    /// Queued bytes.
    pub bytes: u64,
    /// Of which swapped out.
    pub swapped: u64,
    /// The highest count reached.
    pub high_water: u64,
}

/// One component in a [`Status`].
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ComponentStatus {
    /// Its name.
    pub name: String,
    /// Its type.
    pub kind: String,
    /// Flow files taken in.
    pub flowfiles_in: u64,
    /// Flow files sent out.
    pub flowfiles_out: u64,
    /// Sessions committed.
    pub commits: u64,
    /// Failed triggers.
    pub failures: u64,
}

impl Engine {
    /// Opens (recovering) the repositories in `dir` and starts every processor.
    ///
    /// # Errors
    /// [`EngineError`] when the repository cannot be recovered or a processor cannot start.
    /// Groups marked `engine: stateless` run on the stateless engine ([`crate::stateless`]),
    /// in the same process, runtime and repositories.
    pub fn start(flow: Flow, dir: &Path) -> Result<Engine, EngineError> {
        for warning in crate::stateless::warnings(&flow) {
            tracing::warn!("{warning}");
        }
        let stateless_members = crate::stateless::members(&flow);
        let runtime = weir_runtime::runtime()
            .map_err(|e| EngineError::Runtime(e.to_string()))?
            .clone();
        let keys: Vec<String> = flow.connections.iter().map(|c| c.key.clone()).collect();
        let (repo, mut recovered) = FlowFileRepository::open(dir, flow.settings.sync, &keys)?;
        let provenance = ProvenanceRepository::open(
            &dir.join("provenance"),
            flow.settings.provenance_max_age,
            flow.settings.provenance_max_size,
        )?;
        provenance.insert(std::mem::take(&mut recovered.events))?;
        provenance.sync()?;
        if recovered.truncated_bytes > 0 {
            tracing::warn!(
                "truncated a torn journal tail of {} bytes",
                recovered.truncated_bytes
            );
        }
        let queues: Vec<Queue> = flow
            .connections
            .iter()
            .zip(recovered.queues.into_iter().zip(recovered.swaps))
            .enumerate()
            .map(|(i, (c, (ffs, swaps)))| Queue::new(i as u32, c.clone(), ffs, swaps))
            .collect();
        let n = flow.processors.len();
        let mut incoming = vec![Vec::new(); n];
        let mut outgoing = vec![Vec::new(); n];
        for (i, c) in flow.connections.iter().enumerate() {
            incoming[c.to].push(i);
            outgoing[c.from].push(i);
        }
        let shared = Arc::new(Shared {
            repo,
            provenance: Arc::new(provenance),
            queues,
            incoming,
            outgoing,
            wakers: (0..n).map(|_| Notify::new()).collect(),
            stats: (0..n).map(|_| ComponentStats::default()).collect(),
            stop: AtomicBool::new(false),
            stop_signal: tokio::sync::watch::Sender::new(false),
            failure: Mutex::new(None),
            last_activity: Mutex::new(Instant::now()),
            running_triggers: AtomicUsize::new(0),
            dir: dir.to_path_buf(),
            flow,
        });
        let mut processors: Vec<Arc<dyn Processor>> = Vec::new();
        for (i, c) in shared.flow.processors.iter().enumerate() {
            let p = shared
                .flow
                .registry
                .build(c)
                .map_err(|e| EngineError::Start {
                    name: c.name.clone(),
                    reason: e.to_string(),
                })?;
            if stateless_members.contains(&i) {
                // Built here only to keep indices aligned; each stateless copy builds and
                // starts its own.
                processors.push(p);
                continue;
            }
            let factory = session_factory(Arc::clone(&shared), i);
            let _enter = runtime.enter();
            p.start(factory).map_err(|e| EngineError::Start {
                name: c.name.clone(),
                reason: e.to_string(),
            })?;
            processors.push(p);
        }
        let mut tasks = Vec::new();
        for (i, c) in shared.flow.processors.iter().enumerate() {
            if stateless_members.contains(&i) {
                continue;
            }
            for _ in 0..c.concurrency {
                tasks.push(runtime.spawn(run_task(
                    Arc::clone(&shared),
                    i,
                    Arc::clone(&processors[i]),
                )));
            }
        }
        let (stateless_tasks, stateless_processors) = crate::stateless::start(&shared, &runtime)?;
        tasks.extend(stateless_tasks);
        processors.extend(stateless_processors);
        tasks.push(runtime.spawn(maintenance(Arc::clone(&shared))));
        Ok(Engine {
            shared,
            tasks,
            processors,
            runtime,
        })
    }

    /// A view of this flow for observers (a dashboard, a metrics endpoint) that can also
    /// start and stop its processors; it stays readable after [`Engine::stop`].
    pub fn monitor(&self) -> FlowMonitor {
        monitor::EngineMonitor::monitor(Arc::clone(&self.shared))
    }

    /// The current counts.
    pub fn status(&self) -> Status {
        status_of(&self.shared)
    }

    /// The failure that stopped the run, if any.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// True once the engine stops by itself (a failure).
    pub fn stopped(&self) -> bool {
        self.shared.stopping()
    }

    /// True when every queue is empty, no trigger runs, and nothing was committed for
    /// `quiet`.
    pub fn is_idle(&self, quiet: Duration) -> bool {
        let s = &self.shared;
        s.running_triggers.load(Ordering::SeqCst) == 0
            && s.queues.iter().all(|q| q.counts().count == 0)
            && s.last_activity
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed()
                >= quiet
    }

    /// Blocks until [`Engine::is_idle`] holds (or the engine stops by itself).
    pub fn wait_until_idle(&self, quiet: Duration) {
        while !self.is_idle(quiet) && !self.stopped() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops cleanly: no new triggers; running sessions finish or roll back; processors stop;
    /// the repository is checkpointed and provenance synced.
    ///
    /// # Errors
    /// [`EngineError::Failed`] when the run had failed, or the checkpoint fails.
    pub fn stop(mut self) -> Result<(), EngineError> {
        self.shared.request_stop();
        for p in &self.processors {
            p.stop();
        }
        for t in std::mem::take(&mut self.tasks) {
            let _ = self.runtime.block_on(t);
        }
        while self.shared.running_triggers.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        write_status(&self.shared);
        let checkpoint = self.shared.repo.checkpoint();
        self.shared.provenance.sync()?;
        if let Some(f) = self.failure() {
            return Err(EngineError::Failed(f));
        }
        checkpoint?;
        Ok(())
    }
}

fn status_of(s: &Shared) -> Status {
    Status {
        flow: s.flow.name.clone(),
        connections: s
            .queues
            .iter()
            .map(|q| {
                let c = q.counts();
                ConnectionStatus {
                    key: q.connection.key.clone(),
                    count: c.count,
                    bytes: c.bytes,
                    swapped: c.swapped,
                    high_water: c.high_water,
                }
            })
            .collect(),
        components: s
            .flow
            .processors
            .iter()
            .zip(&s.stats)
            .map(|(c, st)| ComponentStatus {
                name: c.name.clone(),
                kind: c.type_name().to_string(),
                flowfiles_in: st.flowfiles_in.load(Ordering::Relaxed),
                flowfiles_out: st.flowfiles_out.load(Ordering::Relaxed),
                commits: st.commits.load(Ordering::Relaxed),
                failures: st.failures.load(Ordering::Relaxed),
            })
            .collect(),
    }
}

/// Where a running flow writes its status (`weir flow status` reads it).
pub fn status_path(dir: &Path) -> PathBuf {
    dir.join("status.json")
}

fn write_status(s: &Shared) {
    if let Ok(text) = serde_json::to_vec_pretty(&status_of(s)) {
        write_status_text(&s.dir, &text);
    }
}

/// Replaces the status file of the flow in `dir` with `text`, whole (a temporary file renamed).
fn write_status_text(dir: &Path, text: &[u8]) {
    let path = status_path(dir);
    let tmp = path.with_extension("json.tmp");
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

/// How often a running flow's status file is brought up to date (`weir flow status`).
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// The engine's housekeeping: interval syncs of the journal, checkpoints, provenance
/// retention, the status file, and stopping a flow whose repository was poisoned.
///
/// It sleeps until the earliest of these is due, or until the repository asks for attention
/// (the first frame waiting for an interval sync, or a poisoning): an idle flow wakes it once
/// a second for its status, and a busy one once per sync interval, instead of every few
/// milliseconds. A frame waiting for a sync is synced at its deadline, as before, and a
/// poisoned repository is handled at once.
async fn maintenance(shared: Arc<Shared>) {
    let mut last_checkpoint = Instant::now();
    let mut last_status = Instant::now();
    // The status last written: an unchanged one is not written again.
    let mut written_status: Vec<u8> = Vec::new();
    while !shared.stopping() {
        let checkpoint_at = last_checkpoint + shared.flow.settings.checkpoint_interval;
        let mut next = checkpoint_at.min(last_status + STATUS_EVERY);
        if let Some(sync_at) = shared.repo.sync_deadline() {
            next = next.min(sync_at);
        }
        if shared.repo.poisoned().is_none() {
            let wait = async {
                tokio::select! {
                    () = tokio::time::sleep_until(next.into()) => false,
                    () = shared.repo.attention().notified() => true,
                }
            };
            // A stop ends the wait at once: `Engine::stop` waits for this task.
            let Some(woken) = shared.unless_stopped(wait).await else {
                break;
            };
            if woken && shared.repo.poisoned().is_none() && !shared.repo.sync_due() {
                // A sync to time: the next round sleeps until its deadline.
                continue;
            }
        }
        let s = Arc::clone(&shared);
        let due = last_checkpoint.elapsed() >= shared.flow.settings.checkpoint_interval;
        let poisoned = shared.repo.poisoned();
        let status = (last_status.elapsed() >= STATUS_EVERY)
            .then(|| serde_json::to_vec_pretty(&status_of(&shared)).ok())
            .flatten()
            .filter(|text| *text != written_status);
        if last_status.elapsed() >= STATUS_EVERY {
            last_status = Instant::now();
        }
        if !due && status.is_none() && poisoned.is_none() && !shared.repo.sync_due() {
            // Nothing to do: no hand-off to a blocking thread (an idle flow's whole cost).
            continue;
        }
        if let Some(text) = &status {
            written_status.clone_from(text);
        }
        let _ = tokio::task::spawn_blocking(move || {
            s.repo.sync_if_due();
            if let Some(cause) = poisoned {
                // One checkpoint to fresh files, then stop: nothing more is acknowledged.
                let outcome = s.repo.checkpoint().map_or_else(
                    |e| format!("; the checkpoint failed too: {e}"),
                    |()| "; checkpointed what was acknowledged".into(),
                );
                s.fail(format!("flow-file repository poisoned: {cause}{outcome}"));
                return;
            }
            if due {
                if let Err(e) = s
                    .provenance
                    .sync()
                    .map_err(|e| e.to_string())
                    .and_then(|()| s.repo.checkpoint().map_err(|e| e.to_string()))
                {
                    s.fail(format!("checkpoint failed: {e}"));
                }
                if let Err(e) = s
                    .provenance
                    .enforce_retention(chrono::Utc::now().timestamp_millis())
                {
                    tracing::warn!("provenance retention: {e}");
                }
            }
            if let Some(text) = status {
                write_status_text(&s.dir, &text);
            }
        })
        .await;
        if due {
            last_checkpoint = Instant::now();
        }
    }
}

/// How long a processor with nothing to do waits before looking again (NiFi's "bored" yield),
/// unless a queue wakes it first.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// How long a source that found nothing to read rests before its next trigger, after a rest
/// of `previous` (zero: it had work): [`IDLE_WAIT`] (or its yield duration, if shorter) at
/// first, doubling while it keeps finding nothing, up to its yield duration (NiFi's yield;
/// 1 s by default). A source that just had work looks again soon; one quiet for a while
/// looks about once per yield duration, so a quiet flow costs next to nothing. Room made
/// downstream, or a start, still wakes it at once.
fn next_idle_rest(previous: Duration, yield_duration: Duration) -> Duration {
    let first = yield_duration.min(IDLE_WAIT);
    if previous.is_zero() {
        first
    } else {
        (previous * 2).min(yield_duration.max(first))
    }
}

/// How long a processor whose queues are empty waits for a commit into one of them to wake
/// it before it looks again anyway.
const INPUT_WAIT: Duration = Duration::from_secs(1);

async fn run_task(shared: Arc<Shared>, component: usize, processor: Arc<dyn Processor>) {
    let comp = shared.flow.processors[component].clone();
    let is_source = shared.incoming[component].is_empty();
    let waker = &shared.wakers[component];
    let mut next_tick = tokio::time::Instant::now();
    // The rest after the last trigger that found nothing to read; zero after work.
    let mut idle_rest = Duration::ZERO;
    loop {
        if shared.stopping() {
            return;
        }
        // The schedule.
        match &comp.schedule {
            Schedule::Timer(period) if !period.is_zero() => {
                if shared
                    .unless_stopped(tokio::time::sleep_until(next_tick))
                    .await
                    .is_none()
                {
                    return;
                }
                next_tick = tokio::time::Instant::now() + *period;
            }
            Schedule::Timer(_) => {}
            Schedule::Cron(cron) => {
                let now = chrono::Local::now();
                match cron.find_next_occurrence(&now, false) {
                    Ok(at) => {
                        let wait = (at - now).to_std().unwrap_or_default();
                        if shared
                            .unless_stopped(tokio::time::sleep(wait))
                            .await
                            .is_none()
                        {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        }
        if shared.stopping() {
            return;
        }
        // Stopped by a user: wait to be started (which wakes this task).
        if !shared.scheduled(component) {
            let _ = tokio::time::timeout(IDLE_WAIT, waker.notified()).await;
            continue;
        }
        // Room downstream (back pressure) and, for sources, a healthy repository.
        let full = shared.backed_up(component);
        if full || (is_source && shared.repo.poisoned().is_some()) {
            let _ = tokio::time::timeout(Duration::from_millis(10), waker.notified()).await;
            continue;
        }
        // Input.
        if !is_source {
            let now = Instant::now();
            if !shared.incoming[component]
                .iter()
                .any(|&q| shared.queues[q].has_available(now))
            {
                let qs: Vec<&Queue> = shared.incoming[component]
                    .iter()
                    .map(|&q| &shared.queues[q])
                    .collect();
                // A commit into one of its queues wakes it (the permit is kept, so none is
                // lost), and a penalty's end is timed exactly: the cap is only a backstop,
                // long enough that a quiet flow does not poll its queues.
                let wait = queue::penalty_wait(&qs, now, INPUT_WAIT);
                let waited = tokio::time::timeout(wait, waker.notified());
                if shared.unless_stopped(waited).await.is_none() {
                    return;
                }
                continue;
            }
        }
        if !processor.schedulable() {
            let _ = tokio::time::timeout(IDLE_WAIT, waker.notified()).await;
            continue;
        }
        shared.running_triggers.fetch_add(1, Ordering::SeqCst);
        let s = Arc::clone(&shared);
        let p = Arc::clone(&processor);
        let run_duration = comp.run_duration;
        let outcome =
            tokio::task::spawn_blocking(move || trigger(&s, component, &*p, run_duration)).await;
        shared.running_triggers.fetch_sub(1, Ordering::SeqCst);
        match outcome {
            Ok(Outcome::Worked) => idle_rest = Duration::ZERO,
            Ok(Outcome::Idle) => {
                if is_source {
                    // A source with nothing to read rests (see `next_idle_rest`), unless its
                    // own timer period paces it.
                    idle_rest = match comp.schedule {
                        Schedule::Timer(p) if !p.is_zero() => Duration::ZERO,
                        _ => next_idle_rest(idle_rest, comp.yield_duration),
                    };
                    if !idle_rest.is_zero() {
                        let rested = tokio::time::timeout(idle_rest, waker.notified());
                        if shared.unless_stopped(rested).await.is_none() {
                            return;
                        }
                    }
                }
            }
            Ok(Outcome::Yielded(rest)) => {
                // Not cut short by new input: a held-back processor (ControlRate) would
                // otherwise be triggered once per arrival and hand everything back each time.
                // At least a millisecond, even with a `yield` of zero.
                let rest = rest.min(comp.yield_duration).max(Duration::from_millis(1));
                if shared
                    .unless_stopped(tokio::time::sleep(rest))
                    .await
                    .is_none()
                {
                    return;
                }
            }
            Ok(Outcome::Failed) | Err(_) => {
                shared.stats[component]
                    .failures
                    .fetch_add(1, Ordering::Relaxed);
                let _ = tokio::time::timeout(comp.yield_duration, waker.notified()).await;
            }
        }
    }
}

enum Outcome {
    Worked,
    Idle,
    /// The processor asked to rest this long (`Trigger::Yield`).
    Yielded(Duration),
    Failed,
}

/// Runs one task's triggers for up to `run_duration` in one session, then commits.
fn trigger(
    shared: &Arc<Shared>,
    component: usize,
    processor: &dyn Processor,
    run_duration: Duration,
) -> Outcome {
    let mut session = shared.session(component);
    let started = Instant::now();
    let mut worked = false;
    let mut yielded = None;
    let name = &shared.flow.processors[component].name;
    shared.stats[component]
        .tasks
        .fetch_add(1, Ordering::Relaxed);
    loop {
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            crate::faults::trigger(name);
            processor.trigger(&mut session)
        }));
        match result {
            Ok(Ok(Trigger::Worked)) => worked = true,
            Ok(Ok(Trigger::Idle)) => break,
            Ok(Ok(Trigger::Yield(rest))) => {
                yielded = Some(rest);
                break;
            }
            Ok(Err(e)) => {
                shared.bulletin(
                    component,
                    BulletinLevel::Warning,
                    format!("processor `{name}` failed; rolling back, inputs penalized: {e}"),
                );
                session.rollback(true);
                return Outcome::Failed;
            }
            Err(panic) => {
                let why = panic_text(&*panic);
                shared.bulletin(
                    component,
                    BulletinLevel::Warning,
                    format!("processor `{name}` panicked ({why}); rolling back, inputs penalized"),
                );
                session.rollback(true);
                return Outcome::Failed;
            }
        }
        if run_duration.is_zero() || started.elapsed() >= run_duration || shared.stopping() {
            break;
        }
    }
    match session.commit() {
        Ok(committed) => {
            shared.count(component, &committed);
            if let Some(rest) = yielded {
                Outcome::Yielded(rest)
            } else if worked {
                Outcome::Worked
            } else {
                Outcome::Idle
            }
        }
        Err(e) => {
            shared.bulletin(
                component,
                BulletinLevel::Warning,
                format!("processor `{name}`: commit failed: {e}"),
            );
            Outcome::Failed
        }
    }
}

/// The message of a caught panic's payload.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// True for components that pass flow files through unchanged.
pub fn is_port(kind: &ComponentKind) -> bool {
    matches!(kind, ComponentKind::Port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_source_rests_longer_while_it_finds_nothing_up_to_its_yield() {
        let yield_duration = Duration::from_secs(1);
        let mut rest = Duration::ZERO;
        let mut rests = Vec::new();
        for _ in 0..6 {
            rest = next_idle_rest(rest, yield_duration);
            rests.push(rest.as_millis());
        }
        assert_eq!(rests, [100, 200, 400, 800, 1_000, 1_000]);
        // Work starts it over.
        assert_eq!(next_idle_rest(Duration::ZERO, yield_duration), IDLE_WAIT);
    }

    #[test]
    fn a_short_yield_keeps_an_idle_source_looking_often() {
        let short = Duration::from_millis(10);
        assert_eq!(next_idle_rest(Duration::ZERO, short), short);
        assert_eq!(next_idle_rest(short, short), short);
        assert_eq!(
            next_idle_rest(Duration::ZERO, Duration::ZERO),
            Duration::ZERO
        );
    }
}
