//! NEXMark: every query as a Weir job at parallelism 1 and 2, over the in-process generator
//! and over a JSON Lines event file (parse included), each run's result checked against the
//! reference; q0, q5 and q7 also as hand-written single-thread loops, the yardstick; then
//! the latency of window results in a rate-limited run.
//!
//! ```text
//! cargo bench --bench nexmark                        # 10 M generated events, 2 M from a file
//! cargo bench --bench nexmark -- --runs 3            # best of 3 (default 1)
//! cargo bench --bench nexmark -- --inputs generator --queries q0,q5 --parallelism 1
//! cargo bench --bench nexmark -- --events 2000000 --rate 20000 --no-latency
//! cargo bench --bench nexmark -- --latency-only [--latency-events 20000000 --wall-rate 1000000]
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
//! - **file, parsed by hand on p threads**: for the file input, the source and query hand
//!   loops also run with the file read in 1 MiB chunks and parsed on `p` threads (std
//!   threads and bounded channels, chunks dealt and taken back round-robin, so the events
//!   arrive in file order; lines found with `memchr`, by the engine's own `for_each_line`),
//!   the query's work on the main thread. A Weir run at parallelism
//!   `p` is compared with the hand loop on `p` threads, and its file is parsed on `p` threads
//!   too (`stream_replay_with`), so parallelism 1 is one core's work.
//! - **q0, q5, q7, hand loop**: one thread doing the query's work as a careful engineer
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
//! # Latency
//!
//! The generator runs at `--wall-rate` events/s of wall-clock time with event time starting
//! now, so event time follows the clock. The source's watermark passes a window's end `E`
//! when it has seen event time `E + lag`, that is at wall time ≈ `E + lag`; the sink records
//! `now − (E + lag)` for every window result of q5 and q7.

mod support;

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
use weir::{BoxError, ExecutorConfig, Item, SinkWriter};
use weir_nexmark::generator::GeneratorConfig;
use weir_nexmark::parse::{KeptStrings, parse_line_keeping};
use weir_nexmark::reference::{
    self, Q0Row, Q1Row, Q2Row, Q3Row, Q4Row, Q5_SLIDE_MS, Q5_WINDOW_MS, Q5Row, Q7_WINDOW_MS, Q7Row,
    Q8Row,
};
use weir_nexmark::{Event, Generator, Query, pipelines, source};

/// The allowed lag of the watermark, as the reference's default.
const LAG_MS: i64 = reference::DEFAULT_ALLOWED_LAG_MS as i64;
/// Where generated event files and cached reference results go.
const DATA_DIR: &str = "target/bench-data";
/// Bump when the row hash changes, so that cached reference results are recomputed.
const CHECKSUM_VERSION: u32 = 1;
/// The queries that have a hand-written loop.
const HAND_QUERIES: [Query; 3] = [Query::Q0, Query::Q5, Query::Q7];

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

// ---------------------------------------------------------------------------------------
// Row checksums

/// SplitMix64's output function: a fixed, well-mixing permutation of 64 bits.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stable hash of a row's fields in order, the same in every process and on every run.
struct RowHasher(u64);

impl RowHasher {
    /// Starts a hash; `tag` tells the row types apart.
    #[inline]
    fn new(tag: u64) -> Self {
        RowHasher(mix64(tag))
    }

    #[inline]
    fn int(self, v: i64) -> Self {
        RowHasher(mix64(self.0.rotate_left(23) ^ v as u64))
    }

    #[inline]
    fn float(self, v: f64) -> Self {
        self.int(v.to_bits() as i64)
    }

    fn text(mut self, s: &str) -> Self {
        let bytes = s.as_bytes();
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self = self.int(i64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.int(i64::from_le_bytes(last)).int(bytes.len() as i64)
    }

    #[inline]
    fn finish(self) -> u64 {
        self.0
    }
}

/// What the checking sink and the hand loops hash: a query's row, or an event.
trait RowHash {
    fn row_hash(&self) -> u64;
}

impl RowHash for Q0Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(0)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .int(self.date_time)
            .finish()
    }
}

impl RowHash for Q1Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(1)
            .int(self.auction)
            .int(self.bidder)
            .float(self.price)
            .int(self.date_time)
            .finish()
    }
}

impl RowHash for Q2Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(2).int(self.auction).int(self.price).finish()
    }
}

impl RowHash for Q3Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(3)
            .text(&self.name)
            .text(&self.city)
            .text(&self.state)
            .int(self.id)
            .finish()
    }
}

impl RowHash for Q4Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(4)
            .int(self.category)
            .float(self.avg_price)
            .finish()
    }
}

