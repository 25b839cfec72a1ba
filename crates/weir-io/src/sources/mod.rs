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

pub mod chunked;
pub mod collection;
pub mod csv;
pub mod files;
pub mod generator;
mod identity;
pub mod json;
pub mod reactive;
pub mod stream;

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weir_core::{Item, ProcessorContext};

use weir_exec::links::factories::SourceHeadFactory;
use weir_exec::links::source::source_head;

pub use weir_exec::connector::{Emitter, SourceReader};

/// A finite source of `T`s. Pass it to `weir::Pipeline::read_from`.
pub struct BatchSource<T> {
    name: String,
    parallelism: Option<usize>,
    head: SourceHeadFactory,
    pooled_parsing: bool,
    size_hint: Option<u64>,
    _item: std::marker::PhantomData<fn() -> T>,
}

/// What the planner takes from a [`BatchSource`] (see [`BatchSource::into_parts`]).
pub struct SourceParts {
    /// The source's name, the name of its vertex.
    pub name: String,
    /// A fixed instance count, or `None` for one instance per worker.
    pub parallelism: Option<usize>,
    /// Builds an instance's head processor around the chain after it.
    pub head: SourceHeadFactory,
    /// Whether the source's items are parsed on a pool (see
    /// [`BatchSource::with_pooled_parsing`]).
    pub pooled_parsing: bool,
}

impl<T: Item> BatchSource<T> {
    /// Takes the source apart for the planner.
    pub fn into_parts(self) -> SourceParts {
        SourceParts {
            name: self.name,
            parallelism: self.parallelism,
            head: self.head,
            pooled_parsing: self.pooled_parsing,
        }
    }

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
            pooled_parsing: false,
            size_hint: None,
            _item: std::marker::PhantomData,
        }
    }

    /// Declares, when `pooled`, that the source's instance hands out items parsed on a pool
    /// of threads (as [`chunked`] readers do with more than one thread): the per-item work
    /// of reading already runs on every core. This mirrors
    /// [`StreamSource::with_pooled_parsing`](crate::sources::stream::StreamSource::with_pooled_parsing)
    /// for batch pipelines.
    pub fn with_pooled_parsing(mut self, pooled: bool) -> Self {
        self.pooled_parsing = pooled;
        self
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

/// A reader's position as bytes (postcard): what [`SourceReader::position`] returns.
pub(crate) fn encode_position<P: Serialize>(position: &P) -> Vec<u8> {
    postcard::to_stdvec(position).expect("a position always encodes")
}

/// Decodes what [`encode_position`] made; the error says what is wrong.
pub(crate) fn decode_position<P: DeserializeOwned>(bytes: &[u8]) -> Result<P, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("a damaged read position ({e})"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use weir_core::conveyor::Message;
    use weir_core::test_support::verify_processor;
    use weir_core::{Item, Watermark};

    use weir_exec::event_time::Timestamped;
    use weir_exec::links::link::{Emit, ErasedLink, erase};

    fn emit<T: Item>() -> ErasedLink {
        erase::<T>(Box::new(Emit::new()))
    }

    #[test]
    fn source_head_reads_to_the_end() {
        verify_processor(|ctx| {
            let reader = crate::sources::collection::items(0..5000u32);
            (reader.into_parts().head)(ctx, emit::<u32>())
        })
        .expect_output((0..5000u32).collect());
    }

    #[test]
    fn stream_source_head_stamps_drops_late_items_and_ends_with_max() {
        let source = crate::sources::stream::items(vec![10i64, 30, 15, 40]).into_parts();
        let policy = weir_exec::links::stream_source::EventTimePolicy {
            timestamp: Arc::new(|x: &i64| *x),
            allowed_lag: 10,
            idle_timeout: None,
        };
        verify_processor(move |ctx| {
            let head = std::sync::Arc::clone(&source.head);
            head(ctx, emit::<Timestamped<i64>>(), policy.clone())
        })
        .expect_messages(vec![
            Message::Item(Timestamped {
                timestamp: 10,
                item: 10i64,
            }),
            Message::Item(Timestamped {
                timestamp: 30,
                item: 30,
            }),
            Message::Item(Timestamped {
                timestamp: 40,
                item: 40,
            }),
            Message::Watermark(Watermark::MAX),
        ]);
    }
}
