//! The planner: pipeline DAG in, core DAG out.
//!
//! It walks the stages in order and grows *vertices*. A vertex is a head (a source, an inbox,
//! a combine step, a join, a sort), a chain of fused links, and a terminal (emit to the
//! outbox, accumulate, or a sink). The rules:
//!
//! - A stateless stage is fused into the vertex of its input when that input has no other
//!   consumer, the vertex is still open (no terminal yet), and the vertex runs at the default
//!   parallelism. Otherwise it starts a new vertex fed by a unicast edge.
//! - The exception: a source declared to parse on a pool (`with_pooled_parsing`: a single
//!   instance that keeps file order while its lines are parsed on every core) takes the
//!   stateless stages at the default parallelism after it, and an aggregation's accumulate,
//!   into its own vertex, so that only filtered, pre-aggregated output crosses an edge.
//! - A grouped aggregation becomes an *accumulate* terminal (fused like a stateless stage) and
//!   a *combine* vertex behind a partitioned edge; without a key, an all-to-one edge into a
//!   single combine instance. A keyed count (`count_keys`) plans the same way, its
//!   *count-keys* terminal in place of the accumulate.
//! - A stage with per-key state starts a vertex behind an edge partitioned by its key.
//! - A hash join starts a vertex: the probe side arrives on ordinal 0, each build side on a
//!   broadcast edge of higher priority (a lower value), drained first. When the probe side
//!   and a build side share an upstream vertex, a probe-buffer vertex on the probe edge
//!   holds the probe items until the join takes them (see `exec::probe_buffer`).
//! - A stream–stream join starts a vertex fed by two edges, each partitioned by its side's
//!   key, so matching items meet in one instance.
//! - A sort starts a single-instance vertex behind an all-to-one edge; the stateless stages
//!   and sinks after it stay in that vertex, so its order reaches the sink.
//! - An async map starts a vertex of its own behind a unicast edge: its head processor owns
//!   the calls in flight (the capacity is per instance) and emits into the stateless stages
//!   fused after it. In ordered mode the vertex keeps its order like a sort does, so the
//!   stages after a single-instance ordered async map stay in its vertex.
//! - A sink is fused like a stateless stage when its parallelism fits the vertex. A sink that
//!   writes bytes and does not fit (a single file behind stages on every worker) has its
//!   records formatted in the vertex before it, whatever that vertex's parallelism, and
//!   receives blocks of bytes (see `exec::format`).
//! - Watermarks leave a vertex throttled to the coarsest granule its consumers can act on
//!   ([`Vertex::watermark_granule`](weir_core::Vertex::watermark_granule)): when every stage
//!   downstream is a tumbling or sliding window or keeps event times (stateless stream
//!   stages, merges, sinks), each watermark is rounded down to a multiple of the gcd of
//!   those windows' slides and sent only when that multiple advances, so a window closes at
//!   the same moment and the watermarks in between wake no worker. A session window, a join,
//!   timers, keyed state, an async map or a batch stage downstream, or in the vertex itself,
//!   gets every watermark.
//!
//! So a word count written `read → flat_map → grouping_key → aggregate → write` plans into a
//! fused `read + flat_map + accumulate` vertex, a `combine` vertex and a sink vertex; written
//! `read blocks → count_keys → write`, as `weir run wordcount` is, into `read + count-keys`,
//! `combine` and the sink.

use std::collections::HashSet;
use std::sync::Arc;

use weir_core::{Dag, Edge, ItemType, Processor, ProcessorContext, Vertex};

use crate::error::{Error, Result};
use crate::graph::{
    Graph, HeadFn, NodeId, NodeKind, RouteFn, SinkTerminalFactory, SourceHeadFactory, StageType,
    TerminalFn, WatermarkUse, WrapFn,
};
use weir_exec::links::format::FormattedRecords;
use weir_exec::links::link::ErasedLink;
use weir_exec::links::state::HoldingSnapshots;

#[derive(Clone)]
enum Head {
    Source(SourceHeadFactory),
    Inbox(StageType),
    ProbeBuffer(StageType),
    Custom(HeadFn),
}

#[derive(Clone)]
enum Terminal {
    Emit(StageType),
    Accumulate(TerminalFn),
    Sink(SinkTerminalFactory),
}

#[derive(Clone)]
enum Route {
    Unicast,
    Partitioned(RouteFn),
    Broadcast,
    AllToOne,
}

