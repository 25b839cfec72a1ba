//! PublishJetStream: its spec and its processor.

use super::BuiltIn;
use super::brokers::{BATCH, connector_error, runtime};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, eval, props};
use std::borrow::Cow;
use std::sync::Arc;
use tokio::runtime::Handle;
use weir_connectors::ConnectorError;
use weir_connectors::jetstream::{JetStreamConfig, JetStreamPublisher};
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::Session;

/// The PublishJetStream type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(PublishJetStream::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "PublishJetStream",
    description: "Publishes each flow file's content to a NATS JetStream subject, awaiting the stream's acknowledgement.",
    properties: &[
        p("URL", true, Some("nats://127.0.0.1:4222"), K::Text).about("The NATS server's URL."),
        p("Subject", true, None, K::Expression).about(
            "The subject to publish to, evaluated per flow file (a stream must capture it: until one does, publishing fails and the flow files are retried).",
        ),
        p("User Name", false, None, K::Text).about(
            "The user to log in as; unset, no credentials are sent.",
        ),
        p("Password", false, None, K::Text).about(
            "The user's password (it appears in no log line and no attribute).",
        ),
    ],
    relationships: &["success", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

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
