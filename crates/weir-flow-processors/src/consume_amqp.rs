//! ConsumeAMQP: its spec and its processor.

use super::BuiltIn;
use super::brokers::{Entry, POLL_WAIT, amqp_config, bulletin, runtime};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, DEAD_LETTER, ProcessError, Processor, StartError, Trigger, props};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::runtime::Handle;
use weir_connectors::amqp::{AmqpConfig, AmqpConsumer, Settlement};
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::{SmolStr, int_value};
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{Completion, Session, SessionFactory};

/// The ConsumeAMQP type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(ConsumeAmqp::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "ConsumeAMQP",
    description: "Receives messages from a RabbitMQ queue, acknowledging each once its flow file is durable (messages redelivered past Max Deliveries go to dead-letter).",
    properties: &[
        p("Queue", true, None, K::Text).about("The queue to consume from (it must exist)."),
        p("Brokers", true, Some("127.0.0.1:5672"), K::Text).about(
            "The broker as `host:port` (port 5672 when left out); of a comma-separated list, only the first is used.",
        ),
        p("Virtual Host", true, Some("/"), K::Text).about("The broker's virtual host."),
        p("User Name", true, Some("guest"), K::Text).about("The user to log in as."),
        p("Password", false, None, K::Text).about(
            "The user's password (it appears in no log line and no attribute).",
        ),
        p("Batch Size", true, Some("10"), K::Count).about(
            "The most messages taken per trigger, one flow file each (0 counts as 1).",
        ),
        p("Prefetch Count", true, Some("100"), K::Count).about(
            "The most messages the broker sends ahead of their acknowledgement (1 to 65535).",
        ),
        p("Max Deliveries", true, Some("0"), K::Count).about(
            "A message delivered more than this many times goes to `dead-letter` instead of `success` (a relationship the processor then has); 0 for no limit.",
        ),
    ],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: true,
};

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
