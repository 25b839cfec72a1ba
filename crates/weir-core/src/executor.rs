//! The executor: cooperative worker threads, one per core, shared by every job.
//!
//! ```
//! use weir_core::{Dag, Edge, Executor, JobConfig, Vertex, builtin_processors::{IterSource, CollectSink}};
//!
//! let executor = Executor::shared();
//! let mut dag = Dag::new();
//! let source = dag.vertex(Vertex::new("numbers", |_| IterSource::new(0..100u32)).emits::<u32>().local_parallelism(1));
//! let (supplier, collected) = CollectSink::<u32>::supplier();
//! let sink = dag.vertex(Vertex::new("collect", supplier).accepts::<u32>());
//! dag.edge(Edge::between(source, sink));
//! executor.submit(dag, JobConfig::default()).unwrap().join().unwrap();
//! assert_eq!(collected.lock().unwrap().len(), 100);
//! ```
//!
//! Each worker loops over its tasklets and calls each one. After a run of passes in which no
//! tasklet made progress the worker parks ([`crate::park`]): until a tasklet at the other
//! end of one of its conveyors moves items (a call that moved anything nudges the threads of
//! its conveyor peers, which wakes only those that are parking), or something wakes one of
//! its tasklets, and at most for as long as its tasklets allow
//! ([`Processor::next_call`]): while one of them polls the
//! world outside, a pause of 25 µs at first, doubling up to 1 ms while nothing moves; while
//! all wait for input or for an instant, until the earliest instant, at most a heartbeat
//! (50 ms). Any progress resets the pause. A worker with no tasklets parks until one is
//! assigned. Before parking, a busy worker yields a few passes (up to 64, as many as pay
//! off at the current load; none on a quiet stream). Tasklets are spread round-robin over the workers. A non-cooperative processor
//! gets a thread of its own, which may block, and parks the same way.
//!
//! # Worker services
//!
//! A component that keeps per-thread state, such as the partition owners of a map service,
//! can run on the workers instead of threads of its own:
//! [`Executor::attach_worker_services`] gives each worker a [`WorkerService`] that it polls on
//! every pass, after its tasklets, also when it has no tasklets. A worker whose tasklets and
//! services are all idle parks (with no tasklets, until woken); whoever hands a service
//! work calls that worker's [`WorkerWaker::wake`] afterwards. The wake sets a flag before
//! it unparks, and the worker checks the flag right before it parks, so a wake that comes
//! after the service's last poll is never lost, even if something the worker ran in between
//! consumed the thread's park token.
//!
//! A panic inside a processor is caught on the worker, fails that processor's job (naming the
//! vertex and instance) and leaves the worker serving other jobs. A panic inside a worker
//! service is caught too: the service is logged and dropped, and the worker goes on (see
//! [`WorkerService`]).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::dag::{Dag, Routing, Vertex};
use crate::error::{BoxError, Error, Result, panic_message};
use crate::inbound::InboundStream;
use crate::item_type::{ErasedEnd, ErasedRoute};
use crate::job::{Job, JobConfig, JobShared, JobStatus, JobWatch, Restarter};
use crate::metrics::InstanceMetrics;
use crate::outbox::{ErasedPort, Outbox};
use crate::park::Parker;
use crate::pinning::{self, WorkerPinning};
use crate::processor::{NextCall, Processor, ProcessorContext, TaskletWaker};
use crate::snapshot::coordinator::{Coordinator, Slot};
use crate::snapshot::{self, Guarantee, SnapshotHolds};
use crate::stall::Watchdog;
use crate::tasklet::{ProcessorTasklet, Progress, SnapshotDuty};

/// Settings for an [`Executor`].
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Cooperative worker threads. Default: `std::thread::available_parallelism()`.
    pub workers: usize,
    /// The first pause of an idle worker.
    pub min_park: Duration,
    /// The longest pause of an idle worker while one of its tasklets polls
    /// ([`NextCall::Poll`]).
    pub max_park: Duration,
    /// The longest pause of an idle worker whose tasklets all wait for input or for a time
    /// ([`NextCall::OnWake`], [`NextCall::At`]): the bound on how soon a waiting job sees a
    /// cancellation, a snapshot asked for, or one that became durable, none of which wakes
    /// its workers. Default: 50 ms.
    pub heartbeat: Duration,
    /// Whether each worker thread is pinned to a CPU. Default: [`WorkerPinning::Auto`], one
    /// worker per CPU when the workers are exactly as many as the CPUs the process may run
    /// on (see [`crate::pinning`]).
    pub pinning: WorkerPinning,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            workers: thread::available_parallelism().map_or(1, |n| n.get()),
            min_park: Duration::from_micros(25),
            max_park: Duration::from_millis(1),
            heartbeat: Duration::from_millis(50),
            pinning: WorkerPinning::Auto,
        }
    }
}

struct Scheduled {
    tasklet: ProcessorTasklet,
    job: Arc<JobShared>,
}

