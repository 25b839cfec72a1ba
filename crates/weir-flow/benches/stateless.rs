//! AMQP → stateless group (UpdateAttribute, RouteOnAttribute, ReplaceText) → PostgreSQL
//! (UPSERT), at concurrency 1 and 4, in messages/s, against a hand-written lapin +
//! tokio-postgres loop doing the same transformation with the same acks and one transaction
//! per message batch; then the latency from publish to committed row at p50 and p99 at a
//! steady publish rate. Needs RabbitMQ and PostgreSQL on loopback.
//!
//! The rate is the steady one, from the first row written to the last (the rows' own
//! `written` times): a run starts with the messages queued, and the start (connections,
//! prepared statements, for the engine its repositories and its processors' scheduling) is
//! left out of both sides and shown apart, with the rate from the start.
//!
//! `cargo bench -p weir-flow --bench stateless` (`WEIR_BENCH_MESSAGES`, default 20,000;
//! `WEIR_BENCH_ROUNDS` rounds of a hand-loop and an engine run, which goes first alternating
//! from round to round, default 7, and with more than
//! one the median of the rounds' ratios and the ratio of the two sides' median rates: on
//! this shared machine one round's ratio moves by ±0.2 from the next, so the medians are the
//! figures;
//! `WEIR_BENCH_HAND=0` skips the hand loop, so that a profile of the process holds only the
//! engine's work besides publishing; `WEIR_BENCH_LATENCY=0` skips the latency run, whose
//! transactions of one or two messages would weigh in such a profile;
//! `WEIR_BENCH_CONCURRENCY=1` or `4` runs only that one;
//! `WEIR_BENCH_THREADS=1` adds, per run, each thread's CPU (and of it the kernel's) and
//! context switches per message).
//! Each line gives this process's CPU seconds per 1,000 messages beside the rates, and the
//! servers' (RabbitMQ's `beam.smp`, every `postgres` process) over the same span where
//! `/proc` shows them: the machine is shared, and the broker takes most of it.

use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use weir_connectors::amqp::{AmqpConfig, AmqpPublisher};
use weir_connectors::postgres::PgConfig;
use weir_flow::definition::Flow;
use weir_flow::engine::Engine;
use weir_test_support::services::{self, AMQP, POSTGRES};

const PG_URL: &str = "host=127.0.0.1 user=postgres dbname=test";
const BATCH: usize = 100;

fn rt() -> &'static tokio::runtime::Handle {
    weir_runtime::runtime().expect("runtime")
}

