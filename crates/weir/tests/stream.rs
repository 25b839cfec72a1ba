//! Streams end to end: event time, lateness, windows, joins, checked against plain-Rust
//! references written here.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;
use weir::aggregate::{all_of, counting, max_by, summing, to_list};
use weir::prelude::*;
use weir::stream::{KeyedWindowResult, Window, WindowResult};
use weir::{Executor, JobConfig};

/// An event: (key, timestamp, value).
type Ev = (u8, i64, i64);

/// Window results: (window start, key) -> (count, sum).
type Sums = BTreeMap<(i64, u8), (u64, i64)>;

/// The events a single-instance source accepts, in order: an event behind `max seen − lag`
/// is late.
fn accepted(events: &[Ev], lag: i64) -> (Vec<Ev>, u64) {
    let mut highest: Option<i64> = None;
    let (mut ok, mut late) = (Vec::new(), 0);
    for &e in events {
        let wm = highest.map_or(i64::MIN, |h| h - lag);
        if e.1 < wm {
            late += 1;
        } else {
            highest = Some(highest.map_or(e.1, |h| h.max(e.1)));
            ok.push(e);
        }
    }
    (ok, late)
}

/// Reference sliding/tumbling window sums: (start, key) -> (count, sum).
fn reference_windows(events: &[Ev], size: i64, slide: i64) -> Sums {
    let mut out = BTreeMap::new();
    for &(k, t, v) in events {
        let mut start = t.div_euclid(slide) * slide;
        while start > t - size {
            let e = out.entry((start, k)).or_insert((0, 0));
            e.0 += 1;
            e.1 += v;
            start -= slide;
        }
    }
    out
}

fn run_collect<T: weir::Item>(
    p: &Pipeline,
    out: &weir::sinks::collection::Collected<T>,
) -> (Vec<T>, u64) {
    run_collect_with(p, out, JobConfig::default())
}

/// Runs `p` under `config` on the shared executor; returns what the sink collected and the
/// late events of the whole job.
fn run_collect_with<T: weir::Item>(
    p: &Pipeline,
    out: &weir::sinks::collection::Collected<T>,
    config: JobConfig,
) -> (Vec<T>, u64) {
    let job = p.submit(&Executor::shared(), config).unwrap();
    assert!(
        job.wait_timeout(std::time::Duration::from_secs(120)),
        "job did not finish"
    );
    let late: u64 = job.metrics().iter().map(|m| m.counter("late_events")).sum();
    job.join().unwrap();
    (out.take(), late)
}

/// How a keyed window aggregates: in two stages (the default) or in one after the shuffle.
#[derive(Debug, Clone, Copy)]
enum Stages {
    Two,
    One,
}

fn stages_strategy() -> impl Strategy<Value = Stages> {
    prop_oneof![Just(Stages::Two), Just(Stages::One)]
}

fn windowed_sums(
    events: Vec<Ev>,
    lag: i64,
    window: WindowDefinition,
    stages: Stages,
) -> (Sums, u64) {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    let windowed = p
        .read_from(sources::stream::items(events))
        .with_timestamps(|e: &Ev| e.1, lag)
        .grouping_key(|e: &Ev| e.0)
        .window(window);
    let windowed = match stages {
        Stages::Two => windowed,
        Stages::One => windowed.single_stage(),
    };
    windowed
        .aggregate(all_of((counting(), summing(|e: &Ev| e.2))))
        .write_to(sink);
    let (results, late) = run_collect(&p, &out);
    let mut map = BTreeMap::new();
    for r in results {
        let r: KeyedWindowResult<u8, (u64, i64)> = r;
        assert!(
            map.insert((r.start, r.key), r.value).is_none(),
            "window ({}, {}) twice",
            r.start,
            r.key
        );
    }
    (map, late)
}

