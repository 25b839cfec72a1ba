//! `weir explain JOB`: prints a built-in job's plan.

use crate::jobs::wordcount;
use clap::{Args, Subcommand};

/// The jobs `weir explain` knows.
#[derive(Debug, Subcommand)]
pub enum Job {
    #[command(
        after_help = "Example:\n  weir explain wordcount\n  weir explain wordcount --dot | dot -Tsvg > plan.svg"
    )]
    /// The word-count job.
    Wordcount(ExplainArgs),
}

/// Arguments of `weir explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Print Graphviz DOT instead of text.
    #[arg(long)]
    pub dot: bool,
}

/// Prints the plan of `job`.
pub fn explain(job: Job) -> anyhow::Result<()> {
    match job {
        Job::Wordcount(args) => {
            let pipeline = wordcount::preview();
            let plan = if args.dot {
                pipeline.explain_dot()?
            } else {
                pipeline.explain()?
            };
            out!("{plan}")?;
            Ok(())
        }
    }
}