/// Work that an executor worker polls on every pass of its loop, beside its tasklets (see
/// the [module docs](self#worker-services)).
///
/// A service must not block: the worker's tasklets wait while it runs. It should do a bounded
/// amount of work per poll (a budget of messages, say), so that the worker's tasklets keep
/// their turn. When a service has new work while its worker may be parked, whoever gave it
/// the work calls the worker's [`WorkerWaker::wake`].
///
/// **A panicking service is dropped, its worker lives on.** A panic out of `poll` is caught
/// on the worker and logged (`tracing` error, naming the service and the worker); the
/// service is then dropped (a panic in its `Drop` is caught and logged too) and never
/// polled again. The worker keeps running its tasklets and its other services, and no job
/// fails: a service belongs to no job, and the worker cannot tell which jobs, if any,
/// depend on it — as in Flink or Jet, where a failing member-level service does not bring
/// down the task threads of unrelated jobs. A service whose failure must reach its callers
/// reports it through its own channels: once it is dropped, whatever it owned (the
/// receiving ends of its queues, say) is dropped with it, so its callers see a closed
/// channel instead of waiting forever.
pub trait WorkerService: Send {
    /// Does some of the service's pending work. Returns [`Progress::MadeProgress`] when it did
    /// any, [`Progress::NoProgress`] when there was none, and [`Progress::Done`] when the
    /// service has stopped: the worker then drops it and polls it no more. A panic here
    /// drops the service as `Done` does, after logging it.
    fn poll(&mut self) -> Progress;

    /// The service's name in logs, such as the one of a panic out of [`poll`](Self::poll).
    /// Default: the implementing type's name.
    fn name(&self) -> std::borrow::Cow<'static, str> {
        std::any::type_name::<Self>().into()
    }
}

struct WorkerShared {
    index: usize,
    incoming: Mutex<Vec<Scheduled>>,
    incoming_services: Mutex<Vec<Box<dyn WorkerService>>>,
    has_incoming: AtomicBool,
    parker: Arc<Parker>,
    shutdown: AtomicBool,
}

impl WorkerShared {
    /// Makes the worker run another pass soon (see [`Parker::wake`]).
    #[inline]
    fn wake(&self) {
        self.parker.wake();
    }
}

/// Wakes one worker of an [`Executor`] so that it polls its tasklets and
/// [`WorkerService`]s again soon: call it after handing a worker's service new work.
///
/// Cost: one atomic store and, when the worker is parked, one futex wake; a wake of a busy
/// worker only costs it one extra pass before it next parks. Cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct WorkerWaker {
    worker: Arc<WorkerShared>,
}

impl std::fmt::Debug for WorkerWaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerWaker")
            .field("worker", &self.worker.index)
            .finish()
    }
}

impl WorkerWaker {
    /// Makes the worker run a pass soon, also if it is parked or about to park. Never blocks.
    #[inline]
    pub fn wake(&self) {
        self.worker.wake();
    }

    /// The worker's index, `0..workers`; its thread is named `weir-worker-{index}`.
    pub fn index(&self) -> usize {
        self.worker.index
    }

    /// The worker's thread, once it has started (it has by the time
    /// [`Executor::new`] returns).
    pub fn thread(&self) -> Option<&Thread> {
        self.worker.parker.thread()
    }
}

pub(crate) struct ExecutorInner {
    config: ExecutorConfig,
    /// The CPU each worker is pinned to, `None` for one the scheduler places.
    cpus: Vec<Option<usize>>,
    workers: Vec<Arc<WorkerShared>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    next_worker: AtomicUsize,
    watchdog: Watchdog,
}

impl Drop for ExecutorInner {
    fn drop(&mut self) {
        for w in &self.workers {
            w.shutdown.store(true, Ordering::Release);
            w.wake();
        }
        for h in self
            .handles
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = h.join();
        }
    }
}

/// Runs jobs on cooperative worker threads. Cheap to clone; the threads stop when the last
/// clone is dropped (running jobs then fail with [`Error::ExecutorShutDown`]).
#[derive(Clone)]
pub struct Executor {
    inner: Arc<ExecutorInner>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("workers", &self.inner.workers.len())
            .finish()
    }
}

