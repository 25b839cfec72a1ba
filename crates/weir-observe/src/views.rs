//! From the runtime's views (`JobMonitor`, `FlowMonitor`) to the API's bodies ([`crate::model`]).
//!
//! Every function reads the counters once and builds plain values; nothing here touches a
//! running job's data path.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use weir_core::{JobMonitor, JobStatus, LATENCY_BUCKETS, LatencySnapshot, MetricsSnapshot};
use weir_flow_api::monitor::{Bulletin, ConnectionView, FlowMonitor, ProcessorView, RunState};
use weir_flow_api::provenance::{EventType, Lineage, LineageLimits, ProvenanceEvent};

use crate::model;
use crate::registry::{ProcessorRates, Registry, VertexRates};

/// Milliseconds since the Unix epoch of `t` (0 before it).
pub(crate) fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The API's name of a job status.
pub(crate) fn job_state(status: JobStatus) -> model::JobState {
    match status {
        JobStatus::Running => model::JobState::Running,
        JobStatus::Completed => model::JobState::Completed,
        JobStatus::Failed => model::JobState::Failed,
        JobStatus::Cancelled => model::JobState::Cancelled,
    }
}

/// A job's line in the job list.
pub(crate) fn job_summary(job: &JobMonitor) -> model::JobSummary {
    model::JobSummary {
        id: job.id().to_string(),
        name: job.name().to_string(),
        status: job_state(job.status()),
        started_ms: epoch_ms(job.started_at()),
        duration_ms: job.elapsed().as_millis() as u64,
        error: job.error(),
    }
}

/// The metrics of each vertex's instances: the metrics come in vertex order, `parallelism`
/// instances each.
pub(crate) fn per_vertex<'a>(
    job: &JobMonitor,
    metrics: &'a [MetricsSnapshot],
) -> Vec<&'a [MetricsSnapshot]> {
    let mut rest = metrics;
    job.topology()
        .vertices
        .iter()
        .map(|v| {
            let (mine, after) = rest.split_at(v.parallelism.min(rest.len()));
            rest = after;
            mine
        })
        .collect()
}

/// A job's window latency: the histograms of all its instances merged into one. Only sinks
/// record, so this is the latency of every watermark each sink instance took. Always holds a
/// count for every bucket of [`LATENCY_BUCKETS`] and one for the rest, zero before the first.
pub(crate) fn job_window_latency(metrics: &[MetricsSnapshot]) -> LatencySnapshot {
    let mut total = LatencySnapshot {
        counts: vec![0; LATENCY_BUCKETS.len() + 1],
        sum: Duration::ZERO,
    };
    for m in metrics {
        total.merge(&m.window_latency);
    }
    total
}

