//! The partitioned-map test cases, run once per way of running the owners: each including
//! test target defines `fn service(owners: usize) -> MapService` in the parent module
//! (owner threads in `maps.rs`, a loop of the test's own in `driven.rs`, the executor's
//! workers in the `weir` crate's `maps_on_workers.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use weir_maps::{AffinityKey, AtKey, MapError, OwnerTask, PartitionAware, PartitionView};

use super::service;

/// Stress sizes: small by default so that debug-build CI stays fast; raise with
/// `WEIR_STRESS=1`.
fn scale(small: usize, large: usize) -> usize {
    if std::env::var_os("WEIR_STRESS").is_some() {
        large
    } else {
        small
    }
}

#[test]
fn basic_operations_work_on_the_owner() {
    let service = service(2);
    let map = service.map::<String, u64>("m").unwrap();
    assert_eq!(map.put("a".into(), 1).unwrap(), None);
    assert_eq!(map.put("a".into(), 2).unwrap(), Some(1));
    assert_eq!(map.get(&"a".into()).unwrap(), Some(2));
    assert_eq!(
        map.compute("a".into(), |_, v| v.map(|v| v * 10)).unwrap(),
        Some(20)
    );
    assert_eq!(
        map.compute("b".into(), |_, v| Some(v.copied().unwrap_or(0) + 7))
            .unwrap(),
        Some(7)
    );
    assert_eq!(map.len().unwrap(), 2);
    assert_eq!(
        map.put_all((0..100u64).map(|i| (format!("k{i}"), i)))
            .unwrap(),
        100
    );
    let got = map
        .get_all(["k1".to_string(), "k99".to_string(), "none".to_string()])
        .unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[&"k99".to_string()], 99);
    assert_eq!(map.remove(&"a".into()).unwrap(), Some(20));
    assert_eq!(map.compute("b".into(), |_, _| None).unwrap(), None);
    assert_eq!(map.len().unwrap(), 100);
    let p = map.partition_of(&"k5".to_string());
    let entries = map.entries(p).unwrap();
    assert!(entries.contains(&("k5".to_string(), 5)));
    assert!(entries.iter().all(|(k, _)| map.partition_of(k) == p));
    let total: usize = (0..271).map(|p| map.entries(p).unwrap().len()).sum();
    assert_eq!(total, 100);
    assert!(matches!(map.entries(271), Err(MapError::OutOfRange { .. })));
}

#[test]
fn a_partition_is_replaced_whole_and_other_partitions_stay() {
    let service = service(2);
    let map = service.map::<u64, u64>("m").unwrap();
    map.put_all((0..1000u64).map(|k| (k, k))).unwrap();
    let p = map.partition_of(&7);
    let before = map.partition_snapshot(p).wait().unwrap();
    let others = map.len().unwrap() - before.len();
    // A later entry of a key wins; keys of the partition not given are gone.
    let held = map
        .replace_partition_async(p, vec![(7, 1), (7, 70)])
        .wait()
        .unwrap();
    assert_eq!(held, 1);
    assert_eq!(map.get(&7).unwrap(), Some(70));
    assert_eq!(map.entries(p).unwrap(), vec![(7, 70)]);
    assert_eq!(map.len().unwrap(), others + 1);
    assert_eq!(before.get(&7), Some(&7), "the old view is untouched");
    assert!(matches!(
        map.replace_partition_async(271, Vec::new()).wait(),
        Err(MapError::OutOfRange { .. })
    ));
    assert!(matches!(
        map.put_partition_async(271, Vec::new()).wait(),
        Err(MapError::OutOfRange { .. })
    ));
}

#[test]
fn async_forms_resolve_without_blocking_a_thread() {
    let service = service(2);
    let map = service.map::<u64, u64>("m").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let out = runtime.block_on(async {
        map.put_async(1, 10).await.unwrap();
        map.put_all_async((2..50u64).map(|i| (i, i))).await.unwrap();
        let v = map.get_async(1).await.unwrap();
        let w = map
            .execute_on_key_async(2, |e| *e.value().unwrap() * 3)
            .await
            .unwrap();
        (v, w)
    });
    assert_eq!(out, (Some(10), 6));
    assert_eq!(map.len().unwrap(), 49);
}

