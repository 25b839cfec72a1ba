//! Processors for brokers and databases, on the clients of `weir-connectors`: ConsumeAMQP,
//! PublishAMQP, ConsumeJetStream, PublishJetStream and PutDatabaseRecord.
//!
//! The consumers acknowledge only in their session's completion hook
//! ([`Session::on_complete`]): after the durable commit in a traditional group, after the
//! whole transaction in a stateless one. A rollback gives the messages back (AMQP requeues;
//! JetStream naks, delayed by the penalty when the rollback is penalized). Credentials are
//! properties and appear in no log line and no attribute. A broker or database that cannot
//! be reached shows as a warning and an idle (yielding) processor, never as a crash.
//!
//! Delivery guarantee: at least once. In a stateless group PutDatabaseRecord keeps one
//! database transaction for the group's transaction (each batch under a savepoint, a bad
//! record set aside by its own) and commits it when the group commits, before the broker
//! sources acknowledge (`Session::before_commit`); it rolls back with the group, and so does
//! its SEND event (`Session::report_on_commit`). A crash between that
//! commit and the acknowledgement redelivers messages whose rows are written: idempotent
//! with UPSERT keys. In a traditional group PutDatabaseRecord commits each batch in its
//! trigger, before its session commits. Every database call is bounded by `Connect
//! Timeout`, `Statement Timeout` and `Lock Timeout`, in a stateless group by the group's
//! timeout too; there a call that runs out (or a lost connection) fails the trigger.
//!
//! `Max Deliveries` (0: no limit) sends a message delivered more times than that to the
//! consumer's `dead-letter` relationship instead of `success`; redelivered messages then come
//! in batches of their own, so that a poison message does not take its batch-mates with it.
//! ConsumeJetStream keeps its messages with in-progress acks while a transaction holds them.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::runtime::Handle;
use weir_connectors::amqp::{AmqpConfig, AmqpConsumer, AmqpPublisher, Settlement};
use weir_connectors::jetstream::{
    JetStreamConfig, JetStreamConsumer, JetStreamMessage, JetStreamPublisher, keep_in_progress,
    progress_interval,
};
use weir_connectors::postgres::{
    ItemOutcome, PgConfig, PgTimeouts, RecordWriter, StatementType, parse_json_lines,
};
use weir_connectors::{ConnectorError, Health};

use super::{BuildError, DEAD_LETTER, ProcessError, Processor, StartError, Trigger, eval, props};
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::{SmolStr, int_value};
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{Completion, Session, SessionFactory};

/// How long a consumer's trigger waits for a first message before it reports idle.
const POLL_WAIT: Duration = Duration::from_millis(50);

/// Flow files a publisher takes per trigger.
const BATCH: usize = 100;

fn runtime() -> Result<Handle, String> {
    weir_runtime::runtime()
        .cloned()
        .map_err(|e| format!("runtime: {e}"))
}

/// Logs a connection problem at most once per distinct error (a bulletin), without
/// credentials: the connectors' errors name the server only.
fn bulletin(component: &str, health: &Health, last: &Mutex<Option<String>>) {
    let state = health.get();
    let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = state.last_error
        && last.as_deref() != Some(e.as_str())
    {
        tracing::warn!("{component}: not connected ({e}); yielding until the connection is back");
        *last = Some(e);
    } else if state.connected {
        *last = None;
    }
}

/// An attribute of a received message's flow file: name and value.
type Entry = (SmolStr, SmolStr);

fn connector_error(e: ConnectorError) -> ProcessError {
    ProcessError::Other(e.to_string())
}

// ---- AMQP ----

/// The broker and credentials of an AMQP processor's properties.
fn amqp_config(c: &Component) -> Result<AmqpConfig, String> {
    AmqpConfig::new(
        &props::text(c, "Brokers"),
        &props::text(c, "Virtual Host"),
        &props::text(c, "User Name"),
        &props::text(c, "Password"),
    )
    .map_err(|e| e.to_string())
}

