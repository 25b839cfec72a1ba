//! Whole-flow benchmarks of the traditional engine, each against its yardstick.
//!
//! - 1 KiB flow files, GenerateFlowFile → UpdateAttribute → PutFile with `sync: always`, in
//!   flow files/s, against a hand loop that appends the same records (content, then one
//!   journal frame per session of the same batch size, `fdatasync` after each, as the three
//!   sessions per batch do) and writes the same output files as PutFile does with `Sync`:
//!   each written, all synced at once, renamed, the directory synced.
//! - 1 MiB flow files, GetFile → PutFile, in MB/s, against the disk's O_DSYNC bandwidth
//!   (1 MiB writes to a file opened with O_DSYNC), measured before and after each engine run
//!   in several rounds; the median round's ratio is the figure.
//! - Recovery time and memory with 1 M queued flow files (swap threshold 20,000).
//!
//! `cargo bench -p weir-flow --bench flow [-- small|large|recovery]`; `WEIR_FLOW_BENCH_SECS`
//! (default 5) sets each 1 KiB engine run, `WEIR_FLOW_BENCH_ROUNDS` (default 5) the 1 MiB
//! rounds, `WEIR_FLOW_BENCH_QUEUED` (default 1,000,000) the recovery size.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
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

/// The same records, appended by hand: per batch, the content and a frame for each of the
/// three sessions, each followed by `fdatasync`, and the output files.
fn small_files_hand_loop(dir: &Path, secs: u64, sync: bool) -> f64 {
    fs::create_dir_all(dir.join("out")).unwrap();
    let mut content = fs::File::create(dir.join("content")).unwrap();
    let mut journal = fs::File::create(dir.join("journal")).unwrap();
    let data = vec![b'x'; 1024];
    let started = Instant::now();
    let mut done = 0u64;
    let mut txn = 0u64;
    while started.elapsed() < Duration::from_secs(secs) {
        let records: Vec<FlowFile> = (0..BATCH)
            .map(|i| FlowFile {
                id: done + i as u64,
                attributes: BTreeMap::from([
                    ("uuid".to_string(), uuid::Uuid::new_v4().to_string()),
                    ("filename".to_string(), format!("f{}", done + i as u64)),
                ])
                .into(),
                claim: None,
                entry_date: 0,
                lineage_start: 0,
                queue_seq: done + i as u64,
            })
            .collect();
        for _ in &records {
            content.write_all(&data).unwrap();
        }
        content.sync_data().unwrap();
        for session in 0..3 {
            let payload = postcard::to_allocvec(&records).unwrap();
            txn += 1;
            // The journal's frame: length, transaction, their checksum, the payload's.
            let mut frame = Vec::with_capacity(payload.len() + 20);
            frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            frame.extend_from_slice(&txn.to_le_bytes());
            frame.extend_from_slice(&crc32c::crc32c(&frame[..12]).to_le_bytes());
            frame.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
            frame.extend_from_slice(&payload);
            if session == 2 {
                // PutFile's work with `Sync` (the default with `sync: always`): every file
                // written, all synced at once (a thread each), renamed, the directory synced.
                let out = dir.join("out");
                let written: Vec<(fs::File, std::path::PathBuf, std::path::PathBuf)> = records
                    .iter()
                    .map(|r| {
                        let name = &r.attributes["filename"];
                        let tmp = out.join(format!(".{name}.tmp"));
                        let mut f = fs::File::create(&tmp).unwrap();
                        f.write_all(&data).unwrap();
                        (f, tmp, out.join(name))
                    })
                    .collect();
                if sync {
                    std::thread::scope(|scope| {
                        for (f, _, _) in &written {
                            scope.spawn(move || f.sync_data().unwrap());
                        }
                    });
                }
                for (_, tmp, target) in &written {
                    fs::rename(tmp, target).unwrap();
                }
                if sync {
                    fs::File::open(&out).unwrap().sync_all().unwrap();
                }
            }
            journal.write_all(&frame).unwrap();
            journal.sync_data().unwrap();
        }
        done += BATCH as u64;
    }
    done as f64 / started.elapsed().as_secs_f64()
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

fn dsync_bandwidth(dir: &Path, files: usize) -> f64 {
    let data = vec![7u8; 1 << 20];
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .custom_flags(libc_o_dsync())
        .open(dir.join("dsync"))
        .unwrap();
    let started = Instant::now();
    for _ in 0..files {
        f.write_all(&data).unwrap();
    }
    files as f64 / started.elapsed().as_secs_f64()
}

fn libc_o_dsync() -> i32 {
    0o10000 // O_DSYNC on Linux
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
        let engine = small_files_engine(&fresh("small-engine"), secs, sync);
        let hand = small_files_hand_loop(&fresh("small-hand"), secs, sync);
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

/// The engine runs between two runs of the O_DSYNC yardstick, in rounds (five unless
/// `WEIR_FLOW_BENCH_ROUNDS` says otherwise), so that both see the same shared, noisy disk:
/// a round's ratio is the engine's rate over the mean of the yardstick's before and after,
/// and the figure is the median round.
fn large_files(fresh: &dyn Fn(&str) -> std::path::PathBuf) {
    let files = 200;
    let rounds = env("WEIR_FLOW_BENCH_ROUNDS", 5).max(1) as usize;
    let mut ratios = Vec::new();
    println!("1 MiB flow files, GetFile -> PutFile, sync: always ({files} files per run):");
    let mut before = dsync_bandwidth(&fresh("dsync"), files);
    for round in 0..rounds {
        let big = large_files_engine(&fresh("large"), files);
        let after = dsync_bandwidth(&fresh("dsync"), files);
        let dsync = (before + after) / 2.0;
        println!(
            "  round {}: engine {big:>7.1} MB/s   O_DSYNC {before:>7.1} and {after:>7.1} MB/s   ratio {:.2}",
            round + 1,
            big / dsync
        );
        ratios.push(big / dsync);
        before = after;
    }
    ratios.sort_by(f64::total_cmp);
    println!("  median ratio {:.2}", ratios[ratios.len() / 2]);
}
