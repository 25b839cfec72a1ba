//! The API of Weir's flows: what a processor, the engines that run it and the observers of
//! a running flow share, and nothing of how the engines store or schedule.
//!
//! A processor depends on this crate alone: it is built from its validated [`Component`],
//! and each trigger works in a [`Session`] the engine gives it.
//!
//! ```
//! use weir_flow_api::expression::Template;
//! use weir_flow_api::spec::{Dynamic, ProcessorSpec, PropertyKind, PropertySpec};
//! use weir_flow_api::{BuildError, Component, ProcessError, Processor, Session, Trigger, props};
//!
//! /// Sets `greeting` on every flow file, from the `Greeting` property's template.
//! struct Greet {
//!     greeting: Template,
//! }
//!
//! static GREET: ProcessorSpec = ProcessorSpec {
//!     kind: "Greet",
//!     description: "Greets.",
//!     properties: &[PropertySpec::new("Greeting", true, Some("hi ${filename}"), PropertyKind::Expression)],
//!     relationships: &["success"],
//!     dynamic: Dynamic::None,
//!     source: false,
//! };
//!
//! impl Greet {
//!     fn new(c: &Component) -> Result<Greet, BuildError> {
//!         Ok(Greet { greeting: props::template(c, "Greeting")? })
//!     }
//! }
//!
//! impl Processor for Greet {
//!     fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
//!         let Some(ff) = session.get()? else { return Ok(Trigger::Idle) };
//!         let greeting = session
//!             .evaluate(&self.greeting, ff)
//!             .map_err(|e| ProcessError::Other(e.to_string()))?
//!             .into_owned();
//!         session.put_attribute(ff, "greeting", greeting);
//!         session.transfer(ff, "success")?;
//!         Ok(Trigger::Worked)
//!     }
//! }
//! # let _ = (&GREET, Greet::new);
//! ```
//!
//! `weir-flow` registers such a type with its spec and a factory (`Greet::new`) in a
//! `ProcessorRegistry`, and its engines run it like a built-in processor.
//!
//! - [`processor`] and [`session`]: the [`Processor`] trait and the [`Session`] it works in.
//! - [`props`]: typed reads of a component's properties.
//! - [`flowfile`]: a flow file, its attributes and where its content is.
//! - [`expression`]: NiFi's expression language over a flow file's attributes.
//! - [`spec`] and [`component`]: what a processor type accepts, and one validated processor
//!   of a flow as its processor is built from it.
//! - [`units`]: durations and sizes as NiFi writes them.
//! - [`provenance`]: the events that record what happened to each flow file.
//! - [`monitor`]: what observers see of a running flow ([`monitor::FlowMonitor`]), which the
//!   engines implement ([`monitor::MonitoredFlow`]).

pub mod component;
pub mod expression;
pub mod flowfile;
pub mod monitor;
pub mod processor;
pub mod props;
pub mod provenance;
pub mod session;
pub mod spec;
pub mod suggest;
pub mod units;

pub use component::Component;
pub use processor::{BuildError, ProcessError, Processor, StartError, Trigger};
pub use session::{FlowFileRef, Session, SessionError, SessionFactory};
pub use spec::ProcessorSpec;