impl Executor {
    /// Starts `config.workers` worker threads.
    ///
    /// # Errors
    /// [`Error::Thread`] when a thread cannot be spawned.
    pub fn new(config: ExecutorConfig) -> Result<Self> {
        let workers: Vec<Arc<WorkerShared>> = (0..config.workers.max(1))
            .map(|index| {
                Arc::new(WorkerShared {
                    index,
                    incoming: Mutex::new(Vec::new()),
                    incoming_services: Mutex::new(Vec::new()),
                    has_incoming: AtomicBool::new(false),
                    parker: Arc::new(Parker::new()),
                    shutdown: AtomicBool::new(false),
                })
            })
            .collect();
        let planned = pinning::worker_cpus(config.pinning, workers.len(), &pinning::allowed_cpus());
        let mut handles = Vec::new();
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
        for (i, w) in workers.iter().enumerate() {
            let w = Arc::clone(w);
            let idle = Backoff::new(&config, MAX_IDLE_YIELDS);
            let (cpu, pinned_tx) = (planned[i], pinned_tx.clone());
            let handle = thread::Builder::new()
                .name(format!("weir-worker-{i}"))
                .spawn(move || {
                    let pinned = cpu.filter(|&cpu| match pinning::pin_current_thread(cpu) {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::warn!(worker = i, cpu, error = %e, "worker runs unpinned");
                            false
                        }
                    });
                    let _ = pinned_tx.send((i, pinned));
                    // The report is in: `Executor::new` stops waiting once every sender is gone.
                    drop(pinned_tx);
                    worker_loop(&w, idle)
                })
                .map_err(Error::Thread)?;
            workers[i].parker.bind(handle.thread().clone());
            handles.push(handle);
        }
        drop(pinned_tx);
        // Each worker reports its pin before it takes work: a few microseconds at start.
        let mut cpus = vec![None; workers.len()];
        for (i, cpu) in pinned_rx {
            cpus[i] = cpu;
        }
        if cpus.iter().any(Option::is_some) {
            tracing::debug!(?cpus, "executor workers pinned");
        }
        Ok(Executor {
            inner: Arc::new(ExecutorInner {
                config,
                cpus,
                workers,
                handles: Mutex::new(handles),
                next_worker: AtomicUsize::new(0),
                watchdog: Watchdog::start(),
            }),
        })
    }

    /// The CPU each worker thread is pinned to, by worker index; `None` for a worker the
    /// scheduler places (see [`ExecutorConfig::pinning`]). A pin the system refused is
    /// `None` too, and was logged as a warning.
    pub fn worker_cpus(&self) -> &[Option<usize>] {
        &self.inner.cpus
    }

    /// The process-wide executor with default settings, started on first use.
    ///
    /// # Panics
    /// If its worker threads cannot be started.
    pub fn shared() -> Executor {
        static SHARED: OnceLock<Executor> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                Executor::new(ExecutorConfig::default()).expect("cannot start the shared executor")
            })
            .clone()
    }

    /// The number of cooperative worker threads.
    pub fn workers(&self) -> usize {
        self.inner.workers.len()
    }

    /// The settings.
    pub fn config(&self) -> &ExecutorConfig {
        &self.inner.config
    }

    /// One waker per worker, indexed by worker: what a [`WorkerService`] of that worker is
    /// woken with when it is handed work.
    pub fn worker_wakers(&self) -> Vec<WorkerWaker> {
        self.inner
            .workers
            .iter()
            .map(|w| WorkerWaker {
                worker: Arc::clone(w),
            })
            .collect()
    }

    /// Gives each worker a service to poll on every pass of its loop (see the
    /// [module docs](self#worker-services)): `services[i]` runs on worker `i`, thread
    /// `weir-worker-{i}`, from its next pass on, until its `poll` answers
    /// [`Progress::Done`] or the executor shuts down (the service is then dropped on its
    /// worker). Several sets of services may be attached; each worker polls its own in the
    /// order they were attached.
    ///
    /// # Errors
    /// [`Error::WorkerServiceCount`] when `services` does not hold one service per worker;
    /// nothing is attached then.
    pub fn attach_worker_services(&self, services: Vec<Box<dyn WorkerService>>) -> Result<()> {
        if services.len() != self.inner.workers.len() {
            return Err(Error::WorkerServiceCount {
                given: services.len(),
                workers: self.inner.workers.len(),
            });
        }
        for (worker, service) in self.inner.workers.iter().zip(services) {
            worker
                .incoming_services
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(service);
            worker.has_incoming.store(true, Ordering::Release);
            worker.wake();
        }
        Ok(())
    }

    /// Validates `dag`, creates and initialises every processor instance, wires the conveyors
    /// and starts the tasklets. With snapshots ([`JobConfig::snapshots`]), the newest complete
    /// snapshot of a job of the same name is restored first, and a failure restarts the job
    /// from its last snapshot under the restart policy.
    ///
    /// # Errors
    /// [`Error::InvalidDag`], [`Error::InitFailed`], [`Error::Snapshot`] (the store cannot be
    /// read, or its snapshot was taken of another DAG) or [`Error::RestoreFailed`]; in every
    /// case nothing ran.
    pub fn submit(&self, dag: Dag, config: JobConfig) -> Result<Job> {
        dag.validate()?;
        let default_parallelism = config.default_parallelism.unwrap_or(self.workers()).max(1);
        let watch = JobWatch::named(&config.name);
        let attempt = match prepare(&dag, &config, default_parallelism, &watch, None) {
            Ok(a) => a,
            Err(e) => {
                watch.finish(JobStatus::Failed, Some(e.to_string()));
                return Err(e);
            }
        };
        let metrics = attempt
            .tasklets
            .iter()
            .map(|(_, m)| Arc::clone(m))
            .collect();
        let topology = dag.topology(default_parallelism);
        let job = JobShared::new(&config, (attempt.tasklets.len(), topology), metrics, watch);
        if config.snapshotting().is_some() {
            job.set_restarter(Restarter {
                dag,
                config,
                default_parallelism,
                executor: Arc::downgrade(&self.inner),
                attempts: 0,
            });
        }
        self.inner.watchdog.watch(&job);
        self.launch(&job, attempt);
        Ok(Job::new(job, self.clone()))
    }

    /// Starts an attempt's coordinator and tasklets.
    fn launch(&self, job: &Arc<JobShared>, attempt: Attempt) {
        job.begin_attempt(
            attempt.tasklets.len(),
            attempt.coordinator.clone(),
            attempt.restored_from,
        );
        if let Some(coordinator) = attempt.coordinator {
            let shared = Arc::clone(job);
            match thread::Builder::new()
                .name(format!("weir-snapshots-{}", job.name()))
                .spawn(move || {
                    if let Err(e) = coordinator.run() {
                        shared.fail(e.into());
                    }
                }) {
                Ok(handle) => job.set_coordinator_thread(handle),
                Err(e) => job.fail(Error::Thread(e)),
            }
        }
        for (tasklet, _) in attempt.tasklets {
            if tasklet.is_cooperative() {
                let w = self.inner.next_worker.fetch_add(1, Ordering::Relaxed)
                    % self.inner.workers.len();
                let worker = &self.inner.workers[w];
                tasklet.bind_waker(Arc::clone(&worker.parker));
                worker
                    .incoming
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Scheduled {
                        tasklet,
                        job: Arc::clone(job),
                    });
                worker.has_incoming.store(true, Ordering::Release);
                worker.wake();
            } else {
                let name = format!("weir-blocking-{}-{}", tasklet.vertex(), tasklet.instance());
                let parker = Arc::new(Parker::new());
                tasklet.bind_waker(Arc::clone(&parker));
                let scheduled = Scheduled {
                    tasklet,
                    job: Arc::clone(job),
                };
                // Nothing else runs on the thread: it parks without yielding.
                let idle = Backoff::new(&self.inner.config, 0);
                match thread::Builder::new().name(name).spawn(move || {
                    parker.bind_current();
                    blocking_loop(scheduled, &parker, idle);
                }) {
                    Ok(handle) => job.add_blocking_thread(handle),
                    Err(e) => {
                        job.fail(Error::Thread(e));
                        job.tasklet_ended();
                    }
                }
            }
        }
    }
}

