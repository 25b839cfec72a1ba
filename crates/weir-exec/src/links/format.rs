//! Formatting a file sink's records where the items are, before they travel to the writer.
//!
//! A single-file sink runs one instance; when it cannot be fused with the stages before it
//! (they run on every worker), the planner fuses a [`FormatLink`] into their vertex instead:
//! each instance formats its items into blocks of bytes ([`FormattedRecords`]), and the
//! sink's one instance only appends the blocks to its file. Formatting, the costly part
//! (numbers to text, JSON, CSV quoting), then runs on every worker, and one item crosses to
//! the writer per block instead of one per record.
//!
//! Blocks keep the order of the records of each instance. A block is handed on before any
//! watermark, idleness, end of input or snapshot barrier passes the link (every head flushes
//! its chain first), so the records of a snapshot epoch reach the writer before the barrier
//! does, and the transactional file sinks stay exactly-once.
//!
//! Cost per record: the format function into a buffer; per block (at most one per batch of
//! items the head pushes, and at most `BLOCK_BYTES` or so): one allocation, sized as the
//! last block, and one item sent.

use std::path::PathBuf;
use std::sync::Arc;

use weir_core::{BoxError, Outbox, ProcessorContext, ProcessorResult, Watermark};

use crate::connector::SinkError;
use crate::links::link::Link;
use crate::links::state::{LinkEntries, LinkWriter, refuse_save_if};

/// Bytes at which a block is handed on even in the middle of a batch.
const BLOCK_BYTES: usize = 64 * 1024;

/// Records formatted into bytes by a [`FormatLink`], for a file sink to append.
#[derive(Debug, Clone, Default)]
pub struct FormattedRecords {
    /// The records, each with its terminator.
    pub bytes: Vec<u8>,
    /// How many records `bytes` holds.
    pub records: u64,
}

/// Formats every item into blocks for the next link. See the [module docs](self).
pub struct FormatLink<T, F> {
    format: Arc<F>,
    /// The file named by an encoding error (the one the sink writes).
    path: PathBuf,
    block: FormattedRecords,
    /// The first encoding error, raised at the next flush: `push` cannot return it.
    failed: Option<BoxError>,
    next: Box<dyn Link<FormattedRecords>>,
    _item: std::marker::PhantomData<fn(T)>,
}

impl<T, F> FormatLink<T, F>
where
    F: Fn(&T, &mut Vec<u8>) -> Result<(), BoxError>,
{
    /// A link formatting with `format` into blocks for `next`; an encoding error names `path`.
    pub fn new(format: Arc<F>, path: PathBuf, next: Box<dyn Link<FormattedRecords>>) -> Self {
        FormatLink {
            format,
            path,
            block: FormattedRecords::default(),
            failed: None,
            next,
            _item: std::marker::PhantomData,
        }
    }

    /// Appends `item` to the block; false once an item failed to encode.
    #[inline]
    fn add(&mut self, item: &T) -> bool {
        if self.failed.is_some() {
            return false;
        }
        match (self.format)(item, &mut self.block.bytes) {
            Ok(()) => {
                self.block.records += 1;
                true
            }
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    /// Hands the block on, if it holds anything; the next one starts with room for as much.
    fn hand_on(&mut self) -> bool {
        if self.block.records == 0 {
            return true;
        }
        let room = self.block.bytes.len();
        let block = std::mem::replace(
            &mut self.block,
            FormattedRecords {
                bytes: Vec::with_capacity(room),
                records: 0,
            },
        );
        self.next.push(block)
    }

    /// The encoding error, if an item failed, naming the file.
    fn check(&mut self) -> ProcessorResult<()> {
        match self.failed.take() {
            Some(source) => Err(Box::new(SinkError::Encode {
                path: self.path.clone(),
                source,
            })),
            None => Ok(()),
        }
    }
}

impl<T, F> Link<T> for FormatLink<T, F>
where
    T: Send,
    F: Fn(&T, &mut Vec<u8>) -> Result<(), BoxError> + Send + Sync,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }

    #[inline]
    fn push(&mut self, item: T) -> bool {
        if !self.add(&item) {
            return false;
        }
        self.block.bytes.len() < BLOCK_BYTES || self.hand_on()
    }

    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        let mut room = true;
        for item in items.drain(..) {
            if !self.add(&item) {
                break;
            }
            if self.block.bytes.len() >= BLOCK_BYTES {
                room &= self.hand_on();
            }
        }
        // After a failure the rest of the batch is dropped: the job fails at the next flush.
        self.failed.is_none() && self.hand_on() && room
    }

    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.check()?;
        self.hand_on();
        self.next.flush(outbox)
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.check()?;
        self.hand_on();
        self.next.watermark(wm, outbox)
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.check()?;
        self.hand_on();
        self.next.idle(outbox)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.check()?;
        self.hand_on();
        self.next.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.next.is_cooperative()
    }

    fn prepare_save(&mut self) -> weir_core::ProcessorResult<bool> {
        self.next.prepare_save()
    }
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(self.block.records != 0, "records not handed on")?;
        self.next.save(&mut state.next())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        self.next.restore(&mut entries.next())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        self.next.commit()
    }
}
