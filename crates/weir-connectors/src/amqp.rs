//! AMQP 0-9-1 (RabbitMQ) with `lapin`: a consumer with manual acknowledgements and a
//! publisher that waits for publisher confirms.
//!
//! [`AmqpConsumer`] keeps one connection and channel on the shared runtime, consumes a queue
//! with `no_ack = false` and a prefetch window, and hands out [`AmqpMessage`]s. The caller
//! acknowledges a message only after it has committed what the message carried, or
//! negatively acknowledges it with requeue after a rollback, so the broker redelivers it.
//! When the connection breaks, the broker requeues every unacknowledged message; the consumer
//! drops the messages it still buffers from the broken channel, logs a warning and connects
//! again.
//!
//! A batch is best settled with [`AmqpSettler::settle`], which settles batches in the order
//! they are handed over and acknowledges a batch with one `multiple` ack (one frame instead
//! of one per message) whenever that acknowledges nothing else: the consumer keeps the tags
//! of its channel's messages that are not settled yet, and when one below the batch's highest
//! tag belongs to another batch (one waiting out a penalty before its requeue, say), the
//! batch is acknowledged message by message instead.
//!
//! ```no_run
//! # async fn demo(handle: tokio::runtime::Handle) -> Result<(), weir_connectors::ConnectorError> {
//! use weir_connectors::amqp::{AmqpConfig, AmqpPublisher};
//! let config = AmqpConfig::new("127.0.0.1:5672", "/", "guest", "guest")?;
//! let publisher = AmqpPublisher::new(config);
//! publisher.publish("", "orders", b"{\"id\":1}").await?; // returns once the broker confirmed
//! # Ok(()) }
//! ```

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::FieldTable;
use lapin::uri::{AMQPAuthority, AMQPUri, AMQPUserInfo};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use smol_str::SmolStr;
use tokio::sync::{Mutex, Notify, mpsc};

use crate::{ConnectorError, Health, backoff};

/// Where and as whom to connect. The password is never printed: `Debug` and `Display`
/// show the server only.
#[derive(Clone)]
pub struct AmqpConfig {
    host: String,
    port: u16,
    vhost: String,
    user: String,
    password: String,
}

impl fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AmqpConfig({self})")
    }
}

impl fmt::Display for AmqpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "amqp://{}:{}{}", self.host, self.port, self.vhost)
    }
}

impl AmqpConfig {
    /// A configuration from NiFi's properties: `Brokers` as `host:port` (the first of a
    /// comma-separated list), the virtual host, the user name and the password.
    ///
    /// # Errors
    /// [`ConnectorError::Config`] when `brokers` is not `host:port`.
    pub fn new(
        brokers: &str,
        vhost: &str,
        user: &str,
        password: &str,
    ) -> Result<AmqpConfig, ConnectorError> {
        let first = brokers.split(',').next().unwrap_or("").trim();
        let (host, port) = match first.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>().map_err(|_| {
                    ConnectorError::Config(format!("Brokers: bad port in `{first}`"))
                })?,
            ),
            None => (first, 5672),
        };
        if host.is_empty() {
            return Err(ConnectorError::Config("Brokers: empty host".into()));
        }
        Ok(AmqpConfig {
            host: host.to_string(),
            port,
            vhost: if vhost.is_empty() {
                "/".into()
            } else {
                vhost.into()
            },
            user: user.to_string(),
            password: password.to_string(),
        })
    }

    fn uri(&self) -> AMQPUri {
        AMQPUri {
            authority: AMQPAuthority {
                userinfo: AMQPUserInfo {
                    username: self.user.clone(),
                    password: self.password.clone(),
                },
                host: self.host.clone(),
                port: self.port,
            },
            vhost: self.vhost.clone(),
            ..AMQPUri::default()
        }
    }

    fn unavailable(&self, e: impl fmt::Display) -> ConnectorError {
        ConnectorError::Unavailable {
            server: self.to_string(),
            reason: e.to_string(),
        }
    }

    /// Opens a connection and a channel.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`].
    pub async fn connect(&self) -> Result<(Connection, Channel), ConnectorError> {
        let conn = Connection::connect_uri(self.uri(), ConnectionProperties::default())
            .await
            .map_err(|e| self.unavailable(e))?;
        let channel = conn
            .create_channel()
            .await
            .map_err(|e| self.unavailable(e))?;
        Ok((conn, channel))
    }
}