fn amqp() -> AmqpConfig {
    AmqpConfig::new(AMQP, "/", "guest", "guest").unwrap()
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

struct Setup {
    queue: String,
    table: String,
    pg: tokio_postgres::Client,
}

impl Setup {
    fn new(name: &str) -> Setup {
        let queue = format!("weir_bench_{name}_{}", std::process::id());
        let table = queue.clone();
        let pg = rt()
            .block_on(PgConfig::new(PG_URL, None, None).connect())
            .unwrap();
        rt().block_on(async {
            pg.batch_execute(&format!(
                "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id bigint PRIMARY KEY, name text, ts bigint, tag text, written bigint DEFAULT (extract(epoch from clock_timestamp()) * 1000000)::bigint)"
            ))
            .await
            .unwrap();
            let (_c, ch) = amqp().connect().await.unwrap();
            ch.queue_declare(queue.as_str().into(), QueueDeclareOptions::default(), FieldTable::default())
                .await
                .unwrap();
            ch.queue_bind(
                queue.as_str().into(),
                "amq.topic".into(),
                format!("{queue}.*").as_str().into(),
                lapin::options::QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        });
        Setup { queue, table, pg }
    }

    /// Publishes ids `range`, `per_second` (0: as fast as confirms allow).
    fn publish(&self, range: std::ops::Range<u64>, per_second: u64) {
        let p = AmqpPublisher::new(amqp());
        let start = Instant::now();
        rt().block_on(async {
            for (k, i) in range.enumerate() {
                if per_second > 0 {
                    let due = start + Duration::from_secs_f64(k as f64 / per_second as f64);
                    tokio::time::sleep_until(due.into()).await;
                }
                let parity = if i % 2 == 0 { "even" } else { "odd" };
                let body = format!("{{\"id\":{i},\"name\":\"msg-{i}\",\"ts\":{}}}", now_us());
                p.publish(
                    "amq.topic",
                    &format!("{}.{parity}", self.queue),
                    body.as_bytes(),
                )
                .await
                .unwrap();
            }
        });
    }

    fn rows(&self) -> i64 {
        rt().block_on(
            self.pg
                .query_one(&format!("SELECT count(*) FROM {}", self.table), &[]),
        )
        .unwrap()
        .get(0)
    }

    fn wait_rows(&self, n: i64) {
        while self.rows() < n {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Microseconds from `start_us` to the first row written, and from the first row to
    /// the last.
    fn row_span(&self, start_us: i64) -> (f64, f64) {
        let r = rt()
            .block_on(self.pg.query_one(
                &format!("SELECT min(written), max(written) FROM {}", self.table),
                &[],
            ))
            .unwrap();
        let (first, last): (i64, i64) = (r.get(0), r.get(1));
        ((first - start_us) as f64, (last - first) as f64)
    }

    fn latencies(&self, from: i64) -> Vec<i64> {
        let mut v: Vec<i64> = rt()
            .block_on(self.pg.query(
                &format!("SELECT written - ts FROM {} WHERE id >= $1", self.table),
                &[&from],
            ))
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        v.sort_unstable();
        v
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let (q, t) = (self.queue.clone(), self.table.clone());
        rt().block_on(async {
            if let Ok((_c, ch)) = amqp().connect().await {
                let _ = ch
                    .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                    .await;
            }
            let _ = self
                .pg
                .batch_execute(&format!("DROP TABLE IF EXISTS {t}"))
                .await;
        });
    }
}

fn flow(s: &Setup, concurrency: usize) -> Flow {
    let yaml = format!(
        r#"flow: bench
groups:
  - name: tx
    engine: stateless
    concurrency: {concurrency}
    processors:
      - name: consume
        type: ConsumeAMQP
        properties:
          Queue: {queue}
          Password: guest
          Batch Size: "{BATCH}"
          Prefetch Count: "{prefetch}"
      - name: parity
        type: UpdateAttribute
        properties:
          parity: ${{'amqp$routingKey':substringAfter('.')}}
      - name: route
        type: RouteOnAttribute
        properties:
          even: ${{parity:equals('even')}}
      - name: tag
        type: ReplaceText
        properties:
          Search Value: '\}}\s*$'
          Replacement Value: ',"tag":"${{parity}}"}}'
          Evaluation Mode: Entire text
      - name: put
        type: PutDatabaseRecord
        properties:
          Database URL: "{PG_URL}"
          Table Name: {table}
          Statement Type: UPSERT
          Update Keys: id
          Batch Size: "{BATCH}"
    connections:
      - {{ from: consume, relationships: [success], to: parity }}
      - {{ from: parity, relationships: [success], to: route }}
      - {{ from: route, relationships: [even, unmatched], to: tag }}
      - {{ from: tag, relationships: [success, failure], to: put }}
      - {{ from: put, relationships: [failure, retry], to: failed }}
      - {{ from: put, relationships: [success], to: done }}
    ports:
      output:
        - {{ name: done }}
        - {{ name: failed, failure: true }}
"#,
        queue = s.queue,
        table = s.table,
        prefetch = BATCH * 4,
    );
    Flow::parse(&yaml, "bench.yaml").unwrap()
}

/// The hand loop: per worker one channel and one PostgreSQL connection; a batch of what is
/// ready (up to BATCH), the same tag by routing key and the same text replacement, each
/// message checked to be JSON and the batch sent as one JSON text (as the engine does: it
/// checks each record and sends the records' text, the server parses the values), one
/// UPSERT statement per batch, its own transaction (as the engine sends a batch whose
/// records have one column set), then one `multiple` ack for the batch (as the engine does
/// when nothing else of the channel is unsettled).
async fn hand_worker(
    queue: String,
    table: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    batches: std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    let (_conn, ch) = amqp().connect().await.unwrap();
    ch.basic_qos((BATCH * 4) as u16, BasicQosOptions::default())
        .await
        .unwrap();
    let mut consumer = ch
        .basic_consume(
            queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let pg = PgConfig::new(PG_URL, None, None).connect().await.unwrap();
    let sql = format!(
        "INSERT INTO {table} (id, name, ts, tag) SELECT id, name, ts, tag FROM jsonb_populate_recordset(NULL::{table}, $1::text::jsonb) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, ts = EXCLUDED.ts, tag = EXCLUDED.tag"
    );
    let stmt = pg
        .prepare_typed(&sql, &[tokio_postgres::types::Type::TEXT])
        .await
        .unwrap();
    let re = regex::Regex::new(r"\}\s*$").unwrap();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let first = match tokio::time::timeout(Duration::from_millis(50), consumer.next()).await {
            Ok(Some(Ok(d))) => d,
            _ => continue,
        };
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match futures::FutureExt::now_or_never(consumer.next()) {
                Some(Some(Ok(d))) => batch.push(d),
                _ => break,
            }
        }
        let mut rows = String::from("[");
        for (i, d) in batch.iter().enumerate() {
            let parity = d
                .routing_key
                .as_str()
                .split_once('.')
                .map_or("", |(_, p)| p);
            let text = String::from_utf8_lossy(&d.data);
            let tagged = re.replace(&text, format!(",\"tag\":\"{parity}\"}}").as_str());
            // Checked, not decoded: the server parses the values.
            serde_json::from_str::<serde::de::IgnoredAny>(&tagged).unwrap();
            if i > 0 {
                rows.push(',');
            }
            rows.push_str(&tagged);
        }
        rows.push(']');
        // One statement, its own transaction, as the engine sends a batch of one column
        // set: one round trip, one answer.
        pg.execute(&stmt, &[&rows]).await.unwrap();
        batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // One frame for the batch: this loop never gives a message back, so every tag up to
        // the batch's last is its own.
        batch
            .last()
            .expect("a batch has a first message")
            .acker
            .ack(BasicAckOptions { multiple: true })
            .await
            .unwrap();
    }
}

/// CPU seconds (user and system, every thread) this process has used so far.
fn cpu_seconds() -> f64 {
    cpu_time::ProcessTime::now().as_duration().as_secs_f64()
}

/// The CPU seconds every process named `comm` has used so far, its reaped children's
/// included (a PostgreSQL backend that ended meanwhile counts in its postmaster's): `None`
/// where `/proc` shows none. `/proc` counts in USER_HZ, 100 per second on Linux.
fn server_cpu_seconds(comm: &str) -> Option<f64> {
    let mut ticks = None;
    for p in std::fs::read_dir("/proc").ok()?.flatten() {
        let path = p.path();
        if std::fs::read_to_string(path.join("comm")).is_ok_and(|c| c.trim_end() == comm)
            && let Ok(stat) = std::fs::read_to_string(path.join("stat"))
            // The fields after the command, which may hold spaces, in parentheses.
            && let Some((_, rest)) = stat.rsplit_once(')')
        {
            let fields: Vec<u64> = rest
                .split_whitespace()
                .skip(11)
                .take(4)
                .filter_map(|f| f.parse().ok())
                .collect();
            *ticks.get_or_insert(0) += fields.iter().sum::<u64>();
        }
    }
    ticks.map(|t| t as f64 / 100.0)
}

/// The servers' CPU seconds so far: RabbitMQ's and PostgreSQL's (NaN where not seen).
fn servers_cpu_seconds() -> (f64, f64) {
    let seconds = |comm| server_cpu_seconds(comm).unwrap_or(f64::NAN);
    (seconds("beam.smp"), seconds("postgres"))
}

/// One thread's CPU time (clock ticks, of which `system_ticks` in the kernel) and context
/// switches (voluntary, involuntary).
#[derive(Debug, Clone, Copy, Default)]
struct ThreadCounts {
    ticks: u64,
    system_ticks: u64,
    voluntary: u64,
    involuntary: u64,
}

/// Every live thread of this process by id: its name and counts, from `/proc/self/task`
/// (empty where there is no `/proc`).
fn thread_counts() -> std::collections::BTreeMap<u64, (String, ThreadCounts)> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let (Ok(stat), Ok(status)) = (
            std::fs::read_to_string(task.path().join("stat")),
            std::fs::read_to_string(task.path().join("status")),
        ) else {
            continue;
        };
        // `pid (comm) state ...`: the name may hold spaces, so split at the last `)`.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let name = head.split_once('(').map_or("", |(_, n)| n).to_string();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line; `rest` starts at field 3.
        let tick = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let switches = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.insert(
            tid,
            (
                name,
                ThreadCounts {
                    ticks: tick(11) + tick(12),
                    system_ticks: tick(12),
                    voluntary: switches("voluntary_ctxt_switches:"),
                    involuntary: switches("nonvoluntary_ctxt_switches:"),
                },
            ),
        );
    }
    out
}

/// With `WEIR_BENCH_THREADS=1`, prints what each thread used between `before` and now, per
/// message, busiest first: CPU µs and context switches (a thread that ended meanwhile is
/// missed; the tokio runtime's workers and its blocking pool share one name).
fn report_threads(
    label: &str,
    before: &std::collections::BTreeMap<u64, (String, ThreadCounts)>,
    n: i64,
) {
    if std::env::var("WEIR_BENCH_THREADS").map_or(true, |v| v != "1") {
        return;
    }
    // USER_HZ: /proc reports CPU time in ticks of 1/100 s on Linux.
    let ticks_per_second = 100.0;
    let mut used: Vec<(u64, String, ThreadCounts)> = thread_counts()
        .into_iter()
        .map(|(tid, (name, now))| {
            // A thread id used again by a newer thread counts from zero.
            let was = before
                .get(&tid)
                .map(|(_, c)| *c)
                .filter(|c| {
                    c.ticks <= now.ticks
                        && c.system_ticks <= now.system_ticks
                        && c.voluntary <= now.voluntary
                        && c.involuntary <= now.involuntary
                })
                .unwrap_or_default();
            let c = ThreadCounts {
                ticks: now.ticks - was.ticks,
                system_ticks: now.system_ticks - was.system_ticks,
                voluntary: now.voluntary - was.voluntary,
                involuntary: now.involuntary - was.involuntary,
            };
            (tid, name, c)
        })
        .filter(|(_, _, c)| c.ticks + c.voluntary + c.involuntary > 0)
        .collect();
    used.sort_by_key(|(_, _, c)| std::cmp::Reverse((c.ticks, c.voluntary)));
    let per = |v: u64| v as f64 / n as f64;
    let mut total = ThreadCounts::default();
    for (tid, name, c) in &used {
        total.ticks += c.ticks;
        total.system_ticks += c.system_ticks;
        total.voluntary += c.voluntary;
        total.involuntary += c.involuntary;
        println!(
            "  {label}: thread {tid} {name}: CPU {:.1} µs/msg ({:.1} in the kernel), switches {:.3} voluntary + {:.3} involuntary per msg",
            per(c.ticks) * 1e6 / ticks_per_second,
            per(c.system_ticks) * 1e6 / ticks_per_second,
            per(c.voluntary),
            per(c.involuntary)
        );
    }
    println!(
        "  {label}: all threads: CPU {:.1} µs/msg ({:.1} in the kernel), switches {:.3} voluntary + {:.3} involuntary per msg",
        per(total.ticks) * 1e6 / ticks_per_second,
        per(total.system_ticks) * 1e6 / ticks_per_second,
        per(total.voluntary),
        per(total.involuntary)
    );
}

/// What one run of the hand loop or the engine measured.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Messages/s from the first row written to the last: the steady rate, the figure.
    steady: f64,
    /// Messages/s from the start (connecting, opening repositories) to the last row.
    wall: f64,
    /// Milliseconds from the start to the first row.
    first_row_ms: f64,
    /// This process's CPU seconds per 1,000 messages, start to last row.
    cpu: f64,
    /// RabbitMQ's and PostgreSQL's CPU seconds per 1,000 messages over the same span.
    servers: (f64, f64),
    /// Messages per PostgreSQL transaction, on average.
    batch: f64,
}

