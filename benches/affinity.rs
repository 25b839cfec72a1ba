//! Partitioned maps against the usual concurrent maps, on 2 threads.
//!
//! ```text
//! cargo bench --bench affinity [-- --ops N --keys K --items M --runs R]
//! ```
//!
//! 1. **Entry-processor increments**: `--ops` (10 M) increments over `--keys` (1 M) keys drawn
//!    Zipf-skewed (s = 0.99, the hottest key about 7% of the draws), by
//!    - Weir: `PartitionedMap::execute_on_keys` on a map service whose 2 owners are the
//!      workers of an executor of 2 workers (the calling thread groups keys by owner and
//!      sends batches);
//!    - `DashMap` with `entry().and_modify().or_insert()`, 2 threads each taking half;
//!    - `RwLock<FxHashMap>` with a write lock per increment, 2 threads;
//!    - the hand loop: 2 threads, each scanning the draws and counting the keys of its own
//!      half (by hash) in a private `FxHashMap`: sharding by hand, no sharing at all.
//! 2. **Enrichment by keyed lookup**: `--items` (10 M) numbers each looked up in a 1 M-entry
//!    map (keys spread uniformly) and summed with the value, by
//!    - Weir: `sequence → map_using_map → aggregate(summing)` on an executor of 2 workers,
//!      which are also the map's owners;
//!    - **the yardstick**: 2 threads reading one shared table, each lookup's bucket
//!      prefetched 32 items ahead (`map_using_map` prefetches 16 ahead; of 8, 16, 32 and 64,
//!      32 was the best for this loop on the project's machine, by 3 to 5%). The table is
//!      `weir::maps::Store`, hashbrown's table with the Fx hash (what a `FxHashMap` is),
//!      which can prefetch a key's first bucket; a hand loop over a `FxHashMap` cannot,
//!      since the map hides where a key's bucket is. This is the same work as the engine's
//!      (every item looked up and summed with its value, on 2 threads), done as well as a
//!      good engineer would: the map is read-only, so sharing it costs nothing and routing
//!      each key to an owner buys nothing;
//!    - the hand loop without prefetching: 2 threads reading a shared `FxHashMap`, the
//!      yardstick before this one, kept for comparison with older figures;
//!    - the same lookups routed by hand (271 partition tables, each looked up only by the one
//!      of the 2 threads that owns it, batches over a channel, prefetching as `map_using_map`
//!      does): the engine's work, owner-only access included, written by hand;
//!    - `DashMap::get` on 2 threads.
//!
//! Weir's headline ratio is to the yardstick (printed first on its line); its ratios to the
//! others follow. Every run's totals are checked against the expected sum. The variants of a part run
//! interleaved, `--runs` (3) rounds of one run each; each round starts once the shared
//! machine is quiet (or after 30 s). Each rate is the median of its runs; each ratio is the
//! median of the rounds' ratios, so that both sides of a ratio ran under about the same load.

mod support;

use std::hint::black_box;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use rustc_hash::{FxBuildHasher, FxHashMap};
use weir::core::{ExecutorConfig, JobConfig};
use weir::prelude::*;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `n` draws of keys `0..keys`, Zipf-distributed with exponent `s`, by inverse CDF. The rank
/// is scrambled into the key so that hot keys are not neighbours.
fn zipf_keys(n: usize, keys: usize, s: f64) -> Vec<u64> {
    let mut cdf = Vec::with_capacity(keys);
    let mut total = 0.0;
    for k in 1..=keys {
        total += 1.0 / (k as f64).powf(s);
        cdf.push(total);
    }
    let mut state = 42;
    (0..n)
        .map(|_| {
            let u = (splitmix(&mut state) >> 11) as f64 / (1u64 << 53) as f64 * total;
            let rank = cdf.partition_point(|&c| c < u).min(keys - 1) as u64;
            rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20
        })
        .collect()
}

