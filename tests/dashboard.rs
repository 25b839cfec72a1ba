//! The observability front ends end to end, against the real `weir` binary:
//!
//! - the web dashboard in headless Chromium (Debian's `chromium` and `chromium-driver`),
//!   driven over WebDriver with fantoccini: the job list, a running NEXMark job's DAG with
//!   live numbers and its window latency, a running flow's graph (back pressure, queued
//!   counts, stop and start), a provenance search and a lineage graph, each checked against
//!   the REST API; screenshots go to `target/ui-screenshots/`;
//! - `weir top --once` against a running job and flow.
//!
//! Without chromium or chromedriver (Debian's paths, or `WEIR_CHROMIUM` and
//! `WEIR_CHROMEDRIVER`) the browser test says so and is skipped, unless
//! `WEIR_REQUIRE_SERVICES=1`, where it fails.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use weir_test_support::wait_for_value;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// Debian's paths; `WEIR_CHROMIUM` and `WEIR_CHROMEDRIVER` name others.
fn chromium() -> String {
    std::env::var("WEIR_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

fn chromedriver() -> String {
    std::env::var("WEIR_CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into())
}
/// The job's server wants this token; the flow's has none (and ignores one sent anyway).
const TOKEN: &str = "s3cret-token";
/// How long any awaited condition may take before the test fails, naming it.
const DEADLINE: Duration = Duration::from_secs(45);

/// A child process killed when dropped, so a failing test leaves nothing running.
struct Running {
    child: Child,
    /// The address it printed (its dashboard, or chromedriver's).
    url: String,
    /// What it printed after the address, standard output and error interleaved.
    later: mpsc::Receiver<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `program args` and waits for a line of its output holding `marker`, then returns
/// the process and what `extract` made of that line. Output keeps being drained (and shown
/// on failure) so the child never blocks on a full pipe.
fn spawn_and_read(
    program: &Path,
    args: &[&str],
    what: &str,
    extract: impl Fn(&str) -> Option<String>,
) -> Running {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    for stream in [
        Box::new(stdout) as Box<dyn std::io::Read + Send>,
        Box::new(stderr),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    drop(tx);
    let started = Instant::now();
    let mut seen = Vec::new();
    loop {
        let left = DEADLINE.saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(url) = extract(&line) {
                    // The reader threads keep draining into the channel (unbounded), so the
                    // child never blocks on a full pipe.
                    return Running {
                        child,
                        url,
                        later: rx,
                    };
                }
                seen.push(line);
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{what} printed no address within {DEADLINE:?}; output:\n{}",
                    seen.join("\n")
                );
            }
        }
    }
}

/// The first `http://...` in a line, without trailing punctuation or slash.
fn http_url(line: &str) -> Option<String> {
    let start = line.find("http://")?;
    let url: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, ')' | ',' | '"' | '\''))
        .collect();
    Some(url.trim_end_matches(['/', '.']).to_owned())
}

fn weir_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_weir"))
}

/// `weir nexmark run` on the built-in generator, throttled so it runs for days, its
/// server guarded by [`TOKEN`].
fn start_job() -> Running {
    spawn_and_read(
        &weir_bin(),
        &[
            "nexmark",
            "run",
            "--query",
            "q5",
            "--events",
            "1000000000",
            "--wall-rate",
            "3000",
            "--parallelism",
            "2",
            "--ui",
            "127.0.0.1:0",
            "--ui-token",
            TOKEN,
        ],
        "weir nexmark run --ui",
        http_url,
    )
}

