//! The contract between connectors and the runtime: a [`SourceReader`] reads one source
//! instance's share into an [`Emitter`], and a [`SinkWriter`] writes one sink instance's share.
//!
//! Sources (`weir::sources`) and sinks (`weir::sinks`) implement these; the processors that
//! run them (`exec`) call them. Both sides depend on this module, never on each other.
//!
//! ```
//! use weir::sources::{Emitter, SourceReader};
//!
//! /// Counts down from `n`, a few numbers per call.
//! struct Countdown(u32);
//!
//! impl SourceReader for Countdown {
//!     type Item = u32;
//!     fn read(&mut self, out: &mut Emitter<'_, u32>) -> Result<bool, weir::core::BoxError> {
//!         while self.0 > 0 {
//!             self.0 -= 1;
//!             if !out.emit(self.0) {
//!                 break;
//!             }
//!         }
//!         Ok(self.0 == 0)
//!     }
//! }
//!
//! let mut batch = Vec::new();
//! let mut reader = Countdown(3);
//! assert!(reader.read(&mut Emitter::new(&mut batch, 10)).unwrap());
//! assert_eq!(batch, [2, 1, 0]);
//! ```

use std::io;
use std::path::PathBuf;

use weir_core::{BoxError, Item, NextCall, ProcessorContext};

/// Reads one source instance's share of the input.
///
/// The runtime calls [`open`](Self::open) once, then [`read`](Self::read) until it returns
/// true, then [`close`](Self::close).
pub trait SourceReader: Send + 'static {
    /// The items it produces.
    type Item: Item;

    /// Opens the input. `ctx` tells which instance this is
    /// ([`ProcessorContext::global_index`] of [`ProcessorContext::total_parallelism`]), so that
    /// a splittable source reads only its share. Register counters here.
    fn open(&mut self, _ctx: &ProcessorContext) -> Result<(), BoxError> {
        Ok(())
    }

    /// Reads a bounded amount (about a millisecond of work at most), handing each item to
    /// [`Emitter::emit`]. Stops early when `emit` returns false: the batch is full, call again
    /// later. Returns true when the input is exhausted.
    ///
    /// # Errors
    /// An I/O failure fails the job. A malformed record is not an error: count it and skip it.
    fn read(&mut self, out: &mut Emitter<'_, Self::Item>) -> Result<bool, BoxError>;

    /// How many partitions the instance reads, once opened: the items it passes to
    /// [`Emitter::emit_from`] name one of `0..partitions()`. A stream source keeps a watermark
    /// for each.
    fn partitions(&self) -> usize {
        1
    }

    /// Whether `read` may run on a cooperative worker. A reader that can block for long (a
    /// file on a slow disk, a socket) returns false and gets a thread of its own.
    fn is_cooperative(&self) -> bool {
        true
    }

    /// When a cooperative reader whose last `read` found nothing should be asked again (see
    /// [`weir_core::Processor::next_call`]): [`NextCall::At`] for a reader paced by the
    /// clock, [`NextCall::OnWake`] for one that wakes its instance through
    /// [`ProcessorContext::waker`] when it has items. The default, [`NextCall::Poll`], asks
    /// again within a millisecond. A reader on a thread of its own is not asked: its thread
    /// wakes the instance.
    fn next_read(&self) -> NextCall {
        NextCall::Poll
    }

    /// Where the reader is, as bytes that [`seek`](Self::seek) takes back: the place just
    /// after the last item handed to an [`Emitter`], so that a job restored from a snapshot
    /// reads on from there and sees every later item exactly once. `None`: the input cannot
    /// be replayed (a socket, an async stream), and a restored job loses what this reader
    /// handed out after the snapshot (at most once).
    ///
    /// Called between two `read` calls: when a snapshot is taken, and, for a reader that reads
    /// ahead on an I/O thread, after every `read` that emitted something. Keep it cheap: a
    /// few words (a file index, a byte offset, a line number), never the data.
    ///
    /// The default: `None`.
    fn position(&self) -> Option<Vec<u8>> {
        None
    }

    /// Moves the reader to `position`, a value [`position`](Self::position) returned in an
    /// earlier run of the same job (same input, same instance of the same parallelism), after
    /// [`open`](Self::open) and before the first `read`. Line numbers, counters of malformed
    /// records and the like go on as if the items before it had been read.
    ///
    /// Cost: one file seek for file readers, nothing for generators; the bytes before the
    /// position are not read again.
    ///
    /// # Errors
    /// The position does not fit this reader (another input, a damaged value), or the
    /// reader cannot replay (the default).
    fn seek(&mut self, _position: &[u8]) -> Result<(), BoxError> {
        Err("this source cannot replay its input".into())
    }

    /// Releases the input.
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
}

