//! End-to-end tests of the core runtime: DAGs submitted to an [`Executor`] and run to the end.
//!
//! Every test waits for its job with a timeout before joining, so a hang fails the test
//! instead of stalling the suite, and nothing synchronises by sleeping.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_core::builtin_processors::{CollectSink, CountSink, FilterP, IterSource, MapP};
use weir_core::{Dag, Edge, Vertex};
use weir_core::{
    DagError, Error, Executor, ExecutorConfig, Inbox, Job, JobConfig, JobStatus, MetricsSnapshot,
    Outbox, Partitioner, Processor, ProcessorContext, ProcessorResult,
};

/// How long any job may take before the test calls it a hang.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A private executor with two cooperative workers (the build machine has two cores).
fn executor() -> Executor {
    Executor::new(ExecutorConfig {
        workers: 2,
        ..Default::default()
    })
    .expect("start an executor")
}

/// Waits for `job` with a timeout, then joins it.
fn finish(job: Job) -> Result<(), Error> {
    assert!(
        job.wait_timeout(TIMEOUT),
        "job '{}' did not end within {TIMEOUT:?}",
        job.name()
    );
    job.join()
}

/// Shared `(instance, item)` pairs recorded by a [`RecordingSink`].
type Recorded<T> = Arc<Mutex<Vec<(usize, T)>>>;

/// Records every item it receives with its own global index.
struct RecordingSink<T> {
    instance: usize,
    target: Recorded<T>,
}

impl<T: Send + Clone + 'static> RecordingSink<T> {
    fn supplier() -> (
        impl Fn(&ProcessorContext) -> RecordingSink<T> + Send + Sync + 'static,
        Recorded<T>,
    ) {
        let target: Recorded<T> = Arc::new(Mutex::new(Vec::new()));
        let handle = Arc::clone(&target);
        let supplier = move |ctx: &ProcessorContext| RecordingSink {
            instance: ctx.global_index(),
            target: Arc::clone(&target),
        };
        (supplier, handle)
    }
}

impl<T: Send + Clone + 'static> Processor for RecordingSink<T> {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let mut target = self.target.lock().unwrap();
        target.extend(
            inbox
                .items::<T>()
                .drain(..)
                .map(|item| (self.instance, item)),
        );
        Ok(())
    }
}

/// Emits 0, 1, 2, ... forever; never completes on its own.
struct EndlessSource {
    next: u64,
}

impl Processor for EndlessSource {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let port = outbox.port::<u64>(0);
        while port.offer(self.next).is_ok() {
            self.next += 1;
        }
        Ok(false)
    }
}

fn endless_source() -> Vertex {
    Vertex::new("endless", |_| EndlessSource { next: 0 })
        .emits::<u64>()
        .local_parallelism(1)
}

/// The items of instance `index` out of `count` when `0..n` is split between instances.
fn share(n: u64, index: usize, count: usize) -> std::ops::Range<u64> {
    let (index, count) = (index as u64, count as u64);
    n * index / count..n * (index + 1) / count
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort_unstable();
    v
}

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

/// Emits `0..n`, counting every accepted offer.
struct CountingSource {
    next: u64,
    n: u64,
    emitted: Arc<AtomicU64>,
}

impl Processor for CountingSource {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let port = outbox.port::<u64>(0);
        while self.next < self.n {
            if port.offer(self.next).is_err() {
                return Ok(false);
            }
            self.next += 1;
            self.emitted.fetch_add(1, Ordering::SeqCst);
        }
        Ok(true)
    }
}

/// Takes a single item per call and checks how many items are in flight.
struct SlowSink {
    emitted: Arc<AtomicU64>,
    consumed: Arc<AtomicU64>,
    max_in_flight: Arc<AtomicU64>,
    bound: u64,
}

impl Processor for SlowSink {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<u64>();
        let item = items
            .pop_front()
            .expect("process is called with a non-empty inbox");
        let consumed = self.consumed.fetch_add(1, Ordering::SeqCst) + 1;
        let emitted = self.emitted.load(Ordering::SeqCst);
        // In flight: in the conveyor, or in this inbox, or the item just taken.
        let in_flight = emitted - (consumed - 1);
        self.max_in_flight.fetch_max(in_flight, Ordering::SeqCst);
        assert!(
            in_flight <= self.bound,
            "{in_flight} items in flight at item {item}, more than the bound {}",
            self.bound
        );
        Ok(())
    }
}

