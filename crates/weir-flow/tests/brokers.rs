//! Broker sources in running flows against real RabbitMQ and NATS JetStream: every
//! delivery is settled on every path, a failing content write included.
//!
//! Each test uses its own queue and removes it. A test whose services are unreachable (or,
//! for the counts of unacknowledged messages, without `rabbitmqctl`) prints a skip message,
//! unless `WEIR_REQUIRE_SERVICES=1`.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use support::{Probe, start, wait_for};
use weir_connectors::amqp::{AmqpConfig, AmqpPublisher};
use weir_test_support::services::{self, AMQP};

fn rt() -> &'static tokio::runtime::Handle {
    weir_runtime::runtime().expect("runtime")
}

fn amqp() -> AmqpConfig {
    AmqpConfig::new(AMQP, "/", "guest", "guest").unwrap()
}

/// A queue of a unique name, deleted on drop.
struct TestQueue(String);

impl TestQueue {
    fn new() -> TestQueue {
        let name = format!("weir_flow_{}", uuid::Uuid::new_v4().simple());
        rt().block_on(async {
            let (_c, ch) = amqp().connect().await.unwrap();
            ch.queue_declare(
                name.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        });
        TestQueue(name)
    }

    fn publish(&self, body: &[u8]) {
        rt().block_on(AmqpPublisher::new(amqp()).publish("", &self.0, body))
            .unwrap();
    }

    /// (ready, unacknowledged) as the broker counts them, through `rabbitmqctl`.
    fn counts(&self) -> (u64, u64) {
        let out = Command::new("rabbitmqctl")
            .args([
                "list_queues",
                "-q",
                "name",
                "messages_ready",
                "messages_unacknowledged",
            ])
            .output()
            .expect("rabbitmqctl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(self.0.as_str()))
            .unwrap_or_else(|| panic!("queue {} not listed: {text}", self.0));
        let n: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap())
            .collect();
        (n[0], n[1])
    }
}

impl Drop for TestQueue {
    fn drop(&mut self) {
        let name = self.0.clone();
        rt().block_on(async {
            if let Ok((_c, ch)) = amqp().connect().await {
                let _ = ch
                    .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
                    .await;
            }
        });
    }
}

/// True when RabbitMQ is reachable and `rabbitmqctl` can list its queues; otherwise the
/// test is skipped (or fails with `WEIR_REQUIRE_SERVICES=1`).
fn rabbit_with_ctl(test: &str) -> bool {
    if !services::available(test, &[AMQP]) {
        return false;
    }
    let listed = Command::new("rabbitmqctl")
        .args(["list_queues", "-q", "name"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !listed {
        services::skip_unless_required(
            test,
            "rabbitmqctl cannot list queues",
            "install rabbitmq-server's tools",
        );
    }
    listed
}

fn status_failures(engine: &weir_flow::engine::Engine, name: &str) -> u64 {
    engine
        .status()
        .components
        .iter()
        .find(|c| c.name == name)
        .map_or(0, |c| c.failures)
}

#[test]
fn consume_amqp_requeues_a_delivery_whose_content_cannot_be_written() {
    let test = "consume_amqp_requeues_a_delivery_whose_content_cannot_be_written";
    if !rabbit_with_ctl(test) {
        return;
    }
    let queue = TestQueue::new();
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = format!(
        r#"flow: amqp-write-failure
settings: {{ sync: none }}
groups:
  - name: g
    processors:
      - name: consume
        type: ConsumeAMQP
        penalty: 200 ms
        yield: 100 ms
        properties:
          Queue: {queue}
          User Name: guest
          Password: guest
      - {{ name: got, type: Recorder, auto_terminate: [success] }}
    connections:
      - {{ from: consume, relationships: [success], to: got }}
"#,
        queue = queue.0
    );
    let engine = start(&yaml, &probe, dir.path());
    let content = dir.path().join("repo/content");
    let away = dir.path().join("repo/content-away");
    // A content of 1 MiB or more goes to a new claim file: with the directory gone, the
    // write fails.
    std::fs::rename(&content, &away).unwrap();
    queue.publish(&vec![b'x'; 2 << 20]);
    assert!(
        wait_for(Duration::from_secs(20), || status_failures(
            &engine, "consume"
        ) >= 1),
        "the write never failed"
    );
    std::fs::rename(&away, &content).unwrap();
    // Requeued after the penalty and delivered again, now written.
    assert!(
        wait_for(Duration::from_secs(20), || probe.count("got") == 1),
        "the message never came again: broker counts {:?}",
        queue.counts()
    );
    engine.wait_until_idle(Duration::from_millis(300));
    assert!(
        wait_for(Duration::from_secs(10), || queue.counts() == (0, 0)),
        "(ready, unacknowledged) = {:?}",
        queue.counts()
    );
    assert_eq!(probe.recorded("got")[0].content.len(), 2 << 20);
    engine.stop().unwrap();
}

fn jetstream_group(timeout: &str, ack_wait: Option<&str>) -> String {
    let ack_wait = ack_wait.map_or(String::new(), |a| format!("\n          Ack Wait: {a}"));
    format!(
        r#"flow: jetstream-ack-wait
groups:
  - name: tx
    engine: stateless
    timeout: {timeout}
    processors:
      - name: consume
        type: ConsumeJetStream
        properties:
          Stream: S
          Subject: S.in
          Durable Consumer: weir{ack_wait}
      - {{ name: log, type: LogAttribute, auto_terminate: [success] }}
    connections:
      - {{ from: consume, relationships: [success], to: log }}
"#
    )
}

#[test]
fn an_ack_wait_not_longer_than_the_groups_timeout_is_refused_naming_processor_and_property() {
    // The defaults: Ack Wait 30 s, timeout 1 min.
    for (timeout, ack_wait) in [
        ("1 min", None),
        ("30 s", Some("30 s")),
        ("10 s", Some("5 s")),
    ] {
        let yaml = jetstream_group(timeout, ack_wait);
        let e = weir_flow::definition::Flow::parse(&yaml, "test.yaml")
            .expect_err("refused")
            .to_string();
        assert!(e.contains("processor `consume`"), "{e}");
        assert!(
            e.contains("groups[0].processors[0].properties.Ack Wait:"),
            "{e}"
        );
        assert!(e.contains("timeout"), "{e}");
    }
    weir_flow::definition::Flow::parse(&jetstream_group("1 min", Some("90 s")), "test.yaml")
        .expect("an Ack Wait longer than the timeout is accepted");
}

const PG_URL: &str = "host=127.0.0.1 user=postgres dbname=test";

fn pg() -> tokio_postgres::Client {
    rt().block_on(weir_connectors::postgres::PgConfig::new(PG_URL, None, None).connect())
        .unwrap()
}

/// A table `(id bigint PRIMARY KEY, name text)` of a unique name, dropped on drop.
struct TestTable {
    name: String,
    client: tokio_postgres::Client,
}

impl TestTable {
    fn new() -> TestTable {
        let name = format!("weir_flow_{}", uuid::Uuid::new_v4().simple());
        let client = pg();
        rt().block_on(client.batch_execute(&format!(
            "CREATE TABLE {name} (id bigint PRIMARY KEY, name text NOT NULL)"
        )))
        .unwrap();
        TestTable { name, client }
    }

    fn rows(&self) -> Vec<(i64, String)> {
        rt().block_on(self.client.query(
            &format!("SELECT id, name FROM {} ORDER BY id", self.name),
            &[],
        ))
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
    }
}

impl Drop for TestTable {
    fn drop(&mut self) {
        let _ = rt().block_on(
            self.client
                .batch_execute(&format!("DROP TABLE IF EXISTS {}", self.name)),
        );
    }
}

/// ConsumeAMQP → PutDatabaseRecord (UPSERT on `id`) in a stateless group of `timeout`;
/// what commits leaves through port `done` to the recorder `done`.
fn amqp_to_postgres(queue: &str, table: &str, timeout: &str, put_extra: &str) -> String {
    format!(
        r#"flow: amqp-to-postgres
settings: {{ sync: none }}
groups:
  - name: tx
    engine: stateless
    timeout: {timeout}
    processors:
      - name: consume
        type: ConsumeAMQP
        penalty: 300 ms
        yield: 100 ms
        properties:
          Queue: {queue}
          User Name: guest
          Password: guest
      - name: put
        type: PutDatabaseRecord
        properties:
          Database URL: "{PG_URL}"
          Table Name: {table}
          Statement Type: UPSERT
          Update Keys: id{put_extra}
    connections:
      - {{ from: consume, relationships: [success], to: put }}
      - {{ from: put, relationships: [success], to: done }}
      - {{ from: put, relationships: [failure, retry], to: failed }}
    ports:
      output:
        - {{ name: done }}
        - {{ name: failed, failure: true }}
  - name: sink
    processors:
      - {{ name: done, type: Recorder, auto_terminate: [success] }}
connections:
  - {{ from: tx/done, to: done }}
"#
    )
}

#[test]
fn a_database_call_blocked_on_a_lock_ends_within_the_groups_timeout_and_the_message_goes_back() {
    let test = "a_database_call_blocked_on_a_lock_ends_within_the_groups_timeout_and_the_message_goes_back";
    if !rabbit_with_ctl(test) || !services::available(test, &[services::POSTGRES]) {
        return;
    }
    let (queue, table) = (TestQueue::new(), TestTable::new());
    rt().block_on(
        table
            .client
            .batch_execute(&format!("INSERT INTO {} VALUES (1, 'old')", table.name)),
    )
    .unwrap();
    // Another connection holds the row's lock in an open transaction.
    let holder = pg();
    rt().block_on(holder.batch_execute(&format!(
        "BEGIN; UPDATE {} SET name = 'held' WHERE id = 1",
        table.name
    )))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    // The default Lock Timeout (10 s) and Statement Timeout (30 s) are longer than the
    // group's: the group's bounds the call.
    let engine = start(
        &amqp_to_postgres(&queue.0, &table.name, "2 s", ""),
        &probe,
        dir.path(),
    );
    let published = std::time::Instant::now();
    queue.publish(br#"{"id":1,"name":"new"}"#);
    assert!(
        wait_for(Duration::from_secs(6), || status_failures(&engine, "put")
            >= 1),
        "the blocked call did not end: broker counts {:?}",
        queue.counts()
    );
    let ended = published.elapsed();
    assert!(ended < Duration::from_millis(3500), "ended after {ended:?}");
    assert_eq!(table.rows(), [(1, "old".to_string())]);
    // The lock goes: the message, given back to the broker, comes again and is written.
    rt().block_on(holder.batch_execute("ROLLBACK")).unwrap();
    assert!(
        wait_for(Duration::from_secs(20), || probe.count("done") == 1),
        "never written: broker counts {:?}",
        queue.counts()
    );
    assert_eq!(probe.recorded("done")[0].attr("amqp$redelivered"), "true");
    assert_eq!(table.rows(), [(1, "new".to_string())]);
    engine.wait_until_idle(Duration::from_millis(300));
    assert!(
        wait_for(Duration::from_secs(10), || queue.counts() == (0, 0)),
        "(ready, unacknowledged) = {:?}",
        queue.counts()
    );
    engine.stop().unwrap();
}

#[test]
fn a_poison_message_goes_to_dead_letter_and_its_batch_mates_rows_are_written_once() {
    let test = "a_poison_message_goes_to_dead_letter_and_its_batch_mates_rows_are_written_once";
    if !rabbit_with_ctl(test) || !services::available(test, &[services::POSTGRES]) {
        return;
    }
    let (queue, table) = (TestQueue::new(), TestTable::new());
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = format!(
        r#"flow: poison
settings: {{ sync: none }}
groups:
  - name: tx
    engine: stateless
    timeout: 10 s
    processors:
      - name: consume
        type: ConsumeAMQP
        penalty: 100 ms
        yield: 50 ms
        properties:
          Queue: {queue}
          User Name: guest
          Password: guest
          Batch Size: "10"
          Max Deliveries: "3"
      - name: put
        type: PutDatabaseRecord
        properties:
          Database URL: "{PG_URL}"
          Table Name: {table}
          Statement Type: INSERT
    connections:
      - {{ from: consume, relationships: [success], to: put }}
      - {{ from: consume, relationships: [dead-letter], to: dead }}
      - {{ from: put, relationships: [success], to: done }}
      - {{ from: put, relationships: [failure, retry], to: failed }}
    ports:
      output:
        - {{ name: done }}
        - {{ name: dead }}
        - {{ name: failed, failure: true }}
  - name: sink
    processors:
      - {{ name: done, type: Recorder, auto_terminate: [success] }}
      - {{ name: dead, type: Recorder, auto_terminate: [success] }}
connections:
  - {{ from: tx/done, to: done }}
  - {{ from: tx/dead, to: dead }}
"#,
        queue = queue.0,
        table = table.name
    );
    // Published before the flow starts: the ten come in one batch.
    for i in 1..=10 {
        if i == 5 {
            // Not a number for a bigint column: the server refuses the row.
            queue.publish(br#"{"id":"five","name":"poison"}"#);
        } else {
            queue.publish(format!(r#"{{"id":{i},"name":"m{i}"}}"#).as_bytes());
        }
    }
    let engine = start(&yaml, &probe, dir.path());
    assert!(
        wait_for(Duration::from_secs(30), || probe.count("dead") == 1
            && probe.count("done") == 9),
        "dead {} done {}: broker counts {:?}",
        probe.count("dead"),
        probe.count("done"),
        queue.counts()
    );
    let dead = &probe.recorded("dead")[0];
    assert_eq!(dead.content, br#"{"id":"five","name":"poison"}"#);
    // Delivered past the limit of 3: the fourth delivery went to dead-letter.
    assert_eq!(dead.attr("amqp$deliveries"), "4");
    engine.wait_until_idle(Duration::from_millis(300));
    assert!(
        wait_for(Duration::from_secs(10), || queue.counts() == (0, 0)),
        "(ready, unacknowledged) = {:?}",
        queue.counts()
    );
    // Each good row once (a second INSERT of one would have failed and shown in `done`).
    let expected: Vec<(i64, String)> = (1..=10)
        .filter(|i| *i != 5)
        .map(|i| (i, format!("m{i}")))
        .collect();
    assert_eq!(table.rows(), expected);
    assert_eq!(probe.count("done"), 9);
    engine.stop().unwrap();
}

#[test]
fn rows_written_in_a_group_transaction_that_rolls_back_are_not_committed() {
    let test = "rows_written_in_a_group_transaction_that_rolls_back_are_not_committed";
    if !rabbit_with_ctl(test) || !services::available(test, &[services::POSTGRES]) {
        return;
    }
    let (queue, table) = (TestQueue::new(), TestTable::new());
    queue.publish(br#"{"id":1,"name":"good"}"#);
    queue.publish(br#"{"id":"two","name":"bad"}"#);
    queue.publish(br#"{"id":3,"name":"good"}"#);
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    // No delivery limit: the batch rolls back (the bad row reaches the failure port) and
    // comes again, for ever.
    let engine = start(
        &amqp_to_postgres(
            &queue.0,
            &table.name,
            "10 s",
            "\n          Statement Type: INSERT",
        )
        .replace(
            "          Statement Type: UPSERT\n          Update Keys: id",
            "",
        ),
        &probe,
        dir.path(),
    );
    let put_in = || {
        engine
            .status()
            .components
            .iter()
            .find(|c| c.name == "put")
            .map_or(0, |c| c.flowfiles_in)
    };
    // Three attempts of the batch of three, each written and then rolled back.
    assert!(
        wait_for(Duration::from_secs(20), || put_in() >= 9),
        "put took {}",
        put_in()
    );
    // A row is in the table only when its message's group committed (its flow file left
    // through `done`): good rows written beside the bad one went with each rollback.
    let done_ids = || -> Vec<i64> {
        let mut ids: Vec<i64> = probe
            .recorded("done")
            .iter()
            .map(|r| {
                let v: serde_json::Value = serde_json::from_slice(&r.content).unwrap();
                v["id"].as_i64().unwrap()
            })
            .collect();
        ids.sort_unstable();
        ids
    };
    let row_ids = || -> Vec<i64> { table.rows().iter().map(|(id, _)| *id).collect() };
    assert!(
        wait_for(Duration::from_secs(5), || row_ids() == done_ids()),
        "rows {:?}, committed messages {:?}",
        row_ids(),
        done_ids()
    );
    engine.stop().unwrap();
}

#[test]
fn a_delivery_limit_gives_the_consumers_a_dead_letter_relationship_the_flow_must_route() {
    for kind in ["ConsumeAMQP", "ConsumeJetStream"] {
        let props = match kind {
            "ConsumeAMQP" => "Queue: q",
            _ => "Stream: S\n          Subject: S.in\n          Durable Consumer: weir",
        };
        let yaml = |max: &str, dead_letter: &str| {
            format!(
                r#"flow: dead-letter
groups:
  - name: g
    processors:
      - name: consume
        type: {kind}
        auto_terminate: [{dead_letter}]
        properties:
          {props}
          Max Deliveries: "{max}"
      - {{ name: log, type: LogAttribute, auto_terminate: [success] }}
    connections:
      - {{ from: consume, relationships: [success], to: log }}
"#
            )
        };
        let e = weir_flow::definition::Flow::parse(&yaml("3", ""), "test.yaml")
            .expect_err("dead-letter must be routed")
            .to_string();
        assert!(e.contains("`dead-letter`"), "{kind}: {e}");
        weir_flow::definition::Flow::parse(&yaml("3", "dead-letter"), "test.yaml")
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        // Without a limit there is no such relationship.
        let e = weir_flow::definition::Flow::parse(&yaml("0", "dead-letter"), "test.yaml")
            .expect_err("no dead-letter without a limit")
            .to_string();
        assert!(e.contains("no relationship `dead-letter`"), "{kind}: {e}");
    }
}

#[test]
fn a_poison_jetstream_message_goes_to_dead_letter_and_nothing_stays_pending() {
    let test = "a_poison_jetstream_message_goes_to_dead_letter_and_nothing_stays_pending";
    if !services::available(test, &[services::NATS, services::POSTGRES]) {
        return;
    }
    let table = TestTable::new();
    let stream = format!("WEIR_{}", uuid::Uuid::new_v4().simple());
    let config =
        weir_connectors::jetstream::JetStreamConfig::new("nats://127.0.0.1:4222", None, None);
    let js = rt().block_on(config.connect()).unwrap();
    rt().block_on(js.create_stream(async_nats::jetstream::stream::Config {
        name: stream.clone(),
        subjects: vec![format!("{stream}.in")],
        ..Default::default()
    }))
    .unwrap();
    let publisher = weir_connectors::jetstream::JetStreamPublisher::new(config);
    for i in 1..=10 {
        let body = if i == 5 {
            r#"{"id":"five","name":"poison"}"#.to_string()
        } else {
            format!(r#"{{"id":{i},"name":"m{i}"}}"#)
        };
        rt().block_on(publisher.publish(&format!("{stream}.in"), body.as_bytes()))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = format!(
        r#"flow: poison-jetstream
settings: {{ sync: none }}
groups:
  - name: tx
    engine: stateless
    timeout: 10 s
    processors:
      - name: consume
        type: ConsumeJetStream
        penalty: 100 ms
        yield: 50 ms
        properties:
          Stream: {stream}
          Subject: {stream}.in
          Durable Consumer: weir
          Batch Size: "10"
          Ack Wait: 15 s
          Max Deliveries: "3"
      - name: put
        type: PutDatabaseRecord
        properties:
          Database URL: "{PG_URL}"
          Table Name: {table}
          Statement Type: INSERT
    connections:
      - {{ from: consume, relationships: [success], to: put }}
      - {{ from: consume, relationships: [dead-letter], to: dead }}
      - {{ from: put, relationships: [success], to: done }}
      - {{ from: put, relationships: [failure, retry], to: failed }}
    ports:
      output:
        - {{ name: done }}
        - {{ name: dead }}
        - {{ name: failed, failure: true }}
  - name: sink
    processors:
      - {{ name: done, type: Recorder, auto_terminate: [success] }}
      - {{ name: dead, type: Recorder, auto_terminate: [success] }}
connections:
  - {{ from: tx/done, to: done }}
  - {{ from: tx/dead, to: dead }}
"#,
        table = table.name
    );
    let engine = start(&yaml, &probe, dir.path());
    assert!(
        wait_for(Duration::from_secs(30), || probe.count("dead") == 1
            && probe.count("done") == 9),
        "dead {} done {}",
        probe.count("dead"),
        probe.count("done")
    );
    let dead = &probe.recorded("dead")[0];
    assert_eq!(dead.content, br#"{"id":"five","name":"poison"}"#);
    assert_eq!(dead.attr("jetstream.delivered"), "4");
    let pending = || {
        rt().block_on(async {
            let s = js.get_stream(&stream).await.unwrap();
            let mut c: async_nats::jetstream::consumer::PullConsumer =
                s.get_consumer("weir").await.unwrap();
            let info = c.info().await.unwrap();
            (info.num_pending, info.num_ack_pending)
        })
    };
    assert!(
        wait_for(Duration::from_secs(10), || pending() == (0, 0)),
        "(pending, ack pending) = {:?}",
        pending()
    );
    let expected: Vec<(i64, String)> = (1..=10)
        .filter(|i| *i != 5)
        .map(|i| (i, format!("m{i}")))
        .collect();
    assert_eq!(table.rows(), expected);
    engine.stop().unwrap();
    rt().block_on(js.delete_stream(&stream)).unwrap();
}
