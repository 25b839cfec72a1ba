//! Jobs: a submitted DAG, running, and the handle to it.

pub use crate::job_watch::{DEFAULT_IDLE_TIMEOUT, JobStatus, JobWatch};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::dag::Topology;
use crate::error::Error;
use crate::executor::Executor;
use crate::metrics::{InstanceMetrics, MetricsSnapshot};
use crate::snapshot::coordinator::{Coordinator, SnapshotStats};
use crate::snapshot::{Guarantee, SnapshotConfig};
use crate::stall::Stall;

static NEXT_JOB_ID: AtomicU64 = AtomicU64::new(1);

/// Settings for one job. Start from the defaults and change what you need:
///
/// ```
/// use std::time::Duration;
/// use weir_core::JobConfig;
///
/// let config = JobConfig::default()
///     .with_name("orders")
///     .with_default_parallelism(2)
///     .with_idle_timeout(Duration::from_secs(5));
/// assert_eq!(config.default_parallelism, Some(2));
/// ```
///
/// The fields can be read and changed in place; new settings may be added in any release,
/// so the struct cannot be built field by field outside this crate.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobConfig {
    /// A name for logs and metrics.
    pub name: String,
    /// Instances per vertex that does not set its own parallelism. `None`: one per worker.
    pub default_parallelism: Option<usize>,
    /// The most items a tasklet moves into an inbox in one call.
    pub inbox_batch: usize,
    /// The most items one output port accepts in one call.
    pub outbox_batch: usize,
    /// How long a stream source may read nothing before it declares itself idle: it then
    /// sends an idle marker in band, after everything it sent before, and its consumers stop
    /// waiting for its watermark until it sends again. Backpressure never makes a source
    /// idle: time spent unable to emit does not count. A source may set its own timeout.
    pub idle_timeout: std::time::Duration,
    /// How long a job may make no progress, with items waiting in its queues, before the
    /// executor's watchdog logs a warning naming the vertices and their queue fill (see
    /// [`Job::stall`]).
    pub stall_timeout: std::time::Duration,
    /// Snapshots and restarts; `None` (the default): none, and a failure loses the job's
    /// state. See [`crate::snapshot`].
    pub snapshots: Option<SnapshotConfig>,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            name: "job".to_string(),
            default_parallelism: None,
            inbox_batch: 1024,
            outbox_batch: crate::outbox::DEFAULT_BATCH_LIMIT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            stall_timeout: Duration::from_secs(10),
            snapshots: None,
        }
    }
}

impl JobConfig {
    /// The same settings, with the job named `name` in logs and metrics.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The same settings, with `parallelism` instances per vertex that does not set its own.
    pub fn with_default_parallelism(mut self, parallelism: usize) -> Self {
        self.default_parallelism = Some(parallelism);
        self
    }

    /// The same settings, with at most `items` moved into an inbox per call.
    pub fn with_inbox_batch(mut self, items: usize) -> Self {
        self.inbox_batch = items;
        self
    }

    /// The same settings, with at most `items` accepted by an output port per call.
    pub fn with_outbox_batch(mut self, items: usize) -> Self {
        self.outbox_batch = items;
        self
    }

    /// The same settings, with stream sources declaring themselves idle after `timeout`
    /// without input (see [`JobConfig::idle_timeout`]).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The same settings, with the stall watchdog warning after `timeout` without progress
    /// (see [`JobConfig::stall_timeout`]).
    pub fn with_stall_timeout(mut self, timeout: Duration) -> Self {
        self.stall_timeout = timeout;
        self
    }

    /// The same settings, with snapshots and restarts as `snapshots` says.
    pub fn with_snapshots(mut self, snapshots: SnapshotConfig) -> Self {
        self.snapshots = Some(snapshots);
        self
    }

    /// The snapshot settings in force: `None` without snapshots, or with
    /// [`Guarantee::None`].
    pub fn snapshotting(&self) -> Option<&SnapshotConfig> {
        self.snapshots
            .as_ref()
            .filter(|s| s.guarantee != Guarantee::None)
    }
}

struct Outcome {
    status: JobStatus,
    error: Option<Error>,
    remaining: usize,
    finished_at: Option<Instant>,
}

/// What a failed job needs to start again from its last snapshot.
pub(crate) struct Restarter {
    pub dag: crate::dag::Dag,
    pub config: JobConfig,
    pub default_parallelism: usize,
    pub executor: std::sync::Weak<crate::executor::ExecutorInner>,
    pub attempts: u32,
}