#[test]
fn backpressure_bounds_items_in_flight() {
    let executor = executor();
    const N: u64 = 20_000;
    const CAPACITY: usize = 16;
    const INBOX_BATCH: usize = 8;
    let emitted = Arc::new(AtomicU64::new(0));
    let consumed = Arc::new(AtomicU64::new(0));
    let max_in_flight = Arc::new(AtomicU64::new(0));

    let mut dag = Dag::new();
    let e = Arc::clone(&emitted);
    let source = dag.vertex(
        Vertex::new("fast-source", move |_: &ProcessorContext| CountingSource {
            next: 0,
            n: N,
            emitted: Arc::clone(&e),
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let (e, c, m) = (
        Arc::clone(&emitted),
        Arc::clone(&consumed),
        Arc::clone(&max_in_flight),
    );
    let sink = dag.vertex(
        Vertex::new("slow-sink", move |_: &ProcessorContext| SlowSink {
            emitted: Arc::clone(&e),
            consumed: Arc::clone(&c),
            max_in_flight: Arc::clone(&m),
            bound: (CAPACITY + INBOX_BATCH) as u64,
        })
        .accepts::<u64>()
        .local_parallelism(1),
    );
    dag.edge(Edge::between(source, sink).capacity(CAPACITY));

    let config = JobConfig::default().with_inbox_batch(INBOX_BATCH);
    let job = executor.submit(dag, config).unwrap();
    assert!(
        job.wait_timeout(TIMEOUT),
        "job did not end within {TIMEOUT:?}"
    );
    let metrics = job.metrics();
    finish(job).unwrap();

    assert_eq!(emitted.load(Ordering::SeqCst), N);
    assert_eq!(consumed.load(Ordering::SeqCst), N);
    let max = max_in_flight.load(Ordering::SeqCst);
    assert!(
        max <= (CAPACITY + INBOX_BATCH) as u64,
        "max in flight {max}"
    );
    let source_metrics = metrics.iter().find(|m| m.vertex == "fast-source").unwrap();
    assert!(
        source_metrics.backpressure_refusals > 0,
        "a fast source into a slow sink must be refused sometimes: {source_metrics:?}"
    );
    assert!(
        !source_metrics.backpressured.is_zero(),
        "refusals by a full queue count as backpressured time: {source_metrics:?}"
    );
    let sink_metrics = metrics.iter().find(|m| m.vertex == "slow-sink").unwrap();
    assert_eq!(sink_metrics.items_in, N);
}

/// Counts what it receives and reports the first batch on a channel.
struct SignallingSink {
    first: Option<mpsc::Sender<()>>,
    count: Arc<AtomicU64>,
}

impl Processor for SignallingSink {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<u64>();
        self.count.fetch_add(items.len() as u64, Ordering::Relaxed);
        items.clear();
        if let Some(tx) = self.first.take() {
            let _ = tx.send(());
        }
        Ok(())
    }
}

/// A sink vertex that signals on `tx` once it received items, and its item count.
fn signalling_sink(name: &str) -> (Vertex, mpsc::Receiver<()>, Arc<AtomicU64>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let count = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&count);
    let vertex = Vertex::new(name, move |_: &ProcessorContext| SignallingSink {
        first: Some(tx.lock().unwrap().clone()),
        count: Arc::clone(&c),
    })
    .accepts::<u64>()
    .local_parallelism(1);
    (vertex, rx, count)
}

#[test]
fn cancel_stops_an_endless_job() {
    let executor = executor();
    let mut dag = Dag::new();
    let source = dag.vertex(endless_source());
    let (sink, running, count) = signalling_sink("sink");
    let sink = dag.vertex(sink);
    dag.edge(Edge::between(source, sink));

    let job = executor.submit(dag, JobConfig::default()).unwrap();
    running
        .recv_timeout(TIMEOUT)
        .expect("the sink received items");
    assert_eq!(job.status(), JobStatus::Running);
    job.cancel();
    assert!(job.wait_timeout(TIMEOUT), "a cancelled job did not stop");
    assert_eq!(job.status(), JobStatus::Cancelled);
    assert!(matches!(job.join(), Err(Error::Cancelled)));
    assert!(count.load(Ordering::Relaxed) > 0);
}

#[test]
fn a_monitor_cancels_and_outlives_the_job_handle() {
    let executor = executor();
    let mut dag = Dag::new();
    let source = dag.vertex(endless_source());
    let (sink, running, _) = signalling_sink("sink");
    let sink = dag.vertex(sink.local_parallelism(2));
    dag.edge(Edge::between(source, sink).broadcast().capacity(100));

    let job = executor.submit(dag, JobConfig::default()).unwrap();
    let monitor = job.monitor();
    let topology = monitor.topology();
    let names: Vec<_> = topology.vertices.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["endless", "sink"]);
    assert_eq!(topology.vertices[1].parallelism, 2);
    // Two queues (one per sink instance) of 128 items each.
    assert_eq!(topology.vertices[1].input_capacity, [256]);
    assert_eq!(topology.edges[0].kind, "broadcast");
    assert_eq!(
        (
            topology.edges[0].from.as_str(),
            topology.edges[0].to.as_str()
        ),
        ("endless", "sink")
    );
    running
        .recv_timeout(TIMEOUT)
        .expect("the sink received items");
    monitor.cancel();
    assert!(matches!(finish(job), Err(Error::Cancelled)));
    assert_eq!(monitor.status(), JobStatus::Cancelled);
    assert_eq!(monitor.error(), None);
    let metrics = monitor.metrics();
    assert_eq!(metrics.len(), 3);
    assert!(metrics[0].items_out > 0);
    assert!(monitor.started_at() <= std::time::SystemTime::now());
}

