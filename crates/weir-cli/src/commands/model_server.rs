//! `weir model-server`: serves the demo model of [`crate::model_server`] until interrupted.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::model_server::{Failure, ServerConfig, serve};

/// Arguments of `weir model-server`.
#[derive(Debug, Args)]
pub struct ModelServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8501")]
    pub addr: SocketAddr,
    /// Time each request takes, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Values per prediction: 1 gives a number, more give a list.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub outputs: u32,
    /// Fail the first N requests (a transient outage).
    #[arg(long, conflicts_with = "fail_on")]
    pub fail_first: Option<u64>,
    /// Fail every request holding a row whose first feature equals this value.
    #[arg(long)]
    pub fail_on: Option<f64>,
    /// The HTTP status of an injected failure.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u16).range(400..=599))]
    pub fail_status: u16,
}

/// Runs the server; returns only if it cannot start.
pub fn model_server(args: ModelServerArgs) -> anyhow::Result<()> {
    let failure = match (args.fail_first, args.fail_on) {
        (Some(count), _) => Failure::FirstRequests {
            count,
            status: args.fail_status,
        },
        (None, Some(value)) => Failure::Poison {
            value,
            status: args.fail_status,
        },
        (None, None) => Failure::Never,
    };
    let (addr, _server) = serve(ServerConfig {
        addr: args.addr,
        latency: Duration::from_millis(args.latency_ms),
        outputs: args.outputs as usize,
        failure,
        record: false,
    })
    .context("cannot start the model server")?;
    outln!("serving http://{addr}/v1/models/NAME:predict (any NAME); stop with Ctrl-C")?;
    loop {
        std::thread::park();
    }
}
