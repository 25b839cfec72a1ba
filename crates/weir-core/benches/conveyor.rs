//! Conveyor throughput: one million `u64`s from a producer thread to a consumer thread,
//! along the path the engine really takes.
//!
//! One group, `conveyor`, holds five variants side by side:
//!
//! - `weir-emit` (**the headline**): what a fused pipeline vertex does to hand items to the
//!   next vertex. Each producer call first flushes what is left of its backlog and ends if
//!   that does not all go (`SourceHead::complete` → `Emit::flush`); otherwise it reads a batch
//!   of 1024 items one at a time into a `Vec` (the source's `Emitter`), moves it into `Emit`'s
//!   backlog (`push_batch`) and flushes: `OutPort::offer_from` → `Sender::send_from`, at most
//!   the per-call batch limit of 1024, one release store per run. Every pipeline vertex emits
//!   through `Emit`, so this is the figure that matters for jobs.
//! - `weir-offer`: `OutPort::offer` → `Sender::try_send`, one item and one release store at a
//!   time, as the core processors (`weir_core::builtin_processors`, aggregations, window frames) emit.
//! - `hand-ring-batched` (**the yardstick**): the same transfer written by hand as a good
//!   engineer would, moving runs as the engine does: an `rtrb` ring of the same capacity
//!   (1024 `u64`s, no message enum around them), the producer writing each run of up to
//!   1024 items into one write chunk (one release store per run), the consumer reading
//!   every item available, up to 1024, from one read chunk (one release store per run) and
//!   stopping once the producer has gone and the ring is empty. Both sides wait as the Weir
//!   variants do (see below). The summary's ratios are against it.
//! - `hand-mpsc-sync-channel`: the same transfer through `std::sync::mpsc::sync_channel(1024)`,
//!   one item at a time: the yardstick before the batched one, kept for comparison with
//!   older figures;
//! - `hand-single-thread-loop`: no transfer at all, one thread summing the numbers (with
//!   `black_box` on each item so the compiler cannot replace the loop by a formula): the
//!   ceiling.
//!
//! Both Weir variants use the engine's sizes: conveyor capacity `DEFAULT_CAPACITY` (1024),
//! batch limit `DEFAULT_BATCH_LIMIT` (1024), and a consumer that calls `drain_into` with the
//! inbox batch of 1024, as the tasklet does, and sums what it took. A side whose queue is full
//! or empty spins, yielding the CPU after 1024 failed attempts (this harness; a worker backs
//! off in its own way). `OutPort` itself has no public constructor over a bare conveyor, so
//! the bench makes the same conveyor calls the port makes for a single round-robin target.
//!
//! Every variant checks its sum. After criterion's report, one summary line gives the
//! headline's items/s, its spread over the samples, and its ratio to the batched hand-written
//! ring, then the same for `weir-offer`, then the yardsticks' own rates. Target: the headline
//! >= 50 M items/s.
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
use weir_core::outbox::DEFAULT_BATCH_LIMIT;

/// Items moved per iteration.
const N: u64 = 1_000_000;
/// Queue capacity, for the conveyor, the hand-written ring and the `sync_channel` alike: the
/// engine's default.
const CAPACITY: usize = conveyor::DEFAULT_CAPACITY;
/// The most items a port accepts per producer call: the engine's default.
const BATCH_LIMIT: usize = DEFAULT_BATCH_LIMIT;
/// The most items a source hands its chain at once (`weir`'s `read_ahead::BATCH`).
const SOURCE_BATCH: usize = 1024;
/// The most items one `drain_into` call moves: the engine's inbox batch
/// (`JobConfig::inbox_batch`).
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

/// The consumer side of both conveyor variants, as a tasklet fills its inbox: drains runs
/// until the done marker and sums them.
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

