//! Custom processor types for engine tests, registered through the public
//! [`ProcessorRegistry`]: a source fed by the test, a recorder that can be held closed (a
//! stopped processor) and logs what it receives, and a faulty processor that panics or fails
//! once per flow file.

// Each test file uses a part of this module.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
pub use weir_test_support::wait_for;

use weir_flow::definition::Flow;
use weir_flow::engine::{Engine, Session};
use weir_flow::processors::registry::ProcessorRegistry;
use weir_flow::processors::spec::{Dynamic, ProcessorSpec, PropertyKind, PropertySpec};
use weir_flow::processors::{ProcessError, Processor, Trigger};

/// A flow file the test wants a `Feed` to create.
#[derive(Debug, Clone, Default)]
pub struct Item {
    /// Attributes to set.
    pub attributes: Vec<(String, String)>,
    /// Content.
    pub content: Vec<u8>,
}

impl Item {
    /// An item with one attribute and some content.
    pub fn new(content: &str, attributes: &[(&str, &str)]) -> Item {
        Item {
            attributes: attributes
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            content: content.as_bytes().to_vec(),
        }
    }
}

/// What a `Recorder` saw of one flow file.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Attributes.
    pub attributes: BTreeMap<String, String>,
    /// Content.
    pub content: Vec<u8>,
    /// Its entry date (ms).
    pub entry_date: i64,
}

impl Recorded {
    /// An attribute, or "".
    pub fn attr(&self, name: &str) -> &str {
        self.attributes.get(name).map_or("", String::as_str)
    }
}

/// One trigger of a `Faulty` processor.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The flow file's uuid.
    pub uuid: String,
    /// When it was taken.
    pub at: Instant,
    /// `panic`, `error` or `ok`.
    pub outcome: &'static str,
}

/// Shared state between a test and its custom processors.
#[derive(Default)]
pub struct Probe {
    feed: Mutex<HashMap<String, VecDeque<Item>>>,
    closed: Mutex<HashSet<String>>,
    recorded: Mutex<HashMap<String, Vec<Recorded>>>,
    attempts: Mutex<Vec<Attempt>>,
    failed_once: Mutex<HashSet<String>>,
    /// Triggers per component (every call, idle or not).
    triggers: Mutex<HashMap<String, Vec<Instant>>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
}

impl Probe {
    /// Queues items for the `Feed` named `component`.
    pub fn feed(&self, component: &str, items: impl IntoIterator<Item = Item>) {
        self.feed
            .lock()
            .unwrap()
            .entry(component.into())
            .or_default()
            .extend(items);
    }

    /// Holds the `Recorder` named `component` (it takes nothing) or lets it run.
    pub fn set_closed(&self, component: &str, closed: bool) {
        let mut c = self.closed.lock().unwrap();
        if closed {
            c.insert(component.into());
        } else {
            c.remove(component);
        }
    }

    fn is_closed(&self, component: &str) -> bool {
        self.closed.lock().unwrap().contains(component)
    }

    /// What the `Recorder` named `component` received, in order.
    pub fn recorded(&self, component: &str) -> Vec<Recorded> {
        self.recorded
            .lock()
            .unwrap()
            .get(component)
            .cloned()
            .unwrap_or_default()
    }

    /// How many flow files `component` recorded.
    pub fn count(&self, component: &str) -> usize {
        self.recorded
            .lock()
            .unwrap()
            .get(component)
            .map_or(0, Vec::len)
    }

    /// The `Faulty` processor's attempts.
    pub fn attempts(&self) -> Vec<Attempt> {
        self.attempts.lock().unwrap().clone()
    }

    /// When `component` (a `Ticker`) was triggered.
    pub fn triggers(&self, component: &str) -> Vec<Instant> {
        self.triggers
            .lock()
            .unwrap()
            .get(component)
            .cloned()
            .unwrap_or_default()
    }

    /// The most `Slow` triggers that ran at once.
    pub fn max_running(&self) -> usize {
        self.max_running.load(Ordering::SeqCst)
    }
}

const NO_PROPERTIES: &[PropertySpec] = &[];

