//! `weir`: run and explain Weir jobs from the command line.
//!
//! ```text
//! weir run wordcount --input data/sample --output counts.tsv [--parallelism N]
//! weir explain wordcount [--dot]
//! weir nexmark generate --events N [--rate R] [--seed S] [--out-of-order-ms M] --output events.jsonl
//! weir score --input rows.csv --url http://127.0.0.1:8501/v1/models/NAME:predict --output scores.csv
//! weir model-server [--addr 127.0.0.1:8501] [--latency-ms 5]
//! weir flow validate|run|status|provenance|lineage|processors ...
//! weir snapshots list --state-dir DIR
//! weir jobs list|stop [--savepoint] --url http://127.0.0.1:8080
//! weir serve [--ui ADDR] [--ui-token TOKEN] [--flow FLOW.yaml --repo DIR]
//! weir top --url http://127.0.0.1:8080 [--once]
//! ```
//!
//! `weir run wordcount`, `weir nexmark run` and `weir score` take `--state-dir DIR
//! [--snapshot-interval-ms N] [--guarantee G] [--savepoint] [--restore-from ID|PATH]`: see the
//! `snapshots` module; rerunning a killed command resumes it, and with `--savepoint` Ctrl-C
//! stops it with a savepoint.
//!
//! `weir run`, `weir nexmark run`, `weir score` and `weir flow run` take `--ui ADDR
//! [--ui-token TOKEN]`: the dashboard, REST API and Prometheus metrics of `weir_observe`
//! while they run (see the `ui` module). `--log-format json` (any command) writes the logs
//! as JSON lines, with `job` and `vertex` (or `processor`) fields where the runtime logs
//! about one.
//!
//! Exit code 0 on success; otherwise a one-line cause on standard error and a non-zero code
//! (2 for a bad command line, 1 for anything else).
//!
//! The binary itself is the workspace's root package (`src/main.rs`), so that `cargo run`
//! from the repository root runs it and the root end-to-end tests can find it.

/// Writes a line to standard output and returns the `io::Result`, so a command passes a closed
/// pipe (`weir snapshots list | head`) up with `?`, and [`main`] ends quietly.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// [`outln!`] without the newline.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod commands;
pub mod jobs;
pub mod model_server;
mod progress;
mod snapshots;
mod top;
mod ui;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Weir: typed batch and streaming pipelines on every core.
#[derive(Debug, Parser)]
#[command(name = "weir", version, about)]
struct Cli {
    /// How logs are written to standard error: text lines, or JSON objects (one per line,
    /// with the event's fields, such as `job` and `vertex`). `WEIR_LOG` sets the level.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// The format of the logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (tracing-subscriber's JSON formatter).
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(
        after_help = "Example:\n  weir run wordcount --input data/sample --output counts.tsv"
    )]
    /// Run a built-in job.
    Run {
        #[command(subcommand)]
        job: commands::run::Job,
    },
    #[command(after_help = "Example:\n  weir explain wordcount --dot | dot -Tsvg > plan.svg")]
    /// Print the plan of a built-in job: its vertices, fused stages and edges.
    Explain {
        #[command(subcommand)]
        job: commands::explain::Job,
    },
    #[command(
        after_help = "Example:\n  weir nexmark generate --events 1000000 --rate 10000 --output events.jsonl\n  weir nexmark run --query q5 --input events.jsonl --output q5.csv --check"
    )]
    /// NEXMark, the streaming benchmark: generate event files (and run the queries).
    Nexmark {
        #[command(subcommand)]
        command: commands::nexmark::Command,
    },
    #[command(
        after_help = "Example:\n  weir model-server &\n  weir score --input data/score/customers.csv --url http://127.0.0.1:8501/v1/models/demo:predict --output scores.csv"
    )]
    /// Score a CSV data set (an `id` column and numeric features) against a model server
    /// that speaks the TensorFlow Serving / KServe v1 REST protocol.
    Score(commands::score::ScoreArgs),
    #[command(
        after_help = "Example:\n  weir flow validate examples/flows/lines.yaml\n  weir flow run examples/flows/lines.yaml --repo target/flow-repo --until-idle"
    )]
    /// NiFi-style flows: validate, run (durable queues, provenance), inspect a repository.
    Flow {
        #[command(subcommand)]
        command: commands::flow::Command,
    },
    #[command(after_help = "Example:\n  weir model-server --addr 127.0.0.1:8501 --latency-ms 5")]
    /// Serve a demo model (TensorFlow Serving v1 REST) for `weir score`, until interrupted.
    ModelServer(commands::model_server::ModelServerArgs),
    #[command(after_help = "Example:\n  weir example affinity --owners 4")]
    /// Run a small demonstration (data affinity, ...) and print what it shows.
    Example {
        #[command(subcommand)]
        example: commands::example::Example,
    },
    #[command(
        after_help = "Example:\n  weir nexmark run --query q5 --events 100000000 --wall-rate 200000 --ui 127.0.0.1:8080 &\n  weir top --url http://127.0.0.1:8080"
    )]
    /// A live terminal view of the jobs and flows of a process started with --ui: rates,
    /// queue fill and backpressure per vertex, processor and connection.
    Top(top::TopArgs),
    #[command(
        after_help = "Example:\n  weir jobs list --url http://127.0.0.1:8080\n  weir jobs stop 1 --url http://127.0.0.1:8080 --savepoint"
    )]
    /// List and stop the jobs of a process started with --ui (stop with a savepoint, as
    /// Flink's `stop`).
    Jobs {
        #[command(subcommand)]
        command: commands::job_control::Command,
    },
    #[command(after_help = "Example:\n  weir snapshots list --state-dir target/state | head")]
    /// Inspect the snapshots jobs took with --state-dir.
    Snapshots {
        #[command(subcommand)]
        command: SnapshotsCommand,
    },
    #[command(
        after_help = "Example:\n  weir serve --ui 127.0.0.1:8080 --flow examples/flows/lines.yaml --repo target/flow-repo"
    )]
    /// Serve the dashboard, REST API and Prometheus metrics, alone or with a flow, until
    /// interrupted.
    Serve(ui::ServeArgs),
}