/// A job with its DAG, per-vertex metrics and rates, and its last snapshot.
pub(crate) fn job_detail(registry: &Registry, job: &JobMonitor) -> model::JobDetail {
    let metrics = job.metrics();
    let rates = registry.rates(job.id());
    let now_ms = epoch_ms(SystemTime::now()) as i64;
    let topology = job.topology();
    let vertices = topology
        .vertices
        .iter()
        .zip(per_vertex(job, &metrics))
        .enumerate()
        .map(|(i, (shape, instances))| {
            let rates = rates.get(i).cloned().unwrap_or_else(VertexRates::default);
            let sum = |f: fn(&MetricsSnapshot) -> u64| instances.iter().map(f).sum::<u64>();
            let watermark = instances.iter().filter_map(|m| m.watermark).min();
            let queue_fill = shape
                .input_capacity
                .iter()
                .enumerate()
                .map(|(ordinal, capacity)| {
                    let queued: u64 = instances
                        .iter()
                        .map(|m| m.queue_fill.get(ordinal).copied().unwrap_or(0))
                        .sum();
                    model::InputFill {
                        input: ordinal as u32,
                        queued,
                        capacity: *capacity,
                        fill: if *capacity == 0 {
                            0.0
                        } else {
                            (queued as f64 / *capacity as f64).min(1.0)
                        },
                    }
                })
                .collect();
            model::Vertex {
                name: shape.name.clone(),
                parallelism: shape.parallelism as u32,
                items_in: sum(|m| m.items_in),
                items_out: sum(|m| m.items_out),
                rate_1s: rates.rate_1s,
                rate_10s: rates.rate_10s,
                rate_60s: rates.rate_60s,
                in_rate_1s: rates.in_rate_1s,
                in_rate_10s: rates.in_rate_10s,
                in_rate_60s: rates.in_rate_60s,
                queue_fill,
                busy_ms: sum(|m| m.busy.as_millis() as u64),
                idle_ms: sum(|m| m.idle.as_millis() as u64),
                backpressured_ms: sum(|m| m.backpressured.as_millis() as u64),
                watermark_ms: watermark,
                watermark_lag_ms: watermark.map(|w| now_ms.saturating_sub(w)),
                late_events: sum(|m| m.counter("late_events")),
                history: rates.history,
            }
        })
        .collect();
    let edges = topology
        .edges
        .iter()
        .map(|e| model::Edge {
            from: e.from.clone(),
            to: e.to.clone(),
            kind: e.kind.to_string(),
            from_ordinal: e.from_ordinal as u32,
            to_ordinal: e.to_ordinal as u32,
            priority: e.priority,
        })
        .collect();
    let last_snapshot = job.snapshot_stats().last().map(|s| model::Snapshot {
        id: s.id,
        completed_ms: s.completed_at_ms,
        bytes: s.bytes,
        duration_ms: (s.duration + s.write).as_millis() as u64,
    });
    model::JobDetail {
        summary: job_summary(job),
        vertices,
        edges,
        last_snapshot,
        window_latency: window_latency(&job_window_latency(&metrics)),
    }
}

/// A window latency histogram as the API shows it: its quantiles as bucket bounds.
pub(crate) fn window_latency(latency: &LatencySnapshot) -> model::WindowLatency {
    let quantile = |q| {
        latency
            .quantile_bound(q)
            .map(model::LatencyBound::from_seconds)
    };
    let bounds = LATENCY_BUCKETS.iter().copied().chain([f64::INFINITY]);
    model::WindowLatency {
        count: latency.count(),
        sum_seconds: latency.sum.as_secs_f64(),
        p50: quantile(0.5),
        p99: quantile(0.99),
        p999: quantile(0.999),
        buckets: bounds
            .enumerate()
            .map(|(i, bound)| model::LatencyBucket {
                upper_bound: model::LatencyBound::from_seconds(bound),
                count: latency.counts.get(i).copied().unwrap_or(0),
            })
            .collect(),
    }
}

/// A flow's line in the flow list.
pub(crate) fn flow_summary(id: &str, flow: &FlowMonitor) -> model::FlowSummary {
    model::FlowSummary {
        id: id.to_string(),
        name: flow.name().to_string(),
        status: flow.state().as_str().to_string(),
    }
}

/// A flow with its processors (with their rates), connections and groups.
pub(crate) fn flow_detail(registry: &Registry, id: &str, flow: &FlowMonitor) -> model::FlowDetail {
    let rates = registry.processor_rates(id);
    model::FlowDetail {
        summary: flow_summary(id, flow),
        processors: flow
            .processors()
            .iter()
            .map(|p| processor(p, &rates.get(&p.name).copied().unwrap_or_default()))
            .collect(),
        connections: flow.connections().iter().map(connection).collect(),
        groups: flow
            .groups()
            .into_iter()
            .map(|g| model::Group {
                id: g.name.clone(),
                name: g.name,
                engine: if g.stateless {
                    model::GroupEngine::Stateless
                } else {
                    model::GroupEngine::Traditional
                },
            })
            .collect(),
    }
}

