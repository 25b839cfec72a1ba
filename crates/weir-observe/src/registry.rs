//! What the server shows: the jobs and flows of this process, and the per-second samples of
//! their counters that rates are computed from.
//!
//! A command that runs a job registers its [`JobMonitor`] (`Registry::add_job`); one that
//! runs a flow registers its [`FlowMonitor`]. The registry only holds these views: reading
//! them takes the counters the runtime keeps anyway, so a registered job or flow runs exactly
//! as an unregistered one. [`Registry::sample`], called once per second by the server's
//! sampler task, records each job's per-vertex `items_in` and `items_out` totals and each
//! flow's per-processor flow files and bytes in and out; rates over 1, 10 and 60 s (and a
//! job vertex's 60-entry history) are differences between those samples.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_core::{JobMonitor, JobStatus};
use weir_flow_api::monitor::{FlowMonitor, FlowState};

use crate::views::per_vertex;

/// Samples kept per job or flow: one a second for a minute, plus the one the oldest rate
/// starts at.
const SAMPLES_KEPT: usize = 61;

/// Finished jobs kept for the job list (the oldest finished go first).
const FINISHED_JOBS_KEPT: usize = 50;

/// How long a finished job or stopped flow is still sampled, so that its rates fall to zero.
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

/// One second's reading of a job or a flow: the totals of its counters, [`COUNTERS_PER_VERTEX`]
/// per vertex or [`COUNTERS_PER_PROCESSOR`] per processor, in order.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    totals: Vec<u64>,
}

/// A vertex's counters in a sample: items in, items out.
const COUNTERS_PER_VERTEX: usize = 2;

/// A processor's counters in a sample: flow files in, flow files out, bytes in, bytes out.
const COUNTERS_PER_PROCESSOR: usize = 4;

/// A registered flow and its samples.
struct FlowEntry {
    id: String,
    monitor: FlowMonitor,
    samples: VecDeque<Sample>,
    /// The processors' names, in the samples' order.
    processors: Vec<String>,
    /// When the sampler first saw it stopped or failed.
    ended_at: Option<Instant>,
}

/// A counter's rate in units per second over the last 1, 10 and 60 seconds (over less while
/// its job or flow is younger than that; 0 before two samples).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateWindows {
    /// Over the last second.
    pub last_1s: f64,
    /// Over the last 10 seconds.
    pub last_10s: f64,
    /// Over the last 60 seconds.
    pub last_60s: f64,
}

/// The rates of one flow processor, per second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessorRates {
    /// Flow files taken in by committed sessions.
    pub flowfiles_in: RateWindows,
    /// Flow files sent out by committed sessions.
    pub flowfiles_out: RateWindows,
    /// Content bytes taken in.
    pub bytes_in: RateWindows,
    /// Content bytes sent out.
    pub bytes_out: RateWindows,
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
            samples: VecDeque::with_capacity(SAMPLES_KEPT),
            processors: Vec::new(),
            ended_at: None,
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

    /// Records one sample of every job and flow that runs or ended less than a minute ago.
    /// The server's sampler calls it once per second; `now` is the sample's time (a test
    /// passes its own, so rates follow a clock it drives). Costs one
    /// [`JobMonitor::metrics`] per job and one [`FlowMonitor::processors`] per flow: reads
    /// of counters the runtime keeps anyway, nothing per item or flow file.
    pub fn sample(&self, now: Instant) {
        self.sample_jobs(now);
        self.sample_flows(now);
    }

    fn sample_jobs(&self, now: Instant) {
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
            push_sample(&mut entry.samples, sample);
            if ended && entry.ended_at.is_none() {
                entry.ended_at = Some(now);
            }
        }
    }

    fn sample_flows(&self, now: Instant) {
        let due: Vec<(String, FlowMonitor)> = lock(&self.inner.flows)
            .iter()
            .filter(|e| e.ended_at.is_none_or(|t| now - t < SAMPLE_AFTER_END))
            .map(|e| (e.id.clone(), e.monitor.clone()))
            .collect();
        let readings: Vec<(String, Vec<String>, Sample, bool)> = due
            .into_iter()
            .map(|(id, flow)| {
                let ended = flow.state() != FlowState::Running;
                let processors = flow.processors();
                let totals = processors
                    .iter()
                    .flat_map(|p| [p.flowfiles_in, p.flowfiles_out, p.bytes_in, p.bytes_out])
                    .collect();
                let names = processors.into_iter().map(|p| p.name).collect();
                (id, names, Sample { at: now, totals }, ended)
            })
            .collect();
        let mut flows = lock(&self.inner.flows);
        for (id, names, sample, ended) in readings {
            let Some(entry) = flows.iter_mut().find(|e| e.id == id) else {
                continue;
            };
            if entry.processors != names {
                // Not the processors the samples were of: start again.
                entry.samples.clear();
                entry.processors = names;
            }
            push_sample(&mut entry.samples, sample);
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

    /// The rates of each processor of flow `id`, by processor name; empty before the first
    /// sample (and a processor's rates are 0 until the second).
    pub fn processor_rates(&self, id: &str) -> BTreeMap<String, ProcessorRates> {
        let flows = lock(&self.inner.flows);
        let Some(entry) = flows.iter().find(|e| e.id == id) else {
            return BTreeMap::new();
        };
        entry
            .processors
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let counter = |k: usize| windows(&entry.samples, COUNTERS_PER_PROCESSOR * i + k);
                let rates = ProcessorRates {
                    flowfiles_in: counter(0),
                    flowfiles_out: counter(1),
                    bytes_in: counter(2),
                    bytes_out: counter(3),
                };
                (name.clone(), rates)
            })
            .collect()
    }
}

