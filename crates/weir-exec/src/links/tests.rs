//! Every processor a plan runs, through the processor test harness.

use std::sync::Arc;

use weir_core::test_support::verify_processor;
use weir_core::{Item, Processor};

use crate::aggregate::{AggregateOperation, KeyCounter, counting, summing};
use crate::links::aggregate::{
    AccumulateAll, AccumulateByKey, CombineAll, CombineByKey, CountKeys,
};
use crate::links::join::{BuildTable, HashJoin1, HashJoin2};
use crate::links::link::{Emit, Link, inbox_head};
use crate::links::sort::SortHead;
use crate::links::transform::{FilterLink, FilterMapLink, FlatMapLink, KeyedStatefulLink, MapLink};

fn emit<T: Item>() -> Box<dyn Link<T>> {
    Box::new(Emit::new())
}

fn erased<T: Item>(link: Box<dyn Link<T>>) -> crate::links::link::ErasedLink {
    crate::links::link::erase(link)
}

#[test]
fn fused_chain_behind_an_inbox() {
    verify_processor(|_| {
        let filter: Box<dyn Link<u32>> = Box::new(FilterLink {
            f: Arc::new(|x: &u32| !x.is_multiple_of(3)),
            next: emit::<u32>(),
        });
        let flat: Box<dyn Link<u32>> =
            Box::new(FlatMapLink::new(Arc::new(|x: u32| [x, x + 100]), filter));
        let map: Box<dyn Link<u32>> = Box::new(MapLink {
            f: Arc::new(|x: u32| x * 2),
            next: flat,
            out: Vec::new(),
        });
        inbox_head::<u32>(erased(map))
    })
    .input((0..50u32).collect())
    .expect_output(
        (0..50u32)
            .flat_map(|x| [x * 2, x * 2 + 100])
            .filter(|x| !x.is_multiple_of(3))
            .collect(),
    );
}

#[test]
fn filter_map_behind_an_inbox() {
    verify_processor(|_| {
        let filter_map: Box<dyn Link<u32>> = Box::new(FilterMapLink {
            f: Arc::new(|x: u32| x.is_multiple_of(3).then(|| u64::from(x) * 10)),
            next: emit::<u64>(),
            out: Vec::new(),
        });
        inbox_head::<u32>(erased(filter_map))
    })
    .input((0..500u32).collect())
    .expect_output(
        (0..500u32)
            .filter(|x| x.is_multiple_of(3))
            .map(|x| u64::from(x) * 10)
            .collect(),
    );
}

#[test]
fn keyed_accumulate_then_combine() {
    let op = Arc::new(counting());
    let key: Arc<dyn Fn(&u32) -> u32 + Send + Sync> = Arc::new(|x: &u32| x % 4);
    let acc_op = Arc::clone(&op);
    let partials = verify_processor(move |_| {
        inbox_head::<u32>(erased(Box::new(AccumulateByKey::<u32, u32, _, _>::new(
            Arc::clone(&key),
            Arc::clone(&acc_op),
        ))))
    })
    .input((0..100u32).collect())
    .run::<(u32, u64)>();
    for run in &partials {
        let mut run = run.clone();
        run.sort();
        assert_eq!(run, [(0, 25), (1, 25), (2, 25), (3, 25)]);
    }
    // Combine two instances' partials of key 1 and one of key 2.
    verify_processor(move |_| -> Box<dyn Processor> {
        Box::new(CombineByKey::<u32, u32, _>::new(
            Arc::clone(&op),
            emit::<(u32, u64)>(),
        ))
    })
    .input(vec![(1u32, 10u64), (2, 5), (1, 7)])
    .expect_output_unordered(vec![(1u32, 17u64), (2, 5)]);
}

#[test]
fn keyed_count_of_the_keys_in_each_item() {
    // Each item holds several keys; only the table's pairs leave, at the end.
    let keys = Arc::new(|line: &String, counts: &mut KeyCounter<String>| {
        line.split(' ').for_each(|word| counts.add(word));
    });
    let lines: Vec<String> = (0..300)
        .map(|i| format!("w{} w{} w{}", i % 3, i % 5, i % 3))
        .collect();
    let partials = verify_processor(move |_| {
        inbox_head::<String>(erased(Box::new(CountKeys::<String, String, _>::new(
            Arc::clone(&keys),
        ))))
    })
    .input(lines)
    .run::<(String, u64)>();
    let expected = [
        ("w0", 200 + 60),
        ("w1", 200 + 60),
        ("w2", 200 + 60),
        ("w3", 60),
        ("w4", 60),
    ]
    .map(|(w, c)| (w.to_string(), c as u64));
    for run in &partials {
        let mut run = run.clone();
        run.sort();
        assert_eq!(run, expected);
    }
}

