//! Sorting a finite input: collect everything, sort at the end, push in order.

use std::cmp::Ordering;
use std::sync::Arc;

use weir_core::{Inbox, Item, Outbox, Processor, ProcessorContext, ProcessorResult};

use crate::links::link::{Link, chain_head_hooks, chain_restore, drain_into_chain, save_chain};
use crate::links::state::not_durable;

/// A sort comparator shared by every instance, its type erased.
pub type Compare<T> = Arc<dyn Fn(&T, &T) -> Ordering + Send + Sync>;

/// The head of a sort vertex: it collects every item, sorts them with its comparison when the
/// input ends, and hands them to its chain in order.
///
/// `C` is the comparison's type: a concrete closure is called inline by the sort, where a
/// [`Compare`] (the default) costs an indirect call per comparison.
pub struct SortHead<T, C: ?Sized = dyn Fn(&T, &T) -> Ordering + Send + Sync> {
    items: Vec<T>,
    compare: Arc<C>,
    draining: Option<std::vec::IntoIter<T>>,
    chain: Box<dyn Link<T>>,
}

impl<T: Item, C: Fn(&T, &T) -> Ordering + Send + Sync + ?Sized> SortHead<T, C> {
    /// A sort head ordering by `compare`, feeding `chain`.
    pub fn new(compare: Arc<C>, chain: Box<dyn Link<T>>) -> Self {
        SortHead {
            items: Vec::new(),
            compare,
            draining: None,
            chain,
        }
    }
}

impl<T: Item, C: Fn(&T, &T) -> Ordering + Send + Sync + ?Sized + 'static> Processor
    for SortHead<T, C>
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
        self.items.extend(inbox.items::<T>().drain(..));
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let draining = self.draining.get_or_insert_with(|| {
            let mut items = std::mem::take(&mut self.items);
            // Stable: equal items keep their arrival order.
            items.sort_by(|a, b| (self.compare)(a, b));
            items.into_iter()
        });
        drain_into_chain(draining, &mut *self.chain, outbox)
    }

    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut weir_core::SnapshotWriter,
    ) -> ProcessorResult<bool> {
        if !self.items.is_empty() || self.draining.as_ref().is_some_and(|d| d.len() > 0) {
            return Err(not_durable("a sort"));
        }
        save_chain(&mut *self.chain, outbox, writer, |_| Ok(()))
    }

    chain_head_hooks!();
    chain_restore!();
}
