//! NEXMark: every query (q0 to q11; not q12, whose windows are of wall-clock time) as a Weir
//! job at parallelism 1 and 2, over the in-process generator and over a JSON Lines event
//! file (parse included), each run's result checked against the reference; q0, q5, q7 and
//! q11 also as hand-written single-thread loops, the yardstick; then the latency of window
//! results in paced runs. `--latency` runs only the latter; `--idle` measures what jobs and
//! a flow cost at low load or with nothing to do.
//!
//! ```text
//! cargo bench --bench nexmark                        # 10 M generated events, 2 M from a file
//! cargo bench --bench nexmark -- --runs 3            # best of 3 (default 1)
//! cargo bench --bench nexmark -- --inputs generator --queries q0,q5 --parallelism 1
//! cargo bench --bench nexmark -- --queries q6,q9,q10,q11 --events 2000000 --file-events 1000000 --no-latency
//! cargo bench --bench nexmark -- --events 2000000 --rate 20000 --no-latency
//! cargo bench --bench nexmark -- --latency [--wall-rates 1000000,100000 --latency-seconds 30 --q5-stages one,two] [--pin-workers auto]
//! cargo bench --bench nexmark -- --idle [--idle-seconds 10] [--pin-workers auto]
//! cargo bench --bench nexmark -- --observe --inputs generator --queries q5 --parallelism 2 --runs 5 --no-latency
//! ```
//!
//! # Inputs
//!
//! - **generator**: `--events` events (10 M) at `--rate` events per second of event time
//!   (100,000), so 100 s of event time: q5's and q7's windows fire and their state is evicted
//!   all through the run. `weir_nexmark::source::stream_generator`, one instance per worker.
//! - **file**: `--file-events` events (2 M) at `--file-rate` (20,000/s, again 100 s), written
//!   once by the generator to `target/bench-data/` as JSON Lines (about 0.5 GB) and read back
//!   by `weir_nexmark::source::stream_replay` (one instance handing out the events in file
//!   order, strict parse of every line on a pool of parser threads). A query's runs keep
//!   only the string fields it reads (`KeptStrings::for_query`: none for q0, q5 and q7),
//!   the engine's and the hand loops' alike; every field is still checked.
//! - **file-escaped**, **file-unicode**: the same events with the generator's `escaped`
//!   strings (about one character in eight is one JSON escapes: `\"`, `\\`, a newline, a tab,
//!   `\u0001`, `/`) or `unicode` ones (one in four multi-byte), as other producers write them.
//! - **file-independent**: `--file-events` events at `--file-rate` from a NEXMark generator
//!   written apart from this project (the `nexmark` crate, out of order in groups of 1,000),
//!   each line written by `serde_json` with its fields in another order
//!   (`tests/support/independent_nexmark.rs`). Its runs are checked against the reference
//!   computed from that generator's events, not from the file.
//!
//!   The default inputs are `generator,file,file-escaped`.
//!
//! Event time is each event's `date_time`, with the allowed lag of 4 s.
//!
//! # What a run computes, and the check
//!
//! Each query's rows reach a sink that receives the query's row type (`Q0Row`, `Q5Row`,
//! ...) and computes the row count and an order-independent checksum: the wrapping sum of a
//! stable 64-bit hash of each row's fields (floats by their bits: the CSV text of an `f64`
//! is its shortest round-trip form, so equal text is equal bits). Sink instances add their
//! sums at close. The "source" runs checksum the events themselves.
//!
//! Every run's count and checksum must equal those of `weir_nexmark::reference` on the same
//! events, or the bench fails. The reference results are computed once per event
//! configuration, in a child process, and cached in `target/bench-data/`.
//!
//! # Yardsticks
//!
//! - **source, hand loop**: one thread that generates (or reads and parses) the events and
//!   checksums them: the cost of the input alone. "vs source" divides a query's time by the
//!   Weir source-only job's at the same parallelism.
//! - **file, source by hand on p threads**: for the file input, the source hand loop reads
//!   the file in 1 MiB chunks parsed on `p` threads (std threads and bounded channels, chunks
//!   dealt and taken back round-robin, so the events arrive in file order), every event built
//!   whole, as the source-only job's are.
//! - **file, tight query loops on p threads** (`tight.rs`): q0, q5, q7 and q11 over a file
//!   on exactly `p` threads, the caller among them. Each thread `pread`s the next 1 MiB chunk
//!   into a buffer it reuses, checks its UTF-8 once and parses every line fully (every key,
//!   string, escape and number checked as strictly as the engine) into a 40-byte record of
//!   what the queries read; the caller folds the records in file order into the query's
//!   state below, parsing a later chunk itself while the next one is still with a helper. A
//!   Weir run at parallelism `p` is compared with it on `p` threads, and its file is parsed
//!   on `p` threads too (`stream_replay_with`), so parallelism 1 is one core's work.
//! - **q0, q5, q7, q11, hand loop**: one thread doing the query's work as a careful engineer
//!   would write it streaming: the reference's lateness (one watermark over all events, `max
//!   date_time seen - 4 s`; an event below it is dropped), windows that fire as the
//!   watermark passes their end, state evicted as they fire, rows built and checksummed as
//!   the sink does. q5 counts bids per auction in 2 s frames and sums five frames per 10 s
//!   window; q7 keeps per open 10 s window the highest price and its bids. Their results are
//!   checked against the reference too, and on a small input with late events before the
//!   timed runs. "vs hand" is the hand loop's time divided by the Weir job's (at parallelism
//!   2, against the same single-thread loop). A query with a hand loop has its Weir runs
//!   alternated with runs of that hand loop, one of each per round, and "vs hand" is the
//!   median of the rounds' ratios (each round's is printed under the row): the machine is
//!   shared and its speed drifts over minutes, so best times taken minutes apart make a
//!   ratio that swings from one invocation to the next.
//!
//! Every measurement runs in a child process (this bench re-invoked), timed from spawn to
//! exit (so it includes process start and planning), with its CPU time (user + system) and
//! peak RSS from `wait4`; the best of `--runs` is shown. The machine is shared: before each
//! run the bench waits (up to `--patience-s`, 30) until other work keeps less than
//! `--quiet-percent` (10) of all CPU time busy, and the "others" column shows the share it
//! saw before the best run. The reference is computed in a child so that this process stays
//! small: Linux reports a child's `ru_maxrss` as at least its parent's RSS at the spawn.
//!
//! # Observability (`--observe`)
//!
//! Each Weir query run is repeated with the observability server on (`weir_observe`, bound
//! to 127.0.0.1:0 on the shared tokio runtime, the job registered, its sampler running) and
//! a client in the same process polling `GET /api/v1/jobs/{id}` and `GET /metrics` once a
//! second, each answer checked (status 200, the job's JSON, a parsable scrape). "vs no ui"
//! divides the plain run's time by the observed run's: the goal is at least 0.97. The
//! observed runs alternate with the plain ones, so that a busy moment of the shared machine
//! does not fall on one side only.
//!
//! # Latency (`--latency`, or `--latency-only`)
//!
//! For each rate of `--wall-rates` (1,000,000 and 100,000 events/s), one child process runs,
//! for `--latency-seconds` (30) on 2 workers, one job of three branches over a single paced
//! generator (`source::stream_generator(config, Some(rate))`, an instance per worker, event
//! time starting when the child starts the job, so that event time follows the wall clock):
//!
//! - q5 (10 s windows sliding by 2 s) and q7 (10 s tumbling windows). Each rate runs once
//!   per form of q5 in `--q5-stages` (both by default): `one`, `pipelines::q5_single_stage`,
//!   whose bid counts are aggregated in one stage after the shuffle, and `two`,
//!   `pipelines::q5` as `weir nexmark run` runs it, partial counts per frame then combined;
//! - a keyed count: bids per `auction % 1000` in 1 s tumbling windows (`grouping_key`,
//!   `window(WindowDefinition::tumbling(1000))`, `aggregate(counting())`). Each 1 s window
//!   holds bids on thousands of auctions at these rates, so it gives 1,000 results, about
//!   24,000 in a 30 s run.
//!
//! A stage right after the source (`map_stateful`, fused with the source's read) notes, per
//! source instance and per millisecond of event time, the wall-clock time at which it first
//! saw an event of that millisecond or later. For each result of a window ending at `E`,
//! the sink reads the wall clock (µs) and records, into HdrHistograms (one per sink
//! instance, merged at the close):
//!
//! - **close → sink**: arrival minus the moment the last source instance handed on its first
//!   event at or after `E + lag`. A window closes when the watermark (the lowest of the
//!   instances' highest event time minus the lag) reaches its end, so this is the moment the
//!   window could close; all that follows is the engine's: the watermark's way to the window
//!   stage, the window's results, the queues, the sink. The goal: p99 < 10 ms and
//!   p99.99 < 20 ms.
//! - **end-to-end**: arrival minus `E + lag`, event time read as wall-clock time, less the
//!   source's least delay over the run. That is the time from the creation of the window's
//!   first event (its time stamp, the window's start `S`) to the result, less the window's
//!   length `E - S` and the lag, taking an event's time stamp as its creation, as the paced
//!   generator makes it. The least delay (printed) is the start-up: the generator paces from
//!   its first read, after planning and deployment, and never runs ahead of that pace, so
//!   the time from choosing the event-time origin to that read stays in every hand-on as a
//!   constant it never makes up. Any delay beyond it is counted: a source read late,
//!   instances that drift apart, a source that falls behind its rate.
//! - The difference of the two, how far the source ran behind its pace when the window
//!   could close, is printed as p50, p99 and max.
//!
//! Not measured: the first window (start-up), and windows that close only at the end of the
//! input (`E + lag` after some instance's last event). The child fails if a job measured
//! fewer windows than the watermark closes in the run or no result at all, if the keyed
//! count measured fewer than 10,000 results, or if a result came before its closing event
//! was handed on. q5 and q7 give few results (about 12 and 2 windows in 30 s), so their
//! percentiles are those of a few samples; the keyed count gives the 10,000. The child
//! process's wall and CPU time (from `wait4`) are printed after its table.
//!
//! The latency and idle children start their executor with the worker pinning that
//! `--pin-workers` names (`auto`, the engine's default; `always`; `never`, for a run with the
//! workers left to the scheduler), and print the CPU each worker was pinned to.
//!
//! # Idle cost (`--idle`)
//!
//! One child process at a time, each for about `--idle-seconds` (10), with 2 workers:
//!
//! - q5 over the paced generator at 1,000, 10,000 and 100,000 events/s (rate × seconds
//!   events, event time following the clock as above), until its input ends;
//! - q5 over a stream source that never yields (`futures::stream::pending()`, polled with
//!   the instance's waker as `sources::reactive` polls a stream; an instance per worker, with
//!   event time: a job waiting for data), cancelled when the time is up
//!   (`Job::wait_timeout`, then `cancel`);
//! - a flow with nothing to do: `weir flow run` (this package's binary) on GetFile watching
//!   an empty directory, into PutFile, with the default schedule, stopped by SIGTERM when the
//!   time is up.
//!
//! Each row gives the wall time (spawn to exit: start-up and shutdown included), the CPU
//! time (user + system of all threads, from `wait4`), their ratio as a share of one core,
//! the CPU per 1,000 events of the paced runs, the voluntary and involuntary context
//! switches per second (a worker's wake-up counts as a voluntary one), and the goal: at most
//! 2% of a core at 1,000 events/s, 10% at 100,000, 0.5% with no input and for the idle
//! flow. A last line checks that the CPU grows linearly with the rate: the 10,000 events/s
//! run against the line through the two others, and that line's cost at 0 events/s.
//!
//! Latency and idle runs, like the others, first wait (up to `--patience-s`) until other work
//! keeps less than `--quiet-percent` of the CPUs busy, and print the share they saw.

