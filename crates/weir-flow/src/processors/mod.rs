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

use crate::definition::{Component, ComponentKind};
use crate::engine::{Session, SessionError, SessionFactory};

/// The relationship of ConsumeAMQP and ConsumeJetStream for messages delivered more than
/// `Max Deliveries` times (present only when that property is above 0).
pub const DEAD_LETTER: &str = "dead-letter";

/// What a trigger did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// It took or made flow files.
    Worked,
    /// Nothing to do: the session is committed as it is and the processor may rest.
    Idle,
}

impl Trigger {
    /// `Worked` if the trigger took or made flow files, else `Idle`.
    pub fn worked_if(worked: bool) -> Self {
        if worked {
            Trigger::Worked
        } else {
            Trigger::Idle
        }
    }
}

/// A processor's error: the session rolls back and its inputs are penalized.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// From the session (content I/O, the repository).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// A processor: one type of the flow format.
pub trait Processor: Send + Sync {
    /// Called once before scheduling starts, inside the shared runtime (ListenHTTP binds its
    /// port here).
    ///
    /// # Errors
    /// Why it cannot start; the flow does not start.
    fn start(&self, _sessions: SessionFactory) -> Result<(), String> {
        Ok(())
    }

    /// Does one unit of work in `session`. Panics are caught: the session rolls back.
    ///
    /// # Errors
    /// [`ProcessError`]; the session rolls back, penalized.
    fn trigger(&self, session: &mut Session) -> Result<Trigger, ProcessError>;

    /// Readies the next trigger while a stateless transaction this processor is a source of
    /// waits on an outside service (see `Session::wait`): on the copy's thread, touching no
    /// session or flow file (ConsumeAMQP takes the messages its client has received). What
    /// it readies enters a transaction only at a later trigger. A panic here is caught and
    /// logged. Default: nothing.
    fn work_ahead(&self) {}

    /// False for processors that are driven by events rather than by the scheduler.
    fn schedulable(&self) -> bool {
        true
    }

    /// Called once when the flow stops.
    fn stop(&self) {}
}

/// Builds the processor for a validated component.
///
/// # Errors
/// A property the processor cannot use (validation catches most of these earlier).
pub fn build(c: &Component) -> Result<Arc<dyn Processor>, String> {
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
        other => return Err(format!("no processor for type `{other}`")),
    })
}

/// Helpers to read typed properties (validated already, so failures are unexpected).
pub(crate) mod props {
    use crate::definition::Component;
    use crate::definition::units::{parse_duration, parse_size};
    use crate::expression::Template;
    use std::time::Duration;

    pub fn text(c: &Component, name: &str) -> String {
        c.property(name).unwrap_or_default().to_string()
    }
    pub fn opt(c: &Component, name: &str) -> Option<String> {
        c.property(name).map(str::to_string)
    }
    pub fn boolean(c: &Component, name: &str) -> bool {
        c.property(name) == Some("true")
    }
    pub fn count(c: &Component, name: &str) -> Result<u64, String> {
        let v = text(c, name);
        v.trim()
            .parse()
            .map_err(|_| format!("{name}: `{v}` is not a whole number"))
    }
    pub fn duration(c: &Component, name: &str) -> Result<Duration, String> {
        parse_duration(&text(c, name)).map_err(|e| format!("{name}: {e}"))
    }
    pub fn size(c: &Component, name: &str) -> Result<u64, String> {
        parse_size(&text(c, name)).map_err(|e| format!("{name}: {e}"))
    }
    pub fn template(c: &Component, name: &str) -> Result<Template, String> {
        Template::parse(&text(c, name)).map_err(|e| format!("{name}: {e}"))
    }
}

/// Evaluates `t` against the attributes of `ff` in `session`, borrowing from them where it
/// can (see [`Template::evaluate`](crate::expression::Template::evaluate)).
pub(crate) fn eval<'a>(
    t: &'a crate::expression::Template,
    session: &'a Session,
    ff: crate::engine::FlowFileRef,
) -> Result<std::borrow::Cow<'a, str>, crate::expression::EvalError> {
    let f = session.flowfile(ff);
    t.evaluate(&|k| f.attribute(k))
}
