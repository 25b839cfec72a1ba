//! What the processors for brokers and databases share (their polling wait, batch size,
//! runtime, bulletins and AMQP settings). They run on the clients of `weir-connectors`:
//! ConsumeAMQP, PublishAMQP, ConsumeJetStream, PublishJetStream and PutDatabaseRecord, each
//! in a module of its own.
//!
//! The consumers acknowledge only in their session's completion hook
//! (`Session::on_complete`): after the durable commit in a traditional group, after the
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

use super::{ProcessError, props};
use std::sync::Mutex;
use std::time::Duration;
use tokio::runtime::Handle;
use weir_connectors::amqp::AmqpConfig;
use weir_connectors::{ConnectorError, Health};
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::SmolStr;

/// How long a consumer's trigger waits for a first message before it reports idle.
pub(super) const POLL_WAIT: Duration = Duration::from_millis(50);

/// Flow files a publisher takes per trigger.
pub(super) const BATCH: usize = 100;

/// The shared runtime, for a processor's waits on its client.
pub(super) fn runtime() -> Result<Handle, String> {
    weir_runtime::runtime()
        .cloned()
        .map_err(|e| format!("runtime: {e}"))
}

/// Logs a connection problem at most once per distinct error (a bulletin), without
/// credentials: the connectors' errors name the server only.
pub(super) fn bulletin(component: &str, health: &Health, last: &Mutex<Option<String>>) {
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
pub(super) type Entry = (SmolStr, SmolStr);

pub(super) fn connector_error(e: ConnectorError) -> ProcessError {
    ProcessError::Other(e.to_string())
}

/// The broker and credentials of an AMQP processor's properties.
pub(super) fn amqp_config(c: &Component) -> Result<AmqpConfig, String> {
    AmqpConfig::new(
        &props::text(c, "Brokers"),
        &props::text(c, "Virtual Host"),
        &props::text(c, "User Name"),
        &props::text(c, "Password"),
    )
    .map_err(|e| e.to_string())
}