/// One delivered message. Acknowledge it with [`AmqpMessage::ack`] after the commit, or
/// hand it back with [`AmqpMessage::nack_requeue`]; a message dropped unacknowledged stays
/// with the broker, which redelivers it when the connection closes.
pub struct AmqpMessage {
    /// The payload.
    pub body: Vec<u8>,
    /// The exchange it was published to (empty for the default exchange); cloning it
    /// shares the text, so that a flow file's attribute holds it without a copy.
    pub exchange: SmolStr,
    /// Its routing key, shared as `exchange` is.
    pub routing_key: SmolStr,
    /// True when the broker delivered it before.
    pub redelivered: bool,
    /// How many times the broker delivered it before, when the broker counts (a quorum
    /// queue's `x-delivery-count` header); `None` for a classic queue, which only says
    /// whether it was [`redelivered`](Self::redelivered).
    pub prior_deliveries: Option<u64>,
    /// The channel's delivery tag.
    pub delivery_tag: u64,
    /// String-valued headers and properties (`content_type`, `message_id`, ...).
    pub headers: Vec<(String, String)>,
    acker: lapin::Acker,
    outstanding: Arc<Outstanding>,
}

/// The delivery tags of one channel's messages that are not settled yet: a `multiple` ack up
/// to a tag is safe only when every tag below it that is still here is the ack's own.
#[derive(Debug, Default)]
struct Outstanding(std::sync::Mutex<BTreeSet<u64>>);

impl Outstanding {
    fn tags(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn channel_error(e: lapin::Error) -> ConnectorError {
    ConnectorError::Unavailable {
        server: "amqp channel".into(),
        reason: e.to_string(),
    }
}

impl fmt::Debug for AmqpMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpMessage")
            .field("routing_key", &self.routing_key)
            .field("delivery_tag", &self.delivery_tag)
            .field("len", &self.body.len())
            .finish()
    }
}

impl AmqpMessage {
    /// Acknowledges the message: the broker forgets it.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`] when the channel closed meanwhile; the broker has
    /// then requeued the message and will deliver it again.
    pub async fn ack(&self) -> Result<(), ConnectorError> {
        let result = self.acker.ack(BasicAckOptions::default()).await;
        self.outstanding.tags().remove(&self.delivery_tag);
        result.map(drop).map_err(channel_error)
    }

    /// Acknowledges every message of `messages`. Per channel, when no message of that
    /// channel below the highest tag of the batch is left unsettled outside the batch, one
    /// `multiple` ack covers the batch; otherwise each message is acknowledged alone. Either
    /// way no message outside `messages` is acknowledged.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`] when a channel closed meanwhile; the broker has then
    /// requeued its messages. The messages of other channels are still acknowledged.
    pub async fn ack_all(messages: Vec<AmqpMessage>) -> Result<(), ConnectorError> {
        let mut result = Ok(());
        let mut rest = messages;
        while let Some(first) = rest.first() {
            let channel = Arc::clone(&first.outstanding);
            let (batch, others): (Vec<AmqpMessage>, Vec<AmqpMessage>) = rest
                .into_iter()
                .partition(|m| Arc::ptr_eq(&m.outstanding, &channel));
            rest = others;
            if let Err(e) = ack_one_channel(&channel, &batch).await {
                result = Err(e);
            }
        }
        result
    }