#[test]
fn global_accumulate_then_combine() {
    let op = Arc::new(summing(|x: &u64| *x));
    let acc_op = Arc::clone(&op);
    verify_processor(move |_| {
        inbox_head::<u64>(erased(Box::new(AccumulateAll::<u64, _>::new(Arc::clone(
            &acc_op,
        )))))
    })
    .input((1..=10u64).collect())
    .expect_output(vec![55u64]);
    verify_processor(move |_| -> Box<dyn Processor> {
        Box::new(CombineAll::<u64, _>::new(Arc::clone(&op), emit::<u64>()))
    })
    .input(vec![55u64, 45])
    .expect_output(vec![100u64]);
    // No input at all still gives the empty result.
    let empty = Arc::new(counting());
    verify_processor(move |_| -> Box<dyn Processor> {
        Box::new(CombineAll::<u8, _>::new(Arc::clone(&empty), emit::<u64>()))
    })
    .input(Vec::<u64>::new())
    .expect_output(vec![0u64]);
    assert_eq!(AggregateOperation::<u8>::create(&counting()), 0);
}

#[test]
fn sort_head() {
    verify_processor(|_| -> Box<dyn Processor> {
        Box::new(SortHead::new(
            Arc::new(|a: &i32, b: &i32| b.cmp(a)),
            emit::<i32>(),
        ))
    })
    .input(vec![3, 1, 4, 1, 5, 9, 2, 6])
    .expect_output(vec![9, 6, 5, 4, 3, 2, 1, 1]);
}

#[test]
fn hash_join_reads_the_build_side_first() {
    verify_processor(|_| -> Box<dyn Processor> {
        Box::new(HashJoin1::new(
            Arc::new(|t: &u32| *t % 10),
            BuildTable::new(Arc::new(|b: &(u32, char)| b.0)),
            Arc::new(|t: &u32, b: Option<&(u32, char)>| Some((*t, b.map(|b| b.1)))),
            emit::<(u32, Option<char>)>(),
        ))
    })
    .input(vec![11u32, 12, 13])
    .input(vec![(1u32, 'a'), (2, 'b'), (2, 'B')])
    .feed_order(vec![1, 0])
    .expect_output(vec![
        (11u32, Some('a')),
        (12, Some('b')),
        (12, Some('B')),
        (13, None),
    ]);
}

#[test]
fn hash_join_with_two_build_sides() {
    verify_processor(|_| -> Box<dyn Processor> {
        Box::new(HashJoin2::new(
            (Arc::new(|t: &u32| *t), Arc::new(|t: &u32| *t)),
            (
                BuildTable::new(Arc::new(|b: &(u32, char)| b.0)),
                BuildTable::new(Arc::new(|b: &(u32, u8)| b.0)),
            ),
            Arc::new(|t: &u32, a: Option<&(u32, char)>, b: Option<&(u32, u8)>| {
                Some((*t, a.map(|a| a.1), b.map(|b| b.1)))
            }),
            emit::<(u32, Option<char>, Option<u8>)>(),
        ))
    })
    .input(vec![1u32, 2])
    .input(vec![(1u32, 'x')])
    .input(vec![(2u32, 7u8)])
    .feed_order(vec![1, 2, 0])
    .expect_output(vec![(1u32, Some('x'), None), (2, None, Some(7u8))]);
}

