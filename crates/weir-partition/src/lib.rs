//! Stable key partitioning: the one place that decides which partition a key belongs to.
//!
//! Every Weir process must agree on a key's partition, so that a partitioned edge, a keyed
//! aggregation and (later) a cluster member all route a key the same way. `std`'s `Hash`
//! with a `RandomState` is seeded per process and cannot be used. Instead a key writes a
//! *canonical byte encoding* of itself, and the partition is XXH3-64 (seed 0) of those bytes
//! modulo the partition count. XXH3 is specified byte-for-byte, so the result is the same on
//! every platform, process and run.
//!
//! ```
//! use weir_partition::{PartitionKey, Partitioner};
//!
//! let partitioner = Partitioner::default(); // 271 partitions
//! let p = partitioner.partition_of("apple");
//! assert!(p < 271);
//! // Same answer for the same key, always; integers of any width agree.
//! assert_eq!(partitioner.partition_of(&5u32), partitioner.partition_of(&5i64));
//! assert_eq!(p, partitioner.partition_of(&String::from("apple")));
//! ```
//!
//! # Canonical encoding
//!
//! | key | canonical bytes |
//! |---|---|
//! | `str`, `String`, `CompactString` | the UTF-8 bytes |
//! | `[u8]`, `Vec<u8>` | the bytes |
//! | signed integers, `isize` | the value widened to `i64`, little-endian |
//! | unsigned integers, `usize`, `bool`, `char` | the value widened to `u64`, little-endian |
//! | `u128`, `i128` | 16 bytes, little-endian |
//! | tuples, `Option<T>` | the canonical hashes of the parts, each as 8 bytes little-endian |
//!
//! Changing this table changes where every key lives: treat it as a wire format.

#![forbid(missing_docs)]

mod aware;

pub use aware::{AffinityKey, AtKey, PartitionAware, partition_aware_hash};

use xxhash_rust::xxh3::xxh3_64;

/// Jet and Hazelcast's default partition count; a prime, so that modulo spreads well.
pub const DEFAULT_PARTITION_COUNT: u32 = 271;

/// A key that can be routed: it has a canonical byte encoding and a stable hash of it.
///
/// Implement it for your own key types by hashing a field that is already a key, or by
/// calling [`stable_hash`] on bytes you encode yourself. To co-locate related keys (Hazelcast's
/// `PartitionAware`), return the hash of the part they share.
pub trait PartitionKey {
    /// XXH3-64 of the key's canonical encoding. Identical in every process and run.
    fn canonical_hash(&self) -> u64;
}

/// XXH3-64 with seed 0 of `bytes`: the stable hash every [`PartitionKey`] is built on.
///
/// Cost: about one nanosecond per 8 bytes, no allocation.
#[inline]
pub fn stable_hash(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// Combines the canonical hashes of a composite key's parts into one stable hash.
#[inline]
pub fn combine_hashes(parts: &[u64]) -> u64 {
    let mut buf = [0u8; 8 * 8];
    if parts.len() <= 8 {
        for (i, h) in parts.iter().enumerate() {
            buf[i * 8..i * 8 + 8].copy_from_slice(&h.to_le_bytes());
        }
        xxh3_64(&buf[..parts.len() * 8])
    } else {
        let bytes: Vec<u8> = parts.iter().flat_map(|h| h.to_le_bytes()).collect();
        xxh3_64(&bytes)
    }
}

impl<T: PartitionKey + ?Sized> PartitionKey for &T {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        (**self).canonical_hash()
    }
}

impl PartitionKey for str {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        stable_hash(self.as_bytes())
    }
}

impl PartitionKey for String {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        stable_hash(self.as_bytes())
    }
}

#[cfg(feature = "compact_str")]
impl PartitionKey for compact_str::CompactString {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        stable_hash(self.as_bytes())
    }
}

impl PartitionKey for [u8] {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        stable_hash(self)
    }
}

impl PartitionKey for Vec<u8> {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        stable_hash(self)
    }
}

macro_rules! signed_key {
    ($($t:ty),*) => {$(
        impl PartitionKey for $t {
            #[inline]
            fn canonical_hash(&self) -> u64 {
                stable_hash(&(*self as i64).to_le_bytes())
            }
        }
    )*};
}
macro_rules! unsigned_key {
    ($($t:ty),*) => {$(
        impl PartitionKey for $t {
            #[inline]
            fn canonical_hash(&self) -> u64 {
                stable_hash(&(*self as u64).to_le_bytes())
            }
        }
    )*};
}
signed_key!(i8, i16, i32, i64, isize);
unsigned_key!(u8, u16, u32, u64, usize, bool, char);

impl PartitionKey for u128 {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        stable_hash(&self.to_le_bytes())
    }
}

impl PartitionKey for i128 {
    #[inline]
    fn canonical_hash(&self) -> u64 {
        stable_hash(&self.to_le_bytes())
    }
}

impl<T: PartitionKey> PartitionKey for Option<T> {
    fn canonical_hash(&self) -> u64 {
        match self {
            None => combine_hashes(&[]),
            Some(v) => combine_hashes(&[v.canonical_hash()]),
        }
    }
}

macro_rules! tuple_key {
    ($($name:ident),+) => {
        impl<$($name: PartitionKey),+> PartitionKey for ($($name,)+) {
            #[allow(non_snake_case)]
            fn canonical_hash(&self) -> u64 {
                let ($($name,)+) = self;
                combine_hashes(&[$($name.canonical_hash()),+])
            }
        }
    };
}
tuple_key!(A, B);
tuple_key!(A, B, C);
tuple_key!(A, B, C, D);

