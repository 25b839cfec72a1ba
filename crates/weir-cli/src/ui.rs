//! `--ui ADDR` and `--ui-token TOKEN`: the observability server (dashboard, REST API,
//! Prometheus metrics) of a long-running command, and `weir serve`.
//!
//! ```text
//! weir nexmark run --query q5 --events 100000000 --ui 127.0.0.1:8080
//! weir flow run flow.yaml --repo repo --ui 0.0.0.0:8080 --ui-token s3cret
//! weir serve --ui 127.0.0.1:8080 [--flow flow.yaml --repo repo]
//! ```
//!
//! The server is bound before the command starts its work, so a bad address, a taken port or
//! a non-loopback address without a token stops the command before anything runs. Once it
//! listens, `weir: dashboard at http://ADDR/` goes to standard error (with port 0 the real
//! port, so scripts and tests can read it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use weir::Job;
use weir_flow::engine::Engine;
use weir_observe::{Registry, Server, ServerConfig, TOKEN_ENV};

/// `--ui` and `--ui-token`, for every command that runs for a while.
#[derive(Debug, Clone, Args)]
pub struct UiArgs {
    /// Serve the dashboard, the REST API (/api/v1) and Prometheus metrics (/metrics) on ADDR
    /// while the command runs (127.0.0.1:8080; port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    pub ui: Option<SocketAddr>,
    /// The token every request to --ui must carry (`Authorization: Bearer TOKEN`); required
    /// when ADDR is not a loopback address.
    #[arg(long, value_name = "TOKEN", env = TOKEN_ENV, hide_env_values = true)]
    pub ui_token: Option<String>,
    /// Also answer requests for this host name (repeatable); by default only the bound
    /// address, localhost, 127.0.0.1 and [::1] are, which keeps other web pages out.
    #[arg(long, value_name = "NAME", requires = "ui")]
    pub ui_allowed_host: Vec<String>,
}

/// A running observability server and what it shows. Dropping it stops the server.
#[derive(Debug)]
pub struct Ui {
    registry: Registry,
    _server: Server,
}

impl UiArgs {
    /// Starts the server when `--ui` is given, and says where on standard error.
    ///
    /// # Errors
    /// A non-loopback address without a token, an empty token, or an address that cannot be
    /// bound.
    pub fn start(&self) -> anyhow::Result<Option<Ui>> {
        let Some(addr) = self.ui else {
            return Ok(None);
        };
        start(addr, self.ui_token.clone(), self.ui_allowed_host.clone()).map(Some)
    }
}

/// Binds `addr` and serves an empty registry; prints the URL.
fn start(addr: SocketAddr, token: Option<String>, hosts: Vec<String>) -> anyhow::Result<Ui> {
    let config = ServerConfig::new(addr, token)?.allow_hosts(hosts)?;
    let registry = Registry::new();
    let server = Server::start(&config, registry.clone())?;
    eprintln!("weir: dashboard at {}", server.url());
    Ok(Ui {
        registry,
        _server: server,
    })
}

impl Ui {
    /// Shows `job` from now on (and after it ends, until the command exits).
    pub fn watch_job(&self, job: &Job) {
        self.registry.add_job(job.monitor());
    }

    /// Shows the flow `engine` runs.
    pub fn watch_flow(&self, engine: &Engine) {
        self.registry.add_flow(engine.monitor());
    }
}

/// Arguments of `weir serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub ui: SocketAddr,
    /// The token every request must carry; required when ADDR is not a loopback address.
    #[arg(long, value_name = "TOKEN", env = TOKEN_ENV, hide_env_values = true)]
    pub ui_token: Option<String>,
    /// Also answer requests for this host name (repeatable); by default only the bound
    /// address, localhost, 127.0.0.1 and [::1] are.
    #[arg(long, value_name = "NAME")]
    pub ui_allowed_host: Vec<String>,
    /// Also run this flow definition, with its repositories in --repo.
    #[arg(long, requires = "repo")]
    pub flow: Option<PathBuf>,
    /// The flow's repository directory.
    #[arg(long, requires = "flow")]
    pub repo: Option<PathBuf>,
}

/// `weir serve`: the observability server alone, or with a flow, until SIGINT or SIGTERM.
/// A program embedding Weir does the same with `weir_observe::Server` and registers its own
/// jobs and flows.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let flow = args
        .flow
        .as_deref()
        .map(crate::commands::flow::load)
        .transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing a signal handler")?;
    }
    let ui = start(args.ui, args.ui_token, args.ui_allowed_host)?;
    let engine = match (flow, &args.repo) {
        (Some(flow), Some(repo)) => {
            let engine = Engine::start(flow, repo)
                .with_context(|| format!("starting the flow in {}", repo.display()))?;
            ui.watch_flow(&engine);
            Some(engine)
        }
        _ => None,
    };
    while !stop.load(Ordering::SeqCst) && !engine.as_ref().is_some_and(Engine::stopped) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(engine) = engine {
        engine.stop()?;
    }
    drop(ui);
    Ok(())
}
