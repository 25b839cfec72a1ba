//! `/metrics`: the registry's jobs and flows and this process, in the Prometheus
//! (OpenMetrics) text exposition format, written by `prometheus-client`.
//!
//! Nothing is recorded for Prometheus while jobs run: at each scrape a collector reads the
//! counters the runtime keeps anyway (the same reads as the REST API) and encodes them.
//!
//! Families (prefix `weir_`); labels are only `job`, `vertex`, `instance`, `processor` and
//! `connection`, so their number is bounded by the DAGs and flows, never by the data:
//!
//! | family | type | labels |
//! |---|---|---|
//! | `weir_job_running` | gauge (1 running, 0 ended) | job |
//! | `weir_job_snapshots` | counter | job |
//! | `weir_job_last_snapshot_bytes` | gauge | job |
//! | `weir_vertex_items_in`, `weir_vertex_items_out` | counter | job, vertex, instance |
//! | `weir_vertex_busy_seconds`, `weir_vertex_idle_seconds`, `weir_vertex_backpressured_seconds` | counter | job, vertex, instance |
//! | `weir_vertex_queued_items` | gauge (all inputs) | job, vertex, instance |
//! | `weir_vertex_watermark_milliseconds` | gauge (ms since the epoch) | job, vertex, instance |
//! | `weir_vertex_late_events` | counter | job, vertex, instance |
//! | `weir_window_latency_seconds` | histogram (buckets of `weir_core::LATENCY_BUCKETS`, 0.5 ms to 60 s) | job |
//! | `weir_flow_processor_flowfiles_in`, `_flowfiles_out`, `_bytes_in`, `_bytes_out`, `_tasks`, `_failures` | counter | job (the flow's name), processor |
//! | `weir_flow_connection_queued_flowfiles`, `_queued_bytes`, `_back_pressure` (0 or 1) | gauge | job, connection |
//! | `process_cpu_seconds`, `process_resident_memory_bytes`, `process_open_fds` | counter, gauges | none |
//!
//! A job's label is its name; when several registered jobs share a name, each gets its id
//! appended (`q5#3`), so no two series collide.
//!
//! `weir_window_latency_seconds` is one histogram per job: for each watermark a sink instance
//! took, the time since the watermark's source sent it, which bounds how long every result of
//! the windows it closed took from the window's close to the sink. The histograms of all the
//! job's sink instances are merged, so a parallelism-2 sink counts each watermark twice. A job
//! has the series once any of its vertices has taken a watermark: a stream job's histogram
//! starts at zero before its first window closes (so `increase()` sees its first latencies),
//! and a batch job, which has no watermarks, has none.

use std::collections::HashMap;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Unit;
use weir_core::{LATENCY_BUCKETS, LatencySnapshot};

use crate::process::ProcessStats;
use crate::registry::Registry;
use crate::views::{job_window_latency, per_vertex};

/// The content type of the exposition `prometheus-client` writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One series' labels.
type Labels = Vec<(&'static str, String)>;

/// Encodes the whole exposition of `registry` and this process.
///
/// # Errors
/// Only a formatting error of the encoder, which writing to a `String` does not produce.
pub fn encode(registry: &Registry) -> Result<String, fmt::Error> {
    let mut exposition = prometheus_client::registry::Registry::default();
    exposition.register_collector(Box::new(RegistryCollector {
        registry: registry.clone(),
    }));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &exposition)?;
    Ok(out)
}

/// Reads the registry at each scrape.
#[derive(Debug)]
struct RegistryCollector {
    registry: Registry,
}

