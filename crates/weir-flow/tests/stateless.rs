//! The stateless engine's transaction semantics against real RabbitMQ, NATS JetStream and
//! PostgreSQL, in the manner of NiFi's stateless system tests: success acks; a failure port
//! NAKs and the broker redelivers; a timeout rolls back, redelivers and penalizes; a failing
//! processor rolls back; SEND provenance survives a rollback; copies keep separate state.
//!
//! Each test uses its own queue, stream and table and removes them. A test whose services
//! are unreachable prints a skip message, unless `WEIR_REQUIRE_SERVICES=1`.

use std::time::{Duration, Instant};

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use weir_connectors::amqp::{AmqpConfig, AmqpPublisher};
use weir_connectors::postgres::PgConfig;
use weir_flow::definition::Flow;
use weir_flow::engine::Engine;
use weir_flow::provenance::{EventType, ProvenanceEvent, ProvenanceRepository, Query};
use weir_test_support::services::{self, AMQP, POSTGRES};
use weir_test_support::wait_for;

const PG_URL: &str = "host=127.0.0.1 user=postgres dbname=test";

fn rt() -> &'static tokio::runtime::Handle {
    weir_runtime::runtime().expect("runtime")
}

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

fn amqp() -> AmqpConfig {
    AmqpConfig::new(AMQP, "/", "guest", "guest").unwrap()
}

/// A queue and a table of one test, removed on drop.
struct Fixture {
    queue: String,
    table: String,
    pg: tokio_postgres::Client,
}

impl Fixture {
    fn new(prefix: &str) -> Fixture {
        let queue = unique(prefix);
        let table = unique(prefix);
        rt().block_on(async {
            let (_c, ch) = amqp().connect().await.unwrap();
            ch.queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        });
        let pg = rt()
            .block_on(PgConfig::new(PG_URL, None, None).connect())
            .unwrap();
        rt().block_on(pg.batch_execute(&format!(
            "CREATE TABLE {table} (id bigint PRIMARY KEY, name text NOT NULL, tag text)"
        )))
        .unwrap();
        Fixture { queue, table, pg }
    }

    fn publish(&self, ids: std::ops::Range<u64>) {
        let p = AmqpPublisher::new(amqp());
        rt().block_on(async {
            for i in ids {
                p.publish(
                    "",
                    &self.queue,
                    format!("{{\"id\":{i},\"name\":\"msg-{i}\"}}").as_bytes(),
                )
                .await
                .unwrap();
            }
        });
    }

