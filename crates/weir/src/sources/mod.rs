//! Batch sources: where a pipeline's items come from.
//!
//! A [`BatchSource`] describes a source; each of its processor instances runs its own
//! [`SourceReader`], which reads its share of the input in bounded steps and feeds the items to
//! the fused chain behind it. Backpressure reaches the reader as [`Emitter::emit`] returning
//! false.
//!
//! | source | module |
//! |---|---|
//! | an in-memory collection | [`collection`] |
//! | text files as lines (a file, a directory or a glob) | [`files`] |
//! | generated numbers | [`generator`] |
//! | streams: a timed generator, a JSON Lines replay, a TCP socket | [`stream`] |
//! | JSON Lines | [`json`] |
//! | CSV | [`csv`] |
//! | an async `Stream`, pulled on demand | [`reactive`] |

pub mod collection;
pub mod csv;
pub mod files;
pub mod generator;
pub mod json;
pub mod reactive;
pub mod stream;

use std::sync::Arc;

use weir_core::{BoxError, Item, Processor, ProcessorContext};

use crate::exec::link::ErasedLink;
use crate::exec::source::source_head;

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
    pub(crate) fn with_partitions(
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

/// Builds the head processor of a source vertex around the chain that follows it.
pub(crate) type SourceHeadFactory =
    Arc<dyn Fn(&ProcessorContext, ErasedLink) -> Box<dyn Processor> + Send + Sync>;

/// A finite source of `T`s. Pass it to [`Pipeline::read_from`](crate::Pipeline::read_from).
pub struct BatchSource<T> {
    pub(crate) name: String,
    pub(crate) parallelism: Option<usize>,
    pub(crate) head: SourceHeadFactory,
    size_hint: Option<u64>,
    _item: std::marker::PhantomData<fn() -> T>,
}

impl<T: Item> BatchSource<T> {
    /// A source named `name` whose instances each read with the reader `factory` makes.
    ///
    /// `parallelism` fixes the instance count (`Some(1)` for an input that cannot be split);
    /// `None` runs one instance per worker, each reading its share.
    pub fn new<R, F>(name: impl Into<String>, parallelism: Option<usize>, factory: F) -> Self
    where
        R: SourceReader<Item = T>,
        F: Fn(&ProcessorContext) -> R + Send + Sync + 'static,
    {
        let head: SourceHeadFactory = Arc::new(move |ctx, chain| source_head(factory(ctx), chain));
        BatchSource {
            name: name.into(),
            parallelism,
            head,
            size_hint: None,
            _item: std::marker::PhantomData,
        }
    }

    /// Records how many bytes the source will read, for progress reporting.
    pub fn with_size_hint(mut self, bytes: u64) -> Self {
        self.size_hint = Some(bytes);
        self
    }

    /// How many bytes the source will read, when it knows.
    pub fn size_hint(&self) -> Option<u64> {
        self.size_hint
    }

    /// The source's name, as it appears in the plan.
    pub fn name(&self) -> &str {
        &self.name
    }
}