/// The headline: `0..N` along the engine's emitting path (see the module docs); returns the
/// sum the consumer took.
fn emit_transfer() -> u64 {
    let (mut tx, mut rx) = conveyor::channel::<u64>(CAPACITY);
    thread::scope(|s| {
        s.spawn(move || {
            let mut batch: Vec<u64> = Vec::with_capacity(SOURCE_BATCH);
            let mut backlog: VecDeque<u64> = VecDeque::new();
            let mut next = 0;
            let mut waiting = 0u32;
            loop {
                // One producer call. The backlog left by the last one goes first; if it does
                // not all go, the call ends without reading.
                let mut accepted = 0;
                if !backlog.is_empty() {
                    accepted = tx.send_from(&mut backlog, BATCH_LIMIT);
                    if !backlog.is_empty() {
                        if accepted == 0 {
                            wait(&mut waiting);
                        } else {
                            waiting = 0;
                        }
                        continue;
                    }
                }
                if next == N {
                    break;
                }
                let end = (next + SOURCE_BATCH as u64).min(N);
                for i in next..end {
                    // A source emits one item at a time; black_box keeps the compiler from
                    // turning the loop into a bulk fill no source could do.
                    batch.push(black_box(i));
                }
                next = end;
                backlog.extend(batch.drain(..));
                if tx.send_from(&mut backlog, BATCH_LIMIT - accepted) > 0 {
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

/// `0..N` offered one at a time with `try_send`, as `OutPort::offer` does; returns the sum the
/// consumer took.
fn offer_transfer() -> u64 {
    let (mut tx, mut rx) = conveyor::channel::<u64>(CAPACITY);
    thread::scope(|s| {
        s.spawn(move || {
            let mut next = 0;
            let mut waiting = 0u32;
            while next < N {
                match tx.try_send(black_box(next)) {
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

/// The yardstick: `0..N` through a hand-written batched ring (see the module docs); returns
/// the sum the consumer took.
fn ring_transfer() -> u64 {
    let (mut tx, mut rx) = rtrb::RingBuffer::<u64>::new(CAPACITY);
    thread::scope(|s| {
        s.spawn(move || {
            let mut next = 0;
            let mut waiting = 0u32;
            while next < N {
                let room = tx.slots().min(BATCH_LIMIT).min((N - next) as usize);
                if room == 0 {
                    wait(&mut waiting);
                    continue;
                }
                waiting = 0;
                let chunk = tx
                    .write_chunk_uninit(room)
                    .expect("slots() promised the room");
                // One item at a time, as a source produces them (see `emit_transfer`).
                next += chunk.fill_from_iter((next..).map(black_box)) as u64;
            }
            // Dropping the producer tells the consumer nothing more comes.
        });
        let mut sum = 0u64;
        let mut waiting = 0u32;
        loop {
            let ready = rx.slots().min(DRAIN_LIMIT);
            if ready == 0 {
                // Checked before a last look, so that items written just before the
                // producer went are not missed.
                if rx.is_abandoned() && rx.is_empty() {
                    return sum;
                }
                wait(&mut waiting);
                continue;
            }
            waiting = 0;
            let chunk = rx.read_chunk(ready).expect("slots() promised the items");
            let (a, b) = chunk.as_slices();
            sum = a.iter().chain(b).fold(sum, |sum, &x| sum.wrapping_add(x));
            chunk.commit_all();
        }
    })
}

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

static EMIT: Variant = Variant::new(
    "weir-emit",
    "weir emitting path (Emit backlog, offer_from/send_from, drain_into)",
    emit_transfer,
);
static OFFER: Variant = Variant::new(
    "weir-offer",
    "weir per-item offer (try_send, drain_into)",
    offer_transfer,
);
static RING: Variant = Variant::new(
    "hand-ring-batched",
    "hand-written batched ring (rtrb, runs of up to 1024, 2 threads)",
    ring_transfer,
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
    for variant in [&EMIT, &OFFER, &RING, &MPSC, &LOOP] {
        group.bench_function(variant.id, |b| b.iter_custom(|iters| variant.time(iters)));
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_conveyor(&mut criterion);
    criterion.final_summary();

    let emit = EMIT.items_per_second();
    let offer = OFFER.items_per_second();
    let ring = RING.items_per_second();
    let mpsc = MPSC.items_per_second();
    let plain = LOOP.items_per_second();
    let target = if emit.mean >= 50e6 { "met" } else { "MISSED" };
    println!(
        "conveyor summary: headline, {}: {emit} ({:.2}x the batched ring, {:.2}x mpsc, \
         {:.3}x loop); {}: {offer} ({:.2}x the batched ring, {:.2}x mpsc); yardstick, {}: \
         {ring}; {}: {mpsc}; {}: {plain}; target: headline >= 50 M items/s: {target}",
        EMIT.label,
        emit.mean / ring.mean,
        emit.mean / mpsc.mean,
        emit.mean / plain.mean,
        OFFER.label,
        offer.mean / ring.mean,
        offer.mean / mpsc.mean,
        RING.label,
        MPSC.label,
        LOOP.label,
    );
}