#[test]
fn cancel_handle_from_another_thread() {
    let executor = executor();
    let mut dag = Dag::new();
    let source = dag.vertex(endless_source());
    let (sink, running, _) = signalling_sink("sink");
    let sink = dag.vertex(sink);
    dag.edge(Edge::between(source, sink));

    let job = executor.submit(dag, JobConfig::default()).unwrap();
    let handle = job.cancel_handle();
    let canceller = std::thread::spawn(move || {
        running
            .recv_timeout(TIMEOUT)
            .expect("the sink received items");
        handle.cancel();
    });
    assert!(job.wait_timeout(TIMEOUT), "a cancelled job did not stop");
    canceller.join().unwrap();
    assert_eq!(job.status(), JobStatus::Cancelled);
    assert!(matches!(job.join(), Err(Error::Cancelled)));
}

/// Maps `x -> x`, but fails (or panics) on `bad`.
struct Faulty {
    bad: u64,
    panic: bool,
}

impl Processor for Faulty {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<u64>();
        let port = outbox.port::<u64>(0);
        while let Some(&x) = items.front() {
            if x == self.bad {
                if self.panic {
                    panic!("boom at item {x}");
                }
                return Err(format!("cannot map item {x}").into());
            }
            if port.offer(x).is_err() {
                return Ok(());
            }
            items.pop_front();
        }
        Ok(())
    }
}

fn faulty_job(panic: bool) -> Dag {
    let mut dag = Dag::new();
    let source = dag.vertex(endless_source());
    let map = dag.vertex(
        Vertex::new("faulty-map", move |_: &ProcessorContext| Faulty {
            bad: 5_000,
            panic,
        })
        .accepts::<u64>()
        .emits::<u64>()
        .local_parallelism(2),
    );
    let (supplier, _) = CountSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("sink", supplier)
            .accepts::<u64>()
            .local_parallelism(2),
    );
    dag.edge(Edge::between(source, map));
    dag.edge(Edge::between(map, sink));
    dag
}

