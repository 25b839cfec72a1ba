//! The JSON bodies of the REST API (`/api/v1`), one type per schema of the OpenAPI document.
//!
//! Conventions: a field ending in `_ms` is a duration in integer milliseconds, except the
//! timestamps (`started_ms`, `completed_ms`, `time_ms`, `since_ms`, `until_ms`,
//! `watermark_ms`), which are integer milliseconds since the Unix epoch. Rates are items per
//! second. Every type serializes with serde and describes itself with `utoipa::ToSchema`, so
//! the document and the responses cannot drift apart.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Tasklets are running.
    Running,
    /// Every tasklet finished normally.
    Completed,
    /// A processor failed or panicked.
    Failed,
    /// Cancelled by a user.
    Cancelled,
}

/// One job in the job list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobSummary {
    /// The job's id, unique in this process.
    pub id: String,
    /// The job's name.
    pub name: String,
    /// Running, completed, failed or cancelled.
    pub status: JobState,
    /// When the job was submitted (ms since the epoch).
    pub started_ms: u64,
    /// Time since submission, or the whole run time once the job ended.
    pub duration_ms: u64,
    /// Why the job failed; null otherwise.
    #[schema(required = true)]
    pub error: Option<String>,
}

/// A job with its DAG and per-vertex metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobDetail {
    /// The fields of the job list.
    #[serde(flatten)]
    pub summary: JobSummary,
    /// The vertices, in the DAG's order.
    pub vertices: Vec<Vertex>,
    /// The edges, in the DAG's order.
    pub edges: Vec<Edge>,
    /// The newest completed snapshot; null without snapshots or before the first.
    #[schema(required = true)]
    pub last_snapshot: Option<Snapshot>,
    /// How long window results took from the window's close to the sinks, over all the
    /// job's sink instances.
    // A client (`weir top`) reading an older server, which sends none, gets an empty one.
    #[serde(default)]
    #[schema(required = true)]
    pub window_latency: WindowLatency,
}

/// A job's window latency: for each watermark a sink instance took, the time since the
/// watermark's source sent it, which bounds how long every result of the windows that
/// watermark closed took from the window's close to the sink. A histogram with fixed
/// buckets (0.5 ms to 60 s, and one above), merged over every sink instance of the job, so a
/// sink of parallelism 2 counts each watermark twice; the same counts as the
/// `weir_window_latency_seconds` histogram of `/metrics`.
///
/// Quantiles are bucket upper bounds, not interpolations: `p99` 0.005 says that at least 99 %
/// of the latencies were at most 5 ms. A quantile beyond the largest bound (60 s) is the
/// string `"+Inf"`, as Prometheus names that bucket; one of a histogram with no latencies
/// (a batch job, a stream job before its first window closed) is null.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WindowLatency {
    /// Latencies recorded: watermarks taken, per sink instance.
    pub count: u64,
    /// Their sum, in seconds (`sum_seconds / count` is the mean).
    pub sum_seconds: f64,
    /// The upper bound of the bucket holding the median, in seconds; `"+Inf"` above 60 s;
    /// null when `count` is 0.
    #[schema(required = true)]
    pub p50: Option<LatencyBound>,
    /// The same for the 99th percentile.
    #[schema(required = true)]
    pub p99: Option<LatencyBound>,
    /// The same for the 99.9th percentile.
    #[schema(required = true)]
    pub p999: Option<LatencyBound>,
    /// Every bucket, ascending, the last one `"+Inf"`; all of them even when empty.
    pub buckets: Vec<LatencyBucket>,
}

/// One bucket of a [`WindowLatency`] histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LatencyBucket {
    /// Its upper bound, in seconds, or `"+Inf"` for the last.
    pub upper_bound: LatencyBound,
    /// The latencies in this bucket alone: above the previous bound, at most this one (not
    /// cumulative, unlike Prometheus' `le` buckets).
    pub count: u64,
}

/// A latency bucket's upper bound: seconds, or `"+Inf"` for the bucket above the largest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum LatencyBound {
    /// A bound in seconds.
    Seconds(f64),
    /// No bound: the string `"+Inf"`.
    Unbounded(Unbounded),
}

