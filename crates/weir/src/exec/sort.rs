//! Sorting a finite input: collect everything, sort at the end, push in order.

use std::sync::Arc;

use weir_core::{Inbox, Item, Outbox, Processor, ProcessorContext, ProcessorResult, Watermark};

use crate::exec::link::{Link, chain_watermark};

/// A sort comparator shared by every instance.
pub(crate) type Compare<T> = Arc<dyn Fn(&T, &T) -> std::cmp::Ordering + Send + Sync>;

pub(crate) struct SortHead<T> {
    items: Vec<T>,
    compare: Compare<T>,
    draining: Option<std::vec::IntoIter<T>>,
    chain: Box<dyn Link<T>>,
}

impl<T: Item> SortHead<T> {
    pub(crate) fn new(compare: Compare<T>, chain: Box<dyn Link<T>>) -> Self {
        SortHead {
            items: Vec::new(),
            compare,
            draining: None,
            chain,
        }
    }
}

impl<T: Item> Processor for SortHead<T> {
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
        if !self.chain.flush(outbox)? {
            return Ok(false);
        }
        if self.draining.is_none() {
            let mut items = std::mem::take(&mut self.items);
            // Stable: equal items keep their arrival order.
            items.sort_by(|a, b| (self.compare)(a, b));
            self.draining = Some(items.into_iter());
        }
        let draining = self.draining.as_mut().expect("set above");
        let mut room = true;
        while room {
            match draining.next() {
                Some(item) => room = self.chain.push(item),
                None => break,
            }
        }
        outbox.report_progress();
        if !self.chain.flush(outbox)? || !room {
            return Ok(false);
        }
        self.chain.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.chain.is_cooperative()
    }

    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        chain_watermark(&mut *self.chain, wm, outbox)
    }
}
