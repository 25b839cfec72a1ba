//! Conveyor throughput: one million `u64`s from a producer thread to a consumer thread.
//!
//! One group, `conveyor`, holds three variants side by side:
//!
//! - `weir-conveyor`: [`weir_core::conveyor::channel`] of capacity 1024; the producer calls
//!   `try_send` per item, the consumer `drain_into` a `VecDeque` and sums what it took; both
//!   spin while the queue is full or empty, yielding the CPU after 1024 failed attempts;
//! - `weir-conveyor-runs`: the same, but the producer sends runs of 256 with `send_from` (one
//!   release store per run), as the pipeline's emitting terminals do;
//! - `hand-mpsc-sync-channel`: the same transfer through `std::sync::mpsc::sync_channel(1024)`;
//! - `hand-single-thread-loop`: no transfer at all, one thread summing the numbers (with
//!   `black_box` on each item so the compiler cannot replace the loop by a formula): the ceiling.
//!
//! Every variant checks its sum. After criterion's report, one summary line gives the
//! conveyor's items/s and its ratio to each hand-written variant. Target: >= 50 M items/s.
//!
//! Run: `cargo bench -p weir-core --bench conveyor -- --warm-up-time 1 --measurement-time 3`

mod support;

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};
use support::Rate;

use criterion::{Criterion, Throughput};
use weir_core::conveyor::{self, Signal};

/// Items moved per iteration.
const N: u64 = 1_000_000;
/// Queue capacity, for the conveyor and the `sync_channel` alike.
const CAPACITY: usize = 1024;
/// The most items one `drain_into` call moves.
const DRAIN_LIMIT: usize = 1024;
/// Criterion samples per variant.
const SAMPLE_SIZE: usize = 20;
/// What every variant must compute.
const EXPECTED_SUM: u64 = N * (N - 1) / 2;