    /// Negatively acknowledges the message with requeue: the broker delivers it again.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`] when the channel closed meanwhile (the broker has
    /// requeued it anyway).
    pub async fn nack_requeue(&self) -> Result<(), ConnectorError> {
        let result = self
            .acker
            .nack(BasicNackOptions {
                requeue: true,
                multiple: false,
            })
            .await;
        self.outstanding.tags().remove(&self.delivery_tag);
        result.map(drop).map_err(channel_error)
    }
}

/// Acknowledges `batch`, all of one channel: one `multiple` ack when that covers nothing
/// else, else one ack each. A tag leaves `channel` only once its frame is sent, so a later
/// batch never acknowledges past a message whose settlement is still to come.
async fn ack_one_channel(
    channel: &Outstanding,
    batch: &[AmqpMessage],
) -> Result<(), ConnectorError> {
    let Some(highest) = batch.iter().max_by_key(|m| m.delivery_tag) else {
        return Ok(());
    };
    let own: BTreeSet<u64> = batch.iter().map(|m| m.delivery_tag).collect();
    let alone = channel
        .tags()
        .range(..highest.delivery_tag)
        .all(|t| own.contains(t));
    let mut result = Ok(());
    if alone && batch.len() > 1 {
        result = highest
            .acker
            .ack(BasicAckOptions { multiple: true })
            .await
            .map(drop)
            .map_err(channel_error);
    } else {
        for m in batch {
            if let Err(e) = m.acker.ack(BasicAckOptions::default()).await {
                result = Err(channel_error(e));
            }
        }
    }
    let mut tags = channel.tags();
    for t in &own {
        tags.remove(t);
    }
    result
}

/// How [`AmqpSettler::settle`] settles a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Acknowledge: the broker forgets the messages.
    Ack,
    /// Negatively acknowledge with requeue, so that the broker delivers them again; after
    /// `delay` when set (AMQP has no delayed requeue: meanwhile they stay unacknowledged,
    /// so still this consumer's, and redelivered if it dies).
    Requeue {
        /// How long to hold them first.
        delay: Option<Duration>,
    },
}

/// Settles batches of a consumer's messages in the order they are handed over, on the
/// runtime, without waiting. Cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct AmqpSettler(mpsc::UnboundedSender<(Vec<AmqpMessage>, Settlement)>);

impl fmt::Debug for AmqpSettler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AmqpSettler")
    }
}

impl AmqpSettler {
    /// Queues `messages` to be settled as `how`. A failure (the channel closed) is logged:
    /// the broker has requeued the messages, so they come again, never lost.
    pub fn settle(&self, messages: Vec<AmqpMessage>, how: Settlement) {
        if let Err(mpsc::error::SendError((messages, _))) = self.0.send((messages, how)) {
            // The settling task is gone (the runtime is shutting down): the messages stay
            // unacknowledged and the broker redelivers them.
            drop(messages);
        }
    }
}

async fn settle_loop(mut batches: mpsc::UnboundedReceiver<(Vec<AmqpMessage>, Settlement)>) {
    while let Some((messages, how)) = batches.recv().await {
        match how {
            Settlement::Ack => {
                if let Err(e) = AmqpMessage::ack_all(messages).await {
                    tracing::warn!("ConsumeAMQP: ack failed, the messages will come again: {e}");
                }
            }
            Settlement::Requeue { delay: None } => requeue(messages).await,
            Settlement::Requeue { delay: Some(d) } => {
                // Held apart, so that the batches after it are not held up; their acks
                // stay single until these are settled.
                tokio::spawn(async move {
                    tokio::time::sleep(d).await;
                    requeue(messages).await;
                });
            }
        }
    }
}

async fn requeue(messages: Vec<AmqpMessage>) {
    for m in &messages {
        // A failure means the channel closed: the broker requeued the message already.
        let _ = m.nack_requeue().await;
    }
}

