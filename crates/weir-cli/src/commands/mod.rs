//! One module per subcommand.

pub mod example;
pub mod explain;
pub mod flow;
pub mod job_control;
pub mod model_server;
pub mod nexmark;
pub mod processors;
pub mod run;
pub mod score;

use std::path::PathBuf;

use anyhow::Context;
use clap::builder::{PathBufValueParser, PossibleValuesParser, TypedValueParser};
use weir::{Executor, ExecutorConfig, WorkerPinning};

/// The worker threads of a command that runs a job on its own executor.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Worker threads, and instances of each parallel vertex [default: every core].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub parallelism: Option<u16>,
    /// Pin each worker thread to a CPU: `auto` when there is one worker per CPU the process
    /// may run on, so that a worker woken by another runs at once instead of queueing
    /// behind it.
    #[arg(
        long,
        default_value = "auto",
        value_parser = PossibleValuesParser::new(WorkerPinning::NAMES)
            .map(|name| name.parse::<WorkerPinning>().expect("one of the names")),
    )]
    pub pin_workers: WorkerPinning,
}

impl WorkerArgs {
    /// Starts the executor these arguments describe; returns it with its worker count.
    pub(crate) fn executor(&self) -> anyhow::Result<(Executor, usize)> {
        let mut config = ExecutorConfig {
            pinning: self.pin_workers,
            ..ExecutorConfig::default()
        };
        if let Some(p) = self.parallelism {
            config.workers = usize::from(p);
        }
        let workers = config.workers;
        let executor = Executor::new(config).context("cannot start the worker threads")?;
        Ok((executor, workers))
    }
}

/// The value parser of every `--output` that names a file: any path but `-`, refused before
/// anything runs. Such a file is written under a temporary name and renamed into place when
/// the job succeeds, which standard output cannot be; and taken as a file's name, `-` leaves
/// a file that tools reading one take for their standard input.
pub(crate) fn output_file() -> impl TypedValueParser<Value = PathBuf> {
    PathBufValueParser::new().try_map(|path: PathBuf| {
        if path.as_os_str() == "-" {
            Err(
                "standard output is not an output here (the file is written under a \
                 temporary name and renamed into place); name a file",
            )
        } else {
            Ok(path)
        }
    })
}
