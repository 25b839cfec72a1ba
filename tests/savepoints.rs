//! Savepoints from the command line, as a Flink user takes them: `weir nexmark run
//! --state-dir DIR --savepoint` stopped by SIGINT keeps a savepoint and exits 0; the same
//! command resumes from it; `--restore-from ID|PATH` goes back to an older one; `weir
//! snapshots list` marks savepoints; bad `--restore-from` values are refused before anything
//! is removed. Every run that completes must end with the rows of an uninterrupted run.
//!
//! Nothing waits on a timer to synchronise: a signal is sent once the state directory holds
//! the snapshots the test needs, polled for.

mod support;

use support::{nexmark_events, sorted_lines, stderr, stdout, weir};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A JSON Lines event file whose event time spans many q5 windows.
fn events(dir: &Path, count: u64) -> PathBuf {
    nexmark_events(dir, count, &[])
}

/// A q5 run over `input` into `output` with snapshots every 20 ms in `state`, paced at
/// 20,000 events/s so that it runs long enough to be stopped.
fn run_args(input: &Path, output: &Path, state: &Path) -> Vec<String> {
    [
        "nexmark",
        "run",
        "--query",
        "q5",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--parallelism",
        "2",
        "--state-dir",
        state.to_str().unwrap(),
        "--snapshot-interval-ms",
        "20",
        "--wall-rate",
        "20000",
    ]
    .map(String::from)
    .to_vec()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Complete snapshot folders under `state/<folder>` (`snapshots` or `savepoints`).
fn complete(state: &Path, folder: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for job in std::fs::read_dir(state.join(folder)).into_iter().flatten() {
        for snap in std::fs::read_dir(job.unwrap().path()).into_iter().flatten() {
            let snap = snap.unwrap().path();
            if snap.join("manifest").exists() {
                found.push(snap);
            }
        }
    }
    found.sort();
    found
}

/// Runs `args`, and once `state` holds `snapshots` more complete snapshots than it did,
/// sends SIGINT; returns the process's output.
fn interrupt_after(args: &[String], state: &Path, snapshots: usize) -> Output {
    let before = complete(state, "snapshots")
        .last()
        .cloned()
        .unwrap_or_default();
    let child: Child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env_remove("WEIR_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    while complete(state, "snapshots")
        .iter()
        .filter(|s| **s > before)
        .count()
        < snapshots
    {
        assert!(Instant::now() < deadline, "no snapshots appeared");
        std::thread::yield_now();
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    child.wait_with_output().unwrap()
}

/// The id of the savepoint that `o`'s standard error says the run stopped with.
fn stopped_with(o: &Output) -> u64 {
    let text = stderr(o);
    assert!(
        o.status.success(),
        "a stop with a savepoint exits 0: {text}"
    );
    let rest = text
        .split("stopped with savepoint ")
        .nth(1)
        .unwrap_or_else(|| panic!("no savepoint reported: {text}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// `o` succeeded, and resumed from snapshot `id`.
fn assert_resumed_from(o: &Output, id: u64) {
    assert!(o.status.success(), "{}", stderr(o));
    assert!(
        stderr(o).contains(&format!("resumed from snapshot {id} ")),
        "{}",
        stderr(o)
    );
}

/// The rows of q5 over `input` without snapshots.
fn reference_rows(input: &Path, dir: &Path) -> Vec<String> {
    let output = dir.join("reference.csv");
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q5",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    sorted_lines(&output)
}

#[test]
fn sigint_with_savepoint_stops_and_the_same_command_resumes_to_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 60_000);
    let want = reference_rows(&input, dir.path());
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let mut args = run_args(&input, &output, &state);
    args.push("--savepoint".into());

    let o = interrupt_after(&args, &state, 2);
    let id = stopped_with(&o);
    assert!(!output.exists(), "stopped mid-run: no output yet");
    let kept = complete(&state, "savepoints");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].ends_with(format!("{id:010}")), "{kept:?}");
    assert!(
        stderr(&o).contains(kept[0].to_str().unwrap()),
        "{}",
        stderr(&o)
    );

    let listed = weir(&["snapshots", "list", "--state-dir", state.to_str().unwrap()]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(
        text.contains(&format!("snapshot {id}: taken")) && text.contains(", savepoint; ok"),
        "{text}"
    );
    assert!(text.contains("savepoints of job nexmark-q5-"), "{text}");

    let o = weir(&strs(&args));
    assert_resumed_from(&o, id);
    assert_eq!(sorted_lines(&output), want);
    // A completed run removes its snapshots, never its savepoints.
    assert!(complete(&state, "snapshots").is_empty());
    assert_eq!(complete(&state, "savepoints"), kept);

    // Once the job completed, its output is whole and the parts a restore would cut back to
    // are gone: restoring the savepoint now fails naming the file, and the output stays.
    let mut late = run_args(&input, &output, &state);
    late.extend(["--restore-from".into(), id.to_string()]);
    let o = weir(&strs(&late));
    if !o.status.success() {
        assert!(stderr(&o).contains("is missing"), "{}", stderr(&o));
    }
    assert_eq!(sorted_lines(&output), want);
}

#[test]
fn restore_from_an_older_savepoint_by_path_rewinds_to_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 60_000);
    let want = reference_rows(&input, dir.path());
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let mut args = run_args(&input, &output, &state);
    args.push("--savepoint".into());

    let first = stopped_with(&interrupt_after(&args, &state, 2));
    let second = stopped_with(&interrupt_after(&args, &state, 3));
    assert!(second > first, "{second} after {first}");
    let kept = complete(&state, "savepoints");
    assert_eq!(kept.len(), 2, "{kept:?}");

    // Back to the first: the output committed after it is cut back, and the run ends with
    // every row exactly once.
    let mut restore = run_args(&input, &output, &state);
    restore.extend(["--restore-from".into(), kept[0].display().to_string()]);
    let o = weir(&strs(&restore));
    assert_resumed_from(&o, first);
    assert_eq!(sorted_lines(&output), want);
    assert_eq!(complete(&state, "savepoints"), kept, "savepoints stay");
}

#[test]
fn restore_from_an_id_of_a_savepoint_and_bad_values_are_refused_before_anything_goes() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 60_000);
    let want = reference_rows(&input, dir.path());
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let mut args = run_args(&input, &output, &state);
    args.push("--savepoint".into());
    let id = stopped_with(&interrupt_after(&args, &state, 2));
    let snapshots_before = complete(&state, "snapshots");
    assert!(!snapshots_before.is_empty());

    let base = run_args(&input, &output, &state);
    let refused = |extra: &[&str], says: &str| {
        let mut a = strs(&base);
        a.extend(extra);
        let o = weir(&a);
        assert!(!o.status.success(), "{extra:?} must be refused");
        assert!(stderr(&o).contains(says), "{extra:?}: {}", stderr(&o));
        assert_eq!(
            complete(&state, "snapshots"),
            snapshots_before,
            "{extra:?}: nothing removed"
        );
    };
    refused(
        &["--restore-from", "999999"],
        "no complete snapshot or savepoint 999999",
    );
    refused(
        &["--restore-from", "/nonexistent/x"],
        "no such snapshot folder",
    );
    let not_a_snapshot = dir.path().to_str().unwrap().to_string();
    refused(
        &["--restore-from", &not_a_snapshot],
        "not a snapshot folder",
    );
    // A damaged savepoint: a part cut short.
    let kept = complete(&state, "savepoints").pop().unwrap();
    let part = std::fs::read_dir(&kept)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "part"))
        .unwrap();
    let bytes = std::fs::read(&part).unwrap();
    std::fs::write(&part, &bytes[..bytes.len() / 2]).unwrap();
    refused(&["--restore-from", &id.to_string()], "damaged");
    std::fs::write(&part, &bytes).unwrap();
    // Without --state-dir the parser refuses it.
    let o = weir(&["nexmark", "run", "--query", "q5", "--restore-from", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--state-dir"), "{}", stderr(&o));

    // By id, the savepoint restores.
    let mut restore = run_args(&input, &output, &state);
    restore.extend(["--restore-from".into(), id.to_string()]);
    let o = weir(&strs(&restore));
    assert_resumed_from(&o, id);
    assert_eq!(sorted_lines(&output), want);
}

/// A paced `weir nexmark run` over generated events with the dashboard on a free port, its
/// standard error read line by line; returns the child, the lines and the dashboard's URL.
fn with_ui(extra: &[&str]) -> (Child, std::sync::mpsc::Receiver<String>, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "nexmark",
            "run",
            "--query",
            "q5",
            "--events",
            "100000000",
            "--wall-rate",
            "20000",
            "--ui",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env_remove("WEIR_UI_TOKEN")
        .env_remove("WEIR_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let url = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the dashboard's URL on standard error");
        if let Some(url) = line.strip_prefix("weir: dashboard at ") {
            break url.trim_end_matches('/').to_string();
        }
    };
    (child, lines, url)
}

