//! Sliding windows in one stage, for an operation that can `deduct`: a running accumulator
//! per key holds the next window's value before the watermark reaches its end.
//!
//! Items are folded into their frame's table, one small table per frame. Besides, every item
//! of the newest frame of the next window to close is folded into that key's running
//! accumulator too. When the watermark passes the window's end, its value per key is already
//! made: the close is one read of the running table, pushed down the chain in a batch per
//! shard, and the window's end goes down the chain as its watermark at once. Only then does
//! the table slide: the frame that left is deducted key by key, and the frame that entered
//! (filled while it was ahead of the watermark) is added.
//!
//! The running table keeps its values in insertion order in one dense array per shard, with
//! a hash index beside it ([`IndexMap`]): the close reads memory front to back, which the
//! processor prefetches, where a hash table read in slot order (some two fifths of them
//! empty) waited on memory for most keys. A close of 300,000 keys took about a fifth less
//! time so.
//!
//! With a lag of a few frames most items land ahead of the next window, in their frame's
//! small table alone; the sliding step, off the path between watermark and result, pays for
//! the lookups in the large table.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use indexmap::IndexMap;
use rustc_hash::{FxBuildHasher, FxHashMap};
use weir_core::{
    Counter, Item, Outbox, PartitionKey, ProcessorContext, ProcessorResult, Watermark,
};

use super::one_stage::{KeyedResult, ResultChain, SHARDS, restore_keyed_frames, shard_of};
use super::{Frames, WindowCodec, encode_timed};
use crate::aggregate::AggregateOperation;
use crate::event_time::{KeyedWindowResult, Timestamped, WindowDefinition};
use crate::links::link::{Link, chain_watermark};
use crate::links::state::{
    InstancePlace, LinkEntries, LinkWriter, put_instance_time, refuse_save_if,
};

/// About how many keys one call reads out of the running table. Far more than a sliced
/// close's [`CLOSE_KEYS_PER_CALL`](super::one_stage::CLOSE_KEYS_PER_CALL): a read-out costs
/// some 5 ns a key, so a window of up to a million keys per instance goes out in one call of
/// about 5 ms, without the rest of the worker's tasklets (at a high rate, some 40% of its
/// time) running between its slices.
const READ_OUT_KEYS_PER_CALL: usize = 1 << 20;

/// About how many keys one call of the slide passes (at least one shard's). The slide looks
/// each key up in the large running table, some 50 ns a key; after a close, the downstream
/// tasklets that carry the window's results on wait at most one such call for their turn.
pub(crate) const SLIDE_KEYS_PER_CALL: usize = 2048;

/// One shard of the running table: per key, its value in the next window and how many of
/// that window's frames hold the key, densely in insertion order.
type RunningTable<K, A> = IndexMap<K, (A, u32), FxBuildHasher>;

/// One frame's accumulators per key, in [`SHARDS`] tables by [`shard_of`].
struct HeldFrame<K, A> {
    end: i64,
    shards: Vec<FxHashMap<K, A>>,
}

impl<K, A> HeldFrame<K, A> {
    fn new(end: i64) -> Self {
        HeldFrame {
            end,
            shards: (0..SHARDS).map(|_| FxHashMap::default()).collect(),
        }
    }

    fn keys(&self, shard: usize) -> usize {
        self.shards[shard].len()
    }
}

/// A window being closed, in three steps.
struct Closing {
    end: i64,
    step: CloseStep,
    /// The next shard to pass over, in [`CloseStep::Emit`] and [`CloseStep::Slide`].
    shard: usize,
}

/// The steps of closing a window.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CloseStep {
    /// Its results go down the chain, shard by shard.
    Emit,
    /// The chain gets the window's end as its watermark, so the results downstream move on
    /// before the table slides.
    Forward,
    /// The running table slides to the next window, shard by shard.
    Slide,
}

