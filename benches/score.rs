//! `weir score` on 1 M rows against the demo model server at 5 ms latency, batch 256,
//! parallelism 8: the limit is parallelism × batch / latency = 409,600 rows/s. Then peak
//! memory at 1 M and 4 M rows, which must not grow with the input.
//!
//! ```text
//! cargo bench --bench score                          # generates the inputs on first use
//! cargo bench --bench score -- --runs 3 --sizes 1000000,4000000
//! ```
//!
//! The server runs in this process (on the shared runtime, 2 threads), a fresh one for every
//! run, so that its counters (requests, rows, the most rows in flight at once) are that run's
//! alone. `weir score` runs as a child process, timed from spawn to exit, with its peak RSS
//! (`VmHWM`) sampled from `/proc` (see `time_child`). Every run's output is checked for one
//! line per row, the server must have received every row exactly once, and no run may have
//! had more than parallelism × batch rows in flight. Inputs: `id` plus four numeric features,
//! in `target/bench-data/`. Each run starts once other work keeps less than 10% of the CPU
//! time busy (or after 30 s of waiting). `weir score` runs twice at 1 M rows: in input order
//! (its default) and with `--unordered`, the hand loop's order.
//!
//! The yardstick, a hand-written loop (this bench re-invoked with `--hand-loop`, also a
//! child process), does the same work without the engine, as a good engineer would write it,
//! with the engine's threads (one thread reading and writing, a tokio runtime of 2 workers
//! for the calls), batch size, in-flight limit and model server:
//! - the CSV read into one reused record, each row's id kept in a reused buffer and its
//!   features parsed (finite numbers, as the engine requires) and written straight into the
//!   batch's request body, `{"instances":[[f1,...],...]}`: no allocation per row, no JSON
//!   tree; one pooled `reqwest` client;
//! - pipelined: up to 8 requests in flight, each a task on the runtime, and the next batch
//!   read and encoded while they are out, so a freed slot is refilled at once;
//! - each reply decoded where it is written, its predictions borrowed as raw JSON text
//!   (`RawValue`) and written beside their ids as `id,score` in completion order (the
//!   order of `--unordered`).
//!
//! It shows what the service and the HTTP stack allow on this machine.

#![allow(unsafe_code)] // wait4 on the child; see `time_child`.

mod support;

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weir_cli::model_server::{ServerConfig, serve};

const LATENCY: Duration = Duration::from_millis(5);
const BATCH: usize = 256;
const PARALLELISM: usize = 8;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--hand-loop") {
        hand_loop(Path::new(&args[2]), &args[3], Path::new(&args[4]));
        return;
    }
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let runs: usize = flag("--runs").map_or(1, |r| r.parse().expect("--runs N"));
    let sizes: Vec<usize> = flag("--sizes")
        .unwrap_or_else(|| "1000000,4000000".into())
        .split(',')
        .map(|s| s.parse().expect("--sizes N,M"))
        .collect();
    let limit = (PARALLELISM * BATCH) as f64 / LATENCY.as_secs_f64();
    println!(
        "weir score, batch {BATCH}, parallelism {PARALLELISM}, server latency {LATENCY:?}: limit {limit:.0} rows/s; best of {runs}"
    );
    println!(
        "{:<23} {:>9} {:>9} {:>11} {:>9} {:>8} {:>13} {:>15} {:>19}",
        "run",
        "rows",
        "seconds",
        "rows/s",
        "vs limit",
        "vs hand",
        "peak RSS MiB",
        "ru_maxrss MiB",
        "max rows in flight"
    );
    let out_dir = tempfile::tempdir().expect("temp dir");
    let me = std::env::current_exe().expect("own path");
    let mut runs_to_do = vec![
        (sizes[0], Run::HandLoop),
        (sizes[0], Run::Weir { unordered: true }),
    ];
    runs_to_do.extend(sizes.iter().map(|&n| (n, Run::Weir { unordered: false })));
    let mut hand_rate = None;
    for (rows, run) in runs_to_do {
        let input = input(rows);
        let output = out_dir.path().join("scores.csv");
        let mut best: Option<(Duration, u64, u64, u64)> = None;
        for _ in 0..runs {
            // A fresh server per run: its counters are this run's.
            let (_, server) = serve(ServerConfig {
                latency: LATENCY,
                ..Default::default()
            })
            .expect("the model server starts");
            let url = server.url("bench");
            let mut cmd = match run {
                Run::HandLoop => {
                    let mut c = Command::new(&me);
                    c.arg("--hand-loop").arg(&input).arg(&url).arg(&output);
                    c
                }
                Run::Weir { unordered } => {
                    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
                    c.args(["score", "--input"])
                        .arg(&input)
                        .args(["--url", &url, "--output"])
                        .arg(&output)
                        .args(["--batch-size", &BATCH.to_string()])
                        .args(["--parallelism", &PARALLELISM.to_string()]);
                    if unordered {
                        c.arg("--unordered");
                    }
                    c
                }
            };
            cmd.stdout(Stdio::null());
            // The machine is shared: start when other work leaves the CPUs mostly idle.
            support::wait_for_quiet(0.10, Duration::from_secs(30));
            let (elapsed, rss, maxrss) = time_child(&mut cmd);
            // Counted streaming: reading the file whole would raise this process's peak
            // memory, and a child spawned later inherits that in its `ru_maxrss`.
            let lines = BufReader::new(File::open(&output).expect("scores written"))
                .lines()
                .count();
            assert_eq!(lines, rows + 1, "one score per row, under a header");
            let stats = server.stats();
            assert_eq!(stats.rows, rows as u64, "every row sent once: {stats:?}");
            assert!(
                stats.max_in_flight_rows <= (PARALLELISM * BATCH) as u64,
                "{} rows in flight at once, more than parallelism × batch",
                stats.max_in_flight_rows
            );
            if best.is_none_or(|b| elapsed < b.0) {
                best = Some((elapsed, rss, maxrss, stats.max_in_flight_rows));
            }
        }
        let (elapsed, rss, maxrss, in_flight) = best.expect("at least one run");
        let rate = rows as f64 / elapsed.as_secs_f64();
        if matches!(run, Run::HandLoop) {
            hand_rate = Some(rate);
        }
        let label = match run {
            Run::HandLoop => "hand loop",
            Run::Weir { unordered: false } => "weir score",
            Run::Weir { unordered: true } => "weir score --unordered",
        };
        println!(
            "{:<23} {:>9} {:>9.3} {:>11.0} {:>9.3} {:>8} {:>13.1} {:>15.1} {:>19}",
            label,
            rows,
            elapsed.as_secs_f64(),
            rate,
            rate / limit,
            hand_rate.map_or(String::new(), |h| format!("{:.2}x", rate / h)),
            rss as f64 / 1024.0,
            maxrss as f64 / 1024.0,
            in_flight
        );
    }
}

