//! The Pipeline API end to end: stages planned, run on the shared executor, results checked.

use std::collections::HashMap;

use weir::aggregate::{all_of, counting, max_by, summing, to_list};
use weir::prelude::*;
use weir::{Error, core};

fn run_to_vec<T: weir::Item>(build: impl FnOnce(&Pipeline) -> BatchStage<T>) -> Vec<T> {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    build(&p).write_to(sink);
    p.run().expect("pipeline runs");
    out.take()
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

#[test]
fn stateless_stages() {
    let out = run_to_vec(|p| {
        p.read_from(sources::collection::items(0..1000u64))
            .map(|x| x * 3)
            .filter(|x| x % 2 == 0)
            .flat_map(|x| vec![x, x + 1])
            .peek_with(|_| {})
    });
    let expected: Vec<u64> = (0..1000u64)
        .map(|x| x * 3)
        .filter(|x| x % 2 == 0)
        .flat_map(|x| [x, x + 1])
        .collect();
    assert_eq!(sorted(out), sorted(expected));
}

#[test]
fn stateless_stages_after_rebalance_run_in_parallel_and_lose_nothing() {
    let out = run_to_vec(|p| {
        p.read_from(sources::collection::items(0..100_000u64))
            .rebalance()
            .map(|x| x + 1)
    });
    assert_eq!(out.len(), 100_000);
    assert_eq!(out.iter().sum::<u64>(), (1..=100_000u64).sum::<u64>());
}

#[test]
fn global_aggregate_of_empty_input_is_the_empty_result() {
    let out = run_to_vec(|p| {
        p.read_from(sources::collection::items(Vec::<u64>::new()))
            .aggregate(counting())
    });
    assert_eq!(out, [0]);
}

#[test]
fn keyed_aggregate_with_all_of() {
    let out = run_to_vec(|p| {
        p.read_from(sources::collection::items(0..10_000i64))
            .rebalance()
            .grouping_key(|x: &i64| x % 7)
            .aggregate(all_of((
                counting(),
                summing(|x: &i64| *x),
                max_by(|x: &i64| *x),
            )))
    });
    let mut expected: HashMap<i64, (u64, i64, Option<i64>)> = HashMap::new();
    for x in 0..10_000i64 {
        let e = expected.entry(x % 7).or_insert((0, 0, None));
        e.0 += 1;
        e.1 += x;
        e.2 = e.2.max(Some(x));
    }
    assert_eq!(out.len(), 7);
    for (k, v) in out {
        assert_eq!(expected[&k], v, "key {k}");
    }
}

#[test]
fn word_count_through_the_api() {
    let lines = vec!["The cat", "the dog, the END", "Ünïcode ünïcode"];
    let out = run_to_vec(|p| {
        p.read_from(sources::collection::items(
            lines.into_iter().map(String::from),
        ))
        .flat_map(|line: String| {
            line.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        })
        .grouping_key(|w: &String| w.clone())
        .aggregate(counting())
    });
    let got: HashMap<String, u64> = out.into_iter().map(|(w, c)| (w.to_string(), c)).collect();
    assert_eq!(got["the"], 3);
    assert_eq!(got["ünïcode"], 2);
    assert_eq!(got.len(), 5);
}

#[derive(Debug, Clone, PartialEq)]
struct Person {
    name: &'static str,
    age: u32,
}

#[test]
fn hash_join_is_a_left_outer_join() {
    let out = run_to_vec(|p| {
        let ages = p.read_from(sources::collection::items(vec![
            (30u32, "thirties"),
            (40, "forties"),
            (40, "middle"),
        ]));
        p.read_from(sources::collection::items(vec![
            Person {
                name: "ann",
                age: 30,
            },
            Person {
                name: "bob",
                age: 40,
            },
            Person {
                name: "cid",
                age: 50,
            },
        ]))
        .hash_join(
            &ages,
            join_on(|p: &Person| p.age, |a: &(u32, &str)| a.0),
            |p, a| (p.name, a.map(|a| a.1)),
        )
    });
    assert_eq!(
        sorted(out),
        [
            ("ann", Some("thirties")),
            ("bob", Some("forties")),
            ("bob", Some("middle")),
            ("cid", None)
        ]
    );
}

#[test]
fn inner_hash_join_drops_misses_and_hash_join2_combines_two_sides() {
    let inner = run_to_vec(|p| {
        let build = p.read_from(sources::collection::items(vec![(1u32, 'a')]));
        p.read_from(sources::collection::items(vec![1u32, 2]))
            .inner_hash_join(
                &build,
                join_on(|x: &u32| *x, |b: &(u32, char)| b.0),
                |x, b| (*x, b.1),
            )
    });
    assert_eq!(inner, [(1, 'a')]);

    let two = run_to_vec(|p| {
        let letters = p.read_from(sources::collection::items(vec![(1u32, 'a'), (2, 'b')]));
        let words = p.read_from(sources::collection::items(vec![(1u32, "one")]));
        p.read_from(sources::collection::items(vec![1u32, 2]))
            .hash_join2(
                &letters,
                join_on(|x: &u32| *x, |b: &(u32, char)| b.0),
                &words,
                join_on(|x: &u32| *x, |b: &(u32, &str)| b.0),
                |x, l, w| (*x, l.map(|l| l.1), w.map(|w| w.1)),
            )
    });
    assert_eq!(
        sorted(two),
        [(1, Some('a'), Some("one")), (2, Some('b'), None)]
    );
}

#[test]
fn distinct_sort_and_merge() {
    let out = run_to_vec(|p| {
        let a = p.read_from(sources::collection::items(vec![5u32, 3, 5, 1]));
        let b = p.read_from(sources::collection::items(vec![3u32, 9]));
        a.merge(&b).distinct().sort()
    });
    assert_eq!(
        out,
        [1, 3, 5, 9],
        "sorted output keeps its order through the sink"
    );

    let by_key = run_to_vec(|p| {
        p.read_from(sources::collection::items(vec![
            (2, 'b'),
            (1, 'a'),
            (3, 'c'),
        ]))
        .sort_by_key(|x: &(i32, char)| -x.0)
    });
    assert_eq!(by_key, [(3, 'c'), (2, 'b'), (1, 'a')]);
}

#[test]
fn fan_out_feeds_every_branch() {
    let p = Pipeline::new();
    let numbers = p.read_from(sources::collection::items(1..=100u32));
    let (evens_sink, evens) = sinks::collection::list();
    let (total_sink, total) = sinks::collection::list();
    numbers.filter(|x| x % 2 == 0).write_to(evens_sink);
    numbers
        .aggregate(summing(|x: &u32| u64::from(*x)))
        .write_to(total_sink);
    p.run().unwrap();
    assert_eq!(evens.take().len(), 50);
    assert_eq!(total.take(), [5050]);
}

#[test]
fn stateful_maps_per_instance_and_per_key() {
    // A running count per key: every key's items meet in one instance.
    let out = run_to_vec(|p| {
        p.read_from(sources::collection::items((0..300u32).map(|i| (i % 3, i))))
            .grouping_key(|x: &(u32, u32)| x.0)
            .map_stateful(
                || 0u32,
                |count, key, _item| {
                    *count += 1;
                    (*count == 100).then_some(*key)
                },
            )
    });
    assert_eq!(sorted(out), [0, 1, 2]);

    let firsts = run_to_vec(|p| {
        p.read_from(sources::collection::items(0..10u32))
            .map_stateful(
                || None,
                |seen: &mut Option<u32>, x| {
                    if seen.is_none() {
                        *seen = Some(x);
                        Some(x)
                    } else {
                        None
                    }
                },
            )
            .local_parallelism(1)
    });
    assert_eq!(firsts, [0], "a single instance holds a single state");
}

#[test]
fn to_list_collects_every_item() {
    let out = run_to_vec(|p| {
        p.read_from(sources::collection::items(0..50u8))
            .rebalance()
            .aggregate(to_list())
    });
    assert_eq!(sorted(out[0].clone()), (0..50u8).collect::<Vec<_>>());
}

#[test]
fn misuse_is_reported_before_running() {
    let p = Pipeline::new();
    p.read_from(sources::collection::items(0..3u8))
        .map(|x| x + 1);
    assert!(matches!(p.run(), Err(Error::NoSink)));

    let p = Pipeline::new();
    let s = p.read_from(sources::collection::items(0..3u8));
    s.map(|x| x + 1).named("orphan");
    s.write_to(sinks::collection::list().0);
    match p.run() {
        Err(Error::DanglingStage { stage }) => assert_eq!(stage, "orphan"),
        other => panic!("{other:?}"),
    }

    let p = Pipeline::new();
    let other = Pipeline::new();
    let foreign = other.read_from(sources::collection::items(0..3u8));
    p.read_from(sources::collection::items(0..3u8))
        .merge(&foreign)
        .write_to(sinks::collection::list().0);
    assert!(matches!(p.run(), Err(Error::ForeignStage { .. })));

    let p = Pipeline::new();
    let s = p.read_from(sources::collection::items(0..3u8));
    s.merge(&s).write_to(sinks::collection::list().0);
    assert!(matches!(p.run(), Err(Error::StageUsedTwice { .. })));

    assert!(matches!(Pipeline::new().run(), Err(Error::Empty)));
}

#[test]
fn a_panicking_stage_fails_the_job_naming_its_vertex() {
    let p = Pipeline::new();
    p.read_from(sources::collection::items(0..100u32))
        .rebalance()
        .map(|x| if x == 42 { panic!("bad item {x}") } else { x })
        .named("fragile")
        .write_to(sinks::collection::list().0);
    match p.run() {
        Err(Error::Runtime(core::Error::ProcessorPanicked {
            vertex, message, ..
        })) => {
            assert!(vertex.contains("fragile"), "{vertex}");
            assert!(message.contains("bad item 42"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hash_join_fed_by_its_own_build_sides_upstream_runs_to_completion() {
    // The build side aggregates the very stream the probe side reads: without a buffer on
    // the probe edge, the shared source would stop on the join's full probe queue while the
    // join waits for the build side to complete.
    const N: u64 = 1_000_000;
    let p = Pipeline::new();
    let numbers = p.read_from(sources::generator::sequence(N));
    let counts = numbers
        .grouping_key(|x: &u64| x % 1_000)
        .aggregate(counting());
    let (sink, out) = sinks::collection::list();
    numbers
        .hash_join(
            &counts,
            join_on(|x: &u64| x % 1_000, |c: &(u64, u64)| c.0),
            |x, c| (*x, c.map(|c| c.1)),
        )
        .write_to(sink);
    assert!(p.explain().unwrap().contains("probe-buffer"));
    let job = p
        .submit(&weir::Executor::shared(), weir::JobConfig::default())
        .unwrap();
    assert!(
        job.wait_timeout(std::time::Duration::from_secs(300)),
        "the diamond join did not finish: {:?}",
        job.stall()
    );
    let buffered: u64 = job
        .metrics()
        .iter()
        .map(|m| m.counter("probe_buffer_peak"))
        .sum();
    job.join().unwrap();
    let mut rows = out.take();
    rows.sort_unstable();
    assert_eq!(rows.len() as u64, N);
    for (i, row) in rows.into_iter().enumerate() {
        assert_eq!(row, (i as u64, Some(N / 1_000)));
    }
    assert!(buffered > 0, "the probe side waited in the buffer");
}

/// Emits three items and fails, in the same `read`.
struct FailsAfterThree {
    cooperative: bool,
}

impl weir::SourceReader for FailsAfterThree {
    type Item = u32;
    fn read(&mut self, out: &mut weir::sources::Emitter<'_, u32>) -> Result<bool, weir::BoxError> {
        out.emit(1);
        out.emit(2);
        out.emit(3);
        Err("the disk went away".into())
    }
    fn is_cooperative(&self) -> bool {
        self.cooperative
    }
}

/// Records what it is given.
struct Recording(std::sync::Arc<std::sync::Mutex<Vec<u32>>>);

impl weir::SinkWriter for Recording {
    type Item = u32;
    fn write(&mut self, item: u32) -> Result<(), weir::BoxError> {
        self.0.lock().unwrap().push(item);
        Ok(())
    }
}

#[test]
fn items_read_in_the_same_call_as_a_source_error_reach_the_sink_first() {
    for cooperative in [true, false] {
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let g = std::sync::Arc::clone(&got);
        let p = Pipeline::new();
        p.read_from(BatchSource::new(
            "failing",
            Some(1),
            move |_: &weir::ProcessorContext| FailsAfterThree { cooperative },
        ))
        .write_to(Sink::new(
            "recording",
            Some(1),
            move |_: &weir::ProcessorContext| Recording(std::sync::Arc::clone(&g)),
        ));
        let err = p.run().expect_err("the source failed");
        assert!(err.to_string().contains("the disk went away"), "{err}");
        assert_eq!(
            *got.lock().unwrap(),
            [1, 2, 3],
            "cooperative: {cooperative}"
        );
    }
}

/// The file sources' errors convert into `weir::Error`, so one `?` type serves a whole
/// program, as in the README.
#[test]
fn a_source_error_goes_through_question_mark_into_weir_error() {
    fn count_lines(path: &std::path::Path) -> weir::Result<usize> {
        let p = Pipeline::new();
        let (sink, lines) = sinks::collection::list();
        p.read_from(sources::files::text(path)?).write_to(sink);
        p.run()?;
        Ok(lines.len())
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    std::fs::write(&file, "one\ntwo\n").unwrap();
    assert_eq!(count_lines(&file).unwrap(), 2);
    let missing = dir.path().join("missing.txt");
    let err = count_lines(&missing).unwrap_err();
    assert!(
        matches!(
            err,
            weir::Error::Source(weir::sources::files::SourceError::NotFound { .. })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("missing.txt"), "{err}");
}