#[test]
fn many_threads_computing_one_key_lose_no_update() {
    let service = service(2);
    let map = service.map::<String, u64>("counter").unwrap();
    let threads = 8;
    let per_thread = scale(500, 20_000);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let map = map.clone();
            s.spawn(move || {
                for _ in 0..per_thread {
                    map.compute("hot".into(), |_, v| Some(v.copied().unwrap_or(0) + 1))
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(
        map.get(&"hot".into()).unwrap(),
        Some((threads * per_thread) as u64)
    );
}

#[test]
fn entry_processors_on_one_key_are_serialised() {
    let service = service(2);
    let map = service.map::<u32, Vec<u32>>("log").unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let per_thread = scale(200, 5_000) as u32;
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let map = map.clone();
            let inside = Arc::clone(&inside);
            s.spawn(move || {
                for i in 0..per_thread {
                    let inside = Arc::clone(&inside);
                    map.execute_on_key(7, move |e| {
                        // A second processor on the key inside this one would see 1 here.
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        let v = e.or_insert_with(Vec::new);
                        v.push(t * 1_000_000 + i);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                    .unwrap();
                }
            });
        }
    });
    let log = map.get(&7).unwrap().unwrap();
    assert_eq!(log.len(), 4 * per_thread as usize);
    // Each thread's own updates appear in the order it made them.
    for t in 0..4u32 {
        let mine: Vec<u32> = log.iter().copied().filter(|v| v / 1_000_000 == t).collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn batched_entry_processors_count_every_key() {
    let service = service(2);
    let map = service.map::<u64, u64>("counts").unwrap();
    let n = scale(20_000, 2_000_000) as u64;
    map.execute_on_keys((0..n).map(|i| i % 1000), |e| *e.or_insert_with(|| 0) += 1)
        .unwrap();
    assert_eq!(map.len().unwrap(), 1000);
    let all = map.get_all(0..1000).unwrap();
    assert!(all.values().all(|&c| c == n / 1000));
}

#[test]
fn execute_on_entries_runs_on_every_owner() {
    let service = service(3);
    let map = service.map::<u64, u64>("m").unwrap();
    map.put_all((0..1000u64).map(|i| (i, i))).unwrap();
    let mut doubled = map
        .execute_on_entries(
            |_, v| v % 2 == 0,
            |e| {
                let v = e.value_mut().unwrap();
                *v *= 2;
                *v
            },
        )
        .unwrap();
    doubled.sort();
    assert_eq!(doubled.len(), 500);
    assert_eq!(doubled[1], (2, 4));
    assert_eq!(map.get(&4).unwrap(), Some(8));
    assert_eq!(map.get(&5).unwrap(), Some(5));
}

#[test]
fn moving_partitions_while_operations_run_loses_nothing() {
    let service = service(3);
    let map = service.map::<u64, u64>("moving").unwrap();
    let keys = 500u64;
    let rounds = scale(20, 400) as u64;
    let version_before = service.table().version();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|s| {
        // Writers: per-key increments (waiting) and batched increments (fire in batches).
        let mut writers = Vec::new();
        for _ in 0..2 {
            let map = map.clone();
            writers.push(s.spawn(move || {
                for _ in 0..rounds {
                    for k in 0..keys {
                        map.compute(k, |_, v| Some(v.copied().unwrap_or(0) + 1))
                            .unwrap();
                    }
                }
            }));
        }
        {
            let map = map.clone();
            writers.push(s.spawn(move || {
                for _ in 0..rounds {
                    map.execute_on_keys(0..keys, |e| *e.or_insert_with(|| 0) += 1)
                        .unwrap();
                }
            }));
        }
        // The mover: keeps moving partitions between owners until the writers finish.
        let service = service.clone();
        let stop2 = Arc::clone(&stop);
        let mover = s.spawn(move || {
            let mut moves = 0u64;
            let mut p = 0u32;
            while !stop2.load(Ordering::Acquire) {
                let to = (service.table().owner_of_partition(p) + 1) % 3;
                service.move_partition(p, to).unwrap();
                moves += 1;
                p = (p + 37) % 271;
            }
            moves
        });
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        assert!(mover.join().unwrap() > 0);
    });
    for k in 0..keys {
        assert_eq!(map.get(&k).unwrap(), Some(rounds * 3), "key {k}");
    }
    assert!(service.table().version() > version_before);
    let assignment = service.table().assignment();
    assert_eq!(assignment.len(), 271);
    assert!(assignment.iter().all(|&o| o < 3));
}

#[test]
fn a_moved_partition_is_served_by_its_new_owner() {
    let service = service(2);
    let map = service.map::<String, u32>("m").unwrap();
    map.put("x".into(), 1).unwrap();
    let p = map.partition_of(&"x".to_string());
    let old = service.table().owner_of_partition(p);
    let v = service.move_partition(p, 1 - old).unwrap();
    assert_eq!(service.table().owner_of_partition(p), 1 - old);
    assert_eq!(service.table().version(), v);
    let owner = service
        .execute_on_key_owner(&"x".to_string(), |view| view.owner())
        .wait()
        .unwrap();
    assert_eq!(owner, 1 - old);
    assert_eq!(map.get(&"x".into()).unwrap(), Some(1));
    assert!(matches!(
        service.move_partition(271, 0),
        Err(MapError::OutOfRange { .. })
    ));
    assert!(matches!(
        service.move_partition(0, 2),
        Err(MapError::OutOfRange { .. })
    ));
}

#[test]
fn unknown_map_names_and_type_mismatches_are_clear_errors() {
    let service = service(1);
    let err = service.existing_map::<String, u64>("nope").unwrap_err();
    assert_eq!(err, MapError::UnknownMap("nope".into()));
    assert!(err.to_string().contains("'nope'"));
    service.map::<String, u64>("m").unwrap();
    assert!(service.existing_map::<String, u64>("m").is_ok());
    let err = service.map::<u64, u64>("m").unwrap_err();
    assert!(matches!(err, MapError::TypeMismatch { .. }), "{err}");
    assert_eq!(service.map_names(), vec!["m".to_string()]);
}

#[test]
fn a_blocking_map_call_inside_an_entry_processor_is_refused() {
    let service = service(2);
    let a = service.map::<u64, u64>("a").unwrap();
    let b = service.map::<u64, u64>("b").unwrap();
    b.put(1, 5).unwrap();
    // A read of another map, whose key may live on another owner or on this one.
    let b2 = b.clone();
    let inner = a.execute_on_key(1, move |_| b2.get(&1)).unwrap();
    match inner {
        Err(MapError::CalledFromOwner { call, .. }) => assert_eq!(call, "get"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // The same inside a task at the key owner; the co-located read through the view works.
    let b3 = b.clone();
    let (refused, local) = service
        .execute_on_key_owner(&1u64, move |view| {
            (b3.len(), view.get(&b3, &1).unwrap().copied())
        })
        .wait()
        .unwrap();
    assert!(matches!(
        refused,
        Err(MapError::CalledFromOwner { call: "len", .. })
    ));
    assert_eq!(local, Some(5));
    // A key of another partition is not local.
    let b4 = b.clone();
    let other = (2..100u64)
        .find(|k| b.partition_of(k) != b.partition_of(&1))
        .unwrap();
    let err = service
        .execute_on_key_owner(&1u64, move |view| view.get(&b4, &other).map(|v| v.copied()))
        .wait()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, MapError::NotLocal { .. }), "{err}");
}

#[test]
fn a_panicking_entry_processor_fails_its_call_and_leaves_the_owner_serving() {
    let service = service(1);
    let map = service.map::<u64, u64>("m").unwrap();
    map.put(1, 1).unwrap();
    let err = map
        .execute_on_key(1, |_| -> u64 { panic!("boom") })
        .unwrap_err();
    assert_eq!(err, MapError::TaskPanicked);
    let err = map
        .execute_on_keys([1, 2, 3], |_| panic!("boom"))
        .unwrap_err();
    assert_eq!(err, MapError::TaskPanicked);
    assert_eq!(map.get(&1).unwrap(), Some(1));
    map.put(2, 2).unwrap();
    assert_eq!(map.len().unwrap(), 2);
}

struct SumTask {
    prefix: String,
    map: weir_maps::PartitionedMap<AffinityKey, u64>,
}

impl PartitionAware for SumTask {
    type Key = str;
    fn partition_key(&self) -> &str {
        &self.prefix
    }
}

impl OwnerTask for SumTask {
    type Output = u64;
    fn run(self, view: &mut PartitionView<'_>) -> u64 {
        (1..=5)
            .map(|j| {
                view.get(&self.map, &AffinityKey::new(format!("{}-{j}", self.prefix)))
                    .unwrap()
                    .copied()
                    .unwrap_or(0)
            })
            .sum()
    }
}

#[test]
fn seed_affinity_keys_co_locate_three_maps_and_sum_at_the_owner() {
    let service = service(4);
    let maps: Vec<_> = ["map1", "map2", "map3"]
        .iter()
        .map(|n| service.map::<AffinityKey, u64>(n).unwrap())
        .collect();
    for i in 1..=5u64 {
        for j in 1..=5u64 {
            for m in &maps {
                m.put(AffinityKey::new(format!("key{i}-{j}")), i * j)
                    .unwrap();
            }
        }
    }
    for i in 1..=5 {
        let first = service.owner_of(&AffinityKey::new(format!("key{i}-1")));
        let partition = service.partition_of(&AffinityKey::new(format!("key{i}-1")));
        for j in 1..=5 {
            let key = AffinityKey::new(format!("key{i}-{j}"));
            assert_eq!(service.owner_of(&key), first);
            assert_eq!(service.partition_of(&key), partition);
            for m in &maps {
                assert!(m.entries(partition).unwrap().iter().any(|(k, _)| k == &key));
            }
        }
    }
    let pending: Vec<_> = (1..=5)
        .map(|i| {
            service.submit(SumTask {
                prefix: format!("key{i}"),
                map: maps[0].clone(),
            })
        })
        .collect();
    let sums: Vec<u64> = pending.into_iter().map(|p| p.wait().unwrap()).collect();
    assert_eq!(sums, vec![15, 30, 45, 60, 75]);
    // Without affinity keys the same entries spread over owners.
    let owners: std::collections::BTreeSet<usize> = (1..=5)
        .map(|j| service.owner_of(&format!("key1-{j}")))
        .collect();
    let spread = (1..=5).any(|i| {
        (1..=5)
            .map(|j| service.owner_of(&format!("key{i}-{j}")))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
    });
    assert!(
        spread,
        "plain keys landed on one owner per prefix: {owners:?}"
    );
}

#[test]
fn at_keys_land_with_their_partition_key_in_every_router() {
    let service = service(2);
    let orders = service.map::<AtKey, u32>("orders").unwrap();
    let customers = service.map::<String, u32>("customers").unwrap();
    orders.put(AtKey::new("order-17@customer-3"), 1).unwrap();
    customers.put("customer-3".into(), 1).unwrap();
    let p = service.partition_of("customer-3");
    assert_eq!(orders.partition_of(&AtKey::new("order-17@customer-3")), p);
    assert_eq!(
        weir_partition::Partitioner::default().partition_of(&AtKey::new("x@customer-3")),
        p
    );
    let o = orders.clone();
    let c = customers.clone();
    let both = service
        .execute_on_key_owner("customer-3", move |view| {
            (
                view.get(&o, &AtKey::new("order-17@customer-3"))
                    .unwrap()
                    .copied(),
                view.get(&c, &"customer-3".to_string()).unwrap().copied(),
            )
        })
        .wait()
        .unwrap();
    assert_eq!(both, (Some(1), Some(1)));
}

#[test]
fn save_and_load_round_trip_and_damage_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let first = service(2);
    let map = first.map::<String, u64>("m").unwrap();
    map.put_all((0..2000u64).map(|i| (format!("k{i}"), i)))
        .unwrap();
    let saved = map.save(dir.path()).unwrap();
    assert_eq!(saved.partitions, 271);
    assert_eq!(saved.entries, 2000);

    // A restart: a new service loads the directory.
    let service2 = service(3);
    let loaded = service2.map::<String, u64>("m").unwrap();
    assert_eq!(loaded.load(dir.path()).unwrap().entries, 2000);
    assert_eq!(loaded.len().unwrap(), 2000);
    assert_eq!(loaded.get(&"k1234".into()).unwrap(), Some(1234));

    // A flipped byte in one file: refused, naming it, and nothing is loaded.
    let p = map.partition_of(&"k5".to_string());
    let path = weir_maps::partition_file(dir.path(), p);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let fresh = service(1).map::<String, u64>("m").unwrap();
    let err = fresh.load(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert!(err.to_string().contains("checksum"), "{err}");
    assert_eq!(fresh.len().unwrap(), 0);

    // Truncated and missing files too.
    std::fs::write(&path, &bytes[..10]).unwrap();
    assert!(matches!(
        fresh.load(dir.path()),
        Err(MapError::Corrupt { .. })
    ));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(fresh.load(dir.path()), Err(MapError::Io { .. })));
    // Another partition's file in its place.
    let other = weir_maps::partition_file(dir.path(), (p + 1) % 271);
    std::fs::copy(&other, &path).unwrap();
    let err = fresh.load(dir.path()).unwrap_err();
    assert!(err.to_string().contains("partition"), "{err}");
}
