//! What the server shows: the jobs and flows of this process, and the per-second samples of
//! each job's counters that rates are computed from.
//!
//! A command that runs a job registers its [`JobMonitor`] (`Registry::add_job`); one that
//! runs a flow registers its [`FlowMonitor`]. The registry only holds these views: reading
//! them takes the counters the runtime keeps anyway, so a registered job runs exactly as an
//! unregistered one. [`Registry::sample`], called once per second by the server's sampler
//! task, records each job's per-vertex `items_in` and `items_out` totals; rates over 1, 10
//! and 60 s and the 60-entry history are differences between those samples.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_core::{JobMonitor, JobStatus};
use weir_flow_api::monitor::FlowMonitor;

use crate::views::per_vertex;

/// Samples kept per job: one a second for a minute, plus the one the oldest rate starts at.
const SAMPLES_KEPT: usize = 61;

/// Finished jobs kept for the job list (the oldest finished go first).
const FINISHED_JOBS_KEPT: usize = 50;

/// How long a finished job is still sampled, so that its rates fall to zero.
const SAMPLE_AFTER_END: Duration = Duration::from_secs(60);

/// The jobs and flows one server shows. Cheap to clone: clones share everything.
#[derive(Clone, Default)]
pub struct Registry {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    jobs: Mutex<Vec<JobEntry>>,
    flows: Mutex<Vec<FlowEntry>>,
    next_flow: AtomicU64,
}

/// A registered job and its samples.
struct JobEntry {
    monitor: JobMonitor,
    samples: VecDeque<Sample>,
    /// When the sampler first saw it ended.
    ended_at: Option<Instant>,
}

/// One second's reading of a job: per vertex, `items_in` and `items_out` summed over its
/// instances.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    items_in: Vec<u64>,
    items_out: Vec<u64>,
}

/// A registered flow.
#[derive(Clone)]
struct FlowEntry {
    id: String,
    monitor: FlowMonitor,
}