#[path = "../support/mod.rs"]
mod support;

mod checksum;
mod engine;
mod expected;
mod hand;
mod idle;
#[path = "../../tests/support/independent_nexmark.rs"]
mod independent_nexmark;
mod inputs;
mod latency;
mod tight;

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustc_hash::FxHashMap;
use weir::prelude::*;
use weir::sources::chunked::{ChunkOptions, for_each_line};
use weir::stream::StreamStage;
use weir::{BoxError, ExecutorConfig, Item, SinkWriter, WorkerPinning};
use weir_nexmark::generator::{GeneratorConfig, StringStyle};
use weir_nexmark::parse::{KeptStrings, parse_line_keeping};
use weir_nexmark::reference::{
    self, Q0Row, Q1Row, Q2Row, Q3Row, Q4Row, Q5_SLIDE_MS, Q5_WINDOW_MS, Q5Row, Q6Row, Q7_WINDOW_MS,
    Q7Row, Q8Row, Q9Row, Q10Row, Q11_SESSION_GAP_MS, Q11Row,
};
use weir_nexmark::{Event, Generator, Query, pipelines, source};

use checksum::*;
use engine::*;
use expected::*;
use hand::*;
use idle::*;
use independent_nexmark::independent_events;
use inputs::*;
use latency::*;
use tight::*;

