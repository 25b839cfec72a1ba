//! Conveyors: the bounded single-producer single-consumer queues between tasklets.
//!
//! ```
//! use weir_core::conveyor::{channel, Signal};
//! use std::collections::VecDeque;
//!
//! let (mut tx, mut rx) = channel::<u64>(3); // capacity rounds up to 4
//! assert_eq!(tx.capacity(), 4);
//! for i in 0..4 {
//!     tx.try_send(i).unwrap();
//! }
//! assert_eq!(tx.try_send(99), Err(99)); // full: the item comes back, nothing blocks
//! let mut out = VecDeque::new();
//! let drained = rx.drain_into(&mut out, 16);
//! assert_eq!(drained.items, 4);
//! assert!(tx.send_done());
//! assert_eq!(rx.drain_into(&mut out, 16).signal, Some(Signal::Done));
//! ```
//!
//! Each edge has one conveyor per (producer instance, consumer instance) pair. The queue is
//! [`rtrb`]'s wait-free ring buffer: a send is one slot write and one release store of the
//! tail index, with the consumer's head index cached so the common case touches no shared
//! cache line. Draining moves a run of items with one release store for the whole run.
//! Nothing here allocates after construction, takes a lock or makes a syscall.
//!
//! Markers travel in-band, in order with the items: a [`Watermark`], the *idle* marker that
//! tells the consumer this producer has no data for now (so it stops holding the watermark back
//! until it sends again), the snapshot *barrier* that separates what a snapshot covers from
//! what follows it, and the *done* marker that tells the consumer this producer instance has
//! finished.

use std::collections::VecDeque;

use crate::watermark::Watermark;

/// The default conveyor capacity, in items.
pub const DEFAULT_CAPACITY: usize = 1024;

/// What travels through a conveyor: an item or a marker.
#[derive(Debug, Clone, PartialEq)]
pub enum Message<T> {
    /// A data item.
    Item(T),
    /// The producer's event-time watermark advanced.
    Watermark(Watermark),
    /// The producer has no data for now: it stops holding the watermark back until its next
    /// item or watermark.
    Idle,
    /// Everything before this belongs to snapshot `n`, everything after to later ones.
    Barrier(u64),
    /// The producer has finished; nothing follows.
    Done,
}

/// A marker that stopped a drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// A watermark, to be coalesced with the other inputs.
    Watermark(Watermark),
    /// The producer went idle.
    Idle,
    /// The producer passed the barrier of snapshot `n`.
    Barrier(u64),
    /// The producer finished.
    Done,
}

/// The producer end of a conveyor. `Send`, not `Sync`: one tasklet owns it.
pub struct Sender<T> {
    inner: rtrb::Producer<Message<T>>,
    capacity: usize,
}

/// The consumer end of a conveyor. `Send`, not `Sync`: one tasklet owns it.
pub struct Receiver<T> {
    inner: rtrb::Consumer<Message<T>>,
}

/// A bounded conveyor holding `capacity` items, rounded up to a power of two.
///
/// # Panics
/// If `capacity` is zero.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    assert!(capacity > 0, "a conveyor needs a capacity of at least 1");
    let capacity = capacity.next_power_of_two();
    let (tx, rx) = rtrb::RingBuffer::new(capacity);
    (
        Sender {
            inner: tx,
            capacity,
        },
        Receiver { inner: rx },
    )
}

impl<T> Sender<T> {
    /// Sends `item` if there is room, or hands it back. Never blocks.
    #[inline]
    pub fn try_send(&mut self, item: T) -> Result<(), T> {
        match self.inner.push(Message::Item(item)) {
            Ok(()) => Ok(()),
            Err(rtrb::PushError::Full(Message::Item(item))) => Err(item),
            Err(rtrb::PushError::Full(_)) => unreachable!("pushed an item, got back a marker"),
        }
    }

    /// Moves as many items as fit, at most `max`, from the front of `items`. Returns how many
    /// moved.
    ///
    /// Cost: one release store for the whole run, plus a move per item.
    pub fn send_from(&mut self, items: &mut VecDeque<T>, max: usize) -> usize {
        let n = self.inner.slots().min(items.len()).min(max);
        if n == 0 {
            return 0;
        }
        let Ok(chunk) = self.inner.write_chunk_uninit(n) else {
            unreachable!("slots() promised {n} free slots")
        };
        chunk.fill_from_iter(items.drain(..n).map(Message::Item))
    }