impl LatencyBound {
    /// `seconds` as a bound: [`LatencyBound::Unbounded`] when it is infinite (as
    /// `weir_core::LatencySnapshot::quantile_bound` says of the last bucket).
    pub fn from_seconds(seconds: f64) -> LatencyBound {
        if seconds.is_finite() {
            LatencyBound::Seconds(seconds)
        } else {
            LatencyBound::Unbounded(Unbounded::Inf)
        }
    }
}

/// The bound of the last latency bucket, written `"+Inf"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum Unbounded {
    /// `"+Inf"`.
    #[serde(rename = "+Inf")]
    Inf,
}

/// One vertex of a job's DAG, with its metrics summed over its instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Vertex {
    /// The vertex name.
    pub name: String,
    /// Its number of instances.
    pub parallelism: u32,
    /// Items its instances took from their input queues; for a source, the items it read.
    pub items_in: u64,
    /// Items its instances emitted.
    pub items_out: u64,
    /// `items_out` per second over the last second.
    pub rate_1s: f64,
    /// `items_out` per second over the last 10 seconds.
    pub rate_10s: f64,
    /// `items_out` per second over the last 60 seconds.
    pub rate_60s: f64,
    /// `items_in` per second over the last second: the vertex's throughput even when its
    /// fused terminal emits only at window ends (a source fused with an aggregation).
    pub in_rate_1s: f64,
    /// `items_in` per second over the last 10 seconds.
    pub in_rate_10s: f64,
    /// `items_in` per second over the last 60 seconds.
    pub in_rate_60s: f64,
    /// Queue fill per input ordinal, summed over instances.
    pub queue_fill: Vec<InputFill>,
    /// Time in calls that made progress, summed over instances.
    pub busy_ms: u64,
    /// Time in calls that made none, summed over instances.
    pub idle_ms: u64,
    /// Time in calls where a full downstream queue refused an item, summed over instances.
    pub backpressured_ms: u64,
    /// The lowest watermark its instances emitted (ms since the epoch); null before any.
    #[schema(required = true)]
    pub watermark_ms: Option<i64>,
    /// Wall-clock time minus `watermark_ms`; null without a watermark.
    #[schema(required = true)]
    pub watermark_lag_ms: Option<i64>,
    /// Items dropped for arriving behind the watermark.
    pub late_events: u64,
    /// The last 60 one-second `items_out` rates, oldest first (fewer while the job is young).
    pub history: Vec<f64>,
}

/// How full one input ordinal's queues are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InputFill {
    /// The input ordinal.
    pub input: u32,
    /// Items waiting, summed over every queue into this input.
    pub queued: u64,
    /// The sum of those queues' capacities.
    pub capacity: u64,
    /// `queued / capacity`, in 0..1: near 1, the producers are backpressured.
    pub fill: f64,
}

/// One edge of a job's DAG.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Edge {
    /// The producing vertex's name.
    pub from: String,
    /// The consuming vertex's name.
    pub to: String,
    /// The routing, as the core names it: `unicast`, `partitioned`, `broadcast`,
    /// `all-to-one` or `isolated`.
    pub kind: String,
    /// The producer's output ordinal.
    pub from_ordinal: u32,
    /// The consumer's input ordinal.
    pub to_ordinal: u32,
    /// Priority: a consumer drains lower values first (a hash join's build side).
    pub priority: i32,
}

/// A completed snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Snapshot {
    /// The snapshot id.
    pub id: u64,
    /// When it became durable (ms since the epoch).
    pub completed_ms: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// From the request to the durable manifest.
    pub duration_ms: u64,
}

/// The answer to a cancel request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CancelAccepted {
    /// Always `cancelling`: the job stops at its tasklets' next calls.
    pub status: String,
}

/// The answer to a stop request: the savepoint the job stopped with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SavepointTaken {
    /// Always `stopping`: the savepoint is durable and the job stops at its tasklets' next
    /// calls.
    pub status: String,
    /// The savepoint's snapshot id (`--restore-from ID`).
    pub savepoint_id: u64,
    /// Its folder (`--restore-from PATH`).
    pub location: String,
}

