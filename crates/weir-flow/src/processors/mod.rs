//! The processors of the traditional engine, with NiFi's names, properties and
//! relationships ([`spec`] declares them; validation and the processors share it).

mod brokers;
mod content;
mod files;
mod http;
pub mod registry;
mod routing;
pub mod spec;

use std::sync::Arc;

use weir_flow_api::component::{Component, ComponentKind};
pub use weir_flow_api::processor::{BuildError, ProcessError, Processor, StartError, Trigger};
pub(crate) use weir_flow_api::props;
use weir_flow_api::session::Session;

/// The relationship of ConsumeAMQP and ConsumeJetStream for messages delivered more than
/// `Max Deliveries` times (present only when that property is above 0).
pub const DEAD_LETTER: &str = "dead-letter";

/// Builds the processor for a validated component.
///
/// # Errors
/// [`BuildError`]: a property the processor cannot use (validation catches most of these
/// earlier), or a type without a built-in processor.
pub fn build(c: &Component) -> Result<Arc<dyn Processor>, BuildError> {
    let spec = match c.kind {
        ComponentKind::Port => return Ok(Arc::new(routing::PassThrough)),
        ComponentKind::Processor(s) => s,
    };
    Ok(match spec.kind {
        "GenerateFlowFile" => Arc::new(content::GenerateFlowFile::new(c)?),
        "GetFile" => Arc::new(files::GetFile::new(c)?),
        "PutFile" => Arc::new(files::PutFile::new(c)?),
        "SplitText" => Arc::new(content::SplitText::new(c)?),
        "MergeContent" => Arc::new(content::MergeContent::new(c)?),
        "UpdateAttribute" => Arc::new(routing::UpdateAttribute::new(c)?),
        "RouteOnAttribute" => Arc::new(routing::RouteOnAttribute::new(c)?),
        "ReplaceText" => Arc::new(content::ReplaceText::new(c)?),
        "CompressContent" => Arc::new(content::CompressContent::new(c)?),
        "CryptographicHashContent" => Arc::new(content::HashContent::new(c)?),
        "LogAttribute" => Arc::new(routing::LogAttribute::new(c)?),
        "InvokeHTTP" => Arc::new(http::InvokeHttp::new(c)?),
        "ListenHTTP" => Arc::new(http::ListenHttp::new(c)?),
        "ConsumeAMQP" => Arc::new(brokers::ConsumeAmqp::new(c)?),
        "PublishAMQP" => Arc::new(brokers::PublishAmqp::new(c)?),
        "ConsumeJetStream" => Arc::new(brokers::ConsumeJetStream::new(c)?),
        "PublishJetStream" => Arc::new(brokers::PublishJetStream::new(c)?),
        "PutDatabaseRecord" => Arc::new(brokers::PutDatabaseRecord::new(c)?),
        "Funnel" => Arc::new(routing::PassThrough),
        other => return Err(BuildError::UnknownType(other.to_string())),
    })
}

/// Evaluates `t` against the attributes of `ff` in `session`, borrowing from them where it
/// can (see [`Template::evaluate`](weir_flow_api::expression::Template::evaluate)).
pub(crate) fn eval<'a>(
    t: &'a weir_flow_api::expression::Template,
    session: &'a dyn Session,
    ff: weir_flow_api::session::FlowFileRef,
) -> Result<std::borrow::Cow<'a, str>, weir_flow_api::expression::EvalError> {
    session.evaluate(t, ff)
}