/// One processor, with its rates.
pub(crate) fn processor(p: &ProcessorView, rates: &ProcessorRates) -> model::Processor {
    model::Processor {
        id: p.name.clone(),
        name: p.name.clone(),
        kind: p.kind.clone(),
        group: p.group.clone(),
        state: match p.state {
            RunState::Running => model::ProcessorState::Running,
            RunState::Stopped => model::ProcessorState::Stopped,
            RunState::Disabled => model::ProcessorState::Disabled,
        },
        flowfiles_in: p.flowfiles_in,
        flowfiles_out: p.flowfiles_out,
        bytes_in: p.bytes_in,
        bytes_out: p.bytes_out,
        tasks: p.tasks,
        flowfiles_in_rate_1s: rates.flowfiles_in.last_1s,
        flowfiles_in_rate_10s: rates.flowfiles_in.last_10s,
        flowfiles_in_rate_60s: rates.flowfiles_in.last_60s,
        flowfiles_out_rate_1s: rates.flowfiles_out.last_1s,
        flowfiles_out_rate_10s: rates.flowfiles_out.last_10s,
        flowfiles_out_rate_60s: rates.flowfiles_out.last_60s,
        bytes_in_rate_1s: rates.bytes_in.last_1s,
        bytes_in_rate_10s: rates.bytes_in.last_10s,
        bytes_in_rate_60s: rates.bytes_in.last_60s,
        bytes_out_rate_1s: rates.bytes_out.last_1s,
        bytes_out_rate_10s: rates.bytes_out.last_10s,
        bytes_out_rate_60s: rates.bytes_out.last_60s,
        bulletins: p.bulletins.iter().map(bulletin).collect(),
    }
}

fn bulletin(b: &Bulletin) -> model::Bulletin {
    model::Bulletin {
        time_ms: b.time_ms.max(0) as u64,
        level: b.level.as_str().to_string(),
        message: b.message.clone(),
    }
}

fn connection(c: &ConnectionView) -> model::Connection {
    model::Connection {
        id: c.key.clone(),
        source: c.source.clone(),
        destination: c.destination.clone(),
        relationships: c.relationships.clone(),
        queued_count: c.queued_count,
        queued_bytes: c.queued_bytes,
        object_threshold: c.object_threshold,
        size_threshold_bytes: c.size_threshold,
        back_pressure: c.back_pressure,
    }
}

/// NiFi's name of an event type (`CREATE`, `ROUTE`, ...).
pub(crate) fn event_type_name(t: EventType) -> String {
    // The enum's variants are NiFi's names; Debug prints them.
    format!("{t:?}")
}

/// One provenance event.
pub(crate) fn provenance_event(e: &ProvenanceEvent) -> model::ProvenanceEvent {
    model::ProvenanceEvent {
        id: e.id,
        time_ms: e.time_ms.max(0) as u64,
        event_type: event_type_name(e.event_type),
        flowfile: e.flowfile.to_string(),
        component: e.component.to_string(),
        parents: e.parents.clone(),
        children: e.children.clone(),
        details: e.details.as_ref().map(ToString::to_string),
    }
}

