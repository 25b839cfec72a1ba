//! Flow files: attributes and a pointer to immutable content.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A flow file's attributes: a sorted map from name to value, shared copy-on-write.
///
/// Cloning copies a reference count, not the map: a session's record of what it took, the
/// flow file it sends on and every provenance event about it share one map. The first
/// change to a shared map copies it once ([`Arc::make_mut`]); later changes through the
/// same handle are in place. Reading goes through `Deref` to the `BTreeMap`. It serializes
/// exactly as the map does, so journals and provenance stores are unchanged by it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Attributes(Arc<BTreeMap<String, String>>);

impl Attributes {
    /// Sets `name` to `value`; returns the previous value. Copies the map first when it is
    /// shared.
    pub fn insert(&mut self, name: String, value: String) -> Option<String> {
        self.to_mut().insert(name, value)
    }

    /// Removes `name`; returns its value. Copies the map first only when it is shared and
    /// holds `name`.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        if self.0.contains_key(name) {
            self.to_mut().remove(name)
        } else {
            None
        }
    }

    /// The map, for changes: copied first when it is shared.
    pub fn to_mut(&mut self) -> &mut BTreeMap<String, String> {
        Arc::make_mut(&mut self.0)
    }
}

impl std::ops::Deref for Attributes {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

impl std::fmt::Debug for Attributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<BTreeMap<String, String>> for Attributes {
    fn from(map: BTreeMap<String, String>) -> Attributes {
        Attributes(Arc::new(map))
    }
}

impl FromIterator<(String, String)> for Attributes {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Attributes {
        Attributes(Arc::new(iter.into_iter().collect()))
    }
}

impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Attributes, D::Error> {
        BTreeMap::deserialize(deserializer).map(Attributes::from)
    }
}

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
    /// and whatever processors add. Shared copy-on-write: cloning a flow file is cheap.
    pub attributes: Attributes,
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