struct PlannedVertex {
    stages: Vec<String>,
    head: Head,
    links: Vec<WrapFn>,
    terminal: Option<Terminal>,
    parallelism: Option<usize>,
    /// The stage whose output leaves this vertex.
    last_node: NodeId,
    inputs: Vec<ItemType>,
    output: Option<ItemType>,
    outputs: usize,
    /// Its output is in a meaningful order (a sort): stages after it stay in this vertex.
    ordered: bool,
    /// A stage in it keeps state that snapshots cannot save: its instances hold snapshots
    /// back until they complete.
    holds_snapshots: bool,
    /// Its head is a source that hands out items parsed on a pool of threads: stages at
    /// the default parallelism fuse into it whatever its own parallelism.
    pooled_source: bool,
    /// What its stages together need of watermarks (see [`WatermarkUse`]).
    watermarks: WatermarkUse,
}

struct PlannedEdge {
    from: usize,
    from_ordinal: usize,
    to: usize,
    to_ordinal: usize,
    route: Route,
    priority: i32,
}

struct Planner<'g> {
    graph: &'g Graph,
    consumers: Vec<Vec<NodeId>>,
    node_vertex: Vec<usize>,
    vertices: Vec<PlannedVertex>,
    edges: Vec<PlannedEdge>,
}

/// Plans `graph` into a core DAG, or reports the first misuse. Each vertex is named after the
/// stages fused into it.
pub(crate) fn plan(graph: &Graph) -> Result<Dag> {
    validate(graph)?;
    let mut consumers = vec![Vec::new(); graph.nodes.len()];
    for (id, node) in graph.nodes.iter().enumerate() {
        for &input in &node.inputs {
            consumers[input].push(id);
        }
    }
    let mut planner = Planner {
        graph,
        consumers,
        node_vertex: vec![usize::MAX; graph.nodes.len()],
        vertices: Vec::new(),
        edges: Vec::new(),
    };
    for id in 0..graph.nodes.len() {
        planner.place(id);
    }
    Ok(planner.into_dag())
}

fn validate(graph: &Graph) -> Result<()> {
    if let Some(first) = graph.errors.first() {
        return Err(first.clone().into());
    }
    if graph.nodes.is_empty() {
        return Err(Error::Empty);
    }
    if !graph
        .nodes
        .iter()
        .any(|n| matches!(n.kind, NodeKind::Sink { .. }))
    {
        return Err(Error::NoSink);
    }
    let used: HashSet<NodeId> = graph
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter().copied())
        .collect();
    for (id, node) in graph.nodes.iter().enumerate() {
        if !matches!(node.kind, NodeKind::Sink { .. }) && !used.contains(&id) {
            return Err(Error::DanglingStage {
                stage: node.name.clone(),
            });
        }
        if node.parallelism == Some(0) {
            return Err(Error::ZeroParallelism {
                stage: node.name.clone(),
            });
        }
    }
    Ok(())
}