    /// Messages ready in the queue (not counting unacknowledged ones).
    fn ready(&self) -> u32 {
        rt().block_on(async {
            let (_c, ch) = amqp().connect().await.unwrap();
            ch.queue_declare(
                self.queue.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .message_count()
        })
    }

    fn consumers(&self) -> u32 {
        rt().block_on(async {
            let (_c, ch) = amqp().connect().await.unwrap();
            ch.queue_declare(
                self.queue.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .consumer_count()
        })
    }

    fn rows(&self) -> Vec<(i64, String, Option<String>)> {
        rt().block_on(self.pg.query(
            &format!("SELECT id, name, tag FROM {} ORDER BY id", self.table),
            &[],
        ))
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let (queue, table) = (self.queue.clone(), self.table.clone());
        rt().block_on(async {
            if let Ok((_c, ch)) = amqp().connect().await {
                let _ = ch
                    .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                    .await;
            }
            let _ = self
                .pg
                .batch_execute(&format!("DROP TABLE IF EXISTS {table}"))
                .await;
        });
    }
}

/// The group: ConsumeAMQP, then `middle` (YAML of processors and their connections up to
/// `out`), then PutDatabaseRecord (UPSERT), with failures to a failure port.
fn flow(f: &Fixture, settings: &str, middle: &str, middle_connections: &str) -> Flow {
    let yaml = format!(
        r#"flow: stateless-test
groups:
  - name: tx
    engine: stateless
{settings}
    processors:
      - name: consume
        type: ConsumeAMQP
        penalty: 1 s
        yield: 100 ms
        properties:
          Queue: {queue}
          User Name: guest
          Password: guest
          Batch Size: "50"
{middle}
      - name: put
        type: PutDatabaseRecord
        properties:
          Database URL: "{PG_URL}"
          Table Name: {table}
          Statement Type: UPSERT
          Update Keys: id
    connections:
{middle_connections}
      - {{ from: put, relationships: [failure, retry], to: failed }}
      - {{ from: put, relationships: [success], to: done }}
    ports:
      output:
        - {{ name: done }}
        - {{ name: failed, failure: true }}
"#,
        queue = f.queue,
        table = f.table,
    );
    Flow::parse(&yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn provenance(dir: &std::path::Path, component: &str, t: EventType) -> usize {
    provenance_events(dir, component, t).len()
}

fn provenance_events(dir: &std::path::Path, component: &str, t: EventType) -> Vec<ProvenanceEvent> {
    let p = ProvenanceRepository::open(&dir.join("provenance"), Duration::from_secs(3600), 1 << 30)
        .unwrap();
    p.query(
        &Query {
            component: Some(component.into()),
            event_type: Some(t),
            ..Query::default()
        },
        1_000_000,
    )
    .unwrap()
}

const TAG: &str = r#"
      - name: tag
        type: ReplaceText
        properties:
          Search Value: '\}\s*$'
          Replacement Value: ',"tag":"${tag}"}'
          Evaluation Mode: Entire text
        auto_terminate: [failure]
"#;

#[test]
fn success_commits_the_rows_and_acks_every_message() {
    if !services::available(
        "success_commits_the_rows_and_acks_every_message",
        &[AMQP, POSTGRES],
    ) {
        return;
    }
    let f = Fixture::new("weir_ok");
    f.publish(0..200);
    let middle = format!(
        r#"
      - name: attrs
        type: UpdateAttribute
        properties:
          tag: ${{'amqp$redelivered':equals('true'):not():and(${{'amqp$routingKey':equals('{}')}})}}
{TAG}"#,
        f.queue
    );
    let flow = flow(
        &f,
        "",
        &middle,
        "      - { from: consume, relationships: [success], to: attrs }\n      - { from: attrs, relationships: [success], to: tag }\n      - { from: tag, relationships: [success], to: put }",
    );
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(flow, dir.path()).unwrap();
    assert!(
        wait_for(Duration::from_secs(30), || f.rows().len() == 200),
        "rows: {}",
        f.rows().len()
    );
    engine.wait_until_idle(Duration::from_millis(300));
    engine.stop().unwrap();
    let rows = f.rows();
    for (i, (id, name, tag)) in rows.iter().enumerate() {
        assert_eq!(*id, i as i64);
        assert_eq!(name, &format!("msg-{i}"));
        assert_eq!(
            tag.as_deref(),
            Some("true"),
            "first delivery, routing key = the queue"
        );
    }
    // Acked: nothing comes back after the connection closed.
    assert!(wait_for(Duration::from_secs(5), || f.ready() == 0));
    // Each message's flow file was made with its body: its `fileSize` is the body's length.
    let received = provenance_events(dir.path(), "consume", EventType::RECEIVE);
    assert_eq!(received.len(), 200);
    for e in &received {
        assert!(e.size > 0, "{e:?}");
        assert_eq!(
            e.attributes.get("fileSize"),
            Some(e.size.to_string().as_str())
        );
        assert!(e.attributes.get("amqp$routingKey").is_some(), "{e:?}");
    }
    assert_eq!(provenance(dir.path(), "put", EventType::SEND), 200);
}

#[test]
fn a_failure_port_naks_and_the_broker_redelivers() {
    if !services::available(
        "a_failure_port_naks_and_the_broker_redelivers",
        &[AMQP, POSTGRES],
    ) {
        return;
    }
    let f = Fixture::new("weir_failport");
    f.publish(0..5);
    // First deliveries go to the failure port; redeliveries pass.
    let middle = format!(
        r#"
      - name: route
        type: RouteOnAttribute
        properties:
          first: ${{'amqp$redelivered':equals('false')}}
      - name: attrs
        type: UpdateAttribute
        properties:
          tag: redelivered-${{'amqp$redelivered'}}
{TAG}"#
    );
    let flow = flow(
        &f,
        "",
        &middle,
        "      - { from: consume, relationships: [success], to: route }\n      - { from: route, relationships: [first], to: failed }\n      - { from: route, relationships: [unmatched], to: attrs }\n      - { from: attrs, relationships: [success], to: tag }\n      - { from: tag, relationships: [success], to: put }",
    );
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(flow, dir.path()).unwrap();
    assert!(wait_for(Duration::from_secs(30), || f.rows().len() == 5));
    engine.wait_until_idle(Duration::from_millis(300));
    let monitor = engine.monitor();
    engine.stop().unwrap();
    assert!(
        f.rows()
            .iter()
            .all(|(_, _, tag)| tag.as_deref() == Some("redelivered-true"))
    );
    // Each rollback shows: counted as a failure of the port, with a bulletin naming the
    // message that reached it.
    let port = monitor.processor("tx/failed").unwrap();
    assert!(port.failures >= 1, "{port:?}");
    let bulletin = &port.bulletins.last().expect("a bulletin").message;
    assert!(
        bulletin.contains("reached failure port `tx/failed`")
            && bulletin.contains("amqp$deliveryTag=")
            && bulletin.contains("amqp$redelivered=false"),
        "{bulletin}"
    );
    assert_eq!(f.ready(), 0);
    // The rolled-back first attempts left no provenance: one RECEIVE per message.
    assert_eq!(provenance(dir.path(), "consume", EventType::RECEIVE), 5);
}

/// An HTTP server on loopback whose first answer takes `first_delay`.
fn slow_server(first_delay: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    let listener = rt()
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/enrich",
        axum::routing::post(move || {
            let n = h.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    tokio::time::sleep(first_delay).await;
                }
                "ok"
            }
        }),
    );
    rt().spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/enrich"), hits)
}

#[test]
fn a_timeout_rolls_back_redelivers_after_the_penalty() {
    if !services::available(
        "a_timeout_rolls_back_redelivers_after_the_penalty",
        &[AMQP, POSTGRES],
    ) {
        return;
    }
    let f = Fixture::new("weir_timeout");
    let (url, hits) = slow_server(Duration::from_millis(1500));
    let middle = format!(
        r#"
      - name: enrich
        type: InvokeHTTP
        properties:
          HTTP Method: POST
          HTTP URL: {url}
        auto_terminate: [Response, Retry, No Retry, Failure]
      - name: attrs
        type: UpdateAttribute
        properties:
          tag: redelivered-${{'amqp$redelivered'}}
{TAG}"#
    );
    let flow = flow(
        &f,
        "    timeout: 500 ms",
        &middle,
        "      - { from: consume, relationships: [success], to: enrich }\n      - { from: enrich, relationships: [Original], to: attrs }\n      - { from: attrs, relationships: [success], to: tag }\n      - { from: tag, relationships: [success], to: put }",
    );
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(flow, dir.path()).unwrap();
    let published = Instant::now();
    f.publish(0..1);
    assert!(wait_for(Duration::from_secs(30), || f.rows().len() == 1));
    let took = published.elapsed();
    engine.wait_until_idle(Duration::from_millis(300));
    engine.stop().unwrap();
    assert_eq!(f.rows()[0].2.as_deref(), Some("redelivered-true"));
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "one slow call, one retry"
    );
    // The slow call (1.5 s) then the penalty (1 s) before the redelivery.
    assert!(
        took >= Duration::from_millis(2400),
        "redelivered after {took:?}"
    );
    assert_eq!(f.ready(), 0);
    // The remote call of the rolled-back attempt stays in provenance; its RECEIVE does not.
    assert_eq!(
        provenance(dir.path(), "enrich", EventType::REMOTE_INVOCATION),
        2
    );
    assert_eq!(provenance(dir.path(), "consume", EventType::RECEIVE), 1);
}