/// Maps keys to partitions `0..count`.
///
/// Cheap to copy: the count and its precomputed reciprocal. The mapping is
/// `canonical_hash % count`, computed with two multiplications instead of a division (a 64-bit
/// division takes tens of cycles, and every routed item pays it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partitioner {
    count: u32,
    /// `⌈2¹²⁸ / count⌉` (wrapping to 0 for a count of 1), for [`fast_mod`].
    reciprocal: u128,
}

impl Default for Partitioner {
    fn default() -> Self {
        Self::new(DEFAULT_PARTITION_COUNT)
    }
}

/// `a % d`, given `reciprocal = u128::MAX / d + 1` (wrapping): Lemire, Kaser and Kurz,
/// "Faster remainder by direct computation" (2019), exact for every 64-bit `a` and `d > 0`.
#[inline]
fn fast_mod(a: u64, reciprocal: u128, d: u64) -> u64 {
    let low = reciprocal.wrapping_mul(a as u128);
    // The high 64 bits of the 192-bit product `low * d`.
    let bottom = ((low as u64 as u128) * d as u128) >> 64;
    let top = (low >> 64) * d as u128;
    ((bottom + top) >> 64) as u64
}

impl Partitioner {
    /// A partitioner over `count` partitions.
    ///
    /// # Panics
    /// If `count` is zero: a key must have somewhere to go.
    pub fn new(count: u32) -> Self {
        assert!(count > 0, "partition count must be at least 1");
        Self {
            count,
            reciprocal: (u128::MAX / count as u128).wrapping_add(1),
        }
    }

    /// The number of partitions.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The partition of `key`, in `0..count`.
    #[inline]
    pub fn partition_of<K: PartitionKey + ?Sized>(&self, key: &K) -> u32 {
        self.partition_of_hash(key.canonical_hash())
    }

    /// The partition of a key whose canonical hash is already known.
    #[inline]
    pub fn partition_of_hash(&self, hash: u64) -> u32 {
        fast_mod(hash, self.reciprocal, self.count as u64) as u32
    }

    /// Assigns every partition to one of `owners` consumers, round-robin:
    /// partition `p` belongs to owner `p % owners`. The result is indexed by partition.
    ///
    /// # Panics
    /// If `owners` is zero.
    pub fn owner_table(&self, owners: usize) -> Vec<u32> {
        assert!(owners > 0, "at least one owner is needed");
        (0..self.count)
            .map(|p| (p as usize % owners) as u32)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values_never_change() {
        // Pinned: these are part of the wire format. If this fails, routing changed.
        assert_eq!(stable_hash(b""), 0x2d06800538d394c2);
        assert_eq!(stable_hash(b"apple"), 0x517a430dcf1f8a00);
        assert_eq!("banana".canonical_hash(), 0x669f075767da524c);
        assert_eq!(5u64.canonical_hash(), 0x8e03e9aa39aaa78c);
        assert_eq!((-3i32).canonical_hash(), 0x42469f89586d8030);
        assert_eq!((1u64, "a").canonical_hash(), 0x3c8a2ecde8d5eb6e);
        let p = Partitioner::default();
        assert_eq!(p.partition_of("apple"), 15);
        assert_eq!(p.partition_of(&"apple".to_string()), 15);
        assert_eq!(p.partition_of("banana"), 59);
        assert_eq!(p.partition_of("customer-3"), 229);
        assert_eq!(p.partition_of(&5u64), 120);
        assert_eq!(p.partition_of(&5u8), 120);
        assert_eq!(p.partition_of(&(-3i32)), 151);
        assert_eq!(p.partition_of(&(1u64, "a")), 44);
    }

    #[test]
    fn integer_widths_agree() {
        assert_eq!(5u8.canonical_hash(), 5u64.canonical_hash());
        assert_eq!((-3i8).canonical_hash(), (-3i64).canonical_hash());
        assert_ne!(1u64.canonical_hash(), 2u64.canonical_hash());
    }

    #[test]
    fn owner_table_covers_every_owner() {
        let table = Partitioner::default().owner_table(4);
        assert_eq!(table.len(), 271);
        for owner in 0..4 {
            assert!(table.contains(&owner));
        }
    }

    #[test]
    fn tuples_depend_on_order() {
        assert_ne!((1u32, 2u32).canonical_hash(), (2u32, 1u32).canonical_hash());
        assert_eq!(Some(3u8).canonical_hash(), Some(3u8).canonical_hash());
        assert_ne!(Some(3u8).canonical_hash(), None::<u8>.canonical_hash());
    }

    #[test]
    fn the_fast_remainder_is_the_remainder_at_the_edges() {
        for count in [
            1u32,
            2,
            3,
            7,
            270,
            271,
            272,
            1 << 16,
            u32::MAX - 1,
            u32::MAX,
        ] {
            let p = Partitioner::new(count);
            for hash in [
                0u64,
                1,
                270,
                271,
                272,
                u32::MAX as u64,
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(
                    p.partition_of_hash(hash) as u64,
                    hash % count as u64,
                    "{hash} % {count}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn the_fast_remainder_is_the_remainder(hash in any::<u64>(), count in 1u32..) {
            let p = Partitioner::new(count);
            prop_assert_eq!(p.partition_of_hash(hash) as u64, hash % count as u64);
        }

        #[test]
        fn partitions_are_in_range(key in ".*", count in 1u32..1000) {
            let p = Partitioner::new(count);
            prop_assert!(p.partition_of(key.as_str()) < count);
        }

        #[test]
        fn string_forms_agree(key in ".*") {
            let c = compact_str::CompactString::from(key.as_str());
            prop_assert_eq!(key.canonical_hash(), c.canonical_hash());
            prop_assert_eq!(key.canonical_hash(), key.as_bytes().canonical_hash());
        }
    }
}
