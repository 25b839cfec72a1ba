//! Edges and routing: partitioned, broadcast, isolated, all-to-one, priorities, and the metrics of what flowed.

use super::*;

#[test]
fn map_pipeline_at_several_parallelisms() {
    let executor = executor();
    const N: u64 = 20_000;
    for parallelism in [1, 2, 4] {
        let mut dag = Dag::new();
        let source = dag.vertex(
            Vertex::new("source", |_| IterSource::new(0..N))
                .emits::<u64>()
                .local_parallelism(1),
        );
        let map = dag.vertex(
            Vertex::new("map", |_| MapP::new(|x: u64| x * 3 + 1))
                .accepts::<u64>()
                .emits::<u64>()
                .local_parallelism(parallelism),
        );
        let (supplier, collected) = RecordingSink::<u64>::supplier();
        let sink = dag.vertex(
            Vertex::new("sink", supplier)
                .accepts::<u64>()
                .local_parallelism(parallelism),
        );
        dag.edge(Edge::between(source, map));
        dag.edge(Edge::between(map, sink));

        let job = executor.submit(dag, JobConfig::default()).unwrap();
        finish(job).unwrap();

        let collected = std::mem::take(&mut *collected.lock().unwrap());
        let instances: BTreeSet<usize> = collected.iter().map(|(i, _)| *i).collect();
        assert!(
            instances.iter().all(|i| *i < parallelism),
            "parallelism {parallelism}: instances {instances:?}"
        );
        let values = sorted(collected.into_iter().map(|(_, v)| v).collect());
        let expected: Vec<u64> = (0..N).map(|x| x * 3 + 1).collect();
        assert_eq!(
            values.len(),
            expected.len(),
            "parallelism {parallelism}: item count"
        );
        assert!(
            values == expected,
            "parallelism {parallelism}: the results are not the expected multiset"
        );
    }
}

/// Runs `0..n` (two source instances) through a partitioned edge keyed by `x % keys` into four
/// recording sink instances; returns what each instance received.
fn run_partitioned(executor: &Executor, n: u64, keys: u64) -> Vec<(usize, u64)> {
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", move |ctx: &ProcessorContext| {
            IterSource::new(share(n, ctx.global_index(), ctx.local_parallelism()))
        })
        .emits::<u64>()
        .local_parallelism(2),
    );
    let (supplier, recorded) = RecordingSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("sink", supplier)
            .accepts::<u64>()
            .local_parallelism(4),
    );
    dag.edge(Edge::between(source, sink).partitioned(move |x: &u64| *x % keys));
    finish(executor.submit(dag, JobConfig::default()).unwrap()).unwrap();
    std::mem::take(&mut *recorded.lock().unwrap())
}

#[test]
fn partitioned_edge_routes_each_key_to_one_stable_instance() {
    const N: u64 = 20_000;
    const KEYS: u64 = 500;
    let executor = executor();
    let key_owners = |recorded: &[(usize, u64)]| {
        let mut owners: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
        for (instance, x) in recorded {
            owners.entry(x % KEYS).or_default().insert(*instance);
        }
        owners
    };

    let first = run_partitioned(&executor, N, KEYS);
    let second = run_partitioned(&executor, N, KEYS);
    for recorded in [&first, &second] {
        let values = sorted(recorded.iter().map(|(_, x)| *x).collect());
        assert!(
            values == (0..N).collect::<Vec<_>>(),
            "every item arrives exactly once"
        );
    }
    let (owners1, owners2) = (key_owners(&first), key_owners(&second));
    assert_eq!(owners1.len() as u64, KEYS);
    for (key, instances) in &owners1 {
        assert_eq!(
            instances.len(),
            1,
            "key {key} reached instances {instances:?}"
        );
        // The documented mapping: partition p belongs to instance p % consumers.
        let expected = Partitioner::default().partition_of(key) as usize % 4;
        assert!(
            instances.contains(&expected),
            "key {key}: instance {instances:?}, expected {expected}"
        );
    }
    assert_eq!(
        owners1, owners2,
        "the key -> instance map changed between runs"
    );
    let used: BTreeSet<usize> = owners1.values().flatten().copied().collect();
    assert_eq!(
        used,
        BTreeSet::from([0, 1, 2, 3]),
        "500 keys should reach all four instances"
    );
}