pub(super) struct ConsumeAmqp {
    name: String,
    config: AmqpConfig,
    queue: String,
    /// The RECEIVE events' transit URI, shared by every event.
    uri: SmolStr,
    batch: usize,
    prefetch: u16,
    /// `Max Deliveries`; 0 for no limit.
    max_deliveries: u64,
    /// Deliveries seen of messages a classic queue redelivers (it does not count them), by
    /// [`message_key`].
    tally: Mutex<std::collections::HashMap<u64, u64>>,
    runtime: Handle,
    consumer: OnceLock<AmqpConsumer>,
    last_bulletin: Mutex<Option<String>>,
}

/// Messages whose deliveries a ConsumeAMQP counts itself (classic queues) at most: past it
/// the counts start again, so that a broker redelivering many messages for ever cannot
/// grow the table without bound.
const TALLY_LIMIT: usize = 100_000;

/// A classic queue's message, told apart from others by its routing key, message id and
/// body (the broker gives it no identity that survives a redelivery).
fn message_key(m: &weir_connectors::amqp::AmqpMessage) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    m.routing_key.hash(&mut h);
    m.headers
        .iter()
        .find(|(k, _)| k == "message_id")
        .map(|(_, v)| v)
        .hash(&mut h);
    m.body.hash(&mut h);
    h.finish()
}

impl ConsumeAmqp {
    /// How many times `m` has been delivered, this time included: the broker's count when
    /// it keeps one (a quorum queue), else, with a delivery limit, this processor's (a
    /// classic queue says only whether it redelivers; the count starts again with the
    /// process); `None` when neither counts.
    fn deliveries(&self, m: &weir_connectors::amqp::AmqpMessage) -> Option<u64> {
        if let Some(prior) = m.prior_deliveries {
            return Some(prior + 1);
        }
        if self.max_deliveries == 0 {
            return None;
        }
        let mut tally = self.tally.lock().unwrap_or_else(|p| p.into_inner());
        if !m.redelivered {
            // A first delivery: hashed (its body too) only when an identical message may
            // have been counted before.
            if !tally.is_empty() {
                tally.remove(&message_key(m));
            }
            return Some(1);
        }
        let key = message_key(m);
        if tally.len() >= TALLY_LIMIT {
            tally.clear();
        }
        // A redelivery first seen here was delivered at least once before.
        let n = tally.entry(key).or_insert(1);
        *n += 1;
        Some(*n)
    }

    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let config = amqp_config(c)?;
        let queue = props::text(c, "Queue");
        Ok(ConsumeAmqp {
            name: c.name.clone(),
            uri: format!("{config}/{queue}").into(),
            config,
            queue,
            batch: props::count(c, "Batch Size")?.max(1) as usize,
            prefetch: props::count(c, "Prefetch Count")?.clamp(1, u16::MAX as u64) as u16,
            max_deliveries: props::count(c, "Max Deliveries")?,
            tally: Mutex::new(std::collections::HashMap::new()),
            runtime: runtime()?,
            consumer: OnceLock::new(),
            last_bulletin: Mutex::new(None),
        })
    }
}

impl Processor for ConsumeAmqp {
    fn start(&self, _sessions: SessionFactory) -> Result<(), StartError> {
        let consumer = AmqpConsumer::start(
            &self.runtime,
            self.config.clone(),
            &self.queue,
            self.prefetch,
        );
        // With a delivery limit, a redelivered message is tried alone: a poison message
        // reaches the limit by itself, and its batch-mates go through.
        consumer.isolate_redelivered(self.max_deliveries > 0);
        let _ = self.consumer.set(consumer);
        Ok(())
    }

