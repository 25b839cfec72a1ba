//! The flow-file repository's journal, in the manner of NiFi's write-ahead log tests: torn
//! tails, NUL tails, truncation, atomic transactions, poisoning, several checkpoints, and a
//! model-based property test with crash points.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use proptest::prelude::*;
use weir_flow::definition::SyncPolicy;
use weir_flow::flowfile::FlowFile;
use weir_flow::flowfile::SortKey;
use weir_flow::repository::journal::{FlowFileRepository, Op, RepositoryError, Txn};
use weir_flow::repository::swap::{self, SwapInfo};

fn queues() -> Vec<String> {
    vec!["a[success]->b".into(), "b[success]->c".into()]
}

fn ff(repo: &FlowFileRepository, tag: &str) -> FlowFile {
    let claim = Some(repo.content().write(tag.as_bytes()).unwrap());
    FlowFile {
        id: repo.next_id(),
        attributes: BTreeMap::from([("tag".to_string(), tag.to_string())]).into(),
        claim,
        entry_date: 0,
        lineage_start: 0,
        queue_seq: repo.next_seq(),
    }
}

fn put(queue: u32, flowfile: FlowFile) -> Op {
    Op::Put { queue, flowfile }
}

fn txn(ops: Vec<Op>) -> Txn {
    Txn {
        ops,
        events: vec![],
    }
}

fn tags(queues: &[Vec<FlowFile>]) -> Vec<Vec<String>> {
    queues
        .iter()
        .map(|q| q.iter().map(|f| f.attributes["tag"].to_string()).collect())
        .collect()
}

fn current_journal(dir: &Path) -> std::path::PathBuf {
    let mut journals: Vec<_> = fs::read_dir(dir.join("flowfiles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("journal-")
        })
        .collect();
    journals.sort();
    journals.pop().unwrap()
}

#[test]
fn committed_transactions_survive_a_restart_and_content_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    let a = ff(&repo, "one");
    let b = ff(&repo, "two");
    repo.commit(txn(vec![put(0, a.clone()), put(1, b.clone())]))
        .unwrap();
    repo.commit(txn(vec![Op::Delete { id: a.id }])).unwrap();
    drop(repo);
    let (repo, rec) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    assert_eq!(tags(&rec.queues), vec![vec![], vec!["two".to_string()]]);
    assert_eq!(
        repo.content()
            .read(&rec.queues[1][0].claim.unwrap())
            .unwrap(),
        b"two"
    );
}