#[test]
fn a_failing_processor_rolls_back_and_the_message_stays_queued() {
    if !services::available(
        "a_failing_processor_rolls_back_and_the_message_stays_queued",
        &[AMQP, POSTGRES],
    ) {
        return;
    }
    let f = Fixture::new("weir_fail");
    f.publish(0..3);
    // Publishing to an exchange that does not exist closes the channel: the processor
    // fails, every time.
    let middle = format!(
        r#"
      - name: forward
        type: PublishAMQP
        properties:
          Exchange Name: {}
          Routing Key: x
          Password: guest
        auto_terminate: [failure]
"#,
        unique("no_such_exchange")
    );
    let flow = flow(
        &f,
        "",
        &middle,
        "      - { from: consume, relationships: [success], to: forward }\n      - { from: forward, relationships: [success], to: put }",
    );
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(flow, dir.path()).unwrap();
    assert!(wait_for(Duration::from_secs(20), || provenance_failures(
        &engine
    ) >= 2));
    engine.stop().unwrap();
    assert!(f.rows().is_empty());
    assert!(
        wait_for(Duration::from_secs(5), || f.ready() == 3),
        "the messages are back in the queue"
    );
    assert_eq!(provenance(dir.path(), "consume", EventType::RECEIVE), 0);
}

fn provenance_failures(engine: &Engine) -> u64 {
    engine
        .status()
        .components
        .iter()
        .filter(|c| c.name == "forward")
        .map(|c| c.failures)
        .sum()
}