/// Records the ordinal of every item it receives, in order.
struct OrdinalRecorder {
    seen: Arc<Mutex<Vec<usize>>>,
}

impl Processor for OrdinalRecorder {
    fn process(
        &mut self,
        ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<u64>();
        self.seen
            .lock()
            .unwrap()
            .extend(std::iter::repeat_n(ordinal, items.len()));
        items.clear();
        Ok(())
    }
}

#[test]
fn a_lower_priority_input_is_drained_first() {
    let executor = executor();
    const N0: u64 = 5_000;
    const N1: u64 = 3_000;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut dag = Dag::new();
    let probe = dag.vertex(
        Vertex::new("probe", |_| IterSource::new(0..N0))
            .emits::<u64>()
            .local_parallelism(2),
    );
    let build = dag.vertex(
        Vertex::new("build", |ctx: &ProcessorContext| {
            IterSource::new(share(N1, ctx.global_index(), 2))
        })
        .emits::<u64>()
        .local_parallelism(2),
    );
    let s = Arc::clone(&seen);
    let join = dag.vertex(
        Vertex::new("join", move |_: &ProcessorContext| OrdinalRecorder {
            seen: Arc::clone(&s),
        })
        .accepts::<u64>()
        .local_parallelism(1),
    );
    dag.edge(Edge::between(probe, join).to_ordinal(0));
    dag.edge(Edge::between(build, join).to_ordinal(1).priority(-1));
    finish(
        executor
            .submit(dag, JobConfig::default().with_inbox_batch(64))
            .unwrap(),
    )
    .unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(seen.iter().filter(|o| **o == 1).count() as u64, N1);
    assert_eq!(seen.iter().filter(|o| **o == 0).count() as u64, 2 * N0);
    let first_zero = seen.iter().position(|o| *o == 0).unwrap();
    let last_one = seen.iter().rposition(|o| *o == 1).unwrap();
    assert!(
        last_one < first_zero,
        "ordinal 1 item at position {last_one}, after an ordinal 0 item at {first_zero}"
    );
}

#[test]
fn broadcast_reaches_every_instance() {
    let executor = executor();
    const N: u64 = 3_000;
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", |_| IterSource::new(0..N))
            .emits::<u64>()
            .local_parallelism(1),
    );
    let (supplier, recorded) = RecordingSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("sink", supplier)
            .accepts::<u64>()
            .local_parallelism(3),
    );
    dag.edge(Edge::between(source, sink).broadcast().capacity(64));
    finish(executor.submit(dag, JobConfig::default()).unwrap()).unwrap();

    let mut per_instance: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (i, x) in recorded.lock().unwrap().iter() {
        per_instance.entry(*i).or_default().push(*x);
    }
    assert_eq!(per_instance.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);
    for (i, items) in per_instance {
        // One producer, so each copy also keeps the producer's order.
        assert!(
            items == (0..N).collect::<Vec<_>>(),
            "instance {i} did not get every item in order"
        );
    }
}

#[test]
fn isolated_edge_pairs_instances() {
    let executor = executor();
    const PER_INSTANCE: u64 = 2_000;
    const P: usize = 3;
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", |ctx: &ProcessorContext| {
            let me = ctx.global_index();
            IterSource::new((0..PER_INSTANCE).map(move |k| (me, k)))
        })
        .emits::<(usize, u64)>()
        .local_parallelism(P),
    );
    let (supplier, recorded) = RecordingSink::<(usize, u64)>::supplier();
    let sink = dag.vertex(
        Vertex::new("sink", supplier)
            .accepts::<(usize, u64)>()
            .local_parallelism(P),
    );
    dag.edge(Edge::between(source, sink).isolated().capacity(32));
    finish(executor.submit(dag, JobConfig::default()).unwrap()).unwrap();

    let recorded = recorded.lock().unwrap();
    for (instance, (tag, k)) in recorded.iter() {
        assert_eq!(
            instance, tag,
            "consumer {instance} received item {k} of producer {tag}"
        );
    }
    let mut per_instance: HashMap<usize, Vec<u64>> = HashMap::new();
    for (instance, (_, k)) in recorded.iter() {
        per_instance.entry(*instance).or_default().push(*k);
    }
    assert_eq!(per_instance.len(), P);
    for (i, ks) in per_instance {
        assert!(
            ks == (0..PER_INSTANCE).collect::<Vec<_>>(),
            "instance {i} did not get its producer's items in order"
        );
    }
}