/// Where a [`SourceReader`] puts what it reads: a batch that the runtime hands to the fused
/// chain behind the source in one call.
///
/// ```
/// use weir::sources::Emitter;
///
/// let mut batch = Vec::new();
/// let mut out = Emitter::new(&mut batch, 2);
/// assert!(out.emit(1));
/// assert!(!out.emit(2)); // full: stop reading, you will be called again
/// assert_eq!(batch, [1, 2]);
/// ```
///
/// Cost: a `Vec` push per item, inlined into the reader's loop.
pub struct Emitter<'a, T> {
    items: &'a mut Vec<T>,
    limit: usize,
    /// Where the items of each partition start, when the caller tracks partitions: a run
    /// `(first index, partition)` per change of partition. Items before the first run belong
    /// to partition 0.
    runs: Option<&'a mut Vec<(usize, u32)>>,
}

impl<'a, T> Emitter<'a, T> {
    /// An emitter appending to `items` that reports full once it holds `limit` items.
    pub fn new(items: &'a mut Vec<T>, limit: usize) -> Self {
        Emitter {
            items,
            limit,
            runs: None,
        }
    }

    /// Like [`new`](Self::new), also recording which partition each item came from (see
    /// [`emit_from`](Self::emit_from)) into `runs`.
    pub fn with_partitions(
        items: &'a mut Vec<T>,
        limit: usize,
        runs: &'a mut Vec<(usize, u32)>,
    ) -> Self {
        Emitter {
            items,
            limit,
            runs: Some(runs),
        }
    }

    /// An emitter that never reports full (for tests and tools that drain a reader).
    pub fn unbounded(items: &'a mut Vec<T>) -> Self {
        Emitter {
            items,
            limit: usize::MAX,
            runs: None,
        }
    }

    /// Adds `item`; returns whether there is room for more. The item is taken either way.
    #[inline]
    pub fn emit(&mut self, item: T) -> bool {
        self.items.push(item);
        self.items.len() < self.limit
    }

    /// Adds `item`, read from `partition` of the input (a file, a broker partition): a stream
    /// source keeps a watermark per partition, so one that lags holds the others back, and
    /// one that falls idle stops doing so. Returns whether there is room for more.
    #[inline]
    pub fn emit_from(&mut self, partition: u32, item: T) -> bool {
        if let Some(runs) = self.runs.as_deref_mut() {
            let current = runs.last().map_or(0, |r| r.1);
            if current != partition {
                runs.push((self.items.len(), partition));
            }
        }
        self.emit(item)
    }

    /// Adds every item of `items`; returns whether there is room for more.
    #[inline]
    pub fn extend(&mut self, items: impl IntoIterator<Item = T>) -> bool {
        self.items.extend(items);
        self.items.len() < self.limit
    }

    /// Adds every item of `items`, leaving it empty; returns whether there is room for more.
    /// It may go past the limit: check [`room`](Self::room) first.
    ///
    /// Cost: into an empty batch, none per item: `items`' buffer becomes the batch and
    /// `items` gets the batch's empty one. Otherwise a move per item.
    #[inline]
    pub fn emit_all(&mut self, items: &mut Vec<T>) -> bool {
        if self.items.is_empty() {
            std::mem::swap(self.items, items);
        } else {
            self.items.append(items);
        }
        self.items.len() < self.limit
    }

    /// An emitter over the same batch that reports full after at most `more` further items
    /// (or sooner, at this one's limit): for readers that pace themselves.
    pub fn limited(&mut self, more: usize) -> Emitter<'_, T> {
        let limit = self.limit.min(self.items.len().saturating_add(more));
        Emitter {
            items: self.items,
            limit,
            runs: self.runs.as_deref_mut(),
        }
    }

    /// How many more items fit before the batch is full.
    #[inline]
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.items.len())
    }
}

