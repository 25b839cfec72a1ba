//! The restart stress test, in the manner of Jet's `SinkStressTestUtil`: items go through a
//! stateful stream job (a keyed tumbling-window count) that takes a snapshot every 50 ms, while
//! it is made to fail (an injected processor error: the job restarts from its last snapshot)
//! and is stopped and submitted again (a graceful restart), several times. The two-phase sink's
//! committed output must hold every window result exactly once and equal a run without
//! failures; with at-least-once, nothing may be missing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::prelude::*;
use weir::snapshot::{Guarantee, LocalDirStore, RestartPolicy, SnapshotConfig};
use weir::stream::KeyedWindowResult;
use weir::{BoxError, JobStatus, ProcessorContext, SinkWriter};

const KEYS: u64 = 37;
const WINDOW_MS: i64 = 1_000;

/// (window start, key, count).
type Row = (i64, u64, u64);

/// Committed rows by (sink instance, epoch): committing an epoch twice changes nothing.
type Committed = Arc<Mutex<BTreeMap<(u64, u64), Vec<Row>>>>;

/// A transactional sink in the manner of a Kafka or JDBC XA sink: rows written since the
/// last snapshot are prepared as one epoch, committed when the snapshot is durable.
struct EpochSink {
    instance: u64,
    epoch: u64,
    pending: Vec<Row>,
    prepared: Vec<(u64, u64, Vec<Row>)>,
    committed: Committed,
    commits: Arc<AtomicU64>,
    transactional: bool,
}

impl SinkWriter for EpochSink {
    type Item = KeyedWindowResult<u64, u64>;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.instance = ctx.global_index() as u64;
        self.transactional = ctx.guarantee() != Guarantee::None;
        Ok(())
    }

    fn write(&mut self, r: Self::Item) -> Result<(), BoxError> {
        self.pending.push((r.start, r.key, r.value));
        Ok(())
    }

    fn prepare(&mut self) -> Result<Option<Vec<u8>>, BoxError> {
        self.epoch += 1;
        let rows = std::mem::take(&mut self.pending);
        self.prepared.push((self.instance, self.epoch, rows));
        Ok(Some(serde_json::to_vec(&(self.epoch, &self.prepared))?))
    }

    fn commit(&mut self) -> Result<bool, BoxError> {
        let mut committed = self.committed.lock().unwrap();
        for (instance, epoch, rows) in self.prepared.drain(..) {
            committed.insert((instance, epoch), rows);
        }
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    fn restore(&mut self, prepared: Vec<u8>) -> Result<(), BoxError> {
        let (epoch, rows): (u64, Vec<(u64, u64, Vec<Row>)>) = serde_json::from_slice(&prepared)?;
        self.epoch = self.epoch.max(epoch);
        self.prepared.extend(rows);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        if !self.transactional {
            let rows = std::mem::take(&mut self.pending);
            self.committed
                .lock()
                .unwrap()
                .insert((self.instance, u64::MAX), rows);
        }
        Ok(())
    }
}

/// What the runs share: the committed output, commit count, and the failures still to inject.
#[derive(Clone, Default)]
struct Shared {
    committed: Committed,
    commits: Arc<AtomicU64>,
    /// Items at which to fail once each, when armed.
    failures: Arc<Vec<(u64, AtomicBool)>>,
    /// Counts in 1 s windows sliding by 500 ms, aggregated in one stage after the shuffle
    /// (`single_stage`), instead of tumbling windows in two stages: each saved frame then
    /// feeds two windows after a restore. Item `n` then has time `n / 20` and key
    /// `n % 20_011`: a window holds 20,000 keys, more than one call of the window closes, so
    /// snapshots and failures also fall while a close is cut in slices.
    one_stage: bool,
}

/// The slide of the one-stage runs' windows.
const ONE_STAGE_SLIDE_MS: i64 = 500;

/// Item `n`'s event time and key.
fn time_and_key(n: u64, one_stage: bool) -> (i64, u64) {
    if one_stage {
        ((n / 20) as i64, n % 20_011)
    } else {
        (n as i64, n % KEYS)
    }
}