/// A flow whose first queue fills to its back-pressure threshold: `generate` makes up to 200
/// flow files a second, `tag` takes at most 100 every 2 seconds; tag's `success` goes to two
/// connections, so each flow file it sends has a clone (a lineage with a child).
fn flow_yaml(out: &Path) -> String {
    format!(
        r#"flow: ui-demo
groups:
  - name: main
    processors:
      - name: generate
        type: GenerateFlowFile
        schedule: {{ strategy: timer, period: 50 ms }}
        properties: {{ File Size: 64 B, Batch Size: "10" }}
      - name: tag
        type: UpdateAttribute
        schedule: {{ strategy: timer, period: 2 s }}
        properties: {{ stage: tagged }}
      - name: write
        type: PutFile
        properties: {{ Directory: "{}", Conflict Resolution Strategy: replace }}
        auto_terminate: [success, failure]
      - name: archive
        type: PutFile
        properties: {{ Directory: "{}", Conflict Resolution Strategy: replace }}
        auto_terminate: [success, failure]
    connections:
      - from: generate
        relationships: [success]
        to: tag
        back_pressure: {{ count: 150, size: 1 GB }}
      - {{ from: tag, relationships: [success], to: write }}
      - {{ from: tag, relationships: [success], to: archive }}
"#,
        out.display(),
        out.join("archive").display()
    )
}

