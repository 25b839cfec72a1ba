//! Weir's Pipeline API and its planner: the typed [`Pipeline`], [`BatchStage`] and
//! [`stream::StreamStage`], the stages over partitioned maps, and the planner that fuses
//! them into a core DAG of the processors in `weir-exec`.
//!
//! Users depend on the `weir` facade, which re-exports this crate with the sources and sinks
//! of `weir-io`. The layers, each a crate, so the compiler keeps them apart:
//!
//! ```text
//!   weir (facade) ─▶ weir-pipeline (API, planner) ─▶ weir-io (sources, sinks)
//!                                        │                  │
//!                                        ▼                  ▼
//!                                 weir-exec (links, vocabulary) ─▶ weir-core
//! ```
//!
//! ```
//! use weir_pipeline::Pipeline;
//! use weir_io::{sinks, sources};
//!
//! let p = Pipeline::new();
//! let (sink, doubled) = sinks::collection::list();
//! p.read_from(sources::collection::items(1..=3u32))
//!     .map(|x| x * 2)
//!     .write_to(sink);
//! p.run().unwrap();
//! let mut doubled = doubled.take();
//! doubled.sort();
//! assert_eq!(doubled, [2, 4, 6]);
//! ```

#![forbid(missing_docs)]

mod error;
pub(crate) mod graph;
pub mod map_stages;
pub mod maps;
pub mod pipeline;
pub(crate) mod plan;
pub mod stream;

pub use error::{Error, Result};
pub use pipeline::{BatchStage, JoinClause, KeyedBatchStage, Pipeline, Source, join_on};
