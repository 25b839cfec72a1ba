//! Stateless and per-instance stateful links: map, filter, flat map, peek, stateful map.

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_core::{Item, Outbox, PartitionKey, ProcessorContext, ProcessorResult, Watermark};

use crate::event_time::Timestamped;

use crate::links::link::{Link, delegate_flow_to_next, delegate_to_next};
use crate::links::state::{LinkEntries, LinkWriter, StateCodec, not_durable, refuse_save_if};

/// Maps each item with `f`.
pub struct MapLink<F, R> {
    /// The function.
    pub f: Arc<F>,
    /// The rest of the chain.
    pub next: Box<dyn Link<R>>,
    /// Reused output batch.
    pub out: Vec<R>,
}

impl<T, R: Item, F: Fn(T) -> R + Send + Sync> Link<T> for MapLink<F, R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }
    #[inline]
    fn push(&mut self, item: T) -> bool {
        self.next.push((self.f)(item))
    }
    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        let f = &*self.f;
        self.out.extend(items.drain(..).map(f));
        self.next.push_batch(&mut self.out)
    }
    delegate_to_next!();
}

/// Maps and filters in one pass. An item gives at most one result, so unlike a flat map
/// nothing is held back between calls: a batch's results go on in one hand-off.
pub struct FilterMapLink<F, R> {
    /// The function; `None` drops the item.
    pub f: Arc<F>,
    /// The rest of the chain.
    pub next: Box<dyn Link<R>>,
    /// Reused output batch.
    pub out: Vec<R>,
}

impl<T, R: Item, F: Fn(T) -> Option<R> + Send + Sync> Link<T> for FilterMapLink<F, R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }
    #[inline]
    fn push(&mut self, item: T) -> bool {
        match (self.f)(item) {
            Some(r) => self.next.push(r),
            None => true,
        }
    }
    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        let f = &*self.f;
        self.out.extend(items.drain(..).filter_map(f));
        self.next.push_batch(&mut self.out)
    }
    delegate_to_next!();
}

/// Keeps the items for which `f` is true.
pub struct FilterLink<F, T> {
    /// The predicate.
    pub f: Arc<F>,
    /// The rest of the chain.
    pub next: Box<dyn Link<T>>,
}

impl<T: Item, F: Fn(&T) -> bool + Send + Sync> Link<T> for FilterLink<F, T> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }
    #[inline]
    fn push(&mut self, item: T) -> bool {
        if (self.f)(&item) {
            self.next.push(item)
        } else {
            true
        }
    }
    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        let f = &*self.f;
        items.retain(|item| f(item));
        self.next.push_batch(items)
    }
    delegate_to_next!();
}

/// Results a flat map collects before handing them on.
const FLAT_MAP_RUN: usize = 1024;

/// A flat map that expands lazily: it stops expanding as soon as the chain behind it is full,
/// keeping the rest of the current item's results (as its iterator) and the items not yet
/// expanded, and goes on at the next `flush`. So one item that yields millions never lands
/// more than a run in the chain's backlog.
pub struct FlatMapLink<F, T, I: IntoIterator> {
    f: Arc<F>,
    next: Box<dyn Link<I::Item>>,
    /// Results collected for the next hand-off (reused).
    out: Vec<I::Item>,
    /// The rest of the item being expanded when the chain filled.
    current: Option<I::IntoIter>,
    /// Items not expanded yet when the chain filled.
    pending: VecDeque<T>,
}

impl<F, T, I: IntoIterator> FlatMapLink<F, T, I> {
    /// A flat map with `f`, feeding `next`.
    pub fn new(f: Arc<F>, next: Box<dyn Link<I::Item>>) -> Self {
        FlatMapLink {
            f,
            next,
            out: Vec::new(),
            current: None,
            pending: VecDeque::new(),
        }
    }
}

impl<T, I, F> FlatMapLink<F, T, I>
where
    I: IntoIterator,
    I::Item: Item,
    F: Fn(T) -> I,
{
    /// Expands `iter` into runs handed to the next link. Returns false, keeping what is left
    /// of `iter` in `current`, when the next link is full.
    #[inline]
    fn expand(&mut self, mut iter: I::IntoIter) -> bool {
        for r in iter.by_ref() {
            self.out.push(r);
            if self.out.len() >= FLAT_MAP_RUN && !self.next.push_batch(&mut self.out) {
                self.current = Some(iter);
                return false;
            }
        }
        true
    }

    /// Goes on with the held-back item and items; true when nothing is held back and the
    /// last run was handed on with room to spare.
    fn resume(&mut self) -> bool {
        if let Some(iter) = self.current.take()
            && !self.expand(iter)
        {
            return false;
        }
        while let Some(item) = self.pending.pop_front() {
            let iter = (self.f)(item).into_iter();
            if !self.expand(iter) {
                return false;
            }
        }
        self.out.is_empty() || self.next.push_batch(&mut self.out)
    }

    fn is_drained(&self) -> bool {
        self.current.is_none() && self.pending.is_empty()
    }

    /// Flushes the next link and resumes until both are done or the outbox is full.
    fn drain(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        loop {
            if !self.next.flush(outbox)? {
                return Ok(false);
            }
            if self.is_drained() {
                return Ok(true);
            }
            self.resume();
        }
    }
}

