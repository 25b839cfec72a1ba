//! The terminal link of a sink: hands each item to a [`SinkWriter`].

use weir_core::{BoxError, Outbox, ProcessorContext, ProcessorResult};

use crate::exec::link::{ErasedLink, Link, erase};
use crate::sinks::SinkWriter;

pub(crate) struct SinkTerminal<W: SinkWriter> {
    writer: W,
    /// A write error, raised at the next flush: `push` cannot return it.
    failed: Option<BoxError>,
    closed: bool,
}

pub(crate) fn sink_terminal<W: SinkWriter>(writer: W) -> ErasedLink {
    erase::<W::Item>(Box::new(SinkTerminal { writer, failed: None, closed: false }))
}

impl<W: SinkWriter> Link<W::Item> for SinkTerminal<W> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.writer.open(ctx)
    }

    #[inline]
    fn push(&mut self, item: W::Item) -> bool {
        if self.failed.is_some() {
            return false;
        }
        match self.writer.write(item) {
            Ok(()) => true,
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    fn flush(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.flush(outbox)?;
        if !self.closed {
            self.closed = true;
            self.writer.close()?;
        }
        Ok(true)
    }

    fn is_cooperative(&self) -> bool {
        self.writer.is_cooperative()
    }
}
