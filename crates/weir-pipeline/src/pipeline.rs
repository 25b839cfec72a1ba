//! The typed Pipeline API: stages you chain, planned into a core DAG when you run it.
//!
//! ```
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! let (sink, results) = sinks::collection::list();
//! p.read_from(sources::collection::items(vec!["a b", "b c", "c"]))
//!     .flat_map(|line: &str| line.split(' ').map(str::to_string).collect::<Vec<_>>())
//!     .grouping_key(|word: &String| word.clone())
//!     .aggregate(aggregate::counting())
//!     .write_to(sink);
//! p.run().unwrap();
//! let mut counts = results.take();
//! counts.sort();
//! assert_eq!(counts, [("a".into(), 1), ("b".into(), 2), ("c".into(), 2)]);
//! ```
//!
//! Stages are cheap handles: clone one, or use it as the input of several stages, and its
//! items go to each of them. Nothing runs until [`Pipeline::run`] or [`Pipeline::submit`]; a
//! misuse the compiler cannot catch (no sink, a branch without a sink, a stage of another
//! pipeline) is reported then, before anything starts.

use std::cell::RefCell;
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_core::{Dag, Edge, Executor, Item, Job, JobConfig, PartitionKey};

use crate::error::{Misuse, Result};
use crate::graph::{
    Graph, HeadFn, Node, NodeId, NodeKind, RouteFn, SourceHeadFactory, StageType, TerminalFn,
    WatermarkUse, WrapFn,
};
use crate::plan::plan;
use weir_exec::aggregate::{AggregateOperation, Counting, KeyCounter};
use weir_exec::links::aggregate::{
    AccumulateAll, AccumulateByKey, CombineAll, CombineByKey, CountKeys,
};
use weir_exec::links::join::{BuildTable, HashJoin1, HashJoin2, KeyFn, Merge1, Merge2};
use weir_exec::links::link::{erase, unerase};
use weir_exec::links::sort::SortHead;
use weir_exec::links::transform::{
    FilterLink, FilterMapLink, FlatMapLink, KeyedStatefulLink, MapLink, PeekLink, StatefulLink,
};
use weir_io::sinks::Sink;
use weir_io::sources::BatchSource;

mod async_stages;
mod results;

pub use results::JobResults;

/// A pipeline under construction. See the [module docs](self).
#[derive(Clone)]
pub struct Pipeline {
    graph: Rc<RefCell<Graph>>,
}

impl Default for Pipeline {
    fn default() -> Self {
        Self::new()
    }
}

impl Pipeline {
    /// An empty pipeline.
    pub fn new() -> Self {
        Pipeline {
            graph: Rc::new(RefCell::new(Graph::new())),
        }
    }

    /// Starts a branch that reads from `source`: a [`BatchSource`] gives a [`BatchStage`], a
    /// [`StreamSource`](crate::stream::StreamSource) a
    /// [`StreamSourceStage`](crate::stream::StreamSourceStage) whose event time you choose next.
    pub fn read_from<S: Source>(&self, source: S) -> S::Stage {
        source.read_into(self)
    }

    pub(crate) fn add_source_node<T: Item>(
        &self,
        name: String,
        parallelism: Option<usize>,
        head: SourceHeadFactory,
        pooled_parsing: bool,
    ) -> BatchStage<T> {
        let node = self.graph.borrow_mut().add(Node {
            name,
            kind: NodeKind::Source {
                head,
                pooled_parsing,
            },
            inputs: Vec::new(),
            output: Some(StageType::of::<T>()),
            parallelism,
            holds_state: false,
            keyed_pairs: false,
            // A source never emits an item behind its own watermark.
            watermarks: WatermarkUse::Transparent,
        });
        BatchStage::at(Rc::clone(&self.graph), node)
    }

    /// Plans the pipeline into a core DAG.
    ///
    /// # Errors
    /// The first misuse: no sink, a branch without a sink, a stage of another pipeline.
    pub fn to_dag(&self) -> Result<Dag> {
        plan(&self.graph.borrow())
    }