impl RowHash for Q5Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(5)
            .int(self.window_start)
            .int(self.window_end)
            .int(self.auction)
            .int(self.num as i64)
            .finish()
    }
}

impl RowHash for Q7Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(7)
            .int(self.window_start)
            .int(self.window_end)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .int(self.date_time)
            .finish()
    }
}

impl RowHash for Q8Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(8)
            .int(self.id)
            .text(&self.name)
            .int(self.window_start)
            .finish()
    }
}

/// Events, for the source-only runs: their type, time and main ids.
impl RowHash for Event {
    #[inline]
    fn row_hash(&self) -> u64 {
        match self {
            Event::Person(p) => RowHasher::new(10).int(p.id).int(p.date_time),
            Event::Auction(a) => RowHasher::new(11).int(a.id).int(a.seller).int(a.date_time),
            Event::Bid(b) => RowHasher::new(12)
                .int(b.auction)
                .int(b.bidder)
                .int(b.price)
                .int(b.date_time),
        }
        .finish()
    }
}

/// A row count and the wrapping sum of the rows' hashes: equal for equal multisets of rows,
/// whatever their order or the instance that saw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Checksum {
    rows: u64,
    sum: u64,
}

impl Checksum {
    #[inline]
    fn add(&mut self, row: &impl RowHash) {
        self.rows += 1;
        self.sum = self.sum.wrapping_add(row.row_hash());
    }

    fn merge(&mut self, other: Checksum) {
        self.rows += other.rows;
        self.sum = self.sum.wrapping_add(other.sum);
    }

    fn of<R: RowHash>(rows: &[R]) -> Checksum {
        let mut c = Checksum::default();
        for r in rows {
            c.add(r);
        }
        c
    }

    fn to_line(self) -> String {
        format!("{} {:016x}", self.rows, self.sum)
    }

    fn from_line(line: &str) -> Option<Checksum> {
        let mut parts = line.split_whitespace();
        let rows = parts.next()?.parse().ok()?;
        let sum = u64::from_str_radix(parts.next()?, 16).ok()?;
        Some(Checksum { rows, sum })
    }
}

impl std::fmt::Display for Checksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} rows, checksum {:016x}", self.rows, self.sum)
    }
}

/// The sink of every Weir run: takes the query's real rows and checksums them; each instance
/// adds its checksum to the shared one at close.
struct ChecksumSink<R> {
    local: Checksum,
    shared: Arc<Mutex<Checksum>>,
    row: PhantomData<fn(R)>,
}

impl<R: RowHash + Item> SinkWriter for ChecksumSink<R> {
    type Item = R;

    #[inline]
    fn write(&mut self, row: R) -> Result<(), BoxError> {
        self.local.add(&row);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.shared.lock().expect("checksum lock").merge(self.local);
        Ok(())
    }
}

fn checksum_sink<R: RowHash + Item>(shared: &Arc<Mutex<Checksum>>) -> Sink<R> {
    let shared = Arc::clone(shared);
    Sink::new("checksum", None, move |_| ChecksumSink {
        local: Checksum::default(),
        shared: Arc::clone(&shared),
        row: PhantomData,
    })
}

/// What a run reads: `None` for the source alone, or a query.
fn what_name(query: Option<Query>) -> &'static str {
    query.map_or("source", Query::name)
}

fn parse_what(name: &str) -> Option<Query> {
    (name != "source").then(|| name.parse().expect("a query name or `source`"))
}

// ---------------------------------------------------------------------------------------
// Inputs

/// Where a run's events come from.
#[derive(Debug, Clone)]
enum Input {
    Generator(GeneratorConfig),
    File {
        path: PathBuf,
        events: GeneratorConfig,
    },
}

impl Input {
    fn name(&self) -> &'static str {
        match self {
            Input::Generator(_) => "generator",
            Input::File { .. } => "file",
        }
    }

    /// The configuration of the events it holds.
    fn config(&self) -> &GeneratorConfig {
        match self {
            Input::Generator(c) | Input::File { events: c, .. } => c,
        }
    }

    fn events(&self) -> u64 {
        self.config().count.expect("a finite input")
    }

    /// The flags that make a child read this input.
    fn to_args(&self) -> Vec<String> {
        let c = self.config();
        let mut args = vec![
            "--input".into(),
            self.name().into(),
            "--count".into(),
            c.count.expect("finite").to_string(),
            "--event-rate".into(),
            c.rate.to_string(),
        ];
        if let Input::File { path, .. } = self {
            args.extend(["--path".into(), path.display().to_string()]);
        }
        args
    }

    fn from_args(flag: &dyn Fn(&str) -> Option<String>) -> Input {
        let config = GeneratorConfig {
            count: Some(flag("--count").expect("--count").parse().expect("count")),
            rate: flag("--event-rate")
                .expect("--event-rate")
                .parse()
                .expect("rate"),
            ..GeneratorConfig::default()
        };
        match flag("--input").as_deref() {
            Some("generator") => Input::Generator(config),
            Some("file") => Input::File {
                path: flag("--path").expect("--path").into(),
                events: config,
            },
            other => panic!("unknown input {other:?}"),
        }
    }
}

