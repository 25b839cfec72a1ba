//! The provenance store's own types: its error, a chunk's key and span.

use super::*;
use serde::{Deserialize, Serialize};

/// A provenance store error.
#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    /// The `fjall` keyspace failed.
    #[error("provenance store: {0}")]
    Store(#[from] fjall::Error),
    /// An event could not be encoded or decoded.
    #[error("provenance event encoding: {0}")]
    Encoding(#[from] postcard::Error),
    /// The writer thread could not start, or is gone.
    #[error("provenance writer: {0}")]
    Writer(String),
    /// The store's folder could not be read or tidied before opening it.
    #[error("provenance store {path}: {source}")]
    Io {
        /// The file or folder at fault.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A stored chunk is malformed: an index in it points nowhere.
    #[error("provenance chunk: {0}")]
    Chunk(String),
    /// The store on disk has a format this version does not read.
    #[error(
        "provenance store has format {found}, this version reads format {FORMAT}: move the directory away to start a new store"
    )]
    Format {
        /// The format recorded in the store.
        found: u8,
    },
}

/// What the events of one chunk hold, for queries by time and component.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Span {
    pub(super) min_time_ms: i64,
    pub(super) max_time_ms: i64,
    pub(super) components: Vec<String>,
    /// How many events the chunk holds.
    pub(super) events: u64,
}

/// A chunk's key: its first and last event id, big-endian, so chunks sort by first id.
pub(super) type ChunkKey = [u8; 16];

pub(super) fn chunk_key(first: u64, last: u64) -> ChunkKey {
    let mut k = [0; 16];
    k[..8].copy_from_slice(&first.to_be_bytes());
    k[8..].copy_from_slice(&last.to_be_bytes());
    k
}

/// The first id of a chunk key.
pub(super) fn first_of(key: &[u8]) -> u64 {
    u64::from_be_bytes(key[..8].try_into().expect("8 bytes"))
}
