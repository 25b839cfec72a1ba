//! Flow files: attributes and a pointer to immutable content.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
pub use smol_str::SmolStr;

/// A flow file's attributes: names and values sorted by name, shared copy-on-write.
///
/// Cloning copies a reference count, not the attributes: a session's record of what it
/// took, the flow file it sends on and every provenance event about it share them. The
/// first change to shared attributes copies them once; later changes through the same
/// handle are in place. Names and values are [`SmolStr`]s: up to 23 bytes they are held
/// inline, longer ones are shared by reference count, so that copy is one allocation for
/// the entries plus a reference count per long string, not two allocations per entry.
///
/// A copy remembers the map it was made from and the first few names changed since (see
/// `Attributes::changes_since`): the provenance store writes a processor's change as
/// that, without comparing the two maps entry by entry. (The source cannot change in place
/// meanwhile: `Arc::get_mut` refuses while the copy's weak handle to it lives.)
///
/// The entries are one sorted vector: a lookup is a binary search, a change that adds or
/// removes a name moves the entries after it (flow files carry tens of attributes, where
/// this beats a tree). It serializes exactly as a `BTreeMap<String, String>` does (a map
/// in name order), so journals and provenance stores are unchanged by it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Attributes(Arc<Entries>);

/// The shared part of [`Attributes`].
#[derive(Default)]
struct Entries {
    list: Vec<(SmolStr, SmolStr)>,
    /// Set when these entries are a copy of shared ones.
    copied: Option<Copied>,
}

impl PartialEq for Entries {
    fn eq(&self, other: &Entries) -> bool {
        self.list == other.list
    }
}

impl Eq for Entries {}

/// Names changed since a copy that are remembered; past this many, none are.
pub(crate) const REMEMBERED_CHANGES: usize = 2;

/// Where a copy of shared entries came from, and what changed since.
struct Copied {
    /// The entries copied. A weak handle keeps their allocation, so its address is not
    /// reused while this lives, and keeps them from changing in place; it keeps nothing else.
    source: std::sync::Weak<Entries>,
    /// The names set or removed since the copy, each once: `changes` of them, or more than
    /// fit when `changes` exceeds [`REMEMBERED_CHANGES`].
    names: [SmolStr; REMEMBERED_CHANGES],
    changes: usize,
}

impl Attributes {
    /// No attributes.
    pub fn new() -> Attributes {
        Attributes::default()
    }

    /// No attributes, with room for `capacity` before the first reallocation.
    pub fn with_capacity(capacity: usize) -> Attributes {
        Attributes::of(Vec::with_capacity(capacity))
    }

    fn of(list: Vec<(SmolStr, SmolStr)>) -> Attributes {
        Attributes(Arc::new(Entries { list, copied: None }))
    }

    /// The attributes `entries` (when a name comes twice, the last value wins). Entries
    /// already in name order are taken as they are, with the vector's spare room.
    pub(crate) fn from_entries(entries: Vec<(SmolStr, SmolStr)>) -> Attributes {
        Attributes::of(sorted(entries))
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.list.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// The entries, for a change to `name` (`None`: changes beyond telling): copied first
    /// when they are shared, with room for `extra` more (so that an insert right after the
    /// copy does not grow the vector again), and the change remembered on a copy.
    fn entries_mut(&mut self, name: Option<&str>, extra: usize) -> &mut Vec<(SmolStr, SmolStr)> {
        if Arc::get_mut(&mut self.0).is_none() {
            let mut list = Vec::with_capacity(self.0.list.len() + extra);
            list.extend(self.0.list.iter().cloned());
            let copied = Copied {
                source: Arc::downgrade(&self.0),
                names: Default::default(),
                changes: 0,
            };
            self.0 = Arc::new(Entries {
                list,
                copied: Some(copied),
            });
        }
        let entries = Arc::get_mut(&mut self.0).expect("the entries were just made unique");
        if let Some(c) = &mut entries.copied {
            let known = &c.names[..c.changes.min(REMEMBERED_CHANGES)];
            match name {
                Some(n) if c.changes <= REMEMBERED_CHANGES && known.iter().any(|k| k == n) => {}
                Some(n) if c.changes < REMEMBERED_CHANGES => {
                    c.names[c.changes] = SmolStr::new(n);
                    c.changes += 1;
                }
                _ => c.changes = REMEMBERED_CHANGES + 1,
            }
        }
        &mut entries.list
    }

    /// When these attributes are a copy of `base` changed since only by setting or removing
    /// a few names: those names (the rest is as in `base`). `None` otherwise: not a copy of
    /// `base`, or changed too much to tell.
    pub(crate) fn changes_since(&self, base: &Attributes) -> Option<&[SmolStr]> {
        let c = self.0.copied.as_ref()?;
        // `base` is alive and `source` keeps its allocation: equal addresses are one map.
        (std::sync::Weak::as_ptr(&c.source) == Arc::as_ptr(&base.0)
            && c.changes <= REMEMBERED_CHANGES)
            .then(|| &c.names[..c.changes])
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.find(name).ok().map(|i| self.0.list[i].1.as_str())
    }

    /// The value of `name` as held: cloning it shares a long value instead of copying it.
    pub fn get_shared(&self, name: &str) -> Option<&SmolStr> {
        self.find(name).ok().map(|i| &self.0.list[i].1)
    }

    /// True when `name` is set.
    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// The number of attributes.
    pub fn len(&self) -> usize {
        self.0.list.len()
    }

    /// True when there are no attributes.
    pub fn is_empty(&self) -> bool {
        self.0.list.is_empty()
    }

    /// Names and values as held, in name order: comparing two maps' entries can tell a
    /// shared long text by its address before reading it.
    pub(crate) fn entries(&self) -> &[(SmolStr, SmolStr)] {
        &self.0.list
    }

    /// Names and values, in name order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.0.list.iter())
    }

