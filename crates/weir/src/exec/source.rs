//! The head processor of a source vertex: runs a [`SourceReader`] into the fused chain.

use weir_core::{Outbox, Processor, ProcessorContext, ProcessorResult};

use crate::connector::{Emitter, SourceReader};
use crate::exec::link::{ErasedLink, Link, unerase};

pub(crate) struct SourceHead<R: SourceReader> {
    reader: R,
    chain: Box<dyn Link<R::Item>>,
    batch: Vec<R::Item>,
    exhausted: bool,
}

/// The most items a source hands to its chain at once.
const SOURCE_BATCH: usize = 1024;

pub(crate) fn source_head<R: SourceReader>(reader: R, chain: ErasedLink) -> Box<dyn Processor> {
    Box::new(SourceHead {
        reader,
        chain: unerase::<R::Item>(chain),
        batch: Vec::with_capacity(SOURCE_BATCH),
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
            self.exhausted = self
                .reader
                .read(&mut Emitter::new(&mut self.batch, SOURCE_BATCH))?;
            if !self.batch.is_empty() || self.exhausted {
                // The chain may have only accumulated: still real work.
                outbox.report_progress();
            }
            self.chain.push_batch(&mut self.batch);
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
