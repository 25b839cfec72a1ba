//! Per-vertex-instance metrics, readable while a job runs.
//!
//! Each processor instance owns one [`InstanceMetrics`]. Its tasklet updates the counters
//! once per call (relaxed atomic adds), never per item, so reading them costs the running job
//! nothing. [`JobMonitor::metrics`](crate::JobMonitor::metrics) takes a consistent-enough snapshot.
//!
//! Processors may add their own counters with [`InstanceMetrics::counter`], for example a
//! source that counts malformed records.
//!
//! Besides the counters of items, the tasklet keeps per call: time busy and idle, time
//! *backpressured* (from the start of a call in which a full downstream queue refused an item
//! to the start of the next call, so the pause in between counts too), and the latest
//! watermark the instance processed (a stream source records the one it emitted). Readers
//! such as the observability server turn these running totals into rates by sampling them;
//! nothing here costs more than a few relaxed stores per call.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A named counter a processor registers and bumps. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    #[inline]
    pub fn increment(&self) {
        self.add(1)
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The upper bounds of a [`LatencyHistogram`]'s buckets, in seconds, from 0.5 ms to a minute;
/// a last bucket takes everything longer.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
];

/// [`LATENCY_BUCKETS`] in nanoseconds, for the comparison per record.
const LATENCY_BOUNDS_NS: [u64; 16] = {
    let mut ns = [0u64; 16];
    let mut i = 0;
    while i < ns.len() {
        ns[i] = (LATENCY_BUCKETS[i] * 1e9) as u64;
        i += 1;
    }
    ns
};

/// A histogram of latencies with fixed buckets ([`LATENCY_BUCKETS`]), recorded from one
/// thread and read from any, as Prometheus keeps a histogram.
///
/// Cost: a record is a scan of 16 bounds and two relaxed adds; made per watermark, never
/// per item.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl LatencyHistogram {
    /// Counts one latency.
    pub fn record(&self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BOUNDS_NS
            .iter()
            .position(|bound| ns <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// A copy of the counts so far.
    pub fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed)),
        }
    }
}

/// A copy of a [`LatencyHistogram`]: the count per bucket of [`LATENCY_BUCKETS`] (not
/// cumulative), the last for everything above a minute, and the sum of all latencies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    /// Latencies per bucket: one count per bound of [`LATENCY_BUCKETS`] and one for the
    /// rest, or none at all in a `default()` snapshot.
    pub counts: Vec<u64>,
    /// The sum of every latency recorded.
    pub sum: Duration,
}

