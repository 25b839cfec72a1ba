//! Watermarks: idle inputs and the inbox drain stopping at a watermark.

use super::*;

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

/// Holds each watermark for `delay` of work before passing it on.
struct SlowRelay {
    delay: Duration,
}

impl Processor for SlowRelay {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        while let Some(x) = inbox.items::<u64>().pop_front() {
            if let Err(x) = outbox.port::<u64>(0).offer(x) {
                inbox.items::<u64>().push_front(x);
                break;
            }
        }
        Ok(())
    }

    fn try_process_watermark(
        &mut self,
        wm: weir_core::Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        // The work a window stage does to emit its results; what is measured, not a wait
        // for another thread.
        std::thread::sleep(self.delay);
        Ok(outbox.offer_watermark(wm))
    }
}

#[test]
fn sinks_measure_each_watermark_from_its_source() {
    let script: Vec<Event> = (1..=5)
        .flat_map(|i| [Event::Item(i as u64), Event::Watermark(i * 10)])
        .collect();
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("scripted", move |_| Scripted {
            script: script.clone(),
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let relay = dag.vertex(
        Vertex::new("relay", |_| SlowRelay {
            delay: Duration::from_millis(25),
        })
        .accepts::<u64>()
        .emits::<u64>()
        .local_parallelism(1),
    );
    let (supplier, collected) = CollectSink::<u64>::supplier();
    let sink = dag.vertex(
        Vertex::new("sink", supplier)
            .accepts::<u64>()
            .local_parallelism(2),
    );
    dag.edge(Edge::between(source, relay));
    dag.edge(Edge::between(relay, sink));
    let job = executor().submit(dag, JobConfig::default()).unwrap();
    let monitor = job.monitor();
    finish(job).unwrap();
    assert_eq!(collected.lock().unwrap().len(), 5);
    let metrics = monitor.metrics();
    let latency_of = |vertex: &str| {
        let mut total = weir_core::LatencySnapshot::default();
        for m in metrics.iter().filter(|m| m.vertex == vertex) {
            total.merge(&m.window_latency);
        }
        total
    };
    assert_eq!(latency_of("scripted").count(), 0, "only sinks record");
    assert_eq!(latency_of("relay").count(), 0, "only sinks record");
    let at_sinks = latency_of("sink");
    // Five watermarks, each to both sink instances; the end of input is not a latency.
    assert_eq!(at_sinks.count(), 10, "{at_sinks:?}");
    // The relay held each one 25 ms after its source sent it: the source's time travelled
    // with it. (Buckets up to 20 ms are empty.)
    let within_20ms = weir_core::LATENCY_BUCKETS
        .iter()
        .position(|b| *b == 0.02)
        .unwrap();
    assert_eq!(
        at_sinks.counts[..=within_20ms].iter().sum::<u64>(),
        0,
        "{at_sinks:?}"
    );
    assert!(at_sinks.sum >= Duration::from_millis(250), "{at_sinks:?}");
}