/// A family's rows, written under one descriptor.
fn family<M: EncodeMetric + TypedMetric>(
    encoder: &mut DescriptorEncoder,
    (name, help, unit): (&str, &str, Option<Unit>),
    rows: Vec<(Labels, M)>,
) -> fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, unit.as_ref(), M::TYPE)?;
    for (labels, value) in rows {
        if labels.is_empty() {
            // An unlabelled series, written without `{}`.
            return value.encode(metric);
        }
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A histogram whose counts were taken elsewhere (a job's merged [`LatencySnapshot`]):
/// `prometheus-client` has constant counters and gauges but no constant histogram, and its
/// own `Histogram` would have to be fed every observation again at each scrape.
#[derive(Debug, Clone, PartialEq)]
struct ConstHistogram {
    /// The sum of every observation.
    sum: f64,
    /// How many observations there were.
    count: u64,
    /// `(upper bound, observations in this bucket alone)`, ascending, the last bound
    /// `f64::MAX`, which the encoder writes as `+Inf`; the encoder makes the counts
    /// cumulative.
    buckets: Vec<(f64, u64)>,
}

impl ConstHistogram {
    /// A latency histogram in seconds, with the bounds of [`LATENCY_BUCKETS`].
    fn seconds(latency: &LatencySnapshot) -> ConstHistogram {
        let bounds = LATENCY_BUCKETS.iter().copied().chain([f64::MAX]);
        ConstHistogram {
            sum: latency.sum.as_secs_f64(),
            count: latency.count(),
            buckets: bounds
                .enumerate()
                .map(|(i, bound)| (bound, latency.counts.get(i).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

impl TypedMetric for ConstHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for ConstHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

impl Collector for RegistryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        self.encode_jobs(&mut encoder)?;
        self.encode_flows(&mut encoder)?;
        encode_process(&mut encoder)
    }
}

/// A vertex-instance counter: its name, help, unit and how to read it.
type InstanceCounter = (
    &'static str,
    &'static str,
    Option<Unit>,
    fn(&weir_core::MetricsSnapshot) -> f64,
);

const INSTANCE_COUNTERS: &[InstanceCounter] = &[
    (
        "weir_vertex_items_in",
        "Items a vertex instance took from its input queues.",
        None,
        |m| m.items_in as f64,
    ),
    (
        "weir_vertex_items_out",
        "Items a vertex instance emitted.",
        None,
        |m| m.items_out as f64,
    ),
    (
        "weir_vertex_busy",
        "Time a vertex instance spent in calls that made progress.",
        Some(Unit::Seconds),
        |m| m.busy.as_secs_f64(),
    ),
    (
        "weir_vertex_idle",
        "Time a vertex instance spent in calls that made none.",
        Some(Unit::Seconds),
        |m| m.idle.as_secs_f64(),
    ),
    (
        "weir_vertex_backpressured",
        "Time a vertex instance was held by a full downstream queue.",
        Some(Unit::Seconds),
        |m| m.backpressured.as_secs_f64(),
    ),
    (
        "weir_vertex_late_events",
        "Items a vertex instance dropped for arriving behind the watermark.",
        None,
        |m| m.counter("late_events") as f64,
    ),
];

impl RegistryCollector {
    fn encode_jobs(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let jobs = self.registry.jobs();
        let mut names: HashMap<&str, usize> = HashMap::new();
        for j in &jobs {
            *names.entry(j.name()).or_default() += 1;
        }
        let label = |j: &weir_core::JobMonitor| {
            if names[j.name()] > 1 {
                format!("{}#{}", j.name(), j.id())
            } else {
                j.name().to_string()
            }
        };
        let mut running = Vec::new();
        let mut snapshots = Vec::new();
        let mut snapshot_bytes = Vec::new();
        let mut counters: Vec<Vec<(Labels, ConstCounter<f64>)>> =
            INSTANCE_COUNTERS.iter().map(|_| Vec::new()).collect();
        let mut queued = Vec::new();
        let mut watermarks = Vec::new();
        let mut window_latency = Vec::new();
        for job in &jobs {
            let name = label(job);
            let job_labels = vec![("job", name.clone())];
            running.push((
                job_labels.clone(),
                ConstGauge::new(i64::from(!job.status().is_terminal())),
            ));
            let stats = job.snapshot_stats();
            snapshots.push((job_labels.clone(), ConstCounter::new(stats.len() as u64)));
            if let Some(last) = stats.last() {
                snapshot_bytes.push((job_labels, ConstGauge::new(last.bytes as i64)));
            }
            let metrics = job.metrics();
            let latency = job_window_latency(&metrics);
            if latency.count() > 0 || metrics.iter().any(|m| m.watermark.is_some()) {
                window_latency.push((
                    vec![("job", name.clone())],
                    ConstHistogram::seconds(&latency),
                ));
            }
            for (shape, instances) in job
                .topology()
                .vertices
                .iter()
                .zip(per_vertex(job, &metrics))
            {
                for m in instances {
                    let labels: Labels = vec![
                        ("job", name.clone()),
                        ("vertex", shape.name.clone()),
                        ("instance", m.instance.to_string()),
                    ];
                    for (rows, (_, _, _, read)) in counters.iter_mut().zip(INSTANCE_COUNTERS) {
                        rows.push((labels.clone(), ConstCounter::new(read(m))));
                    }
                    queued.push((
                        labels.clone(),
                        ConstGauge::new(m.queue_fill.iter().sum::<u64>() as i64),
                    ));
                    if let Some(w) = m.watermark {
                        watermarks.push((labels, ConstGauge::new(w)));
                    }
                }
            }
        }
        family(
            encoder,
            (
                "weir_job_running",
                "1 while the job runs, 0 once it ended.",
                None,
            ),
            running,
        )?;
        family(
            encoder,
            ("weir_job_snapshots", "Snapshots the job completed.", None),
            snapshots,
        )?;
        family(
            encoder,
            (
                "weir_job_last_snapshot",
                "The size of the job's newest snapshot.",
                Some(Unit::Bytes),
            ),
            snapshot_bytes,
        )?;
        for ((name, help, unit, _), rows) in INSTANCE_COUNTERS.iter().zip(counters) {
            family(encoder, (name, help, unit.clone()), rows)?;
        }
        family(
            encoder,
            (
                "weir_vertex_queued_items",
                "Items waiting in a vertex instance's input queues.",
                None,
            ),
            queued,
        )?;
        family(
            encoder,
            (
                "weir_vertex_watermark",
                "The latest watermark of a vertex instance, in ms since the epoch.",
                Some(Unit::Other("milliseconds".into())),
            ),
            watermarks,
        )?;
        family(
            encoder,
            (
                "weir_window_latency",
                "Per watermark a sink took, the time since its source sent it: how long the results of the windows it closed took from the close to the sink. All the job's sinks.",
                Some(Unit::Seconds),
            ),
            window_latency,
        )
    }

    fn encode_flows(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        type ProcessorCounter = (
            &'static str,
            &'static str,
            fn(&weir_flow_api::monitor::ProcessorView) -> u64,
        );
        const PROCESSOR_COUNTERS: &[ProcessorCounter] = &[
            (
                "weir_flow_processor_flowfiles_in",
                "Flow files a processor took in committed sessions.",
                |p| p.flowfiles_in,
            ),
            (
                "weir_flow_processor_flowfiles_out",
                "Flow files a processor sent in committed sessions.",
                |p| p.flowfiles_out,
            ),
            (
                "weir_flow_processor_bytes_in",
                "Content bytes of the flow files a processor took.",
                |p| p.bytes_in,
            ),
            (
                "weir_flow_processor_bytes_out",
                "Content bytes of the flow files a processor sent.",
                |p| p.bytes_out,
            ),
            ("weir_flow_processor_tasks", "Tasks a processor ran.", |p| {
                p.tasks
            }),
            (
                "weir_flow_processor_failures",
                "Triggers of a processor that failed or panicked.",
                |p| p.failures,
            ),
        ];
        let flows = self.registry.flows();
        let mut processor_rows: Vec<Vec<(Labels, ConstCounter<u64>)>> =
            PROCESSOR_COUNTERS.iter().map(|_| Vec::new()).collect();
        let (mut queued, mut queued_bytes, mut back_pressure) =
            (Vec::new(), Vec::new(), Vec::new());
        for (_, flow) in &flows {
            let name = flow.name().to_string();
            for p in flow.processors() {
                let labels: Labels = vec![("job", name.clone()), ("processor", p.name.clone())];
                for (rows, (_, _, read)) in processor_rows.iter_mut().zip(PROCESSOR_COUNTERS) {
                    rows.push((labels.clone(), ConstCounter::new(read(&p))));
                }
            }
            for c in flow.connections() {
                let labels: Labels = vec![("job", name.clone()), ("connection", c.key.clone())];
                queued.push((labels.clone(), ConstGauge::new(c.queued_count as i64)));
                queued_bytes.push((labels.clone(), ConstGauge::new(c.queued_bytes as i64)));
                back_pressure.push((labels, ConstGauge::new(i64::from(c.back_pressure))));
            }
        }
        for ((name, help, _), rows) in PROCESSOR_COUNTERS.iter().zip(processor_rows) {
            family(encoder, (name, help, None), rows)?;
        }
        family(
            encoder,
            (
                "weir_flow_connection_queued_flowfiles",
                "Flow files queued in a connection.",
                None,
            ),
            queued,
        )?;
        family(
            encoder,
            (
                "weir_flow_connection_queued",
                "Content bytes queued in a connection.",
                Some(Unit::Bytes),
            ),
            queued_bytes,
        )?;
        family(
            encoder,
            (
                "weir_flow_connection_back_pressure",
                "1 while a connection's back pressure is engaged.",
                None,
            ),
            back_pressure,
        )
    }
}

/// `process_*` families, as Prometheus' client libraries name them.
fn encode_process(encoder: &mut DescriptorEncoder) -> fmt::Result {
    let stats = ProcessStats::read();
    family(
        encoder,
        (
            "process_cpu",
            "User and system CPU time of this process.",
            Some(Unit::Seconds),
        ),
        vec![(Labels::new(), ConstCounter::new(stats.cpu.as_secs_f64()))],
    )?;
    if let Some(rss) = stats.resident_bytes {
        family(
            encoder,
            (
                "process_resident_memory",
                "Resident memory of this process.",
                Some(Unit::Bytes),
            ),
            vec![(Labels::new(), ConstGauge::new(rss as i64))],
        )?;
    }
    if let Some(fds) = stats.open_fds {
        family(
            encoder,
            (
                "process_open_fds",
                "Open file descriptors of this process.",
                None,
            ),
            vec![(Labels::new(), ConstGauge::new(fds as i64))],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use weir::core::builtin_processors::CountSink;
    use weir::core::{
        Dag, Edge, Executor, ExecutorConfig, Inbox, JobConfig, LatencyHistogram, MetricsSnapshot,
        Outbox, Processor, ProcessorResult, Vertex, Watermark,
    };

    use super::*;

    /// The lines of `text` that are samples of `weir_window_latency_seconds`.
    fn latency_lines(text: &str) -> Vec<&str> {
        text.lines()
            .filter(|l| l.starts_with("weir_window_latency_seconds"))
            .collect()
    }

    /// The cumulative `_bucket` lines of job `job` given the cumulative count at each bound
    /// of `LATENCY_BUCKETS` and at `+Inf`.
    fn bucket_lines(job: &str, cumulative: [u64; 17]) -> Vec<String> {
        let bounds = [
            "0.0005", "0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5",
            "1.0", "2.0", "5.0", "10.0", "30.0", "60.0", "+Inf",
        ];
        bounds
            .iter()
            .zip(cumulative)
            .map(|(le, n)| {
                format!("weir_window_latency_seconds_bucket{{le=\"{le}\",job=\"{job}\"}} {n}")
            })
            .collect()
    }

    /// A sink instance's snapshot that recorded `latencies`.
    fn sink(instance: usize, latencies: &[Duration]) -> MetricsSnapshot {
        let histogram = LatencyHistogram::default();
        for l in latencies {
            histogram.record(*l);
        }
        MetricsSnapshot {
            vertex: "sink".into(),
            instance,
            items_in: 0,
            items_out: 0,
            backpressure_refusals: 0,
            busy: Duration::ZERO,
            idle: Duration::ZERO,
            backpressured: Duration::ZERO,
            watermark: Some(1),
            queue_fill: vec![0],
            window_latency: histogram.snapshot(),
            counters: vec![],
        }
    }

    /// Writes one family of window latency histograms, as the registry's collector does.
    #[derive(Debug)]
    struct LatencyFamily(Vec<(Labels, ConstHistogram)>);

    impl Collector for LatencyFamily {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            family(
                &mut encoder,
                ("weir_window_latency", "Latency.", Some(Unit::Seconds)),
                self.0.clone(),
            )
        }
    }

    #[test]
    fn a_jobs_merged_latencies_are_written_as_cumulative_buckets_in_seconds() {
        let ms = Duration::from_millis;
        // Two sink instances and a source, which records nothing.
        let mut source = sink(0, &[]);
        source.window_latency = Default::default();
        let metrics = [
            source,
            sink(1, &[Duration::from_micros(400), ms(3), ms(3)]),
            sink(2, &[ms(150), Duration::from_secs(90)]),
        ];
        let latency = crate::views::job_window_latency(&metrics);
        let mut exposition = prometheus_client::registry::Registry::default();
        exposition.register_collector(Box::new(LatencyFamily(vec![(
            vec![("job", "q5".to_string())],
            ConstHistogram::seconds(&latency),
        )])));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &exposition).unwrap();
        assert!(
            text.contains("# TYPE weir_window_latency_seconds histogram\n"),
            "{text}"
        );
        assert!(
            text.contains("# UNIT weir_window_latency_seconds seconds\n"),
            "{text}"
        );
        let mut expected = vec![
            // 0.0004 + 0.003 + 0.003 + 0.15 + 90
            "weir_window_latency_seconds_sum{job=\"q5\"} 90.1564".to_string(),
            "weir_window_latency_seconds_count{job=\"q5\"} 5".to_string(),
        ];
        expected.extend(bucket_lines(
            "q5",
            [1, 1, 1, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 5],
        ));
        assert_eq!(latency_lines(&text), expected, "{text}");
    }

    /// Emits its watermarks in one call, then finishes.
    struct Watermarks(Vec<i64>);

    impl Processor for Watermarks {
        fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
            for wm in std::mem::take(&mut self.0) {
                assert!(outbox.offer_watermark(Watermark(wm)), "they fit the queue");
            }
            Ok(true)
        }
    }

    /// A window stage whose `i`th watermark takes `delays[i]` of work to close its windows
    /// before it goes on; what the sinks measure, not a wait for another thread. It blocks,
    /// so it runs on a thread of its own and the sinks are never held behind it.
    struct SlowWindows {
        delays: VecDeque<Duration>,
        worked: bool,
    }

    impl Processor for SlowWindows {
        fn is_cooperative(&self) -> bool {
            false
        }

        fn process(&mut self, _: usize, inbox: &mut Inbox, _: &mut Outbox) -> ProcessorResult<()> {
            inbox.items::<u64>().clear();
            Ok(())
        }

        fn try_process_watermark(
            &mut self,
            wm: Watermark,
            outbox: &mut Outbox,
        ) -> ProcessorResult<bool> {
            if !self.worked {
                std::thread::sleep(self.delays.front().copied().unwrap_or_default());
                self.worked = true;
            }
            if !outbox.offer_watermark(wm) {
                return Ok(false);
            }
            self.delays.pop_front();
            self.worked = false;
            Ok(true)
        }
    }

    #[test]
    fn a_scrape_shows_one_histogram_per_job_over_its_sinks() {
        // The source sends three watermarks at once; the window stage works 300 ms on the
        // first, nothing on the second and 900 ms on the third, so they reach each of the
        // two sink instances about 0.3, 0.3 and 1.2 s after the source sent them: in the
        // buckets up to 0.5, 0.5 and 2 s, with 200 ms and 800 ms to spare for scheduling.
        let executor = Executor::new(ExecutorConfig {
            workers: 2,
            ..Default::default()
        })
        .unwrap();
        let mut dag = Dag::new();
        let source = dag.vertex(
            Vertex::new("watermarks", |_| Watermarks(vec![10, 20, 30]))
                .emits::<u64>()
                .local_parallelism(1),
        );
        let windows = dag.vertex(
            Vertex::new("windows", |_| SlowWindows {
                delays: [300, 0, 900].map(Duration::from_millis).into(),
                worked: false,
            })
            .accepts::<u64>()
            .emits::<u64>()
            .local_parallelism(1),
        );
        let (supplier, _) = CountSink::<u64>::supplier();
        let sink = dag.vertex(
            Vertex::new("sink", supplier)
                .accepts::<u64>()
                .local_parallelism(2),
        );
        dag.edge(Edge::between(source, windows));
        dag.edge(Edge::between(windows, sink));
        let job = executor
            .submit(dag, JobConfig::default().with_name("windows"))
            .unwrap();
        let registry = Registry::new();
        registry.add_job(job.monitor());
        job.join().unwrap();

        let text = encode(&registry).unwrap();
        let lines = latency_lines(&text);
        assert_eq!(lines.len(), 2 + 17, "{text}");
        assert_eq!(
            lines[1],
            "weir_window_latency_seconds_count{job=\"windows\"} 6"
        );
        assert_eq!(
            lines[2..],
            bucket_lines(
                "windows",
                [0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 6, 6, 6, 6, 6, 6],
            ),
            "{text}"
        );
        let sum: f64 = lines[0]
            .strip_prefix("weir_window_latency_seconds_sum{job=\"windows\"} ")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("a sum line: {}", lines[0]));
        // Each sink instance: at least 0.3 + 0.3 + 1.2 s, and no more than the buckets allow.
        assert!((3.6..=2.0 * (0.5 + 0.5 + 2.0)).contains(&sum), "{sum}");

        // The exposition parses, with the histogram under the family's name, labelled by job
        // alone.
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("the exposition parses");
        let histogram = scrape
            .samples
            .iter()
            .find(|s| s.metric == "weir_window_latency_seconds")
            .expect("the histogram");
        let labels: Vec<&String> = histogram.labels.keys().collect();
        assert_eq!(labels, ["job"]);
        let prometheus_parse::Value::Histogram(buckets) = &histogram.value else {
            panic!("{:?}", histogram.value);
        };
        let bounds: Vec<f64> = buckets.iter().map(|b| b.less_than).collect();
        let expected: Vec<f64> = LATENCY_BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .collect();
        assert_eq!(bounds, expected);
        assert_eq!(buckets.last().map(|b| b.count), Some(6.0));
    }

    #[test]
    fn an_empty_registry_shows_the_process_only() {
        let text = super::encode(&crate::Registry::new()).unwrap();
        assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
        assert!(!text.contains("weir_"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
