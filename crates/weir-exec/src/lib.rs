//! Weir's execution links: the processors a planned pipeline runs, and the vocabulary that
//! the connectors (sources and sinks) and the Pipeline API share with them.
//!
//! Users depend on the `weir` facade, which re-exports what they need from here. This crate
//! sits below both the connectors and the Pipeline API, so the compiler keeps the processors
//! from reaching either:
//!
//! ```text
//!   weir (facade) ─▶ weir-pipeline (API, planner) ─▶ weir-io (sources, sinks)
//!                                        │                  │
//!                                        ▼                  ▼
//!                                 weir-exec (links, vocabulary) ─▶ weir-core
//! ```
//!
//! - [`links`]: fused chains of links with their heads and terminals, the state they save in
//!   snapshots, and the type-erased [`links::factories`] the planner joins.
//! - The shared vocabulary: [`connector`] (the `SourceReader`/`Emitter`/`SinkWriter`
//!   contract), [`aggregate`] (aggregate operations), [`event_time`] (timestamped items and
//!   windows) and [`async_io`] (async options, retries and the calls of async stages).
//!
//! ```
//! use weir_exec::aggregate::{AggregateOperation, counting};
//!
//! let count = counting();
//! let mut acc = AggregateOperation::<&str>::create(&count);
//! for word in ["a", "b", "a"] {
//!     count.accumulate(&mut acc, &word);
//! }
//! assert_eq!(AggregateOperation::<&str>::finish(&count, acc), 3);
//! ```

pub mod aggregate;
pub mod async_io;
pub mod connector;
pub mod event_time;
pub mod links;
