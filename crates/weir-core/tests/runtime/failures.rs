//! Failing jobs: errors and panics in every hook, refused DAGs, stalls; the workers survive.

use super::*;

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