/// Appends `sample`, dropping the oldest beyond [`SAMPLES_KEPT`].
fn push_sample(samples: &mut VecDeque<Sample>, sample: Sample) {
    if samples.len() == SAMPLES_KEPT {
        samples.pop_front();
    }
    samples.push_back(sample);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sums `items_in` and `items_out` per vertex.
fn sample_of(job: &JobMonitor, now: Instant) -> Sample {
    let metrics = job.metrics();
    let totals = per_vertex(job, &metrics)
        .iter()
        .flat_map(|instances| {
            [
                instances.iter().map(|m| m.items_in).sum(),
                instances.iter().map(|m| m.items_out).sum(),
            ]
        })
        .collect();
    Sample { at: now, totals }
}

/// Counter `counter`'s rate from sample `from` to sample `to`, per second.
fn rate(from: &Sample, to: &Sample, counter: usize) -> f64 {
    let seconds = (to.at - from.at).as_secs_f64();
    let total = |s: &Sample| s.totals.get(counter).copied().unwrap_or(0);
    let delta = total(to).saturating_sub(total(from));
    if seconds > 0.0 {
        delta as f64 / seconds
    } else {
        0.0
    }
}

/// Counter `counter`'s rates over the last 1, 10 and 60 samples (or all there are): the
/// newest sample against the one that many back.
fn windows(samples: &VecDeque<Sample>, counter: usize) -> RateWindows {
    let Some(last) = samples.back() else {
        return RateWindows::default();
    };
    let n = samples.len();
    let back = |seconds: usize| &samples[n - 1 - seconds.min(n - 1)];
    RateWindows {
        last_1s: rate(back(1), last, counter),
        last_10s: rate(back(10), last, counter),
        last_60s: rate(back(60), last, counter),
    }
}

/// Rates per vertex from samples, oldest first.
fn rates_of(samples: &VecDeque<Sample>) -> Vec<VertexRates> {
    let Some(last) = samples.back() else {
        return Vec::new();
    };
    (0..last.totals.len() / COUNTERS_PER_VERTEX)
        .map(|v| {
            let (ins, outs) = (COUNTERS_PER_VERTEX * v, COUNTERS_PER_VERTEX * v + 1);
            let (i, o) = (windows(samples, ins), windows(samples, outs));
            VertexRates {
                rate_1s: o.last_1s,
                rate_10s: o.last_10s,
                rate_60s: o.last_60s,
                history: samples
                    .iter()
                    .zip(samples.iter().skip(1))
                    .map(|(a, b)| rate(a, b, outs))
                    .collect(),
                in_rate_1s: i.last_1s,
                in_rate_10s: i.last_10s,
                in_rate_60s: i.last_60s,
            }
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
                // Vertex 0: 3t in, t out; vertex 1: nothing in, 2t out.
                totals: vec![3 * *t, *t, 0, 2 * *t],
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

    /// A flow whose one processor's counters a test sets.
    struct Counted {
        totals: Mutex<[u64; 4]>,
        state: Mutex<FlowState>,
    }

    impl weir_flow_api::monitor::MonitoredFlow for Counted {
        fn name(&self) -> &str {
            "counted"
        }
        fn state(&self) -> FlowState {
            *lock(&self.state)
        }
        fn failure(&self) -> Option<String> {
            None
        }
        fn processors(&self) -> Vec<weir_flow_api::monitor::ProcessorView> {
            let [flowfiles_in, flowfiles_out, bytes_in, bytes_out] = *lock(&self.totals);
            vec![weir_flow_api::monitor::ProcessorView {
                name: "split".into(),
                kind: "SplitText".into(),
                group: "main".into(),
                state: weir_flow_api::monitor::RunState::Running,
                flowfiles_in,
                flowfiles_out,
                bytes_in,
                bytes_out,
                tasks: 0,
                commits: 0,
                failures: 0,
                bulletins: Vec::new(),
            }]
        }
        fn processor(&self, name: &str) -> Option<weir_flow_api::monitor::ProcessorView> {
            self.processors().into_iter().find(|p| p.name == name)
        }
        fn connections(&self) -> Vec<weir_flow_api::monitor::ConnectionView> {
            Vec::new()
        }
        fn groups(&self) -> Vec<weir_flow_api::monitor::GroupView> {
            Vec::new()
        }
        fn set_running(
            &self,
            name: &str,
            _: bool,
        ) -> Result<weir_flow_api::monitor::ProcessorView, weir_flow_api::monitor::ControlError>
        {
            Err(weir_flow_api::monitor::ControlError::UnknownProcessor {
                flow: "counted".into(),
                name: name.into(),
            })
        }
        fn provenance(
            &self,
            _: &weir_flow_api::provenance::Query,
            _: usize,
        ) -> Result<
            Vec<weir_flow_api::provenance::ProvenanceEvent>,
            weir_flow_api::monitor::ProvenanceUnavailable,
        > {
            Ok(Vec::new())
        }
        fn lineage(
            &self,
            _: &str,
            _: weir_flow_api::provenance::LineageLimits,
        ) -> Result<weir_flow_api::provenance::Lineage, weir_flow_api::monitor::ProvenanceUnavailable>
        {
            unreachable!("rates read no provenance")
        }
        fn content(&self, _: &str) -> std::io::Result<Option<Vec<u8>>> {
            Ok(None)
        }
    }

    #[test]
    fn processor_rates_follow_the_sampled_counters_and_fall_to_zero() {
        let registry = Registry::new();
        let flow = Arc::new(Counted {
            totals: Mutex::new([0; 4]),
            state: Mutex::new(FlowState::Running),
        });
        let id = registry.add_flow(FlowMonitor::new(Arc::clone(&flow) as _));
        // Nothing sampled yet: no rates; one sample: zeros.
        assert!(registry.processor_rates(&id).is_empty());
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        registry.sample(at(0));
        assert_eq!(
            registry.processor_rates(&id)["split"],
            ProcessorRates::default()
        );
        // 10 files in, 1000 lines out a second, for 5 s (bytes: 100 in, 120 out a second).
        for s in 1..=5 {
            *lock(&flow.totals) = [10 * s, 1000 * s, 100 * s, 120 * s];
            registry.sample(at(s));
        }
        let r = registry.processor_rates(&id)["split"];
        assert_eq!(r.flowfiles_in.last_1s, 10.0);
        assert_eq!(r.flowfiles_out.last_1s, 1000.0);
        assert_eq!(r.flowfiles_out.last_10s, 1000.0, "over the 5 s there are");
        assert_eq!(r.bytes_in.last_60s, 100.0);
        assert_eq!(r.bytes_out.last_1s, 120.0);
        // No more input: the 1 s rate is 0 at once, the 10 s one falls, then is 0.
        registry.sample(at(6));
        let r = registry.processor_rates(&id)["split"];
        assert_eq!(r.flowfiles_out.last_1s, 0.0);
        assert_eq!(r.flowfiles_out.last_10s, 5000.0 / 6.0);
        for s in 7..=16 {
            registry.sample(at(s));
        }
        let r = registry.processor_rates(&id)["split"];
        assert_eq!(r.flowfiles_out.last_10s, 0.0);
        assert!(r.flowfiles_out.last_60s > 0.0);
        // Stopped: still sampled for a minute, so the 60 s rate falls to zero too.
        *lock(&flow.state) = FlowState::Stopped;
        for s in 17..=80 {
            registry.sample(at(s));
        }
        assert_eq!(
            registry.processor_rates(&id)["split"],
            ProcessorRates::default()
        );
        // Then no longer sampled.
        let kept = lock(&registry.inner.flows)[0].samples.back().unwrap().at;
        registry.sample(at(200));
        assert_eq!(
            lock(&registry.inner.flows)[0].samples.back().unwrap().at,
            kept
        );
    }

    #[test]
    fn one_sample_or_none_gives_zero_rates() {
        assert!(rates_of(&VecDeque::new()).is_empty());
        let rates = rates_of(&samples(&[7]));
        assert_eq!(rates[0].rate_1s, 0.0);
        assert!(rates[0].history.is_empty());
    }
}
