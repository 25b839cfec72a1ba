//! The [`Processor`] trait: one type of the flow format, triggered by an engine with a
//! [`Session`] to work in, and the errors of building, starting and triggering one.

use crate::props::PropertyError;
use crate::session::{Session, SessionError, SessionFactory};

/// What a trigger did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// It took or made flow files.
    Worked,
    /// Nothing to do: the session is committed as it is and the processor may rest.
    Idle,
    /// Nothing can be done for a while although input is queued (a rate limit holds it
    /// back): the session is committed as it is, and the engine does not trigger the
    /// processor again for this long, or its yield duration if that is shorter (NiFi's
    /// `yield`), and at least a millisecond. New input does not cut the rest short, so a held-back processor costs no
    /// CPU however much waits.
    Yield(std::time::Duration),
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

/// Why a processor cannot be built from its validated component.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A property the processor cannot use (validation catches most of these earlier).
    #[error(transparent)]
    Property(#[from] PropertyError),
    /// No processor is known for the component's type.
    #[error("no processor for type `{0}`")]
    UnknownType(String),
    /// The processor's own reason (a value out of range, a service it cannot reach).
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for BuildError {
    fn from(reason: String) -> BuildError {
        BuildError::Invalid(reason)
    }
}

impl From<&str> for BuildError {
    fn from(reason: &str) -> BuildError {
        BuildError::Invalid(reason.to_string())
    }
}

/// Why a processor cannot start; the flow does not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An operating-system resource could not be had (a port in use, a bad directory).
    #[error("{what}: {source}")]
    Io {
        /// What the processor tried.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The processor's own reason.
    #[error("{0}")]
    Other(String),
}

impl From<String> for StartError {
    fn from(reason: String) -> StartError {
        StartError::Other(reason)
    }
}

/// A processor: one type of the flow format.
pub trait Processor: Send + Sync {
    /// Called once before scheduling starts, inside the shared runtime (ListenHTTP binds its
    /// port here). `sessions` makes sessions outside triggers.
    ///
    /// # Errors
    /// Why it cannot start; the flow does not start.
    fn start(&self, _sessions: SessionFactory) -> Result<(), StartError> {
        Ok(())
    }

    /// Does one unit of work in `session`. Panics are caught: the session rolls back.
    ///
    /// # Errors
    /// [`ProcessError`]; the session rolls back, penalized.
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError>;

    /// Readies the next trigger while a stateless transaction this processor is a source of
    /// waits on an outside service (see `Session::wait`):
    /// on the copy's thread, touching no session or flow file (ConsumeAMQP takes the
    /// messages its client has received). What it readies enters a transaction only at a
    /// later trigger. A panic here is caught and logged. Default: nothing.
    fn work_ahead(&self) {}

    /// False for processors that are driven by events rather than by the scheduler.
    fn schedulable(&self) -> bool {
        true
    }

    /// Called once when the flow stops.
    fn stop(&self) {}
}