/// The event file of `config`, written by the generator on first use.
fn event_file(config: &GeneratorConfig) -> PathBuf {
    let dir = Path::new(DATA_DIR);
    std::fs::create_dir_all(dir).expect("bench data dir");
    let path = dir.join(format!(
        "nexmark-{}-rate{}-seed{}.jsonl",
        config.count.expect("finite"),
        config.rate,
        config.seed
    ));
    if !path.exists() {
        eprintln!("writing {} ...", path.display());
        let tmp = path.with_extension("tmp");
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp).expect("create"));
        let mut line = Vec::with_capacity(1024);
        for e in Generator::new(config.clone()).expect("config").iter() {
            line.clear();
            e.write_json_line(&mut line);
            out.write_all(&line).expect("write event file");
        }
        out.flush().expect("flush event file");
        drop(out);
        std::fs::rename(&tmp, &path).expect("rename event file");
    }
    path
}

/// The events of a JSON Lines file, parsed strictly, in file order; malformed lines are
/// counted.
struct FileEvents {
    reader: BufReader<File>,
    line: Vec<u8>,
    kept: KeptStrings,
    malformed: u64,
}

impl FileEvents {
    fn open(path: &Path, kept: KeptStrings) -> Self {
        FileEvents {
            reader: BufReader::with_capacity(256 * 1024, File::open(path).expect("event file")),
            line: Vec::with_capacity(1024),
            kept,
            malformed: 0,
        }
    }
}

impl Iterator for FileEvents {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            self.line.clear();
            if self
                .reader
                .read_until(b'\n', &mut self.line)
                .expect("read event file")
                == 0
            {
                return None;
            }
            let mut line = &self.line[..];
            if let Some(l) = line.strip_suffix(b"\n") {
                line = l.strip_suffix(b"\r").unwrap_or(l);
            }
            match parse_line_keeping(line, self.kept) {
                Ok(e) => return Some(e),
                Err(_) => self.malformed += 1,
            }
        }
    }
}

/// The events of a JSON Lines file parsed on `threads` threads, in file order, as a careful
/// engineer would write it without an engine: a reading thread cuts 1 MiB chunks at line
/// ends and deals them round-robin to the parser threads, and the events come back through
/// one bounded queue per parser, taken round-robin too, so in file order.
struct ParallelFileEvents {
    done: Vec<std::sync::mpsc::Receiver<(Vec<Event>, u64)>>,
    next: usize,
    current: std::vec::IntoIter<Event>,
    malformed: u64,
}

impl ParallelFileEvents {
    fn open(path: &Path, threads: usize, kept: KeptStrings) -> Self {
        use std::io::Read;
        use std::sync::mpsc::sync_channel;
        let mut jobs = Vec::new();
        let mut done = Vec::new();
        for _ in 0..threads {
            let (job_tx, job_rx) = sync_channel::<Vec<u8>>(2);
            let (done_tx, done_rx) = sync_channel(2);
            std::thread::spawn(move || {
                while let Ok(chunk) = job_rx.recv() {
                    let mut events = Vec::with_capacity(chunk.len() / 128);
                    let mut malformed = 0;
                    // Lines found with `memchr`, as the engine's chunks are: a byte-by-byte
                    // split cost a sixth of this loop's time.
                    for_each_line(&chunk, |_, line, _| match parse_line_keeping(line, kept) {
                        Ok(e) => events.push(e),
                        Err(_) => malformed += 1,
                    });
                    if done_tx.send((events, malformed)).is_err() {
                        return;
                    }
                }
            });
            jobs.push(job_tx);
            done.push(done_rx);
        }
        let mut file = File::open(path).expect("event file");
        std::thread::spawn(move || {
            let mut carry = Vec::new();
            for k in 0.. {
                let mut chunk = std::mem::take(&mut carry);
                // Read into the spare capacity, as the engine does: no zeroing first.
                chunk.reserve(1 << 20);
                let n = (&mut file)
                    .take(1 << 20)
                    .read_to_end(&mut chunk)
                    .expect("read event file");
                if n > 0
                    && let Some(end) = chunk.iter().rposition(|&b| b == b'\n')
                {
                    carry = chunk.split_off(end + 1);
                }
                if chunk.is_empty() {
                    return;
                }
                if jobs[k % jobs.len()].send(chunk).is_err() {
                    return;
                }
            }
        });
        ParallelFileEvents {
            done,
            next: 0,
            current: Vec::new().into_iter(),
            malformed: 0,
        }
    }
}

