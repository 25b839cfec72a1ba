//! Parked threads: woken by the item or the room they wait for.

use super::*;

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
        heartbeat: Duration::from_secs(60),
        ..ExecutorConfig::default()
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

/// A source that never emits and counts how often it is called; it answers `next_call` as
/// told, and finishes once `due` has passed, if given.
struct Waiting {
    calls: Arc<AtomicU64>,
    next: Option<weir_core::NextCall>,
    due: Option<std::time::Instant>,
}

impl Processor for Waiting {
    fn complete(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(self.due.is_some_and(|due| std::time::Instant::now() >= due))
    }

    fn next_call(&self) -> weir_core::NextCall {
        self.next.unwrap_or(weir_core::NextCall::Poll)
    }
}

/// Runs one `Waiting` source alone on an executor whose polling pause is 1 ms and whose
/// heartbeat is `heartbeat`.
fn waiting_job(
    next: Option<weir_core::NextCall>,
    due: Option<std::time::Instant>,
    heartbeat: Duration,
) -> (Executor, Job, Arc<AtomicU64>) {
    let executor = Executor::new(ExecutorConfig {
        workers: 1,
        heartbeat,
        ..ExecutorConfig::default()
    })
    .expect("start an executor");
    let calls = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&calls);
    let mut dag = Dag::new();
    dag.vertex(
        Vertex::new("waiting", move |_| Waiting {
            calls: Arc::clone(&counted),
            next,
            due,
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let job = executor.submit(dag, JobConfig::default()).unwrap();
    (executor, job, calls)
}

/// A tasklet that waits for input is called about once a heartbeat, not once a millisecond:
/// over the same second a polling one is called a thousand times.
#[test]
fn a_worker_whose_tasklets_wait_for_input_parks_for_a_heartbeat() {
    let window = Duration::from_secs(1);
    let mut counts = Vec::new();
    for next in [Some(weir_core::NextCall::OnWake), None] {
        let (_executor, job, calls) = waiting_job(next, None, Duration::from_millis(200));
        // The window is what is measured: how many calls fit in it.
        std::thread::sleep(window);
        counts.push(calls.load(Ordering::Relaxed));
        job.cancel();
        assert!(matches!(finish(job), Err(Error::Cancelled)));
    }
    let (waiting, polling) = (counts[0], counts[1]);
    // 1 s / 200 ms, plus the worker's first yields (64, 32, ... passes: 127 at most, halved
    // by each long park) and the backoff's last looks.
    assert!(
        waiting <= 200,
        "a waiting tasklet was called {waiting} times"
    );
    assert!(
        polling >= 500,
        "a polling tasklet was called only {polling} times"
    );
}

/// A tasklet that asks for a call at an instant gets it then, though nothing else would wake
/// its worker for a minute.
#[test]
fn a_tasklet_is_called_at_the_instant_it_asked_for() {
    let due = std::time::Instant::now() + Duration::from_millis(100);
    let (_executor, job, calls) = waiting_job(
        Some(weir_core::NextCall::At(due)),
        Some(due),
        Duration::from_secs(60),
    );
    finish(job).expect("the job ends once its instant passed");
    assert!(std::time::Instant::now() >= due);
    // The worker's first yields (127 passes at most) and its last looks, not one a millisecond.
    assert!(
        calls.load(Ordering::Relaxed) <= 160,
        "called {} times while waiting",
        calls.load(Ordering::Relaxed)
    );
}
