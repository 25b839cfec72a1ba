//! The two stages of an aggregation: accumulate locally, then combine by key.
//!
//! The accumulate stage is a terminal link, fused behind whatever feeds it (often the source
//! itself), so items never cross a queue before they are folded. At the end of its input it
//! emits one partial accumulator per key. A partitioned edge brings every key's partials to one
//! combine instance, which folds them and emits `(key, result)` into its own chain.

use std::collections::{VecDeque, hash_map};
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_core::{
    Inbox, Item, Outbox, Processor, ProcessorContext, ProcessorResult, SnapshotWriter, Watermark,
};

use crate::aggregate::{AggregateOperation, KeyCounter};
use crate::links::link::{
    Link, chain_head_hooks, chain_restore, complete_chain, drain_into_chain, save_chain,
};
use crate::links::state::{LinkEntries, LinkWriter, not_durable};

/// How many pairs of a table [`PartialsOut`] offers at once.
const PARTIALS_RUN: usize = 1024;

/// The hand-off of a table of partial results, `(key, partial)` pairs offered to output 0 at
/// the end of the input: what the keyed accumulate terminals share.
///
/// Cost: the pairs go to the port in runs of up to 1024 ([`OutPort::offer_from`]): on a
/// partitioned edge each pair is moved straight into its target's ring, with one release
/// store per target and run.
///
/// [`OutPort::offer_from`]: weir_core::OutPort::offer_from
struct PartialsOut<K, A> {
    draining: Option<hash_map::IntoIter<K, A>>,
    /// Pairs taken from the table and not yet accepted by the port, in order.
    run: VecDeque<(K, A)>,
}

impl<K: Item, A: Item> PartialsOut<K, A> {
    fn new() -> Self {
        PartialsOut {
            draining: None,
            run: VecDeque::new(),
        }
    }

    /// Offers the pairs of `groups` (taken on the first call) to output 0. Returns true once
    /// every pair went out; false when the outbox is full (call again).
    fn offer(&mut self, groups: &mut FxHashMap<K, A>, outbox: &mut Outbox) -> bool {
        let draining = self
            .draining
            .get_or_insert_with(|| std::mem::take(groups).into_iter());
        let port = outbox.port::<(K, A)>(0);
        loop {
            if self.run.is_empty() {
                self.run.extend(draining.by_ref().take(PARTIALS_RUN));
                if self.run.is_empty() {
                    return true;
                }
            }
            port.offer_from(&mut self.run);
            if !self.run.is_empty() {
                return false;
            }
        }
    }

    /// Refuses a snapshot while `groups` holds partials or some are still on their way out:
    /// a batch aggregation's state is not saved.
    fn refuse_save_unless_done(&self, groups: &FxHashMap<K, A>) -> ProcessorResult<()> {
        let emitting = !self.run.is_empty() || self.draining.as_ref().is_some_and(|d| d.len() > 0);
        if !groups.is_empty() || emitting {
            return Err(not_durable("a batch aggregation"));
        }
        Ok(())
    }
}

/// Accumulates items per key; emits `(key, accumulator)` pairs on output 0 at the end.
pub struct AccumulateByKey<T, K, KF: ?Sized, Op: AggregateOperation<T>> {
    key: Arc<KF>,
    op: Arc<Op>,
    groups: FxHashMap<K, Op::Acc>,
    out: PartialsOut<K, Op::Acc>,
    _t: PhantomData<fn(T)>,
}

impl<T, K, KF: ?Sized, Op> AccumulateByKey<T, K, KF, Op>
where
    K: Item,
    Op: AggregateOperation<T>,
{
    /// Accumulates items by the key `key` returns, with `op`.
    pub fn new(key: Arc<KF>, op: Arc<Op>) -> Self {
        AccumulateByKey {
            key,
            op,
            groups: FxHashMap::default(),
            out: PartialsOut::new(),
            _t: PhantomData,
        }
    }
}