/// Writes one sink instance's share of the results.
///
/// The runtime calls [`open`](Self::open) once, [`write`](Self::write) for every item, then
/// [`close`](Self::close) once the input is exhausted.
pub trait SinkWriter: Send + 'static {
    /// The items it takes.
    type Item: Item;

    /// Opens the destination. `ctx` tells which instance this is.
    fn open(&mut self, _ctx: &ProcessorContext) -> Result<(), BoxError> {
        Ok(())
    }

    /// Writes one item. Buffer: this is called per item.
    ///
    /// # Errors
    /// A failure fails the job.
    fn write(&mut self, item: Self::Item) -> Result<(), BoxError>;

    /// How many records `item` holds, for the `records_written` counter: 1, but for a writer
    /// whose items are batches of records.
    fn records_in(&self, _item: &Self::Item) -> u64 {
        1
    }

    /// Flushes and closes, at the end of the input. May block; the runtime calls it through
    /// [`poll_close`](Self::poll_close).
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Whether more items may be written now. A writer that hands its output to an I/O
    /// thread returns false while that thread is behind, instead of blocking; the runtime
    /// then stops feeding it and asks again later (wake the instance through
    /// [`ProcessorContext::waker`] when room frees up). Default: always.
    ///
    /// # Errors
    /// A failure reported by the writer's I/O (a full disk) fails the job.
    fn has_room(&mut self) -> Result<bool, BoxError> {
        Ok(true)
    }

    /// Finishes the output without blocking: false until it is done, then true. The runtime
    /// calls it at the end of the input until it returns true: again when the instance's
    /// waker ([`ProcessorContext::waker`](weir_core::ProcessorContext::waker)) is woken, and
    /// otherwise only after a pause (a worker's heartbeat), so a writer that finishes
    /// elsewhere wakes it when done. Default: [`close`](Self::close) once.
    ///
    /// # Errors
    /// As [`close`](Self::close).
    fn poll_close(&mut self) -> Result<bool, BoxError> {
        self.close().map(|()| true)
    }

    /// Whether `write` may run on a cooperative worker. A writer that does blocking I/O
    /// returns false and gets a thread of its own.
    fn is_cooperative(&self) -> bool {
        true
    }

    /// Phase 1 of a snapshot: what was written since the last snapshot becomes durable but
    /// stays invisible, and the returned bytes (the prepared file's name, say) are saved in
    /// the snapshot, so that [`commit`](Self::commit) or a restore can make it visible.
    ///
    /// The default, for a sink that is not transactional, saves nothing: its output is
    /// visible as soon as it is written, so after a restore it may be written again
    /// (at-least-once).
    fn prepare(&mut self) -> Result<Option<Vec<u8>>, BoxError> {
        Ok(None)
    }

    /// Phase 2: the snapshot is durable; makes every prepared output visible. Must be
    /// idempotent: a restore calls it again for output that may already be visible. Returns
    /// true when done; false to be called again.
    fn commit(&mut self) -> Result<bool, BoxError> {
        Ok(true)
    }

    /// After a restore, before anything is written: takes back what [`prepare`](Self::prepare)
    /// returned, once per prepared output this instance now owns (after a rescale, several
    /// old instances' may come to one). The next [`commit`](Self::commit) makes them visible;
    /// output prepared after the snapshot was taken is discarded.
    fn restore(&mut self, _prepared: Vec<u8>) -> Result<(), BoxError> {
        Ok(())
    }

    /// Phase 1 for a sink whose outputs outlive the instance that writes them (a part file
    /// per instance index, which a run at another parallelism may hand to another instance):
    /// each `(owner, prepared)` is saved under the index `owner` of the output's own
    /// instance, and a resumed run gives it to instance `owner % parallelism`
    /// ([`restore_output`](Self::restore_output)). So an output always goes back to the
    /// instance that writes it whenever that instance exists, whatever parallelisms came in
    /// between.
    ///
    /// The default saves what [`prepare`](Self::prepare) returns under `instance`, this
    /// instance's index.
    fn prepare_outputs(&mut self, instance: usize) -> Result<Vec<(usize, Vec<u8>)>, BoxError> {
        Ok(self
            .prepare()?
            .map(|prepared| vec![(instance, prepared)])
            .unwrap_or_default())
    }

    /// After a restore: takes back an output [`prepare_outputs`](Self::prepare_outputs)
    /// saved under `owner`. The default is [`restore`](Self::restore).
    fn restore_output(&mut self, owner: usize, prepared: Vec<u8>) -> Result<(), BoxError> {
        let _ = owner;
        self.restore(prepared)
    }
}

/// Why a sink failed. Each variant names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The output directory cannot be created.
    #[error("cannot create directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The temporary output file cannot be created.
    #[error("cannot create {}: {source}", path.display())]
    Create {
        /// The temporary file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Writing the temporary output file failed (a full disk, for example).
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The temporary file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The finished temporary file cannot be renamed to its final name.
    #[error("cannot rename {} to {}: {source}", from.display(), to.display())]
    Rename {
        /// The temporary file.
        from: PathBuf,
        /// The final name.
        to: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// An item cannot be encoded (a `Display` impl that fails, a JSON map with non-string
    /// keys, a nested CSV field...).
    #[error("cannot encode a record for {}: {source}", path.display())]
    Encode {
        /// The output file.
        path: PathBuf,
        /// What went wrong.
        source: BoxError,
    },
    /// Writing to standard output failed (a closed pipe, for example).
    #[error("cannot write to standard output: {source}")]
    Stdout {
        /// The underlying error.
        source: io::Error,
    },
}
