//! Stream–stream joins: both sides partitioned by the join key into one instance, which keeps
//! each side's items and matches every arrival against the other side's.
//!
//! In a *windowed* join two items match only within the same tumbling window; a window's
//! state is dropped when the watermark passes its end. In an *unwindowed* join the state is
//! kept for the whole input, or for `ttl` ms of event time when one is set. A match is emitted
//! as soon as its second item arrives, stamped with the later of the two times.

use std::hash::Hash;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_core::{
    Counter, Inbox, Item, Outbox, PartitionKey, Processor, ProcessorContext, ProcessorResult,
    SnapshotEntry, SnapshotWriter, Watermark,
};

use crate::event_time::{Timestamped, Window};
use crate::links::join::KeyFn;
use crate::links::link::{Link, chain_idle, chain_watermark, complete_chain, save_chain};
use crate::links::state::{
    ChainEntries, InstancePlace, InstanceTimes, LinkWriter, Rescaled, StateCodec, put_instance_time,
};
use crate::links::window::Frames;

/// Builds a match, or `None` to skip the pair.
pub type StreamMerge<L, R, O> = Arc<dyn Fn(&Window, &L, &R) -> Option<O> + Send + Sync>;

/// One side's kept items, by (window end, key).
type SideState<K, T> = FxHashMap<(i64, K), Vec<Timestamped<T>>>;

/// How a stream join saves its state: keys, and each side's kept items.
pub type JoinCodec<K, L, R> = (
    StateCodec<K>,
    StateCodec<Vec<Timestamped<L>>>,
    StateCodec<Vec<Timestamped<R>>>,
);

/// Saves one side's items, one entry per (window end, key), under the key's partition.
fn save_side<K: PartitionKey, T>(
    state: &mut LinkWriter<'_>,
    side: u8,
    items: &SideState<K, T>,
    keys: &StateCodec<K>,
    values: &StateCodec<Vec<Timestamped<T>>>,
) -> ProcessorResult<()> {
    for ((end, key), kept) in items {
        let mut k = vec![side];
        (keys.encode)(key, &mut k)?;
        let mut value = end.to_le_bytes().to_vec();
        (values.encode)(kept, &mut value)?;
        state.put_keyed(key, &k, value);
    }
    Ok(())
}

/// Restores one side's entry saved by [`save_side`].
fn restore_side<K: Hash + Eq, T>(
    side: &mut SideState<K, T>,
    key: &[u8],
    value: &[u8],
    keys: &StateCodec<K>,
    values: &StateCodec<Vec<Timestamped<T>>>,
) -> ProcessorResult<i64> {
    if value.len() < 8 {
        return Err("a stream join entry is too short".into());
    }
    let end = i64::from_le_bytes(value[..8].try_into()?);
    side.entry((end, (keys.decode)(key)?))
        .or_default()
        .extend((values.decode)(&value[8..])?);
    Ok(end)
}

/// A windowed join of two keyed streams: items of each side are kept per key and window, and a
/// window's joined pairs go out when the watermark passes its end.
pub struct StreamJoin<L, R, K, O> {
    left_key: KeyFn<L, K>,
    right_key: KeyFn<R, K>,
    window: Option<Frames>,
    ttl: Option<i64>,
    left: SideState<K, L>,
    right: SideState<K, R>,
    merge: StreamMerge<L, R, O>,
    chain: Box<dyn Link<Timestamped<O>>>,
    watermark: i64,
    /// The watermark at the last eviction of expired state.
    evicted_at: i64,
    /// The earliest window end with state: nothing expires before the watermark passes it.
    earliest_end: i64,
    late: Counter,
    codec: JoinCodec<K, L, R>,
    place: InstancePlace,
}

impl<L, R, K, O> StreamJoin<L, R, K, O> {
    /// A stream join; see the type's docs for the arguments.
    pub fn new(
        keys: (KeyFn<L, K>, KeyFn<R, K>),
        window: Option<Frames>,
        ttl: Option<i64>,
        merge: StreamMerge<L, R, O>,
        chain: Box<dyn Link<Timestamped<O>>>,
        codec: JoinCodec<K, L, R>,
    ) -> Self {
        StreamJoin {
            codec,
            place: InstancePlace::default(),
            left_key: keys.0,
            right_key: keys.1,
            window,
            ttl,
            left: FxHashMap::default(),
            right: FxHashMap::default(),
            merge,
            chain,
            watermark: i64::MIN,
            evicted_at: i64::MIN,
            earliest_end: i64::MAX,
            late: Counter::default(),
        }
    }

    fn window_of(&self, timestamp: i64) -> Window {
        match &self.window {
            Some(frames) => {
                let end = frames.frame_end(timestamp);
                Window {
                    start: frames.window_start(end),
                    end,
                }
            }
            None => Window {
                start: i64::MIN,
                end: i64::MAX,
            },
        }
    }
}

