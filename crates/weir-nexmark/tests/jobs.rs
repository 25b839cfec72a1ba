//! The NEXMark sources inside Weir jobs, and the generator's out-of-order option against the
//! reference's lateness rule.

use std::fs;

use weir::prelude::*;
use weir::{ExecutorConfig, JobConfig};
use weir_nexmark::generator::{Generator, GeneratorConfig};
use weir_nexmark::reference::{self, CsvRow, Options};
use weir_nexmark::{Event, Query, source};

fn config(count: u64) -> GeneratorConfig {
    GeneratorConfig {
        count: Some(count),
        ..Default::default()
    }
}

fn sorted_json(events: &[Event]) -> Vec<String> {
    let mut lines: Vec<String> = events.iter().map(Event::to_json).collect();
    lines.sort();
    lines
}

#[test]
fn the_generator_source_at_parallelism_2_makes_the_generators_events() {
    let expected: Vec<Event> = Generator::new(config(20_000)).unwrap().iter().collect();
    let executor = Executor::new(ExecutorConfig {
        workers: 2,
        ..Default::default()
    })
    .unwrap();
    for parallelism in [Some(1), Some(2), None] {
        let p = Pipeline::new();
        let (sink, out) = sinks::collection::list();
        p.read_from(source::generator(config(20_000), parallelism).unwrap())
            .write_to(sink);
        let job = p
            .submit(&executor, JobConfig::default().with_default_parallelism(2))
            .unwrap();
        job.join().unwrap();
        let got = out.take();
        // The collection sink runs several instances, so the order is not kept here; the
        // source's own order is tested in `source.rs` and by `weir nexmark generate`.
        assert_eq!(got.len(), expected.len());
        assert_eq!(sorted_json(&got), sorted_json(&expected), "{parallelism:?}");
    }
}

#[test]
fn a_written_file_replays_whole_and_malformed_lines_are_counted_in_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let p = Pipeline::new();
    p.read_from(source::generator(config(3000), Some(1)).unwrap())
        .write_to(sinks::files::text_with(&path, Event::write_json_line));
    p.run().unwrap();

    // Break three lines: bad JSON at line 11, a float id at line 51 (a person), a null at 102.
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[10] = "{\"type\":".to_owned();
    lines[50] = lines[50].replacen("\"id\":1001,", "\"id\":1001.0,", 1);
    lines[101] = lines[101].replacen("\"date_time\":", "\"date_time\":null,\"x\":", 1);
    fs::write(&path, lines.join("\n")).unwrap();

    let executor = Executor::new(ExecutorConfig {
        workers: 2,
        ..Default::default()
    })
    .unwrap();
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(source::replay(&path).unwrap()).write_to(sink);
    let job = p.submit(&executor, JobConfig::default()).unwrap();
    while !job.wait_timeout(std::time::Duration::from_millis(10)) {}
    let metrics = job.metrics();
    job.join().unwrap();
    let counter = |name: &str| metrics.iter().map(|m| m.counter(name)).sum::<u64>();
    assert_eq!(counter("malformed_records"), 3);
    assert_eq!(counter("events"), 2997);

    let file = source::read_events(&path).unwrap();
    let bad: Vec<u64> = file.malformed.iter().map(|m| m.line).collect();
    assert_eq!(bad, [11, 51, 102]);
    assert_eq!(sorted_json(&out.take()), sorted_json(&file.events));
}

#[test]
fn out_of_order_within_the_lag_is_never_late_beyond_it_is() {
    let within = Generator::new(GeneratorConfig {
        count: Some(50_000),
        rate: 1000,
        out_of_order_ms: 4000,
        ..Default::default()
    })
    .unwrap();
    let events: Vec<Event> = within.iter().collect();
    let disordered = events
        .windows(2)
        .filter(|w| w[1].date_time() < w[0].date_time())
        .count();
    assert!(disordered > 10_000, "{disordered}");
    let (_, late) = reference::split_late(&events, &Options::default());
    assert_eq!(late, 0);

    let beyond = Generator::new(GeneratorConfig {
        count: Some(50_000),
        rate: 1000,
        out_of_order_ms: 8000,
        ..Default::default()
    })
    .unwrap();
    let events: Vec<Event> = beyond.iter().collect();
    let (_, late) = reference::split_late(&events, &Options::default());
    assert!(late > 1000, "{late}");
    for q in Query::ALL {
        // q12 reads in processing time: none of its events is late.
        let expected = if q.in_processing_time() { 0 } else { late };
        assert_eq!(
            reference::csv_rows(q, &events, &Options::default()).late_events,
            expected,
            "{q}"
        );
    }
}

#[test]
fn reference_results_on_generated_data_are_plausible() {
    // 1000 events/s for 100 s of event time, out of order by up to 2 s.
    let events: Vec<Event> = Generator::new(GeneratorConfig {
        count: Some(100_000),
        rate: 1000,
        out_of_order_ms: 2000,
        ..Default::default()
    })
    .unwrap()
    .iter()
    .collect();
    let o = Options::default();
    let bids = events.iter().filter(|e| e.as_bid().is_some()).count();
    assert_eq!(reference::q0(&events, &o).rows.len(), bids);
    assert!(!reference::q2(&events, &o).rows.is_empty());
    assert!(!reference::q3(&events, &o).rows.is_empty());
    let q4 = reference::q4(&events, &o);
    assert_eq!(
        q4.rows.iter().map(|r| r.category).collect::<Vec<_>>(),
        [10, 11, 12, 13, 14]
    );
    let q5 = reference::q5(&events, &o);
    // 100 s of data: about 50 windows of 2 s slide, plus those at the edges.
    let windows: std::collections::BTreeSet<i64> = q5.rows.iter().map(|r| r.window_start).collect();
    assert!((50..=60).contains(&windows.len()), "{}", windows.len());
    // The hot auctions win: half of all bids go to a multiple of 100.
    assert!(q5.rows.iter().all(|r| r.num > 10));
    let q7 = reference::q7(&events, &o);
    assert!(q7.rows.len() >= 10 && q7.rows.len() < 20);
    let q8 = reference::q8(&events, &o);
    assert!(!q8.rows.is_empty());
    assert!(
        q8.rows
            .iter()
            .all(|r| r.to_csv_row().split(',').count() == 3)
    );
}
