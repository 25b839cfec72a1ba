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
//! cache line. A partitioned port writes a run of items into several conveyors at once, and a
//! drain moves a run out of one: either way one release store per conveyor for the whole run.
//! Nothing here allocates after construction, takes a lock or makes a syscall.
//!
//! Markers travel in-band, in order with the items: a [`Watermark`], the *idle* marker that
//! tells the consumer this producer has no data for now (so it stops holding the watermark back
//! until it sends again), the snapshot *barrier* that separates what a snapshot covers from
//! what follows it, and the *done* marker that tells the consumer this producer instance has
//! finished.

use std::collections::VecDeque;

use crate::watermark::{SourceTime, Watermark};

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

/// One slot of a conveyor's ring: a [`Message`], with a watermark's [`SourceTime`] beside
/// it. The `Default` is only a placeholder for the slots of a write chunk ([`route_run`]),
/// each overwritten with an item before it is committed; the placeholders left over are
/// dropped, never committed.
#[derive(Default)]
enum Slot<T> {
    Item(T),
    Watermark(Watermark, SourceTime),
    #[default]
    Idle,
    Barrier(u64),
    Done,
}

impl<T> Slot<T> {
    fn into_message(self) -> Message<T> {
        match self {
            Slot::Item(item) => Message::Item(item),
            Slot::Watermark(wm, _) => Message::Watermark(wm),
            Slot::Idle => Message::Idle,
            Slot::Barrier(n) => Message::Barrier(n),
            Slot::Done => Message::Done,
        }
    }
}

/// A marker that stopped a drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// A watermark, to be coalesced with the other inputs, and when its source sent it.
    Watermark(Watermark, SourceTime),
    /// The producer went idle.
    Idle,
    /// The producer passed the barrier of snapshot `n`.
    Barrier(u64),
    /// The producer finished.
    Done,
}

/// The producer end of a conveyor. `Send`, not `Sync`: one tasklet owns it.
pub struct Sender<T> {
    inner: rtrb::Producer<Slot<T>>,
    capacity: usize,
}

/// The consumer end of a conveyor. `Send`, not `Sync`: one tasklet owns it.
pub struct Receiver<T> {
    inner: rtrb::Consumer<Slot<T>>,
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
        match self.inner.push(Slot::Item(item)) {
            Ok(()) => Ok(()),
            Err(rtrb::PushError::Full(Slot::Item(item))) => Err(item),
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
        chunk.fill_from_iter(items.drain(..n).map(Slot::Item))
    }

    /// Sends a watermark if there is room, stamped as sent by its source now. Returns whether
    /// it was sent.
    pub fn send_watermark(&mut self, wm: Watermark) -> bool {
        self.send_watermark_from(wm, SourceTime::now())
    }

    /// Sends a watermark that its source sent at `source_time`, if there is room. Returns
    /// whether it was sent.
    pub fn send_watermark_from(&mut self, wm: Watermark, source_time: SourceTime) -> bool {
        self.inner.push(Slot::Watermark(wm, source_time)).is_ok()
    }

    /// Sends the idle marker if there is room. Returns whether it was sent.
    pub fn send_idle(&mut self) -> bool {
        self.inner.push(Slot::Idle).is_ok()
    }

    /// Sends the barrier of snapshot `n` if there is room. Returns whether it was sent.
    pub fn send_barrier(&mut self, n: u64) -> bool {
        self.inner.push(Slot::Barrier(n)).is_ok()
    }

