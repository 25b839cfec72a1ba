//! The outbox: where a processor puts what it emits, one port per output ordinal.
//!
//! ```
//! use weir_core::Outbox;
//!
//! // A test outbox whose port 0 holds two items; the harness drains it between calls.
//! let (mut outbox, mut drains) = Outbox::for_test::<&str>(1, 2);
//! let port = outbox.port::<&str>(0);
//! assert!(port.offer("a").is_ok());
//! assert!(port.offer("b").is_ok());
//! assert_eq!(port.offer("c"), Err("c")); // full: the item is handed back, nothing blocks
//! assert!(!outbox.has_room(0));
//! assert_eq!(drains[0].drain(), vec!["a", "b"]);
//! ```
//!
//! [`OutPort::offer`] never blocks. It refuses an item, and hands it back, when the target
//! conveyor is full or when the port already took its per-call batch limit. A processor then
//! returns, keeps its place, and is called again later. This is where backpressure bites.
//!
//! Cost per offered item: one branch on the batch limit, the routing decision (a counter for
//! round-robin, a key hash for partitioned edges) and one conveyor push. No allocation, lock or
//! syscall. A broadcast clones the item once per extra target. [`OutPort::offer_from`] moves a
//! whole run for less: one release store per target and call instead of one per item.

use std::any::{Any, type_name};
use std::collections::VecDeque;
use std::sync::Arc;

use crate::conveyor::{self, Message, Receiver, Sender, route_run};

use crate::item::Item;
use crate::watermark::{SourceTime, Watermark, WatermarkThrottle};

/// A typed partition function stored erased in an [`Edge`](crate::Edge): item → partition.
pub(crate) type PartitionFn<T> = Arc<dyn PartitionOf<T>>;

/// A partition function, called per item or over a whole run of items.
///
/// Every `Fn(&T) -> u32` is one. The run form is one virtual call per run, with the
/// function inlined in its loop: what a partitioned port uses to route a batch.
pub(crate) trait PartitionOf<T>: Send + Sync {
    /// The partition of `item`.
    fn partition(&self, item: &T) -> u32;
    /// Moves up to `max` items from the front of `items`, in order, each into
    /// `targets[owners[partition(item)]]`; stops at the first item whose target is full,
    /// which stays at the front with everything behind it. Returns how many moved.
    ///
    /// Cost per item: the partition function, a table read, a move out of `items` and a
    /// move into its target's ring; per call, an acquire load and a release store per
    /// target. With more than four targets, or when a consumer is behind, a release store
    /// per item instead (see [`route_run`](crate::conveyor::route_run)).
    fn route_from(
        &self,
        items: &mut VecDeque<T>,
        max: usize,
        owners: &[u32],
        targets: &mut [Sender<T>],
    ) -> usize;
}

impl<T, F: Fn(&T) -> u32 + Send + Sync> PartitionOf<T> for F {
    #[inline]
    fn partition(&self, item: &T) -> u32 {
        self(item)
    }

    fn route_from(
        &self,
        items: &mut VecDeque<T>,
        max: usize,
        owners: &[u32],
        targets: &mut [Sender<T>],
    ) -> usize {
        route_run(targets, items, max, |item| {
            owners[self(item) as usize] as usize
        })
    }
}

/// Default per-call limit on the items one port accepts.
pub const DEFAULT_BATCH_LIMIT: usize = 1024;

/// How a partitioned port finds an item's target: the edge's partition function, then the
/// partition's owner.
pub(crate) struct PartitionRoute<T> {
    pub(crate) partition_of: PartitionFn<T>,
    /// The target of each partition.
    pub(crate) owners: Arc<[u32]>,
}

impl<T> PartitionRoute<T> {
    /// The target index of `item`. Cost: one call of the partition function, one table read.
    #[inline]
    fn target_of(&self, item: &T) -> usize {
        self.owners[self.partition_of.partition(item) as usize] as usize
    }
}

/// How a port chooses among its target conveyors.
pub(crate) enum Route<T> {
    /// Round-robin over the targets, skipping full ones. Also used for a single target.
    RoundRobin,
    /// The target is chosen by the item's key.
    Partitioned(PartitionRoute<T>),
    /// Every target gets a copy.
    Broadcast,
}

/// One output ordinal: the conveyors to every consumer instance of the edge, and the routing.
pub struct OutPort<T> {
    targets: Vec<Sender<T>>,
    route: Route<T>,
    next: usize,
    batch_limit: usize,
    accepted_in_call: usize,
    accepted_total: u64,
    refused_total: u64,
    /// Refusals because a target queue was full (not the batch limit): backpressure.
    blocked_total: u64,
    done_sent: Vec<bool>,
}

