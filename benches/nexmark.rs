//! NEXMark on the in-process generator: every query at parallelism 1 and 2, against the
//! generator alone, plus the latency of window results in a rate-limited run.
//!
//! ```text
//! cargo bench --bench nexmark                         # 10 M events per run
//! cargo bench --bench nexmark -- --events 2000000 --latency-events 20000000 --wall-rate 1000000
//! cargo bench --bench nexmark -- --latency-only
//! ```
//!
//! Every measurement runs in a child process (this bench re-invoked), timed from spawn to exit
//! with its peak RSS from `wait4`; results are counted, not written. Baselines: the generator
//! alone, as a hand-written loop (`Generator::iter`, one thread) and as a Weir job that only
//! reads the generator source. Events/s per core is events/s divided by the parallelism.
//!
//! Latency: the generator runs at `--wall-rate` events/s of wall-clock time with event time
//! starting now, so event time follows the clock. The source's watermark passes a window's
//! end `E` when it has seen event time `E + lag`, that is at wall time ≈ `E + lag`; the sink
//! records `now − (E + lag)` for every window result of q5 and q7.

mod support;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use weir::prelude::*;
use weir::{BoxError, ExecutorConfig, SinkWriter};
use weir_nexmark::generator::GeneratorConfig;
use weir_nexmark::{Generator, Query, queries, source};

const LAG_MS: i64 = 4000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Child: runs `what` ("generator", "hand-loop" or a query) over `events` events.
fn child(what: &str, events: u64, parallelism: usize) {
    let config = GeneratorConfig {
        count: Some(events),
        ..GeneratorConfig::default()
    };
    if what == "hand-loop" {
        let mut checksum = 0i64;
        for e in Generator::new(config).unwrap().iter() {
            checksum = checksum.wrapping_add(e.date_time());
        }
        std::hint::black_box(checksum);
        return;
    }
    let p = Pipeline::new();
    let stream = p
        .read_from(source::stream_generator(config, None).unwrap())
        .with_native_timestamps(LAG_MS);
    match what {
        "generator" => stream.map(|_| ()).write_to(sinks::collection::discard()),
        query => queries::row_count(query.parse::<Query>().unwrap(), &stream)
            .write_to(sinks::collection::discard()),
    }
    let executor = Executor::new(ExecutorConfig {
        workers: parallelism,
        ..ExecutorConfig::default()
    })
    .unwrap();
    let job = p
        .submit(
            &executor,
            JobConfig {
                default_parallelism: Some(parallelism),
                ..JobConfig::default()
            },
        )
        .unwrap();
    job.join().unwrap();
}

/// Records (window end, latency) for each window result it receives.
struct LatencySink {
    latencies: Arc<Mutex<Vec<(i64, i64)>>>,
    local: Vec<(i64, i64)>,
}

impl SinkWriter for LatencySink {
    type Item = i64;
    fn write(&mut self, window_end: i64) -> Result<(), BoxError> {
        self.local
            .push((window_end, now_ms() - (window_end + LAG_MS)));
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.latencies.lock().unwrap().append(&mut self.local);
        Ok(())
    }
}

