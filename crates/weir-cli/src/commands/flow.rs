//! `weir flow validate|run|status|provenance|lineage|processors`: NiFi-style flows on the
//! traditional engine (the format is in `docs/flows.md`).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Subcommand;
use weir_flow::definition::Flow;
use weir_flow::engine::{Engine, Status, status_path};
use weir_flow::provenance::{EventType, LineageLimits, ProvenanceRepository, Query};

use crate::ui::{Ui, UiArgs};

/// The `weir flow` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(after_help = "Example:\n  weir flow validate examples/flows/lines.yaml")]
    /// Check a flow definition: exits 0, or 1 with every error (file, line, field).
    Validate {
        /// The flow definition (YAML).
        flow: PathBuf,
    },
    #[command(
        after_help = "Example:\n  weir flow run examples/flows/lines.yaml --repo target/flow-repo --until-idle\n  weir flow run examples/flows/lines.yaml --repo target/flow-repo --ui 127.0.0.1:8080"
    )]
    /// Run a flow with its repositories in DIR; a restart with the same DIR recovers every
    /// queued flow file. SIGINT or SIGTERM stops it cleanly.
    Run {
        /// The flow definition (YAML).
        flow: PathBuf,
        /// Directory of the flow-file, content and provenance repositories.
        #[arg(long)]
        repo: PathBuf,
        /// Exit 0 once every queue is empty and nothing was produced for 2 s.
        #[arg(long)]
        until_idle: bool,
        /// The observability server.
        #[command(flatten)]
        ui: UiArgs,
    },
    #[command(after_help = "Example:\n  weir flow status --repo target/flow-repo")]
    /// Each connection's queued count and bytes, and each processor's counts.
    Status {
        /// The repository directory.
        #[arg(long)]
        repo: PathBuf,
    },
    #[command(
        after_help = "Example:\n  weir flow provenance --repo target/flow-repo --component write-even --newest-first --limit 20\n  weir flow provenance --repo target/flow-repo --type DROP | head"
    )]
    /// Provenance events as JSON Lines.
    Provenance {
        /// The repository directory.
        #[arg(long)]
        repo: PathBuf,
        /// Only this flow file's events (its uuid).
        #[arg(long)]
        flowfile: Option<String>,
        /// Only this component's events.
        #[arg(long)]
        component: Option<String>,
        /// Only events at or after this time (RFC 3339, or ms since the epoch).
        #[arg(long)]
        since: Option<String>,
        /// Only events of this type (CREATE, RECEIVE, SEND, DROP, FORK, ...).
        #[arg(long = "type")]
        event_type: Option<String>,
        /// At most this many events.
        #[arg(long, default_value_t = 100_000)]
        limit: usize,
        /// The newest events first (with --limit, the newest ones); default oldest first,
        /// as a log reads.
        #[arg(long)]
        newest_first: bool,
    },
    #[command(
        after_help = "Example:\n  weir flow lineage --repo target/flow-repo --flowfile 6f1c2d3e-0a4b-4c5d-8e9f-102132435465"
    )]
    /// A flow file's lineage: parents, children and every event, as JSON, within
    /// --depth hops and --max-nodes flow files. When a limit left related flow files out,
    /// `truncated` is true, `frontier` names the flow files with more parents or children
    /// beyond (ask for one's lineage to go on from it), and a note on stderr says so.
    Lineage {
        /// The repository directory.
        #[arg(long)]
        repo: PathBuf,
        /// The flow file's uuid.
        #[arg(long)]
        flowfile: String,
        /// Hops from the flow file: 0 is the flow file alone, 1 adds its parents and
        /// children, 2 its siblings and grandparents, ...
        #[arg(long, default_value_t = LineageLimits::DEFAULT_DEPTH)]
        depth: u32,
        /// At most this many flow files (at least 1).
        #[arg(long, default_value_t = LineageLimits::DEFAULT_MAX_FLOWFILES,
              value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        max_nodes: usize,
    },
    #[command(
        after_help = "Example:\n  weir flow processors\n  weir flow processors PutFile\n  weir flow processors RouteOnAttribute --format json | jq '.properties[].name'\n  weir flow processors --format markdown > processors.md"
    )]
    /// The built-in processor types and what each does, or one type in full.
    ///
    /// With TYPE: each property (whether it is required, its default, allowed values, kind of
    /// value and description), the type's relationships, what dynamic properties mean, and
    /// whether it is a source.
    Processors(super::processors::ProcessorsArgs),
}

