//! `weir nexmark run` for q6 and q9–q12 as a user runs it: over a generated event file and
//! over the in-process generator, at parallelism 1 and 2, each run checked against the
//! reference (`--check`), the runs' files compared with each other, and enough events (a
//! minute of event time) that auctions close, sessions end and partitions fill.

#[path = "support/independent_nexmark.rs"]
mod independent_nexmark;
mod support;

use support::{stderr, stdout, weir};
use weir_nexmark::reference::{self, CsvRow};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// 60,000 events at 1,000 per second: a minute of event time, out of order by up to 2 s.
fn event_file(dir: &Path) -> PathBuf {
    event_file_with(dir, "60000", "1000")
}

/// `count` events at `rate` per second, out of order by up to 2 s.
fn event_file_with(dir: &Path, count: &str, rate: &str) -> PathBuf {
    let events = dir.join("events.jsonl");
    let o = weir(&[
        "nexmark",
        "generate",
        "--events",
        count,
        "--rate",
        rate,
        "--out-of-order-ms",
        "2000",
        "--output",
        events.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    events
}

/// Runs `query` with `--check` and `extra` arguments; returns the summary line's row count.
fn run_checked(query: &str, extra: &[&str]) -> u64 {
    let mut args = vec!["nexmark", "run", "--query", query, "--check"];
    args.extend_from_slice(extra);
    let o = weir(&args);
    assert!(o.status.success(), "{query} {extra:?}: {}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("check: the "), "{query} {extra:?}: {out}");
    // "...; N rows; parallelism P"
    let rows = out
        .split("; ")
        .find_map(|part| part.strip_suffix(" rows"))
        .unwrap_or_else(|| panic!("{query}: no row count in {out}"));
    rows.parse().unwrap()
}

/// The data lines of a CSV file, sorted, after checking its header.
fn sorted_rows(path: &Path, header: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(lines.remove(0), header, "{}", path.display());
    lines.sort();
    lines
}

#[test]
fn new_queries_match_the_reference_from_a_file_and_the_generator_at_parallelism_1_and_2() {
    let dir = tempfile::tempdir().unwrap();
    let events = event_file(dir.path());
    let input = events.to_str().unwrap();
    // (query, header, fewest rows a minute of events must give)
    let queries = [
        ("q6", "seller,avg_price", 400),
        (
            "q9",
            "id,item_name,description,initial_bid,reserve,date_time,expires,seller,category,extra,auction,bidder,price,bid_date_time,bid_extra",
            400,
        ),
        ("q10", "auction,bidder,price,date_time,extra,dt,hm", 50_000),
        ("q11", "bidder,bid_count,window_start,window_end", 1_000),
        ("q12", "bidder,bid_count,window_start,window_end", 300),
    ];
    for (query, header, fewest) in queries {
        let mut files = Vec::new();
        for parallelism in ["1", "2"] {
            let out = dir.path().join(format!("{query}-{parallelism}.csv"));
            let rows = run_checked(
                query,
                &[
                    "--input",
                    input,
                    "--output",
                    out.to_str().unwrap(),
                    "--parallelism",
                    parallelism,
                ],
            );
            assert!(rows >= fewest, "{query}: {rows} rows, expected {fewest}+");
            files.push(sorted_rows(&out, header));

            let rows = run_checked(
                query,
                &[
                    "--events",
                    "60000",
                    "--rate",
                    "1000",
                    "--parallelism",
                    parallelism,
                ],
            );
            assert!(rows >= fewest, "{query}, generated: {rows} rows");
        }
        // q12's windows are of wall-clock time: its files differ from run to run.
        if query != "q12" {
            assert_eq!(files[0], files[1], "{query}: parallelism 1 and 2 differ");
        }
    }
}

#[test]
fn late_events_are_dropped_by_the_event_time_queries_and_counted_by_none_in_q12() {
    let dir = tempfile::tempdir().unwrap();
    let events = event_file(dir.path());
    for query in ["q6", "q9", "q11", "q12"] {
        let o = weir(&[
            "nexmark",
            "run",
            "--query",
            query,
            "--input",
            events.to_str().unwrap(),
            "--allowed-lag-ms",
            "1000",
            "--parallelism",
            "2",
            "--check",
        ]);
        assert!(o.status.success(), "{query}: {}", stderr(&o));
        let out = stdout(&o);
        // Out of order by up to 2 s with a lag of 1 s: some events are late, but q12 reads
        // in processing time.
        assert_eq!(out.contains(" 0 late;"), query == "q12", "{query}: {out}");
    }
}

#[test]
fn q10_writes_a_directory_of_dt_and_hm_partitions_holding_the_single_files_rows() {
    let dir = tempfile::tempdir().unwrap();
    // Two minutes of event time from 2015-07-15 00:00:00 UTC.
    let events = event_file_with(dir.path(), "30000", "250");
    let single = dir.path().join("q10.csv");
    run_checked(
        "q10",
        &[
            "--input",
            events.to_str().unwrap(),
            "--output",
            single.to_str().unwrap(),
        ],
    );
    let want = sorted_rows(&single, "auction,bidder,price,date_time,extra,dt,hm");

    let parts = dir.path().join("q10");
    let target = format!("{}/", parts.display());
    run_checked(
        "q10",
        &[
            "--input",
            events.to_str().unwrap(),
            "--output",
            &target,
            "--parallelism",
            "2",
        ],
    );
    // dt=2015-07-14/hm=23%3A59 (events moved back before the base time), then the first two
    // minutes of 2015-07-15.
    let mut per_partition = BTreeMap::<String, usize>::new();
    let mut got = Vec::new();
    for dt in std::fs::read_dir(&parts).unwrap() {
        let dt = dt.unwrap().path();
        let dt_name = dt.file_name().unwrap().to_string_lossy().into_owned();
        let date = dt_name.strip_prefix("dt=").expect("dt=...").to_owned();
        for hm in std::fs::read_dir(&dt).unwrap() {
            let hm = hm.unwrap().path();
            let hm_name = hm.file_name().unwrap().to_string_lossy().into_owned();
            let minute = hm_name
                .strip_prefix("hm=")
                .expect("hm=...")
                .replace("%3A", ":");
            for file in std::fs::read_dir(&hm).unwrap() {
                let file = file.unwrap().path();
                let name = file.file_name().unwrap().to_string_lossy().into_owned();
                assert!(
                    name.starts_with("part-") && name.ends_with(".csv"),
                    "only finished part files are left: {name}"
                );
                let rows = sorted_rows(&file, "auction,bidder,price,date_time,extra");
                *per_partition
                    .entry(format!("{dt_name}/{hm_name}"))
                    .or_default() += rows.len();
                got.extend(rows.into_iter().map(|r| format!("{r},{date},{minute}")));
            }
        }
    }
    got.sort();
    assert_eq!(got, want, "the partitions hold the single file's rows");
    let names: Vec<&String> = per_partition.keys().collect();
    assert_eq!(
        names,
        [
            "dt=2015-07-14/hm=23%3A59",
            "dt=2015-07-15/hm=00%3A00",
            "dt=2015-07-15/hm=00%3A01"
        ],
        "{per_partition:?}"
    );
    assert!(per_partition.values().all(|&n| n > 0));

    // The directory now holds a run's output: a second run refuses it rather than mix two.
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q10",
        "--input",
        events.to_str().unwrap(),
        "--output",
        parts.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
    // Partitions do not take part in snapshots: refused before the job starts.
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q10",
        "--events",
        "1000",
        "--output",
        &format!("{}/", dir.path().join("fresh").display()),
        "--state-dir",
        dir.path().join("state").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("snapshots"), "{}", stderr(&o));
}

/// Strings with escapes and multi-byte UTF-8 (`--strings escaped|unicode`), read back from a
/// file, give the rows of the same events taken straight from the generator, which parses
/// nothing: so the file's reader unescapes and decodes every string as it was written
/// (q9 writes an auction's item name, description and extra and its bid's extra, q10 every
/// bid's extra) and skips strings a query does not read whatever they hold (q5 keeps none).
#[test]
fn escaped_and_unicode_strings_read_from_a_file_give_the_generators_rows() {
    for style in ["escaped", "unicode"] {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("events.jsonl");
        let o = weir(&[
            "nexmark",
            "generate",
            "--events",
            "20000",
            "--rate",
            "1000",
            "--strings",
            style,
            "--output",
            events.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = std::fs::read_to_string(&events).unwrap();
        let marker = if style == "escaped" { "\\\"" } else { "中" };
        assert!(text.contains(marker), "{style}: no {marker} in the file");
        for query in ["q5", "q9", "q10"] {
            let from_file = dir.path().join(format!("{query}-file.csv"));
            let generated = dir.path().join(format!("{query}-generated.csv"));
            for (args, out) in [
                (vec!["--input", events.to_str().unwrap()], &from_file),
                (
                    vec!["--events", "20000", "--rate", "1000", "--strings", style],
                    &generated,
                ),
            ] {
                let mut all = vec![
                    "nexmark",
                    "run",
                    "--query",
                    query,
                    "--check",
                    "--parallelism",
                    "2",
                ];
                all.extend(args);
                all.extend(["--output", out.to_str().unwrap()]);
                let o = weir(&all);
                assert!(o.status.success(), "{style} {query}: {}", stderr(&o));
            }
            let (a, b) = (
                support::sorted_lines(&from_file),
                support::sorted_lines(&generated),
            );
            assert!(a.len() > 1, "{style} {query}: no rows");
            assert_eq!(
                a, b,
                "{style} {query}: the file's rows differ from the generator's"
            );
        }
    }
}

/// A file that another generator wrote (the `nexmark` crate: its own random source, ids out
/// of order in groups, every line's fields in `serde_json`'s order): `weir nexmark run` reads
/// it without a malformed line, and q0, q5 and q7 give exactly the rows the reference
/// computes from that generator's events, which never went through this project's parser.
#[test]
fn a_file_from_an_independent_generator_gives_the_reference_rows() {
    let (count, rate) = (60_000, 1_000);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nexmark-rs.jsonl");
    independent_nexmark::write_independent_file(count, rate, &file).unwrap();
    let events: Vec<weir_nexmark::Event> =
        independent_nexmark::independent_events(count, rate).collect();
    let options = reference::Options {
        allowed_lag_ms: 4000,
    };
    /// A reference's rows as the CLI writes them, sorted.
    fn csv_lines<R: CsvRow>(rows: &[R]) -> Vec<String> {
        let mut lines: Vec<String> = rows.iter().map(CsvRow::to_csv_row).collect();
        lines.sort();
        lines
    }
    let expected = [
        (
            "q0",
            "auction,bidder,price,date_time",
            csv_lines(&reference::q0(&events, &options).rows),
        ),
        (
            "q5",
            "window_start,window_end,auction,num",
            csv_lines(&reference::q5(&events, &options).rows),
        ),
        (
            "q7",
            "window_start,window_end,auction,bidder,price,date_time",
            csv_lines(&reference::q7(&events, &options).rows),
        ),
    ];
    for (query, header, want) in expected {
        assert!(
            want.len() > 1,
            "{query}: the reference has too few rows to check"
        );
        for parallelism in ["1", "2"] {
            let out = dir.path().join(format!("{query}-{parallelism}.csv"));
            let o = weir(&[
                "nexmark",
                "run",
                "--query",
                query,
                "--parallelism",
                parallelism,
                "--input",
                file.to_str().unwrap(),
                "--output",
                out.to_str().unwrap(),
            ]);
            assert!(
                o.status.success(),
                "{query} p={parallelism}: {}",
                stderr(&o)
            );
            assert!(
                stdout(&o).contains("; 0 malformed lines;"),
                "{query} p={parallelism}: {}",
                stdout(&o)
            );
            assert_eq!(
                sorted_rows(&out, header),
                want,
                "{query} at parallelism {parallelism}"
            );
        }
    }
}