#[test]
fn keyed_state_keeps_the_first_item_of_each_key() {
    verify_processor(|_| {
        let distinct: Box<dyn Link<(u8, u32)>> = Box::new(KeyedStatefulLink {
            states: Default::default(),
            key: Arc::new(|x: &(u8, u32)| x.0),
            create: Arc::new(|| false),
            f: Arc::new(|seen: &mut bool, _k: &u8, x: (u8, u32)| {
                (!std::mem::replace(seen, true)).then_some(x)
            }),
            next: emit::<(u8, u32)>(),
        });
        inbox_head::<(u8, u32)>(erased(distinct))
    })
    .input(vec![(1u8, 1u32), (2, 2), (1, 3), (3, 4), (2, 5)])
    .expect_output(vec![(1u8, 1u32), (2, 2), (3, 4)]);
}

mod streaming {
    use std::sync::Arc;

    use weir_core::conveyor::Message;
    use weir_core::test_support::verify_processor;
    use weir_core::{Outbox, Processor, ProcessorContext, Watermark};

    use super::{emit, erased};
    use crate::aggregate::counting;
    use crate::event_time::{KeyedWindowResult, Timestamped, Window, WindowDefinition};
    use crate::links::link::{Link, inbox_head};
    use crate::links::state::StateCodec;
    use crate::links::stream_join::StreamJoin;
    use crate::links::transform::{ExpiringKeyedLink, FilterLink};
    use crate::links::window::{
        CLOSE_KEYS_PER_CALL, Frame, FrameAccumulate, Frames, RunningAggregate, SLIDE_KEYS_PER_CALL,
        SessionLink, SlidingAggregate, SlidingCombine,
    };

    fn ts<T>(timestamp: i64, item: T) -> Message<Timestamped<T>> {
        Message::Item(Timestamped { timestamp, item })
    }

    #[test]
    fn frame_accumulate_emits_frames_as_the_watermark_passes() {
        let def = WindowDefinition::tumbling(10);
        let frames = verify_processor(move |_| {
            let link: Box<dyn Link<Timestamped<u8>>> =
                Box::new(FrameAccumulate::<u8, u8, _, _>::new(
                    &def,
                    Arc::new(|k: &u8| *k),
                    Arc::new(counting()),
                    (StateCodec::postcard(), StateCodec::postcard()),
                ));
            inbox_head::<Timestamped<u8>>(erased(link))
        })
        .snapshot_restore()
        .input_events(vec![
            ts(1, 7u8),
            ts(5, 7),
            ts(12, 7),
            Message::Watermark(Watermark(10)),
            ts(3, 7),
            ts(15, 8),
        ])
        .run_messages::<Frame<u8, u64>>();
        for run in frames {
            let summary: Vec<String> = run
                .iter()
                .map(|m| match m {
                    Message::Item(f) => format!("{}@{}={}", f.key, f.end, f.acc),
                    Message::Watermark(w) => format!("wm{}", w.0),
                    Message::Idle => "idle".into(),
                    Message::Barrier(n) => format!("barrier{n}"),
                    Message::Done => "done".into(),
                })
                .collect();
            // Frame 10 goes out before the watermark; the late item at 3 is dropped; the
            // rest closes at the end of the input.
            assert_eq!(summary[..2], ["7@10=2", "wm10"]);
            let mut rest = summary[2..].to_vec();
            rest.sort();
            assert_eq!(rest, ["7@20=1", "8@20=1", "wm9223372036854775807"]);
        }
    }

    #[test]
    fn sliding_combine_emits_windows_on_the_watermark() {
        let def = WindowDefinition::sliding(20, 10);
        verify_processor(move |_| -> Box<dyn Processor> {
            Box::new(SlidingCombine::<u8, u8, _>::new(
                &def,
                Arc::new(counting()),
                emit::<Timestamped<KeyedWindowResult<u8, u64>>>(),
                (StateCodec::postcard(), StateCodec::postcard()),
            ))
        })
        .snapshot_restore()
        .input_events(vec![
            Message::Item(Frame {
                key: 1u8,
                end: 10,
                acc: 2u64,
            }),
            Message::Item(Frame {
                key: 1,
                end: 20,
                acc: 3,
            }),
            Message::Watermark(Watermark(20)),
        ])
        .expect_messages(vec![
            Message::Item(Timestamped {
                timestamp: 9,
                item: KeyedWindowResult {
                    start: -10,
                    end: 10,
                    key: 1u8,
                    value: 2u64,
                },
            }),
            Message::Item(Timestamped {
                timestamp: 19,
                item: KeyedWindowResult {
                    start: 0,
                    end: 20,
                    key: 1,
                    value: 5,
                },
            }),
            Message::Watermark(Watermark(20)),
            Message::Item(Timestamped {
                timestamp: 29,
                item: KeyedWindowResult {
                    start: 10,
                    end: 30,
                    key: 1,
                    value: 3,
                },
            }),
            Message::Watermark(Watermark::MAX),
        ]);
        // Frames of a sliding window: one slide long, each named by its end.
        let frames = Frames::of(&WindowDefinition::sliding(10, 5));
        assert_eq!(frames.frame_end(0), 5);
        assert_eq!(frames.frame_end(4), 5);
        assert_eq!(frames.frame_end(5), 10);
        assert_eq!(frames.frame_end(-1), 0);
        assert_eq!(frames.window_start(15), 5);
    }