impl Planner<'_> {
    fn output_of(&self, node: NodeId) -> StageType {
        self.graph.nodes[node]
            .output
            .expect("only sinks lack an output, and sinks feed nothing")
    }

    /// The vertex `input`'s consumer can join, if any.
    fn fusable(&self, input: NodeId, parallelism: Option<usize>) -> Option<usize> {
        let v = self.node_vertex[input];
        let vertex = &self.vertices[v];
        let fits = match parallelism {
            None => vertex.parallelism.is_none() || vertex.ordered,
            Some(p) => vertex.parallelism == Some(p),
        };
        (self.consumers[input].len() == 1
            && vertex.terminal.is_none()
            && vertex.last_node == input
            && fits)
            .then_some(v)
    }

    /// The vertex a stage at `parallelism` placed after `input` fuses into, if any:
    /// [`fusable`](Self::fusable), or, for a stage at the default parallelism, the open
    /// vertex of a source that parses on a pool, at that source's parallelism.
    fn fusable_after(&self, input: NodeId, parallelism: Option<usize>) -> Option<usize> {
        self.fusable(input, parallelism).or_else(|| {
            let vertex = &self.vertices[self.node_vertex[input]];
            if parallelism.is_none() && vertex.pooled_source {
                self.fusable(input, vertex.parallelism)
            } else {
                None
            }
        })
    }

    fn new_vertex(&mut self, node: NodeId, head: Head, parallelism: Option<usize>) -> usize {
        self.vertices.push(PlannedVertex {
            stages: vec![self.graph.nodes[node].name.clone()],
            head,
            links: Vec::new(),
            terminal: None,
            parallelism,
            last_node: node,
            inputs: Vec::new(),
            output: None,
            outputs: 0,
            ordered: false,
            holds_snapshots: false,
            pooled_source: false,
            watermarks: WatermarkUse::Transparent,
        });
        self.vertices.len() - 1
    }

    /// Adds an edge from the vertex holding `input`'s output to input `ordinal` of `to`.
    fn connect(&mut self, input: NodeId, to: usize, ordinal: usize, route: Route, priority: i32) {
        let from = self.node_vertex[input];
        let stage_type = self.output_of(input);
        self.connect_vertex(from, stage_type, to, ordinal, route, priority);
    }

    /// Adds an edge from vertex `from`, whose chain ends in items of `stage_type`, to input
    /// `ordinal` of `to`.
    fn connect_vertex(
        &mut self,
        from: usize,
        stage_type: StageType,
        to: usize,
        ordinal: usize,
        route: Route,
        priority: i32,
    ) {
        let vertex = &mut self.vertices[from];
        if vertex.terminal.is_none() {
            vertex.terminal = Some(Terminal::Emit(stage_type));
            vertex.output = Some(stage_type.item);
        }
        let from_ordinal = vertex.outputs;
        vertex.outputs += 1;
        let inputs = &mut self.vertices[to].inputs;
        if inputs.len() <= ordinal {
            inputs.resize(ordinal + 1, stage_type.item);
        }
        inputs[ordinal] = stage_type.item;
        self.edges.push(PlannedEdge {
            from,
            from_ordinal,
            to,
            to_ordinal: ordinal,
            route,
            priority,
        });
    }

    /// A new vertex that reads `input` from its inbox.
    fn inbox_vertex(
        &mut self,
        node: NodeId,
        input: NodeId,
        route: Route,
        parallelism: Option<usize>,
    ) -> usize {
        let v = self.new_vertex(node, Head::Inbox(self.output_of(input)), parallelism);
        self.connect(input, v, 0, route, 0);
        v
    }

    /// Whether some vertex feeds both `a` and `b` (or is one of them), through the edges
    /// planned so far.
    fn share_an_upstream(&self, a: usize, b: usize) -> bool {
        let upstream = |from: usize| {
            let mut seen = HashSet::from([from]);
            let mut todo = vec![from];
            while let Some(v) = todo.pop() {
                for e in self.edges.iter().filter(|e| e.to == v) {
                    if seen.insert(e.from) {
                        todo.push(e.from);
                    }
                }
            }
            seen
        };
        !upstream(a).is_disjoint(&upstream(b))
    }

    /// Adds `node` to vertex `v`'s chain.
    fn fuse(&mut self, v: usize, node: NodeId) {
        let vertex = &mut self.vertices[v];
        vertex.holds_snapshots |= self.graph.nodes[node].holds_state;
        vertex.watermarks = vertex.watermarks.and(self.graph.nodes[node].watermarks);
        if vertex.last_node != node {
            vertex.stages.push(self.graph.nodes[node].name.clone());
        }
        vertex.last_node = node;
    }

    fn place(&mut self, id: NodeId) {
        let node = &self.graph.nodes[id];
        let v = match &node.kind {
            NodeKind::Source {
                head,
                pooled_parsing,
            } => {
                let v = self.new_vertex(id, Head::Source(Arc::clone(head)), node.parallelism);
                self.vertices[v].pooled_source = *pooled_parsing;
                v
            }
            NodeKind::Transform { wrap } => {
                let input = node.inputs[0];
                let v = match self.fusable_after(input, node.parallelism) {
                    Some(v) => v,
                    None => self.inbox_vertex(id, input, Route::Unicast, node.parallelism),
                };
                self.vertices[v].links.push(Arc::clone(wrap));
                v
            }
            NodeKind::Keyed { wrap, route } => {
                let v = self.inbox_vertex(
                    id,
                    node.inputs[0],
                    Route::Partitioned(Arc::clone(route)),
                    node.parallelism,
                );
                self.vertices[v].links.push(Arc::clone(wrap));
                v
            }
            NodeKind::Rebalance { route } => {
                let route = route
                    .as_ref()
                    .map_or(Route::Unicast, |r| Route::Partitioned(Arc::clone(r)));
                self.inbox_vertex(id, node.inputs[0], route, node.parallelism)
            }
            NodeKind::Merge => {
                let v = self.new_vertex(
                    id,
                    Head::Inbox(self.output_of(node.inputs[0])),
                    node.parallelism,
                );
                for (ordinal, &input) in node.inputs.iter().enumerate() {
                    self.connect(input, v, ordinal, Route::Unicast, 0);
                }
                v
            }
            NodeKind::Aggregate {
                local,
                accumulate,
                partial,
                route,
                combine,
            } => {
                let input = node.inputs[0];
                let acc = match self.fusable_after(input, None) {
                    Some(v) => v,
                    None => self.inbox_vertex(id, input, Route::Unicast, None),
                };
                let accumulate_vertex = &mut self.vertices[acc];
                accumulate_vertex.holds_snapshots |= node.holds_state;
                accumulate_vertex.watermarks = accumulate_vertex.watermarks.and(node.watermarks);
                accumulate_vertex.stages.push(local.to_string());
                accumulate_vertex.terminal = Some(Terminal::Accumulate(Arc::clone(accumulate)));
                accumulate_vertex.output = Some(partial.item);
                accumulate_vertex.outputs = 1;
                let (edge_route, parallelism) = match route {
                    Some(r) => (Route::Partitioned(Arc::clone(r)), node.parallelism),
                    None => (Route::AllToOne, Some(1)),
                };
                let combine_vertex =
                    self.new_vertex(id, Head::Custom(Arc::clone(combine)), parallelism);
                self.vertices[combine_vertex].stages = vec!["combine".to_string()];
                self.vertices[combine_vertex].inputs = vec![partial.item];
                self.edges.push(PlannedEdge {
                    from: acc,
                    from_ordinal: 0,
                    to: combine_vertex,
                    to_ordinal: 0,
                    route: edge_route,
                    priority: 0,
                });
                combine_vertex
            }
            NodeKind::Join { head } => {
                let (probe, builds) = (node.inputs[0], &node.inputs[1..]);
                let shared = builds
                    .iter()
                    .any(|&b| self.share_an_upstream(self.node_vertex[probe], self.node_vertex[b]));
                let v = self.new_vertex(id, Head::Custom(Arc::clone(head)), node.parallelism);
                if shared {
                    // The build sides are drained first; a probe side fed by the same upstream
                    // would fill its queue and stop that upstream. Buffer it.
                    let t = self.output_of(probe);
                    let buffer = self.new_vertex(probe, Head::ProbeBuffer(t), None);
                    self.vertices[buffer].stages = vec!["probe-buffer".to_string()];
                    self.connect(probe, buffer, 0, Route::Unicast, 0);
                    self.vertices[buffer].terminal = Some(Terminal::Emit(t));
                    self.vertices[buffer].output = Some(t.item);
                    self.vertices[buffer].outputs = 1;
                    self.vertices[v].inputs.push(t.item);
                    self.edges.push(PlannedEdge {
                        from: buffer,
                        from_ordinal: 0,
                        to: v,
                        to_ordinal: 0,
                        route: Route::Unicast,
                        priority: 0,
                    });
                } else {
                    self.connect(probe, v, 0, Route::Unicast, 0);
                }
                for (ordinal, &build) in builds.iter().enumerate() {
                    self.connect(build, v, ordinal + 1, Route::Broadcast, -1);
                }
                v
            }
            NodeKind::StreamJoin {
                head,
                left_route,
                right_route,
            } => {
                let v = self.new_vertex(id, Head::Custom(Arc::clone(head)), node.parallelism);
                self.connect(
                    node.inputs[0],
                    v,
                    0,
                    Route::Partitioned(Arc::clone(left_route)),
                    0,
                );
                self.connect(
                    node.inputs[1],
                    v,
                    1,
                    Route::Partitioned(Arc::clone(right_route)),
                    0,
                );
                v
            }
            NodeKind::Sort { head } => {
                let v = self.new_vertex(id, Head::Custom(Arc::clone(head)), Some(1));
                self.vertices[v].ordered = true;
                self.connect(node.inputs[0], v, 0, Route::AllToOne, 0);
                v
            }
            NodeKind::AsyncMap { head, ordered } => {
                let v = self.new_vertex(id, Head::Custom(Arc::clone(head)), node.parallelism);
                self.vertices[v].ordered = *ordered;
                self.connect(node.inputs[0], v, 0, Route::Unicast, 0);
                v
            }
            NodeKind::Sink {
                terminal,
                preformat,
                route,
            } => {
                let input = node.inputs[0];
                let from = self.node_vertex[input];
                // The input's vertex, if it is open to one more link at its own parallelism.
                let open = self.fusable(input, self.vertices[from].parallelism);
                let fused = self.fusable(input, node.parallelism);
                let (v, terminal) = match (route, fused, preformat, open) {
                    (None, Some(v), _, _) => (v, terminal),
                    // Partitioned already: a keyed aggregation's pairs, by the same key.
                    (Some(r), Some(v), _, _)
                        if r.by_pair_key && self.graph.nodes[input].keyed_pairs =>
                    {
                        (v, terminal)
                    }
                    (Some(r), _, _, _) => (
                        self.inbox_vertex(
                            id,
                            input,
                            Route::Partitioned(Arc::clone(&r.route)),
                            node.parallelism,
                        ),
                        terminal,
                    ),
                    (None, None, Some(preformat), Some(from)) => {
                        let blocks = StageType::of::<FormattedRecords>();
                        self.vertices[from]
                            .links
                            .push(Arc::clone(&preformat.format));
                        self.vertices[from].stages.push("format".to_owned());
                        let v = self.new_vertex(id, Head::Inbox(blocks), node.parallelism);
                        self.connect_vertex(from, blocks, v, 0, Route::Unicast, 0);
                        (v, &preformat.terminal)
                    }
                    (None, None, _, _) => (
                        self.inbox_vertex(id, input, Route::Unicast, node.parallelism),
                        terminal,
                    ),
                };
                self.vertices[v].terminal = Some(Terminal::Sink(Arc::clone(terminal)));
                v
            }
        };
        self.fuse(v, id);
        self.node_vertex[id] = v;
    }

    /// The granule each vertex's watermarks may be throttled to, ms (1: none): the gcd of the
    /// frames of every window downstream of it, when every stage downstream is a window or
    /// keeps event times (see [`WatermarkUse`]) and its own stages emit nothing behind a
    /// watermark they sent. A vertex with nothing but such stages downstream (a sink) is not
    /// throttled: its watermarks still time the results at the sink.
    fn watermark_granules(&self) -> Vec<i64> {
        (0..self.vertices.len())
            .map(|v| {
                if self.vertices[v].watermarks == WatermarkUse::Exact {
                    return 1;
                }
                let mut need = WatermarkUse::Transparent;
                let mut seen = HashSet::from([v]);
                let mut todo = vec![v];
                while let Some(u) = todo.pop() {
                    for e in self.edges.iter().filter(|e| e.from == u) {
                        if seen.insert(e.to) {
                            need = need.and(self.vertices[e.to].watermarks);
                            todo.push(e.to);
                        }
                    }
                }
                match need {
                    WatermarkUse::Frames(granule) => granule,
                    WatermarkUse::Transparent | WatermarkUse::Exact => 1,
                }
            })
            .collect()
    }

    fn into_dag(self) -> Dag {
        let granules = self.watermark_granules();
        let mut dag = Dag::new();
        let mut names = HashSet::new();
        let mut ids = Vec::new();
        for (vertex, granule) in self.vertices.into_iter().zip(granules) {
            let base = if vertex.stages.len() == 1 {
                vertex.stages[0].clone()
            } else {
                format!("fused({})", vertex.stages.join(", "))
            };
            let mut name = base.clone();
            let mut n = 2;
            while !names.insert(name.clone()) {
                name = format!("{base}-{n}");
                n += 1;
            }
            let head = vertex.head;
            let links = vertex.links;
            let terminal = vertex
                .terminal
                .expect("every vertex ends in a terminal: sinks close branches");
            let holds_snapshots = vertex.holds_snapshots;
            let supplier = move |ctx: &ProcessorContext| -> Box<dyn Processor> {
                let mut chain: ErasedLink = match &terminal {
                    Terminal::Emit(t) => (t.emit)(),
                    Terminal::Accumulate(f) => f(),
                    Terminal::Sink(f) => f(ctx),
                };
                for wrap in links.iter().rev() {
                    chain = wrap(chain);
                }
                let processor = match &head {
                    Head::Source(f) => f(ctx, chain),
                    Head::Inbox(t) => (t.inbox_head)(chain),
                    Head::ProbeBuffer(t) => (t.probe_buffer)(chain),
                    Head::Custom(f) => f(chain),
                };
                if holds_snapshots {
                    Box::new(HoldingSnapshots::new(processor))
                } else {
                    processor
                }
            };
            let mut v = Vertex::new(name, supplier);
            for (ordinal, t) in vertex.inputs.iter().enumerate() {
                v = v.accepts_type_on(ordinal, *t);
            }
            if let Some(out) = vertex.output {
                v = v.emits_type(out);
            }
            if let Some(p) = vertex.parallelism {
                v = v.local_parallelism(p);
            }
            v = v.watermark_granule(granule);
            ids.push(dag.vertex(v));
        }
        for e in self.edges {
            let edge = Edge::between(ids[e.from], ids[e.to])
                .from_ordinal(e.from_ordinal)
                .to_ordinal(e.to_ordinal)
                .priority(e.priority);
            let edge = match e.route {
                Route::Unicast => edge,
                Route::Partitioned(r) => r(edge),
                Route::Broadcast => edge.broadcast(),
                Route::AllToOne => edge.all_to_one(),
            };
            dag.edge(edge);
        }
        dag
    }
}

