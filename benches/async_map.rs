//! `map_async` item by item against a simulated service of 5 ms latency, capacity 100: the
//! limit is capacity / latency = 20,000 items/s per instance.
//!
//! ```text
//! cargo bench --bench async_map                 # 60,000 items per run, best of 3
//! cargo bench --bench async_map -- --items 100000 --runs 5
//! ```
//!
//! The service is `precise_sleep(5 ms)` (a timer thread, about 0.1 ms late at most; tokio's
//! own timer rounds up to the next millisecond). Each run is a whole pipeline: a collection
//! source, `map_async` at parallelism 1, a counting sink. The hand-written loop is the same
//! service driven straight from the runtime with a semaphore of 100 permits: what the
//! service itself allows. Ratios are to C / L, to C / L' where L' is the service's measured
//! mean latency (the timer's own lateness included), and to that loop.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weir::async_io::{AsyncOptions, OutputOrder};
use weir::prelude::*;
use weir_cli::model_server::precise_sleep;

const LATENCY: Duration = Duration::from_millis(5);
const CAPACITY: usize = 100;

/// Total time spent in the service, and calls, over the whole bench.
static SERVICE_NS: AtomicU64 = AtomicU64::new(0);
static SERVICE_CALLS: AtomicU64 = AtomicU64::new(0);

/// The simulated service: 5 ms, measured.
async fn service(x: u64) -> u64 {
    let start = Instant::now();
    precise_sleep(LATENCY).await;
    SERVICE_NS.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    SERVICE_CALLS.fetch_add(1, Ordering::Relaxed);
    x
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    let items = flag("--items").unwrap_or(60_000);
    let runs = flag("--runs").unwrap_or(3);
    let limit = CAPACITY as f64 / LATENCY.as_secs_f64();
    println!(
        "map_async, service latency {LATENCY:?}, capacity {CAPACITY}: limit C/L = {limit:.0} items/s; {items} items, best of {runs}"
    );
    let hand = best(runs, || hand_loop(items));
    let mut rows = vec![("hand-written loop (semaphore of 100)", hand)];
    for (name, order) in [
        ("weir map_async, ordered", OutputOrder::Ordered),
        ("weir map_async, unordered", OutputOrder::Unordered),
    ] {
        rows.push((name, best(runs, || pipeline(items, order))));
    }
    let measured = Duration::from_nanos(
        SERVICE_NS.load(Ordering::Relaxed) / SERVICE_CALLS.load(Ordering::Relaxed).max(1),
    );
    let measured_limit = CAPACITY as f64 / measured.as_secs_f64();
    println!(
        "measured service latency L' = {measured:?} (mean of every call): C/L' = {measured_limit:.0} items/s"
    );
    println!(
        "{:<38} {:>9} {:>12} {:>8} {:>9} {:>13}",
        "run", "seconds", "items/s", "vs C/L", "vs C/L'", "vs hand loop"
    );
    for (name, time) in rows {
        let rate = items as f64 / time.as_secs_f64();
        println!(
            "{:<38} {:>9.3} {:>12.0} {:>8.3} {:>9.3} {:>13.3}",
            name,
            time.as_secs_f64(),
            rate,
            rate / limit,
            rate / measured_limit,
            hand.as_secs_f64() / time.as_secs_f64()
        );
    }
}

fn best(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| f()).min().unwrap_or_default()
}

fn pipeline(items: usize, order: OutputOrder) -> Duration {
    let count = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&count);
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list::<u64>();
    p.read_from(sources::collection::items(0..items as u64))
        .map_async(
            AsyncOptions::ordered().order(order).capacity(CAPACITY),
            |x: u64| async move { Ok::<_, Infallible>(Some(service(x).await)) },
        )
        .local_parallelism(1)
        .peek_with(move |_| {
            c.fetch_add(1, Ordering::Relaxed);
        })
        .filter(|_| false)
        .write_to(sink);
    let start = Instant::now();
    p.run().expect("the job runs");
    let elapsed = start.elapsed();
    assert_eq!(count.load(Ordering::Relaxed), items as u64);
    assert!(out.is_empty());
    elapsed
}

fn hand_loop(items: usize) -> Duration {
    let rt = weir::async_io::runtime().expect("runtime");
    let start = Instant::now();
    rt.block_on(async {
        let permits = Arc::new(tokio::sync::Semaphore::new(CAPACITY));
        let mut tasks = Vec::with_capacity(items);
        for x in 0..items as u64 {
            let permit = Arc::clone(&permits).acquire_owned().await.expect("open");
            tasks.push(tokio::spawn(async move {
                let x = service(x).await;
                drop(permit);
                x
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
    });
    start.elapsed()
}