    /// Names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.0.list.iter().map(|(k, _)| k.as_str())
    }

    /// Sets `name` to `value`; returns the previous value. Copies the attributes first when
    /// they are shared, unless `name` already has this value.
    pub fn insert(&mut self, name: &str, value: impl Into<SmolStr>) -> Option<SmolStr> {
        let value = value.into();
        match self.find(name) {
            Ok(i) if self.0.list[i].1 == value => Some(value),
            Ok(i) => Some(std::mem::replace(
                &mut self.entries_mut(Some(name), 0)[i].1,
                value,
            )),
            Err(i) => {
                self.entries_mut(Some(name), 1)
                    .insert(i, (SmolStr::new(name), value));
                None
            }
        }
    }

    /// Sets `name` to `value` unless it is set already; returns whether it set it.
    pub fn insert_if_absent(&mut self, name: &str, value: impl FnOnce() -> SmolStr) -> bool {
        match self.find(name) {
            Ok(_) => false,
            Err(i) => {
                self.entries_mut(Some(name), 1)
                    .insert(i, (SmolStr::new(name), value()));
                true
            }
        }
    }

    /// Removes `name`; returns its value. Copies the attributes first only when they are
    /// shared and hold `name`.
    pub fn remove(&mut self, name: &str) -> Option<SmolStr> {
        let i = self.find(name).ok()?;
        Some(self.entries_mut(Some(name), 0).remove(i).1)
    }

    /// Keeps only the attributes for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        if self.iter().any(|(k, v)| !keep(k, v)) {
            self.entries_mut(None, 0).retain(|(k, v)| keep(k, v));
        }
    }

    /// A copy as a plain map (allocates every name and value).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// True when `self` and `other` share their entries (a clone of one another, with no
    /// change since): then they are equal without comparing.
    pub fn ptr_eq(&self, other: &Attributes) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// An address that identifies the shared entries (see [`Attributes::ptr_eq`]), valid
    /// while this handle or a clone of it lives.
    pub fn as_ptr(&self) -> *const () {
        Arc::as_ptr(&self.0).cast()
    }
}

/// The iterator of [`Attributes::iter`]: names and values in name order.
#[derive(Debug, Clone)]
pub struct Iter<'a>(std::slice::Iter<'a, (SmolStr, SmolStr)>);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        self.0.next().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Attributes {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl std::ops::Index<&str> for Attributes {
    type Output = str;

