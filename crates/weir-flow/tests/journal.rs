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
                    repo.commit(txn(vec![Op::SwapIn { swap: id }])).unwrap();
                    let (q, files) = swapped.remove(&id).unwrap();
                    repo.add_swapped_in(q, &back);
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
