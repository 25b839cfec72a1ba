//! NATS JetStream with `async-nats`: a durable pull consumer with explicit acks, and a
//! publisher that waits for the stream's acknowledgement.
//!
//! [`JetStreamConsumer`] binds (creating if needed) a durable pull consumer with
//! `AckPolicy::Explicit` on an existing stream and pulls messages into a small buffer. The
//! caller acks a message after its commit, or naks it with a delay after a rollback, so the
//! server redelivers it once the delay has passed. A message neither acked nor naked is
//! redelivered after the consumer's ack wait. When the connection breaks, the consumer logs
//! a warning and binds again; the durable consumer's state on the server says where it
//! resumes.
//!
//! ```no_run
//! # async fn demo(handle: tokio::runtime::Handle) -> Result<(), weir_connectors::ConnectorError> {
//! use std::time::Duration;
//! use weir_connectors::jetstream::{JetStreamConfig, JetStreamConsumer, JetStreamPublisher};
//! let config = JetStreamConfig::new("nats://127.0.0.1:4222", None, None);
//! JetStreamPublisher::new(config.clone()).publish("orders.new", b"{}").await?;
//! let consumer = JetStreamConsumer::start(&handle, config, "ORDERS", "orders.>", "weir", Duration::from_secs(30), 100);
//! for m in consumer.next_batch(10, Duration::from_secs(1)).await {
//!     m.ack().await?;
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::pull};
use futures::StreamExt;
use tokio::sync::{Mutex, OnceCell, mpsc};

use crate::{ConnectorError, Health, backoff};

/// Where and as whom to connect. Credentials are never printed.
#[derive(Clone)]
pub struct JetStreamConfig {
    url: String,
    user: Option<String>,
    password: Option<String>,
}

impl fmt::Debug for JetStreamConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JetStreamConfig({self})")
    }
}

impl fmt::Display for JetStreamConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A URL may carry `user:password@`: show only what follows the `@`.
        let shown = match self.url.split_once("://") {
            Some((scheme, rest)) => {
                format!(
                    "{scheme}://{}",
                    rest.rsplit_once('@').map_or(rest, |(_, h)| h)
                )
            }
            None => self
                .url
                .rsplit_once('@')
                .map_or(self.url.clone(), |(_, h)| h.into()),
        };
        f.write_str(&shown)
    }
}

impl JetStreamConfig {
    /// A configuration for the server at `url`, with an optional user and password.
    pub fn new(url: &str, user: Option<&str>, password: Option<&str>) -> JetStreamConfig {
        JetStreamConfig {
            url: url.to_string(),
            user: user.filter(|u| !u.is_empty()).map(str::to_string),
            password: password.map(str::to_string),
        }
    }

    fn unavailable(&self, e: impl fmt::Display) -> ConnectorError {
        ConnectorError::Unavailable {
            server: self.to_string(),
            reason: e.to_string(),
        }
    }

    /// Connects and returns the JetStream context.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`].
    pub async fn connect(&self) -> Result<jetstream::Context, ConnectorError> {
        let mut options = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .retry_on_initial_connect();
        if let Some(user) = &self.user {
            options =
                options.user_and_password(user.clone(), self.password.clone().unwrap_or_default());
        }
        // `retry_on_initial_connect` makes `connect` return at once; a first request that
        // cannot be served shows the failure.
        let client = async_nats::ConnectOptions::connect(options, self.url.as_str())
            .await
            .map_err(|e| self.unavailable(e))?;
        Ok(jetstream::new(client))
    }
}

/// One message from the stream. Ack it after the commit; nak it (with a delay) after a
/// rollback.
pub struct JetStreamMessage {
    /// The payload.
    pub body: Vec<u8>,
    /// The subject it was published on.
    pub subject: String,
    /// Its sequence number in the stream.
    pub stream_sequence: u64,
    /// How many times it has been delivered (1 the first time).
    pub delivered: i64,
    acker: jetstream::message::Acker,
}

impl fmt::Debug for JetStreamMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JetStreamMessage")
            .field("subject", &self.subject)
            .field("stream_sequence", &self.stream_sequence)
            .field("delivered", &self.delivered)
            .finish()
    }
}

impl JetStreamMessage {
    /// Acknowledges the message: the consumer moves past it.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`]; the server redelivers after the ack wait.
    pub async fn ack(&self) -> Result<(), ConnectorError> {
        self.acker
            .ack()
            .await
            .map_err(|e| ConnectorError::Unavailable {
                server: "jetstream".into(),
                reason: e.to_string(),
            })
    }

    /// Tells the server the message is still being worked on (`+WPI`, an in-progress ack):
    /// its ack wait starts again, so it is not redelivered meanwhile. One small publish.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`]; the ack wait then runs on from the last one sent.
    pub async fn in_progress(&self) -> Result<(), ConnectorError> {
        self.acker
            .ack_with(AckKind::Progress)
            .await
            .map_err(|e| ConnectorError::Unavailable {
                server: "jetstream".into(),
                reason: e.to_string(),
            })
    }