#[test]
fn a_processor_error_fails_the_job_and_stops_the_source() {
    let executor = executor();
    let job = executor
        .submit(faulty_job(false), JobConfig::default())
        .unwrap();
    // The source never ends by itself: the job ending at all shows the failure stopped it.
    assert!(
        job.wait_timeout(TIMEOUT),
        "the failed job did not stop its endless source"
    );
    assert_eq!(job.status(), JobStatus::Failed);
    match job.join() {
        Err(e @ Error::ProcessorFailed { .. }) => {
            assert_eq!(e.vertex(), Some("faulty-map"));
            let Error::ProcessorFailed {
                vertex,
                instance,
                source,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(vertex, "faulty-map");
            assert!(*instance < 2);
            assert_eq!(source.to_string(), "cannot map item 5000");
            let text = e.to_string();
            assert!(
                text.contains("faulty-map") && text.contains("cannot map item 5000"),
                "{text}"
            );
        }
        other => panic!("expected ProcessorFailed, got {other:?}"),
    }
}

#[test]
fn a_panic_fails_the_job_and_the_worker_survives() {
    let executor = executor();
    let job = executor
        .submit(faulty_job(true), JobConfig::default())
        .unwrap();
    assert!(
        job.wait_timeout(TIMEOUT),
        "the panicked job did not stop its endless source"
    );
    assert_eq!(job.status(), JobStatus::Failed);
    match job.join() {
        Err(Error::ProcessorPanicked {
            vertex,
            instance,
            hook,
            message,
        }) => {
            assert_eq!(vertex, "faulty-map");
            assert!(instance < 2);
            assert_eq!(hook, "process");
            assert_eq!(message, "boom at item 5000");
        }
        other => panic!("expected ProcessorPanicked, got {other:?}"),
    }

    // Every vertex has one instance per worker, so this job needs both workers alive.
    for _ in 0..2 {
        let mut dag = Dag::new();
        let source = dag.vertex(
            Vertex::new("source", |ctx: &ProcessorContext| {
                IterSource::new(share(10_000, ctx.global_index(), ctx.local_parallelism()))
            })
            .emits::<u64>(),
        );
        let map = dag.vertex(
            Vertex::new("map", |_| MapP::new(|x: u64| x + 1))
                .accepts::<u64>()
                .emits::<u64>(),
        );
        let (supplier, collected) = CollectSink::<u64>::supplier();
        let sink = dag.vertex(Vertex::new("sink", supplier).accepts::<u64>());
        dag.edge(Edge::between(source, map));
        dag.edge(Edge::between(map, sink));
        let job = executor.submit(dag, JobConfig::default()).unwrap();
        assert_eq!(job.metrics().len(), 6, "two instances of each vertex");
        finish(job).unwrap();
        assert_eq!(
            sorted(collected.lock().unwrap().clone()),
            (1..=10_000).collect::<Vec<u64>>()
        );
    }
}

/// Fails in `init`.
struct BadInit;

impl Processor for BadInit {
    fn init(&mut self, _ctx: &ProcessorContext) -> ProcessorResult<()> {
        Err("no connection to the database".into())
    }
}

#[test]
fn an_init_failure_refuses_the_job() {
    let executor = executor();
    let emitted = Arc::new(AtomicU64::new(0));
    let mut dag = Dag::new();
    let e = Arc::clone(&emitted);
    let source = dag.vertex(
        Vertex::new("source", move |_: &ProcessorContext| CountingSource {
            next: 0,
            n: 100,
            emitted: Arc::clone(&e),
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let sink = dag.vertex(
        Vertex::new("bad-init", |_| BadInit)
            .accepts::<u64>()
            .local_parallelism(2),
    );
    dag.edge(Edge::between(source, sink));
    match executor.submit(dag, JobConfig::default()) {
        Err(e @ Error::InitFailed { .. }) => {
            assert_eq!(e.vertex(), Some("bad-init"));
            let Error::InitFailed { source, .. } = &e else {
                unreachable!()
            };
            assert_eq!(source.to_string(), "no connection to the database");
            assert!(e.to_string().contains("bad-init"), "{e}");
        }
        other => panic!("expected InitFailed, got {other:?}"),
    }
    assert_eq!(
        emitted.load(Ordering::SeqCst),
        0,
        "nothing may run when init fails"
    );
}

#[test]
fn an_invalid_dag_is_refused() {
    let executor = executor();

    let mut dag = Dag::new();
    let source = dag.vertex(Vertex::new("numbers", |_| IterSource::new(0..10u64)).emits::<u64>());
    let (supplier, _) = CollectSink::<String>::supplier();
    let sink = dag.vertex(Vertex::new("strings", supplier).accepts::<String>());
    dag.edge(Edge::between(source, sink));
    match executor.submit(dag, JobConfig::default()) {
        Err(Error::InvalidDag(DagError::TypeMismatch {
            edge,
            produced,
            expected,
        })) => {
            assert_eq!(edge, "'numbers':0 -> 'strings':0");
            assert_eq!(produced, "u64");
            assert!(expected.contains("String"), "{expected}");
        }
        other => panic!("expected a type mismatch, got {other:?}"),
    }

    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("numbers", |_| IterSource::new(0..10u64))
            .emits::<u64>()
            .local_parallelism(2),
    );
    let (supplier, _) = CollectSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("sink", supplier)
            .accepts::<u64>()
            .local_parallelism(3),
    );
    dag.edge(Edge::between(source, sink).isolated());
    assert!(matches!(
        executor.submit(dag, JobConfig::default()),
        Err(Error::InvalidDag(DagError::IsolatedParallelism {
            from: 2,
            to: 3,
            ..
        }))
    ));

    assert!(matches!(
        executor.submit(Dag::new(), JobConfig::default()),
        Err(Error::InvalidDag(DagError::Empty))
    ));
}

#[test]
fn concurrent_jobs_share_one_executor() {
    let executor = executor();
    const JOBS: u64 = 6;
    const N: u64 = 50_000;
    let mut running = Vec::new();
    for j in 0..JOBS {
        let mut dag = Dag::new();
        let source = dag.vertex(
            Vertex::new("source", |ctx: &ProcessorContext| {
                IterSource::new(share(N, ctx.global_index(), ctx.local_parallelism()))
            })
            .emits::<u64>()
            .local_parallelism(2),
        );
        let map = dag.vertex(
            Vertex::new("map", move |_| MapP::new(move |x: u64| x * j))
                .accepts::<u64>()
                .emits::<u64>(),
        );
        let (supplier, collected) = CollectSink::<u64>::supplier();
        let sink = dag.vertex(
            Vertex::new("sink", supplier)
                .accepts::<u64>()
                .local_parallelism(1),
        );
        dag.edge(Edge::between(source, map));
        dag.edge(Edge::between(map, sink));
        let config = JobConfig::default().with_name(format!("job-{j}"));
        running.push((j, executor.submit(dag, config).unwrap(), collected));
    }
    for (j, job, collected) in running {
        assert_eq!(job.name(), format!("job-{j}"));
        finish(job).unwrap();
        let collected = std::mem::take(&mut *collected.lock().unwrap());
        assert_eq!(collected.len() as u64, N, "job {j}");
        assert_eq!(
            collected.iter().sum::<u64>(),
            j * N * (N - 1) / 2,
            "job {j}"
        );
    }
}

/// A blocking sink: records the name of the thread it runs on.
struct BlockingSink {
    threads: Arc<Mutex<BTreeSet<String>>>,
    count: Arc<AtomicU64>,
}

impl Processor for BlockingSink {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let name = std::thread::current()
            .name()
            .unwrap_or("<unnamed>")
            .to_string();
        self.threads.lock().unwrap().insert(name);
        let items = inbox.items::<u64>();
        self.count.fetch_add(items.len() as u64, Ordering::Relaxed);
        items.clear();
        Ok(())
    }

    fn complete(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        let name = std::thread::current()
            .name()
            .unwrap_or("<unnamed>")
            .to_string();
        self.threads.lock().unwrap().insert(name);
        Ok(true)
    }

    fn is_cooperative(&self) -> bool {
        false
    }
}

#[test]
fn a_non_cooperative_processor_gets_its_own_thread() {
    let executor = executor();
    let threads = Arc::new(Mutex::new(BTreeSet::new()));
    let count = Arc::new(AtomicU64::new(0));
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", |_| IterSource::new(0..10_000u64))
            .emits::<u64>()
            .local_parallelism(1),
    );
    let (t, c) = (Arc::clone(&threads), Arc::clone(&count));
    let sink = dag.vertex(
        Vertex::new("blocking", move |_: &ProcessorContext| BlockingSink {
            threads: Arc::clone(&t),
            count: Arc::clone(&c),
        })
        .accepts::<u64>()
        .local_parallelism(2),
    );
    dag.edge(Edge::between(source, sink));
    finish(executor.submit(dag, JobConfig::default()).unwrap()).unwrap();

    assert_eq!(count.load(Ordering::Relaxed), 10_000);
    let threads = threads.lock().unwrap().clone();
    assert!(!threads.is_empty());
    for name in &threads {
        assert!(name.starts_with("weir-blocking-"), "ran on thread {name:?}");
    }
    assert_eq!(
        threads,
        BTreeSet::from([
            "weir-blocking-blocking-0".to_string(),
            "weir-blocking-blocking-1".to_string()
        ])
    );
}