/// `Feed`: a source that creates the items the test queued for it (transfers to `success`).
/// With `Distinct Entry Dates`, no two flow files share an entry millisecond.
static FEED: ProcessorSpec = ProcessorSpec {
    kind: "Feed",
    description: "A test processor.",
    properties: &[PropertySpec::new(
        "Distinct Entry Dates",
        true,
        Some("false"),
        PropertyKind::Bool,
    )],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: true,
};

/// `Recorder`: logs each flow file it takes and sends it to `success`; held closed, it takes
/// nothing.
static RECORDER: ProcessorSpec = ProcessorSpec {
    kind: "Recorder",
    description: "A test processor.",
    properties: NO_PROPERTIES,
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: false,
};

/// `Faulty`: takes one flow file per trigger and writes new content; the first time it sees
/// a flow file whose `fault` attribute is `panic` it panics, `error` it returns an error;
/// otherwise it sends it to `success`.
static FAULTY: ProcessorSpec = ProcessorSpec {
    kind: "Faulty",
    description: "A test processor.",
    properties: NO_PROPERTIES,
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: false,
};

/// `Ticker`: a source that records when it is triggered and makes nothing.
static TICKER: ProcessorSpec = ProcessorSpec {
    kind: "Ticker",
    description: "A test processor.",
    properties: NO_PROPERTIES,
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: true,
};

/// `Slow`: takes one flow file per trigger, counts triggers running at once, and waits (up
/// to 5 s) until as many run as the component's concurrency before it goes on.
static SLOW: ProcessorSpec = ProcessorSpec {
    kind: "Slow",
    description: "A test processor.",
    properties: NO_PROPERTIES,
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: false,
};

struct Feed {
    probe: Arc<Probe>,
    distinct: bool,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

impl Processor for Feed {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let items: Vec<Item> = {
            let mut feed = self.probe.feed.lock().unwrap();
            let Some(q) = feed.get_mut(session.component_name()) else {
                return Ok(Trigger::Idle);
            };
            let n = q.len().min(1000);
            q.drain(..n).collect()
        };
        if items.is_empty() {
            return Ok(Trigger::Idle);
        }
        for item in items {
            if self.distinct {
                // The session stamps entry dates in ms: start each flow file in a new one.
                let start = now_ms();
                while now_ms() == start {
                    std::hint::spin_loop();
                }
            }
            let ff = session.create();
            session.write(ff, &item.content)?;
            for (k, v) in item.attributes {
                session.put_attribute(ff, &k, v);
            }
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::Worked)
    }
}

struct Recorder {
    probe: Arc<Probe>,
    name: String,
}

impl Processor for Recorder {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        if self.probe.is_closed(&self.name) {
            return Ok(Trigger::Idle);
        }
        let ffs = session.get_batch(1000)?;
        let mut seen = Vec::with_capacity(ffs.len());
        for &ff in &ffs {
            let f = session.flowfile(ff);
            // As a user sees them: the map and the derived `fileSize`.
            let mut attributes = f.attributes.to_map();
            attributes.insert("fileSize".into(), f.size().to_string());
            seen.push(Recorded {
                attributes,
                content: session.read(ff)?.to_vec(),
                entry_date: f.entry_date,
            });
            session.transfer(ff, "success")?;
        }
        self.probe
            .recorded
            .lock()
            .unwrap()
            .entry(self.name.clone())
            .or_default()
            .extend(seen);
        Ok(if ffs.is_empty() {
            Trigger::Idle
        } else {
            Trigger::Worked
        })
    }

    fn schedulable(&self) -> bool {
        !self.probe.is_closed(&self.name)
    }
}

struct Faulty {
    probe: Arc<Probe>,
}

impl Processor for Faulty {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(ff) = session.get()? else {
            return Ok(Trigger::Idle);
        };
        let uuid = session
            .attribute(ff, "uuid")
            .unwrap_or_default()
            .to_string();
        let fault = session
            .attribute(ff, "fault")
            .unwrap_or_default()
            .to_string();
        // New content first, so that a rollback has an uncommitted claim to release.
        session.write(ff, b"changed by Faulty")?;
        let first = self.probe.failed_once.lock().unwrap().insert(uuid.clone());
        let outcome = match fault.as_str() {
            "panic" if first => "panic",
            "error" if first => "error",
            _ => "ok",
        };
        self.probe.attempts.lock().unwrap().push(Attempt {
            uuid: uuid.clone(),
            at: Instant::now(),
            outcome,
        });
        match outcome {
            "panic" => panic!("Faulty panics on {uuid}"),
            "error" => Err(ProcessError::Other(format!("Faulty fails on {uuid}"))),
            _ => {
                session.transfer(ff, "success")?;
                Ok(Trigger::Worked)
            }
        }
    }
}

