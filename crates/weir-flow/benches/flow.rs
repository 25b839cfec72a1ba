//! Whole-flow benchmarks of the traditional engine, each against its yardstick.
//!
//! - 1 KiB flow files, GenerateFlowFile → UpdateAttribute → PutFile with `sync: always`, in
//!   flow files/s, against a hand loop doing the same work with the fewest syncs the same
//!   durability needs. What the engine guarantees: with PutFile's `Sync`, an output is on
//!   disk (data, name and directory entry) before its flow file is dropped, and with
//!   `sync: always` every commit's record (the flow files and their provenance) is on disk
//!   before it is acknowledged; after a crash nothing acknowledged is lost. The engine needs a
//!   content file and three commits per batch because its flow files wait in queues between
//!   three sessions; a hand loop that generates, tags and writes a batch in one step keeps no
//!   such state. Per batch of 100 it writes the outputs (each to a temporary name), with
//!   `Sync` syncs their data all at once (on a pool of a thread per output, started once, as
//!   PutFile uses the runtime's blocking pool), renames them and syncs the directory; then
//!   it appends one journal frame recording the batch (ids, attributes, in the engine's
//!   frame format) and syncs the journal. Each step must be durable before the next claims
//!   it: outputs, directory, journal. The loop is pipelined as the engine's sessions are: a
//!   committer thread does the directory and journal syncs for every batch renamed since its
//!   last round (group commit, as the engine's journal does) while the main thread writes
//!   the next batch. That is at most one journal sync per batch without `Sync` and, with it,
//!   the outputs' syncs plus at most one directory and one journal sync, against the
//!   engine's content sync, three journal syncs (some shared by group commit) and, with
//!   `Sync`, the outputs' and the directory's. Its outputs are checked after the run.
//! - 1 MiB flow files, GetFile → PutFile, in MB/s, against the disk's bandwidth for durable
//!   files written with the engine's concurrency: GetFile hands PutFile batches of 10, whose
//!   outputs are synced all at once, so the yardstick writes the same 200 files in groups of
//!   10, each file created, written and `fdatasync`ed by a thread of its own, and the
//!   directory synced once per group. It runs before and after each engine run in several
//!   rounds; the median round's ratio is the figure.
//! - Recovery time and memory with 1 M queued flow files (swap threshold 20,000).
//!
//! Each measured run of the first two starts with every file system's dirty pages flushed
//! (`sync`), so that none pays for the write-back of the run before it.
//!
//! `cargo bench -p weir-flow --bench flow [-- small|large|recovery]`; `WEIR_FLOW_BENCH_SECS`
//! (default 5) sets each 1 KiB engine run, `WEIR_FLOW_BENCH_ROUNDS` (default 5) the 1 MiB
//! rounds, `WEIR_FLOW_BENCH_QUEUED` (default 1,000,000) the recovery size.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use weir_flow::definition::{Flow, SyncPolicy};
use weir_flow::engine::Engine;
use weir_flow::engine::queue::Queue;
use weir_flow::flowfile::FlowFile;
use weir_flow::repository::journal::{FlowFileRepository, Op, Txn};

const BATCH: usize = 100;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Flushes every file system's dirty pages (`sync`), so that a run does not pay for the
/// write-back of the one before it: 70,000 unsynced outputs of an engine run otherwise go
/// to disk during the next run, inside its syncs (ext4 commits them with its journal).
fn settle() {
    let status = std::process::Command::new("sync").status().unwrap();
    assert!(status.success(), "sync failed");
}

fn small_files_engine(dir: &Path, secs: u64, sync: bool) -> f64 {
    let yaml = format!(
        "flow: bench\nsettings: {{ sync: always }}\ngroups:\n  - name: g\n    processors:\n      - {{ name: gen, type: GenerateFlowFile, properties: {{ File Size: 1 KB, Batch Size: \"{BATCH}\" }} }}\n      - {{ name: tag, type: UpdateAttribute, properties: {{ n: \"${{uuid:substring(0,8)}}\" }} }}\n      - name: put\n        type: PutFile\n        properties: {{ Directory: \"{}\", Conflict Resolution Strategy: replace, Sync: \"{sync}\" }}\n        auto_terminate: [success, failure]\n    connections:\n      - {{ from: gen, relationships: [success], to: tag }}\n      - {{ from: tag, relationships: [success], to: put }}\n",
        dir.join("out").display()
    );
    let engine =
        Engine::start(Flow::parse(&yaml, "bench.yaml").unwrap(), &dir.join("repo")).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let start_count = engine.status().components[2].flowfiles_in;
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let done = engine.status().components[2].flowfiles_in - start_count;
    let rate = done as f64 / started.elapsed().as_secs_f64();
    engine.stop().unwrap();
    rate
}