/// [`EndlessSource`] on a thread of its own.
struct BlockingEndlessSource(EndlessSource);

impl Processor for BlockingEndlessSource {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.0.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        false
    }
}

#[test]
fn cancel_stops_a_non_cooperative_processor() {
    let executor = executor();
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("blocking-endless", |_| {
            BlockingEndlessSource(EndlessSource { next: 0 })
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let (sink, running, _) = signalling_sink("sink");
    let sink = dag.vertex(sink);
    dag.edge(Edge::between(source, sink));

    let job = executor.submit(dag, JobConfig::default()).unwrap();
    running
        .recv_timeout(TIMEOUT)
        .expect("the sink received items");
    job.cancel();
    assert!(matches!(finish(job), Err(Error::Cancelled)));
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

/// Emits one item and a watermark, then stays alive without emitting anything else.
struct OneWatermarkThenQuiet {
    sent: bool,
}

impl Processor for OneWatermarkThenQuiet {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.sent && outbox.has_room(0) {
            let _ = outbox.port::<u64>(0).offer(1);
            self.sent = outbox.offer_watermark(weir_core::Watermark(100));
        }
        Ok(false)
    }
}

/// Never emits an item or a watermark and never finishes; declares itself idle once.
struct Silent {
    idle_sent: bool,
}

impl Processor for Silent {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.idle_sent {
            self.idle_sent = outbox.offer_idle();
        }
        Ok(false)
    }
}

/// Reports every watermark it receives.
struct WatermarkProbe {
    seen: mpsc::Sender<i64>,
}

impl Processor for WatermarkProbe {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        inbox.items::<u64>().clear();
        Ok(())
    }

    fn try_process_watermark(
        &mut self,
        wm: weir_core::Watermark,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        let _ = self.seen.send(wm.0);
        Ok(true)
    }
}