/// A queue consumer with manual acknowledgements. See the [module docs](self).
///
/// A background task makes (and remakes) the connection; [`AmqpConsumer::next_batch`] reads
/// the channel's deliveries itself, with no hand-off between tasks on the way.
pub struct AmqpConsumer {
    live: Arc<Mutex<Option<Live>>>,
    /// Notified when a connection is made.
    connected: Arc<Notify>,
    /// Notified when [`AmqpConsumer::next_batch`] finds the channel broken.
    broken: Arc<Notify>,
    settler: AmqpSettler,
    health: Arc<Health>,
    stop: Arc<AtomicBool>,
    /// See [`AmqpConsumer::isolate_redelivered`].
    isolate: AtomicBool,
    task: tokio::task::JoinHandle<()>,
}

/// A connection consuming the queue.
struct Live {
    _conn: Connection,
    _channel: Channel,
    consumer: lapin::Consumer,
    outstanding: Arc<Outstanding>,
    /// Messages read ahead by [`AmqpConsumer::read_ahead`], handed out first by the next
    /// [`AmqpConsumer::next_batch`]. They go with the connection: when it breaks, the broker
    /// requeues them with the rest.
    ready: VecDeque<AmqpMessage>,
    /// The exchanges and routing keys of the last messages: the next mostly has one of
    /// them, and then shares the text instead of copying it (a long key is an allocation
    /// each).
    exchanges: RecentTexts,
    routing_keys: RecentTexts,
}

/// The last few distinct texts seen, to share instead of copy: a queue bound to a topic
/// exchange mostly receives a handful of routing keys, often in turn (`orders.eu`,
/// `orders.us`, ...), which one remembered text would miss every time.
///
/// A look-up compares `text` with at most [`RecentTexts::KEPT`] texts (lengths first); a
/// text not among them replaces the one held longest.
#[derive(Debug, Default)]
struct RecentTexts {
    texts: [SmolStr; RecentTexts::KEPT],
    /// Where the next new text goes.
    next: usize,
}

impl RecentTexts {
    const KEPT: usize = 4;

    /// `text` as a shared string: one held already when it has the same text.
    fn shared(&mut self, text: &str) -> SmolStr {
        if let Some(held) = self.texts.iter().find(|t| t.as_str() == text) {
            return held.clone();
        }
        let made = SmolStr::new(text);
        self.texts[self.next] = made.clone();
        self.next = (self.next + 1) % Self::KEPT;
        made
    }
}

/// Why a channel ended, from its last item: an error, or none when the broker cancelled.
fn channel_end(end: Option<Result<lapin::message::Delivery, lapin::Error>>) -> String {
    match end {
        Some(Err(e)) => format!("amqp channel: {e}"),
        _ => "the broker cancelled the consumer".to_string(),
    }
}

impl Live {
    /// Hands `put` up to `room` of the messages the client has already received, without
    /// waiting. `Err` with why when the channel ended.
    fn take_received(
        &mut self,
        room: usize,
        mut put: impl FnMut(AmqpMessage),
    ) -> Result<(), String> {
        // One lock for the batch's tags, not one per message.
        let outstanding = Arc::clone(&self.outstanding);
        let mut tags = outstanding.tags();
        for _ in 0..room {
            match futures::FutureExt::now_or_never(self.consumer.next()) {
                None => break,
                Some(Some(Ok(d))) => put(self.message(d, &mut tags)),
                Some(end) => return Err(channel_end(end)),
            }
        }
        Ok(())
    }

    /// The delivery as a message, its tag added to `tags` (the channel's outstanding ones,
    /// locked by the caller).
    fn message(&mut self, d: lapin::message::Delivery, tags: &mut BTreeSet<u64>) -> AmqpMessage {
        let mut headers = Vec::new();
        let p = &d.properties;
        for (k, v) in [
            ("content_type", p.content_type()),
            ("content_encoding", p.content_encoding()),
            ("message_id", p.message_id()),
            ("correlation_id", p.correlation_id()),
            ("reply_to", p.reply_to()),
            ("app_id", p.app_id()),
            ("type", p.kind()),
        ] {
            if let Some(v) = v {
                headers.push((k.to_string(), v.to_string()));
            }
        }
        tags.insert(d.delivery_tag);
        let prior_deliveries = p
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get("x-delivery-count").and_then(count));
        AmqpMessage {
            prior_deliveries,
            body: d.data,
            exchange: self.exchanges.shared(d.exchange.as_str()),
            routing_key: self.routing_keys.shared(d.routing_key.as_str()),
            redelivered: d.redelivered,
            delivery_tag: d.delivery_tag,
            headers,
            acker: d.acker,
            outstanding: Arc::clone(&self.outstanding),
        }
    }
}