fn start_flow(dir: &Path) -> Running {
    let flow = dir.join("flow.yaml");
    std::fs::write(&flow, flow_yaml(&dir.join("out"))).unwrap();
    let repo = dir.join("repo");
    spawn_and_read(
        &weir_bin(),
        &[
            "flow",
            "run",
            flow.to_str().unwrap(),
            "--repo",
            repo.to_str().unwrap(),
            "--ui",
            "127.0.0.1:0",
        ],
        "weir flow run --ui",
        http_url,
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `method /api/v1{path}` with the token; panics unless it answers 2xx with JSON.
async fn call(method: reqwest::Method, url: &str, path: &str) -> Value {
    let response = reqwest::Client::new()
        .request(method.clone(), format!("{url}/api/v1{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    assert!(
        response.status().is_success(),
        "{method} {path}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

async fn api(url: &str, path: &str) -> Value {
    call(reqwest::Method::GET, url, path).await
}

async fn api_post(url: &str, path: &str) -> Value {
    call(reqwest::Method::POST, url, path).await
}

/// Runs `script` in the page and returns its value (`null` when it throws).
async fn js(browser: &Client, script: &str) -> Value {
    browser.execute(script, vec![]).await.unwrap_or(Value::Null)
}

/// Clicks the element `css` names, as a user would: scrolled to the middle of the window
/// first, so that the sticky top bar does not cover it.
async fn click(browser: &Client, css: &str) {
    let element = browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"));
    browser
        .execute(
            "arguments[0].scrollIntoView({block: 'center'});",
            vec![serde_json::to_value(&element).unwrap()],
        )
        .await
        .unwrap();
    element
        .click()
        .await
        .unwrap_or_else(|e| panic!("cannot click {css}: {e}"));
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn screenshot_dir() -> PathBuf {
    // The binary is target/<profile>/weir.
    let dir = weir_bin()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves the whole page (the window is made as tall as the page for the shot) as
/// `target/ui-screenshots/{name}.png`.
async fn screenshot(browser: &Client, name: &str) {
    let height = js(browser, "return document.documentElement.scrollHeight;")
        .await
        .as_u64()
        .unwrap_or(1000)
        .clamp(600, 4000);
    browser
        .set_window_size(1440, u32::try_from(height).unwrap() + 140)
        .await
        .unwrap();
    let png = browser.screenshot().await.unwrap();
    browser.set_window_size(1440, 1000).await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    std::fs::write(screenshot_dir().join(format!("{name}.png")), png).unwrap();
}

/// Whether chromium and chromedriver are installed; if not, says so, and fails the test when
/// `WEIR_REQUIRE_SERVICES=1`.
fn browser_available(test: &str) -> bool {
    let missing: Vec<String> = [chromium(), chromedriver()]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    weir_test_support::services::skip_unless_required(
        test,
        &format!("{} missing", missing.join(" and ")),
        "apt-get install chromium chromium-driver",
    );
    false
}

fn start_chromedriver() -> Running {
    spawn_and_read(
        Path::new(&chromedriver()),
        &["--port=0"],
        "chromedriver",
        |line| {
            let port = line
                .split("started successfully on port ")
                .nth(1)?
                .trim_end_matches('.');
            Some(format!("http://127.0.0.1:{port}"))
        },
    )
}

async fn open_browser(driver: &Running) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1440,1000", "--hide-scrollbars"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("chromedriver starts a headless Chromium session")
}

#[test]
fn dashboard_pages_show_live_jobs_and_flows_in_headless_chromium() {
    const TEST: &str = "dashboard_pages_show_live_jobs_and_flows_in_headless_chromium";
    if !browser_available(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let job = start_job();
    let flow = start_flow(dir.path());
    let driver = start_chromedriver();
    let mut job = job;
    runtime().block_on(async {
        let browser = open_browser(&driver).await;
        let result = async {
            job_pages(&browser, &job.url).await;
            flow_pages(&browser, &flow.url).await;
            cancel_from_the_page(&browser, &mut job).await;
        };
        // Close the session even when a check fails, so Chromium does not linger.
        let outcome = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(result)).await;
        let _ = browser.close().await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    });
}

/// The overview, then the job's DAG: names, edges and live counters against the API.
async fn job_pages(browser: &Client, url: &str) {
    let jobs = wait_for_value(DEADLINE, "the job in the API", || async {
        let jobs = api(url, "/jobs").await;
        (jobs.as_array()?.len() == 1).then_some(jobs)
    })
    .await;
    let id = jobs[0]["id"].as_str().unwrap().to_owned();
    let name = jobs[0]["name"].as_str().unwrap().to_owned();

    // Without the token the page asks for it; once given, it is kept for the session.
    browser.goto(&format!("{url}/")).await.unwrap();
    let input = wait_for_value(DEADLINE, "the page to ask for the token", || async {
        browser.find(Locator::Id("token-input")).await.ok()
    })
    .await;
    input.send_keys(TOKEN).await.unwrap();
    click(browser, ".token-form button").await;
    let duration = wait_for_value(DEADLINE, "the job row on the overview", || async {
        let row = js(
            browser,
            &format!(
                "const tr = document.querySelector('tr[data-job=\"{id}\"]'); \
                 return tr && [tr.querySelector('a').textContent, tr.dataset.status, tr.children[3].textContent];"
            ),
        )
        .await;
        (row[0] == name.as_str()).then_some(row)
    })
    .await;
    assert_eq!(duration[1], "running");
    // Live: the duration changes without a reload (server-sent events).
    wait_for_value(
        DEADLINE,
        "the job's duration to change on the overview",
        || async {
            let now = js(
            browser,
            &format!(
                "return document.querySelector('tr[data-job=\"{id}\"]').children[3].textContent;"
            ),
        )
        .await;
            (now != duration[2]).then_some(())
        },
    )
    .await;
    screenshot(browser, "jobs").await;

    // Follow the link: the page changes without a reload.
    click(browser, &format!("tr[data-job=\"{id}\"] a")).await;
    let detail = api(url, &format!("/jobs/{id}")).await;
    let api_vertices = strings(&json!(
        detail["vertices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].clone())
            .collect::<Vec<_>>()
    ));
    assert!(
        api_vertices.len() >= 2,
        "q5 has several vertices: {api_vertices:?}"
    );
    wait_for_value(DEADLINE, "the DAG's vertices to be the API's", || async {
        let names = js(
            browser,
            "return [...document.querySelectorAll('#dag g[data-vertex]')].map(g => g.dataset.vertex);",
        )
        .await;
        (strings(&names) == api_vertices).then_some(())
    })
    .await;
    let edges = js(
        browser,
        "return [...document.querySelectorAll('#dag path[data-edge]')].map(p => p.dataset.edge);",
    )
    .await;
    let api_edges: BTreeSet<String> = detail["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}->{}",
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(strings(&edges), api_edges);

    // A source's items in (the events it generated), read between two API reads, lies
    // between them: the page shows the API's numbers, and they move.
    let source = detail["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["queue_fill"].as_array().unwrap().is_empty())
        .expect("a source vertex")["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let out_of = |v: &Value| -> u64 {
        v["vertices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == source.as_str())
            .unwrap()["items_in"]
            .as_u64()
            .unwrap()
    };
    let page_out = || async {
        js(
            browser,
            &format!(
                "const g = document.querySelector('#dag g[data-vertex=\"{}\"]'); \
                 return g && g.dataset.itemsIn ? Number(g.dataset.itemsIn) : null;",
                source.replace('"', "\\\"")
            ),
        )
        .await
        .as_u64()
    };
    let before = out_of(&api(url, &format!("/jobs/{id}")).await);
    let shown = wait_for_value(DEADLINE, "the page to catch up with the API", || async {
        page_out().await.filter(|&shown| shown >= before)
    })
    .await;
    let after = out_of(&api(url, &format!("/jobs/{id}")).await);
    assert!(
        before <= shown && shown <= after,
        "{before} <= {shown} <= {after}"
    );
    wait_for_value(
        DEADLINE,
        "the source's count to move on the page",
        || async { page_out().await.filter(|&now| now > shown) },
    )
    .await;
    // A sparkline per vertex once the API has a few seconds of history.
    wait_for_value(DEADLINE, "ten seconds of history in the API", || async {
        let detail = api(url, &format!("/jobs/{id}")).await;
        (detail["vertices"][0]["history"].as_array()?.len() >= 10).then_some(())
    })
    .await;
    wait_for_value(DEADLINE, "a sparkline in every vertex", || async {
        let lines = js(
            browser,
            "return document.querySelectorAll('#dag g[data-vertex] polyline.spark-line').length;",
        )
        .await;
        (lines.as_u64()? == api_vertices.len() as u64).then_some(())
    })
    .await;
    let title = js(
        browser,
        "return document.querySelector('#job-name').textContent;",
    )
    .await;
    assert_eq!(title, name.as_str());
    // The window latency card: the sinks' histogram from the API, quantiles as bucket bounds.
    let (count, p99) = wait_for_value(DEADLINE, "window latencies on the job page", || async {
        let card = js(
            browser,
            "const c = document.querySelector('#window-latency'); \
             return c && [Number(c.dataset.count), document.querySelector('#latency-p99').textContent];",
        )
        .await;
        let count = card[0].as_u64().filter(|&n| n > 0)?;
        Some((count, card[1].as_str()?.to_owned()))
    })
    .await;
    assert!(p99.starts_with("≤ ") || p99.starts_with("> "), "{p99}");
    let api_count = api(url, &format!("/jobs/{id}")).await["window_latency"]["count"]
        .as_u64()
        .unwrap();
    assert!(count <= api_count, "{count} <= {api_count}");
    screenshot(browser, "job").await;

    // An unknown job: the page says so, naming it.
    browser
        .goto(&format!("{url}/jobs/no-such-job"))
        .await
        .unwrap();
    let message = wait_for_value(DEADLINE, "the unknown job's error", || async {
        let text = js(
            browser,
            "const e = document.querySelector('.error-box:not([hidden])'); return e && e.textContent;",
        )
        .await;
        text.as_str().map(str::to_owned)
    })
    .await;
    assert!(message.contains("no-such-job"), "{message}");

    // A fresh session given `?token=` once: the page keeps it and drops it from the address.
    js(browser, "sessionStorage.clear(); return null;").await;
    browser
        .goto(&format!("{url}/jobs/{id}?token={TOKEN}"))
        .await
        .unwrap();
    wait_for_value(DEADLINE, "the DAG loaded with the token from the address", || async {
        let names = js(
            browser,
            "return [...document.querySelectorAll('#dag g[data-vertex]')].map(g => g.dataset.vertex);",
        )
        .await;
        (strings(&names) == api_vertices).then_some(())
    })
    .await;
    let address = browser.current_url().await.unwrap();
    assert!(!address.as_str().contains("token"), "{address}");
    let kept = js(browser, "return sessionStorage.getItem('weir.token');").await;
    assert_eq!(kept, TOKEN);
}

/// The job page's Cancel button, confirmed: the job is cancelled and `weir nexmark run`
/// exits saying so.
async fn cancel_from_the_page(browser: &Client, job: &mut Running) {
    let jobs = api(&job.url, "/jobs").await;
    let id = jobs[0]["id"].as_str().unwrap().to_owned();
    browser
        .goto(&format!("{}/jobs/{id}", job.url))
        .await
        .unwrap();
    wait_for_value(DEADLINE, "the Cancel button", || async {
        let hidden = js(
            browser,
            "return document.querySelector('#cancel-job').hidden;",
        )
        .await;
        (hidden.as_bool() == Some(false)).then_some(())
    })
    .await;
    click(browser, "#cancel-job").await;
    browser.accept_alert().await.unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = job.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "weir nexmark run still runs {DEADLINE:?} after the cancel"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!status.success());
    let said: Vec<String> = job.later.try_iter().collect();
    assert!(
        said.iter().any(|l| l.contains("cancelled")),
        "weir nexmark run said: {said:?}"
    );
}

/// The flow's graph (back pressure, then stop, a stable queue, start), provenance, lineage.
async fn flow_pages(browser: &Client, url: &str) {
    let flows = api(url, "/flows").await;
    let id = flows[0]["id"].as_str().unwrap().to_owned();
    browser.goto(&format!("{url}/flows/{id}")).await.unwrap();
    let detail = api(url, &format!("/flows/{id}")).await;
    let ids = |key: &str| -> BTreeSet<String> {
        detail[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (processors, connections) = (ids("processors"), ids("connections"));
    wait_for_value(DEADLINE, "the flow graph's processors and connections", || async {
        let shown = js(
            browser,
            "return [[...document.querySelectorAll('#flow-graph g[data-processor]')].map(g => g.dataset.processor), \
                     [...document.querySelectorAll('#flow-graph g[data-connection]')].map(g => g.dataset.connection)];",
        )
        .await;
        (strings(&shown[0]) == processors && strings(&shown[1]) == connections).then_some(())
    })
    .await;
    // The processors' rates: the columns, and generate's as the server samples them (it
    // makes flow files all along, so its 60 s rate is above 0 within two samples).
    let headers = js(
        browser,
        "return [...document.querySelectorAll('#processors-table thead th')].map(th => th.textContent);",
    )
    .await;
    for column in ["In/s", "Out/s", "Out 10s", "Out 60s"] {
        assert!(strings(&headers).contains(column), "{column} in {headers}");
    }
    wait_for_value(DEADLINE, "generate's out rate on the page and in the API", || async {
        let shown = js(
            browser,
            "const tr = document.querySelector('#processors-table tr[data-processor-row=\"generate\"]'); \
             return tr && [Number(tr.dataset.outRate60s), tr.children[9].textContent, \
                           document.querySelector('#flow-graph g[data-processor=\"generate\"] .p-rate').textContent];",
        )
        .await;
        let flow = api(url, &format!("/flows/{id}")).await;
        let generate = flow["processors"]
            .as_array()?
            .iter()
            .find(|p| p["id"] == "generate")?
            .clone();
        (shown[0].as_f64()? > 0.0
            && generate["flowfiles_out_rate_60s"].as_f64()? > 0.0
            && shown[1].as_str()?.ends_with("/s")
            && shown[2].as_str()?.ends_with("/s"))
        .then_some(())
    })
    .await;
    let first = detail["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["source"] == "generate")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let connection_js = format!(
        "const g = document.querySelector('#flow-graph g[data-connection=\"{}\"]'); \
         return g && [Number(g.dataset.queued), g.dataset.backPressure];",
        first.replace('"', "\\\"")
    );
    wait_for_value(
        DEADLINE,
        "back pressure on generate → tag, in the API and on the page",
        || async {
            let flow = api(url, &format!("/flows/{id}")).await;
            let engaged = flow["connections"]
                .as_array()?
                .iter()
                .any(|c| c["id"] == first.as_str() && c["back_pressure"] == true);
            let shown = js(browser, &connection_js).await;
            (engaged && shown[1] == "true").then_some(())
        },
    )
    .await;
    screenshot(browser, "flow").await;

    // Stop both ends of the queue with the page's buttons; its count then stays put and the
    // page must show the API's number.
    for processor in ["generate", "tag"] {
        click(
            browser,
            &format!(
                "#processors-table button[data-action=\"stop\"][data-processor-id=\"{processor}\"]"
            ),
        )
        .await;
    }
    wait_for_value(DEADLINE, "generate and tag stopped, in the API and on the page", || async {
        let flow = api(url, &format!("/flows/{id}")).await;
        let stopped = flow["processors"]
            .as_array()?
            .iter()
            .filter(|p| p["state"] == "stopped")
            .count();
        let shown = js(
            browser,
            "return [...document.querySelectorAll('#flow-graph g[data-state=\"stopped\"]')].length;",
        )
        .await;
        let running = js(browser, "return document.querySelector('#tile-running').textContent;").await;
        (stopped == 2 && shown == 2 && running == "2 of 4").then_some(())
    })
    .await;
    let queued = wait_for_value(
        DEADLINE,
        "the page's queued count to equal the API's",
        || async {
            let flow = api(url, &format!("/flows/{id}")).await;
            let api_count = flow["connections"]
                .as_array()?
                .iter()
                .find(|c| c["id"] == first.as_str())?["queued_count"]
                .as_u64()?;
            let shown = js(browser, &connection_js).await;
            (shown[0].as_u64() == Some(api_count)).then_some(api_count)
        },
    )
    .await;
    assert!(queued > 0, "the stopped queue holds flow files");
    let row = js(
        browser,
        &format!(
            "return document.querySelector('tr[data-connection-row=\"{}\"]').dataset.queued;",
            first.replace('"', "\\\"")
        ),
    )
    .await;
    assert_eq!(row, queued.to_string().as_str());
    screenshot(browser, "flow-stopped").await;

    // Provenance: a search by component, against the API's answer to the same search (tag is
    // stopped, so its events do not change meanwhile), then a lineage.
    click(browser, "a[href$=\"/provenance\"]").await;
    let component = browser.find(Locator::Id("prov-component")).await.unwrap();
    component.send_keys("tag").await.unwrap();
    click(browser, "#prov-search").await;
    // A session of tag's that was running when it stopped may still commit after the page
    // searched: then the page is searched again.
    let event_ids = |events: &Value| -> BTreeSet<String> {
        events
            .as_array()
            .map(|a| a.iter().map(|e| e["id"].to_string()).collect())
            .unwrap_or_default()
    };
    let api_events = wait_for_value(DEADLINE, "the page's events for component tag to be the API's", || async {
        let rows = js(
            browser,
            "return [...document.querySelectorAll('#prov-table tr[data-event]')].map(tr => [tr.dataset.event, tr.dataset.component]);",
        )
        .await;
        let api_events = api(url, &format!("/flows/{id}/provenance?component=tag")).await;
        let rows = rows.as_array()?;
        let shown: BTreeSet<String> = rows
            .iter()
            .filter_map(|r| r[0].as_str().map(str::to_owned))
            .collect();
        if !shown.is_empty() && shown != event_ids(&api_events) {
            click(browser, "#prov-search").await;
            return None;
        }
        (!shown.is_empty() && rows.iter().all(|r| r[1] == "tag")).then_some(api_events)
    })
    .await;
    assert!(
        browser
            .current_url()
            .await
            .unwrap()
            .as_str()
            .contains("component=tag"),
        "the search is in the address"
    );
    // Flow-file ids are cut to 8 characters, the whole id on hover.
    let ids = js(
        browser,
        "return [...document.querySelectorAll('#prov-table tr[data-event]')].map(tr => { const a = tr.querySelector('a[data-id]'); return [a.textContent, a.title, tr.dataset.flowfile]; });",
    )
    .await;
    for row in ids.as_array().expect("rows") {
        let (text, title, full) = (
            row[0].as_str().unwrap_or_default(),
            row[1].as_str().unwrap_or_default(),
            row[2].as_str().unwrap_or_default(),
        );
        assert_eq!(full.len(), 36, "a uuid: {row}");
        assert_eq!(text, format!("{}…", &full[..8]), "{row}");
        assert!(title.starts_with(full), "the whole id on hover: {row}");
    }
    let flowfile = api_events[0]["flowfile"].as_str().unwrap().to_owned();
    click(
        browser,
        &format!(
            "#prov-table tr[data-event=\"{}\"] button",
            api_events[0]["id"]
        ),
    )
    .await;
    let lineage = api(url, &format!("/flows/{id}/flowfiles/{flowfile}/lineage")).await;
    let lineage_nodes: BTreeSet<String> = lineage["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(lineage_nodes.contains(&flowfile));
    wait_for_value(DEADLINE, "the lineage graph's nodes to be the API's", || async {
        let shown = js(
            browser,
            "return [...document.querySelectorAll('#lineage g[data-lineage-node]')].map(g => g.dataset.lineageNode);",
        )
        .await;
        (strings(&shown) == lineage_nodes).then_some(())
    })
    .await;
    screenshot(browser, "provenance").await;

    // A bounded lineage: at depth 0 the flow file alone, its clone left out and counted
    // ("+1"); expanding the flow file fetches its own lineage and merges the clone in.
    let node_ids = |lineage: &Value| -> BTreeSet<String> {
        lineage["nodes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|n| n["id"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let lineage_path =
        |depth: u32| format!("/flows/{id}/flowfiles/{flowfile}/lineage?depth={depth}");
    let alone = api(url, &lineage_path(0)).await;
    assert_eq!(alone["truncated"], true, "{alone:#}");
    let start = alone["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == flowfile.as_str())
        .unwrap();
    assert_eq!(start["more_children"], 1, "the clone: {alone:#}");
    browser
        .goto(&format!(
            "{url}/flows/{id}/provenance?lineage={flowfile}&lineage_depth=0"
        ))
        .await
        .unwrap();
    let node_state = format!(
        "const g = document.querySelector('#lineage g[data-lineage-node=\"{flowfile}\"]'); \
         const s = document.querySelector('#lineage-summary'); \
         return [[...document.querySelectorAll('#lineage g[data-lineage-node]')].map(g => g.dataset.lineageNode), \
                 g && g.dataset.moreChildren, s && s.dataset.truncated, s && s.textContent];"
    );
    wait_for_value(
        DEADLINE,
        "the depth-0 lineage with its flow file's +1",
        || async {
            let shown = js(browser, &node_state).await;
            let alone = api(url, &lineage_path(0)).await;
            (strings(&shown[0]) == node_ids(&alone)
                && shown[1] == "1"
                && shown[2] == "true"
                && shown[3]
                    .as_str()?
                    .contains("more related flow files not shown"))
            .then_some(())
        },
    )
    .await;
    screenshot(browser, "lineage-bounded").await;
    click(browser, &format!("#lineage g[data-expand=\"{flowfile}\"]")).await;
    wait_for_value(
        DEADLINE,
        "the expanded lineage: the clone merged in",
        || async {
            let shown = js(browser, &node_state).await;
            let mut want = node_ids(&api(url, &lineage_path(0)).await);
            want.extend(node_ids(&api(url, &lineage_path(1)).await));
            (strings(&shown[0]) == want && shown[1] == "0" && shown[2] == "false").then_some(())
        },
    )
    .await;
    screenshot(browser, "lineage-expanded").await;

    // Back on the flow page, start both again.
    browser.goto(&format!("{url}/flows/{id}")).await.unwrap();
    for processor in ["generate", "tag"] {
        let button = wait_for_value(DEADLINE, "a start button", || async {
            browser
                .find(Locator::Css(&format!(
                    "#processors-table button[data-action=\"start\"][data-processor-id=\"{processor}\"]:not([disabled])"
                )))
                .await
                .ok()
        })
        .await;
        button.click().await.unwrap();
    }
    wait_for_value(DEADLINE, "every processor running again", || async {
        let flow = api(url, &format!("/flows/{id}")).await;
        flow["processors"]
            .as_array()?
            .iter()
            .all(|p| p["state"] == "running")
            .then_some(())
    })
    .await;
}

#[test]
fn weir_top_once_prints_the_vertices_processors_and_queues_of_a_running_process() {
    let dir = tempfile::tempdir().unwrap();
    let job = start_job();
    let flow = start_flow(dir.path());
    let top = |url: &str| {
        let out = Command::new(weir_bin())
            .args(["top", "--url", url, "--once", "--width", "160"])
            .env("WEIR_UI_TOKEN", TOKEN)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "weir top: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    runtime().block_on(async {
        // The job: every vertex by name, under the job's title.
        let jobs = wait_for_value(DEADLINE, "the job in the API", || async {
            let jobs = api(&job.url, "/jobs").await;
            (jobs.as_array()?.len() == 1).then_some(jobs)
        })
        .await;
        let detail = api(
            &job.url,
            &format!("/jobs/{}", jobs[0]["id"].as_str().unwrap()),
        )
        .await;
        let text = top(&job.url);
        assert!(
            text.starts_with(&format!("weir top · {}\n", job.url)),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "job {} · running",
                jobs[0]["name"].as_str().unwrap()
            )),
            "{text}"
        );
        for v in detail["vertices"].as_array().unwrap() {
            let name = v["name"].as_str().unwrap();
            assert!(
                text.lines().any(|l| l.starts_with(&format!("│{name} "))),
                "vertex {name} in:\n{text}"
            );
        }

        // The flow, stopped so that its queue stays put: the queued count is the API's.
        let flow_id = wait_for_value(DEADLINE, "the flow in the API", || async {
            let flows = api(&flow.url, "/flows").await;
            Some(flows.as_array()?.first()?["id"].as_str()?.to_owned())
        })
        .await;
        wait_for_value(
            DEADLINE,
            "flow files queued before generate → tag",
            || async {
                let f = api(&flow.url, &format!("/flows/{flow_id}")).await;
                (f["connections"][0]["queued_count"].as_u64()? > 0).then_some(())
            },
        )
        .await;
        for processor in ["generate", "tag"] {
            let answer = api_post(
                &flow.url,
                &format!("/flows/{flow_id}/processors/{processor}/stop"),
            )
            .await;
            assert_eq!(answer["state"], "stopped");
        }
        // A trigger that was running when its processor stopped may still commit: compare
        // once the API gives the same count before and after `weir top` read it.
        let queued_now = || async {
            let f = api(&flow.url, &format!("/flows/{flow_id}")).await;
            f["connections"]
                .as_array()?
                .iter()
                .find(|c| c["source"] == "generate")?["queued_count"]
                .as_u64()
        };
        let text = wait_for_value(
            DEADLINE,
            "weir top to show the stopped queue's count",
            || async {
                let before = queued_now().await?;
                let text = top(&flow.url);
                let after = queued_now().await?;
                let line = text.lines().find(|l| l.starts_with("│generate → tag "))?;
                // generate → tag success QUEUED ...
                let shown = line.trim_matches('│').split_whitespace().nth(4)?.to_owned();
                (before == after && shown == before.to_string()).then_some(text)
            },
        )
        .await;
        for (name, state) in [
            ("generate", "stopped"),
            ("tag", "stopped"),
            ("write", "running"),
        ] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("│{name} ")) && l.contains(state)),
                "{name} {state} in:\n{text}"
            );
        }
    });

    // Unhappy paths: a missing and a wrong token, nothing listening, not a URL.
    for token in [None, Some("wrong")] {
        let mut command = Command::new(weir_bin());
        command
            .args(["top", "--url", &job.url, "--once"])
            .env_remove("WEIR_UI_TOKEN");
        if let Some(token) = token {
            command.args(["--token", token]);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("refused the token (401)"), "{err}");
    }
    let out = Command::new(weir_bin())
        .args(["top", "--url", "http://127.0.0.1:1", "--once"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach http://127.0.0.1:1/api/v1/jobs"),
        "{err}"
    );
    let out = Command::new(weir_bin())
        .args(["top", "--url", "localhost:8080", "--once"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--url"));
}
