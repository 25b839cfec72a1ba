//! Tumbling and sliding windows in one stage, after a partitioned edge.
//!
//! Each key's frames live together in one entry of a table, so closing a window is one pass
//! over the table in memory order: per key, the window's value is made from the key's own
//! few frames, pushed down the chain, and the frame that left every later window is dropped
//! in the same step. Nothing is looked
//! up by key at the close, nothing is copied into an intermediate list unless the chain fills
//! mid-window, and no partial frames cross the shuffle.
//!
//! The table is cut into [`SHARDS`] shards by a hash of the key, and one call closes about
//! [`CLOSE_KEYS_PER_CALL`] keys' worth of shards, then hands the worker back: a window of
//! half a million keys closes over some sixty calls, between which the worker's other
//! tasklets run, instead of holding the worker for the whole pass.
//!
//! A sliding window whose operation can `deduct` runs in
//! [`RunningAggregate`](super::RunningAggregate) instead, which has each key's value ready
//! before the window closes.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHasher};
use smallvec::SmallVec;
use weir_core::{
    Counter, Item, Outbox, PartitionKey, ProcessorContext, ProcessorResult, Watermark,
};

use super::{Frames, WindowCodec, decode_timed, encode_timed};
use crate::aggregate::AggregateOperation;
use crate::event_time::{KeyedWindowResult, Timestamped, WindowDefinition};
use crate::links::link::{Link, chain_watermark};
use crate::links::state::{
    InstancePlace, InstanceTimes, LinkEntries, LinkWriter, Rescaled, put_instance_time,
    refuse_save_if,
};

/// One key's frames, oldest first: `(frame end, accumulator)`, sorted by end. Most keys hold
/// one or two: those live in the table's entry, so the close reads no other memory for them.
type KeyFrames<A> = SmallVec<[(i64, A); 1]>;

/// The window `(start, end]` of one key's `frames`, combined from copies; `None` when it
/// holds none.
fn fold_window<T, Op: AggregateOperation<T>>(
    op: &Op,
    frames: &[(i64, Op::Acc)],
    start: i64,
    end: i64,
) -> Option<Op::Acc> {
    let mut window: Option<Op::Acc> = None;
    for (_, acc) in frames.iter().filter(|(e, _)| *e > start && *e <= end) {
        match &mut window {
            Some(window) => op.combine(window, acc.clone()),
            None => window = Some(acc.clone()),
        }
    }
    window
}

/// Puts a new frame into one key's `frames`, in order, and counts it in `frame_keys`.
fn insert_frame<A>(
    frames: &mut SmallVec<[(i64, A); 1]>,
    frame_keys: &mut BTreeMap<i64, usize>,
    end: i64,
    acc: A,
) {
    let at = frames.partition_point(|(e, _)| *e < end);
    frames.insert(at, (end, acc));
    match frame_keys.last_entry() {
        // Most new frames are the newest.
        Some(mut newest) if *newest.key() == end => *newest.get_mut() += 1,
        _ => *frame_keys.entry(end).or_default() += 1,
    }
}

/// What the chain gets: each window's result per key.
pub(super) type ResultChain<K, O> = Box<dyn Link<KeyedResult<K, O>>>;

/// One window result of one key, as the chain takes it.
pub(super) type KeyedResult<K, O> = Timestamped<KeyedWindowResult<K, O>>;

/// How many shards the table of keys is cut into.
pub const SHARDS: usize = 64;

/// About how many keys one call closes before it hands the worker back.
pub const CLOSE_KEYS_PER_CALL: usize = 8192;

/// The shard of `key`: bits of its hash that the shard's own table does not use to place
/// it (those are the lowest and the highest seven), so keys spread evenly inside a shard.
#[inline]
pub(super) fn shard_of<K: Hash>(key: &K) -> usize {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    (h.finish() >> 32) as usize % SHARDS
}

/// Reads the entries a one-stage window link saved: each key's frame (`put_keyed` of the key,
/// the frame's end and its accumulator) goes to `insert`, and the link's `next_end` and
/// `watermark` come back as the old instances' greatest and least. Rescaled with aligned
/// barriers, the greatest never emits a window twice, and the least watermark never drops an
/// item a window still open would take.
pub(super) fn restore_keyed_frames<K, A>(
    entries: &mut LinkEntries<'_>,
    (keys, accs): &WindowCodec<K, A>,
    place: InstancePlace,
    mut insert: impl FnMut(K, i64, A),
) -> ProcessorResult<(Option<i64>, Option<i64>)> {
    let (mut next_ends, mut watermarks) = (InstanceTimes::default(), InstanceTimes::default());
    for e in entries.take() {
        if next_ends.take(b"next_end", &e) || watermarks.take(b"watermark", &e) {
            continue;
        }
        if e.partition.is_none() {
            continue;
        }
        let ([end], acc) = decode_timed::<_, 1>(accs, &e.value)?;
        insert((keys.decode)(&e.key)?, end, acc);
    }
    Ok((
        next_ends.resolve(place, Rescaled::Greatest),
        watermarks.resolve(place, Rescaled::Least),
    ))
}