impl Run {
    /// The run that started at `start` with `cpu` and `servers` (the CPU seconds then) and
    /// has written its `n` rows.
    fn measured(s: &Setup, n: i64, start: (Instant, i64), cpu: f64, servers: (f64, f64)) -> Run {
        let (start, start_us) = start;
        let wall = n as f64 / start.elapsed().as_secs_f64();
        let per_1000 = |seconds: f64| seconds * 1000.0 / n as f64;
        let cpu = per_1000(cpu_seconds() - cpu);
        let now = servers_cpu_seconds();
        let servers = (per_1000(now.0 - servers.0), per_1000(now.1 - servers.1));
        let (to_first, span) = s.row_span(start_us);
        Run {
            steady: (n - 1) as f64 / span * 1e6,
            wall,
            first_row_ms: to_first / 1e3,
            cpu,
            servers,
            batch: f64::NAN,
        }
    }

    const NONE: Run = Run {
        steady: f64::NAN,
        wall: f64::NAN,
        first_row_ms: f64::NAN,
        cpu: f64::NAN,
        servers: (f64::NAN, f64::NAN),
        batch: f64::NAN,
    };
}

/// One run of the hand loop with `workers` workers over `n` messages already queued.
fn run_hand(s: &Setup, workers: usize, n: i64) -> Run {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let batches = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads = thread_counts();
    let (cpu, servers) = (cpu_seconds(), servers_cpu_seconds());
    let start = (Instant::now(), now_us());
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            rt().spawn(hand_worker(
                s.queue.clone(),
                s.table.clone(),
                std::sync::Arc::clone(&stop),
                std::sync::Arc::clone(&batches),
            ))
        })
        .collect();
    s.wait_rows(n);
    let mut run = Run::measured(s, n, start, cpu, servers);
    run.batch = n as f64 / batches.load(std::sync::atomic::Ordering::Relaxed).max(1) as f64;
    report_threads("hand loop", &threads, n);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        let _ = rt().block_on(t);
    }
    run
}

