//! Event-time windows: frame accumulation, combining frames into sliding windows, and
//! session windows.
//!
//! A tumbling or sliding window of `size` sliding by `slide` is cut into *frames* of `slide`
//! ms, aligned to the epoch: frame `[k*slide, (k+1)*slide)` is identified by its end. Stage
//! one ([`FrameAccumulate`], a terminal fused behind the stream) folds each item into its
//! frame's accumulator per key, and when the watermark passes a frame's end sends the frame's
//! partial accumulators on, partitioned by key. Stage two ([`SlidingCombine`]) keeps each
//! key's frames and, when the watermark passes a window's end, combines the frames inside it
//! into the window's result. With an operation that can `deduct`, it slides a running
//! accumulator instead: add the newest frame, deduct the one that left.
//!
//! [`SlidingAggregate`] runs the same windows in one stage after a partitioned edge: every
//! item crosses the shuffle and is folded into its key's frame there, so a window's close
//! sends no burst of partial frames (lower latency, more items on the exchange). For a
//! sliding window whose operation can `deduct`, [`RunningAggregate`] keeps each key's value
//! of the next window up to date as items arrive, so the close only reads it out.
//!
//! Session windows ([`SessionLink`]) run in one stage after a partitioned edge: each key's
//! sessions grow and merge as items arrive, and close when the watermark passes their end
//! (the last item's time plus the gap).
//!
//! An item behind the watermark is late: it is dropped and counted in `late_events`.

use std::collections::{BTreeMap, VecDeque, hash_map};
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use rustc_hash::FxHashMap;

/// The `Link` methods that the one-stage window links ([`SlidingAggregate`],
/// [`RunningAggregate`]) share: items go to `self.accumulate`, read where they lie; the
/// rest goes to `self.next`, and a finite input's end is the final watermark. Each link
/// writes its own `watermark`, `save` and `restore`.
macro_rules! one_stage_window_plumbing {
    () => {
        fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
            self.late = ctx.metrics().counter("late_events");
            self.place = InstancePlace::of(ctx);
            self.next.init(ctx)
        }

        #[inline]
        fn push(&mut self, item: Timestamped<T>) -> bool {
            self.accumulate(&item);
            true
        }

        /// Accumulates the items where they lie: an item is read, never moved.
        fn push_batch(&mut self, items: &mut Vec<Timestamped<T>>) -> bool {
            for item in items.iter() {
                self.accumulate(item);
            }
            items.clear();
            true
        }

        fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
            self.next.flush(outbox)
        }

        fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
            // Open frames stay: only the watermark closes a window.
            self.next.idle(outbox)
        }

        fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
            // A finite input ends every window.
            if !self.watermark(Watermark::MAX, outbox)? {
                return Ok(false);
            }
            self.next.complete(outbox)
        }

        fn is_cooperative(&self) -> bool {
            self.next.is_cooperative()
        }

        fn prepare_save(&mut self) -> ProcessorResult<bool> {
            self.next.prepare_save()
        }

        fn commit(&mut self) -> ProcessorResult<bool> {
            self.next.commit()
        }
    };
}

mod one_stage;
mod running;
pub use one_stage::SlidingAggregate;
pub use running::RunningAggregate;
use weir_core::{
    Counter, Inbox, Item, Outbox, PartitionKey, Processor, ProcessorContext, ProcessorResult,
    SnapshotEntry, SnapshotWriter, Watermark,
};
#[cfg(test)]
pub(crate) use {one_stage::CLOSE_KEYS_PER_CALL, running::SLIDE_KEYS_PER_CALL};

use crate::aggregate::AggregateOperation;
use crate::event_time::{KeyedWindowResult, Timestamped, WindowDefinition};
use crate::links::link::{Link, chain_idle, chain_watermark, save_chain};
use crate::links::state::{
    ChainEntries, InstancePlace, InstanceTimes, LinkEntries, LinkWriter, Rescaled, StateCodec,
    put_instance_time, refuse_save_if,
};

/// The frame geometry of a tumbling, sliding or global window.
#[derive(Debug, Clone, Copy)]
pub struct Frames {
    size: i64,
    slide: i64,
    /// One window over all time, closed by the final watermark.
    global: bool,
}

