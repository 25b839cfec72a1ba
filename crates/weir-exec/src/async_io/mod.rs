//! Asynchronous I/O: call outside services from a pipeline without blocking a worker.
//!
//! ```
//! use std::time::Duration;
//! use weir::async_io::{AsyncOptions, RetryStrategy};
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! let (sink, results) = sinks::collection::list();
//! p.read_from(sources::collection::items(1..=50u32))
//!     .map_async(
//!         AsyncOptions::unordered()
//!             .capacity(10)
//!             .timeout(Duration::from_secs(10))
//!             .retry(RetryStrategy::exponential(Duration::from_millis(1), 2.0, Duration::from_millis(8), 4)),
//!         |id: u32| async move {
//!             // an HTTP call, a database query ...
//!             Ok::<_, std::io::Error>(vec![(id, id % 7)])
//!         },
//!     )
//!     .write_to(sink);
//! p.run().unwrap();
//! assert_eq!(results.len(), 50);
//! ```
//!
//! This is Flink's async I/O (FLIP-12) on Jet's cooperative runtime. The stages are
//! `weir::BatchStage::map_async` (one call per item),
//! `map_async_batched` (one call per batch of items)
//! and their `_using` forms that share a client built by a [`ServiceFactory`]. Each is
//! configured by [`AsyncOptions`]: [`OutputOrder`], capacity, timeout with an optional
//! fallback, and a [`RetryStrategy`] with the errors and results it retries.
//!
//! ```text
//!  cooperative worker                        shared runtime (runtime(): 2 threads)
//!  ┌──────────────────────────┐  spawn    ┌──────────────────────────────────────┐
//!  │ async map head processor │──────────▶│ task: call f, retry, send outcome    │
//!  │  slots (≤ capacity)      │           └──────────────────┬───────────────────┘
//!  │  segments between        │  try_recv   lock-free mpsc   │
//!  │  watermarks              │◀─────────────────────────────┘
//!  │  → fused chain → outbox  │
//!  └──────────────────────────┘
//! ```
//!
//! The processor never waits: every call of its hooks takes the completions that arrived
//! (`try_recv`), checks deadlines, emits what is ready and takes input while a slot is free.
//! A call that found nothing to do reports no progress, so the worker backs off; completions
//! arriving meanwhile are picked up on its next pass, at most the worker's longest pause
//! (1 ms) later.
//!
//! # Guarantees
//!
//! - **Capacity.** At most `capacity` items (or `parallelism` batches) per processor instance
//!   are in flight, completed results waiting for their turn included.
//! - **Order.** [`OutputOrder::Ordered`] emits in input order. [`OutputOrder::Unordered`]
//!   emits in completion order, but a watermark goes out only after every item that arrived
//!   before it, and before any item that arrived after it.
//! - **Timeout.** Each item (or batch) has `timeout` from its first call through its last
//!   retry. Then its call is cancelled and the fallback replaces it, or the job fails with
//!   [`AsyncError::Timeout`]. A result that arrives later is ignored, and so is a second
//!   completion of the same item: both are counted in the `async_late_results` counter.
//! - **Failure.** An error the retry strategy gives up on fails the job at once with
//!   [`AsyncError::Failed`], naming the item and the attempts; calls still in flight are
//!   cancelled when the processor closes.
//! - **Snapshots.** With [`AsyncOptions::snapshot_inputs`], a snapshot lists every item still
//!   held (in flight, or done but not yet emitted) and the watermarks between them; restoring
//!   calls them again.
//!
//! One shared tokio runtime ([`runtime`]) serves every async stage of the process; no stage
//! starts its own.

pub mod call;
mod error;
pub mod options;
mod runtime;
mod service;

pub use error::AsyncError;
pub use options::{AsyncOptions, DEFAULT_CAPACITY, DEFAULT_TIMEOUT, OutputOrder, RetryStrategy};
pub use runtime::{DEFAULT_RUNTIME_THREADS, runtime};
pub use service::ServiceFactory;