#[test]
fn send_provenance_survives_a_rollback() {
    if !services::available("send_provenance_survives_a_rollback", &[AMQP, POSTGRES]) {
        return;
    }
    let f = Fixture::new("weir_send");
    let out = Fixture::new("weir_send_out");
    f.publish(0..2);
    // Each message is published on, then its first delivery reaches the failure port.
    let middle = format!(
        r#"
      - name: forward
        type: PublishAMQP
        properties:
          Routing Key: {}
          Password: guest
        auto_terminate: [failure]
      - name: route
        type: RouteOnAttribute
        properties:
          first: ${{'amqp$redelivered':equals('false')}}
"#,
        out.queue
    );
    let flow = flow(
        &f,
        "",
        &middle,
        "      - { from: consume, relationships: [success], to: forward }\n      - { from: forward, relationships: [success], to: route }\n      - { from: route, relationships: [first], to: failed }\n      - { from: route, relationships: [unmatched], to: put }",
    );
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(flow, dir.path()).unwrap();
    assert!(wait_for(Duration::from_secs(30), || f.rows().len() == 2));
    engine.wait_until_idle(Duration::from_millis(300));
    engine.stop().unwrap();
    // Sent at least twice each (once in the rolled-back attempt; a loaded broker may
    // redeliver once more): the data did leave, and every send has its SEND event.
    let sent = out.ready();
    assert!(sent >= 4, "{sent} messages published");
    assert_eq!(
        provenance(dir.path(), "forward", EventType::SEND),
        sent as usize
    );
    assert_eq!(provenance(dir.path(), "consume", EventType::RECEIVE), 2);
}

#[test]
fn events_encoded_while_the_database_works_are_dropped_on_a_rollback() {
    if !services::available(
        "events_encoded_while_the_database_works_are_dropped_on_a_rollback",
        &[AMQP, POSTGRES],
    ) {
        return;
    }
    let f = Fixture::new("weir_ahead");
    f.publish(0..20);
    // Message 0 loses its key on its first delivery: PutDatabaseRecord fails it while it
    // writes the others of its transaction (waiting on the database, the copy records the
    // last transaction's events), and the failure port rolls the transaction back.
    let middle = r#"
      - name: strip
        type: ReplaceText
        properties:
          Search Value: '"id":0,'
          Replacement Value: >-
            ${'amqp$redelivered':replace('false', ''):replace('true', '"id":0,')}
          Evaluation Mode: Entire text
        auto_terminate: [failure]
"#;
    let flow = flow(
        &f,
        "",
        middle,
        "      - { from: consume, relationships: [success], to: strip }\n      - { from: strip, relationships: [success], to: put }",
    );
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(flow, dir.path()).unwrap();
    assert!(wait_for(Duration::from_secs(30), || f.rows().len() == 20));
    engine.wait_until_idle(Duration::from_millis(300));
    engine.stop().unwrap();
    let rows = f.rows();
    assert!(rows.iter().enumerate().all(|(i, r)| r.0 == i as i64));
    assert_eq!(f.ready(), 0);
    // Only the committed attempts' events: one RECEIVE and one change per message, never
    // one of a rolled-back attempt, nor one twice.
    assert_eq!(provenance(dir.path(), "consume", EventType::RECEIVE), 20);
    assert_eq!(
        provenance(dir.path(), "strip", EventType::CONTENT_MODIFIED),
        20
    );
    // Every message's committed SEND, plus those of the rows the rolled-back attempt wrote.
    assert!(provenance(dir.path(), "put", EventType::SEND) >= 20);
}

#[test]
fn copies_keep_separate_state() {
    if !services::available("copies_keep_separate_state", &[AMQP, POSTGRES]) {
        return;
    }
    let f = Fixture::new("weir_copies");
    f.publish(0..300);
    let middle = "\n      - name: attrs\n        type: UpdateAttribute\n        properties:\n          tag: copy\n".to_string() + TAG;
    let flow = flow(
        &f,
        "    concurrency: 3",
        &middle,
        "      - { from: consume, relationships: [success], to: attrs }\n      - { from: attrs, relationships: [success], to: tag }\n      - { from: tag, relationships: [success], to: put }",
    );
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(flow, dir.path()).unwrap();
    // Each copy has its own ConsumeAMQP with its own connection and consumer.
    assert!(
        wait_for(Duration::from_secs(10), || f.consumers() == 3),
        "consumers: {}",
        f.consumers()
    );
    assert!(wait_for(Duration::from_secs(30), || f.rows().len() == 300));
    engine.wait_until_idle(Duration::from_millis(300));
    engine.stop().unwrap();
    assert_eq!(f.ready(), 0);
}