/// Starts a failed job again from its last complete snapshot, on the executor it ran on.
pub(crate) fn restart(job: &Arc<JobShared>) {
    // The failed attempt's coordinator may still be publishing or pruning a snapshot: the
    // new attempt restores from, and numbers its snapshots after, what it leaves.
    job.join_coordinator();
    if job.cancelled_by_user() {
        job.fail_to_restart(Error::Cancelled);
        return;
    }
    let (executor, attempt) = {
        let restarter = job.restarter();
        let Some(r) = restarter.as_ref() else {
            return;
        };
        let Some(inner) = r.executor.upgrade() else {
            drop(restarter);
            job.fail_to_restart(Error::ExecutorShutDown);
            return;
        };
        let metrics = job.instance_metrics().to_vec();
        let attempt = prepare(
            &r.dag,
            &r.config,
            r.default_parallelism,
            job.watch(),
            Some(&metrics),
        );
        (Executor { inner }, attempt)
    };
    match attempt {
        Ok(attempt) => executor.launch(job, attempt),
        Err(e) => job.fail_to_restart(e),
    }
}

/// One run of a job's tasklets, ready to launch.
struct Attempt {
    tasklets: Vec<(ProcessorTasklet, Arc<InstanceMetrics>)>,
    coordinator: Option<Arc<Coordinator>>,
    restored_from: Option<u64>,
}

/// Finds the snapshot to resume from, builds the tasklets, restores them and gives them
/// their snapshot duties.
fn prepare(
    dag: &Dag,
    config: &JobConfig,
    default_parallelism: usize,
    watch: &JobWatch,
    metrics: Option<&[Arc<InstanceMetrics>]>,
) -> Result<Attempt> {
    let snapshots = config.snapshotting();
    let mut restored = match snapshots {
        Some(s) => {
            let names: Vec<&str> = dag.vertices.iter().map(|v| v.name.as_str()).collect();
            snapshot::load_latest(&*s.store, &config.name, &names)?
        }
        None => None,
    };
    let guarantee = snapshots.map_or(Guarantee::None, |s| s.guarantee);
    // A snapshot resumes only under the guarantee it was taken under: at-least-once
    // positions and sink state are not exactly-once ones, nor the other way round.
    if let (Some(s), Some(r)) = (snapshots, restored.as_ref())
        && r.manifest.guarantee != guarantee
    {
        return Err(snapshot::SnapshotError::GuaranteeMismatch {
            path: s.store.location(&config.name, r.manifest.id, ""),
            snapshot: r.manifest.guarantee,
            run: guarantee,
        }
        .into());
    }
    let holds = if snapshots.is_some() {
        SnapshotHolds::active()
    } else {
        SnapshotHolds::default()
    };
    let (mut tasklets, parallelism) = build_tasklets(
        dag,
        config,
        default_parallelism,
        (watch, guarantee, holds.clone()),
        metrics,
    )?;
    let restored_id = restored.as_ref().map(|r| r.manifest.id);
    if let Some(restored) = restored.as_mut() {
        // Entries move to their instances in one pass; instances restore in parallel, since a
        // large keyed state is decoded and inserted in each.
        let entries = restored.take_entries(&parallelism);
        let slots: Vec<(usize, usize)> = parallelism
            .iter()
            .enumerate()
            .flat_map(|(v, p)| (0..*p).map(move |i| (v, i)))
            .collect();
        let errors: Vec<Option<BoxError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = tasklets
                .iter_mut()
                .zip(entries)
                .map(|((tasklet, _), entries)| {
                    scope.spawn(move || {
                        match catch_unwind(AssertUnwindSafe(|| tasklet.restore(entries))) {
                            Ok(Ok(())) => None,
                            Ok(Err(source)) => Some(source),
                            Err(payload) => Some(panic_message(&*payload).into()),
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Some("restore thread died".into()))
                })
                .collect()
        });
        if let Some((slot, source)) = errors
            .into_iter()
            .enumerate()
            .find_map(|(slot, e)| e.map(|e| (slot, e)))
        {
            let (v, i) = slots[slot];
            let e = Error::RestoreFailed {
                vertex: dag.vertices[v].name.clone(),
                instance: i,
                snapshot: restored.manifest.id,
                source,
            };
            discard(tasklets);
            return Err(e);
        }
        tracing::info!(job = %config.name, snapshot = restored.manifest.id, "restored from snapshot");
    }
    let coordinator = snapshots.map(|s| {
        let vertices = dag
            .vertices
            .iter()
            .zip(&parallelism)
            .map(|(v, p)| (v.name.clone(), *p))
            .collect();
        let slots = parallelism
            .iter()
            .enumerate()
            .flat_map(|(vertex, p)| (0..*p).map(move |instance| Slot { vertex, instance }))
            .collect();
        // Above every savepoint too: a savepoint's id names its folder in both stores.
        let next_id = restored
            .as_ref()
            .map_or_else(|| first_free_id(&*s.store, &config.name), |r| r.next_id)
            .max(
                s.savepoints
                    .as_ref()
                    .map_or(1, |sp| first_free_id(&**sp, &config.name)),
            );
        Arc::new(Coordinator::new(
            config.name.clone(),
            s.clone(),
            vertices,
            slots,
            (restored_id.unwrap_or(0), next_id),
            holds.clone(),
        ))
    });
    if let Some(c) = &coordinator {
        for (slot, (tasklet, _)) in tasklets.iter_mut().enumerate() {
            tasklet.take_part_in_snapshots(SnapshotDuty::new(
                Arc::clone(c),
                slot,
                restored_id.unwrap_or(0),
            ));
        }
    }
    Ok(Attempt {
        tasklets,
        coordinator,
        restored_from: restored_id,
    })
}

