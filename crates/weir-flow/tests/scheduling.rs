//! Scheduling and queue rules at run time: CRON, run duration, concurrent tasks, expiration,
//! and the prioritizers other than first-in-first-out, in running flows and across
//! swapping and a crash.

mod support;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{Item, Probe, queued_to, start, wait_for};
use weir_flow::definition::{Flow, SyncPolicy};
use weir_flow::engine::queue::Queue;
use weir_flow::flowfile::FlowFile;
use weir_flow::provenance::{EventType, ProvenanceRepository, Query};
use weir_flow::repository::journal::{FlowFileRepository, Op, Txn};

/// A CRON schedule with seconds (Quartz syntax) fires on second boundaries: counted until a
/// deadline, "every second" fires about once a second and "every 2 seconds" half as often.
#[test]
fn cron_schedules_fire_on_their_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: cron
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: every-second, type: Ticker, schedule: { strategy: cron, expression: "* * * * * ?" }, auto_terminate: [success] }
      - { name: every-two, type: Ticker, schedule: { strategy: cron, expression: "0/2 * * * * ?" }, auto_terminate: [success] }
"#;
    let (started, wall_started) = (Instant::now(), std::time::SystemTime::now());
    let engine = start(yaml, &probe, dir.path());
    let window = Duration::from_millis(4500);
    // Count until the deadline (the condition never holds: this is the observation window).
    wait_for(window, || false);
    let ones = probe.triggers("every-second");
    let twos = probe.triggers("every-two");
    engine.stop().unwrap();
    let within = |t: &Vec<Instant>| {
        t.iter()
            .filter(|i| i.duration_since(started) <= window)
            .count()
    };
    let (ones_n, twos_n) = (within(&ones), within(&twos));
    assert!((2..=5).contains(&ones_n), "every second: {ones_n} in 4.5 s");
    assert!((1..=3).contains(&twos_n), "every 2 s: {twos_n} in 4.5 s");
    // CRON fires at wall-clock seconds: a late firing (a loaded machine) may be followed
    // closely by an on-time one, but never two in one second, and "0/2" only on even ones.
    let wall = |i: &Instant| wall_started + i.duration_since(started);
    let seconds = |t: &Vec<Instant>| -> Vec<u64> {
        t.iter()
            .map(|i| {
                wall(i)
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
            })
            .collect()
    };
    let ones_s = seconds(&ones);
    assert!(
        ones_s.windows(2).all(|w| w[0] < w[1]),
        "two firings in one second: {ones_s:?}"
    );
    let twos_s = seconds(&twos);
    assert!(twos_s.windows(2).all(|w| w[0] < w[1]), "{twos_s:?}");
    assert!(
        twos_s.iter().all(|s| s % 2 == 0),
        "0/2 fired on an odd second: {twos_s:?}"
    );
}

/// Run duration batches triggers into one session: with a long run duration, 300 flow files
/// taken one per trigger commit as one session; with none, as 300.
#[test]
fn run_duration_commits_many_triggers_as_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: batching
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - { name: batched, type: Faulty, run_duration: 30 s }
      - { name: single, type: Faulty, run_duration: 0 ms }
      - { name: out, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: batched }
      - { from: feed, relationships: [success], to: single }
      - { from: batched, relationships: [success], to: out }
      - { from: single, relationships: [success], to: out }
"#;
    let engine = start(yaml, &probe, dir.path());
    // One feed session enqueues all 300 at once in each queue.
    probe.feed("feed", (0..300).map(|i| Item::new(&i.to_string(), &[])));
    assert!(wait_for(Duration::from_secs(30), || probe.count("out") == 600));
    let status = engine.status();
    engine.stop().unwrap();
    let of = |name: &str| {
        status
            .components
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .clone()
    };
    let (batched, single) = (of("batched"), of("single"));
    assert_eq!((batched.flowfiles_in, single.flowfiles_in), (300, 300));
    assert_eq!(single.commits, 300, "one session per trigger");
    assert_eq!(batched.commits, 1, "300 triggers, one session");
    // Each took one flow file per trigger either way.
    assert_eq!(probe.attempts().len(), 600);
}

/// Concurrent tasks: a processor with 4 runs 4 triggers at once, with 1 never more than 1.
#[test]
fn concurrent_tasks_run_triggers_at_once() {
    for concurrency in [1usize, 4] {
        let dir = tempfile::tempdir().unwrap();
        let probe = Arc::new(Probe::default());
        let yaml = format!(
            r#"flow: concurrent
settings: {{ sync: none }}
groups:
  - name: g
    processors:
      - {{ name: feed, type: Feed }}
      - {{ name: slow, type: Slow, concurrency: {concurrency} }}
      - {{ name: out, type: Recorder, auto_terminate: [success] }}
    connections:
      - {{ from: feed, relationships: [success], to: slow }}
      - {{ from: slow, relationships: [success], to: out }}
"#
        );
        let engine = start(&yaml, &probe, dir.path());
        probe.feed("feed", (0..8).map(|i| Item::new(&i.to_string(), &[])));
        assert!(wait_for(Duration::from_secs(30), || probe.count("out") == 8));
        engine.stop().unwrap();
        assert_eq!(probe.max_running(), concurrency);
    }
}

