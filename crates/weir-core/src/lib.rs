//! Weir's core runtime: the Jet execution model in Rust.
//!
//! A job is a [`Dag`] of [`Vertex`]es joined by [`Edge`]s. Each vertex runs as `parallelism`
//! [`Processor`] instances; each instance is wrapped in a tasklet that a cooperative worker
//! thread calls in a loop. Edges are bounded single-producer single-consumer [`conveyor`]s,
//! one per (producer instance, consumer instance) pair, so a full queue is felt by the
//! producer's [`Outbox`] as a refused offer: that is backpressure.
//!
//! ```
//! use weir_core::{Dag, Edge, Executor, JobConfig, Vertex};
//! use weir_core::builtin_processors::{IterSource, MapP, CollectSink};
//!
//! let mut dag = Dag::new();
//! let source = dag.vertex(Vertex::new("source", |_| IterSource::new(1..=1000u64)).emits::<u64>().local_parallelism(1));
//! let square = dag.vertex(Vertex::new("square", |_| MapP::new(|x: u64| x * x)).accepts::<u64>().emits::<u64>());
//! let (supplier, collected) = CollectSink::<u64>::supplier();
//! let sink = dag.vertex(Vertex::new("sink", supplier).accepts::<u64>());
//! dag.edge(Edge::between(source, square));
//! dag.edge(Edge::between(square, sink));
//!
//! let job = Executor::shared().submit(dag, JobConfig::default()).unwrap();
//! job.join().unwrap();
//! let sum: u64 = collected.lock().unwrap().iter().sum();
//! assert_eq!(sum, (1..=1000u64).map(|x| x * x).sum::<u64>());
//! ```
//!
//! # Where things live
//!
//! | concept | module |
//! |---|---|
//! | the processor contract and its context | [`processor`] |
//! | inbox, outbox, traverser | [`inbox`], [`outbox`], [`traverser`] |
//! | bounded SPSC queues with in-band markers | [`conveyor`] |
//! | vertices, edges, routing, validation | [`dag`] |
//! | tasklets and their progress | [`tasklet`] |
//! | worker threads and job submission | [`executor`], [`job`] |
//! | watermarks, snapshots, metrics | [`watermark`], [`snapshot`], [`metrics`] |
//! | stall detection | [`stall`] |
//! | the processor test harness | [`test_support`] |

#![forbid(missing_docs)]

pub mod builtin_processors;
pub mod conveyor;
pub mod dag;
pub mod error;
pub mod executor;
pub(crate) mod inbound;
pub mod inbox;
pub mod item;
pub mod item_type;
pub mod job;
pub mod job_watch;
pub mod metrics;
pub mod outbox;
pub mod park;
pub mod pinning;
pub mod processor;
pub mod snapshot;
pub mod stall;
pub mod tasklet;
pub mod test_support;
pub mod traverser;
pub mod watermark;

pub use dag::{Dag, Edge, EdgeShape, Routing, Topology, Vertex, VertexId, VertexShape};
pub use error::{BoxError, DagError, Error, ProcessorResult, Result};
pub use executor::{Executor, ExecutorConfig, WorkerService, WorkerWaker};
pub use inbox::Inbox;
pub use item::Item;
pub use item_type::ItemType;
pub use job::{CancelHandle, Job, JobConfig, JobMonitor, JobStatus, JobWatch};
pub use metrics::{
    Counter, InstanceMetrics, LATENCY_BUCKETS, LatencyHistogram, LatencySnapshot, MetricsSnapshot,
};
pub use outbox::{OutPort, Outbox};
pub use pinning::WorkerPinning;
pub use processor::{NextCall, Processor, ProcessorContext, ProcessorSupplier, TaskletWaker};
pub use snapshot::{SnapshotEntry, SnapshotWriter};
pub use stall::{QueuedInput, Stall};
pub use tasklet::Progress;
pub use traverser::Traverser;
pub use watermark::{SourceTime, Watermark, WatermarkCoalescer, WatermarkThrottle};
pub use weir_partition::{DEFAULT_PARTITION_COUNT, PartitionKey, Partitioner};
