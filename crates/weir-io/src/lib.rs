//! Weir's sources and sinks for pipelines: files, CSV, JSON Lines, chunked parsing on a pool
//! of threads, collections, event-time streams, reactive streams and channels.
//!
//! Users depend on the `weir` facade, which re-exports these as `weir::sources` and
//! `weir::sinks`. A connector here implements the contract of
//! [`weir_exec::connector`] (a `SourceReader` per source instance, a `SinkWriter` per sink
//! instance) and hands the planner a descriptor ([`sources::BatchSource`],
//! [`sources::stream::StreamSource`], [`sinks::Sink`]) holding the factories of its head or
//! terminal. It depends on the execution links below it, never on the Pipeline API above it.
//!
//! ```
//! use weir_io::sources::{BatchSource, Emitter, SourceReader};
//!
//! /// Emits one number, then is done.
//! struct Once(Option<u32>);
//!
//! impl SourceReader for Once {
//!     type Item = u32;
//!     fn read(&mut self, out: &mut Emitter<'_, u32>) -> Result<bool, weir_core::BoxError> {
//!         if let Some(x) = self.0.take() {
//!             out.emit(x);
//!         }
//!         Ok(true)
//!     }
//! }
//!
//! // One instance, reading with a fresh `Once` when the job starts.
//! let source = BatchSource::new("once", Some(1), |_| Once(Some(7)));
//! let parts = source.into_parts();
//! assert_eq!((parts.name.as_str(), parts.parallelism), ("once", Some(1)));
//! ```

#![forbid(missing_docs)]

pub mod sinks;
pub mod sources;
