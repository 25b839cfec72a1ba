//! `weir nexmark ...`: NEXMark event files, and (with the streaming engine) the queries.
//!
//! ```text
//! weir nexmark generate --events N [--rate R] [--seed S] [--out-of-order-ms M]
//!                       [--base-time-ms T] --output events.jsonl
//! ```
//!
//! The event format and the generator's rules are those of `docs/nexmark.md`; see
//! the `weir_nexmark` crate.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use weir::{Executor, ExecutorConfig, JobConfig, Pipeline, sinks};
use weir_nexmark::generator::{
    AUCTION_PROPORTION, DEFAULT_BASE_TIME_MS, DEFAULT_RATE, GeneratorConfig, TOTAL_PROPORTION,
};
use weir_nexmark::parse::KeptStrings;
use weir_nexmark::{Event, Query, StringStyle, partitioned, pipelines, reference, source};

use crate::progress;
use crate::snapshots::{Ended, SnapshotArgs, Snapshots, job_name, path_part};
use crate::ui::UiArgs;

/// The `weir nexmark` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(
        after_help = "Example:\n  weir nexmark generate --events 1000000 --rate 10000 --output events.jsonl"
    )]
    /// Write a NEXMark event file (JSON Lines, one event per line, in event order) with the
    /// built-in deterministic generator.
    Generate(GenerateArgs),
    #[command(
        after_help = "Example:\n  weir nexmark run --query q5 --input events.jsonl --output q5.csv --check\n  weir nexmark run --query q7 --events 10000000 --parallelism 2"
    )]
    /// Run a query over an event file or the built-in generator, as a stream in event time.
    Run(RunArgs),
}

/// Arguments of `weir nexmark run`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("events_from").required(true).args(["input", "events"])))]
pub struct RunArgs {
    /// The query: q0 to q12 (see docs/nexmark.md).
    #[arg(long)]
    pub query: Query,
    /// An event file (JSON Lines), a directory of them or a glob, replayed in file order.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Generate this many events in process instead of reading a file.
    #[arg(long)]
    pub events: Option<u64>,
    /// With --events: events per second of event time (sets the timestamps).
    #[arg(long, default_value_t = DEFAULT_RATE, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: u64,
    /// Emit at most this many events per second of wall-clock time. With --events, event time
    /// starts now and follows the clock (for latency measurements); with --input, the events
    /// keep the file's times (a run to watch, or to kill and resume with --state-dir).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub wall_rate: Option<u64>,
    /// With --events: the generator's seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// With --events: what the generator's random strings hold (`ascii`, `escaped` or
    /// `unicode`; see `weir nexmark generate --help`).
    #[arg(long, value_name = "STYLE", default_value_t = StringStyle::Ascii, requires = "events")]
    pub strings: StringStyle,
    /// How far behind the highest event time seen the watermark stays, in ms.
    #[arg(long, default_value_t = 4000)]
    pub allowed_lag_ms: u64,
    /// Write the rows as CSV, with the query's header, to this file. Without it, rows are
    /// counted, not written. For q10, a directory (a path ending in `/`, or an existing
    /// directory, which must be empty) gets the rows partitioned by date and minute into
    /// `dt=yyyy-MM-dd/hm=HH%3Amm/` subdirectories, as Flink's filesystem sink writes them.
    #[arg(long, value_parser = super::output_file())]
    pub output: Option<PathBuf>,
    /// Worker threads.
    #[command(flatten)]
    pub workers: super::WorkerArgs,
    /// Also compute the query with the plain reference implementation and compare the rows
    /// (keeps every event in memory; for conformance checks on modest inputs).
    #[arg(long)]
    pub check: bool,
    /// Snapshots, to survive a crash.
    #[command(flatten)]
    pub snapshots: SnapshotArgs,
    /// The observability server.
    #[command(flatten)]
    pub ui: UiArgs,
}