/// Flow files older than the connection's expiration are dropped when the next processor
/// would take them, each with an EXPIRE event; younger ones go on.
#[test]
fn expired_flow_files_are_dropped_with_an_expire_event() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: expire
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - { name: sink, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: sink, expiration: 2 s }
"#;
    probe.set_closed("sink", true);
    let engine = start(yaml, &probe, dir.path());
    probe.feed(
        "feed",
        (0..5).map(|i| Item::new("old", &[("n", &i.to_string())])),
    );
    assert!(wait_for(Duration::from_secs(10), || queued_to(
        &engine, "sink"
    ) == 5));
    // Let them age past the expiration.
    let queued_at = Instant::now();
    wait_for(Duration::from_secs(10), || {
        queued_at.elapsed() >= Duration::from_millis(2200)
    });
    probe.feed("feed", (0..3).map(|_| Item::new("fresh", &[])));
    assert!(wait_for(Duration::from_secs(10), || queued_to(
        &engine, "sink"
    ) == 8));
    probe.set_closed("sink", false);
    assert!(wait_for(Duration::from_secs(10), || queued_to(
        &engine, "sink"
    ) == 0));
    let got = probe.recorded("sink");
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|r| r.content == b"fresh"));
    let key = engine.status().connections[0].key.clone();
    let monitor = engine.monitor();
    engine.stop().unwrap();
    // Committed as expired, they are gone: a session that gave them back as it was dropped
    // took the queue's in-flight count below zero (a panic, counted as a failure) and
    // offered them again.
    let sink = monitor.processor("sink").unwrap();
    assert_eq!(sink.failures, 0, "{sink:?}");
    assert_eq!(monitor.connections()[0].queued_count, 0);
    let prov =
        ProvenanceRepository::open(&dir.path().join("repo/provenance"), Duration::MAX, u64::MAX)
            .unwrap();
    let expired = prov
        .query(
            &Query {
                event_type: Some(EventType::EXPIRE),
                ..Query::default()
            },
            100,
        )
        .unwrap();
    assert_eq!(expired.len(), 5);
    let mut ns: Vec<&str> = expired.iter().map(|e| &e.attributes["n"]).collect();
    ns.sort_unstable();
    assert_eq!(ns, ["0", "1", "2", "3", "4"]);
    assert!(expired.iter().all(|e| e.component == key));
}

/// Newest first, oldest first and the `priority` attribute in a running flow: the queues
/// fill while the next processor is held, then it takes them in priority order.
#[test]
fn prioritizers_order_a_running_flow() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: priorities
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed, properties: { Distinct Entry Dates: "true" } }
      - { name: relay, type: Recorder }
      - { name: oldest, type: Recorder, auto_terminate: [success] }
      - { name: by-priority, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: relay, prioritizers: [NewestFlowFileFirst] }
      - { from: relay, relationships: [success], to: oldest, prioritizers: [OldestFlowFileFirst] }
      - { from: feed, relationships: [success], to: by-priority, prioritizers: [PriorityAttribute] }
"#;
    for p in ["relay", "oldest", "by-priority"] {
        probe.set_closed(p, true);
    }
    let engine = start(yaml, &probe, dir.path());
    let priorities = [
        Some("5"),
        Some("3"),
        None,
        Some("10"),
        Some("-1"),
        Some("x"),
        Some("3"),
        Some("b"),
        Some("0"),
        None,
    ];
    probe.feed(
        "feed",
        priorities.iter().enumerate().map(|(n, p)| {
            let n = n.to_string();
            match p {
                Some(p) => Item::new(&n, &[("n", &n), ("priority", p)]),
                None => Item::new(&n, &[("n", &n)]),
            }
        }),
    );
    assert!(wait_for(Duration::from_secs(10), || {
        queued_to(&engine, "relay") == 10 && queued_to(&engine, "by-priority") == 10
    }));
    let order = |name: &str| -> Vec<String> {
        probe
            .recorded(name)
            .iter()
            .map(|r| r.attr("n").to_string())
            .collect()
    };
    probe.set_closed("relay", false);
    assert!(wait_for(Duration::from_secs(10), || queued_to(
        &engine, "oldest"
    ) == 10));
    assert_eq!(
        order("relay"),
        ["9", "8", "7", "6", "5", "4", "3", "2", "1", "0"]
    );
    // They entered the next queue newest first; oldest first turns them around.
    probe.set_closed("oldest", false);
    assert!(wait_for(Duration::from_secs(10), || probe.count("oldest") == 10));
    assert_eq!(
        order("oldest"),
        ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]
    );
    // Numbers ascending (ties in arrival order), then text, then no priority.
    probe.set_closed("by-priority", false);
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("by-priority")
        == 10));
    assert_eq!(
        order("by-priority"),
        ["4", "8", "1", "6", "0", "3", "7", "5", "2", "9"]
    );
    engine.stop().unwrap();
}

