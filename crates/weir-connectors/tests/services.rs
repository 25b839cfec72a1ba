//! The connectors against the real servers of this machine (RabbitMQ, NATS with JetStream,
//! PostgreSQL). Each test uses its own queue, stream or table and removes it; a test whose
//! server is unreachable says so and is skipped, unless `WEIR_REQUIRE_SERVICES=1`.

use std::time::Duration;

use bytes::Bytes;
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use weir_connectors::amqp::{AmqpConfig, AmqpConsumer, AmqpMessage, AmqpPublisher, Settlement};
use weir_connectors::jetstream::{
    JetStreamConfig, JetStreamConsumer, JetStreamMessage, JetStreamPublisher, keep_in_progress,
    progress_interval,
};
use weir_connectors::postgres::{
    ItemOutcome, PgConfig, PgTimeouts, RecordWriter, StatementType, parse_json_lines,
};
use weir_test_support::services::{self, AMQP, NATS, POSTGRES};

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

fn amqp() -> AmqpConfig {
    AmqpConfig::new(AMQP, "/", "guest", "guest").unwrap()
}

/// A new queue of a unique name, and a channel to delete it with.
async fn new_queue() -> (String, lapin::Connection, lapin::Channel) {
    let queue = unique("weir_conn");
    let (conn, ch) = amqp().connect().await.unwrap();
    ch.queue_declare(
        queue.as_str().into(),
        QueueDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    (queue, conn, ch)
}

/// Publishes `m{i}` for each `i` of `ids` to `queue`, each confirmed.
async fn publish_numbered(publisher: &AmqpPublisher, queue: &str, ids: std::ops::Range<u32>) {
    for i in ids {
        publisher
            .publish("", queue, format!("m{i}").as_bytes())
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_publish_confirms_and_nack_redelivers_until_acked() {
    if !services::available(
        "amqp_publish_confirms_and_nack_redelivers_until_acked",
        &[AMQP],
    ) {
        return;
    }
    let (queue, _conn, ch) = new_queue().await;
    let publisher = AmqpPublisher::new(amqp());
    publish_numbered(&publisher, &queue, 0..3).await;
    // Unroutable with `mandatory`: refused, not silently lost.
    assert!(
        publisher
            .publish("", &unique("nowhere"), b"x")
            .await
            .is_err()
    );

    let consumer = AmqpConsumer::start(&tokio::runtime::Handle::current(), amqp(), &queue, 10);
    let mut got = Vec::new();
    while got.len() < 3 {
        got.extend(consumer.next_batch(10, Duration::from_secs(5)).await);
    }
    assert!(got.iter().all(|m| !m.redelivered));
    // NAK the first: it comes back, marked redelivered; ack the rest.
    got[0].nack_requeue().await.unwrap();
    for m in &got[1..] {
        m.ack().await.unwrap();
    }
    let again = consumer.next_batch(10, Duration::from_secs(5)).await;
    assert_eq!(again.len(), 1);
    assert!(again[0].redelivered);
    assert_eq!(again[0].body, got[0].body);
    again[0].ack().await.unwrap();
    assert!(
        consumer
            .next_batch(10, Duration::from_millis(300))
            .await
            .is_empty()
    );
    assert!(consumer.health().get().connected);
    drop(consumer);
    ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_messages_read_ahead_come_first_in_order_each_once() {
    if !services::available(
        "amqp_messages_read_ahead_come_first_in_order_each_once",
        &[AMQP],
    ) {
        return;
    }
    let (queue, _conn, ch) = new_queue().await;
    let publisher = AmqpPublisher::new(amqp());
    publish_numbered(&publisher, &queue, 0..10).await;
    let consumer = AmqpConsumer::start(&tokio::runtime::Handle::current(), amqp(), &queue, 20);
    let first = consumer.next_batch(1, Duration::from_secs(5)).await;
    assert_eq!(first.len(), 1);
    // The rest arrive in the client's buffer in their own time: read ahead until three are
    // held (never more than asked for).
    tokio::time::timeout(Duration::from_secs(10), async {
        while consumer.held_ahead().await < 3 {
            consumer.read_ahead(3);
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the broker delivers the queued messages");
    consumer.read_ahead(3);
    assert_eq!(consumer.held_ahead().await, 3);
    let mut got = first;
    let two = consumer.next_batch(2, Duration::from_secs(5)).await;
    assert_eq!(two.len(), 2);
    assert_eq!(consumer.held_ahead().await, 1);
    got.extend(two);
    while got.len() < 10 {
        got.extend(consumer.next_batch(10, Duration::from_secs(5)).await);
    }
    let bodies: Vec<Vec<u8>> = got.iter().map(|m| m.body.clone()).collect();
    let expected: Vec<Vec<u8>> = (0..10).map(|i| format!("m{i}").into_bytes()).collect();
    assert_eq!(bodies, expected);
    assert!(got.iter().all(|m| !m.redelivered));
    AmqpMessage::ack_all(got).await.unwrap();
    assert!(
        consumer
            .next_batch(10, Duration::from_millis(300))
            .await
            .is_empty()
    );
    drop(consumer);
    // Nothing is left unacknowledged: a new consumer finds the queue empty.
    let again = AmqpConsumer::start(&tokio::runtime::Handle::current(), amqp(), &queue, 20);
    assert!(
        again
            .next_batch(10, Duration::from_millis(500))
            .await
            .is_empty()
    );
    drop(again);
    ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_batch_acks_never_cover_a_message_waiting_for_its_requeue() {
    if !services::available(
        "amqp_batch_acks_never_cover_a_message_waiting_for_its_requeue",
        &[AMQP],
    ) {
        return;
    }
    let (queue, _conn, ch) = new_queue().await;
    let publisher = AmqpPublisher::new(amqp());
    publish_numbered(&publisher, &queue, 0..6).await;
    let consumer = AmqpConsumer::start(&tokio::runtime::Handle::current(), amqp(), &queue, 10);
    let mut got = Vec::new();
    while got.len() < 6 {
        got.extend(consumer.next_batch(10, Duration::from_secs(5)).await);
    }
    let rest = got.split_off(1);
    let settler = consumer.settler();
    // The first waits out a penalty before its requeue; the later batch is acknowledged
    // meanwhile. A `multiple` ack up to its highest tag would take the first along (and its
    // requeue would then close the channel): it must come back instead.
    settler.settle(
        got,
        Settlement::Requeue {
            delay: Some(Duration::from_millis(300)),
        },
    );
    settler.settle(rest, Settlement::Ack);
    let again = consumer.next_batch(10, Duration::from_secs(5)).await;
    assert_eq!(
        again.iter().map(|m| m.body.clone()).collect::<Vec<_>>(),
        [b"m0".to_vec()]
    );
    assert!(again[0].redelivered);
    // Nothing else outstanding: the whole batch in one `multiple` ack.
    publish_numbered(&publisher, &queue, 6..9).await;
    let mut batch = again;
    while batch.len() < 4 {
        batch.extend(consumer.next_batch(10, Duration::from_secs(5)).await);
    }
    AmqpMessage::ack_all(batch).await.unwrap();
    assert!(
        consumer
            .next_batch(10, Duration::from_millis(300))
            .await
            .is_empty()
    );
    assert!(consumer.health().get().connected);
    drop(consumer);
    // Acked for good: a new consumer gets nothing back.
    let consumer = AmqpConsumer::start(&tokio::runtime::Handle::current(), amqp(), &queue, 10);
    assert!(
        consumer
            .next_batch(10, Duration::from_millis(500))
            .await
            .is_empty()
    );
    drop(consumer);
    ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_unreachable_broker_is_reported_not_fatal() {
    let config = AmqpConfig::new("127.0.0.1:1", "/", "guest", "hunter2").unwrap();
    let consumer = AmqpConsumer::start(&tokio::runtime::Handle::current(), config.clone(), "q", 1);
    assert!(
        consumer
            .next_batch(1, Duration::from_millis(500))
            .await
            .is_empty()
    );
    let health = consumer.health().get();
    assert!(!health.connected);
    let error = health.last_error.unwrap();
    assert!(
        error.contains("127.0.0.1:1") && !error.contains("hunter2"),
        "{error}"
    );
    let e = AmqpPublisher::new(config)
        .publish("", "q", b"x")
        .await
        .unwrap_err();
    assert!(!e.to_string().contains("hunter2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jetstream_durable_consumer_acks_and_naks_with_delay() {
    if !services::available(
        "jetstream_durable_consumer_acks_and_naks_with_delay",
        &[NATS],
    ) {
        return;
    }
    let name = unique("WEIR");
    let subject = format!("{name}.in");
    let config = JetStreamConfig::new("nats://127.0.0.1:4222", None, None);
    let js = config.connect().await.unwrap();
    js.create_stream(async_nats::jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![subject.clone()],
        ..Default::default()
    })
    .await
    .unwrap();
    let publisher = JetStreamPublisher::new(config.clone());
    for i in 0..3 {
        publisher
            .publish(&subject, format!("m{i}").as_bytes())
            .await
            .unwrap();
    }
    let consumer = JetStreamConsumer::start(
        &tokio::runtime::Handle::current(),
        config.clone(),
        &name,
        &subject,
        "durable",
        // A short ack wait: a pull the dropped consumer left open may take a message, which
        // the server then redelivers after this wait.
        Duration::from_secs(2),
        10,
    );
    let mut got = Vec::new();
    while got.len() < 3 {
        got.extend(consumer.next_batch(10, Duration::from_secs(5)).await);
    }
    assert_eq!(
        got.iter().map(|m| m.stream_sequence).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let naked_at = std::time::Instant::now();
    got[0].nak(Duration::from_millis(500)).await.unwrap();
    for m in &got[1..] {
        m.ack().await.unwrap();
    }
    let again = consumer.next_batch(10, Duration::from_secs(10)).await;
    assert_eq!(again.len(), 1);
    assert!(
        naked_at.elapsed() >= Duration::from_millis(450),
        "redelivered before the delay"
    );
    assert_eq!(again[0].delivered, 2);
    again[0].ack().await.unwrap();
    drop(consumer);
    // A second consumer on the same durable resumes after the acked messages.
    publisher.publish(&subject, b"m3").await.unwrap();
    let consumer = JetStreamConsumer::start(
        &tokio::runtime::Handle::current(),
        config,
        &name,
        &subject,
        "durable",
        // A short ack wait: a pull the dropped consumer left open may take a message, which
        // the server then redelivers after this wait.
        Duration::from_secs(2),
        10,
    );
    let mut next = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while next.is_empty() && std::time::Instant::now() < deadline {
        next = consumer.next_batch(10, Duration::from_secs(5)).await;
    }
    assert_eq!(
        next.iter().map(|m| m.body.clone()).collect::<Vec<_>>(),
        [b"m3".to_vec()]
    );
    next[0].ack().await.unwrap();
    drop(consumer);
    js.delete_stream(&name).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jetstream_in_progress_acks_hold_a_message_past_its_ack_wait() {
    if !services::available(
        "jetstream_in_progress_acks_hold_a_message_past_its_ack_wait",
        &[NATS],
    ) {
        return;
    }
    let name = unique("WEIR");
    let subject = format!("{name}.in");
    let config = JetStreamConfig::new("nats://127.0.0.1:4222", None, None);
    let js = config.connect().await.unwrap();
    js.create_stream(async_nats::jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![subject.clone()],
        ..Default::default()
    })
    .await
    .unwrap();
    JetStreamPublisher::new(config.clone())
        .publish(&subject, b"slow")
        .await
        .unwrap();
    let ack_wait = Duration::from_secs(1);
    let consumer = JetStreamConsumer::start(
        &tokio::runtime::Handle::current(),
        config,
        &name,
        &subject,
        "durable",
        ack_wait,
        1,
    );
    let got = consumer.next_batch(1, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1);
    let held: std::sync::Arc<[JetStreamMessage]> = got.into();
    let guard = keep_in_progress(
        &tokio::runtime::Handle::current(),
        std::sync::Arc::clone(&held),
        progress_interval(ack_wait),
    );
    // Held for three ack waits: the server is told it is in progress, and keeps it.
    let during = consumer.next_batch(10, 3 * ack_wait).await;
    assert!(
        during.is_empty(),
        "redelivered while in progress: {during:?}"
    );
    drop(guard);
    // Without in-progress acks the ack wait runs out and the message comes again.
    let after = consumer.next_batch(10, Duration::from_secs(10)).await;
    assert_eq!(after.len(), 1, "the ack wait never ran out");
    assert_eq!(after[0].delivered, 2);
    after[0].ack().await.unwrap();
    drop(consumer);
    js.delete_stream(&name).await.unwrap();
}

async fn pg() -> tokio_postgres::Client {
    PgConfig::new("host=127.0.0.1 user=postgres dbname=test", None, None)
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_upsert_batch_isolates_bad_items() {
    if !services::available("postgres_upsert_batch_isolates_bad_items", &[POSTGRES]) {
        return;
    }
    let table = unique("weir_rows");
    let client = pg().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id bigint PRIMARY KEY, name text NOT NULL, score double precision, tags jsonb)"
        ))
        .await
        .unwrap();
    let mut writer = RecordWriter::new(
        PgConfig::new("host=127.0.0.1 user=postgres dbname=test", None, None),
        &table,
        StatementType::Upsert {
            keys: vec!["id".into()],
        },
    );
    let items = vec![
        parse_json_lines(&Bytes::from_static(
            b"{\"id\":1,\"name\":\"a\",\"score\":1.5,\"tags\":[1]}\n{\"id\":2,\"name\":\"b\"}\n",
        ))
        .unwrap(),
        // A string where a number belongs: the server refuses it.
        parse_json_lines(&Bytes::from_static(
            b"{\"id\":3,\"name\":\"c\",\"score\":\"high\"}\n",
        ))
        .unwrap(),
        // An upsert of an existing key updates it.
        parse_json_lines(&Bytes::from_static(b"{\"id\":1,\"name\":\"a2\"}\n")).unwrap(),
        // NOT NULL violated.
        parse_json_lines(&Bytes::from_static(b"{\"id\":4}\n")).unwrap(),
    ];
    let outcomes = writer.write_batch(&items).await;
    assert_eq!(outcomes[0], ItemOutcome::Written(2));
    assert!(
        matches!(&outcomes[1], ItemOutcome::Bad(e) if e.contains("22P02")),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[2], ItemOutcome::Written(1));
    assert!(
        matches!(&outcomes[3], ItemOutcome::Bad(e) if e.contains("23502")),
        "{outcomes:?}"
    );
    let rows = client
        .query(&format!("SELECT id, name FROM {table} ORDER BY id"), &[])
        .await
        .unwrap();
    let rows: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(rows, [(1, "a2".to_string()), (2, "b".to_string())]);

    // INSERT refuses a duplicate key as a bad item.
    let mut insert = RecordWriter::new(
        PgConfig::new("host=127.0.0.1 user=postgres dbname=test", None, None),
        &table,
        StatementType::Insert,
    );
    let outcomes = insert
        .write_batch(&[
            parse_json_lines(&Bytes::from_static(b"{\"id\":2,\"name\":\"dup\"}")).unwrap(),
            parse_json_lines(&Bytes::from_static(b"{\"id\":9,\"name\":\"new\"}")).unwrap(),
        ])
        .await;
    assert!(matches!(&outcomes[0], ItemOutcome::Bad(e) if e.contains("23505")));
    assert_eq!(outcomes[1], ItemOutcome::Written(1));
    // Two column sets, two statements in one pipelined transaction: the second fails, so
    // the first must not be committed either (else its retry alone would be a duplicate).
    let outcomes = insert
        .write_batch(&[
            parse_json_lines(&Bytes::from_static(b"{\"id\":10,\"name\":\"first\"}")).unwrap(),
            parse_json_lines(&Bytes::from_static(
                b"{\"id\":11,\"name\":\"second\",\"score\":\"high\"}",
            ))
            .unwrap(),
        ])
        .await;
    assert_eq!(outcomes[0], ItemOutcome::Written(1), "{outcomes:?}");
    assert!(
        matches!(&outcomes[1], ItemOutcome::Bad(e) if e.contains("22P02")),
        "{outcomes:?}"
    );
    client
        .batch_execute(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_unreachable_is_retry_without_the_password() {
    let mut writer = RecordWriter::new(
        PgConfig::new(
            "host=127.0.0.1 port=1 user=postgres dbname=test",
            None,
            Some("hunter2"),
        ),
        "t",
        StatementType::Insert,
    );
    let outcomes = writer
        .write_batch(&[parse_json_lines(&Bytes::from_static(b"{\"id\":1}")).unwrap()])
        .await;
    assert!(
        matches!(&outcomes[0], ItemOutcome::Retry(e) if !e.contains("hunter2")),
        "{outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_writer_replaces_a_connection_the_server_closed() {
    if !services::available(
        "postgres_writer_replaces_a_connection_the_server_closed",
        &[POSTGRES],
    ) {
        return;
    }
    let table = unique("weir_rows");
    let client = pg().await;
    client
        .batch_execute(&format!("CREATE TABLE {table} (id bigint PRIMARY KEY)"))
        .await
        .unwrap();
    let mut writer = RecordWriter::new(
        PgConfig::new(
            &format!("host=127.0.0.1 user=postgres dbname=test application_name={table}"),
            None,
            None,
        ),
        &table,
        StatementType::Insert,
    );
    let write = |id: u32| parse_json_lines(&Bytes::from(format!("{{\"id\":{id}}}"))).unwrap();
    assert_eq!(
        writer.write_batch(&[write(1)]).await,
        [ItemOutcome::Written(1)]
    );
    // The server ends the idle writer's session; wait until its backend is gone.
    let ended = client
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&table],
        )
        .await
        .unwrap();
    assert_eq!(ended, 1, "the writer's session");
    loop {
        let left: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&table],
            )
            .await
            .unwrap()
            .get(0);
        if left == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    // The closed connection is seen at the latest by the next batch, which then comes back
    // to retry (never as bad, never hanging); the batch after it is written on a new one.
    let mut outcome = writer.write_batch(&[write(2)]).await;
    if let [ItemOutcome::Retry(_)] = outcome.as_slice() {
        outcome = writer.write_batch(&[write(2)]).await;
    }
    assert_eq!(outcome, [ItemOutcome::Written(1)]);
    let ids: Vec<i64> = client
        .query(&format!("SELECT id FROM {table} ORDER BY id"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, [1, 2]);
    client
        .batch_execute(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_calls_blocked_on_a_lock_time_out_on_the_server_and_on_the_client() {
    if !services::available(
        "postgres_calls_blocked_on_a_lock_time_out_on_the_server_and_on_the_client",
        &[POSTGRES],
    ) {
        return;
    }
    let table = unique("weir_lock");
    let client = pg().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id bigint PRIMARY KEY, v text); INSERT INTO {table} VALUES (1, 'old')"
        ))
        .await
        .unwrap();
    let holder = pg().await;
    holder
        .batch_execute(&format!(
            "BEGIN; UPDATE {table} SET v = 'held' WHERE id = 1"
        ))
        .await
        .unwrap();
    let records = parse_json_lines(&Bytes::from_static(b"{\"id\":1,\"v\":\"new\"}\n")).unwrap();
    let upsert = || StatementType::Upsert {
        keys: vec!["id".into()],
    };
    let url = "host=127.0.0.1 user=postgres dbname=test";
    // The server's lock timeout ends the wait.
    let mut writer = RecordWriter::new(
        PgConfig::new(url, None, None).with_timeouts(PgTimeouts {
            lock: Duration::from_millis(300),
            ..PgTimeouts::default()
        }),
        &table,
        upsert(),
    );
    let started = std::time::Instant::now();
    let outcomes = writer.write_batch(std::slice::from_ref(&records)).await;
    assert!(
        matches!(&outcomes[0], ItemOutcome::TimedOut(e) if e.contains("55P03")),
        "{outcomes:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // The client's bound ends it when the server's are longer, and the waiting statement is
    // cancelled on the server.
    let mut writer = RecordWriter::new(
        PgConfig::new(url, None, None).with_timeouts(PgTimeouts {
            call: Duration::from_millis(500),
            ..PgTimeouts::default()
        }),
        &table,
        upsert(),
    );
    let started = std::time::Instant::now();
    let outcomes = writer.write_batch(std::slice::from_ref(&records)).await;
    assert!(
        matches!(&outcomes[0], ItemOutcome::TimedOut(_)),
        "{outcomes:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let waiting = || async {
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = 'test'",
                &[],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while waiting().await > 0 && std::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert_eq!(waiting().await, 0, "the cancelled statement still waits");
    holder.batch_execute("ROLLBACK").await.unwrap();
    // Connected again, the writer goes on.
    let outcomes = writer.write_batch(std::slice::from_ref(&records)).await;
    assert_eq!(outcomes, [ItemOutcome::Written(1)]);
    client
        .batch_execute(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_open_transaction_isolates_bad_items_with_savepoints_and_commits_once() {
    if !services::available(
        "postgres_open_transaction_isolates_bad_items_with_savepoints_and_commits_once",
        &[POSTGRES],
    ) {
        return;
    }
    let table = unique("weir_open");
    let client = pg().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id bigint PRIMARY KEY, v text)"
        ))
        .await
        .unwrap();
    let lines =
        |text: &'static str| parse_json_lines(&Bytes::from_static(text.as_bytes())).unwrap();
    let count = || async {
        client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    let mut writer = RecordWriter::new(
        PgConfig::new("host=127.0.0.1 user=postgres dbname=test", None, None),
        &table,
        StatementType::Insert,
    );
    let items = [
        lines("{\"id\":1,\"v\":\"a\"}\n"),
        lines("{\"id\":\"x\",\"v\":\"bad\"}\n"),
        lines("{\"id\":2,\"v\":\"b\"}\n"),
    ];
    let outcomes = writer.write_in_transaction(&items).await;
    assert_eq!(outcomes[0], ItemOutcome::Written(1));
    assert!(
        matches!(&outcomes[1], ItemOutcome::Bad(e) if e.contains("22P02")),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[2], ItemOutcome::Written(1));
    // A second call goes on in the same transaction; nothing is visible before the commit.
    let outcomes = writer
        .write_in_transaction(&[lines("{\"id\":3,\"v\":\"c\"}\n")])
        .await;
    assert_eq!(outcomes, [ItemOutcome::Written(1)]);
    assert!(writer.in_transaction());
    assert_eq!(count().await, 0);
    writer.commit().await.unwrap();
    assert!(!writer.in_transaction());
    assert_eq!(count().await, 3);
    // A rolled-back transaction leaves nothing.
    let outcomes = writer
        .write_in_transaction(&[lines("{\"id\":4,\"v\":\"d\"}\n")])
        .await;
    assert_eq!(outcomes, [ItemOutcome::Written(1)]);
    writer.rollback().await;
    assert_eq!(count().await, 3);
    client
        .batch_execute(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
}