    fn work_ahead(&self) {
        if let Some(consumer) = self.consumer.get() {
            consumer.read_ahead(self.batch);
        }
    }

    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(consumer) = self.consumer.get() else {
            return Ok(Trigger::Idle);
        };
        // Through the session: in a stateless group, a wait for the broker is time the copy
        // spends on what its last commit left (see `Session::wait`).
        let mut messages = session.wait(&self.runtime, consumer.next_batch(self.batch, POLL_WAIT));
        if messages.is_empty() {
            bulletin(&self.name, consumer.health(), &self.last_bulletin);
            return Ok(Trigger::Idle);
        }
        // Each message's attributes and body are taken out, and the messages handed to the
        // completion hook, before anything can fail: a trigger that fails or panics after
        // this rolls back and the hook requeues them; none is left unsettled (an unsettled
        // delivery holds a place of the prefetch window until the connection closes).
        let received: Vec<(Vec<Entry>, Vec<u8>, &str)> = messages
            .iter_mut()
            .map(|m| {
                let deliveries = self.deliveries(m);
                let to = if let Some(deliveries) = deliveries
                    && self.max_deliveries > 0
                    && deliveries > self.max_deliveries
                {
                    tracing::warn!(
                        "{}: a message delivered {deliveries} times (Max Deliveries {}) goes to {DEAD_LETTER}",
                        self.name,
                        self.max_deliveries
                    );
                    DEAD_LETTER
                } else {
                    "success"
                };
                // In name order, so that the new map is built in order.
                let mut attributes = vec![
                    (
                        SmolStr::new_static("amqp$deliveryTag"),
                        int_value(m.delivery_tag),
                    ),
                    (SmolStr::new_static("amqp$exchange"), m.exchange.clone()),
                    (
                        SmolStr::new_static("amqp$redelivered"),
                        SmolStr::new_static(if m.redelivered { "true" } else { "false" }),
                    ),
                    (
                        SmolStr::new_static("amqp$routingKey"),
                        m.routing_key.clone(),
                    ),
                ];
                attributes.extend(
                    m.headers
                        .iter()
                        .map(|(k, v)| (SmolStr::from(format!("amqp${k}")), SmolStr::new(v))),
                );
                if let Some(n) = deliveries {
                    attributes.push((SmolStr::new_static("amqp$deliveries"), int_value(n as i64)));
                }
                // The body taken, not copied: settling a message needs only its tag.
                (attributes, std::mem::take(&mut m.body), to)
            })
            .collect();
        let settler = consumer.settler();
        session.on_complete(move |outcome| {
            let how = match outcome {
                // After the group's destinations committed (`Session::before_commit`).
                Completion::Committed => Settlement::Ack,
                // Penalized: held unacknowledged (still ours) until the penalty is over.
                Completion::RolledBack { penalty } => Settlement::Requeue { delay: penalty },
            };
            settler.settle(messages, how)
        });
        session.reserve(received.len());
        for (attributes, body, to) in received {
            let ff = session.create_with_content(attributes, body)?;
            session.report(ff, EventType::RECEIVE, Some(self.uri.clone()), None);
            session.transfer(ff, to)?;
        }
        Ok(Trigger::Worked)
    }
}

pub(super) struct PublishAmqp {
    exchange: Template,
    routing_key: Template,
    uri: String,
    runtime: Handle,
    publisher: AmqpPublisher,
}

impl PublishAmqp {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let config = amqp_config(c)?;
        Ok(PublishAmqp {
            exchange: props::template(c, "Exchange Name")?,
            routing_key: props::template(c, "Routing Key")?,
            uri: config.to_string(),
            runtime: runtime()?,
            publisher: AmqpPublisher::new(config),
        })
    }
}