impl<T, I, F> Link<T> for FlatMapLink<F, T, I>
where
    T: Send,
    I: IntoIterator,
    I::Item: Item,
    I::IntoIter: Send,
    F: Fn(T) -> I + Send + Sync,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }
    #[inline]
    fn push(&mut self, item: T) -> bool {
        self.pending.push_back(item);
        self.resume()
    }
    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        if !self.is_drained() {
            // Heads flush before they push, but keep the order whatever happens.
            self.pending.extend(items.drain(..));
            return self.resume();
        }
        let mut items = items.drain(..);
        while let Some(item) = items.next() {
            let iter = (self.f)(item).into_iter();
            if !self.expand(iter) {
                self.pending.extend(items);
                return false;
            }
        }
        self.out.is_empty() || self.next.push_batch(&mut self.out)
    }
    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.drain(outbox)
    }
    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(self.drain(outbox)? && self.next.watermark(wm, outbox)?)
    }
    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(self.drain(outbox)? && self.next.idle(outbox)?)
    }
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(self.drain(outbox)? && self.next.complete(outbox)?)
    }
    fn is_cooperative(&self) -> bool {
        self.next.is_cooperative()
    }
    fn prepare_save(&mut self) -> weir_core::ProcessorResult<bool> {
        self.next.prepare_save()
    }
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(!self.is_drained(), "items held back")?;
        self.next.save(&mut state.next())
    }
    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        self.next.restore(&mut entries.next())
    }
    fn commit(&mut self) -> ProcessorResult<bool> {
        self.next.commit()
    }
}

/// Calls `f` on each item, then hands it on unchanged.
pub struct PeekLink<F, T> {
    /// The function.
    pub f: Arc<F>,
    /// The rest of the chain.
    pub next: Box<dyn Link<T>>,
}

impl<T: Item, F: Fn(&T) + Send + Sync> Link<T> for PeekLink<F, T> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }
    #[inline]
    fn push(&mut self, item: T) -> bool {
        (self.f)(&item);
        self.next.push(item)
    }
    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        items.iter().for_each(|item| (self.f)(item));
        self.next.push_batch(items)
    }
    delegate_to_next!();
}

/// A map with state kept per processor instance.
pub struct StatefulLink<F, S, R> {
    /// The instance's state.
    pub state: S,
    /// The function, given the state and the item.
    pub f: Arc<F>,
    /// The rest of the chain.
    pub next: Box<dyn Link<R>>,
    /// Reused output batch.
    pub out: Vec<R>,
    /// Whether the input ended: the state is then done with.
    pub completed: bool,
}

impl<T, S: Send, R: Item, F: Fn(&mut S, T) -> Option<R> + Send + Sync> Link<T>
    for StatefulLink<F, S, R>
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }
    #[inline]
    fn push(&mut self, item: T) -> bool {
        match (self.f)(&mut self.state, item) {
            Some(r) => self.next.push(r),
            None => true,
        }
    }
    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        let (f, state) = (&*self.f, &mut self.state);
        self.out
            .extend(items.drain(..).filter_map(|item| f(state, item)));
        self.next.push_batch(&mut self.out)
    }
    delegate_flow_to_next!(except_complete);
    fn complete(&mut self, outbox: &mut weir_core::Outbox) -> ProcessorResult<bool> {
        // Nothing more comes in: the state has no further use, and nothing to save.
        self.completed = true;
        self.next.complete(outbox)
    }
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        if !self.completed {
            // Per-instance state has no key to move with on a rescale, and no codec.
            return Err(not_durable("an unkeyed map_stateful"));
        }
        self.next.save(&mut state.next())
    }
    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        self.next.restore(&mut entries.next())
    }
    fn commit(&mut self) -> ProcessorResult<bool> {
        self.next.commit()
    }
}

/// A map with state kept per key. It runs after a partitioned edge, so every key's items
/// reach the same instance.
pub struct KeyedStatefulLink<KF: ?Sized, C, F, K, S, R> {
    /// Each key's state.
    pub states: FxHashMap<K, S>,
    /// Reads an item's key.
    pub key: Arc<KF>,
    /// Makes the state of a key seen for the first time.
    pub create: Arc<C>,
    /// The function, given the key's state, the key and the item.
    pub f: Arc<F>,
    /// The rest of the chain.
    pub next: Box<dyn Link<R>>,
}

