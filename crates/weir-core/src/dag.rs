//! The core DAG: vertices (processor suppliers) joined by typed edges (conveyors).
//!
//! ```
//! use weir_core::{Dag, Edge, Vertex, builtin_processors::{IterSource, MapP, CollectSink}};
//!
//! let mut dag = Dag::new();
//! let source = dag.vertex(Vertex::new("numbers", |_| IterSource::new(0..10u64)).emits::<u64>().local_parallelism(1));
//! let double = dag.vertex(Vertex::new("double", |_| MapP::new(|x: u64| x * 2)).accepts::<u64>().emits::<u64>());
//! let (sink_supplier, collected) = CollectSink::<u64>::supplier();
//! let sink = dag.vertex(Vertex::new("collect", sink_supplier).accepts::<u64>());
//! dag.edge(Edge::between(source, double));
//! dag.edge(Edge::between(double, sink).partitioned(|x: &u64| *x));
//! dag.validate().unwrap();
//! ```
//!
//! Item types are declared on the vertex ([`Vertex::accepts`], [`Vertex::emits`], and per
//! ordinal with [`Vertex::accepts_on`] and [`Vertex::emits_on`]) and checked once, by
//! [`Dag::validate`], before anything runs.

use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use weir_partition::{PartitionKey, Partitioner};

use crate::conveyor::DEFAULT_CAPACITY;
use crate::error::{DagError, Direction};
use crate::item::Item;
use crate::item_type::ItemType;
use crate::outbox::PartitionFn;
use crate::processor::{Processor, ProcessorContext, ProcessorSupplier};

static NEXT_DAG_ID: AtomicU64 = AtomicU64::new(1);

/// A handle to a vertex of one [`Dag`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VertexId {
    dag: u64,
    index: usize,
}

impl VertexId {
    /// The vertex's position in its DAG.
    pub fn index(&self) -> usize {
        self.index
    }
}

/// The item types of a vertex's ordinals on one side: a default for every ordinal, and
/// per-ordinal overrides.
#[derive(Debug, Clone, Default)]
pub(crate) struct PortTypes {
    default: Option<ItemType>,
    overrides: Vec<(usize, ItemType)>,
}

impl PortTypes {
    pub(crate) fn get(&self, ordinal: usize) -> Option<ItemType> {
        self.overrides
            .iter()
            .find(|(o, _)| *o == ordinal)
            .map(|(_, t)| *t)
            .or(self.default)
    }
}

/// A vertex: a name, a processor supplier, the item types of its ordinals and a parallelism.
/// Cloning shares the supplier.
#[derive(Clone)]
pub struct Vertex {
    pub(crate) name: String,
    pub(crate) parallelism: Option<usize>,
    pub(crate) supplier: Arc<dyn ProcessorSupplier>,
    pub(crate) inputs: PortTypes,
    pub(crate) outputs: PortTypes,
    /// The granule of the watermarks its instances send, ms; 1: every one.
    pub(crate) watermark_granule: i64,
}

impl Vertex {
    /// A vertex named `name` whose instances `supplier` creates. Declare its item types with
    /// [`accepts`](Self::accepts) and [`emits`](Self::emits).
    pub fn new<P: Processor>(
        name: impl Into<String>,
        supplier: impl Fn(&ProcessorContext) -> P + Send + Sync + 'static,
    ) -> Self {
        Vertex {
            name: name.into(),
            parallelism: None,
            supplier: Arc::new(supplier),
            inputs: PortTypes::default(),
            outputs: PortTypes::default(),
            watermark_granule: 1,
        }
    }

    /// Declares that every input ordinal carries `T`, unless [`accepts_on`](Self::accepts_on)
    /// says otherwise for one.
    pub fn accepts<T: Item>(mut self) -> Self {
        self.inputs.default = Some(ItemType::of::<T>());
        self
    }