fn events_strategy() -> impl Strategy<Value = Vec<Ev>> {
    // Mostly increasing times with jitter, so some events arrive out of order and a few late.
    proptest::collection::vec((0u8..4, 0i64..50, -20i64..20, -100i64..100), 0..120).prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(k, step, jitter, value)| {
                t += step;
                (k, (t + jitter * 10).max(0), value)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn tumbling_windows_match_the_reference(
        events in events_strategy(),
        lag in 0i64..300,
        stages in stages_strategy(),
    ) {
        let (ok, late) = accepted(&events, lag);
        let (got, got_late) =
            windowed_sums(events, lag, WindowDefinition::tumbling(100), stages);
        prop_assert_eq!(got, reference_windows(&ok, 100, 100));
        prop_assert_eq!(got_late, late);
    }

    #[test]
    fn sliding_windows_with_deduct_match_the_reference(
        events in events_strategy(),
        lag in 0i64..300,
        stages in stages_strategy(),
        slide in prop_oneof![Just(100i64), Just(50), Just(20)],
    ) {
        let (ok, late) = accepted(&events, lag);
        // counting and summing can deduct: the running accumulator slides, over 2 to 10
        // frames a window.
        let (got, got_late) =
            windowed_sums(events, lag, WindowDefinition::sliding(200, slide), stages);
        prop_assert_eq!(got, reference_windows(&ok, 200, slide));
        prop_assert_eq!(got_late, late);
    }
}

/// The events a single-instance source hands on after its filter and map, with
/// the late ones counted: `wide` pads each event to 96 bytes, so that the source head pushes
/// them down the chain one by one instead of in batches.
fn stamped_and_mapped(events: Vec<Ev>, lag: i64, wide: bool) -> (Vec<(Ev, i64)>, u64) {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    let odd_values = |e: &Ev| e.2 % 2 != 0;
    let doubled = |e: Ev| (e, e.2 * 2);
    if wide {
        p.read_from(sources::stream::items(
            events
                .into_iter()
                .map(|e| (e, [e.2; 8]))
                .collect::<Vec<_>>(),
        ))
        .with_timestamps(|w: &(Ev, [i64; 8])| w.0.1, lag)
        .filter(move |w: &(Ev, [i64; 8])| w.1.iter().all(|&v| v == w.0.2) && odd_values(&w.0))
        .map(move |w: (Ev, [i64; 8])| doubled(w.0))
        .write_to(sink);
    } else {
        p.read_from(sources::stream::items(events))
            .with_timestamps(|e: &Ev| e.1, lag)
            .filter(odd_values)
            .map(doubled)
            .write_to(sink);
    }
    run_collect(&p, &out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// A source head gathers small items into batches and pushes large ones one by one:
    /// either way the chain sees every on-time item once, and the late ones are counted.
    #[test]
    fn small_and_large_items_go_down_the_chain_alike(
        events in events_strategy(),
        lag in 0i64..300,
    ) {
        let (ok, late) = accepted(&events, lag);
        let expected: Vec<(Ev, i64)> =
            ok.into_iter().filter(|e| e.2 % 2 != 0).map(|e| (e, e.2 * 2)).collect();
        for wide in [false, true] {
            let (mut got, got_late) = stamped_and_mapped(events.clone(), lag, wide);
            // The sink's instances may interleave: the set is what the source decided.
            got.sort_unstable();
            let mut expected = expected.clone();
            expected.sort_unstable();
            prop_assert_eq!(&got, &expected, "wide: {}", wide);
            prop_assert_eq!(got_late, late, "wide: {}", wide);
        }
    }
}

#[test]
fn sliding_windows_without_deduct_recombine_frames() {
    let events: Vec<Ev> = (0..200).map(|i| ((i % 3) as u8, i * 7, i)).collect();
    let run = |stages: Stages| {
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        let windowed = p
            .read_from(sources::stream::items(events.clone()))
            .with_timestamps(|e: &Ev| e.1, 0)
            .grouping_key(|e: &Ev| e.0)
            .window(WindowDefinition::sliding(100, 25));
        let windowed = match stages {
            Stages::Two => windowed,
            Stages::One => windowed.single_stage(),
        };
        windowed.aggregate(max_by(|e: &Ev| e.2)).write_to(sink);
        let (results, _) = run_collect(&p, &out);
        let mut got: BTreeMap<(i64, u8), i64> = BTreeMap::new();
        for r in results {
            got.insert((r.start, r.key), r.value.unwrap().2);
        }
        got
    };
    let mut expected: BTreeMap<(i64, u8), i64> = BTreeMap::new();
    for &(k, t, v) in &events {
        let mut start = t.div_euclid(25) * 25;
        while start > t - 100 {
            let e = expected.entry((start, k)).or_insert(i64::MIN);
            *e = (*e).max(v);
            start -= 25;
        }
    }
    assert_eq!(run(Stages::Two), expected, "in two stages");
    assert_eq!(run(Stages::One), expected, "in one stage");
}

#[test]
fn session_windows_close_after_the_gap() {
    let events: Vec<Ev> = vec![
        (1, 0, 1),
        (1, 50, 1),
        (2, 60, 1),
        (1, 300, 1),
        (1, 120, 1),
        (2, 500, 1),
    ];
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::items(events))
        .with_timestamps(|e: &Ev| e.1, 200)
        .grouping_key(|e: &Ev| e.0)
        .window(WindowDefinition::session(100))
        .aggregate(counting())
        .write_to(sink);
    let (results, _) = run_collect(&p, &out);
    let mut got: Vec<(u8, i64, i64, u64)> = results
        .into_iter()
        .map(|r| (r.key, r.start, r.end, r.value))
        .collect();
    got.sort();
    // key 1: 0, 50 and 120 form one session [0, 220); 300 is alone. key 2: 60 and 500 apart.
    assert_eq!(
        got,
        [
            (1, 0, 220, 3),
            (1, 300, 400, 1),
            (2, 60, 160, 1),
            (2, 500, 600, 1)
        ]
    );
}

/// Session results: (key, start, end) -> (count, sum).
type Sessions = BTreeMap<(u8, i64, i64), (u64, i64)>;

/// Reference sessions per key over the accepted events: sorted by time, a new session starts
/// where the next time is `gap` or more after the last; a session ends `gap` after its last
/// item.
fn reference_sessions(events: &[Ev], gap: i64) -> Sessions {
    let mut by_key: BTreeMap<u8, Vec<(i64, i64)>> = BTreeMap::new();
    for &(k, t, v) in events {
        by_key.entry(k).or_default().push((t, v));
    }
    let mut out = BTreeMap::new();
    for (k, mut items) in by_key {
        items.sort_unstable();
        let mut i = 0;
        while i < items.len() {
            let (start, mut last) = (items[i].0, items[i].0);
            let (mut count, mut sum) = (0, 0);
            while i < items.len() && items[i].0 - last < gap {
                last = items[i].0;
                count += 1;
                sum += items[i].1;
                i += 1;
            }
            out.insert((k, start, last + gap), (count, sum));
        }
    }
    out
}

fn session_sums(events: Vec<Ev>, lag: i64, gap: i64) -> (Sessions, u64) {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::items(events))
        .with_timestamps(|e: &Ev| e.1, lag)
        .grouping_key(|e: &Ev| e.0)
        .window(WindowDefinition::session(gap))
        .aggregate(all_of((counting(), summing(|e: &Ev| e.2))))
        .write_to(sink);
    let (results, late) = run_collect(&p, &out);
    let mut got = BTreeMap::new();
    for r in results {
        let previous = got.insert((r.key, r.start, r.end), r.value);
        assert!(
            previous.is_none(),
            "session {:?} emitted twice",
            (r.key, r.start, r.end)
        );
    }
    (got, late)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// Out-of-order items within the lag, late ones beyond it, items that bridge two
    /// sessions into one, gaps of exactly the session gap: all as the naive computation says.
    #[test]
    fn session_windows_match_the_reference(
        events in events_strategy(),
        lag in 0i64..300,
        gap in prop_oneof![Just(1i64), 5i64..60, Just(100)],
    ) {
        let (ok, late) = accepted(&events, lag);
        let (got, got_late) = session_sums(events, lag, gap);
        prop_assert_eq!(got, reference_sessions(&ok, gap));
        prop_assert_eq!(got_late, late);
    }
}

