//! Weir's observability server: what a browser, `weir top` or Prometheus sees of the jobs and
//! flows running in this process.
//!
//! One HTTP server per process (axum, on Weir's shared tokio runtime) serves:
//!
//! - REST under `/api/v1`: jobs (their DAG, per-vertex metrics and rates, cancel) and flows
//!   (processors, connections, start and stop, provenance, lineage, content), with its
//!   OpenAPI document at `/api/v1/openapi.json`;
//! - server-sent events at `/api/v1/events`: the job and flow lists every second;
//! - Prometheus metrics at `/metrics`;
//! - the dashboard, embedded in the binary, at `/`.
//!
//! ```
//! use weir::prelude::*;
//! use weir::{Executor, ExecutorConfig, JobConfig};
//! use weir_observe::{Registry, Server, ServerConfig};
//!
//! let registry = Registry::new();
//! let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), None).unwrap();
//! let server = Server::start(&config, registry.clone()).unwrap();
//! eprintln!("dashboard at {}", server.url());
//!
//! let p = Pipeline::new();
//! let (sink, counts) = sinks::collection::list();
//! p.read_from(sources::collection::items(vec!["to be or not to be".to_string()]))
//!     .flat_map(|line: String| {
//!         // Lowercase words: runs of letters and digits.
//!         line.split(|c: char| !c.is_alphanumeric())
//!             .filter(|w| !w.is_empty())
//!             .map(str::to_lowercase)
//!             .collect::<Vec<_>>()
//!     })
//!     .grouping_key(|word: &String| word.clone())
//!     .aggregate(aggregate::counting())
//!     .write_to(sink);
//! let executor = Executor::new(ExecutorConfig::default()).unwrap();
//! let job = p.submit(&executor, JobConfig::default()).unwrap();
//! registry.add_job(job.monitor());
//! job.join().unwrap();
//! assert_eq!(counts.take().len(), 4);
//! ```
//!
//! Watching costs the jobs nothing per item: the server reads the counters the runtime
//! keeps anyway, and a sampler task records them once per second for the rates (see
//! [`registry`]). A server bound beyond loopback needs a token, checked on every request
//! ([`ServerConfig`]). The JSON bodies are the types of [`model`]; the layout of the crate
//! is described in its `ARCHITECTURE.md`.

#![forbid(missing_docs)]

pub mod api;
pub mod assets;
mod guard;
pub mod model;
pub mod process;
pub mod prometheus;
pub mod registry;
pub mod server;
mod views;

pub use registry::Registry;
pub use server::{ServeError, Server, ServerConfig, TOKEN_ENV};