/// The talker/silent/probe DAG: `silent` feeds the probe through `relay` when `relayed`.
fn idle_dag(tx: mpsc::Sender<i64>, relayed: bool) -> Dag {
    let tx = Mutex::new(tx);
    let mut dag = Dag::new();
    let talker = dag.vertex(
        Vertex::new("talker", |_| OneWatermarkThenQuiet { sent: false })
            .emits::<u64>()
            .local_parallelism(1),
    );
    let silent = dag.vertex(
        Vertex::new("silent", |_| Silent { idle_sent: false })
            .emits::<u64>()
            .local_parallelism(2),
    );
    let probe = dag.vertex(
        Vertex::new("probe", move |_| WatermarkProbe {
            seen: tx.lock().unwrap().clone(),
        })
        .accepts::<u64>()
        .local_parallelism(1),
    );
    dag.edge(Edge::between(talker, probe));
    if relayed {
        let relay = dag.vertex(
            Vertex::new("relay", |_| MapP::new(|x: u64| x))
                .accepts::<u64>()
                .emits::<u64>(),
        );
        dag.edge(Edge::between(silent, relay));
        dag.edge(Edge::between(relay, probe).to_ordinal(1));
    } else {
        dag.edge(Edge::between(silent, probe).to_ordinal(1));
    }
    dag
}

#[test]
fn an_idle_input_stops_holding_the_watermark_back() {
    for relayed in [false, true] {
        let (tx, rx) = mpsc::channel();
        let job = executor()
            .submit(idle_dag(tx, relayed), JobConfig::default())
            .unwrap();
        // The silent input holds the watermark back until it says it is idle; through a
        // relay, the relay says so once every one of its inputs is idle.
        let wm = rx
            .recv_timeout(TIMEOUT)
            .expect("the watermark passes the idle input");
        assert_eq!(wm, 100, "relayed: {relayed}");
        job.cancel();
        assert!(matches!(finish(job), Err(Error::Cancelled)));
    }
}

/// What a [`Scripted`] source emits and a [`SequenceRecorder`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Item(u64),
    Watermark(i64),
}

/// Emits its whole script in one call, then finishes.
struct Scripted {
    script: Vec<Event>,
}

impl Processor for Scripted {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        for event in std::mem::take(&mut self.script) {
            let sent = match event {
                Event::Item(x) => outbox.port::<u64>(0).offer(x).is_ok(),
                Event::Watermark(wm) => outbox.offer_watermark(weir_core::Watermark(wm)),
            };
            assert!(sent, "the script fits in the conveyor");
        }
        Ok(true)
    }
}

/// Records items and watermarks in the order the processor sees them.
struct SequenceRecorder {
    seen: Arc<Mutex<Vec<Event>>>,
}

impl Processor for SequenceRecorder {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let mut seen = self.seen.lock().unwrap();
        seen.extend(inbox.items::<u64>().drain(..).map(Event::Item));
        Ok(())
    }

    fn try_process_watermark(
        &mut self,
        wm: weir_core::Watermark,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        self.seen.lock().unwrap().push(Event::Watermark(wm.0));
        Ok(true)
    }
}

#[test]
fn the_inbox_drain_stops_at_a_watermark() {
    // One worker: the source's whole script is queued before the recorder drains anything,
    // so a drain that ran past the watermark would hand 3 and 4 over before it.
    let executor = Executor::new(ExecutorConfig {
        workers: 1,
        ..Default::default()
    })
    .unwrap();
    let script = vec![
        Event::Item(1),
        Event::Item(2),
        Event::Watermark(10),
        Event::Item(3),
        Event::Item(4),
        Event::Watermark(20),
        Event::Item(5),
    ];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut dag = Dag::new();
    let s = script.clone();
    let source = dag.vertex(
        Vertex::new("scripted", move |_| Scripted { script: s.clone() })
            .emits::<u64>()
            .local_parallelism(1),
    );
    let recorded = Arc::clone(&seen);
    let recorder = dag.vertex(
        Vertex::new("recorder", move |_| SequenceRecorder {
            seen: Arc::clone(&recorded),
        })
        .accepts::<u64>()
        .local_parallelism(1),
    );
    dag.edge(Edge::between(source, recorder));
    finish(executor.submit(dag, JobConfig::default()).unwrap()).unwrap();
    assert_eq!(*seen.lock().unwrap(), script);
}

/// Where a [`Booby`] panics or fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trap {
    PanicInInit,
    PanicInClose,
    PanicInDrop,
    ErrorInClose,
}

/// A sink that swallows its input and springs its trap.
struct Booby {
    trap: Trap,
}

impl Processor for Booby {
    fn init(&mut self, _ctx: &ProcessorContext) -> ProcessorResult<()> {
        if self.trap == Trap::PanicInInit {
            panic!("trap sprung in init");
        }
        Ok(())
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        inbox.items::<u64>().clear();
        Ok(())
    }

    fn close(&mut self) -> ProcessorResult<()> {
        match self.trap {
            Trap::PanicInClose => panic!("trap sprung in close"),
            Trap::ErrorInClose => Err("flush failed in close".into()),
            _ => Ok(()),
        }
    }
}

impl Drop for Booby {
    fn drop(&mut self) {
        if self.trap == Trap::PanicInDrop && !std::thread::panicking() {
            panic!("trap sprung in drop");
        }
    }
}

