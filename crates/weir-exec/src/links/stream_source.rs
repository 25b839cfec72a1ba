//! The head of a stream source vertex: reads, stamps each item with its event time, drops
//! late items, and sends the source's watermark after the items it covers.
//!
//! # Idleness
//!
//! A partition that delivers nothing for the idle timeout stops holding the source's
//! watermark back until it delivers again; when nothing at all arrives for that long, the
//! source tells its consumers it is idle, in band, after everything it sent.
//!
//! Only time spent trying to read counts, on a clock of the source's own (like Flink's
//! pausable clock): it stops while the chain cannot take more (backpressure), and it counts
//! at most `MAX_READ_GAP` between two read attempts, so a source whose worker was busy with
//! other tasklets for a while is not idle for that: a partition goes idle only after many
//! attempts that found nothing.
//!
//! # Snapshots
//!
//! As a batch source head (see [`crate::links::source`]), plus the event-time state: the
//! highest timestamp per partition, which partitions are idle, and the last watermark sent,
//! so that watermarks and lateness go on after a restore as in an uninterrupted run. The
//! pending watermark goes down the chain before the head saves.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::watermark::EventTimeTracker;
use weir_core::{
    BoxError, Counter, InstanceMetrics, Item, NextCall, Outbox, Processor, ProcessorContext,
    ProcessorResult, SnapshotEntry, SnapshotWriter, Watermark,
};

use crate::connector::SourceReader;
use crate::event_time::{TimestampFn, Timestamped};
use crate::links::link::{ErasedLink, Link, chain_idle, chain_watermark, save_chain, unerase};
use crate::links::read_ahead::{BATCH, ReadOutcome, SourceFeed};
use crate::links::source::{SavedEventTime, SavedSource, SourcePlace};
use crate::links::state::ChainEntries;

/// The most that one gap between two read attempts adds to the reading clock. An idle source
/// is asked to read at least every millisecond or so (its worker's longest pause); a longer
/// gap means it was not scheduled, not that it found nothing.
const MAX_READ_GAP: Duration = Duration::from_millis(5);

/// The largest stamped item a head gathers into a batch before handing it down the chain;
/// larger ones go one by one (see `StreamSourceHead::stamp`). A full batch of items this
/// size, [`BATCH`] of them, still fits a 32 KiB L1 data cache.
const BATCHED_ITEM_BYTES: usize = 32;

/// How a stream source assigns event time.
pub struct EventTimePolicy<T> {
    /// Reads an item's event time.
    pub timestamp: TimestampFn<T>,
    /// How far, in ms, an item may arrive behind the highest time seen before it is late.
    pub allowed_lag: i64,
    /// How long a partition may deliver nothing before it stops holding the watermark back;
    /// `None`: the job's idle timeout.
    pub idle_timeout: Option<Duration>,
}

impl<T> Clone for EventTimePolicy<T> {
    fn clone(&self) -> Self {
        EventTimePolicy {
            timestamp: Arc::clone(&self.timestamp),
            allowed_lag: self.allowed_lag,
            idle_timeout: self.idle_timeout,
        }
    }
}

/// The head processor of a stream source: it stamps each item with its event time, drops late
/// items, and emits watermarks per partition, idle partitions excluded.
pub struct StreamSourceHead<R: SourceReader> {
    feed: SourceFeed<R>,
    policy: EventTimePolicy<R::Item>,
    idle_timeout: Duration,
    tracker: EventTimeTracker,
    chain: Box<dyn Link<Timestamped<R::Item>>>,
    raw: Vec<R::Item>,
    /// Where each partition's items start in `raw` (see `Emitter::emit_from`).
    runs: Vec<(usize, u32)>,
    /// The reading clock (see the module docs): time spent trying to read.
    reading: Duration,
    /// The last read attempt, while the clock runs; `None` while the source is held back.
    last_attempt: Option<Instant>,
    /// When this instance said, parking its worker, that it next needs a call to notice
    /// idleness ([`Processor::next_call`]): the wait up to then was a wait for input, and
    /// counts on the reading clock in full.
    idle_call: Cell<Option<Instant>>,
    /// When each partition last delivered an item, on the reading clock.
    last_seen: Vec<Duration>,
    /// When anything last arrived, on the same clock.
    last_item: Duration,
    /// Whether the consumers were told this source is idle, since its last item.
    idle_sent: bool,
    /// Small stamped items gathered for one `push_batch` (see `stamp`).
    batch: Vec<Timestamped<R::Item>>,
    /// The last watermark the chain accepted, and one it still has to accept.
    sent: Watermark,
    pending: Option<Watermark>,
    exhausted: bool,
    /// A read failure, raised once the items read before it are down the chain.
    failed: Option<BoxError>,
    late: Counter,
    /// Where the watermark sent is recorded for observers; set in `init`.
    metrics: Option<Arc<InstanceMetrics>>,
    place: SourcePlace,
}