struct Ticker {
    probe: Arc<Probe>,
    name: String,
}

impl Processor for Ticker {
    fn trigger(&self, _session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        self.probe
            .triggers
            .lock()
            .unwrap()
            .entry(self.name.clone())
            .or_default()
            .push(Instant::now());
        Ok(Trigger::Worked)
    }
}

struct Slow {
    probe: Arc<Probe>,
    concurrency: usize,
}

impl Processor for Slow {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(ff) = session.get()? else {
            return Ok(Trigger::Idle);
        };
        let now = self.probe.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.probe.max_running.fetch_max(now, Ordering::SeqCst);
        // Hold the trigger until every task is inside one (or 5 s pass): the count shows
        // how many run at once.
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.probe.max_running.load(Ordering::SeqCst) < self.concurrency
            && Instant::now() < deadline
        {
            std::thread::yield_now();
        }
        self.probe.running.fetch_sub(1, Ordering::SeqCst);
        session.transfer(ff, "success")?;
        Ok(Trigger::Worked)
    }
}

/// A registry with `Feed`, `Recorder`, `Faulty`, `Ticker` and `Slow`, all sharing `probe`.
pub fn registry(probe: &Arc<Probe>) -> ProcessorRegistry {
    let mut r = ProcessorRegistry::default();
    let p = Arc::clone(probe);
    r.register(&FEED, move |c| {
        Ok(Arc::new(Feed {
            probe: Arc::clone(&p),
            distinct: c.property("Distinct Entry Dates") == Some("true"),
        }))
    })
    .unwrap();
    let p = Arc::clone(probe);
    r.register(&RECORDER, move |c| {
        Ok(Arc::new(Recorder {
            probe: Arc::clone(&p),
            name: c.name.clone(),
        }))
    })
    .unwrap();
    let p = Arc::clone(probe);
    r.register(&FAULTY, move |_| {
        Ok(Arc::new(Faulty {
            probe: Arc::clone(&p),
        }))
    })
    .unwrap();
    let p = Arc::clone(probe);
    r.register(&TICKER, move |c| {
        Ok(Arc::new(Ticker {
            probe: Arc::clone(&p),
            name: c.name.clone(),
        }))
    })
    .unwrap();
    let p = Arc::clone(probe);
    r.register(&SLOW, move |c| {
        Ok(Arc::new(Slow {
            probe: Arc::clone(&p),
            concurrency: c.concurrency,
        }))
    })
    .unwrap();
    r
}

/// Parses `yaml` with the test registry and starts it in `dir/repo`.
pub fn start(yaml: &str, probe: &Arc<Probe>, dir: &Path) -> Engine {
    try_start(yaml, probe, dir).unwrap()
}

/// As [`start`], returning the engine's start error as text.
#[allow(dead_code)] // each test binary uses what it needs
pub fn try_start(yaml: &str, probe: &Arc<Probe>, dir: &Path) -> Result<Engine, String> {
    let flow = Flow::parse_with(yaml, "test.yaml", &registry(probe))
        .unwrap_or_else(|e| panic!("invalid test flow: {e}\n{yaml}"));
    Engine::start(flow, &dir.join("repo")).map_err(|e| format!("{e:?}"))
}

/// The queued count of the connection whose key starts with `from`.
pub fn queued(engine: &Engine, from: &str) -> u64 {
    engine
        .status()
        .connections
        .iter()
        .find(|c| c.key.starts_with(&format!("{from}[")))
        .map_or(0, |c| c.count)
}

/// The queued count of the connection into `to`.
pub fn queued_to(engine: &Engine, to: &str) -> u64 {
    engine
        .status()
        .connections
        .iter()
        .find(|c| c.key.ends_with(&format!("]->{to}")))
        .map_or(0, |c| c.count)
}