impl<T, K, S, R, KF, C, F> Link<T> for KeyedStatefulLink<KF, C, F, K, S, R>
where
    K: Hash + Eq + Send,
    S: Send,
    R: Item,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    C: Fn() -> S + Send + Sync,
    F: Fn(&mut S, &K, T) -> Option<R> + Send + Sync,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }
    #[inline]
    fn push(&mut self, item: T) -> bool {
        let key = (self.key)(&item);
        let result = match self.states.get_mut(&key) {
            Some(state) => (self.f)(state, &key, item),
            None => {
                let mut state = (self.create)();
                let r = (self.f)(&mut state, &key, item);
                self.states.insert(key, state);
                r
            }
        };
        match result {
            Some(r) => self.next.push(r),
            None => true,
        }
    }
    delegate_flow_to_next!(except_complete);
    fn complete(&mut self, outbox: &mut weir_core::Outbox) -> ProcessorResult<bool> {
        // Nothing more comes in: the states are done with, and their memory goes now.
        self.states = FxHashMap::default();
        self.next.complete(outbox)
    }
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        if !self.states.is_empty() {
            return Err(not_durable("a batch map_stateful"));
        }
        self.next.save(&mut state.next())
    }
    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        self.next.restore(&mut entries.next())
    }
    fn commit(&mut self) -> ProcessorResult<bool> {
        self.next.commit()
    }
}

/// A stream map with state per key that expires: a key's state is dropped once the watermark
/// is more than `ttl` ms past the last event time that touched it.
pub struct ExpiringKeyedLink<KF: ?Sized, C, F, K, S, R> {
    /// Each key's state, with the last event time that touched it.
    pub states: FxHashMap<K, (S, i64)>,
    /// How long, in ms of event time, a key's state lives after its last item.
    pub ttl: i64,
    /// The watermark up to which expired states were dropped.
    pub evicted_at: i64,
    /// Reads an item's key.
    pub key: Arc<KF>,
    /// Makes the state of a key seen for the first time.
    pub create: Arc<C>,
    /// The function, given the key's state, the key and the item.
    pub f: Arc<F>,
    /// The rest of the chain.
    pub next: Box<dyn Link<Timestamped<R>>>,
    /// Saves each key and its `(state, last seen)`.
    pub codec: (StateCodec<K>, StateCodec<(S, i64)>),
}

impl<T, K, S, R, KF, C, F> Link<Timestamped<T>> for ExpiringKeyedLink<KF, C, F, K, S, R>
where
    K: Hash + Eq + Send + PartitionKey,
    S: Send,
    R: Item,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    C: Fn() -> S + Send + Sync,
    F: Fn(&mut S, &K, T) -> Option<R> + Send + Sync,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }
    fn push(&mut self, item: Timestamped<T>) -> bool {
        let key = (self.key)(&item.item);
        let timestamp = item.timestamp;
        let result = match self.states.get_mut(&key) {
            Some((state, seen)) => {
                if timestamp.saturating_sub(*seen) > self.ttl {
                    // Expired in event time, even if no watermark has said so yet.
                    *state = (self.create)();
                }
                *seen = (*seen).max(timestamp);
                (self.f)(state, &key, item.item)
            }
            None => {
                let mut state = (self.create)();
                let r = (self.f)(&mut state, &key, item.item);
                self.states.insert(key, (state, timestamp));
                r
            }
        };
        match result {
            Some(r) => self.next.push(Timestamped { timestamp, item: r }),
            None => true,
        }
    }
    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if wm.0.saturating_sub(self.evicted_at) >= self.ttl / 4 {
            self.evicted_at = wm.0;
            let horizon = wm.0.saturating_sub(self.ttl);
            self.states.retain(|_, (_, seen)| *seen >= horizon);
        }
        self.next.watermark(wm, outbox)
    }
    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.next.idle(outbox)
    }
    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.next.flush(outbox)
    }
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.next.complete(outbox)
    }
    fn is_cooperative(&self) -> bool {
        self.next.is_cooperative()
    }
    fn prepare_save(&mut self) -> weir_core::ProcessorResult<bool> {
        self.next.prepare_save()
    }
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        let (keys, values) = &self.codec;
        // A state entry per key, with its last event time: the TTL restarts where it was.
        let mut value = Vec::new();
        for (key, entry) in &self.states {
            let k = keys.to_bytes(key)?;
            value.clear();
            (values.encode)(entry, &mut value)?;
            state.put_keyed(key, &k, value.clone());
        }
        state.put(b"evicted_at", self.evicted_at.to_le_bytes().to_vec());
        self.next.save(&mut state.next())
    }
    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        let (keys, values) = &self.codec;
        let own = entries.take();
        self.states.reserve(own.len());
        for e in own {
            if e.partition.is_none() {
                if e.key == b"evicted_at" && e.value.len() == 8 {
                    let at = i64::from_le_bytes(e.value[..8].try_into()?);
                    self.evicted_at = self.evicted_at.max(at);
                }
                continue;
            }
            self.states
                .insert((keys.decode)(&e.key)?, (values.decode)(&e.value)?);
        }
        self.next.restore(&mut entries.next())
    }
    fn commit(&mut self) -> ProcessorResult<bool> {
        self.next.commit()
    }
}
