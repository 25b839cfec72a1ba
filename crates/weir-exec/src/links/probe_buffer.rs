//! The probe buffer: what lets a hash join read from its own build side's upstream.
//!
//! A hash join drains its build sides (priority -1) completely before it reads its probe
//! side. When both sides come from one upstream vertex (`s.hash_join(&s.grouping_key(..)
//! .aggregate(..), ..)`), that vertex offers each item to both outputs at once; the probe
//! queue fills while the join is still building, the upstream stops, and the build side
//! starves: a deadlock. The planner puts a [`ProbeBuffer`] vertex on the probe edge of such a
//! join. It always drains its input, holding the items (and the watermarks between them, in
//! place) until the join takes them, so the shared upstream never waits for the join.
//!
//! Cost: one move into a `VecDeque` and one out per item. Memory: the probe items that
//! arrive before the build side completes, which for a build side that aggregates the whole
//! input is the whole probe side. The `probe_buffer_peak` counter reports the most held.

use std::collections::VecDeque;

use weir_core::{
    Counter, Inbox, Item, Outbox, Processor, ProcessorContext, ProcessorResult, Watermark,
};

use crate::links::link::{ErasedLink, Link, chain_idle, chain_watermark, save_chain, unerase};

/// A marker held in place among the buffered items.
#[derive(Debug, Clone, Copy)]
enum Marker {
    Watermark(Watermark),
    Idle,
}

/// Holds its input until the chain behind it takes it. See the [module docs](self).
pub struct ProbeBuffer<T> {
    held: VecDeque<T>,
    /// Markers, each with the number of items that went in before it.
    markers: VecDeque<(u64, Marker)>,
    /// Items taken in and handed on so far.
    taken: u64,
    handed: u64,
    peak: usize,
    peak_counter: Counter,
    chain: Box<dyn Link<T>>,
}

/// Makes a [`ProbeBuffer`] around an erased chain taking `T`; stored as a plain `fn` in the
/// planner's stage types.
pub fn probe_buffer<T: Item>(chain: ErasedLink) -> Box<dyn Processor> {
    Box::new(ProbeBuffer {
        held: VecDeque::new(),
        markers: VecDeque::new(),
        taken: 0,
        handed: 0,
        peak: 0,
        peak_counter: Counter::default(),
        chain: unerase::<T>(chain),
    })
}

impl<T: Item> ProbeBuffer<T> {
    /// Hands on what the chain takes, markers in place. True when nothing is held.
    fn pump(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        loop {
            if !self.chain.flush(outbox)? {
                return Ok(false);
            }
            if let Some(&(at, marker)) = self.markers.front()
                && at == self.handed
            {
                let done = match marker {
                    Marker::Watermark(wm) => chain_watermark(&mut *self.chain, wm, outbox)?,
                    Marker::Idle => chain_idle(&mut *self.chain, outbox)?,
                };
                if !done {
                    return Ok(false);
                }
                self.markers.pop_front();
                continue;
            }
            let until = self.markers.front().map_or(u64::MAX, |m| m.0);
            let mut room = true;
            while room && self.handed < until {
                let Some(item) = self.held.pop_front() else {
                    break;
                };
                room = self.chain.push(item);
                self.handed += 1;
            }
            outbox.report_progress();
            if self.held.is_empty() && self.markers.is_empty() {
                return self.chain.flush(outbox);
            }
            if room && self.handed < until {
                // Nothing more to hand on before the next marker arrives.
                return Ok(self.held.is_empty() && self.markers.is_empty());
            }
        }
    }

    fn hold_marker(&mut self, marker: Marker) {
        self.markers.push_back((self.taken, marker));
    }
}

impl<T: Item> Processor for ProbeBuffer<T> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.peak_counter = ctx.metrics().counter("probe_buffer_peak");
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<T>();
        self.taken += items.len() as u64;
        self.held.extend(items.drain(..));
        if self.held.len() > self.peak {
            self.peak_counter.add((self.held.len() - self.peak) as u64);
            self.peak = self.held.len();
        }
        self.pump(outbox)?;
        Ok(())
    }

    fn try_process(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.pump(outbox)
    }

    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        // Taken at once, so input keeps flowing; handed on after the items before it.
        self.hold_marker(Marker::Watermark(wm));
        self.pump(outbox)?;
        Ok(true)
    }

    fn try_process_idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.hold_marker(Marker::Idle);
        self.pump(outbox)?;
        Ok(true)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(self.pump(outbox)? && self.chain.complete(outbox)?)
    }

    /// Everything held came before the barrier: it goes on first, then the chain saves.
    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut weir_core::SnapshotWriter,
    ) -> ProcessorResult<bool> {
        if !self.pump(outbox)? {
            return Ok(false);
        }
        save_chain(&mut *self.chain, outbox, writer, |_| Ok(()))
    }

    fn restore_from_snapshot(
        &mut self,
        entries: Vec<weir_core::SnapshotEntry>,
    ) -> ProcessorResult<()> {
        let mut entries = crate::links::state::ChainEntries::new(entries);
        self.chain.restore(&mut entries.head().next())
    }

    fn snapshot_commit_finish(&mut self, _success: bool) -> ProcessorResult<bool> {
        self.chain.commit()
    }

    fn is_cooperative(&self) -> bool {
        self.chain.is_cooperative()
    }
}