    /// Declares that input `ordinal` carries `T`.
    pub fn accepts_on<T: Item>(mut self, ordinal: usize) -> Self {
        self.inputs.overrides.push((ordinal, ItemType::of::<T>()));
        self
    }

    /// Declares that every output ordinal carries `T`, unless [`emits_on`](Self::emits_on)
    /// says otherwise for one.
    pub fn emits<T: Item>(mut self) -> Self {
        self.outputs.default = Some(ItemType::of::<T>());
        self
    }

    /// Declares that output `ordinal` carries `T`.
    pub fn emits_on<T: Item>(mut self, ordinal: usize) -> Self {
        self.outputs.overrides.push((ordinal, ItemType::of::<T>()));
        self
    }

    /// Like [`accepts_on`](Self::accepts_on), for a type known only at run time (planners).
    pub fn accepts_type_on(mut self, ordinal: usize, item_type: ItemType) -> Self {
        self.inputs.overrides.push((ordinal, item_type));
        self
    }

    /// Like [`emits`](Self::emits), for a type known only at run time (planners).
    pub fn emits_type(mut self, item_type: ItemType) -> Self {
        self.outputs.default = Some(item_type);
        self
    }

    /// The number of processor instances on this member. Without it, the job's default
    /// (one per worker thread) applies.
    pub fn local_parallelism(mut self, n: usize) -> Self {
        self.parallelism = Some(n);
        self
    }

    /// Throttles the watermarks this vertex's instances send to multiples of `ms`: each is
    /// rounded down to a multiple (aligned to the epoch) and sent only when that multiple
    /// advances ([`WatermarkThrottle`](crate::WatermarkThrottle)). For a vertex whose
    /// event-time consumers downstream all act only on multiples of `ms` (windows whose
    /// frames are multiples of it): they close the same windows at the same moment, and their
    /// workers are not woken by the watermarks in between. The planner sets it; 1 (the
    /// default) sends every watermark. Watermarks inside the vertex (to its fused stages) are
    /// not throttled.
    pub fn watermark_granule(mut self, ms: i64) -> Self {
        self.watermark_granule = ms.max(1);
        self
    }

    /// The granule set by [`watermark_granule`](Self::watermark_granule), ms; 1 when none.
    pub fn watermark_granule_ms(&self) -> i64 {
        self.watermark_granule
    }

    /// The vertex name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for Vertex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vertex")
            .field("name", &self.name)
            .field("parallelism", &self.parallelism)
            .field("watermark_granule", &self.watermark_granule)
            .finish()
    }
}

/// The key function of a partitioned edge, with the item type it expects.
#[derive(Clone)]
pub struct PartitionSpec {
    pub(crate) item_type: ItemType,
    /// A `PartitionFn<T>` for `item_type`'s `T`.
    pub(crate) partition_fn: Arc<dyn Any + Send + Sync>,
    pub(crate) partitioner: Partitioner,
}

/// How an edge routes items from producer instances to consumer instances.
#[derive(Clone)]
pub enum Routing {
    /// Each item goes to one consumer, round-robin, skipping a full one.
    Unicast,
    /// Each item goes to the consumer that owns its key's partition.
    Partitioned(PartitionSpec),
    /// Each item goes to every consumer.
    Broadcast,
    /// Every item goes to one consumer instance (instance 0).
    AllToOne,
    /// Producer instance `i` feeds consumer instance `i` only.
    Isolated,
}

impl Routing {
    /// The routing's name, as `explain` and the observability API print it: `unicast`,
    /// `partitioned`, `broadcast`, `all-to-one` or `isolated`.
    pub fn name(&self) -> &'static str {
        match self {
            Routing::Unicast => "unicast",
            Routing::Partitioned(_) => "partitioned",
            Routing::Broadcast => "broadcast",
            Routing::AllToOne => "all-to-one",
            Routing::Isolated => "isolated",
        }
    }
}

