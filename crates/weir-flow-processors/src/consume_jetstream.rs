//! ConsumeJetStream: its spec and its processor.

use super::BuiltIn;
use super::brokers::{Entry, POLL_WAIT, bulletin, runtime};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, DEAD_LETTER, ProcessError, Processor, StartError, Trigger, props};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::runtime::Handle;
use weir_connectors::jetstream::{
    JetStreamConfig, JetStreamConsumer, JetStreamMessage, keep_in_progress, progress_interval,
};
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::{SmolStr, int_value};
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{Completion, Session, SessionFactory};

/// The ConsumeJetStream type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(ConsumeJetStream::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "ConsumeJetStream",
    description: "Receives messages from a NATS JetStream durable consumer, acknowledging each once its flow file is durable (messages redelivered past Max Deliveries go to dead-letter).",
    properties: &[
        p("URL", true, Some("nats://127.0.0.1:4222"), K::Text).about("The NATS server's URL."),
        p("Stream", true, None, K::Text).about("The JetStream stream to consume from."),
        p("Subject", true, None, K::Text).about(
            "The subject filter of the durable consumer when it is created here.",
        ),
        p("Durable Consumer", true, None, K::Text).about(
            "The durable consumer's name; created on the stream (with Subject and Ack Wait) if it does not exist.",
        ),
        p("User Name", false, None, K::Text).about(
            "The user to log in as; unset, no credentials are sent.",
        ),
        p("Password", false, None, K::Text).about(
            "The user's password (it appears in no log line and no attribute).",
        ),
        p("Batch Size", true, Some("10"), K::Count).about(
            "The most messages pulled and taken per trigger (0 counts as 1).",
        ),
        p("Ack Wait", true, Some("30 sec"), K::Duration).about(
            "How long the server waits for an acknowledgement before redelivering; in a stateless group it must be longer than the group's timeout.",
        ),
        p("Max Deliveries", true, Some("0"), K::Count).about(
            "A message delivered more than this many times goes to `dead-letter` instead of `success` (a relationship the processor then has); 0 for no limit.",
        ),
    ],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: true,
};

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
