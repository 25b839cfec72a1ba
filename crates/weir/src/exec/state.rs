//! Saving and restoring the state of fused chains: scoped snapshot entries and the codecs of
//! state types.
//!
//! A chain's links write into one [`SnapshotWriter`]. Each link's entries are scoped by its
//! depth in the chain (the head is depth 0, its first link 1, ...), so two stateful links in
//! one chain never mix their keys. The scope is the first byte of every key.
//!
//! State types need serde only where state must survive: stream stages ask for
//! [`Durable`] on their keys, accumulators and buffered items, and build their links with a
//! [`StateCodec`]. Batch stages ask for nothing; a batch link in a job that takes snapshots
//! has no codec, and saving it fails the job naming the stage.

use std::collections::HashMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weir_core::{BoxError, PartitionKey, Partitioner, SnapshotEntry, SnapshotWriter};

/// A type whose values can be saved in a snapshot: serde both ways, encoded with postcard.
/// Implemented for every such type.
pub trait Durable: Serialize + DeserializeOwned + Send + 'static {}
impl<T: Serialize + DeserializeOwned + Send + 'static> Durable for T {}

/// Encodes and decodes `T` without the code that uses it knowing `T: Durable`: a pair of
/// function pointers made where the bound holds (a stream stage's builder) and carried by
/// the link. Cost: two words; one postcard pass per value saved or restored.
pub(crate) struct StateCodec<T> {
    pub encode: fn(&T, &mut Vec<u8>) -> Result<(), BoxError>,
    pub decode: fn(&[u8]) -> Result<T, BoxError>,
}

impl<T> Clone for StateCodec<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for StateCodec<T> {}

impl<T: Durable> StateCodec<T> {
    /// The postcard codec of `T`.
    pub(crate) fn postcard() -> Self {
        StateCodec {
            encode: |value, out| {
                let bytes = postcard::to_extend(value, std::mem::take(out))?;
                *out = bytes;
                Ok(())
            },
            decode: |bytes| Ok(postcard::from_bytes(bytes)?),
        }
    }
}

impl<T> StateCodec<T> {
    /// `value` as a new byte vector.
    pub(crate) fn to_bytes(self, value: &T) -> Result<Vec<u8>, BoxError> {
        let mut out = Vec::new();
        (self.encode)(value, &mut out)?;
        Ok(out)
    }
}

/// The error of a stateful link that cannot be saved: it was built without a codec (a batch
/// stage in a job that takes snapshots).
pub(crate) fn not_durable(stage: &str) -> BoxError {
    format!(
        "{stage} keeps state that cannot be saved in a snapshot: only stream stages save their state; run this job without snapshots"
    )
    .into()
}

/// Where one link of a chain saves: the shared writer, and the link's scope.
pub(crate) struct LinkWriter<'a> {
    writer: &'a mut SnapshotWriter,
    scope: u8,
}

impl<'a> LinkWriter<'a> {
    /// The writer of the chain's head (scope 0).
    pub(crate) fn head(writer: &'a mut SnapshotWriter) -> Self {
        LinkWriter { writer, scope: 0 }
    }

    /// The writer of the next link.
    pub(crate) fn next(&mut self) -> LinkWriter<'_> {
        LinkWriter {
            writer: self.writer,
            scope: self.scope + 1,
        }
    }

    fn scoped(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(key.len() + 1);
        k.push(self.scope);
        k.extend_from_slice(key);
        k
    }

    /// Saves state of this instance's own (a position, a counter).
    pub(crate) fn put(&mut self, key: &[u8], value: Vec<u8>) {
        let key = self.scoped(key);
        self.writer.put(key, value);
    }

    /// Saves the state of one key: it goes to the key's partition, and on restore to the
    /// instance that owns that partition then.
    pub(crate) fn put_keyed<K: PartitionKey + ?Sized>(
        &mut self,
        key: &K,
        encoded_key: &[u8],
        value: Vec<u8>,
    ) {
        let partition = Partitioner::default().partition_of(key) as u16;
        let key = self.scoped(encoded_key);
        self.writer.put_keyed(partition, key, value);
    }
}

/// What a chain restores from: the entries the instance received, by scope.
#[derive(Default)]
pub(crate) struct ChainEntries {
    by_scope: HashMap<u8, Vec<SnapshotEntry>>,
}

impl ChainEntries {
    /// Sorts entries by the scope in their first key byte, removing it.
    pub(crate) fn new(entries: Vec<SnapshotEntry>) -> Self {
        let mut by_scope: HashMap<u8, Vec<SnapshotEntry>> = HashMap::new();
        for mut e in entries {
            if e.key.is_empty() {
                continue;
            }
            let scope = e.key.remove(0);
            by_scope.entry(scope).or_default().push(e);
        }
        ChainEntries { by_scope }
    }

    /// The reader for the chain's head (scope 0).
    pub(crate) fn head(&mut self) -> LinkEntries<'_> {
        LinkEntries {
            entries: self,
            scope: 0,
        }
    }
}

/// One link's entries, and the way to the next link's.
pub(crate) struct LinkEntries<'a> {
    entries: &'a mut ChainEntries,
    scope: u8,
}

impl LinkEntries<'_> {
    /// The next link's entries.
    pub(crate) fn next(&mut self) -> LinkEntries<'_> {
        LinkEntries {
            entries: self.entries,
            scope: self.scope + 1,
        }
    }

    /// Takes this link's entries (key without the scope byte).
    pub(crate) fn take(&mut self) -> Vec<SnapshotEntry> {
        self.entries
            .by_scope
            .remove(&self.scope)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_keep_links_apart_and_keyed_entries_carry_their_partition() {
        let mut writer = SnapshotWriter::new();
        let mut head = LinkWriter::head(&mut writer);
        head.put(b"pos", vec![1]);
        head.next().put_keyed(&7u64, b"k", vec![2]);
        head.next().next().put(b"pos", vec![3]);
        let entries = writer.into_entries();
        assert_eq!(
            entries[1].partition,
            Some(Partitioner::default().partition_of(&7u64) as u16)
        );
        let mut chain = ChainEntries::new(entries);
        let mut head = chain.head();
        assert_eq!(head.take()[0].value, vec![1]);
        let mut first = head.next();
        let keyed = first.take();
        assert_eq!(
            (keyed[0].key.as_slice(), keyed[0].value.as_slice()),
            (&b"k"[..], &[2u8][..])
        );
        assert_eq!(first.next().take()[0].value, vec![3]);
    }

    #[test]
    fn the_postcard_codec_round_trips() {
        let codec = StateCodec::<(String, Vec<u64>)>::postcard();
        let value = ("a".to_string(), vec![1, 2, 3]);
        let bytes = codec.to_bytes(&value).unwrap();
        assert_eq!((codec.decode)(&bytes).unwrap(), value);
    }
}