/// The first snapshot id of a job that starts afresh: above any folder left behind, so that
/// nothing stale is mixed into a new snapshot.
fn first_free_id(store: &dyn snapshot::SnapshotStore, job: &str) -> u64 {
    store
        .ids(job)
        .ok()
        .and_then(|ids| ids.first().copied())
        .map_or(1, |newest| newest + 1)
}

/// Calls one tasklet, turning an error or a panic into a job failure. Returns whether the
/// tasklet is still alive, and whether it made progress.
fn call_once(s: &mut Scheduled) -> (bool, bool) {
    if s.job.should_stop() {
        return (false, false);
    }
    match catch_unwind(AssertUnwindSafe(|| s.tasklet.call())) {
        Ok(Ok(Progress::MadeProgress)) => (true, true),
        Ok(Ok(Progress::NoProgress)) => (true, false),
        Ok(Ok(Progress::Done)) => (false, true),
        Ok(Err(source)) => {
            s.job.fail(Error::ProcessorFailed {
                vertex: s.tasklet.vertex().to_string(),
                instance: s.tasklet.instance(),
                source,
            });
            (false, true)
        }
        Err(payload) => {
            s.job.fail(panicked(
                s.tasklet.vertex(),
                s.tasklet.instance(),
                "process",
                &*payload,
            ));
            (false, true)
        }
    }
}

/// The error for a panic in `hook` of a processor instance.
fn panicked(
    vertex: &str,
    instance: usize,
    hook: &'static str,
    payload: &(dyn Any + Send),
) -> Error {
    Error::ProcessorPanicked {
        vertex: vertex.to_string(),
        instance,
        hook,
        message: panic_message(payload),
    }
}

/// Closes and drops a tasklet that will not be called again, then counts it out of its job.
/// An error or a panic in the processor's `close` or `Drop` fails the job (naming the
/// vertex and instance) and leaves the calling thread alive.
fn end(mut s: Scheduled) {
    let job = Arc::clone(&s.job);
    match catch_unwind(AssertUnwindSafe(|| s.tasklet.close())) {
        Ok(Ok(())) => {}
        Ok(Err(source)) => job.fail(Error::ProcessorFailed {
            vertex: s.tasklet.vertex().to_string(),
            instance: s.tasklet.instance(),
            source,
        }),
        Err(payload) => job.fail(panicked(
            s.tasklet.vertex(),
            s.tasklet.instance(),
            "close",
            &*payload,
        )),
    }
    let (vertex, instance) = (Arc::clone(s.tasklet.vertex()), s.tasklet.instance());
    // Dropped apart from `close`, so that a panicking `Drop` never runs while unwinding.
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(s))) {
        job.fail(panicked(&vertex, instance, "drop", &*payload));
    }
    job.tasklet_ended();
}

/// Polls every service once; drops those that are done. Whether any made progress.
///
/// A service whose `poll` panics is logged and dropped like a done one, and the loop goes
/// on with the next: the worker lives on for its tasklets and other services.
fn poll_services(worker: usize, services: &mut Vec<Box<dyn WorkerService>>) -> bool {
    let mut progress = false;
    let mut i = 0;
    while i < services.len() {
        match catch_unwind(AssertUnwindSafe(|| services[i].poll())) {
            Ok(Progress::MadeProgress) => {
                progress = true;
                i += 1;
            }
            Ok(Progress::NoProgress) => i += 1,
            Ok(Progress::Done) => {
                progress = true;
                drop_service(worker, services.swap_remove(i));
            }
            Err(payload) => {
                // Named before the drop: the name may need the service.
                let service = services[i].name();
                tracing::error!(
                    %service,
                    worker,
                    panic = %panic_message(&*payload),
                    "worker service panicked in poll; it is dropped and the worker goes on"
                );
                progress = true;
                drop_service(worker, services.swap_remove(i));
            }
        }
    }
    progress
}

