//! The observability server over real HTTP: every endpoint, answers checked against the
//! OpenAPI document with a JSON Schema validator, the token check, 404s, server-sent events,
//! a Prometheus scrape whose counters grow, and a windowed stream job's window latency in
//! the scrape and its JSON.
//!
//! The flow is `examples/flows/lines.yaml` with its directories moved into a temporary one.
//! Nothing waits by sleeping: every wait polls with a deadline.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};
use weir_test_support::wait_for_async;

use reqwest::StatusCode;
use serde_json::Value;
use weir::core::builtin_processors::CountSink;
use weir::core::{
    Dag, Edge, Executor, ExecutorConfig, Job, JobConfig, Outbox, Processor, ProcessorResult, Vertex,
};
use weir_flow::definition::Flow;
use weir_flow::engine::Engine;
use weir_observe::{Registry, Server, ServerConfig};

const TIMEOUT: Duration = Duration::from_secs(20);

/// Emits up to 100 numbers per millisecond, forever: a job that keeps running without
/// taking a core.
struct Paced {
    next: u64,
    last: Option<Instant>,
}

impl Processor for Paced {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_millis(1))
        {
            return Ok(false);
        }
        self.last = Some(Instant::now());
        let port = outbox.port::<u64>(0);
        for _ in 0..100 {
            if port.offer(self.next).is_err() {
                break;
            }
            self.next += 1;
        }
        Ok(false)
    }
}