/// What one measured run executes.
#[derive(Debug, Clone, Copy)]
enum Run {
    /// The hand-written loop.
    HandLoop,
    /// `weir score`, in input order or not.
    Weir { unordered: bool },
}

/// The input of `rows` rows, generated on first use.
fn input(rows: usize) -> PathBuf {
    let dir = Path::new("target/bench-data");
    std::fs::create_dir_all(dir).expect("bench data dir");
    let path = dir.join(format!("score-{rows}.csv"));
    if !path.exists() {
        eprintln!("generating {} ...", path.display());
        let tmp = path.with_extension("tmp");
        let mut out = BufWriter::new(File::create(&tmp).expect("create input"));
        writeln!(out, "id,f1,f2,f3,f4").expect("write");
        let mut x: u64 = 42;
        for i in 0..rows {
            let mut f = [0.0f64; 4];
            for v in &mut f {
                // xorshift: reproducible features without a dependency
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *v = (x % 10_000) as f64 / 1000.0;
            }
            writeln!(out, "u{i},{},{},{},{}", f[0], f[1], f[2], f[3]).expect("write");
        }
        out.flush().expect("flush");
        drop(out);
        std::fs::rename(&tmp, &path).expect("rename input");
    }
    path
}

/// One batch of rows, prepared for its request: the request body, written as the rows are
/// read, and the rows' ids (their bytes end to end, and where each ends) for the output.
/// Its buffers are reused from batch to batch, but for the body, which the request takes.
#[derive(Default)]
struct Batch {
    body: Vec<u8>,
    ids: Vec<u8>,
    id_ends: Vec<usize>,
}

impl Batch {
    /// The ids, in row order.
    fn ids(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.id_ends.iter().copied());
        starts.zip(&self.id_ends).map(|(a, &b)| &self.ids[a..b])
    }
}

