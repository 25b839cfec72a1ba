//! NiFi-style flows on Weir: flow files, durable queues, provenance and the traditional
//! engine.
//!
//! A flow is a graph of processors joined by connections (queues), written in YAML
//! ([`definition`]). The traditional engine ([`engine`]) runs it with every queue durable: a
//! processor's work is a [session](engine::session) that commits as one frame of the flow-file repository's
//! write-ahead log ([`repository`]), with content in append-only claim files and provenance
//! events in the same frame. A crash loses nothing that was committed.
//!
//! ```no_run
//! use weir_flow::{definition::Flow, engine::Engine};
//!
//! let flow = Flow::load("examples/flows/lines.yaml".as_ref()).expect("a valid flow");
//! let engine = Engine::start(flow, "target/flow-repo".as_ref()).expect("repository opens");
//! engine.wait_until_idle(std::time::Duration::from_secs(2));
//! engine.stop().expect("clean stop");
//! ```
//!
//! The layers below are crates of their own, re-exported here at their old paths: the flow
//! API (`weir-flow-api`: flow files, the expression language, the `Session` and `Processor`
//! traits, the monitor observers read), the processors (`weir-flow-processors`, which see
//! only that API) and the disk steps with their fault injection (`weir-flow-disk`).

pub mod definition;
pub mod engine;
pub mod provenance;
pub mod repository;
pub mod stateless;

/// The expression language (from `weir-flow-api`).
pub use weir_flow_api::expression;
/// Flow files and their attributes (from `weir-flow-api`).
pub use weir_flow_api::flowfile;
/// Fault injection for the flow simulator (from `weir-flow-disk`).
pub use weir_flow_disk::faults;
/// The built-in processors and the registry of custom ones (`weir-flow-processors`).
pub use weir_flow_processors as processors;
