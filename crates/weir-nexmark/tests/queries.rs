//! Every NEXMark query on the engine, against the plain-Rust reference, on generated events
//! (some out of order within the allowed lag, some beyond it and late), at several
//! parallelisms, from the generator and from a replayed file.

use std::time::Duration;

use weir::prelude::*;
use weir::stream::StreamSourceStage;
use weir::{Executor, JobConfig};
use weir_nexmark::generator::GeneratorConfig;
use weir_nexmark::parse::KeptStrings;
use weir_nexmark::{Event, Generator, Query, pipelines, reference, source};

/// The stream of `events` in the time `query` reads: event time with `lag`, or, for q12,
/// processing time.
fn stamped(query: Query, events: StreamSourceStage<Event>, lag: i64) -> StreamStage<Event> {
    match query.in_processing_time() {
        true => events.with_ingestion_timestamps(),
        false => events.with_native_timestamps(lag),
    }
}

/// Runs `query` over `events`; returns its CSV rows, sorted (for q12, the bids per bidder
/// summed over its windows: `reference::comparable_rows`), and the late events counted.
fn run(
    query: Query,
    events: StreamSource<Event>,
    lag: i64,
    parallelism: usize,
) -> (Vec<String>, u64) {
    run_rows(query, events, lag, parallelism, |stream| {
        pipelines::csv_rows(query, stream)
    })
}

/// As [`run`], with the rows of `rows_of` (which must give `query`'s rows).
fn run_rows(
    query: Query,
    events: StreamSource<Event>,
    lag: i64,
    parallelism: usize,
    rows_of: impl Fn(&StreamStage<Event>) -> StreamStage<String>,
) -> (Vec<String>, u64) {
    let p = Pipeline::new();
    let stream = stamped(query, p.read_from(events), lag);
    let (sink, rows) = sinks::collection::list();
    rows_of(&stream).write_to(sink);
    let config = JobConfig::default().with_default_parallelism(parallelism);
    let job = p.submit(&Executor::shared(), config).unwrap();
    assert!(
        job.wait_timeout(Duration::from_secs(120)),
        "{query} did not finish"
    );
    let late = job
        .metrics()
        .iter()
        .filter(|m| m.vertex.contains("nexmark"))
        .map(|m| m.counter("late_events"))
        .sum();
    job.join().unwrap();
    let mut rows = reference::comparable_rows(query, rows.take()).unwrap();
    rows.sort();
    (rows, late)
}

fn expected(query: Query, events: &[Event], lag: i64) -> (Vec<String>, u64) {
    let out = reference::csv_rows(
        query,
        events,
        &reference::Options {
            allowed_lag_ms: lag as u64,
        },
    );
    let mut rows = out.rows;
    rows.sort();
    (rows, out.late_events)
}

/// Writes `events` as an event file in `dir`, one JSON line each.
fn event_file(dir: &std::path::Path, events: &[Event]) -> std::path::PathBuf {
    let file = dir.join("events.jsonl");
    let text: String = events.iter().map(|e| e.to_json() + "\n").collect();
    std::fs::write(&file, text).unwrap();
    file
}

fn config(count: u64, out_of_order_ms: u64) -> GeneratorConfig {
    // 10,000 events/s of event time: 30,000 events span 3 s, several q5 slides and a q7
    // window boundary; an auction lives a few seconds, so q4 has winners.
    GeneratorConfig {
        count: Some(count),
        rate: 10_000,
        out_of_order_ms,
        ..GeneratorConfig::default()
    }
}

#[test]
fn every_query_matches_the_reference_from_one_source_instance() {
    let config = config(30_000, 3_000);
    let events: Vec<Event> = Generator::new(config.clone()).unwrap().iter().collect();
    for query in Query::ALL {
        // One instance: the source sees the events in generation order, like the reference.
        let one = StreamSource::new("nexmark-one", Some(1), {
            let g = Generator::new(config.clone()).unwrap();
            move |_: &weir::ProcessorContext| source::GeneratorReader::new(g.clone())
        })
        .with_native_timestamps(Event::date_time);
        let (got, late) = run(query, one, 4_000, 2);
        let (want, want_late) = expected(query, &events, 4_000);
        assert_eq!(late, want_late, "{query}: late events");
        assert!(!want.is_empty(), "{query}: the reference has rows");
        assert_eq!(got.len(), want.len(), "{query}: row count");
        assert_eq!(got, want, "{query}");
    }
}