    /// The plan as text: one line per vertex, naming the stages fused into it, then one line
    /// per edge with its routing.
    ///
    /// # Errors
    /// As [`to_dag`](Self::to_dag).
    pub fn explain(&self) -> Result<String> {
        Ok(self.to_dag()?.to_text())
    }

    /// The plan as a Graphviz DOT graph.
    ///
    /// # Errors
    /// As [`to_dag`](Self::to_dag).
    pub fn explain_dot(&self) -> Result<String> {
        Ok(self.to_dag()?.to_dot())
    }

    /// Plans the pipeline and starts it on `executor`.
    ///
    /// # Errors
    /// A planning error, or the runtime's refusal ([`weir_core::Error::InvalidDag`],
    /// [`weir_core::Error::InitFailed`]); nothing has run in either case.
    pub fn submit(&self, executor: &Executor, config: JobConfig) -> Result<Job> {
        Ok(executor.submit(self.to_dag()?, config)?)
    }

    /// Runs the pipeline on the shared executor and waits for it to finish.
    ///
    /// # Errors
    /// A planning error, or the job's failure, naming the vertex and the cause.
    pub fn run(&self) -> Result<()> {
        let job = self.submit(&Executor::shared(), JobConfig::default())?;
        Ok(job.join()?)
    }
}

/// Something [`Pipeline::read_from`] can read: a batch source or a stream source.
pub trait Source {
    /// The stage reading it gives.
    type Stage;
    /// Adds the source to `pipeline`.
    fn read_into(self, pipeline: &Pipeline) -> Self::Stage;
}

impl<T: Item> Source for BatchSource<T> {
    type Stage = BatchStage<T>;
    fn read_into(self, pipeline: &Pipeline) -> BatchStage<T> {
        let parts = self.into_parts();
        pipeline.add_source_node(
            parts.name,
            parts.parallelism,
            parts.head,
            parts.pooled_parsing,
        )
    }
}

/// A finite stage of items of type `T`. See the [module docs](self).
pub struct BatchStage<T> {
    graph: Rc<RefCell<Graph>>,
    node: NodeId,
    _item: PhantomData<fn() -> T>,
}

impl<T> Clone for BatchStage<T> {
    fn clone(&self) -> Self {
        BatchStage {
            graph: Rc::clone(&self.graph),
            node: self.node,
            _item: PhantomData,
        }
    }
}

impl<T> Debug for BatchStage<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchStage")
            .field("name", &self.graph.borrow().nodes[self.node].name)
            .finish()
    }
}

pub(crate) use weir_exec::links::factories::wrap_with;

impl<T: Item> BatchStage<T> {
    fn at(graph: Rc<RefCell<Graph>>, node: NodeId) -> Self {
        BatchStage {
            graph,
            node,
            _item: PhantomData,
        }
    }

    /// The stage's node in the pipeline graph.
    pub(crate) fn node_id(&self) -> NodeId {
        self.node
    }

    /// Adds a stage of kind `kind` fed by this stage and then `more_inputs`.
    pub(crate) fn add_node<R: Item>(
        &self,
        name: &str,
        kind: NodeKind,
        more_inputs: Vec<NodeId>,
    ) -> BatchStage<R> {
        let mut inputs = vec![self.node];
        inputs.extend(more_inputs);
        self.add(name, kind, inputs)
    }

    fn add<R: Item>(&self, name: &str, kind: NodeKind, inputs: Vec<NodeId>) -> BatchStage<R> {
        let node = self.graph.borrow_mut().add(Node {
            name: name.to_string(),
            kind,
            inputs,
            output: Some(StageType::of::<R>()),
            parallelism: None,
            holds_state: false,
            keyed_pairs: false,
            watermarks: WatermarkUse::Exact,
        });
        BatchStage::at(Rc::clone(&self.graph), node)
    }

    /// Marks this stage as keeping state that snapshots cannot save (see
    /// [`Node::holds_state`](crate::graph::Node)).
    fn holding_state(self) -> Self {
        self.graph.borrow_mut().nodes[self.node].holds_state = true;
        self
    }