impl Frames {
    /// The frames of the window definition `def`.
    pub fn of(def: &WindowDefinition) -> Self {
        match *def {
            WindowDefinition::Tumbling { size } => Frames {
                size,
                slide: size,
                global: false,
            },
            WindowDefinition::Sliding { size, slide } => Frames {
                size,
                slide,
                global: false,
            },
            WindowDefinition::Global => Frames {
                size: i64::MAX,
                slide: i64::MAX,
                global: true,
            },
            WindowDefinition::Session { .. } => unreachable!("session windows have no frames"),
        }
    }

    /// The end of the frame holding `timestamp`.
    #[inline]
    pub fn frame_end(&self, timestamp: i64) -> i64 {
        if self.global {
            i64::MAX
        } else {
            timestamp.div_euclid(self.slide) * self.slide + self.slide
        }
    }

    /// The end of the frame holding `timestamp`, when that is likely `near`: found without a
    /// division when it is.
    #[inline]
    pub fn frame_end_near(&self, timestamp: i64, near: i64) -> i64 {
        if self.global || (timestamp < near && timestamp >= near.saturating_sub(self.slide)) {
            near
        } else {
            self.frame_end(timestamp)
        }
    }

    /// The start of the window that ends at `end`.
    pub fn window_start(&self, end: i64) -> i64 {
        if self.global {
            i64::MIN
        } else {
            end - self.size
        }
    }
}

/// One frame's partial accumulator of one key, on its way to the combine stage.
#[derive(Debug, Clone)]
pub struct Frame<K, A> {
    /// The key.
    pub key: K,
    /// The end of the frame, exclusive, in ms of event time.
    pub end: i64,
    /// The frame's partial accumulator.
    pub acc: A,
}

/// Stage one: accumulates items per frame and key; emits frames as the watermark passes them.
pub struct FrameAccumulate<T, K, KF: ?Sized, Op: AggregateOperation<T>> {
    frames: Frames,
    key: Arc<KF>,
    op: Arc<Op>,
    open: BTreeMap<i64, FxHashMap<K, Op::Acc>>,
    draining: Option<(i64, hash_map::IntoIter<K, Op::Acc>)>,
    pending: Option<Frame<K, Op::Acc>>,
    /// The keys of the last frame sent: a new frame's map starts with room for as many.
    frame_capacity: usize,
    watermark: i64,
    late: Counter,
    codec: WindowCodec<K, Op::Acc>,
    place: InstancePlace,
    _t: PhantomData<fn(T)>,
}

/// The open frame ending at `end`, made with room for `capacity` keys if missing.
#[inline]
fn newest_frame<K, A>(
    open: &mut BTreeMap<i64, FxHashMap<K, A>>,
    end: i64,
    capacity: usize,
) -> &mut FxHashMap<K, A> {
    // Items come in time order give or take the lag, so most belong to the newest frame:
    // its entry is found without a search.
    if open.last_key_value().is_some_and(|(&last, _)| last == end) {
        open.last_entry().expect("checked above").into_mut()
    } else {
        open.entry(end)
            .or_insert_with(|| FxHashMap::with_capacity_and_hasher(capacity, Default::default()))
    }
}

/// How window state is saved: each key, and each accumulator.
pub type WindowCodec<K, A> = (StateCodec<K>, StateCodec<A>);

impl<T, K, KF: ?Sized, Op: AggregateOperation<T>> FrameAccumulate<T, K, KF, Op> {
    /// Accumulates frames of keyed items; see the type's docs for the arguments.
    pub fn new(
        def: &WindowDefinition,
        key: Arc<KF>,
        op: Arc<Op>,
        codec: WindowCodec<K, Op::Acc>,
    ) -> Self {
        FrameAccumulate {
            frames: Frames::of(def),
            key,
            op,
            open: BTreeMap::new(),
            draining: None,
            pending: None,
            frame_capacity: 0,
            watermark: i64::MIN,
            late: Counter::default(),
            codec,
            place: InstancePlace::default(),
            _t: PhantomData,
        }
    }
}

/// `end` then the encoded accumulator: a frame's or a session's value in a snapshot.
fn encode_timed<A>(codec: &StateCodec<A>, times: &[i64], acc: &A) -> ProcessorResult<Vec<u8>> {
    let mut value: Vec<u8> = times.iter().flat_map(|t| t.to_le_bytes()).collect();
    (codec.encode)(acc, &mut value)?;
    Ok(value)
}

