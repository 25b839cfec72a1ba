//! Links: the fused, item-at-a-time form of pipeline stages.
//!
//! The planner fuses consecutive stateless stages into one core vertex. Inside that vertex the
//! stages form a chain of [`Link`]s: each takes an item, does its work, and pushes zero or more
//! results into the next link. The chain ends in a *terminal* link that emits to the outbox,
//! accumulates for a grouped aggregation, or writes to a sink. A *head* processor feeds the
//! chain: from its inbox, from a source reader, from a combine step or a join.
//!
//! Cost: one virtual call per link per item; no allocation, lock or syscall of its own.
//! Backpressure: `push` returns false when the terminal's backlog is full; the head then stops
//! feeding and calls `flush` until the backlog is emitted.

use std::any::{Any, type_name};
use std::collections::VecDeque;

use weir_core::{Inbox, Item, Outbox, Processor, ProcessorContext, ProcessorResult, Watermark};

use crate::links::state::{LinkEntries, LinkWriter, refuse_save_if};

/// One step of a fused chain. See the [module docs](self).
pub trait Link<T>: Send {
    /// Called once per processor instance, before any item.
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()>;
    /// Takes one item. Returns false when the terminal's backlog is full.
    fn push(&mut self, item: T) -> bool;
    /// Takes every item of `items`, leaving it empty (its capacity is kept for reuse).
    /// Returns false when the terminal's backlog is full.
    ///
    /// The default pushes item by item; inside an implementation `push` is a static call, so
    /// terminals need nothing more. Transform links override it to run their function over
    /// the whole batch in one monomorphised loop and hand the result on in one call: the hot
    /// path costs one virtual call per link per batch, not per item.
    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        let mut room = true;
        for item in items.drain(..) {
            room = self.push(item);
        }
        room
    }
    /// Emits the terminal's backlog. Returns true when nothing is left waiting.
    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool>;
    /// The event-time watermark advanced to `wm`, after every item that arrived before it was
    /// pushed: a window may close, keyed state may expire. The terminal passes it on after
    /// what it emits because of it. Returns true when done; false to be called again with the
    /// same watermark (the outbox was full).
    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool>;
    /// Every input of the vertex went idle, after every item that arrived before was pushed.
    /// A link that holds results back sends them first (a window terminal its open frames);
    /// the terminal then tells the consumers ([`Outbox::offer_idle`]). Returns true when done;
    /// false to be called again (the outbox was full).
    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool>;
    /// The input ended. Returns true when the chain is finished.
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool>;
    /// Whether the chain may run on a cooperative thread (false if a sink blocks).
    fn is_cooperative(&self) -> bool;
    /// Before phase 1 of a snapshot, and without blocking: gets what [`save`](Self::save)
    /// needs, such as answers from a map's owners. Returns false to be called again (the
    /// snapshot waits); `save` follows in the same call once the whole chain answered true,
    /// with no item pushed in between. A link that passes items on asks the next link too;
    /// a link with nothing to fetch keeps the default.
    fn prepare_save(&mut self) -> ProcessorResult<bool> {
        Ok(true)
    }
    /// Phase 1 of a snapshot: saves this link's state into `state`, then has the rest of the
    /// chain save into `state.next()`. Called only once `flush` emptied the backlog and
    /// [`prepare_save`](Self::prepare_save) answered true. A sink terminal prepares what it
    /// wrote since the last snapshot.
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()>;
    /// Restores what [`save`](Self::save) saved, after `init` and before any item.
    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()>;
    /// Phase 2 of a snapshot: a sink terminal makes what it prepared visible. Idempotent.
    /// Returns true when done; false to be called again.
    fn commit(&mut self) -> ProcessorResult<bool>;
}

/// A `Box<dyn Link<T>>` whose `T` the planner does not know statically.
pub type ErasedLink = Box<dyn Any + Send>;

/// Erases a typed link for the planner.
pub fn erase<T: Item>(link: Box<dyn Link<T>>) -> ErasedLink {
    Box::new(link)
}

/// Recovers a typed link. The planner only joins links whose types it checked, so a mismatch
/// is a planner bug.
pub fn unerase<T: Item>(link: ErasedLink) -> Box<dyn Link<T>> {
    match link.downcast::<Box<dyn Link<T>>>() {
        Ok(l) => *l,
        Err(_) => unreachable!(
            "planner joined a link that does not take `{}`",
            type_name::<T>()
        ),
    }
}

/// Implements the delegating methods of a non-terminal link whose next link is `self.next`,
/// the snapshot hooks included: for a link without state of its own.
#[macro_export]
macro_rules! delegate_to_next {
    () => {
        $crate::delegate_flow_to_next!();

        fn save(
            &mut self,
            state: &mut $crate::links::state::LinkWriter<'_>,
        ) -> weir_core::ProcessorResult<()> {
            self.next.save(&mut state.next())
        }
        fn restore(
            &mut self,
            entries: &mut $crate::links::state::LinkEntries<'_>,
        ) -> weir_core::ProcessorResult<()> {
            self.next.restore(&mut entries.next())
        }
        fn commit(&mut self) -> weir_core::ProcessorResult<bool> {
            self.next.commit()
        }
    };
}
pub use crate::delegate_to_next;