#[test]
fn session_windows_merge_when_a_late_arrival_bridges_them() {
    // Key 1: sessions [0, 10) and [15, 25) are apart until 8 arrives (out of order, within the
    // lag): [8, 18) touches both, and the three become one. Exactly `gap` apart (30 -> 40)
    // is a new session; 47 is late (the watermark is 60 - 10).
    let events: Vec<Ev> = vec![
        (1, 0, 1),
        (1, 15, 1),
        (1, 8, 1),
        (1, 30, 1),
        (1, 40, 1),
        (1, 60, 1),
        (1, 47, 1),
    ];
    let (got, late) = session_sums(events, 10, 10);
    let want: BTreeMap<_, _> = [
        ((1u8, 0i64, 25i64), (3u64, 3i64)),
        ((1, 30, 40), (1, 1)),
        ((1, 40, 50), (1, 1)),
        ((1, 60, 70), (1, 1)),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want);
    assert_eq!(late, 1);
}

#[test]
fn process_with_timers_emits_when_the_watermark_passes_and_in_time_order() {
    // Per key, items buffered until 50 ms after each; released in event-time order with a
    // running count: out-of-order input, in-order output per key.
    let events: Vec<Ev> = vec![
        (1, 100, 10),
        (2, 105, 20),
        (1, 90, 11),
        (1, 120, 12),
        (2, 95, 21),
        (1, 400, 13),
    ];
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::items(events))
        .with_timestamps(|e: &Ev| e.1, 50)
        .grouping_key(|e: &Ev| e.0)
        .process_with_timers(
            || (Vec::<(i64, i64)>::new(), 0u32),
            |(buffer, _), _key, t, e: Ev, timers| {
                buffer.push((t, e.2));
                timers.at(t);
            },
            |(buffer, released), key, t, out| {
                buffer.sort_unstable();
                while buffer.first().is_some_and(|&(time, _)| time <= t) {
                    let (time, v) = buffer.remove(0);
                    *released += 1;
                    out.push((*key, time, v, *released));
                }
                true
            },
        )
        .write_to(sink);
    let (mut got, _) = run_collect(&p, &out);
    got.sort_by_key(|r: &(u8, i64, i64, u32)| (r.0, r.3));
    assert_eq!(
        got,
        [
            (1, 90, 11, 1),
            (1, 100, 10, 2),
            (1, 120, 12, 3),
            (1, 400, 13, 4),
            (2, 95, 21, 1),
            (2, 105, 20, 2),
        ]
    );
}

#[test]
fn global_and_non_keyed_windows() {
    let events: Vec<Ev> = (0..1000).map(|i| ((i % 5) as u8, i, 1)).collect();
    let p = Pipeline::new();
    let (total_sink, total) = sinks::collection::list();
    let (window_sink, windows) = sinks::collection::list();
    let stream = p
        .read_from(sources::stream::items(events))
        .with_timestamps(|e: &Ev| e.1, 0);
    stream
        .window(WindowDefinition::global())
        .aggregate(counting())
        .write_to(total_sink);
    stream
        .window(WindowDefinition::tumbling(250))
        .aggregate(counting())
        .write_to(window_sink);
    p.run().unwrap();
    let total: Vec<WindowResult<u64>> = total.take();
    assert_eq!(total.len(), 1);
    assert_eq!(total[0].value, 1000);
    let mut windows: Vec<(i64, u64)> = windows
        .take()
        .into_iter()
        .map(|w: WindowResult<u64>| (w.start, w.value))
        .collect();
    windows.sort();
    assert_eq!(windows, [(0, 250), (250, 250), (500, 250), (750, 250)]);
}

