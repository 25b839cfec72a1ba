//! Weir: typed batch and streaming pipelines on every core.

pub(crate) mod exec;
pub mod sinks;
pub mod sources;

pub use sinks::{Sink, SinkWriter};
pub use sources::{BatchSource, SourceReader};
pub use weir_core::{BoxError, Item, ProcessorContext};