/// Arguments of `weir nexmark generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// How many events to write.
    #[arg(long)]
    pub events: u64,
    /// Events per second of event time: event n happens at base + n * 1000 / rate ms. It
    /// sets the timestamps only; the file is written as fast as possible.
    #[arg(long, default_value_t = DEFAULT_RATE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: u64,
    /// The random seed; the same seed and settings give the same file.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Move each event's time back by a random 0 to M-1 ms, so that events are out of order
    /// by less than M ms. With M at most the allowed lag (4000 ms by default) no event is
    /// late.
    #[arg(long, default_value_t = 0)]
    pub out_of_order_ms: u64,
    /// What the random strings hold: `ascii` letters (the default), `escaped` (about one
    /// character in eight is `"`, `\`, a newline, a tab, U+0001 or `/`, which JSON escapes)
    /// or `unicode` (about one in four is multi-byte UTF-8, emoji included).
    #[arg(long, value_name = "STYLE", default_value_t = StringStyle::Ascii)]
    pub strings: StringStyle,
    /// The time of the first event, in ms since the Unix epoch.
    #[arg(long, default_value_t = DEFAULT_BASE_TIME_MS, allow_negative_numbers = true)]
    pub base_time_ms: i64,
    /// The file to write. It appears, complete, only when generation succeeds. `-` is
    /// refused: the file is written under a temporary name and renamed, which standard
    /// output cannot be.
    #[arg(long, value_parser = super::output_file())]
    pub output: PathBuf,
}

/// Runs a `weir nexmark` subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Generate(args) => generate(args),
        Command::Run(args) => run_query(args),
    }
}

/// How many persons, auctions and bids the first `n` events hold (first event id 0).
fn kinds(n: u64) -> (u64, u64, u64) {
    let (periods, rem) = (n / TOTAL_PROPORTION, n % TOTAL_PROPORTION);
    let persons = periods + u64::from(rem > 0);
    let auctions = periods * AUCTION_PROPORTION + rem.saturating_sub(1).min(AUCTION_PROPORTION);
    (persons, auctions, n - persons - auctions)
}

/// Writes the event file: the generator source (one instance, so the file is in event order)
/// into a text file sink, which writes a temporary file and renames it at the end.
fn generate(args: GenerateArgs) -> anyhow::Result<()> {
    let config = GeneratorConfig {
        count: Some(args.events),
        rate: args.rate,
        seed: args.seed,
        base_time_ms: args.base_time_ms,
        out_of_order_ms: args.out_of_order_ms,
        strings: args.strings,
        ..Default::default()
    };
    let input = source::generator(config, Some(1)).context("invalid generator settings")?;
    let pipeline = Pipeline::new();
    pipeline.read_from(input).write_to(sinks::files::text_with(
        &args.output,
        Event::write_json_line,
    ));
    let executor = Executor::new(ExecutorConfig {
        workers: 1,
        ..Default::default()
    })
    .context("cannot start the worker thread")?;
    let started = Instant::now();
    let job = pipeline
        .submit(
            &executor,
            JobConfig::default()
                .with_name("nexmark-generate")
                .with_default_parallelism(1),
        )
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    while !job.wait_timeout(Duration::from_millis(50)) {}
    let written = progress::counter(&job.metrics(), "events");
    job.join()
        .with_context(|| format!("generating {} failed", args.output.display()))?;
    let elapsed = started.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&args.output)
        .with_context(|| format!("cannot read {} back", args.output.display()))?
        .len();
    let (persons, auctions, bids) = kinds(written);
    outln!(
        "nexmark generate: {written} events ({persons} persons, {auctions} auctions, {bids} bids), {:.1} MB in {elapsed:.2} s ({:.0} events/s) to {}",
        bytes as f64 / 1e6,
        written as f64 / elapsed.max(1e-9),
        args.output.display(),
    )?;
    Ok(())
}