#[test]
fn one_stage_windows_of_many_keys_close_over_several_calls_and_lose_nothing() {
    // 40,000 keys a window, more than one call closes: each close is cut into slices.
    let keys = 40_000u64;
    let events: Vec<(u64, i64)> = (0..4 * keys)
        .map(|i| (i % keys, (i / keys) as i64 * 100 + (i % 7) as i64))
        .collect();
    for parallelism in [1, 2] {
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        p.read_from(sources::stream::items(events.clone()))
            .with_timestamps(|e: &(u64, i64)| e.1, 10)
            .grouping_key(|e: &(u64, i64)| e.0)
            .window(WindowDefinition::sliding(200, 100))
            .single_stage()
            .aggregate(counting())
            .write_to(sink);
        let config = JobConfig::default().with_default_parallelism(parallelism);
        let (collected, _) = run_collect_with(&p, &out, config);
        let mut per_window: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
        for r in collected {
            let r: KeyedWindowResult<u64, u64> = r;
            let w = per_window.entry(r.end).or_default();
            w.0 += 1;
            w.1 += r.value;
        }
        // Windows end at 100..=500: the first and the last hold one slide of events, the
        // others two; every key has a result in each.
        let want: BTreeMap<i64, (u64, u64)> = [
            (100, (keys, keys)),
            (200, (keys, 2 * keys)),
            (300, (keys, 2 * keys)),
            (400, (keys, 2 * keys)),
            (500, (keys, keys)),
        ]
        .into_iter()
        .collect();
        assert_eq!(per_window, want, "at parallelism {parallelism}");
    }
}

#[test]
fn a_keyed_global_window_in_one_stage_counts_each_key_once_at_the_end() {
    let events: Vec<Ev> = (0..1000).map(|i| ((i % 5) as u8, i, 1)).collect();
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::items(events))
        .with_timestamps(|e: &Ev| e.1, 0)
        .grouping_key(|e: &Ev| e.0)
        .window(WindowDefinition::global())
        .single_stage()
        .aggregate(counting())
        .write_to(sink);
    let (results, late) = run_collect(&p, &out);
    let mut got: Vec<(u8, u64)> = results
        .into_iter()
        .map(|r: KeyedWindowResult<u8, u64>| (r.key, r.value))
        .collect();
    got.sort();
    assert_eq!(got, [(0, 200), (1, 200), (2, 200), (3, 200), (4, 200)]);
    assert_eq!(late, 0);
}

/// Listing 2 of the Jet seed: a stream of orders enriched, through a hash join, with a batch
/// aggregate (the number of persons of each age).
#[test]
fn stream_joined_with_a_batch_aggregate() {
    #[derive(Debug, Clone)]
    struct Person {
        age: u32,
    }
    #[derive(Debug, Clone)]
    struct Order {
        id: u32,
        buyer_age: u32,
        time: i64,
    }
    let p = Pipeline::new();
    let persons_by_age = p
        .read_from(sources::collection::items(
            (0..100).map(|i| Person { age: 20 + i % 5 }),
        ))
        .grouping_key(|p: &Person| p.age)
        .aggregate(counting());
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::items((0..50u32).map(|i| Order {
        id: i,
        buyer_age: 18 + i % 8,
        time: i as i64 * 10,
    })))
    .with_timestamps(|o: &Order| o.time, 0)
    .hash_join(
        &persons_by_age,
        join_on(|o: &Order| o.buyer_age, |a: &(u32, u64)| a.0),
        |o, a| (o.id, a.map(|a| a.1)),
    )
    .write_to(sink);
    p.run().unwrap();
    let mut got = out.take();
    got.sort();
    assert_eq!(got.len(), 50);
    for (id, peers) in got {
        let age = 18 + id % 8;
        let expected = if (20..25).contains(&age) {
            Some(20)
        } else {
            None
        };
        assert_eq!(peers, expected, "order {id}, age {age}");
    }
}

#[test]
fn windowed_stream_join_matches_only_within_a_window() {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    // Left: (key, time); right: (key, time).
    let left = p
        .read_from(sources::stream::items(vec![(1u32, 5i64), (2, 15), (1, 25)]))
        .with_timestamps(|x: &(u32, i64)| x.1, 100);
    let right = p
        .read_from(sources::stream::items(vec![(1u32, 8i64), (2, 22), (1, 21)]))
        .with_timestamps(|x: &(u32, i64)| x.1, 100);
    left.join_windowed(
        &right,
        WindowDefinition::tumbling(10),
        join_on(|l: &(u32, i64)| l.0, |r: &(u32, i64)| r.0),
        |w: &Window, l, r| (w.start, l.1, r.1),
    )
    .write_to(sink);
    p.run().unwrap();
    let mut got = out.take();
    got.sort();
    // (1,5)-(1,8) share [0,10); (1,25)-(1,21) share [20,30); (2,15)-(2,22) do not.
    assert_eq!(got, [(0, 5, 8), (20, 25, 21)]);
}

