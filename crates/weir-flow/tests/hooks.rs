//! `Session::before_commit`: a destination's own commit runs before the session's (or the
//! stateless transaction's) commit and before any completion hook, and its failure rolls
//! back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_flow::definition::Flow;
use weir_flow::engine::{CommitRefused, Completion, Engine, Session};
use weir_flow::processors::registry::ProcessorRegistry;
use weir_flow::processors::spec::{Dynamic, ProcessorSpec};
use weir_flow::processors::{ProcessError, Processor, Trigger};

/// What happened, in order: `before N`, `refused N`, `complete N Committed|RolledBack`.
#[derive(Default)]
struct Log {
    lines: Mutex<Vec<String>>,
    triggers: AtomicUsize,
}

impl Log {
    fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// `Gate`: passes each flow file on, with a hook before the commit that refuses the first
/// trigger's and accepts the others, and a completion hook that logs the outcome.
static GATE: ProcessorSpec = ProcessorSpec {
    kind: "Gate",
    description: "A test processor.",
    properties: &[],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: false,
};

struct Gate(Arc<Log>);

impl Processor for Gate {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(ff) = session.get()? else {
            return Ok(Trigger::Idle);
        };
        let n = self.0.triggers.fetch_add(1, Ordering::SeqCst) + 1;
        let log = Arc::clone(&self.0);
        session.before_commit(move || {
            if n == 1 {
                log.push(format!("refused {n}"));
                Err(CommitRefused::new(
                    "gate",
                    "the destination refused its commit",
                ))
            } else {
                log.push(format!("before {n}"));
                Ok(())
            }
        });
        let log = Arc::clone(&self.0);
        session.on_complete(move |c| {
            let outcome = match c {
                Completion::Committed => "Committed",
                Completion::RolledBack { .. } => "RolledBack",
            };
            log.push(format!("complete {n} {outcome}"));
        });
        session.transfer(ff, "success")?;
        Ok(Trigger::Worked)
    }
}

fn run(engine_line: &str) -> (Vec<String>, u64) {
    let log = Arc::new(Log::default());
    let mut registry = ProcessorRegistry::default();
    let l = Arc::clone(&log);
    registry
        .register(&GATE, move |_| Ok(Arc::new(Gate(Arc::clone(&l)))))
        .unwrap();
    let yaml = format!(
        "flow: hooks\nsettings: {{ sync: none }}\ngroups:\n  - name: g\n{engine_line}    processors:\n      - {{ name: gen, type: GenerateFlowFile, schedule: {{ strategy: timer, period: 50 ms }}, penalty: 10 ms, yield: 10 ms }}\n      - {{ name: gate, type: Gate, penalty: 10 ms, yield: 10 ms, auto_terminate: [success] }}\n    connections:\n      - {{ from: gen, relationships: [success], to: gate }}\n"
    );
    let flow = Flow::parse_with(&yaml, "hooks.yaml", &registry).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(flow, dir.path()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while log
        .lines()
        .iter()
        .filter(|l| l.ends_with("Committed"))
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "{:?}", log.lines());
        std::thread::sleep(Duration::from_millis(10));
    }
    let monitor = engine.monitor();
    engine.stop().unwrap();
    let failures = monitor.processors().iter().map(|p| p.failures).sum();
    (log.lines(), failures)
}

fn check(lines: &[String]) {
    // The first commit is refused: its session (or transaction) rolls back, and its
    // completion hook hears so; later ones run their hook before their completion.
    assert_eq!(lines[0], "refused 1", "{lines:?}");
    assert_eq!(lines[1], "complete 1 RolledBack", "{lines:?}");
    let before_2 = lines.iter().position(|l| l == "before 2").unwrap();
    let complete_2 = lines
        .iter()
        .position(|l| l == "complete 2 Committed")
        .unwrap();
    assert!(before_2 < complete_2, "{lines:?}");
    assert!(
        !lines.iter().any(|l| l == "complete 1 Committed"),
        "{lines:?}"
    );
}

#[test]
fn a_refused_commit_rolls_a_traditional_session_back() {
    let (lines, failures) = run("");
    check(&lines);
    assert!(failures >= 1);
}

#[test]
fn a_refused_commit_rolls_a_stateless_transaction_back_before_any_acknowledgement() {
    let (lines, failures) = run("    engine: stateless\n    timeout: 10 s\n");
    check(&lines);
    assert!(failures >= 1, "the rollback is counted as a failure");
}