/// What a measured part took: wall time, and the CPU time of the whole process meanwhile.
///
/// The machine is shared: a run that loses its CPUs to other work gets a longer wall time
/// but not more CPU time, so the CPU figures vary less between runs. The wall figures are
/// the ones the goals are checked on.
#[derive(Debug, Clone, Copy)]
struct Timing {
    wall: Duration,
    cpu: Duration,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A variant's measured part: times its own work and returns it with its result.
type Variant<'a, R> = &'a mut dyn FnMut() -> (Timing, R);

/// Runs every variant `runs` times, interleaved: round `r` runs each variant once, in order,
/// so that a change in the shared machine's load falls on all of them alike. Each round
/// starts once the machine is quiet (or after 30 s); every result is checked. Returns the
/// timings of each variant, round by round.
fn interleaved<R, const N: usize>(
    runs: usize,
    mut variants: [Variant<'_, R>; N],
    check: impl Fn(&R),
) -> [Vec<Timing>; N] {
    let mut times: [Vec<Timing>; N] = std::array::from_fn(|_| Vec::with_capacity(runs));
    for _ in 0..runs {
        support::wait_for_quiet(0.10, Duration::from_secs(30));
        for (variant, times) in variants.iter_mut().zip(&mut times) {
            let (t, r) = variant();
            check(&r);
            times.push(t);
        }
    }
    times
}

/// The median wall and CPU times of a variant's runs, taken separately.
fn median_timing(runs: &[Timing]) -> Timing {
    Timing {
        wall: median(runs.iter().map(|t| t.wall).collect()),
        cpu: median(runs.iter().map(|t| t.cpu).collect()),
    }
}

/// Times `f`.
fn clock<R>(f: impl FnOnce() -> R) -> (Timing, R) {
    let (start, cpu) = (Instant::now(), support::process_cpu_time());
    let r = f();
    let t = Timing {
        wall: start.elapsed(),
        cpu: support::process_cpu_time() - cpu,
    };
    (t, r)
}

/// Millions per second of wall time.
fn rate(n: usize, t: Timing) -> f64 {
    n as f64 / t.wall.as_secs_f64() / 1e6
}

/// Millions per CPU-second: with 2 threads busy, twice the wall rate at best.
fn cpu_rate(n: usize, t: Timing) -> f64 {
    n as f64 / t.cpu.as_secs_f64() / 1e6
}

/// How many times faster `a` is than `b`: the median over the rounds of each round's ratio
/// (by wall time, by CPU time). Both ran in the same rounds, so each ratio compares runs made
/// under about the same load.
fn ratio(a: &[Timing], b: &[Timing]) -> (f64, f64) {
    let per_round = |f: fn(&Timing) -> Duration| {
        median_f64(
            a.iter()
                .zip(b)
                .map(|(a, b)| f(b).as_secs_f64() / f(a).as_secs_f64())
                .collect(),
        )
    };
    (per_round(|t| t.wall), per_round(|t| t.cpu))
}

/// Prints one variant's line: its median rates, and its ratios to the named references.
fn report(label: &str, unit: &str, n: usize, runs: &[Timing], against: &[(&str, &[Timing])]) {
    let t = median_timing(runs);
    let mut line = format!(
        "  {label:<30}{:7.1} M {unit}/s  ({:6.1} M per CPU-s)",
        rate(n, t),
        cpu_rate(n, t)
    );
    for (name, reference) in against {
        let (wall, cpu) = ratio(runs, reference);
        line += &format!("  ratio to {name} {wall:.2} (CPU {cpu:.2})");
    }
    println!("{line}");
    // Each round's wall ratio as well: the spread shows how much the load moved.
    for (name, reference) in against {
        let rounds: Vec<String> = runs
            .iter()
            .zip(*reference)
            .map(|(a, b)| format!("{:.2}", b.wall.as_secs_f64() / a.wall.as_secs_f64()))
            .collect();
        println!("    rounds, wall ratio to {name}: {}", rounds.join(" "));
    }
}

/// Runs `work` on 2 threads, each over one half of `items`, and waits for both.
fn on_halves<T: Sync>(items: &[T], work: impl Fn(&[T]) + Sync) {
    std::thread::scope(|s| {
        for half in items.chunks(items.len().div_ceil(2)) {
            let work = &work;
            s.spawn(move || work(half));
        }
    })
}

/// Sums `work(a, b)` over the two halves `a..b` of `0..items`, each on a thread of its own.
fn sum_over_halves(items: u64, work: impl Fn(u64, u64) -> u64 + Sync) -> u64 {
    std::thread::scope(|s| {
        let work = &work;
        let halves = [(0, items / 2), (items / 2, items)];
        let handles: Vec<_> = halves
            .into_iter()
            .map(|(a, b)| s.spawn(move || work(a, b)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

/// How many items ahead the hand-written routing requests a lookup's bucket: the distance
/// `map_using_map` uses.
const PREFETCH_AHEAD: u64 = 16;

/// How many items ahead the yardstick requests a lookup's bucket: the best distance for its
/// loop (see the module docs).
const YARDSTICK_AHEAD: u64 = 32;

fn increments(ops: usize, keys: usize, runs: usize) {
    let draws = Arc::new(zipf_keys(ops, keys, 0.99));
    let distinct = {
        let mut d: Vec<u64> = draws.to_vec();
        d.sort_unstable();
        d.dedup();
        d.len()
    };
    println!(
        "increments: {ops} ops over {distinct} distinct keys of {keys}, Zipf s=0.99, 2 threads"
    );
    let expect = |total: &(usize, u64)| {
        assert_eq!(*total, (distinct, ops as u64), "wrong counts");
    };

    let mut hand = || {
        let (t, parts): (_, Vec<FxHashMap<u64, u64>>) = clock(|| {
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..2u64)
                    .map(|me| {
                        let draws = &draws;
                        s.spawn(move || {
                            let mut m = FxHashMap::default();
                            for &k in draws.iter() {
                                // Fx-style multiply: the shard is the top bit.
                                if (k.wrapping_mul(0x517c_c1b7_2722_0a95) >> 63) == me {
                                    *m.entry(black_box(k)).or_insert(0) += 1;
                                }
                            }
                            m
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            })
        });
        (
            t,
            (
                parts.iter().map(|m| m.len()).sum(),
                parts.iter().flat_map(|m| m.values()).sum(),
            ),
        )
    };

    let mut weir = || {
        let executor = weir::core::Executor::new(ExecutorConfig {
            workers: 2,
            ..ExecutorConfig::default()
        })
        .unwrap();
        let service = weir::maps::on_executor(&executor).unwrap();
        let map = service.map::<u64, u64>("counts").unwrap();
        let (t, ()) = clock(|| {
            map.execute_on_keys(draws.iter().copied(), |e| *e.or_insert_with(|| 0) += 1)
                .unwrap()
        });
        let values = map
            .execute_on_entries(|_, _| true, |e| *e.value().unwrap())
            .unwrap();
        (t, (values.len(), values.iter().map(|(_, v)| v).sum()))
    };

    let mut dash = || {
        let map: DashMap<u64, u64, FxBuildHasher> = DashMap::with_hasher(FxBuildHasher);
        let (t, ()) = clock(|| {
            on_halves(&draws, |half| {
                for &k in half {
                    map.entry(k).and_modify(|v| *v += 1).or_insert(1);
                }
            })
        });
        (t, (map.len(), map.iter().map(|e| *e.value()).sum()))
    };

    let mut rwlock = || {
        let map: RwLock<FxHashMap<u64, u64>> = RwLock::default();
        let (t, ()) = clock(|| {
            on_halves(&draws, |half| {
                for &k in half {
                    *map.write().unwrap().entry(k).or_insert(0) += 1;
                }
            })
        });
        let m = map.into_inner().unwrap();
        (t, (m.len(), m.values().sum()))
    };

    let [hand, weir, dash, rwlock] =
        interleaved(runs, [&mut hand, &mut weir, &mut dash, &mut rwlock], expect);
    report("hand loop (2 private shards)", "ops", ops, &hand, &[]);
    report(
        "weir execute_on_keys",
        "ops",
        ops,
        &weir,
        &[("DashMap", &dash), ("hand loop", &hand)],
    );
    report("DashMap entry().and_modify()", "ops", ops, &dash, &[]);
    report("RwLock<FxHashMap>", "ops", ops, &rwlock, &[]);
}

fn lookups(items: u64, keys: u64, runs: usize) {
    println!("lookups: {items} items against a {keys}-entry map, 2 threads / 2 workers");
    let key_of = move |x: u64| x.wrapping_mul(0x9E37_79B9_7F4A_7C15) % keys;
    let value_of = |k: u64| k * 7 + 1;
    let shared: Arc<FxHashMap<u64, u64>> = Arc::new((0..keys).map(|k| (k, value_of(k))).collect());
    let expected: u64 = (0..items).map(|x| x + value_of(key_of(x))).sum();
    let check = |sum: &u64| assert_eq!(*sum, expected, "wrong sum");

    let mut hand = || {
        clock(|| {
            sum_over_halves(items, |a, b| {
                let mut sum = 0u64;
                for x in a..b {
                    let x = black_box(x);
                    if let Some(v) = shared.get(&key_of(x)) {
                        sum += x + v;
                    }
                }
                sum
            })
        })
    };

    // The yardstick: the same loop over one table that can prefetch, as map_using_map's
    // partitions do; each lookup's bucket is requested YARDSTICK_AHEAD items before it is
    // probed.
    let prefetchable: weir::maps::Store<u64, u64> = shared.iter().map(|(k, v)| (*k, *v)).collect();
    let mut hand_prefetch = || {
        clock(|| {
            sum_over_halves(items, |a, b| {
                let mut sum = 0u64;
                for x in a..b {
                    let x = black_box(x);
                    if x + YARDSTICK_AHEAD < b {
                        prefetchable.prefetch(&key_of(x + YARDSTICK_AHEAD));
                    }
                    if let Some(v) = prefetchable.get(&key_of(x)) {
                        sum += x + v;
                    }
                }
                sum
            })
        })
    };

    let dash_map: DashMap<u64, u64, FxBuildHasher> = DashMap::with_hasher(FxBuildHasher);
    for (k, v) in shared.iter() {
        dash_map.insert(*k, *v);
    }
    let mut dash = || {
        clock(|| {
            sum_over_halves(items, |a, b| {
                let mut sum = 0u64;
                for x in a..b {
                    let x = black_box(x);
                    if let Some(v) = dash_map.get(&key_of(x)) {
                        sum += x + *v;
                    }
                }
                sum
            })
        })
    };

    let mut routed = || hand_routed(&shared, items, key_of);

    let executor = weir::core::Executor::new(ExecutorConfig {
        workers: 2,
        ..ExecutorConfig::default()
    })
    .unwrap();
    let service = weir::maps::on_executor(&executor).unwrap();
    let map = service.map::<u64, u64>("reference").unwrap();
    map.put_all(shared.iter().map(|(k, v)| (*k, *v))).unwrap();
    let mut weir_t = || {
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        p.read_from(sources::generator::sequence(items))
            .map_using_map(&map, move |x| key_of(*x), |x, v| v.map(|v| x + v))
            .aggregate(aggregate::summing(|v: &u64| *v))
            .write_to(sink);
        let (t, ()) = clock(|| {
            p.submit(&executor, JobConfig::default())
                .unwrap()
                .join()
                .unwrap()
        });
        (t, out.take()[0])
    };

    let n = items as usize;
    let [hand, weir_t, routed, dash, hand_prefetch] = interleaved(
        runs,
        [
            &mut hand,
            &mut weir_t,
            &mut routed,
            &mut dash,
            &mut hand_prefetch,
        ],
        check,
    );
    report(
        "yardstick: shared, prefetching",
        "items",
        n,
        &hand_prefetch,
        &[("no prefetch", &hand)],
    );
    report("hand loop, no prefetch", "items", n, &hand, &[]);
    report(
        "weir map_using_map",
        "items",
        n,
        &weir_t,
        &[
            ("yardstick", &hand_prefetch),
            ("no prefetch", &hand),
            ("hand-written routing", &routed),
            ("DashMap", &dash),
        ],
    );
    report(
        "hand-written routing",
        "items",
        n,
        &routed,
        &[("yardstick", &hand_prefetch)],
    );
    report("DashMap::get", "items", n, &dash, &[]);
}

/// Items per batch between the threads of [`hand_routed`].
const ROUTED_BATCH: usize = 1024;

/// A batch of `(partition, key, item)` for one thread; empty when the sender is done.
type RoutedBatch = Vec<(u32, u64, u64)>;

/// The lookups with data affinity written by hand, the floor for any engine that routes:
/// the map split into 271 partition tables (`weir::maps::Store`, as the engine's), partition
/// `p` looked up only by thread `p % 2`. Each of 2 threads takes half of the items, computes
/// each key and its partition once, looks up the items of its own partitions in batches of
/// 1024 and sends the others in batches of 1024 over a bounded channel to the other thread,
/// which looks them up. Every batch's lookups prefetch their buckets `PREFETCH_AHEAD` items
/// ahead, as `map_using_map` does.
fn hand_routed(
    shared: &FxHashMap<u64, u64>,
    items: u64,
    key_of: impl Fn(u64) -> u64 + Copy + Send + Sync,
) -> (Timing, u64) {
    use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

    let partitioner = weir::core::Partitioner::default();
    let mut parts: Vec<weir::maps::Store<u64, u64>> =
        (0..271).map(|_| weir::maps::Store::default()).collect();
    for (&k, &v) in shared {
        parts[partitioner.partition_of(&k) as usize].insert(k, v);
    }
    let look_up = |batch: &RoutedBatch, sum: &mut u64| {
        let ahead = PREFETCH_AHEAD as usize;
        for &(p, k, _) in batch.iter().take(ahead) {
            parts[p as usize].prefetch(&k);
        }
        for (i, &(p, k, x)) in batch.iter().enumerate() {
            if let Some(&(p, k, _)) = batch.get(i + ahead) {
                parts[p as usize].prefetch(&k);
            }
            if let Some(v) = parts[p as usize].get(&k) {
                *sum += x + v;
            }
        }
    };
    let (to_0, from_1) = sync_channel::<RoutedBatch>(16);
    let (to_1, from_0) = sync_channel::<RoutedBatch>(16);
    let run =
        |me: u64, (a, b): (u64, u64), to: SyncSender<RoutedBatch>, from: Receiver<RoutedBatch>| {
            let mut sum = 0u64;
            let mut mine = Vec::with_capacity(ROUTED_BATCH);
            let mut theirs = Vec::with_capacity(ROUTED_BATCH);
            let mut other_done = false;
            // Looks up what the other thread sent so far, so that neither waits on a full channel.
            let receive = |sum: &mut u64, other_done: &mut bool| {
                while let Ok(batch) = from.try_recv() {
                    *other_done |= batch.is_empty();
                    look_up(&batch, sum);
                }
            };
            let send = |batch: RoutedBatch, sum: &mut u64, other_done: &mut bool| {
                let mut batch = batch;
                loop {
                    match to.try_send(batch) {
                        Ok(()) => return,
                        Err(TrySendError::Full(back)) => {
                            batch = back;
                            receive(sum, other_done);
                        }
                        Err(TrySendError::Disconnected(_)) => panic!("the other thread ended"),
                    }
                }
            };
            for x in a..b {
                let x = black_box(x);
                let k = key_of(x);
                let p = partitioner.partition_of(&k);
                if u64::from(p % 2) == me {
                    mine.push((p, k, x));
                    if mine.len() == ROUTED_BATCH {
                        look_up(&mine, &mut sum);
                        mine.clear();
                    }
                } else {
                    theirs.push((p, k, x));
                    if theirs.len() == ROUTED_BATCH {
                        let full = std::mem::replace(&mut theirs, Vec::with_capacity(ROUTED_BATCH));
                        send(full, &mut sum, &mut other_done);
                        receive(&mut sum, &mut other_done);
                    }
                }
            }
            look_up(&mine, &mut sum);
            if !theirs.is_empty() {
                send(theirs, &mut sum, &mut other_done);
            }
            send(Vec::new(), &mut sum, &mut other_done);
            while !other_done {
                let batch = from.recv().expect("the other thread sends its end");
                other_done = batch.is_empty();
                look_up(&batch, &mut sum);
            }
            sum
        };
    clock(|| {
        std::thread::scope(|s| {
            let a = s.spawn(move || run(0, (0, items / 2), to_1, from_1));
            let b = s.spawn(move || run(1, (items / 2, items), to_0, from_0));
            a.join().unwrap() + b.join().unwrap()
        })
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |name: &str, default: u64| {
        support::flag(&args, name).map_or(default, |v| v.parse().expect("a number"))
    };
    let runs = num("--runs", 3) as usize;
    let keys = num("--keys", 1_000_000);
    if support::flag(&args, "--only").as_deref() != Some("lookups") {
        increments(num("--ops", 10_000_000) as usize, keys as usize, runs);
    }
    if support::flag(&args, "--only").as_deref() != Some("increments") {
        lookups(num("--items", 10_000_000), keys, runs);
    }
}
