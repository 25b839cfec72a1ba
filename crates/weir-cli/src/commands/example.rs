//! `weir example`: small demonstrations of what Weir does, printed as they run.

use anyhow::Context;
use clap::Subcommand;

/// The demonstrations.
#[derive(Debug, Subcommand)]
pub enum Example {
    #[command(after_help = "Example:\n  weir example affinity --owners 4")]
    /// Data affinity: three partitioned maps of `key{i}-{j} → i*j`; affinity keys put every
    /// `key{i}-*` entry on one owner, and a task at that owner sums them (15, 30, 45, 60, 75).
    Affinity {
        /// How many owners hold the maps, each a worker of the executor (the seed's cluster had
        /// 4 members).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
        owners: u16,
    },
}

/// Runs one demonstration.
///
/// # Errors
/// The demonstration failed.
pub fn run(example: Example) -> anyhow::Result<()> {
    match example {
        Example::Affinity { owners } => {
            let report = crate::jobs::affinity::run(owners as usize)
                .context("the affinity demonstration failed")?;
            out!("{}", report.render())?;
            Ok(())
        }
    }
}