fn set_state(component: &str, entries: &[(&str, &str)]) -> Op {
    Op::SetState {
        component: component.into(),
        state: entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// A processor's state is replaced whole by each frame that sets it, survives a restart from
/// the journal (no checkpoint since) and from a checkpoint, and an empty state clears it.
#[test]
fn processor_state_survives_restarts_from_the_journal_and_from_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    assert!(repo.state("list").is_empty());
    let a = ff(&repo, "one");
    repo.commit(txn(vec![
        put(0, a),
        set_state("list", &[("listing.timestamp", "1"), ("id.0", "a")]),
        set_state("other", &[("k", "v")]),
    ]))
    .unwrap();
    repo.commit(txn(vec![set_state("list", &[("listing.timestamp", "2")])]))
        .unwrap();
    assert_eq!(repo.state("list").len(), 1);
    // Killed: the frames alone hold the states.
    drop(repo);
    let (repo, rec) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    assert_eq!(tags(&rec.queues), vec![vec!["one".to_string()], vec![]]);
    assert_eq!(
        repo.state("list").into_iter().collect::<Vec<_>>(),
        vec![("listing.timestamp".to_string(), "2".to_string())]
    );
    // Opening checkpointed: the snapshot holds them now, and a later clear is kept too.
    repo.commit(txn(vec![set_state("other", &[])])).unwrap();
    repo.checkpoint().unwrap();
    drop(repo);
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    assert_eq!(repo.state("list")["listing.timestamp"], "2");
    assert!(repo.state("other").is_empty());
}

#[test]
fn torn_tail_and_28_nul_bytes_are_truncated() {
    for tail in [&b"\x2a\x00\x00\x00\x01\x02"[..], &[0u8; 28][..]] {
        let dir = tempfile::tempdir().unwrap();
        let (repo, _) =
            FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
        let a = ff(&repo, "kept");
        repo.commit(txn(vec![put(0, a)])).unwrap();
        drop(repo);
        let journal = current_journal(dir.path());
        let mut bytes = fs::read(&journal).unwrap();
        let good = bytes.len();
        bytes.extend_from_slice(tail);
        fs::write(&journal, &bytes).unwrap();
        let (repo, rec) =
            FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
        assert_eq!(rec.truncated_bytes, tail.len() as u64);
        assert_eq!(tags(&rec.queues)[0], vec!["kept".to_string()]);
        // The repository works on after the truncation.
        repo.commit(txn(vec![put(0, ff(&repo, "more"))])).unwrap();
        drop(repo);
        let (_, rec) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
        assert_eq!(tags(&rec.queues)[0].len(), 2, "good length was {good}");
    }
}

#[test]
fn a_truncated_journal_keeps_every_whole_frame() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    let mut lens = vec![];
    let journal = current_journal(dir.path());
    for i in 0..5 {
        repo.commit(txn(vec![put(0, ff(&repo, &format!("t{i}")))]))
            .unwrap();
        lens.push(fs::metadata(&journal).unwrap().len());
    }
    drop(repo);
    let full = fs::read(&journal).unwrap();
    // Cut inside the fourth frame: three survive.
    let cut = (lens[2] + lens[3]) / 2;
    fs::write(&journal, &full[..cut as usize]).unwrap();
    let (_, rec) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    assert_eq!(tags(&rec.queues)[0], vec!["t0", "t1", "t2"]);
}

#[test]
fn a_transaction_is_applied_whole_or_not_at_all() {
    for fraction in [0.0, 0.33, 0.5, 0.99] {
        let dir = tempfile::tempdir().unwrap();
        let (repo, _) =
            FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
        let journal = current_journal(dir.path());
        repo.commit(txn(vec![put(0, ff(&repo, "before"))])).unwrap();
        let before = fs::metadata(&journal).unwrap().len() as usize;
        let ops: Vec<Op> = (0..50)
            .map(|i| put(1, ff(&repo, &format!("x{i}"))))
            .collect();
        repo.commit(txn(ops)).unwrap();
        drop(repo);
        let full = fs::read(&journal).unwrap();
        let cut = before + ((full.len() - before) as f64 * fraction) as usize + 1;
        fs::write(&journal, &full[..cut.min(full.len() - 1)]).unwrap();
        let (_, rec) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
        assert_eq!(
            tags(&rec.queues),
            vec![vec!["before".to_string()], vec![]],
            "cut at {cut}"
        );
    }
}

#[test]
fn a_bad_frame_before_the_tail_refuses_to_start_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    let journal = current_journal(dir.path());
    repo.commit(txn(vec![put(0, ff(&repo, "a"))])).unwrap();
    let first = fs::metadata(&journal).unwrap().len();
    repo.commit(txn(vec![put(0, ff(&repo, "b"))])).unwrap();
    repo.commit(txn(vec![put(0, ff(&repo, "c"))])).unwrap();
    drop(repo);
    let mut bytes = fs::read(&journal).unwrap();
    bytes[first as usize + 20] ^= 0x55;
    fs::write(&journal, &bytes).unwrap();
    let err = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RepositoryError::Corrupt(_)), "{text}");
    assert!(
        text.contains(journal.file_name().unwrap().to_str().unwrap()),
        "{text}"
    );
    assert!(text.contains(&format!("offset {first}")), "{text}");
}