#[test]
fn late_events_beyond_the_lag_are_dropped_and_counted_like_the_reference() {
    // Out of order by up to 3 s, allowed only 1 s: many events are late.
    let config = config(20_000, 3_000);
    let events: Vec<Event> = Generator::new(config.clone()).unwrap().iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let file = event_file(dir.path(), &events);
    for query in [
        Query::Q0,
        Query::Q5,
        Query::Q6,
        Query::Q7,
        Query::Q8,
        Query::Q9,
        Query::Q11,
    ] {
        let (got, late) = run(query, source::stream_replay(&file).unwrap(), 1_000, 2);
        let (want, want_late) = expected(query, &events, 1_000);
        assert!(want_late > 0, "the test needs late events");
        assert_eq!(late, want_late, "{query}: late events");
        assert_eq!(got, want, "{query}");
    }
}

#[test]
fn q5_in_one_stage_gives_the_reference_rows_with_late_events_at_every_parallelism() {
    use weir_nexmark::reference::CsvRow;
    // Out of order by up to 3 s, allowed 1 s: late events too.
    let config = config(30_000, 3_000);
    let events: Vec<Event> = Generator::new(config.clone()).unwrap().iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let file = event_file(dir.path(), &events);
    let (want, want_late) = expected(Query::Q5, &events, 1_000);
    assert!(want_late > 0, "the test needs late events");
    for parallelism in [1, 2, 3] {
        let (got, late) = run_rows(
            Query::Q5,
            source::stream_replay(&file).unwrap(),
            1_000,
            parallelism,
            |stream| pipelines::q5_single_stage(stream).map(|r| r.to_csv_row()),
        );
        assert_eq!(late, want_late, "late events at parallelism {parallelism}");
        assert_eq!(got, want, "at parallelism {parallelism}");
    }
}

#[test]
fn replays_keeping_only_the_strings_a_query_reads_give_the_reference_rows_and_csv_files() {
    let config = config(30_000, 3_000);
    let events: Vec<Event> = Generator::new(config.clone()).unwrap().iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let file = event_file(dir.path(), &events);
    for query in Query::ALL {
        let options = source::ReplayOptions {
            strings: KeptStrings::for_query(query),
            ..Default::default()
        };
        let replay = || source::stream_replay_with(&file, options).unwrap();
        let (got, late) = run(query, replay(), 4_000, 2);
        let (want, want_late) = expected(query, &events, 4_000);
        assert!(!want.is_empty(), "{query}: the reference has rows");
        assert_eq!(late, want_late, "{query}: late events");
        assert_eq!(got, want, "{query}");

        // The same rows, formatted straight into a CSV file under the header.
        let p = Pipeline::new();
        let output = dir.path().join(format!("{query}.csv"));
        pipelines::write_csv(
            query,
            &stamped(query, p.read_from(replay()), 4_000),
            &output,
        );
        let config = JobConfig::default().with_default_parallelism(2);
        p.submit(&Executor::shared(), config)
            .unwrap()
            .join()
            .unwrap();
        let written = std::fs::read_to_string(&output).unwrap();
        let mut lines: Vec<String> = written.lines().map(str::to_owned).collect();
        assert_eq!(lines.remove(0), query.header(), "{query}: header first");
        let mut lines = reference::comparable_rows(query, lines).unwrap();
        lines.sort();
        assert_eq!(lines, want, "{query}: CSV file");
    }
}

#[test]
fn parallel_generators_give_the_same_results_when_nothing_is_late() {
    // In order: whatever instance reads an event, no event is late, so results are exact.
    let config = config(30_000, 0);
    let events: Vec<Event> = Generator::new(config.clone()).unwrap().iter().collect();
    for query in Query::ALL {
        for parallelism in [1, 2] {
            let (got, late) = run(
                query,
                source::stream_generator(config.clone(), None).unwrap(),
                4_000,
                parallelism,
            );
            let (want, _) = expected(query, &events, 4_000);
            assert_eq!(late, 0, "{query}");
            assert_eq!(got, want, "{query} at parallelism {parallelism}");
        }
    }
}

