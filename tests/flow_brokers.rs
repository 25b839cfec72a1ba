//! `weir flow run` with real brokers and PostgreSQL, killed with SIGKILL at random moments
//! (`WEIR_BROKER_KILLS` times, default 20) and restarted, then run to idle:
//!
//! - AMQP → stateless group (UpdateAttribute, RouteOnAttribute, ReplaceText) →
//!   PutDatabaseRecord (UPSERT), 10,000 messages: every message is exactly one row with the
//!   right content, the queue ends empty, and after every kill each message is in the table
//!   or still with the broker (nothing acknowledged that is not in the table);
//! - the same from a JetStream durable consumer, where the consumer's ack floor must never
//!   pass a message that is not in the table;
//! - the traditional engine, ConsumeAMQP → PutFile: no message acknowledged and lost.
//!
//! A test whose services are unreachable prints a skip message, unless
//! `WEIR_REQUIRE_SERVICES=1`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use weir_connectors::amqp::{AmqpConfig, AmqpPublisher};
use weir_connectors::jetstream::{JetStreamConfig, JetStreamPublisher};
use weir_connectors::postgres::PgConfig;
use weir_test_support::services::{self, AMQP, NATS, POSTGRES};
use weir_test_support::wait_for;

const PG_URL: &str = "host=127.0.0.1 user=postgres dbname=test";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

fn amqp() -> AmqpConfig {
    AmqpConfig::new(AMQP, "/", "guest", "guest").unwrap()
}

fn kills() -> u32 {
    std::env::var("WEIR_BROKER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

fn messages() -> u64 {
    std::env::var("WEIR_BROKER_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn body(i: u64) -> String {
    format!("{{\"id\":{i},\"name\":\"msg-{i}\"}}")
}

/// Runs `weir flow run` and kills it at random moments, `kills()` times, calling `check`
/// after each kill; then runs it to idle.
/// Runs the flow and kills it with SIGKILL after a random 150–600 ms, `kills()` times, calling
/// `check` after each kill; then runs it with `--until-idle` until `finished` holds (at most
/// five runs). A broker that gives a dead consumer's messages back only after their ack wait
/// (JetStream) may do so after one idle run has ended: the next run takes them.
fn kill_loop(flow: &Path, repo: &Path, mut check: impl FnMut(u32), finished: impl Fn() -> bool) {
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d ^ u64::from(std::process::id());
    for round in 0..kills() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["flow", "run"])
            .arg(flow)
            .arg("--repo")
            .arg(repo)
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(150 + seed % 450));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        check(round);
    }
    for _ in 0..5 {
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["flow", "run"])
            .arg(flow)
            .arg("--repo")
            .arg(repo)
            .arg("--until-idle")
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the last run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if finished() {
            return;
        }
    }
}

struct Table {
    name: String,
    client: tokio_postgres::Client,
}

impl Table {
    fn create(rt: &tokio::runtime::Runtime, prefix: &str) -> Table {
        let name = unique(prefix);
        let client = rt
            .block_on(PgConfig::new(PG_URL, None, None).connect())
            .unwrap();
        rt.block_on(client.batch_execute(&format!(
            "CREATE TABLE {name} (id bigint PRIMARY KEY, name text NOT NULL, tag text NOT NULL)"
        )))
        .unwrap();
        Table { name, client }
    }

    fn ids(&self, rt: &tokio::runtime::Runtime) -> BTreeSet<i64> {
        rt.block_on(
            self.client
                .query(&format!("SELECT id FROM {}", self.name), &[]),
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    }

    /// Every row's content must be what its message said, tagged by the flow.
    fn check_contents(&self, rt: &tokio::runtime::Runtime, n: u64) {
        let rows = rt
            .block_on(self.client.query(
                &format!("SELECT id, name, tag FROM {} ORDER BY id", self.name),
                &[],
            ))
            .unwrap();
        assert_eq!(rows.len() as u64, n, "one row per message");
        for (i, r) in rows.iter().enumerate() {
            let (id, name, tag): (i64, String, String) = (r.get(0), r.get(1), r.get(2));
            assert_eq!(id, i as i64);
            assert_eq!(name, format!("msg-{i}"));
            let expected = parity(i as u64);
            assert_eq!(tag, expected, "row {i}");
        }
    }

    fn drop_table(self, rt: &tokio::runtime::Runtime) {
        rt.block_on(
            self.client
                .batch_execute(&format!("DROP TABLE {}", self.name)),
        )
        .unwrap();
    }
}

/// The stateless group after the source `source` (YAML of one processor named `consume`
/// that sets attribute `key`, whose text after the first dot is `even` or `odd`).
/// `timeout` is the group's.
fn stateless_flow(source: &str, key: &str, table: &str, timeout: &str) -> String {
    format!(
        r#"flow: brokers-kill-loop
groups:
  - name: tx
    engine: stateless
    timeout: {timeout}
    processors:
{source}
      - name: parity
        type: UpdateAttribute
        properties:
          parity: ${{'{key}':substringAfter('.')}}
      - name: route
        type: RouteOnAttribute
        properties:
          even: ${{parity:equals('even')}}
      - name: add-tag
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
          Batch Size: "500"
    connections:
      - {{ from: consume, relationships: [success], to: parity }}
      - {{ from: parity, relationships: [success], to: route }}
      - {{ from: route, relationships: [even, unmatched], to: add-tag }}
      - {{ from: add-tag, relationships: [success], to: put }}
      - {{ from: add-tag, relationships: [failure], to: failed }}
      - {{ from: put, relationships: [failure, retry], to: failed }}
      - {{ from: put, relationships: [success], to: done }}
    ports:
      output:
        - {{ name: done }}
        - {{ name: failed, failure: true }}
"#
    )
}

fn parity(i: u64) -> &'static str {
    if i.is_multiple_of(2) { "even" } else { "odd" }
}

