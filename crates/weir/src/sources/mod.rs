//! Batch sources: where a pipeline's items come from.
//!
//! A [`BatchSource`] describes a source; each of its processor instances runs its own
//! [`SourceReader`], which reads its share of the input in bounded steps and feeds the items to
//! the fused chain behind it. Backpressure reaches the reader as `emit` returning false.
//!
//! | source | module |
//! |---|---|
//! | an in-memory collection | [`collection`] |
//! | text files as lines (a file, a directory or a glob) | [`files`] |
//! | JSON Lines | [`json`] |
//! | CSV | [`csv`] |

pub mod collection;
pub mod csv;
pub mod files;
pub mod json;

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

    /// Reads a bounded amount (about a millisecond of work at most), passing each item to
    /// `emit`. Stops early when `emit` returns false: downstream is full, call again later.
    /// Returns true when the input is exhausted.
    ///
    /// # Errors
    /// An I/O failure fails the job. A malformed record is not an error: count it and skip it.
    fn read(&mut self, emit: &mut dyn FnMut(Self::Item) -> bool) -> Result<bool, BoxError>;

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