/// Child: a rate-limited run of q5 and q7 together; prints the latency percentiles.
fn latency_child(events: u64, wall_rate: u64, parallelism: usize) {
    // The workers start first, so that the event time's origin (now) and the first read are
    // only a submission apart: event time then follows the wall clock.
    let executor = Executor::new(ExecutorConfig {
        workers: parallelism,
        ..ExecutorConfig::default()
    })
    .unwrap();
    let base = now_ms();
    let config = GeneratorConfig {
        count: Some(events),
        rate: wall_rate,
        base_time_ms: base,
        ..GeneratorConfig::default()
    };
    // The last event time: windows ending later than this minus the lag are closed by the end
    // of the input, not by the watermark, and have no latency to speak of.
    let last_event_time = base + (events as f64 * 1000.0 / wall_rate as f64) as i64;
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let p = Pipeline::new();
    let stream = p
        .read_from(source::stream_generator(config, Some(wall_rate)).unwrap())
        .with_native_timestamps(LAG_MS);
    let sink = |l: &Arc<Mutex<Vec<(i64, i64)>>>| {
        let l = Arc::clone(l);
        Sink::new("latency", None, move |_| LatencySink {
            latencies: Arc::clone(&l),
            local: Vec::new(),
        })
    };
    queries::q5(&stream)
        .map(|r| r.window_end)
        .write_to(sink(&latencies));
    queries::q7(&stream)
        .map(|r| r.window_end)
        .write_to(sink(&latencies));
    let started = Instant::now();
    p.submit(
        &executor,
        JobConfig {
            default_parallelism: Some(parallelism),
            ..JobConfig::default()
        },
    )
    .unwrap()
    .join()
    .unwrap();
    let elapsed = started.elapsed();
    let mut l: Vec<i64> = latencies
        .lock()
        .unwrap()
        .iter()
        .filter(|(end, _)| end + LAG_MS <= last_event_time)
        .map(|(_, latency)| *latency)
        .collect();
    l.sort_unstable();
    let pct = |p: f64| {
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
            .copied()
            .unwrap_or(-1)
    };
    println!(
        "latency: {} window results, {events} events at {wall_rate}/s in {:.1} s; watermark-to-sink ms p50 {} p99 {} p99.9 {} max {}",
        l.len(),
        elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        pct(0.999),
        l.last().copied().unwrap_or(-1)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| support::flag(&args, name);
    let events: u64 = flag("--events").map_or(10_000_000, |v| v.parse().unwrap());
    if let Some(what) = flag("--child") {
        let parallelism = flag("--parallelism").map_or(1, |v| v.parse().unwrap());
        return child(&what, events, parallelism);
    }
    if args.iter().any(|a| a == "--latency-child") {
        let rate = flag("--wall-rate").map_or(1_000_000, |v| v.parse().unwrap());
        let parallelism = flag("--parallelism").map_or(2, |v| v.parse().unwrap());
        return latency_child(events, rate, parallelism);
    }
    let latency_events: u64 = flag("--latency-events").map_or(20_000_000, |v| v.parse().unwrap());
    let wall_rate: u64 = flag("--wall-rate").map_or(1_000_000, |v| v.parse().unwrap());
    let me = std::env::current_exe().unwrap();
    let run = |what: &str, parallelism: usize| {
        let mut cmd = Command::new(&me);
        cmd.args([
            "--child",
            what,
            "--events",
            &events.to_string(),
            "--parallelism",
            &parallelism.to_string(),
        ]);
        support::time_child(cmd.stdout(Stdio::null()))
    };
    if args.iter().any(|a| a == "--latency-only") {
        let mut cmd = Command::new(&me);
        cmd.args([
            "--latency-child",
            "--events",
            &latency_events.to_string(),
            "--wall-rate",
            &wall_rate.to_string(),
            "--parallelism",
            "2",
        ]);
        let (_, rss) = support::time_child(&mut cmd);
        println!("latency run peak RSS {:.1} MiB", rss as f64 / 1024.0);
        return;
    }
    println!("NEXMark, {events} events per run, generator in process, results counted");
    println!(
        "{:<26} {:>3} {:>9} {:>14} {:>16} {:>10} {:>9}",
        "run", "p", "seconds", "events/s", "events/s/core", "vs gen", "RSS MiB"
    );
    let (hand, hand_rss) = run("hand-loop", 1);
    let rate = |d: Duration| events as f64 / d.as_secs_f64();
    println!(
        "{:<26} {:>3} {:>9.3} {:>14.0} {:>16.0} {:>10} {:>9.1}",
        "generator, hand loop",
        1,
        hand.as_secs_f64(),
        rate(hand),
        rate(hand),
        "",
        hand_rss as f64 / 1024.0
    );
    for parallelism in [1usize, 2] {
        let (gen_time, gen_rss) = run("generator", parallelism);
        let per_core = |d: Duration| rate(d) / parallelism as f64;
        println!(
            "{:<26} {:>3} {:>9.3} {:>14.0} {:>16.0} {:>10} {:>9.1}",
            "generator, weir job",
            parallelism,
            gen_time.as_secs_f64(),
            rate(gen_time),
            per_core(gen_time),
            "1.00x",
            gen_rss as f64 / 1024.0
        );
        for query in Query::ALL {
            let (t, rss) = run(query.name(), parallelism);
            println!(
                "{:<26} {:>3} {:>9.3} {:>14.0} {:>16.0} {:>9.2}x {:>9.1}",
                query.name(),
                parallelism,
                t.as_secs_f64(),
                rate(t),
                per_core(t),
                gen_time.as_secs_f64() / t.as_secs_f64(),
                rss as f64 / 1024.0
            );
        }
    }
    let mut cmd = Command::new(&me);
    cmd.args([
        "--latency-child",
        "--events",
        &latency_events.to_string(),
        "--wall-rate",
        &wall_rate.to_string(),
        "--parallelism",
        "2",
    ]);
    let (_, rss) = support::time_child(&mut cmd);
    println!("latency run peak RSS {:.1} MiB", rss as f64 / 1024.0);
}