async fn declare_bound_queue(queue: &str) {
    let (_c, ch) = amqp().connect().await.unwrap();
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.queue_bind(
        queue.into(),
        "amq.topic".into(),
        format!("{queue}.*").as_str().into(),
        lapin::options::QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

async fn publish_amqp(queue: &str, n: u64) {
    let p = AmqpPublisher::new(amqp());
    for i in 0..n {
        p.publish(
            "amq.topic",
            &format!("{queue}.{}", parity(i)),
            body(i).as_bytes(),
        )
        .await
        .unwrap();
    }
}

/// (ready messages, consumers) of `queue`.
async fn queue_counts(queue: &str) -> (u32, u32) {
    let (_c, ch) = amqp().connect().await.unwrap();
    let q = ch
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    (q.message_count(), q.consumer_count())
}

async fn delete_queue(queue: &str) {
    let (_c, ch) = amqp().connect().await.unwrap();
    ch.queue_delete(queue.into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

fn amqp_source(queue: &str) -> String {
    format!(
        r#"      - name: consume
        type: ConsumeAMQP
        properties:
          Queue: {queue}
          User Name: guest
          Password: guest
          Batch Size: "200"
          Prefetch Count: "400""#
    )
}

#[test]
fn amqp_to_stateless_group_to_postgres_survives_kill_9() {
    if !services::available(
        "amqp_to_stateless_group_to_postgres_survives_kill_9",
        &[AMQP, POSTGRES],
    ) {
        return;
    }
    let rt = rt();
    let n = messages();
    let queue = unique("weir_kill_amqp");
    let table = Table::create(&rt, "weir_kill_amqp");
    rt.block_on(declare_bound_queue(&queue));
    rt.block_on(publish_amqp(&queue, n));
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("flow.yaml");
    fs::write(
        &flow,
        stateless_flow(&amqp_source(&queue), "amqp$routingKey", &table.name, "30 s"),
    )
    .unwrap();
    kill_loop(
        &flow,
        &dir.path().join("repo"),
        |round| {
            // Nothing acknowledged that is not in the table: once the broker has taken back the
            // killed process's unacknowledged messages, each message is in the table or queued.
            let ok = wait_for(Duration::from_secs(10), || {
                let rows = table.ids(&rt).len() as u64;
                let (ready, consumers) = rt.block_on(queue_counts(&queue));
                consumers == 0 && rows + u64::from(ready) >= n
            });
            let (ready, _) = rt.block_on(queue_counts(&queue));
            assert!(
                ok,
                "after kill {round}: {} rows + {ready} queued < {n}",
                table.ids(&rt).len()
            );
        },
        // RabbitMQ requeues a dead consumer's messages at once: one idle run takes them all.
        || true,
    );
    table.check_contents(&rt, n);
    assert_eq!(
        rt.block_on(queue_counts(&queue)),
        (0, 0),
        "the queue ends empty"
    );
    table.drop_table(&rt);
    rt.block_on(delete_queue(&queue));
}

#[test]
fn jetstream_to_stateless_group_to_postgres_survives_kill_9() {
    if !services::available(
        "jetstream_to_stateless_group_to_postgres_survives_kill_9",
        &[NATS, POSTGRES],
    ) {
        return;
    }
    let rt = rt();
    let n = messages();
    let stream = unique("WEIR_KILL");
    let table = Table::create(&rt, "weir_kill_js");
    let config = JetStreamConfig::new("nats://127.0.0.1:4222", None, None);
    let js = rt.block_on(config.connect()).unwrap();
    rt.block_on(js.create_stream(async_nats::jetstream::stream::Config {
        name: stream.clone(),
        subjects: vec![format!("{stream}.*")],
        ..Default::default()
    }))
    .unwrap();
    rt.block_on(async {
        let p = JetStreamPublisher::new(config.clone());
        for i in 0..n {
            p.publish(&format!("{stream}.{}", parity(i)), body(i).as_bytes())
                .await
                .unwrap();
        }
    });
    let source = format!(
        r#"      - name: consume
        type: ConsumeJetStream
        properties:
          Stream: {stream}
          Subject: "{stream}.*"
          Durable Consumer: weir
          Batch Size: "200"
          Ack Wait: 3 s"#
    );
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("flow.yaml");
    fs::write(
        &flow,
        // The Ack Wait must outlast the group's timeout (validation refuses it otherwise);
        // a short one brings back quickly what a killed process had pulled.
        stateless_flow(&source, "jetstream.subject", &table.name, "2 s"),
    )
    .unwrap();
    let floor = |rt: &tokio::runtime::Runtime| -> Option<(u64, u64, usize)> {
        rt.block_on(async {
            let s = js.get_stream(&stream).await.ok()?;
            let mut c: async_nats::jetstream::consumer::PullConsumer =
                s.get_consumer("weir").await.ok()?;
            let info = c.info().await.ok()?;
            Some((
                info.ack_floor.stream_sequence,
                info.num_pending,
                info.num_ack_pending,
            ))
        })
    };
    kill_loop(
        &flow,
        &dir.path().join("repo"),
        |round| {
            // Nothing acknowledged that is not in the table: every message at or below the
            // consumer's ack floor (stream sequence i + 1 carries id i) has its row.
            if let Some((acked, _, _)) = floor(&rt) {
                let ids = table.ids(&rt);
                let missing = (0..acked as i64).find(|i| !ids.contains(i));
                assert_eq!(
                    missing, None,
                    "after kill {round}: acked through {acked} but a row is missing"
                );
            }
        },
        // What the last killed process had pulled comes back once its ack wait (3 s) runs
        // out, which may be after an idle run ended.
        || floor(&rt) == Some((n, 0, 0)),
    );
    table.check_contents(&rt, n);
    let (acked, pending, ack_pending) = floor(&rt).expect("the durable consumer exists");
    assert_eq!(
        (acked, pending, ack_pending),
        (n, 0, 0),
        "the stream is consumed and acked"
    );
    table.drop_table(&rt);
    rt.block_on(js.delete_stream(&stream)).unwrap();
}

#[test]
fn traditional_consume_amqp_to_put_file_acks_nothing_it_loses_under_kill_9() {
    if !services::available(
        "traditional_consume_amqp_to_put_file_acks_nothing_it_loses_under_kill_9",
        &[AMQP],
    ) {
        return;
    }
    let rt = rt();
    let n = messages().min(2_000);
    let queue = unique("weir_kill_trad");
    rt.block_on(declare_bound_queue(&queue));
    rt.block_on(publish_amqp(&queue, n));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let flow = dir.path().join("flow.yaml");
    fs::write(
        &flow,
        format!(
            r#"flow: amqp-to-files
groups:
  - name: main
    processors:
{source}
      - name: write
        type: PutFile
        properties:
          Directory: {out}
        auto_terminate: [success, failure]
    connections:
      - {{ from: consume, relationships: [success], to: write }}
"#,
            source = amqp_source(&queue),
            out = out.display()
        ),
    )
    .unwrap();
    let files = |out: &Path| -> BTreeSet<i64> {
        fs::read_dir(out)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| fs::read(e.path()).ok())
                    .filter_map(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    .filter_map(|v| v["id"].as_i64())
                    .collect()
            })
            .unwrap_or_default()
    };
    // A message is acked only once its flow file is durable in the repository, so after the
    // last run every message must have reached a file (duplicates are allowed: at least once).
    kill_loop(&flow, &dir.path().join("repo"), |_| {}, || true);
    let written = files(&out);
    let missing: Vec<i64> = (0..n as i64).filter(|i| !written.contains(i)).collect();
    assert!(missing.is_empty(), "messages acked and lost: {missing:?}");
    assert_eq!(
        rt.block_on(queue_counts(&queue)),
        (0, 0),
        "the queue ends empty"
    );
    rt.block_on(delete_queue(&queue));
}