#[test]
fn all_to_one_feeds_only_instance_zero() {
    let executor = executor();
    const N: u64 = 10_000;
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", |ctx: &ProcessorContext| {
            IterSource::new(share(N, ctx.global_index(), ctx.local_parallelism()))
        })
        .emits::<u64>()
        .local_parallelism(2),
    );
    let (supplier, recorded) = RecordingSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("sink", supplier)
            .accepts::<u64>()
            .local_parallelism(3),
    );
    dag.edge(Edge::between(source, sink).all_to_one());
    let job = executor.submit(dag, JobConfig::default()).unwrap();
    assert!(job.wait_timeout(TIMEOUT));
    let metrics = job.metrics();
    finish(job).unwrap();

    let recorded = recorded.lock().unwrap();
    let instances: BTreeSet<usize> = recorded.iter().map(|(i, _)| *i).collect();
    assert_eq!(instances, BTreeSet::from([0]));
    assert!(sorted(recorded.iter().map(|(_, x)| *x).collect()) == (0..N).collect::<Vec<_>>());
    let sink_in: Vec<u64> = metrics
        .iter()
        .filter(|m| m.vertex == "sink")
        .map(|m| m.items_in)
        .collect();
    assert_eq!(sink_in, [N, 0, 0]);
}

/// Sums `items_in` and `items_out` over the instances of `vertex`, checking their indices.
fn totals(metrics: &[MetricsSnapshot], vertex: &str, parallelism: usize) -> (u64, u64) {
    let of_vertex: Vec<&MetricsSnapshot> = metrics.iter().filter(|m| m.vertex == vertex).collect();
    let instances: Vec<usize> = of_vertex.iter().map(|m| m.instance).collect();
    assert_eq!(
        instances,
        (0..parallelism).collect::<Vec<_>>(),
        "instances of {vertex}"
    );
    (
        of_vertex.iter().map(|m| m.items_in).sum(),
        of_vertex.iter().map(|m| m.items_out).sum(),
    )
}

#[test]
fn metrics_count_what_flowed() {
    let executor = executor();
    const N: u64 = 30_000;
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", |_| IterSource::new(0..N))
            .emits::<u64>()
            .local_parallelism(1),
    );
    let map = dag.vertex(
        Vertex::new("map", |_| MapP::new(|x: u64| x * 3 + 1))
            .accepts::<u64>()
            .emits::<u64>()
            .local_parallelism(2),
    );
    let filter = dag.vertex(
        Vertex::new("filter", |_| FilterP::new(|x: &u64| x.is_multiple_of(2)))
            .accepts::<u64>()
            .emits::<u64>()
            .local_parallelism(2),
    );
    let (supplier, count) = CountSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("sink", supplier)
            .accepts::<u64>()
            .local_parallelism(2),
    );
    dag.edge(Edge::between(source, map));
    dag.edge(Edge::between(map, filter));
    dag.edge(Edge::between(filter, sink).broadcast());
    let job = executor.submit(dag, JobConfig::default()).unwrap();
    assert!(job.wait_timeout(TIMEOUT));
    let metrics = job.metrics();
    finish(job).unwrap();

    let kept = (0..N).filter(|x| (x * 3 + 1).is_multiple_of(2)).count() as u64;
    assert_eq!(metrics.len(), 7);
    assert_eq!(totals(&metrics, "source", 1), (0, N));
    assert_eq!(totals(&metrics, "map", 2), (N, N));
    assert_eq!(totals(&metrics, "filter", 2), (N, kept));
    // A broadcast item counts once on the way out and once per consumer on the way in.
    assert_eq!(totals(&metrics, "sink", 2), (2 * kept, 0));
    assert_eq!(count.load(Ordering::Relaxed), 2 * kept);
    for m in &metrics {
        assert_eq!(
            m.queue_fill.iter().sum::<u64>(),
            0,
            "{} {} left items queued",
            m.vertex,
            m.instance
        );
    }
}
