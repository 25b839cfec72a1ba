//! Surviving kill -9: `weir nexmark run --state-dir` is killed at random moments and rerun,
//! and its final output must equal an uninterrupted run's (after sorting lines, since the
//! rows of a window come in no fixed order). `weir score --state-dir` is killed while
//! requests are in flight to the in-process model server, and every rerun must score exactly
//! the rows its snapshot had not committed. Also: a damaged newest snapshot is skipped with
//! a warning naming its file, a changed pipeline is refused naming the vertex, and
//! `weir snapshots list` shows what is kept.
//!
//! `WEIR_KILL9_ROUNDS` sets the kills per query, and of the score run (default 5: 20 over the
//! four queries);
//! `WEIR_KILL9_SEED` replays a run's random delays (each run prints its seed).
//!
//! Nothing waits on a timer to synchronise: kills come after random delays (that is the
//! point), and where a test needs snapshots to exist it polls the state directory for them.

mod support;

use support::{nexmark_events, sorted_lines, stderr, weir};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weir::snapshot::{LocalDirStore, Manifest, SnapshotStore, load_latest};
use weir_cli::model_server::{ServerConfig, ServerHandle, serve};

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env_remove("WEIR_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("weir starts")
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
    nexmark_events(dir, count, &["--out-of-order-ms", "500"])
}

/// The rows of `query` over `input` run without snapshots at parallelism 2, written to
/// `output`, sorted: what every interrupted run must end with.
fn uninterrupted_rows(query: &str, input: &str, output: &Path) -> Vec<String> {
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        query,
        "--input",
        input,
        "--output",
        output.to_str().unwrap(),
        "--parallelism",
        "2",
    ]);
    assert!(o.status.success(), "{query}: {}", stderr(&o));
    sorted_lines(output)
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