impl<T, K, KF, Op> Link<T> for AccumulateByKey<T, K, KF, Op>
where
    T: 'static,
    K: Item + Hash + Eq,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    Op: AggregateOperation<T>,
{
    fn init(&mut self, _ctx: &ProcessorContext) -> ProcessorResult<()> {
        Ok(())
    }

    #[inline]
    fn push(&mut self, item: T) -> bool {
        // One hash of the key, whether its group exists or not.
        match self.groups.entry((self.key)(&item)) {
            hash_map::Entry::Occupied(mut acc) => self.op.accumulate(acc.get_mut(), &item),
            hash_map::Entry::Vacant(slot) => {
                let mut acc = self.op.create();
                self.op.accumulate(&mut acc, &item);
                slot.insert(acc);
            }
        }
        true
    }

    fn flush(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(true)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(self.out.offer(&mut self.groups, outbox))
    }

    fn is_cooperative(&self) -> bool {
        true
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Partial accumulators go out only at the end of the input; the watermark goes on.
        Ok(outbox.offer_watermark(wm))
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(outbox.offer_idle())
    }

    fn save(&mut self, _state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        self.out.refuse_save_unless_done(&self.groups)
    }

    fn restore(&mut self, _entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        Ok(())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        Ok(true)
    }
}

/// Counts the keys its function finds in each item into a [`KeyCounter`]; emits `(key,
/// count)` pairs on output 0 at the end: the local stage of a keyed count
/// (`weir::BatchStage::count_keys`).
///
/// Cost per item: one call of the function, which costs one table lookup per key it adds
/// (see [`KeyCounter`]); no item is made per key.
pub struct CountKeys<T, K, F: ?Sized> {
    keys: Arc<F>,
    counter: KeyCounter<K>,
    /// The table, once the input ended.
    counts: FxHashMap<K, u64>,
    out: PartialsOut<K, u64>,
    _t: PhantomData<fn(T)>,
}

impl<T, K: Item, F: ?Sized> CountKeys<T, K, F> {
    /// Counts what `keys(item, counter)` adds to the counter, for every item.
    pub fn new(keys: Arc<F>) -> Self {
        CountKeys {
            keys,
            counter: KeyCounter::default(),
            counts: FxHashMap::default(),
            out: PartialsOut::new(),
            _t: PhantomData,
        }
    }
}

impl<T, K, F> Link<T> for CountKeys<T, K, F>
where
    T: 'static,
    K: Item + Hash + Eq,
    F: Fn(&T, &mut KeyCounter<K>) + Send + Sync + ?Sized,
{
    fn init(&mut self, _ctx: &ProcessorContext) -> ProcessorResult<()> {
        Ok(())
    }

    #[inline]
    fn push(&mut self, item: T) -> bool {
        (self.keys)(&item, &mut self.counter);
        true
    }

    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        for item in items.drain(..) {
            (self.keys)(&item, &mut self.counter);
        }
        true
    }

    fn flush(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(true)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.counter.is_empty() {
            self.counts = self.counter.take();
        }
        Ok(self.out.offer(&mut self.counts, outbox))
    }

    fn is_cooperative(&self) -> bool {
        true
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // The counts go out only at the end of the input; the watermark goes on.
        Ok(outbox.offer_watermark(wm))
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(outbox.offer_idle())
    }

    fn save(&mut self, _state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        if !self.counter.is_empty() {
            return Err(not_durable("a batch aggregation"));
        }
        self.out.refuse_save_unless_done(&self.counts)
    }

    fn restore(&mut self, _entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        Ok(())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        Ok(true)
    }
}

/// Accumulates every item into one accumulator; emits it on output 0 at the end.
pub struct AccumulateAll<T, Op: AggregateOperation<T>> {
    op: Arc<Op>,
    acc: Option<Op::Acc>,
    _t: PhantomData<fn(T)>,
}

impl<T, Op: AggregateOperation<T>> AccumulateAll<T, Op> {
    /// Accumulates every item into one accumulator, with `op`.
    pub fn new(op: Arc<Op>) -> Self {
        let acc = Some(op.create());
        AccumulateAll {
            op,
            acc,
            _t: PhantomData,
        }
    }
}

