//! Stall detection: a job that makes no progress while items wait in its queues.
//!
//! A job can stop moving without failing: a DAG whose priorities starve an input, a consumer
//! that never drains, a processor that waits for something that never comes. Each executor
//! runs one `weir-watchdog` thread that looks at every running job a few times per
//! [`JobConfig::stall_timeout`](crate::JobConfig::stall_timeout). When a job's activity
//! counters (items in and out, calls that made progress) have not moved for that long and
//! some input queue holds items, it logs a warning naming the vertices and their queue fill,
//! and [`Job::stall`](crate::Job::stall) reports it until the job moves again.
//!
//! Cost: nothing on the data path; the watchdog reads the relaxed counters the tasklets
//! already keep, once per tick.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::job::JobShared;

/// A job that made no progress for its stall timeout while items were queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// How long nothing has moved, when the watchdog last looked.
    pub for_at_least: Duration,
    /// Every vertex instance with items waiting in its input queues.
    pub queued: Vec<QueuedInput>,
}

/// One vertex instance's input queue fill during a [`Stall`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedInput {
    /// The vertex.
    pub vertex: String,
    /// The instance's global index.
    pub instance: usize,
    /// Items waiting per input ordinal.
    pub fill: Vec<u64>,
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no progress for {:.1} s with items queued at ",
            self.for_at_least.as_secs_f64()
        )?;
        for (i, q) in self.queued.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(
                f,
                "'{}' #{} (queue fill {:?})",
                q.vertex, q.instance, q.fill
            )?;
        }
        Ok(())
    }
}

/// What the watchdog remembers of one job between ticks.
struct Watched {
    job: Weak<JobShared>,
    activity: u64,
    since: Instant,
}

/// The executor's watchdog thread and the jobs it watches.
pub(crate) struct Watchdog {
    jobs: Arc<Mutex<Vec<Watched>>>,
    shutdown: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The longest and shortest pause between two looks.
const MAX_TICK: Duration = Duration::from_secs(1);
const MIN_TICK: Duration = Duration::from_millis(5);

impl Watchdog {
    /// Starts the watchdog thread. Without a thread (spawning failed) jobs simply are not
    /// watched: a warning is logged.
    pub(crate) fn start() -> Self {
        let jobs: Arc<Mutex<Vec<Watched>>> = Arc::default();
        let shutdown = Arc::new(AtomicBool::new(false));
        let thread = {
            let (jobs, shutdown) = (Arc::clone(&jobs), Arc::clone(&shutdown));
            thread::Builder::new()
                .name("weir-watchdog".into())
                .spawn(move || watch(&jobs, &shutdown))
        };
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the stall watchdog; stalls will not be reported");
                None
            }
        };
        Watchdog {
            jobs,
            shutdown,
            thread,
        }
    }

    /// Starts watching `job` until it ends.
    pub(crate) fn watch(&self, job: &Arc<JobShared>) {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Watched {
                job: Arc::downgrade(job),
                activity: job.activity(),
                since: Instant::now(),
            });
        if let Some(t) = &self.thread {
            // The new job may want a shorter tick than the thread is sleeping.
            t.thread().unpark();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn watch(jobs: &Mutex<Vec<Watched>>, shutdown: &AtomicBool) {
    while !shutdown.load(Ordering::Acquire) {
        let tick = {
            let mut jobs = jobs.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            jobs.retain_mut(|w| match w.job.upgrade() {
                Some(job) if !job.is_finished() => {
                    look_at(&job, w, now);
                    true
                }
                _ => false,
            });
            jobs.iter()
                .filter_map(|w| w.job.upgrade())
                .map(|job| job.stall_timeout() / 4)
                .min()
                .unwrap_or(MAX_TICK)
                .clamp(MIN_TICK, MAX_TICK)
        };
        thread::park_timeout(tick);
    }
}

fn look_at(job: &JobShared, w: &mut Watched, now: Instant) {
    let activity = job.activity();
    if activity != w.activity {
        w.activity = activity;
        w.since = now;
        job.set_stall(None);
        return;
    }
    let still = now.duration_since(w.since);
    if still < job.stall_timeout() {
        return;
    }
    let queued: Vec<QueuedInput> = job
        .instance_metrics()
        .iter()
        .filter_map(|m| {
            let fill = m.queue_fill();
            fill.iter().any(|f| *f > 0).then(|| QueuedInput {
                vertex: m.vertex().to_string(),
                instance: m.instance(),
                fill,
            })
        })
        .collect();
    if queued.is_empty() {
        return;
    }
    let stall = Stall {
        for_at_least: still,
        queued,
    };
    if job.set_stall(Some(stall.clone())) {
        tracing::warn!(job = %job.name(), "job stalled: {stall}");
    }
}
