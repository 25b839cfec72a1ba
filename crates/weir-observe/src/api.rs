//! The routes: REST under `/api/v1`, its OpenAPI document, server-sent events, `/metrics`
//! and the embedded dashboard.
//!
//! Each REST handler carries a `#[utoipa::path]` describing it; [`ApiDoc`] gathers them with
//! the [`model`](crate::model) schemas into the document served at `/api/v1/openapi.json`, so the document
//! is generated from the same code that answers. Errors are JSON bodies
//! (`{"error": "..."}`, [`ErrorBody`]) with a 4xx or 5xx status.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use utoipa::OpenApi;
use weir_flow_api::monitor::{ControlError, FlowMonitor};
use weir_flow_api::provenance::{EventType, LineageLimits, Query as ProvenanceFilter};

use crate::model::Group;
use crate::model::{
    Bulletin, CancelAccepted, Connection, Content, Edge, ErrorBody, FlowDetail, FlowSummary,
    GroupEngine, InputFill, JobDetail, JobState, JobSummary, LatencyBound, LatencyBucket, Lineage,
    LineageLink, LineageNode, LineageNodeKind, LineageQuery, Processor, ProcessorState,
    ProvenanceEvent, ProvenanceQuery, SavepointTaken, Snapshot, Unbounded, Vertex, WindowLatency,
};
use crate::registry::Registry;
use crate::{assets, prometheus, views};

/// A provenance search returns at most this many events unless `limit` says otherwise.
pub const DEFAULT_PROVENANCE_LIMIT: u32 = 1000;

/// A provenance search returns at most this many events whatever `limit` says.
pub const MAX_PROVENANCE_LIMIT: u32 = 100_000;

/// A lineage searches at most this many hops from its flow file.
pub const MAX_LINEAGE_DEPTH: u32 = 100;

/// A lineage holds at most this many flow files whatever `max_nodes` says.
pub const MAX_LINEAGE_NODES: u32 = 10_000;

/// How often the event stream sends the job and flow lists.
pub const EVENT_INTERVAL: Duration = Duration::from_secs(1);

/// The OpenAPI document of the REST API.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Weir",
        description = "Jobs and flows of one Weir process: their graphs, metrics, controls and provenance."
    ),
    paths(
        list_jobs,
        get_job,
        cancel_job,
        stop_job,
        list_flows,
        get_flow,
        start_processor,
        stop_processor,
        search_provenance,
        get_lineage,
        get_content,
        openapi_json,
        events,
    ),
    components(schemas(
        JobState,
        JobSummary,
        JobDetail,
        Vertex,
        InputFill,
        Edge,
        Snapshot,
        WindowLatency,
        LatencyBucket,
        LatencyBound,
        Unbounded,
        CancelAccepted,
        SavepointTaken,
        FlowSummary,
        FlowDetail,
        Processor,
        ProcessorState,
        Bulletin,
        Connection,
        Group,
        GroupEngine,
        ProvenanceEvent,
        Lineage,
        LineageNode,
        LineageNodeKind,
        LineageLink,
        LineageQuery,
        ErrorBody,
        Content,
    )),
    modifiers(&BearerToken),
    tags(
        (name = "jobs", description = "Pipelines running on the core runtime"),
        (name = "flows", description = "NiFi-style flows"),
        (name = "server", description = "The document and the live stream"),
    )
)]
pub struct ApiDoc;

/// Declares the optional bearer token: required on every request when the server has one.
struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// A failed request: its status and the message of its [`ErrorBody`].
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// A 404 naming what was not found.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
        }
    }

    /// A 421 for a request whose `Host` is not this server's (DNS rebinding).
    pub fn misdirected(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::MISDIRECTED_REQUEST,
            message: message.into(),
        }
    }

    /// A 403 for a state-changing request from another origin.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::FORBIDDEN,
            message: message.into(),
        }
    }

    /// A 401 for a missing or wrong token.
    pub fn unauthorized() -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            message: "this server needs a token: send `Authorization: Bearer <token>`".into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::bad_request(rejection.body_text())
    }
}

fn find_job(registry: &Registry, id: &str) -> Result<weir_core::JobMonitor, ApiError> {
    registry
        .job(id)
        .ok_or_else(|| ApiError::not_found(format!("no job `{id}`")))
}

fn find_flow(registry: &Registry, id: &str) -> Result<FlowMonitor, ApiError> {
    registry
        .flow(id)
        .ok_or_else(|| ApiError::not_found(format!("no flow `{id}`")))
}

/// Runs blocking work (the provenance store, the content repository) on the runtime's
/// blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("the request's task failed: {e}")))?
}