/// A sliding window in one stage, after a partitioned edge, for an operation that can
/// [`deduct`](AggregateOperation::deduct): each item goes to its key's instance; each key's
/// value of the next window to close is kept up to date as items arrive, so a window's close
/// only reads it out.
///
/// Against [`SlidingAggregate`](super::SlidingAggregate), which folds each key's frames when
/// the window closes, the close here reads one accumulator per key and looks nothing up;
/// in return an item of the next window's newest frame costs a second lookup, and the slide
/// after each close looks up the keys of the frame that left and of the frame that entered.
///
/// Cost: per item one or two hashes and lookups of the key (its frame's table, and the
/// running table when the frame is in the next window); per window one read of the running
/// table, in one call up to about a million keys, then one lookup per key of the two frames
/// that slide, in slices of about 2,048 keys; memory one accumulator per key and frame held,
/// plus one per key of the next window with its hash and index entry.
pub struct RunningAggregate<T, K, KF: ?Sized, Op: AggregateOperation<T>> {
    frames: Frames,
    key: Arc<KF>,
    op: Arc<Op>,
    /// The frames held, oldest first: those of the next window and those ahead of it.
    held: VecDeque<HeldFrame<K, Op::Acc>>,
    /// Per key, its value in the window ending at `running_end` and how many of that
    /// window's frames hold the key; in [`SHARDS`] tables by [`shard_of`].
    running: Vec<RunningTable<K, Op::Acc>>,
    /// The window `running` holds, or `None` when it must be made from the frames (before
    /// the first close, after a restore). When set, it is `next_end`: the next window.
    running_end: Option<i64>,
    /// Windows ending before this have been emitted.
    next_end: i64,
    closing: Option<Closing>,
    /// The last window end handed down the chain as its watermark.
    forwarded: i64,
    /// A shard's results, reused from window to window.
    batch: Vec<KeyedResult<K, Op::Output>>,
    watermark: i64,
    late: Counter,
    next: ResultChain<K, Op::Output>,
    codec: WindowCodec<K, Op::Acc>,
    place: InstancePlace,
    _t: PhantomData<fn(T)>,
}

impl<T, K, KF, Op> RunningAggregate<T, K, KF, Op>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    Op: AggregateOperation<T>,
{
    /// Aggregates keyed items into sliding windows in one stage; see the type's docs.
    ///
    /// # Panics
    /// When `def` is not a sliding window or `op` cannot deduct: those windows are
    /// [`SlidingAggregate`](super::SlidingAggregate)'s.
    pub fn new(
        def: &WindowDefinition,
        key: Arc<KF>,
        op: Arc<Op>,
        next: ResultChain<K, Op::Output>,
        codec: WindowCodec<K, Op::Acc>,
    ) -> Self {
        assert!(
            matches!(def, WindowDefinition::Sliding { .. }) && op.has_deduct(),
            "a running aggregate needs a sliding window and an operation that deducts"
        );
        RunningAggregate {
            frames: Frames::of(def),
            key,
            op,
            held: VecDeque::new(),
            running: (0..SHARDS).map(|_| RunningTable::default()).collect(),
            running_end: None,
            next_end: i64::MIN,
            closing: None,
            forwarded: i64::MIN,
            batch: Vec::new(),
            watermark: i64::MIN,
            late: Counter::default(),
            next,
            codec,
            place: InstancePlace::default(),
            _t: PhantomData,
        }
    }

    /// Adds `item` to its key's frame, and to its running value when the frame is the newest
    /// of the next window; counts it late, and drops it, if the watermark passed it or its
    /// frame's windows are out (possible after a restore that rescaled).
    #[inline]
    fn accumulate(&mut self, item: &Timestamped<T>) {
        let end = self.frames.frame_end(item.timestamp);
        if item.timestamp < self.watermark || end < self.next_end {
            self.late.increment();
            return;
        }
        let key = (self.key)(&item.item);
        let shard = shard_of(&key);
        let op = &*self.op;
        let frame = &mut frame(&mut self.held, end).shards[shard];
        // Only the newest frame of the next window still takes items: the older ones are
        // behind the watermark. Most items are ahead of it, and their key is not cloned.
        if self.running_end != Some(end) {
            fold_item(op, frame, key, &item.item);
            return;
        }
        let first = fold_item(op, frame, key.clone(), &item.item);
        let (acc, frames) = self.running[shard]
            .entry(key)
            .or_insert_with(|| (op.create(), 0));
        op.accumulate(acc, &item.item);
        *frames += u32::from(first);
    }

    /// Makes `running` the value of the window ending at `end`, from its frames.
    fn rebuild(&mut self, end: i64) {
        let start = end - self.frames.size;
        for shard in &mut self.running {
            shard.clear();
        }
        for frame in self.held.iter().filter(|f| f.end > start && f.end <= end) {
            for (shard, keys) in frame.shards.iter().enumerate() {
                for (key, acc) in keys {
                    add_frame(&*self.op, &mut self.running[shard], key, acc);
                }
            }
        }
        self.running_end = Some(end);
    }