#[test]
fn q8_rows_are_distinct_by_id_name_and_window() {
    // Two people share an id with different names, in one window with an auction of that
    // seller: two distinct rows. A second auction of the same seller adds nothing.
    let events: Vec<Event> = Generator::new(config(2_000, 0)).unwrap().iter().collect();
    let person = events
        .iter()
        .find_map(|e| match e {
            Event::Person(p) => Some(p.clone()),
            _ => None,
        })
        .unwrap();
    let auction = events
        .iter()
        .find_map(|e| match e {
            Event::Auction(a) => Some(a.clone()),
            _ => None,
        })
        .unwrap();
    let t = person.date_time;
    let mut renamed = person.clone();
    renamed.name = "someone else".into();
    let mut opened = auction.clone();
    opened.seller = person.id;
    opened.date_time = t;
    let mut again = opened.clone();
    again.id += 1;
    let crafted = vec![
        Event::Person(person.clone()),
        Event::Person(renamed),
        Event::Auction(opened),
        Event::Auction(again),
    ];
    let source =
        weir::sources::stream::items(crafted.clone()).with_native_timestamps(Event::date_time);
    let (got, _) = run(Query::Q8, source, 4_000, 2);
    let (want, _) = expected(Query::Q8, &crafted, 4_000);
    assert_eq!(want.len(), 2, "{want:?}");
    assert_eq!(got, want);
}

/// The replay parses on a pool of threads in chunks; the results must be a single reader's:
/// the same rows, late events and malformed lines with their numbers, at every parallelism,
/// on a file with events out of order, late events, malformed lines, invalid UTF-8, CRLF line
/// ends, lines longer than a chunk and no final newline.
#[test]
fn parallel_parsing_gives_the_single_readers_results() {
    use weir::sources::chunked::ChunkOptions;
    use weir::sources::files::{InputFiles, LineReader};

    let config = config(12_000, 3_000);
    let events: Vec<Event> = Generator::new(config).unwrap().iter().collect();
    let mut text = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let mut json = e.to_json();
        if i % 1500 == 7 {
            // A line longer than the chunks below.
            let long = format!("\"extra\":\"{}\",\"z\":\"", "y".repeat(9_000));
            json = json.replacen("\"extra\":\"", &long, 1);
        }
        if i % 997 == 1 {
            // A field of the wrong type.
            json = json.replacen("\"date_time\":", "\"date_time\":1.5,\"x\":", 1);
        }
        let mut line = json.into_bytes();
        match i % 997 {
            // Invalid UTF-8 inside a string; broken JSON; a blank line.
            2 => line.splice(10..10, [0xff, 0xfe]).for_each(drop),
            3 => line.truncate(line.len() / 2),
            4 => text.extend_from_slice(b"\r\n"), // a blank line before this one
            _ => {}
        }
        text.extend_from_slice(&line);
        if i + 1 < events.len() {
            text.extend_from_slice(if i % 2 == 0 { b"\r\n" } else { b"\n" });
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    std::fs::write(&file, &text).unwrap();

    // The single reader: line by line, in file order, with serde_json alone.
    let mut good = Vec::new();
    let mut bad = Vec::new();
    let mut lines = LineReader::new(
        std::sync::Arc::new(InputFiles::resolve(&file).unwrap()),
        true,
    );
    lines.open(0, 1);
    while !lines
        .read(|line| {
            match weir_nexmark::parse::parse_line_serde(line.bytes) {
                Ok(e) => good.push(e),
                Err(e) => bad.push((line.number, e)),
            }
            true
        })
        .unwrap()
    {}
    assert!(
        bad.len() >= 4 * 12,
        "the file has malformed lines: {}",
        bad.len()
    );

    for threads in [1, 2, 4] {
        let options = ChunkOptions {
            threads,
            chunk_bytes: 4096,
        };
        let read = source::read_events_with(&file, options).unwrap();
        assert_eq!(read.events, good, "{threads} threads: events");
        let got_bad: Vec<_> = read
            .malformed
            .into_iter()
            .map(|m| (m.line, m.error))
            .collect();
        assert_eq!(got_bad, bad, "{threads} threads: malformed lines");

        for query in [Query::Q0, Query::Q5, Query::Q7] {
            let replay = source::stream_replay_with(&file, options).unwrap();
            let (got, late) = run(query, replay, 1_000, threads);
            let (want, want_late) = expected(query, &good, 1_000);
            assert!(want_late > 0, "the test needs late events");
            assert_eq!(late, want_late, "{query}, {threads} threads: late events");
            assert_eq!(got, want, "{query}, {threads} threads");
        }
    }
}