#[test]
fn recovery_across_several_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = vec![];
    for round in 0..4 {
        let (repo, rec) =
            FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
        assert_eq!(tags(&rec.queues)[0], expected, "round {round}");
        for i in 0..3 {
            let tag = format!("r{round}-{i}");
            repo.commit(txn(vec![put(0, ff(&repo, &tag))])).unwrap();
            expected.push(tag);
            if i == 1 {
                repo.checkpoint().unwrap();
            }
        }
        // Drop the oldest one after a checkpoint.
        repo.checkpoint().unwrap();
        let first = rec.queues[0].first().map(|f| f.id);
        if let Some(id) = first {
            repo.commit(txn(vec![Op::Delete { id }])).unwrap();
            expected.remove(0);
        }
    }
}

/// A full disk: a small tmpfs makes writes fail. The repository poisons itself, refuses
/// every later commit, and what it acknowledged before is recovered.
#[test]
fn an_io_error_poisons_the_repository() {
    let mount = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(mount.path())
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot mount a small tmpfs (needs root)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(mount.path());
    let (repo, _) = FlowFileRepository::open(mount.path(), SyncPolicy::Always, &queues()).unwrap();
    let mut acked = 0;
    let mut poisoned = false;
    for i in 0..10_000 {
        let big = "x".repeat(200);
        let f = FlowFile {
            id: repo.next_id(),
            attributes: BTreeMap::from([("tag".to_string(), format!("{i}{big}"))]).into(),
            claim: None,
            entry_date: 0,
            lineage_start: 0,
            queue_seq: repo.next_seq(),
        };
        match repo.commit(txn(vec![put(0, f)])) {
            Ok(_) => acked += 1,
            Err(RepositoryError::Poisoned(_)) => {
                poisoned = true;
                break;
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(poisoned, "the disk never filled");
    assert!(repo.poisoned().is_some());
    let f = FlowFile {
        id: repo.next_id(),
        attributes: Default::default(),
        claim: None,
        entry_date: 0,
        lineage_start: 0,
        queue_seq: 0,
    };
    assert!(matches!(
        repo.commit(txn(vec![put(0, f)])),
        Err(RepositoryError::Poisoned(_))
    ));
    drop(repo);
    // Make room, then recover: exactly what was acknowledged is there.
    let (_, rec) = FlowFileRepository::open(mount.path(), SyncPolicy::Always, &queues())
        .or_else(|_| {
            // The recovery checkpoint itself may not fit; a bigger disk must recover it.
            let _ = std::process::Command::new("mount")
                .args(["-o", "remount,size=4m"])
                .arg(mount.path())
                .status();
            FlowFileRepository::open(mount.path(), SyncPolicy::Always, &queues())
        })
        .unwrap();
    assert_eq!(rec.queues[0].len(), acked);
}

/// The model: what the repository must hold after a crash.
#[derive(Debug, Clone)]
enum Action {
    Create(u8),
    Transfer(u8),
    Clone(u8),
    Modify(u8),
    Drop(u8),
    Checkpoint,
    /// Up to this many flow files of one queue go to a new swap file.
    SwapOut(u8),
    /// A swap file is read back.
    SwapIn(u8),
    /// A swap file is written but the process dies before its swap-out frame.
    TornSwapOut(u8),
    /// A crash that keeps only synced bytes; `u16` is how much of the unsynced tail a power
    /// loss leaves behind (as garbage).
    Crash(u16),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => any::<u8>().prop_map(Action::Create),
        3 => any::<u8>().prop_map(Action::Transfer),
        2 => any::<u8>().prop_map(Action::Clone),
        2 => any::<u8>().prop_map(Action::Modify),
        2 => any::<u8>().prop_map(Action::Drop),
        1 => Just(Action::Checkpoint),
        2 => any::<u8>().prop_map(Action::SwapOut),
        2 => any::<u8>().prop_map(Action::SwapIn),
        1 => any::<u8>().prop_map(Action::TornSwapOut),
        1 => any::<u16>().prop_map(Action::Crash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random sessions, swap-outs and swap-ins, checkpoints and crash points: the recovered
    /// state (in memory and in swap files, with readable content) always equals the model's
    /// last durable state.
    #[test]
    fn recovered_state_equals_the_model(actions in proptest::collection::vec(action(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let (mut repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
        // id -> (queue, tag), in memory
        let mut model: BTreeMap<u64, (u32, String)> = BTreeMap::new();
        // swap file -> (queue, its flow files: id -> tag)
        let mut swapped: BTreeMap<u64, (u32, BTreeMap<u64, String>)> = BTreeMap::new();
        // id -> the flow file as last committed
        let mut committed: BTreeMap<u64, FlowFile> = BTreeMap::new();
        let mut n = 0;
        let pick = |model: &BTreeMap<u64, (u32, String)>, k: u8| -> Option<(u64, (u32, String))> {
            if model.is_empty() { return None; }
            model.iter().nth(k as usize % model.len()).map(|(id, v)| (*id, v.clone()))
        };
        let make = |repo: &FlowFileRepository, id: u64, tag: &str| FlowFile {
            id,
            attributes: BTreeMap::from([("tag".to_string(), tag.to_string())]).into(),
            claim: Some(repo.content().write(tag.as_bytes()).unwrap()),
            entry_date: 0,
            lineage_start: 0,
            queue_seq: repo.next_seq(),
        };
        for a in actions {
            n += 1;
            match a {
                Action::Create(k) => {
                    let tag = format!("c{n}");
                    let f = make(&repo, repo.next_id(), &tag);
                    let q = u32::from(k % 2);
                    repo.commit(txn(vec![put(q, f.clone())])).unwrap();
                    model.insert(f.id, (q, tag));
                    committed.insert(f.id, f);
                }
                Action::Transfer(k) => if let Some((id, (q, tag))) = pick(&model, k) {
                    let f = make(&repo, id, &tag);
                    repo.commit(txn(vec![put(1 - q, f.clone())])).unwrap();
                    model.insert(id, (1 - q, tag));
                    committed.insert(id, f);
                },
                Action::Clone(k) => if let Some((_, (q, tag))) = pick(&model, k) {
                    let f = make(&repo, repo.next_id(), &format!("{tag}+"));
                    repo.commit(txn(vec![put(q, f.clone())])).unwrap();
                    model.insert(f.id, (q, format!("{tag}+")));
                    committed.insert(f.id, f);
                },
                Action::Modify(k) => if let Some((id, (q, _))) = pick(&model, k) {
                    let tag = format!("m{n}");
                    let f = make(&repo, id, &tag);
                    repo.commit(txn(vec![put(q, f.clone())])).unwrap();
                    model.insert(id, (q, tag));
                    committed.insert(id, f);
                },
                Action::Drop(k) => if let Some((id, _)) = pick(&model, k) {
                    repo.commit(txn(vec![Op::Delete { id }])).unwrap();
                    model.remove(&id);
                    committed.remove(&id);
                },
                Action::Checkpoint => repo.checkpoint().unwrap(),
                Action::SwapOut(k) | Action::TornSwapOut(k) => {
                    let q = u32::from(k % 2);
                    let ids: Vec<u64> = model
                        .iter()
                        .filter(|(_, (mq, _))| *mq == q)
                        .map(|(id, _)| *id)
                        .take(1 + usize::from(k % 5))
                        .collect();
                    if ids.is_empty() {
                        continue;
                    }
                    // The flow files as committed (content claims included) go to the file.
                    let batch: Vec<FlowFile> = ids.iter().map(|id| committed[id].clone()).collect();
                    let id = repo.next_swap_id();
                    swap::write(&repo.swap_dir(), id, &batch).unwrap();
                    if matches!(a, Action::TornSwapOut(_)) {
                        // Killed before the frame: the file is a leftover recovery removes.
                        continue;
                    }
                    let mut claims: BTreeMap<u64, u64> = BTreeMap::new();
                    for f in &batch {
                        *claims.entry(f.claim.unwrap().file).or_default() += 1;
                    }
                    let info = SwapInfo {
                        id,
                        queue: q,
                        count: batch.len() as u64,
                        bytes: batch.iter().map(FlowFile::size).sum(),
                        min_key: SortKey { parts: vec![], seq: batch.iter().map(|f| f.queue_seq).min().unwrap() },
                        max_id: batch.iter().map(|f| f.id).max().unwrap(),
                        max_seq: batch.iter().map(|f| f.queue_seq).max().unwrap(),
                        claims: claims.into_iter().collect(),
                    };
                    repo.commit(txn(vec![Op::SwapOut { info, ids: ids.clone() }])).unwrap();
                    let files = ids.iter().map(|i| (*i, model.remove(i).unwrap().1)).collect();
                    swapped.insert(id, (q, files));
                }
                Action::SwapIn(k) => {
                    let Some(&id) = swapped.keys().nth(usize::from(k) % swapped.len().max(1)) else {
                        continue;
                    };
                    let back = swap::read(&repo.swap_dir(), id).unwrap();
                    let (q, files) = swapped.remove(&id).unwrap();
                    repo.commit_swap_in(q, id, &back).unwrap();
                    for f in &back {
                        prop_assert_eq!(&files[&f.id], &f.attributes["tag"]);
                    }
                    model.extend(files.into_iter().map(|(i, tag)| (i, (q, tag))));
                }
                Action::Crash(garbage) => {
                    drop(repo);
                    // With sync: always every acknowledged frame is synced; a power loss
                    // can leave part of a frame that was being written: garbage or zeros.
                    let journal = current_journal(dir.path());
                    let mut bytes = fs::read(&journal).unwrap();
                    let tail: Vec<u8> = (0..garbage % 40).map(|i| if garbage % 2 == 0 { 0 } else { (i * 37 + 11) as u8 }).collect();
                    if tail.len() < 16 || garbage % 2 == 0 {
                        bytes.extend_from_slice(&tail);
                        fs::write(&journal, &bytes).unwrap();
                    }
                    let (r, rec) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
                    repo = r;
                    let mut got: BTreeMap<u64, (u32, String)> = BTreeMap::new();
                    for (q, list) in rec.queues.iter().enumerate() {
                        for f in list {
                            prop_assert_eq!(repo.content().read(&f.claim.unwrap()).unwrap(), f.attributes["tag"].as_bytes().to_vec());
                            got.insert(f.id, (q as u32, f.attributes["tag"].to_string()));
                        }
                    }
                    prop_assert_eq!(&got, &model);
                    // Swap files: the ones the model has, with their flow files and readable
                    // content (reference counts rebuilt from the swap-out frames).
                    let mut got_swapped: BTreeMap<u64, (u32, BTreeMap<u64, String>)> = BTreeMap::new();
                    for (q, infos) in rec.swaps.iter().enumerate() {
                        for info in infos {
                            let files = swap::read(&repo.swap_dir(), info.id).unwrap();
                            prop_assert_eq!(info.count, files.len() as u64);
                            let mut tags = BTreeMap::new();
                            for f in files {
                                prop_assert_eq!(repo.content().read(&f.claim.unwrap()).unwrap(), f.attributes["tag"].as_bytes().to_vec());
                                tags.insert(f.id, f.attributes["tag"].to_string());
                            }
                            got_swapped.insert(info.id, (q as u32, tags));
                        }
                    }
                    prop_assert_eq!(&got_swapped, &swapped);
                    // Leftovers of torn swap-outs and files read back are gone after the
                    // recovery's checkpoint.
                    let on_disk = fs::read_dir(repo.swap_dir()).unwrap().count();
                    prop_assert_eq!(on_disk, swapped.len());
                }
            }
        }
    }
}

/// A flipped bit in a frame's length, mid-journal, used to read as a torn tail: recovery
/// truncated the acknowledged frames after it. Now it refuses to start, naming the file and
/// the frame's offset.
#[test]
fn a_damaged_length_mid_journal_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    let mut offsets = Vec::new();
    for i in 0..4 {
        offsets.push(fs::metadata(current_journal(dir.path())).unwrap().len());
        repo.commit(txn(vec![put(0, ff(&repo, &format!("f{i}")))]))
            .unwrap();
    }
    drop(repo);
    let journal = current_journal(dir.path());
    let mut bytes = fs::read(&journal).unwrap();
    // The second frame's length grows past the end of the file.
    bytes[offsets[1] as usize + 3] ^= 0x40;
    fs::write(&journal, &bytes).unwrap();
    let e = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&journal.display().to_string())
            && text.contains(&format!("offset {}", offsets[1])),
        "{text}"
    );
}

/// Recovery deletes a taken source file again only while it is still the file that was
/// taken: a producer that wrote a new file under the same name keeps it.
#[test]
fn a_recovered_deletion_keeps_a_new_file_under_the_taken_name() {
    use weir_flow::repository::journal::FileIdentity;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("incoming.csv");
    fs::write(&source, b"first batch\n").unwrap();
    let identity = FileIdentity::of(&fs::metadata(&source).unwrap());
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    repo.commit(txn(vec![
        put(0, ff(&repo, "first batch")),
        Op::DeleteSource {
            path: source.display().to_string(),
            identity,
        },
    ]))
    .unwrap();
    assert!(!source.exists(), "deleted once the frame is durable");
    // A new file under the same name; then a crash before any checkpoint: recovery replays
    // the deletion.
    fs::write(&source, b"second batch, a different file\n").unwrap();
    drop(repo);
    let (_repo, recovered) =
        FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    assert_eq!(tags(&recovered.queues)[0], ["first batch"]);
    assert_eq!(
        fs::read(&source).unwrap(),
        b"second batch, a different file\n"
    );
}

/// With `sync: interval`, a frame that deletes a source file is synced before the file goes
/// (the flow's copy must be durable first); other frames wait for the interval.
#[test]
fn a_frame_that_deletes_a_source_is_synced_whatever_the_policy() {
    use weir_flow::repository::journal::FileIdentity;
    let dir = tempfile::tempdir().unwrap();
    let policy = SyncPolicy::Interval(std::time::Duration::from_secs(3600));
    let (repo, _) = FlowFileRepository::open(dir.path(), policy, &queues()).unwrap();
    let (_, syncs_before) = repo.counters();
    repo.commit(txn(vec![put(0, ff(&repo, "plain"))])).unwrap();
    assert_eq!(
        repo.counters().1,
        syncs_before,
        "no sync before the interval"
    );
    let source = dir.path().join("in.txt");
    fs::write(&source, b"data").unwrap();
    let identity = FileIdentity::of(&fs::metadata(&source).unwrap());
    repo.commit(txn(vec![
        put(0, ff(&repo, "from a file")),
        Op::DeleteSource {
            path: source.display().to_string(),
            identity,
        },
    ]))
    .unwrap();
    assert_eq!(repo.counters().1, syncs_before + 1);
    assert!(!source.exists());
}

/// With `sync: interval`, the first frame to wait for a sync asks for the engine's attention
/// once and says when the sync is due; the frames after it wait for the same sync. Nothing
/// asks while nothing waits, so an idle flow's maintenance can sleep.
#[test]
fn a_frame_waiting_for_an_interval_sync_asks_for_attention_once() {
    use futures::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let every = std::time::Duration::from_secs(3600);
    let (repo, _) =
        FlowFileRepository::open(dir.path(), SyncPolicy::Interval(every), &queues()).unwrap();
    let asked = |repo: &FlowFileRepository| repo.attention().notified().now_or_never().is_some();
    assert!(!asked(&repo), "nothing waits for a sync");
    assert_eq!(repo.sync_deadline(), None);
    let before = std::time::Instant::now();
    repo.commit(txn(vec![put(0, ff(&repo, "first"))])).unwrap();
    assert!(asked(&repo), "the first frame waiting asks");
    let due = repo.sync_deadline().expect("a sync is due");
    assert!(due <= before + every + std::time::Duration::from_secs(1) && due > before);
    repo.commit(txn(vec![put(0, ff(&repo, "second"))])).unwrap();
    assert!(!asked(&repo), "later frames wait for the same sync");
    assert_eq!(repo.sync_deadline(), Some(due));

    // `sync: always` leaves nothing waiting.
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    repo.commit(txn(vec![put(0, ff(&repo, "synced"))])).unwrap();
    assert!(!asked(&repo));
    assert_eq!(repo.sync_deadline(), None);
}

/// A poisoned repository asks for attention: the engine stops the flow at once.
#[test]
fn a_poisoning_asks_for_attention() {
    use futures::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    let current = current_journal(dir.path());
    let name = current.file_name().unwrap().to_str().unwrap();
    let generation: u64 = name.strip_prefix("journal-").unwrap().parse().unwrap();
    let blocker = dir
        .path()
        .join("flowfiles")
        .join(format!("journal-{:016}", generation + 1));
    fs::create_dir(&blocker).unwrap();
    assert!(repo.checkpoint().is_err());
    assert!(repo.poisoned().is_some());
    assert!(repo.attention().notified().now_or_never().is_some());
}

/// A checkpoint that fails after its snapshot is renamed into place (here: the new journal
/// cannot be created) poisons the repository: a commit after it would go to a journal that
/// recovery skips. What was acknowledged before recovers.
#[test]
fn a_checkpoint_that_fails_after_its_rename_poisons_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    repo.commit(txn(vec![put(0, ff(&repo, "before"))])).unwrap();
    // The next journal's name is taken by a directory: creating the file fails.
    let current = current_journal(dir.path());
    let name = current.file_name().unwrap().to_str().unwrap();
    let generation: u64 = name.strip_prefix("journal-").unwrap().parse().unwrap();
    let blocker = dir
        .path()
        .join("flowfiles")
        .join(format!("journal-{:016}", generation + 1));
    fs::create_dir(&blocker).unwrap();
    assert!(repo.checkpoint().is_err());
    assert!(repo.poisoned().is_some());
    let e = repo
        .commit(txn(vec![put(0, ff(&repo, "after"))]))
        .unwrap_err();
    assert!(matches!(e, RepositoryError::Poisoned(_)), "{e}");
    drop(repo);
    fs::remove_dir(&blocker).unwrap();
    let (_repo, recovered) =
        FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    assert_eq!(tags(&recovered.queues)[0], ["before"]);
}

/// Swap-ins and checkpoints racing: a swap-in commits its frame and makes its flow files
/// live in one step, so a checkpoint never writes a snapshot without either the swap file or
/// its flow files (which then deletes the swap file). Every flow file recovers.
#[test]
fn swap_ins_racing_checkpoints_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::None, &queues()).unwrap();
    let repo = std::sync::Arc::new(repo);
    // One checkpoint per round, started as the round's swap-in begins, so that the two
    // race on every round (a checkpoint looping without pause starves the commits).
    let (go, rounds) = std::sync::mpsc::channel::<()>();
    let checkpoints = {
        let repo = std::sync::Arc::clone(&repo);
        std::thread::spawn(move || {
            let mut n = 0;
            for () in rounds {
                repo.checkpoint().unwrap();
                n += 1;
            }
            n
        })
    };
    let mut expected = Vec::new();
    for round in 0..200 {
        let batch: Vec<FlowFile> = (0..3)
            .map(|i| ff(&repo, &format!("r{round}-{i}")))
            .collect();
        expected.extend(batch.iter().map(|f| f.attributes["tag"].to_string()));
        repo.commit(txn(batch.iter().cloned().map(|f| put(0, f)).collect()))
            .unwrap();
        let id = repo.next_swap_id();
        swap::write(&repo.swap_dir(), id, &batch).unwrap();
        let info = SwapInfo {
            id,
            queue: 0,
            count: batch.len() as u64,
            bytes: batch.iter().map(FlowFile::size).sum(),
            min_key: SortKey {
                parts: vec![],
                seq: batch[0].queue_seq,
            },
            max_id: batch.iter().map(|f| f.id).max().unwrap(),
            max_seq: batch.iter().map(|f| f.queue_seq).max().unwrap(),
            claims: vec![],
        };
        repo.commit(txn(vec![Op::SwapOut {
            info,
            ids: batch.iter().map(|f| f.id).collect(),
        }]))
        .unwrap();
        let back = swap::read(&repo.swap_dir(), id).unwrap();
        go.send(()).unwrap();
        repo.commit_swap_in(0, id, &back).unwrap();
    }
    drop(go);
    assert_eq!(checkpoints.join().unwrap(), 200);
    drop(repo);
    let (_repo, recovered) =
        FlowFileRepository::open(dir.path(), SyncPolicy::None, &queues()).unwrap();
    let mut got = tags(&recovered.queues)[0].clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
}

/// Event ids run on from frame to frame, whatever a frame holds, and recovery gives the
/// replayed events the ids they had.
#[test]
fn event_ids_run_on_across_frames_and_recover_unchanged() {
    use weir_flow::provenance::{EventType, ProvenanceEvent};
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    let event = |n: usize| ProvenanceEvent {
        id: 0,
        event_type: EventType::CREATE,
        time_ms: 0,
        flowfile: format!("ff-{n}").into(),
        component: "c".into(),
        component_type: "GenerateFlowFile".into(),
        attributes: Default::default(),
        size: 0,
        parents: vec![],
        children: vec![],
        details: None,
        transit_uri: None,
    };
    let mut ids = Vec::new();
    for (frame, n) in [3usize, 0, 5, 1].into_iter().enumerate() {
        let events = (0..n).map(|i| event(frame * 10 + i)).collect();
        let got = repo
            .commit(Txn {
                ops: vec![put(0, ff(&repo, &format!("f{frame}")))],
                events,
            })
            .unwrap();
        ids.extend(got.iter().map(|e| (e.id, e.flowfile.to_string())));
    }
    let only_ids: Vec<u64> = ids.iter().map(|(id, _)| *id).collect();
    let first = only_ids[0];
    assert_eq!(only_ids, (first..first + 9).collect::<Vec<_>>());
    drop(repo);
    let (_repo, recovered) =
        FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    let replayed: Vec<(u64, String)> = recovered
        .events
        .iter()
        .map(|e| (e.id, e.flowfile.to_string()))
        .collect();
    assert_eq!(replayed, ids);
}

/// A lock held under this process's own id that goes away soon (a closed handle whose
/// descriptor a child being started on another thread still holds, until its exec) does not
/// refuse the open: it waits for it. CI once saw the fork of the full-disk test's `mount`
/// refuse a reopen this way.
#[test]
fn an_open_waits_for_its_own_process_lock_to_go() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        // Held until the main thread has started to open.
        rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        drop(first);
    });
    tx.send(()).unwrap();
    let reopened = FlowFileRepository::open(dir.path(), SyncPolicy::Always, &queues());
    holder.join().unwrap();
    assert!(reopened.is_ok(), "{:?}", reopened.err());
}
