//! The errors of the core runtime.

use std::fmt;

/// A boxed error from user code: what a [`Processor`](crate::Processor) hook returns on failure.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The result of a processor hook.
pub type ProcessorResult<T> = Result<T, BoxError>;

/// The core runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The text of a caught panic's payload: the message of `panic!("...")`, or a placeholder
/// when the payload is not a string.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string())
}

/// Which side of a vertex an ordinal is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// An input ordinal.
    Input,
    /// An output ordinal.
    Output,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Input => "input",
            Direction::Output => "output",
        })
    }
}

/// Why a DAG was refused. Every variant names the vertex or edge at fault; nothing has run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// The DAG has no vertices.
    #[error("the DAG has no vertices")]
    Empty,
    /// Two vertices share a name.
    #[error("two vertices are named '{vertex}'; vertex names must be unique")]
    DuplicateVertex {
        /// The repeated name.
        vertex: String,
    },
    /// A vertex asked for zero processor instances.
    #[error("vertex '{vertex}' has a parallelism of 0; it must be at least 1")]
    ZeroParallelism {
        /// The vertex.
        vertex: String,
    },
    /// An edge refers to a vertex that is not in this DAG.
    #[error("edge {edge} refers to a vertex that is not in this DAG")]
    DanglingEdge {
        /// The edge, as `from:ordinal -> to:ordinal`.
        edge: String,
    },
    /// Two edges use the same ordinal of one vertex.
    #[error("vertex '{vertex}' has two edges on {direction} ordinal {ordinal}")]
    DuplicateOrdinal {
        /// The vertex.
        vertex: String,
        /// The ordinal used twice.
        ordinal: usize,
        /// Input or output.
        direction: Direction,
    },
    /// A vertex's ordinals are not numbered `0..n`.
    #[error(
        "vertex '{vertex}' has no edge on {direction} ordinal {missing}, but one on a higher ordinal; ordinals must be 0..n"
    )]
    OrdinalGap {
        /// The vertex.
        vertex: String,
        /// The first missing ordinal.
        missing: usize,
        /// Input or output.
        direction: Direction,
    },
    /// An ordinal has no declared item type.
    #[error("vertex '{vertex}' declares no item type for {direction} ordinal {ordinal}")]
    UndeclaredOrdinal {
        /// The vertex.
        vertex: String,
        /// The ordinal.
        ordinal: usize,
        /// Input or output.
        direction: Direction,
    },
    /// The producer emits one type and the consumer expects another.
    #[error("edge {edge}: the source emits `{produced}` but the destination expects `{expected}`")]
    TypeMismatch {
        /// The edge.
        edge: String,
        /// The source vertex's output type.
        produced: &'static str,
        /// The destination vertex's input type.
        expected: &'static str,
    },
    /// The DAG has a cycle through this vertex.
    #[error("the DAG has a cycle through vertex '{vertex}'")]
    Cycle {
        /// A vertex on the cycle.
        vertex: String,
    },
    /// An isolated edge joins vertices with different parallelism.
    #[error("isolated edge {edge} needs equal parallelism on both sides, found {from} and {to}")]
    IsolatedParallelism {
        /// The edge.
        edge: String,
        /// Parallelism of the source vertex.
        from: usize,
        /// Parallelism of the destination vertex.
        to: usize,
    },
    /// A distributed edge was used, but this runtime has no cluster.
    #[error(
        "edge {edge} is distributed, but this job runs on a single member; distributed edges need a cluster"
    )]
    DistributedWithoutCluster {
        /// The edge.
        edge: String,
    },
}

/// An error from the core runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The DAG was refused before anything ran.
    #[error("invalid DAG: {0}")]
    InvalidDag(#[from] DagError),
    /// A processor's `init` failed; the job did not start.
    #[error("vertex '{vertex}' instance {instance} failed to initialise: {source}")]
    InitFailed {
        /// The vertex.
        vertex: String,
        /// The global processor index.
        instance: usize,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// A processor returned an error; the job was stopped.
    #[error("vertex '{vertex}' instance {instance} failed: {source}")]
    ProcessorFailed {
        /// The vertex.
        vertex: String,
        /// The global processor index.
        instance: usize,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// A processor panicked; the job was stopped and the process lives on.
    #[error("vertex '{vertex}' instance {instance} panicked in {hook}: {message}")]
    ProcessorPanicked {
        /// The vertex.
        vertex: String,
        /// The global processor index.
        instance: usize,
        /// Where: `create`, `init`, `process` (any hook called while the job runs), `close`
        /// or `drop`.
        hook: &'static str,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The job was cancelled before it finished.
    #[error("the job was cancelled")]
    Cancelled,
    /// The executor was shut down while the job ran.
    #[error("the executor shut down while the job was running")]
    ExecutorShutDown,
    /// A worker thread could not be started.
    #[error("could not start a thread: {0}")]
    Thread(#[source] std::io::Error),
    /// [`Executor::attach_worker_services`](crate::Executor::attach_worker_services) was given
    /// a number of services other than one per worker.
    #[error(
        "{given} worker services given to an executor of {workers} workers: give one per worker"
    )]
    WorkerServiceCount {
        /// How many services were given.
        given: usize,
        /// How many workers the executor has.
        workers: usize,
    },
    /// A snapshot could not be written or read, or does not fit the job.
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    /// A processor could not restore its state from the snapshot.
    #[error(
        "vertex '{vertex}' instance {instance} failed to restore from snapshot {snapshot}: {source}"
    )]
    RestoreFailed {
        /// The vertex.
        vertex: String,
        /// The processor index.
        instance: usize,
        /// The snapshot.
        snapshot: u64,
        /// The cause.
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// The vertex at fault, when the error is a processor's.
    pub fn vertex(&self) -> Option<&str> {
        match self {
            Error::InitFailed { vertex, .. }
            | Error::ProcessorFailed { vertex, .. }
            | Error::ProcessorPanicked { vertex, .. }
            | Error::RestoreFailed { vertex, .. } => Some(vertex),
            _ => None,
        }
    }
}
