//! Hash joins: build tables from batch stages, then stream the probe side through them.
//!
//! The build sides arrive on input ordinals 1 (and 2) over broadcast edges whose priority
//! makes the runtime drain them completely before the probe side (ordinal 0) is read. Every
//! join instance therefore holds the whole build side, and probe items never wait.

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_core::{Inbox, Item, Outbox, Processor, ProcessorContext, ProcessorResult};

use crate::links::link::{Link, chain_head_hooks, chain_restore, complete_chain, save_chain};
use crate::links::state::not_durable;

/// A join key function, shared by every instance.
pub type KeyFn<T, K> = Arc<dyn Fn(&T) -> K + Send + Sync>;

/// The rows of one build side, by join key.
pub struct BuildTable<K, B> {
    rows: FxHashMap<K, Vec<B>>,
    key: KeyFn<B, K>,
}

impl<K: Hash + Eq, B> BuildTable<K, B> {
    /// Collects the build side, keyed by `key`.
    pub fn new(key: KeyFn<B, K>) -> Self {
        BuildTable {
            rows: FxHashMap::default(),
            key,
        }
    }

    fn fill(&mut self, items: &mut VecDeque<B>) {
        for b in items.drain(..) {
            self.rows.entry((self.key)(&b)).or_default().push(b);
        }
    }

    fn get(&self, key: &K) -> &[B] {
        self.rows.get(key).map_or(&[], Vec::as_slice)
    }

    /// Drops every row and frees the table's memory.
    fn clear(&mut self) {
        self.rows = FxHashMap::default();
    }
}

/// Merge function of a one-sided join: `None` result drops the row (inner join on a miss).
pub type Merge1<T, B, R> = Arc<dyn Fn(&T, Option<&B>) -> Option<R> + Send + Sync>;
/// Merge function of a two-sided join.
pub type Merge2<T, B1, B2, R> =
    Arc<dyn Fn(&T, Option<&B1>, Option<&B2>) -> Option<R> + Send + Sync>;

/// Joins the probe side with one build side.
pub struct HashJoin1<T, K, B, R> {
    probe_key: KeyFn<T, K>,
    table: BuildTable<K, B>,
    merge: Merge1<T, B, R>,
    chain: Box<dyn Link<R>>,
}

impl<T, K: Hash + Eq, B, R> HashJoin1<T, K, B, R> {
    /// A hash join of the probe side against one build side.
    pub fn new(
        probe_key: KeyFn<T, K>,
        table: BuildTable<K, B>,
        merge: Merge1<T, B, R>,
        chain: Box<dyn Link<R>>,
    ) -> Self {
        HashJoin1 {
            probe_key,
            table,
            merge,
            chain,
        }
    }
}

impl<T: Item, K: Item + Hash + Eq, B: Item, R: Item> Processor for HashJoin1<T, K, B, R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        if ordinal == 1 {
            self.table.fill(inbox.items::<B>());
            return Ok(());
        }
        if !self.chain.flush(outbox)? {
            return Ok(());
        }
        let items = inbox.items::<T>();
        while let Some(t) = items.pop_front() {
            let key = (self.probe_key)(&t);
            let matches = self.table.get(&key);
            let mut room = true;
            if matches.is_empty() {
                if let Some(r) = (self.merge)(&t, None) {
                    room = self.chain.push(r);
                }
            } else {
                for b in matches {
                    if let Some(r) = (self.merge)(&t, Some(b)) {
                        room = self.chain.push(r);
                    }
                }
            }
            if !room {
                break;
            }
        }
        self.chain.flush(outbox)?;
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Every probe item went through: the table is done with, and its final state (and
        // every later snapshot's) holds none of it.
        self.table.clear();
        complete_chain(&mut *self.chain, outbox)
    }

    /// The build table is not saved: the vertex holds snapshots back until it completes
    /// (see ARCHITECTURE.md, snapshots), and clears its table then.
    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut weir_core::SnapshotWriter,
    ) -> ProcessorResult<bool> {
        if !self.table.rows.is_empty() {
            return Err(not_durable("a hash join's build table"));
        }
        save_chain(&mut *self.chain, outbox, writer, |_| Ok(()))
    }

    chain_head_hooks!();
    chain_restore!();
}

/// Joins the probe side with two build sides.
pub struct HashJoin2<T, K1, B1, K2, B2, R> {
    probe_key1: KeyFn<T, K1>,
    probe_key2: KeyFn<T, K2>,
    table1: BuildTable<K1, B1>,
    table2: BuildTable<K2, B2>,
    merge: Merge2<T, B1, B2, R>,
    chain: Box<dyn Link<R>>,
}

impl<T, K1: Hash + Eq, B1, K2: Hash + Eq, B2, R> HashJoin2<T, K1, B1, K2, B2, R> {
    /// A hash join of the probe side against two build sides.
    pub fn new(
        probe_keys: (KeyFn<T, K1>, KeyFn<T, K2>),
        tables: (BuildTable<K1, B1>, BuildTable<K2, B2>),
        merge: Merge2<T, B1, B2, R>,
        chain: Box<dyn Link<R>>,
    ) -> Self {
        HashJoin2 {
            probe_key1: probe_keys.0,
            probe_key2: probe_keys.1,
            table1: tables.0,
            table2: tables.1,
            merge,
            chain,
        }
    }
}

/// The matches of one side, or a single `None` when there are none.
fn options<B>(matches: &[B]) -> impl Iterator<Item = Option<&B>> {
    let none = matches.is_empty().then_some(None);
    matches.iter().map(Some).chain(none)
}

impl<T, K1, B1, K2, B2, R> Processor for HashJoin2<T, K1, B1, K2, B2, R>
where
    T: Item,
    K1: Item + Hash + Eq,
    B1: Item,
    K2: Item + Hash + Eq,
    B2: Item,
    R: Item,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        match ordinal {
            1 => {
                self.table1.fill(inbox.items::<B1>());
                return Ok(());
            }
            2 => {
                self.table2.fill(inbox.items::<B2>());
                return Ok(());
            }
            _ => {}
        }
        if !self.chain.flush(outbox)? {
            return Ok(());
        }
        let items = inbox.items::<T>();
        while let Some(t) = items.pop_front() {
            let m1 = self.table1.get(&(self.probe_key1)(&t));
            let m2 = self.table2.get(&(self.probe_key2)(&t));
            let mut room = true;
            for b1 in options(m1) {
                for b2 in options(m2) {
                    if let Some(r) = (self.merge)(&t, b1, b2) {
                        room = self.chain.push(r);
                    }
                }
            }
            if !room {
                break;
            }
        }
        self.chain.flush(outbox)?;
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // See `HashJoin1::complete`.
        self.table1.clear();
        self.table2.clear();
        complete_chain(&mut *self.chain, outbox)
    }

    /// See `HashJoin1::save_to_snapshot`.
    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut weir_core::SnapshotWriter,
    ) -> ProcessorResult<bool> {
        if !self.table1.rows.is_empty() || !self.table2.rows.is_empty() {
            return Err(not_durable("a hash join's build table"));
        }
        save_chain(&mut *self.chain, outbox, writer, |_| Ok(()))
    }

    chain_head_hooks!();
    chain_restore!();
}