#[test]
fn unwindowed_stream_join_matches_whenever_each_side_arrives() {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    let sellers = p
        .read_from(sources::stream::items(vec![
            (1u32, "ann".to_string(), 100i64),
            (2, "bob".to_string(), 5000),
        ]))
        .with_timestamps(|x: &(u32, String, i64)| x.2, 10_000);
    let auctions = p
        .read_from(sources::stream::items(vec![
            (10u32, 1u32, 50i64),
            (11, 2, 60),
            (12, 1, 7000),
        ]))
        .with_timestamps(|x: &(u32, u32, i64)| x.2, 10_000);
    auctions
        .join(
            &sellers,
            join_on(|a: &(u32, u32, i64)| a.1, |s: &(u32, String, i64)| s.0),
            None,
            |a, s| (a.0, s.1.clone()),
        )
        .write_to(sink);
    p.run().unwrap();
    let mut got = out.take();
    got.sort();
    let name = |n: &str| n.to_string();
    assert_eq!(
        got,
        [(10, name("ann")), (11, name("bob")), (12, name("ann"))]
    );
}

#[test]
fn keyed_state_with_ttl_forgets_quiet_keys() {
    // Running count per key, forgetting a key 100 ms after its last event.
    let events: Vec<Ev> = vec![(1, 0, 0), (1, 50, 0), (2, 60, 0), (1, 400, 0), (2, 100, 0)];
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::items(events))
        .with_timestamps(|e: &Ev| e.1, 0)
        .grouping_key(|e: &Ev| e.0)
        .map_stateful(
            Some(100),
            || 0u32,
            |n: &mut u32, key: &u8, e: Ev| {
                *n += 1;
                Some((*key, e.1, *n))
            },
        )
        .write_to(sink);
    p.run().unwrap();
    let mut got = out.take();
    got.sort();
    // Key 1 at 400 starts over (its state expired when the watermark passed 150); (2, 100)
    // is late behind the watermark of 400 and dropped at the source.
    assert_eq!(got, [(1, 0, 1), (1, 50, 2), (1, 400, 1), (2, 60, 1)]);
}

#[test]
fn results_do_not_depend_on_parallelism() {
    let events: Vec<Ev> = (0..5000)
        .map(|i| ((i * 7 % 13) as u8, i * 3 + (i % 7) * 5, i % 100))
        .collect();
    let mut results = Vec::new();
    for parallelism in [1, 2, 4] {
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        p.read_from(sources::stream::items(events.clone()))
            .with_timestamps(|e: &Ev| e.1, 40)
            .rebalance()
            .grouping_key(|e: &Ev| e.0)
            .window(WindowDefinition::sliding(300, 100))
            .aggregate(to_list())
            .map(|r| (r.start, r.key, r.value.len()))
            .write_to(sink);
        let config = JobConfig::default().with_default_parallelism(parallelism);
        let (mut got, _) = run_collect_with(&p, &out, config);
        got.sort();
        results.push(got);
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
    let keys: HashSet<u8> = results[0].iter().map(|r| r.1).collect();
    assert_eq!(keys.len(), 13);
    let _unused: HashMap<u8, u8> = HashMap::new();
}

#[test]
fn socket_source_reads_lines_until_the_peer_closes() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        for i in 0..1000 {
            writeln!(conn, "line {i}").unwrap();
        }
        // Dropping the connection ends the stream.
    });
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::socket(addr))
        .with_ingestion_timestamps()
        .map(|l: String| l.len())
        .write_to(sink);
    p.run().unwrap();
    server.join().unwrap();
    let lens = out.take();
    assert_eq!(lens.len(), 1000);
    assert_eq!(
        lens.iter().sum::<usize>(),
        (0..1000).map(|i| format!("line {i}").len()).sum::<usize>()
    );
}

#[test]
fn async_map_on_a_stream_keeps_event_time_and_never_crosses_a_watermark() {
    use weir::async_io::AsyncOptions;
    // Events 0..2000 at 1 ms apart; the async call answers out of order (later items first,
    // within a batch of calls), so unordered results would cross watermarks if allowed to.
    let events: Vec<Ev> = (0..2000).map(|i| ((i % 4) as u8, i, 1)).collect();
    for options in [AsyncOptions::ordered(), AsyncOptions::unordered()] {
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        p.read_from(sources::stream::items(events.clone()))
            .with_timestamps(|e: &Ev| e.1, 0)
            .map_async(options.capacity(32), |e: Ev| async move {
                let delay = 200 - (e.1 % 200) as u64;
                tokio::time::sleep(std::time::Duration::from_micros(delay)).await;
                Ok::<_, std::io::Error>(Some(e))
            })
            .grouping_key(|e: &Ev| e.0)
            .window(WindowDefinition::tumbling(500))
            .aggregate(counting())
            .write_to(sink);
        let (results, late) = run_collect(&p, &out);
        assert_eq!(late, 0, "an async result crossed a watermark");
        let mut got: Vec<(i64, u8, u64)> = results
            .into_iter()
            .map(|r| (r.start, r.key, r.value))
            .collect();
        got.sort();
        let expected: Vec<(i64, u8, u64)> = (0..4)
            .flat_map(|w| (0..4u8).map(move |k| (w * 500, k, 125)))
            .collect();
        assert_eq!(got, expected);
    }
}