/// Drops a service on its worker; a panic in its `Drop` is logged, not let out.
fn drop_service(worker: usize, service: Box<dyn WorkerService>) {
    let name = service.name();
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(service))) {
        tracing::error!(
            service = %name,
            worker,
            panic = %panic_message(&*payload),
            "worker service panicked while being dropped"
        );
    }
}

fn worker_loop(me: &WorkerShared, mut idle: Backoff) {
    let mut tasklets: Vec<Scheduled> = Vec::new();
    let mut services: Vec<Box<dyn WorkerService>> = Vec::new();
    loop {
        if me.has_incoming.swap(false, Ordering::Acquire) {
            tasklets.append(&mut me.incoming.lock().unwrap_or_else(|e| e.into_inner()));
            services.append(
                &mut me
                    .incoming_services
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()),
            );
        }
        if me.shutdown.load(Ordering::Acquire) {
            for s in tasklets.drain(..) {
                s.job.fail(Error::ExecutorShutDown);
                end(s);
            }
            for service in services.drain(..) {
                drop_service(me.index, service);
            }
            return;
        }
        if tasklets.is_empty() && services.is_empty() {
            me.parker.park(None);
            continue;
        }
        let mut progress = false;
        let mut i = 0;
        while i < tasklets.len() {
            let (alive, moved) = call_once(&mut tasklets[i]);
            progress |= moved;
            if alive {
                i += 1;
            } else {
                end(tasklets.swap_remove(i));
            }
        }
        // After the tasklets: work a tasklet just sent to this worker's service is done in
        // this pass, not after a park.
        progress |= poll_services(me.index, &mut services);
        // Only services, which wake the worker when they are given work: no timed pause.
        idle.after_pass(progress, &me.parker, || {
            (!tasklets.is_empty()).then(|| {
                tasklets.iter().fold(NextCall::OnWake, |next, s| {
                    next.earliest(s.tasklet.next_call())
                })
            })
        });
    }
}

/// How a thread that runs tasklets waits when a pass over them moved nothing: it yields a
/// few passes (a producer on another core often refills a queue within microseconds; the
/// number adapts, see [`MAX_IDLE_YIELDS`]), then
/// raises its parking flag and looks once more, then parks until nudged by a conveyor peer
/// or woken, and at most for as long as its tasklets allow ([`NextCall`]): while one polls,
/// a pause that starts at `min_park` and doubles up to `max_park` while nothing moves;
/// otherwise until the earliest instant one asked for, at most a heartbeat
/// ([`ExecutorConfig::heartbeat`]). Any progress starts over.
struct Backoff {
    min_park: Duration,
    max_park: Duration,
    park: Duration,
    idle_passes: u32,
    /// Idle passes yielded through before preparing to park, now.
    yields: u32,
    /// The most `yields` grows to.
    max_yields: u32,
    /// Passes that made progress since the last park.
    busy_passes: u32,
    /// The longest park while no tasklet polls.
    heartbeat: Duration,
    /// The parking flag is up: the pass that just ran was the last look.
    announced: bool,
}

impl Backoff {
    fn new(config: &ExecutorConfig, yields: u32) -> Self {
        Backoff {
            min_park: config.min_park,
            max_park: config.max_park,
            heartbeat: config.heartbeat,
            park: config.min_park,
            idle_passes: 0,
            // Decays within a few parks on a quiet stream.
            yields,
            max_yields: yields,
            busy_passes: 0,
            announced: false,
        }
    }

    /// Waits as the pass's outcome calls for. `next_call` is asked only when the thread is
    /// about to park: when its tasklets next need a call, `None` to park until woken.
    fn after_pass(
        &mut self,
        progress: bool,
        parker: &Parker,
        next_call: impl FnOnce() -> Option<NextCall>,
    ) {
        if progress {
            if self.announced {
                parker.cancel_park();
                self.announced = false;
            }
            self.park = self.min_park;
            self.idle_passes = 0;
            self.busy_passes = self.busy_passes.saturating_add(1);
            return;
        }
        if self.idle_passes < self.yields {
            self.idle_passes += 1;
            thread::yield_now();
        } else if !self.announced {
            // The next pass is the last look: anything published after the flag went up
            // nudges this thread.
            parker.prepare_park();
            self.announced = true;
        } else {
            self.announced = false;
            let parked = Instant::now();
            self.park_for(next_call(), parker);
            let pause = parked.elapsed();
            let busy = std::mem::take(&mut self.busy_passes) >= BUSY_PASSES;
            if pause < SHORT_PARK && busy {
                // Busy, and woken almost at once: at this load, yielding would have kept the
                // thread (and spared its producer the wake).
                self.yields = (self.yields * 2).max(1).min(self.max_yields);
            } else if pause >= LONG_PARK {
                // Nothing came for a while: at this load the yields only cost.
                self.yields /= 2;
            }
        }
    }