impl<L, R, K, O> Processor for StreamJoin<L, R, K, O>
where
    L: Item,
    R: Item,
    K: Item + Hash + Eq + PartitionKey,
    O: Item,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.late = ctx.metrics().counter("late_events");
        self.place = InstancePlace::of(ctx);
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        if !self.chain.flush(outbox)? {
            return Ok(());
        }
        if ordinal == 0 {
            let items = inbox.items::<Timestamped<L>>();
            while let Some(l) = items.pop_front() {
                if l.timestamp < self.watermark {
                    self.late.increment();
                    continue;
                }
                let window = self.window_of(l.timestamp);
                self.earliest_end = self.earliest_end.min(window.end);
                let key = (window.end, (self.left_key)(&l.item));
                let mut room = true;
                for r in self.right.get(&key).map_or(&[][..], Vec::as_slice) {
                    if let Some(o) = (self.merge)(&window, &l.item, &r.item) {
                        room = self.chain.push(Timestamped {
                            timestamp: l.timestamp.max(r.timestamp),
                            item: o,
                        });
                    }
                }
                self.left.entry(key).or_default().push(l);
                if !room {
                    break;
                }
            }
        } else {
            let items = inbox.items::<Timestamped<R>>();
            while let Some(r) = items.pop_front() {
                if r.timestamp < self.watermark {
                    self.late.increment();
                    continue;
                }
                let window = self.window_of(r.timestamp);
                self.earliest_end = self.earliest_end.min(window.end);
                let key = (window.end, (self.right_key)(&r.item));
                let mut room = true;
                for l in self.left.get(&key).map_or(&[][..], Vec::as_slice) {
                    if let Some(o) = (self.merge)(&window, &l.item, &r.item) {
                        room = self.chain.push(Timestamped {
                            timestamp: l.timestamp.max(r.timestamp),
                            item: o,
                        });
                    }
                }
                self.right.entry(key).or_default().push(r);
                if !room {
                    break;
                }
            }
        }
        self.chain.flush(outbox)?;
        Ok(())
    }

    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        self.watermark = self.watermark.max(wm.0);
        let wm_now = self.watermark;
        if self.window.is_some() {
            // A window's state goes once the watermark passes its end; nothing to do before
            // the earliest one, so most watermarks cost nothing here.
            if wm_now >= self.earliest_end {
                self.left.retain(|(end, _), _| *end > wm_now);
                self.right.retain(|(end, _), _| *end > wm_now);
                self.earliest_end = self
                    .left
                    .keys()
                    .chain(self.right.keys())
                    .map(|(end, _)| *end)
                    .min()
                    .unwrap_or(i64::MAX);
            }
        } else if let Some(ttl) = self.ttl
            && wm_now.saturating_sub(self.evicted_at) >= ttl / 4
        {
            // Expire items older than the TTL, a few times per TTL rather than per watermark.
            self.evicted_at = wm_now;
            let horizon = wm_now.saturating_sub(ttl);
            self.left.retain(|_, items| {
                items.retain(|i| i.timestamp >= horizon);
                !items.is_empty()
            });
            self.right.retain(|_, items| {
                items.retain(|i| i.timestamp >= horizon);
                !items.is_empty()
            });
        }
        chain_watermark(&mut *self.chain, wm, outbox)
    }

    fn try_process(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // A backlog left by a full outbox goes out even if no more input comes.
        self.chain.flush(outbox)
    }

    fn try_process_idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        chain_idle(&mut *self.chain, outbox)
    }

    /// Both sides are input, and state expires on watermarks.
    fn next_call(&self) -> weir_core::NextCall {
        weir_core::NextCall::OnWake
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        complete_chain(&mut *self.chain, outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.chain.is_cooperative()
    }

    /// Saves both sides' kept items by key partition, and the watermark and eviction times.
    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        let (left, right, codec, place) = (&self.left, &self.right, &self.codec, self.place);
        let (watermark, evicted_at) = (self.watermark, self.evicted_at);
        save_chain(&mut *self.chain, outbox, writer, |state| {
            save_side(state, 0, left, &codec.0, &codec.1)?;
            save_side(state, 1, right, &codec.0, &codec.2)?;
            put_instance_time(state, place, b"watermark", watermark);
            put_instance_time(state, place, b"evicted_at", evicted_at);
            Ok(())
        })
    }

    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        let mut entries = ChainEntries::new(entries);
        let mut head = entries.head();
        let (mut watermarks, mut evictions) = (InstanceTimes::default(), InstanceTimes::default());
        for e in head.take() {
            if watermarks.take(b"watermark", &e) || evictions.take(b"evicted_at", &e) {
                continue;
            }
            match (e.partition, e.key.split_first()) {
                (Some(_), Some((&0, key))) => {
                    let end =
                        restore_side(&mut self.left, key, &e.value, &self.codec.0, &self.codec.1)?;
                    self.earliest_end = self.earliest_end.min(end);
                }
                (Some(_), Some((&1, key))) => {
                    let end =
                        restore_side(&mut self.right, key, &e.value, &self.codec.0, &self.codec.2)?;
                    self.earliest_end = self.earliest_end.min(end);
                }
                _ => return Err("unknown stream join entry".into()),
            }
        }
        // The least: no item a join would match is dropped as late, or evicted early.
        if let Some(wm) = watermarks.resolve(self.place, Rescaled::Least) {
            self.watermark = wm;
        }
        if let Some(at) = evictions.resolve(self.place, Rescaled::Least) {
            self.evicted_at = at;
        }
        self.chain.restore(&mut head.next())
    }

    fn snapshot_commit_finish(&mut self, _success: bool) -> ProcessorResult<bool> {
        self.chain.commit()
    }
}