/// Puts a saved partial frame of one key back among `frames`, combining it with one already
/// there (partials of one key from several old instances).
fn restore_frame<T, K: Hash + Eq, Op: AggregateOperation<T> + ?Sized>(
    frames: &mut BTreeMap<i64, FxHashMap<K, Op::Acc>>,
    op: &Op,
    (keys, accs): (&StateCodec<K>, &StateCodec<Op::Acc>),
    e: &SnapshotEntry,
) -> ProcessorResult<()> {
    let ([end], acc) = decode_timed::<_, 1>(accs, &e.value)?;
    match frames.entry(end).or_default().entry((keys.decode)(&e.key)?) {
        hash_map::Entry::Occupied(mut held) => op.combine(held.get_mut(), acc),
        hash_map::Entry::Vacant(slot) => {
            slot.insert(acc);
        }
    }
    Ok(())
}

/// Splits what [`encode_timed`] made.
fn decode_timed<A, const N: usize>(
    codec: &StateCodec<A>,
    value: &[u8],
) -> ProcessorResult<([i64; N], A)> {
    if value.len() < 8 * N {
        return Err("a window entry is too short".into());
    }
    let mut times = [0i64; N];
    for (i, t) in times.iter_mut().enumerate() {
        *t = i64::from_le_bytes(value[8 * i..8 * i + 8].try_into()?);
    }
    Ok((times, (codec.decode)(&value[8 * N..])?))
}

impl<T, K, KF, Op> FrameAccumulate<T, K, KF, Op>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    Op: AggregateOperation<T>,
{
    /// Sends every open frame ending at or before `limit`, partial accumulator by partial
    /// accumulator, as room allows. Returns false when the port filled; the next call goes on
    /// where this one stopped.
    fn send_frames_ending_by(&mut self, limit: i64, outbox: &mut Outbox) -> bool {
        let port = outbox.port::<Frame<K, Op::Acc>>(0);
        loop {
            if let Some(frame) = self.pending.take()
                && let Err(frame) = port.offer(frame)
            {
                self.pending = Some(frame);
                return false;
            }
            match &mut self.draining {
                Some((end, entries)) => match entries.next() {
                    Some((key, acc)) => {
                        self.pending = Some(Frame {
                            key,
                            end: *end,
                            acc,
                        })
                    }
                    None => self.draining = None,
                },
                None => match self.open.first_key_value() {
                    Some((&end, _)) if end <= limit => {
                        let (end, entries) = self.open.pop_first().expect("first exists");
                        // The next frames likely hold about as many keys: sized once.
                        self.frame_capacity = entries.len();
                        self.draining = Some((end, entries.into_iter()));
                    }
                    _ => return true,
                },
            }
        }
    }

    /// Adds each of `items` to its key's accumulator in its frame, as
    /// [`accumulate`](Self::accumulate) does, looking the accumulator up once per run of
    /// items of one frame and key. Each item's key is made once.
    fn accumulate_runs(&mut self, items: &[Timestamped<T>]) {
        let FrameAccumulate {
            frames,
            key: key_of,
            op,
            open,
            frame_capacity,
            watermark,
            late,
            ..
        } = self;
        let (frames, watermark) = (*frames, *watermark);
        let mut at = 0;
        // The key of the item at `at`, when the run before it made it.
        let mut carried = None;
        let mut last_end = i64::MIN;
        while let Some(item) = items.get(at) {
            at += 1;
            if item.timestamp < watermark {
                late.increment();
                continue;
            }
            let key = carried.take().unwrap_or_else(|| key_of(&item.item));
            let end = frames.frame_end_near(item.timestamp, last_end);
            last_end = end;
            let mut run = at;
            while let Some(next) = items.get(run) {
                if next.timestamp < watermark || frames.frame_end_near(next.timestamp, end) != end {
                    break;
                }
                let next_key = key_of(&next.item);
                if next_key != key {
                    carried = Some(next_key);
                    break;
                }
                run += 1;
            }
            let acc = match newest_frame(open, end, *frame_capacity).entry(key) {
                hash_map::Entry::Occupied(acc) => acc.into_mut(),
                hash_map::Entry::Vacant(slot) => slot.insert(op.create()),
            };
            op.accumulate(acc, &item.item);
            for next in &items[at..run] {
                op.accumulate(acc, &next.item);
            }
            at = run;
        }
    }

