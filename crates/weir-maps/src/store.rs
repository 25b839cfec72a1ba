//! [`Store`]: one partition's entries of one map, a hash table that can also prefetch.
//!
//! The table is hashbrown's `HashTable` of `(key, value)` pairs hashed with Fx, the same
//! table and hash a `FxHashMap` uses, so lookups cost what they cost before. What the
//! `HashTable` adds is access to a key's first candidate bucket without probing it, which
//! [`Store::prefetch`] uses: a reader of many keys (the pipeline's keyed lookup) starts the
//! memory loads of keys it reads soon, instead of waiting on each load in turn.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;

use hashbrown::hash_table::{self, HashTable};
use rustc_hash::FxBuildHasher;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One partition's entries of one map: a hash map from `K` to `V`.
///
/// Shared copy-on-write: the owner writes through `Arc::make_mut`, so a reader holding a
/// [`PartitionedMap::partition_snapshot`](crate::PartitionedMap::partition_snapshot) keeps a
/// consistent view and costs the owner one copy of that partition on its next write.
///
/// Costs are those of a `FxHashMap` (hashbrown's table, Fx hash): a lookup hashes the key
/// once and probes; an insert may grow the table. Serialized as a map, in the same form as a
/// `HashMap`'s.
#[derive(Clone)]
pub struct Store<K, V> {
    table: HashTable<(K, V)>,
}

/// The hash of `key`: the one the table was built with.
#[inline]
fn hash_of<Q: Hash + ?Sized>(key: &Q) -> u64 {
    FxBuildHasher.hash_one(key)
}

impl<K, V> Default for Store<K, V> {
    fn default() -> Self {
        Store {
            table: HashTable::new(),
        }
    }
}

impl<K, V> Store<K, V> {
    /// The number of entries.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> StoreIter<'_, K, V> {
        StoreIter {
            inner: self.table.iter(),
        }
    }
}

impl<K: Hash + Eq, V> Store<K, V> {
    /// The value of `key`, if present.
    #[inline]
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.table
            .find(hash_of(key), |(k, _)| k.borrow() == key)
            .map(|(_, v)| v)
    }

    /// Starts loading the memory a [`get`](Self::get) of `key` will read first, without
    /// waiting for it: a hint, which changes no result. A reader of many keys prefetches a
    /// few keys ahead of the one it reads, so that their cache and TLB misses overlap.
    ///
    /// Cost: a hash, a read of one control byte (usually cached: a table's control bytes
    /// are one per bucket) and a prefetch instruction; nothing on targets other than x86-64.
    #[inline]
    pub fn prefetch<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let buckets = self.table.num_buckets();
        if buckets == 0 {
            return;
        }
        // hashbrown starts a key's probe at bucket `hash % buckets` (a power of two), and an
        // entry sits there or a few buckets on, in the same or the neighbouring cache line. An
        // empty bucket there means the key is absent (nothing to fetch but the control bytes).
        let first = hash_of(key) as usize & (buckets - 1);
        if let Some(entry) = self.table.get_bucket(first) {
            prefetch_line(entry);
        }
    }

    /// Inserts `value` under `key`; returns the value it replaces.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.entry(key) {
            (hash_table::Entry::Occupied(mut o), _) => {
                Some(std::mem::replace(&mut o.get_mut().1, value))
            }
            (hash_table::Entry::Vacant(v), key) => {
                v.insert((key, value));
                None
            }
        }
    }

    /// Removes `key`; returns its value, if it was present.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        match self
            .table
            .find_entry(hash_of(key), |(k, _)| k.borrow() == key)
        {
            Ok(o) => Some(o.remove().0.1),
            Err(_) => None,
        }
    }

    /// `key`'s slot in the table, and the key (kept for a vacant slot's insert).
    pub(crate) fn entry(&mut self, key: K) -> (hash_table::Entry<'_, (K, V)>, K) {
        let entry = self
            .table
            .entry(hash_of(&key), |(k, _)| *k == key, |(k, _)| hash_of(k));
        (entry, key)
    }
}

/// Asks the processor to start loading the cache line holding `value` into its caches.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch_line<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is an SSE instruction, and SSE is part of every x86-64 target's
    // baseline, so it is always available here. It reads nothing the program sees and cannot
    // fault (a prefetch of any address is only a hint); this one is of a live reference.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// The entries of a [`Store`], borrowed: see [`Store::iter`].
