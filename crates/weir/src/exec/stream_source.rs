//! The head of a stream source vertex: reads, stamps each item with its event time, drops
//! late items, and sends the source's watermark after the items it covers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::watermark::EventTimeTracker;
use weir_core::{Counter, Item, Outbox, Processor, ProcessorContext, ProcessorResult, Watermark};

use crate::connector::{Emitter, SourceReader};
use crate::event_time::{TimestampFn, Timestamped};
use crate::exec::link::{ErasedLink, Link, chain_watermark, unerase};

/// How a stream source assigns event time.
pub(crate) struct EventTimePolicy<T> {
    pub timestamp: TimestampFn<T>,
    pub allowed_lag: i64,
    /// How long a partition may deliver nothing before it stops holding the watermark back.
    pub partition_idle_timeout: Duration,
}

impl<T> Clone for EventTimePolicy<T> {
    fn clone(&self) -> Self {
        EventTimePolicy {
            timestamp: Arc::clone(&self.timestamp),
            allowed_lag: self.allowed_lag,
            partition_idle_timeout: self.partition_idle_timeout,
        }
    }
}

/// The most items a stream source hands to its chain at once.
const BATCH: usize = 1024;

pub(crate) struct StreamSourceHead<R: SourceReader> {
    reader: R,
    policy: EventTimePolicy<R::Item>,
    tracker: EventTimeTracker,
    chain: Box<dyn Link<Timestamped<R::Item>>>,
    raw: Vec<R::Item>,
    /// Where each partition's items start in `raw` (see `Emitter::emit_from`).
    runs: Vec<(usize, u32)>,
    /// When each partition last delivered an item.
    last_seen: Vec<Instant>,
    batch: Vec<Timestamped<R::Item>>,
    /// The last watermark the chain accepted, and one it still has to accept.
    sent: Watermark,
    pending: Option<Watermark>,
    exhausted: bool,
    late: Counter,
}

pub(crate) fn stream_source_head<R: SourceReader>(
    reader: R,
    policy: EventTimePolicy<R::Item>,
    chain: ErasedLink,
) -> Box<dyn Processor>
where
    R::Item: Item,
{
    Box::new(StreamSourceHead {
        reader,
        tracker: EventTimeTracker::new(1, policy.allowed_lag),
        policy,
        chain: unerase::<Timestamped<R::Item>>(chain),
        raw: Vec::with_capacity(BATCH),
        runs: Vec::new(),
        last_seen: Vec::new(),
        batch: Vec::with_capacity(BATCH),
        sent: Watermark::MIN,
        pending: None,
        exhausted: false,
        late: Counter::default(),
    })
}

impl<R: SourceReader> StreamSourceHead<R> {
    /// Hands the pending watermark to the chain; true when nothing is pending any more.
    fn send_pending(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if let Some(wm) = self.pending {
            if !chain_watermark(&mut *self.chain, wm, outbox)? {
                return Ok(false);
            }
            self.sent = wm;
            self.pending = None;
        }
        Ok(true)
    }
}

impl<R: SourceReader> Processor for StreamSourceHead<R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.late = ctx.metrics().counter("late_events");
        self.reader.open(ctx)?;
        let partitions = self.reader.partitions().max(1);
        self.tracker = EventTimeTracker::new(partitions, self.policy.allowed_lag);
        self.last_seen = vec![Instant::now(); partitions];
        self.chain.init(ctx)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.chain.flush(outbox)? || !self.send_pending(outbox)? {
            return Ok(false);
        }
        if !self.exhausted {
            self.runs.clear();
            self.exhausted = self.reader.read(&mut Emitter::with_partitions(
                &mut self.raw,
                BATCH,
                &mut self.runs,
            ))?;
            let now = Instant::now();
            let mut late = 0;
            let (mut partition, mut next_run) = (0usize, 0usize);
            for (i, item) in self.raw.drain(..).enumerate() {
                while let Some(&(start, p)) = self.runs.get(next_run)
                    && start <= i
                {
                    partition = (p as usize).min(self.last_seen.len() - 1);
                    next_run += 1;
                }
                let timestamp = (self.policy.timestamp)(&item);
                self.last_seen[partition] = now;
                if self.tracker.accept(partition, timestamp) {
                    self.batch.push(Timestamped { timestamp, item });
                } else {
                    late += 1;
                }
            }
            if self.last_seen.len() > 1 {
                // A partition silent for the idle timeout stops holding the watermark back
                // until it delivers again.
                for (p, seen) in self.last_seen.iter().enumerate() {
                    if now.duration_since(*seen) >= self.policy.partition_idle_timeout {
                        self.tracker.mark_idle(p);
                    }
                }
            }
            if late > 0 {
                self.late.add(late);
            }
            if !self.batch.is_empty() || late > 0 || self.exhausted {
                outbox.report_progress();
            }
            self.chain.push_batch(&mut self.batch);
            // One watermark per batch at most: throttled by construction.
            let wm = if self.exhausted {
                Watermark::MAX
            } else {
                self.tracker.watermark()
            };
            if wm > self.sent {
                self.pending = Some(wm);
            }
            if !self.chain.flush(outbox)? || !self.send_pending(outbox)? || !self.exhausted {
                return Ok(false);
            }
        }
        self.chain.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.reader.is_cooperative() && self.chain.is_cooperative()
    }

    fn close(&mut self) -> ProcessorResult<()> {
        self.reader.close()
    }
}
