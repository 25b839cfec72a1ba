//! `--ui`, `--ui-token`, `weir serve` and `--log-format json` as a user runs them: the bound
//! URL read from standard error (port 0), the REST API and a Prometheus scrape of a running
//! NEXMark job, cancel over HTTP, the token, a refused non-loopback bind, and JSON logs.
//!
//! Every wait polls with a deadline; every child process is killed when its test ends.

mod support;

use support::command as weir;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(30);

/// `weir nexmark run --query q5` paced by the wall clock (20,000 events/s of 100 M), so that
/// it runs until cancelled, with `extra` arguments.
fn paced_q5(extra: &[&str]) -> Command {
    let mut q5 = weir();
    q5.args([
        "nexmark",
        "run",
        "--query",
        "q5",
        "--events",
        "100000000",
        "--wall-rate",
        "20000",
    ])
    .args(extra);
    q5
}

/// A running `weir` whose standard error is read line by line on a thread; killed on drop.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn spawn(mut command: Command) -> Running {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("weir starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The URL of `weir: dashboard at URL`, once printed.
    fn url(&mut self) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let url = line
                        .strip_prefix("weir: dashboard at ")
                        .map(|u| u.trim_end_matches('/').to_string());
                    self.seen.push(line);
                    if let Some(url) = url {
                        return url;
                    }
                }
                Err(_) => panic!("no dashboard URL on standard error: {:?}", self.seen),
            }
        }
    }

    /// Waits for the process to exit; its status code.
    fn wait(&mut self) -> Option<i32> {
        let deadline = Instant::now() + TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("weir did not exit within {TIMEOUT:?}");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `f` on Weir's shared runtime.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    weir::async_io::runtime().unwrap().block_on(f)
}

async fn get(url: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(url);
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    request.send().await.unwrap()
}

