//! The head processor of a source vertex: runs a [`SourceReader`] into the fused chain.

use weir_core::{BoxError, Outbox, Processor, ProcessorContext, ProcessorResult};

use crate::connector::SourceReader;
use crate::exec::link::{ErasedLink, Link, unerase};
use crate::exec::read_ahead::{BATCH, ReadOutcome, SourceFeed};

pub(crate) struct SourceHead<R: SourceReader> {
    feed: SourceFeed<R>,
    chain: Box<dyn Link<R::Item>>,
    batch: Vec<R::Item>,
    exhausted: bool,
    /// A read failure, raised once the items read before it are down the chain.
    failed: Option<BoxError>,
}

pub(crate) fn source_head<R: SourceReader>(reader: R, chain: ErasedLink) -> Box<dyn Processor> {
    Box::new(SourceHead {
        feed: SourceFeed::new(reader),
        chain: unerase::<R::Item>(chain),
        batch: Vec::with_capacity(BATCH),
        exhausted: false,
        failed: None,
    })
}

impl<R: SourceReader> Processor for SourceHead<R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.feed.open(ctx)?;
        self.chain.init(ctx)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.chain.flush(outbox)? {
            return Ok(false);
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if !self.exhausted {
            match self.feed.read(&mut self.batch, None) {
                ReadOutcome::More => {}
                ReadOutcome::Exhausted => self.exhausted = true,
                ReadOutcome::Failed(e) => self.failed = Some(e),
            }
            if !self.batch.is_empty() || self.exhausted || self.failed.is_some() {
                // The chain may have only accumulated: still real work.
                outbox.report_progress();
            }
            self.chain.push_batch(&mut self.batch);
            if !self.chain.flush(outbox)? {
                return Ok(false);
            }
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            if !self.exhausted {
                return Ok(false);
            }
        }
        self.chain.complete(outbox)
    }

    /// Always the chain's say: a reader that may block reads ahead on an I/O thread.
    fn is_cooperative(&self) -> bool {
        self.chain.is_cooperative()
    }

    fn close(&mut self) -> ProcessorResult<()> {
        self.feed.close()
    }
}