/// POSTs `/api/v1/jobs/{id}/stop` to the one job at `url` once it is registered; the status
/// and the JSON body.
fn stop_over_http(url: &str) -> (u16, serde_json::Value) {
    weir::async_io::runtime().unwrap().block_on(async {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let id = loop {
            let jobs: serde_json::Value = client
                .get(format!("{url}/api/v1/jobs"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if let Some(id) = jobs[0]["id"].as_str() {
                break id.to_string();
            }
            assert!(Instant::now() < deadline, "no job registered");
            tokio::task::yield_now().await;
        };
        let response = client
            .post(format!("{url}/api/v1/jobs/{id}/stop"))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    })
}

#[test]
fn the_rest_api_stops_a_job_with_a_savepoint_and_refuses_one_without_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (mut child, lines, url) = with_ui(&["--state-dir", state.to_str().unwrap()]);
    let (status, body) = stop_over_http(&url);
    assert_eq!(status, 200, "{body}");
    let id = body["savepoint_id"].as_u64().unwrap();
    let location = body["location"].as_str().unwrap();
    assert!(Path::new(location).join("manifest").exists(), "{body}");
    assert_eq!(complete(&state, "savepoints").len(), 1);
    let code = child.wait().unwrap();
    let said: Vec<String> = lines.try_iter().collect();
    assert!(code.success(), "a stop with a savepoint exits 0: {said:?}");
    assert!(
        said.iter()
            .any(|l| l.starts_with(&format!("stopped with savepoint {id} in "))),
        "{said:?}"
    );

    // Without --state-dir there is nowhere to keep one: 409, and the job goes on.
    let (mut child, _lines, url) = with_ui(&[]);
    let (status, body) = stop_over_http(&url);
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("takes no savepoints"),
        "{body}"
    );
    assert!(child.try_wait().unwrap().is_none(), "the job goes on");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn weir_jobs_lists_and_stops_a_job_with_a_savepoint() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (mut child, lines, url) = with_ui(&["--state-dir", state.to_str().unwrap()]);
    // Registered a moment after the server listens.
    let deadline = Instant::now() + Duration::from_secs(60);
    let listed = loop {
        let o = weir(&["jobs", "list", "--url", &url]);
        assert!(o.status.success(), "{}", stderr(&o));
        if !stdout(&o).is_empty() {
            break stdout(&o);
        }
        assert!(Instant::now() < deadline, "no job listed");
        std::thread::yield_now();
    };
    assert!(
        listed.contains("\tRunning\t") && listed.contains("nexmark-q5-generated"),
        "{listed}"
    );

    let o = weir(&["jobs", "stop", "nope", "--url", &url, "--savepoint"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no job `nope`; the jobs are: "),
        "{}",
        stderr(&o)
    );

    let o = weir(&["jobs", "stop", "nexmark-q5", "--url", &url, "--savepoint"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stdout(&o);
    assert!(said.contains("stopping with savepoint "), "{said}");
    let kept = complete(&state, "savepoints");
    assert_eq!(kept.len(), 1);
    assert!(
        said.contains(kept[0].file_name().unwrap().to_str().unwrap()),
        "{said}"
    );
    assert!(child.wait().unwrap().success());
    let errors: Vec<String> = lines.try_iter().collect();
    assert!(
        errors
            .iter()
            .any(|l| l.starts_with("stopped with savepoint ")),
        "{errors:?}"
    );
}