fn pipeline(shared: &Shared, items: u64) -> Pipeline {
    pipeline_with_source_parallelism(shared, items, None)
}

/// The job, with the source (and the window's accumulate stage fused behind it) at a fixed
/// parallelism when `source` is set.
fn pipeline_with_source_parallelism(
    shared: &Shared,
    items: u64,
    source: Option<usize>,
) -> Pipeline {
    let p = Pipeline::new();
    let failures = Arc::clone(&shared.failures);
    let (committed, commits) = (Arc::clone(&shared.committed), Arc::clone(&shared.commits));
    let one_stage = shared.one_stage;
    // About 1 s of wall time at this rate, so the 50 ms snapshots interleave with the items.
    let events = p
        .read_from(sources::stream::generator(items, Some(items), |n| n))
        // A lag of 700 ms: a replay that restarted anywhere but at the saved position would
        // count items twice rather than drop them as late.
        .with_timestamps(move |n: &u64| time_and_key(*n, one_stage).0, 700);
    let events = match source {
        Some(n) => events.local_parallelism(n),
        None => events,
    };
    let events = events
        .map(move |n| {
            for (at, armed) in failures.iter() {
                if n == *at && armed.swap(false, Ordering::Relaxed) {
                    panic!("injected failure at item {n}");
                }
            }
            n
        })
        .grouping_key(move |n: &u64| time_and_key(*n, one_stage).1);
    let counts = if shared.one_stage {
        events
            .window(WindowDefinition::sliding(WINDOW_MS, ONE_STAGE_SLIDE_MS))
            .single_stage()
            .aggregate(aggregate::counting())
    } else {
        events
            .window(WindowDefinition::tumbling(WINDOW_MS))
            .aggregate(aggregate::counting())
    };
    counts.write_to(Sink::new("epochs", None, move |_| EpochSink {
        instance: 0,
        epoch: 0,
        pending: Vec::new(),
        prepared: Vec::new(),
        committed: Arc::clone(&committed),
        commits: Arc::clone(&commits),
        transactional: false,
    }));
    p
}

fn config(dir: &std::path::Path, guarantee: Guarantee) -> JobConfig {
    config_at(dir, guarantee, 2)
}

fn config_at(dir: &std::path::Path, guarantee: Guarantee, parallelism: usize) -> JobConfig {
    let mut snapshots = SnapshotConfig::new(
        Arc::new(LocalDirStore::new(dir)),
        Duration::from_millis(50),
        guarantee,
    );
    snapshots.restart = RestartPolicy {
        attempts: 20,
        backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(10),
    };
    JobConfig::default()
        .with_name("stress")
        .with_default_parallelism(parallelism)
        .with_snapshots(snapshots)
}

fn expected(items: u64) -> BTreeMap<(i64, u64), u64> {
    expected_in(items, false)
}

/// The counts per (window start, key): of tumbling windows of `WINDOW_MS`, or of the
/// one-stage runs' windows sliding by [`ONE_STAGE_SLIDE_MS`].
fn expected_in(items: u64, one_stage: bool) -> BTreeMap<(i64, u64), u64> {
    let slide = if one_stage {
        ONE_STAGE_SLIDE_MS
    } else {
        WINDOW_MS
    };
    let mut out = BTreeMap::new();
    for n in 0..items {
        let (t, key) = time_and_key(n, one_stage);
        let mut start = t.div_euclid(slide) * slide;
        while start > t - WINDOW_MS {
            *out.entry((start, key)).or_default() += 1;
            start -= slide;
        }
    }
    out
}

/// The committed rows; with `exactly_once`, a row committed twice fails the test.
fn committed_rows(shared: &Shared, exactly_once: bool) -> BTreeMap<(i64, u64), u64> {
    let mut out = BTreeMap::new();
    for rows in shared.committed.lock().unwrap().values() {
        for &(start, key, count) in rows {
            let previous = out.insert((start, key), count);
            assert!(
                !exactly_once || previous.is_none(),
                "window {start} key {key} committed twice"
            );
        }
    }
    out
}