/// Waits for the other end of a conveyor: spins, and yields the CPU after a long run of
/// failed attempts, in case both threads landed on one CPU (this harness, not the conveyor).
fn wait(waiting: &mut u32) {
    *waiting += 1;
    if waiting.is_multiple_of(1024) {
        thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// The consumer side of both conveyor variants: drains runs until the done marker and sums
/// them.
fn consume(rx: &mut conveyor::Receiver<u64>) -> u64 {
    let mut buffer = VecDeque::with_capacity(DRAIN_LIMIT);
    let mut sum = 0u64;
    let mut waiting = 0u32;
    loop {
        let drained = rx.drain_into(&mut buffer, DRAIN_LIMIT);
        for x in buffer.drain(..) {
            sum = sum.wrapping_add(x);
        }
        match drained.signal {
            Some(Signal::Done) => return sum,
            _ if drained.items == 0 => wait(&mut waiting),
            _ => waiting = 0,
        }
    }
}

/// Moves `0..N` through a conveyor from a spawned producer to this thread; returns the sum.
fn conveyor_transfer() -> u64 {
    let (mut tx, mut rx) = conveyor::channel::<u64>(CAPACITY);
    thread::scope(|s| {
        s.spawn(move || {
            let mut next = 0;
            let mut waiting = 0u32;
            while next < N {
                match tx.try_send(next) {
                    Ok(()) => {
                        next += 1;
                        waiting = 0;
                    }
                    Err(_) => wait(&mut waiting),
                }
            }
            while !tx.send_done() {
                wait(&mut waiting);
            }
        });
        consume(&mut rx)
    })
}

/// Like [`conveyor_transfer`], but the producer sends runs with `send_from`, one release
/// store per run, as the pipeline's emitting terminals do.
fn conveyor_runs_transfer() -> u64 {
    let (mut tx, mut rx) = conveyor::channel::<u64>(CAPACITY);
    thread::scope(|s| {
        s.spawn(move || {
            let mut next = 0;
            let mut run = VecDeque::with_capacity(RUN);
            let mut waiting = 0u32;
            while next < N || !run.is_empty() {
                while run.len() < RUN && next < N {
                    run.push_back(next);
                    next += 1;
                }
                if tx.send_from(&mut run, RUN) == 0 {
                    wait(&mut waiting);
                } else {
                    waiting = 0;
                }
            }
            while !tx.send_done() {
                wait(&mut waiting);
            }
        });
        consume(&mut rx)
    })
}

/// Items a producer sends per run in [`conveyor_runs_transfer`].
const RUN: usize = 256;

/// Moves `0..N` through `std::sync::mpsc::sync_channel` from a spawned producer to this
/// thread; returns the sum.
fn mpsc_transfer() -> u64 {
    let (tx, rx) = mpsc::sync_channel::<u64>(CAPACITY);
    thread::scope(|s| {
        s.spawn(move || {
            for i in 0..N {
                tx.send(i)
                    .expect("the consumer lives until the sender is dropped");
            }
        });
        rx.iter().fold(0u64, u64::wrapping_add)
    })
}

/// Sums `0..N` on this thread, one item at a time.
fn single_thread_loop() -> u64 {
    let mut sum = 0u64;
    for i in 0..N {
        sum = sum.wrapping_add(black_box(i));
    }
    sum
}

/// One variant: its name in the report, its routine, and the (iterations, time) of every
/// timed call criterion made.
struct Variant {
    id: &'static str,
    label: &'static str,
    run: fn() -> u64,
    samples: Mutex<Vec<(u64, Duration)>>,
}

impl Variant {
    const fn new(id: &'static str, label: &'static str, run: fn() -> u64) -> Self {
        Variant {
            id,
            label,
            run,
            samples: Mutex::new(Vec::new()),
        }
    }

    fn time(&self, iters: u64) -> Duration {
        let start = Instant::now();
        for _ in 0..iters {
            let sum = (self.run)();
            assert_eq!(sum, EXPECTED_SUM, "{} computed a wrong sum", self.id);
        }
        let elapsed = start.elapsed();
        self.samples.lock().unwrap().push((iters, elapsed));
        elapsed
    }

    /// Items per second over criterion's measurement.
    fn items_per_second(&self) -> Rate {
        support::items_per_second(&self.samples.lock().unwrap(), N, SAMPLE_SIZE)
    }
}

static CONVEYOR: Variant = Variant::new(
    "weir-conveyor",
    "weir conveyor (2 threads, drain_into)",
    conveyor_transfer,
);
static CONVEYOR_RUNS: Variant = Variant::new(
    "weir-conveyor-runs",
    "weir conveyor (2 threads, send_from runs of 256, drain_into)",
    conveyor_runs_transfer,
);
static MPSC: Variant = Variant::new(
    "hand-mpsc-sync-channel",
    "hand-written mpsc::sync_channel (2 threads)",
    mpsc_transfer,
);
static LOOP: Variant = Variant::new(
    "hand-single-thread-loop",
    "hand-written single-thread loop",
    single_thread_loop,
);

fn bench_conveyor(c: &mut Criterion) {
    let mut group = c.benchmark_group("conveyor");
    group.throughput(Throughput::Elements(N));
    group.sample_size(SAMPLE_SIZE);
    for variant in [&CONVEYOR, &CONVEYOR_RUNS, &MPSC, &LOOP] {
        group.bench_function(variant.id, |b| b.iter_custom(|iters| variant.time(iters)));
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_conveyor(&mut criterion);
    criterion.final_summary();

    let conveyor = CONVEYOR.items_per_second();
    let runs = CONVEYOR_RUNS.items_per_second();
    let mpsc = MPSC.items_per_second();
    let plain = LOOP.items_per_second();
    let target = if conveyor.mean.max(runs.mean) >= 50e6 {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "conveyor summary: {}: {conveyor}; {}: {runs}; {}: {mpsc} (conveyor/mpsc = {:.2}); {}: {plain} \
         (conveyor/loop = {:.3}); target >= 50 M items/s: {target}",
        CONVEYOR.label,
        CONVEYOR_RUNS.label,
        MPSC.label,
        conveyor.mean / mpsc.mean,
        LOOP.label,
        conveyor.mean / plain.mean,
    );
}