/// The jobs of this process.
#[utoipa::path(
    get,
    path = "/api/v1/jobs",
    tag = "jobs",
    responses((status = 200, description = "Every registered job, oldest first", body = [JobSummary]))
)]
pub(crate) async fn list_jobs(State(registry): State<Registry>) -> Json<Vec<JobSummary>> {
    Json(registry.jobs().iter().map(views::job_summary).collect())
}

/// A job's DAG with per-vertex metrics.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job", body = JobDetail),
        (status = 404, description = "No such job", body = ErrorBody),
    )
)]
pub(crate) async fn get_job(
    State(registry): State<Registry>,
    Path(id): Path<String>,
) -> Result<Json<JobDetail>, ApiError> {
    let job = find_job(&registry, &id)?;
    Ok(Json(views::job_detail(&registry, &job)))
}

/// Cancels a running job.
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{id}/cancel",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 202, description = "The job is stopping", body = CancelAccepted),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job already ended", body = ErrorBody),
    )
)]
pub(crate) async fn cancel_job(
    State(registry): State<Registry>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<CancelAccepted>), ApiError> {
    let job = find_job(&registry, &id)?;
    let status = job.status();
    if status.is_terminal() {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            message: format!("job `{id}` already ended ({status:?})"),
        });
    }
    job.cancel();
    Ok((
        StatusCode::ACCEPTED,
        Json(CancelAccepted {
            status: "cancelling".into(),
        }),
    ))
}

/// Stops a running job with a savepoint, as Flink's stop-with-savepoint: a snapshot is taken
/// at once, kept in the job's savepoint store, and then the job is cancelled. Answers once the
/// savepoint is durable.
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{id}/stop",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The savepoint is durable; the job is stopping", body = SavepointTaken),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job already ended, or takes no savepoints", body = ErrorBody),
        (status = 500, description = "The savepoint could not be written; the job goes on", body = ErrorBody),
    )
)]
pub(crate) async fn stop_job(
    State(registry): State<Registry>,
    Path(id): Path<String>,
) -> Result<Json<SavepointTaken>, ApiError> {
    use weir_core::snapshot::SavepointError;
    let job = find_job(&registry, &id)?;
    blocking(move || match job.stop_with_savepoint() {
        Ok(savepoint) => Ok(Json(SavepointTaken {
            status: "stopping".into(),
            savepoint_id: savepoint.id,
            location: savepoint.location.display().to_string(),
        })),
        Err(e @ (SavepointError::NotConfigured | SavepointError::Ended)) => Err(ApiError {
            status: StatusCode::CONFLICT,
            message: format!("job `{id}`: {e}"),
        }),
        Err(e @ SavepointError::Failed(_)) => Err(ApiError::internal(format!("job `{id}`: {e}"))),
    })
    .await
}

/// The flows of this process.
#[utoipa::path(
    get,
    path = "/api/v1/flows",
    tag = "flows",
    responses((status = 200, description = "Every registered flow", body = [FlowSummary]))
)]
pub(crate) async fn list_flows(State(registry): State<Registry>) -> Json<Vec<FlowSummary>> {
    Json(
        registry
            .flows()
            .iter()
            .map(|(id, f)| views::flow_summary(id, f))
            .collect(),
    )
}

/// A flow's processors, connections and groups.
#[utoipa::path(
    get,
    path = "/api/v1/flows/{id}",
    tag = "flows",
    params(("id" = String, Path, description = "The flow's id")),
    responses(
        (status = 200, description = "The flow", body = FlowDetail),
        (status = 404, description = "No such flow", body = ErrorBody),
    )
)]
pub(crate) async fn get_flow(
    State(registry): State<Registry>,
    Path(id): Path<String>,
) -> Result<Json<FlowDetail>, ApiError> {
    let flow = find_flow(&registry, &id)?;
    Ok(Json(views::flow_detail(&registry, &id, &flow)))
}

fn set_running(
    registry: &Registry,
    id: &str,
    pid: &str,
    run: bool,
) -> Result<Json<Processor>, ApiError> {
    let flow = find_flow(registry, id)?;
    match flow.set_running(pid, run) {
        Ok(view) => {
            let rates = registry.processor_rates(id).remove(&view.name);
            Ok(Json(views::processor(&view, &rates.unwrap_or_default())))
        }
        Err(e @ ControlError::UnknownProcessor { .. }) => Err(ApiError::not_found(e.to_string())),
        Err(e @ ControlError::Disabled { .. }) => Err(ApiError {
            status: StatusCode::CONFLICT,
            message: e.to_string(),
        }),
    }
}

/// Starts a processor.
#[utoipa::path(
    post,
    path = "/api/v1/flows/{id}/processors/{pid}/start",
    tag = "flows",
    params(
        ("id" = String, Path, description = "The flow's id"),
        ("pid" = String, Path, description = "The processor's id (its name, URL-encoded)"),
    ),
    responses(
        (status = 200, description = "The processor, now running", body = Processor),
        (status = 404, description = "No such flow or processor", body = ErrorBody),
        (status = 409, description = "A member of a stateless group: it runs with its group", body = ErrorBody),
    )
)]
pub(crate) async fn start_processor(
    State(registry): State<Registry>,
    Path((id, pid)): Path<(String, String)>,
) -> Result<Json<Processor>, ApiError> {
    set_running(&registry, &id, &pid, true)
}