/// A running job: a paced source, a doubling map at parallelism 2, a counting sink.
fn paced_job(executor: &Executor) -> (Job, Arc<AtomicU64>) {
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("numbers", |_| Paced {
            next: 0,
            last: None,
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let double = dag.vertex(
        Vertex::new("double", |_| {
            weir::core::builtin_processors::MapP::new(|x: u64| x * 2)
        })
        .accepts::<u64>()
        .emits::<u64>()
        .local_parallelism(2),
    );
    let (supplier, count) = CountSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("count", supplier)
            .accepts::<u64>()
            .local_parallelism(1),
    );
    dag.edge(Edge::between(source, double));
    dag.edge(Edge::between(double, sink).all_to_one());
    let config = JobConfig::default().with_name("paced");
    (executor.submit(dag, config).unwrap(), count)
}

/// `examples/flows/lines.yaml`, reading from `dir/in` and writing under `dir/out`.
fn lines_flow(dir: &Path) -> Flow {
    let yaml = include_str!("../../../examples/flows/lines.yaml")
        .replace("target/flow-in", &dir.join("in").display().to_string())
        .replace("target/flow-out", &dir.join("out").display().to_string())
        .replace("sync: always", "sync: none");
    std::fs::create_dir_all(dir.join("in")).unwrap();
    Flow::parse(&yaml, "lines.yaml").unwrap()
}

/// Checks JSON bodies against the schemas of the served OpenAPI document.
struct Schemas {
    doc: Value,
}

impl Schemas {
    /// The schema of the JSON answer of `method path` with `status`, its references
    /// resolvable against the document's components.
    fn validator(&self, method: &str, path: &str, status: u16) -> jsonschema::Validator {
        let response = &self.doc["paths"][path][method]["responses"][status.to_string()];
        let schema = response["content"]["application/json"]["schema"].clone();
        assert!(
            schema.is_object(),
            "the document describes no JSON answer for {method} {path} {status}"
        );
        let mut root = schema;
        root["components"] = self.doc["components"].clone();
        jsonschema::validator_for(&root).unwrap()
    }

    /// What in `body` does not match, one line per error.
    fn errors(&self, method: &str, path: &str, status: u16, body: &Value) -> Vec<String> {
        let validator = self.validator(method, path, status);
        validator
            .iter_errors(body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    /// Panics, naming the errors, unless `body` matches.
    fn check(&self, method: &str, path: &str, status: u16, body: &Value) {
        let errors = self.errors(method, path, status, body);
        assert!(
            errors.is_empty(),
            "{method} {path} {status}: the answer does not match the document: {errors:?}\n{body:#}"
        );
    }
}

/// A client of one server.
struct Client {
    http: reqwest::Client,
    base: String,
    schemas: Schemas,
}

impl Client {
    async fn new(server: &Server) -> Client {
        let http = reqwest::Client::new();
        let base = server.url().trim_end_matches('/').to_string();
        let doc: Value = http
            .get(format!("{base}/api/v1/openapi.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        Client {
            http,
            base,
            schemas: Schemas { doc },
        }
    }

    /// `method url`, its status and JSON body checked against the document's `template`.
    async fn json(&self, method: &str, url: &str, template: &str, expected: StatusCode) -> Value {
        let request = match method {
            "post" => self.http.post(format!("{}{url}", self.base)),
            _ => self.http.get(format!("{}{url}", self.base)),
        };
        let response = request.send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, expected, "{method} {url}: {body}");
        self.schemas.check(method, template, status.as_u16(), &body);
        body
    }
}

#[test]
fn every_endpoint_answers_as_its_document_says() {
    let runtime = weir::async_io::runtime().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (engine, client, _server) = runtime.block_on(every_endpoint(dir.path()));
    // Stopping waits for the flow's tasks: outside the async block.
    engine.stop().unwrap();
    runtime.block_on(async {
        let flows = client
            .json("get", "/api/v1/flows", "/api/v1/flows", StatusCode::OK)
            .await;
        assert_eq!(flows[0]["status"], "stopped");
    });
}

async fn every_endpoint(dir: &Path) -> (Engine, Client, Server) {
    let registry = Registry::new();
    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let server = Server::start(&config, registry.clone()).unwrap();
    assert!(server.local_addr().ip().is_loopback());
    let c = Client::new(&server).await;

    // --- Jobs -------------------------------------------------------------------------
    let executor = Executor::new(ExecutorConfig {
        workers: 2,
        ..Default::default()
    })
    .unwrap();
    let (job, count) = paced_job(&executor);
    registry.add_job(job.monitor());
    let id = job.id().to_string();
    let list = c
        .json("get", "/api/v1/jobs", "/api/v1/jobs", StatusCode::OK)
        .await;
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["name"], "paced");
    assert_eq!(list[0]["status"], "running");

    // Rates come from the sampler's once-a-second samples: wait for a non-zero one.
    let url = format!("/api/v1/jobs/{id}");
    let mut detail = Value::Null;
    assert!(
        wait_for_async(TIMEOUT, async || {
            detail = c
                .json("get", &url, "/api/v1/jobs/{id}", StatusCode::OK)
                .await;
            detail["vertices"][0]["rate_1s"].as_f64().unwrap() > 0.0
        })
        .await,
        "the source's rate stays zero: {detail:#}"
    );
    let names: Vec<&str> = detail["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["numbers", "double", "count"]);
    assert_eq!(detail["vertices"][1]["parallelism"], 2);
    assert_eq!(detail["vertices"][0]["queue_fill"], Value::Array(vec![]));
    let sink_fill = &detail["vertices"][2]["queue_fill"][0];
    // Two conveyors (one per `double` instance) of 1024 items into the sink.
    assert_eq!(sink_fill["capacity"], 2048);
    assert!(
        !detail["vertices"][0]["history"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(detail["vertices"][1]["items_in"].as_u64().unwrap() > 0);
    assert_eq!(detail["edges"][0]["kind"], "unicast");
    assert_eq!(detail["edges"][1]["kind"], "all-to-one");
    assert_eq!(
        (
            detail["edges"][1]["from"].as_str(),
            detail["edges"][1]["to"].as_str()
        ),
        (Some("double"), Some("count"))
    );
    assert!(detail["last_snapshot"].is_null());
    // No watermarks, so no window latency: every bucket empty, no quantile.
    let latency = &detail["window_latency"];
    assert_eq!(latency["count"], 0, "{latency}");
    assert!(
        latency["p50"].is_null() && latency["p999"].is_null(),
        "{latency}"
    );
    let buckets = latency["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), weir::core::LATENCY_BUCKETS.len() + 1);
    assert_eq!(buckets[0]["upper_bound"], 0.0005);
    assert_eq!(buckets[16]["upper_bound"], "+Inf");

    // Unknown jobs are 404s with an error body.
    let missing = c
        .json(
            "get",
            "/api/v1/jobs/999999",
            "/api/v1/jobs/{id}",
            StatusCode::NOT_FOUND,
        )
        .await;
    assert!(missing["error"].as_str().unwrap().contains("999999"));
    c.json(
        "get",
        "/api/v1/jobs/not-a-number",
        "/api/v1/jobs/{id}",
        StatusCode::NOT_FOUND,
    )
    .await;
    c.json(
        "post",
        "/api/v1/jobs/999999/cancel",
        "/api/v1/jobs/{id}/cancel",
        StatusCode::NOT_FOUND,
    )
    .await;

    // --- Prometheus: the running job's counters grow between two scrapes ---------------
    let scrape = async || -> prometheus_parse::Scrape {
        let text = c
            .http
            .get(format!("{}/metrics", c.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("the exposition parses")
    };
    let items_out = |scrape: &prometheus_parse::Scrape| -> f64 {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == "weir_vertex_items_out_total"
                    && s.labels.get("vertex") == Some("numbers")
                    && s.labels.get("job") == Some("paced")
                    && s.labels.get("instance") == Some("0")
            })
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                ref other => panic!("items out is {other:?}"),
            })
            .expect("the source's items_out series")
    };
    let first = scrape().await;
    let before = items_out(&first);
    assert!(
        wait_for_async(TIMEOUT, async || items_out(&scrape().await) > before).await,
        "the counter did not grow past {before}"
    );
    for family in [
        "weir_vertex_items_in_total",
        "weir_vertex_busy_seconds_total",
        "weir_vertex_backpressured_seconds_total",
        "weir_vertex_queued_items",
        "weir_job_running",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ] {
        assert!(
            first.samples.iter().any(|s| s.metric == family),
            "no {family} in the scrape"
        );
    }
    let allowed = ["job", "vertex", "instance", "processor", "connection"];
    for s in &first.samples {
        for (label, _) in s.labels.iter() {
            assert!(
                allowed.contains(&label.as_str()),
                "label {label} on {}",
                s.metric
            );
        }
    }

    // --- Cancel ----------------------------------------------------------------------
    let accepted = c
        .json(
            "post",
            &format!("/api/v1/jobs/{id}/cancel"),
            "/api/v1/jobs/{id}/cancel",
            StatusCode::ACCEPTED,
        )
        .await;
    assert_eq!(accepted["status"], "cancelling");
    assert!(job.wait_timeout(TIMEOUT));
    assert!(job.join().is_err());
    assert!(count.load(std::sync::atomic::Ordering::Relaxed) > 0);
    let list = c
        .json("get", "/api/v1/jobs", "/api/v1/jobs", StatusCode::OK)
        .await;
    assert_eq!(list[0]["status"], "cancelled");
    c.json(
        "post",
        &format!("/api/v1/jobs/{id}/cancel"),
        "/api/v1/jobs/{id}/cancel",
        StatusCode::CONFLICT,
    )
    .await;

    // --- Flows -----------------------------------------------------------------------
    let engine = Engine::start(lines_flow(dir), &dir.join("repo")).unwrap();
    let flow_id = registry.add_flow(engine.monitor());
    // A sample before any input (as the server's sampler takes each second), so that the
    // rates below have the flow's start to count from.
    registry.sample(Instant::now());
    let flows = c
        .json("get", "/api/v1/flows", "/api/v1/flows", StatusCode::OK)
        .await;
    assert_eq!(flows[0]["id"], flow_id);
    assert_eq!(flows[0]["name"], "lines");
    assert_eq!(flows[0]["status"], "running");
    let base = format!("/api/v1/flows/{flow_id}");
    c.json(
        "get",
        "/api/v1/flows/nope",
        "/api/v1/flows/{id}",
        StatusCode::NOT_FOUND,
    )
    .await;

    // Stop write-odd, then feed five lines: the odd ones wait in its queue.
    let stopped = c
        .json(
            "post",
            &format!("{base}/processors/write-odd/stop"),
            "/api/v1/flows/{id}/processors/{pid}/stop",
            StatusCode::OK,
        )
        .await;
    assert_eq!(stopped["state"], "stopped");
    assert_eq!(stopped["type"], "PutFile");
    c.json(
        "post",
        &format!("{base}/processors/nope/stop"),
        "/api/v1/flows/{id}/processors/{pid}/stop",
        StatusCode::NOT_FOUND,
    )
    .await;
    let staged = dir.join("lines.txt.part");
    std::fs::write(&staged, "one\ntwo\nthree\nfour\nfive\n").unwrap();
    std::fs::rename(&staged, dir.join("in/lines.txt")).unwrap();
    let mut detail = Value::Null;
    assert!(
        wait_for_async(TIMEOUT, async || {
            detail = c
                .json("get", &base, "/api/v1/flows/{id}", StatusCode::OK)
                .await;
            let queue = detail["connections"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["destination"] == "write-odd")
                .unwrap();
            let even = detail["processors"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "write-even")
                .unwrap();
            queue["queued_count"] == 3 && even["flowfiles_in"] == 2
        })
        .await,
        "three odd lines never queued up: {detail:#}"
    );
    let odd_queue = detail["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["destination"] == "write-odd")
        .unwrap()
        .clone();
    assert_eq!(odd_queue["source"], "route");
    assert_eq!(odd_queue["relationships"], serde_json::json!(["unmatched"]));
    assert_eq!(odd_queue["object_threshold"], 10_000);
    assert_eq!(odd_queue["back_pressure"], false);
    assert_eq!(
        odd_queue["queued_bytes"],
        "one".len() + "three".len() + "five".len()
    );
    assert_eq!(detail["groups"][0]["engine"], "traditional");
    let read = &detail["processors"][0];
    assert_eq!(
        (read["name"].as_str(), read["type"].as_str()),
        (Some("read"), Some("GetFile"))
    );
    assert!(read["bytes_out"].as_u64().unwrap() > 0);
    // The server's sampler gives each processor its rates: tag took in five lines within the
    // last minute (the 1 s rate is the sampler's last second, see the test driving its clock).
    assert!(
        wait_for_async(TIMEOUT, async || {
            let detail = c
                .json("get", &base, "/api/v1/flows/{id}", StatusCode::OK)
                .await;
            let tag = detail["processors"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "tag")
                .unwrap()
                .clone();
            tag["flowfiles_in_rate_60s"].as_f64().unwrap() > 0.0
                && tag["bytes_in_rate_60s"].as_f64().unwrap() > 0.0
        })
        .await,
        "tag's rates never showed its five lines"
    );

    // Provenance: the lines routed to `unmatched`, oldest first.
    let events = c
        .json(
            "get",
            &format!("{base}/provenance?component=route&type=ROUTE&limit=10&order=oldest"),
            "/api/v1/flows/{id}/provenance",
            StatusCode::OK,
        )
        .await;
    let odd: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["details"] == "unmatched")
        .collect();
    assert_eq!(odd.len(), 3, "{events:#}");
    let uuid = odd[0]["flowfile"].as_str().unwrap().to_string();
    let none = c
        .json(
            "get",
            &format!("{base}/provenance?until_ms=1"),
            "/api/v1/flows/{id}/provenance",
            StatusCode::OK,
        )
        .await;
    assert_eq!(none, Value::Array(vec![]));
    let by_file = c
        .json(
            "get",
            &format!("{base}/provenance?flowfile={uuid}"),
            "/api/v1/flows/{id}/provenance",
            StatusCode::OK,
        )
        .await;
    assert!(
        by_file
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "FORK")
    );
    // Newest first by default, as NiFi's list; `order=oldest` reverses it.
    let event_ids = |events: &Value| -> Vec<u64> {
        events
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_u64().unwrap())
            .collect()
    };
    let mut newest = Vec::new();
    for order in ["", "&order=newest", "&order=oldest"] {
        let got = event_ids(
            &c.json(
                "get",
                &format!("{base}/provenance?component=route{order}"),
                "/api/v1/flows/{id}/provenance",
                StatusCode::OK,
            )
            .await,
        );
        assert!(got.len() >= 2, "{got:?}");
        let mut sorted = got.clone();
        sorted.sort_unstable();
        if order == "&order=oldest" {
            assert_eq!(got, sorted, "oldest first");
            sorted.reverse();
            assert_eq!(sorted, newest, "the same events either way");
        } else {
            sorted.reverse();
            assert_eq!(got, sorted, "newest first by default ({order:?})");
            newest = got;
        }
    }
    for bad in ["type=NOPE", "since_ms=yesterday", "order=sideways"] {
        c.json(
            "get",
            &format!("{base}/provenance?{bad}"),
            "/api/v1/flows/{id}/provenance",
            StatusCode::BAD_REQUEST,
        )
        .await;
    }
    // A misspelt filter is refused, naming it, instead of being ignored.
    let body = c
        .json(
            "get",
            &format!("{base}/provenance?compnent=route"),
            "/api/v1/flows/{id}/provenance",
            StatusCode::BAD_REQUEST,
        )
        .await;
    assert!(
        body["error"].as_str().unwrap().contains("compnent"),
        "{body}"
    );

    // Lineage: the line, its parent file and the FORK between them.
    let lineage = c
        .json(
            "get",
            &format!("{base}/flowfiles/{uuid}/lineage"),
            "/api/v1/flows/{id}/flowfiles/{ffid}/lineage",
            StatusCode::OK,
        )
        .await;
    let nodes = lineage["nodes"].as_array().unwrap();
    assert!(
        nodes
            .iter()
            .any(|n| n["id"] == uuid.as_str() && n["kind"] == "flowfile")
    );
    let fork = nodes
        .iter()
        .find(|n| n["kind"] == "event" && n["label"].as_str().unwrap().starts_with("FORK"))
        .expect("a FORK event node");
    assert!(
        lineage["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["from"] == fork["id"] && l["to"] == uuid.as_str()),
        "the FORK links to the line: {lineage:#}"
    );
    // Within the default limits the line's lineage is whole: the file and its five lines.
    assert_eq!(lineage["truncated"], false, "{lineage:#}");
    assert_eq!(lineage["omitted"], 0);
    assert_eq!(lineage["flowfile"], uuid.as_str());
    assert_eq!(lineage["depth"], 3);
    assert_eq!(lineage["max_nodes"], 200);
    let flowfile_nodes = |lineage: &Value| -> Vec<Value> {
        lineage["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "flowfile")
            .cloned()
            .collect()
    };
    assert_eq!(flowfile_nodes(&lineage).len(), 6, "{lineage:#}");
    assert!(
        nodes
            .iter()
            .all(|n| n["more_parents"] == 0 && n["more_children"] == 0)
    );
    // Depth 0: the line alone, its parent counted, not shown; depth 1 adds the parent, whose
    // four other lines are counted; a limit of 2 flow files cuts the same way.
    let lineage_with = async |query: &str| {
        c.json(
            "get",
            &format!("{base}/flowfiles/{uuid}/lineage?{query}"),
            "/api/v1/flows/{id}/flowfiles/{ffid}/lineage",
            StatusCode::OK,
        )
        .await
    };
    let alone = lineage_with("depth=0").await;
    assert_eq!(alone["truncated"], true);
    assert_eq!(alone["omitted"], 1);
    let shown = flowfile_nodes(&alone);
    assert_eq!(shown.len(), 1);
    assert_eq!(
        (
            shown[0]["id"].as_str(),
            &shown[0]["more_parents"],
            &shown[0]["more_children"]
        ),
        (Some(uuid.as_str()), &Value::from(1), &Value::from(0))
    );
    for query in ["depth=1", "max_nodes=2", "depth=1&max_nodes=2"] {
        let near = lineage_with(query).await;
        assert_eq!(near["truncated"], true, "{query}");
        assert_eq!(near["omitted"], 4, "{query}");
        let shown = flowfile_nodes(&near);
        assert_eq!(shown.len(), 2, "{query}");
        assert_eq!(
            shown[1]["more_children"], 4,
            "the file's other lines ({query})"
        );
    }
    let all = lineage_with("depth=100&max_nodes=10000").await;
    assert_eq!(flowfile_nodes(&all).len(), 6);
    // Bad limits and unknown parameters are refused, naming them.
    for (query, names) in [
        ("depth=deep", "depth"),
        ("depth=-1", "depth"),
        ("depth=101", "depth"),
        ("max_nodes=0", "max_nodes"),
        ("max_nodes=10001", "max_nodes"),
        ("max_nodes=lots", "max_nodes"),
        ("deph=1", "deph"),
        ("limit=5", "limit"),
    ] {
        let body = c
            .json(
                "get",
                &format!("{base}/flowfiles/{uuid}/lineage?{query}"),
                "/api/v1/flows/{id}/flowfiles/{ffid}/lineage",
                StatusCode::BAD_REQUEST,
            )
            .await;
        assert!(
            body["error"].as_str().unwrap().contains(names),
            "{query}: {body}"
        );
    }
    c.json(
        "get",
        &format!("{base}/flowfiles/no-such-uuid/lineage"),
        "/api/v1/flows/{id}/flowfiles/{ffid}/lineage",
        StatusCode::NOT_FOUND,
    )
    .await;

    // Content of a queued line, as bytes.
    let content = c
        .http
        .get(format!("{}{base}/flowfiles/{uuid}/content", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(content.status(), StatusCode::OK);
    assert_eq!(
        content.headers()["content-type"],
        "application/octet-stream"
    );
    // A download, never a page in the dashboard's origin.
    let disposition = content.headers()["content-disposition"].to_str().unwrap();
    assert_eq!(disposition, format!("attachment; filename=\"{uuid}\""));
    assert_eq!(content.headers()["x-content-type-options"], "nosniff");
    assert_eq!(content.bytes().await.unwrap(), "one".as_bytes());
    c.json(
        "get",
        &format!("{base}/flowfiles/no-such-uuid/content"),
        "/api/v1/flows/{id}/flowfiles/{ffid}/content",
        StatusCode::NOT_FOUND,
    )
    .await;

    // Started again, write-odd drains its queue; the line's content is gone with it.
    let started = c
        .json(
            "post",
            &format!("{base}/processors/write-odd/start"),
            "/api/v1/flows/{id}/processors/{pid}/start",
            StatusCode::OK,
        )
        .await;
    assert_eq!(started["state"], "running");
    assert!(
        wait_for_async(TIMEOUT, async || {
            let detail = c
                .json("get", &base, "/api/v1/flows/{id}", StatusCode::OK)
                .await;
            detail["processors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "write-odd" && p["flowfiles_in"] == 3)
        })
        .await
    );
    c.json(
        "get",
        &format!("{base}/flowfiles/{uuid}/content"),
        "/api/v1/flows/{id}/flowfiles/{ffid}/content",
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(
            dir.join("out/odd")
                .read_dir()
                .unwrap()
                .map(|e| e.unwrap().path())
                .min()
                .unwrap()
        )
        .unwrap(),
        "one"
    );

    // The flow's metrics are in the scrape, by processor and connection.
    let flow_scrape = scrape().await;
    assert!(flow_scrape.samples.iter().any(|s| {
        s.metric == "weir_flow_processor_flowfiles_in_total"
            && s.labels.get("processor") == Some("write-odd")
            && s.labels.get("job") == Some("lines")
    }));
    assert!(flow_scrape.samples.iter().any(|s| {
        s.metric == "weir_flow_connection_queued_flowfiles" && s.labels.get("connection").is_some()
    }));

    // --- Server-sent events: a jobs and a flows event, each a valid list ---------------
    let mut stream = c
        .http
        .get(format!("{}/api/v1/events", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let mut text = String::new();
    let deadline = Instant::now() + TIMEOUT;
    while !(text.contains("event: jobs") && text.contains("event: flows")) {
        assert!(Instant::now() < deadline, "no events: {text}");
        let chunk = tokio::time::timeout(TIMEOUT, stream.chunk())
            .await
            .expect("an event within the timeout")
            .unwrap()
            .expect("the stream stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(stream);
    for (event, list_path) in [("jobs", "/api/v1/jobs"), ("flows", "/api/v1/flows")] {
        let block = text
            .split("\n\n")
            .find(|b| b.contains(&format!("event: {event}")))
            .unwrap();
        let data = block
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .expect("a data line");
        let body: Value = serde_json::from_str(data).unwrap();
        c.schemas.check("get", list_path, 200, &body);
    }

    // --- The document itself, the dashboard's pages and unknown paths -------------------
    let doc = &c.schemas.doc;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for path in [
        "/api/v1/jobs",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{id}/cancel",
        "/api/v1/flows",
        "/api/v1/flows/{id}",
        "/api/v1/flows/{id}/processors/{pid}/start",
        "/api/v1/flows/{id}/processors/{pid}/stop",
        "/api/v1/flows/{id}/provenance",
        "/api/v1/flows/{id}/flowfiles/{ffid}/lineage",
        "/api/v1/flows/{id}/flowfiles/{ffid}/content",
        "/api/v1/openapi.json",
        "/api/v1/events",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is not documented");
    }
    for page in ["/", "/jobs/1", "/flows/1", "/flows/1/provenance"] {
        let response = c
            .http
            .get(format!("{}{page}", c.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{page}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        assert!(response.text().await.unwrap().contains("<html"));
    }
    let response = c
        .http
        .get(format!("{}/no/such/thing", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].is_string());

    (engine, c, server)
}

#[test]
fn a_windowed_stream_jobs_latency_is_in_the_scrape_and_its_json() {
    use weir::prelude::*;
    let runtime = weir::async_io::runtime().unwrap();
    let registry = Registry::new();
    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let server = Server::start(&config, registry.clone()).unwrap();

    // 20,000 events over about a second, 1 ms of event time apart, counted per key in
    // tumbling windows of 100 ms: 200 windows of each of 4 keys close on the way.
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::generator(20_000, Some(20_000), |n| n))
        .with_timestamps(|n: &u64| *n as i64, 0)
        .grouping_key(|n: &u64| n % 4)
        .window(WindowDefinition::tumbling(100))
        .aggregate(aggregate::counting())
        .write_to(sink);
    let executor = Executor::new(ExecutorConfig {
        workers: 2,
        ..Default::default()
    })
    .unwrap();
    let job = p
        .submit(&executor, JobConfig::default().with_name("windows"))
        .unwrap();
    registry.add_job(job.monitor());
    let id = job.id().to_string();
    job.join().unwrap();
    assert_eq!(out.take().len(), 800);

    runtime.block_on(async {
        let c = Client::new(&server).await;
        let text = c
            .http
            .get(format!("{}/metrics", c.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("the exposition parses");
        let windows = |metric: &str| {
            scrape
                .samples
                .iter()
                .find(|s| s.metric == metric && s.labels.get("job") == Some("windows"))
                .unwrap_or_else(|| panic!("no {metric} of the job:\n{text}"))
        };
        let count = match windows("weir_window_latency_seconds_count").value {
            prometheus_parse::Value::Untyped(v) | prometheus_parse::Value::Counter(v) => v,
            ref other => panic!("the count is {other:?}"),
        };
        assert!(count > 0.0, "{text}");
        let prometheus_parse::Value::Histogram(buckets) =
            &windows("weir_window_latency_seconds").value
        else {
            panic!("not a histogram:\n{text}");
        };
        assert_eq!(buckets.last().map(|b| b.count), Some(count), "{text}");

        // The job ended: its JSON has the same histogram, quantiles as bucket bounds.
        let url = format!("/api/v1/jobs/{id}");
        let detail = c
            .json("get", &url, "/api/v1/jobs/{id}", StatusCode::OK)
            .await;
        let latency = &detail["window_latency"];
        assert_eq!(latency["count"].as_f64(), Some(count), "{latency}");
        for q in ["p50", "p99", "p999"] {
            assert!(
                latency[q].is_number() || latency[q] == "+Inf",
                "{q}: {latency}"
            );
        }
        let in_buckets: u64 = latency["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(in_buckets as f64, count, "{latency}");
    });
}

#[test]
fn with_a_token_every_request_needs_it() {
    weir::async_io::runtime().unwrap().block_on(async {
        let registry = Registry::new();
        let config =
            ServerConfig::new("127.0.0.1:0".parse().unwrap(), Some("s3cret".into())).unwrap();
        let server = Server::start(&config, registry).unwrap();
        let base = server.url();
        let http = reqwest::Client::new();
        for path in [
            "api/v1/jobs",
            "metrics",
            "api/v1/openapi.json",
            "api/v1/events",
        ] {
            let missing = http.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(missing.status(), StatusCode::UNAUTHORIZED, "/{path}");
            assert_eq!(missing.headers()["www-authenticate"], "Bearer");
            let body: Value = missing.json().await.unwrap();
            assert!(body["error"].as_str().unwrap().contains("Bearer"));
            let wrong = http
                .get(format!("{base}{path}"))
                .bearer_auth("s3crex")
                .send()
                .await
                .unwrap();
            assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "/{path}");
            let prefix = http
                .get(format!("{base}{path}"))
                .bearer_auth("s3")
                .send()
                .await
                .unwrap();
            assert_eq!(prefix.status(), StatusCode::UNAUTHORIZED, "/{path}");
        }
        let right = http
            .get(format!("{base}api/v1/jobs"))
            .bearer_auth("s3cret")
            .send()
            .await
            .unwrap();
        assert_eq!(right.status(), StatusCode::OK);
        assert_eq!(right.json::<Value>().await.unwrap(), Value::Array(vec![]));
        // An event stream may carry it in the query instead.
        let events = http
            .get(format!("{base}api/v1/events?token=s3cret"))
            .send()
            .await
            .unwrap();
        assert_eq!(events.status(), StatusCode::OK);
        drop(events);
        let wrong_query = http
            .get(format!("{base}api/v1/jobs?token=nope"))
            .send()
            .await
            .unwrap();
        assert_eq!(wrong_query.status(), StatusCode::UNAUTHORIZED);
        // The dashboard's pages and files hold no data: they load without it, and the page
        // then calls the API with the token.
        for path in ["", "jobs/1", "assets/app.js", "assets/style.css"] {
            let file = http.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(file.status(), StatusCode::OK, "/{path}");
        }
        server.stop();
    });
}

#[test]
fn on_loopback_without_a_token_requests_need_none() {
    weir::async_io::runtime().unwrap().block_on(async {
        let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let server = Server::start(&config, Registry::new()).unwrap();
        let response = reqwest::get(format!("{}api/v1/jobs", server.url()))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        // A token sent anyway is ignored.
        let response = reqwest::Client::new()
            .get(format!("{}metrics", server.url()))
            .bearer_auth("anything")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    });
}

#[test]
fn a_taken_port_is_an_error_before_anything_runs() {
    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let first = Server::start(&config, Registry::new()).unwrap();
    let taken = ServerConfig::new(first.local_addr(), None).unwrap();
    let err = Server::start(&taken, Registry::new()).unwrap_err();
    assert!(
        err.to_string().contains(&first.local_addr().to_string()),
        "{err}"
    );
}

#[test]
fn the_validator_rejects_what_the_document_forbids() {
    use utoipa::OpenApi;
    let doc = serde_json::to_value(weir_observe::api::ApiDoc::openapi()).unwrap();
    let schemas = Schemas { doc };
    let good = serde_json::json!([{
        "id": "1", "name": "q5", "status": "running", "started_ms": 1, "duration_ms": 2,
        "error": null
    }]);
    assert!(schemas.errors("get", "/api/v1/jobs", 200, &good).is_empty());
    let mut no_error = good.clone();
    no_error[0].as_object_mut().unwrap().remove("error");
    let mut bad_status = good.clone();
    bad_status[0]["status"] = "sleeping".into();
    let mut bad_duration = good.clone();
    bad_duration[0]["duration_ms"] = "2".into();
    for bad in [no_error, bad_status, bad_duration] {
        assert!(
            !schemas.errors("get", "/api/v1/jobs", 200, &bad).is_empty(),
            "accepted {bad}"
        );
    }
    // The flattened detail: its summary's fields are required too.
    let detail = serde_json::json!({
        "id": "1", "name": "q5", "started_ms": 1, "duration_ms": 2, "error": null,
        "vertices": [], "edges": [], "last_snapshot": null
    });
    assert!(
        !schemas
            .errors("get", "/api/v1/jobs/{id}", 200, &detail)
            .is_empty()
    );
    // A window latency's quantiles are seconds, "+Inf" or null; nothing else.
    let with_p99 = |p99: Value| {
        serde_json::json!({
            "id": "1", "name": "q5", "status": "running", "started_ms": 1, "duration_ms": 2,
            "error": null, "vertices": [], "edges": [], "last_snapshot": null,
            "window_latency": {
                "count": 2, "sum_seconds": 90.001, "p50": 0.001, "p99": p99, "p999": "+Inf",
                "buckets": [
                    {"upper_bound": 0.001, "count": 1},
                    {"upper_bound": "+Inf", "count": 1}
                ]
            }
        })
    };
    for good in [
        serde_json::json!(0.005),
        serde_json::json!("+Inf"),
        Value::Null,
    ] {
        let body = with_p99(good);
        let errors = schemas.errors("get", "/api/v1/jobs/{id}", 200, &body);
        assert!(errors.is_empty(), "{errors:?}: {body}");
    }
    for bad in [serde_json::json!("Inf"), serde_json::json!("5 ms")] {
        let body = with_p99(bad);
        assert!(
            !schemas
                .errors("get", "/api/v1/jobs/{id}", 200, &body)
                .is_empty(),
            "accepted {body}"
        );
    }
}

/// A flow as the server sees it whose provenance is a real store holding one file split
/// into `LINES` lines that a MergeContent merged back into one: the case where an
/// unbounded lineage of one line was tens of thousands of flow files.
struct MergedFlow {
    provenance: weir_flow::provenance::ProvenanceRepository,
}

const LINES: usize = 20_000;

impl MergedFlow {
    fn new(dir: &Path) -> MergedFlow {
        use weir_flow::provenance::{EventType, ProvenanceEvent, ProvenanceRepository};
        let provenance = ProvenanceRepository::open(dir, Duration::MAX, u64::MAX).unwrap();
        let lines: Vec<String> = (0..LINES).map(|i| format!("line-{i:05}")).collect();
        let mut id = 0;
        let mut event = |t: EventType, ff: &str, parents: &[String], children: &[String]| {
            id += 1;
            ProvenanceEvent {
                id,
                event_type: t,
                time_ms: 1_000 + id as i64,
                flowfile: ff.into(),
                component: format!("{t:?}").to_lowercase().into(),
                component_type: "Test".into(),
                attributes: std::collections::BTreeMap::from([(
                    "filename".to_string(),
                    format!("{ff}.txt"),
                )])
                .into(),
                size: 10,
                parents: parents.to_vec(),
                children: children.to_vec(),
                details: None,
                transit_uri: None,
            }
        };
        let (file, merged) = (["file".to_string()], ["merged".to_string()]);
        let mut batches = vec![
            vec![event(EventType::RECEIVE, "file", &[], &[])],
            vec![event(EventType::FORK, "file", &file, &lines)],
        ];
        for chunk in lines.chunks(500) {
            batches.push(
                chunk
                    .iter()
                    .map(|l| event(EventType::ATTRIBUTES_MODIFIED, l, &[], &[]))
                    .collect(),
            );
        }
        batches.push(vec![event(EventType::JOIN, "merged", &lines, &merged)]);
        batches.push(vec![event(EventType::SEND, "merged", &[], &[])]);
        for batch in batches {
            provenance.insert(batch).unwrap();
        }
        MergedFlow { provenance }
    }
}

impl weir_flow_api::monitor::MonitoredFlow for MergedFlow {
    fn name(&self) -> &str {
        "merged"
    }
    fn state(&self) -> weir_flow_api::monitor::FlowState {
        weir_flow_api::monitor::FlowState::Stopped
    }
    fn failure(&self) -> Option<String> {
        None
    }
    fn processors(&self) -> Vec<weir_flow_api::monitor::ProcessorView> {
        Vec::new()
    }
    fn processor(&self, _: &str) -> Option<weir_flow_api::monitor::ProcessorView> {
        None
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
    ) -> Result<weir_flow_api::monitor::ProcessorView, weir_flow_api::monitor::ControlError> {
        Err(weir_flow_api::monitor::ControlError::UnknownProcessor {
            flow: "merged".into(),
            name: name.into(),
        })
    }
    fn provenance(
        &self,
        query: &weir_flow_api::provenance::Query,
        limit: usize,
    ) -> Result<
        Vec<weir_flow_api::provenance::ProvenanceEvent>,
        weir_flow_api::monitor::ProvenanceUnavailable,
    > {
        self.provenance
            .query(query, limit)
            .map_err(|e| weir_flow_api::monitor::ProvenanceUnavailable(Box::new(e)))
    }
    fn lineage(
        &self,
        uuid: &str,
        limits: weir_flow_api::provenance::LineageLimits,
    ) -> Result<weir_flow_api::provenance::Lineage, weir_flow_api::monitor::ProvenanceUnavailable>
    {
        self.provenance
            .lineage(uuid, limits)
            .map_err(|e| weir_flow_api::monitor::ProvenanceUnavailable(Box::new(e)))
    }
    fn content(&self, _: &str) -> std::io::Result<Option<Vec<u8>>> {
        Ok(None)
    }
}

/// Across a split into 20,000 lines merged back into one, a line's lineage with the default
/// limits is a small answer: 200 flow files at most, the file and the merge marked with how
/// many lines they have beyond; expanding the merge gives its parents up to the limit.
#[test]
fn a_lineage_across_a_merge_of_twenty_thousand_lines_is_small_and_expandable() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new();
    let id = registry.add_flow(weir_flow_api::monitor::FlowMonitor::new(Arc::new(
        MergedFlow::new(dir.path()),
    )));
    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let runtime = weir::async_io::runtime().unwrap();
    runtime.block_on(async {
        let server = Server::start(&config, registry).unwrap();
        let c = Client::new(&server).await;
        let path = "/api/v1/flows/{id}/flowfiles/{ffid}/lineage";
        let url = format!("/api/v1/flows/{id}/flowfiles/line-00007/lineage");
        let raw = c
            .http
            .get(format!("{}{url}", c.base))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        // Was 10 MB; now tens of kilobytes.
        assert!(raw.len() < 150_000, "{} bytes", raw.len());
        let lineage = c.json("get", &url, path, StatusCode::OK).await;
        let flowfiles: Vec<&Value> = lineage["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "flowfile")
            .collect();
        assert_eq!(flowfiles.len(), 200);
        assert_eq!(lineage["truncated"], true);
        let lines_shown = 198;
        assert_eq!(lineage["omitted"], LINES - lines_shown);
        let node = |id: &str| {
            flowfiles
                .iter()
                .find(|n| n["id"] == id)
                .unwrap_or_else(|| panic!("{id} in the lineage"))
        };
        assert_eq!(node("line-00007")["label"], "line-00007.txt");
        assert_eq!(node("file")["more_children"], LINES - lines_shown);
        assert_eq!(node("merged")["more_parents"], LINES - lines_shown);
        assert_eq!(node("line-00007")["more_parents"], 0);
        // The JOIN links only the lines shown into the merge.
        let links = lineage["links"].as_array().unwrap();
        let join = lineage["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["label"].as_str().unwrap().starts_with("JOIN"))
            .unwrap();
        assert_eq!(
            links.iter().filter(|l| l["to"] == join["id"]).count(),
            lines_shown
        );
        // Expanding the merge: its own lineage, one hop, up to the limit asked for.
        let merged = c
            .json(
                "get",
                &format!("/api/v1/flows/{id}/flowfiles/merged/lineage?depth=1&max_nodes=1000"),
                path,
                StatusCode::OK,
            )
            .await;
        let shown = merged["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "flowfile")
            .count();
        assert_eq!(shown, 1000);
        // The other lines, and the file the lines shown came from.
        assert_eq!(merged["omitted"], LINES - 999 + 1);
        // Asked for everything within the largest limit, it stops there.
        let most = c
            .json(
                "get",
                &format!(
                    "/api/v1/flows/{id}/flowfiles/line-00007/lineage?depth=100&max_nodes=10000"
                ),
                path,
                StatusCode::OK,
            )
            .await;
        assert_eq!(most["truncated"], true);
        assert_eq!(most["omitted"], LINES + 2 - 10_000);
    });
}

/// A running flow's processor rates come from the registry's samples of its counters, on a
/// clock the test drives: 5 lines in the second between two samples are 5 a second, and
/// the rate is 0 a second after the flow stopped being fed.
#[test]
fn a_running_flows_processor_rates_follow_its_counters_on_a_driven_clock() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(lines_flow(dir.path()), &dir.path().join("repo")).unwrap();
    let monitor = engine.monitor();
    let registry = Registry::new();
    let id = registry.add_flow(monitor.clone());
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    registry.sample(at(0));
    let text = "one\ntwo\nthree\nfour\nfive\n";
    let staged = dir.path().join("lines.txt.part");
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(&staged, dir.path().join("in/lines.txt")).unwrap();
    let written = |name: &str| monitor.processor(name).unwrap().flowfiles_in;
    assert!(
        weir_test_support::wait_for(TIMEOUT, || written("write-even") == 2
            && written("write-odd") == 3),
        "the five lines were never written"
    );
    registry.sample(at(1));
    let rates = registry.processor_rates(&id);
    assert_eq!(rates["tag"].flowfiles_in.last_1s, 5.0);
    assert_eq!(rates["tag"].flowfiles_out.last_1s, 5.0);
    assert_eq!(rates["write-odd"].flowfiles_in.last_1s, 3.0);
    assert_eq!(rates["read"].bytes_out.last_1s, text.len() as f64);
    assert_eq!(rates["tag"].bytes_in.last_10s, (text.len() - 5) as f64);
    // Not fed any more: 0 over the last second, the older windows still show the burst.
    registry.sample(at(2));
    let rates = registry.processor_rates(&id);
    assert_eq!(rates["tag"].flowfiles_in.last_1s, 0.0);
    assert_eq!(rates["tag"].flowfiles_in.last_10s, 2.5);
    assert_eq!(rates["read"].bytes_out.last_1s, 0.0);
    engine.stop().unwrap();
}