    /// Parks for as long as `next_call` allows (see [`Backoff`]).
    fn park_for(&mut self, next_call: Option<NextCall>, parker: &Parker) {
        match next_call {
            None => parker.park(None),
            Some(NextCall::Poll) => {
                parker.park(Some(self.park));
                self.park = (self.park * 2).min(self.max_park);
            }
            Some(NextCall::At(due)) => {
                let wait = due
                    .saturating_duration_since(Instant::now())
                    .min(self.heartbeat);
                if wait.is_zero() {
                    // Due already: the next pass is its call.
                    parker.cancel_park();
                } else {
                    parker.park(Some(wait));
                }
            }
            Some(NextCall::OnWake) => parker.park(Some(self.heartbeat)),
        }
    }
}

/// The most idle passes a worker yields through before it prepares to park. The number
/// doubles each time a busy worker's park ends within [`SHORT_PARK`] and halves each time one lasts
/// [`LONG_PARK`] or more, so a busy worker keeps yielding (a wake costs its producers a
/// futex call) while one on a quiet stream parks at once: at a thousand events per second, 64 yields
/// per wake cost a tenth of a core. A non-cooperative tasklet's own thread parks without
/// yielding: nothing else runs on it.
const MAX_IDLE_YIELDS: u32 = 64;

/// A park shorter than this, after at least [`BUSY_PASSES`] passes that made progress, says
/// the load is heavy: the worker's yields double. (A worker on a quiet stream also parks
/// briefly between the hops of one event through the job, after a pass or two.)
const SHORT_PARK: Duration = Duration::from_micros(100);

/// See [`SHORT_PARK`].
const BUSY_PASSES: u32 = 16;

/// A park at least this long says the load is light: the worker's yields halve.
const LONG_PARK: Duration = Duration::from_micros(500);

fn blocking_loop(mut s: Scheduled, parker: &Parker, mut idle: Backoff) {
    loop {
        let (alive, moved) = call_once(&mut s);
        if !alive {
            end(s);
            return;
        }
        idle.after_pass(moved, parker, || Some(s.tasklet.next_call()));
    }
}

/// Creates one processor instance and runs its `init`, on the submitting thread. A panic in
/// either is caught and reported like an error, naming the vertex and instance; the
/// processor is then closed and dropped, also under `catch_unwind`.
fn create_and_init(vertex: &Vertex, ctx: &ProcessorContext) -> Result<Box<dyn Processor>> {
    let instance = ctx.global_index();
    let init_panicked =
        |hook, payload: Box<dyn Any + Send>| panicked(&vertex.name, instance, hook, &*payload);
    let mut processor = catch_unwind(AssertUnwindSafe(|| vertex.supplier.create(ctx)))
        .map_err(|payload| init_panicked("create", payload))?;
    let error = match catch_unwind(AssertUnwindSafe(|| processor.init(ctx))) {
        Ok(Ok(())) => return Ok(processor),
        Ok(Err(source)) => Error::InitFailed {
            vertex: vertex.name.clone(),
            instance,
            source,
        },
        Err(payload) => init_panicked("init", payload),
    };
    // Like Jet, close even a processor whose init failed; its own failure is secondary.
    let _ = catch_unwind(AssertUnwindSafe(|| processor.close()));
    let _ = catch_unwind(AssertUnwindSafe(move || drop(processor)));
    Err(error)
}

/// Closes and drops the tasklets of a job that will not start. Their errors and panics are
/// secondary to the one that stopped the submission, so they are only logged.
fn discard(tasklets: Vec<(ProcessorTasklet, Arc<InstanceMetrics>)>) {
    for (mut tasklet, _) in tasklets {
        let (job, vertex, instance) = (
            tasklet.job_name().to_string(),
            Arc::clone(tasklet.vertex()),
            tasklet.instance(),
        );
        let closed = catch_unwind(AssertUnwindSafe(|| tasklet.close()));
        let dropped = catch_unwind(AssertUnwindSafe(move || drop(tasklet)));
        if !matches!(closed, Ok(Ok(()))) || dropped.is_err() {
            tracing::warn!(%job, %vertex, instance, "processor of a refused job failed to close");
        }
    }
}

/// One vertex instance's output ports, by ordinal, filled in as the edges are wired.
type PortSlots = Vec<Option<Box<dyn ErasedPort>>>;

