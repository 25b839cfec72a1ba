//! The snapshot contract of a processor.
//!
//! A snapshot saves each processor's state as key/value entries of bytes. The processor
//! encodes them itself (with serde, usually), because only it knows its state's types. The
//! runtime stores the entries and, on restore, hands them back before any input.
//!
//! Barriers and the snapshot store are not wired yet: processors implement the hooks now so
//! that they are ready, and the test harness can already save and restore a processor.

/// One saved piece of a processor's state.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotEntry {
    /// The entry's key, for example an encoded grouping key.
    pub key: Vec<u8>,
    /// The encoded state.
    pub value: Vec<u8>,
}

/// Collects the entries a processor saves in
/// [`Processor::save_to_snapshot`](crate::Processor::save_to_snapshot).
#[derive(Debug, Default)]
pub struct SnapshotWriter {
    entries: Vec<SnapshotEntry>,
}

impl SnapshotWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.entries.push(SnapshotEntry { key, value });
    }

    /// The entries saved so far.
    pub fn into_entries(self) -> Vec<SnapshotEntry> {
        self.entries
    }
}