    /// Adds `item` to its key's accumulator in its frame; counts it late, and drops it, if
    /// the watermark already passed it.
    #[inline]
    fn accumulate(&mut self, item: &Timestamped<T>) {
        if item.timestamp < self.watermark {
            self.late.increment();
            return;
        }
        let end = self.frames.frame_end(item.timestamp);
        let frame = newest_frame(&mut self.open, end, self.frame_capacity);
        // One hash of the key, whether its accumulator exists or not.
        match frame.entry((self.key)(&item.item)) {
            hash_map::Entry::Occupied(mut acc) => self.op.accumulate(acc.get_mut(), &item.item),
            hash_map::Entry::Vacant(slot) => {
                let mut acc = self.op.create();
                self.op.accumulate(&mut acc, &item.item);
                slot.insert(acc);
            }
        }
    }
}

impl<T, K, KF, Op> Link<Timestamped<T>> for FrameAccumulate<T, K, KF, Op>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    Op: AggregateOperation<T>,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.late = ctx.metrics().counter("late_events");
        self.place = InstancePlace::of(ctx);
        Ok(())
    }

    #[inline]
    fn push(&mut self, item: Timestamped<T>) -> bool {
        self.accumulate(&item);
        true
    }

    /// Accumulates the items where they lie: an item is read, never moved, and the batch's
    /// buffer goes back to the caller emptied. A run of items of one frame and key (a
    /// window's results on their way to a per-window aggregate, say) shares one lookup.
    fn push_batch(&mut self, items: &mut Vec<Timestamped<T>>) -> bool {
        self.accumulate_runs(items);
        items.clear();
        true
    }

    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Finishes sending frames a watermark closed, if the port filled half-way.
        Ok(self.send_frames_ending_by(i64::MIN, outbox))
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.watermark = self.watermark.max(wm.0);
        Ok(self.send_frames_ending_by(self.watermark, outbox) && outbox.offer_watermark(wm))
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // The consumers will stop waiting for this instance's watermark, so its open frames
        // go now, or the windows they belong to would close without them. Later items of
        // the same frames make new partial frames, combined downstream like any other.
        Ok(self.send_frames_ending_by(i64::MAX, outbox) && outbox.offer_idle())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // A finite input ends every window.
        self.watermark(Watermark::MAX, outbox)
    }

    fn is_cooperative(&self) -> bool {
        true
    }

    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(
            self.pending.is_some() || self.draining.is_some(),
            "frames being sent",
        )?;
        let (keys, accs) = &self.codec;
        for (end, frame) in &self.open {
            for (key, acc) in frame {
                state.put_keyed(key, &keys.to_bytes(key)?, encode_timed(accs, &[*end], acc)?);
            }
        }
        put_instance_time(state, self.place, b"watermark", self.watermark);
        Ok(())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        let (keys, accs) = &self.codec;
        let mut watermarks = InstanceTimes::default();
        for e in entries.take() {
            if watermarks.take(b"watermark", &e) {
                continue;
            }
            if e.partition.is_some() {
                // This stage runs before the shuffle: several old instances may have partial
                // frames of one key, and any instance may restore them. Partials combine.
                restore_frame(&mut self.open, &*self.op, (keys, accs), &e)?;
            }
        }
        // Before the shuffle each instance follows its own source's watermark; rescaled, the
        // least never drops an item the uninterrupted run kept (the source head drops its
        // own late items anyway).
        if let Some(wm) = watermarks.resolve(self.place, Rescaled::Least) {
            self.watermark = wm;
        }
        Ok(())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        Ok(true)
    }
}

/// Stage two: combines frames into windows and pushes `(window, key, result)` down its chain.
pub struct SlidingCombine<T, K, Op: AggregateOperation<T>> {
    frames: Frames,
    op: Arc<Op>,
    received: BTreeMap<i64, FxHashMap<K, Op::Acc>>,
    /// Windows ending before this have been emitted.
    next_end: i64,
    /// With `deduct`: the running accumulator per key (and how many frames feed it) of the
    /// window ending at `running_end`.
    running: FxHashMap<K, (Op::Acc, u32)>,
    running_end: Option<i64>,
    /// The window whose results are going out, when the chain filled before the last.
    emitting: Option<Emitting<K, Op::Acc>>,
    chain: Box<dyn Link<Timestamped<KeyedWindowResult<K, Op::Output>>>>,
    late: Counter,
    codec: WindowCodec<K, Op::Acc>,
    place: InstancePlace,
    _t: PhantomData<fn(T)>,
}

