//! A `parts()` file sink in a job that takes exactly-once snapshots, stopped by a failure and
//! resumed at another parallelism, again and again: whatever the sequence of parallelisms,
//! the part files hold every line exactly once when the job ends.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use weir::prelude::*;
use weir::snapshot::{Guarantee, LocalDirStore, RestartPolicy, SnapshotConfig};

const LINES: u64 = 12_000;

/// The job: numbers from one source instance, through a map that fails once at item
/// `fail_at` (never when it is `u64::MAX`), into one part file per sink instance.
fn pipeline(out: &Path, fail_at: Arc<AtomicU64>) -> Pipeline {
    let p = Pipeline::new();
    p.read_from(sources::stream::generator(24_000, Some(LINES), |n| n))
        .with_timestamps(|n: &u64| *n as i64, 0)
        .local_parallelism(1)
        .map(move |n| {
            if n == fail_at.load(Ordering::Relaxed) {
                fail_at.store(u64::MAX, Ordering::Relaxed);
                panic!("injected failure at line {n}");
            }
            n
        })
        .write_to(sinks::files::parts(out));
    p
}

fn config(state: &Path, parallelism: usize, last: bool) -> JobConfig {
    let mut snapshots = SnapshotConfig::new(
        Arc::new(LocalDirStore::new(state)),
        Duration::from_millis(10),
        Guarantee::ExactlyOnce,
    );
    if !last {
        // The failure ends the run: the next one resumes at its own parallelism.
        snapshots.restart = RestartPolicy::never();
    }
    JobConfig::default()
        .with_name("parts-rescaling")
        .with_default_parallelism(parallelism)
        .with_snapshots(snapshots)
}

/// Runs the job at each parallelism in turn, each run but the last stopped by a failure at
/// its line of `fail_at`, and returns how often each line is in the part files.
fn run(parallelisms: &[usize], fail_at: &[u64]) -> BTreeMap<u64, u32> {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    for (i, &parallelism) in parallelisms.iter().enumerate() {
        let last = i + 1 == parallelisms.len();
        let fail = Arc::new(AtomicU64::new(if last { u64::MAX } else { fail_at[i] }));
        let job = pipeline(&out, Arc::clone(&fail))
            .submit(&Executor::shared(), config(&state, parallelism, last))
            .unwrap();
        let result = job.join();
        if last {
            result.unwrap_or_else(|e| panic!("the last run, at {parallelism}: {e}"));
        } else if fail.load(Ordering::Relaxed) == u64::MAX {
            assert!(
                result.is_err(),
                "run {i} at {parallelism} failed as injected"
            );
        } else {
            // The failure's line came before the restored position: the run completed.
            result.unwrap_or_else(|e| panic!("run {i} at {parallelism}: {e}"));
            return count_lines(&out);
        }
    }
    count_lines(&out)
}

fn count_lines(out: &Path) -> BTreeMap<u64, u32> {
    let mut seen = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("part-") && !name.contains(".part-"),
            "only joined part files are left: {name}"
        );
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            *seen.entry(line.parse::<u64>().unwrap()).or_default() += 1;
        }
    }
    seen
}

fn assert_every_line_once(seen: &BTreeMap<u64, u32>, what: &str) {
    let missing = (0..LINES).filter(|n| !seen.contains_key(n)).count();
    let repeated: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).take(5).collect();
    assert!(
        missing == 0 && repeated.is_empty() && seen.len() as u64 == LINES,
        "{what}: {missing} of {LINES} lines missing, repeated: {repeated:?}"
    );
}

#[test]
fn four_then_two_then_four_instances_keep_every_line() {
    let seen = run(&[4, 2, 4], &[3_000, 7_000]);
    assert_every_line_once(&seen, "4 → 2 → 4");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    #[test]
    fn any_sequence_of_parallelisms_keeps_every_line_once(
        parallelisms in proptest::collection::vec(1usize..=4, 2..=5),
        cuts in proptest::collection::vec(500u64..LINES - 500, 4),
    ) {
        let mut fail_at = cuts;
        fail_at.sort_unstable();
        let seen = run(&parallelisms, &fail_at);
        assert_every_line_once(&seen, &format!("{parallelisms:?}, failing at {fail_at:?}"));
    }
}

#[test]
fn three_then_one_then_two_instances_keep_every_line() {
    // At 1 instance, every output is adopted by instance 0; at 2, instance 1 takes its own
    // back from it (a restore queues more jobs than the I/O thread's queue holds).
    let seen = run(&[3, 1, 2], &[502, 8187]);
    assert_every_line_once(&seen, "3 → 1 → 2");
}
