//! `weir score` against the model server of `weir_cli::model_server`, run in this process;
//! the `weir` binary runs as a child, as a user runs it.
//!
//! No test waits on a timer: where a timeout must fire, the server takes 2 s and the client
//! allows 50 ms; nothing else depends on timing.

mod support;

use support::{stderr, stdout, weir};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use weir_cli::model_server::{Failure, ServerConfig, ServerHandle, linear_score, serve};

fn server(config: ServerConfig) -> ServerHandle {
    serve(config).expect("the model server starts").1
}

/// Row `i`'s features: three columns, the first never negative.
fn features(i: usize) -> [f64; 3] {
    [(i % 13) as f64 * 0.5, (i % 7) as f64, -((i % 3) as f64)]
}

/// Writes `n` rows `r0..` with an `id` column in the middle, and returns the path.
fn input(dir: &Path, n: usize) -> PathBuf {
    let mut text = String::from("a,id,b,c\n");
    for i in 0..n {
        let [a, b, c] = features(i);
        text.push_str(&format!("{a},r{i},{b},{c}\n"));
    }
    let path = dir.join("rows.csv");
    std::fs::write(&path, text).unwrap();
    path
}

fn read_scores(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).expect("output written");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,score"));
    lines
        .map(|l| {
            let (id, score) = l.split_once(',').expect("id,score");
            (
                id.to_string(),
                score.trim_matches('"').replace("\"\"", "\""),
            )
        })
        .collect()
}

/// What the output must hold for row `i`: the model's score as JSON number text.
fn expected(i: usize) -> (String, String) {
    // The reader passes the features in header order, without the id: a, b, c.
    (
        format!("r{i}"),
        serde_json::json!(linear_score(&features(i))).to_string(),
    )
}

fn score(url: &str, input: &Path, output: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "score",
        "--input",
        input.to_str().unwrap(),
        "--url",
        url,
        "--output",
        output.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    weir(&args)
}