/// Stops a processor: it is no longer triggered, and its input queues fill up.
#[utoipa::path(
    post,
    path = "/api/v1/flows/{id}/processors/{pid}/stop",
    tag = "flows",
    params(
        ("id" = String, Path, description = "The flow's id"),
        ("pid" = String, Path, description = "The processor's id (its name, URL-encoded)"),
    ),
    responses(
        (status = 200, description = "The processor, now stopped", body = Processor),
        (status = 404, description = "No such flow or processor", body = ErrorBody),
        (status = 409, description = "A member of a stateless group: it runs with its group", body = ErrorBody),
    )
)]
pub(crate) async fn stop_processor(
    State(registry): State<Registry>,
    Path((id, pid)): Path<(String, String)>,
) -> Result<Json<Processor>, ApiError> {
    set_running(&registry, &id, &pid, false)
}

/// Searches a flow's provenance events, newest first unless `order=oldest`.
#[utoipa::path(
    get,
    path = "/api/v1/flows/{id}/provenance",
    tag = "flows",
    params(("id" = String, Path, description = "The flow's id"), ProvenanceQuery),
    responses(
        (status = 200, description = "The matching events, newest first unless `order=oldest`", body = [ProvenanceEvent]),
        (status = 400, description = "A bad filter (an unknown event type, a time that is not a number)", body = ErrorBody),
        (status = 404, description = "No such flow", body = ErrorBody),
    )
)]
pub(crate) async fn search_provenance(
    State(registry): State<Registry>,
    Path(id): Path<String>,
    query: Result<Query<ProvenanceQuery>, QueryRejection>,
) -> Result<Json<Vec<ProvenanceEvent>>, ApiError> {
    let Query(q) = query?;
    let flow = find_flow(&registry, &id)?;
    let event_type = q
        .event_type
        .as_deref()
        .map(|t| {
            EventType::parse(t).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "type: unknown provenance event type `{t}` (CREATE, RECEIVE, FETCH, SEND, DROP, EXPIRE, ROUTE, ATTRIBUTES_MODIFIED, CONTENT_MODIFIED, CLONE, FORK, JOIN, REMOTE_INVOCATION)"
                ))
            })
        })
        .transpose()?;
    let newest_first = match q.order.as_deref() {
        None | Some("newest") => true,
        Some("oldest") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "order: `{other}` is not an order (newest or oldest)"
            )));
        }
    };
    let time = |t: Option<u64>| t.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
    let filter = ProvenanceFilter {
        flowfile: q.flowfile,
        component: q.component,
        since_ms: time(q.since_ms),
        until_ms: time(q.until_ms),
        event_type,
        newest_first,
    };
    let limit = q
        .limit
        .unwrap_or(DEFAULT_PROVENANCE_LIMIT)
        .min(MAX_PROVENANCE_LIMIT) as usize;
    let events = blocking(move || {
        flow.provenance(&filter, limit)
            .map_err(|e| ApiError::internal(e.to_string()))
    })
    .await?;
    Ok(Json(events.iter().map(views::provenance_event).collect()))
}

/// A flow file's lineage as a graph, within `depth` hops and `max_nodes` flow files.
#[utoipa::path(
    get,
    path = "/api/v1/flows/{id}/flowfiles/{ffid}/lineage",
    tag = "flows",
    params(
        ("id" = String, Path, description = "The flow's id"),
        ("ffid" = String, Path, description = "The flow file's uuid"),
        LineageQuery,
    ),
    responses(
        (status = 200, description = "Its ancestors, descendants and their events within the limits, and how many more each flow file has beyond them", body = Lineage),
        (status = 400, description = "A bad limit (not a number, out of range) or an unknown parameter", body = ErrorBody),
        (status = 404, description = "No such flow, or provenance knows no such flow file", body = ErrorBody),
    )
)]
pub(crate) async fn get_lineage(
    State(registry): State<Registry>,
    Path((id, ffid)): Path<(String, String)>,
    query: Result<Query<LineageQuery>, QueryRejection>,
) -> Result<Json<Lineage>, ApiError> {
    let Query(q) = query?;
    let limits = lineage_limits(&q)?;
    let flow = find_flow(&registry, &id)?;
    let lineage = blocking(move || {
        let lineage = flow
            .lineage(&ffid, limits)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        if lineage.events.is_empty() {
            return Err(ApiError::not_found(format!(
                "provenance of flow `{id}` knows no flow file `{ffid}`"
            )));
        }
        Ok(lineage)
    })
    .await?;
    Ok(Json(views::lineage_graph(&lineage, limits)))
}