impl<T: 'static, Op: AggregateOperation<T>> Link<T> for AccumulateAll<T, Op> {
    fn init(&mut self, _ctx: &ProcessorContext) -> ProcessorResult<()> {
        Ok(())
    }

    #[inline]
    fn push(&mut self, item: T) -> bool {
        if let Some(acc) = &mut self.acc {
            self.op.accumulate(acc, &item);
        }
        true
    }

    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        // The accumulator is looked up once per batch, not per item.
        match &mut self.acc {
            Some(acc) => items
                .drain(..)
                .for_each(|item| self.op.accumulate(acc, &item)),
            None => items.clear(),
        }
        true
    }

    fn flush(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(true)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if let Some(acc) = self.acc.take()
            && let Err(acc) = outbox.port::<Op::Acc>(0).offer(acc)
        {
            self.acc = Some(acc);
            return Ok(false);
        }
        Ok(true)
    }

    fn is_cooperative(&self) -> bool {
        true
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Partial accumulators go out only at the end of the input; the watermark goes on.
        Ok(outbox.offer_watermark(wm))
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(outbox.offer_idle())
    }

    fn save(&mut self, _state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        if self.acc.is_some() {
            return Err(not_durable("a batch aggregation"));
        }
        Ok(())
    }

    fn restore(&mut self, _entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        Ok(())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        Ok(true)
    }
}

/// Combines `(key, accumulator)` partials and pushes `(key, result)` into its chain.
pub struct CombineByKey<T, K, Op: AggregateOperation<T>> {
    op: Arc<Op>,
    groups: FxHashMap<K, Op::Acc>,
    draining: Option<hash_map::IntoIter<K, Op::Acc>>,
    chain: Box<dyn Link<(K, Op::Output)>>,
    _t: PhantomData<fn(T)>,
}

impl<T, K, Op: AggregateOperation<T>> CombineByKey<T, K, Op> {
    /// Combines keyed partial accumulators with `op` and, when its input ends, hands `(key,
    /// result)` pairs to `chain`.
    pub fn new(op: Arc<Op>, chain: Box<dyn Link<(K, Op::Output)>>) -> Self {
        CombineByKey {
            op,
            groups: FxHashMap::default(),
            draining: None,
            chain,
            _t: PhantomData,
        }
    }
}

impl<T, K, Op> Processor for CombineByKey<T, K, Op>
where
    T: 'static,
    K: Item + Hash + Eq,
    Op: AggregateOperation<T>,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        for (key, partial) in inbox.items::<(K, Op::Acc)>().drain(..) {
            match self.groups.entry(key) {
                hash_map::Entry::Occupied(mut acc) => self.op.combine(acc.get_mut(), partial),
                hash_map::Entry::Vacant(slot) => {
                    slot.insert(partial);
                }
            }
        }
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let draining = self
            .draining
            .get_or_insert_with(|| std::mem::take(&mut self.groups).into_iter());
        let op = &self.op;
        let mut results = draining.by_ref().map(|(key, acc)| (key, op.finish(acc)));
        drain_into_chain(&mut results, &mut *self.chain, outbox)
    }

    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        if !self.groups.is_empty() || self.draining.as_ref().is_some_and(|d| d.len() > 0) {
            return Err(not_durable("a batch aggregation"));
        }
        save_chain(&mut *self.chain, outbox, writer, |_| Ok(()))
    }

    chain_head_hooks!();
    chain_restore!();
}

/// Combines every partial accumulator into one result and pushes it into its chain.
pub struct CombineAll<T, Op: AggregateOperation<T>> {
    op: Arc<Op>,
    acc: Option<Op::Acc>,
    emitted: bool,
    chain: Box<dyn Link<Op::Output>>,
    _t: PhantomData<fn(T)>,
}

impl<T, Op: AggregateOperation<T>> CombineAll<T, Op> {
    /// Combines partial accumulators with `op` and, when its input ends, hands the one result
    /// to `chain`.
    pub fn new(op: Arc<Op>, chain: Box<dyn Link<Op::Output>>) -> Self {
        let acc = Some(op.create());
        CombineAll {
            op,
            acc,
            emitted: false,
            chain,
            _t: PhantomData,
        }
    }
}

impl<T: 'static, Op: AggregateOperation<T>> Processor for CombineAll<T, Op> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let acc = self.acc.as_mut().expect("combined before the end of input");
        for partial in inbox.items::<Op::Acc>().drain(..) {
            self.op.combine(acc, partial);
        }
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.emitted {
            let acc = self.acc.take().unwrap_or_else(|| self.op.create());
            self.chain.push(self.op.finish(acc));
            self.emitted = true;
            outbox.report_progress();
        }
        complete_chain(&mut *self.chain, outbox)
    }

    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        if !self.emitted {
            return Err(not_durable("a batch aggregation"));
        }
        save_chain(&mut *self.chain, outbox, writer, |_| Ok(()))
    }

    chain_head_hooks!();
    chain_restore!();
}