/// Two partitions: partition 0 keeps delivering, partition 1 delivers one early event, goes
/// quiet for at least 5 ms, then delivers an old event. The quiet spell ends only after a
/// read made once the 5 ms had passed, so the source has seen partition 1 silent for that
/// long whatever the scheduling: no upper bound on time is assumed.
struct TwoPartitions {
    phase: u8,
    next: i64,
    quiet_since: Option<std::time::Instant>,
}

impl weir::SourceReader for TwoPartitions {
    type Item = i64;

    fn partitions(&self) -> usize {
        2
    }

    fn read(&mut self, out: &mut weir::sources::Emitter<'_, i64>) -> Result<bool, weir::BoxError> {
        match self.phase {
            0 => {
                for t in (0..=100).step_by(10) {
                    out.emit_from(0, t);
                }
                out.emit_from(1, 0);
                self.phase = 1;
                self.next = 110;
                self.quiet_since = Some(std::time::Instant::now());
                Ok(false)
            }
            1 => {
                out.emit_from(0, self.next);
                self.next += 10;
                let quiet = self.quiet_since.expect("set in phase 0").elapsed();
                if quiet >= std::time::Duration::from_millis(5) {
                    self.phase = 2;
                }
                Ok(false)
            }
            _ => {
                out.emit_from(1, 50);
                Ok(true)
            }
        }
    }
}

fn late_events_with_idle_timeout(timeout: std::time::Duration) -> u64 {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    let source = StreamSource::new("two-partitions", Some(1), |_: &weir::ProcessorContext| {
        TwoPartitions {
            phase: 0,
            next: 0,
            quiet_since: None,
        }
    });
    p.read_from(source)
        .with_idle_timeout(timeout)
        .with_timestamps(|t: &i64| *t, 10)
        .write_to(sink);
    let (_, late) = run_collect(&p, &out);
    late
}

#[test]
fn each_partition_holds_the_watermark_until_it_goes_idle() {
    // Partition 1 holds the source's watermark at -10, so its old event is on time...
    assert_eq!(
        late_events_with_idle_timeout(std::time::Duration::from_secs(60)),
        0
    );
    // ...unless it went idle: then partition 0 alone moved the watermark past 50.
    assert_eq!(
        late_events_with_idle_timeout(std::time::Duration::from_millis(1)),
        1
    );
}

/// Counts items per 1 s tumbling window behind a stage that takes a millisecond per item,
/// a vertex of its own; returns the counts and the late events of the whole job.
fn count_windows_behind_a_slow_stage<T: weir::Item>(
    p: &Pipeline,
    stream: StreamStage<T>,
    config: JobConfig,
) -> (BTreeMap<i64, u64>, u64) {
    let (sink, out) = sinks::collection::list();
    stream
        .rebalance()
        .map(|item: T| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            item
        })
        .window(WindowDefinition::tumbling(1_000))
        .aggregate(counting())
        .write_to(sink);
    let (results, late) = run_collect_with(p, &out, config);
    let counts = results
        .into_iter()
        .map(|r: WindowResult<u64>| (r.start, r.value))
        .collect();
    (counts, late)
}

/// The reference of [`count_windows_behind_a_slow_stage`]: items per 1 s window.
fn tumbling_counts(timestamps: impl IntoIterator<Item = i64>) -> BTreeMap<i64, u64> {
    let mut counts = BTreeMap::new();
    for t in timestamps {
        *counts.entry(t.div_euclid(1_000) * 1_000).or_default() += 1;
    }
    counts
}

#[test]
fn long_backpressure_never_makes_an_input_idle() {
    // Two source instances whose event times advance ten times apart, a stage that takes
    // about a millisecond per item for seconds, and an idle timeout of 50 ms: the slow stage
    // holds its inputs back for far longer than the timeout, yet no input is idle, so no
    // watermark overtakes the queued items and nothing is late.
    const N: u64 = 3_000;
    let stamp = |n: &u64| {
        if n.is_multiple_of(2) {
            *n as i64 * 10
        } else {
            *n as i64
        }
    };
    let p = Pipeline::new();
    let stream = p
        .read_from(sources::stream::generator(0, Some(N), |n| n))
        .with_timestamps(stamp, 0);
    let config = JobConfig::default()
        .with_idle_timeout(std::time::Duration::from_millis(50))
        .with_default_parallelism(2);
    let (got, late) = count_windows_behind_a_slow_stage(&p, stream, config);
    assert_eq!(late, 0, "items were dropped as late");
    assert_eq!(got, tumbling_counts((0..N).map(|n| stamp(&n))));
}

/// Sliding windows of 4 ms every 2 ms over `events` (time, value), one key, summed as
/// `f64` and averaged: (window start, sum, mean), by start.
fn sliding_float_windows(events: Vec<(i64, f64)>) -> Vec<(i64, f64, f64)> {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::items(events))
        .with_timestamps(|e: &(i64, f64)| e.0, 0)
        .window(WindowDefinition::sliding(4, 2))
        .aggregate(all_of((
            summing(|e: &(i64, f64)| e.1),
            weir::aggregate::averaging(|e: &(i64, f64)| e.1),
        )))
        .write_to(sink);
    p.run().unwrap();
    let mut rows: Vec<(i64, f64, f64)> = out
        .take()
        .into_iter()
        .map(|r: WindowResult<(f64, f64)>| (r.start, r.value.0, r.value.1))
        .collect();
    rows.sort_by_key(|r| r.0);
    rows
}

