//! Sources and sinks that talk to outside servers: AMQP 0-9-1 brokers such as RabbitMQ
//! ([`amqp`], with `lapin`), NATS JetStream ([`jetstream`], with `async-nats`) and
//! PostgreSQL ([`postgres`], with `tokio-postgres`).
//!
//! The connectors know nothing of flows or pipelines: a consumer hands out messages that
//! carry their own acknowledgement handle, so the caller acknowledges only after its own
//! commit, and negatively acknowledges (the broker redelivers) after a rollback. Every
//! connector runs on the process's one shared tokio runtime, given as a
//! [`tokio::runtime::Handle`]; none starts a runtime of its own.
//!
//! Failures of the connection never panic and never end a consumer: it logs a warning
//! (without credentials), reports itself as disconnected through [`Health`], and connects
//! again with a growing delay, resuming where the broker's durable state says.
//!
//! Delivery guarantee: at least once. A consumer's message is acknowledged only after the
//! caller's commit, so a crash between the two delivers it again; a caller writing to
//! PostgreSQL makes the rewrite harmless with an UPSERT on key columns
//! ([`postgres::StatementType::Upsert`]). [`postgres::RecordWriter::write_in_transaction`]
//! keeps one database transaction open across calls (bad items set aside by savepoints) for
//! a caller that commits it with its own transaction, before it acknowledges. Every database
//! call is bounded ([`postgres::PgTimeouts`]); a JetStream message held longer than its ack
//! wait is kept with in-progress acks ([`jetstream::keep_in_progress`]); and a consumer can
//! hand out redelivered messages in batches of their own
//! ([`amqp::AmqpConsumer::isolate_redelivered`]), so that a caller can count a poison
//! message's deliveries ([`amqp::AmqpMessage::prior_deliveries`],
//! [`jetstream::JetStreamMessage::delivered`]) without failing its batch-mates.
//!
//! ```no_run
//! use std::time::Duration;
//! use weir_connectors::amqp::{AmqpConfig, AmqpConsumer};
//!
//! let runtime = tokio::runtime::Runtime::new().unwrap();
//! let config = AmqpConfig::new("127.0.0.1:5672", "/", "guest", "guest").unwrap();
//! let consumer = AmqpConsumer::start(runtime.handle(), config, "orders", 100);
//! runtime.block_on(async {
//!     for message in consumer.next_batch(10, Duration::from_secs(1)).await {
//!         // ... commit what the message says, then:
//!         message.ack().await.ok();
//!     }
//! });
//! ```

pub mod amqp;
pub mod jetstream;
pub mod postgres;

use std::sync::Mutex;
use std::time::Duration;
use weir_backoff::Backoff;

/// Why a connector operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectorError {
    /// The server cannot be reached or the connection broke: try again later.
    #[error("{server} unavailable: {reason}")]
    Unavailable {
        /// Which server (host and port; never credentials).
        server: String,
        /// The client's error.
        reason: String,
    },
    /// The server refused this piece of data (a negative publisher confirm, a bad record).
    #[error("refused: {0}")]
    Refused(String),
    /// A setting that cannot work (a malformed address).
    #[error("bad configuration: {0}")]
    Config(String),
}

/// The state of a connector's connection, for status lines and bulletins.
#[derive(Debug, Default)]
pub struct Health {
    state: Mutex<HealthState>,
}

/// A copy of [`Health`] at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthState {
    /// True while connected.
    pub connected: bool,
    /// The last connection error, if the connector is not connected.
    pub last_error: Option<String>,
    /// How many times a connection was established.
    pub connects: u64,
}

impl Health {
    /// The current state.
    pub fn get(&self) -> HealthState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn up(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.connected = true;
        s.last_error = None;
        s.connects += 1;
    }

    pub(crate) fn down(&self, error: String) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.connected = false;
        s.last_error = Some(error);
    }
}

/// The delay before the next connection attempt: 100 ms, doubling up to 5 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    const RECONNECT: Backoff =
        Backoff::new(Duration::from_millis(100), 2.0, Duration::from_secs(5));
    RECONNECT.pause(attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_five_seconds() {
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(3), Duration::from_millis(800));
        assert_eq!(backoff(30), Duration::from_secs(5));
    }
}