    #[test]
    fn sliding_aggregate_makes_windows_of_items_in_one_stage() {
        let result = |end, key, value| Message::Item(window_count(end, key, value));
        verify_processor(one_stage_counts(false))
            .snapshot_restore()
            .input_events(vec![
                ts(1, 1u8),
                ts(12, 1),
                ts(15, 1),
                // An item of a frame still open when the watermark comes: it waits for its
                // window.
                ts(25, 1),
                Message::Watermark(Watermark(20)),
                // Behind the watermark: late, dropped.
                ts(19, 1),
                ts(26, 1),
            ])
            .expect_messages(vec![
                result(10, 1, 1),
                result(20, 1, 3),
                Message::Watermark(Watermark(20)),
                result(30, 1, 4),
                result(40, 1, 2),
                Message::Watermark(Watermark::MAX),
            ]);
    }

    /// A one-stage link of counts over sliding windows of 20 sliding by 10:
    /// [`RunningAggregate`] when `running`, else [`SlidingAggregate`].
    fn one_stage_counts(running: bool) -> impl Fn(&ProcessorContext) -> Box<dyn Processor> + Clone {
        move |_| {
            let def = WindowDefinition::sliding(20, 10);
            let (key, op) = (Arc::new(|k: &u8| *k), Arc::new(counting()));
            let next = emit::<Timestamped<KeyedWindowResult<u8, u64>>>();
            let codec = (StateCodec::postcard(), StateCodec::postcard());
            let link: Box<dyn Link<Timestamped<u8>>> = if running {
                Box::new(RunningAggregate::<u8, u8, _, _>::new(
                    &def, key, op, next, codec,
                ))
            } else {
                Box::new(SlidingAggregate::<u8, u8, _, _>::new(
                    &def, key, op, next, codec,
                ))
            };
            inbox_head::<Timestamped<u8>>(erased(link))
        }
    }

    /// Key `key`'s count `value` in the window of 20 ending at `end`.
    fn window_count(end: i64, key: u8, value: u64) -> Timestamped<KeyedWindowResult<u8, u64>> {
        Timestamped {
            timestamp: end - 1,
            item: KeyedWindowResult {
                start: end - 20,
                end,
                key,
                value,
            },
        }
    }

    #[test]
    fn running_aggregate_hands_each_window_on_with_its_end_as_the_watermark() {
        let result = |end, value| Message::Item(window_count(end, 1, value));
        verify_processor(one_stage_counts(true))
            .snapshot_restore()
            .input_events(vec![
                ts(1, 1u8),
                ts(12, 1),
                // A frame still open when the watermark comes: it waits for its window.
                ts(25, 1),
                Message::Watermark(Watermark(20)),
                // Behind the watermark: late, dropped.
                ts(19, 1),
                // The newest frame of the next window: into its running value at once.
                ts(26, 1),
                Message::Watermark(Watermark(30)),
                // After a gap of windows with no data.
                ts(95, 1),
                Message::Watermark(Watermark(100)),
            ])
            .expect_messages(vec![
                result(10, 1),
                // Each window's end goes down as soon as its results are out, before the
                // running values slide; the watermark that closed it is not sent twice.
                Message::Watermark(Watermark(10)),
                result(20, 2),
                Message::Watermark(Watermark(20)),
                result(30, 3),
                Message::Watermark(Watermark(30)),
                result(40, 2),
                Message::Watermark(Watermark(40)),
                result(100, 1),
                Message::Watermark(Watermark(100)),
                result(110, 1),
                Message::Watermark(Watermark(110)),
                Message::Watermark(Watermark::MAX),
            ]);
    }