/// The allowed lag of the watermark, as the reference's default.
const LAG_MS: i64 = reference::DEFAULT_ALLOWED_LAG_MS as i64;
/// Where generated event files and cached reference results go.
const DATA_DIR: &str = "target/bench-data";
/// Bump when the row hash changes, so that cached reference results are recomputed.
const CHECKSUM_VERSION: u32 = 2;
/// The queries that have a hand-written loop.
const HAND_QUERIES: [Query; 4] = [Query::Q0, Query::Q5, Query::Q7, Query::Q11];
/// The queries the bench runs: all but q12, whose windows are of wall-clock time, so that
/// its rows differ from run to run and cannot be checked by checksum.
const BENCH_QUERIES: [Query; 12] = [
    Query::Q0,
    Query::Q1,
    Query::Q2,
    Query::Q3,
    Query::Q4,
    Query::Q5,
    Query::Q6,
    Query::Q7,
    Query::Q8,
    Query::Q9,
    Query::Q10,
    Query::Q11,
];

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

// ---------------------------------------------------------------------------------------
// The parent

/// One measured configuration: its best run's wall time, CPU time, peak RSS and the share
/// of the CPUs that other work kept busy just before it.
#[derive(Clone, Copy)]
struct Measured {
    time: Duration,
    cpu: Duration,
    rss_kib: u64,
    others_busy: f64,
    result: Checksum,
}

