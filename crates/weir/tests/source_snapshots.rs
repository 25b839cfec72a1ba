//! Sources and file sinks in jobs that take snapshots: a source that cannot replay is refused
//! at submit with exactly-once, and a job whose stage fails mid-way restarts from its last
//! snapshot, its file sources resuming at their saved positions and its file sink holding
//! every line exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use weir::core::snapshot::{Guarantee, LocalDirStore, RestartPolicy, SnapshotConfig};
use weir::prelude::*;

fn config(dir: &std::path::Path, guarantee: Guarantee) -> JobConfig {
    let mut snapshots = SnapshotConfig::new(
        Arc::new(LocalDirStore::new(dir)),
        Duration::from_millis(1),
        guarantee,
    );
    snapshots.restart = RestartPolicy {
        attempts: 3,
        backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(1),
    };
    JobConfig::default()
        .with_name("source-snapshots")
        .with_default_parallelism(2)
        .with_snapshots(snapshots)
}

#[test]
fn a_source_that_cannot_replay_is_refused_with_exactly_once_and_runs_with_at_least_once() {
    let dir = tempfile::tempdir().unwrap();
    for guarantee in [Guarantee::ExactlyOnce, Guarantee::AtLeastOnce] {
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        p.read_from(sources::reactive::from_stream(futures::stream::iter(
            0..100u32,
        )))
        .write_to(sink);
        let result = p.submit(&Executor::shared(), config(dir.path(), guarantee));
        match guarantee {
            Guarantee::ExactlyOnce => {
                let Err(err) = result else {
                    panic!("exactly-once with a source that cannot replay ran")
                };
                let err = err.to_string();
                assert!(err.contains("cannot replay"), "{err}");
                assert!(err.contains("'"), "names the vertex: {err}");
                assert!(out.take().is_empty(), "nothing ran");
            }
            _ => {
                result.unwrap().join().unwrap();
                assert_eq!(out.take().len(), 100);
            }
        }
    }
}

#[test]
fn a_failed_job_resumes_its_file_source_and_writes_every_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    let mut expected = Vec::new();
    for f in 0..3 {
        let mut text = String::new();
        for i in 0..20_000 {
            let line = format!("f{f}-{i}");
            text.push_str(&line);
            text.push_str(if i % 2 == 0 { "\r\n" } else { "\n" });
            expected.push(line);
        }
        std::fs::write(input.join(format!("{f}.txt")), text).unwrap();
    }
    expected.sort();
    let output = dir.path().join("out.txt");
    let seen = Arc::new(AtomicU64::new(0));
    let armed = Arc::new(AtomicBool::new(true));
    let p = Pipeline::new();
    let (s, a) = (Arc::clone(&seen), Arc::clone(&armed));
    p.read_from(sources::files::text(&input).unwrap())
        .map(move |line: String| {
            // Fails once, half-way through, after some snapshots surely completed.
            if s.fetch_add(1, Ordering::Relaxed) == 30_000 && a.swap(false, Ordering::Relaxed) {
                panic!("injected failure");
            }
            line
        })
        .write_to(sinks::files::text(&output));
    let job = p
        .submit(
            &Executor::shared(),
            config(&dir.path().join("state"), Guarantee::ExactlyOnce),
        )
        .unwrap();
    while !job.wait_timeout(Duration::from_millis(50)) {}
    let snapshots = job.snapshot_stats().len();
    job.join().unwrap();
    assert!(!armed.load(Ordering::Relaxed), "the failure was injected");
    let mut lines: Vec<String> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    assert_eq!(lines.len(), expected.len(), "every line exactly once");
    assert_eq!(lines, expected);
    assert!(snapshots > 1, "snapshots were taken: {snapshots}");
}

/// Files added after every file a run listed are new input: a run that resumes reads the
/// saved files on from their positions and then the added ones, every line once, whichever
/// instance had already finished its share. A file added among those listed is refused.
#[test]
fn files_appended_to_the_listing_are_read_after_a_resume_and_others_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    let write = |name: &str, lines: std::ops::Range<u32>| {
        let text: String = lines.map(|i| format!("{name}-{i}\n")).collect();
        std::fs::write(input.join(name), text).unwrap();
    };
    // One instance's share ends with the small first file: it is exhausted early.
    write("a", 0..50);
    write("c", 0..60_000);
    let (output, state) = (dir.path().join("out.txt"), dir.path().join("state"));
    let run = |fail_at: u64| {
        let seen = Arc::new(AtomicU64::new(0));
        let p = Pipeline::new();
        let s = Arc::clone(&seen);
        p.read_from(sources::files::text(&input).unwrap())
            .map(move |line: String| {
                if s.fetch_add(1, Ordering::Relaxed) == fail_at {
                    panic!("injected failure");
                }
                line
            })
            .write_to(sinks::files::text(&output));
        let mut config = config(&state, Guarantee::ExactlyOnce);
        if let Some(s) = config.snapshots.as_mut() {
            s.restart = RestartPolicy::never();
        }
        p.submit(&Executor::shared(), config)
            .and_then(|job| Ok(job.join()?))
    };
    assert!(run(40_000).is_err(), "the first run fails half-way");
    write("b", 0..10);
    let refused = run(u64::MAX).unwrap_err();
    let change = weir::sources::files::input_change(&refused).expect("an input change");
    assert!(change.to_string().contains("/in/b"), "{change}");
    std::fs::remove_file(input.join("b")).unwrap();
    write("d", 0..30_000);
    write("e", 0..7);
    run(u64::MAX).unwrap();
    let mut seen = std::collections::BTreeMap::<String, u32>::new();
    for line in std::fs::read_to_string(&output).unwrap().lines() {
        *seen.entry(line.to_owned()).or_default() += 1;
    }
    let expected = 50 + 60_000 + 30_000 + 7;
    assert_eq!(seen.len(), expected, "every line of a, c, d and e");
    assert!(seen.values().all(|&n| n == 1), "no line twice");
}
