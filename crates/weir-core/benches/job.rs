//! Whole-job throughput: source -> fused map+filter -> sink over ten million `u64`s.
//!
//! The job, at parallelism 1 and 2 on a two-worker executor:
//!
//! - `source`: instance `i` of `p` emits its share of `0..N`;
//! - `map-filter`: one fused processor that maps `x -> x * 3 + 1` and keeps even results, in a
//!   single `process` call per inbox batch;
//! - `sink`: counts and sums what it receives (one atomic add per batch).
//!
//! Baselines, on one thread: `hand-loop` does the same map, filter and sum item by item, with
//! `black_box` on each input so the compiler keeps one iteration per item; `hand-loop-optimised`
//! lets the compiler do what it likes (vectorise). Each job run checks its count and sum against
//! the hand loop's, so the numbers cannot come from a job that dropped items.
//!
//! After criterion's report, one line per job variant gives items/s (source items, i.e. `N`
//! per run) and the ratio job / hand loop.
//!
//! This is the core DAG *unfused*: every item crosses two conveyors, so it measures the cost
//! of a queue hop, not of the computation. The target (a fused job at parallelism 1
//! reaching 0.5 of the hand loop) is measured by the root `benches/fused_job.rs`, where the
//! planner fuses source, map, filter and sink into one vertex.
//!
//! Run: `cargo bench -p weir-core --bench job`

mod support;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::Rate;

use criterion::{Criterion, SamplingMode, Throughput};
use weir_core::{
    Dag, Edge, Executor, ExecutorConfig, Inbox, JobConfig, Outbox, Processor, ProcessorContext,
    ProcessorResult, Vertex,
};

/// Source items per run.
const N: u64 = 10_000_000;

/// The map step.
#[inline(always)]
fn map(x: u64) -> u64 {
    x * 3 + 1
}

/// The filter step.
#[inline(always)]
fn keep(y: &u64) -> bool {
    y.is_multiple_of(2)
}

/// Emits instance `i`'s share of `0..n` on output 0.
struct RangeSource {
    next: u64,
    end: u64,
}

impl RangeSource {
    fn new(n: u64, ctx: &ProcessorContext) -> Self {
        let (i, p) = (ctx.global_index() as u64, ctx.local_parallelism() as u64);
        RangeSource {
            next: n * i / p,
            end: n * (i + 1) / p,
        }
    }
}

impl Processor for RangeSource {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let port = outbox.port::<u64>(0);
        while self.next < self.end {
            if port.offer(self.next).is_err() {
                return Ok(false);
            }
            self.next += 1;
        }
        Ok(true)
    }
}

/// Map and filter fused into one processor: one pass over the inbox per call.
struct MapFilter {
    /// A mapped item the outbox refused, offered first on the next call.
    pending: Option<u64>,
}

impl MapFilter {
    /// Offers the pending item; false if it is still refused.
    fn flush(&mut self, outbox: &mut Outbox) -> bool {
        match self.pending.take() {
            Some(y) => match outbox.port::<u64>(0).offer(y) {
                Ok(()) => true,
                Err(y) => {
                    self.pending = Some(y);
                    false
                }
            },
            None => true,
        }
    }
}

impl Processor for MapFilter {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        if !self.flush(outbox) {
            return Ok(());
        }
        let items = inbox.items::<u64>();
        let port = outbox.port::<u64>(0);
        while let Some(x) = items.pop_front() {
            let y = map(x);
            if keep(&y)
                && let Err(y) = port.offer(y)
            {
                self.pending = Some(y);
                return Ok(());
            }
        }
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(self.flush(outbox))
    }
}

/// Counts and sums what it receives, publishing once per batch.
struct SumSink {
    count: Arc<AtomicU64>,
    sum: Arc<AtomicU64>,
}

impl Processor for SumSink {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<u64>();
        let sum = items
            .drain(..)
            .fold((0u64, 0u64), |(n, s), y| (n + 1, s.wrapping_add(y)));
        self.count.fetch_add(sum.0, Ordering::Relaxed);
        self.sum.fetch_add(sum.1, Ordering::Relaxed);
        Ok(())
    }
}