/// One flow in the flow list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FlowSummary {
    /// The flow's id in this process.
    pub id: String,
    /// The flow's name (`flow:` in its definition).
    pub name: String,
    /// `running`, `stopped` or `failed`.
    pub status: String,
}

/// A flow with its processors, connections and process groups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FlowDetail {
    /// The fields of the flow list.
    #[serde(flatten)]
    pub summary: FlowSummary,
    /// Every processor (ports and funnels included), in definition order.
    pub processors: Vec<Processor>,
    /// Every connection, in definition order.
    pub connections: Vec<Connection>,
    /// The process groups.
    pub groups: Vec<Group>,
}

/// Whether a processor is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProcessorState {
    /// Triggered on its schedule.
    Running,
    /// Not triggered; its input queues fill up.
    Stopped,
    /// Cannot be started from here (a member of a stateless group, a port).
    Disabled,
}

/// One processor of a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Processor {
    /// The processor's id: its name, unique in the flow.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its type (`GetFile`, `SplitText`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The name of its process group.
    pub group: String,
    /// Running, stopped or disabled.
    pub state: ProcessorState,
    /// Flow files taken from its input queues in committed sessions.
    pub flowfiles_in: u64,
    /// Flow files it sent to connections in committed sessions.
    pub flowfiles_out: u64,
    /// Content bytes of the flow files taken in.
    pub bytes_in: u64,
    /// Content bytes of the flow files sent out.
    pub bytes_out: u64,
    /// Triggers run (committed, rolled back or failed).
    pub tasks: u64,
    /// `flowfiles_in` per second over the last second (0 until the server sampled twice).
    pub flowfiles_in_rate_1s: f64,
    /// `flowfiles_in` per second over the last 10 seconds.
    pub flowfiles_in_rate_10s: f64,
    /// `flowfiles_in` per second over the last 60 seconds.
    pub flowfiles_in_rate_60s: f64,
    /// `flowfiles_out` per second over the last second.
    pub flowfiles_out_rate_1s: f64,
    /// `flowfiles_out` per second over the last 10 seconds.
    pub flowfiles_out_rate_10s: f64,
    /// `flowfiles_out` per second over the last 60 seconds.
    pub flowfiles_out_rate_60s: f64,
    /// `bytes_in` per second over the last second.
    pub bytes_in_rate_1s: f64,
    /// `bytes_in` per second over the last 10 seconds.
    pub bytes_in_rate_10s: f64,
    /// `bytes_in` per second over the last 60 seconds.
    pub bytes_in_rate_60s: f64,
    /// `bytes_out` per second over the last second.
    pub bytes_out_rate_1s: f64,
    /// `bytes_out` per second over the last 10 seconds.
    pub bytes_out_rate_10s: f64,
    /// `bytes_out` per second over the last 60 seconds.
    pub bytes_out_rate_60s: f64,
    /// Recent warnings and errors, oldest first.
    pub bulletins: Vec<Bulletin>,
}

/// A warning or error a processor reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Bulletin {
    /// When (ms since the epoch).
    pub time_ms: u64,
    /// `WARNING` or `ERROR`.
    pub level: String,
    /// What happened.
    pub message: String,
}

/// One connection (queue) of a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Connection {
    /// The connection's key, unique in the flow.
    pub id: String,
    /// The processor (or port) it starts at.
    pub source: String,
    /// The processor (or port) it ends at.
    pub destination: String,
    /// The relationships it carries.
    pub relationships: Vec<String>,
    /// Flow files queued.
    pub queued_count: u64,
    /// Content bytes queued.
    pub queued_bytes: u64,
    /// Back pressure engages at this many flow files.
    pub object_threshold: u64,
    /// Back pressure engages at this many queued bytes.
    pub size_threshold_bytes: u64,
    /// Whether a threshold is reached: the source is not triggered.
    pub back_pressure: bool,
}