/// How each configuration is measured: `runs` times, each run waiting (up to `patience`)
/// until other work keeps less than `quiet` of all CPU time busy.
#[derive(Clone, Copy)]
struct Repeat {
    runs: usize,
    quiet: f64,
    patience: Duration,
}

/// Runs a child `runs` times; checks every run's result against `expected`; keeps the best.
fn measure(
    me: &Path,
    kind: &str,
    query: Option<Query>,
    input: &Input,
    parallelism: usize,
    repeat: Repeat,
    expected: Checksum,
) -> Measured {
    let dir = tempfile::tempdir().expect("temp dir");
    let result_path = dir.path().join("result");
    let mut best: Option<Measured> = None;
    for _ in 0..repeat.runs {
        let _ = std::fs::remove_file(&result_path);
        let mut cmd = Command::new(me);
        cmd.args(["--child", kind, "--what", what_name(query)])
            .args(input.to_args())
            .args(["--parallelism", &parallelism.to_string()])
            .arg("--result")
            .arg(&result_path)
            .stdout(Stdio::null());
        let others_busy = support::wait_for_quiet(repeat.quiet, repeat.patience);
        let usage = support::run_child(&mut cmd);
        let text = std::fs::read_to_string(&result_path).expect("the child wrote its result");
        let result = Checksum::from_line(&text).expect("rows and checksum");
        assert_eq!(
            result,
            expected,
            "WRONG RESULT: {kind} {} on the {} input at parallelism {parallelism} gave {result}; \
             the reference gives {expected}",
            what_name(query),
            input.label()
        );
        if best.is_none_or(|b| usage.wall < b.time) {
            best = Some(Measured {
                time: usage.wall,
                cpu: usage.cpu,
                rss_kib: usage.max_rss_kib,
                others_busy,
                result,
            });
        }
    }
    best.expect("at least one run")
}

/// Prints one table row.
#[allow(clippy::too_many_arguments)]
fn print_row(
    label: &str,
    parallelism: usize,
    m: &Measured,
    events: u64,
    vs_hand: Option<f64>,
    vs_source: Option<f64>,
) {
    let rate = events as f64 / m.time.as_secs_f64();
    let ratio = |r: Option<f64>| r.map_or(String::new(), |r| format!("{r:.2}x"));
    println!(
        "{:<22} {:>2} {:>8.3} {:>7.2} {:>12.0} {:>12.0} {:>8} {:>9} {:>10} {:>8.1} {:>6.0}%",
        label,
        parallelism,
        m.time.as_secs_f64(),
        m.cpu.as_secs_f64(),
        rate,
        rate / parallelism as f64,
        ratio(vs_hand),
        ratio(vs_source),
        m.result.rows,
        m.rss_kib as f64 / 1024.0,
        m.others_busy * 100.0
    );
}

