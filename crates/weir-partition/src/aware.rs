//! Partition-aware keys: keys that name the key they are partitioned by, so that related data
//! lands on the same partition (Hazelcast's `PartitionAware`).
//!
//! ```
//! use weir_partition::{AffinityKey, AtKey, Partitioner};
//!
//! let p = Partitioner::default();
//! // `key@partitionKey`: an order lands with its customer.
//! assert_eq!(p.partition_of(&AtKey::new("order-17@customer-3")), p.partition_of("customer-3"));
//! // The text before the first `-`: every `key1-*` lands with `key1`.
//! assert_eq!(p.partition_of(&AffinityKey::new("key1-4")), p.partition_of("key1"));
//! ```
//!
//! A key type of your own implements [`PartitionAware`] and then [`PartitionKey`] through
//! [`partition_aware_hash`], in one line each; every router (partitioned edges, grouping keys,
//! partitioned maps, execution at the key owner) then sends it where its partition key goes.

use crate::PartitionKey;

/// A value that names the key it is partitioned by: related values return the same
/// partition key and so live on the same partition and owner.
pub trait PartitionAware {
    /// The partition key's type.
    type Key: PartitionKey + ?Sized;

    /// The key this value is partitioned by. Must not change while the value is stored.
    fn partition_key(&self) -> &Self::Key;
}

/// The canonical hash of `value`'s partition key: what a [`PartitionAware`] type returns from
/// [`PartitionKey::canonical_hash`].
#[inline]
pub fn partition_aware_hash<T: PartitionAware + ?Sized>(value: &T) -> u64 {
    value.partition_key().canonical_hash()
}

/// A string key in the `key@partitionKey` form: `"order-17@customer-3"` is partitioned by
/// `"customer-3"`, the text after the first `@`. A key without `@` is partitioned by itself.
///
/// Plain `String` keys are always partitioned by their whole text (an `@` in an e-mail
/// address does not move it); wrap a key in `AtKey` to opt in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AtKey(pub String);

impl AtKey {
    /// Wraps `key`.
    pub fn new(key: impl Into<String>) -> Self {
        AtKey(key.into())
    }

    /// The whole key, partition key included.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartitionAware for AtKey {
    type Key = str;
    fn partition_key(&self) -> &str {
        self.0.split_once('@').map_or(self.0.as_str(), |(_, p)| p)
    }
}

impl PartitionKey for AtKey {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        partition_aware_hash(self)
    }
}

/// The seed's key form `key{i}-{j}`: partitioned by the text before the first `-`, so every
/// `key1-*` entry lands with `key1`. A key without `-` is partitioned by itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AffinityKey(pub String);

impl AffinityKey {
    /// Wraps `key`.
    pub fn new(key: impl Into<String>) -> Self {
        AffinityKey(key.into())
    }

    /// The whole key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartitionAware for AffinityKey {
    type Key = str;
    fn partition_key(&self) -> &str {
        self.0.split_once('-').map_or(self.0.as_str(), |(p, _)| p)
    }
}

impl PartitionKey for AffinityKey {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        partition_aware_hash(self)
    }
}

impl std::fmt::Display for AffinityKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for AtKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partitioner;

    #[test]
    fn affinity_key_is_partitioned_by_its_prefix() {
        assert_eq!(AffinityKey::new("key1-1").partition_key(), "key1");
        assert_eq!(AffinityKey::new("key1-2").partition_key(), "key1");
        assert_eq!(AffinityKey::new("key2-1").partition_key(), "key2");
        assert_eq!(AffinityKey::new("plain").partition_key(), "plain");
        let p = Partitioner::default();
        for i in 1..=5 {
            let first = p.partition_of(&AffinityKey::new(format!("key{i}-1")));
            for j in 2..=5 {
                assert_eq!(
                    p.partition_of(&AffinityKey::new(format!("key{i}-{j}"))),
                    first
                );
            }
        }
    }

    #[test]
    fn at_key_is_partitioned_by_the_text_after_the_first_at() {
        assert_eq!(
            AtKey::new("order-17@customer-3").partition_key(),
            "customer-3"
        );
        assert_eq!(AtKey::new("a@b@c").partition_key(), "b@c");
        assert_eq!(AtKey::new("solo").partition_key(), "solo");
        // Pinned with the partition of "customer-3" in the crate's known values.
        assert_eq!(
            Partitioner::default().partition_of(&AtKey::new("order-17@customer-3")),
            229
        );
    }
}
