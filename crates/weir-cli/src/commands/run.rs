//! `weir run JOB`: runs a built-in job and prints a one-line summary.

use std::path::PathBuf;
use std::time::Instant;

use crate::jobs::wordcount;
use anyhow::Context;
use clap::{Args, Subcommand};
use weir::{JobConfig, sinks, sources};

use crate::progress;
use crate::snapshots::{Ended, SnapshotArgs, Snapshots, job_name, path_part};
use crate::ui::UiArgs;

/// The jobs `weir run` knows.
#[derive(Debug, Subcommand)]
pub enum Job {
    #[command(
        after_help = "Example:\n  weir run wordcount --input data/sample --output counts.tsv --parallelism 2\n  weir run wordcount --input 'books/*.txt' --output counts.tsv --state-dir target/state"
    )]
    /// Count the words of text files: one `word<TAB>count` line per distinct word, most
    /// frequent first.
    Wordcount(WordcountArgs),
}

/// Arguments of `weir run wordcount`.
#[derive(Debug, Args)]
pub struct WordcountArgs {
    /// A text file, a directory of text files, or a glob pattern.
    #[arg(long)]
    pub input: PathBuf,
    /// The file to write the counts to.
    #[arg(long, value_parser = super::output_file())]
    pub output: PathBuf,
    /// Worker threads.
    #[command(flatten)]
    pub workers: super::WorkerArgs,
    /// Snapshots: the counts are committed to the output once, when the job ends; see
    /// [`run_wordcount`].
    #[command(flatten)]
    pub snapshots: SnapshotArgs,
    /// The observability server.
    #[command(flatten)]
    pub ui: UiArgs,
}

/// Runs `job`.
pub fn run(job: Job) -> anyhow::Result<()> {
    match job {
        Job::Wordcount(args) => run_wordcount(args),
    }
}

/// Word count with `--state-dir`: its counting and sorting keep batch state that snapshots do
/// not save, so they hold snapshots back until they complete (see ARCHITECTURE.md,
/// snapshots). The output is a transactional file sink: the counts become visible once, with
/// the terminal snapshot. A run killed before that starts over when rerun; one killed after it
/// finds its job already done, and only finishes the commit.
fn run_wordcount(args: WordcountArgs) -> anyhow::Result<()> {
    let ui = args.ui.start()?;
    let input = sources::files::text_blocks(&args.input)
        .with_context(|| format!("input '{}'", args.input.display()))?;
    let total_bytes = input.size_hint().unwrap_or(0);
    let sink = sinks::files::text_with(&args.output, wordcount::format_line);
    let pipeline = wordcount::pipeline(input, sink);
    let (executor, parallelism) = args.workers.executor()?;
    let started = Instant::now();
    let config = JobConfig::default()
        // The same command gives the same name, so a rerun finds its snapshots.
        .with_name(job_name(
            "wordcount",
            &[path_part(&args.input), path_part(&args.output)],
        ))
        .with_default_parallelism(parallelism);
    let snapshots = args.snapshots.snapshots();
    let name = config.name.clone();
    let job = Snapshots::submit(snapshots.as_ref(), &pipeline, &executor, config)
        .context("cannot start word count")?;
    if let Some(ui) = &ui {
        ui.watch_job(&job);
    }
    let metrics = progress::watch(&job, total_bytes, "bytes", progress::Unit::Bytes);
    let ended = Snapshots::join(snapshots.as_ref(), job).context("word count failed")?;
    if let Ended::Stopped = ended {
        return Ok(());
    }
    Snapshots::finished(snapshots.as_ref(), &name, "word count")?;
    let elapsed = started.elapsed().as_secs_f64();
    let lines = progress::counter(&metrics, "lines");
    let bytes = progress::counter(&metrics, "bytes");
    let invalid = progress::counter(&metrics, "invalid_utf8_lines");
    let binary = progress::counter(&metrics, "binary_files_skipped");
    let words = progress::counter(&metrics, "records_written");
    outln!(
        "wordcount: {lines} lines, {:.1} MB in {elapsed:.2} s ({:.1} MB/s, {:.0} lines/s); {words} distinct words; {invalid} lines with invalid UTF-8; {binary} binary files skipped; parallelism {parallelism}",
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / elapsed.max(1e-9),
        lines as f64 / elapsed.max(1e-9),
    )?;
    Ok(())
}