    /// Records what this stage needs of watermarks (see [`WatermarkUse`]); stream stages
    /// that keep event times and windows say so, everything else stays `Exact`.
    pub(crate) fn using_watermarks(self, watermarks: WatermarkUse) -> Self {
        self.graph.borrow_mut().nodes[self.node].watermarks = watermarks;
        self
    }

    /// Marks this stage's output as pairs partitioned by their first field (see
    /// [`Node::keyed_pairs`](crate::graph::Node)).
    fn emitting_keyed_pairs(self) -> Self {
        self.graph.borrow_mut().nodes[self.node].keyed_pairs = true;
        self
    }

    pub(crate) fn transform<R: Item>(&self, name: &str, wrap: WrapFn) -> BatchStage<R> {
        self.add(name, NodeKind::Transform { wrap }, vec![self.node])
    }

    /// Records a misuse if `other` is from another pipeline; returns whether it is usable.
    fn check_same_pipeline<U>(&self, other: &BatchStage<U>, consumer: &str) -> bool {
        if Rc::ptr_eq(&self.graph, &other.graph) {
            return true;
        }
        let stage = other.graph.borrow().nodes[other.node].name.clone();
        self.graph.borrow_mut().errors.push(Misuse::ForeignStage {
            stage,
            consumer: consumer.to_string(),
        });
        false
    }

    /// Renames the stage, as it appears in plans and errors.
    pub fn named(self, name: impl Into<String>) -> Self {
        self.graph.borrow_mut().nodes[self.node].name = name.into();
        self
    }

    /// Sets the number of instances of this stage's vertex on each member.
    pub fn local_parallelism(self, n: usize) -> Self {
        self.graph.borrow_mut().nodes[self.node].parallelism = Some(n);
        self
    }

    /// Applies `f` to every item.
    pub fn map<R: Item>(&self, f: impl Fn(T) -> R + Send + Sync + 'static) -> BatchStage<R> {
        let f = Arc::new(f);
        self.transform(
            "map",
            wrap_with::<T, R>(move |next| {
                Box::new(MapLink {
                    f: Arc::clone(&f),
                    next,
                    out: Vec::new(),
                })
            }),
        )
    }

