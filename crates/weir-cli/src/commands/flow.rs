//! `weir flow validate|run|status|provenance|lineage`: NiFi-style flows on the traditional
//! engine (the format is in `shared/flows/README.md`).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use weir_flow::definition::Flow;

/// The `weir flow` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a flow definition: exits 0, or 1 with every error (file, line, field).
    Validate {
        /// The flow definition (YAML).
        flow: PathBuf,
    },
}

/// Runs one `weir flow` subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Validate { flow } => {
            let flow = load(&flow)?;
            println!(
                "{}: valid ({} processors, {} connections)",
                flow.name,
                flow.processors.len(),
                flow.connections.len()
            );
            Ok(())
        }
    }
}

/// Loads and validates a definition; every validation error goes to standard error, one per
/// line, before the command fails.
fn load(path: &Path) -> anyhow::Result<Flow> {
    Flow::load(path).map_err(|errors| {
        for e in &errors.0 {
            eprintln!("{e}");
        }
        anyhow::anyhow!("{}: {} validation error(s)", path.display(), errors.0.len())
    })
}