/// Implements the delegating methods of a non-terminal link whose next link is `self.next`,
/// except the snapshot hooks: for a link with state, which saves it and then calls the next.
/// `delegate_flow_to_next!(except_complete)` leaves out `complete` too, for a link that
/// drops its state when its input ends.
#[macro_export]
macro_rules! delegate_flow_to_next {
    () => {
        $crate::delegate_flow_to_next!(except_complete);
        fn complete(&mut self, outbox: &mut weir_core::Outbox) -> weir_core::ProcessorResult<bool> {
            self.next.complete(outbox)
        }
    };
    (except_complete) => {
        fn flush(&mut self, outbox: &mut weir_core::Outbox) -> weir_core::ProcessorResult<bool> {
            self.next.flush(outbox)
        }
        fn is_cooperative(&self) -> bool {
            self.next.is_cooperative()
        }
        fn prepare_save(&mut self) -> weir_core::ProcessorResult<bool> {
            self.next.prepare_save()
        }
        fn watermark(
            &mut self,
            wm: weir_core::Watermark,
            outbox: &mut weir_core::Outbox,
        ) -> weir_core::ProcessorResult<bool> {
            self.next.watermark(wm, outbox)
        }
        fn idle(&mut self, outbox: &mut weir_core::Outbox) -> weir_core::ProcessorResult<bool> {
            self.next.idle(outbox)
        }
    };
}
pub use crate::delegate_flow_to_next;

/// The terminal that emits to every output ordinal of the vertex (one per downstream vertex).
pub struct Emit<T> {
    backlog: VecDeque<T>,
    limit: usize,
}

/// How many items an [`Emit`] holds before it asks the head to stop feeding.
pub const EMIT_BACKLOG: usize = 1024;

impl<T> Emit<T> {
    /// An emitter with an empty backlog.
    pub fn new() -> Self {
        Emit {
            backlog: VecDeque::new(),
            limit: EMIT_BACKLOG,
        }
    }
}

impl<T> Default for Emit<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> Link<T> for Emit<T> {
    fn init(&mut self, _ctx: &ProcessorContext) -> ProcessorResult<()> {
        Ok(())
    }

    #[inline]
    fn push(&mut self, item: T) -> bool {
        self.backlog.push_back(item);
        self.backlog.len() < self.limit
    }

    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        if self.backlog.is_empty() {
            // The batch becomes the backlog without moving its items, and the caller gets
            // the emptied backlog's buffer back.
            let spare = std::mem::replace(&mut self.backlog, VecDeque::from(std::mem::take(items)));
            *items = Vec::from(spare);
        } else {
            self.backlog.extend(items.drain(..));
        }
        self.backlog.len() < self.limit
    }

    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if outbox.ordinals() == 1 {
            outbox.port::<T>(0).offer_from(&mut self.backlog);
            if !self.backlog.is_empty() {
                return Ok(false);
            }
        } else {
            while let Some(item) = self.backlog.pop_front() {
                if let Err(item) = outbox.offer_to_all(item) {
                    self.backlog.push_front(item);
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.flush(outbox)
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(self.flush(outbox)? && outbox.offer_watermark(wm))
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(self.flush(outbox)? && outbox.offer_idle())
    }

    fn is_cooperative(&self) -> bool {
        true
    }

    fn save(&mut self, _state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(!self.backlog.is_empty(), "a backlog of items not emitted")
    }

    fn restore(&mut self, _entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        Ok(())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        Ok(true)
    }
}

/// A head that feeds its chain from the inbox: every input ordinal carries `T`.
pub struct InboxHead<T: Item> {
    chain: Box<dyn Link<T>>,
}

impl<T: Item> InboxHead<T> {
    /// A head that feeds its inbox to `chain`.
    pub fn new(chain: Box<dyn Link<T>>) -> Self {
        InboxHead { chain }
    }
}

impl<T: Item> Processor for InboxHead<T> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        if !self.chain.flush(outbox)? {
            return Ok(());
        }
        // The whole inbox (at most one inbox batch) goes down the chain at once; the backlog
        // may overshoot its limit by that much, and is flushed before more input is taken.
        // The inbox's queue becomes the batch without a copy: the tasklet only appends to it,
        // so it starts at the front of its buffer, and the emptied buffer goes back.
        let mut batch = Vec::from(std::mem::take(inbox.items::<T>()));
        self.chain.push_batch(&mut batch);
        *inbox.items::<T>() = VecDeque::from(batch);
        self.chain.flush(outbox)?;
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        complete_chain(&mut *self.chain, outbox)
    }

    chain_head_hooks!();
    stateless_head_snapshots!();
}