/// A header's whole number, of whichever integer type the broker sent.
fn count(v: &lapin::types::AMQPValue) -> Option<u64> {
    use lapin::types::AMQPValue as V;
    match v {
        V::ShortShortInt(n) => u64::try_from(*n).ok(),
        V::ShortShortUInt(n) => Some(u64::from(*n)),
        V::ShortInt(n) => u64::try_from(*n).ok(),
        V::ShortUInt(n) => Some(u64::from(*n)),
        V::LongInt(n) => u64::try_from(*n).ok(),
        V::LongUInt(n) => Some(u64::from(*n)),
        V::LongLongInt(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

impl fmt::Debug for AmqpConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AmqpConsumer({:?})", self.health.get())
    }
}

impl AmqpConsumer {
    /// Starts consuming `queue` on `runtime`, with at most `prefetch` unacknowledged
    /// messages on the channel. The queue must exist. Returns at once: the connection is
    /// made (and remade) in the background.
    pub fn start(
        runtime: &tokio::runtime::Handle,
        config: AmqpConfig,
        queue: &str,
        prefetch: u16,
    ) -> AmqpConsumer {
        let live = Arc::new(Mutex::new(None));
        let connected = Arc::new(Notify::new());
        let broken = Arc::new(Notify::new());
        let health = Arc::new(Health::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (settle_tx, settle_rx) = mpsc::unbounded_channel();
        // Ends when the consumer and every settler handle are gone.
        runtime.spawn(settle_loop(settle_rx));
        let task = runtime.spawn(connect_loop(
            config,
            queue.to_string(),
            prefetch.max(1),
            Arc::clone(&live),
            Arc::clone(&connected),
            Arc::clone(&broken),
            Arc::clone(&health),
            Arc::clone(&stop),
        ));
        AmqpConsumer {
            live,
            connected,
            broken,
            settler: AmqpSettler(settle_tx),
            health,
            stop,
            isolate: AtomicBool::new(false),
            task,
        }
    }

    /// With `on`, [`next_batch`](Self::next_batch) hands out a redelivered message in a
    /// batch of its own, and ends a batch before one: a message that made its batch roll
    /// back (a poison message) then fails alone, and the others of its batch go through.
    /// The messages held back wait, received but unacknowledged, for the next batch.
    pub fn isolate_redelivered(&self, on: bool) {
        self.isolate.store(on, Ordering::Relaxed);
    }

    /// Waits up to `wait` for a first message, then takes whatever else is ready, up to
    /// `max` in all. When the channel turns out broken, the messages taken from it in this
    /// call are dropped (the broker has requeued them) and the connection is made again.
    pub async fn next_batch(&self, max: usize, wait: Duration) -> Vec<AmqpMessage> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut slot = self.live.lock().await;
        if slot.is_none() {
            drop(slot);
            // Registered before looking again, so that a connection made in between is
            // not missed.
            let notified = self.connected.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let missing = self.live.lock().await.is_none();
            if missing && tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Vec::new();
            }
            slot = self.live.lock().await;
        }
        let Some(live) = slot.as_mut() else {
            return Vec::new();
        };
        // Room for a full batch at once: growing a vector of messages copies them.
        let mut out = Vec::with_capacity(max.clamp(1, 1024));
        let ahead = live.ready.len().min(max.max(1));
        out.extend(live.ready.drain(..ahead));
        if out.is_empty() {
            let first = match tokio::time::timeout_at(deadline, live.consumer.next()).await {
                Err(_) => return Vec::new(),
                Ok(Some(Ok(d))) => d,
                Ok(end) => {
                    self.break_off(&mut slot, channel_end(end));
                    return Vec::new();
                }
            };
            let outstanding = Arc::clone(&live.outstanding);
            out.push(live.message(first, &mut outstanding.tags()));
        }
        let room = max.max(1) - out.len();
        if let Err(why) = live.take_received(room, |m| out.push(m)) {
            self.break_off(&mut slot, why);
            return Vec::new();
        }
        if self.isolate.load(Ordering::Relaxed) {
            // A redelivered message alone; otherwise the batch ends before the first one.
            let cut = match out.iter().position(|m| m.redelivered) {
                Some(0) => 1,
                Some(i) => i,
                None => out.len(),
            };
            for m in out.drain(cut..).rev() {
                live.ready.push_front(m);
            }
        }
        out
    }

    /// Takes the messages the client has already received, up to `max` held ahead in all,
    /// so that the next [`next_batch`](Self::next_batch) hands them out at once: a caller
    /// with a moment to spare (a stateless transaction waiting on its database) does the
    /// work of receiving them then. Never waits: it does nothing while a batch is being
    /// taken or before a connection is made. The messages are unacknowledged as before, and
    /// only the next batch settles them.
    pub fn read_ahead(&self, max: usize) {
        let Ok(mut slot) = self.live.try_lock() else {
            return;
        };
        let Some(live) = slot.as_mut() else {
            return;
        };
        let mut ready = std::mem::take(&mut live.ready);
        let room = max.saturating_sub(ready.len());
        let taken = live.take_received(room, |m| ready.push_back(m));
        live.ready = ready;
        if let Err(why) = taken {
            self.break_off(&mut slot, why);
        }
    }

    /// How many messages [`read_ahead`](Self::read_ahead) holds for the next batch.
    pub async fn held_ahead(&self) -> usize {
        self.live.lock().await.as_ref().map_or(0, |l| l.ready.len())
    }

    /// The channel ended (`error` says why): drop the connection, report it and have the
    /// background task connect again.
    fn break_off(&self, slot: &mut Option<Live>, error: String) {
        *slot = None;
        tracing::warn!("ConsumeAMQP: {error}; connecting again");
        self.health.down(error);
        self.broken.notify_one();
    }

    /// The connection's state.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// A handle that settles this consumer's messages in order (see [`AmqpSettler`]).
    pub fn settler(&self) -> AmqpSettler {
        self.settler.clone()
    }
}

