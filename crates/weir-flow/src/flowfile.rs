//! Flow files: attributes and a pointer to immutable content.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a flow file's content lives: a byte range of a claim file of the content
/// repository. Content is never changed in place: writing makes a new claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ContentClaim {
    /// The claim file's number.
    pub file: u64,
    /// Offset of the first byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// A flow file: its repository id, its attributes (the core ones included), its content
/// claim, and where it stands in its queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowFile {
    /// The repository's id, unique for the repository's life.
    pub id: u64,
    /// Attributes: `uuid`, `filename`, `path`, `entryDate`, `lineageStartDate`, `fileSize`
    /// and whatever processors add.
    pub attributes: BTreeMap<String, String>,
    /// The content, or `None` when it is empty.
    pub claim: Option<ContentClaim>,
    /// When it entered the flow (ms since the epoch).
    pub entry_date: i64,
    /// When its oldest ancestor entered the flow.
    pub lineage_start: i64,
    /// Enqueue order, for first-in-first-out; set each time it enters a queue.
    pub queue_seq: u64,
}

impl FlowFile {
    /// Content size in bytes.
    pub fn size(&self) -> u64 {
        self.claim.map_or(0, |c| c.len)
    }

    /// The `uuid` attribute.
    pub fn uuid(&self) -> &str {
        self.attributes.get("uuid").map_or("", String::as_str)
    }

    /// An attribute's value.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name).map(String::as_str)
    }
}

/// The ordering key of a flow file in a queue: smaller first. Computed from the queue's
/// prioritizers when the flow file is enqueued; the enqueue sequence breaks ties.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SortKey {
    /// One part per prioritizer, in order.
    pub parts: Vec<KeyPart>,
    /// The enqueue sequence, last.
    pub seq: u64,
}

/// One prioritizer's contribution to a [`SortKey`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum KeyPart {
    /// A number (dates, numeric priorities).
    Number(i64),
    /// Text priorities, after every number.
    Text(String),
    /// No value: last.
    Missing,
}
