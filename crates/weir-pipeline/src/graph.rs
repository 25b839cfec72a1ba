//! The pipeline DAG: the stages a user declared, type-erased, before planning.
//!
//! Each typed stage method records a [`Node`] holding the factories the planner needs (link
//! wrappers, heads, terminals), built while the stage's types were known. The planner then
//! joins them without knowing the types, and the joins are checked by `ItemType`.

use weir_core::{Item, ItemType, Processor};

use crate::error::Misuse;
pub(crate) use weir_exec::links::factories::{
    HeadFn, Preformat, RouteFn, SinkRoute, SinkTerminalFactory, SourceHeadFactory, TerminalFn,
    WrapFn,
};
use weir_exec::links::link::{Emit, ErasedLink, erase, inbox_head};
use weir_exec::links::probe_buffer::probe_buffer;

/// Index of a node in its graph; nodes only ever refer to earlier nodes, so index order is a
/// topological order.
pub(crate) type NodeId = usize;
/// What the planner needs to know about a stage's item type.
#[derive(Clone, Copy)]
pub(crate) struct StageType {
    pub item: ItemType,
    /// Makes an [`InboxHead`](weir_exec::links::link::InboxHead) for a chain taking this type.
    pub inbox_head: fn(ErasedLink) -> Box<dyn Processor>,
    /// Makes an [`Emit`] terminal for this type.
    pub emit: fn() -> ErasedLink,
    /// Makes a [`ProbeBuffer`](weir_exec::links::probe_buffer::ProbeBuffer) for a chain taking
    /// this type.
    pub probe_buffer: fn(ErasedLink) -> Box<dyn Processor>,
}

fn emit_terminal<T: Item>() -> ErasedLink {
    erase::<T>(Box::new(Emit::<T>::new()))
}

impl StageType {
    pub(crate) fn of<T: Item>() -> Self {
        StageType {
            item: ItemType::of::<T>(),
            inbox_head: inbox_head::<T>,
            emit: emit_terminal::<T>,
            probe_buffer: probe_buffer::<T>,
        }
    }
}

pub(crate) enum NodeKind {
    Source {
        head: SourceHeadFactory,
        /// The source hands out items parsed on a pool of threads: stages after its single
        /// instance fuse into its vertex (see `plan`).
        pooled_parsing: bool,
    },
    /// A stateless (or per-instance stateful) transform: fusable.
    Transform {
        wrap: WrapFn,
    },
    /// A transform with per-key state: its input must be partitioned by key.
    Keyed {
        wrap: WrapFn,
        route: RouteFn,
    },
    /// A vertex boundary: round-robin, or by key.
    Rebalance {
        route: Option<RouteFn>,
    },
    Merge,
    Aggregate {
        /// The local stage's name in plans: `accumulate`, or what it does.
        local: &'static str,
        accumulate: TerminalFn,
        partial: StageType,
        /// `None` for a non-keyed aggregation: everything goes to one combine instance.
        route: Option<RouteFn>,
        combine: HeadFn,
    },
    Join {
        head: HeadFn,
    },
    /// A two-stream join: each input partitioned by its side\'s key.
    StreamJoin {
        head: HeadFn,
        left_route: RouteFn,
        right_route: RouteFn,
    },
    Sort {
        head: HeadFn,
    },
    /// An async map: a head that owns the calls in flight, fed by a unicast edge.
    AsyncMap {
        head: HeadFn,
        /// Emits in input order: the stages after it stay in its vertex.
        ordered: bool,
    },
    Sink {
        terminal: SinkTerminalFactory,
        /// For a sink that writes bytes: formatting where the items are.
        preformat: Option<Preformat>,
        /// Set when each instance must receive the items of the partitions it owns.
        route: Option<SinkRoute>,
    },
}

/// What a stage needs of the watermarks that reach it, and whether what it emits may be
/// throttled: the planner throttles a vertex's watermarks to the coarsest granule every stage
/// downstream of it can act on (see `plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatermarkUse {
    /// Passes watermarks on untouched and never emits an item behind the last watermark it
    /// sent (a source, a stateless stream stage that keeps event times, a merge, a sink):
    /// any granule serves it.
    Transparent,
    /// Acts only when a watermark reaches a multiple of this many ms (a tumbling or sliding
    /// window: its frames end on multiples of the slide), and emits each result before the
    /// watermark that closed its window.
    Frames(i64),
    /// Anything else (sessions, joins, timers, user state, async calls, batch stages): needs
    /// every watermark, and the vertex it is in forwards every one.
    Exact,
}

impl WatermarkUse {
    /// The need of two stages together: the finer of the two.
    pub(crate) fn and(self, other: WatermarkUse) -> WatermarkUse {
        use WatermarkUse::{Exact, Frames, Transparent};
        match (self, other) {
            (Exact, _) | (_, Exact) => Exact,
            (Transparent, x) | (x, Transparent) => x,
            (Frames(a), Frames(b)) => Frames(gcd(a, b)),
        }
    }
}

/// The greatest common divisor of two positive granules.
fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.abs().max(1)
}

pub(crate) struct Node {
    pub name: String,
    pub kind: NodeKind,
    pub inputs: Vec<NodeId>,
    /// `None` for a sink.
    pub output: Option<StageType>,
    pub parallelism: Option<usize>,
    /// The stage keeps state that snapshots cannot save (a batch aggregation, sort, hash join
    /// or `map_stateful`): its vertices hold snapshots back until they complete.
    pub holds_state: bool,
    /// Instance `i` of the stage emits only pairs `(K, _)` whose `K` is in a partition
    /// (default partitioner) that instance `i` owns: a keyed aggregation's output.
    pub keyed_pairs: bool,
    /// What it needs of watermarks; `Exact` unless the stage's constructor says otherwise.
    pub watermarks: WatermarkUse,
}

pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    /// Misuses found while building, reported when the pipeline is planned.
    pub errors: Vec<Misuse>,
}

impl Graph {
    pub(crate) fn new() -> Self {
        Graph {
            nodes: Vec::new(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        self.nodes.len() - 1
    }
}