    /// Negatively acknowledges it: the server redelivers it after `delay` (at once for zero).
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`]; the server redelivers after the ack wait.
    pub async fn nak(&self, delay: Duration) -> Result<(), ConnectorError> {
        let delay = (!delay.is_zero()).then_some(delay);
        self.acker
            .ack_with(AckKind::Nak(delay))
            .await
            .map_err(|e| ConnectorError::Unavailable {
                server: "jetstream".into(),
                reason: e.to_string(),
            })
    }
}

/// How often [`keep_in_progress`] tells the server that messages are still worked on, for a
/// consumer's `ack_wait`: three times per ack wait, so that one lost or late `+WPI` does not
/// let the wait run out; at least every 50 ms apart.
pub fn progress_interval(ack_wait: Duration) -> Duration {
    (ack_wait / 3).max(Duration::from_millis(50))
}

/// Sends an in-progress ack (`+WPI`) for every message of `messages` at once and then every
/// `every`, on `runtime`, until the returned guard is dropped: messages held while a long
/// transaction runs (or while they wait in the consumer's buffer) are not redelivered to
/// another consumer when the ack wait passes. Costs one small publish per message per
/// interval. Drop the guard before acking or naking: no `+WPI` is sent after it is dropped
/// (one already on its way is harmless, the server ignores it for a settled message).
pub fn keep_in_progress(
    runtime: &tokio::runtime::Handle,
    messages: Arc<[JetStreamMessage]>,
    every: Duration,
) -> InProgress {
    let task = runtime.spawn(async move {
        loop {
            for m in messages.iter() {
                if let Err(e) = m.in_progress().await {
                    tracing::debug!("ConsumeJetStream: an in-progress ack failed: {e}");
                }
            }
            tokio::time::sleep(every).await;
        }
    });
    InProgress(task)
}

/// Stops [`keep_in_progress`]'s acks when dropped.
#[derive(Debug)]
pub struct InProgress(tokio::task::JoinHandle<()>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A durable pull consumer. See the [module docs](self).
pub struct JetStreamConsumer {
    receiver: Mutex<Receiving>,
    generation: Arc<AtomicU64>,
    /// See [`JetStreamConsumer::isolate_redelivered`].
    isolate: AtomicBool,
    health: Arc<Health>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

/// The consumer's buffer of pulled messages, and those a batch held back (each with the
/// generation of the binding it came from).
struct Receiving {
    rx: mpsc::Receiver<(u64, JetStreamMessage)>,
    held: std::collections::VecDeque<(u64, JetStreamMessage)>,
}

impl Receiving {
    /// The next message, held back ones first; `None` when none is ready now.
    fn try_next(&mut self) -> Option<(u64, JetStreamMessage)> {
        self.held.pop_front().or_else(|| self.rx.try_recv().ok())
    }
}

impl fmt::Debug for JetStreamConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JetStreamConsumer({:?})", self.health.get())
    }
}

impl JetStreamConsumer {
    /// Starts pulling from the durable consumer `durable` of `stream` (created with
    /// `filter_subject` and `ack_wait` if it does not exist), at most `batch` messages per
    /// pull. Returns at once; the connection is made (and remade) in the background.
    pub fn start(
        runtime: &tokio::runtime::Handle,
        config: JetStreamConfig,
        stream: &str,
        filter_subject: &str,
        durable: &str,
        ack_wait: Duration,
        batch: usize,
    ) -> JetStreamConsumer {
        let batch = batch.max(1);
        let (tx, rx) = mpsc::channel(batch);
        let generation = Arc::new(AtomicU64::new(0));
        let health = Arc::new(Health::default());
        let stop = Arc::new(AtomicBool::new(false));
        let target = Target {
            stream: stream.to_string(),
            filter_subject: filter_subject.to_string(),
            durable: durable.to_string(),
            ack_wait,
            batch,
        };
        let task = runtime.spawn(consume_loop(
            config,
            target,
            tx,
            Arc::clone(&generation),
            Arc::clone(&health),
            Arc::clone(&stop),
        ));
        JetStreamConsumer {
            receiver: Mutex::new(Receiving {
                rx,
                held: Default::default(),
            }),
            generation,
            isolate: AtomicBool::new(false),
            health,
            stop,
            task,
        }
    }

    /// With `on`, [`next_batch`](Self::next_batch) hands out a redelivered message in a
    /// batch of its own, and ends a batch before one: a message that made its batch roll
    /// back (a poison message) then fails alone, and the others of its batch go through.
    pub fn isolate_redelivered(&self, on: bool) {
        self.isolate.store(on, Ordering::Relaxed);
    }

    /// Waits up to `wait` for a first message, then takes whatever else is ready, up to
    /// `max` in all.
    pub async fn next_batch(&self, max: usize, wait: Duration) -> Vec<JetStreamMessage> {
        let mut receiving = self.receiver.lock().await;
        let current = self.generation.load(Ordering::SeqCst);
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        while out.is_empty() {
            let next = match receiving.held.pop_front() {
                Some(m) => Some(m),
                None => match tokio::time::timeout_at(deadline, receiving.rx.recv()).await {
                    Ok(Some(m)) => Some(m),
                    Ok(None) | Err(_) => return out,
                },
            };
            if let Some((g, m)) = next
                && g == current
            {
                // Room for a full batch at once: growing it copies the messages.
                out.reserve(max.clamp(1, 1024));
                out.push(m);
            }
        }
        while out.len() < max.max(1) {
            match receiving.try_next() {
                Some((g, m)) if g == current => out.push(m),
                Some(_) => {}
                None => break,
            }
        }
        if self.isolate.load(Ordering::Relaxed) {
            // A redelivered message alone; otherwise the batch ends before the first one.
            let cut = match out.iter().position(|m| m.delivered > 1) {
                Some(0) => 1,
                Some(i) => i,
                None => out.len(),
            };
            for m in out.drain(cut..).rev() {
                receiving.held.push_front((current, m));
            }
        }
        out
    }

    /// The connection's state.
    pub fn health(&self) -> &Health {
        &self.health
    }
}

impl Drop for JetStreamConsumer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.abort();
    }
}

struct Target {
    stream: String,
    filter_subject: String,
    durable: String,
    ack_wait: Duration,
    batch: usize,
}

async fn consume_loop(
    config: JetStreamConfig,
    target: Target,
    tx: mpsc::Sender<(u64, JetStreamMessage)>,
    generation: Arc<AtomicU64>,
    health: Arc<Health>,
    stop: Arc<AtomicBool>,
) {
    let mut attempt = 0;
    while !stop.load(Ordering::SeqCst) {
        let outcome = consume_once(&config, &target, &tx, &generation, &health).await;
        generation.fetch_add(1, Ordering::SeqCst);
        if tx.is_closed() {
            return;
        }
        let error = match outcome {
            Ok(()) => "the message stream ended".to_string(),
            Err(e) => e.to_string(),
        };
        if health.get().connected {
            attempt = 0;
        }
        tracing::warn!("ConsumeJetStream: {error}; binding the consumer again");
        health.down(error);
        tokio::time::sleep(backoff(attempt)).await;
        attempt += 1;
    }
}

async fn consume_once(
    config: &JetStreamConfig,
    target: &Target,
    tx: &mpsc::Sender<(u64, JetStreamMessage)>,
    generation: &AtomicU64,
    health: &Health,
) -> Result<(), ConnectorError> {
    let context = config.connect().await?;
    let stream = context
        .get_stream(&target.stream)
        .await
        .map_err(|e| config.unavailable(format!("stream `{}`: {e}", target.stream)))?;
    let consumer: jetstream::consumer::Consumer<pull::Config> = stream
        .get_or_create_consumer(
            &target.durable,
            pull::Config {
                durable_name: Some(target.durable.clone()),
                filter_subject: target.filter_subject.clone(),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait: target.ack_wait,
                ..pull::Config::default()
            },
        )
        .await
        .map_err(|e| config.unavailable(format!("consumer `{}`: {e}", target.durable)))?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(target.batch)
        .heartbeat(Duration::from_secs(2))
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .map_err(|e| config.unavailable(e))?;
    health.up();
    let current = generation.load(Ordering::SeqCst);
    while let Some(m) = messages.next().await {
        let m = m.map_err(|e| config.unavailable(e))?;
        let (stream_sequence, delivered) = m
            .info()
            .map(|i| (i.stream_sequence, i.delivered))
            .unwrap_or((0, 1));
        let (message, acker) = m.split();
        let message = JetStreamMessage {
            body: message.payload.to_vec(),
            subject: message.subject.to_string(),
            stream_sequence,
            delivered,
            acker,
        };
        if tx.send((current, message)).await.is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// A publisher that waits for the stream's acknowledgement. It connects on first use.
pub struct JetStreamPublisher {
    config: JetStreamConfig,
    context: OnceCell<jetstream::Context>,
}

impl fmt::Debug for JetStreamPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JetStreamPublisher({})", self.config)
    }
}

impl JetStreamPublisher {
    /// A publisher for `config` (no connection yet).
    pub fn new(config: JetStreamConfig) -> JetStreamPublisher {
        JetStreamPublisher {
            config,
            context: OnceCell::new(),
        }
    }

    /// Publishes `body` on `subject` and waits until a stream has stored it.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`] when the server cannot be reached or no stream takes
    /// the subject in time.
    pub async fn publish(&self, subject: &str, body: &[u8]) -> Result<(), ConnectorError> {
        let context = self
            .context
            .get_or_try_init(|| self.config.connect())
            .await?;
        let ack = context
            .publish(subject.to_string(), body.to_vec().into())
            .await
            .map_err(|e| self.config.unavailable(e))?;
        ack.await.map_err(|e| self.config.unavailable(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_the_url_are_not_shown() {
        let c = JetStreamConfig::new("nats://u:secret@127.0.0.1:4222", None, Some("pw"));
        assert_eq!(c.to_string(), "nats://127.0.0.1:4222");
        assert!(!format!("{c:?}").contains("secret"));
        assert!(!format!("{c:?}").contains("pw"));
    }
}