impl fmt::Debug for Routing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An edge from an output ordinal of one vertex to an input ordinal of another.
#[derive(Debug, Clone)]
pub struct Edge {
    pub(crate) from: VertexId,
    pub(crate) from_ordinal: usize,
    pub(crate) to: VertexId,
    pub(crate) to_ordinal: usize,
    pub(crate) routing: Routing,
    pub(crate) priority: i32,
    pub(crate) capacity: usize,
    pub(crate) distributed: bool,
}

impl Edge {
    /// A unicast edge from output 0 of `from` to input 0 of `to`, priority 0, capacity 1024.
    pub fn between(from: VertexId, to: VertexId) -> Self {
        Edge {
            from,
            from_ordinal: 0,
            to,
            to_ordinal: 0,
            routing: Routing::Unicast,
            priority: 0,
            capacity: DEFAULT_CAPACITY,
            distributed: false,
        }
    }

    /// Leaves from output `ordinal` of the source vertex.
    pub fn from_ordinal(mut self, ordinal: usize) -> Self {
        self.from_ordinal = ordinal;
        self
    }

    /// Arrives at input `ordinal` of the destination vertex.
    pub fn to_ordinal(mut self, ordinal: usize) -> Self {
        self.to_ordinal = ordinal;
        self
    }

    /// Routes each item by `key`, over 271 partitions mapped onto the consumer instances.
    /// The partition of a key is the same in every process and run (see `weir_partition`).
    pub fn partitioned<T: Item, K: PartitionKey>(
        self,
        key: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> Self {
        self.partitioned_with(Partitioner::default(), key)
    }

    /// Like [`partitioned`](Self::partitioned), with a chosen partitioner.
    pub fn partitioned_with<T: Item, K: PartitionKey>(
        self,
        partitioner: Partitioner,
        key: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> Self {
        self.partitioned_by_partition(partitioner, move |item: &T| {
            partitioner.partition_of(&key(item))
        })
    }

    /// Routes each item to the owner of the partition `partition_of` reads from it: for items
    /// that carry the partition computed upstream (with `partitioner`), so that neither this
    /// edge nor its consumer hashes the key again. A value of `count` or more is taken
    /// modulo the partition count.
    ///
    /// Cost per item: `partition_of` (inlined in the port's loop over a run of items) and one
    /// table read, no hash.
    pub fn partitioned_by_partition<T: Item>(
        mut self,
        partitioner: Partitioner,
        partition_of: impl Fn(&T) -> u32 + Send + Sync + 'static,
    ) -> Self {
        let count = partitioner.count();
        let f: PartitionFn<T> = Arc::new(move |item: &T| {
            let p = partition_of(item);
            if p < count { p } else { p % count }
        });
        self.routing = Routing::Partitioned(PartitionSpec {
            item_type: ItemType::of::<T>(),
            partition_fn: Arc::new(f),
            partitioner,
        });
        self
    }

    /// Sends every item to every consumer instance.
    pub fn broadcast(mut self) -> Self {
        self.routing = Routing::Broadcast;
        self
    }

    /// Sends every item to a single consumer instance.
    pub fn all_to_one(mut self) -> Self {
        self.routing = Routing::AllToOne;
        self
    }

    /// Connects producer instance `i` to consumer instance `i` only.
    pub fn isolated(mut self) -> Self {
        self.routing = Routing::Isolated;
        self
    }

    /// Sets the priority: a consumer drains all inputs with a lower value before any input
    /// with a higher one (a hash join's build side has a lower value than its probe side).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// The capacity of each conveyor of this edge, rounded up to a power of two.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Marks the edge as crossing members. Reserved for the cluster: a single-member job
    /// refuses it.
    pub fn distributed(mut self) -> Self {
        self.distributed = true;
        self
    }

    /// The routing.
    pub fn routing(&self) -> &Routing {
        &self.routing
    }
}

/// A DAG of vertices and edges, ready to validate and submit. Cloning shares the suppliers:
/// a restarted job creates its processors from the same ones.
#[derive(Clone)]
pub struct Dag {
    id: u64,
    pub(crate) vertices: Vec<Vertex>,
    pub(crate) edges: Vec<Edge>,
}

impl Default for Dag {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Dag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

impl Dag {
    /// An empty DAG.
    pub fn new() -> Self {
        Dag {
            id: NEXT_DAG_ID.fetch_add(1, Ordering::Relaxed),
            vertices: Vec::new(),
            edges: Vec::new(),
        }
    }

    /// Adds a vertex.
    pub fn vertex(&mut self, vertex: Vertex) -> VertexId {
        self.vertices.push(vertex);
        VertexId {
            dag: self.id,
            index: self.vertices.len() - 1,
        }
    }

    /// Adds an edge. It is checked by [`validate`](Self::validate), not here.
    pub fn edge(&mut self, edge: Edge) -> &mut Self {
        self.edges.push(edge);
        self
    }

    /// The vertices, in insertion order.
    pub fn vertices(&self) -> &[Vertex] {
        &self.vertices
    }

    /// The edges, in insertion order.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    fn name_of(&self, id: VertexId) -> &str {
        self.vertices
            .get(id.index)
            .filter(|_| id.dag == self.id)
            .map_or("?", |v| v.name.as_str())
    }

    fn describe(&self, e: &Edge) -> String {
        format!(
            "'{}':{} -> '{}':{}",
            self.name_of(e.from),
            e.from_ordinal,
            self.name_of(e.to),
            e.to_ordinal
        )
    }

    /// Checks the DAG: unique names, non-zero parallelism, edges inside this DAG, one edge per
    /// ordinal, ordinals `0..n`, declared and matching item types, no cycle, and no distributed
    /// edge. Each error names the vertex or edge at fault.
    pub fn validate(&self) -> Result<(), DagError> {
        if self.vertices.is_empty() {
            return Err(DagError::Empty);
        }
        let mut names = HashSet::new();
        for v in &self.vertices {
            if !names.insert(v.name.as_str()) {
                return Err(DagError::DuplicateVertex {
                    vertex: v.name.clone(),
                });
            }
            if v.parallelism == Some(0) {
                return Err(DagError::ZeroParallelism {
                    vertex: v.name.clone(),
                });
            }
        }
        let n = self.vertices.len();
        let mut ins: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut outs: Vec<Vec<usize>> = vec![Vec::new(); n];
        for e in &self.edges {
            let inside = |id: VertexId| id.dag == self.id && id.index < n;
            if !inside(e.from) || !inside(e.to) {
                return Err(DagError::DanglingEdge {
                    edge: self.describe(e),
                });
            }
            if e.distributed {
                return Err(DagError::DistributedWithoutCluster {
                    edge: self.describe(e),
                });
            }
            outs[e.from.index].push(e.from_ordinal);
            ins[e.to.index].push(e.to_ordinal);
        }
        for (i, v) in self.vertices.iter().enumerate() {
            check_ordinals(&v.name, &mut ins[i], Direction::Input)?;
            check_ordinals(&v.name, &mut outs[i], Direction::Output)?;
        }
        for e in &self.edges {
            let from = &self.vertices[e.from.index];
            let to = &self.vertices[e.to.index];
            let produced =
                from.outputs
                    .get(e.from_ordinal)
                    .ok_or_else(|| DagError::UndeclaredOrdinal {
                        vertex: from.name.clone(),
                        ordinal: e.from_ordinal,
                        direction: Direction::Output,
                    })?;
            let expected =
                to.inputs
                    .get(e.to_ordinal)
                    .ok_or_else(|| DagError::UndeclaredOrdinal {
                        vertex: to.name.clone(),
                        ordinal: e.to_ordinal,
                        direction: Direction::Input,
                    })?;
            if produced != expected {
                return Err(DagError::TypeMismatch {
                    edge: self.describe(e),
                    produced: produced.name(),
                    expected: expected.name(),
                });
            }
            if let Routing::Partitioned(spec) = &e.routing
                && spec.item_type != produced
            {
                return Err(DagError::TypeMismatch {
                    edge: format!("{} (its partitioning key function)", self.describe(e)),
                    produced: produced.name(),
                    expected: spec.item_type.name(),
                });
            }
        }
        self.check_acyclic()
    }

    /// Kahn's algorithm; a vertex left over lies on (or behind) a cycle.
    fn check_acyclic(&self) -> Result<(), DagError> {
        let order = self.topological_order();
        if order.len() == self.vertices.len() {
            return Ok(());
        }
        let placed: HashSet<usize> = order.into_iter().collect();
        // Report a vertex that is on the cycle itself: follow edges among unplaced vertices
        // until one repeats.
        let mut current = (0..self.vertices.len())
            .find(|i| !placed.contains(i))
            .unwrap_or(0);
        let mut seen = HashSet::new();
        while seen.insert(current) {
            match self
                .edges
                .iter()
                .find(|e| e.from.index == current && !placed.contains(&e.to.index))
            {
                Some(e) => current = e.to.index,
                None => break,
            }
        }
        Err(DagError::Cycle {
            vertex: self.vertices[current].name.clone(),
        })
    }

    /// Vertex indices in an order where every edge goes forward. Vertices on a cycle are left out.
    pub(crate) fn topological_order(&self) -> Vec<usize> {
        let n = self.vertices.len();
        let mut indegree = vec![0usize; n];
        for e in &self.edges {
            indegree[e.to.index] += 1;
        }
        let mut ready: Vec<usize> = (0..n).filter(|i| indegree[*i] == 0).rev().collect();
        let mut order = Vec::with_capacity(n);
        while let Some(v) = ready.pop() {
            order.push(v);
            for e in self.edges.iter().filter(|e| e.from.index == v) {
                indegree[e.to.index] -= 1;
                if indegree[e.to.index] == 0 {
                    ready.push(e.to.index);
                }
            }
        }
        order
    }

    /// The shape of this DAG when every vertex without its own parallelism runs
    /// `default_parallelism` instances: names, parallelism, edges and queue capacities.
    pub(crate) fn topology(&self, default_parallelism: usize) -> Topology {
        let parallelism: Vec<usize> = self
            .vertices
            .iter()
            .map(|v| v.parallelism.unwrap_or(default_parallelism))
            .collect();
        let mut vertices: Vec<VertexShape> = self
            .vertices
            .iter()
            .zip(&parallelism)
            .map(|(v, p)| VertexShape {
                name: v.name.clone(),
                parallelism: *p,
                input_capacity: Vec::new(),
            })
            .collect();
        let mut edges = Vec::with_capacity(self.edges.len());
        for e in &self.edges {
            let (from, to) = (e.from.index, e.to.index);
            // One conveyor per (producer, consumer) pair the routing connects.
            let queues = match e.routing {
                Routing::Isolated | Routing::AllToOne => parallelism[from],
                _ => parallelism[from] * parallelism[to],
            };
            let capacity = e.capacity.max(1).next_power_of_two();
            let inputs = &mut vertices[to].input_capacity;
            if inputs.len() <= e.to_ordinal {
                inputs.resize(e.to_ordinal + 1, 0);
            }
            inputs[e.to_ordinal] += (queues * capacity) as u64;
            edges.push(EdgeShape {
                from: self.vertices[from].name.clone(),
                to: self.vertices[to].name.clone(),
                from_ordinal: e.from_ordinal,
                to_ordinal: e.to_ordinal,
                kind: e.routing.name(),
                priority: e.priority,
                capacity,
            });
        }
        Topology { vertices, edges }
    }

    /// A text rendering: one line per vertex, then one per edge.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for v in &self.vertices {
            let par = v
                .parallelism
                .map_or("default".to_string(), |p| p.to_string());
            s.push_str(&format!("vertex '{}' (parallelism {par})\n", v.name));
        }
        for e in &self.edges {
            s.push_str(&format!(
                "edge {} [{:?}, priority {}, capacity {}]\n",
                self.describe(e),
                e.routing,
                e.priority,
                e.capacity
            ));
        }
        s
    }

