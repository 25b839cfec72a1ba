//! `weir nexmark ...`: NEXMark event files, and (with the streaming engine) the queries.
//!
//! ```text
//! weir nexmark generate --events N [--rate R] [--seed S] [--out-of-order-ms M]
//!                       [--base-time-ms T] --output events.jsonl
//! ```
//!
//! The event format and the generator's rules are those of `shared/nexmark/README.md`; see
//! the `weir_nexmark` crate.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use weir::{Executor, ExecutorConfig, JobConfig, Pipeline, sinks};
use weir_nexmark::generator::{
    AUCTION_PROPORTION, DEFAULT_BASE_TIME_MS, DEFAULT_RATE, GeneratorConfig, TOTAL_PROPORTION,
};
use weir_nexmark::{Event, source};

use crate::progress;

/// The `weir nexmark` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a NEXMark event file (JSON Lines, one event per line, in event order) with the
    /// built-in deterministic generator.
    Generate(GenerateArgs),
    // ---------------------------------------------------------------------------------------
    // TODO(issue 4, streaming engine): `Run(RunArgs)` goes here:
    //   weir nexmark run --query q5 --input events.jsonl --output out.csv
    //                    [--allowed-lag-ms 4000] [--parallelism N]
    //   weir nexmark run --query q5 --events N [--rate R] [--output out.csv]
    // `weir_nexmark::Query` parses the query name (with a clear error for an unknown one),
    // `weir_nexmark::source::{replay, generator}` give the inputs, and
    // `weir_nexmark::reference::csv_rows` the expected rows for a check mode.
    // ---------------------------------------------------------------------------------------
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
    /// The time of the first event, in ms since the Unix epoch.
    #[arg(long, default_value_t = DEFAULT_BASE_TIME_MS, allow_negative_numbers = true)]
    pub base_time_ms: i64,
    /// The file to write. It appears, complete, only when generation succeeds.
    #[arg(long)]
    pub output: PathBuf,
}

/// Runs a `weir nexmark` subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Generate(args) => generate(args),
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
            JobConfig {
                name: "nexmark-generate".into(),
                default_parallelism: Some(1),
                ..Default::default()
            },
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
    println!(
        "nexmark generate: {written} events ({persons} persons, {auctions} auctions, {bids} bids), {:.1} MB in {elapsed:.2} s ({:.0} events/s) to {}",
        bytes as f64 / 1e6,
        written as f64 / elapsed.max(1e-9),
        args.output.display(),
    );
    Ok(())
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
