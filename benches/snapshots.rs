//! What snapshots cost: NEXMark q5 with and without them, their size, duration and alignment
//! time (also under backpressure), and how long a restore of a large state takes.
//!
//! ```text
//! cargo bench --bench snapshots                                   # all three parts
//! cargo bench --bench snapshots -- --events 100000000 --runs 3   # the cost part's input
//! cargo bench --bench snapshots -- --parts cost,backpressure,recovery --keys 8000000
//! ```
//!
//! # Cost
//!
//! q5 over the NEXMark generator: `--events` events (100 M) at 100,000 events per second of
//! event time, so 1,000 s of event time in which q5's sliding windows fire and their state is
//! evicted all through the run; about 6 s of wall time per run on 2 cores, so that the 1 s
//! interval takes several snapshots (a run with fewer than 3, or fewer than half its
//! interval count, fails the bench rather than report a ratio that measured nothing). Parallelism 2 (one instance per worker). Three runs: without
//! snapshots (the yardstick: the same job doing the same work, so the ratio is what snapshots
//! cost), with a snapshot every 1 s (the target: ≥ 0.9 of the yardstick) and every 100 ms.
//! Each is the best of `--runs`; every run's row count and checksum must equal the first's.
//! Snapshots go to a temporary folder on the machine's disk (fsync included).
//!
//! # Backpressure
//!
//! The same query behind a `rebalance()` and a stage that spins `--spin-us` (20) per event, so
//! the queues in front of it stay full: barriers wait behind full queues, and alignment holds
//! inputs back. Reported: duration and alignment time, p50 and p99.
//!
//! # Recovery
//!
//! A keyed `map_stateful` holding `--keys` (8 M) keys of 100 bytes each, about 1 GB in its
//! snapshot. The job runs to its end and takes its terminal snapshot; the same job is then
//! submitted again, and the time `submit` takes (finding, reading, checking and decoding the
//! snapshot, and restoring every key into its instance) is the recovery time.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weir::prelude::*;
use weir::snapshot::{Guarantee, LocalDirStore, SnapshotConfig, SnapshotStats};
use weir::{BoxError, SinkWriter};
use weir_nexmark::generator::GeneratorConfig;
use weir_nexmark::pipelines;
use weir_nexmark::reference::Q5Row;
use weir_nexmark::source;

use support::{flag, wait_for_quiet};

/// Counts q5 rows and sums a hash of their fields into shared totals at close.
struct Checksum {
    count: u64,
    sum: u64,
    shared: Arc<(AtomicU64, AtomicU64)>,
}