impl<T: Item> OutPort<T> {
    pub(crate) fn new(targets: Vec<Sender<T>>, route: Route<T>, batch_limit: usize) -> Self {
        let done_sent = vec![false; targets.len()];
        OutPort {
            targets,
            route,
            next: 0,
            batch_limit: batch_limit.max(1),
            accepted_in_call: 0,
            accepted_total: 0,
            refused_total: 0,
            blocked_total: 0,
            done_sent,
        }
    }

    /// Offers `item`. `Ok` means it is on its way; `Err` hands it back because the target
    /// queue is full or this call's batch limit is reached. Never blocks.
    ///
    /// This is Jet's `offer(ordinal, item) -> bool` in Rust form: the refused item is
    /// returned rather than dropped, so nothing is lost.
    #[inline]
    pub fn offer(&mut self, item: T) -> Result<(), T> {
        if self.accepted_in_call >= self.batch_limit {
            self.refused_total += 1;
            return Err(item);
        }
        let result = match &self.route {
            Route::RoundRobin => self.send_round_robin(item),
            Route::Partitioned(route) => {
                let target = route.target_of(&item);
                self.targets[target].try_send(item)
            }
            Route::Broadcast => {
                if self.targets.iter().all(Sender::has_room) {
                    let (last, rest) = self.targets.split_last_mut().expect("a port has targets");
                    for target in rest {
                        // Cannot fail: only this end fills the queue, and it had room.
                        let _ = target.try_send(item.clone());
                    }
                    let _ = last.try_send(item);
                    Ok(())
                } else {
                    Err(item)
                }
            }
        };
        match result {
            Ok(()) => {
                self.accepted_in_call += 1;
                self.accepted_total += 1;
                Ok(())
            }
            Err(item) => {
                self.refused_total += 1;
                self.blocked_total += 1;
                Err(item)
            }
        }
    }

    /// Offers items from the front of `items` until one is refused or `items` is empty;
    /// returns how many were taken. Same routing and limits as [`offer`](Self::offer), but
    /// cheaper per item: a round-robin port fills one target at a time with a whole run (one
    /// release store per run); a partitioned port moves each item straight into its place in
    /// its target's ring in one loop with the partition function inlined (its order kept per
    /// target, one release store per target and call).
    pub fn offer_from(&mut self, items: &mut VecDeque<T>) -> usize {
        if matches!(self.route, Route::Partitioned(_)) && self.targets.len() > 1 {
            return self.offer_partitioned_from(items);
        }
        if matches!(self.route, Route::Broadcast) {
            let mut taken = 0;
            while let Some(item) = items.pop_front() {
                if let Err(item) = self.offer(item) {
                    items.push_front(item);
                    break;
                }
                taken += 1;
            }
            return taken;
        }
        let mut taken = 0;
        let n = self.targets.len();
        for _ in 0..n {
            let room = self.batch_limit - self.accepted_in_call;
            if items.is_empty() || room == 0 {
                break;
            }
            let i = self.next;
            self.next = if i + 1 == n { 0 } else { i + 1 };
            let moved = self.targets[i].send_from(items, room);
            self.accepted_in_call += moved;
            taken += moved;
        }
        self.accepted_total += taken as u64;
        if !items.is_empty() {
            self.refused_total += 1;
            if self.accepted_in_call < self.batch_limit {
                self.blocked_total += 1;
            }
        }
        taken
    }

    /// [`offer_from`](Self::offer_from) for a partitioned port with several targets: one
    /// pass over the front of the queue (one virtual call of the partition function per
    /// call, inlined in the loop), each item moved straight into its place in its target's
    /// ring, each target's run made visible with one release store (up to four targets,
    /// each with room for 32 items; otherwise one conveyor send per item). It stops at the
    /// batch limit or at the first item whose target is full, which stays at the front with
    /// everything behind it: a call to a port whose consumers are behind looks at one item,
    /// not a batch it would have to route again.
    fn offer_partitioned_from(&mut self, items: &mut VecDeque<T>) -> usize {
        let Route::Partitioned(route) = &self.route else {
            unreachable!("called for partitioned ports only")
        };
        let max = self.batch_limit - self.accepted_in_call;
        let taken = route
            .partition_of
            .route_from(items, max, &route.owners, &mut self.targets);
        self.accepted_in_call += taken;
        self.accepted_total += taken as u64;
        if !items.is_empty() {
            self.refused_total += 1;
            if self.accepted_in_call < self.batch_limit {
                // Stopped at a full target, not at the limit: backpressure.
                self.blocked_total += 1;
            }
        }
        taken
    }