/// A window being emitted: its bounds and the results not yet pushed.
struct Emitting<K, A> {
    start: i64,
    end: i64,
    results: std::vec::IntoIter<(K, A)>,
}

impl<T, K, Op: AggregateOperation<T>> SlidingCombine<T, K, Op> {
    /// Combines frames into windows; see the type's docs for the arguments.
    pub fn new(
        def: &WindowDefinition,
        op: Arc<Op>,
        chain: Box<dyn Link<Timestamped<KeyedWindowResult<K, Op::Output>>>>,
        codec: WindowCodec<K, Op::Acc>,
    ) -> Self {
        SlidingCombine {
            codec,
            place: InstancePlace::default(),
            frames: Frames::of(def),
            op,
            received: BTreeMap::new(),
            next_end: i64::MIN,
            running: FxHashMap::default(),
            running_end: None,
            emitting: None,
            chain,
            late: Counter::default(),
            _t: PhantomData,
        }
    }
}

impl<T, K, Op> SlidingCombine<T, K, Op>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    Op: AggregateOperation<T>,
{
    fn combine_into(&self, into: &mut FxHashMap<K, (Op::Acc, u32)>, frame: &FxHashMap<K, Op::Acc>) {
        for (key, acc) in frame {
            match into.get_mut(key) {
                Some((running, n)) => {
                    self.op.combine(running, acc.clone());
                    *n += 1;
                }
                None => {
                    into.insert(key.clone(), (acc.clone(), 1));
                }
            }
        }
    }

    /// The accumulators of the window ending at `end`, per key.
    fn window(&mut self, end: i64) -> Vec<(K, Op::Acc)> {
        let (size, slide) = (self.frames.size, self.frames.slide);
        if self.frames.global || size == slide {
            // One frame is the whole window: hand it over without copying.
            return self
                .received
                .remove(&end)
                .map(|f| f.into_iter().collect())
                .unwrap_or_default();
        }
        let first = end.saturating_sub(size).saturating_add(1);
        if self.op.has_deduct() {
            let mut running = std::mem::take(&mut self.running);
            if self.running_end == Some(end - slide) {
                if let Some(newest) = self.received.get(&end) {
                    self.combine_into(&mut running, newest);
                }
                if let Some(oldest) = self.received.get(&(end - size)) {
                    for (key, acc) in oldest {
                        if let Some((r, n)) = running.get_mut(key) {
                            self.op.deduct(r, acc);
                            *n -= 1;
                            if *n == 0 {
                                running.remove(key);
                            }
                        }
                    }
                }
            } else {
                running.clear();
                for (_, frame) in self.received.range(first..=end) {
                    self.combine_into(&mut running, frame);
                }
            }
            self.running_end = Some(end);
            let out = running
                .iter()
                .map(|(k, (a, _))| (k.clone(), a.clone()))
                .collect();
            self.running = running;
            out
        } else {
            let mut window = FxHashMap::default();
            for (_, frame) in self.received.range(first..=end) {
                self.combine_into(&mut window, frame);
            }
            window.into_iter().map(|(k, (a, _))| (k, a)).collect()
        }
    }

    /// Emits every window ending at or before `wm` that holds data, one result at a time.
    /// Returns false when the chain's backlog filled up; the next call goes on with the same
    /// window, so a window of a million keys never lands in the backlog at once.
    fn emit_windows(&mut self, wm: i64) -> bool {
        loop {
            if let Some(window) = &mut self.emitting {
                let (start, end) = (window.start, window.end);
                for (key, acc) in window.results.by_ref() {
                    let value = KeyedWindowResult {
                        start,
                        end,
                        key,
                        value: self.op.finish(acc),
                    };
                    let room = self.chain.push(Timestamped {
                        timestamp: end.saturating_sub(1),
                        item: value,
                    });
                    if !room {
                        return false;
                    }
                }
                self.emitting = None;
                self.window_emitted(end);
                continue;
            }
            // The earliest window holding the earliest frame, unless it was already emitted.
            let Some(&first) = self.received.keys().next() else {
                return true;
            };
            let end = first.max(self.next_end);
            if end > wm {
                return true;
            }
            self.emitting = Some(Emitting {
                start: self.frames.window_start(end),
                end,
                results: self.window(end).into_iter(),
            });
        }
    }