fn kill_rounds() -> u64 {
    std::env::var("WEIR_KILL9_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

#[test]
fn nexmark_survives_kill_9_at_random_moments() {
    let rounds = kill_rounds();
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 60_000);
    let input = input.to_str().unwrap();
    let mut rng = Rng::new();
    let mut resumed = 0;
    // q0 and q8 write from every worker, so their rows are formatted there and reach the
    // single file in blocks; q4, q5 and q7 write from one instance. Each killed run takes
    // the next parallelism of 1, 2 and 4, so resumes rescale too, more than once.
    let queries = ["q0", "q1", "q3", "q4", "q5", "q7", "q8"];
    let parallelisms = ["1", "2", "4"];
    for query in queries {
        let reference = dir.path().join(format!("{query}-reference.csv"));
        let started = Instant::now();
        uninterrupted_rows(query, input, &reference);
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
        for round in 0..rounds {
            let mut rescaled = args.clone();
            let at = rescaled.iter().position(|a| *a == "--parallelism").unwrap() + 1;
            rescaled[at] = parallelisms[round as usize % parallelisms.len()];
            let mut child = spawn(&rescaled);
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
    println!(
        "{resumed} of {} final runs resumed from a snapshot",
        queries.len()
    );
}

#[test]
fn a_damaged_newest_snapshot_is_skipped_with_a_warning_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 100_000);
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let reference = dir.path().join("reference.csv");
    uninterrupted_rows("q5", input.to_str().unwrap(), &reference);
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

/// Word count keeps batch state that snapshots do not save, so its job snapshots only at its
/// end; killed at any moment and rerun, its output is byte for byte an uninterrupted run's,
/// and a run killed after its terminal snapshot finds nothing left to count.
#[test]
fn wordcount_with_a_state_dir_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let mut text = String::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..60_000 {
        for _ in 0..6 {
            text.push_str(&format!("w{} ", rng.below(3_000)));
        }
        text.push('\n');
    }
    std::fs::write(&input, text).unwrap();
    let (reference, output, state) = (
        dir.path().join("ref.txt"),
        dir.path().join("out.txt"),
        dir.path().join("state"),
    );
    let p = |p: &Path| p.to_str().unwrap().to_string();
    let o = weir(&[
        "run",
        "wordcount",
        "--input",
        &p(&input),
        "--output",
        &p(&reference),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let args = [
        "run",
        "wordcount",
        "--input",
        &p(&input),
        "--output",
        &p(&output),
        "--state-dir",
        &p(&state),
        "--snapshot-interval-ms",
        "10",
    ];
    let mut rng = Rng::new();
    let rounds = std::env::var("WEIR_KILL9_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5u64);
    for _ in 0..rounds {
        let mut child = spawn(&args);
        std::thread::sleep(Duration::from_millis(rng.below(600)));
        kill9(&mut child);
        // A killed run never leaves a partial output file.
        if output.exists() {
            assert_eq!(
                std::fs::read(&output).unwrap(),
                std::fs::read(&reference).unwrap(),
                "a visible output is a whole one"
            );
        }
    }
    let o = weir(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&output).unwrap(),
        std::fs::read(&reference).unwrap()
    );
    assert!(
        complete_snapshots(&state).is_empty(),
        "a finished run removes its snapshots"
    );
}

/// Writes `n` rows `r0..` whose first feature is the row's number, so that the server's
/// record of what it answered names the rows.
fn score_input(dir: &Path, n: u64) -> PathBuf {
    let mut text = String::from("id,x,y\n");
    for i in 0..n {
        text.push_str(&format!("r{i},{i},{}\n", i % 5));
    }
    let path = dir.join("rows.csv");
    std::fs::write(&path, text).unwrap();
    path
}

/// The row numbers of an `id,score` CSV text (header rows skipped).
fn scored_rows(text: &str) -> Vec<u64> {
    text.lines()
        .filter(|l| *l != "id,score")
        .map(|l| {
            l.strip_prefix('r')
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("not an output row: {l:?}"))
        })
        .collect()
}

/// The row numbers the server answered for model `name`, in answer order.
fn answered(server: &ServerHandle, name: &str) -> Vec<u64> {
    server
        .answered(name)
        .iter()
        .map(|features| features[0] as u64)
        .collect()
}

/// Whether a vertex named `name` holds the scoring stage (named `score`), fused or alone.
fn is_scoring(name: &str) -> bool {
    name == "score" || name.starts_with("fused(score,")
}

/// The newest complete snapshot's id in `state`, 0 without one.
fn newest_snapshot(state: &Path) -> u64 {
    complete_snapshots(state)
        .iter()
        .filter_map(|p| p.file_name()?.to_str()?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// What a rerun restores, read from the state directory the way the job reads it.
#[derive(Debug)]
struct Restorable {
    id: u64,
    /// Rows the snapshot's committed output holds: they must never be scored again.
    committed: BTreeSet<u64>,
    /// Rows the scoring stage had sent but not written: they must be scored again.
    in_flight: BTreeSet<u64>,
}

/// The snapshot a rerun of `weir score` resumes from, if any: the newest complete one, as
/// `load_latest` finds it. Its committed rows are those of the output's parts `1..=k`, `k`
/// being the count the CSV sink saved (its state: a postcard list of `(file, parts)`); once
/// a finished job joined them, those of the output. Its rows in flight are the scoring
/// stage's saved batches (scope 0 of the chain, keyed by instance and place, tag 0, a
/// postcard list of `Row`s).
fn restorable(state: &Path, output: &Path) -> Option<Restorable> {
    let store = LocalDirStore::new(state);
    let jobs = store.jobs().unwrap();
    let job = match jobs.as_slice() {
        [] => return None,
        [job] => job,
        more => panic!("one job expected: {more:?}"),
    };
    let names: Vec<String> = store.ids(job).unwrap().into_iter().find_map(|id| {
        let bytes = store.read_manifest(job, id).unwrap()?;
        let m = Manifest::decode(&store.location(job, id, "manifest"), &bytes).ok()?;
        Some(m.vertices.into_iter().map(|v| v.name).collect())
    })?;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let restored = load_latest(&store, job, &names).unwrap()?;
    let mut parts = None;
    let mut in_flight = BTreeSet::new();
    for (vertex, instances) in restored.entries.iter().enumerate() {
        for e in instances.iter().flatten() {
            let sink_state = postcard::from_bytes::<Vec<(PathBuf, u64)>>(&e.value)
                .ok()
                .and_then(|s| s.into_iter().find(|(path, _)| path == output));
            if let Some((_, k)) = sink_state {
                assert!(parts.is_none(), "one sink state");
                parts = Some(k);
            } else if is_scoring(names[vertex])
                && e.key.len() == 13
                && e.key[0] == 0
                && e.value[0] == 0
            {
                let rows: Vec<(String, Vec<f64>)> = postcard::from_bytes(&e.value[1..])
                    .unwrap_or_else(|err| panic!("a saved batch of rows: {err}"));
                assert!(!rows.is_empty());
                in_flight.extend(rows.iter().map(|(_, features)| features[0] as u64));
            }
        }
    }
    let parts = parts.unwrap_or_else(|| {
        panic!(
            "snapshot {}: no CSV sink state (a postcard list of (file, parts)) names {}",
            restored.manifest.id,
            output.display()
        )
    });
    let part = |n: u64| -> Option<String> {
        let name = format!("{}.part-{n:08}", output.display());
        std::fs::read_to_string(&name)
            .or_else(|_| std::fs::read_to_string(format!("{name}.tmp")))
            .ok()
    };
    let texts: Option<Vec<String>> = (1..=parts).map(part).collect();
    let committed: Vec<u64> = match texts {
        Some(texts) => texts.iter().flat_map(|t| scored_rows(t)).collect(),
        None => {
            assert!(
                restored.manifest.terminal,
                "a committed part is missing before the job ended"
            );
            scored_rows(&std::fs::read_to_string(output).unwrap())
        }
    };
    let committed_set: BTreeSet<u64> = committed.iter().copied().collect();
    assert_eq!(
        committed_set.len(),
        committed.len(),
        "a row committed twice"
    );
    Some(Restorable {
        id: restored.manifest.id,
        committed: committed_set,
        in_flight,
    })
}

/// A run of `weir score` that restores `restoring` scores none of its committed rows again:
/// what the server answered for `model` in that run (even a killed one) is disjoint from
/// them. Returns the rows answered.
fn check_no_committed_row_rescored(
    server: &ServerHandle,
    model: &str,
    restoring: Option<&Restorable>,
) -> Vec<u64> {
    let rows = answered(server, model);
    if let Some(r) = restoring {
        let again: Vec<u64> = rows
            .iter()
            .filter(|i| r.committed.contains(i))
            .copied()
            .collect();
        assert!(
            again.is_empty(),
            "{model}: {} rows committed in snapshot {} were scored again, the first: {:?}",
            again.len(),
            r.id,
            &again[..again.len().min(10)]
        );
    }
    rows
}

#[test]
fn score_survives_kill_9_and_rescores_exactly_the_uncommitted_rows() {
    score_kill_9(false);
}

#[test]
fn unordered_score_survives_kill_9_and_rescores_exactly_the_uncommitted_rows() {
    score_kill_9(true);
}

/// Kills `weir score --state-dir` with requests in flight and reruns it; see the callers.
/// In input order the final output equals an uninterrupted run's byte for byte; with
/// `--unordered`, line for line after sorting.
fn score_kill_9(unordered: bool) {
    let rounds = std::env::var("WEIR_KILL9_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let n = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let input = score_input(dir.path(), n);
    let input = input.to_str().unwrap();
    let (_, server) = serve(ServerConfig {
        latency: Duration::from_millis(4),
        record: true,
        ..Default::default()
    })
    .expect("the model server starts");
    let reference = dir.path().join("reference.csv");
    let args = |model: &str, output: &Path, state: Option<&Path>| -> Vec<String> {
        let mut a: Vec<String> = [
            "score",
            "--input",
            input,
            "--url",
            &server.url(model),
            "--output",
            output.to_str().unwrap(),
            "--batch-size",
            "8",
            "--parallelism",
            "4",
            "--max-wait-ms",
            "2",
        ]
        .map(String::from)
        .to_vec();
        if unordered {
            a.push("--unordered".into());
        }
        if let Some(state) = state {
            a.extend(
                [
                    "--state-dir",
                    state.to_str().unwrap(),
                    "--snapshot-interval-ms",
                    "20",
                ]
                .map(String::from),
            );
        }
        a
    };
    let started = Instant::now();
    let o = weir(
        &args("reference", &reference, None)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // Kills come within half a run of the start, so that the reruns, which go on where the
    // last one stopped, do not all finish first.
    let span = (started.elapsed().as_millis() as u64 / 2).max(20);
    let reference = std::fs::read(&reference).unwrap();
    let mut rows = scored_rows(&String::from_utf8_lossy(&reference));
    rows.sort_unstable();
    assert_eq!(rows, (0..n).collect::<Vec<_>>());

    let output = dir.path().join("scores.csv");
    let state = dir.path().join("state");
    let mut rng = Rng::new();
    let (mut in_flight_kills, mut restores, mut held_again) = (0, 0, 0);
    let mut last_killed_after_its_snapshot = false;
    // The kills asked for, then (a few at most) until a run is killed after a snapshot of its
    // own, so that the final run has one to resume from: a rerun that finished first made
    // the next one start afresh.
    let mut round = 0;
    while round < rounds || (!last_killed_after_its_snapshot && round < rounds + 5) {
        let restoring = restorable(&state, &output);
        let model = format!("run{round}");
        let a = args(&model, &output, Some(&state));
        let before = newest_snapshot(&state);
        let mut child = spawn(&a.iter().map(String::as_str).collect::<Vec<_>>());
        // A random moment; every other round and the last, not before the run took a
        // snapshot of its own (one takes a few hundred ms in a debug build: the barrier
        // queues behind the rows waiting for the server); then the first moment with
        // requests at the server.
        std::thread::sleep(Duration::from_millis(rng.below(span)));
        let deadline = Instant::now() + Duration::from_secs(60);
        let running = |child: &mut Child| child.try_wait().unwrap().is_none();
        let own_snapshot = round % 2 == 1 || round + 1 >= rounds;
        while own_snapshot && newest_snapshot(&state) <= before && running(&mut child) {
            assert!(Instant::now() < deadline, "no snapshot appeared");
            std::thread::yield_now();
        }
        let in_flight = loop {
            if server.stats().in_flight_rows > 0 {
                break true;
            }
            if !running(&mut child) {
                break false;
            }
            assert!(Instant::now() < deadline, "no request in flight");
            std::thread::yield_now();
        };
        last_killed_after_its_snapshot = in_flight && newest_snapshot(&state) > before;
        kill9(&mut child);
        println!(
            "round {round}: restored {:?}, killed {}",
            restoring.as_ref().map(|r| r.id),
            if in_flight {
                "with requests in flight"
            } else {
                "after it ended"
            }
        );
        in_flight_kills += u64::from(in_flight);
        check_no_committed_row_rescored(&server, &model, restoring.as_ref());
        restores += u64::from(restoring.is_some());
        round += 1;
    }

    let restoring = restorable(&state, &output);
    if last_killed_after_its_snapshot {
        assert!(restoring.is_some(), "the last run's snapshot is found");
    }
    let a = args("final", &output, Some(&state));
    let o = weir(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    if let Some(r) = &restoring {
        assert!(
            stderr(&o).contains(&format!("resumed from snapshot {} ", r.id)),
            "resumes from the snapshot found: {}",
            stderr(&o)
        );
    }
    let got = std::fs::read(&output).unwrap();
    if unordered {
        let sorted = |bytes: &[u8]| {
            let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
                .lines()
                .map(str::to_owned)
                .collect();
            lines.sort();
            lines
        };
        let (g, r) = (sorted(&got), sorted(&reference));
        let missing: Vec<&String> = r.iter().filter(|l| !g.contains(l)).take(5).collect();
        let extra: Vec<&String> = g.iter().filter(|l| !r.contains(l)).take(5).collect();
        assert!(
            g == r,
            "the resumed run's rows differ from an uninterrupted run's: {} lines, want {}; missing {missing:?}, extra {extra:?}",
            g.len(),
            r.len()
        );
    } else if got != reference {
        let (g, r) = (
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&reference),
        );
        let (g, r): (Vec<&str>, Vec<&str>) = (g.lines().collect(), r.lines().collect());
        let first = g.iter().zip(&r).position(|(a, b)| a != b);
        let missing: Vec<&&str> = r.iter().filter(|l| !g.contains(l)).take(5).collect();
        let extra: Vec<&&str> = g.iter().filter(|l| !r.contains(l)).take(5).collect();
        let around =
            |v: &[&str], i: usize| v[i.saturating_sub(2)..(i + 3).min(v.len())].join(" | ");
        panic!(
            "the resumed run's output differs from an uninterrupted run's: {} lines, want {}; first difference at line {first:?}: got [{}], want [{}]; missing {missing:?}, extra {extra:?}",
            g.len(),
            r.len(),
            first.map(|i| around(&g, i)).unwrap_or_default(),
            first.map(|i| around(&r, i)).unwrap_or_default(),
        );
    }
    // The final run scored each row at most once, no committed row, and every other row.
    let scored = check_no_committed_row_rescored(&server, "final", restoring.as_ref());
    let scored_set: BTreeSet<u64> = scored.iter().copied().collect();
    assert_eq!(scored_set.len(), scored.len(), "a row scored twice");
    let committed = restoring
        .as_ref()
        .map(|r| r.committed.clone())
        .unwrap_or_default();
    let not_committed: BTreeSet<u64> = (0..n).filter(|i| !committed.contains(i)).collect();
    assert_eq!(
        scored_set, not_committed,
        "the final run scores exactly the rows its snapshot had not committed"
    );
    if let Some(r) = &restoring {
        assert!(
            r.in_flight.is_subset(&scored_set),
            "rows in flight at the snapshot are scored again"
        );
        held_again = r.in_flight.len();
    }
    assert!(
        complete_snapshots(&state).is_empty(),
        "a successful run removes its snapshots"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("scores.csv."))
        .collect();
    assert!(left.is_empty(), "part files left behind: {left:?}");
    println!(
        "{}: {round} kills ({in_flight_kills} with requests in flight), {restores} reruns restored a snapshot; the final run restored {:?} and scored {} of {n} rows, {held_again} of them in flight at its snapshot",
        if unordered {
            "unordered"
        } else {
            "in input order"
        },
        restoring.as_ref().map(|r| r.id),
        scored.len(),
    );
}

/// A snapshot resumes only under the guarantee it was taken under: an at-least-once
/// snapshot under `--guarantee exactly-once` is refused, naming both, and resumes under its
/// own.
#[test]
fn a_snapshot_of_another_guarantee_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 100_000);
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let mut args = run_args(
        "q5",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        state.to_str().unwrap(),
    );
    args.extend(["--guarantee", "at-least-once"]);
    assert!(
        kill_after_snapshots(&args, &state, 1),
        "the run ended before a snapshot"
    );
    let exactly_once = run_args(
        "q5",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        state.to_str().unwrap(),
    );
    let o = weir(&exactly_once);
    assert!(!o.status.success(), "resumed under another guarantee");
    let err = stderr(&o);
    assert!(
        err.contains("taken under --guarantee at-least-once")
            && err.contains("asks for exactly-once"),
        "{err}"
    );
    let o = weir(&args);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The output named relatively: `./q5.csv` in the job's directory at first, then resumed
/// from its parent as `work/q5.csv`. Both name the same file, so the run resumes (it failed
/// for good: a committed part was looked for relative to the new directory) and writes the
/// rows of an uninterrupted run.
#[test]
fn a_job_resumes_from_another_directory_with_its_output_named_relatively() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let input = events(dir.path(), 100_000);
    let state = dir.path().join("state");
    let run_in = |cwd: &Path, output: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
        c.current_dir(cwd)
            .args(run_args(
                "q5",
                input.to_str().unwrap(),
                output,
                state.to_str().unwrap(),
            ))
            .env_remove("WEIR_LOG");
        c
    };
    let mut child = run_in(&work, "./q5.csv")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let killed = loop {
        if complete_snapshots(&state).len() >= 2 {
            kill9(&mut child);
            break true;
        }
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        if Instant::now() >= deadline {
            kill9(&mut child);
            panic!("no snapshots appeared");
        }
        std::thread::yield_now();
    };
    assert!(killed, "the run ended before two snapshots");
    let resumed = run_in(dir.path(), "work/q5.csv").output().unwrap();
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let got = sorted_lines(&work.join("q5.csv"));
    // The same query uninterrupted, without snapshots, for the expected rows.
    let expected_path = dir.path().join("expected.csv");
    let expected = uninterrupted_rows("q5", input.to_str().unwrap(), &expected_path);
    assert_eq!(got, expected);
}

/// Retention counts only snapshots whose parts check out: with the newest damaged, the next
/// snapshot removes the damaged one and keeps the last good one (it removed the good one and
/// kept the damaged). `weir snapshots list` reads every part back and flags the damaged.
#[test]
fn retention_keeps_the_last_good_snapshot_and_list_flags_a_damaged_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 400_000);
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let args = run_args(
        "q5",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        state.to_str().unwrap(),
    );
    assert!(
        kill_after_snapshots(&args, &state, 2),
        "the run ended before two snapshots"
    );
    let snapshots = complete_snapshots(&state);
    let (good, damaged) = (
        snapshots[snapshots.len() - 2].clone(),
        snapshots.last().unwrap().clone(),
    );
    let part = std::fs::read_dir(&damaged)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "part"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&part).unwrap();
    *bytes.last_mut().unwrap() ^= 0x10;
    std::fs::write(&part, bytes).unwrap();
    let id = |p: &Path| {
        p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let o = weir(&["snapshots", "list", "--state-dir", state.to_str().unwrap()]);
    let list = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = |n: u64| {
        list.lines()
            .find(|l| l.trim_start().starts_with(&format!("snapshot {n}:")))
            .unwrap_or_else(|| panic!("snapshot {n} listed: {list}"))
            .to_string()
    };
    assert!(line(id(&damaged)).contains("DAMAGED"), "{list}");
    assert!(
        line(id(&damaged)).contains(part.file_name().unwrap().to_str().unwrap()),
        "{list}"
    );
    assert!(line(id(&good)).ends_with("; ok"), "{list}");
    // Resumed (from the good one), the job takes new snapshots: the first to go must be the
    // damaged one, while the good one is still there.
    let mut child = spawn(&args);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (good_there, damaged_there) = (good.exists(), damaged.exists());
        if !damaged_there {
            assert!(good_there, "the good snapshot went before the damaged one");
            break;
        }
        assert!(
            good_there,
            "the good snapshot went while the damaged one stayed"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) with the damaged snapshot still there");
        }
        assert!(Instant::now() < deadline, "the damaged snapshot stayed");
        std::thread::yield_now();
    }
    assert!(child.wait().unwrap().success());
}