impl LatencySnapshot {
    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other`'s counts to these: the histogram of both instances together.
    pub fn merge(&mut self, other: &LatencySnapshot) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.sum += other.sum;
    }

    /// The upper bound, in seconds, of the bucket that holds quantile `q` (0 to 1): the
    /// latency that at least that share of records stayed within. `None` when nothing was
    /// recorded; `f64::INFINITY` when it falls in the last, unbounded bucket.
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        Some(f64::INFINITY)
    }
}

/// The live counters of one processor instance.
#[derive(Debug)]
pub struct InstanceMetrics {
    vertex: Arc<str>,
    instance: usize,
    items_in: AtomicU64,
    items_out: AtomicU64,
    refusals: AtomicU64,
    busy_ns: AtomicU64,
    idle_ns: AtomicU64,
    backpressured_ns: AtomicU64,
    /// The latest watermark; `i64::MIN` before the first.
    watermark: AtomicI64,
    progress_calls: AtomicU64,
    queue_fill: Vec<AtomicU64>,
    window_latency: LatencyHistogram,
    user: Mutex<Vec<(String, Counter)>>,
}

impl InstanceMetrics {
    /// Metrics for instance `instance` of `vertex`, with `inputs` input ordinals.
    pub fn new(vertex: Arc<str>, instance: usize, inputs: usize) -> Self {
        InstanceMetrics {
            vertex,
            instance,
            items_in: AtomicU64::new(0),
            items_out: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            idle_ns: AtomicU64::new(0),
            backpressured_ns: AtomicU64::new(0),
            watermark: AtomicI64::new(i64::MIN),
            progress_calls: AtomicU64::new(0),
            queue_fill: (0..inputs).map(|_| AtomicU64::new(0)).collect(),
            window_latency: LatencyHistogram::default(),
            user: Mutex::new(Vec::new()),
        }
    }

    /// The counter named `name`, created at zero the first time. Register counters in
    /// `init`; the lookup takes a lock.
    pub fn counter(&self, name: &str) -> Counter {
        let mut user = self.user.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = user.iter().find(|(n, _)| n == name) {
            return c.clone();
        }
        let c = Counter::default();
        user.push((name.to_string(), c.clone()));
        c
    }

    /// Records one tasklet call: its items, refused offers and time, and the time the
    /// instance spent backpressured since the previous call.
    pub(crate) fn record_call(
        &self,
        items_in: u64,
        items_out: u64,
        refusals: u64,
        elapsed: Duration,
        progress: bool,
        backpressured: Duration,
    ) {
        if !backpressured.is_zero() {
            self.backpressured_ns
                .fetch_add(backpressured.as_nanos() as u64, Ordering::Relaxed);
        }
        if items_in > 0 {
            self.items_in.fetch_add(items_in, Ordering::Relaxed);
        }
        if items_out > 0 {
            self.items_out.fetch_add(items_out, Ordering::Relaxed);
        }
        if refusals > 0 {
            self.refusals.fetch_add(refusals, Ordering::Relaxed);
        }
        let ns = elapsed.as_nanos() as u64;
        if progress {
            self.busy_ns.fetch_add(ns, Ordering::Relaxed);
            self.progress_calls.fetch_add(1, Ordering::Relaxed);
        } else {
            self.idle_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }

    /// A number that grows whenever this instance does anything: items in or out, or a call
    /// that reported progress. The stall watchdog compares it over time.
    pub(crate) fn activity(&self) -> u64 {
        self.items_in.load(Ordering::Relaxed)
            + self.items_out.load(Ordering::Relaxed)
            + self.progress_calls.load(Ordering::Relaxed)
    }

    /// Items waiting in each input ordinal's conveyors, sampled at the last call.
    pub(crate) fn queue_fill(&self) -> Vec<u64> {
        self.queue_fill
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect()
    }

    /// The vertex name.
    pub fn vertex(&self) -> &str {
        &self.vertex
    }

    /// The instance's global index.
    pub fn instance(&self) -> usize {
        self.instance
    }

    pub(crate) fn record_queue_fill(&self, ordinal: usize, fill: usize) {
        self.queue_fill[ordinal].store(fill as u64, Ordering::Relaxed);
    }

    /// Counts `n` items a source read from outside the job (a file, a generator, a socket)
    /// as items in: a source has no input queues, and this is what flows into it. Call it
    /// per batch read, never per item; one relaxed add.
    pub fn record_items_read(&self, n: usize) {
        if n > 0 {
            self.items_in.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Records the instance's latest watermark (ms since the epoch): the tasklet does it for
    /// each watermark the processor took from its inputs, and a source that makes its own
    /// watermarks calls it when its watermark advances. One relaxed store; call it per
    /// watermark or per batch, never per item. [`Watermark::MAX`](crate::Watermark::MAX), the
    /// end of a finite stream, is not recorded, so the last real watermark stays visible.
    pub fn record_watermark(&self, watermark: i64) {
        if watermark != i64::MAX {
            self.watermark.store(watermark, Ordering::Relaxed);
        }
    }

    /// Records, at a sink, how long a watermark took from its source to here: the longest
    /// any result of the windows it closed took from the window's close to the sink (they
    /// all come before it). The tasklet calls it once per watermark a sink takes.
    pub(crate) fn record_window_latency(&self, latency: Duration) {
        self.window_latency.record(latency);
    }

    /// A point-in-time copy of every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            vertex: self.vertex.to_string(),
            instance: self.instance,
            items_in: self.items_in.load(Ordering::Relaxed),
            items_out: self.items_out.load(Ordering::Relaxed),
            backpressure_refusals: self.refusals.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed)),
            idle: Duration::from_nanos(self.idle_ns.load(Ordering::Relaxed)),
            backpressured: Duration::from_nanos(self.backpressured_ns.load(Ordering::Relaxed)),
            watermark: Some(self.watermark.load(Ordering::Relaxed)).filter(|w| *w != i64::MIN),
            queue_fill: self.queue_fill(),
            window_latency: self.window_latency.snapshot(),
            counters: self
                .user
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(n, c)| (n.clone(), c.get()))
                .collect(),
        }
    }
}

/// A copy of one processor instance's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// The vertex name.
    pub vertex: String,
    /// The global processor index.
    pub instance: usize,
    /// Items received from the input conveyors; for a source, the items it read
    /// ([`InstanceMetrics::record_items_read`]).
    pub items_in: u64,
    /// Items accepted by the outbox.
    pub items_out: u64,
    /// Offers the outbox refused (full queue or batch limit): how often backpressure bit.
    pub backpressure_refusals: u64,
    /// Time in calls that made progress.
    pub busy: Duration,
    /// Time in calls that made none.
    pub idle: Duration,
    /// Time from the start of each call in which a full downstream queue refused an item to
    /// the start of the next call: how long backpressure held this instance.
    pub backpressured: Duration,
    /// The latest watermark the instance processed or, for a source, emitted (ms since the
    /// epoch); `None` before the first.
    pub watermark: Option<i64>,
    /// Items waiting in each input ordinal's conveyors, sampled at the last call.
    pub queue_fill: Vec<u64>,
    /// At a sink, for each watermark it took, the time since its source sent it: the longest
    /// any result of the windows it closed took from the close to the sink. All zero
    /// elsewhere.
    pub window_latency: LatencySnapshot,
    /// The processor's own counters.
    pub counters: Vec<(String, u64)>,
}

impl MetricsSnapshot {
    /// The value of the processor counter `name`, or 0.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_fall_in_the_bucket_of_their_upper_bound() {
        let h = LatencyHistogram::default();
        h.record(Duration::from_micros(500)); // exactly the first bound
        h.record(Duration::from_micros(501));
        h.record(Duration::from_millis(7));
        h.record(Duration::from_secs(3600));
        let s = h.snapshot();
        assert_eq!(s.counts.len(), LATENCY_BUCKETS.len() + 1);
        assert_eq!((s.counts[0], s.counts[1], s.counts[4]), (1, 1, 1));
        assert_eq!(s.counts[LATENCY_BUCKETS.len()], 1);
        assert_eq!(s.count(), 4);
        assert_eq!(
            s.sum,
            Duration::from_micros(1001) + Duration::from_millis(7) + Duration::from_secs(3600)
        );
    }

    #[test]
    fn quantiles_are_bucket_bounds_and_merging_adds_counts() {
        let a = LatencyHistogram::default();
        for _ in 0..99 {
            a.record(Duration::from_micros(800));
        }
        let b = LatencyHistogram::default();
        b.record(Duration::from_millis(15));
        let mut both = LatencySnapshot::default();
        assert_eq!(both.quantile_bound(0.5), None);
        both.merge(&a.snapshot());
        both.merge(&b.snapshot());
        assert_eq!(both.count(), 100);
        assert_eq!(both.quantile_bound(0.5), Some(0.001));
        assert_eq!(both.quantile_bound(0.99), Some(0.001));
        assert_eq!(both.quantile_bound(0.999), Some(0.02));
        assert_eq!(both.quantile_bound(1.0), Some(0.02));
        let far = LatencyHistogram::default();
        far.record(Duration::from_secs(61));
        assert_eq!(far.snapshot().quantile_bound(0.5), Some(f64::INFINITY));
    }
}
