//! PublishAMQP: its spec and its processor.

use super::BuiltIn;
use super::brokers::{BATCH, amqp_config, connector_error, runtime};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, eval, props};
use std::borrow::Cow;
use std::sync::Arc;
use tokio::runtime::Handle;
use weir_connectors::ConnectorError;
use weir_connectors::amqp::AmqpPublisher;
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::Session;

/// The PublishAMQP type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(PublishAmqp::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "PublishAMQP",
    description: "Publishes each flow file's content to a RabbitMQ exchange, with publisher confirms.",
    properties: &[
        p("Exchange Name", true, Some(""), K::Expression).about(
            "The exchange to publish to, evaluated per flow file; empty for the default exchange, which routes by queue name.",
        ),
        p("Routing Key", true, None, K::Expression).about(
            "The message's routing key, evaluated per flow file.",
        ),
        p("Brokers", true, Some("127.0.0.1:5672"), K::Text).about(
            "The broker as `host:port` (port 5672 when left out); of a comma-separated list, only the first is used.",
        ),
        p("Virtual Host", true, Some("/"), K::Text).about("The broker's virtual host."),
        p("User Name", true, Some("guest"), K::Text).about("The user to log in as."),
        p("Password", false, None, K::Text).about(
            "The user's password (it appears in no log line and no attribute).",
        ),
    ],
    relationships: &["success", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

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