/// The state a job's tasklets and its handle share.
pub(crate) struct JobShared {
    id: u64,
    name: String,
    cancel: AtomicBool,
    /// Set by the user's cancel: the job is not restarted.
    cancelled_by_user: AtomicBool,
    /// The current attempt's snapshot coordinator.
    coordinator: Mutex<Option<Arc<Coordinator>>>,
    /// The snapshot the current attempt resumed from.
    restored_from: Mutex<Option<u64>>,
    /// The savepoint that stopped the job ([`JobMonitor::stop_with_savepoint`]).
    stopped_with: Mutex<Option<crate::snapshot::Savepoint>>,
    /// Completed snapshots of earlier attempts.
    earlier_stats: Mutex<Vec<SnapshotStats>>,
    restarter: Mutex<Option<Restarter>>,
    outcome: Mutex<Outcome>,
    finished: Condvar,
    metrics: Vec<Arc<InstanceMetrics>>,
    blocking_threads: Mutex<Vec<JoinHandle<()>>>,
    /// The current attempt's snapshot coordinator thread: a restart waits for it to end, so
    /// that two attempts never write or prune the snapshot store at once.
    coordinator_thread: Mutex<Option<JoinHandle<()>>>,
    topology: Arc<Topology>,
    started: Instant,
    started_at: SystemTime,
    stall_timeout: Duration,
    stall: Mutex<Option<Stall>>,
    watch: JobWatch,
}