pub struct StoreIter<'a, K, V> {
    inner: hash_table::Iter<'a, (K, V)>,
}

impl<'a, K, V> Iterator for StoreIter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<'a, K, V> IntoIterator for &'a Store<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = StoreIter<'a, K, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<K, V> IntoIterator for Store<K, V> {
    type Item = (K, V);
    type IntoIter = hash_table::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.table.into_iter()
    }
}

impl<K: Hash + Eq, V> Extend<(K, V)> for Store<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, entries: I) {
        let entries = entries.into_iter();
        self.table
            .reserve(entries.size_hint().0, |(k, _)| hash_of(k));
        for (k, v) in entries {
            self.insert(k, v);
        }
    }
}

impl<K: Hash + Eq, V> FromIterator<(K, V)> for Store<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let mut store = Store::default();
        store.extend(entries);
        store
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for Store<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Serialize, V: Serialize> Serialize for Store<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, K, V> Deserialize<'de> for Store<K, V>
where
    K: Deserialize<'de> + Hash + Eq,
    V: Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Builds a store from a serialized map; a later value of a key replaces an earlier.
        struct StoreVisitor<K, V>(PhantomData<(K, V)>);

        impl<'de, K, V> Visitor<'de> for StoreVisitor<K, V>
        where
            K: Deserialize<'de> + Hash + Eq,
            V: Deserialize<'de>,
        {
            type Value = Store<K, V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut store = Store::default();
                // Bounded: a corrupt length must not reserve unbounded memory.
                store
                    .table
                    .reserve(access.size_hint().unwrap_or(0).min(4096), |(k, _)| {
                        hash_of(k)
                    });
                while let Some((k, v)) = access.next_entry()? {
                    store.insert(k, v);
                }
                Ok(store)
            }
        }

        deserializer.deserialize_map(StoreVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rustc_hash::FxHashMap;

    use super::*;

    proptest! {
        /// Any sequence of inserts and removes leaves the store holding what a `HashMap`
        /// holds, and every lookup (prefetched first) answers as the `HashMap` does.
        #[test]
        fn behaves_as_a_hash_map(ops in proptest::collection::vec((any::<bool>(), 0u16..64, any::<u32>()), 0..300)) {
            let mut store = Store::default();
            let mut model = FxHashMap::default();
            for (insert, k, v) in ops {
                if insert {
                    prop_assert_eq!(store.insert(k, v), model.insert(k, v));
                } else {
                    prop_assert_eq!(store.remove(&k), model.remove(&k));
                }
                prop_assert_eq!(store.len(), model.len());
            }
            for k in 0u16..64 {
                store.prefetch(&k);
                prop_assert_eq!(store.get(&k), model.get(&k));
            }
            let mut entries: Vec<_> = store.iter().map(|(k, v)| (*k, *v)).collect();
            entries.sort();
            let mut expected: Vec<_> = model.into_iter().collect();
            expected.sort();
            prop_assert_eq!(entries, expected);
        }
    }

    #[test]
    fn an_empty_store_prefetches_and_answers_nothing() {
        let store: Store<String, u32> = Store::default();
        store.prefetch("absent");
        assert_eq!(store.get("absent"), None);
        assert!(store.is_empty());
    }

    #[test]
    fn serializes_as_a_hash_map_does() {
        let store: Store<u64, String> = (0..50u64).map(|k| (k, format!("v{k}"))).collect();
        let as_map: FxHashMap<u64, String> = store.iter().map(|(k, v)| (*k, v.clone())).collect();
        let bytes = postcard::to_stdvec(&store).unwrap();
        let back: FxHashMap<u64, String> = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, as_map, "a store's bytes decode as a map");
        let bytes = postcard::to_stdvec(&as_map).unwrap();
        let back: Store<u64, String> = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back.len(), 50, "a map's bytes decode as a store");
        assert_eq!(back.get(&7).map(String::as_str), Some("v7"));
    }

    #[test]
    fn a_truncated_encoding_is_an_error() {
        let store: Store<u64, u64> = (0..10u64).map(|k| (k, k)).collect();
        let bytes = postcard::to_stdvec(&store).unwrap();
        assert!(postcard::from_bytes::<Store<u64, u64>>(&bytes[..bytes.len() - 3]).is_err());
    }
}