    /// Tries each target once, starting after the last one used.
    #[inline]
    fn send_round_robin(&mut self, mut item: T) -> Result<(), T> {
        let n = self.targets.len();
        for _ in 0..n {
            let i = self.next;
            self.next = if i + 1 == n { 0 } else { i + 1 };
            match self.targets[i].try_send(item) {
                Ok(()) => return Ok(()),
                Err(back) => item = back,
            }
        }
        Err(item)
    }

    /// Whether an item offered now would be accepted, whatever its key. Check it before
    /// expensive work. For a partitioned port this is conservative: every target must have room.
    #[inline]
    pub fn has_room(&self) -> bool {
        if self.accepted_in_call >= self.batch_limit {
            return false;
        }
        match self.route {
            Route::RoundRobin => self.targets.iter().any(Sender::has_room),
            Route::Partitioned(_) | Route::Broadcast => self.targets.iter().all(Sender::has_room),
        }
    }

    /// Items accepted since the port was created.
    pub fn accepted(&self) -> u64 {
        self.accepted_total
    }
}

/// What the tasklet and outbox need from a port without knowing its item type.
pub(crate) trait ErasedPort: Send {
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn begin_call(&mut self);
    fn accepted_in_call(&self) -> usize;
    fn accepted_total(&self) -> u64;
    fn refused_total(&self) -> u64;
    fn blocked_total(&self) -> u64;
    fn has_room(&self) -> bool;
    fn can_take_marker(&self) -> bool;
    fn offer_watermark(&mut self, wm: Watermark, source_time: SourceTime) -> bool;
    fn offer_idle(&mut self) -> bool;
    fn offer_barrier(&mut self, n: u64) -> bool;
    fn offer_done(&mut self) -> bool;
    fn item_type_name(&self) -> &'static str;
}

impl<T: Item> ErasedPort for OutPort<T> {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn begin_call(&mut self) {
        self.accepted_in_call = 0;
    }
    fn accepted_in_call(&self) -> usize {
        self.accepted_in_call
    }
    fn accepted_total(&self) -> u64 {
        self.accepted_total
    }
    fn refused_total(&self) -> u64 {
        self.refused_total
    }
    fn blocked_total(&self) -> u64 {
        self.blocked_total
    }
    fn has_room(&self) -> bool {
        OutPort::has_room(self)
    }
    fn can_take_marker(&self) -> bool {
        self.targets.iter().all(Sender::has_room)
    }
    fn offer_watermark(&mut self, wm: Watermark, source_time: SourceTime) -> bool {
        // A watermark goes to every target, or to none, so that all consumers see the same
        // sequence.
        if !self.can_take_marker() {
            return false;
        }
        for target in &mut self.targets {
            target.send_watermark_from(wm, source_time);
        }
        true
    }
    fn offer_idle(&mut self) -> bool {
        if !self.can_take_marker() {
            return false;
        }
        for target in &mut self.targets {
            target.send_idle();
        }
        true
    }
    fn offer_barrier(&mut self, n: u64) -> bool {
        if !self.can_take_marker() {
            return false;
        }
        for target in &mut self.targets {
            target.send_barrier(n);
        }
        true
    }
    fn offer_done(&mut self) -> bool {
        for (target, sent) in self.targets.iter_mut().zip(&mut self.done_sent) {
            if !*sent {
                *sent = target.send_done();
            }
        }
        self.done_sent.iter().all(|s| *s)
    }
    fn item_type_name(&self) -> &'static str {
        type_name::<T>()
    }
}

/// All the output ports of one processor instance.
pub struct Outbox {
    ports: Vec<Box<dyn ErasedPort>>,
    progress_reported: bool,
    /// The source time of the watermark the tasklet is handing the processor, which a
    /// watermark offered meanwhile carries on; `None`: a watermark offered is stamped now.
    forwarding: Option<SourceTime>,
    /// Which watermarks offered go out (all, unless the vertex set a granule).
    throttle: WatermarkThrottle,
    /// Markers (watermarks, idle markers, barriers, the done marker) sent since the last
    /// `begin_call`.
    markers_in_call: usize,
}

impl Outbox {
    pub(crate) fn new(ports: Vec<Box<dyn ErasedPort>>) -> Self {
        Outbox {
            ports,
            progress_reported: false,
            forwarding: None,
            throttle: WatermarkThrottle::default(),
            markers_in_call: 0,
        }
    }

    /// Sends only the watermarks that reach a new multiple of `granule` ms, rounded down to
    /// it (see [`WatermarkThrottle`]); 1 sends every one.
    pub(crate) fn throttle_watermarks(&mut self, granule: i64) {
        self.throttle = WatermarkThrottle::new(granule);
    }