impl Iterator for ParallelFileEvents {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.current.next() {
                return Some(e);
            }
            let (events, malformed) = self.done[self.next % self.done.len()].recv().ok()?;
            self.next += 1;
            self.malformed += malformed;
            self.current = events.into_iter();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Weir runs

/// Child: runs `query` (or the source alone) as a Weir job over `input`; returns what its
/// sink received. With `observe`, the observability server serves the job and a client
/// polls it once a second (see the module docs).
fn engine_run(query: Option<Query>, input: &Input, parallelism: usize, observe: bool) -> Checksum {
    let p = Pipeline::new();
    let source = match input {
        Input::Generator(config) => source::stream_generator(config.clone(), None).expect("config"),
        // As many parser threads as workers, so that parallelism 1 is one core's work.
        Input::File { path, .. } => {
            let options = source::ReplayOptions {
                chunks: ChunkOptions::with_threads(parallelism),
                strings: kept_strings(query),
            };
            source::stream_replay_with(path, options).expect("event file")
        }
    };
    let stream = p.read_from(source).with_native_timestamps(LAG_MS);
    let shared = Arc::new(Mutex::new(Checksum::default()));
    attach_query(query, &stream, &shared);
    let executor = Executor::new(ExecutorConfig {
        workers: parallelism,
        ..ExecutorConfig::default()
    })
    .expect("executor");
    let observer = observe.then(Observer::start);
    let job = p
        .submit(
            &executor,
            JobConfig::default().with_default_parallelism(parallelism),
        )
        .expect("submit");
    let polling = observer.as_ref().map(|o| o.poll(&job));
    job.join().expect("job");
    if let (Some(observer), Some(polling)) = (observer, polling) {
        observer.finish(polling);
    }
    *shared.lock().expect("checksum lock")
}

/// The observability server of an observed run, and its registry.
struct Observer {
    registry: weir_observe::Registry,
    server: weir_observe::Server,
}

/// The polling client of an observed run, and how many polls it completed.
struct Polling {
    polls: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    fn start() -> Observer {
        let registry = weir_observe::Registry::new();
        let config = weir_observe::ServerConfig::new("127.0.0.1:0".parse().expect("addr"), None)
            .expect("config");
        let server = weir_observe::Server::start(&config, registry.clone()).expect("server");
        Observer { registry, server }
    }