/// The limits a lineage request asks for, the defaults for those it leaves out.
fn lineage_limits(q: &LineageQuery) -> Result<LineageLimits, ApiError> {
    let depth = q.depth.unwrap_or(LineageLimits::DEFAULT_DEPTH);
    if depth > MAX_LINEAGE_DEPTH {
        return Err(ApiError::bad_request(format!(
            "depth: {depth} is more than {MAX_LINEAGE_DEPTH}"
        )));
    }
    let max_nodes = q
        .max_nodes
        .unwrap_or(LineageLimits::DEFAULT_MAX_FLOWFILES as u32);
    if !(1..=MAX_LINEAGE_NODES).contains(&max_nodes) {
        return Err(ApiError::bad_request(format!(
            "max_nodes: {max_nodes} is not between 1 and {MAX_LINEAGE_NODES}"
        )));
    }
    Ok(LineageLimits {
        depth,
        max_flowfiles: max_nodes as usize,
    })
}

/// The content of a flow file still queued in the flow.
#[utoipa::path(
    get,
    path = "/api/v1/flows/{id}/flowfiles/{ffid}/content",
    tag = "flows",
    params(
        ("id" = String, Path, description = "The flow's id"),
        ("ffid" = String, Path, description = "The flow file's uuid"),
    ),
    responses(
        (status = 200, description = "The content's bytes", body = Content, content_type = "application/octet-stream"),
        (status = 404, description = "No such flow, or the flow file is no longer queued (its content may be gone)", body = ErrorBody),
    )
)]
pub(crate) async fn get_content(
    State(registry): State<Registry>,
    Path((id, ffid)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let flow = find_flow(&registry, &id)?;
    let ffid_name = ffid.clone();
    let bytes = blocking(move || {
        flow.content(&ffid)
            .map_err(|e| ApiError::internal(format!("reading flow file `{ffid}`: {e}")))?
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "flow file `{ffid}` is not queued in flow `{id}`: its content is no longer in the repository"
                ))
            })
    })
    .await?;
    // A download, never a page: flow-file content must not run in the dashboard's origin.
    let disposition = format!("attachment; filename=\"{}\"", ffid_for_header(&ffid_name));
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        bytes,
    )
        .into_response())
}

/// A flow file id as a file name in a header: only the characters a uuid has.
fn ffid_for_header(ffid: &str) -> String {
    ffid.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(64)
        .collect()
}

/// This document.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "server",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json"))
)]
pub(crate) async fn openapi_json() -> Response {
    let doc = ApiDoc::openapi();
    match doc.to_json() {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// Server-sent events: every second, `event: jobs` with the job list and `event: flows` with
/// the flow list (the bodies of `GET /api/v1/jobs` and `GET /api/v1/flows`).
#[utoipa::path(
    get,
    path = "/api/v1/events",
    tag = "server",
    responses((status = 200, description = "A stream of `jobs` and `flows` events, one of each per second", content_type = "text/event-stream"))
)]
pub(crate) async fn events(
    State(registry): State<Registry>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    use futures::StreamExt;
    let ticks = futures::stream::unfold(None::<tokio::time::Interval>, |interval| async {
        let mut interval = interval.unwrap_or_else(|| {
            let mut i = tokio::time::interval(EVENT_INTERVAL);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        interval.tick().await;
        Some(((), Some(interval)))
    });
    let stream = ticks.flat_map(move |()| {
        let jobs: Vec<JobSummary> = registry.jobs().iter().map(views::job_summary).collect();
        let flows: Vec<FlowSummary> = registry
            .flows()
            .iter()
            .map(|(id, f)| views::flow_summary(id, f))
            .collect();
        let events: Vec<Result<Event, Infallible>> = [
            Event::default().event("jobs").json_data(jobs),
            Event::default().event("flows").json_data(flows),
        ]
        .into_iter()
        // Serializing plain lists does not fail; a failure would only skip one event.
        .filter_map(Result::ok)
        .map(Ok)
        .collect();
        futures::stream::iter(events)
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// `/metrics`: the Prometheus exposition.
pub(crate) async fn metrics(State(registry): State<Registry>) -> Result<Response, ApiError> {
    let text = prometheus::encode(&registry).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, prometheus::CONTENT_TYPE)], text).into_response())
}

/// Everything else: an embedded file, the dashboard's page for its routes, or a 404.
pub(crate) async fn static_files(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let asset = assets::asset(path).or_else(|| assets::is_page(path).then(assets::index));
    match asset {
        Some(a) => ([(header::CONTENT_TYPE, a.content_type)], a.bytes).into_response(),
        None => ApiError::not_found(format!("nothing at `/{path}`")).into_response(),
    }
}
