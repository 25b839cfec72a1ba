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
//! | `weir_flow_processor_flowfiles_in`, `_flowfiles_out`, `_bytes_in`, `_bytes_out`, `_tasks`, `_failures` | counter | job (the flow's name), processor |
//! | `weir_flow_connection_queued_flowfiles`, `_queued_bytes`, `_back_pressure` (0 or 1) | gauge | job, connection |
//! | `process_cpu_seconds`, `process_resident_memory_bytes`, `process_open_fds` | counter, gauges | none |
//!
//! A job's label is its name; when several registered jobs share a name, each gets its id
//! appended (`q5#3`), so no two series collide.

use std::collections::HashMap;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

use crate::process::ProcessStats;
use crate::registry::Registry;
use crate::views::per_vertex;

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
    #[test]
    fn an_empty_registry_shows_the_process_only() {
        let text = super::encode(&crate::Registry::new()).unwrap();
        assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
        assert!(!text.contains("weir_"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
