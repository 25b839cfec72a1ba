//! `weir flow run` killed with SIGKILL while a queue is swapped out, then run to idle: the
//! count and the priority order of what comes out are exact.

mod support;

use support::command as weir;

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Lines in the input file: each becomes one flow file in the swapped queue.
const LINES: u64 = 15_000;
/// The priority of line `i` is `i * STRIDE mod LINES`, a permutation (STRIDE is prime and
/// does not divide LINES), so the priority order is nothing like the arrival order.
const STRIDE: u64 = 7_919;

/// The flow; `write_schedule` holds PutFile back in the first run.
fn flow_yaml(input: &Path, out: &Path, write_schedule: &str) -> String {
    format!(
        r#"flow: swap-kill
groups:
  - name: main
    processors:
      - name: read
        type: GetFile
        properties: {{ Input Directory: "{input}" }}
      - name: split
        type: SplitText
        properties: {{ Line Split Count: "1" }}
        auto_terminate: [original, failure]
      - name: rank
        type: UpdateAttribute
        properties:
          priority: ${{fragment.index:multiply({STRIDE}):mod({LINES})}}
          filename: line-${{fragment.index}}
      - name: write
        type: PutFile
        schedule: {write_schedule}
        properties: {{ Directory: "{out}", Conflict Resolution Strategy: replace }}
        auto_terminate: [success, failure]
    connections:
      - {{ from: read, relationships: [success], to: split }}
      - {{ from: split, relationships: [splits], to: rank, back_pressure: {{ count: 100000 }} }}
      - {{ from: rank, relationships: [success], to: write, swap_threshold: 1000, prioritizers: [PriorityAttribute], back_pressure: {{ count: 100000 }} }}
"#,
        input = input.display(),
        out = out.display()
    )
}

/// The swapped connection's (count, swapped) from the status file a running flow writes.
fn swapped_queue(repo: &Path) -> Option<(u64, u64)> {
    let text = fs::read_to_string(repo.join("status.json")).ok()?;
    let status: serde_json::Value = serde_json::from_str(&text).ok()?;
    let c = status["connections"]
        .as_array()?
        .iter()
        .find(|c| c["key"] == "rank[success]->write")?;
    Some((c["count"].as_u64()?, c["swapped"].as_u64()?))
}

#[test]
fn kill_9_while_swapped_then_exact_count_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let (input, out, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    fs::create_dir_all(&input).unwrap();
    let text: String = (1..=LINES).map(|i| format!("line {i}\n")).collect();
    fs::write(input.join("lines.txt"), text).unwrap();
    // First run: PutFile is held back by a CRON that fires on 29 February at midnight only,
    // so every line queues up in front of it, 10,000 of them in a swap file.
    let held = dir.path().join("held.yaml");
    fs::write(
        &held,
        flow_yaml(
            &input,
            &out,
            r#"{ strategy: cron, expression: "0 0 0 29 2 ?" }"#,
        ),
    )
    .unwrap();
    let mut child = weir()
        .args(["flow", "run"])
        .arg(&held)
        .arg("--repo")
        .arg(&repo)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = None;
    while Instant::now() < deadline {
        seen = swapped_queue(&repo);
        if seen.is_some_and(|(count, swapped)| count == LINES && swapped >= 10_000) {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the first run ended by itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL, with the queue swapped out
    child.wait().unwrap();
    let (count, swapped) = seen.expect("a status file");
    assert_eq!(count, LINES, "every line queued before the kill");
    assert!(swapped >= 10_000, "swapped out before the kill: {swapped}");
    assert!(
        fs::read_dir(repo.join("flowfiles/swap")).unwrap().count() >= 1,
        "a swap file on disk"
    );

    // Rerun with PutFile scheduled as fast as possible, to idle.
    let free = dir.path().join("free.yaml");
    fs::write(
        &free,
        flow_yaml(&input, &out, "{ strategy: timer, period: 0 ms }"),
    )
    .unwrap();
    let status = weir()
        .args(["flow", "run"])
        .arg(&free)
        .arg("--repo")
        .arg(&repo)
        .arg("--until-idle")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());

    // Exact count and content.
    let names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len() as u64, LINES);
    for i in [1, 2, LINES / 2, LINES] {
        assert_eq!(
            fs::read_to_string(out.join(format!("line-{i}"))).unwrap(),
            format!("line {i}")
        );
    }
    assert_eq!(fs::read_dir(&input).unwrap().count(), 0);
    // Exact order: PutFile's SEND events, in commit order, go by priority.
    let sends = weir()
        .args(["flow", "provenance", "--repo"])
        .arg(&repo)
        .args([
            "--component",
            "write",
            "--type",
            "SEND",
            "--limit",
            "100000",
        ])
        .output()
        .unwrap();
    assert!(sends.status.success());
    let mut events: Vec<(u64, u64)> = String::from_utf8_lossy(&sends.stdout)
        .lines()
        .map(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap();
            let priority = e["attributes"]["priority"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            (e["id"].as_u64().unwrap(), priority)
        })
        .collect();
    events.sort_unstable();
    let priorities: Vec<u64> = events.iter().map(|(_, p)| *p).collect();
    let expected: Vec<u64> = (0..LINES).collect();
    assert_eq!(priorities.len() as u64, LINES, "one SEND per line");
    let first_wrong = priorities.iter().zip(&expected).position(|(a, b)| a != b);
    assert_eq!(
        first_wrong, None,
        "priority order across the swap and the kill"
    );
}
