//! Surviving kill -9: `weir nexmark run --state-dir` is killed at random moments and rerun,
//! and its final output must equal an uninterrupted run's (after sorting lines, since the
//! rows of a window come in no fixed order). Also: a damaged newest snapshot is skipped with
//! a warning naming its file, a changed pipeline is refused naming the vertex, and
//! `weir snapshots list` shows what is kept.
//!
//! `WEIR_KILL9_ROUNDS` sets the kills per query (default 5: 20 over the four queries);
//! `WEIR_KILL9_SEED` replays a run's random delays (each run prints its seed).
//!
//! Nothing waits on a timer to synchronise: kills come after random delays (that is the
//! point), and where a test needs snapshots to exist it polls the state directory for them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env_remove("WEIR_LOG")
        .output()
        .expect("weir runs")
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env_remove("WEIR_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("weir starts")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn kill9(child: &mut Child) {
    // SIGKILL: no destructor, no flush, no cleanup runs.
    let _ = child.kill();
    let _ = child.wait();
}

/// xorshift64*: reproducible random delays without a dependency.
struct Rng(u64);

impl Rng {
    fn new() -> Self {
        let seed = std::env::var("WEIR_KILL9_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        println!("WEIR_KILL9_SEED={seed}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// A JSON Lines event file with enough event time for many windows, written by the CLI.
fn events(dir: &Path, count: u64) -> PathBuf {
    let path = dir.join("events.jsonl");
    let o = weir(&[
        "nexmark",
        "generate",
        "--events",
        &count.to_string(),
        "--rate",
        "2000",
        "--out-of-order-ms",
        "500",
        "--output",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    path
}

fn sorted_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

fn run_args<'a>(query: &'a str, input: &'a str, output: &'a str, state: &'a str) -> Vec<&'a str> {
    vec![
        "nexmark",
        "run",
        "--query",
        query,
        "--input",
        input,
        "--output",
        output,
        "--parallelism",
        "2",
        "--state-dir",
        state,
        "--snapshot-interval-ms",
        "20",
    ]
}

/// The complete snapshots (with a manifest) in `state`, oldest first.
fn complete_snapshots(state: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(jobs) = std::fs::read_dir(state.join("snapshots")) else {
        return found;
    };
    for job in jobs {
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

/// Starts the run and kills it once `state` holds at least `n` complete snapshots. Returns
/// false if the run ended first.
fn kill_after_snapshots(args: &[&str], state: &Path, n: usize) -> bool {
    let mut child = spawn(args);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if complete_snapshots(state).len() >= n {
            kill9(&mut child);
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(Instant::now() < deadline, "no snapshots appeared");
        std::thread::yield_now();
    }
}

#[test]
fn nexmark_survives_kill_9_at_random_moments() {
    let rounds: u64 = std::env::var("WEIR_KILL9_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 60_000);
    let input = input.to_str().unwrap();
    let mut rng = Rng::new();
    let mut resumed = 0;
    for query in ["q4", "q5", "q7", "q8"] {
        let reference = dir.path().join(format!("{query}-reference.csv"));
        let started = Instant::now();
        let o = weir(&[
            "nexmark",
            "run",
            "--query",
            query,
            "--input",
            input,
            "--output",
            reference.to_str().unwrap(),
            "--parallelism",
            "2",
        ]);
        assert!(o.status.success(), "{query}: {}", stderr(&o));
        // Kills land anywhere in a run's life, start-up and the final join included.
        let span = (started.elapsed().as_millis() as u64 * 3 / 2).max(50);
        let output = dir.path().join(format!("{query}.csv"));
        let state = dir.path().join(format!("state-{query}"));
        let args = run_args(
            query,
            input,
            output.to_str().unwrap(),
            state.to_str().unwrap(),
        );
        for _ in 0..rounds {
            let mut child = spawn(&args);
            std::thread::sleep(Duration::from_millis(rng.below(span)));
            kill9(&mut child);
        }
        let o = weir(&args);
        assert!(o.status.success(), "{query}: {}", stderr(&o));
        if stderr(&o).contains("resumed from snapshot") {
            resumed += 1;
        }
        assert_eq!(
            sorted_lines(&output),
            sorted_lines(&reference),
            "{query}: the resumed run's output differs from an uninterrupted run's"
        );
        assert!(
            complete_snapshots(&state).is_empty(),
            "{query}: a successful run removes its snapshots"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(&format!("{query}.csv.")))
            .collect();
        assert!(left.is_empty(), "{query}: part files left behind: {left:?}");
    }
    println!("{resumed} of 4 final runs resumed from a snapshot");
}

#[test]
fn a_damaged_newest_snapshot_is_skipped_with_a_warning_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 100_000);
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let reference = dir.path().join("reference.csv");
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q5",
        "--input",
        input.to_str().unwrap(),
        "--output",
        reference.to_str().unwrap(),
        "--parallelism",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let args = run_args(
        "q5",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        state.to_str().unwrap(),
    );
    for damage in ["flip", "truncate"] {
        assert!(
            kill_after_snapshots(&args, &state, 2),
            "the run ended before two snapshots"
        );
        let snapshots = complete_snapshots(&state);
        let (older, newest) = (&snapshots[snapshots.len() - 2], snapshots.last().unwrap());
        // The largest part: a window's state.
        let part = std::fs::read_dir(newest)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "part"))
            .max_by_key(|p| std::fs::metadata(p).unwrap().len())
            .unwrap();
        let mut bytes = std::fs::read(&part).unwrap();
        match damage {
            "flip" => *bytes.last_mut().unwrap() ^= 0x04,
            _ => bytes.truncate(bytes.len() / 2),
        }
        std::fs::write(&part, bytes).unwrap();
        let older_id: u64 = older
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let o = weir(&args);
        let err = stderr(&o);
        assert!(o.status.success(), "{err}");
        assert!(
            err.contains(part.file_name().unwrap().to_str().unwrap()) && err.contains("damaged"),
            "{damage}: the warning names the file: {err}"
        );
        assert!(
            err.contains(&format!("resumed from snapshot {older_id} ")),
            "{damage}: {err}"
        );
        assert_eq!(sorted_lines(&output), sorted_lines(&reference), "{damage}");
    }
}

#[test]
fn a_changed_pipeline_is_refused_naming_the_vertex_and_snapshots_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 100_000);
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let args = run_args(
        "q5",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        state.to_str().unwrap(),
    );
    assert!(
        kill_after_snapshots(&args, &state, 1),
        "the run ended before a snapshot"
    );

    let o = weir(&["snapshots", "list", "--state-dir", state.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(list.contains("job nexmark-q5-"), "{list}");
    assert!(list.contains("snapshot "), "{list}");
    assert!(list.contains(" bytes, ") && list.contains(" ms "), "{list}");
    assert!(
        list.contains("nexmark-replay("),
        "the source vertex: {list}"
    );
    assert!(list.contains("2 instances"), "{list}");

    // Without --output the rows are counted, not written: another DAG under the same name.
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q5",
        "--input",
        input.to_str().unwrap(),
        "--parallelism",
        "2",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("does not match this job at vertex '"),
        "the refusal names the vertex: {err}"
    );

    let o = weir(&[
        "snapshots",
        "list",
        "--state-dir",
        "/nonexistent/weir-state",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--state-dir"), "{}", stderr(&o));
}

#[test]
fn snapshot_flags_are_checked_by_the_parser() {
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q5",
        "--events",
        "10",
        "--snapshot-interval-ms",
        "10",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--state-dir"), "{}", stderr(&o));
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q5",
        "--events",
        "10",
        "--state-dir",
        "x",
        "--guarantee",
        "twice",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--guarantee"), "{}", stderr(&o));
}
