//! ListenHTTP → UpdateAttribute → PutFile under kill -9: 16 clients post 3,000 bodies of 0 to
//! 3 KB while the flow is killed with SIGKILL five times and started again. Every body
//! answered 200 ends in an output file, byte for byte: a 200 means the body was durable.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn flow_yaml(port: u16, out: &Path) -> String {
    format!(
        r#"flow: http-kill
groups:
  - name: main
    processors:
      - name: listen
        type: ListenHTTP
        properties: {{ Listening Port: "{port}", Base Path: bodies }}
      - name: name
        type: UpdateAttribute
        properties:
          filename: ${{http.headers.x-body-id}}
      - name: write
        type: PutFile
        properties: {{ Directory: "{out}", Conflict Resolution Strategy: replace }}
        auto_terminate: [success, failure]
    connections:
      - {{ from: listen, relationships: [success], to: name }}
      - {{ from: name, relationships: [success], to: write }}
"#,
        out = out.display()
    )
}

fn start(flow: &Path, repo: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["flow", "run"])
        .arg(flow)
        .arg("--repo")
        .arg(repo)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Body `id`: 0 to 3 KB, its own bytes, some of them not text.
fn body(id: usize) -> Vec<u8> {
    let len = (id * 7919) % 3073;
    (0..len).map(|i| ((i * 31 + id * 17) % 251) as u8).collect()
}

#[test]
fn bodies_answered_200_survive_five_kill_9s() {
    const CLIENTS: usize = 16;
    const BODIES: usize = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let (out, repo, flow) = (
        dir.path().join("out"),
        dir.path().join("repo"),
        dir.path().join("flow.yaml"),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    fs::write(&flow, flow_yaml(port, &out)).unwrap();
    let mut child = start(&flow, &repo);
    let acknowledged: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/bodies");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (url, acknowledged) = (url.clone(), Arc::clone(&acknowledged));
            runtime.spawn(async move {
                let http = reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap();
                for id in (c..BODIES).step_by(CLIENTS) {
                    // Each body is tried until it is answered 200: refused connections and
                    // cut requests (a kill) and 503s (starting, stopping) are tried again.
                    let deadline = Instant::now() + Duration::from_secs(120);
                    loop {
                        let sent = http
                            .post(&url)
                            .header("x-body-id", format!("body-{id:05}"))
                            .body(body(id))
                            .send()
                            .await;
                        if sent.is_ok_and(|r| r.status() == reqwest::StatusCode::OK) {
                            acknowledged.lock().unwrap().push(id);
                            break;
                        }
                        assert!(Instant::now() < deadline, "body {id} never answered 200");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            })
        })
        .collect();
    // Five kills at moments spread over the posting, each after some bodies were answered.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for kill in 0..5 {
        let before = acknowledged.lock().unwrap().len();
        let wait_until = Instant::now() + Duration::from_secs(60);
        while acknowledged.lock().unwrap().len() < before + 100 + kill * 50 {
            assert!(
                Instant::now() < wait_until,
                "no progress before kill {kill}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(seed % 150));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        child = start(&flow, &repo);
    }
    for c in clients {
        runtime.block_on(c).unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert_eq!(acknowledged.len(), BODIES);
    // Every body reaches its file once the flow drains.
    let expected: BTreeMap<String, Vec<u8>> = acknowledged
        .iter()
        .map(|&id| (format!("body-{id:05}"), body(id)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let written = fs::read_dir(&out).map_or(0, |d| d.count());
        if written >= expected.len() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    assert!(child.wait().unwrap().success());
    let mut got = BTreeMap::new();
    for e in fs::read_dir(&out).unwrap() {
        let e = e.unwrap();
        got.insert(
            e.file_name().to_string_lossy().into_owned(),
            fs::read(e.path()).unwrap(),
        );
    }
    let missing: Vec<&String> = expected.keys().filter(|k| !got.contains_key(*k)).collect();
    assert!(
        missing.is_empty(),
        "{} bodies lost: {missing:?}",
        missing.len()
    );
    for (name, data) in &expected {
        assert!(got[name] == *data, "{name} differs from its body");
    }
    let extra: Vec<&String> = got.keys().filter(|k| !expected.contains_key(*k)).collect();
    assert!(extra.is_empty(), "unexpected files: {extra:?}");
}
