//! `weir jobs`: list and stop the jobs of a running `weir` process over its REST API (the
//! `--ui` server), as `flink list` and `flink stop` do.
//!
//! ```text
//! weir jobs list --url http://127.0.0.1:8080
//! weir jobs stop nexmark-q5-... --url http://127.0.0.1:8080 --savepoint
//! ```

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use weir_observe::model::{CancelAccepted, JobSummary, SavepointTaken};

use crate::top::client::ApiClient;

/// How long a stop with a savepoint may take: the savepoint waits for stages that hold
/// snapshots back and for the job's queues to carry its barriers.
const SAVEPOINT_TIMEOUT: Duration = Duration::from_secs(600);

/// The `weir jobs` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(after_help = "Example:\n  weir jobs list --url http://127.0.0.1:8080")]
    /// The jobs of the process: id, status, elapsed time and name.
    List(Server),
    #[command(
        after_help = "Example:\n  weir jobs stop 1 --url http://127.0.0.1:8080 --savepoint\n  weir jobs stop nexmark-q5 --url http://127.0.0.1:8080"
    )]
    /// Stop a job: with --savepoint, take a savepoint first (the job must run with
    /// --state-dir) and print it; without, cancel it.
    Stop {
        /// The job's id, or its name (or a unique start of it).
        job: String,
        /// Take a savepoint, then stop (Flink's stop-with-savepoint).
        #[arg(long)]
        savepoint: bool,
        /// The process's server.
        #[command(flatten)]
        server: Server,
    },
}

/// Where the process's REST API is.
#[derive(Debug, Args)]
pub struct Server {
    /// The address the process printed (`weir: dashboard at URL`), e.g.
    /// http://127.0.0.1:8080.
    #[arg(long, value_parser = crate::top::parse_url)]
    pub url: String,
    /// The server's access token, sent as a bearer token.
    #[arg(long, env = "WEIR_UI_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Runs a `weir jobs` subcommand.
///
/// # Errors
/// The server cannot be reached or refuses (its message is passed on), or no job matches.
pub fn run(command: Command) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the HTTP client's runtime")?;
    match command {
        Command::List(server) => {
            let client = ApiClient::new(&server.url, server.token);
            let jobs: Vec<JobSummary> = runtime.block_on(client.get("/jobs"))?;
            for job in jobs {
                outln!(
                    "{}\t{:?}\t{:.1} s\t{}",
                    job.id,
                    job.status,
                    job.duration_ms as f64 / 1000.0,
                    job.name
                )?;
            }
            Ok(())
        }
        Command::Stop {
            job,
            savepoint,
            server,
        } => {
            let client = ApiClient::with_timeout(&server.url, server.token, SAVEPOINT_TIMEOUT);
            let jobs: Vec<JobSummary> = runtime.block_on(client.get("/jobs"))?;
            let id = pick(&jobs, &job)?;
            if savepoint {
                let taken: SavepointTaken =
                    runtime.block_on(client.post(&format!("/jobs/{id}/stop")))?;
                outln!(
                    "job {id} stopping with savepoint {} in {}",
                    taken.savepoint_id,
                    taken.location
                )?;
            } else {
                let _: CancelAccepted =
                    runtime.block_on(client.post(&format!("/jobs/{id}/cancel")))?;
                outln!("job {id} cancelling")?;
            }
            Ok(())
        }
    }
}

/// The id of the one job that `wanted` names: its id, its name, or the one name that starts
/// with it.
fn pick(jobs: &[JobSummary], wanted: &str) -> anyhow::Result<String> {
    if let Some(job) = jobs.iter().find(|j| j.id == wanted || j.name == wanted) {
        return Ok(job.id.clone());
    }
    let matching: Vec<&JobSummary> = jobs.iter().filter(|j| j.name.starts_with(wanted)).collect();
    match matching.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => anyhow::bail!("no job `{wanted}`; the jobs are: {}", named(jobs)),
        many => anyhow::bail!(
            "`{wanted}` names {} jobs: {}; give the id",
            many.len(),
            named(many.iter().copied())
        ),
    }
}

/// `ID (NAME), ...` for an error message.
fn named<'a>(jobs: impl IntoIterator<Item = &'a JobSummary>) -> String {
    jobs.into_iter()
        .map(|j| format!("{} ({})", j.id, j.name))
        .collect::<Vec<_>>()
        .join(", ")
}