    /// A close hands the window's results and its end on, then returns, and slides the
    /// running values in the calls after: no result waits for the slide.
    #[test]
    fn running_aggregate_returns_with_the_window_out_before_it_slides() {
        let mut link = RunningAggregate::<u8, u8, _, _>::new(
            &WindowDefinition::sliding(20, 10),
            Arc::new(|k: &u8| *k),
            Arc::new(counting()),
            emit::<Timestamped<KeyedWindowResult<u8, u64>>>(),
            (StateCodec::postcard(), StateCodec::postcard()),
        );
        let (mut outbox, mut drains) =
            Outbox::for_test::<Timestamped<KeyedWindowResult<u8, u64>>>(1, 64);
        for (timestamp, key) in [(1, 1u8), (12, 1), (15, 2)] {
            assert!(link.push(Timestamped {
                timestamp,
                item: key
            }));
        }
        // The window ending at 10 closes: its result and its end are out, the slide waits.
        assert!(!link.watermark(Watermark(20), &mut outbox).unwrap());
        assert_eq!(
            drains[0].drain_messages(),
            vec![
                Message::Item(window_count(10, 1, 1)),
                Message::Watermark(Watermark(10)),
            ]
        );
        // The next call slides, then closes the window ending at 20 the same way.
        assert!(!link.watermark(Watermark(20), &mut outbox).unwrap());
        let mut closed = drains[0].drain_messages();
        let end = closed.pop();
        closed.sort_by_key(|m| match m {
            Message::Item(r) => r.item.key,
            _ => u8::MAX,
        });
        assert_eq!(
            closed,
            vec![
                Message::Item(window_count(20, 1, 2)),
                Message::Item(window_count(20, 2, 1)),
            ]
        );
        assert_eq!(end, Some(Message::Watermark(Watermark(20))));
        // The last slide, and the watermark is through: nothing more to send.
        assert!(link.watermark(Watermark(20), &mut outbox).unwrap());
        assert_eq!(drains[0].drain_messages(), vec![]);
    }

    /// A close reads a large window out in one call (no other tasklet's turn stretches it),
    /// then slides in slices that each hand the worker back.
    #[test]
    fn running_aggregate_reads_a_large_window_out_in_one_call_and_slides_in_slices() {
        use std::sync::atomic::{AtomicU64, Ordering};
        const KEYS: u32 = 20_000;
        // The chain behind the window takes every result (as a fused aggregation does), counts
        // them and their values, and sends on only the first keys' to the outbox.
        let (seen, values) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (seen_in, values_in) = (Arc::clone(&seen), Arc::clone(&values));
        let absorb: Box<dyn Link<Timestamped<KeyedWindowResult<u32, u64>>>> =
            Box::new(FilterLink {
                f: Arc::new(move |r: &Timestamped<KeyedWindowResult<u32, u64>>| {
                    seen_in.fetch_add(1, Ordering::Relaxed);
                    values_in.fetch_add(r.item.value, Ordering::Relaxed);
                    r.item.key < 4
                }),
                next: emit::<Timestamped<KeyedWindowResult<u32, u64>>>(),
            });
        let mut link = RunningAggregate::<u32, u32, _, _>::new(
            &WindowDefinition::sliding(20, 10),
            Arc::new(|k: &u32| *k),
            Arc::new(counting()),
            absorb,
            (StateCodec::postcard(), StateCodec::postcard()),
        );
        let (mut outbox, mut drains) =
            Outbox::for_test::<Timestamped<KeyedWindowResult<u32, u64>>>(1, 1024);
        for timestamp in [1, 12] {
            for key in 0..KEYS {
                assert!(link.push(Timestamped {
                    timestamp,
                    item: key
                }));
            }
        }
        let taken = |seen: &AtomicU64, values: &AtomicU64| {
            (
                seen.swap(0, Ordering::Relaxed),
                values.swap(0, Ordering::Relaxed),
            )
        };
        // More keys than a sliced close takes per call: all out, with the end, in one call.
        assert!(KEYS as usize > CLOSE_KEYS_PER_CALL);
        assert!(!link.watermark(Watermark(20), &mut outbox).unwrap());
        assert_eq!(taken(&seen, &values), (u64::from(KEYS), u64::from(KEYS)));
        let out = drains[0].drain_messages();
        assert_eq!(out.len(), 5, "{out:?}");
        assert_eq!(out.last(), Some(&Message::Watermark(Watermark(10))));
        // The slide passes both frames' keys, a slice per call, sending nothing; the window
        // ending at 20 goes out whole in the call that finishes it.
        let mut slide_calls = 0;
        loop {
            assert!(!link.watermark(Watermark(20), &mut outbox).unwrap());
            let (n, sum) = taken(&seen, &values);
            if n > 0 {
                assert_eq!((n, sum), (u64::from(KEYS), 2 * u64::from(KEYS)));
                let out = drains[0].drain_messages();
                assert_eq!(out.last(), Some(&Message::Watermark(Watermark(20))));
                break;
            }
            assert_eq!(drains[0].drain_messages(), vec![]);
            slide_calls += 1;
            assert!(slide_calls < 1_000, "the slide never ends");
        }
        assert!(
            slide_calls >= KEYS as usize / SLIDE_KEYS_PER_CALL,
            "{slide_calls} calls slid {} keys",
            2 * KEYS
        );
    }