/// Runs the job to its end through `failures` injected failures and `graceful` stops and
/// resubmissions, each after the sink has committed a few more times; windows in one stage
/// when `one_stage` (see [`Shared::one_stage`]).
fn stress(
    guarantee: Guarantee,
    items: u64,
    failures: &[u64],
    graceful: usize,
    one_stage: bool,
) -> Shared {
    let dir = tempfile::tempdir().unwrap();
    let shared = Shared {
        one_stage,
        failures: Arc::new(
            failures
                .iter()
                .map(|at| (*at, AtomicBool::new(true)))
                .collect(),
        ),
        ..Shared::default()
    };
    let (mut stops, mut restarts) = (0, 0);
    loop {
        let job = pipeline(&shared, items)
            .submit(&Executor::shared(), config(dir.path(), guarantee))
            .unwrap();
        if stops < graceful {
            // Stop once a few more snapshots have committed: a graceful restart.
            let target = shared.commits.load(Ordering::Relaxed) + 6;
            while shared.commits.load(Ordering::Relaxed) < target
                && !job.wait_timeout(Duration::from_millis(5))
            {}
            job.cancel();
            stops += 1;
            // A cancelled job restarts no more: its count is final.
            restarts += job.restarts();
            match job.join() {
                Err(weir::core::Error::Cancelled) => continue,
                // An injected failure came first: the cancel stopped its restart instead.
                Err(e) if e.to_string().contains("injected failure") => continue,
                Ok(()) => break,
                Err(e) => panic!("the stopped job failed: {e}"),
            }
        }
        assert!(job.wait_timeout(Duration::from_secs(300)), "the job ends");
        assert_eq!(job.status(), JobStatus::Completed, "{:?}", job.join());
        restarts += job.restarts();
        job.join().unwrap();
        break;
    }
    // Only the injected failures restart the job: a snapshot refused or any other error
    // would add restarts the runs otherwise hide.
    assert!(
        restarts as usize <= failures.len(),
        "{restarts} restarts for {} injected failures",
        failures.len()
    );
    for (at, armed) in shared.failures.iter() {
        assert!(
            !armed.load(Ordering::Relaxed),
            "the failure at {at} was injected"
        );
    }
    shared
}

#[test]
fn every_window_is_committed_exactly_once_through_failures_and_restarts() {
    let items = 60_000;
    let shared = stress(
        Guarantee::ExactlyOnce,
        items,
        &[9_000, 21_000, 33_000, 47_000],
        2,
        false,
    );
    let got = committed_rows(&shared, true);
    let want = expected(items);
    let diff: Vec<_> = want
        .iter()
        .filter(|(w, c)| got.get(w) != Some(c))
        .map(|(w, c)| (*w, *c, got.get(w).copied()))
        .take(10)
        .collect();
    assert!(
        diff.is_empty(),
        "{} of {} rows differ (window, want, got): {diff:?}",
        want.iter().filter(|(w, c)| got.get(w) != Some(c)).count(),
        want.len()
    );
    assert_eq!(got, want);
}

#[test]
fn one_stage_sliding_windows_are_committed_exactly_once_through_failures_and_restarts() {
    let items = 120_000;
    let shared = stress(
        Guarantee::ExactlyOnce,
        items,
        &[30_000, 70_000, 101_000],
        2,
        true,
    );
    assert_eq!(committed_rows(&shared, true), expected_in(items, true));
}

#[test]
fn at_least_once_misses_nothing_through_failures() {
    let items = 40_000;
    let shared = stress(Guarantee::AtLeastOnce, items, &[11_000, 29_000], 1, false);
    let got = committed_rows(&shared, false);
    for (window, count) in expected(items) {
        let seen = got.get(&window).copied().unwrap_or(0);
        assert!(seen >= count, "window {window:?}: {seen} < {count}");
    }
}

