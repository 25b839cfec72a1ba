//! The API of Weir's flows: what a processor, the engines that run it and the observers of
//! a running flow share, and nothing of how the engines store or schedule.
//!
//! ```
//! use std::borrow::Cow;
//! use weir_flow_api::expression::Template;
//! use weir_flow_api::flowfile::Attributes;
//!
//! let mut attributes = Attributes::new();
//! attributes.insert("filename", "a.txt");
//! let t = Template::parse("out/${filename:toUpper()}").unwrap();
//! let value = t.evaluate(&|k| attributes.get(k).map(Cow::Borrowed)).unwrap();
//! assert_eq!(value, "out/A.TXT");
//! ```
//!
//! - [`flowfile`]: a flow file, its attributes and where its content is.
//! - [`expression`]: NiFi's expression language over a flow file's attributes.
//! - [`spec`] and [`component`]: what a processor type accepts, and one validated processor
//!   of a flow as its processor is built from it.
//! - [`units`]: durations and sizes as NiFi writes them.
//! - [`provenance`]: the events that record what happened to each flow file.

pub mod component;
pub mod expression;
pub mod flowfile;
pub mod provenance;
pub mod spec;
pub mod units;