    /// A Graphviz DOT rendering.
    pub fn to_dot(&self) -> String {
        let mut s = String::from("digraph dag {\n");
        for (i, v) in self.vertices.iter().enumerate() {
            let par = v.parallelism.map_or(String::new(), |p| format!(" [{p}]"));
            s.push_str(&format!(
                "  v{i} [label=\"{}{par}\"];\n",
                v.name.replace('"', "\\\"")
            ));
        }
        for e in &self.edges {
            s.push_str(&format!(
                "  v{} -> v{} [label=\"{:?}\" taillabel=\"{}\" headlabel=\"{}\"];\n",
                e.from.index, e.to.index, e.routing, e.from_ordinal, e.to_ordinal
            ));
        }
        s.push_str("}\n");
        s
    }
}

fn check_ordinals(
    vertex: &str,
    ordinals: &mut [usize],
    direction: Direction,
) -> Result<(), DagError> {
    ordinals.sort_unstable();
    if let Some(pair) = ordinals.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(DagError::DuplicateOrdinal {
            vertex: vertex.to_string(),
            ordinal: pair[0],
            direction,
        });
    }
    for (expected, &ordinal) in ordinals.iter().enumerate() {
        if ordinal != expected {
            return Err(DagError::OrdinalGap {
                vertex: vertex.to_string(),
                missing: expected,
                direction,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin_processors::{CollectSink, IterSource, MapP};

    fn source(name: &str) -> Vertex {
        Vertex::new(name, |_| IterSource::new(0..1u64)).emits::<u64>()
    }
    fn map(name: &str) -> Vertex {
        Vertex::new(name, |_| MapP::new(|x: u64| x))
            .accepts::<u64>()
            .emits::<u64>()
    }
    fn sink(name: &str) -> Vertex {
        Vertex::new(name, CollectSink::<u64>::supplier().0).accepts::<u64>()
    }

    #[test]
    fn valid_chain() {
        let mut dag = Dag::new();
        let a = dag.vertex(source("a"));
        let b = dag.vertex(map("b"));
        let c = dag.vertex(sink("c"));
        dag.edge(Edge::between(a, b)).edge(Edge::between(b, c));
        assert_eq!(dag.validate(), Ok(()));
        assert_eq!(dag.topological_order(), [0, 1, 2]);
        assert!(dag.to_dot().contains("v0 -> v1"));
    }

    #[test]
    fn cycle_is_named() {
        let mut dag = Dag::new();
        let a = dag.vertex(source("a"));
        let b = dag.vertex(map("b"));
        let c = dag.vertex(map("c"));
        dag.edge(Edge::between(a, b))
            .edge(Edge::between(b, c))
            .edge(Edge::between(c, b).to_ordinal(1));
        match dag.validate() {
            Err(DagError::Cycle { vertex }) => assert!(vertex == "b" || vertex == "c", "{vertex}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dangling_edge() {
        let mut other = Dag::new();
        let foreign = other.vertex(source("x"));
        let mut dag = Dag::new();
        let a = dag.vertex(sink("a"));
        dag.edge(Edge::between(foreign, a));
        assert!(matches!(dag.validate(), Err(DagError::DanglingEdge { .. })));
    }

    #[test]
    fn duplicate_ordinal() {
        let mut dag = Dag::new();
        let a = dag.vertex(source("a"));
        let b = dag.vertex(source("b"));
        let c = dag.vertex(sink("c"));
        dag.edge(Edge::between(a, c)).edge(Edge::between(b, c));
        assert_eq!(
            dag.validate(),
            Err(DagError::DuplicateOrdinal {
                vertex: "c".into(),
                ordinal: 0,
                direction: Direction::Input
            })
        );
    }

    #[test]
    fn ordinal_gap() {
        let mut dag = Dag::new();
        let a = dag.vertex(source("a"));
        let c = dag.vertex(sink("c"));
        dag.edge(Edge::between(a, c).to_ordinal(1));
        assert!(matches!(
            dag.validate(),
            Err(DagError::OrdinalGap { missing: 0, .. })
        ));
    }

    #[test]
    fn zero_parallelism() {
        let mut dag = Dag::new();
        dag.vertex(source("a").local_parallelism(0));
        assert_eq!(
            dag.validate(),
            Err(DagError::ZeroParallelism { vertex: "a".into() })
        );
    }

    #[test]
    fn type_mismatch_names_the_edge_and_types() {
        let mut dag = Dag::new();
        let a = dag.vertex(source("a"));
        let c =
            dag.vertex(Vertex::new("c", CollectSink::<String>::supplier().0).accepts::<String>());
        dag.edge(Edge::between(a, c));
        match dag.validate() {
            Err(DagError::TypeMismatch {
                edge,
                produced,
                expected,
            }) => {
                assert_eq!(edge, "'a':0 -> 'c':0");
                assert_eq!(produced, "u64");
                assert!(expected.contains("String"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn partition_key_type_is_checked() {
        let mut dag = Dag::new();
        let a = dag.vertex(source("a"));
        let c = dag.vertex(sink("c"));
        dag.edge(Edge::between(a, c).partitioned(|s: &String| s.clone()));
        assert!(matches!(dag.validate(), Err(DagError::TypeMismatch { .. })));
    }

    #[test]
    fn distributed_edge_needs_a_cluster() {
        let mut dag = Dag::new();
        let a = dag.vertex(source("a"));
        let c = dag.vertex(sink("c"));
        dag.edge(Edge::between(a, c).distributed());
        assert!(matches!(
            dag.validate(),
            Err(DagError::DistributedWithoutCluster { .. })
        ));
    }

    #[test]
    fn undeclared_ordinal() {
        let mut dag = Dag::new();
        let a = dag.vertex(source("a"));
        let b = dag.vertex(source("b"));
        dag.edge(Edge::between(a, b));
        assert!(matches!(
            dag.validate(),
            Err(DagError::UndeclaredOrdinal {
                direction: Direction::Input,
                ..
            })
        ));
    }
}

/// The shape of a submitted job's DAG, with every vertex's parallelism resolved: what a
/// dashboard draws. [`JobMonitor::topology`](crate::JobMonitor::topology) returns it; it never changes
/// while the job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// The vertices, in the DAG's order (the order of [`JobMonitor::metrics`](crate::JobMonitor::metrics)).
    pub vertices: Vec<VertexShape>,
    /// The edges, in the DAG's order.
    pub edges: Vec<EdgeShape>,
}

/// One vertex of a [`Topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VertexShape {
    /// The vertex name.
    pub name: String,
    /// Its number of instances.
    pub parallelism: usize,
    /// Per input ordinal: the items all queues into it can hold, summed over the vertex's
    /// instances (compare with the summed `queue_fill` of its instances' metrics).
    pub input_capacity: Vec<u64>,
}

/// One edge of a [`Topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeShape {
    /// The producing vertex.
    pub from: String,
    /// The consuming vertex.
    pub to: String,
    /// The producer's output ordinal.
    pub from_ordinal: usize,
    /// The consumer's input ordinal.
    pub to_ordinal: usize,
    /// The routing's name ([`Routing::name`]).
    pub kind: &'static str,
    /// The edge's priority: a consumer drains lower values first.
    pub priority: i32,
    /// The capacity of each of its conveyors, a power of two.
    pub capacity: usize,
}
