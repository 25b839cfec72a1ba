//! The input side of a tasklet's ordinals: a stream over the conveyors from every upstream
//! instance of one edge, drained into the inbox up to the next coalesced watermark.

use std::collections::VecDeque;

use crate::conveyor::{Receiver, Signal};
use crate::inbox::Inbox;
use crate::item::Item;
use crate::watermark::{SourceTime, Watermark, WatermarkCoalescer};

/// The outcome of one drain of an inbound stream.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamDrain {
    pub items: usize,
    /// The stream's coalesced watermark advanced to this, with the source time of the marker
    /// that advanced it (now, for a queue that went idle or finished). The drain stopped
    /// right there, so the items drained come before it and everything after it is still
    /// queued.
    pub watermark: Option<(Watermark, SourceTime)>,
    /// The stream finished during this drain.
    pub finished: bool,
}

/// The input side of one ordinal, without its item type.
pub(crate) trait InboundStream: Send {
    fn ordinal(&self) -> usize;
    fn priority(&self) -> i32;
    fn is_done(&self) -> bool;
    /// Moves up to `limit` items into `inbox`, visiting the upstream queues fairly. A queue is
    /// left at its first marker; the whole drain stops when a marker advances the stream's
    /// coalesced watermark, so the processor sees items, then the watermark, then later items.
    fn drain_into(&mut self, inbox: &mut Inbox, limit: usize) -> StreamDrain;
    /// Whether every unfinished queue is idle: its producer said it has no data for now.
    fn is_idle(&self) -> bool;
    /// Items waiting in the conveyors right now.
    fn fill(&self) -> usize;
    /// The newest snapshot barrier every unfinished queue has delivered; `u64::MAX` when no
    /// queue is unfinished.
    fn barrier_level(&self) -> u64;
    /// The newest barrier any queue has delivered.
    fn newest_barrier(&self) -> u64;
    /// Exactly-once alignment: a queue that delivered a barrier above `released` is not read
    /// until `released` reaches it. `None`: never hold a queue back.
    fn hold_above(&mut self, released: Option<u64>);
}

/// The conveyors from every upstream instance into one input ordinal.
pub(crate) struct ConveyorStream<T> {
    receivers: Vec<Receiver<T>>,
    done: Vec<bool>,
    live: usize,
    next: usize,
    ordinal: usize,
    priority: i32,
    coalescer: WatermarkCoalescer,
    /// The newest barrier each queue delivered.
    barriers: Vec<u64>,
    hold_above: Option<u64>,
}

impl<T: Item> ConveyorStream<T> {
    pub(crate) fn new(receivers: Vec<Receiver<T>>, ordinal: usize, priority: i32) -> Self {
        let n = receivers.len();
        ConveyorStream {
            receivers,
            done: vec![false; n],
            live: n,
            next: 0,
            ordinal,
            priority,
            coalescer: WatermarkCoalescer::new(n),
            barriers: vec![0; n],
            hold_above: None,
        }
    }
}

impl<T: Item> InboundStream for ConveyorStream<T> {
    fn ordinal(&self) -> usize {
        self.ordinal
    }
    fn priority(&self) -> i32 {
        self.priority
    }
    fn is_done(&self) -> bool {
        self.live == 0
    }

    fn drain_into(&mut self, inbox: &mut Inbox, limit: usize) -> StreamDrain {
        let mut result = StreamDrain::default();
        if self.live == 0 {
            return result;
        }
        let queue: &mut VecDeque<T> = inbox.items::<T>();
        let n = self.receivers.len();
        // Start one queue later each time, so no upstream instance is favoured.
        let start = self.next;
        self.next = if start + 1 >= n { 0 } else { start + 1 };
        for k in 0..n {
            let i = (start + k) % n;
            let room = limit - result.items;
            if self.done[i] || room == 0 {
                continue;
            }
            if let Some(released) = self.hold_above
                && self.barriers[i] > released
            {
                // Aligning: this queue is past the barrier the others have yet to deliver.
                continue;
            }
            let d = self.receivers[i].drain_into(queue, room);
            result.items += d.items;
            if d.items > 0 {
                self.coalescer.activate(i);
            }
            // A marker ends this queue's turn: what follows it waits for the next drain.
            let advanced = match d.signal {
                Some(Signal::Watermark(wm, source_time)) => {
                    self.coalescer.observe(i, wm).map(|wm| (wm, source_time))
                }
                Some(Signal::Idle) => self
                    .coalescer
                    .queue_idle(i)
                    .map(|wm| (wm, SourceTime::now())),
                Some(Signal::Barrier(n)) => {
                    self.barriers[i] = n;
                    None
                }
                Some(Signal::Done) => {
                    self.done[i] = true;
                    self.live -= 1;
                    self.coalescer
                        .queue_done(i)
                        .map(|wm| (wm, SourceTime::now()))
                }
                None => None,
            };
            if advanced.is_some() {
                result.watermark = advanced;
                break;
            }
        }
        result.finished = self.live == 0;
        result
    }

    fn fill(&self) -> usize {
        self.receivers.iter().map(Receiver::len).sum()
    }

    fn is_idle(&self) -> bool {
        self.live > 0
            && (0..self.receivers.len()).all(|i| self.done[i] || self.coalescer.is_idle(i))
    }

    fn barrier_level(&self) -> u64 {
        (0..self.receivers.len())
            .filter(|&i| !self.done[i])
            .map(|i| self.barriers[i])
            .min()
            .unwrap_or(u64::MAX)
    }

    fn newest_barrier(&self) -> u64 {
        self.barriers.iter().copied().max().unwrap_or(0)
    }

    fn hold_above(&mut self, released: Option<u64>) {
        self.hold_above = released;
    }
}