/// Runs one query: builds the stream, runs it, prints a one-line summary, and checks the rows
/// against the reference when asked.
fn run_query(args: RunArgs) -> anyhow::Result<()> {
    let lag = i64::try_from(args.allowed_lag_ms).context("--allowed-lag-ms is too large")?;
    let ui = args.ui.start()?;
    let query = args.query;
    let (source, total, events_for_check) = match (&args.input, args.events) {
        (Some(path), _) => {
            // Only the strings the query reads are kept; every field is still checked.
            let options = source::ReplayOptions {
                strings: KeptStrings::for_query(query),
                wall_rate: args.wall_rate,
                ..Default::default()
            };
            let source = source::stream_replay_with(path, options)
                .with_context(|| format!("input '{}'", path.display()))?;
            let check = match args.check {
                true => Some(
                    source::read_events(path)
                        .with_context(|| format!("input '{}'", path.display()))?
                        .events,
                ),
                false => None,
            };
            (source, None, check)
        }
        (None, Some(count)) => {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(DEFAULT_BASE_TIME_MS, |d| d.as_millis() as i64);
            let config = GeneratorConfig {
                count: Some(count),
                rate: args.wall_rate.unwrap_or(args.rate),
                seed: args.seed,
                strings: args.strings,
                base_time_ms: if args.wall_rate.is_some() {
                    now_ms
                } else {
                    DEFAULT_BASE_TIME_MS
                },
                ..Default::default()
            };
            let check = match args.check {
                true => Some(
                    weir_nexmark::Generator::new(config.clone())
                        .context("invalid generator settings")?
                        .iter()
                        .collect(),
                ),
                false => None,
            };
            (
                source::stream_generator(config, args.wall_rate)
                    .context("invalid generator settings")?,
                Some(count),
                check,
            )
        }
        (None, None) => unreachable!("clap requires --input or --events"),
    };
    let partition_dir = args
        .output
        .as_deref()
        .filter(|_| query == Query::Q10)
        .map(q10_partition_dir)
        .transpose()?
        .flatten();
    if let (Some(dir), Some(_)) = (&partition_dir, &args.snapshots.state_dir) {
        anyhow::bail!(
            "--output {}: q10's partition directory does not take part in snapshots; with --state-dir, write q10 to a single CSV file",
            dir.display()
        );
    }
    let pipeline = Pipeline::new();
    let source = pipeline.read_from(source);
    // q12's windows are of processing time: each event is stamped when it is read.
    let stream = match query.in_processing_time() {
        true => source.with_ingestion_timestamps(),
        false => source.with_native_timestamps(lag),
    };
    // Rows as text only where they are checked (and then written from the same text);
    // written alone, each row is formatted straight into the file's bytes; otherwise counted.
    let rows = events_for_check
        .is_some()
        .then(|| pipelines::csv_rows(query, &stream));
    match (&args.output, &rows) {
        (Some(_), _) if let Some(dir) = &partition_dir => {
            pipelines::q10(&stream).write_to(partitioned::q10_sink(dir));
        }
        (Some(path), Some(rows)) => {
            let header = format!("{}\n", query.header());
            rows.write_to(sinks::files::text_with_header(
                path,
                header,
                |row: &String, out: &mut Vec<u8>| {
                    out.extend_from_slice(row.as_bytes());
                    out.push(b'\n');
                },
            ));
        }
        (Some(path), None) => pipelines::write_csv(query, &stream, path),
        (None, _) => {}
    }
    let collected = match (&events_for_check, &rows) {
        (Some(_), Some(rows)) => {
            let (sink, collected) = sinks::collection::list();
            rows.write_to(sink);
            Some(collected)
        }
        _ => None,
    };
    if rows.is_none() && args.output.is_none() {
        pipelines::row_count(query, &stream).write_to(sinks::collection::discard());
    }

    let (executor, parallelism) = args.workers.executor()?;
    let started = Instant::now();
    // The same command gives the same name, so a rerun finds its snapshots.
    let name_parts = match (&args.input, args.events) {
        (Some(path), _) => vec![query.to_string(), path_part(path)],
        (None, count) => {
            let mut parts = vec![
                query.to_string(),
                format!("generated-{}", count.unwrap_or(0)),
                format!("rate-{}", args.wall_rate.unwrap_or(args.rate)),
                format!("seed-{}", args.seed),
            ];
            // Other strings are other events (the default's name stays as it was).
            if args.strings != StringStyle::Ascii {
                parts.push(format!("strings-{}", args.strings));
            }
            parts
        }
    };
    let config = JobConfig::default()
        .with_name(job_name("nexmark", &name_parts))
        .with_default_parallelism(parallelism);
    let snapshots = args.snapshots.snapshots();
    let name = config.name.clone();
    let job = Snapshots::submit(snapshots.as_ref(), &pipeline, &executor, config)
        .with_context(|| format!("cannot start {query}"))?;
    if let Some(ui) = &ui {
        ui.watch_job(&job);
    }
    let metrics = match total {
        Some(total) => progress::watch(&job, total, "events", progress::Unit::Items),
        None => progress::watch(&job, 0, "bytes", progress::Unit::Bytes),
    };
    let ended =
        Snapshots::join(snapshots.as_ref(), job).with_context(|| format!("{query} failed"))?;
    if let Ended::Stopped = ended {
        return Ok(());
    }
    Snapshots::finished(snapshots.as_ref(), &name, &query.to_string())?;
    let elapsed = started.elapsed().as_secs_f64();
    let events = progress::counter(&metrics, "events");
    let late = progress::counter(&metrics, "late_events");
    let malformed = progress::counter(&metrics, "malformed_records");
    // Every sink counts its rows; with --check the rows go to two sinks.
    let sinks_used = u64::from(args.output.is_some()) + u64::from(collected.is_some());
    let rows_out = progress::counter(&metrics, "records_written") / sinks_used.max(1);
    let rate = events as f64 / elapsed.max(1e-9);
    outln!(
        "nexmark {query}: {events} events in {elapsed:.2} s ({rate:.0} events/s, {:.0} per core); {late} late; {malformed} malformed lines; {rows_out} rows; parallelism {parallelism}",
        rate / parallelism as f64,
    )?;
    if let (Some(events), Some(collected)) = (events_for_check, collected) {
        let options = reference::Options {
            allowed_lag_ms: args.allowed_lag_ms,
        };
        let mut want = reference::csv_rows(query, &events, &options).rows;
        let mut got = reference::comparable_rows(query, collected.take())
            .map_err(|e| anyhow::anyhow!("check failed: {e}"))?;
        want.sort();
        got.sort();
        if got != want {
            let missing = want
                .iter()
                .filter(|r| got.binary_search(r).is_err())
                .count();
            let extra = got
                .iter()
                .filter(|r| want.binary_search(r).is_err())
                .count();
            anyhow::bail!(
                "check failed: {} rows, the reference has {}; {missing} missing, {extra} unexpected",
                got.len(),
                want.len()
            );
        }
        match query.in_processing_time() {
            true => outln!(
                "check: the bids per bidder summed over the windows equal the reference's ({} bidders; the windows are of wall-clock time and differ from run to run)",
                got.len()
            )?,
            false => outln!("check: the {} rows equal the reference's", got.len())?,
        }
    }
    Ok(())
}

