//! The flow repositories, on plain files: the flow-file write-ahead log ([`journal`]), the
//! content repository ([`content`]) and swap files ([`swap`]). Provenance has its own store
//! ([`crate::provenance`]) but its events travel in the journal's frames.

pub mod content;
pub mod journal;
pub mod swap;

pub use weir_flow_disk::{sync_dir, sync_together};