/// As [`run_hand`] for the engine, with the running engine. Its CPU includes the provenance
/// store's writer thread up to the last row.
fn run_engine(s: &Setup, concurrency: usize, n: i64) -> (Run, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let threads = thread_counts();
    let (cpu, servers) = (cpu_seconds(), servers_cpu_seconds());
    let start = (Instant::now(), now_us());
    let engine = Engine::start(flow(s, concurrency), dir.path()).unwrap();
    s.wait_rows(n);
    let mut run = Run::measured(s, n, start, cpu, servers);
    report_threads("engine", &threads, n);
    std::mem::forget(dir);
    let put = engine
        .monitor()
        .processor("put")
        .expect("the flow has `put`");
    run.batch = put.flowfiles_in as f64 / put.commits.max(1) as f64;
    (run, engine)
}

fn pct(v: &[i64], p: f64) -> f64 {
    v[((v.len() as f64 - 1.0) * p) as usize] as f64 / 1000.0
}

fn main() {
    if !services::available("stateless bench", &[AMQP, POSTGRES]) {
        return;
    }
    let n: u64 = std::env::var("WEIR_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    // Rounds alternate the hand loop and the engine, so that both see the same load.
    let rounds: usize = std::env::var("WEIR_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(1);
    let hand_loop = std::env::var("WEIR_BENCH_HAND").map_or(true, |v| v != "0");
    let latency = std::env::var("WEIR_BENCH_LATENCY").map_or(true, |v| v != "0");
    // `WEIR_BENCH_CONCURRENCY=1` (or `4`) runs one of the two, for profiles.
    let concurrencies: Vec<usize> = std::env::var("WEIR_BENCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(vec![1, 4], |c| vec![c]);
    for concurrency in concurrencies {
        let s = Setup::new(&format!("c{concurrency}"));
        let (mut ratios, mut wall_ratios) = (Vec::new(), Vec::new());
        // Each side's steady rate per round: the rates move with the machine from round to
        // round, so the ratio of their medians is shown beside the median of the ratios.
        let (mut engine_rates, mut hand_rates) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let run_hand_round = || {
                if !hand_loop {
                    return Run::NONE;
                }
                rt().block_on(s.pg.batch_execute(&format!("TRUNCATE {}", s.table)))
                    .unwrap();
                s.publish(0..n, 0);
                run_hand(&s, concurrency, n as i64)
            };
            // The engine's run, then (in the last round at concurrency 1) the latency at a
            // steady 1,000 msgs/s with the engine running and idle before; then it stops, so
            // that it takes nothing from a hand-loop run after it.
            let run_engine_round = || {
                rt().block_on(s.pg.batch_execute(&format!("TRUNCATE {}", s.table)))
                    .unwrap();
                s.publish(0..n, 0);
                let (run, engine) = run_engine(&s, concurrency, n as i64);
                if latency && concurrency == 1 && round + 1 == rounds {
                    let m = 3_000u64;
                    s.publish(n..n + m, 1_000);
                    s.wait_rows((n + m) as i64);
                    let lat = s.latencies(n as i64);
                    println!(
                        "publish→row latency at 1000 msgs/s, concurrency 1: p50 {:.1} ms, p99 {:.1} ms ({} rows)",
                        pct(&lat, 0.50),
                        pct(&lat, 0.99),
                        lat.len()
                    );
                }
                engine.stop().unwrap();
                run
            };
            // Which side goes first alternates too: the one that follows runs on servers the
            // other has just loaded (the broker writing out its queue, the table's pages).
            let (hand, run) = if round % 2 == 0 {
                let hand = run_hand_round();
                (hand, run_engine_round())
            } else {
                let engine = run_engine_round();
                (run_hand_round(), engine)
            };
            println!(
                "stateless AMQP→3 processors→PostgreSQL, concurrency {concurrency}, {n} msgs: engine {:.0} msgs/s, hand loop {:.0} msgs/s, ratio {:.2} (first to last row); from the start {:.0} and {:.0} msgs/s, ratio {:.2}, first row after {:.0} and {:.0} ms; CPU s per 1000 msgs (this process): engine {:.3}, hand loop {:.3}; mean PostgreSQL batch: engine {:.0}, hand loop {:.0}; CPU s per 1000 msgs, RabbitMQ: engine's run {:.3}, hand loop's {:.3}, PostgreSQL: {:.3} and {:.3}",
                run.steady,
                hand.steady,
                run.steady / hand.steady,
                run.wall,
                hand.wall,
                run.wall / hand.wall,
                run.first_row_ms,
                hand.first_row_ms,
                run.cpu,
                hand.cpu,
                run.batch,
                hand.batch,
                run.servers.0,
                hand.servers.0,
                run.servers.1,
                hand.servers.1,
            );
            if hand_loop {
                ratios.push(run.steady / hand.steady);
                wall_ratios.push(run.wall / hand.wall);
                engine_rates.push(run.steady);
                hand_rates.push(hand.steady);
            }
        }
        if rounds > 1 && !ratios.is_empty() {
            for v in [
                &mut ratios,
                &mut wall_ratios,
                &mut engine_rates,
                &mut hand_rates,
            ] {
                v.sort_by(f64::total_cmp);
            }
            let (engine_rate, hand_rate) = (median(&engine_rates), median(&hand_rates));
            println!(
                "concurrency {concurrency}: median ratio {:.2} over {} rounds (lowest {:.2}, highest {:.2}); median rates: engine {:.0} msgs/s, hand loop {:.0} msgs/s, ratio {:.2}; from the start, median {:.2}",
                median(&ratios),
                ratios.len(),
                ratios[0],
                ratios[ratios.len() - 1],
                engine_rate,
                hand_rate,
                engine_rate / hand_rate,
                median(&wall_ratios)
            );
        }
    }
}

/// The median of `sorted` (not empty, in order).
fn median(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}