/// Which engine runs a process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GroupEngine {
    /// Durable queues, one session per processor trigger.
    Traditional,
    /// In-memory queues, one transaction per group trigger.
    Stateless,
}

/// A process group of a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Group {
    /// The group's id: its name.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Traditional or stateless.
    pub engine: GroupEngine,
}

/// The filters of a provenance search; every one is optional. A parameter it does not know
/// is refused (400, naming it), not ignored: a misspelt filter would otherwise return
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceQuery {
    /// Only this flow file's events (its `uuid`).
    pub flowfile: Option<String>,
    /// Only this component's events (its name).
    pub component: Option<String>,
    /// Only events of this type (`CREATE`, `ROUTE`, `DROP`, ...; NiFi's names).
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub event_type: Option<String>,
    /// Only events at or after this time (ms since the epoch).
    pub since_ms: Option<u64>,
    /// Only events at or before this time (ms since the epoch).
    pub until_ms: Option<u64>,
    /// At most this many events [default 1000]: the newest ones, unless `order=oldest`.
    pub limit: Option<u32>,
    /// `newest` (the default, as NiFi's list shows them) or `oldest` first.
    pub order: Option<String>,
    /// The server's token, for a client that cannot send it as a header.
    #[serde(skip_serializing)]
    pub token: Option<String>,
}

/// One provenance event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProvenanceEvent {
    /// The event's id.
    pub id: u64,
    /// When (ms since the epoch).
    pub time_ms: u64,
    /// What happened, as NiFi names it (`CREATE`, `FORK`, `ROUTE`, `SEND`, `DROP`, ...).
    #[serde(rename = "type")]
    pub event_type: String,
    /// The flow file's `uuid`.
    pub flowfile: String,
    /// The component that recorded it.
    pub component: String,
    /// Parents' uuids (FORK, JOIN, CLONE).
    pub parents: Vec<String>,
    /// Children's uuids (FORK, JOIN, CLONE).
    pub children: Vec<String>,
    /// The relationship (ROUTE) or another detail; null when there is none.
    #[schema(required = true)]
    pub details: Option<String>,
}

/// What a lineage node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LineageNodeKind {
    /// A flow file; its id is the flow file's `uuid`.
    Flowfile,
    /// A provenance event; its id is `event-<event id>`.
    Event,
}

/// A node of a lineage graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LineageNode {
    /// Unique among the graph's nodes.
    pub id: String,
    /// A flow file or an event.
    pub kind: LineageNodeKind,
    /// What to show: a flow file's `filename`, an event's type and component.
    pub label: String,
    /// For a flow file: how many of its parents the graph leaves out (its own lineage has
    /// them: the frontier where a viewer offers to expand). 0 for an event.
    pub more_parents: u64,
    /// For a flow file: how many of its children the graph leaves out. 0 for an event.
    pub more_children: u64,
}

/// A link of a lineage graph, in the direction data went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LineageLink {
    /// The node it starts at.
    pub from: String,
    /// The node it ends at.
    pub to: String,
}

/// A flow file's lineage within limits: its ancestors and descendants through FORK, JOIN
/// and CLONE up to `depth` hops and `max_nodes` flow files, each one's events, as a graph;
/// flow files with more beyond say how many (`more_parents`, `more_children`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Lineage {
    /// The flow file asked about (its `uuid`).
    pub flowfile: String,
    /// The depth it was searched to (hops from `flowfile`).
    pub depth: u32,
    /// The most flow files it could hold.
    pub max_nodes: u32,
    /// Whether the limits left related flow files out: some nodes have `more_parents` or
    /// `more_children`.
    pub truncated: bool,
    /// How many distinct flow files are left out next to those shown (0 when whole).
    pub omitted: u64,
    /// Flow files (nearest to `flowfile` first) and events.
    pub nodes: Vec<LineageNode>,
    /// Flow file to its event, event to the next event of the same flow file, and a
    /// FORK/JOIN/CLONE event to the flow files it made.
    pub links: Vec<LineageLink>,
}