#[test]
fn float_sums_in_sliding_windows_are_recomputed_not_deducted() {
    // Deducting 1e17 from 1e17 + 1.0 gives 0.0: the window [2, 6) holds only the 1.0.
    let rows = sliding_float_windows(vec![(0, 1e17), (2, 1.0)]);
    assert_eq!(
        rows,
        [
            (-2, 1e17, 1e17),
            (0, 1e17 + 1.0, (1e17 + 1.0) / 2.0),
            (2, 1.0, 1.0)
        ]
    );
    // An infinity leaves once its windows close: later windows are finite, not NaN.
    let rows = sliding_float_windows(vec![(0, f64::INFINITY), (2, 1.0), (4, 2.0), (6, 3.0)]);
    let later: Vec<(i64, f64, f64)> = rows.into_iter().filter(|r| r.0 >= 2).collect();
    assert_eq!(later, [(2, 3.0, 1.5), (4, 5.0, 2.5), (6, 3.0, 3.0)]);
}

#[test]
fn the_socket_source_decodes_bad_utf8_lossily_and_drops_overlong_lines() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.write_all(b"first\r\n").unwrap();
        conn.write_all(b"bad \xff byte\n").unwrap();
        conn.write_all(&[b'x'; 5_000]).unwrap();
        conn.write_all(b"\nafter the long one\n").unwrap();
        conn.write_all(b"no newline at the end").unwrap();
    });
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::stream::socket_with_max_line(addr, 1_000))
        .with_ingestion_timestamps()
        .write_to(sink);
    let job = p.submit(&Executor::shared(), JobConfig::default()).unwrap();
    assert!(job.wait_timeout(std::time::Duration::from_secs(60)));
    let metrics = job.metrics();
    job.join().unwrap();
    server.join().unwrap();
    assert_eq!(
        out.take(),
        [
            "first".to_string(),
            "bad \u{fffd} byte".to_string(),
            "after the long one".to_string(),
            "no newline at the end".to_string()
        ]
    );
    let counted = |name: &str| metrics.iter().map(|m| m.counter(name)).sum::<u64>();
    assert_eq!(counted("invalid_utf8_lines"), 1);
    assert_eq!(counted("oversized_lines"), 1);
}

/// Reads two partitions in turns, one per `read` call, like a consumer polling broker
/// partitions: partition 0's event time runs ten times faster than partition 1's.
struct AlternatingPartitions {
    next: [u64; 2],
    turn: usize,
    per_partition: u64,
}

impl weir::SourceReader for AlternatingPartitions {
    type Item = (u32, u64);

    fn partitions(&self) -> usize {
        2
    }

    fn read(
        &mut self,
        out: &mut weir::sources::Emitter<'_, (u32, u64)>,
    ) -> Result<bool, weir::BoxError> {
        let p = self.turn;
        self.turn = 1 - self.turn;
        for _ in 0..100 {
            if self.next[p] < self.per_partition {
                out.emit_from(p as u32, (p as u32, self.next[p]));
                self.next[p] += 1;
            }
        }
        Ok(self.next.iter().all(|n| *n >= self.per_partition))
    }
}

#[test]
fn a_partition_whose_reads_are_held_back_never_goes_idle() {
    // Long backpressure between the turns of the two partitions: the time the source cannot
    // emit does not count towards a partition's idleness, so partition 1 keeps holding the
    // watermark back and none of its events is late.
    const PER_PARTITION: u64 = 1_500;
    let stamp = |e: &(u32, u64)| {
        if e.0 == 0 {
            e.1 as i64 * 10
        } else {
            e.1 as i64
        }
    };
    let p = Pipeline::new();
    let source = StreamSource::new("alternating", Some(1), |_: &weir::ProcessorContext| {
        AlternatingPartitions {
            next: [0, 0],
            turn: 0,
            per_partition: PER_PARTITION,
        }
    });
    let stream = p
        .read_from(source)
        .with_idle_timeout(std::time::Duration::from_millis(50))
        .with_timestamps(stamp, 0);
    let (got, late) = count_windows_behind_a_slow_stage(&p, stream, JobConfig::default());
    assert_eq!(late, 0, "events were dropped as late");
    let all = (0..2u32).flat_map(|p| (0..PER_PARTITION).map(move |n| stamp(&(p, n))));
    assert_eq!(got, tumbling_counts(all));
}