    /// Moves past the window ending at `end`, once all its results are out: keeps the frame
    /// the next slide deducts and drops the older ones.
    fn window_emitted(&mut self, end: i64) {
        if self.frames.global {
            self.received.clear();
            self.next_end = i64::MAX;
            return;
        }
        self.next_end = end + self.frames.slide;
        let keep_from = end + self.frames.slide - self.frames.size;
        while self
            .received
            .first_key_value()
            .is_some_and(|(&fe, _)| fe < keep_from)
        {
            self.received.pop_first();
        }
    }
}

impl<T, K, Op> Processor for SlidingCombine<T, K, Op>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    Op: AggregateOperation<T>,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.late = ctx.metrics().counter("late_events");
        self.place = InstancePlace::of(ctx);
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        for frame in inbox.items::<Frame<K, Op::Acc>>().drain(..) {
            if frame.end < self.next_end && !self.frames.global {
                // Its windows were emitted: a frame from an upstream instance that lagged.
                self.late.increment();
                continue;
            }
            let accs = self.received.entry(frame.end).or_default();
            match accs.get_mut(&frame.key) {
                Some(acc) => self.op.combine(acc, frame.acc),
                None => {
                    accs.insert(frame.key, frame.acc);
                }
            }
        }
        Ok(())
    }

    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        if !self.chain.flush(outbox)? {
            return Ok(false);
        }
        let emitted = self.emit_windows(wm.0);
        outbox.report_progress();
        if !emitted {
            self.chain.flush(outbox)?;
            return Ok(false);
        }
        chain_watermark(&mut *self.chain, wm, outbox)
    }

    fn try_process_idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        chain_idle(&mut *self.chain, outbox)
    }

    /// Frames arrive as input and windows close on watermarks, which are input too.
    fn next_call(&self) -> weir_core::NextCall {
        weir_core::NextCall::OnWake
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.try_process_watermark(Watermark::MAX, outbox)? {
            return Ok(false);
        }
        self.chain.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.chain.is_cooperative()
    }

    /// Saves the frames still needed, by key, and where emission stands. The running
    /// accumulator of a deducting operation is not saved: the first window after a restore
    /// is combined from its frames, which are all kept.
    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        refuse_save_if(self.emitting.is_some(), "a window being emitted")?;
        let (received, next_end, codec, place) =
            (&self.received, self.next_end, &self.codec, self.place);
        save_chain(&mut *self.chain, outbox, writer, |state| {
            let (keys, accs) = codec;
            for (end, frame) in received {
                for (key, acc) in frame {
                    state.put_keyed(key, &keys.to_bytes(key)?, encode_timed(accs, &[*end], acc)?);
                }
            }
            put_instance_time(state, place, b"next_end", next_end);
            Ok(())
        })
    }

    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        let mut entries = ChainEntries::new(entries);
        let mut head = entries.head();
        let (keys, accs) = &self.codec;
        let mut next_ends = InstanceTimes::default();
        for e in head.take() {
            if next_ends.take(b"next_end", &e) {
                continue;
            }
            if e.partition.is_some() {
                restore_frame(&mut self.received, &*self.op, (keys, accs), &e)?;
            }
        }
        // After the shuffle: rescaled with aligned barriers, the greatest never emits a window
        // twice.
        if let Some(next_end) = next_ends.resolve(self.place, Rescaled::Greatest) {
            self.next_end = next_end;
        }
        self.running.clear();
        self.running_end = None;
        self.chain.restore(&mut head.next())
    }

    fn snapshot_commit_finish(&mut self, _success: bool) -> ProcessorResult<bool> {
        self.chain.commit()
    }
}

struct Session<A> {
    start: i64,
    end: i64,
    acc: A,
}

/// Session windows per key, after a partitioned edge.
pub struct SessionLink<T, K, KF: ?Sized, Op: AggregateOperation<T>> {
    gap: i64,
    key: Arc<KF>,
    op: Arc<Op>,
    sessions: FxHashMap<K, Vec<Session<Op::Acc>>>,
    /// Sessions the watermark closed whose results are not pushed yet.
    closing: VecDeque<(K, Session<Op::Acc>)>,
    watermark: i64,
    late: Counter,
    next: Box<dyn Link<Timestamped<KeyedWindowResult<K, Op::Output>>>>,
    codec: WindowCodec<K, Op::Acc>,
    place: InstancePlace,
    _t: PhantomData<fn(T)>,
}