impl Drop for AmqpConsumer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.abort();
    }
}

/// Connects, hands the connection to the consumer, and connects again (after a growing
/// delay) whenever the consumer finds it broken or connecting fails.
#[allow(clippy::too_many_arguments)]
async fn connect_loop(
    config: AmqpConfig,
    queue: String,
    prefetch: u16,
    live: Arc<Mutex<Option<Live>>>,
    connected: Arc<Notify>,
    broken: Arc<Notify>,
    health: Arc<Health>,
    stop: Arc<AtomicBool>,
) {
    let mut attempt = 0;
    while !stop.load(Ordering::SeqCst) {
        match connect_consumer(&config, &queue, prefetch).await {
            Ok(l) => {
                *live.lock().await = Some(l);
                health.up();
                connected.notify_waiters();
                broken.notified().await;
                attempt = 0;
            }
            Err(e) => {
                tracing::warn!("ConsumeAMQP: {e}; connecting again");
                health.down(e.to_string());
            }
        }
        tokio::time::sleep(backoff(attempt)).await;
        attempt += 1;
    }
}

async fn connect_consumer(
    config: &AmqpConfig,
    queue: &str,
    prefetch: u16,
) -> Result<Live, ConnectorError> {
    let (conn, channel) = config.connect().await?;
    channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await
        .map_err(|e| config.unavailable(e))?;
    let consumer = channel
        .basic_consume(
            queue.into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| config.unavailable(e))?;
    Ok(Live {
        _conn: conn,
        _channel: channel,
        consumer,
        outstanding: Arc::new(Outstanding::default()),
        ready: VecDeque::new(),
        exchanges: RecentTexts::default(),
        routing_keys: RecentTexts::default(),
    })
}