/// Runs one `weir flow` subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Validate { flow } => {
            let flow = load(&flow)?;
            for warning in weir_flow::stateless::warnings(&flow) {
                eprintln!("warning: {warning}");
            }
            outln!(
                "{}: valid ({} processors, {} connections)",
                flow.name,
                flow.processors.len(),
                flow.connections.len()
            )?;
            Ok(())
        }
        Command::Run {
            flow,
            repo,
            until_idle,
            ui,
        } => {
            let flow = load(&flow)?;
            let ui = ui.start()?;
            run_flow(flow, &repo, until_idle, ui.as_ref())
        }
        Command::Status { repo } => status(&repo),
        Command::Provenance {
            repo,
            flowfile,
            component,
            since,
            event_type,
            limit,
            newest_first,
        } => {
            let since_ms = since.map(|s| parse_time(&s)).transpose()?;
            let event_type = event_type
                .map(|t| {
                    EventType::parse(&t)
                        .ok_or_else(|| anyhow::anyhow!("--type {t}: unknown event type"))
                })
                .transpose()?;
            let store = open_provenance(&repo)?;
            let events = store.query(
                &Query {
                    flowfile,
                    component,
                    since_ms,
                    until_ms: None,
                    event_type,
                    newest_first,
                },
                limit,
            )?;
            let mut out = std::io::stdout().lock();
            for e in events {
                serde_json::to_writer(&mut out, &e)?;
                writeln!(out)?;
            }
            Ok(())
        }
        Command::Lineage {
            repo,
            flowfile,
            depth,
            max_nodes,
        } => {
            let store = open_provenance(&repo)?;
            let limits = LineageLimits {
                depth,
                max_flowfiles: max_nodes,
            };
            let lineage = store.lineage(&flowfile, limits)?;
            if lineage.events.is_empty() {
                anyhow::bail!("no provenance for flow file {flowfile}");
            }
            outln!("{}", serde_json::to_string_pretty(&lineage)?)?;
            if lineage.truncated {
                eprintln!(
                    "note: lineage truncated at --depth {depth} / --max-nodes {max_nodes}: \
                     {} flow files shown, {} more related ones left out; `frontier` lists \
                     the flow files they hang from (ask for one's lineage to go on)",
                    lineage.flowfiles.len(),
                    lineage.omitted
                );
            }
            Ok(())
        }
        Command::Processors(args) => super::processors::run(args),
    }
}

fn parse_time(s: &str) -> anyhow::Result<i64> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .with_context(|| {
            format!("--since {s}: not RFC 3339 (2026-11-30T12:00:00Z) nor ms since the epoch")
        })
}

fn open_provenance(repo: &Path) -> anyhow::Result<ProvenanceRepository> {
    let dir = repo.join("provenance");
    if !dir.exists() {
        anyhow::bail!("{}: no provenance repository here", repo.display());
    }
    ProvenanceRepository::open(&dir, Duration::from_secs(u64::MAX / 4), u64::MAX)
        .with_context(|| format!("opening {} (is the flow still running?)", dir.display()))
}