/// The same work by hand, with the fewest syncs its durability needs, pipelined (see the
/// module docs): this thread writes each batch's outputs (with `sync`: their data synced at
/// once, by a pool of a thread per output, started once) and renames them; a committer thread takes every batch renamed so
/// far, syncs the directory once (with `sync`), appends a journal frame per batch in one
/// write and syncs the journal once, while this thread goes on with the next batch.
fn small_files_hand_loop(dir: &Path, secs: u64, sync: bool) -> f64 {
    let out = dir.join("out");
    fs::create_dir_all(&out).unwrap();
    let out_dir = fs::File::open(&out).unwrap();
    let mut journal = fs::File::create(dir.join("journal")).unwrap();
    let data = vec![b'x'; 1024];
    let (renamed, to_commit) = std::sync::mpsc::sync_channel::<Vec<FlowFile>>(4);
    let started = Instant::now();
    let done = std::thread::scope(|scope| {
        let committer = scope.spawn(move || {
            let (mut txn, mut done) = (0u64, 0u64);
            let mut frames = Vec::new();
            while let Ok(first) = to_commit.recv() {
                let batches: Vec<Vec<FlowFile>> =
                    std::iter::once(first).chain(to_commit.try_iter()).collect();
                // The renames on disk before the frames that record them.
                if sync {
                    out_dir.sync_all().unwrap();
                }
                frames.clear();
                for records in &batches {
                    // The journal's frame: length, transaction, their checksum, the payload's.
                    let payload = postcard::to_allocvec(records).unwrap();
                    txn += 1;
                    let header = frames.len();
                    frames.extend_from_slice(&(payload.len() as u32).to_le_bytes());
                    frames.extend_from_slice(&txn.to_le_bytes());
                    let crc = crc32c::crc32c(&frames[header..header + 12]);
                    frames.extend_from_slice(&crc.to_le_bytes());
                    frames.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
                    frames.extend_from_slice(&payload);
                    done += records.len() as u64;
                }
                journal.write_all(&frames).unwrap();
                journal.sync_data().unwrap();
            }
            done
        });
        // The syncing threads, started once and reused, as the engine's blocking pool is:
        // each syncs the files sent to it and says so.
        let (synced, sync_done) = std::sync::mpsc::channel::<()>();
        let syncers: Vec<std::sync::mpsc::Sender<std::sync::Arc<fs::File>>> = (0..BATCH)
            .map(|_| {
                let (to_sync, files) = std::sync::mpsc::channel::<std::sync::Arc<fs::File>>();
                let synced = synced.clone();
                scope.spawn(move || {
                    for f in files {
                        f.sync_data().unwrap();
                        synced.send(()).unwrap();
                    }
                });
                to_sync
            })
            .collect();
        let mut next = 0u64;
        while started.elapsed() < Duration::from_secs(secs) {
            let records: Vec<FlowFile> = (next..next + BATCH as u64)
                .map(|id| FlowFile {
                    id,
                    attributes: BTreeMap::from([
                        ("uuid".to_string(), uuid::Uuid::new_v4().to_string()),
                        ("filename".to_string(), format!("f{id}")),
                    ])
                    .into(),
                    claim: None,
                    entry_date: 0,
                    lineage_start: 0,
                    queue_seq: id,
                })
                .collect();
            let written: Vec<(
                std::sync::Arc<fs::File>,
                std::path::PathBuf,
                std::path::PathBuf,
            )> = records
                .iter()
                .map(|r| {
                    let name = &r.attributes["filename"];
                    let tmp = out.join(format!(".{name}.tmp"));
                    let mut f = fs::File::create(&tmp).unwrap();
                    f.write_all(&data).unwrap();
                    (std::sync::Arc::new(f), tmp, out.join(name))
                })
                .collect();
            if sync {
                for ((f, _, _), syncer) in written.iter().zip(&syncers) {
                    syncer.send(std::sync::Arc::clone(f)).unwrap();
                }
                for _ in &written {
                    sync_done.recv().unwrap();
                }
            }
            for (_, tmp, target) in &written {
                fs::rename(tmp, target).unwrap();
            }
            next += BATCH as u64;
            renamed.send(records).unwrap();
        }
        drop((renamed, syncers));
        committer.join().unwrap()
    });
    let rate = done as f64 / started.elapsed().as_secs_f64();
    // The check: every output there, whole.
    for i in 0..done {
        let len = fs::metadata(out.join(format!("f{i}"))).unwrap().len();
        assert_eq!(len, data.len() as u64, "output f{i}");
    }
    rate
}