    /// Emits every window ending at or before `wm` that holds data. Returns false to be
    /// called again: when the chain's backlog filled, when this call did its share of keys,
    /// or when it handed a window's end on (progress is then reported, so the worker calls
    /// again soon). The next call goes on where this one stopped.
    fn emit_windows(&mut self, wm: i64, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let sliding = matches!(&self.closing, Some(c) if c.step == CloseStep::Slide);
        let mut budget = if sliding {
            SLIDE_KEYS_PER_CALL
        } else {
            READ_OUT_KEYS_PER_CALL
        };
        loop {
            if let Some(closing) = &mut self.closing {
                let (end, shard) = (closing.end, closing.shard);
                match closing.step {
                    CloseStep::Forward => {
                        if !chain_watermark(&mut *self.next, Watermark(end), outbox)? {
                            return Ok(false);
                        }
                        self.forwarded = end;
                        // A marker went out: if a later step finds the outbox full, this call
                        // still moved the job on.
                        outbox.report_progress();
                        closing.step = CloseStep::Slide;
                        closing.shard = 0;
                        // The window's results are out: the worker hands them on before the
                        // slide, which no result waits for, takes its first slice.
                        return Ok(false);
                    }
                    CloseStep::Emit | CloseStep::Slide if shard == SHARDS => {
                        if closing.step == CloseStep::Emit {
                            closing.step = CloseStep::Forward;
                            self.next_end = end + self.frames.slide;
                        } else {
                            self.closing = None;
                            self.slid(end);
                        }
                    }
                    _ if budget == 0 => {
                        outbox.report_progress();
                        return Ok(false);
                    }
                    CloseStep::Emit => {
                        closing.shard += 1;
                        budget = budget.saturating_sub(self.running[shard].len());
                        if !self.emit_shard(end, shard) {
                            return Ok(false);
                        }
                    }
                    CloseStep::Slide => {
                        closing.shard += 1;
                        budget = budget.saturating_sub(self.slide_shard(end, shard));
                    }
                }
                continue;
            }
            // The earliest window holding the earliest frame, unless it was already emitted.
            let Some(first) = self.held.front().map(|f| f.end) else {
                return Ok(true);
            };
            let end = first.max(self.next_end);
            if end > wm {
                return Ok(true);
            }
            if self.running_end != Some(end) {
                self.rebuild(end);
            }
            // A read-out goes in one call, also one that starts after a slide's last slice.
            budget = READ_OUT_KEYS_PER_CALL;
            self.closing = Some(Closing {
                end,
                step: CloseStep::Emit,
                shard: 0,
            });
        }
    }

    /// Pushes one shard's values of the window ending at `end` down the chain, in one
    /// batch. Returns whether the chain has room for more.
    fn emit_shard(&mut self, end: i64, shard: usize) -> bool {
        if self.running[shard].is_empty() {
            return true;
        }
        let start = end - self.frames.size;
        let op = &*self.op;
        self.batch.extend(
            self.running[shard]
                .iter()
                .map(|(key, (acc, _))| Timestamped {
                    timestamp: end - 1,
                    item: KeyedWindowResult {
                        start,
                        end,
                        key: key.clone(),
                        value: op.finish(acc.clone()),
                    },
                }),
        );
        self.next.push_batch(&mut self.batch)
    }

    /// Slides one shard of `running` from the window ending at `end` to the next: deducts
    /// the frame that left, adds the frame that entered. Returns how many keys it passed.
    fn slide_shard(&mut self, end: i64, shard: usize) -> usize {
        let (size, slide) = (self.frames.size, self.frames.slide);
        let op = &*self.op;
        let running = &mut self.running[shard];
        let mut passed = 0;
        for frame in &self.held {
            if frame.end == end + slide - size {
                passed += frame.keys(shard);
                for (key, acc) in &frame.shards[shard] {
                    if let Some((value, frames)) = running.get_mut(key) {
                        op.deduct(value, acc);
                        *frames -= 1;
                        if *frames == 0 {
                            // The last value moves into the hole: O(1), and the array stays
                            // dense.
                            running.swap_remove(key);
                        }
                    }
                }
            } else if frame.end == end + slide {
                passed += frame.keys(shard);
                for (key, acc) in &frame.shards[shard] {
                    add_frame(op, running, key, acc);
                }
            }
        }
        passed
    }