#[cfg(test)]
mod tests {
    use weir_core::BoxError;

    use crate::Pipeline;
    use weir_exec::aggregate::{KeyCounter, counting};
    use weir_io::sinks::{Sink, SinkWriter};
    use weir_io::sources::{BatchSource, SourceReader};

    struct Nothing;
    impl SourceReader for Nothing {
        type Item = String;
        fn read(
            &mut self,
            _out: &mut weir_io::sources::Emitter<'_, String>,
        ) -> Result<bool, BoxError> {
            Ok(true)
        }
    }
    struct Discard<T>(std::marker::PhantomData<fn(T)>);
    impl<T: weir_core::Item> SinkWriter for Discard<T> {
        type Item = T;
        fn write(&mut self, _item: T) -> Result<(), BoxError> {
            Ok(())
        }
    }
    fn source(parallelism: Option<usize>) -> BatchSource<String> {
        BatchSource::new("read", parallelism, |_| Nothing)
    }
    fn sink<T: weir_core::Item>(parallelism: Option<usize>) -> Sink<T> {
        Sink::new("write", parallelism, |_| Discard(std::marker::PhantomData))
    }

    fn shape(p: &Pipeline) -> (Vec<String>, Vec<String>) {
        let dag = p.to_dag().unwrap();
        let names = dag
            .vertices()
            .iter()
            .map(|v| v.name().to_string())
            .collect();
        let edges = dag
            .edges()
            .iter()
            .map(|e| format!("{:?}", e.routing()))
            .collect();
        (names, edges)
    }

