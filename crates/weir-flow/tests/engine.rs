//! The engine's queues under load: swapping with exact order, back pressure.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weir_flow::definition::{Flow, SyncPolicy};
use weir_flow::engine::Engine;
use weir_flow::engine::queue::Queue;
use weir_flow::flowfile::FlowFile;
use weir_flow::repository::journal::{FlowFileRepository, Op, Txn};

fn connection() -> weir_flow::definition::Connection {
    let yaml = "flow: q\ngroups:\n  - name: g\n    processors:\n      - { name: a, type: Funnel }\n      - { name: b, type: LogAttribute, auto_terminate: [success] }\n    connections:\n      - { from: a, to: b, swap_threshold: 20000, back_pressure: { count: 1000000 } }\n";
    Flow::parse(yaml, "q.yaml").unwrap().connections.remove(0)
}

/// 100,000 queued flow files with a swap threshold of 20,000: memory holds at most the
/// threshold plus one swap batch, and dequeue order and count are exact after swapping and
/// after a crash (the repository dropped without a checkpoint, as SIGKILL leaves it).
#[test]
fn swap_keeps_order_and_count_and_bounds_memory() {
    const N: u64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let conn = connection();
    let keys = vec![conn.key.clone()];
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::None, &keys).unwrap();
    let queue = Queue::new(0, conn.clone(), vec![], vec![]);
    let mut max_in_memory = 0;
    for chunk in 0..N / 1000 {
        let ffs: Vec<FlowFile> = (0..1000)
            .map(|i| FlowFile {
                id: repo.next_id(),
                attributes: BTreeMap::from([("n".to_string(), (chunk * 1000 + i).to_string())])
                    .into(),
                claim: None,
                entry_date: 0,
                lineage_start: 0,
                queue_seq: repo.next_seq(),
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
        queue.enqueue(&repo, ffs).unwrap();
        max_in_memory = max_in_memory.max(queue.counts().in_memory);
    }
    let c = queue.counts();
    assert_eq!(c.count, N);
    assert!(c.swapped >= 60_000, "swapped {}", c.swapped);
    assert!(max_in_memory < 20_000 + 10_000, "in memory {max_in_memory}");
    // Dequeue 45,000 (through a swap-in), committing each batch.
    let mut next = 0u64;
    let take = |repo: &FlowFileRepository, queue: &Queue, n: usize, next: &mut u64| {
        let mut taken = 0;
        while taken < n {
            let (ffs, _) = queue
                .poll(repo, 500.min(n - taken), Instant::now())
                .unwrap();
            if ffs.is_empty() {
                break;
            }
            for f in &ffs {
                assert_eq!(f.attributes["n"], next.to_string());
                *next += 1;
            }
            taken += ffs.len();
            repo.commit(Txn {
                ops: ffs.iter().map(|f| Op::Delete { id: f.id }).collect(),
                events: vec![],
            })
            .unwrap();
            queue.acknowledge(ffs.len() as u64, 0);
        }
        taken
    };
    assert_eq!(take(&repo, &queue, 45_000, &mut next), 45_000);
    drop(queue);
    drop(repo);
    // Recover: the rest, in order, exactly.
    let (repo, rec) = FlowFileRepository::open(dir.path(), SyncPolicy::None, &keys).unwrap();
    let queue = Queue::new(
        0,
        conn,
        rec.queues.into_iter().next().unwrap(),
        rec.swaps.into_iter().next().unwrap(),
    );
    assert_eq!(queue.counts().count, N - 45_000);
    assert!(queue.counts().in_memory <= 30_000);
    assert_eq!(
        take(&repo, &queue, usize::MAX, &mut next) as u64,
        N - 45_000
    );
    assert_eq!(next, N);
    assert_eq!(queue.counts().count, 0);
}

/// A slow PutFile behind a fast GenerateFlowFile: the queue between them never holds more
/// than its threshold plus one batch.
#[test]
fn back_pressure_bounds_the_queue_to_threshold_plus_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let yaml = format!(
        "flow: bp\nsettings: {{ sync: none }}\ngroups:\n  - name: g\n    processors:\n      - {{ name: gen, type: GenerateFlowFile, properties: {{ File Size: 100 B, Batch Size: \"25\", Unique FlowFiles: \"true\" }} }}\n      - name: put\n        type: PutFile\n        schedule: {{ strategy: timer, period: 30 ms }}\n        properties: {{ Directory: \"{}\", Conflict Resolution Strategy: replace }}\n        auto_terminate: [success, failure]\n    connections:\n      - {{ from: gen, relationships: [success], to: put, back_pressure: {{ count: 200 }} }}\n",
        out.display()
    );
    let flow = Flow::parse(&yaml, "bp.yaml").unwrap();
    let engine = Engine::start(flow, &dir.path().join("repo")).unwrap();
    let until = Instant::now() + Duration::from_millis(2500);
    let mut peak = 0;
    while Instant::now() < until {
        peak = peak.max(engine.status().connections[0].count);
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = engine.status();
    engine.stop().unwrap();
    let high = status.connections[0].high_water;
    assert!(high >= 200, "the threshold was reached ({high})");
    assert!(high <= 200 + 25, "at most one batch over: {high}");
    assert!(peak <= 225);
    assert!(
        status.components[1].flowfiles_in > 0,
        "PutFile made progress"
    );
}
