//! Sinks: where a pipeline's results go.
//!
//! A [`Sink`] describes a sink; each of its processor instances runs its own [`SinkWriter`].
//! The planner fuses a sink into the vertex before it when it can, so writing costs no extra
//! queue hop.
//!
//! | sink | module |
//! |---|---|
//! | an in-memory collection | [`collection`] |
//! | standard output or the log | [`stdout`] |
//! | text files: one part file per instance, or a single file | [`files`] |
//! | JSON Lines | [`json`] |
//! | CSV | [`csv`] |
//! | an async `Stream` (bounded channel), or a blocking iterator | [`stream`] |

pub mod collection;
pub mod csv;
pub mod files;
pub mod json;
pub mod stdout;
pub mod stream;

use std::sync::Arc;

use weir_core::{Item, ProcessorContext};

use crate::exec::sink::sink_terminal;
use crate::graph::SinkTerminalFactory;

pub use crate::connector::SinkWriter;

/// A destination for `T`s. Pass it to [`BatchStage::write_to`](crate::BatchStage::write_to).
pub struct Sink<T> {
    pub(crate) name: String,
    pub(crate) parallelism: Option<usize>,
    pub(crate) terminal: SinkTerminalFactory,
    _item: std::marker::PhantomData<fn(T)>,
}

impl<T: Item> Sink<T> {
    /// A sink named `name` whose instances each write with the writer `factory` makes.
    ///
    /// `parallelism` fixes the instance count (`Some(1)` for a single output file); `None`
    /// runs one instance per worker.
    pub fn new<W, F>(name: impl Into<String>, parallelism: Option<usize>, factory: F) -> Self
    where
        W: SinkWriter<Item = T>,
        F: Fn(&ProcessorContext) -> W + Send + Sync + 'static,
    {
        let terminal: SinkTerminalFactory = Arc::new(move |ctx| sink_terminal(factory(ctx)));
        Sink {
            name: name.into(),
            parallelism,
            terminal,
            _item: std::marker::PhantomData,
        }
    }

    /// A sink whose instances end their chain in the terminal `terminal` makes.
    pub(crate) fn from_terminal(
        name: impl Into<String>,
        parallelism: Option<usize>,
        terminal: SinkTerminalFactory,
    ) -> Self {
        Sink {
            name: name.into(),
            parallelism,
            terminal,
            _item: std::marker::PhantomData,
        }
    }

    /// The sink's name, as it appears in the plan.
    pub fn name(&self) -> &str {
        &self.name
    }
}