    /// Keeps the items for which `f` is true.
    pub fn filter(&self, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> BatchStage<T> {
        let f = Arc::new(f);
        self.transform(
            "filter",
            wrap_with::<T, T>(move |next| {
                Box::new(FilterLink {
                    f: Arc::clone(&f),
                    next,
                })
            }),
        )
    }

    /// Replaces every item by the items of what `f` returns: a `Vec`, an `Option`, any
    /// iterator, or a [`Traverser`](weir_core::Traverser) through its `into_iter()`.
    pub fn flat_map<R, I>(&self, f: impl Fn(T) -> I + Send + Sync + 'static) -> BatchStage<R>
    where
        R: Item,
        I: IntoIterator<Item = R> + 'static,
        I::IntoIter: Send,
    {
        let f = Arc::new(f);
        self.transform(
            "flat-map",
            wrap_with::<T, R>(move |next| Box::new(FlatMapLink::new(Arc::clone(&f), next))),
        )
    }

    /// Maps and filters in one step: `f` returns `Some(result)` or nothing. Cheaper than a
    /// [`flat_map`](Self::flat_map) returning an `Option`: a batch's results are collected in
    /// one pass and handed on at once.
    pub fn filter_map<R: Item>(
        &self,
        f: impl Fn(T) -> Option<R> + Send + Sync + 'static,
    ) -> BatchStage<R> {
        let f = Arc::new(f);
        self.transform(
            "filter-map",
            wrap_with::<T, R>(move |next| {
                Box::new(FilterMapLink {
                    f: Arc::clone(&f),
                    next,
                    out: Vec::new(),
                })
            }),
        )
    }

    /// Maps with state kept per processor instance: `create` makes each instance's state,
    /// `f` may update it and emits `Some(result)` or nothing.
    pub fn map_stateful<S, R>(
        &self,
        create: impl Fn() -> S + Send + Sync + 'static,
        f: impl Fn(&mut S, T) -> Option<R> + Send + Sync + 'static,
    ) -> BatchStage<R>
    where
        S: Send + 'static,
        R: Item,
    {
        let f = Arc::new(f);
        self.transform(
            "map-stateful",
            wrap_with::<T, R>(move |next| {
                Box::new(StatefulLink {
                    state: create(),
                    f: Arc::clone(&f),
                    next,
                    out: Vec::new(),
                    completed: false,
                })
            }),
        )
        .holding_state()
    }

    /// Logs every item at `info` level, passing it on unchanged.
    pub fn peek(&self) -> BatchStage<T>
    where
        T: Debug,
    {
        self.peek_with(|item: &T| tracing::info!(?item, "peek"))
    }

    /// Calls `f` on every item, passing it on unchanged.
    pub fn peek_with(&self, f: impl Fn(&T) + Send + Sync + 'static) -> BatchStage<T> {
        let f = Arc::new(f);
        self.transform(
            "peek",
            wrap_with::<T, T>(move |next| {
                Box::new(PeekLink {
                    f: Arc::clone(&f),
                    next,
                })
            }),
        )
    }

    /// Spreads the items round-robin over the next stage's instances: a vertex boundary that
    /// lets a slow stage after a single-instance one use every core.
    pub fn rebalance(&self) -> BatchStage<T> {
        self.add(
            "rebalance",
            NodeKind::Rebalance { route: None },
            vec![self.node],
        )
    }

    /// Sends each item to the instance that owns its key's partition.
    pub fn rebalance_by<K: PartitionKey + 'static>(
        &self,
        key: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> BatchStage<T> {
        self.rebalance_with(route_by::<T, K>(Arc::new(key)))
    }

    /// Sends each item over an edge that `route` makes partitioned.
    pub(crate) fn rebalance_with(&self, route: RouteFn) -> BatchStage<T> {
        self.add(
            "rebalance",
            NodeKind::Rebalance { route: Some(route) },
            vec![self.node],
        )
    }

    /// The items of this stage and of `other`, in no particular order.
    pub fn merge(&self, other: &BatchStage<T>) -> BatchStage<T> {
        if self.check_same_pipeline(other, "merge") && self.node == other.node {
            let stage = self.graph.borrow().nodes[self.node].name.clone();
            self.graph.borrow_mut().errors.push(Misuse::StageUsedTwice {
                stage,
                consumer: "merge".into(),
            });
        }
        self.add("merge", NodeKind::Merge, vec![self.node, other.node])
    }

    /// Groups the items by `key` for a keyed aggregation or a keyed stateful map.
    pub fn grouping_key<K>(
        &self,
        key: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> KeyedBatchStage<T, K>
    where
        K: Item + Hash + Eq + PartitionKey,
    {
        KeyedBatchStage {
            stage: self.clone(),
            key: Arc::new(key),
        }
    }

    /// Aggregates every item into one result.
    pub fn aggregate<Op: AggregateOperation<T>>(&self, op: Op) -> BatchStage<Op::Output> {
        let op = Arc::new(op);
        let acc_op = Arc::clone(&op);
        let accumulate: TerminalFn =
            Arc::new(move || erase::<T>(Box::new(AccumulateAll::new(Arc::clone(&acc_op)))));
        let combine: HeadFn = Arc::new(move |chain| {
            Box::new(CombineAll::<T, Op>::new(
                Arc::clone(&op),
                unerase::<Op::Output>(chain),
            ))
        });
        let kind = NodeKind::Aggregate {
            local: "accumulate",
            accumulate,
            partial: StageType::of::<Op::Acc>(),
            route: None,
            combine,
        };
        self.add("aggregate", kind, vec![self.node]).holding_state()
    }

    /// Counts the keys found in each item, such as the words of a block of text: `keys(item,
    /// counts)` adds each key it finds to `counts` ([`KeyCounter::add`]), and the stage
    /// gives one `(key, count)` pair per distinct key, in no particular order.
    ///
    /// The result is that of `flat_map(..)` to the keys, then `grouping_key` and
    /// `aggregate(counting())`, without an item per key: each instance counts into a table of
    /// its own, fused behind the stages before it, and looks a key up by its borrowed form
    /// (`&str` for a `String` key), so a key already counted costs one hash and one probe,
    /// and nothing is built or moved for it. At the end of the input only the `(key, count)`
    /// pairs of each instance's table cross a partitioned edge, to the instance that owns
    /// the key, where they are added up: a two-stage aggregation, as
    /// [`KeyedBatchStage::aggregate`] runs.
    ///
    /// ```
    /// use weir::aggregate::KeyCounter;
    /// use weir::prelude::*;
    ///
    /// let p = Pipeline::new();
    /// let (sink, results) = sinks::collection::list();
    /// p.read_from(sources::collection::items(vec!["a b", "b c", "c c"]))
    ///     .count_keys(|line: &&str, counts: &mut KeyCounter<String>| {
    ///         line.split(' ').for_each(|word| counts.add(word));
    ///     })
    ///     .write_to(sink);
    /// p.run().unwrap();
    /// let mut counts = results.take();
    /// counts.sort();
    /// assert_eq!(counts, [("a".into(), 1), ("b".into(), 2), ("c".into(), 3)]);
    /// ```
    ///
    /// Like every batch aggregation, it holds snapshots back until its input ends.
    pub fn count_keys<K>(
        &self,
        keys: impl Fn(&T, &mut KeyCounter<K>) + Send + Sync + 'static,
    ) -> BatchStage<(K, u64)>
    where
        K: Item + Hash + Eq + PartitionKey,
    {
        let keys = Arc::new(keys);
        let accumulate: TerminalFn =
            Arc::new(move || erase::<T>(Box::new(CountKeys::<T, K, _>::new(Arc::clone(&keys)))));
        let combine: HeadFn = Arc::new(move |chain| {
            Box::new(CombineByKey::<K, K, Counting>::new(
                Arc::new(Counting),
                unerase::<(K, u64)>(chain),
            ))
        });
        let route = route_by::<(K, u64), K>(Arc::new(|pair: &(K, u64)| pair.0.clone()));
        let kind = NodeKind::Aggregate {
            local: "count-keys",
            accumulate,
            partial: StageType::of::<(K, u64)>(),
            route: Some(route),
            combine,
        };
        self.add("count-keys", kind, vec![self.node])
            .holding_state()
            .emitting_keyed_pairs()
    }

    /// Joins every item with the items of `build` whose key matches, as a left outer join:
    /// `merge` is called once per match, or once with `None` when nothing matches. The build
    /// side is read completely first and copied to every instance.
    pub fn hash_join<K, B, R>(
        &self,
        build: &BatchStage<B>,
        on: JoinClause<T, B, K>,
        merge: impl Fn(&T, Option<&B>) -> R + Send + Sync + 'static,
    ) -> BatchStage<R>
    where
        K: Item + Hash + Eq,
        B: Item,
        R: Item,
    {
        let merge: Merge1<T, B, R> = Arc::new(move |t, b| Some(merge(t, b)));
        self.join1("hash-join", build, on, merge)
    }

    /// Like [`hash_join`](Self::hash_join), but an item without a match is dropped.
    pub fn inner_hash_join<K, B, R>(
        &self,
        build: &BatchStage<B>,
        on: JoinClause<T, B, K>,
        merge: impl Fn(&T, &B) -> R + Send + Sync + 'static,
    ) -> BatchStage<R>
    where
        K: Item + Hash + Eq,
        B: Item,
        R: Item,
    {
        let merge: Merge1<T, B, R> = Arc::new(move |t, b| b.map(|b| merge(t, b)));
        self.join1("inner-hash-join", build, on, merge)
    }

    fn join1<K, B, R>(
        &self,
        name: &str,
        build: &BatchStage<B>,
        on: JoinClause<T, B, K>,
        merge: Merge1<T, B, R>,
    ) -> BatchStage<R>
    where
        K: Item + Hash + Eq,
        B: Item,
        R: Item,
    {
        self.check_same_pipeline(build, name);
        let JoinClause {
            probe_key,
            build_key,
        } = on;
        let head: HeadFn = Arc::new(move |chain| {
            Box::new(HashJoin1::new(
                Arc::clone(&probe_key),
                BuildTable::new(Arc::clone(&build_key)),
                Arc::clone(&merge),
                unerase::<R>(chain),
            ))
        });
        self.add(name, NodeKind::Join { head }, vec![self.node, build.node])
            .holding_state()
    }

    /// Joins every item with two build sides at once, as a left outer join on each: `merge` is
    /// called for every combination of matches, with `None` for a side without a match.
    pub fn hash_join2<K1, B1, K2, B2, R>(
        &self,
        build1: &BatchStage<B1>,
        on1: JoinClause<T, B1, K1>,
        build2: &BatchStage<B2>,
        on2: JoinClause<T, B2, K2>,
        merge: impl Fn(&T, Option<&B1>, Option<&B2>) -> R + Send + Sync + 'static,
    ) -> BatchStage<R>
    where
        K1: Item + Hash + Eq,
        B1: Item,
        K2: Item + Hash + Eq,
        B2: Item,
        R: Item,
    {
        self.check_same_pipeline(build1, "hash-join2");
        self.check_same_pipeline(build2, "hash-join2");
        let merge: Merge2<T, B1, B2, R> = Arc::new(move |t, b1, b2| Some(merge(t, b1, b2)));
        let head: HeadFn = Arc::new(move |chain| {
            Box::new(HashJoin2::new(
                (Arc::clone(&on1.probe_key), Arc::clone(&on2.probe_key)),
                (
                    BuildTable::new(Arc::clone(&on1.build_key)),
                    BuildTable::new(Arc::clone(&on2.build_key)),
                ),
                Arc::clone(&merge),
                unerase::<R>(chain),
            ))
        });
        self.add(
            "hash-join2",
            NodeKind::Join { head },
            vec![self.node, build1.node, build2.node],
        )
        .holding_state()
    }

    /// Removes duplicate items.
    pub fn distinct(&self) -> BatchStage<T>
    where
        T: Hash + Eq + PartitionKey,
    {
        self.grouping_key(|t: &T| t.clone()).distinct()
    }

    /// Sorts all items (stable). Runs in one instance after the whole input has arrived.
    pub fn sort(&self) -> BatchStage<T>
    where
        T: Ord,
    {
        self.sort_by(|a: &T, b: &T| a.cmp(b))
    }

    /// Sorts all items by `key` (stable).
    pub fn sort_by_key<K: Ord>(
        &self,
        key: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> BatchStage<T> {
        self.sort_by(move |a: &T, b: &T| key(a).cmp(&key(b)))
    }

    /// Sorts all items with a comparator (stable).
    pub fn sort_by(
        &self,
        compare: impl Fn(&T, &T) -> std::cmp::Ordering + Send + Sync + 'static,
    ) -> BatchStage<T> {
        // The concrete comparison, so that the sort calls it inline.
        let compare = Arc::new(compare);
        let head: HeadFn = Arc::new(move |chain| {
            Box::new(SortHead::new(Arc::clone(&compare), unerase::<T>(chain)))
        });
        self.add("sort", NodeKind::Sort { head }, vec![self.node])
            .holding_state()
    }

    /// Writes every item to `sink`. Every branch of a pipeline ends here.
    pub fn write_to(&self, sink: Sink<T>) {
        let sink = sink.into_parts();
        self.graph.borrow_mut().add(Node {
            name: sink.name,
            kind: NodeKind::Sink {
                terminal: sink.terminal,
                preformat: sink.preformat,
                route: sink.route,
            },
            inputs: vec![self.node],
            output: None,
            parallelism: sink.parallelism,
            holds_state: false,
            keyed_pairs: false,
            // A sink closes no window: a watermark only times the results before it.
            watermarks: WatermarkUse::Transparent,
        });
    }
}

/// How two stages join: a key taken from each side. See [`join_on`].
pub struct JoinClause<T, B, K> {
    probe_key: KeyFn<T, K>,
    build_key: KeyFn<B, K>,
}

impl<T, B, K> JoinClause<T, B, K> {
    /// The two key functions.
    pub(crate) fn into_keys(self) -> (KeyFn<T, K>, KeyFn<B, K>) {
        (self.probe_key, self.build_key)
    }
}

/// Joins where `probe_key(item)` equals `build_key(build_item)`.
pub fn join_on<T, B, K>(
    probe_key: impl Fn(&T) -> K + Send + Sync + 'static,
    build_key: impl Fn(&B) -> K + Send + Sync + 'static,
) -> JoinClause<T, B, K> {
    JoinClause {
        probe_key: Arc::new(probe_key),
        build_key: Arc::new(build_key),
    }
}

/// A partitioned-edge route by `key`.
pub(crate) fn route_by<T: Item, K: PartitionKey + 'static>(key: KeyFn<T, K>) -> RouteFn {
    Arc::new(move |edge: Edge| {
        let key = Arc::clone(&key);
        edge.partitioned(move |t: &T| key(t))
    })
}

/// A stage whose items are grouped by a key. See [`BatchStage::grouping_key`].
pub struct KeyedBatchStage<T, K> {
    stage: BatchStage<T>,
    key: KeyFn<T, K>,
}

impl<T: Item, K: Item + Hash + Eq + PartitionKey> KeyedBatchStage<T, K> {
    /// Aggregates each key's items into one `(key, result)` pair.
    pub fn aggregate<Op: AggregateOperation<T>>(&self, op: Op) -> BatchStage<(K, Op::Output)> {
        let op = Arc::new(op);
        let key = Arc::clone(&self.key);
        let acc_op = Arc::clone(&op);
        let accumulate: TerminalFn = Arc::new(move || {
            erase::<T>(Box::new(AccumulateByKey::<T, K, _, Op>::new(
                Arc::clone(&key),
                Arc::clone(&acc_op),
            )))
        });
        let combine: HeadFn = Arc::new(move |chain| {
            Box::new(CombineByKey::<T, K, Op>::new(
                Arc::clone(&op),
                unerase::<(K, Op::Output)>(chain),
            ))
        });
        let route = route_by::<(K, Op::Acc), K>(Arc::new(|pair: &(K, Op::Acc)| pair.0.clone()));
        let kind = NodeKind::Aggregate {
            local: "accumulate",
            accumulate,
            partial: StageType::of::<(K, Op::Acc)>(),
            route: Some(route),
            combine,
        };
        self.stage
            .add("aggregate", kind, vec![self.stage.node])
            .holding_state()
            .emitting_keyed_pairs()
    }

    /// Maps with state kept per key: `create` makes a key's state on its first item, `f` may
    /// update it and emits `Some(result)` or nothing. Every key's items meet in one instance.
    pub fn map_stateful<S, R>(
        &self,
        create: impl Fn() -> S + Send + Sync + 'static,
        f: impl Fn(&mut S, &K, T) -> Option<R> + Send + Sync + 'static,
    ) -> BatchStage<R>
    where
        S: Send + 'static,
        R: Item,
    {
        let key = Arc::clone(&self.key);
        let (create, f) = (Arc::new(create), Arc::new(f));
        let wrap = wrap_with::<T, R>(move |next| {
            Box::new(KeyedStatefulLink {
                states: FxHashMap::default(),
                key: Arc::clone(&key),
                create: Arc::clone(&create),
                f: Arc::clone(&f),
                next,
            })
        });
        let route = route_by::<T, K>(Arc::clone(&self.key));
        self.stage
            .add(
                "map-stateful",
                NodeKind::Keyed { wrap, route },
                vec![self.stage.node],
            )
            .holding_state()
    }

    /// Keeps the first item of each key.
    pub fn distinct(&self) -> BatchStage<T> {
        self.map_stateful(
            || false,
            |seen: &mut bool, _key: &K, item: T| (!std::mem::replace(seen, true)).then_some(item),
        )
        .named("distinct")
    }
}