fn status(repo: &Path) -> anyhow::Result<()> {
    let queues = weir_flow::repository::journal::inspect(repo)
        .with_context(|| format!("reading the repository in {}", repo.display()))?;
    outln!("{:<50} {:>12} {:>14}", "connection", "queued", "bytes")?;
    for (key, count, bytes) in &queues {
        outln!("{key:<50} {count:>12} {bytes:>14}")?;
    }
    let path = status_path(repo);
    if let Ok(text) = std::fs::read_to_string(&path) {
        let s: Status =
            serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
        outln!()?;
        outln!(
            "{:<30} {:<26} {:>10} {:>10} {:>10} {:>9}",
            "processor",
            "type",
            "in",
            "out",
            "commits",
            "failures"
        )?;
        for c in s.components {
            outln!(
                "{:<30} {:<26} {:>10} {:>10} {:>10} {:>9}",
                c.name,
                c.kind,
                c.flowfiles_in,
                c.flowfiles_out,
                c.commits,
                c.failures
            )?;
        }
    }
    Ok(())
}

fn run_flow(flow: Flow, repo: &Path, until_idle: bool, ui: Option<&Ui>) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while stopping ends the process at once (exit code 130): what
        // was acknowledged is in the journal, and the next run recovers it. Registered
        // before the flag, so the first signal only sets it.
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))
            .context("installing a signal handler")?;
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing a signal handler")?;
    }
    // A signal also writes a byte here, so the loop below wakes at once instead of polling
    // the flag: a quiet flow's process then sleeps for seconds at a time.
    let (mut signalled, signal_pipe) =
        std::os::unix::net::UnixStream::pair().context("creating the signal pipe")?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let pipe = signal_pipe
            .try_clone()
            .context("creating the signal pipe")?;
        signal_hook::low_level::pipe::register(signal, pipe)
            .context("installing a signal handler")?;
    }
    let engine = Engine::start(flow, repo)
        .with_context(|| format!("starting the flow in {}", repo.display()))?;
    if let Some(ui) = ui {
        ui.watch_flow(&engine);
    }
    let terminal = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last = (Instant::now(), 0u64);
    let mut rate = 0.0;
    // The status line and `--until-idle` want a look every 100 ms; otherwise the loop only
    // notices a flow that stopped by itself (a failure), within a second.
    let period = if terminal || until_idle {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    };
    signalled
        .set_read_timeout(Some(period))
        .context("setting the signal pipe's timeout")?;
    loop {
        // A signal's byte or the timeout: either way, look.
        let _ = std::io::Read::read(&mut signalled, &mut [0u8; 16]);
        if stop.load(Ordering::SeqCst)
            || engine.stopped()
            || (until_idle && engine.is_idle(Duration::from_secs(2)))
        {
            break;
        }
        if terminal && last.0.elapsed() >= Duration::from_millis(500) {
            let s = engine.status();
            let queued: u64 = s.connections.iter().map(|c| c.count).sum();
            let bytes: u64 = s.connections.iter().map(|c| c.bytes).sum();
            let done: u64 = s.components.iter().map(|c| c.flowfiles_in).sum();
            rate = (done - last.1) as f64 / last.0.elapsed().as_secs_f64();
            last = (Instant::now(), done);
            eprint!(
                "\r\x1b[2K{}: queued {queued} flow files, {bytes} bytes; {rate:.0} flow files/s; {:.0?}",
                s.flow,
                started.elapsed()
            );
        }
    }
    let _ = rate;
    if terminal {
        eprintln!();
    }
    let s = engine.status();
    engine.stop()?;
    let queued: u64 = s.connections.iter().map(|c| c.count).sum();
    let processed: u64 = s.components.iter().map(|c| c.flowfiles_in).sum();
    eprintln!(
        "{}: stopped after {:.1?}; {processed} flow files processed, {queued} queued",
        s.flow,
        started.elapsed()
    );
    Ok(())
}

/// Loads and validates a definition; every validation error goes to standard error, one per
/// line, before the command fails.
pub(crate) fn load(path: &Path) -> anyhow::Result<Flow> {
    Flow::load(path).map_err(|errors| {
        for e in &errors.0 {
            eprintln!("{e}");
        }
        anyhow::anyhow!("{}: {} validation error(s)", path.display(), errors.0.len())
    })
}