/// Implements the hooks every head processor with a `self.chain` delegates the same way:
/// whether it may run cooperatively, how a watermark and idleness go down the chain, and
/// flushing the chain's backlog when no input arrives.
macro_rules! chain_head_hooks {
    () => {
        fn is_cooperative(&self) -> bool {
            self.chain.is_cooperative()
        }

        fn try_process(
            &mut self,
            outbox: &mut weir_core::Outbox,
        ) -> weir_core::ProcessorResult<bool> {
            // A backlog left by a full outbox goes out even if no more input comes.
            self.chain.flush(outbox)
        }

        /// Only input moves a chain: a backlog keeps `try_process` unfinished, which the
        /// runtime polls.
        fn next_call(&self) -> weir_core::NextCall {
            weir_core::NextCall::OnWake
        }

        fn try_process_watermark(
            &mut self,
            wm: weir_core::Watermark,
            outbox: &mut weir_core::Outbox,
        ) -> weir_core::ProcessorResult<bool> {
            $crate::links::link::chain_watermark(&mut *self.chain, wm, outbox)
        }

        fn try_process_idle(
            &mut self,
            outbox: &mut weir_core::Outbox,
        ) -> weir_core::ProcessorResult<bool> {
            $crate::links::link::chain_idle(&mut *self.chain, outbox)
        }

        fn snapshot_commit_finish(&mut self, _success: bool) -> weir_core::ProcessorResult<bool> {
            self.chain.commit()
        }
    };
}
pub(crate) use chain_head_hooks;

/// Implements the snapshot hooks of a head with no state of its own: it saves and restores
/// its chain.
macro_rules! stateless_head_snapshots {
    () => {
        fn save_to_snapshot(
            &mut self,
            outbox: &mut weir_core::Outbox,
            writer: &mut weir_core::SnapshotWriter,
        ) -> weir_core::ProcessorResult<bool> {
            $crate::links::link::save_chain(&mut *self.chain, outbox, writer, |_| Ok(()))
        }

        $crate::links::link::chain_restore!();
    };
}
pub(crate) use stateless_head_snapshots;

/// Implements `restore_from_snapshot` for a head whose own state is never saved (it refuses
/// to save while it holds any): only its chain restores.
macro_rules! chain_restore {
    () => {
        fn restore_from_snapshot(
            &mut self,
            entries: Vec<weir_core::SnapshotEntry>,
        ) -> weir_core::ProcessorResult<()> {
            let mut entries = $crate::links::state::ChainEntries::new(entries);
            self.chain.restore(&mut entries.head().next())
        }
    };
}
pub(crate) use chain_restore;

/// How a head saves: its backlog goes out first (everything emitted before the barrier leaves
/// before it) and the chain gets ready ([`Link::prepare_save`]); then `own` saves the head's
/// state at scope 0, and the chain from scope 1. False while the backlog cannot go out or
/// the chain is not ready.
pub fn save_chain<T>(
    chain: &mut dyn Link<T>,
    outbox: &mut Outbox,
    writer: &mut weir_core::SnapshotWriter,
    own: impl FnOnce(&mut LinkWriter<'_>) -> ProcessorResult<()>,
) -> ProcessorResult<bool> {
    if !chain.flush(outbox)? || !chain.prepare_save()? {
        return Ok(false);
    }
    let mut head = LinkWriter::head(writer);
    own(&mut head)?;
    chain.save(&mut head.next())?;
    Ok(true)
}

/// Ends a head's chain: flushes the backlog, then completes the chain. True when finished.
pub fn complete_chain<T>(chain: &mut dyn Link<T>, outbox: &mut Outbox) -> ProcessorResult<bool> {
    Ok(chain.flush(outbox)? && chain.complete(outbox)?)
}

/// Pushes the rest of `items` down `chain` as room allows, then completes the chain: how a
/// head that emits only at the end of its input (a combine, a sort) finishes. Call it again
/// while it returns false; it picks up where it stopped.
pub fn drain_into_chain<T>(
    items: &mut impl Iterator<Item = T>,
    chain: &mut dyn Link<T>,
    outbox: &mut Outbox,
) -> ProcessorResult<bool> {
    if !chain.flush(outbox)? {
        return Ok(false);
    }
    let mut room = true;
    while room {
        match items.next() {
            Some(item) => room = chain.push(item),
            None => break,
        }
    }
    outbox.report_progress();
    if !chain.flush(outbox)? || !room {
        return Ok(false);
    }
    chain.complete(outbox)
}

/// How every head hands a watermark to its chain: after the backlog is out.
pub fn chain_watermark<T>(
    chain: &mut dyn Link<T>,
    wm: Watermark,
    outbox: &mut Outbox,
) -> ProcessorResult<bool> {
    Ok(chain.flush(outbox)? && chain.watermark(wm, outbox)?)
}

/// How every head tells its chain that its inputs went idle: after the backlog is out.
pub fn chain_idle<T>(chain: &mut dyn Link<T>, outbox: &mut Outbox) -> ProcessorResult<bool> {
    Ok(chain.flush(outbox)? && chain.idle(outbox)?)
}

/// Makes the [`InboxHead`] processor for an erased chain taking `T`; stored as a plain `fn`
/// in the planner's specs.
pub fn inbox_head<T: Item>(chain: ErasedLink) -> Box<dyn Processor> {
    Box::new(InboxHead::new(unerase::<T>(chain)))
}