/// A stream source head reading with `reader` under `policy` into `chain`.
pub fn stream_source_head<R: SourceReader>(
    reader: R,
    policy: EventTimePolicy<R::Item>,
    chain: ErasedLink,
) -> Box<dyn Processor>
where
    R::Item: Item,
{
    Box::new(StreamSourceHead {
        feed: SourceFeed::new(reader),
        tracker: EventTimeTracker::new(1, policy.allowed_lag),
        idle_timeout: policy
            .idle_timeout
            .unwrap_or(weir_core::job::DEFAULT_IDLE_TIMEOUT),
        policy,
        chain: unerase::<Timestamped<R::Item>>(chain),
        raw: Vec::with_capacity(BATCH),
        runs: Vec::new(),
        reading: Duration::ZERO,
        last_attempt: None,
        idle_call: Cell::new(None),
        last_seen: Vec::new(),
        last_item: Duration::ZERO,
        idle_sent: false,
        batch: Vec::new(),
        sent: Watermark::MIN,
        pending: None,
        exhausted: false,
        failed: None,
        late: Counter::default(),
        metrics: None,
        place: SourcePlace::default(),
    })
}

impl<R: SourceReader> StreamSourceHead<R> {
    /// Flushes the chain's backlog and hands it the pending watermark; true when both are
    /// out. While they are not, the source is held back and its reading clock stops.
    fn drain_chain(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let mut out = self.chain.flush(outbox)?;
        if out && let Some(wm) = self.pending {
            out = chain_watermark(&mut *self.chain, wm, outbox)?;
            if out {
                self.sent = wm;
                self.pending = None;
                if let Some(m) = &self.metrics {
                    m.record_watermark(wm.timestamp());
                }
            }
        }
        if !out {
            self.last_attempt = None;
        }
        Ok(out)
    }

    /// Advances the reading clock for a read attempt made at `now`.
    fn tick(&mut self, now: Instant) {
        if let Some(last) = self.last_attempt {
            // A wait this instance asked for counts in full; beyond it, only a short gap.
            let allowed = self.idle_call.take().map_or(MAX_READ_GAP, |at| {
                at.saturating_duration_since(last) + MAX_READ_GAP
            });
            self.reading += now.duration_since(last).min(allowed);
        }
        self.last_attempt = Some(now);
    }

    /// How long, on the reading clock, until a partition or the whole source goes idle if
    /// nothing arrives; `None` when nothing is left to go idle.
    fn until_idle(&self) -> Option<Duration> {
        let mut next = (!self.idle_sent)
            .then(|| (self.last_item + self.idle_timeout).saturating_sub(self.reading));
        if self.last_seen.len() > 1 {
            for seen in &self.last_seen {
                let at = *seen + self.idle_timeout;
                if at > self.reading {
                    let wait = at - self.reading;
                    next = Some(next.map_or(wait, |n| n.min(wait)));
                }
            }
        }
        next
    }

    /// Stamps the items just read, drops the late ones, and notes which partitions spoke.
    ///
    /// A large item (more than [`BATCHED_ITEM_BYTES`] once stamped) goes down the chain as
    /// soon as it is stamped, one push per item; smaller ones are gathered into `batch` for
    /// one [`Link::push_batch`]. A batch of large items overflows the L1 cache, and every
    /// transform of the chain would write it and read it back once more: for the NEXMark
    /// events (112 bytes) the head's worker spends about a third less time per event
    /// pushing them one by one.
    fn stamp(&mut self) {
        let one_by_one = size_of::<Timestamped<R::Item>>() > BATCHED_ITEM_BYTES;
        let now = self.reading;
        let mut late = 0;
        let (mut partition, mut next_run) = (0usize, 0usize);
        let last = self.last_seen.len() - 1;
        let total = self.raw.len();
        if !one_by_one {
            self.batch.reserve(total);
        }
        let mut items = self.raw.drain(..);
        let mut from = 0;
        // A run at a time: its items are one partition's, so the per-item loop only stamps.
        while from < total {
            while let Some(&(start, p)) = self.runs.get(next_run)
                && start <= from
            {
                partition = (p as usize).min(last);
                next_run += 1;
            }
            let to = self
                .runs
                .get(next_run)
                .map_or(total, |&(start, _)| start.min(total));
            self.last_seen[partition] = now;
            for item in items.by_ref().take(to - from) {
                let timestamp = (self.policy.timestamp)(&item);
                if !self.tracker.accept(partition, timestamp) {
                    late += 1;
                } else if one_by_one {
                    self.chain.push(Timestamped { timestamp, item });
                } else {
                    self.batch.push(Timestamped { timestamp, item });
                }
            }
            from = to;
        }
        if late > 0 {
            self.late.add(late);
        }
        if self.last_seen.len() > 1 {
            for (p, seen) in self.last_seen.iter().enumerate() {
                if now - *seen >= self.idle_timeout {
                    self.tracker.mark_idle(p);
                }
            }
        }
    }
}