    /// While `Some`, watermarks offered carry `source_time` on: the tasklet sets it around
    /// [`Processor::try_process_watermark`](crate::Processor::try_process_watermark).
    pub(crate) fn set_forwarding(&mut self, source_time: Option<SourceTime>) {
        self.forwarding = source_time;
    }

    /// Whether the processor has no outputs: it is a sink.
    pub(crate) fn is_terminal(&self) -> bool {
        self.ports.is_empty()
    }

    /// Tells the runtime that this call did useful work although it emitted nothing and took
    /// no input (a source that fed an accumulator, a processor that flushed a file), so the
    /// worker must not back off as if it were idle.
    #[inline]
    pub fn report_progress(&mut self) {
        self.progress_reported = true;
    }

    /// Whether progress was reported or items accepted since the last `begin_call`.
    pub(crate) fn progress_in_call(&self) -> bool {
        self.progress_reported || self.accepted_in_call() > 0
    }

    /// A standalone outbox with `ordinals` ports of item type `T`, each one conveyor of
    /// `capacity` (rounded up to a power of two) and no per-call batch limit. The returned
    /// [`TestDrain`]s read what was emitted. Used by the processor test harness and by tests.
    pub fn for_test<T: Item>(ordinals: usize, capacity: usize) -> (Outbox, Vec<TestDrain<T>>) {
        let mut ports: Vec<Box<dyn ErasedPort>> = Vec::new();
        let mut drains = Vec::new();
        for _ in 0..ordinals {
            let (tx, rx) = conveyor::channel::<T>(capacity);
            ports.push(Box::new(OutPort::new(
                vec![tx],
                Route::RoundRobin,
                usize::MAX,
            )));
            drains.push(TestDrain { rx });
        }
        (Outbox::new(ports), drains)
    }

    /// The number of output ordinals.
    pub fn ordinals(&self) -> usize {
        self.ports.len()
    }

    /// The typed port for `ordinal`. One `TypeId` comparison; call it once per call, not per
    /// item.
    ///
    /// # Panics
    /// If `ordinal` does not exist, or `T` is not the type the vertex declared for it (a bug in
    /// the processor: the DAG checked the declared types before running).
    #[inline]
    pub fn port<T: Item>(&mut self, ordinal: usize) -> &mut OutPort<T> {
        let port = &mut self.ports[ordinal];
        let declared = port.item_type_name();
        match port.as_any_mut().downcast_mut::<OutPort<T>>() {
            Some(p) => p,
            None => panic!(
                "output ordinal {ordinal} used as `{}`, but it was declared as `{declared}`",
                type_name::<T>()
            ),
        }
    }

    /// Whether `ordinal` would accept an item now. See [`OutPort::has_room`].
    #[inline]
    pub fn has_room(&self, ordinal: usize) -> bool {
        self.ports[ordinal].has_room()
    }

    /// Whether every ordinal would accept an item now.
    pub fn has_room_all(&self) -> bool {
        self.ports.iter().all(|p| p.has_room())
    }

    /// Offers `item` to every ordinal, all or nothing: it is accepted only if every port has
    /// room, and then each gets a copy. Every ordinal must carry `T`.
    pub fn offer_to_all<T: Item>(&mut self, item: T) -> Result<(), T> {
        if !self.has_room_all() {
            return Err(item);
        }
        let n = self.ports.len();
        for ordinal in 0..n.saturating_sub(1) {
            let _ = self.port::<T>(ordinal).offer(item.clone());
        }
        if n > 0 {
            let _ = self.port::<T>(n - 1).offer(item);
        }
        Ok(())
    }

    /// Forwards a watermark to every ordinal. Returns false, having sent nothing new to the
    /// ports that could not take it, when some port is full; call again later.
    ///
    /// Offered while the processor handles a watermark from its inputs, it carries that
    /// watermark's [`SourceTime`] on; otherwise it is stamped now, as a source's own.
    ///
    /// When the vertex throttles its watermarks ([`Vertex::watermark_granule`]), one that
    /// does not reach a new multiple of the granule is taken and not sent (true), and one
    /// that does is sent rounded down to that multiple.
    ///
    /// [`Vertex::watermark_granule`]: crate::Vertex::watermark_granule
    pub fn offer_watermark(&mut self, wm: Watermark) -> bool {
        let Some(wm) = self.throttle.admit(wm) else {
            return true;
        };
        if !self.ports.iter().all(|p| p.can_take_marker()) {
            return false;
        }
        let source_time = self.forwarding.unwrap_or_else(SourceTime::now);
        let sent = self
            .ports
            .iter_mut()
            .all(|p| p.offer_watermark(wm, source_time));
        if sent {
            self.throttle.sent(wm);
            self.markers_in_call += 1;
        }
        sent
    }