impl Processor for PublishAmqp {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            let (exchange, key) = match (
                eval(&self.exchange, session, ff).map(Cow::into_owned),
                eval(&self.routing_key, session, ff).map(Cow::into_owned),
            ) {
                (Ok(e), Ok(k)) => (e, k),
                _ => {
                    session.transfer(ff, "failure")?;
                    continue;
                }
            };
            let body = session.read(ff)?;
            match self
                .runtime
                .block_on(self.publisher.publish(&exchange, &key, &body))
            {
                Ok(()) => {
                    session.report(
                        ff,
                        EventType::SEND,
                        Some(format!("{}/{exchange}/{key}", self.uri).into()),
                        None,
                    );
                    session.transfer(ff, "success")?;
                }
                Err(ConnectorError::Refused(e)) => {
                    session.put_attribute(ff, "publishamqp.error", e);
                    session.penalize(ff);
                    session.transfer(ff, "failure")?;
                }
                // Unreachable broker: roll back, the inputs wait out their penalty.
                Err(e) => return Err(connector_error(e)),
            }
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

// ---- JetStream ----

pub(super) struct ConsumeJetStream {
    name: String,
    /// The RECEIVE events' transit URI, shared by every event.
    uri: SmolStr,
    config: JetStreamConfig,
    stream: String,
    subject: String,
    durable: String,
    batch: usize,
    ack_wait: Duration,
    /// `Max Deliveries`; 0 for no limit.
    max_deliveries: u64,
    runtime: Handle,
    consumer: OnceLock<JetStreamConsumer>,
    last_bulletin: Mutex<Option<String>>,
}

impl ConsumeJetStream {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let config = JetStreamConfig::new(
            &props::text(c, "URL"),
            props::opt(c, "User Name").as_deref(),
            props::opt(c, "Password").as_deref(),
        );
        let stream = props::text(c, "Stream");
        let durable = props::text(c, "Durable Consumer");
        Ok(ConsumeJetStream {
            name: c.name.clone(),
            uri: format!("{config}/{stream}/{durable}").into(),
            config,
            stream,
            subject: props::text(c, "Subject"),
            durable,
            batch: props::count(c, "Batch Size")?.max(1) as usize,
            ack_wait: props::duration(c, "Ack Wait")?,
            max_deliveries: props::count(c, "Max Deliveries")?,
            runtime: runtime()?,
            consumer: OnceLock::new(),
            last_bulletin: Mutex::new(None),
        })
    }
}

impl Processor for ConsumeJetStream {
    fn start(&self, _sessions: SessionFactory) -> Result<(), StartError> {
        let consumer = JetStreamConsumer::start(
            &self.runtime,
            self.config.clone(),
            &self.stream,
            &self.subject,
            &self.durable,
            self.ack_wait,
            self.batch,
        );
        // As ConsumeAMQP: with a delivery limit, a redelivered message is tried alone.
        consumer.isolate_redelivered(self.max_deliveries > 0);
        let _ = self.consumer.set(consumer);
        Ok(())
    }

    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(consumer) = self.consumer.get() else {
            return Ok(Trigger::Idle);
        };
        // Through the session: in a stateless group, a wait for the broker is time the copy
        // spends on what its last commit left (see `Session::wait`).
        let mut messages = session.wait(&self.runtime, consumer.next_batch(self.batch, POLL_WAIT));
        if messages.is_empty() {
            bulletin(&self.name, consumer.health(), &self.last_bulletin);
            return Ok(Trigger::Idle);
        }
        // As ConsumeAMQP: the messages go to the completion hook before anything can fail,
        // so that a failed trigger naks them instead of leaving them to the ack wait.
        let received: Vec<([Entry; 3], Vec<u8>, &str)> = messages
            .iter_mut()
            .map(|m| {
                let over = self.max_deliveries > 0 && m.delivered.max(1) as u64 > self.max_deliveries;
                if over {
                    tracing::warn!(
                        "{}: a message delivered {} times (Max Deliveries {}) goes to {DEAD_LETTER}",
                        self.name,
                        m.delivered,
                        self.max_deliveries
                    );
                }
                let to = if over { DEAD_LETTER } else { "success" };
                let attributes = [
                    ("jetstream.delivered", int_value(m.delivered)),
                    ("jetstream.stream.sequence", int_value(m.stream_sequence)),
                    ("jetstream.subject", SmolStr::new(&m.subject)),
                ]
                .map(|(k, v)| (SmolStr::new_static(k), v));
                // The body taken, not copied: settling a message needs only its tag.
                (attributes, std::mem::take(&mut m.body), to)
            })
            .collect();
        let messages: Arc<[JetStreamMessage]> = messages.into();
        // Until the transaction settles, the server hears every third of the ack wait that
        // the messages are still being worked on, so that it does not hand them to another
        // consumer while a long transaction (or the consumer's buffer) holds them.
        let in_progress = keep_in_progress(
            &self.runtime,
            Arc::clone(&messages),
            progress_interval(self.ack_wait),
        );
        let runtime = self.runtime.clone();
        session.on_complete(move |outcome| {
            drop(in_progress);
            settle_jetstream(&runtime, messages, outcome)
        });
        session.reserve(received.len());
        for (attributes, body, to) in received {
            let ff = session.create_with_content(attributes, body)?;
            session.report(ff, EventType::RECEIVE, Some(self.uri.clone()), None);
            session.transfer(ff, to)?;
        }
        Ok(Trigger::Worked)
    }
}