impl<R: SourceReader> Processor for StreamSourceHead<R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.late = ctx.metrics().counter("late_events");
        self.metrics = Some(Arc::clone(ctx.metrics()));
        self.idle_timeout = self.policy.idle_timeout.unwrap_or(ctx.idle_timeout());
        self.feed.open(ctx)?;
        let partitions = self.feed.partitions().max(1);
        self.tracker = EventTimeTracker::new(partitions, self.policy.allowed_lag);
        self.last_seen = vec![Duration::ZERO; partitions];
        self.place = SourcePlace::init(ctx, self.feed.replayable())?;
        self.chain.init(ctx)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.drain_chain(outbox)? {
            return Ok(false);
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if !self.exhausted {
            self.tick(Instant::now());
            self.runs.clear();
            match self.feed.read(&mut self.raw, Some(&mut self.runs)) {
                ReadOutcome::More => {}
                ReadOutcome::Exhausted => self.exhausted = true,
                ReadOutcome::Failed(e) => self.failed = Some(e),
            }
            let read = self.raw.len();
            if let Some(m) = &self.metrics {
                m.record_items_read(read);
            }
            if read > 0 {
                self.last_item = self.reading;
                self.idle_sent = false;
            }
            self.stamp();
            if read > 0 || self.exhausted || self.failed.is_some() {
                outbox.report_progress();
            }
            if !self.batch.is_empty() {
                self.chain.push_batch(&mut self.batch);
            }
            // One watermark per batch at most: throttled by construction.
            let wm = if self.exhausted {
                Watermark::MAX
            } else {
                self.tracker.watermark()
            };
            if wm > self.sent {
                self.pending = Some(wm);
            }
            if !self.drain_chain(outbox)? {
                return Ok(false);
            }
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            if !self.exhausted {
                if read == 0
                    && !self.idle_sent
                    && self.reading - self.last_item >= self.idle_timeout
                    && chain_idle(&mut *self.chain, outbox)?
                {
                    self.idle_sent = true;
                    outbox.report_progress();
                }
                return Ok(false);
            }
        }
        self.chain.complete(outbox)
    }

    /// Always the chain's say: a reader that may block reads ahead on an I/O thread.
    fn is_cooperative(&self) -> bool {
        self.chain.is_cooperative()
    }

    /// When the reader is due again (a paced reader's next batch; a read-ahead thread or a
    /// waker wakes it), or when the source or a partition would go idle, whichever comes
    /// first. Polled while it has anything to hand on or finish.
    fn next_call(&self) -> NextCall {
        let Some(last) = self.last_attempt else {
            return NextCall::Poll;
        };
        if self.pending.is_some() || self.exhausted || self.failed.is_some() {
            return NextCall::Poll;
        }
        let reader = self.feed.next_read();
        match self.until_idle() {
            None => reader,
            Some(wait) if wait.is_zero() => NextCall::Poll,
            Some(wait) => {
                let at = last + wait;
                self.idle_call.set(Some(at));
                reader.earliest(NextCall::At(at))
            }
        }
    }

    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        // The watermark of the items before the barrier goes before it.
        if !self.drain_chain(outbox)? {
            return Ok(false);
        }
        let (highest, idle) = self.tracker.state();
        let state = SavedSource {
            position: self.feed.position(),
            exhausted: self.exhausted,
            event_time: Some(SavedEventTime {
                highest: highest.to_vec(),
                idle: idle.to_vec(),
                sent: self.sent.0,
            }),
            ..SavedSource::default()
        };
        let place = &self.place;
        save_chain(&mut *self.chain, outbox, writer, |head| {
            place.save(head, state);
            Ok(())
        })
    }

    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        let mut entries = ChainEntries::new(entries);
        if let Some(state) = self.place.restore(&mut entries)? {
            self.exhausted = self.place.seek(&mut self.feed, &state)?;
            if let Some(time) = &state.event_time {
                if !self.tracker.restore(&time.highest, &time.idle) {
                    return Err(format!(
                        "stream source '{}' read {} partitions when it was saved and {} now",
                        self.place.vertex(),
                        time.highest.len(),
                        self.last_seen.len()
                    )
                    .into());
                }
                self.sent = Watermark(time.sent);
            }
        }
        self.chain.restore(&mut entries.head().next())
    }

    fn snapshot_commit_finish(&mut self, _success: bool) -> ProcessorResult<bool> {
        self.chain.commit()
    }

    fn close(&mut self) -> ProcessorResult<()> {
        self.feed.close()
    }
}
