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
use weir_connectors::services::{self, AMQP};

fn rt() -> &'static tokio::runtime::Handle {
    weir::async_io::runtime().expect("runtime")
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