    #[test]
    fn running_aggregate_slides_each_key_on_its_own() {
        verify_processor(one_stage_counts(true))
            .snapshot_restore()
            .input_events(vec![
                ts(1, 1u8),
                ts(3, 2),
                ts(12, 1),
                ts(15, 3),
                ts(25, 2),
                Message::Watermark(Watermark(20)),
                ts(21, 3),
                ts(27, 3),
                ts(45, 1),
            ])
            .expect_output_unordered(vec![
                window_count(10, 1, 1),
                window_count(10, 2, 1),
                window_count(20, 1, 2),
                window_count(20, 2, 1),
                window_count(20, 3, 1),
                // Key 1 leaves for two windows; key 2 skips one frame.
                window_count(30, 1, 1),
                window_count(30, 2, 1),
                window_count(30, 3, 3),
                window_count(40, 2, 1),
                window_count(40, 3, 2),
                window_count(50, 1, 1),
                window_count(60, 1, 1),
            ]);
    }

    #[test]
    fn session_link_closes_sessions_on_the_watermark() {
        verify_processor(|_| {
            let link: Box<dyn Link<Timestamped<u8>>> = Box::new(SessionLink::<u8, u8, _, _>::new(
                10,
                Arc::new(|k: &u8| *k),
                Arc::new(counting()),
                emit::<Timestamped<KeyedWindowResult<u8, u64>>>(),
                (StateCodec::postcard(), StateCodec::postcard()),
            ));
            inbox_head::<Timestamped<u8>>(erased(link))
        })
        .snapshot_restore()
        .input_events(vec![
            ts(0, 1u8),
            ts(5, 1),
            Message::Watermark(Watermark(20)),
            ts(30, 1),
        ])
        .expect_messages(vec![
            Message::Item(Timestamped {
                timestamp: 14,
                item: KeyedWindowResult {
                    start: 0,
                    end: 15,
                    key: 1u8,
                    value: 2u64,
                },
            }),
            Message::Watermark(Watermark(20)),
            Message::Item(Timestamped {
                timestamp: 39,
                item: KeyedWindowResult {
                    start: 30,
                    end: 40,
                    key: 1,
                    value: 1,
                },
            }),
            Message::Watermark(Watermark::MAX),
        ]);
    }

    #[test]
    fn stream_join_matches_across_inputs() {
        verify_processor(|_| -> Box<dyn Processor> {
            Box::new(StreamJoin::new(
                (
                    Arc::new(|l: &(u8, char)| l.0),
                    Arc::new(|r: &(u8, u32)| r.0),
                ),
                None,
                None,
                Arc::new(|_: &Window, l: &(u8, char), r: &(u8, u32)| Some((l.1, r.1))),
                emit::<Timestamped<(char, u32)>>(),
                (
                    StateCodec::postcard(),
                    StateCodec::postcard(),
                    StateCodec::postcard(),
                ),
            ))
        })
        .snapshot_restore()
        .input_events(vec![ts(1, (1u8, 'a')), ts(2, (2, 'b'))])
        .input_events(vec![ts(3, (1u8, 10u32)), ts(4, (1, 11)), ts(5, (3, 12))])
        .expect_output_unordered(vec![
            Timestamped {
                timestamp: 3,
                item: ('a', 10u32),
            },
            Timestamped {
                timestamp: 4,
                item: ('a', 11),
            },
        ]);
    }