/// Replacing the input between a kill and the rerun, or adding a file among those already
/// listed, refuses the rerun naming the file (it resumed into the new input at the old
/// positions, mixing old and new rows); `--on-input-change restart` starts over and gives
/// the rows of an uninterrupted run over the new input.
#[test]
fn a_changed_input_refuses_the_rerun_naming_the_file_unless_told_to_restart() {
    let dir = tempfile::tempdir().unwrap();
    let events = events(dir.path(), 100_000);
    let text = std::fs::read_to_string(&events).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let half = lines.len() / 2;
    std::fs::write(input.join("a.jsonl"), lines[..half].join("\n") + "\n").unwrap();
    std::fs::write(input.join("c.jsonl"), lines[half..].join("\n") + "\n").unwrap();
    let (output, state) = (dir.path().join("q5.csv"), dir.path().join("state"));
    let args = run_args(
        "q5",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        state.to_str().unwrap(),
    );
    assert!(
        kill_after_snapshots(&args, &state, 2),
        "the run ended before a snapshot"
    );
    // Added among the files already listed.
    let b = input.join("b.jsonl");
    std::fs::write(&b, lines[..1000].join("\n") + "\n").unwrap();
    let o = weir(&args);
    assert!(!o.status.success(), "resumed into a changed input");
    let err = stderr(&o);
    assert!(
        err.contains(b.to_str().unwrap())
            && err.contains("added")
            && err.contains("--on-input-change restart"),
        "{err}"
    );
    assert!(!output.exists(), "nothing was written");
    std::fs::remove_file(&b).unwrap();
    // Replaced: the same name, other content.
    let a = input.join("a.jsonl");
    std::fs::write(&a, lines[..half - 1].join("\n") + "\n").unwrap();
    let o = weir(&args);
    assert!(!o.status.success(), "resumed into a changed input");
    let err = stderr(&o);
    assert!(
        err.contains(a.to_str().unwrap()) && err.contains("size"),
        "{err}"
    );
    // Told to start over: the rows of an uninterrupted run over the new input.
    let mut restart = args.clone();
    restart.extend(["--on-input-change", "restart"]);
    let o = weir(&restart);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("starting the job over"),
        "{}",
        stderr(&o)
    );
    let expected = dir.path().join("expected.csv");
    let expected = uninterrupted_rows("q5", input.to_str().unwrap(), &expected);
    assert_eq!(sorted_lines(&output), expected);
    // The flag's values are checked by the parser.
    let mut bad = args.clone();
    bad.extend(["--on-input-change", "ignore"]);
    let o = weir(&bad);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--on-input-change"), "{}", stderr(&o));
}