/// A window being closed, shard by shard.
struct Closing<K, O> {
    end: i64,
    /// The next shard to pass over.
    shard: usize,
    /// Results the chain had no room for, in order.
    rest: std::vec::IntoIter<KeyedResult<K, O>>,
}

/// A tumbling or sliding window in one stage, after a partitioned edge: each item goes to
/// its key's instance and is accumulated into its frame there; when the watermark passes a
/// window's end, one pass over the keys makes and pushes the window's results.
///
/// Against the two stages ([`FrameAccumulate`](super::FrameAccumulate) then
/// [`SlidingCombine`](super::SlidingCombine)) every item crosses the shuffle instead of one
/// partial per key and frame, which costs throughput when a key has many items in a frame;
/// in return a window's close sends no burst of partial frames and looks nothing up, so its
/// results come out sooner.
///
/// Cost: per item two hashes of the key (its shard, then its entry); per window one pass
/// over the keys held, in slices; memory one accumulator per key and frame held (the
/// window's frames and those ahead of the watermark).
pub struct SlidingAggregate<T, K, KF: ?Sized, Op: AggregateOperation<T>> {
    frames: Frames,
    key: Arc<KF>,
    op: Arc<Op>,
    /// Each key's frames, in [`SHARDS`] tables by [`shard_of`].
    keys: Vec<FxHashMap<K, KeyFrames<Op::Acc>>>,
    /// How many keys hold a frame, per frame end: which windows hold data.
    frame_keys: BTreeMap<i64, usize>,
    /// Windows ending before this have been emitted.
    next_end: i64,
    closing: Option<Closing<K, Op::Output>>,
    watermark: i64,
    late: Counter,
    next: ResultChain<K, Op::Output>,
    codec: WindowCodec<K, Op::Acc>,
    place: InstancePlace,
    _t: PhantomData<fn(T)>,
}

impl<T, K, KF, Op> SlidingAggregate<T, K, KF, Op>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    Op: AggregateOperation<T>,
{
    /// Aggregates keyed items into windows in one stage; see the type's docs.
    pub fn new(
        def: &WindowDefinition,
        key: Arc<KF>,
        op: Arc<Op>,
        next: ResultChain<K, Op::Output>,
        codec: WindowCodec<K, Op::Acc>,
    ) -> Self {
        SlidingAggregate {
            frames: Frames::of(def),
            key,
            op,
            keys: (0..SHARDS).map(|_| FxHashMap::default()).collect(),
            frame_keys: BTreeMap::new(),
            next_end: i64::MIN,
            closing: None,
            watermark: i64::MIN,
            late: Counter::default(),
            next,
            codec,
            place: InstancePlace::default(),
            _t: PhantomData,
        }
    }

    /// Adds `item` to its key's frame; counts it late, and drops it, if the watermark passed
    /// it or its frame's windows are out (possible after a restore that rescaled).
    #[inline]
    fn accumulate(&mut self, item: &Timestamped<T>) {
        let end = self.frames.frame_end(item.timestamp);
        if item.timestamp < self.watermark || (end < self.next_end && !self.frames.global) {
            self.late.increment();
            return;
        }
        let key = (self.key)(&item.item);
        let frames = self.keys[shard_of(&key)].entry(key).or_default();
        // Items come in time order give or take the lag: the newest frame is the likely one.
        if let Some((_, acc)) = frames.iter_mut().rev().find(|(e, _)| *e == end) {
            self.op.accumulate(acc, &item.item);
            return;
        }
        let mut acc = self.op.create();
        self.op.accumulate(&mut acc, &item.item);
        insert_frame(frames, &mut self.frame_keys, end, acc);
    }