/// Reads up to `BATCH` rows into `batch` (cleared first): each id kept, each row's features
/// parsed and written into the request body `{"instances":[[f1,...],...]}`. No allocation
/// per row: the CSV record and the batch's buffers are reused. Returns whether any row was
/// read.
fn read_batch(
    reader: &mut csv::Reader<File>,
    record: &mut csv::ByteRecord,
    batch: &mut Batch,
) -> bool {
    batch.body.clear();
    batch.ids.clear();
    batch.id_ends.clear();
    batch.body.extend_from_slice(b"{\"instances\":[");
    while batch.id_ends.len() < BATCH && reader.read_byte_record(record).expect("record") {
        if !batch.id_ends.is_empty() {
            batch.body.push(b',');
        }
        batch.ids.extend_from_slice(&record[0]);
        batch.id_ends.push(batch.ids.len());
        batch.body.push(b'[');
        for (i, field) in record.iter().skip(1).enumerate() {
            let x: f64 = std::str::from_utf8(field)
                .expect("UTF-8")
                .parse()
                .expect("number");
            assert!(x.is_finite(), "a feature that is not a finite number");
            if i > 0 {
                batch.body.push(b',');
            }
            // serde_json's own number formatting (ryu), straight into the body.
            serde_json::to_writer(&mut batch.body, &x).expect("a write to a Vec");
        }
        batch.body.push(b']');
    }
    batch.body.extend_from_slice(b"]}");
    !batch.id_ends.is_empty()
}

/// The reply, borrowed from its bytes: each prediction's JSON text as the server wrote it.
#[derive(serde::Deserialize)]
struct Reply<'a> {
    #[serde(borrow)]
    predictions: Vec<&'a serde_json::value::RawValue>,
}

/// The baseline without the engine: see the module docs.
fn hand_loop(input: &Path, url: &str, output: &Path) {
    use futures::StreamExt;
    use futures::stream::FuturesUnordered;

    // Two workers for the calls, as the engine's shared runtime has; this thread reads,
    // encodes, decodes and writes, as the engine's one worker reads and writes.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let client = {
        let _context = rt.enter();
        reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(PARALLELISM)
            .tcp_nodelay(true)
            .build()
            .expect("client")
    };
    let url: std::sync::Arc<str> = url.into();
    let mut reader = csv::Reader::from_path(input).expect("input");
    let mut record = csv::ByteRecord::new();
    let mut out = csv::Writer::from_path(output).expect("output");
    out.write_record(["id", "score"]).expect("write");
    // Sends one prepared batch; the body goes with the request, the rest comes back.
    let send = |mut batch: Batch| {
        let request = client
            .post(&*url)
            .header("content-type", "application/json")
            .body(std::mem::take(&mut batch.body));
        tokio::spawn(async move {
            let reply = request.send().await.expect("request");
            assert!(reply.status().is_success(), "status {}", reply.status());
            (batch, reply.bytes().await.expect("reply"))
        })
    };
    rt.block_on(async {
        let mut in_flight = FuturesUnordered::new();
        let mut spare: Vec<Batch> = Vec::new();
        let mut next = Batch::default();
        let mut more = read_batch(&mut reader, &mut record, &mut next);
        loop {
            // Fill every free slot, then read the batch after them while they are out.
            while more && in_flight.len() < PARALLELISM {
                let ready = std::mem::replace(&mut next, spare.pop().unwrap_or_default());
                in_flight.push(send(ready));
                more = read_batch(&mut reader, &mut record, &mut next);
            }
            let Some(done) = in_flight.next().await else {
                break;
            };
            let (batch, bytes) = done.expect("the request task");
            let reply: Reply<'_> = serde_json::from_slice(&bytes).expect("a predict reply");
            assert_eq!(
                reply.predictions.len(),
                batch.id_ends.len(),
                "one score per row"
            );
            for (id, p) in batch.ids().zip(&reply.predictions) {
                out.write_record([id, p.get().as_bytes()]).expect("write");
            }
            spare.push(batch);
        }
    });
    out.flush().expect("flush");
}

/// Runs `cmd` to completion; returns its wall time, its peak RSS in KiB and its
/// `ru_maxrss` in KiB.
///
/// The peak is the child's own `VmHWM` (the high-water mark of its address space), read from
/// `/proc` every 5 ms while it runs; the last reading before it exits is kept. `ru_maxrss`
/// from `wait4` is reported too, as `benches/wordcount.rs` does, but it is an upper bound:
/// Linux folds the parent's high-water mark into it when the child execs, so it measures this
/// bench process as much as the child.
#[allow(clippy::zombie_processes)] // the child is reaped by wait4
fn time_child(cmd: &mut Command) -> (Duration, u64, u64) {
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let status_path = format!("/proc/{pid}/status");
    let mut peak = 0u64;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_path)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        // SAFETY: `pid` is our unreaped child; status and usage point to live locals.
        let waited = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if waited == pid {
            break;
        }
        assert_eq!(waited, 0, "wait4 failed");
        std::thread::sleep(Duration::from_millis(5)); // sampling interval, not synchronisation
    }
    let elapsed = start.elapsed();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed with status {status}"
    );
    (elapsed, peak, usage.ru_maxrss as u64)
}