/// The limits of a lineage; a parameter it does not know is refused (400, naming it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LineageQuery {
    /// Hops from the flow file [default 3]: 0 is the flow file alone, 1 adds its parents
    /// and children, 2 its siblings and grandparents, ... (at most 100).
    pub depth: Option<u32>,
    /// At most this many flow files [default 200], 1 to 10000.
    pub max_nodes: Option<u32>,
    /// The server's token, for a client that cannot send it as a header.
    #[serde(skip_serializing)]
    pub token: Option<String>,
}

/// The bytes of a flow file's content (`application/octet-stream`), as the document names
/// them; the handler sends the bytes themselves.
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct Content(pub Vec<u8>);

/// The body of every 4xx and 5xx answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, naming the job, flow, processor or flow file not found.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_detail_is_flat_and_uses_the_contract_names() {
        let detail = JobDetail {
            summary: JobSummary {
                id: "1".into(),
                name: "q5".into(),
                status: JobState::Running,
                started_ms: 5,
                duration_ms: 7,
                error: None,
            },
            vertices: vec![],
            edges: vec![],
            last_snapshot: None,
            window_latency: WindowLatency::default(),
        };
        let json = serde_json::to_value(&detail).unwrap();
        assert_eq!(json["status"], "running");
        assert_eq!(json["name"], "q5");
        assert!(json["error"].is_null());
        assert!(json["last_snapshot"].is_null());
        assert!(json["window_latency"]["p99"].is_null());
        // A job from a server that sends no window latency reads as an empty one.
        let mut older = json.clone();
        older.as_object_mut().unwrap().remove("window_latency");
        let read: JobDetail = serde_json::from_value(older).unwrap();
        assert_eq!(read, detail);
    }

    #[test]
    fn latency_bounds_are_seconds_or_the_string_plus_inf() {
        let latency = WindowLatency {
            count: 3,
            sum_seconds: 70.5,
            p50: Some(LatencyBound::from_seconds(0.005)),
            p99: Some(LatencyBound::from_seconds(f64::INFINITY)),
            p999: Some(LatencyBound::from_seconds(f64::INFINITY)),
            buckets: vec![
                LatencyBucket {
                    upper_bound: LatencyBound::from_seconds(0.005),
                    count: 2,
                },
                LatencyBucket {
                    upper_bound: LatencyBound::from_seconds(f64::INFINITY),
                    count: 1,
                },
            ],
        };
        let json = serde_json::to_value(&latency).unwrap();
        assert_eq!(json["p50"], 0.005);
        assert_eq!(json["p99"], "+Inf");
        assert_eq!(json["buckets"][1]["upper_bound"], "+Inf");
        assert_eq!(
            serde_json::from_value::<WindowLatency>(json).unwrap(),
            latency
        );
    }

    #[test]
    fn processors_and_events_name_their_type_field_type() {
        let p = Processor {
            id: "read".into(),
            name: "read".into(),
            kind: "GetFile".into(),
            group: "main".into(),
            state: ProcessorState::Stopped,
            flowfiles_in: 0,
            flowfiles_out: 0,
            bytes_in: 0,
            bytes_out: 0,
            tasks: 0,
            flowfiles_in_rate_1s: 0.0,
            flowfiles_in_rate_10s: 0.0,
            flowfiles_in_rate_60s: 0.0,
            flowfiles_out_rate_1s: 2.5,
            flowfiles_out_rate_10s: 0.0,
            flowfiles_out_rate_60s: 0.0,
            bytes_in_rate_1s: 0.0,
            bytes_in_rate_10s: 0.0,
            bytes_in_rate_60s: 0.0,
            bytes_out_rate_1s: 0.0,
            bytes_out_rate_10s: 0.0,
            bytes_out_rate_60s: 0.0,
            bulletins: vec![],
        };
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["type"], "GetFile");
        assert_eq!(json["state"], "stopped");
        assert_eq!(json["flowfiles_out_rate_1s"], 2.5);
        let q: ProvenanceQuery = serde_json::from_str(r#"{"type":"DROP","limit":3}"#).unwrap();
        assert_eq!(q.event_type.as_deref(), Some("DROP"));
    }
}