#[test]
fn the_same_job_without_snapshots_commits_at_its_end() {
    let items = 10_000;
    let shared = Shared::default();
    pipeline(&shared, items)
        .submit(
            &Executor::shared(),
            JobConfig::default().with_default_parallelism(2),
        )
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(committed_rows(&shared, true), expected(items));
}

#[test]
fn a_snapshot_taken_at_parallelism_2_restores_at_1_and_at_4() {
    let items = 30_000;
    for (parallelism, one_stage) in [(1, false), (4, false), (1, true), (4, true)] {
        let dir = tempfile::tempdir().unwrap();
        let shared = Shared {
            failures: Arc::new(vec![(20_000, AtomicBool::new(true))]),
            one_stage,
            ..Shared::default()
        };
        let mut never = config_at(dir.path(), Guarantee::ExactlyOnce, 2);
        if let Some(s) = never.snapshots.as_mut() {
            s.restart = RestartPolicy::never();
        }
        let failed = pipeline_with_source_parallelism(&shared, items, Some(1))
            .submit(&Executor::shared(), never)
            .unwrap()
            .join();
        assert!(failed.is_err(), "the injected failure stops the first run");
        let job = pipeline_with_source_parallelism(&shared, items, Some(1))
            .submit(
                &Executor::shared(),
                config_at(dir.path(), Guarantee::ExactlyOnce, parallelism),
            )
            .unwrap();
        assert!(job.restored_from().is_some(), "the second run resumes");
        job.join().unwrap();
        assert_eq!(
            committed_rows(&shared, true),
            expected_in(items, one_stage),
            "restored at parallelism {parallelism}, one stage: {one_stage}"
        );
    }
}

#[test]
fn batch_stages_that_keep_state_hold_snapshots_back_until_they_complete() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::generator::sequence(200_000))
        .grouping_key(|n: &u64| n % 7)
        .aggregate(aggregate::counting())
        .write_to(sink);
    let mut config = config(dir.path(), Guarantee::ExactlyOnce);
    if let Some(s) = config.snapshots.as_mut() {
        s.interval = Duration::from_millis(1);
    }
    let job = p.submit(&Executor::shared(), config).unwrap();
    assert!(job.wait_timeout(Duration::from_secs(120)));
    let stats = job.snapshot_stats();
    job.join().expect("a batch aggregation with snapshots runs");
    assert_eq!(
        stats.iter().map(|s| s.terminal).collect::<Vec<_>>(),
        [true],
        "no snapshot while the aggregation held its counts; the terminal one after"
    );
    let mut counts = out.take();
    counts.sort();
    assert_eq!(counts.len(), 7);
    assert_eq!(counts.iter().map(|(_, c)| c).sum::<u64>(), 200_000);
}

/// Runs a batch job built by `build` (whose rows it formats with `{:?}`) with exactly-once
/// snapshots every millisecond, and again without snapshots: the two outputs, sorted.
fn with_and_without_snapshots(
    build: impl Fn(&Pipeline, Sink<String>),
) -> (Vec<String>, Vec<String>) {
    let run = |snapshots: bool| {
        let dir = tempfile::tempdir().unwrap();
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        build(&p, sink);
        let mut config = config(dir.path(), Guarantee::ExactlyOnce);
        match config.snapshots.as_mut() {
            Some(s) if snapshots => {
                s.interval = Duration::from_millis(1);
                // A failure must show as one, not as a replay that duplicates rows.
                s.restart.attempts = 0;
            }
            _ => config.snapshots = None,
        }
        let job = p.submit(&Executor::shared(), config).unwrap();
        assert!(job.wait_timeout(Duration::from_secs(120)));
        if let Err(e) = job.join() {
            panic!("with snapshots {snapshots}: {e}");
        }
        let mut rows = out.take();
        rows.sort();
        rows
    };
    (run(true), run(false))
}