    #[test]
    fn word_count_fuses_source_tokenizer_and_accumulator() {
        // Word count: lines split into words, counted per word, most frequent first.
        let p = Pipeline::new();
        p.read_from(source(None))
            .flat_map(|line: String| {
                line.split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .grouping_key(|word: &String| word.clone())
            .aggregate(counting())
            .sort_by(|a: &(String, u64), b: &(String, u64)| b.1.cmp(&a.1))
            .write_to(sink::<(String, u64)>(Some(1)));
        let (names, edges) = shape(&p);
        assert_eq!(
            names,
            [
                "fused(read, flat-map, accumulate)",
                "combine",
                "fused(sort, write)"
            ]
        );
        assert_eq!(edges, ["partitioned", "all-to-one"]);
        let text = p.explain().unwrap();
        assert!(
            text.contains("'fused(read, flat-map, accumulate)':0 -> 'combine':0 [partitioned"),
            "{text}"
        );
        assert!(p.explain_dot().unwrap().starts_with("digraph"));
    }

    #[test]
    fn a_keyed_count_counts_behind_the_source_and_combines_behind_a_partitioned_edge() {
        let p = Pipeline::new();
        p.read_from(source(None))
            .map(|line| line.to_lowercase())
            .count_keys(|line: &String, counts: &mut KeyCounter<String>| {
                line.split_whitespace().for_each(|word| counts.add(word));
            })
            .sort_by(|a: &(String, u64), b: &(String, u64)| b.1.cmp(&a.1))
            .write_to(sink::<(String, u64)>(Some(1)));
        let (names, edges) = shape(&p);
        assert_eq!(
            names,
            [
                "fused(read, map, count-keys)",
                "combine",
                "fused(sort, write)"
            ]
        );
        assert_eq!(edges, ["partitioned", "all-to-one"]);
    }

    #[test]
    fn single_instance_source_is_not_fused_with_parallel_work() {
        let p = Pipeline::new();
        p.read_from(source(Some(1)))
            .map(|s| s.len())
            .filter(|n| *n > 0)
            .write_to(sink(None));
        let (names, edges) = shape(&p);
        assert_eq!(names, ["read", "fused(map, filter, write)"]);
        assert_eq!(edges, ["unicast"]);
    }

    #[test]
    fn a_source_parsing_on_a_pool_takes_the_stateless_stages_and_the_accumulate() {
        let p = Pipeline::new();
        p.read_from(source(Some(1)).with_pooled_parsing(true))
            .map(|s| s.len())
            .filter(|n| *n > 0)
            .grouping_key(|n: &usize| *n)
            .aggregate(counting())
            .write_to(sink(None));
        let (names, edges) = shape(&p);
        assert_eq!(
            names,
            [
                "fused(read, map, filter, accumulate)",
                "fused(combine, write)"
            ]
        );
        assert_eq!(edges, ["partitioned"]);
    }

    #[test]
    fn after_a_pooled_source_a_sink_rebalance_or_own_parallelism_still_spreads_the_work() {
        // A sink keeps its own rule: part files are written on every worker.
        let p = Pipeline::new();
        p.read_from(source(Some(1)).with_pooled_parsing(true))
            .map(|s| s.len())
            .write_to(sink(None));
        assert_eq!(shape(&p).0, ["fused(read, map)", "write"]);

        let p = Pipeline::new();
        p.read_from(source(Some(1)).with_pooled_parsing(true))
            .rebalance()
            .map(|s| s.len())
            .write_to(sink(None));
        assert_eq!(shape(&p).0, ["read", "fused(rebalance, map, write)"]);

        let p = Pipeline::new();
        p.read_from(source(Some(1)).with_pooled_parsing(true))
            .map(|s| s.len())
            .local_parallelism(2)
            .write_to(sink(Some(2)));
        assert_eq!(shape(&p).0, ["read", "fused(map, write)"]);
    }
    #[test]
    fn an_async_map_is_a_vertex_of_its_own_and_keeps_its_order() {
        let p = Pipeline::new();
        p.read_from(source(None))
            .map_async(
                weir_exec::async_io::AsyncOptions::ordered(),
                |s: String| async move { Ok::<_, std::convert::Infallible>(Some(s.len())) },
            )
            .local_parallelism(1)
            .filter(|n| *n > 0)
            .write_to(sink(None));
        let (names, edges) = shape(&p);
        assert_eq!(names, ["read", "fused(map-async, filter, write)"]);
        assert_eq!(edges, ["unicast"]);
    }

    #[test]
    fn fan_out_ends_the_chain() {
        let p = Pipeline::new();
        let s = p.read_from(source(None)).map(|s| s.len());
        s.write_to(sink(None));
        s.filter(|n| *n > 3).write_to(sink(None));
        let (names, edges) = shape(&p);
        assert_eq!(names, ["fused(read, map)", "write", "fused(filter, write)"]);
        assert_eq!(edges, ["unicast", "unicast"]);
    }

    #[test]
    fn global_aggregate_and_join_shapes() {
        let p = Pipeline::new();
        let build = p
            .read_from(source(None))
            .grouping_key(|s: &String| s.len())
            .aggregate(counting());
        p.read_from(source(None))
            .hash_join(
                &build,
                crate::join_on(|s: &String| s.len(), |b: &(usize, u64)| b.0),
                |s, b| (s.clone(), b.map(|b| b.1)),
            )
            .aggregate(counting())
            .write_to(sink(None));
        let dag = p.to_dag().unwrap();
        let names: Vec<&str> = dag.vertices().iter().map(|v| v.name()).collect();
        // The single-instance combine is not fused with the default-parallelism sink.
        assert_eq!(
            names,
            [
                "fused(read, accumulate)",
                "combine",
                "read",
                "fused(hash-join, accumulate)",
                "combine-2",
                "write"
            ]
        );
        let routes: Vec<String> = dag
            .edges()
            .iter()
            .map(|e| format!("{:?}", e.routing()))
            .collect();
        assert_eq!(
            routes,
            [
                "partitioned",
                "unicast",
                "broadcast",
                "all-to-one",
                "unicast"
            ]
        );
        let build_edge = &dag.edges()[2];
        assert!(
            format!("{:?}", build_edge).contains("priority: -1"),
            "{build_edge:?}"
        );
        dag.validate().unwrap();
    }

    /// Each vertex's name and the granule its watermarks are throttled to.
    fn granules(p: &Pipeline) -> Vec<(String, i64)> {
        p.to_dag()
            .unwrap()
            .vertices()
            .iter()
            .map(|v| (v.name().to_string(), v.watermark_granule_ms()))
            .collect()
    }

    fn ticks_in(p: &Pipeline) -> crate::stream::StreamStage<i64> {
        /// Reads nothing: only the plan matters here.
        struct NoTicks;
        impl SourceReader for NoTicks {
            type Item = i64;
            fn read(
                &mut self,
                _out: &mut weir_io::sources::Emitter<'_, i64>,
            ) -> Result<bool, BoxError> {
                Ok(true)
            }
        }
        p.read_from(weir_io::sources::stream::StreamSource::new(
            "ticks",
            None,
            |_| NoTicks,
        ))
        .with_timestamps(|t: &i64| *t, 0)
    }

    #[test]
    fn watermarks_before_sliding_and_tumbling_windows_go_at_their_slide() {
        use crate::stream::{KeyedWindowResult, WindowDefinition};
        // q5's shape: counts per key in sliding windows, then the top per window end.
        let p = Pipeline::new();
        ticks_in(&p)
            .filter(|t| *t > 0)
            .grouping_key(|t: &i64| *t % 10)
            .window(WindowDefinition::sliding(10_000, 2_000))
            .aggregate(counting())
            .grouping_key(|r: &KeyedWindowResult<i64, u64>| r.end)
            .window(WindowDefinition::tumbling(2_000))
            .aggregate(counting())
            .map(|r| r.value)
            .write_to(sink(None));
        assert_eq!(
            granules(&p),
            [
                ("fused(ticks, filter, accumulate)".to_string(), 2_000),
                ("fused(combine, accumulate)".to_string(), 2_000),
                // Only a sink after it: every watermark still times the results.
                (
                    "fused(combine, map, strip-timestamps, write)".to_string(),
                    1
                ),
            ]
        );
    }

    #[test]
    fn the_granule_is_the_gcd_of_the_windows_downstream() {
        use crate::stream::WindowDefinition;
        let p = Pipeline::new();
        let s = ticks_in(&p).map(|t| t * 2);
        s.grouping_key(|t: &i64| *t)
            .window(WindowDefinition::tumbling(3_000))
            .aggregate(counting())
            .write_to(sink(None));
        s.window(WindowDefinition::sliding(4_000, 2_000))
            .aggregate(counting())
            .write_to(sink(None));
        let g = granules(&p);
        assert_eq!(g[0], ("fused(ticks, map)".to_string(), 1_000), "{g:?}");
        assert_eq!(g[1].1, 3_000, "{g:?}");
        assert_eq!(g[3].1, 2_000, "{g:?}");
    }

    #[test]
    fn a_session_window_join_or_batch_stage_downstream_gets_every_watermark() {
        use crate::stream::WindowDefinition;
        // A session closes at its last item's time plus the gap: any millisecond.
        let p = Pipeline::new();
        ticks_in(&p)
            .grouping_key(|t: &i64| *t)
            .window(WindowDefinition::tumbling(1_000))
            .aggregate(counting())
            .grouping_key(|r| r.key)
            .window(WindowDefinition::session(500))
            .aggregate(counting())
            .write_to(sink(None));
        let g = granules(&p);
        assert!(g.iter().all(|(_, granule)| *granule == 1), "{g:?}");

        // A batch stage may change the event times it is handed: every watermark goes on.
        let p = Pipeline::new();
        ticks_in(&p)
            .with_timestamp_items()
            .map(|t| t)
            .write_to(sink(None));
        let g = granules(&p);
        assert!(g.iter().all(|(_, granule)| *granule == 1), "{g:?}");

        // Nothing but stateless stages and sinks: nothing to throttle for.
        let p = Pipeline::new();
        ticks_in(&p).map(|t| t + 1).rebalance().write_to(sink(None));
        let g = granules(&p);
        assert!(g.iter().all(|(_, granule)| *granule == 1), "{g:?}");
    }
}