/// A lineage as a graph: a node per flow file (labelled with its `filename` when an event
/// recorded one, with how many parents and children it has beyond the lineage) and per
/// event; links from a flow file to its first event, from each event to the same flow
/// file's next one, and from a FORK, JOIN or CLONE event to the flow files it made. Links
/// reach only the flow files the lineage holds.
pub(crate) fn lineage_graph(lineage: &Lineage, limits: LineageLimits) -> model::Lineage {
    let mut nodes = Vec::new();
    let mut links = Vec::new();
    let event_node = |id: u64| format!("event-{id}");
    let mut labels: BTreeMap<&str, &str> = BTreeMap::new();
    for e in &lineage.events {
        if let Some(name) = e.attributes.get("filename") {
            labels.entry(e.flowfile.as_str()).or_insert(name);
        }
    }
    let more: BTreeMap<&str, (usize, usize)> = lineage
        .frontier
        .iter()
        .map(|f| (f.flowfile.as_str(), (f.more_parents, f.more_children)))
        .collect();
    for uuid in &lineage.flowfiles {
        let (more_parents, more_children) = more.get(uuid.as_str()).copied().unwrap_or((0, 0));
        nodes.push(model::LineageNode {
            id: uuid.clone(),
            kind: model::LineageNodeKind::Flowfile,
            label: labels
                .get(uuid.as_str())
                .unwrap_or(&uuid.as_str())
                .to_string(),
            more_parents: more_parents as u64,
            more_children: more_children as u64,
        });
    }
    let known: BTreeSet<&str> = lineage.flowfiles.iter().map(String::as_str).collect();
    // Events come sorted by time: each flow file's chain is in order.
    let mut last_of: BTreeMap<&str, String> = Default::default();
    for e in &lineage.events {
        let id = event_node(e.id);
        nodes.push(model::LineageNode {
            id: id.clone(),
            kind: model::LineageNodeKind::Event,
            label: format!("{} by {}", event_type_name(e.event_type), e.component),
            more_parents: 0,
            more_children: 0,
        });
        if e.event_type == EventType::JOIN {
            // The parents end in the join, and the merged flow file starts from it.
            for parent in e.parents.iter().filter(|p| known.contains(p.as_str())) {
                let from = last_of
                    .insert(parent.as_str(), id.clone())
                    .unwrap_or_else(|| parent.clone());
                links.push(model::LineageLink {
                    from,
                    to: id.clone(),
                });
            }
            if known.contains(e.flowfile.as_str()) {
                links.push(model::LineageLink {
                    from: id.clone(),
                    to: e.flowfile.to_string(),
                });
            }
        } else {
            let from = last_of
                .insert(e.flowfile.as_str(), id.clone())
                .unwrap_or_else(|| e.flowfile.to_string());
            if known.contains(e.flowfile.as_str()) {
                links.push(model::LineageLink {
                    from,
                    to: id.clone(),
                });
            }
        }
        for child in e.children.iter().filter(|c| **c != e.flowfile) {
            if known.contains(child.as_str()) {
                links.push(model::LineageLink {
                    from: id.clone(),
                    to: child.clone(),
                });
            }
        }
    }
    model::Lineage {
        flowfile: lineage.flowfile.clone(),
        depth: limits.depth,
        max_nodes: u32::try_from(limits.max_flowfiles).unwrap_or(u32::MAX),
        truncated: lineage.truncated,
        omitted: lineage.omitted as u64,
        nodes,
        links,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use weir_core::LatencyHistogram;

    use super::*;

    #[test]
    fn a_jobs_window_latency_has_every_bucket_and_quantiles_as_bounds() {
        let none = window_latency(&job_window_latency(&[]));
        assert_eq!((none.count, none.p50, none.p99), (0, None, None));
        assert_eq!(none.buckets.len(), LATENCY_BUCKETS.len() + 1);
        assert!(none.buckets.iter().all(|b| b.count == 0));

        // 998 latencies of 3 ms, one of 150 ms and one of 90 s.
        let h = LatencyHistogram::default();
        for _ in 0..998 {
            h.record(Duration::from_millis(3));
        }
        h.record(Duration::from_millis(150));
        h.record(Duration::from_secs(90));
        let latency = window_latency(&h.snapshot());
        assert_eq!(latency.count, 1000);
        assert!((latency.sum_seconds - (2.994 + 0.15 + 90.0)).abs() < 1e-9);
        let seconds = model::LatencyBound::Seconds;
        assert_eq!(latency.p50, Some(seconds(0.005)));
        assert_eq!(latency.p99, Some(seconds(0.005)));
        assert_eq!(latency.p999, Some(seconds(0.2)));
        let last = latency.buckets.last().unwrap();
        assert_eq!(last.count, 1);
        assert_eq!(
            last.upper_bound,
            model::LatencyBound::Unbounded(model::Unbounded::Inf)
        );
        let far = LatencyHistogram::default();
        far.record(Duration::from_secs(61));
        assert_eq!(
            window_latency(&far.snapshot()).p50,
            Some(model::LatencyBound::Unbounded(model::Unbounded::Inf))
        );
    }
}