/// A publisher with publisher confirms: [`AmqpPublisher::publish`] returns once the broker
/// has taken responsibility for the message. It connects on first use and again after a
/// failure.
pub struct AmqpPublisher {
    config: AmqpConfig,
    channel: Mutex<Option<(Connection, Channel)>>,
}

impl fmt::Debug for AmqpPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AmqpPublisher({})", self.config)
    }
}

impl AmqpPublisher {
    /// A publisher for `config` (no connection yet).
    pub fn new(config: AmqpConfig) -> AmqpPublisher {
        AmqpPublisher {
            config,
            channel: Mutex::new(None),
        }
    }

    /// Publishes `body` (persistent) to `exchange` with `routing_key` and waits for the
    /// broker's confirm.
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`] when the broker cannot be reached (the next call
    /// connects again); [`ConnectorError::Refused`] on a negative confirm or when the message
    /// is returned as unroutable.
    pub async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
    ) -> Result<(), ConnectorError> {
        let mut guard = self.channel.lock().await;
        if guard
            .as_ref()
            .is_none_or(|(_, ch)| !ch.status().connected())
        {
            let (conn, channel) = self.config.connect().await?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(|e| self.config.unavailable(e))?;
            *guard = Some((conn, channel));
        }
        let Some((_, channel)) = guard.as_ref() else {
            unreachable!("connected above");
        };
        let result = async {
            channel
                .basic_publish(
                    exchange.into(),
                    routing_key.into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    body,
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await?
                .await
        }
        .await;
        match result {
            Ok(confirm) => {
                let accepted = confirm.is_ack() && confirm.take_message().is_none();
                if accepted {
                    Ok(())
                } else {
                    Err(ConnectorError::Refused(format!(
                        "the broker did not accept the message for exchange `{exchange}`, routing key `{routing_key}`"
                    )))
                }
            }
            Err(e) => {
                *guard = None;
                Err(self.config.unavailable(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_parses_brokers_and_never_shows_the_password() {
        let c = AmqpConfig::new("rabbit.local:5673,other:5672", "", "user", "s3cret").unwrap();
        assert_eq!(c.to_string(), "amqp://rabbit.local:5673/");
        assert!(!format!("{c:?}").contains("s3cret"));
        assert_eq!(AmqpConfig::new("h", "/", "u", "p").unwrap().port, 5672);
        assert!(AmqpConfig::new("h:x", "/", "u", "p").is_err());
        assert!(AmqpConfig::new(":1", "/", "u", "p").is_err());
    }

    #[test]
    fn recent_texts_share_keys_that_come_in_turn_and_forget_the_oldest() {
        let mut recent = RecentTexts::default();
        let long = |k: &str| format!("a.routing.key.longer.than.inline.{k}");
        let (even, odd) = (recent.shared(&long("even")), recent.shared(&long("odd")));
        // Keys in turn: each comes back as the text already held, not a copy.
        for _ in 0..3 {
            assert_eq!(recent.shared(&long("even")).as_ptr(), even.as_ptr());
            assert_eq!(recent.shared(&long("odd")).as_ptr(), odd.as_ptr());
        }
        // Four more keys push both out; the text is still right, in a new copy.
        for k in ["a", "b", "c", "d"] {
            assert_eq!(recent.shared(&long(k)), long(k));
        }
        let again = recent.shared(&long("even"));
        assert_eq!(again, long("even"));
        assert_ne!(again.as_ptr(), even.as_ptr());
    }
}