/// Measures a query's plain and observed Weir runs, alternating them `repeat.runs` times;
/// the best of each.
fn measure_observed(
    me: &Path,
    query: Option<Query>,
    input: &Input,
    parallelism: usize,
    repeat: Repeat,
    expected: Checksum,
) -> (Measured, Measured) {
    let once = Repeat { runs: 1, ..repeat };
    let mut best: Option<(Measured, Measured)> = None;
    for _ in 0..repeat.runs {
        let plain = measure(me, "engine", query, input, parallelism, once, expected);
        let observed = measure(
            me,
            "engine-observed",
            query,
            input,
            parallelism,
            once,
            expected,
        );
        best = Some(match best {
            None => (plain, observed),
            Some((p, o)) => (
                if plain.time < p.time { plain } else { p },
                if observed.time < o.time { observed } else { o },
            ),
        });
    }
    best.expect("at least one run")
}

/// Measures a query's Weir run and its hand loop on `threads` threads alternately, one run
/// of each per round, so that both sides of each round's ratio ran under about the same
/// load (the machine is shared, and its speed drifts over minutes). Returns the best Weir
/// run and each round's ratio, hand-loop time over Weir time.
#[allow(clippy::too_many_arguments)]
fn measure_against_hand(
    me: &Path,
    query: Query,
    input: &Input,
    parallelism: usize,
    threads: usize,
    repeat: Repeat,
    expected: Checksum,
) -> (Measured, Vec<f64>) {
    let once = Repeat { runs: 1, ..repeat };
    let mut best: Option<Measured> = None;
    let mut ratios = Vec::with_capacity(repeat.runs);
    for _ in 0..repeat.runs {
        let hand = measure(me, "hand", Some(query), input, threads, once, expected);
        let weir = measure(
            me,
            "engine",
            Some(query),
            input,
            parallelism,
            once,
            expected,
        );
        ratios.push(hand.time.as_secs_f64() / weir.time.as_secs_f64());
        if best.is_none_or(|b| weir.time < b.time) {
            best = Some(weir);
        }
    }
    (best.expect("at least one run"), ratios)
}