/// The rates of one vertex, in items per second.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VertexRates {
    /// Items out over the last second.
    pub rate_1s: f64,
    /// Items out over the last 10 seconds (less while the job is younger).
    pub rate_10s: f64,
    /// Items out over the last 60 seconds (less while the job is younger).
    pub rate_60s: f64,
    /// The one-second items-out rates of the last minute, oldest first.
    pub history: Vec<f64>,
    /// Items in over the last second (for a source, items read).
    pub in_rate_1s: f64,
    /// Items in over the last 10 seconds.
    pub in_rate_10s: f64,
    /// Items in over the last 60 seconds.
    pub in_rate_60s: f64,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("jobs", &self.jobs().len())
            .field("flows", &self.flows().len())
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Shows `job` from now on. A job registered twice is shown once. Beyond 50 finished
    /// jobs, the oldest finished one is forgotten.
    pub fn add_job(&self, job: JobMonitor) {
        let mut jobs = lock(&self.inner.jobs);
        if jobs.iter().any(|e| e.monitor.id() == job.id()) {
            return;
        }
        let finished = jobs
            .iter()
            .filter(|e| e.monitor.status().is_terminal())
            .count();
        if finished >= FINISHED_JOBS_KEPT
            && let Some(oldest) = jobs.iter().position(|e| e.monitor.status().is_terminal())
        {
            jobs.remove(oldest);
        }
        jobs.push(JobEntry {
            monitor: job,
            samples: VecDeque::with_capacity(SAMPLES_KEPT),
            ended_at: None,
        });
    }

    /// Shows `flow` from now on; returns its id in this registry (`"1"`, `"2"`, ...).
    pub fn add_flow(&self, flow: FlowMonitor) -> String {
        let id = (self.inner.next_flow.fetch_add(1, Ordering::Relaxed) + 1).to_string();
        lock(&self.inner.flows).push(FlowEntry {
            id: id.clone(),
            monitor: flow,
        });
        id
    }

    /// Every registered job, oldest first.
    pub fn jobs(&self) -> Vec<JobMonitor> {
        lock(&self.inner.jobs)
            .iter()
            .map(|e| e.monitor.clone())
            .collect()
    }

    /// The job whose id is `id`.
    pub fn job(&self, id: &str) -> Option<JobMonitor> {
        let id: u64 = id.parse().ok()?;
        lock(&self.inner.jobs)
            .iter()
            .find(|e| e.monitor.id() == id)
            .map(|e| e.monitor.clone())
    }

    /// Every registered flow with its id, in registration order.
    pub fn flows(&self) -> Vec<(String, FlowMonitor)> {
        lock(&self.inner.flows)
            .iter()
            .map(|e| (e.id.clone(), e.monitor.clone()))
            .collect()
    }

    /// The flow whose id is `id`.
    pub fn flow(&self, id: &str) -> Option<FlowMonitor> {
        lock(&self.inner.flows)
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.monitor.clone())
    }

    /// Records one sample of every job that runs or ended less than a minute ago. The
    /// server's sampler calls it once per second; `now` is the sample's time. Costs one
    /// [`JobMonitor::metrics`] per job.
    pub fn sample(&self, now: Instant) {
        // Read the counters outside the lock: handlers wait on it.
        let due: Vec<(u64, JobMonitor)> = lock(&self.inner.jobs)
            .iter()
            .filter(|e| e.ended_at.is_none_or(|t| now - t < SAMPLE_AFTER_END))
            .map(|e| (e.monitor.id(), e.monitor.clone()))
            .collect();
        let readings: Vec<(u64, Sample, bool)> = due
            .into_iter()
            .map(|(id, job)| {
                let ended = job.status() != JobStatus::Running;
                (id, sample_of(&job, now), ended)
            })
            .collect();
        let mut jobs = lock(&self.inner.jobs);
        for (id, sample, ended) in readings {
            let Some(entry) = jobs.iter_mut().find(|e| e.monitor.id() == id) else {
                continue;
            };
            if entry.samples.len() == SAMPLES_KEPT {
                entry.samples.pop_front();
            }
            entry.samples.push_back(sample);
            if ended && entry.ended_at.is_none() {
                entry.ended_at = Some(now);
            }
        }
    }

    /// The rates of each vertex of job `id`, in vertex order; empty before two samples.
    pub fn rates(&self, id: u64) -> Vec<VertexRates> {
        let jobs = lock(&self.inner.jobs);
        jobs.iter()
            .find(|e| e.monitor.id() == id)
            .map_or_else(Vec::new, |e| rates_of(&e.samples))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sums `items_in` and `items_out` per vertex.
fn sample_of(job: &JobMonitor, now: Instant) -> Sample {
    let metrics = job.metrics();
    let vertices = per_vertex(job, &metrics);
    let sum = |read: fn(&weir_core::MetricsSnapshot) -> u64| {
        vertices
            .iter()
            .map(|instances| instances.iter().map(read).sum())
            .collect()
    };
    Sample {
        at: now,
        items_in: sum(|m| m.items_in),
        items_out: sum(|m| m.items_out),
    }
}

/// Which totals of a sample a rate is over.
type Totals = fn(&Sample) -> &[u64];

/// Rates per vertex from samples, oldest first.
fn rates_of(samples: &VecDeque<Sample>) -> Vec<VertexRates> {
    let Some(last) = samples.back() else {
        return Vec::new();
    };
    let n = samples.len();
    let rate = |from: &Sample, to: &Sample, totals: Totals, v: usize| {
        let seconds = (to.at - from.at).as_secs_f64();
        let delta = totals(to)[v].saturating_sub(totals(from)[v]);
        if seconds > 0.0 {
            delta as f64 / seconds
        } else {
            0.0
        }
    };
    let ins: Totals = |s| &s.items_in;
    let outs: Totals = |s| &s.items_out;
    // The sample `seconds` samples back, or the oldest one.
    let back = |seconds: usize| &samples[n - 1 - seconds.min(n - 1)];
    (0..last.items_out.len())
        .map(|v| VertexRates {
            rate_1s: rate(back(1), last, outs, v),
            rate_10s: rate(back(10), last, outs, v),
            rate_60s: rate(back(60), last, outs, v),
            history: samples
                .iter()
                .zip(samples.iter().skip(1))
                .map(|(a, b)| rate(a, b, outs, v))
                .collect(),
            in_rate_1s: rate(back(1), last, ins, v),
            in_rate_10s: rate(back(10), last, ins, v),
            in_rate_60s: rate(back(60), last, ins, v),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(totals: &[u64]) -> VecDeque<Sample> {
        let start = Instant::now();
        totals
            .iter()
            .enumerate()
            .map(|(i, t)| Sample {
                at: start + Duration::from_secs(i as u64),
                items_in: vec![3 * *t, 0],
                items_out: vec![*t, 2 * *t],
            })
            .collect()
    }

    #[test]
    fn rates_are_differences_over_their_window() {
        // 100 items a second for 5 s, then 1000 a second for 10 s.
        let mut totals = vec![0];
        for _ in 0..5 {
            totals.push(totals.last().unwrap() + 100);
        }
        for _ in 0..10 {
            totals.push(totals.last().unwrap() + 1000);
        }
        let rates = rates_of(&samples(&totals));
        assert_eq!(rates.len(), 2);
        assert_eq!(rates[0].rate_1s, 1000.0);
        assert_eq!(rates[0].rate_10s, 1000.0);
        // Younger than a minute: over everything there is.
        assert_eq!(rates[0].rate_60s, 10_500.0 / 15.0);
        assert_eq!(rates[0].history.len(), 15);
        assert_eq!(rates[0].history[0], 100.0);
        assert_eq!(rates[0].history[14], 1000.0);
        assert_eq!(rates[1].rate_1s, 2000.0);
        assert_eq!(rates[0].in_rate_10s, 3000.0);
        assert_eq!(rates[1].in_rate_1s, 0.0);
    }

    #[test]
    fn one_sample_or_none_gives_zero_rates() {
        assert!(rates_of(&VecDeque::new()).is_empty());
        let rates = rates_of(&samples(&[7]));
        assert_eq!(rates[0].rate_1s, 0.0);
        assert!(rates[0].history.is_empty());
    }
}
