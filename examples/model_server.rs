//! The demo model server for `weir score`, as a program of its own; `weir model-server` is
//! the same with more flags.
//!
//! ```text
//! cargo run --release --example model_server -- [ADDR] [LATENCY_MS]
//! ```
//!
//! It listens on `127.0.0.1:8501` unless told otherwise, answers
//! `POST /v1/models/NAME:predict` with `{"instances": [[...], ...]}` (see
//! `weir_cli::model_server`), and runs until interrupted.

use std::net::SocketAddr;
use std::time::Duration;

use weir_cli::model_server::{ServerConfig, serve};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:8501".to_string())
        .parse()?;
    let latency_ms: u64 = args.next().map_or(Ok(0), |s| s.parse())?;
    let (addr, _server) = serve(ServerConfig {
        addr,
        latency: Duration::from_millis(latency_ms),
        ..Default::default()
    })?;
    println!(
        "serving http://{addr}/v1/models/NAME:predict with {latency_ms} ms latency; stop with Ctrl-C"
    );
    loop {
        std::thread::park();
    }
}
