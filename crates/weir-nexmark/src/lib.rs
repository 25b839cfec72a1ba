//! NEXMark for Weir: the event model, strict parsing of event files, a deterministic
//! splittable generator, batch sources, and reference results for the queries.
//!
//! NEXMark is the standard streaming benchmark: an online auction with people, auctions and
//! bids. Its file format, generator rules and query semantics are fixed in
//! `docs/nexmark.md`; this crate implements everything of it that does not need the
//! streaming engine.
//!
//! ```
//! use weir::prelude::*;
//! use weir_nexmark::generator::GeneratorConfig;
//! use weir_nexmark::{reference, source, Event};
//!
//! // Generate 10,000 events with a Weir job, keep the bids on auctions divisible by 123...
//! let config = GeneratorConfig { count: Some(10_000), ..Default::default() };
//! let p = Pipeline::new();
//! let (sink, out) = sinks::collection::list();
//! p.read_from(source::generator(config.clone(), None)?)
//!     .flat_map(|e: Event| match e {
//!         Event::Bid(b) if b.auction % 123 == 0 => Some(reference::Q2Row { auction: b.auction, price: b.price }),
//!         _ => None,
//!     })
//!     .write_to(sink);
//! p.run()?;
//!
//! // ... and check the result against the plain-Rust reference implementation of q2.
//! let events: Vec<Event> = weir_nexmark::Generator::new(config)?.iter().collect();
//! let expected = reference::q2(&events, &reference::Options::default());
//! let mut got = out.take();
//! got.sort_by_key(|r| (r.auction, r.price));
//! let mut want = expected.rows;
//! want.sort_by_key(|r| (r.auction, r.price));
//! assert_eq!(got, want);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | module | what |
//! |---|---|
//! | [`model`] | [`Person`], [`Auction`], [`Bid`] and [`Event`], with the README's JSON names |
//! | [`parse`] | one JSON Lines line into an [`Event`], strictly, with a typed [`ParseError`] |
//! | [`generator`] | the event generator: event `n` from `n` alone, seeded per event |
//! | [`source`] | Weir batch sources: the generator, split across instances, and a file replay |
//! | [`pipelines`] | the queries as Weir stream pipelines |
//! | [`partitioned`] | q10's output as a directory of `dt=.../hm=...` partitions |
//! | [`reference`](mod@reference) | single-threaded reference results of q0–q12, and their CSV rows |
//! | [`query`] | the query names and their CSV headers |

#![forbid(missing_docs)]

pub mod generator;
pub mod model;
pub mod parse;
pub mod partitioned;
pub mod pipelines;
pub mod query;
pub mod reference;
pub mod source;

pub use compact_str::CompactString;
pub use generator::{Generator, GeneratorConfig, StringStyle};
pub use model::{Auction, Bid, Event, EventKind, Person};
pub use parse::{ParseError, parse_line};
pub use query::Query;