/// Runs the job once at `parallelism`; returns (items kept, their sum).
fn run_job(executor: &Executor, parallelism: usize) -> (u64, u64) {
    let count = Arc::new(AtomicU64::new(0));
    let sum = Arc::new(AtomicU64::new(0));
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", |ctx: &ProcessorContext| RangeSource::new(N, ctx))
            .emits::<u64>()
            .local_parallelism(parallelism),
    );
    let fused = dag.vertex(
        Vertex::new("map-filter", |_| MapFilter { pending: None })
            .accepts::<u64>()
            .emits::<u64>()
            .local_parallelism(parallelism),
    );
    let (c, s) = (Arc::clone(&count), Arc::clone(&sum));
    let sink = dag.vertex(
        Vertex::new("sink", move |_: &ProcessorContext| SumSink {
            count: Arc::clone(&c),
            sum: Arc::clone(&s),
        })
        .accepts::<u64>()
        .local_parallelism(parallelism),
    );
    dag.edge(Edge::between(source, fused));
    dag.edge(Edge::between(fused, sink));
    let job = executor
        .submit(dag, JobConfig::default())
        .expect("the job is valid");
    assert!(job.wait_timeout(Duration::from_secs(120)), "the job hung");
    job.join().expect("the job completes");
    (count.load(Ordering::Relaxed), sum.load(Ordering::Relaxed))
}

/// The same work on one thread, one item per iteration.
fn hand_loop() -> (u64, u64) {
    let (mut count, mut sum) = (0u64, 0u64);
    for x in 0..N {
        let y = map(black_box(x));
        if keep(&y) {
            count += 1;
            sum = sum.wrapping_add(y);
        }
    }
    (count, sum)
}

/// The same work on one thread, written naturally; the compiler may vectorise it.
fn hand_loop_optimised() -> (u64, u64) {
    (0..black_box(N))
        .map(map)
        .filter(keep)
        .fold((0u64, 0u64), |(n, s), y| (n + 1, s.wrapping_add(y)))
}

/// The (iterations, time) of every timed call criterion made for one variant.
type Samples = Mutex<Vec<(u64, Duration)>>;

/// Criterion samples per variant.
const SAMPLE_SIZE: usize = 10;

/// Items (of `N` per run) per second over criterion's measurement.
fn items_per_second(samples: &Samples) -> Rate {
    support::items_per_second(&samples.lock().unwrap(), N, SAMPLE_SIZE)
}

fn timed(
    samples: &Samples,
    iters: u64,
    expected: (u64, u64),
    mut run: impl FnMut() -> (u64, u64),
) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        assert_eq!(run(), expected, "count and sum differ from the hand loop's");
    }
    let elapsed = start.elapsed();
    samples.lock().unwrap().push((iters, elapsed));
    elapsed
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let executor = Executor::new(ExecutorConfig {
        workers: 2,
        ..Default::default()
    })
    .expect("start the executor");
    let expected = hand_loop();
    assert_eq!(hand_loop_optimised(), expected);

    let hand: Samples = Mutex::new(Vec::new());
    let hand_opt: Samples = Mutex::new(Vec::new());
    let jobs: [(usize, Samples); 2] = [(1, Mutex::new(Vec::new())), (2, Mutex::new(Vec::new()))];

    let mut group = criterion.benchmark_group("job");
    group.throughput(Throughput::Elements(N));
    group.sample_size(SAMPLE_SIZE);
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function("hand-loop", |b| {
        b.iter_custom(|iters| timed(&hand, iters, expected, hand_loop))
    });
    group.bench_function("hand-loop-optimised", |b| {
        b.iter_custom(|iters| timed(&hand_opt, iters, expected, hand_loop_optimised))
    });
    for (parallelism, samples) in &jobs {
        group.bench_function(
            format!("source-map-filter-sink/parallelism-{parallelism}"),
            |b| {
                b.iter_custom(|iters| {
                    timed(samples, iters, expected, || {
                        run_job(&executor, *parallelism)
                    })
                })
            },
        );
    }
    group.finish();
    criterion.final_summary();

    let hand = items_per_second(&hand);
    let hand_opt = items_per_second(&hand_opt);
    println!("job summary: hand loop (black_box per item, 1 thread): {hand}");
    println!("job summary: hand loop (optimised by the compiler, 1 thread): {hand_opt}");
    for (parallelism, samples) in &jobs {
        let job = items_per_second(samples);
        println!(
            "job summary: job at parallelism {parallelism}: {job}; job/hand loop = {:.3}; \
             job/optimised hand loop = {:.3}",
            job.mean / hand.mean,
            job.mean / hand_opt.mean,
        );
    }
    let ratio = items_per_second(&jobs[0].1).mean / hand.mean;
    println!(
        "job summary: unfused, two hops per item; job(parallelism 1)/hand loop = {ratio:.3} \
         (the fused target is checked by benches/fused_job.rs)"
    );
}
