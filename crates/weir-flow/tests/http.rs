//! ListenHTTP and InvokeHTTP in running flows, on loopback only.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use axum::routing::{any, post};
use support::{Item, Probe, queued, start, try_start, wait_for};
use weir_flow::repository::journal::inspect;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The local addresses (hex, as in /proc/net/tcp*) that listen on `port`.
fn listeners(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (local, state) = (cols[1], cols[3]);
            if state == "0A" && local.ends_with(&format!(":{port:04X}")) {
                out.push(local.to_string());
            }
        }
    }
    out
}

/// Sends raw bytes and returns the status line of the answer.
fn raw_status_line(port: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn listen_http_acknowledges_after_the_commit_and_refuses_under_back_pressure() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    probe.set_closed("sink", true);
    // A free port may be taken by another test between the probe and the listener's bind:
    // try another then.
    let (port, engine) = (0..5)
        .find_map(|_| {
            let port = free_port();
            let yaml = format!(
                r#"flow: listen
groups:
  - name: g
    processors:
      - {{ name: listen, type: ListenHTTP, properties: {{ Listening Port: "{port}", Base Path: ingest }} }}
      - {{ name: sink, type: Recorder, auto_terminate: [success] }}
    connections:
      - {{ from: listen, relationships: [success], to: sink, back_pressure: {{ count: 2 }} }}
"#
            );
            match try_start(&yaml, &probe, dir.path()) {
                Ok(engine) => Some((port, engine)),
                Err(e) if e.contains("Address already in use") => None,
                Err(e) => panic!("the flow does not start: {e}"),
            }
        })
        .expect("a free port within five tries");
    let repo = dir.path().join("repo");
    // Loopback only, by default.
    assert_eq!(
        listeners(port),
        vec![format!("0100007F:{port:04X}")],
        "listens on 127.0.0.1 alone"
    );
    let rt = client_runtime();
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/ingest");
    let post = |body: &'static str| {
        rt.block_on(client.post(&url).header("X-Test", body).body(body).send())
            .unwrap_or_else(|e| panic!("POST {body}: {e:?}"))
            .status()
            .as_u16()
    };
    assert_eq!(post("one"), 200);
    // The 200 came after the commit: the flow file is queued, and its frame is in the
    // journal on disk (read back without the engine's help).
    assert_eq!(queued(&engine, "listen"), 1);
    let on_disk: Vec<(String, u64, u64)> = inspect(&repo).unwrap();
    assert_eq!((on_disk[0].1, on_disk[0].2), (1, 3), "{on_disk:?}");
    assert_eq!(post("two"), 200);
    // Back pressure: the queue holds its threshold; the next request is refused, not
    // stored.
    assert_eq!(post("three"), 503);
    assert_eq!(queued(&engine, "listen"), 2);
    assert_eq!(inspect(&repo).unwrap()[0].1, 2);
    // Bad requests are answered and store nothing.
    let get = rt.block_on(client.get(&url).send()).unwrap().status();
    assert_eq!(get.as_u16(), 405, "GET is not allowed");
    let elsewhere = rt
        .block_on(
            client
                .post(format!("http://127.0.0.1:{port}/other"))
                .body("x")
                .send(),
        )
        .unwrap()
        .status();
    assert_eq!(elsewhere.as_u16(), 404);
    assert!(
        raw_status_line(port, b"THIS IS NOT HTTP\r\n\r\n").contains(" 400 "),
        "garbage gets 400"
    );
    assert_eq!(queued(&engine, "listen"), 2);
    // Room again: the sink runs, the queue drains, requests are taken.
    probe.set_closed("sink", false);
    assert!(wait_for(Duration::from_secs(10), || probe.count("sink") == 2));
    // The probe records a flow file before the sink's session commits; the queue has room
    // only once that commit has taken both off it.
    assert!(wait_for(Duration::from_secs(10), || queued(
        &engine, "listen"
    ) == 0));
    // A client of its own: the server answers before reading the whole body and closes
    // that connection, which must not be reused for the next request.
    let too_big = rt
        .block_on(
            reqwest::Client::new()
                .post(&url)
                .body(vec![b'x'; 3 << 20])
                .send(),
        )
        .unwrap()
        .status();
    assert_eq!(too_big.as_u16(), 413, "a body over the limit is refused");
    assert_eq!(post("four"), 200);
    assert!(wait_for(Duration::from_secs(10), || probe.count("sink") == 3));
    let got: Vec<(String, String)> = probe
        .recorded("sink")
        .iter()
        .map(|r| {
            (
                String::from_utf8(r.content.clone()).unwrap(),
                r.attr("http.headers.x-test").to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [("one", "one"), ("two", "two"), ("four", "four")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    engine.stop().unwrap();
    assert!(listeners(port).is_empty(), "the listener is closed at stop");
}

#[test]
fn listen_http_refuses_a_non_loopback_address_at_validation() {
    let yaml = "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: l\n        type: ListenHTTP\n        properties:\n          Listening Port: \"8080\"\n          Listening Address: 0.0.0.0\n        auto_terminate: [success]\n";
    let err = weir_flow::definition::Flow::parse(yaml, "x.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("x.yaml:9:"), "{err}");
    assert!(err.contains("only loopback"), "{err}");
}

#[test]
fn invoke_http_routes_by_status_and_sets_attributes() {
    // The remote service: an axum server on loopback.
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = server
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = Router::new()
        .route(
            "/echo",
            post(|body: Bytes| async move {
                let mut out = b"echo:".to_vec();
                out.extend_from_slice(&body);
                out
            }),
        )
        .route(
            "/status/{code}",
            any(|UrlPath(code): UrlPath<u16>| async move {
                (
                    StatusCode::from_u16(code).unwrap(),
                    format!("status {code}"),
                )
            }),
        );
    server.spawn(async move { axum::serve(listener, app).await });
    let closed = free_port();

    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: invoke
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - name: call
        type: InvokeHTTP
        penalty: 50 ms
        properties: { HTTP Method: POST, HTTP URL: '${base}/${path}', Connection Timeout: 2 s, Read Timeout: 5 s }
      - { name: original, type: Recorder, auto_terminate: [success] }
      - { name: response, type: Recorder, auto_terminate: [success] }
      - { name: retry, type: Recorder, auto_terminate: [success] }
      - { name: no-retry, type: Recorder, auto_terminate: [success] }
      - { name: failure, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: call }
      - { from: call, relationships: [Original], to: original }
      - { from: call, relationships: [Response], to: response }
      - { from: call, relationships: [Retry], to: retry }
      - { from: call, relationships: [No Retry], to: no-retry }
      - { from: call, relationships: [Failure], to: failure }
"#;
    let engine = start(yaml, &probe, dir.path());
    let base = format!("http://127.0.0.1:{port}");
    let down = format!("http://127.0.0.1:{closed}");
    let cases = [
        ("ok", base.as_str(), "echo"),
        ("e500", &base, "status/500"),
        ("e503", &base, "status/503"),
        ("e404", &base, "status/404"),
        ("e400", &base, "status/400"),
        ("refused", &down, "echo"),
        ("bad-url", "not a url", "x"),
    ];
    probe.feed(
        "feed",
        cases
            .iter()
            .map(|(n, b, p)| Item::new(n, &[("name", n), ("base", b), ("path", p)])),
    );
    let rels = ["original", "response", "retry", "no-retry", "failure"];
    assert!(wait_for(Duration::from_secs(20), || rels
        .iter()
        .map(|r| probe.count(r))
        .sum::<usize>()
        == 8));
    let names = |rel: &str| -> BTreeMap<String, support::Recorded> {
        probe
            .recorded(rel)
            .into_iter()
            .map(|r| (r.attr("name").to_string(), r))
            .collect()
    };
    let (original, response, retry, no_retry, failure) = (
        names("original"),
        names("response"),
        names("retry"),
        names("no-retry"),
        names("failure"),
    );
    // 2xx: the original, and the response as a new flow file.
    assert_eq!(original.keys().collect::<Vec<_>>(), ["ok"]);
    let ok = &original["ok"];
    assert_eq!(ok.attr("invokehttp.status.code"), "200");
    assert_eq!(ok.attr("invokehttp.request.url"), format!("{base}/echo"));
    assert_eq!(ok.content, b"ok", "the original keeps its content");
    assert_eq!(response.keys().collect::<Vec<_>>(), ["ok"]);
    assert_eq!(response["ok"].content, b"echo:ok");
    assert_eq!(response["ok"].attr("invokehttp.status.code"), "200");
    assert_ne!(response["ok"].attr("uuid"), ok.attr("uuid"));
    // 5xx: Retry; other statuses: No Retry; each with its status code.
    assert_eq!(retry.keys().collect::<Vec<_>>(), ["e500", "e503"]);
    assert_eq!(retry["e503"].attr("invokehttp.status.code"), "503");
    assert_eq!(no_retry.keys().collect::<Vec<_>>(), ["e400", "e404"]);
    assert_eq!(no_retry["e404"].attr("invokehttp.status.code"), "404");
    // No answer at all: Failure, with the cause.
    assert_eq!(failure.keys().collect::<Vec<_>>(), ["bad-url", "refused"]);
    for f in failure.values() {
        assert!(!f.attr("invokehttp.java.exception.message").is_empty());
        assert_eq!(f.attr("invokehttp.status.code"), "");
    }
    engine.stop().unwrap();
}