    /// The window ending at `end` is out and `running` holds the next one: drops the frames
    /// no later window holds.
    fn slid(&mut self, end: i64) {
        let keep_from = end + self.frames.slide - self.frames.size;
        self.held.retain(|f| f.end > keep_from);
        self.running_end = Some(end + self.frames.slide);
    }
}

/// The frame ending at `end` among `held`, made if missing.
#[inline]
fn frame<K, A>(held: &mut VecDeque<HeldFrame<K, A>>, end: i64) -> &mut HeldFrame<K, A> {
    // Items come in time order give or take the lag: the newest frame is the likely one.
    let at = match held.iter().rposition(|f| f.end <= end) {
        Some(at) if held[at].end == end => at,
        found => {
            let at = found.map_or(0, |at| at + 1);
            held.insert(at, HeldFrame::new(end));
            at
        }
    };
    &mut held[at]
}

/// Folds `item` into `key`'s accumulator in one frame's `table`; returns whether the key was
/// new to the frame.
#[inline]
fn fold_item<T, K: Hash + Eq, Op: AggregateOperation<T>>(
    op: &Op,
    table: &mut FxHashMap<K, Op::Acc>,
    key: K,
    item: &T,
) -> bool {
    match table.entry(key) {
        Entry::Occupied(mut held) => {
            op.accumulate(held.get_mut(), item);
            false
        }
        Entry::Vacant(slot) => {
            op.accumulate(slot.insert(op.create()), item);
            true
        }
    }
}

/// Adds one frame's `acc` of `key` to its running value.
fn add_frame<T, K: Hash + Eq + Clone, Op: AggregateOperation<T>>(
    op: &Op,
    running: &mut RunningTable<K, Op::Acc>,
    key: &K,
    acc: &Op::Acc,
) {
    match running.get_mut(key) {
        Some((value, frames)) => {
            op.combine(value, acc.clone());
            *frames += 1;
        }
        None => {
            running.insert(key.clone(), (acc.clone(), 1));
        }
    }
}

impl<T, K, KF, Op> Link<Timestamped<T>> for RunningAggregate<T, K, KF, Op>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    Op: AggregateOperation<T>,
{
    one_stage_window_plumbing!();

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.watermark = self.watermark.max(wm.0);
        if !self.next.flush(outbox)? {
            return Ok(false);
        }
        if !self.emit_windows(self.watermark, outbox)? {
            self.next.flush(outbox)?;
            return Ok(false);
        }
        if wm.0 == self.forwarded {
            // The close of the window ending here already handed it on.
            return Ok(true);
        }
        chain_watermark(&mut *self.next, wm, outbox)
    }

    /// Saves each key's frames, in the same entries as
    /// [`SlidingAggregate`](super::SlidingAggregate), and where emission stands. The running
    /// table is not saved: after a restore it is rebuilt from the frames, which are all kept.
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(self.closing.is_some(), "a window being emitted")?;
        let (keys, accs) = &self.codec;
        for frame in &self.held {
            for (key, acc) in frame.shards.iter().flatten() {
                let bytes = keys.to_bytes(key)?;
                state.put_keyed(key, &bytes, encode_timed(accs, &[frame.end], acc)?);
            }
        }
        put_instance_time(state, self.place, b"next_end", self.next_end);
        put_instance_time(state, self.place, b"watermark", self.watermark);
        self.next.save(&mut state.next())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        let (held, op) = (&mut self.held, &*self.op);
        let (next_end, watermark) =
            restore_keyed_frames(entries, &self.codec, self.place, |key, end, acc| {
                let shard = shard_of(&key);
                match frame(held, end).shards[shard].entry(key) {
                    // Partials of one key and frame from several old instances combine.
                    Entry::Occupied(mut held) => op.combine(held.get_mut(), acc),
                    Entry::Vacant(slot) => {
                        slot.insert(acc);
                    }
                }
            })?;
        self.next_end = next_end.unwrap_or(self.next_end);
        self.watermark = watermark.unwrap_or(self.watermark);
        self.running_end = None;
        self.next.restore(&mut entries.next())
    }
}