#[test]
fn every_id_gets_its_score_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let rows = input(dir.path(), 2000);
    let out = dir.path().join("scores.csv");
    let srv = server(ServerConfig::default());
    let o = score(
        &srv.url("demo"),
        &rows,
        &out,
        &["--batch-size", "16", "--parallelism", "4"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        read_scores(&out),
        (0..2000).map(expected).collect::<Vec<_>>()
    );
    let summary = stdout(&o);
    assert!(
        summary.starts_with("score: 2000 rows scored in "),
        "{summary}"
    );
    assert!(
        summary.contains("rows/s") && summary.contains("0 bad rows skipped"),
        "{summary}"
    );
    assert_eq!(srv.stats().rows, 2000);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn unordered_scoring_writes_every_id_once() {
    let dir = tempfile::tempdir().unwrap();
    let rows = input(dir.path(), 1500);
    let out = dir.path().join("scores.csv");
    let srv = server(ServerConfig {
        latency: Duration::from_millis(1),
        ..Default::default()
    });
    let o = score(
        &srv.url("demo"),
        &rows,
        &out,
        &["--batch-size", "7", "--unordered"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let mut got = read_scores(&out);
    got.sort();
    let mut want: Vec<_> = (0..1500).map(expected).collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn a_list_prediction_is_written_as_its_json_text() {
    let dir = tempfile::tempdir().unwrap();
    let rows = input(dir.path(), 3);
    let out = dir.path().join("scores.csv");
    let srv = server(ServerConfig {
        outputs: 2,
        ..Default::default()
    });
    let o = score(&srv.url("demo"), &rows, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = read_scores(&out);
    let s = linear_score(&features(1));
    assert_eq!(
        got[1],
        (
            "r1".to_string(),
            serde_json::json!([s, s * 2.0]).to_string()
        )
    );
}

#[test]
fn in_flight_rows_never_exceed_parallelism_times_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    let rows = input(dir.path(), 3000);
    let out = dir.path().join("scores.csv");
    let srv = server(ServerConfig {
        latency: Duration::from_millis(2),
        ..Default::default()
    });
    let o = score(
        &srv.url("demo"),
        &rows,
        &out,
        &["--batch-size", "10", "--parallelism", "3"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_scores(&out).len(), 3000);
    let stats = srv.stats();
    assert!(stats.max_in_flight_rows <= 30, "{stats:?}");
    assert!(stats.requests >= 300, "{stats:?}");
}

#[test]
fn a_failed_batch_ends_the_run_with_one_line_naming_its_first_id() {
    let dir = tempfile::tempdir().unwrap();
    let n = 50_000;
    let poison = 1000;
    let mut text = String::from("id,a\n");
    for i in 0..n {
        text.push_str(&format!("r{i},{}\n", if i == poison { -1.0 } else { 1.0 }));
    }
    let rows = dir.path().join("rows.csv");
    std::fs::write(&rows, text).unwrap();
    let out = dir.path().join("scores.csv");
    let srv = server(ServerConfig {
        failure: Failure::Poison {
            value: -1.0,
            status: 500,
        },
        ..Default::default()
    });
    // A long max wait keeps the batches aligned on multiples of 16: row 1000 is in the
    // batch that starts at row 992.
    let o = score(
        &srv.url("demo"),
        &rows,
        &out,
        &[
            "--batch-size",
            "16",
            "--parallelism",
            "2",
            "--retries",
            "1",
            "--max-wait-ms",
            "600000",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("error: scoring failed: batch of 16 item(s) starting with id r992 failed after 2 attempt(s): HTTP 500"),
        "{e}"
    );
    assert!(!out.exists(), "no partial output");
    let stats = srv.stats();
    assert_eq!(stats.failed, 2, "the first call and its retry");
    assert!(
        stats.rows < n as u64 / 2,
        "reading stopped early: {stats:?}"
    );
}

#[test]
fn a_transient_outage_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let rows = input(dir.path(), 100);
    let out = dir.path().join("scores.csv");
    let srv = server(ServerConfig {
        failure: Failure::FirstRequests {
            count: 2,
            status: 503,
        },
        ..Default::default()
    });
    let o = score(
        &srv.url("demo"),
        &rows,
        &out,
        &["--parallelism", "1", "--retries", "3"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        read_scores(&out),
        (0..100).map(expected).collect::<Vec<_>>()
    );
    assert_eq!(srv.stats().failed, 2);
}

#[test]
fn a_timeout_after_the_retries_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let rows = input(dir.path(), 5);
    let out = dir.path().join("scores.csv");
    let srv = server(ServerConfig {
        latency: Duration::from_secs(2),
        ..Default::default()
    });
    let o = score(
        &srv.url("demo"),
        &rows,
        &out,
        &["--timeout-ms", "50", "--retries", "1"],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("starting with id r0 failed after 2 attempt(s)") && e.contains("timed out"),
        "{e}"
    );
    assert!(!out.exists());
}

#[test]
fn bad_rows_are_counted_and_reported_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.csv");
    std::fs::write(
        &rows,
        "id,a,b\nr0,1,2\nr1,oops,2\nr2,3\n,1,1\nr4,inf,1\nr5,2,2\n",
    )
    .unwrap();
    let out = dir.path().join("scores.csv");
    let srv = server(ServerConfig::default());
    let o = score(&srv.url("demo"), &rows, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        read_scores(&out),
        [
            ("r0".to_string(), "5.0".to_string()),
            ("r5".to_string(), "6.0".to_string())
        ]
    );
    let e = stderr(&o);
    let name = rows.display();
    for warning in [
        format!("warning: {name}:3: skipped: column 'a': 'oops' is not a finite number"),
        format!("warning: {name}:4: skipped: expected 3 fields, found 2"),
        format!("warning: {name}:5: skipped: the id is empty"),
        format!("warning: {name}:6: skipped: column 'a': 'inf' is not a finite number"),
    ] {
        assert!(e.contains(&warning), "missing {warning:?} in {e}");
    }
    assert!(stdout(&o).contains("4 bad rows skipped"), "{}", stdout(&o));
}

#[test]
fn an_input_without_an_id_column_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.csv");
    std::fs::write(&rows, "key,a\nr0,1\n").unwrap();
    let out = dir.path().join("scores.csv");
    let o = score("http://127.0.0.1:9/v1/models/m:predict", &rows, &out, &[]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("has no 'id' column; its columns are: key, a"),
        "{e}"
    );
}

#[test]
fn the_model_server_subcommand_serves_on_loopback() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["model-server", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("weir model-server runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .strip_prefix("serving http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("unexpected banner {line:?}"))
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let rows = input(dir.path(), 10);
    let out = dir.path().join("scores.csv");
    let o = score(
        &format!("http://{addr}/v1/models/demo:predict"),
        &rows,
        &out,
        &[],
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_scores(&out).len(), 10);
}