impl SinkWriter for Checksum {
    type Item = Q5Row;
    fn write(&mut self, row: Q5Row) -> Result<(), BoxError> {
        self.count += 1;
        let h = (row.window_start as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add((row.auction as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
            .wrapping_add(row.num.wrapping_mul(0x1656_67B1_9E37_79F9));
        self.sum = self.sum.wrapping_add(h);
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.shared.0.fetch_add(self.count, Ordering::Relaxed);
        self.shared.1.fetch_add(self.sum, Ordering::Relaxed);
        Ok(())
    }
}

/// One q5 run: its time, its (rows, checksum) and its snapshots.
struct Run {
    time: Duration,
    result: (u64, u64),
    snapshots: Vec<SnapshotStats>,
}

fn q5_run(events: u64, interval: Option<Duration>, spin: Option<Duration>) -> Run {
    let shared = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let sink_shared = Arc::clone(&shared);
    let config = GeneratorConfig {
        count: Some(events),
        rate: 100_000,
        ..GeneratorConfig::default()
    };
    let p = Pipeline::new();
    let events_stage = p
        .read_from(source::stream_generator(config, None).expect("config"))
        .with_native_timestamps(4_000);
    let events_stage = match spin {
        Some(spin) => events_stage.rebalance().map(move |e| {
            let until = Instant::now() + spin;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            e
        }),
        None => events_stage,
    };
    pipelines::q5(&events_stage).write_to(Sink::new("checksum", None, move |_| Checksum {
        count: 0,
        sum: 0,
        shared: Arc::clone(&sink_shared),
    }));
    let dir = tempfile::tempdir().expect("a temporary folder");
    let snapshots = interval.map(|interval| {
        SnapshotConfig::new(
            Arc::new(LocalDirStore::new(dir.path())),
            interval,
            Guarantee::ExactlyOnce,
        )
    });
    let mut config = JobConfig::default().with_name("q5");
    config.snapshots = snapshots;
    let start = Instant::now();
    let job = p.submit(&Executor::shared(), config).expect("submit");
    assert!(job.wait_timeout(Duration::from_secs(3600)), "the job ends");
    let snapshots = job.snapshot_stats();
    job.join().expect("the job succeeds");
    Run {
        time: start.elapsed(),
        result: (
            shared.0.load(Ordering::Relaxed),
            shared.1.load(Ordering::Relaxed),
        ),
        snapshots,
    }
}

/// The value at quantile `q` of `values` (sorted here).
fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// p50 and p99 of a snapshot figure, over the snapshots that are not terminal.
fn spread(stats: &[SnapshotStats], f: impl Fn(&SnapshotStats) -> f64) -> (f64, f64) {
    let mut v: Vec<f64> = stats.iter().filter(|s| !s.terminal).map(f).collect();
    (quantile(&mut v, 0.5), quantile(&mut v, 0.99))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print_snapshots(label: &str, stats: &[SnapshotStats]) {
    let n = stats.iter().filter(|s| !s.terminal).count();
    let (d50, d99) = spread(stats, |s| ms(s.duration));
    let (a50, a99) = spread(stats, |s| ms(s.alignment));
    let (w50, w99) = spread(stats, |s| ms(s.write));
    let (b50, b99) = spread(stats, |s| s.bytes as f64 / 1024.0);
    println!(
        "{label:<28} {n:>4} snapshots  duration p50 {d50:>7.1} p99 {d99:>7.1} ms  alignment p50 {a50:>6.1} p99 {a99:>6.1} ms  write p50 {w50:>6.1} p99 {w99:>6.1} ms  size p50 {b50:>8.1} p99 {b99:>8.1} KiB"
    );
}

fn cost(events: u64, runs: usize) {
    println!("## cost: q5, {events} events at 100,000/s of event time, parallelism 2\n");
    println!(
        "{:<28} {:>9} {:>10} {:>14} {:>8}",
        "run", "seconds", "M ev/s", "rows", "ratio"
    );
    let variants: [(&str, Option<Duration>); 3] = [
        ("no snapshots (yardstick)", None),
        ("snapshot every 1 s", Some(Duration::from_secs(1))),
        ("snapshot every 100 ms", Some(Duration::from_millis(100))),
    ];
    let mut base: Option<(Duration, (u64, u64))> = None;
    for (label, interval) in variants {
        let mut best: Option<Run> = None;
        for _ in 0..runs {
            wait_for_quiet(10.0, Duration::from_secs(30));
            let run = q5_run(events, interval, None);
            if let Some((_, result)) = base {
                assert_eq!(
                    run.result, result,
                    "{label}: rows differ from the run without snapshots"
                );
            }
            if best.as_ref().is_none_or(|b| run.time < b.time) {
                best = Some(run);
            }
        }
        let best = best.expect("at least one run");
        let (base_time, _) = *base.get_or_insert((best.time, best.result));
        println!(
            "{label:<28} {:>9.3} {:>10.2} {:>14} {:>7.2}x",
            best.time.as_secs_f64(),
            events as f64 / best.time.as_secs_f64() / 1e6,
            best.result.0,
            base_time.as_secs_f64() / best.time.as_secs_f64()
        );
        if let Some(interval) = interval {
            print_snapshots("", &best.snapshots);
            // A run that ends before its snapshots start measures nothing about them.
            let taken = best.snapshots.iter().filter(|s| !s.terminal).count();
            let wanted = (best.time.as_secs_f64() / interval.as_secs_f64() * 0.5) as usize;
            assert!(
                taken >= 3 && taken >= wanted,
                "{label}: {taken} snapshots in {:.2} s; the run is too short for its interval (raise --events)",
                best.time.as_secs_f64()
            );
        }
    }
    println!();
}

fn backpressure(events: u64, spin: Duration) {
    println!(
        "## backpressure: q5 behind a rebalance and a {} µs stage, {events} events\n",
        spin.as_micros()
    );
    let base = q5_run(events, None, Some(spin));
    println!(
        "{:<28} {:>9.3} s (yardstick, no snapshots)",
        "no snapshots",
        base.time.as_secs_f64()
    );
    for interval in [Duration::from_secs(1), Duration::from_millis(100)] {
        let run = q5_run(events, Some(interval), Some(spin));
        assert_eq!(run.result, base.result, "rows differ under backpressure");
        let label = format!("every {} ms", interval.as_millis());
        println!(
            "{label:<28} {:>9.3} s  {:.2}x",
            run.time.as_secs_f64(),
            base.time.as_secs_f64() / run.time.as_secs_f64()
        );
        print_snapshots("", &run.snapshots);
    }
    println!();
}

/// A job whose keyed `map_stateful` keeps 100 bytes for each of `keys` keys.
fn state_job(keys: u64) -> Pipeline {
    let p = Pipeline::new();
    let (sink, _) = sinks::collection::list::<u64>();
    p.read_from(sources::stream::generator(0, Some(keys), |n| n))
        .with_timestamps(|n: &u64| *n as i64, 0)
        .grouping_key(|n: &u64| *n)
        .map_stateful(
            None,
            String::new,
            |state: &mut String, key: &u64, _n: u64| -> Option<u64> {
                state.push_str(&format!("{key:0>100}"));
                None
            },
        )
        .write_to(sink);
    p
}

fn recovery(keys: u64) {
    println!("## recovery: keyed state of {keys} keys × 100 bytes\n");
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = || {
        JobConfig::default()
            .with_name("state")
            .with_snapshots(SnapshotConfig::new(
                Arc::new(LocalDirStore::new(dir.path())),
                Duration::from_secs(3600),
                Guarantee::ExactlyOnce,
            ))
    };
    let start = Instant::now();
    let job = state_job(keys)
        .submit(&Executor::shared(), config())
        .expect("submit");
    assert!(job.wait_timeout(Duration::from_secs(3600)));
    let stats = job.snapshot_stats();
    job.join().expect("the state job succeeds");
    let terminal = stats
        .iter()
        .find(|s| s.terminal)
        .expect("a terminal snapshot");
    println!(
        "build and save: {:.2} s in all; terminal snapshot {:.1} MB, written and synced in {:.2} s",
        start.elapsed().as_secs_f64(),
        terminal.bytes as f64 / 1e6,
        terminal.write.as_secs_f64()
    );
    let start = Instant::now();
    let job = state_job(keys)
        .submit(&Executor::shared(), config())
        .expect("the restore");
    let restore = start.elapsed();
    assert_eq!(job.restored_from(), Some(terminal.id));
    println!(
        "restore: {:.2} s ({:.0} MB/s): read, check, decode, and every key back in its instance",
        restore.as_secs_f64(),
        terminal.bytes as f64 / 1e6 / restore.as_secs_f64()
    );
    job.join().expect("the restored job ends");
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let num =
        |name: &str, default: u64| flag(&args, name).map_or(default, |v| v.parse().expect(name));
    let parts = flag(&args, "--parts").unwrap_or_else(|| "cost,backpressure,recovery".into());
    // About 6 s per run on 2 cores: several snapshots at the 1 s interval.
    let events = num("--events", 100_000_000);
    let runs = num("--runs", 3) as usize;
    if parts.contains("cost") {
        cost(events, runs);
    }
    if parts.contains("backpressure") {
        backpressure(
            num("--bp-events", 200_000),
            Duration::from_micros(num("--spin-us", 20)),
        );
    }
    if parts.contains("recovery") {
        recovery(num("--keys", 8_000_000));
    }
}