    #[test]
    fn timer_link_fires_when_the_watermark_passes_and_at_the_end() {
        use crate::links::timers::{TimerKeyedLink, Timers};
        verify_processor(|_| {
            // Per key, the sum of its items, 10 ms after its first; a key's state is dropped
            // when its timer fires, so its next item starts a new sum.
            let link: Box<dyn Link<Timestamped<(u8, u32)>>> = Box::new(TimerKeyedLink::new(
                Arc::new(|x: &(u8, u32)| x.0),
                Arc::new(|| 0u32),
                Arc::new(
                    |sum: &mut u32, _k: &u8, t: i64, x: (u8, u32), timers: &mut Timers| {
                        if *sum == 0 {
                            timers.at(t + 10);
                            timers.at(t + 10); // set twice, fires once
                        }
                        *sum += x.1;
                    },
                ),
                Arc::new(|sum: &mut u32, k: &u8, _t: i64, out: &mut Vec<(u8, u32)>| {
                    out.push((*k, *sum));
                    false
                }),
                emit::<Timestamped<(u8, u32)>>(),
                (StateCodec::postcard(), StateCodec::postcard()),
            ));
            inbox_head::<Timestamped<(u8, u32)>>(erased(link))
        })
        .snapshot_restore()
        .input_events(vec![
            ts(0, (1u8, 5u32)),
            ts(3, (1, 2)),
            ts(4, (2, 1)),
            Message::Watermark(Watermark(10)), // the timer at 10 has not passed
            Message::Watermark(Watermark(11)),
            ts(12, (1, 4)),
        ])
        .expect_messages(vec![
            Message::Watermark(Watermark(10)),
            Message::Item(Timestamped {
                timestamp: 10,
                item: (1u8, 7u32),
            }),
            Message::Watermark(Watermark(11)),
            Message::Item(Timestamped {
                timestamp: 14,
                item: (2, 1),
            }),
            Message::Item(Timestamped {
                timestamp: 22,
                item: (1, 4),
            }),
            Message::Watermark(Watermark::MAX),
        ]);
    }

    #[test]
    fn expiring_state_resets_after_the_ttl() {
        verify_processor(|_| {
            let link: Box<dyn Link<Timestamped<u8>>> = Box::new(ExpiringKeyedLink {
                states: Default::default(),
                ttl: 10,
                evicted_at: i64::MIN,
                key: Arc::new(|k: &u8| *k),
                create: Arc::new(|| 0u32),
                f: Arc::new(|n: &mut u32, _k: &u8, _x: u8| {
                    *n += 1;
                    Some(*n)
                }),
                next: emit::<Timestamped<u32>>(),
                codec: (StateCodec::postcard(), StateCodec::postcard()),
            });
            inbox_head::<Timestamped<u8>>(erased(link))
        })
        .snapshot_restore()
        .input_events(vec![
            ts(0, 1u8),
            ts(5, 1),
            Message::Watermark(Watermark(100)),
            ts(100, 1),
        ])
        .expect_output(vec![
            Timestamped {
                timestamp: 0,
                item: 1u32,
            },
            Timestamped {
                timestamp: 5,
                item: 2,
            },
            Timestamped {
                timestamp: 100,
                item: 1,
            },
        ]);
    }
}

#[test]
fn probe_buffer_hands_on_items_and_markers_in_order() {
    use weir_core::Watermark;
    use weir_core::conveyor::Message;
    let input = vec![
        Message::Item(1u32),
        Message::Item(2),
        Message::Watermark(Watermark(5)),
        Message::Item(3),
        Message::Watermark(Watermark(9)),
        Message::Item(4),
        Message::Item(5),
    ];
    verify_processor(|_| crate::links::probe_buffer::probe_buffer::<u32>(erased(emit::<u32>())))
        .input_events(input.clone())
        .expect_messages(input);
}