    /// The value of `name`.
    ///
    /// # Panics
    /// When `name` is not set.
    fn index(&self, name: &str) -> &str {
        match self.get(name) {
            Some(v) => v,
            None => panic!("no attribute `{name}`"),
        }
    }
}

impl std::fmt::Debug for Attributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl From<BTreeMap<String, String>> for Attributes {
    fn from(map: BTreeMap<String, String>) -> Attributes {
        // Already sorted and unique.
        Attributes::of(
            map.into_iter()
                .map(|(k, v)| (SmolStr::from(k), SmolStr::from(v)))
                .collect(),
        )
    }
}

impl<K: Into<SmolStr>, V: Into<SmolStr>> FromIterator<(K, V)> for Attributes {
    /// As a map would: when a name comes twice, the last value wins.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Attributes {
        let entries = iter.into_iter().map(|(k, v)| (k.into(), v.into()));
        Attributes::of(sorted(entries.collect()))
    }
}

impl<K: AsRef<str>, V: Into<SmolStr>> Extend<(K, V)> for Attributes {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k.as_ref(), v);
        }
    }
}

/// An integer as an attribute value, formatted without going through `fmt` (a flow file
/// gets several: dates, sizes, delivery tags).
pub fn int_value(n: impl itoa::Integer) -> SmolStr {
    SmolStr::new(itoa::Buffer::new().format(n))
}

/// Sorts `entries` by name, keeping the last of equal names.
fn sorted(mut entries: Vec<(SmolStr, SmolStr)>) -> Vec<(SmolStr, SmolStr)> {
    if entries.is_sorted_by(|a, b| a.0 < b.0) {
        return entries;
    }
    // Stable, so that equal names keep their order and the last can be kept.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(SmolStr, SmolStr)> = Vec::with_capacity(entries.len());
    for e in entries {
        match out.last_mut() {
            Some(last) if last.0 == e.0 => *last = e,
            _ => out.push(e),
        }
    }
    out
}

impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Attributes, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Attributes;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of attribute names to values")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Attributes, A::Error> {
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(4096));
                while let Some(entry) = access.next_entry::<SmolStr, SmolStr>()? {
                    entries.push(entry);
                }
                Ok(Attributes::of(sorted(entries)))
            }
        }
        deserializer.deserialize_map(Entries)
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
        self.uuid_held().map_or("", SmolStr::as_str)
    }

    /// The `uuid` attribute as held, for a copy that shares it (empty when it is missing).
    pub fn shared_uuid(&self) -> SmolStr {
        self.uuid_held().cloned().unwrap_or_default()
    }

    /// The `uuid` attribute's value. Looked up for every provenance event: in name order
    /// `uuid` mostly comes last (names sort before it unless they start with `v` to `z`, or
    /// with `u` and a letter before the second `u`), so the last entry is tried first.
    fn uuid_held(&self) -> Option<&SmolStr> {
        match self.attributes.entries().last() {
            Some((name, value)) if name == "uuid" => Some(value),
            _ => self.attributes.get_shared("uuid"),
        }
    }

    /// An attribute's value.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_remembers_its_source_and_the_names_changed_since() {
        let base: Attributes = [("a", "1"), ("b", "2"), ("c", "3")].into_iter().collect();
        // Unshared: changed in place, nothing to remember.
        let mut fresh = base.clone();
        drop(base);
        fresh.insert("d", "4");
        let base = fresh;
        assert!(base.changes_since(&Attributes::new()).is_none());
        let mut copy = base.clone();
        copy.insert("b", "20");
        copy.insert("b", "21");
        copy.remove("c");
        assert_eq!(
            copy.changes_since(&base)
                .map(|n| n.iter().map(SmolStr::as_str).collect::<Vec<_>>()),
            Some(vec!["b", "c"])
        );
        // Setting a name to the value it has changes nothing.
        copy.insert("a", "1");
        assert_eq!(copy.changes_since(&base).map(<[SmolStr]>::len), Some(2));
        // Not a copy of this map, or changed past what is remembered: nothing to tell.
        let other: Attributes = [("a", "1")].into_iter().collect();
        assert!(copy.changes_since(&other).is_none());
        copy.insert("e", "5");
        assert!(copy.changes_since(&base).is_none());
        let mut kept = base.clone();
        kept.retain(|k, _| k != "a");
        assert!(kept.changes_since(&base).is_none());
        // The source cannot change in place while the copy remembers it.
        let mut source = base;
        let before = source.as_ptr();
        source.insert("z", "26");
        assert_ne!(source.as_ptr(), before);
        assert_eq!(copy.get("z"), None);
    }

    fn attrs(pairs: &[(&str, &str)]) -> Attributes {
        pairs.iter().copied().collect()
    }

    #[test]
    fn changes_copy_shared_entries_once_and_leave_clones_alone() {
        let mut a = attrs(&[("b", "2"), ("a", "1")]);
        let original = a.clone();
        assert!(a.ptr_eq(&original));
        a.insert("c", "3");
        assert!(
            !a.ptr_eq(&original),
            "a shared map is copied before a change"
        );
        let copied = a.as_ptr();
        a.insert("a", "one");
        a.remove("b");
        assert_eq!(a.as_ptr(), copied, "an unshared map changes in place");
        assert_eq!(a.iter().collect::<Vec<_>>(), [("a", "one"), ("c", "3")]);
        assert_eq!(
            original.iter().collect::<Vec<_>>(),
            [("a", "1"), ("b", "2")]
        );
    }

    #[test]
    fn unchanged_values_and_missing_names_do_not_copy() {
        let mut a = attrs(&[("a", "1")]);
        let original = a.clone();
        assert_eq!(a.insert("a", "1").as_deref(), Some("1"));
        assert_eq!(a.remove("missing"), None);
        a.retain(|_, _| true);
        assert!(!a.insert_if_absent("a", || "2".into()));
        assert!(a.ptr_eq(&original));
    }

    #[test]
    fn lookups_and_order_follow_names() {
        let long = "a value longer than the twenty-three bytes held inline";
        let mut a = Attributes::new();
        assert!(a.is_empty());
        for (k, v) in [("z", "26"), ("m", long), ("a", "1")] {
            assert_eq!(a.insert(k, v), None);
        }
        assert_eq!(a.len(), 3);
        assert_eq!(a.get("m"), Some(long));
        assert_eq!(&a["z"], "26");
        assert_eq!(a.get("b"), None);
        assert!(a.contains_key("a") && !a.contains_key("b"));
        assert_eq!(a.keys().collect::<Vec<_>>(), ["a", "m", "z"]);
        assert_eq!(a.iter().next_back(), Some(("z", "26")));
        assert_eq!(a.insert("m", "short").as_deref(), Some(long));
        assert!(a.insert_if_absent("b", || "2".into()));
        assert_eq!(a.remove("a").as_deref(), Some("1"));
        assert_eq!(a.keys().collect::<Vec<_>>(), ["b", "m", "z"]);
        a.retain(|k, _| k != "z");
        assert_eq!(format!("{a:?}"), r#"{"b": "2", "m": "short"}"#);
    }

    #[test]
    #[should_panic(expected = "no attribute `x`")]
    fn indexing_a_missing_name_panics() {
        let _ = &Attributes::new()["x"];
    }

    #[test]
    fn integers_format_as_display_does() {
        for n in [0i64, -1, 42, i64::MIN, i64::MAX] {
            assert_eq!(int_value(n), n.to_string());
        }
        assert_eq!(int_value(u64::MAX), u64::MAX.to_string());
    }

    #[test]
    fn duplicate_names_keep_the_last_value_as_a_map_does() {
        let a = attrs(&[("k", "1"), ("j", "0"), ("k", "2")]);
        assert_eq!(a.iter().collect::<Vec<_>>(), [("j", "0"), ("k", "2")]);
        let mut b = Attributes::new();
        b.extend([("k", "1"), ("k", "3")]);
        assert_eq!(b.get("k"), Some("3"));
    }

    #[test]
    fn serializes_exactly_as_the_map_did() {
        let map: BTreeMap<String, String> = [("uuid", "u-1"), ("a", "x"), ("fileSize", "12")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let a = Attributes::from(map.clone());
        assert_eq!(a.to_map(), map);
        let bytes = postcard::to_allocvec(&a).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&map).unwrap());
        assert_eq!(postcard::from_bytes::<Attributes>(&bytes).unwrap(), a);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, serde_json::to_string(&map).unwrap());
        // A map written in any order (JSON from elsewhere) reads back sorted.
        let read: Attributes = serde_json::from_str(r#"{"z":"1","a":"2","z":"3"}"#).unwrap();
        assert_eq!(read.iter().collect::<Vec<_>>(), [("a", "2"), ("z", "3")]);
        assert!(serde_json::from_str::<Attributes>(r#"["not", "a map"]"#).is_err());
        assert!(serde_json::from_str::<Attributes>(r#"{"a": 1}"#).is_err());
    }
}
