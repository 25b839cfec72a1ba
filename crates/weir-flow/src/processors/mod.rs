//! The processors of the traditional engine, with NiFi's names, properties and relationships.

pub mod spec;
