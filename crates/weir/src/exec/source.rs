//! The head processor of a source vertex: runs a [`SourceReader`] into the fused chain.

use weir_core::{Outbox, Processor, ProcessorContext, ProcessorResult};

use crate::exec::link::{ErasedLink, Link, unerase};
use crate::sources::SourceReader;

pub(crate) struct SourceHead<R: SourceReader> {
    reader: R,
    chain: Box<dyn Link<R::Item>>,
    exhausted: bool,
}

pub(crate) fn source_head<R: SourceReader>(reader: R, chain: ErasedLink) -> Box<dyn Processor> {
    Box::new(SourceHead {
        reader,
        chain: unerase::<R::Item>(chain),
        exhausted: false,
    })
}

impl<R: SourceReader> Processor for SourceHead<R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.reader.open(ctx)?;
        self.chain.init(ctx)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.chain.flush(outbox)? {
            return Ok(false);
        }
        if !self.exhausted {
            let chain = &mut self.chain;
            let mut fed = false;
            self.exhausted = self.reader.read(&mut |item| {
                fed = true;
                chain.push(item)
            })?;
            if fed || self.exhausted {
                // The chain may have only accumulated: still real work.
                outbox.report_progress();
            }
            if !self.chain.flush(outbox)? || !self.exhausted {
                return Ok(false);
            }
        }
        self.chain.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.reader.is_cooperative() && self.chain.is_cooperative()
    }

    fn close(&mut self) -> ProcessorResult<()> {
        self.reader.close()
    }
}