/// The `weir snapshots` subcommands.
#[derive(Debug, Subcommand)]
enum SnapshotsCommand {
    #[command(after_help = "Example:\n  weir snapshots list --state-dir target/state")]
    /// List every job's snapshots: id, time, size, duration, and each vertex's share.
    List(snapshots::ListArgs),
}

/// Parses the command line, runs the command and reports the outcome.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                // A failed job is reported once, by the command; the runtime's own log line
                // about it would repeat the message.
                .unwrap_or_else(|_| "warn,weir_core::job=off".into()),
        )
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, and never when NO_COLOR asks for none
        // (https://no-color.org): a log written to a file or a pipe is plain text.
        .with_ansi(colours_wanted(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR"),
        ));
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let result = match cli.command {
        Command::Run { job } => commands::run::run(job),
        Command::Explain { job } => commands::explain::explain(job),
        Command::Nexmark { command } => commands::nexmark::run(command),
        Command::Score(args) => commands::score::score(args),
        Command::ModelServer(args) => commands::model_server::model_server(args),
        Command::Flow { command } => commands::flow::run(command),
        Command::Example { example } => commands::example::run(example),
        Command::Top(args) => top::top(args),
        Command::Jobs { command } => commands::job_control::run(command),
        Command::Snapshots {
            command: SnapshotsCommand::List(args),
        } => snapshots::list(&args),
        Command::Serve(args) => ui::serve(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`| head`): what it wanted, it has.
        Err(e) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, skipping a cause whose text the message already holds
/// (many errors repeat their source in their own message).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line.replace('\n', " ")
}

/// Whether `e` comes from writing to a pipe whose reader has gone.
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether to colour a stream: only a terminal, and not when `NO_COLOR` is set to anything
/// but the empty string.
fn colours_wanted(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_anywhere_in_the_chain_is_a_closed_pipe() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(closed_pipe(&anyhow::Error::from(pipe).context("listing")));
        let json = serde_json::Error::io(std::io::ErrorKind::BrokenPipe.into());
        assert!(closed_pipe(&anyhow::Error::from(json)));
        let other = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(!closed_pipe(&anyhow::Error::from(other)));
    }

    /// Every command's help ends in examples, and every example is a command line this
    /// parser accepts (a `| ...`, `> ...` or `&` after it is the shell's).
    #[test]
    fn every_help_has_examples_that_parse() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: Vec<String>, seen: &mut usize) {
            let name = path.join(" ");
            if !path.is_empty() {
                let help = cmd
                    .get_after_help()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                let examples: Vec<&str> = help
                    .lines()
                    .map(str::trim)
                    .filter(|l| l.starts_with("weir "))
                    .collect();
                assert!(!examples.is_empty(), "`weir {name} --help` has no example");
                for example in examples {
                    let command = example.split(['|', '>', '&']).next().unwrap_or_default();
                    let words: Vec<&str> = command
                        .split_whitespace()
                        .map(|w| w.trim_matches('\''))
                        .collect();
                    if let Err(e) = Cli::try_parse_from(&words) {
                        panic!("the example `{example}` of `weir {name}` does not parse: {e}");
                    }
                    *seen += 1;
                }
            }
            for sub in cmd.get_subcommands() {
                let mut p = path.clone();
                p.push(sub.get_name().to_string());
                walk(sub, p, seen);
            }
        }
        let mut seen = 0;
        walk(&Cli::command(), Vec::new(), &mut seen);
        assert!(seen >= 20, "{seen} examples");
    }

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours_wanted(true, None));
        assert!(!colours_wanted(false, None));
        assert!(!colours_wanted(true, Some("1".into())));
        // An empty NO_COLOR does not count, as no-color.org says.
        assert!(colours_wanted(true, Some("".into())));
    }
}