fn settle_jetstream(runtime: &Handle, messages: Arc<[JetStreamMessage]>, outcome: Completion) {
    runtime.spawn(async move {
        for m in messages.iter() {
            let result = match outcome {
                Completion::Committed => m.ack().await,
                Completion::RolledBack { penalty } => m.nak(penalty.unwrap_or_default()).await,
            };
            if let Err(e) = result {
                tracing::warn!("ConsumeJetStream: settling a message failed, it comes again after the ack wait: {e}");
            }
        }
    });
}

pub(super) struct PublishJetStream {
    subject: Template,
    uri: String,
    runtime: Handle,
    publisher: JetStreamPublisher,
}

impl PublishJetStream {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let config = JetStreamConfig::new(
            &props::text(c, "URL"),
            props::opt(c, "User Name").as_deref(),
            props::opt(c, "Password").as_deref(),
        );
        Ok(PublishJetStream {
            subject: props::template(c, "Subject")?,
            uri: config.to_string(),
            runtime: runtime()?,
            publisher: JetStreamPublisher::new(config),
        })
    }
}

impl Processor for PublishJetStream {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            let Ok(subject) = eval(&self.subject, session, ff).map(Cow::into_owned) else {
                session.transfer(ff, "failure")?;
                continue;
            };
            let body = session.read(ff)?;
            match self
                .runtime
                .block_on(self.publisher.publish(&subject, &body))
            {
                Ok(()) => {
                    session.report(
                        ff,
                        EventType::SEND,
                        Some(format!("{}/{subject}", self.uri).into()),
                        None,
                    );
                    session.transfer(ff, "success")?;
                }
                Err(ConnectorError::Refused(e)) => {
                    session.put_attribute(ff, "publishjetstream.error", e);
                    session.transfer(ff, "failure")?;
                }
                Err(e) => return Err(connector_error(e)),
            }
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

// ---- PostgreSQL ----

pub(super) struct PutDatabaseRecord {
    name: String,
    /// In a stateless group: a call that times out fails the trigger, so that the group
    /// rolls back (the database's transaction is gone) and the broker redelivers.
    stateless: bool,
    batch: usize,
    /// The SEND events' transit URI, shared by every event.
    uri: SmolStr,
    runtime: Handle,
    writer: Arc<tokio::sync::Mutex<RecordWriter>>,
    last_bulletin: Mutex<Option<String>>,
}

impl PutDatabaseRecord {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let (connect, statement) = (
            props::duration(c, "Connect Timeout")?,
            props::duration(c, "Statement Timeout")?,
        );
        let mut timeouts = PgTimeouts {
            connect,
            statement,
            lock: props::duration(c, "Lock Timeout")?,
            // The client's own bound: a server or network that stops answering cannot hold
            // the call past what the server's timeouts allow, and a little more.
            call: connect + statement + Duration::from_secs(1),
        };
        if let Some(limit) = c.group_timeout {
            // A blocked call ends within the group's timeout, which is checked only between
            // triggers.
            timeouts = timeouts.capped(limit);
        }
        let config = PgConfig::new(
            &props::text(c, "Database URL"),
            props::opt(c, "User Name").as_deref(),
            props::opt(c, "Password").as_deref(),
        )
        .with_timeouts(timeouts);
        let table = props::text(c, "Table Name");
        let statement = if props::text(c, "Statement Type").eq_ignore_ascii_case("UPSERT") {
            StatementType::Upsert {
                keys: props::text(c, "Update Keys")
                    .split(',')
                    .map(|k| k.trim().to_string())
                    .filter(|k| !k.is_empty())
                    .collect(),
            }
        } else {
            StatementType::Insert
        };
        Ok(PutDatabaseRecord {
            name: c.name.clone(),
            stateless: c.group_timeout.is_some(),
            batch: props::count(c, "Batch Size")?.max(1) as usize,
            uri: format!("{config}/{table}").into(),
            runtime: runtime()?,
            writer: Arc::new(tokio::sync::Mutex::new(RecordWriter::new(
                config, &table, statement,
            ))),
            last_bulletin: Mutex::new(None),
        })
    }
}