    /// Moves as many items as fit from the front of `items`, all of them when they fit.
    /// Returns how many moved; `items` keeps the rest, in order, and its capacity.
    ///
    /// Cost: one release store for the whole run, plus a move per item. When the free room
    /// was just read with [`free_slots`](Self::free_slots) and covers `items`, no atomic
    /// load either.
    pub fn send_from_vec(&mut self, items: &mut Vec<T>) -> usize {
        let free = match self.inner.write_chunk_uninit(items.len()) {
            Ok(chunk) => return chunk.fill_from_iter(items.drain(..).map(Message::Item)),
            Err(rtrb::chunks::ChunkError::TooFewSlots(free)) => free,
        };
        if free == 0 {
            return 0;
        }
        let Ok(chunk) = self.inner.write_chunk_uninit(free) else {
            unreachable!("the queue said {free} slots were free")
        };
        chunk.fill_from_iter(items.drain(..free).map(Message::Item))
    }

    /// Free slots right now: one acquire load of the consumer's index. Only grows until this
    /// end sends again, since only this end fills the queue.
    #[inline]
    pub fn free_slots(&self) -> usize {
        self.inner.slots()
    }

    /// Sends a watermark if there is room. Returns whether it was sent.
    pub fn send_watermark(&mut self, wm: Watermark) -> bool {
        self.inner.push(Message::Watermark(wm)).is_ok()
    }

    /// Sends the idle marker if there is room. Returns whether it was sent.
    pub fn send_idle(&mut self) -> bool {
        self.inner.push(Message::Idle).is_ok()
    }

    /// Sends the barrier of snapshot `n` if there is room. Returns whether it was sent.
    pub fn send_barrier(&mut self, n: u64) -> bool {
        self.inner.push(Message::Barrier(n)).is_ok()
    }

    /// Sends the done marker if there is room. Returns whether it was sent.
    pub fn send_done(&mut self) -> bool {
        self.inner.push(Message::Done).is_ok()
    }

    /// Whether one more message fits.
    #[inline]
    pub fn has_room(&self) -> bool {
        !self.inner.is_full()
    }

    /// The capacity, after rounding.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether the consumer end was dropped (its tasklet ended).
    pub fn is_abandoned(&self) -> bool {
        self.inner.is_abandoned()
    }
}

/// The number of items before the first marker of `messages`, or `None` when there is none.
#[inline]
fn leading_items<T>(messages: &[Message<T>]) -> Option<usize> {
    messages
        .iter()
        .position(|message| !matches!(message, Message::Item(_)))
}

/// The outcome of [`Receiver::drain_into`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Items moved.
    pub items: usize,
    /// The marker the drain stopped at, if any. It has been consumed.
    pub signal: Option<Signal>,
}

impl<T> Receiver<T> {
    /// Moves up to `limit` items into `out`, stopping right after the first marker.
    ///
    /// Cost: one acquire load and one release store for the whole run; per item, a look at
    /// its message's tag to find the run's length, then a move into `out`, whose room is
    /// reserved once per run.
    pub fn drain_into(&mut self, out: &mut VecDeque<T>, limit: usize) -> Drained {
        let available = self.inner.slots().min(limit);
        if available == 0 {
            return Drained {
                items: 0,
                signal: None,
            };
        }
        let Ok(chunk) = self.inner.read_chunk(available) else {
            unreachable!("slots() promised {available} readable slots")
        };
        let (first, second) = chunk.as_slices();
        let items = leading_items(first)
            .unwrap_or_else(|| first.len() + leading_items(second).unwrap_or(second.len()));
        out.reserve(items);
        // Dropping the iterator commits exactly the messages it yielded, so a marker stops
        // the run and whatever follows it stays queued.
        let mut messages = chunk.into_iter();
        out.extend(messages.by_ref().take(items).map(|message| match message {
            Message::Item(item) => item,
            _ => unreachable!("the run was counted up to its first marker"),
        }));
        let signal = if items < available {
            messages.next().map(|marker| match marker {
                Message::Watermark(wm) => Signal::Watermark(wm),
                Message::Idle => Signal::Idle,
                Message::Barrier(n) => Signal::Barrier(n),
                Message::Done => Signal::Done,
                Message::Item(_) => unreachable!("the run was counted up to its first marker"),
            })
        } else {
            None
        };
        Drained { items, signal }
    }