/// The median of `values` (not empty).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// Measures every run of one input and prints its table. With `observe`, each query also
/// runs with the observability server on and polled (see the module docs).
fn bench_input(
    me: &Path,
    input: &Input,
    selected: &[Query],
    parallelisms: &[usize],
    (repeat, observe): (Repeat, bool),
) {
    let config = input.config();
    let expected = cached_reference(me, input);
    let events = input.events();
    let span_s = events as f64 / config.rate as f64;
    println!();
    println!(
        "NEXMark, {} input: {events} events at {} events/s of event time ({span_s:.0} s), lag \
         {LAG_MS} ms, best of {}; every result checked against the reference",
        input.label(),
        config.rate,
        repeat.runs
    );
    if let Input::File { path, .. } = input {
        let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        println!(
            "file {} ({:.0} MB), read by stream_replay (one instance, parsed on p threads), parse included",
            path.display(),
            bytes as f64 / 1e6
        );
    }
    println!(
        "{:<22} {:>2} {:>8} {:>7} {:>12} {:>12} {:>8} {:>9} {:>10} {:>8} {:>7}",
        "run",
        "p",
        "seconds",
        "cpu s",
        "events/s",
        "events/s/core",
        "vs hand",
        "vs source",
        "rows",
        "RSS MiB",
        "others"
    );
    // A file is also parsed by hand on as many threads as the engine gets; the generator's
    // hand loop is single-threaded.
    let hand_threads: Vec<usize> = match input {
        Input::File { .. } => parallelisms.to_vec(),
        Input::Generator(_) => vec![1],
    };
    let mut hand_source = FxHashMap::default();
    let mut hand = FxHashMap::default();
    for &threads in &hand_threads {
        let m = measure(me, "hand", None, input, threads, repeat, expected[&None]);
        print_row("source, hand loop", threads, &m, events, None, None);
        hand_source.insert(threads, m);
        for q in HAND_QUERIES.into_iter().filter(|q| selected.contains(q)) {
            let m = measure(
                me,
                "hand",
                Some(q),
                input,
                threads,
                repeat,
                expected[&Some(q)],
            );
            print_row(&format!("{q}, hand loop"), threads, &m, events, None, None);
            hand.insert((q, threads), m);
        }
    }
    for &parallelism in parallelisms {
        let threads = if hand_threads.contains(&parallelism) {
            parallelism
        } else {
            1
        };
        let hand_source = hand_source[&threads];
        let source = measure(
            me,
            "engine",
            None,
            input,
            parallelism,
            repeat,
            expected[&None],
        );
        print_row(
            "source, weir",
            parallelism,
            &source,
            events,
            Some(hand_source.time.as_secs_f64() / source.time.as_secs_f64()),
            Some(1.0),
        );
        for &q in selected {
            let vs_hand = |m: &Measured| {
                hand.get(&(q, threads))
                    .map(|h| h.time.as_secs_f64() / m.time.as_secs_f64())
            };
            let vs_source = |m: &Measured| Some(source.time.as_secs_f64() / m.time.as_secs_f64());
            if observe {
                let (plain, observed) =
                    measure_observed(me, Some(q), input, parallelism, repeat, expected[&Some(q)]);
                print_row(
                    &format!("{q}, weir"),
                    parallelism,
                    &plain,
                    events,
                    vs_hand(&plain),
                    vs_source(&plain),
                );
                print_row(
                    &format!("{q}, weir + ui polled"),
                    parallelism,
                    &observed,
                    events,
                    vs_hand(&observed),
                    vs_source(&observed),
                );
                println!(
                    "{q} at parallelism {parallelism}: with the server on and polled every second, {:.3} of the throughput without it (goal >= 0.97)",
                    plain.time.as_secs_f64() / observed.time.as_secs_f64()
                );
                continue;
            }
            // With a hand loop, alternated with it: "vs hand" is the median of the rounds'
            // ratios, not the ratio of two best times taken minutes apart.
            let (m, ratios) = if hand.contains_key(&(q, threads)) {
                measure_against_hand(
                    me,
                    q,
                    input,
                    parallelism,
                    threads,
                    repeat,
                    expected[&Some(q)],
                )
            } else {
                let m = measure(
                    me,
                    "engine",
                    Some(q),
                    input,
                    parallelism,
                    repeat,
                    expected[&Some(q)],
                );
                (m, Vec::new())
            };
            print_row(
                &format!("{q}, weir"),
                parallelism,
                &m,
                events,
                (!ratios.is_empty()).then(|| median(&ratios)),
                vs_source(&m),
            );
            if !ratios.is_empty() {
                let rounds: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
                println!(
                    "  {q} at parallelism {parallelism}, alternated with the {threads}-thread hand loop, ratio by round: {}",
                    rounds.join(" ")
                );
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| support::flag(&args, name);
    // The executor's worker pinning in the latency and idle children (`--pin-workers`).
    let pinning: WorkerPinning = flag("--pin-workers").map_or(WorkerPinning::Auto, |v| {
        v.parse().unwrap_or_else(|e| panic!("--pin-workers: {e}"))
    });
    if let Some(kind) = flag("--child") {
        let parallelism: usize =
            flag("--parallelism").map_or(1, |v| v.parse().expect("--parallelism"));
        let result_path = flag("--result");
        let write_result = |text: String| {
            std::fs::write(result_path.as_ref().expect("--result"), text).expect("write result")
        };
        match kind.as_str() {
            "engine" | "engine-observed" | "hand" => {
                let input = Input::from_args(&flag);
                let query = parse_what(&flag("--what").expect("--what"));
                let result = match kind.as_str() {
                    "engine" => engine_run(query, &input, parallelism, false),
                    "engine-observed" => engine_run(query, &input, parallelism, true),
                    _ => hand_child(query, &input, parallelism),
                };
                write_result(result.to_line());
            }
            "reference" => {
                let input = Input::from_args(&flag);
                let results = match &input {
                    Input::File {
                        origin: Origin::Independent,
                        events,
                        ..
                    } => {
                        let events: Vec<Event> =
                            independent_events(events.count.expect("finite"), events.rate)
                                .collect();
                        reference_results_of(&events, LAG_MS)
                    }
                    _ => reference_results(input.config(), LAG_MS),
                };
                write_result(
                    results
                        .iter()
                        .map(|(q, sum)| format!("{} {}\n", what_name(*q), sum.to_line()))
                        .collect(),
                );
            }
            "check-hand-loops" => check_hand_loops(),
            "latency" => {
                let seconds = flag("--seconds").map_or(30, |v| v.parse().expect("--seconds"));
                let rate =
                    flag("--wall-rate").map_or(1_000_000, |v| v.parse().expect("--wall-rate"));
                let q5 = Q5Stages::parse(&flag("--q5-stages").unwrap_or_else(|| "two".into()));
                latency_child(seconds, rate, parallelism, q5, pinning);
            }
            "idle" => {
                let seconds = flag("--seconds").map_or(10, |v| v.parse().expect("--seconds"));
                let rate = flag("--wall-rate").map(|v| v.parse().expect("--wall-rate"));
                idle_child(rate, seconds, parallelism, pinning);
            }
            other => panic!("unknown child {other}"),
        }
        return;
    }

    let me = std::env::current_exe().expect("own path");
    let number = |name: &str, default: u64| flag(name).map_or(default, |v| v.parse().expect(name));
    let has = |name: &str| args.iter().any(|a| a == name);
    let wall_rates: Vec<u64> = flag("--wall-rates").map_or(vec![1_000_000, 100_000], |v| {
        v.split(',')
            .map(|r| r.parse().expect("--wall-rates"))
            .collect()
    });
    let latency_seconds = number("--latency-seconds", 30);
    let q5_forms: Vec<Q5Stages> = flag("--q5-stages")
        .map_or(vec![Q5Stages::One, Q5Stages::Two], |v| {
            v.split(',').map(Q5Stages::parse).collect()
        });
    let repeat = Repeat {
        runs: number("--runs", 1) as usize,
        quiet: number("--quiet-percent", 10) as f64 / 100.0,
        patience: Duration::from_secs(number("--patience-s", 30)),
    };
    let run_latency = || {
        latency_run(
            &me,
            &wall_rates,
            latency_seconds,
            &q5_forms,
            repeat,
            pinning,
        )
    };
    if has("--latency") || has("--latency-only") || has("--idle") {
        if has("--latency") || has("--latency-only") {
            run_latency();
        }
        if has("--idle") {
            idle_run(&me, number("--idle-seconds", 10), repeat, pinning);
        }
        return;
    }
    let selected: Vec<Query> = flag("--queries").map_or(BENCH_QUERIES.to_vec(), |v| {
        v.split(',')
            .map(|q| q.parse().expect("--queries"))
            .collect()
    });
    for q in &selected {
        assert!(
            BENCH_QUERIES.contains(q),
            "--queries: {q} is not benchmarked (its windows are of wall-clock time)"
        );
    }
    let parallelisms: Vec<usize> = flag("--parallelism").map_or(vec![1, 2], |v| {
        v.split(',')
            .map(|p| p.parse().expect("--parallelism"))
            .collect()
    });
    let inputs = flag("--inputs").unwrap_or_else(|| "generator,file,file-escaped".into());

    let mut cmd = Command::new(&me);
    cmd.args(["--child", "check-hand-loops"]);
    support::time_child(&mut cmd);

    for name in inputs.split(',') {
        let input = match name {
            "generator" => Input::Generator(GeneratorConfig {
                count: Some(number("--events", 10_000_000)),
                rate: number("--rate", 100_000),
                ..GeneratorConfig::default()
            }),
            "file" | "file-escaped" | "file-unicode" => {
                let events = GeneratorConfig {
                    count: Some(number("--file-events", 2_000_000)),
                    rate: number("--file-rate", 20_000),
                    strings: name
                        .strip_prefix("file-")
                        .map_or(StringStyle::Ascii, |s| s.parse().expect("a string style")),
                    ..GeneratorConfig::default()
                };
                Input::File {
                    path: event_file(&events),
                    events,
                    origin: Origin::Generator,
                }
            }
            "file-independent" => {
                let events = GeneratorConfig {
                    count: Some(number("--file-events", 2_000_000)),
                    rate: number("--file-rate", 20_000),
                    ..GeneratorConfig::default()
                };
                Input::File {
                    path: independent_file(events.count.expect("finite"), events.rate),
                    events,
                    origin: Origin::Independent,
                }
            }
            other => panic!(
                "unknown input {other} (generator, file, file-escaped, file-unicode, \
                 file-independent)"
            ),
        };
        let observe = has("--observe");
        bench_input(&me, &input, &selected, &parallelisms, (repeat, observe));
    }
    if !has("--no-latency") {
        run_latency();
    }
}