impl<T, K, KF: ?Sized, Op: AggregateOperation<T>> SessionLink<T, K, KF, Op> {
    /// Keeps session windows per key; see the type's docs for the arguments.
    pub fn new(
        gap: i64,
        key: Arc<KF>,
        op: Arc<Op>,
        next: Box<dyn Link<Timestamped<KeyedWindowResult<K, Op::Output>>>>,
        codec: WindowCodec<K, Op::Acc>,
    ) -> Self {
        SessionLink {
            codec,
            place: InstancePlace::default(),
            gap,
            key,
            op,
            sessions: FxHashMap::default(),
            closing: VecDeque::new(),
            watermark: i64::MIN,
            late: Counter::default(),
            next,
            _t: PhantomData,
        }
    }
}

impl<T, K, KF, Op> Link<Timestamped<T>> for SessionLink<T, K, KF, Op>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    Op: AggregateOperation<T>,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.late = ctx.metrics().counter("late_events");
        self.place = InstancePlace::of(ctx);
        self.next.init(ctx)
    }

    fn push(&mut self, item: Timestamped<T>) -> bool {
        if item.timestamp < self.watermark {
            self.late.increment();
            return true;
        }
        let (start, end) = (item.timestamp, item.timestamp.saturating_add(self.gap));
        let sessions = self.sessions.entry((self.key)(&item.item)).or_default();
        let mut acc = self.op.create();
        self.op.accumulate(&mut acc, &item.item);
        let mut merged = Session { start, end, acc };
        // Absorb every session this item's span touches.
        let mut i = 0;
        while i < sessions.len() {
            let s = &sessions[i];
            if s.start < merged.end && merged.start < s.end {
                let s = sessions.swap_remove(i);
                merged.start = merged.start.min(s.start);
                merged.end = merged.end.max(s.end);
                self.op.combine(&mut merged.acc, s.acc);
            } else {
                i += 1;
            }
        }
        sessions.push(merged);
        true
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if wm.0 > self.watermark {
            self.watermark = wm.0;
            let closing = &mut self.closing;
            self.sessions.retain(|key, sessions| {
                let mut i = 0;
                while i < sessions.len() {
                    if sessions[i].end <= wm.0 {
                        closing.push_back((key.clone(), sessions.swap_remove(i)));
                    } else {
                        i += 1;
                    }
                }
                !sessions.is_empty()
            });
        }
        // One closed session at a time, as the chain has room; the watermark follows them.
        loop {
            if !self.next.flush(outbox)? {
                return Ok(false);
            }
            let mut room = true;
            while room && let Some((key, s)) = self.closing.pop_front() {
                let value = KeyedWindowResult {
                    start: s.start,
                    end: s.end,
                    key,
                    value: self.op.finish(s.acc),
                };
                room = self.next.push(Timestamped {
                    timestamp: s.end.saturating_sub(1),
                    item: value,
                });
            }
            if room {
                break;
            }
        }
        chain_watermark(&mut *self.next, wm, outbox)
    }

    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.next.flush(outbox)
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Open sessions stay: only the watermark closes them.
        self.next.idle(outbox)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.watermark(Watermark::MAX, outbox)? {
            return Ok(false);
        }
        self.next.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.next.is_cooperative()
    }

    fn prepare_save(&mut self) -> weir_core::ProcessorResult<bool> {
        self.next.prepare_save()
    }
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(!self.closing.is_empty(), "closed sessions not sent")?;
        let (keys, accs) = &self.codec;
        for (key, sessions) in &self.sessions {
            let k = keys.to_bytes(key)?;
            for s in sessions {
                state.put_keyed(key, &k, encode_timed(accs, &[s.start, s.end], &s.acc)?);
            }
        }
        put_instance_time(state, self.place, b"watermark", self.watermark);
        self.next.save(&mut state.next())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        let (keys, accs) = &self.codec;
        let mut watermarks = InstanceTimes::default();
        for e in entries.take() {
            if watermarks.take(b"watermark", &e) {
                continue;
            }
            if e.partition.is_some() {
                let ([start, end], acc) = decode_timed::<_, 2>(accs, &e.value)?;
                self.sessions
                    .entry((keys.decode)(&e.key)?)
                    .or_default()
                    .push(Session { start, end, acc });
            }
        }
        // The least: an item a session would take is never dropped as late.
        if let Some(wm) = watermarks.resolve(self.place, Rescaled::Least) {
            self.watermark = wm;
        }
        self.next.restore(&mut entries.next())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        self.next.commit()
    }
}