/// Turns a validated DAG into tasklets: one per vertex instance, with conveyors for every
/// edge. Processors are created and initialised here, before anything runs.
/// Returns them in vertex order, instances in order, with each vertex's parallelism. An
/// attempt after a restart passes the first attempt's `metrics`, so that counters go on.
#[allow(clippy::type_complexity)]
fn build_tasklets(
    dag: &Dag,
    config: &JobConfig,
    default_parallelism: usize,
    (watch, guarantee, holds): (&JobWatch, Guarantee, SnapshotHolds),
    metrics: Option<&[Arc<InstanceMetrics>]>,
) -> Result<(Vec<(ProcessorTasklet, Arc<InstanceMetrics>)>, Vec<usize>)> {
    let parallelism: Vec<usize> = dag
        .vertices
        .iter()
        .map(|v| v.parallelism.unwrap_or(default_parallelism))
        .collect();
    for e in &dag.edges {
        let (from, to) = (parallelism[e.from.index()], parallelism[e.to.index()]);
        if matches!(e.routing, Routing::Isolated) && from != to {
            return Err(crate::error::DagError::IsolatedParallelism {
                edge: format!(
                    "'{}':{} -> '{}':{}",
                    dag.vertices[e.from.index()].name,
                    e.from_ordinal,
                    dag.vertices[e.to.index()].name,
                    e.to_ordinal
                ),
                from,
                to,
            }
            .into());
        }
    }
    // wakers[vertex][instance], and the wakers of each instance's conveyor peers
    let wakers: Vec<Vec<TaskletWaker>> = parallelism
        .iter()
        .map(|p| (0..*p).map(|_| TaskletWaker::default()).collect())
        .collect();
    let mut peers: Vec<Vec<Vec<TaskletWaker>>> =
        parallelism.iter().map(|p| vec![Vec::new(); *p]).collect();
    // ports[vertex][instance][ordinal], streams[vertex][instance]
    let mut ports: Vec<Vec<PortSlots>> = Vec::new();
    let mut streams: Vec<Vec<Vec<Box<dyn InboundStream>>>> = Vec::new();
    for (v, p) in parallelism.iter().enumerate() {
        let outputs = dag.edges.iter().filter(|e| e.from.index() == v).count();
        ports.push(
            (0..*p)
                .map(|_| (0..outputs).map(|_| None).collect())
                .collect(),
        );
        streams.push((0..*p).map(|_| Vec::new()).collect());
    }
    for e in &dag.edges {
        let (from, to) = (e.from.index(), e.to.index());
        let item_type = dag.vertices[from]
            .outputs
            .get(e.from_ordinal)
            .expect("validated: output type declared");
        let (n_from, n_to) = (parallelism[from], parallelism[to]);
        let mut senders: Vec<Vec<ErasedEnd>> = (0..n_from).map(|_| Vec::new()).collect();
        let mut receivers: Vec<Vec<ErasedEnd>> = (0..n_to).map(|_| Vec::new()).collect();
        let pairs: Vec<(usize, usize)> = match e.routing {
            Routing::Isolated => (0..n_from).map(|i| (i, i)).collect(),
            Routing::AllToOne => (0..n_from).map(|i| (i, 0)).collect(),
            _ => (0..n_from)
                .flat_map(|i| (0..n_to).map(move |j| (i, j)))
                .collect(),
        };
        for (i, j) in pairs {
            peers[from][i].push(wakers[to][j].clone());
            peers[to][j].push(wakers[from][i].clone());
            let (tx, rx) = item_type.conveyor(e.capacity);
            senders[i].push(tx);
            receivers[j].push(rx);
        }
        for (i, s) in senders.into_iter().enumerate() {
            let route = match &e.routing {
                Routing::Broadcast => ErasedRoute::Broadcast,
                Routing::Partitioned(spec) => ErasedRoute::Partitioned {
                    partition_fn: Arc::clone(&spec.partition_fn),
                    owners: spec.partitioner.owner_table(n_to).into(),
                },
                Routing::Unicast | Routing::AllToOne | Routing::Isolated => ErasedRoute::RoundRobin,
            };
            ports[from][i][e.from_ordinal] = Some(item_type.port(s, route, config.outbox_batch));
        }
        for (j, r) in receivers.into_iter().enumerate() {
            streams[to][j].push(item_type.inbound(r, e.to_ordinal, e.priority));
        }
    }
    let mut tasklets = Vec::new();
    for (v, vertex) in dag.vertices.iter().enumerate() {
        let name: Arc<str> = Arc::from(vertex.name.as_str());
        let inputs = dag.edges.iter().filter(|e| e.to.index() == v).count();
        for (i, (vertex_ports, vertex_streams)) in std::mem::take(&mut ports[v])
            .into_iter()
            .zip(std::mem::take(&mut streams[v]))
            .enumerate()
        {
            let metrics = metrics.and_then(|m| m.get(tasklets.len())).map_or_else(
                || Arc::new(InstanceMetrics::new(Arc::clone(&name), i, inputs)),
                Arc::clone,
            );
            let ctx = ProcessorContext::for_instance(
                Arc::clone(&name),
                (i, parallelism[v]),
                (Arc::clone(&metrics), wakers[v][i].clone()),
                (config.idle_timeout, watch.clone()),
                (guarantee, holds.clone()),
            );
            let processor = match create_and_init(vertex, &ctx) {
                Ok(p) => p,
                Err(e) => {
                    discard(tasklets);
                    return Err(e);
                }
            };
            let inboxes = (0..inputs)
                .map(|o| {
                    vertex
                        .inputs
                        .get(o)
                        .expect("validated: input type declared")
                        .inbox()
                })
                .collect();
            let mut outbox = Outbox::new(
                vertex_ports
                    .into_iter()
                    .map(|p| p.expect("validated: ordinals are 0..n"))
                    .collect(),
            );
            outbox.throttle_watermarks(vertex.watermark_granule);
            let mut tasklet = ProcessorTasklet::new(
                &ctx,
                processor,
                vertex_streams,
                inboxes,
                outbox,
                config.inbox_batch,
            );
            tasklet.set_peers(std::mem::take(&mut peers[v][i]));
            tasklets.push((tasklet, metrics));
        }
    }
    Ok((tasklets, parallelism))
}