fn large_files_engine(dir: &Path, files: usize) -> f64 {
    let input = dir.join("in");
    fs::create_dir_all(&input).unwrap();
    let data = vec![7u8; 1 << 20];
    for i in 0..files {
        let mut f = fs::File::create(input.join(format!("f{i:05}"))).unwrap();
        f.write_all(&data).unwrap();
        // On disk before the clock starts, as files waiting for pickup would be: their
        // write-back does not compete with the run.
        f.sync_all().unwrap();
    }
    let yaml = format!(
        "flow: big\nsettings: {{ sync: always }}\ngroups:\n  - name: g\n    processors:\n      - {{ name: get, type: GetFile, properties: {{ Input Directory: \"{}\", Batch Size: \"10\" }} }}\n      - name: put\n        type: PutFile\n        properties: {{ Directory: \"{}\", Conflict Resolution Strategy: replace }}\n        auto_terminate: [success, failure]\n    connections:\n      - {{ from: get, relationships: [success], to: put }}\n",
        input.display(),
        dir.join("out").display()
    );
    let started = Instant::now();
    let engine = Engine::start(Flow::parse(&yaml, "big.yaml").unwrap(), &dir.join("repo")).unwrap();
    while engine.status().components[1].flowfiles_in < files as u64 {
        std::thread::sleep(Duration::from_millis(2));
    }
    let secs = started.elapsed().as_secs_f64();
    engine.stop().unwrap();
    files as f64 / secs
}

/// How many outputs the engine syncs at once in the 1 MiB flow: GetFile's batch.
const LARGE_CONCURRENCY: usize = 10;

/// The disk's bandwidth for durable 1 MiB files written `LARGE_CONCURRENCY` at a time (see
/// the module docs), in files per second.
fn durable_bandwidth(dir: &Path, files: usize) -> f64 {
    let data = vec![7u8; 1 << 20];
    let dir_handle = fs::File::open(dir).unwrap();
    let started = Instant::now();
    for group in 0..files.div_ceil(LARGE_CONCURRENCY) {
        let first = group * LARGE_CONCURRENCY;
        std::thread::scope(|scope| {
            for i in first..(first + LARGE_CONCURRENCY).min(files) {
                let (data, path) = (&data, dir.join(format!("f{i:05}")));
                scope.spawn(move || {
                    let mut f = fs::File::create(path).unwrap();
                    f.write_all(data).unwrap();
                    f.sync_data().unwrap();
                });
            }
        });
        dir_handle.sync_all().unwrap();
    }
    let rate = files as f64 / started.elapsed().as_secs_f64();
    for i in 0..files {
        let len = fs::metadata(dir.join(format!("f{i:05}"))).unwrap().len();
        assert_eq!(len, data.len() as u64, "file f{i:05}");
    }
    rate
}

