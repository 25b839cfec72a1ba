//! Backpressure, cancellation, concurrent jobs and processors on threads of their own.

use super::*;

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