/// Whether q10's `--output` names a directory of partitions: a path ending in a separator or
/// an existing directory, which must then be empty (a rerun must not mix its files with an
/// earlier run's). `Ok(None)` for a file.
fn q10_partition_dir(output: &std::path::Path) -> anyhow::Result<Option<PathBuf>> {
    let text = output.as_os_str().to_string_lossy();
    let trailing = text.ends_with('/') || text.ends_with(std::path::MAIN_SEPARATOR);
    if output.is_dir() {
        let mut entries = std::fs::read_dir(output)
            .with_context(|| format!("cannot read directory {}", output.display()))?;
        if entries.next().is_some() {
            anyhow::bail!(
                "--output {}: the directory is not empty; q10 writes its partitions into a new or empty directory",
                output.display()
            );
        }
        return Ok(Some(output.to_path_buf()));
    }
    Ok(trailing.then(|| output.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use clap::error::ErrorKind;
    use weir_nexmark::generator::Generator;
    use weir_nexmark::source::read_events;

    use super::*;
    use crate::Cli;

    fn parse(args: &[&str]) -> Result<GenerateArgs, clap::Error> {
        let mut argv = vec!["weir", "nexmark", "generate"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv)?.command {
            crate::Command::Nexmark {
                command: Command::Generate(args),
            } => Ok(args),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn flags_and_defaults() {
        let a = parse(&["--events", "10", "--output", "x.jsonl"]).unwrap();
        assert_eq!(
            (a.events, a.rate, a.seed, a.out_of_order_ms),
            (10, 10_000_000, 0, 0)
        );
        assert_eq!(a.base_time_ms, DEFAULT_BASE_TIME_MS);
        let a = parse(&[
            "--events",
            "5",
            "--rate",
            "1000",
            "--seed",
            "42",
            "--out-of-order-ms",
            "3000",
            "--base-time-ms",
            "-5",
            "--output",
            "y",
        ])
        .unwrap();
        assert_eq!(
            (a.rate, a.seed, a.out_of_order_ms, a.base_time_ms),
            (1000, 42, 3000, -5)
        );
    }

    #[test]
    fn bad_flags_are_clear_errors() {
        let cases: [(&[&str], ErrorKind, &str); 6] = [
            (
                &["--output", "x"],
                ErrorKind::MissingRequiredArgument,
                "--events",
            ),
            (
                &["--events", "1"],
                ErrorKind::MissingRequiredArgument,
                "--output",
            ),
            (
                &["--events", "ten", "--output", "x"],
                ErrorKind::ValueValidation,
                "ten",
            ),
            (
                &["--events", "-1", "--output", "x"],
                ErrorKind::UnknownArgument,
                "-1",
            ),
            (
                &["--events", "1", "--rate", "0", "--output", "x"],
                ErrorKind::ValueValidation,
                "0",
            ),
            (
                &["--events", "1", "--output", "x", "--speed", "3"],
                ErrorKind::UnknownArgument,
                "--speed",
            ),
        ];
        for (args, kind, mentions) in cases {
            let err = parse(args).unwrap_err();
            assert_eq!(err.kind(), kind, "{args:?}: {err}");
            assert!(err.to_string().contains(mentions), "{args:?}: {err}");
        }
    }

    #[test]
    fn kind_counts() {
        assert_eq!(kinds(0), (0, 0, 0));
        assert_eq!(kinds(1), (1, 0, 0));
        assert_eq!(kinds(3), (1, 2, 0));
        assert_eq!(kinds(5), (1, 3, 1));
        assert_eq!(kinds(100_000), (2000, 6000, 92_000));
        let g = Generator::new(GeneratorConfig::default()).unwrap();
        for n in [0, 1, 2, 4, 49, 50, 51, 777] {
            let mut counts = (0, 0, 0);
            for i in 0..n {
                match g.kind(i) {
                    weir_nexmark::EventKind::Person => counts.0 += 1,
                    weir_nexmark::EventKind::Auction => counts.1 += 1,
                    weir_nexmark::EventKind::Bid => counts.2 += 1,
                }
            }
            assert_eq!(kinds(n), counts, "{n}");
        }
    }

    #[test]
    fn generates_a_file_that_parses_back_to_the_generators_events() {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("sub/events.jsonl");
        let args = parse(&[
            "--events",
            "2500",
            "--rate",
            "1000",
            "--seed",
            "9",
            "--out-of-order-ms",
            "100",
            "--output",
            output.to_str().unwrap(),
        ])
        .unwrap();
        generate(args).unwrap();
        let file = read_events(&output).unwrap();
        assert!(file.malformed.is_empty());
        let expected: Vec<Event> = Generator::new(GeneratorConfig {
            count: Some(2500),
            rate: 1000,
            seed: 9,
            out_of_order_ms: 100,
            ..Default::default()
        })
        .unwrap()
        .iter()
        .collect();
        assert_eq!(file.events, expected);
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["events.jsonl"], "no temporary file is left");
    }

    #[test]
    fn an_unwritable_output_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let output = blocker.join("events.jsonl");
        let args = parse(&["--events", "10", "--output", output.to_str().unwrap()]).unwrap();
        let err = format!("{:#}", generate(args).unwrap_err());
        assert!(err.contains(&*blocker.to_string_lossy()), "{err}");
    }
}