fn trapped_job(trap: Trap) -> Dag {
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", |ctx: &ProcessorContext| {
            IterSource::new(share(1_000, ctx.global_index(), ctx.local_parallelism()))
        })
        .emits::<u64>(),
    );
    let sink = dag.vertex(Vertex::new("booby", move |_| Booby { trap }).accepts::<u64>());
    dag.edge(Edge::between(source, sink));
    dag
}

/// A job that needs every worker of a two-worker executor: one instance per worker.
fn run_healthy_job(executor: &Executor) {
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("source", |ctx: &ProcessorContext| {
            IterSource::new(share(10_000, ctx.global_index(), ctx.local_parallelism()))
        })
        .emits::<u64>(),
    );
    let (supplier, collected) = CollectSink::<u64>::supplier();
    let sink = dag.vertex(Vertex::new("sink", supplier).accepts::<u64>());
    dag.edge(Edge::between(source, sink));
    finish(executor.submit(dag, JobConfig::default()).unwrap()).unwrap();
    assert_eq!(
        sorted(collected.lock().unwrap().clone()),
        (0..10_000).collect::<Vec<u64>>()
    );
}

#[test]
fn panics_in_init_close_and_drop_fail_the_job_and_spare_the_workers() {
    let executor = executor();
    for (trap, hook, message) in [
        (Trap::PanicInInit, "init", "trap sprung in init"),
        (Trap::PanicInClose, "close", "trap sprung in close"),
        (Trap::PanicInDrop, "drop", "trap sprung in drop"),
    ] {
        let outcome = match executor.submit(trapped_job(trap), JobConfig::default()) {
            Ok(job) => finish(job),
            Err(e) => Err(e),
        };
        match outcome {
            Err(Error::ProcessorPanicked {
                vertex,
                instance,
                hook: h,
                message: m,
            }) => {
                assert_eq!(vertex, "booby", "{trap:?}");
                assert!(instance < 2, "{trap:?}");
                assert_eq!((h, m.as_str()), (hook, message), "{trap:?}");
            }
            other => panic!("{trap:?}: expected ProcessorPanicked, got {other:?}"),
        }
        // Both workers must still serve jobs.
        run_healthy_job(&executor);
    }
}

#[test]
fn an_error_in_close_fails_the_job() {
    let executor = executor();
    match finish(
        executor
            .submit(trapped_job(Trap::ErrorInClose), JobConfig::default())
            .unwrap(),
    ) {
        Err(e @ Error::ProcessorFailed { .. }) => {
            assert_eq!(e.vertex(), Some("booby"));
            assert!(e.to_string().contains("flush failed in close"), "{e}");
        }
        other => panic!("expected ProcessorFailed, got {other:?}"),
    }
    run_healthy_job(&executor);
}

#[test]
fn a_job_that_starves_itself_is_reported_as_stalled() {
    // 'fork' offers every item to both outputs at once. 'join' reads its priority -1 input
    // (through 'relay') to the end before its priority 0 input, whose queue fills up; then
    // 'fork' can send nothing anywhere, and nothing moves again.
    struct Fork {
        next: u64,
    }
    impl Processor for Fork {
        fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
            while self.next < 1_000_000 && outbox.offer_to_all(self.next).is_ok() {
                self.next += 1;
            }
            Ok(self.next == 1_000_000)
        }
    }
    let mut dag = Dag::new();
    let fork = dag.vertex(
        Vertex::new("fork", |_| Fork { next: 0 })
            .emits::<u64>()
            .local_parallelism(1),
    );
    let relay = dag.vertex(
        Vertex::new("relay", |_| MapP::new(|x: u64| x))
            .accepts::<u64>()
            .emits::<u64>()
            .local_parallelism(1),
    );
    let (supplier, _) = CountSink::<u64>::supplier();
    let join = dag.vertex(
        Vertex::new("join", supplier)
            .accepts::<u64>()
            .local_parallelism(1),
    );
    dag.edge(Edge::between(fork, join).capacity(64));
    dag.edge(Edge::between(fork, relay).from_ordinal(1));
    dag.edge(Edge::between(relay, join).to_ordinal(1).priority(-1));
    let job = executor()
        .submit(
            dag,
            JobConfig::default().with_stall_timeout(Duration::from_millis(100)),
        )
        .unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    let stall = loop {
        if let Some(stall) = job.stall() {
            break stall;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no stall reported within {TIMEOUT:?}"
        );
        std::thread::park_timeout(Duration::from_millis(10));
    };
    assert!(stall.for_at_least >= Duration::from_millis(100));
    let join_queue = stall
        .queued
        .iter()
        .find(|q| q.vertex == "join")
        .unwrap_or_else(|| panic!("the stall names 'join': {stall}"));
    assert_eq!(join_queue.fill[0], 64, "{stall}");
    assert!(stall.to_string().contains("'join'"), "{stall}");
    job.cancel();
    assert!(matches!(finish(job), Err(Error::Cancelled)));
}

