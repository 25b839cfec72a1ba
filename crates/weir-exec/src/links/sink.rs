//! The terminal link of a sink: hands each item to a [`SinkWriter`] and counts them in the
//! `records_written` counter of the instance's metrics.

use weir_core::{BoxError, Counter, Outbox, ProcessorContext, ProcessorResult};

use crate::connector::SinkWriter;
use crate::links::link::{ErasedLink, Link, erase};
use crate::links::state::{LinkEntries, LinkWriter};

/// The terminal link of a sink: it hands each batch to the instance's [`SinkWriter`] and
/// reports no room while the writer has none.
pub struct SinkTerminal<W: SinkWriter> {
    writer: W,
    /// A write error, raised at the next flush: `push` cannot return it.
    failed: Option<BoxError>,
    closed: bool,
    written: u64,
    counter: Counter,
    /// This instance's index and the sink's parallelism: prepared output is saved under its
    /// owner's index (this one's, but for outputs taken over at a restore), and restored to
    /// `owner % parallelism` of the new run.
    instance: (usize, usize),
}

impl<W: SinkWriter> SinkTerminal<W> {
    /// Whether the writer takes more; a failure is kept for the next flush.
    #[inline]
    fn has_room(&mut self) -> bool {
        match self.writer.has_room() {
            Ok(room) => room,
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }
}

/// A sink terminal around `writer`, erased for the planner.
pub fn sink_terminal<W: SinkWriter>(writer: W) -> ErasedLink {
    erase::<W::Item>(Box::new(SinkTerminal {
        writer,
        failed: None,
        closed: false,
        written: 0,
        counter: Counter::default(),
        instance: (0, 1),
    }))
}

impl<W: SinkWriter> Link<W::Item> for SinkTerminal<W> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.counter = ctx.metrics().counter("records_written");
        self.instance = (ctx.global_index(), ctx.total_parallelism().max(1));
        self.writer.open(ctx)
    }

    #[inline]
    fn push(&mut self, item: W::Item) -> bool {
        if self.failed.is_some() {
            return false;
        }
        let records = self.writer.records_in(&item);
        match self.writer.write(item) {
            Ok(()) => {
                self.written += records;
                self.has_room()
            }
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    fn push_batch(&mut self, items: &mut Vec<W::Item>) -> bool {
        if self.failed.is_some() {
            items.clear();
            return false;
        }
        for item in items.drain(..) {
            let records = self.writer.records_in(&item);
            if let Err(e) = self.writer.write(item) {
                // The job fails at the next flush; what is left of the batch goes with it.
                self.failed = Some(e);
                break;
            }
            self.written += records;
        }
        items.clear();
        self.failed.is_none() && self.has_room()
    }

    fn flush(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Published once per call, not per item.
        self.counter.add(std::mem::take(&mut self.written));
        match self.failed.take() {
            Some(e) => Err(e),
            None => self.writer.has_room(),
        }
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.flush(outbox)? {
            return Ok(false);
        }
        if !self.closed {
            // Finishing (a final write, a rename) goes on on the writer's I/O thread, which
            // wakes this tasklet when it is done: meanwhile the worker parks. Reported as
            // progress, the wait spun the worker through hundreds of thousands of calls
            // while the file system replaced a large file.
            self.closed = self.writer.poll_close()?;
        }
        Ok(self.closed)
    }

    fn is_cooperative(&self) -> bool {
        self.writer.is_cooperative()
    }

    fn watermark(
        &mut self,
        _wm: weir_core::Watermark,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        Ok(true)
    }

    fn idle(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        // A sink has no consumers to tell.
        Ok(true)
    }

    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        for (owner, prepared) in self.writer.prepare_outputs(self.instance.0)? {
            state.put(&(owner as u64).to_le_bytes(), prepared);
        }
        Ok(())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        let (me, parallelism) = self.instance;
        for e in entries.take() {
            let Ok(owner) = <[u8; 8]>::try_from(e.key.as_slice()) else {
                continue;
            };
            let owner = u64::from_le_bytes(owner) as usize;
            if owner % parallelism == me {
                self.writer.restore_output(owner, e.value)?;
            }
        }
        Ok(())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        self.writer.commit()
    }
}