    /// Emits every window ending at or before `wm` that holds data. Returns false to be
    /// called again: when the chain's backlog filled, or when this call closed its share of
    /// keys (progress is then reported, so the worker calls again soon). The next call goes
    /// on where this one stopped.
    fn emit_windows(&mut self, wm: i64, outbox: &mut Outbox) -> bool {
        let mut budget = CLOSE_KEYS_PER_CALL;
        loop {
            if let Some(closing) = &mut self.closing {
                for result in closing.rest.by_ref() {
                    if !self.next.push(result) {
                        return false;
                    }
                }
                if closing.shard == SHARDS {
                    let end = closing.end;
                    self.closing = None;
                    self.window_emitted(end);
                    continue;
                }
                if budget == 0 {
                    outbox.report_progress();
                    return false;
                }
                let (end, shard) = (closing.end, closing.shard);
                closing.shard += 1;
                budget = budget.saturating_sub(self.keys[shard].len());
                let rest = self.close_shard(end, shard);
                if let Some(closing) = &mut self.closing {
                    closing.rest = rest.into_iter();
                }
                continue;
            }
            // The earliest window holding the earliest frame, unless it was already emitted.
            let Some(&first) = self.frame_keys.keys().next() else {
                return true;
            };
            let end = first.max(self.next_end);
            if end > wm {
                return true;
            }
            self.closing = Some(Closing {
                end,
                shard: 0,
                rest: Vec::new().into_iter(),
            });
        }
    }

    /// The pass over one shard that closes the window ending at `end` there: per key, makes
    /// its result and pushes it down the chain, and drops the frames no later window holds.
    /// Returns the results the chain had no room for, in order.
    fn close_shard(&mut self, end: i64, shard: usize) -> Vec<KeyedResult<K, Op::Output>> {
        let (size, slide, global) = (self.frames.size, self.frames.slide, self.frames.global);
        let start = self.frames.window_start(end);
        // Frames ending after `start` and by `end` make the window; a frame ending before
        // `keep_from` is in no later window.
        let keep_from = if global {
            i64::MAX
        } else {
            end.saturating_add(slide).saturating_sub(size)
        };
        let one_frame = global || size == slide;
        let (op, next) = (&*self.op, &mut self.next);
        let mut room = true;
        let mut rest = Vec::new();
        self.keys[shard].retain(|key, frames| {
            let value = if one_frame {
                // The window is one frame, which no later window holds: moved, not copied.
                frames
                    .iter()
                    .position(|(e, _)| *e == end)
                    .map(|at| frames.remove(at).1)
            } else {
                fold_window(op, frames, start, end)
            };
            if let Some(acc) = value {
                let result = Timestamped {
                    timestamp: end.saturating_sub(1),
                    item: KeyedWindowResult {
                        start,
                        end,
                        key: key.clone(),
                        value: op.finish(acc),
                    },
                };
                if room {
                    room = next.push(result);
                } else {
                    rest.push(result);
                }
            }
            let gone = frames.partition_point(|(e, _)| *e < keep_from);
            frames.drain(..gone);
            !frames.is_empty()
        });
        rest
    }

    /// Moves past the window ending at `end`, once all its results are out.
    fn window_emitted(&mut self, end: i64) {
        if self.frames.global {
            self.frame_keys.clear();
            self.next_end = i64::MAX;
            return;
        }
        self.next_end = end + self.frames.slide;
        // The pass dropped every frame before `keep_from`, and a one-frame window its frame.
        let keep_from = end + self.frames.slide - self.frames.size;
        self.frame_keys = self.frame_keys.split_off(&keep_from);
        if self.frames.size == self.frames.slide {
            self.frame_keys.remove(&end);
        }
    }
}

impl<T, K, KF, Op> Link<Timestamped<T>> for SlidingAggregate<T, K, KF, Op>
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
        if !self.emit_windows(self.watermark, outbox) {
            self.next.flush(outbox)?;
            return Ok(false);
        }
        chain_watermark(&mut *self.next, wm, outbox)
    }

    /// Saves each key's frames, as the two-stage combine saves its frames, and where
    /// emission stands.
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(self.closing.is_some(), "a window being emitted")?;
        let (keys, accs) = &self.codec;
        for (key, k) in self.keys.iter().flatten() {
            let bytes = keys.to_bytes(key)?;
            for (end, acc) in k {
                state.put_keyed(key, &bytes, encode_timed(accs, &[*end], acc)?);
            }
        }
        put_instance_time(state, self.place, b"next_end", self.next_end);
        put_instance_time(state, self.place, b"watermark", self.watermark);
        self.next.save(&mut state.next())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        let (keys, frame_keys, op) = (&mut self.keys, &mut self.frame_keys, &*self.op);
        let (next_end, watermark) =
            restore_keyed_frames(entries, &self.codec, self.place, |key, end, acc| {
                let frames = keys[shard_of(&key)].entry(key).or_default();
                match frames.iter_mut().find(|(e, _)| *e == end) {
                    // Partials of one key and frame from several old instances combine.
                    Some((_, held)) => op.combine(held, acc),
                    None => insert_frame(frames, frame_keys, end, acc),
                }
            })?;
        self.next_end = next_end.unwrap_or(self.next_end);
        self.watermark = watermark.unwrap_or(self.watermark);
        self.next.restore(&mut entries.next())
    }
}