impl PutDatabaseRecord {
    /// Ties the open database transaction to the group's: committed as the group commits,
    /// before its journal frame and before any source acknowledges
    /// ([`Session::before_commit`]: a failed COMMIT rolls the group back and the brokers
    /// redeliver), rolled back when it rolls back. Every trigger registers both; the first to
    /// run settles the transaction and the others find nothing open.
    fn settle_with_group(&self, session: &mut dyn Session) {
        let (writer, runtime, name) = (
            Arc::clone(&self.writer),
            self.runtime.clone(),
            self.name.clone(),
        );
        session.before_commit(move || {
            runtime
                .block_on(async { writer.lock().await.commit().await })
                .map_err(|e| format!("{name}: COMMIT: {e}"))
        });
        let (writer, runtime) = (Arc::clone(&self.writer), self.runtime.clone());
        session.on_complete(move |outcome| {
            if let Completion::RolledBack { .. } = outcome {
                runtime.block_on(async { writer.lock().await.rollback().await });
            }
        });
    }
}

impl Processor for PutDatabaseRecord {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(self.batch)?;
        if ffs.is_empty() {
            return Ok(Trigger::Idle);
        }
        let mut items = Vec::with_capacity(ffs.len());
        let mut sent = Vec::with_capacity(ffs.len());
        for &ff in &ffs {
            match parse_json_lines(&session.read(ff)?) {
                Ok(records) => {
                    items.push(records);
                    sent.push(ff);
                }
                Err(e) => {
                    session.put_attribute(ff, "putdatabaserecord.error", e.to_string());
                    session.transfer(ff, "failure")?;
                }
            }
        }
        let writer = Arc::clone(&self.writer);
        let outcomes = if self.stateless {
            self.settle_with_group(session);
            // In the group's open database transaction: committed when the group commits.
            let outcomes = session.wait(&self.runtime, async move {
                writer.lock().await.write_in_transaction(&items).await
            });
            // The open transaction is lost with what the group wrote in it before: the
            // whole group rolls back and the broker redelivers.
            if let Some(ItemOutcome::TimedOut(e) | ItemOutcome::Retry(e)) = outcomes
                .iter()
                .find(|o| matches!(o, ItemOutcome::TimedOut(_) | ItemOutcome::Retry(_)))
            {
                return Err(ProcessError::Other(format!(
                    "the database transaction failed: {e}"
                )));
            }
            outcomes
        } else {
            session.wait(&self.runtime, async move {
                writer.lock().await.write_batch(&items).await
            })
        };
        let mut retry = None;
        for (ff, outcome) in sent.into_iter().zip(outcomes) {
            match outcome {
                // As NiFi's: a written flow file gains no attribute (the SEND event records
                // it), only a failed one `putdatabaserecord.error`.
                ItemOutcome::Written(_) => {
                    // In a stateless group the rows roll back with it: no SEND then.
                    session.report_on_commit(ff, EventType::SEND, Some(self.uri.clone()), None);
                    session.transfer(ff, "success")?;
                }
                ItemOutcome::Bad(e) => {
                    session.put_attribute(ff, "putdatabaserecord.error", e);
                    session.transfer(ff, "failure")?;
                }
                ItemOutcome::Retry(e) | ItemOutcome::TimedOut(e) => {
                    session.penalize(ff);
                    session.transfer(ff, "retry")?;
                    retry = Some(e);
                }
            }
        }
        if let Some(e) = retry {
            let mut last = self.last_bulletin.lock().unwrap_or_else(|p| p.into_inner());
            if last.as_deref() != Some(e.as_str()) {
                tracing::warn!(
                    "{}: database unavailable ({e}); flow files to retry",
                    self.name
                );
                *last = Some(e);
            }
        }
        Ok(Trigger::Worked)
    }
}
