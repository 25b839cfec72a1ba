//! A fused job: `sequence → map → filter → sink`, which the planner fuses into one vertex, at
//! parallelism 1 and 2, against a hand-written loop doing the same arithmetic on as many
//! threads (the 2-thread loop splits the sequence in two halves, as the job's two instances
//! do).
//!
//! ```text
//! cargo bench --bench fused_job [-- --items N --runs R]
//! ```
//!
//! A second variant puts a `rebalance()` between map and filter, so every item crosses one
//! conveyor: the cost of a queue hop, next to the cost of fusion.
//!
//! The map is `x * 3 + 1`, the filter keeps even results, and the sink counts and sums what
//! reaches it. The hand loop passes every item through `black_box`, so the compiler cannot
//! turn it into a closed formula; the engine cannot either, since its stages are separate
//! closures called through the fused chain. Every run's count and sum are checked against
//! the hand loop's. The machine is shared: each run starts once other work keeps less than
//! 10% of the CPU time busy (or after 30 s of waiting).

mod support;

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weir::prelude::*;
use weir::{BoxError, ExecutorConfig, SinkWriter};

/// Adds what it receives into shared totals at close.
struct Totals {
    count: u64,
    sum: u64,
    shared: Arc<(AtomicU64, AtomicU64)>,
}

impl SinkWriter for Totals {
    type Item = u64;
    #[inline]
    fn write(&mut self, item: u64) -> Result<(), BoxError> {
        self.count += 1;
        self.sum = self.sum.wrapping_add(item);
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.shared.0.fetch_add(self.count, Ordering::Relaxed);
        self.shared.1.fetch_add(self.sum, Ordering::Relaxed);
        Ok(())
    }
}

/// The count and sum of the job over `range`, by hand.
fn hand_loop(range: std::ops::Range<u64>) -> (u64, u64) {
    let (mut count, mut sum) = (0u64, 0u64);
    for x in range {
        let y = black_box(x) * 3 + 1;
        if y % 2 == 0 {
            count += 1;
            sum = sum.wrapping_add(y);
        }
    }
    (count, sum)
}

/// The hand loop over `0..items` on `threads` threads, each taking an equal share, with the
/// shares' totals added up.
fn hand_loop_on(threads: u64, items: u64) -> (u64, u64) {
    if threads == 1 {
        return hand_loop(0..items);
    }
    std::thread::scope(|s| {
        let shares: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || hand_loop(items * t / threads..items * (t + 1) / threads)))
            .collect();
        shares
            .into_iter()
            .map(|share| share.join().expect("a hand-loop thread"))
            .fold((0u64, 0u64), |(count, sum), (c, s)| {
                (count + c, sum.wrapping_add(s))
            })
    })
}

fn job(executor: &Executor, parallelism: usize, items: u64, hop: bool) -> (Duration, (u64, u64)) {
    let shared = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let sink_shared = Arc::clone(&shared);
    let p = Pipeline::new();
    let mapped = p
        .read_from(sources::generator::sequence(items))
        .map(|x| x * 3 + 1);
    let mapped = if hop { mapped.rebalance() } else { mapped };
    mapped
        .filter(|y| y % 2 == 0)
        .write_to(Sink::new("totals", None, move |_| Totals {
            count: 0,
            sum: 0,
            shared: Arc::clone(&sink_shared),
        }));
    let start = Instant::now();
    let config = JobConfig::default().with_default_parallelism(parallelism);
    p.submit(executor, config)
        .expect("submits")
        .join()
        .expect("runs");
    (
        start.elapsed(),
        (
            shared.0.load(Ordering::Relaxed),
            shared.1.load(Ordering::Relaxed),
        ),
    )
}

/// Before each run, wait (at most `PATIENCE`) until other work on the shared machine keeps
/// less than `QUIET` of all CPU time busy.
const QUIET: f64 = 0.10;
const PATIENCE: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| support::flag(&args, name);
    let items: u64 = flag("--items").map_or(100_000_000, |v| v.parse().expect("--items N"));
    let runs: u64 = flag("--runs").map_or(5, |v| v.parse().expect("--runs N"));

    // The best time of the hand loop on 1 and on 2 threads.
    let mut hand = [Duration::MAX; 2];
    let mut expected = (0, 0);
    for threads in [1, 2] {
        for _ in 0..runs {
            support::wait_for_quiet(QUIET, PATIENCE);
            let start = Instant::now();
            let totals = hand_loop_on(threads, items);
            let elapsed = start.elapsed();
            if threads > 1 {
                assert_eq!(totals, expected, "the hand loops' count and sum differ");
            }
            expected = totals;
            let best = &mut hand[threads as usize - 1];
            *best = (*best).min(elapsed);
        }
    }
    let rate = |d: Duration| items as f64 / d.as_secs_f64() / 1e6;
    println!("fused job: sequence({items}) -> map -> filter -> sink, best of {runs}");
    println!(
        "{:<28} {:>10} {:>12} {:>14}",
        "run", "seconds", "M items/s", "vs hand loop"
    );
    for (threads, time) in (1..).zip(hand) {
        let name = if threads == 1 { "thread" } else { "threads" };
        println!(
            "{:<28} {:>10.3} {:>12.1} {:>13.2}x",
            format!("hand loop, {threads} {name}"),
            time.as_secs_f64(),
            rate(time),
            1.0
        );
    }
    for (hop, parallelism) in [(false, 1), (false, 2), (true, 1), (true, 2)] {
        let executor = Executor::new(ExecutorConfig {
            workers: parallelism,
            ..ExecutorConfig::default()
        })
        .unwrap();
        let mut best = Duration::MAX;
        for _ in 0..runs {
            support::wait_for_quiet(QUIET, PATIENCE);
            let (elapsed, totals) = job(&executor, parallelism, items, hop);
            assert_eq!(
                totals, expected,
                "the job's count and sum differ from the hand loop's"
            );
            best = best.min(elapsed);
        }
        let name = if hop {
            "weir + rebalance (1 hop), p"
        } else {
            "weir fused, parallelism "
        };
        // Each run is compared with the hand loop on as many threads.
        let hand = hand[parallelism - 1];
        println!(
            "{:<28} {:>10.3} {:>12.1} {:>13.2}x",
            format!("{name}{parallelism}"),
            best.as_secs_f64(),
            rate(best),
            hand.as_secs_f64() / best.as_secs_f64()
        );
    }
    let p = Pipeline::new();
    p.read_from(sources::generator::sequence(items))
        .map(|x| x * 3 + 1)
        .filter(|y| y % 2 == 0)
        .write_to(Sink::new("totals", None, |_| Totals {
            count: 0,
            sum: 0,
            shared: Arc::default(),
        }));
    print!("plan:\n{}", p.explain().unwrap());
}