impl JobShared {
    pub(crate) fn new(
        config: &JobConfig,
        (tasklets, topology): (usize, Topology),
        metrics: Vec<Arc<InstanceMetrics>>,
        watch: JobWatch,
    ) -> Arc<Self> {
        Arc::new(JobShared {
            id: NEXT_JOB_ID.fetch_add(1, Ordering::Relaxed),
            name: config.name.clone(),
            cancel: AtomicBool::new(false),
            cancelled_by_user: AtomicBool::new(false),
            coordinator: Mutex::new(None),
            restored_from: Mutex::new(None),
            stopped_with: Mutex::new(None),
            earlier_stats: Mutex::new(Vec::new()),
            restarter: Mutex::new(None),
            outcome: Mutex::new(Outcome {
                status: JobStatus::Running,
                error: None,
                remaining: tasklets,
                finished_at: None,
            }),
            finished: Condvar::new(),
            metrics,
            blocking_threads: Mutex::new(Vec::new()),
            coordinator_thread: Mutex::new(None),
            topology: Arc::new(topology),
            started: Instant::now(),
            started_at: SystemTime::now(),
            stall_timeout: config.stall_timeout,
            stall: Mutex::new(None),
            watch,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The job's end, as processors see it.
    pub(crate) fn watch(&self) -> &JobWatch {
        &self.watch
    }

    /// Lets the job restart from its snapshots after a failure.
    pub(crate) fn set_restarter(&self, restarter: Restarter) {
        *self.restarter.lock().unwrap_or_else(|e| e.into_inner()) = Some(restarter);
    }

    /// Starts an attempt of `tasklets` tasklets, with its coordinator.
    pub(crate) fn begin_attempt(
        &self,
        tasklets: usize,
        coordinator: Option<Arc<Coordinator>>,
        restored_from: Option<u64>,
    ) {
        let mut outcome = self.lock();
        outcome.remaining = tasklets;
        let old = std::mem::replace(
            &mut *self.coordinator.lock().unwrap_or_else(|e| e.into_inner()),
            coordinator,
        );
        if let Some(old) = old {
            self.earlier_stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(old.stats());
        }
        *self.restored_from.lock().unwrap_or_else(|e| e.into_inner()) = restored_from;
        // A cancel that came while the job waited to restart stops the new attempt at once.
        self.cancel.store(
            self.cancelled_by_user.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// Whether the user cancelled the job.
    pub(crate) fn cancelled_by_user(&self) -> bool {
        self.cancelled_by_user.load(Ordering::Relaxed)
    }

    /// Ends the job for good without another attempt: it could not start again, or the user
    /// cancelled it while it waited to restart (`Error::Cancelled`).
    pub(crate) fn fail_to_restart(&self, error: Error) {
        let mut outcome = self.lock();
        let cancelled = matches!(error, Error::Cancelled);
        if !cancelled {
            tracing::error!(job = %self.name, %error, "job could not be restarted");
        }
        outcome.error = (!cancelled).then_some(error);
        outcome.status = if cancelled {
            JobStatus::Cancelled
        } else {
            JobStatus::Failed
        };
        outcome.finished_at = Some(Instant::now());
        self.watch.finish(
            outcome.status,
            outcome.error.as_ref().map(ToString::to_string),
        );
        self.finished.notify_all();
    }

    pub(crate) fn stall_timeout(&self) -> Duration {
        self.stall_timeout
    }

    pub(crate) fn instance_metrics(&self) -> &[Arc<InstanceMetrics>] {
        &self.metrics
    }

    /// The sum of every instance's activity counter: it moves whenever anything does.
    pub(crate) fn activity(&self) -> u64 {
        self.metrics.iter().map(|m| m.activity()).sum()
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.lock().status.is_terminal()
    }

    /// Records the current stall, or its end. Returns true when a stall begins.
    pub(crate) fn set_stall(&self, stall: Option<Stall>) -> bool {
        let mut current = self.stall.lock().unwrap_or_else(|e| e.into_inner());
        let began = current.is_none() && stall.is_some();
        *current = stall;
        began
    }

    fn status(&self) -> JobStatus {
        self.lock().status
    }

    /// The user's cancel: stops every tasklet, and no restart follows.
    fn cancel_by_user(&self) {
        self.cancelled_by_user.store(true, Ordering::Relaxed);
        self.cancel.store(true, Ordering::Relaxed);
    }

    fn metrics(&self) -> Vec<MetricsSnapshot> {
        self.metrics.iter().map(|m| m.snapshot()).collect()
    }

    fn snapshot_stats(&self) -> Vec<SnapshotStats> {
        let mut stats = self
            .earlier_stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(c) = self
            .coordinator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            stats.extend(c.stats());
        }
        stats
    }

    fn elapsed(&self) -> Duration {
        let outcome = self.lock();
        outcome.finished_at.unwrap_or_else(Instant::now) - self.started
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Outcome> {
        self.outcome.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether tasklets should stop: the job failed or was cancelled. One relaxed load.
    #[inline]
    pub(crate) fn should_stop(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Records the first failure and stops every tasklet.
    pub(crate) fn fail(&self, error: Error) {
        let mut outcome = self.lock();
        if outcome.error.is_none() {
            tracing::error!(job = %self.name, %error, "job failed");
            outcome.error = Some(error);
        }
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// A tasklet ended (finished, failed or stopped). The last one decides the outcome: a
    /// failure with restarts left starts the job again from its last snapshot.
    pub(crate) fn tasklet_ended(self: &Arc<Self>) {
        let mut outcome = self.lock();
        outcome.remaining -= 1;
        if outcome.remaining == 0 {
            if let Some(c) = self
                .coordinator
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                c.stop();
            }
            if outcome.error.is_some() && self.try_restart(&mut outcome) {
                return;
            }
            outcome.status = if outcome.error.is_some() {
                JobStatus::Failed
            } else if self.cancel.load(Ordering::Relaxed) {
                JobStatus::Cancelled
            } else {
                JobStatus::Completed
            };
            outcome.finished_at = Some(Instant::now());
            self.watch.finish(
                outcome.status,
                outcome.error.as_ref().map(ToString::to_string),
            );
            self.finished.notify_all();
        }
    }

    /// Schedules a restart if the policy allows one; true if it did.
    fn try_restart(self: &Arc<Self>, outcome: &mut Outcome) -> bool {
        if self.cancelled_by_user.load(Ordering::Relaxed) {
            return false;
        }
        let mut restarter = self.restarter.lock().unwrap_or_else(|e| e.into_inner());
        let Some(r) = restarter.as_mut() else {
            return false;
        };
        let Some(policy) = r.config.snapshots.as_ref().map(|s| s.restart) else {
            return false;
        };
        // A refusal (a snapshot that does not fit, a store that fails) would fail again.
        if r.attempts >= policy.attempts || matches!(outcome.error, Some(Error::Snapshot(_))) {
            return false;
        }
        r.attempts += 1;
        let attempt = r.attempts;
        let pause = policy.pause(attempt);
        let error = outcome.error.take().expect("checked");
        tracing::warn!(job = %self.name, %error, attempt, of = policy.attempts, ?pause, "job failed; restarting from its last snapshot");
        let job = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("weir-restart-{}", self.name))
            .spawn(move || {
                std::thread::sleep(pause);
                crate::executor::restart(&job);
            });
        match spawned {
            Ok(handle) => {
                self.blocking_threads
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(handle);
                true
            }
            Err(e) => {
                outcome.error = Some(Error::Thread(e));
                false
            }
        }
    }

    /// The restart state, for the executor.
    pub(crate) fn restarter(&self) -> std::sync::MutexGuard<'_, Option<Restarter>> {
        self.restarter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the attempt's snapshot coordinator thread, for [`join_coordinator`].
    ///
    /// [`join_coordinator`]: Self::join_coordinator
    pub(crate) fn set_coordinator_thread(&self, handle: JoinHandle<()>) {
        let old = self
            .coordinator_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(handle);
        if let Some(old) = old {
            self.add_blocking_thread(old);
        }
    }

    /// Waits for the last attempt's snapshot coordinator (told to stop when its tasklets
    /// ended) to finish what it was writing.
    pub(crate) fn join_coordinator(&self) {
        let handle = self
            .coordinator_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    pub(crate) fn add_blocking_thread(&self, handle: JoinHandle<()>) {
        self.blocking_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(handle);
    }
}

/// A handle to a running job.
///
/// It dereferences to the job's [`JobMonitor`], which reads the job (`id`, `name`,
/// `status`, `metrics`, `topology`, `snapshot_stats`, `elapsed`) and cancels it; the handle
/// adds waiting for the end ([`join`](Self::join)). Dropping the handle does not stop the
/// job; call [`cancel`](JobMonitor::cancel) for that. The handle keeps its executor's threads
/// alive, so `Executor::new(..)?.submit(..)` on a temporary executor is safe.
pub struct Job {
    monitor: JobMonitor,
    /// Keeps the worker threads alive while anyone holds the handle.
    _executor: Executor,
}

impl std::ops::Deref for Job {
    type Target = JobMonitor;

    fn deref(&self) -> &JobMonitor {
        &self.monitor
    }
}

/// Cancels a job from anywhere: another thread, a signal handler, an iterator's `Drop`.
#[derive(Clone)]
pub struct CancelHandle {
    shared: Arc<JobShared>,
}

impl CancelHandle {
    /// Asks every tasklet of the job to stop. Returns at once.
    pub fn cancel(&self) {
        self.shared.cancel_by_user();
    }
}

/// A read-only view of a job that outlives its [`Job`] handle: what a dashboard or a metrics
/// endpoint reads while the job runs and after [`Job::join`] consumed the handle. It can also
/// cancel the job.
///
/// Cheap to clone (one `Arc`). Reads are relaxed snapshots of the counters the tasklets keep
/// anyway; holding a monitor costs the running job nothing, and it keeps the job's counters
/// (not its threads) alive. A [`Job`] dereferences to its monitor.
#[derive(Clone)]
pub struct JobMonitor {
    shared: Arc<JobShared>,
}

impl JobMonitor {
    /// The job's id, unique in this process.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The current status.
    pub fn status(&self) -> JobStatus {
        self.shared.status()
    }

    /// Why the job failed (the error's text), once it has; `None` otherwise.
    pub fn error(&self) -> Option<String> {
        self.shared.watch.outcome().and_then(|(_, error)| error)
    }

    /// When the job was submitted.
    pub fn started_at(&self) -> SystemTime {
        self.shared.started_at
    }

    /// Time since submission, or the job's whole run time once it ended.
    pub fn elapsed(&self) -> Duration {
        self.shared.elapsed()
    }

    /// The DAG's shape: vertices with their parallelism, edges with their routing.
    pub fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// A copy of every processor instance's counters, in vertex order. Relaxed atomic
    /// loads, and a lock per instance for its own counters; nothing the running job waits for.
    pub fn metrics(&self) -> Vec<MetricsSnapshot> {
        self.shared.metrics()
    }

    /// The figures of every snapshot the job completed, oldest first, across restarts.
    pub fn snapshot_stats(&self) -> Vec<SnapshotStats> {
        self.shared.snapshot_stats()
    }

    /// Asks every tasklet of the job to stop. Returns at once; [`Job::join`] waits for the
    /// end and then reports [`Error::Cancelled`]. A job that already ended stays as it ended.
    pub fn cancel(&self) {
        self.shared.cancel_by_user();
    }

    /// Takes a savepoint and then cancels the job, as Flink's stop-with-savepoint: a
    /// snapshot starts at once (once no stage holds snapshots back), is written to the job's
    /// store and to [`SnapshotConfig::savepoints`](crate::snapshot::SnapshotConfig::savepoints),
    /// and once both are durable the job is cancelled ([`Job::join`] then reports
    /// [`Error::Cancelled`]). Submitting the job again under its name resumes from the
    /// savepoint. Blocks until the savepoint is written or the job ends.
    ///
    /// # Errors
    /// [`SavepointError::NotConfigured`] for a job without snapshots or a savepoint store,
    /// [`SavepointError::Ended`] when the job ended (or restarted after a failure) first,
    /// [`SavepointError::Failed`] when the savepoint store failed; in each case the job is not
    /// cancelled.
    ///
    /// [`SavepointError::NotConfigured`]: crate::snapshot::SavepointError::NotConfigured
    /// [`SavepointError::Ended`]: crate::snapshot::SavepointError::Ended
    /// [`SavepointError::Failed`]: crate::snapshot::SavepointError::Failed
    pub fn stop_with_savepoint(
        &self,
    ) -> Result<crate::snapshot::Savepoint, crate::snapshot::SavepointError> {
        use crate::snapshot::SavepointError;
        let coordinator = self
            .shared
            .coordinator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(coordinator) = coordinator else {
            return Err(if self.status().is_terminal() {
                SavepointError::Ended
            } else {
                SavepointError::NotConfigured
            });
        };
        coordinator.request_savepoint()?;
        let savepoint = coordinator.await_savepoint()?;
        *self
            .shared
            .stopped_with
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(savepoint.clone());
        self.shared.cancel_by_user();
        Ok(savepoint)
    }

    /// The savepoint that [`stop_with_savepoint`](Self::stop_with_savepoint) took before it
    /// cancelled the job, whoever called it (a signal handler, the REST API); `None` for a
    /// job not stopped that way.
    pub fn stopped_with_savepoint(&self) -> Option<crate::snapshot::Savepoint> {
        self.shared
            .stopped_with
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl std::fmt::Debug for JobMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobMonitor")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("status", &self.status())
            .finish()
    }
}

impl Job {
    pub(crate) fn new(shared: Arc<JobShared>, executor: Executor) -> Self {
        Job {
            monitor: JobMonitor { shared },
            _executor: executor,
        }
    }

    /// A view of this job that stays readable after [`join`](Self::join): for dashboards and
    /// metrics endpoints.
    pub fn monitor(&self) -> JobMonitor {
        self.monitor.clone()
    }

    /// The snapshot the job's current attempt resumed from, if it resumed.
    pub fn restored_from(&self) -> Option<u64> {
        *self
            .monitor
            .shared
            .restored_from
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// How many times the job was restarted after a failure.
    pub fn restarts(&self) -> u32 {
        self.monitor
            .shared
            .restarter()
            .as_ref()
            .map_or(0, |r| r.attempts)
    }

    /// A cloneable handle that can cancel this job.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            shared: Arc::clone(&self.monitor.shared),
        }
    }

    /// The stall the executor's watchdog sees right now: no progress for
    /// [`JobConfig::stall_timeout`] while items wait in some queue. `None` while the job
    /// moves, and again as soon as it moves after a stall.
    pub fn stall(&self) -> Option<Stall> {
        self.monitor
            .shared
            .stall
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits up to `timeout` for the job to end. Returns whether it ended.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let outcome = self.monitor.shared.lock();
        let (outcome, _) = self
            .monitor
            .shared
            .finished
            .wait_timeout_while(outcome, timeout, |o| !o.status.is_terminal())
            .unwrap_or_else(|e| e.into_inner());
        outcome.status.is_terminal()
    }

    /// Waits for the job to end and reports how. When it returns, no thread of this job is
    /// running any more.
    ///
    /// # Errors
    /// The first processor error or panic (naming the vertex and instance), or
    /// [`Error::Cancelled`].
    pub fn join(self) -> Result<(), Error> {
        let mut outcome = self.monitor.shared.lock();
        while !outcome.status.is_terminal() {
            outcome = self
                .monitor
                .shared
                .finished
                .wait(outcome)
                .unwrap_or_else(|e| e.into_inner());
        }
        let status = outcome.status;
        let error = outcome.error.take();
        drop(outcome);
        let threads = std::mem::take(
            &mut *self
                .monitor
                .shared
                .blocking_threads
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for t in threads {
            let _ = t.join();
        }
        self.monitor.shared.join_coordinator();
        match status {
            JobStatus::Completed => Ok(()),
            JobStatus::Cancelled => Err(Error::Cancelled),
            _ => Err(error.unwrap_or(Error::ExecutorShutDown)),
        }
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("status", &self.status())
            .finish()
    }
}