    /// Tells every consumer that this processor has no data for now, so that it stops holding
    /// their watermark back until its next item or watermark. All or nothing, like
    /// [`offer_watermark`](Self::offer_watermark): false, having sent nothing, when some port
    /// is full.
    pub fn offer_idle(&mut self) -> bool {
        if !self.ports.iter().all(|p| p.can_take_marker()) {
            return false;
        }
        let sent = self.ports.iter_mut().all(|p| p.offer_idle());
        self.markers_in_call += usize::from(sent);
        sent
    }

    /// Sends the barrier of snapshot `n` to every consumer, after everything emitted so far.
    /// All or nothing, like [`offer_watermark`](Self::offer_watermark).
    pub(crate) fn offer_barrier(&mut self, n: u64) -> bool {
        if !self.ports.iter().all(|p| p.can_take_marker()) {
            return false;
        }
        let sent = self.ports.iter_mut().all(|p| p.offer_barrier(n));
        self.markers_in_call += usize::from(sent);
        sent
    }

    pub(crate) fn begin_call(&mut self) {
        self.progress_reported = false;
        self.markers_in_call = 0;
        for p in &mut self.ports {
            p.begin_call();
        }
    }

    pub(crate) fn accepted_in_call(&self) -> usize {
        self.ports.iter().map(|p| p.accepted_in_call()).sum()
    }

    pub(crate) fn accepted_total(&self) -> u64 {
        self.ports.iter().map(|p| p.accepted_total()).sum()
    }

    pub(crate) fn refused_total(&self) -> u64 {
        self.ports.iter().map(|p| p.refused_total()).sum()
    }

    /// Offers refused because a target queue was full, since the outbox was created.
    pub(crate) fn blocked_total(&self) -> u64 {
        self.ports.iter().map(|p| p.blocked_total()).sum()
    }

    /// Sends the done marker on every port; true once every target has it.
    pub(crate) fn offer_done(&mut self) -> bool {
        let mut all = true;
        for p in &mut self.ports {
            all &= p.offer_done();
        }
        self.markers_in_call += usize::from(all);
        all
    }

    /// Whether items or markers went into a queue since the last `begin_call`: what a
    /// consumer parked on one of them must be nudged for.
    pub(crate) fn sent_in_call(&self) -> bool {
        self.markers_in_call > 0 || self.accepted_in_call() > 0
    }
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("ordinals", &self.ports.len())
            .finish()
    }
}

/// Reads what a test outbox's port emitted.
pub struct TestDrain<T> {
    rx: Receiver<T>,
}