/// A source that emits what a test thread sends it, and hands its waker to that thread.
struct ChannelSource {
    items: mpsc::Receiver<u64>,
    waker_to: Option<mpsc::Sender<weir_core::TaskletWaker>>,
}

impl Processor for ChannelSource {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        if let Some(tx) = self.waker_to.take() {
            tx.send(ctx.waker().clone())?;
        }
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        loop {
            match self.items.try_recv() {
                // The test sends one item at a time and waits for it: there is always room.
                Ok(v) => outbox
                    .port::<u64>(0)
                    .offer(v)
                    .map_err(|v| format!("no room for {v}"))?,
                Err(mpsc::TryRecvError::Empty) => return Ok(false),
                Err(mpsc::TryRecvError::Disconnected) => return Ok(true),
            }
        }
    }
}

/// A sink that hands every item back to the test thread; on a thread of its own when not
/// cooperative.
struct EchoSink {
    echo: mpsc::Sender<u64>,
    cooperative: bool,
}

impl Processor for EchoSink {
    fn is_cooperative(&self) -> bool {
        self.cooperative
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        for v in inbox.items::<u64>().drain(..) {
            self.echo.send(v)?;
        }
        Ok(())
    }
}

/// Workers that pause a minute when idle still pass each item on at once: the thread of
/// the consumer is nudged by the producer that filled its conveyor, so it never sleeps out
/// its pause with an item waiting (without the nudge every item here would wait for it).
#[test]
fn a_parked_consumer_is_woken_by_the_item_sent_to_it() {
    echo_through_parked_threads(true);
}

/// The same for a consumer on a thread of its own (a non-cooperative processor).
#[test]
fn a_parked_blocking_consumer_is_woken_by_the_item_sent_to_it() {
    echo_through_parked_threads(false);
}

/// Two workers whose idle pause is a minute: only a wake or a nudge gets an idle thread going
/// again within a test's time.
fn slow_to_wake_executor() -> Executor {
    Executor::new(ExecutorConfig {
        workers: 2,
        min_park: Duration::from_secs(60),
        max_park: Duration::from_secs(60),
    })
    .expect("start an executor")
}

/// Sends items one at a time through `source -> echo` on an executor whose idle threads
/// pause a minute, and expects each back long before that.
fn echo_through_parked_threads(cooperative_sink: bool) {
    let executor = slow_to_wake_executor();
    let (items_tx, items_rx) = mpsc::channel();
    let (waker_tx, waker_rx) = mpsc::channel();
    let (echo_tx, echo_rx) = mpsc::channel();
    let source = Mutex::new(Some(ChannelSource {
        items: items_rx,
        waker_to: Some(waker_tx),
    }));
    let mut dag = Dag::new();
    let src = dag.vertex(
        Vertex::new("source", move |_: &ProcessorContext| {
            source.lock().unwrap().take().expect("one instance")
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let sink = dag.vertex(
        Vertex::new("echo", move |_: &ProcessorContext| EchoSink {
            echo: echo_tx.clone(),
            cooperative: cooperative_sink,
        })
        .accepts::<u64>()
        .local_parallelism(1),
    );
    dag.edge(Edge::between(src, sink));
    // A fresh two-worker executor: the source on one worker, a cooperative sink on the other.
    let job = executor.submit(dag, JobConfig::default()).unwrap();
    let source_waker = waker_rx.recv_timeout(TIMEOUT).expect("the source's waker");
    for i in 0..200u64 {
        items_tx.send(i).unwrap();
        // What an outside system does when it hands a source work.
        source_waker.wake();
        let echoed = echo_rx
            .recv_timeout(TIMEOUT)
            .unwrap_or_else(|_| panic!("item {i} waited for the consumer's idle pause"));
        assert_eq!(echoed, i);
    }
    drop(items_tx);
    source_waker.wake();
    finish(job).unwrap();
}

/// The other direction: a producer stopped by a full conveyor is nudged when its consumer
/// makes room, so tiny queues between threads that pause a minute when idle still move
/// every item long before that (without the nudge each refill would wait out a pause).
#[test]
fn a_producer_parked_on_a_full_queue_is_woken_when_room_is_made() {
    let executor = slow_to_wake_executor();
    let mut dag = Dag::new();
    let src = dag.vertex(
        Vertex::new("numbers", |_: &ProcessorContext| {
            IterSource::new(0..20_000u64)
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let (supplier, count) = CountSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("count", supplier)
            .accepts::<u64>()
            .local_parallelism(1),
    );
    dag.edge(Edge::between(src, sink).capacity(2));
    let job = executor.submit(dag, JobConfig::default()).unwrap();
    finish(job).unwrap();
    assert_eq!(count.load(Ordering::Relaxed), 20_000);
}