#[test]
fn every_batch_stage_kind_runs_to_its_end_with_snapshots_on() {
    const N: u64 = 200_000;
    let numbers = |p: &Pipeline| p.read_from(sources::generator::sequence(N));
    let small =
        |p: &Pipeline| p.read_from(sources::collection::items((0..50u64).collect::<Vec<_>>()));
    type Build = Box<dyn Fn(&Pipeline, Sink<String>)>;
    let cases: Vec<(&str, Build)> = vec![
        (
            "map, filter, flat_map",
            Box::new(move |p, sink| {
                numbers(p)
                    .map(|n| n * 3)
                    .filter(|n| n % 2 == 0)
                    .flat_map(|n| [n, n + 1])
                    .map(|n| format!("{n}"))
                    .write_to(sink)
            }),
        ),
        (
            "hash join",
            Box::new(move |p, sink| {
                numbers(p)
                    .hash_join(
                        &small(p),
                        join_on(|n: &u64| n % 64, |b: &u64| *b),
                        |n, b| format!("{n} {b:?}"),
                    )
                    .write_to(sink)
            }),
        ),
        (
            "inner hash join",
            Box::new(move |p, sink| {
                numbers(p)
                    .inner_hash_join(
                        &small(p),
                        join_on(|n: &u64| n % 64, |b: &u64| *b),
                        |n, b| format!("{n} {b}"),
                    )
                    .write_to(sink)
            }),
        ),
        (
            "hash join of two build sides",
            Box::new(move |p, sink| {
                numbers(p)
                    .hash_join2(
                        &small(p),
                        join_on(|n: &u64| n % 64, |b: &u64| *b),
                        &small(p),
                        join_on(|n: &u64| n % 80, |b: &u64| *b),
                        |n, a, b| format!("{n} {a:?} {b:?}"),
                    )
                    .write_to(sink)
            }),
        ),
        (
            "map_stateful",
            Box::new(move |p, sink| {
                numbers(p)
                    .map_stateful(
                        || 0u64,
                        |seen, n| {
                            *seen += 1;
                            (n % 1000 == 0).then(|| format!("{n}"))
                        },
                    )
                    .write_to(sink)
            }),
        ),
        (
            "keyed map_stateful",
            Box::new(move |p, sink| {
                numbers(p)
                    .grouping_key(|n: &u64| n % 97)
                    .map_stateful(
                        || 0u64,
                        |count, key, _n| {
                            *count += 1;
                            (*count == 100).then(|| format!("{key}"))
                        },
                    )
                    .write_to(sink)
            }),
        ),
        (
            "distinct",
            Box::new(move |p, sink| {
                numbers(p)
                    .map(|n| n % 333)
                    .distinct()
                    .map(|n| format!("{n}"))
                    .write_to(sink)
            }),
        ),
        (
            "grouped aggregation",
            Box::new(move |p, sink| {
                numbers(p)
                    .grouping_key(|n: &u64| n % 7)
                    .aggregate(aggregate::summing(|n: &u64| *n as i64))
                    .map(|r| format!("{r:?}"))
                    .write_to(sink)
            }),
        ),
        (
            "aggregation of everything",
            Box::new(move |p, sink| {
                numbers(p)
                    .aggregate(aggregate::counting())
                    .map(|c| format!("{c}"))
                    .write_to(sink)
            }),
        ),
        (
            "sort",
            Box::new(move |p, sink| {
                numbers(p)
                    .map(|n| (n * 7919) % N)
                    .sort()
                    .map_stateful(
                        || 0u64,
                        |i, n| {
                            *i += 1;
                            Some(format!("{} {n}", *i - 1))
                        },
                    )
                    .write_to(sink)
            }),
        ),
        (
            "merge and rebalance",
            Box::new(move |p, sink| {
                numbers(p)
                    .merge(&small(p))
                    .rebalance()
                    .map(|n| format!("{n}"))
                    .write_to(sink)
            }),
        ),
    ];
    for (name, build) in cases {
        let (with, without) = with_and_without_snapshots(build);
        assert!(!without.is_empty(), "{name}: no output");
        assert_eq!(with.len(), without.len(), "{name}");
        assert!(with == without, "{name}: the outputs differ");
    }
}