/// A crash at every step of the snapshot protocol, in the store (a part written, the parts
/// and their names synced, the manifest written, renamed, published) and in the file sink (a
/// part sealed, published in phase 2, committed parts rolled, the output joined at the end),
/// at its first and third occurrence: the rerun resumes (or starts over) to exactly the rows
/// of an uninterrupted run, and leaves no part file behind.
#[test]
fn a_crash_at_any_step_of_the_snapshot_protocol_resumes_to_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 60_000);
    let input = input.to_str().unwrap();
    let reference = dir.path().join("reference.csv");
    let expected = uninterrupted_rows("q0", input, &reference);
    let steps = [
        "part-written",
        "parts-synced",
        "manifest-written",
        "manifest-renamed",
        "published",
        "sink-sealed",
        "sink-published",
        "sink-rolled",
        "sink-joined",
    ];
    let mut crashed = 0;
    for step in steps {
        for at in [1, 3] {
            let case = format!("{step}@{at}");
            let output = dir.path().join(format!("q0-{step}-{at}.csv"));
            let state = dir.path().join(format!("state-{step}-{at}"));
            let mut args = run_args(
                "q0",
                input,
                output.to_str().unwrap(),
                state.to_str().unwrap(),
            );
            // Snapshots every 5 ms: enough epochs that committed parts are rolled.
            let interval = args
                .iter()
                .position(|a| *a == "--snapshot-interval-ms")
                .unwrap()
                + 1;
            args[interval] = "5";
            let o = Command::new(env!("CARGO_BIN_EXE_weir"))
                .args(&args)
                .env_remove("WEIR_LOG")
                .env(weir::snapshot::crash::VARIABLE, &case)
                .output()
                .unwrap();
            match o.status.code() {
                Some(weir::snapshot::crash::EXIT_CODE) => crashed += 1,
                // The step came fewer times than `at` (the join happens once).
                Some(0) => {}
                other => panic!("{case}: exit {other:?}: {}", stderr(&o)),
            }
            let o = weir(&args);
            assert!(o.status.success(), "{case}: {}", stderr(&o));
            let got = sorted_lines(&output);
            assert!(
                got == expected,
                "{case}: the rerun wrote {} rows, an uninterrupted run {}",
                got.len(),
                expected.len()
            );
            let name = output.file_name().unwrap().to_str().unwrap().to_owned();
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.starts_with(&name) && *n != name)
                .collect();
            assert!(left.is_empty(), "{case}: files left behind: {left:?}");
        }
    }
    assert!(crashed >= steps.len(), "only {crashed} runs crashed");
}

/// The README's snapshot demo: a replay paced by `--wall-rate` runs long enough to be killed
/// by hand; killed after a few snapshots and rerun, it resumes (paced again from where it
/// was) and ends with the rows of an uninterrupted run.
#[test]
fn a_paced_replay_is_killed_mid_run_and_resumes_to_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let input = events(dir.path(), 60_000);
    let input = input.to_str().unwrap();
    let want = uninterrupted_rows("q5", input, &dir.path().join("reference.csv"));
    let output = dir.path().join("q5.csv");
    let state = dir.path().join("state");
    let mut args = run_args(
        "q5",
        input,
        output.to_str().unwrap(),
        state.to_str().unwrap(),
    );
    // 60,000 events at 20,000 per second: about 3 s, with a snapshot every 20 ms.
    args.extend(["--wall-rate", "20000"]);
    let started = Instant::now();
    assert!(
        kill_after_snapshots(&args, &state, 3),
        "the paced run ended before three snapshots"
    );
    assert!(!output.exists(), "killed mid-run, no output yet");
    let o = weir(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resumed from snapshot"),
        "{}",
        stderr(&o)
    );
    assert_eq!(sorted_lines(&output), want);
    // Paced, the two runs together take about the time of one.
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