async fn get_json(url: &str) -> Value {
    let response = get(url, None).await;
    assert!(
        response.status().is_success(),
        "GET {url}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

/// GETs `url` until its JSON body satisfies `ready` (the server listens before the command
/// registers its job or flow); the body then.
async fn get_json_until(url: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let body = get_json(url).await;
        if ready(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "GET {url} stays {body:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The sum of a counter family over the series whose `vertex` label starts with `vertex`.
fn counter_sum(text: &str, family: &str, vertex: &str) -> f64 {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("the exposition parses");
    scrape
        .samples
        .iter()
        .filter(|s| {
            s.metric == family
                && s.labels
                    .get("vertex")
                    .is_some_and(|v| v.starts_with(vertex))
        })
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{family} is {other:?}"),
        })
        .sum()
}

#[test]
fn a_running_query_is_served_scraped_and_cancelled_over_http() {
    let mut run = Running::spawn(paced_q5(&["--parallelism", "2", "--ui", "127.0.0.1:0"]));
    let url = run.url();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    block_on(async {
        let jobs = get_json_until(&format!("{url}/api/v1/jobs"), |j| {
            j != &Value::Array(vec![])
        })
        .await;
        assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
        assert_eq!(jobs[0]["status"], "running");
        assert!(jobs[0]["name"].as_str().unwrap().starts_with("nexmark-q5"));
        let id = jobs[0]["id"].as_str().unwrap().to_string();
        let job = get_json(&format!("{url}/api/v1/jobs/{id}")).await;
        let vertices = job["vertices"].as_array().unwrap();
        assert!(
            vertices[0]["name"]
                .as_str()
                .unwrap()
                .contains("nexmark-generator"),
            "{job:#}"
        );
        assert!(!job["edges"].as_array().unwrap().is_empty());

        // The source's items in (events read) grow between two scrapes.
        let scrape = async || {
            let response = get(&format!("{url}/metrics"), None).await;
            assert_eq!(response.status(), 200);
            response.text().await.unwrap()
        };
        let first = counter_sum(
            &scrape().await,
            "weir_vertex_items_in_total",
            "fused(nexmark-generator",
        );
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let now = counter_sum(
                &scrape().await,
                "weir_vertex_items_in_total",
                "fused(nexmark-generator",
            );
            if now > first {
                break;
            }
            assert!(Instant::now() < deadline, "events read stay at {first}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Cancel over HTTP: the command ends.
        let cancel = reqwest::Client::new()
            .post(format!("{url}/api/v1/jobs/{id}/cancel"))
            .send()
            .await
            .unwrap();
        assert_eq!(cancel.status(), 202);
    });
    let code = run.wait();
    assert_eq!(code, Some(1), "a cancelled query fails the command");
}

#[test]
fn with_a_token_the_cli_server_refuses_requests_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = weir();
    serve
        .args(["serve", "--ui", "127.0.0.1:0"])
        .env("WEIR_UI_TOKEN", "t0ken")
        .current_dir(dir.path());
    let mut running = Running::spawn(serve);
    let url = running.url();
    block_on(async {
        assert_eq!(get(&format!("{url}/api/v1/jobs"), None).await.status(), 401);
        assert_eq!(
            get(&format!("{url}/api/v1/jobs"), Some("wrong"))
                .await
                .status(),
            401
        );
        let ok = get(&format!("{url}/api/v1/jobs"), Some("t0ken")).await;
        assert_eq!(ok.status(), 200);
        assert_eq!(ok.json::<Value>().await.unwrap(), Value::Array(vec![]));
    });
}

#[test]
fn a_non_loopback_ui_without_a_token_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    for ui in ["0.0.0.0:0", "[::]:0"] {
        let output = weir()
            .args([
                "nexmark", "run", "--query", "q0", "--events", "100", "--output",
            ])
            .arg(&out)
            .args(["--ui", ui])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("--ui-token"), "{stderr}");
        assert!(stderr.contains("WEIR_UI_TOKEN"), "{stderr}");
        assert!(!out.exists(), "the query ran anyway");
    }
    // A bad address is a command-line error naming the flag.
    let output = weir()
        .args(["serve", "--ui", "localhost"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--ui"));
}

/// `examples/flows/lines.yaml` with its directories under `dir`.
fn lines_flow(dir: &Path) -> std::path::PathBuf {
    let yaml = std::fs::read_to_string("examples/flows/lines.yaml")
        .unwrap()
        .replace("target/flow-in", &dir.join("in").display().to_string())
        .replace("target/flow-out", &dir.join("out").display().to_string());
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let path = dir.join("lines.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn weir_serve_runs_a_flow_and_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let flow = lines_flow(dir.path());
    std::fs::write(dir.path().join("in/a.txt"), "1\n2\n3\n").unwrap();
    let mut serve = weir();
    serve
        .args(["serve", "--ui", "127.0.0.1:0", "--flow"])
        .arg(&flow)
        .arg("--repo")
        .arg(dir.path().join("repo"));
    let mut running = Running::spawn(serve);
    let url = running.url();
    block_on(async {
        let flows = get_json_until(&format!("{url}/api/v1/flows"), |f| {
            f != &Value::Array(vec![])
        })
        .await;
        assert_eq!(flows[0]["name"], "lines");
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let detail = get_json(&format!("{url}/api/v1/flows/1")).await;
            let written: u64 = detail["processors"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["type"] == "PutFile")
                .map(|p| p["flowfiles_in"].as_u64().unwrap())
                .sum();
            if written == 3 {
                break;
            }
            assert!(Instant::now() < deadline, "{detail:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    // SIGTERM stops the flow cleanly.
    let pid = running.child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    assert_eq!(running.wait(), Some(0));
}

#[test]
fn json_logs_carry_the_job_and_the_vertex() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let generated = weir()
        .args(["nexmark", "generate", "--events", "200", "--output"])
        .arg(&events)
        .output()
        .unwrap();
    assert!(generated.status.success());
    let mut text = std::fs::read_to_string(&events).unwrap();
    text.push_str("{not an event}\n");
    std::fs::write(&events, text).unwrap();
    let output = weir()
        .args([
            "--log-format",
            "json",
            "nexmark",
            "run",
            "--query",
            "q0",
            "--input",
        ])
        .arg(&events)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let warning: Value = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| {
            v["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("malformed"))
        })
        .unwrap_or_else(|| panic!("no JSON line about the malformed record: {stderr}"));
    assert_eq!(warning["level"], "WARN");
    assert!(
        warning["fields"]["job"]
            .as_str()
            .unwrap()
            .starts_with("nexmark-q0"),
        "{warning}"
    );
    assert!(warning["fields"]["vertex"].is_string(), "{warning}");
}

#[test]
fn every_long_running_command_takes_ui_and_ui_token() {
    for command in [
        &["run", "wordcount"][..],
        &["nexmark", "run"],
        &["score"],
        &["flow", "run"],
        &["serve"],
    ] {
        let output = weir().args(command).arg("--help").output().unwrap();
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{command:?}");
        assert!(help.contains("--ui <ADDR>"), "{command:?}: {help}");
        assert!(help.contains("--ui-token <TOKEN>"), "{command:?}: {help}");
        assert!(help.contains("WEIR_UI_TOKEN"), "{command:?}: {help}");
    }
}

/// Other web pages cannot use a server on loopback: a foreign `Host` (DNS rebinding) is
/// answered 421, a cross-origin POST 403 with the job still running, while the dashboard's
/// own same-origin POST, a command-line client and a name given with `--ui-allowed-host`
/// work; every response carries the security headers, none allows other origins, and
/// flow-file content comes as a download.
#[test]
fn other_web_pages_can_neither_read_nor_cancel_through_a_loopback_server() {
    let mut run = Running::spawn(paced_q5(&[
        "--parallelism",
        "2",
        "--ui",
        "127.0.0.1:0",
        "--ui-allowed-host",
        "weir.internal",
    ]));
    let url = run.url();
    let port = url.rsplit(':').next().unwrap().to_string();
    block_on(async {
        let jobs = get_json_until(&format!("{url}/api/v1/jobs"), |j| {
            j != &Value::Array(vec![])
        })
        .await;
        let id = jobs[0]["id"].as_str().unwrap().to_string();
        let client = reqwest::Client::new();
        let with_host = |path: &str, host: &str| {
            client
                .get(format!("{url}{path}"))
                .header("Host", host.to_string())
        };
        // DNS rebinding: a page on another name that resolves here.
        for path in ["/api/v1/jobs", "/", "/metrics"] {
            let r = with_host(path, &format!("attacker.example:{port}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 421, "{path}");
            let body = r.text().await.unwrap();
            assert!(body.contains("--ui-allowed-host"), "{body}");
        }
        for own in [format!("localhost:{port}"), format!("weir.internal:{port}")] {
            let r = with_host("/api/v1/jobs", &own).send().await.unwrap();
            assert_eq!(r.status(), 200, "{own}");
        }
        // The headers, on the API and on the dashboard's page.
        for path in ["/api/v1/jobs", "/"] {
            let r = get(&format!("{url}{path}"), None).await;
            let h = r.headers();
            assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
            assert_eq!(h["referrer-policy"], "same-origin", "{path}");
            let csp = h["content-security-policy"].to_str().unwrap();
            assert!(
                csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
                "{csp}"
            );
            assert!(
                h.keys().all(|k| !k.as_str().starts_with("access-control")),
                "{path}: {h:?}"
            );
        }
        // Cross-site request forgery: the request a browser sends from any page, without a
        // preflight.
        let cancel = format!("{url}/api/v1/jobs/{id}/cancel");
        let forged = client
            .post(&cancel)
            .header("Origin", "http://attacker.example")
            .header("Content-Type", "text/plain")
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 403);
        let forged = client
            .post(&cancel)
            .header("Sec-Fetch-Site", "cross-site")
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 403);
        let job = get_json(&format!("{url}/api/v1/jobs/{id}")).await;
        assert_eq!(job["status"], "running", "the forged cancels did nothing");
        // The dashboard's own page: same origin.
        let own = client
            .post(&cancel)
            .header("Origin", format!("http://127.0.0.1:{port}"))
            .header("Sec-Fetch-Site", "same-origin")
            .send()
            .await
            .unwrap();
        assert_eq!(own.status(), 202);
    });
    assert_eq!(
        run.wait(),
        Some(1),
        "the same-origin cancel ended the query"
    );

    // A command-line client on loopback needs nothing new.
    let mut run = Running::spawn(paced_q5(&["--ui", "127.0.0.1:0"]));
    let url = run.url();
    block_on(async {
        let jobs = get_json_until(&format!("{url}/api/v1/jobs"), |j| {
            j != &Value::Array(vec![])
        })
        .await;
        let id = jobs[0]["id"].as_str().unwrap();
        let r = reqwest::Client::new()
            .post(format!("{url}/api/v1/jobs/{id}/cancel"))
            .header("Content-Type", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    });
    assert_eq!(run.wait(), Some(1));
}

#[test]
fn a_bad_allowed_host_is_refused_before_anything_runs() {
    let output = weir()
        .args([
            "serve",
            "--ui",
            "127.0.0.1:0",
            "--ui-allowed-host",
            "weir.internal:8080",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--ui-allowed-host"), "{stderr}");
}