    /// Takes the next message, if any.
    #[inline]
    pub fn try_recv(&mut self) -> Option<Message<T>> {
        self.inner.pop().ok()
    }

    /// Messages waiting right now.
    #[inline]
    pub fn len(&self) -> usize {
        self.inner.slots()
    }

    /// Whether nothing is waiting.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Whether the producer end was dropped without sending the done marker.
    pub fn is_abandoned(&self) -> bool {
        self.inner.is_abandoned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn capacity_rounds_to_power_of_two() {
        assert_eq!(channel::<u8>(1).0.capacity(), 1);
        assert_eq!(channel::<u8>(1000).0.capacity(), 1024);
        assert_eq!(channel::<u8>(1024).0.capacity(), 1024);
    }

    #[test]
    fn drain_stops_after_a_marker_and_keeps_the_rest() {
        let (mut tx, mut rx) = channel::<u32>(8);
        tx.try_send(1).unwrap();
        assert!(tx.send_watermark(Watermark(5)));
        tx.try_send(2).unwrap();
        let mut out = VecDeque::new();
        let d = rx.drain_into(&mut out, 10);
        assert_eq!(
            d,
            Drained {
                items: 1,
                signal: Some(Signal::Watermark(Watermark(5)))
            }
        );
        let d = rx.drain_into(&mut out, 10);
        assert_eq!(
            d,
            Drained {
                items: 1,
                signal: None
            }
        );
        assert_eq!(out, [1, 2]);
    }

    #[test]
    fn send_from_moves_what_fits() {
        let (mut tx, mut rx) = channel::<u32>(4);
        let mut items: VecDeque<u32> = (0..10).collect();
        assert_eq!(tx.send_from(&mut items, 3), 3);
        assert_eq!(tx.send_from(&mut items, 100), 1, "one slot left");
        assert_eq!(items.front(), Some(&4));
        let mut out = VecDeque::new();
        assert_eq!(rx.drain_into(&mut out, 10).items, 4);
        assert_eq!(out, [0, 1, 2, 3]);
    }

    #[test]
    fn drain_respects_limit() {
        let (mut tx, mut rx) = channel::<u32>(8);
        for i in 0..8 {
            tx.try_send(i).unwrap();
        }
        let mut out = VecDeque::new();
        assert_eq!(rx.drain_into(&mut out, 3).items, 3);
        assert_eq!(rx.len(), 5);
    }

    #[test]
    fn works_across_threads_in_order() {
        let (mut tx, mut rx) = channel::<u64>(64);
        const N: u64 = 200_000;
        let producer = std::thread::spawn(move || {
            let mut next = 0;
            while next < N {
                match tx.try_send(next) {
                    Ok(()) => next += 1,
                    Err(_) => std::hint::spin_loop(),
                }
            }
            while !tx.send_done() {
                std::hint::spin_loop();
            }
        });
        let mut out = VecDeque::new();
        let mut expected = 0;
        loop {
            let d = rx.drain_into(&mut out, 32);
            for v in out.drain(..) {
                assert_eq!(v, expected);
                expected += 1;
            }
            if d.signal == Some(Signal::Done) {
                break;
            }
        }
        producer.join().unwrap();
        assert_eq!(expected, N);
    }

    proptest! {
        /// Whatever the interleaving of sends and drains, items come out once, in order.
        #[test]
        fn model_fifo(ops in proptest::collection::vec((any::<bool>(), 1usize..6), 1..200), cap in 1usize..9) {
            let (mut tx, mut rx) = channel::<u32>(cap);
            let mut model = VecDeque::new();
            let mut out = VecDeque::new();
            let mut next = 0u32;
            for (send, n) in ops {
                if send {
                    for _ in 0..n {
                        match tx.try_send(next) {
                            Ok(()) => { model.push_back(next); next += 1; }
                            Err(v) => { prop_assert_eq!(v, next); prop_assert_eq!(model.len(), tx.capacity()); }
                        }
                    }
                } else {
                    let d = rx.drain_into(&mut out, n);
                    prop_assert!(d.items <= n);
                    for _ in 0..d.items {
                        prop_assert_eq!(out.pop_front(), model.pop_front());
                    }
                }
            }
        }
    }
}
