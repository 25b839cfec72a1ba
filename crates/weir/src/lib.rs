//! Weir: typed batch and streaming pipelines on every core.
//!
//! Word count, the canonical job:
//!
//! ```
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! let (sink, counts) = sinks::collection::list();
//! p.read_from(sources::collection::items(vec!["To be, or not to be".to_string()]))
//!     .flat_map(|line: String| {
//!         // Lowercase words: runs of letters and digits.
//!         line.split(|c: char| !c.is_alphanumeric())
//!             .filter(|w| !w.is_empty())
//!             .map(str::to_lowercase)
//!             .collect::<Vec<_>>()
//!     })
//!     .grouping_key(|word: &String| word.clone())
//!     .aggregate(aggregate::counting())
//!     .write_to(sink);
//! p.run().unwrap();
//! let mut counts = counts.take();
//! counts.sort();
//! assert_eq!(counts[0], ("be".to_string(), 2));
//! ```
//!
//! A [`Pipeline`] is a typed graph of stages. Running it plans a core DAG
//! ([`weir_core::Dag`]): consecutive stateless stages fuse into one vertex, a grouped
//! aggregation becomes an accumulate step and a combine vertex behind a partitioned edge, and
//! a hash join broadcasts its build side. `Pipeline::explain` shows the plan. The core runtime
//! then runs every vertex on every core, with backpressure on every edge.
//!
//! ```text
//!   Pipeline (typed stages)
//!        │  plan: fuse, split aggregations, choose edges
//!        ▼
//!   core DAG (vertices, edges)
//!        │  submit: one processor per vertex instance, one conveyor per instance pair
//!        ▼
//!   tasklets on cooperative worker threads
//! ```
//!
//! Stages that call outside services ([`BatchStage::map_async`],
//! [`BatchStage::map_async_batched`]) run their futures on one shared tokio runtime and hand
//! the results back to the workers without blocking them: see [`async_io`]. Async streams
//! go in and out through [`sources::reactive`] and [`sinks::reactive`], and
//! [`BatchStage::results`] reads a job's results as an iterator.

#![forbid(missing_docs)]

pub use weir_exec::{aggregate, async_io};
pub use weir_pipeline::{
    BatchStage, Error, JoinClause, KeyedBatchStage, Pipeline, Result, Source, join_on, map_stages,
    maps, pipeline, stream,
};

/// Sources: where a pipeline's items come from. The connectors, and the table of what each
/// reads and how it resumes, are in [`weir_io::sources`]; the map source reads a partitioned
/// map.
pub mod sources {
    pub use weir_io::sources::*;

    /// Reads a partitioned map: see [`map_stages::source`](crate::map_stages::source).
    pub use weir_pipeline::map_stages::source as map;
}

/// Sinks: where a pipeline's results go. The connectors, and the table of what each writes
/// and what it guarantees after a restore, are in [`weir_io::sinks`]; the map sink writes a
/// partitioned map.
pub mod sinks {
    pub use weir_io::sinks::*;

    /// Writes a partitioned map: see [`map_stages::sink`](crate::map_stages::sink).
    pub use weir_pipeline::map_stages::sink as map;
}

pub use sinks::{Sink, SinkWriter};
pub use sources::{BatchSource, SourceReader};
pub use weir_core as core;
pub use weir_core::snapshot;
pub use weir_core::{
    BoxError, Executor, ExecutorConfig, Item, Job, JobConfig, JobStatus, NextCall,
    ProcessorContext, WorkerPinning,
};

/// What most pipelines need: `use weir::prelude::*;`.
pub mod prelude {
    pub use crate::aggregate::{self, AggregateOperation};
    pub use crate::async_io::{AsyncOptions, OutputOrder, RetryStrategy, ServiceFactory};
    pub use crate::stream::{StreamSource, StreamStage, Timestamped, WindowDefinition};
    pub use crate::{BatchSource, BatchStage, Pipeline, Sink, join_on, sinks, sources};
    pub use weir_core::{Executor, JobConfig};
}