fn recovery(dir: &Path, n: u64) -> (f64, u64, f64) {
    let yaml = "flow: q\ngroups:\n  - name: g\n    processors:\n      - { name: a, type: Funnel }\n      - { name: b, type: LogAttribute, auto_terminate: [success] }\n    connections:\n      - { from: a, to: b, swap_threshold: 20000, back_pressure: { count: 100000000 } }\n";
    let conn = Flow::parse(yaml, "q.yaml").unwrap().connections.remove(0);
    let keys = vec![conn.key.clone()];
    {
        let (repo, _) = FlowFileRepository::open(dir, SyncPolicy::None, &keys).unwrap();
        let queue = Queue::new(0, conn.clone(), vec![], vec![]);
        for chunk in 0..n / 10_000 {
            let ffs: Vec<FlowFile> = (0..10_000)
                .map(|i| FlowFile {
                    id: repo.next_id(),
                    attributes: BTreeMap::from([
                        ("uuid".to_string(), format!("{chunk}-{i}")),
                        ("filename".to_string(), format!("f{chunk}-{i}")),
                    ])
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
        }
        repo.checkpoint().unwrap();
    }
    let started = Instant::now();
    let (_repo, rec) = FlowFileRepository::open(dir, SyncPolicy::None, &keys).unwrap();
    let queue = Queue::new(
        0,
        conn,
        rec.queues.into_iter().next().unwrap(),
        rec.swaps.into_iter().next().unwrap(),
    );
    let secs = started.elapsed().as_secs_f64();
    let c = queue.counts();
    assert_eq!(c.count, n);
    (secs, c.in_memory, peak_rss_mib())
}

fn peak_rss_mib() -> f64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let secs = env("WEIR_FLOW_BENCH_SECS", 5);
    let base = std::env::temp_dir().join(format!("weir-flow-bench-{}", std::process::id()));
    let fresh = |name: &str| {
        let d = base.join(name);
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    };
    // `cargo bench -p weir-flow --bench flow -- large` runs only the sections named.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |section: &str| filters.is_empty() || filters.iter().any(|f| section.contains(f));
    if wanted("small") {
        small_files(&fresh, secs);
    }
    if wanted("large") {
        large_files(&fresh);
    }
    if wanted("recovery") {
        let n = env("WEIR_FLOW_BENCH_QUEUED", 1_000_000);
        let (secs, in_memory, rss) = recovery(&fresh("recovery"), n);
        println!(
            "recovery of {n} queued flow files (swap threshold 20000): {secs:.2} s; {in_memory} in memory after recovery; peak RSS {rss:.0} MiB"
        );
    }
    let _ = fs::remove_dir_all(&base);
}

/// With PutFile's `Sync` (the default with `sync: always`: outputs durable before their flow
/// files go) and without (the outputs left to the page cache), each against a hand loop
/// doing the same.
fn small_files(fresh: &dyn Fn(&str) -> std::path::PathBuf, secs: u64) {
    for sync in [true, false] {
        let engine_dir = fresh("small-engine");
        settle();
        let engine = small_files_engine(&engine_dir, secs, sync);
        let hand_dir = fresh("small-hand");
        settle();
        let hand = small_files_hand_loop(&hand_dir, secs, sync);
        println!(
            "1 KiB flow files, GenerateFlowFile -> UpdateAttribute -> PutFile (Sync: {sync}), sync: always, batch {BATCH}:"
        );
        println!("  engine    {engine:>10.0} flow files/s");
        println!(
            "  hand loop {hand:>10.0} flow files/s   ratio {:.2}",
            engine / hand
        );
    }
}

/// The engine runs between two runs of the disk-bandwidth yardstick, in rounds (five unless
/// `WEIR_FLOW_BENCH_ROUNDS` says otherwise), so that both see the same shared, noisy disk:
/// a round's ratio is the engine's rate over the mean of the yardstick's before and after,
/// and the figure is the median round.
fn large_files(fresh: &dyn Fn(&str) -> std::path::PathBuf) {
    let files = 200;
    let rounds = env("WEIR_FLOW_BENCH_ROUNDS", 5).max(1) as usize;
    let mut ratios = Vec::new();
    println!("1 MiB flow files, GetFile -> PutFile, sync: always ({files} files per run):");
    let disk_dir = fresh("disk");
    settle();
    let mut before = durable_bandwidth(&disk_dir, files);
    for round in 0..rounds {
        let large_dir = fresh("large");
        settle();
        let big = large_files_engine(&large_dir, files);
        let disk_dir = fresh("disk");
        settle();
        let after = durable_bandwidth(&disk_dir, files);
        let disk = (before + after) / 2.0;
        println!(
            "  round {}: engine {big:>7.1} MB/s   disk, {LARGE_CONCURRENCY} files at a time, {before:>7.1} and {after:>7.1} MB/s   ratio {:.2}",
            round + 1,
            big / disk
        );
        ratios.push(big / disk);
        before = after;
    }
    ratios.sort_by(f64::total_cmp);
    println!("  median ratio {:.2}", ratios[ratios.len() / 2]);
}