impl<T> TestDrain<T> {
    /// Takes every item emitted so far, skipping markers.
    pub fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::new();
        while let Some(m) = self.rx.try_recv() {
            if let Message::Item(t) = m {
                out.push(t);
            }
        }
        out
    }

    /// Takes every message emitted so far, markers included.
    pub fn drain_messages(&mut self) -> Vec<Message<T>> {
        std::iter::from_fn(|| self.rx.try_recv()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conveyor::Signal;
    use proptest::prelude::*;

    fn port(
        targets: usize,
        cap: usize,
        route: Route<u32>,
        limit: usize,
    ) -> (OutPort<u32>, Vec<Receiver<u32>>) {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..targets).map(|_| conveyor::channel(cap)).unzip();
        (OutPort::new(txs, route, limit), rxs)
    }

    /// Routes even numbers to `owners[0]` and odd ones to `owners[1]`.
    fn parity_route(owners: [u32; 2]) -> Route<u32> {
        Route::Partitioned(PartitionRoute {
            partition_of: Arc::new(|x: &u32| *x % 2),
            owners: Arc::from(owners),
        })
    }

    #[test]
    fn a_throttled_outbox_sends_watermarks_at_the_granule_only() {
        let (txs, mut rxs): (Vec<_>, Vec<_>) = (0..2).map(|_| conveyor::channel::<u32>(4)).unzip();
        let mut outbox = Outbox::new(vec![Box::new(OutPort::new(txs, Route::Broadcast, 100))]);
        outbox.throttle_watermarks(1_000);
        for wm in [999, 1_000, 1_001, 1_999, 2_500, 2_600] {
            assert!(outbox.offer_watermark(Watermark(wm)), "taken, sent or not");
        }
        use Message::Watermark as Wm;
        for rx in &mut rxs {
            let got: Vec<_> = std::iter::from_fn(|| rx.try_recv()).collect();
            assert_eq!(
                got,
                [Wm(Watermark(0)), Wm(Watermark(1_000)), Wm(Watermark(2_000))]
            );
        }
        // Full queues: refused, and sent when offered again.
        for wm in [3_000, 4_000, 5_000, 6_000] {
            assert!(outbox.offer_watermark(Watermark(wm)));
        }
        assert!(!outbox.offer_watermark(Watermark(7_100)));
        for rx in &mut rxs {
            while rx.try_recv().is_some() {}
        }
        assert!(outbox.offer_watermark(Watermark(7_200)));
        for rx in &mut rxs {
            assert_eq!(rx.try_recv(), Some(Wm(Watermark(7_000))));
        }
    }

    #[test]
    fn only_items_and_markers_sent_count_as_sent_in_a_call() {
        let (tx, mut rx) = conveyor::channel::<u32>(4);
        let mut outbox = Outbox::new(vec![Box::new(OutPort::new(
            vec![tx],
            Route::RoundRobin,
            100,
        ))]);
        outbox.throttle_watermarks(1_000);
        outbox.begin_call();
        outbox.report_progress();
        assert!(outbox.offer_watermark(Watermark(1_500)));
        assert!(outbox.sent_in_call(), "the first watermark goes out");
        outbox.begin_call();
        // Progress (an accumulator fed) and a watermark the throttle holds back: nothing
        // reached the queue, so no consumer needs waking.
        outbox.report_progress();
        assert!(outbox.offer_watermark(Watermark(1_900)));
        assert!(outbox.progress_in_call() && !outbox.sent_in_call());
        outbox.begin_call();
        assert!(outbox.port::<u32>(0).offer(7).is_ok());
        assert!(outbox.sent_in_call());
        outbox.begin_call();
        assert!(outbox.offer_idle());
        assert!(outbox.sent_in_call());
        while rx.try_recv().is_some() {}
    }

    #[test]
    fn round_robin_skips_a_full_target() {
        let (mut p, mut rxs) = port(2, 1, Route::RoundRobin, 100);
        p.offer(1).unwrap();
        p.offer(2).unwrap();
        assert_eq!(p.offer(3), Err(3), "both full");
        rxs[0].try_recv();
        p.offer(3).unwrap();
        assert_eq!(rxs[0].try_recv(), Some(Message::Item(3)));
        assert_eq!(rxs[1].try_recv(), Some(Message::Item(2)));
    }

    #[test]
    fn offer_from_moves_runs_round_robin_within_the_limit() {
        let (mut p, mut rxs) = port(2, 4, Route::RoundRobin, 6);
        let mut items: VecDeque<u32> = (0..10).collect();
        assert_eq!(p.offer_from(&mut items), 6, "the batch limit stops it");
        assert_eq!(rxs[0].len() + rxs[1].len(), 6);
        assert_eq!(items.front(), Some(&6));
        ErasedPort::begin_call(&mut p);
        assert_eq!(p.offer_from(&mut items), 2, "then the queues are full");
        assert_eq!(p.accepted(), 8);
        let mut out = VecDeque::new();
        rxs[0].drain_into(&mut out, 10);
        rxs[1].drain_into(&mut out, 10);
        out.make_contiguous().sort();
        assert_eq!(out, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn batch_limit_refuses_until_next_call() {
        let (mut p, _rxs) = port(1, 16, Route::RoundRobin, 2);
        p.offer(1).unwrap();
        p.offer(2).unwrap();
        assert_eq!(p.offer(3), Err(3));
        assert!(!p.has_room());
        ErasedPort::begin_call(&mut p);
        p.offer(3).unwrap();
        assert_eq!(p.refused_total, 1);
    }

    #[test]
    fn broadcast_is_all_or_nothing() {
        let (mut p, mut rxs) = port(2, 1, Route::Broadcast, 100);
        p.offer(7).unwrap();
        rxs[0].try_recv();
        assert_eq!(p.offer(8), Err(8), "target 1 is still full");
        assert!(rxs[0].is_empty(), "nothing went to target 0 either");
        rxs[1].try_recv();
        p.offer(8).unwrap();
        assert_eq!(rxs[0].try_recv(), Some(Message::Item(8)));
        assert_eq!(rxs[1].try_recv(), Some(Message::Item(8)));
    }

    #[test]
    fn partitioned_routes_by_key() {
        let (mut p, mut rxs) = port(2, 8, parity_route([0, 1]), 100);
        for i in 0..4 {
            p.offer(i).unwrap();
        }
        assert_eq!(rxs[0].len(), 2);
        assert_eq!(rxs[1].try_recv(), Some(Message::Item(1)));
    }

    #[test]
    fn a_partitioned_run_keeps_order_per_target_and_stops_at_a_full_one() {
        let route = || parity_route([0, 1]);
        // Each target holds 2 items: the run stops at 4, the third item for target 0.
        let (mut p, mut rxs) = port(2, 2, route(), 100);
        let mut items: VecDeque<u32> = (0..8).collect();
        assert_eq!(p.offer_from(&mut items), 4);
        assert_eq!(items.front(), Some(&4), "stopped at the first refused item");
        let got: Vec<_> = std::iter::from_fn(|| rxs[1].try_recv()).collect();
        assert_eq!(got, vec![Message::Item(1), Message::Item(3)]);
        assert_eq!(rxs[0].len(), 2);
        assert_eq!(p.refused_total, 1);
        // The batch limit counts across targets.
        let (mut p, rxs) = port(2, 64, route(), 3);
        let mut items: VecDeque<u32> = (0..8).collect();
        assert_eq!(p.offer_from(&mut items), 3);
        assert_eq!(rxs[0].len() + rxs[1].len(), 3);
        assert_eq!(p.accepted(), 3);
    }

    #[test]
    fn a_partitioned_port_routes_no_more_items_than_fit() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let route = Route::Partitioned(PartitionRoute {
            partition_of: Arc::new(move |x: &u32| {
                counted.fetch_add(1, Ordering::Relaxed);
                *x % 2
            }),
            owners: Arc::from([0, 1]),
        });
        // 2 targets of 2 slots: of 1000 items, 4 fit; the fifth is looked at and kept.
        let (mut p, mut rxs) = port(2, 2, route, 1000);
        let mut items: VecDeque<u32> = (0..1000).collect();
        assert_eq!(p.offer_from(&mut items), 4);
        assert_eq!(calls.load(Ordering::Relaxed), 5);
        assert_eq!(items.len(), 996);
        // Both full: the front item is looked at, nothing else.
        ErasedPort::begin_call(&mut p);
        assert_eq!(p.offer_from(&mut items), 0);
        assert_eq!(calls.load(Ordering::Relaxed), 6);
        // Target 1 has room, but the front item is target 0's: it stops there, in order.
        rxs[1].try_recv();
        ErasedPort::begin_call(&mut p);
        assert_eq!(p.offer_from(&mut items), 0);
        assert_eq!(items.front(), Some(&4));
        rxs[0].try_recv();
        ErasedPort::begin_call(&mut p);
        assert_eq!(p.offer_from(&mut items), 2, "4 to target 0, 5 to target 1");
        assert_eq!(items.front(), Some(&6));
        assert_eq!(p.refused_total, 4);
    }

    #[test]
    fn a_partitioned_port_counts_a_full_target_as_blocked_and_the_limit_not() {
        let route = || parity_route([0, 1]);
        let (mut p, _rxs) = port(2, 2, route(), 100);
        let mut items: VecDeque<u32> = (0..8).collect();
        assert_eq!(p.offer_from(&mut items), 4);
        assert_eq!((p.refused_total, p.blocked_total), (1, 1));
        let (mut p, _rxs) = port(2, 64, route(), 3);
        let mut items: VecDeque<u32> = (0..8).collect();
        assert_eq!(p.offer_from(&mut items), 3);
        assert_eq!((p.refused_total, p.blocked_total), (1, 0));
        // Everything taken: nothing refused.
        let (mut p, _rxs) = port(2, 64, route(), 100);
        let mut items: VecDeque<u32> = (0..8).collect();
        assert_eq!(p.offer_from(&mut items), 8);
        assert_eq!((p.refused_total, p.blocked_total), (0, 0));
    }

    #[test]
    fn a_partitioned_run_and_the_markers_after_it_arrive_in_order() {
        let (mut p, mut rxs) = port(2, 8, parity_route([1, 0]), 100);
        let mut items: VecDeque<u32> = (0..5).collect();
        assert_eq!(p.offer_from(&mut items), 5);
        assert!(p.offer_watermark(Watermark(3), SourceTime::ZERO));
        items.extend([5, 6]);
        assert_eq!(p.offer_from(&mut items), 2);
        assert!(p.offer_done());
        let got = |rx: &mut Receiver<u32>| std::iter::from_fn(|| rx.try_recv()).collect::<Vec<_>>();
        use Message::{Done, Item, Watermark as Wm};
        assert_eq!(
            got(&mut rxs[0]),
            [Item(1), Item(3), Wm(Watermark(3)), Item(5), Done]
        );
        assert_eq!(
            got(&mut rxs[1]),
            [Item(0), Item(2), Item(4), Wm(Watermark(3)), Item(6), Done]
        );
    }

    /// One step of the partitioned port's model test.
    #[derive(Debug, Clone)]
    enum PortOp {
        /// New items, each a sequence number times 8 plus its partition (0..7).
        Produce(Vec<u32>),
        /// `offer_from` in a new call (`true`) or in the same call as the last one.
        Offer(bool),
        /// The consumer of a target drains up to this many items.
        Drain(usize, usize),
        Watermark,
    }

    proptest! {
        /// Against a model of each target's queue: a partitioned `offer_from` takes the
        /// longest prefix whose items all fit their targets within the batch limit, each
        /// consumer gets its items in order with the watermarks where they were sent, and
        /// the counters say what happened.
        #[test]
        fn partitioned_offer_from_matches_a_model(
            capacities in proptest::collection::vec(1usize..80, 2..7),
            owners in proptest::collection::vec(0u32..8, 7),
            limit in 1usize..60,
            ops in proptest::collection::vec(
                prop_oneof![
                    proptest::collection::vec(0u32..7, 0..60).prop_map(PortOp::Produce),
                    any::<bool>().prop_map(PortOp::Offer),
                    (0usize..8, 0usize..80).prop_map(|(t, k)| PortOp::Drain(t, k)),
                    Just(PortOp::Watermark),
                ],
                1..100,
            ),
        ) {
            let n = capacities.len();
            let owners: Vec<u32> = owners.iter().map(|o| o % n as u32).collect();
            let (txs, mut rxs): (Vec<_>, Vec<_>) =
                capacities.iter().map(|&c| conveyor::channel::<u32>(c)).unzip();
            let capacities: Vec<usize> = txs.iter().map(Sender::capacity).collect();
            let route = Route::Partitioned(PartitionRoute {
                partition_of: Arc::new(|x: &u32| *x % 8),
                owners: Arc::from(owners.clone()),
            });
            let mut p = OutPort::new(txs, route, limit);
            let mut queued: Vec<VecDeque<Message<u32>>> = vec![VecDeque::new(); n];
            let mut items = VecDeque::new();
            let mut next = 0u32;
            let (mut in_call, mut accepted, mut refused, mut blocked) = (0usize, 0u64, 0u64, 0u64);
            let mut wm = 0;
            for op in ops {
                match op {
                    PortOp::Produce(partitions) => {
                        for partition in partitions {
                            items.push_back(next * 8 + partition);
                            next += 1;
                        }
                    }
                    PortOp::Offer(new_call) => {
                        if new_call {
                            ErasedPort::begin_call(&mut p);
                            in_call = 0;
                        }
                        let mut expected = 0;
                        let mut left = items.clone();
                        while let Some(&item) = left.front() {
                            let target = owners[(item % 8) as usize] as usize;
                            if in_call == limit || queued[target].len() == capacities[target] {
                                break;
                            }
                            queued[target].push_back(Message::Item(item));
                            left.pop_front();
                            in_call += 1;
                            expected += 1;
                        }
                        prop_assert_eq!(p.offer_from(&mut items), expected);
                        prop_assert_eq!(&items, &left);
                        accepted += expected as u64;
                        if !items.is_empty() {
                            refused += 1;
                            if in_call < limit {
                                blocked += 1;
                            }
                        }
                        prop_assert_eq!(
                            (p.accepted_total, p.refused_total, p.blocked_total),
                            (accepted, refused, blocked)
                        );
                    }
                    PortOp::Drain(target, k) => {
                        let target = target % n;
                        let mut out = VecDeque::new();
                        let d = rxs[target].drain_into(&mut out, k);
                        let mut expected = Vec::new();
                        let mut signal = None;
                        while expected.len() < k {
                            match queued[target].pop_front() {
                                Some(Message::Item(item)) => expected.push(item),
                                Some(Message::Watermark(w)) => {
                                    signal = Some(Signal::Watermark(w, SourceTime::ZERO));
                                    break;
                                }
                                Some(other) => prop_assert!(false, "unexpected {:?}", other),
                                None => break,
                            }
                        }
                        prop_assert_eq!(Vec::from(out), expected);
                        prop_assert_eq!(d.signal, signal);
                    }
                    PortOp::Watermark => {
                        wm += 1;
                        let fits = (0..n).all(|t| queued[t].len() < capacities[t]);
                        prop_assert_eq!(p.offer_watermark(Watermark(wm), SourceTime::ZERO), fits);
                        if fits {
                            for q in &mut queued {
                                q.push_back(Message::Watermark(Watermark(wm)));
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn done_is_retried_until_every_target_has_it() {
        let (mut p, mut rxs) = port(2, 1, Route::RoundRobin, 100);
        p.offer(1).unwrap();
        assert!(!p.offer_done(), "target 0 is full");
        rxs[0].try_recv();
        assert!(p.offer_done());
        assert_eq!(rxs[0].try_recv(), Some(Message::Done));
        assert_eq!(rxs[1].try_recv(), Some(Message::Done));
    }
}