    /// Registers `job` and starts a client that GETs the job and `/metrics` once a second,
    /// checking each answer.
    fn poll(&self, job: &weir::Job) -> Polling {
        self.registry.add_job(job.monitor());
        let base = self.server.url();
        let id = job.id();
        let polls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let done = Arc::clone(&polls);
        let task = weir::async_io::runtime()
            .expect("runtime")
            .spawn(async move {
                let client = reqwest::Client::new();
                let mut interval = tokio::time::interval(Duration::from_secs(1));
                loop {
                    interval.tick().await;
                    let job: serde_json::Value = client
                        .get(format!("{base}api/v1/jobs/{id}"))
                        .send()
                        .await
                        .and_then(reqwest::Response::error_for_status)
                        .expect("GET the job")
                        .json()
                        .await
                        .expect("the job's JSON");
                    assert!(job["vertices"].is_array(), "{job}");
                    let metrics = client
                        .get(format!("{base}metrics"))
                        .send()
                        .await
                        .and_then(reqwest::Response::error_for_status)
                        .expect("GET /metrics")
                        .text()
                        .await
                        .expect("the scrape");
                    assert!(metrics.contains("weir_vertex_items_out_total"));
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        Polling { polls, task }
    }

    /// Stops the client and the server at once (the job has ended: nothing waits for the
    /// client's next tick); panics unless the client polled about once per second the job
    /// ran, every answer checked.
    fn finish(self, polling: Polling) {
        // The client only ends by a failed check, which panics it.
        assert!(!polling.task.is_finished(), "the polling client failed");
        polling.task.abort();
        let polls = polling.polls.load(std::sync::atomic::Ordering::Relaxed);
        let ran = self.registry.jobs()[0].elapsed();
        assert!(
            polls + 1 >= ran.as_secs(),
            "the client polled {polls} times in {ran:?}"
        );
        drop(self.server);
    }
}

/// Adds `query`'s stages and a checking sink of its row type behind `events`.
fn attach_query(query: Option<Query>, events: &StreamStage<Event>, shared: &Arc<Mutex<Checksum>>) {
    let Some(query) = query else {
        return events.write_to(checksum_sink(shared));
    };
    match query {
        Query::Q0 => pipelines::q0(events).write_to(checksum_sink(shared)),
        Query::Q1 => pipelines::q1(events).write_to(checksum_sink(shared)),
        Query::Q2 => pipelines::q2(events).write_to(checksum_sink(shared)),
        Query::Q3 => pipelines::q3(events).write_to(checksum_sink(shared)),
        Query::Q4 => pipelines::q4(events).write_to(checksum_sink(shared)),
        Query::Q5 => pipelines::q5(events).write_to(checksum_sink(shared)),
        Query::Q7 => pipelines::q7(events).write_to(checksum_sink(shared)),
        Query::Q8 => pipelines::q8(events).write_to(checksum_sink(shared)),
    }
}

// ---------------------------------------------------------------------------------------
// Hand-written loops

/// The reference's event time: one watermark over all events, `max(date_time seen) - lag`;
/// an event below it is late, and a late event does not move it.
struct EventClock {
    max_seen: i64,
    lag: i64,
}

impl EventClock {
    fn new(lag: i64) -> Self {
        EventClock {
            max_seen: i64::MIN,
            lag,
        }
    }

    /// Whether an event at `t` is on time; if so, it counts as seen.
    #[inline]
    fn admit(&mut self, t: i64) -> bool {
        if t < self.max_seen.saturating_sub(self.lag) {
            return false;
        }
        self.max_seen = self.max_seen.max(t);
        true
    }

    #[inline]
    fn watermark(&self) -> i64 {
        self.max_seen.saturating_sub(self.lag)
    }
}

/// The source alone: every event checksummed, as the source-only Weir job's sink does.
fn hand_source(events: impl Iterator<Item = Event>) -> Checksum {
    let mut sum = Checksum::default();
    for e in events {
        sum.add(&e);
    }
    sum
}

/// q0: every on-time bid, as a row.
fn hand_q0(events: impl Iterator<Item = Event>, lag: i64) -> Checksum {
    let mut clock = EventClock::new(lag);
    let mut sum = Checksum::default();
    for e in events {
        if !clock.admit(e.date_time()) {
            continue;
        }
        if let Event::Bid(b) = e {
            sum.add(&Q0Row {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                date_time: b.date_time,
            });
        }
    }
    sum
}

/// q5's state: bid counts per auction in 2 s frames, oldest first; a 10 s window is the sum
/// of its five frames. A window fires once the watermark reaches its end, and the frames no
/// later window needs are recycled.
struct HotItems {
    /// (frame start, bids per auction), sorted by start.
    frames: VecDeque<(i64, FxHashMap<i64, u32>)>,
    /// The first window start not fired yet.
    next_start: i64,
    /// The watermark at which the first window that holds a frame fires: the end of
    /// [`first_window`](Self::first_window), kept up to date so that each event costs one
    /// comparison.
    fire_at: i64,
    spare: Vec<FxHashMap<i64, u32>>,
    window: FxHashMap<i64, u32>,
    top: Vec<i64>,
}

impl HotItems {
    fn new() -> Self {
        HotItems {
            frames: VecDeque::new(),
            next_start: i64::MIN,
            fire_at: i64::MAX,
            spare: Vec::new(),
            window: FxHashMap::default(),
            top: Vec::new(),
        }
    }

    #[inline]
    fn count(&mut self, auction: i64, t: i64) {
        let frame = t.div_euclid(Q5_SLIDE_MS) * Q5_SLIDE_MS;
        // Bids come in time order give or take the lag: their frame is the newest or close.
        let mut i = self.frames.len();
        while i > 0 && self.frames[i - 1].0 > frame {
            i -= 1;
        }
        if i == 0 || self.frames[i - 1].0 != frame {
            let map = self.spare.pop().unwrap_or_default();
            self.frames.insert(i, (frame, map));
            i += 1;
            self.fire_at = self.next_fire_at();
        }
        *self.frames[i - 1].1.entry(auction).or_insert(0) += 1;
    }

    /// The first window not fired yet that holds a frame, if any.
    #[inline]
    fn first_window(&self) -> Option<i64> {
        let (oldest, _) = self.frames.front()?;
        Some(self.next_start.max(oldest - (Q5_WINDOW_MS - Q5_SLIDE_MS)))
    }

    fn next_fire_at(&self) -> i64 {
        self.first_window()
            .map_or(i64::MAX, |start| start.saturating_add(Q5_WINDOW_MS))
    }

    /// Fires every window whose end is at or below `watermark`.
    #[inline]
    fn advance(&mut self, watermark: i64, sum: &mut Checksum) {
        if watermark < self.fire_at {
            return;
        }
        while let Some(start) = self.first_window() {
            if start.saturating_add(Q5_WINDOW_MS) > watermark {
                break;
            }
            self.fire(start, sum);
            self.next_start = start + Q5_SLIDE_MS;
            while self.frames.front().is_some_and(|f| f.0 < self.next_start) {
                let (_, mut map) = self.frames.pop_front().expect("a frame");
                map.clear();
                self.spare.push(map);
            }
        }
        self.fire_at = self.next_fire_at();
    }

    fn fire(&mut self, start: i64, sum: &mut Checksum) {
        let end = start + Q5_WINDOW_MS;
        self.window.clear();
        for (_, frame) in self.frames.iter().take_while(|f| f.0 < end) {
            for (&auction, &n) in frame {
                *self.window.entry(auction).or_insert(0) += n;
            }
        }
        let mut max = 0;
        self.top.clear();
        for (&auction, &n) in &self.window {
            if n > max {
                max = n;
                self.top.clear();
            }
            if n == max {
                self.top.push(auction);
            }
        }
        for &auction in &self.top {
            sum.add(&Q5Row {
                window_start: start,
                window_end: end,
                auction,
                num: u64::from(max),
            });
        }
    }
}

/// q5: per 10 s window sliding by 2 s, the auctions with the most bids.
fn hand_q5(events: impl Iterator<Item = Event>, lag: i64) -> Checksum {
    let mut clock = EventClock::new(lag);
    let mut state = HotItems::new();
    let mut sum = Checksum::default();
    for e in events {
        let t = e.date_time();
        if !clock.admit(t) {
            continue;
        }
        if let Event::Bid(b) = &e {
            state.count(b.auction, t);
        }
        state.advance(clock.watermark(), &mut sum);
    }
    state.advance(i64::MAX, &mut sum);
    sum
}

/// One open window of q7: its highest price and the bids that have it.
struct TopBids {
    start: i64,
    price: i64,
    /// (auction, bidder, date_time) of each bid at `price`.
    bids: Vec<(i64, i64, i64)>,
}

/// q7: per 10 s tumbling window, the bids with the highest price.
fn hand_q7(events: impl Iterator<Item = Event>, lag: i64) -> Checksum {
    let mut clock = EventClock::new(lag);
    let mut open: VecDeque<TopBids> = VecDeque::new();
    let mut spare: Vec<Vec<(i64, i64, i64)>> = Vec::new();
    let mut sum = Checksum::default();
    let fire = |w: TopBids, sum: &mut Checksum, spare: &mut Vec<Vec<_>>| {
        for &(auction, bidder, date_time) in &w.bids {
            sum.add(&Q7Row {
                window_start: w.start,
                window_end: w.start + Q7_WINDOW_MS,
                auction,
                bidder,
                price: w.price,
                date_time,
            });
        }
        let mut bids = w.bids;
        bids.clear();
        spare.push(bids);
    };
    for e in events {
        let t = e.date_time();
        if !clock.admit(t) {
            continue;
        }
        if let Event::Bid(b) = &e {
            let start = t.div_euclid(Q7_WINDOW_MS) * Q7_WINDOW_MS;
            let mut i = open.len();
            while i > 0 && open[i - 1].start > start {
                i -= 1;
            }
            if i == 0 || open[i - 1].start != start {
                let bids = spare.pop().unwrap_or_default();
                open.insert(
                    i,
                    TopBids {
                        start,
                        price: i64::MIN,
                        bids,
                    },
                );
                i += 1;
            }
            let w = &mut open[i - 1];
            if b.price > w.price {
                w.price = b.price;
                w.bids.clear();
            }
            if b.price == w.price {
                w.bids.push((b.auction, b.bidder, t));
            }
        }
        let watermark = clock.watermark();
        while open
            .front()
            .is_some_and(|w| w.start + Q7_WINDOW_MS <= watermark)
        {
            fire(open.pop_front().expect("a window"), &mut sum, &mut spare);
        }
    }
    while let Some(w) = open.pop_front() {
        fire(w, &mut sum, &mut spare);
    }
    sum
}

/// The strings `query` reads, which its runs keep when they parse (engine and hand loops
/// alike); the source alone checksums every field, so keeps them all.
fn kept_strings(query: Option<Query>) -> KeptStrings {
    query.map_or(KeptStrings::ALL, KeptStrings::for_query)
}

/// Runs the hand loop of `query` (or of the source alone) over `events`.
fn hand_run(query: Option<Query>, events: impl Iterator<Item = Event>, lag: i64) -> Checksum {
    match query {
        None => hand_source(events),
        Some(Query::Q0) => hand_q0(events, lag),
        Some(Query::Q5) => hand_q5(events, lag),
        Some(Query::Q7) => hand_q7(events, lag),
        Some(q) => panic!("{q} has no hand loop"),
    }
}

/// Child: the hand loop of `query` over `input`.
fn hand_child(query: Option<Query>, input: &Input, threads: usize) -> Checksum {
    match input {
        Input::File { path, .. } if threads > 1 => {
            let mut events = ParallelFileEvents::open(path, threads, kept_strings(query));
            let sum = hand_run(query, &mut events, LAG_MS);
            assert_eq!(events.malformed, 0, "malformed lines in {}", path.display());
            sum
        }
        Input::Generator(config) => hand_run(
            query,
            Generator::new(config.clone()).expect("config").iter(),
            LAG_MS,
        ),
        Input::File { path, .. } => {
            let mut events = FileEvents::open(path, kept_strings(query));
            let sum = hand_run(query, &mut events, LAG_MS);
            assert_eq!(events.malformed, 0, "malformed lines in {}", path.display());
            sum
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reference results

/// The reference's count and checksum of every query and of the source, over `config`'s
/// events with the allowed lag `lag`.
fn reference_results(config: &GeneratorConfig, lag: i64) -> Vec<(Option<Query>, Checksum)> {
    let events: Vec<Event> = Generator::new(config.clone())
        .expect("config")
        .iter()
        .collect();
    let options = reference::Options {
        allowed_lag_ms: lag as u64,
    };
    let mut out = vec![(None, Checksum::of(&events))];
    for q in Query::ALL {
        let sum = match q {
            Query::Q0 => Checksum::of(&reference::q0(&events, &options).rows),
            Query::Q1 => Checksum::of(&reference::q1(&events, &options).rows),
            Query::Q2 => Checksum::of(&reference::q2(&events, &options).rows),
            Query::Q3 => Checksum::of(&reference::q3(&events, &options).rows),
            Query::Q4 => Checksum::of(&reference::q4(&events, &options).rows),
            Query::Q5 => Checksum::of(&reference::q5(&events, &options).rows),
            Query::Q7 => Checksum::of(&reference::q7(&events, &options).rows),
            Query::Q8 => Checksum::of(&reference::q8(&events, &options).rows),
        };
        out.push((Some(q), sum));
    }
    out
}

/// The cached reference results of `config`, computed in a child process on first use.
fn cached_reference(me: &Path, config: &GeneratorConfig) -> FxHashMap<Option<Query>, Checksum> {
    let path = Path::new(DATA_DIR).join(format!(
        "nexmark-reference-v{CHECKSUM_VERSION}-{}-rate{}-seed{}-base{}-ooo{}-lag{LAG_MS}.txt",
        config.count.expect("finite"),
        config.rate,
        config.seed,
        config.base_time_ms,
        config.out_of_order_ms,
    ));
    if !path.exists() {
        eprintln!(
            "computing the reference results into {} ...",
            path.display()
        );
        std::fs::create_dir_all(DATA_DIR).expect("bench data dir");
        let mut cmd = Command::new(me);
        cmd.args(["--child", "reference"])
            .args(Input::Generator(config.clone()).to_args())
            .arg("--result")
            .arg(&path);
        support::time_child(&mut cmd);
    }
    let text = std::fs::read_to_string(&path).expect("reference results");
    text.lines()
        .map(|line| {
            let (what, sum) = line.split_once(' ').expect("`what rows sum`");
            let sum = Checksum::from_line(sum).expect("rows and checksum");
            (parse_what(what), sum)
        })
        .collect()
}

/// Child: checks the hand loops against the reference on events out of order by up to 6 s,
/// so that some are late with the 4 s lag.
fn check_hand_loops() {
    let config = GeneratorConfig {
        count: Some(300_000),
        rate: 20_000,
        out_of_order_ms: 6_000,
        ..GeneratorConfig::default()
    };
    let events: Vec<Event> = Generator::new(config.clone())
        .expect("config")
        .iter()
        .collect();
    let expected: FxHashMap<_, _> = reference_results(&config, LAG_MS).into_iter().collect();
    let late = reference::split_late(
        &events,
        &reference::Options {
            allowed_lag_ms: LAG_MS as u64,
        },
    )
    .1;
    assert!(late > 0, "the check input must have late events");
    for q in HAND_QUERIES {
        let got = hand_run(Some(q), events.iter().cloned(), LAG_MS);
        assert_eq!(
            got,
            expected[&Some(q)],
            "the {q} hand loop disagrees with the reference on out-of-order input"
        );
    }
    println!(
        "hand loops q0, q5, q7 match the reference on {} out-of-order events ({late} late)",
        events.len()
    );
}

// ---------------------------------------------------------------------------------------
// Latency

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
    pipelines::q5(&stream)
        .map(|r| r.window_end)
        .write_to(sink(&latencies));
    pipelines::q7(&stream)
        .map(|r| r.window_end)
        .write_to(sink(&latencies));
    let started = Instant::now();
    p.submit(
        &executor,
        JobConfig::default().with_default_parallelism(parallelism),
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

fn latency_run(me: &Path, events: u64, wall_rate: u64) {
    let mut cmd = Command::new(me);
    cmd.args([
        "--child",
        "latency",
        "--events",
        &events.to_string(),
        "--wall-rate",
        &wall_rate.to_string(),
        "--parallelism",
        "2",
    ]);
    let (_, rss) = support::time_child(&mut cmd);
    println!("latency run peak RSS {:.1} MiB", rss as f64 / 1024.0);
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
            input.name()
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
    let expected = cached_reference(me, config);
    let events = input.events();
    let span_s = events as f64 / config.rate as f64;
    println!();
    println!(
        "NEXMark, {} input: {events} events at {} events/s of event time ({span_s:.0} s), lag \
         {LAG_MS} ms, best of {}; every result checked against the reference",
        input.name(),
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
                let results = reference_results(input.config(), LAG_MS);
                write_result(
                    results
                        .iter()
                        .map(|(q, sum)| format!("{} {}\n", what_name(*q), sum.to_line()))
                        .collect(),
                );
            }
            "check-hand-loops" => check_hand_loops(),
            "latency" => {
                let events = flag("--events").map_or(20_000_000, |v| v.parse().unwrap());
                let rate = flag("--wall-rate").map_or(1_000_000, |v| v.parse().unwrap());
                latency_child(events, rate, parallelism);
            }
            other => panic!("unknown child {other}"),
        }
        return;
    }

    let me = std::env::current_exe().expect("own path");
    let latency_events: u64 = flag("--latency-events").map_or(20_000_000, |v| v.parse().unwrap());
    let wall_rate: u64 = flag("--wall-rate").map_or(1_000_000, |v| v.parse().unwrap());
    if args.iter().any(|a| a == "--latency-only") {
        return latency_run(&me, latency_events, wall_rate);
    }
    let number = |name: &str, default: u64| flag(name).map_or(default, |v| v.parse().expect(name));
    let repeat = Repeat {
        runs: number("--runs", 1) as usize,
        quiet: number("--quiet-percent", 10) as f64 / 100.0,
        patience: Duration::from_secs(number("--patience-s", 30)),
    };
    let selected: Vec<Query> = flag("--queries").map_or(Query::ALL.to_vec(), |v| {
        v.split(',')
            .map(|q| q.parse().expect("--queries"))
            .collect()
    });
    let parallelisms: Vec<usize> = flag("--parallelism").map_or(vec![1, 2], |v| {
        v.split(',')
            .map(|p| p.parse().expect("--parallelism"))
            .collect()
    });
    let inputs = flag("--inputs").unwrap_or_else(|| "generator,file".into());

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
            "file" => {
                let events = GeneratorConfig {
                    count: Some(number("--file-events", 2_000_000)),
                    rate: number("--file-rate", 20_000),
                    ..GeneratorConfig::default()
                };
                Input::File {
                    path: event_file(&events),
                    events,
                }
            }
            other => panic!("unknown input {other} (generator, file)"),
        };
        let observe = args.iter().any(|a| a == "--observe");
        bench_input(&me, &input, &selected, &parallelisms, (repeat, observe));
    }
    if !args.iter().any(|a| a == "--no-latency") {
        println!();
        latency_run(&me, latency_events, wall_rate);
    }
}