#[test]
fn one_stage_sliding_counts_of_string_keys_with_escapes_and_unicode_match_the_reference() {
    // String keys (cloned only for the next window's frame), with quotes, backslashes and
    // non-ASCII; out of order by up to 160 ms, inside the 200 ms lag, so nothing is late.
    let events: Vec<(String, i64)> = (0..6_000i64)
        .map(|i| (format!("k\"\\{}é中", i % 97), i * 3 + (i % 5) * 40))
        .collect();
    let (size, slide) = (300, 100);
    let mut want: BTreeMap<(i64, String), u64> = BTreeMap::new();
    for (key, t) in &events {
        let mut start = t.div_euclid(slide) * slide;
        while start > t - size {
            *want.entry((start, key.clone())).or_default() += 1;
            start -= slide;
        }
    }
    for parallelism in [1, 2] {
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        p.read_from(sources::stream::items(events.clone()))
            .with_timestamps(|e: &(String, i64)| e.1, 200)
            .grouping_key(|e: &(String, i64)| e.0.clone())
            .window(WindowDefinition::sliding(size, slide))
            .single_stage()
            .aggregate(counting())
            .write_to(sink);
        let config = JobConfig::default().with_default_parallelism(parallelism);
        let (collected, _) = run_collect_with(&p, &out, config);
        let mut got: BTreeMap<(i64, String), u64> = BTreeMap::new();
        for r in collected {
            let r: KeyedWindowResult<String, u64> = r;
            assert!(
                got.insert((r.start, r.key), r.value).is_none(),
                "a window twice"
            );
        }
        assert_eq!(got, want, "at parallelism {parallelism}");
    }
}

/// Replays `events` (partition, time) in reads of `steps` sizes, each event emitted from its
/// partition, as items `make(time, index)`.
struct PartitionedReplay<T> {
    events: Vec<(u32, i64)>,
    steps: Vec<usize>,
    at: usize,
    reads: usize,
    make: fn(i64, usize) -> T,
}

impl<T: weir::Item> weir::SourceReader for PartitionedReplay<T> {
    type Item = T;

    fn partitions(&self) -> usize {
        3
    }

    fn read(&mut self, out: &mut weir::sources::Emitter<'_, T>) -> Result<bool, weir::BoxError> {
        let step = self.steps[self.reads % self.steps.len()];
        self.reads += 1;
        for _ in 0..step {
            let Some(&(partition, time)) = self.events.get(self.at) else {
                break;
            };
            out.emit_from(partition, (self.make)(time, self.at));
            self.at += 1;
        }
        Ok(self.at == self.events.len())
    }
}

/// The indexes of the events a source of three partitions accepts, in order, and how many
/// were late: an event is late when it is behind the minimum over the partitions of the
/// highest time each has seen less `lag` (a partition that has seen nothing holds it at the
/// start of time).
fn accepted_by_partition(events: &[(u32, i64)], lag: i64) -> (Vec<usize>, u64) {
    let mut highest = [None::<i64>; 3];
    let (mut ok, mut late) = (Vec::new(), 0);
    for (i, &(p, t)) in events.iter().enumerate() {
        let wm = highest
            .iter()
            .map(|h| h.map_or(i64::MIN, |h| h - lag))
            .min()
            .expect("three partitions");
        if t < wm {
            late += 1;
        } else {
            let p = p as usize;
            highest[p] = Some(highest[p].map_or(t, |h| h.max(t)));
            ok.push(i);
        }
    }
    (ok, late)
}

/// Runs [`PartitionedReplay`] of `events` in reads of `steps` sizes, as items `make` builds
/// and `time` stamps, through `with_timestamps(time, lag)`; returns the indexes of the events
/// the sink received, sorted, and the late count.
fn partitioned_run<T: weir::Item>(
    events: &[(u32, i64)],
    steps: &[usize],
    lag: i64,
    make: fn(i64, usize) -> T,
    time: fn(&T) -> i64,
    index: fn(T) -> usize,
) -> (Vec<usize>, u64) {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    let (events, steps) = (events.to_vec(), steps.to_vec());
    let source = StreamSource::new("partitioned", Some(1), move |_: &weir::ProcessorContext| {
        PartitionedReplay {
            events: events.clone(),
            steps: steps.clone(),
            at: 0,
            reads: 0,
            make,
        }
    });
    p.read_from(source)
        .with_idle_timeout(std::time::Duration::from_secs(600))
        .with_timestamps(time, lag)
        .map(index)
        .write_to(sink);
    // The sink's instances interleave: the set is what the source decided.
    let (mut accepted, late) = run_collect(&p, &out);
    accepted.sort_unstable();
    (accepted, late)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// Several partitions, each holding the watermark back, read in runs of any length:
    /// small items (batched) and large ones (pushed one by one) are accepted and counted late
    /// alike, as the reference says.
    #[test]
    fn partitions_hold_the_watermark_alike_for_small_and_large_items(
        events in proptest::collection::vec((0u32..3, 0i64..2_000), 0..300),
        steps in proptest::collection::vec(1usize..40, 1..6),
        lag in 0i64..500,
    ) {
        let (ok, late) = accepted_by_partition(&events, lag);
        let small = partitioned_run(
            &events, &steps, lag,
            |t, i| (t, i as u64),
            |e: &(i64, u64)| e.0,
            |e: (i64, u64)| e.1 as usize,
        );
        prop_assert_eq!(&small, &(ok.clone(), late), "small items");
        let large = partitioned_run(
            &events, &steps, lag,
            |t, i| (t, i as u64, [0u64; 8]),
            |e: &(i64, u64, [u64; 8])| e.0,
            |e: (i64, u64, [u64; 8])| e.1 as usize,
        );
        prop_assert_eq!(&large, &(ok, late), "large items");
    }
}