    /// Sends the done marker if there is room. Returns whether it was sent.
    pub fn send_done(&mut self) -> bool {
        self.inner.push(Slot::Done).is_ok()
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
fn leading_items<T>(messages: &[Slot<T>]) -> Option<usize> {
    messages
        .iter()
        .position(|slot| !matches!(slot, Slot::Item(_)))
}

/// The most targets [`route_run`] writes to in place; more are sent one item at a time.
/// Each target's chunk is prepared for the run (a placeholder written per slot), a cost that
/// grows with the number of targets: routing runs of 1,000 items by a uniform key took 51,
/// 55, 59 and 63 instructions per item in place to 2, 4, 6 and 8 targets, against 66 one
/// item at a time.
const MAX_TARGETS_IN_PLACE: usize = 4;

/// How many slots a target's chunk may have beyond twice the free slots of the fullest
/// target. A run stops at the first item whose target is full, so when one consumer is
/// behind, the run is short and a chunk sized to every free slot would be mostly
/// placeholders written for nothing.
const CHUNK_SLACK: usize = 16;

/// The fewest free slots every target must have for [`route_run`] to write in place. Below
/// it some consumer is behind and the run will be short: preparing chunks costs more than
/// it saves (with a consumer taking 8 items at a time, 80 instructions per item against
/// 75 one item at a time, and 162 with chunks sized to every free slot).
const IN_PLACE_MIN_ROOM: usize = 32;

/// The free slots of a write chunk still to fill, in ring order: its two halves.
type SlotCursor<'a, T> = (
    std::slice::IterMut<'a, Slot<T>>,
    std::slice::IterMut<'a, Slot<T>>,
);

/// Moves up to `max` items from the front of `items`, in order, each into
/// `targets[target_of(item)]`. Stops at the first item whose target is full, which stays at
/// the front with everything behind it, so the order per target is kept. Returns how many
/// moved.
///
/// With up to four targets, each with room for 32 items or the whole run, the items are
/// written straight into one write chunk per target (an acquire load per target and call,
/// only when the room last seen would not take the whole run): per item the routing
/// function, a move out of `items` and a move into its slot; per call and target, one
/// placeholder write per slot of its chunk and one release store.
/// A chunk holds at most twice the free slots of the fullest target (plus a few), so a run
/// cut short by a consumer that is behind prepares few slots for nothing; should a chunk run
/// out while its target still has room (keys skewed towards it), the rest of the run goes
/// one item at a time. Otherwise each item is one conveyor send (a slot write and a release
/// store).
///
/// # Panics
/// If `target_of` returns an index outside `targets`.
pub(crate) fn route_run<T>(
    targets: &mut [Sender<T>],
    items: &mut VecDeque<T>,
    max: usize,
    mut target_of: impl FnMut(&T) -> usize,
) -> usize {
    let max = max.min(items.len());
    let target_count = targets.len();
    if target_count > MAX_TARGETS_IN_PLACE {
        return route_one_by_one(targets, items, max, target_of);
    }
    let mut free = [0; MAX_TARGETS_IN_PLACE];
    for (free, target) in free.iter_mut().zip(targets.iter()) {
        // The room this end last saw only grows: read the consumer's index (a cache line
        // it writes) only when that room would not take the whole run.
        let seen = target.inner.cached_slots();
        *free = if seen >= max {
            max
        } else {
            target.inner.slots().min(max)
        };
    }
    let fullest = free[..target_count].iter().copied().min().unwrap_or(0);
    if fullest < IN_PLACE_MIN_ROOM.min(max) {
        return route_one_by_one(targets, items, max, target_of);
    }
    let chunk_bound = fullest.saturating_mul(2).saturating_add(CHUNK_SLACK);
    let mut chunks: [Option<rtrb::chunks::WriteChunk<'_, Slot<T>>>; MAX_TARGETS_IN_PLACE] =
        Default::default();
    for ((chunk, target), free) in chunks.iter_mut().zip(targets.iter_mut()).zip(free) {
        let size = free.min(chunk_bound);
        if size > 0 {
            *chunk = target.inner.write_chunk(size).ok();
        }
    }
    let mut cursors: [SlotCursor<'_, T>; MAX_TARGETS_IN_PLACE] = Default::default();
    for (cursor, chunk) in cursors.iter_mut().zip(&mut chunks) {
        if let Some(chunk) = chunk {
            let (first, second) = chunk.as_mut_slices();
            *cursor = (first.iter_mut(), second.iter_mut());
        }
    }
    let mut routed = 0;
    let mut ran_out = false;
    let in_use = &mut cursors[..target_count];
    while routed < max {
        let Some(item) = items.pop_front() else {
            break;
        };
        let (first, second) = &mut in_use[target_of(&item)];
        let Some(slot) = first.next().or_else(|| second.next()) else {
            // Later items stay behind it, whatever their targets: order per target.
            items.push_front(item);
            ran_out = true;
            break;
        };
        *slot = Slot::Item(item);
        routed += 1;
    }
    let unused = cursors.map(|(first, second)| first.len() + second.len());
    for (chunk, unused) in chunks.into_iter().zip(unused) {
        if let Some(chunk) = chunk {
            let filled = chunk.len() - unused;
            if filled > 0 {
                chunk.commit(filled);
            }
        }
    }
    if ran_out
        && free[..target_count].iter().any(|&free| free > chunk_bound)
        && let Some(front) = items.front()
        && free[target_of(front)] > chunk_bound
    {
        // Its chunk was smaller than its room: the rest of the run one item at a time.
        return routed + route_one_by_one(targets, items, max - routed, target_of);
    }
    routed
}

/// [`route_run`] one conveyor send per item.
fn route_one_by_one<T>(
    targets: &mut [Sender<T>],
    items: &mut VecDeque<T>,
    max: usize,
    mut target_of: impl FnMut(&T) -> usize,
) -> usize {
    let mut moved = 0;
    while moved < max {
        let Some(item) = items.pop_front() else {
            break;
        };
        if let Err(item) = targets[target_of(&item)].try_send(item) {
            // Later items stay behind it, whatever their targets: order per target.
            items.push_front(item);
            break;
        }
        moved += 1;
    }
    moved
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
        // Dropping the iterator commits exactly the messages it yielded, so a marker stops
        // the run and whatever follows it stays queued.
        let mut messages = chunk.into_iter();
        // A counted range is an exact-size source: `out` reserves once and writes the run
        // without a capacity check per item.
        out.extend((0..items).map(|_| match messages.next() {
            Some(Slot::Item(item)) => item,
            _ => unreachable!("the run was counted up to its first marker"),
        }));
        let signal = if items < available {
            messages.next().map(|marker| match marker {
                Slot::Watermark(wm, source_time) => Signal::Watermark(wm, source_time),
                Slot::Idle => Signal::Idle,
                Slot::Barrier(n) => Signal::Barrier(n),
                Slot::Done => Signal::Done,
                Slot::Item(_) => unreachable!("the run was counted up to its first marker"),
            })
        } else {
            None
        };
        Drained { items, signal }
    }

    /// Takes the next message, if any.
    #[inline]
    pub fn try_recv(&mut self) -> Option<Message<T>> {
        self.inner.pop().ok().map(Slot::into_message)
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
    /// The source time of every watermark the property tests send, so that drains compare
    /// equal to the model.
    const TEST_SOURCE_TIME: SourceTime = SourceTime::ZERO;

    use super::*;
    use proptest::prelude::*;

    /// One step of the model test.
    #[derive(Debug, Clone)]
    enum Op {
        Send(Message<u32>),
        SendRun(Vec<u32>),
        Drain(usize),
    }

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
        let sent_at = SourceTime::now();
        assert!(tx.send_watermark_from(Watermark(5), sent_at));
        tx.try_send(2).unwrap();
        let mut out = VecDeque::new();
        let d = rx.drain_into(&mut out, 10);
        assert_eq!(
            d,
            Drained {
                items: 1,
                signal: Some(Signal::Watermark(Watermark(5), sent_at))
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

    /// Routes `items` by `item % targets` into conveyors of the given capacities.
    fn route_mod(
        capacities: &[usize],
        items: &mut VecDeque<u32>,
        max: usize,
    ) -> (usize, Vec<Sender<u32>>, Vec<Receiver<u32>>) {
        let (mut txs, rxs): (Vec<_>, Vec<_>) = capacities.iter().map(|&c| channel(c)).unzip();
        let n = txs.len();
        let routed = route_run(&mut txs, items, max, |x| *x as usize % n);
        (routed, txs, rxs)
    }

    fn items_of(rx: &mut Receiver<u32>) -> Vec<u32> {
        let mut out = VecDeque::new();
        while rx.drain_into(&mut out, usize::MAX).items > 0 {}
        out.into()
    }

    #[test]
    fn a_run_is_routed_in_place_in_order_per_target_up_to_the_first_full_one() {
        let mut items: VecDeque<u32> = (0..200).collect();
        // Target 1 holds 32 items, the odd numbers up to 63; 65 finds it full.
        let (routed, _txs, mut rxs) = route_mod(&[64, 32], &mut items, 1000);
        assert_eq!(routed, 65);
        assert_eq!(
            items_of(&mut rxs[0]),
            (0..=32).map(|i| i * 2).collect::<Vec<_>>()
        );
        assert_eq!(
            items_of(&mut rxs[1]),
            (0..32).map(|i| i * 2 + 1).collect::<Vec<_>>()
        );
        assert_eq!(
            items.front(),
            Some(&65),
            "stopped at 65, everything behind it kept"
        );
        assert_eq!(items.len(), 135);
        // The limit stops it too.
        let mut items: VecDeque<u32> = (0..10).collect();
        let (routed, _txs, mut rxs) = route_mod(&[64, 64], &mut items, 3);
        assert_eq!(routed, 3);
        assert_eq!(items_of(&mut rxs[0]), [0, 2]);
        assert_eq!(items.front(), Some(&3));
    }

    #[test]
    fn a_run_next_to_a_consumer_that_is_behind_goes_one_item_at_a_time() {
        let mut items: VecDeque<u32> = (0..10).collect();
        // Target 1 holds 2 items: 0, 1, 2, 3 go, then 5 finds target 1 full after 4.
        let (routed, _txs, mut rxs) = route_mod(&[64, 2], &mut items, 100);
        assert_eq!(routed, 5);
        assert_eq!(items_of(&mut rxs[0]), [0, 2, 4]);
        assert_eq!(items_of(&mut rxs[1]), [1, 3]);
        assert_eq!(items, [5, 6, 7, 8, 9]);
        // A full first target routes nothing, whatever room the others have.
        let (mut txs, mut rxs): (Vec<_>, Vec<_>) = (0..2).map(|_| channel::<u32>(1)).unzip();
        txs[0].try_send(100).unwrap();
        let mut items: VecDeque<u32> = (0..4).collect();
        assert_eq!(route_run(&mut txs, &mut items, 100, |x| *x as usize % 2), 0);
        assert_eq!(items.len(), 4);
        assert!(rxs[1].is_empty());
        assert_eq!(items_of(&mut rxs[0]), [100]);
    }

    #[test]
    fn a_run_skewed_to_one_target_fills_it_past_its_chunk() {
        let (mut txs, mut rxs): (Vec<_>, Vec<_>) =
            [256, 64].iter().map(|&c| channel::<u32>(c)).unzip();
        for i in 0..24 {
            txs[1].try_send(i * 2 + 1).unwrap();
        }
        // Target 1 has 40 free slots, so target 0's chunk has 96; the run goes on past it.
        let mut items: VecDeque<u32> = (0..300).map(|i| i * 2).collect();
        assert_eq!(
            route_run(&mut txs, &mut items, 1000, |x| *x as usize % 2),
            256
        );
        assert_eq!(
            items_of(&mut rxs[0]),
            (0..256).map(|i| i * 2).collect::<Vec<_>>()
        );
        assert_eq!(items.front(), Some(&512));
        // The batch limit in the one-item-at-a-time part.
        let mut items: VecDeque<u32> = (0..300).map(|i| i * 2).collect();
        assert_eq!(
            route_run(&mut txs, &mut items, 150, |x| *x as usize % 2),
            150
        );
        assert_eq!(items_of(&mut rxs[0]).len(), 150);
        assert_eq!(items.front(), Some(&300));
        assert_eq!(items_of(&mut rxs[1]).len(), 24);
    }

    #[test]
    fn a_run_to_many_targets_is_sent_item_by_item_with_the_same_result() {
        let capacities = [2, 4, 4, 4, 4, 4];
        let mut items: VecDeque<u32> = (0..30).collect();
        let (routed, _txs, mut rxs) = route_mod(&capacities, &mut items, 100);
        // 0 and 6 fill target 0; 12 stops the run.
        assert_eq!(routed, 12);
        assert_eq!(items_of(&mut rxs[0]), [0, 6]);
        assert_eq!(items_of(&mut rxs[5]), [5, 11]);
        assert_eq!(items.front(), Some(&12));
    }

    #[test]
    fn a_run_wraps_around_the_ring_end() {
        let (mut txs, mut rxs): (Vec<_>, Vec<_>) = (0..2).map(|_| channel::<u32>(64)).unzip();
        let mut out = VecDeque::new();
        for _ in 0..60 {
            txs[0].try_send(0).unwrap();
        }
        rxs[0].drain_into(&mut out, 60);
        // Target 0's free slots are 60..64 and 0..60 of its ring: the chunk has two halves.
        let mut items: VecDeque<u32> = (1..=50).collect();
        assert_eq!(route_run(&mut txs, &mut items, 40, |_| 0), 40);
        assert_eq!(items_of(&mut rxs[0]), (1..=40).collect::<Vec<_>>());
        assert_eq!(items.front(), Some(&41));
    }

    #[test]
    fn a_run_moves_items_that_own_memory() {
        let (mut txs, mut rxs): (Vec<_>, Vec<_>) =
            [64, 64, 32].iter().map(|&c| channel::<String>(c)).unzip();
        let mut items: VecDeque<String> = (0..100).map(|i| i.to_string()).collect();
        let routed = route_run(&mut txs, &mut items, 1000, |s| {
            s.parse::<usize>().unwrap() % 3
        });
        // Target 2 takes 2, 5, ... 95; 98 finds it full.
        assert_eq!(routed, 98);
        let mut out = VecDeque::new();
        rxs[2].drain_into(&mut out, 100);
        assert_eq!(
            out,
            (0..32).map(|i| (i * 3 + 2).to_string()).collect::<Vec<_>>()
        );
        assert_eq!(items.front().map(String::as_str), Some("98"));
    }

    #[test]
    fn a_drain_across_the_ring_end_stops_at_a_marker_in_either_half() {
        let (mut tx, mut rx) = channel::<u32>(4);
        let mut out = VecDeque::new();
        // Move the indices to slot 3, so the next run wraps: slots 3, 0, 1, 2.
        for i in 0..3 {
            tx.try_send(i).unwrap();
        }
        assert_eq!(rx.drain_into(&mut out, 10).items, 3);
        tx.try_send(3).unwrap();
        tx.try_send(4).unwrap();
        assert!(tx.send_barrier(7));
        tx.try_send(5).unwrap();
        let d = rx.drain_into(&mut out, 10);
        assert_eq!((d.items, d.signal), (2, Some(Signal::Barrier(7))));
        assert_eq!(rx.len(), 1, "the item after the marker stays queued");
        // A marker first in the wrapped run: no items, the marker.
        assert!(tx.send_idle());
        let d = rx.drain_into(&mut out, 10);
        assert_eq!((d.items, d.signal), (1, Some(Signal::Idle)));
        assert!(tx.send_done());
        let d = rx.drain_into(&mut out, 10);
        assert_eq!((d.items, d.signal), (0, Some(Signal::Done)));
        assert_eq!(out, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_drain_limited_before_a_marker_leaves_it_queued() {
        let (mut tx, mut rx) = channel::<u32>(8);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        assert!(tx.send_watermark(Watermark(9)));
        let mut out = VecDeque::new();
        let d = rx.drain_into(&mut out, 2);
        assert_eq!((d.items, d.signal), (2, None));
        let d = rx.drain_into(&mut out, 2);
        assert!(matches!(
            (d.items, d.signal),
            (0, Some(Signal::Watermark(Watermark(9), _)))
        ));
        assert!(rx.is_empty());
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

    /// A message to send in the model test: an item or one of the markers.
    fn message() -> impl Strategy<Value = Message<u32>> {
        prop_oneof![
            6 => any::<u32>().prop_map(Message::Item),
            1 => any::<i64>().prop_map(|t| Message::Watermark(Watermark(t))),
            1 => Just(Message::Idle),
            1 => any::<u64>().prop_map(Message::Barrier),
            1 => Just(Message::Done),
        ]
    }

    fn send(tx: &mut Sender<u32>, message: Message<u32>) -> bool {
        match message {
            Message::Item(item) => tx.try_send(item).is_ok(),
            Message::Watermark(wm) => tx.send_watermark_from(wm, TEST_SOURCE_TIME),
            Message::Idle => tx.send_idle(),
            Message::Barrier(n) => tx.send_barrier(n),
            Message::Done => tx.send_done(),
        }
    }

    proptest! {
        /// Items and markers, sent one by one or as runs, come out in order: each drain takes
        /// the items up to its limit or its first marker, that marker included, and leaves
        /// the rest queued.
        #[test]
        fn model_with_markers(
            ops in proptest::collection::vec(
                prop_oneof![
                    message().prop_map(Op::Send),
                    proptest::collection::vec(any::<u32>(), 0..7).prop_map(Op::SendRun),
                    (0usize..7).prop_map(Op::Drain),
                ],
                1..200,
            ),
            cap in 1usize..9,
        ) {
            let (mut tx, mut rx) = channel::<u32>(cap);
            let mut model: VecDeque<Message<u32>> = VecDeque::new();
            let mut out = VecDeque::new();
            for op in ops {
                match op {
                    Op::Send(message) => {
                        let fits = model.len() < tx.capacity();
                        prop_assert_eq!(send(&mut tx, message.clone()), fits);
                        if fits {
                            model.push_back(message);
                        }
                    }
                    Op::SendRun(run) => {
                        let fits = run.len().min(tx.capacity() - model.len());
                        let (sent, kept) = run.split_at(fits);
                        let mut run: VecDeque<u32> = run.iter().copied().collect();
                        let targets = std::slice::from_mut(&mut tx);
                        prop_assert_eq!(route_run(targets, &mut run, usize::MAX, |_| 0), fits);
                        prop_assert_eq!(run, kept);
                        model.extend(sent.iter().copied().map(Message::Item));
                    }
                    Op::Drain(limit) => {
                        let d = rx.drain_into(&mut out, limit);
                        let mut items = 0;
                        let mut signal = None;
                        while items < limit {
                            match model.pop_front() {
                                None => break,
                                Some(Message::Item(item)) => {
                                    prop_assert_eq!(out.pop_front(), Some(item));
                                    items += 1;
                                }
                                Some(marker) => {
                                    signal = Some(marker);
                                    break;
                                }
                            }
                        }
                        let signal = signal.map(|m| match m {
                            Message::Watermark(wm) => Signal::Watermark(wm, TEST_SOURCE_TIME),
                            Message::Idle => Signal::Idle,
                            Message::Barrier(n) => Signal::Barrier(n),
                            Message::Done => Signal::Done,
                            Message::Item(_) => unreachable!(),
                        });
                        prop_assert_eq!(d, Drained { items, signal });
                        prop_assert!(out.is_empty());
                        prop_assert_eq!(rx.len(), model.len());
                    }
                }
            }
        }

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