fn connection(prioritizer: &str) -> weir_flow::definition::Connection {
    let yaml = format!(
        "flow: q\ngroups:\n  - name: g\n    processors:\n      - {{ name: a, type: Funnel }}\n      - {{ name: b, type: LogAttribute, auto_terminate: [success] }}\n    connections:\n      - {{ from: a, to: b, swap_threshold: 1000, prioritizers: [{prioritizer}], back_pressure: {{ count: 1000000 }} }}\n"
    );
    Flow::parse(&yaml, "q.yaml").unwrap().connections.remove(0)
}

/// The test's own idea of each prioritizer's order.
fn expected_cmp(prioritizer: &str, a: &FlowFile, b: &FlowFile) -> Ordering {
    let by_key = match prioritizer {
        "OldestFlowFileFirst" => a.entry_date.cmp(&b.entry_date),
        "NewestFlowFileFirst" => b.entry_date.cmp(&a.entry_date),
        _ => {
            // Numbers (ascending), then text, then no priority.
            let rank = |f: &FlowFile| match f.attribute("priority") {
                Some(p) => match p.parse::<i64>() {
                    Ok(n) => (0, n, String::new()),
                    Err(_) => (1, 0, p.to_string()),
                },
                None => (2, 0, String::new()),
            };
            rank(a).cmp(&rank(b))
        }
    };
    by_key.then(a.queue_seq.cmp(&b.queue_seq))
}

/// 12,500 flow files with scattered entry dates and priorities behind a swap threshold of
/// 1,000: for each prioritizer, the dequeue order is exact through swap-outs, swap-ins and
/// a crash (the repository dropped without a checkpoint) in the middle.
#[test]
fn prioritizer_order_survives_swapping_and_a_crash() {
    const N: u64 = 12_500;
    for prioritizer in [
        "OldestFlowFileFirst",
        "NewestFlowFileFirst",
        "PriorityAttribute",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let conn = connection(prioritizer);
        let keys = vec![conn.key.clone()];
        let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::None, &keys).unwrap();
        let queue = Queue::new(0, conn.clone(), vec![], vec![]);
        let mut all = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for chunk in 0..N / 500 {
            let ffs: Vec<FlowFile> = (0..500)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let mut attributes =
                        BTreeMap::from([("n".to_string(), (chunk * 500 + i).to_string())]);
                    match x % 10 {
                        0 => {}
                        1 => {
                            attributes.insert("priority".into(), format!("t{}", x % 7));
                        }
                        _ => {
                            attributes.insert("priority".into(), ((x >> 8) % 50).to_string());
                        }
                    }
                    FlowFile {
                        id: repo.next_id(),
                        attributes: attributes.into(),
                        claim: None,
                        entry_date: 1_700_000_000_000 + ((x >> 20) % 5_000) as i64,
                        lineage_start: 0,
                        queue_seq: repo.next_seq(),
                    }
                })
                .collect();
            repo.commit(Txn {
                ops: ffs
                    .iter()
                    .map(|f| Op::Put {
                        queue: 0,
                        flowfile: f.clone(),
                    })
                    .collect(),
                events: vec![],
            })
            .unwrap();
            all.extend(ffs.iter().cloned());
            queue.enqueue(&repo, ffs).unwrap();
        }
        assert!(queue.counts().swapped >= 10_000, "{prioritizer}: swapped");
        all.sort_by(|a, b| expected_cmp(prioritizer, a, b));
        let expected: Vec<String> = all.iter().map(|f| f.attributes["n"].to_string()).collect();
        let take = |repo: &FlowFileRepository, queue: &Queue, n: usize, got: &mut Vec<String>| {
            let mut taken = 0;
            while taken < n {
                let (ffs, _) = queue
                    .poll(repo, 300.min(n - taken), Instant::now())
                    .unwrap();
                if ffs.is_empty() {
                    break;
                }
                taken += ffs.len();
                got.extend(ffs.iter().map(|f| f.attributes["n"].to_string()));
                repo.commit(Txn {
                    ops: ffs.iter().map(|f| Op::Delete { id: f.id }).collect(),
                    events: vec![],
                })
                .unwrap();
                queue.acknowledge(ffs.len() as u64, 0);
            }
        };
        let mut got = Vec::new();
        take(&repo, &queue, 4_000, &mut got);
        drop(queue);
        drop(repo);
        let (repo, rec) = FlowFileRepository::open(dir.path(), SyncPolicy::None, &keys).unwrap();
        let queue = Queue::new(
            0,
            conn,
            rec.queues.into_iter().next().unwrap(),
            rec.swaps.into_iter().next().unwrap(),
        );
        assert_eq!(queue.counts().count, N - 4_000, "{prioritizer}");
        take(&repo, &queue, usize::MAX, &mut got);
        assert_eq!(got.len(), expected.len(), "{prioritizer}: count");
        let first_wrong = got.iter().zip(&expected).position(|(g, e)| g != e);
        assert_eq!(first_wrong, None, "{prioritizer}: order");
    }
}
