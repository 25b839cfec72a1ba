//! Flow files: attributes and a pointer to immutable content.

use std::borrow::Cow;
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
/// first change to shared attributes makes a new map; later changes through the same
/// handle are in place. Names and values are [`SmolStr`]s: up to 23 bytes they are held
/// inline, longer ones are shared by reference count.
///
/// A change to a shared map of eight entries or more does not copy them: the new
/// map *overlays* the shared one (it holds it and the few entries set since, which stand
/// in front of it), so a processor that sets one attribute of a flow file whose last
/// version a provenance event holds pays for one entry, not for all. An overlay of an
/// overlay holds the same flat map, so a lookup searches at most two sorted lists;
/// past eight entries set, and on any removal, an overlay is made flat.
///
/// A new map remembers the map it was made from and the first few names changed since, with
/// their values (see `Attributes::changes_since`): the provenance store writes a
/// processor's change as that, without comparing the two maps or looking a name up. (The
/// source cannot change in place meanwhile: `Arc::get_mut` refuses while the copy's weak
/// handle to it lives.)
///
/// The entries are sorted vectors: a lookup is a binary search, a change that adds or
/// removes a name moves the entries after it (flow files carry tens of attributes, where
/// this beats a tree). It serializes exactly as a `BTreeMap<String, String>` does (a map
/// in name order), so journals and provenance stores are unchanged by it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Attributes(Arc<Entries>);

/// A map's own entries: an overlay's few (up to four: the changes of a few processors) are
/// held in its allocation, not in one of their own.
type List = smallvec::SmallVec<[(SmolStr, SmolStr); 4]>;

/// The shared part of [`Attributes`].
#[derive(Default)]
struct Entries {
    /// Every entry when `base` is `None`; otherwise the entries set since `base` was
    /// overlaid, which stand in front of its entries of the same names.
    list: List,
    /// The flat map these entries overlay (never an overlay itself).
    base: Option<Arc<Entries>>,
    /// How many names of `list` `base` does not hold.
    added: usize,
    /// Set when this map was made by a change to a shared one.
    copied: Option<Copied>,
}

impl Entries {
    fn flat(list: Vec<(SmolStr, SmolStr)>) -> Entries {
        Entries {
            list: List::from_vec(list),
            ..Entries::default()
        }
    }

    fn lookup(&self, name: &str) -> Option<&SmolStr> {
        match position(&self.list, name) {
            Ok(i) => Some(&self.list[i].1),
            Err(_) => self.base.as_ref()?.lookup(name),
        }
    }

    fn len(&self) -> usize {
        self.base
            .as_ref()
            .map_or(self.list.len(), |b| b.list.len() + self.added)
    }

    fn held(&self) -> Held<'_> {
        let base: &[(SmolStr, SmolStr)] = self.base.as_ref().map_or(&[], |b| &b.list);
        Held {
            over: self.list.iter(),
            base: base.iter(),
            left: self.len(),
        }
    }

    /// Every entry, cloned, as one flat list with room for the change about to be made.
    fn merged(&self) -> List {
        let mut list = Vec::with_capacity(self.len() + 1);
        list.extend(self.held().cloned());
        List::from_vec(list)
    }

    /// Folds an overlay into one flat list.
    fn flatten(&mut self) {
        if self.base.is_some() {
            self.list = self.merged();
            self.base = None;
            self.added = 0;
        }
    }
}

impl PartialEq for Entries {
    fn eq(&self, other: &Entries) -> bool {
        self.len() == other.len() && self.held().eq(other.held())
    }
}

impl Eq for Entries {}

/// Where `name` is in `list` (sorted by name), or where it would go.
fn position(list: &[(SmolStr, SmolStr)], name: &str) -> Result<usize, usize> {
    list.binary_search_by(|(k, _)| name_order(k, name))
}

/// A name's first bytes up to this many are compared in line: most names differ there, and
/// a call to the C library's comparison costs more than the loop.
const SHORT: usize = 16;

/// The order of two names, as `str`'s: their first [`SHORT`] bytes compared in line (most
/// steps of a search or a merge end there, without a call), equal at once when they are one
/// text (a static name, a shared one), else by the rest of their bytes.
#[inline]
fn name_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    let common = x.len().min(y.len());
    let head = common.min(SHORT);
    if let Some((p, q)) = x[..head].iter().zip(&y[..head]).find(|(p, q)| p != q) {
        return p.cmp(q);
    }
    if head == common {
        // One is the start of the other.
        x.len().cmp(&y.len())
    } else if same_text(a, b) {
        std::cmp::Ordering::Equal
    } else {
        x[head..].cmp(&y[head..])
    }
}

/// True when `a` and `b` are the same text: at once when they are held at one address,
/// else by their bytes.
#[inline]
pub fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.as_ptr() == b.as_ptr() || a == b)
}

/// True when two lists have the same names, in the same order.
fn same_names(a: &[(SmolStr, SmolStr)], b: &[(SmolStr, SmolStr)]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_text(&x.0, &y.0))
}

/// Names changed since a copy that are remembered; past this many, none are.
pub(crate) const REMEMBERED_CHANGES: usize = 2;

/// The fewest entries of a shared map that a change overlays instead of copying: below,
/// a copy costs about what an overlay's extra lookups do.
const OVERLAY_FROM: usize = 8;

/// The most entries an overlay holds before a change makes it flat.
const OVERLAY_MOST: usize = 8;

/// Where a map made by a change to a shared one came from, and what changed since.
struct Copied {
    /// The map changed. A weak handle keeps its allocation, so its address is not reused
    /// while this lives, and keeps it from changing in place; it keeps nothing else.
    source: std::sync::Weak<Entries>,
    /// The names set or removed since the copy, each once, with its value now (`None`:
    /// removed): `count` of them, or more than fit when `count` exceeds
    /// [`REMEMBERED_CHANGES`]. The provenance store writes the change from them without a
    /// look-up.
    changes: [(SmolStr, Option<SmolStr>); REMEMBERED_CHANGES],
    count: usize,
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
        Attributes(Arc::new(Entries::flat(list)))
    }

    /// The attributes `entries` (when a name comes twice, the last value wins). Entries
    /// already in name order are taken as they are, with the vector's spare room.
    pub fn from_entries(entries: Vec<(SmolStr, SmolStr)>) -> Attributes {
        Attributes::of(sorted(entries))
    }

    /// [`from_entries`](Attributes::from_entries) of `entries` and then `tail`, whose
    /// names are in order and distinct (a flow file's core attributes): when `entries` are
    /// in order and end before `tail` begins, the map is taken as built, `tail` unchecked.
    pub fn from_entries_then(
        mut entries: Vec<(SmolStr, SmolStr)>,
        tail: impl IntoIterator<Item = (SmolStr, SmolStr)>,
    ) -> Attributes {
        let head = entries.len();
        entries.extend(tail);
        debug_assert!(
            entries[head..].is_sorted_by(|a, b| name_order(&a.0, &b.0).is_lt()),
            "the tail is in order"
        );
        let joined = head == 0
            || head == entries.len()
            || name_order(&entries[head - 1].0, &entries[head].0).is_lt();
        if joined && entries[..head].is_sorted_by(|a, b| name_order(&a.0, &b.0).is_lt()) {
            return Attributes::of(entries);
        }
        Attributes::from_entries(entries)
    }

    /// The entries, for `change`: a name and the value it is about to hold (`None`:
    /// removed), or `None` for changes beyond telling. A new map first when they are shared
    /// (an overlay unless `flat` or `change` is `None`), and the change remembered on a new
    /// map.
    fn entries_mut(
        &mut self,
        change: Option<(&SmolStr, Option<&SmolStr>)>,
        flat: bool,
    ) -> &mut Entries {
        let flat = flat || change.is_none();
        if Arc::get_mut(&mut self.0).is_none() {
            let shared = &self.0;
            let copied = || {
                Some(Copied {
                    source: Arc::downgrade(shared),
                    changes: Default::default(),
                    count: 0,
                })
            };
            // Built in each arm's `Arc::new`: the entries are a few hundred bytes, and each
            // move of them on the way into the allocation is a copy.
            self.0 = match &shared.base {
                None if !flat && shared.list.len() >= OVERLAY_FROM => Arc::new(Entries {
                    list: List::new(),
                    base: Some(Arc::clone(shared)),
                    added: 0,
                    copied: copied(),
                }),
                Some(base) if !flat && shared.list.len() < OVERLAY_MOST => Arc::new(Entries {
                    list: shared.list.iter().cloned().collect(),
                    base: Some(Arc::clone(base)),
                    added: shared.added,
                    copied: copied(),
                }),
                _ => Arc::new(Entries {
                    list: shared.merged(),
                    base: None,
                    added: 0,
                    copied: copied(),
                }),
            };
        }
        let entries = Arc::get_mut(&mut self.0).expect("the entries were just made unique");
        if flat {
            entries.flatten();
        }
        if let Some(c) = &mut entries.copied {
            let known = c.count.min(REMEMBERED_CHANGES);
            match change {
                Some((n, v)) if c.count <= REMEMBERED_CHANGES => {
                    match c.changes[..known].iter_mut().find(|(k, _)| same_text(k, n)) {
                        Some(slot) => slot.1 = v.cloned(),
                        None if c.count < REMEMBERED_CHANGES => {
                            c.changes[c.count] = (n.clone(), v.cloned());
                            c.count += 1;
                        }
                        None => c.count = REMEMBERED_CHANGES + 1,
                    }
                }
                _ => c.count = REMEMBERED_CHANGES + 1,
            }
        }
        entries
    }

    /// When these attributes are a copy of `base` changed since only by setting or removing
    /// a few names: those names, each with its value now (`None`: removed; the rest is as
    /// in `base`). `None` otherwise: not a copy of `base`, or changed too much to tell.
    pub fn changes_since(&self, base: &Attributes) -> Option<&[(SmolStr, Option<SmolStr>)]> {
        let c = self.0.copied.as_ref()?;
        // `base` is alive and `source` keeps its allocation: equal addresses are one map.
        (std::sync::Weak::as_ptr(&c.source) == Arc::as_ptr(&base.0)
            && c.count <= REMEMBERED_CHANGES)
            .then(|| &c.changes[..c.count])
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.lookup(name).map(SmolStr::as_str)
    }

    /// The value of `name` as held: cloning it shares a long value instead of copying it.
    pub fn get_shared(&self, name: &str) -> Option<&SmolStr> {
        self.0.lookup(name)
    }

    /// True when `name` is set.
    pub fn contains_key(&self, name: &str) -> bool {
        self.0.lookup(name).is_some()
    }

    /// The number of attributes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no attributes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Names and values as held, in name order: comparing two maps' entries can tell a
    /// shared long text by its address before reading it.
    pub fn entries(&self) -> Held<'_> {
        self.0.held()
    }

    /// True when both maps have the same names. Two overlays whose own entries and bases
    /// have the same names are told so without merging either (a flow file's map after a
    /// few processors, beside the one before it); else the names are compared in order.
    pub fn same_names(&self, other: &Attributes) -> bool {
        let (a, b) = (&*self.0, &*other.0);
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        if a.len() != b.len() {
            return false;
        }
        if a.base.is_none() && b.base.is_none() {
            return same_names(&a.list, &b.list);
        }
        if let (Some(ab), Some(bb)) = (&a.base, &b.base)
            && same_names(&a.list, &b.list)
            && (Arc::ptr_eq(ab, bb) || same_names(&ab.list, &bb.list))
        {
            return true;
        }
        a.held().zip(b.held()).all(|(x, y)| same_text(&x.0, &y.0))
    }

    /// The entries when the map is flat (not an overlay): one sorted slice, cheaper to walk
    /// than [`Attributes::entries`].
    pub fn flat_entries(&self) -> Option<&[(SmolStr, SmolStr)]> {
        self.0.base.is_none().then_some(&self.0.list[..])
    }

    /// The entry of the last name, without walking the entries.
    pub(crate) fn last_entry(&self) -> Option<&(SmolStr, SmolStr)> {
        let over = self.0.list.last();
        match (over, self.0.base.as_ref().and_then(|b| b.list.last())) {
            (Some(o), Some(b)) if name_order(&b.0, &o.0).is_gt() => Some(b),
            (None, b) => b,
            (o, _) => o,
        }
    }

    /// Names and values, in name order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.0.held())
    }

    /// Names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.iter().map(|(k, _)| k)
    }

    /// Sets `name` to `value`; returns the previous value. Makes a new map first when they
    /// are shared, unless `name` already has this value. A name longer than 23 bytes given
    /// as a `&str` is copied into an allocation of its own; given as a [`SmolStr`] (a
    /// `SmolStr::new_static` constant, say) it is shared.
    pub fn insert<N>(&mut self, name: N, value: impl Into<SmolStr>) -> Option<SmolStr>
    where
        N: AsRef<str> + Into<SmolStr>,
    {
        let value = value.into();
        let text = name.as_ref();
        // One search of each list: a lookup costs a few hundred instructions and every
        // processor that changes a flow file comes here.
        let own = position(&self.0.list, text);
        let current = match own {
            Ok(i) => Some(&self.0.list[i].1),
            Err(_) => self.0.base.as_ref().and_then(|b| b.lookup(text)),
        };
        if current == Some(&value) {
            return Some(value);
        }
        let previous = current.cloned();
        let was_flat = self.0.base.is_none();
        // Made once: a long name is then shared by the entry and the remembered change.
        let name: SmolStr = name.into();
        let e = self.entries_mut(Some((&name, Some(&value))), false);
        // The first search still holds where a map kept its kind: its own list is the one
        // searched, or a copy of it in the same order (a flat map made flat, an overlay
        // made an overlay). A new overlay on a flat map starts empty; an overlay just made
        // flat is searched again.
        let at = match (was_flat, e.base.is_none()) {
            (true, true) | (false, false) => own,
            (true, false) if e.list.is_empty() => Err(0),
            _ => position(&e.list, &name),
        };
        match at {
            Ok(i) => e.list[i].1 = value,
            Err(i) => {
                if e.base.is_some() && previous.is_none() {
                    e.added += 1;
                }
                e.list.insert(i, (name, value));
                if e.base.is_some() && e.list.len() > OVERLAY_MOST {
                    e.flatten();
                }
            }
        }
        previous
    }

    /// Sets `name` to `value` unless it is set already; returns whether it set it.
    pub fn insert_if_absent(&mut self, name: &str, value: impl FnOnce() -> SmolStr) -> bool {
        if self.contains_key(name) {
            return false;
        }
        self.insert(name, value());
        true
    }

    /// Removes `name`; returns its value. Makes a new map first only when they are shared
    /// and hold `name`.
    pub fn remove(&mut self, name: &str) -> Option<SmolStr> {
        self.0.lookup(name)?;
        let e = self.entries_mut(Some((&SmolStr::new(name), None)), true);
        let i = position(&e.list, name).expect("a flat map holds every name");
        Some(e.list.remove(i).1)
    }

    /// Keeps only the attributes for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        if self.iter().any(|(k, v)| !keep(k, v)) {
            self.entries_mut(None, true)
                .list
                .retain(|(k, v)| keep(k, v));
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

/// The entries of a map as held, in name order: an overlay's merged with its base's,
/// without allocating. From both ends, and it knows its length.
#[derive(Debug, Clone)]
pub struct Held<'a> {
    over: std::slice::Iter<'a, (SmolStr, SmolStr)>,
    base: std::slice::Iter<'a, (SmolStr, SmolStr)>,
    left: usize,
}

impl<'a> Iterator for Held<'a> {
    type Item = &'a (SmolStr, SmolStr);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (Some(o), Some(b)) = (self.over.as_slice().first(), self.base.as_slice().first())
        else {
            return self.over.next().or_else(|| self.base.next());
        };
        match name_order(&o.0, &b.0) {
            std::cmp::Ordering::Less => self.over.next(),
            std::cmp::Ordering::Equal => {
                self.base.next();
                self.over.next()
            }
            std::cmp::Ordering::Greater => self.base.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for Held<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (Some(o), Some(b)) = (self.over.as_slice().last(), self.base.as_slice().last()) else {
            return self.over.next_back().or_else(|| self.base.next_back());
        };
        match name_order(&o.0, &b.0) {
            std::cmp::Ordering::Greater => self.over.next_back(),
            std::cmp::Ordering::Equal => {
                self.base.next_back();
                self.over.next_back()
            }
            std::cmp::Ordering::Less => self.base.next_back(),
        }
    }
}

impl ExactSizeIterator for Held<'_> {}

/// The iterator of [`Attributes::iter`]: names and values in name order.
#[derive(Debug, Clone)]
pub struct Iter<'a>(Held<'a>);

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
    if entries.is_sorted_by(|a, b| name_order(&a.0, &b.0).is_lt()) {
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

/// The core attribute that holds a flow file's content size in bytes. As in NiFi it is not
/// stored in the map: [`FlowFile::attribute`], expressions and the provenance store derive
/// it from the content, so a processor that rewrites content pays for no attribute change.
pub const FILE_SIZE: &str = "fileSize";

/// A flow file: its repository id, its attributes (the core ones included), its content
/// claim, and where it stands in its queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowFile {
    /// The repository's id, unique for the repository's life.
    pub id: u64,
    /// Attributes: `uuid`, `filename`, `path`, `entryDate`, `lineageStartDate` and whatever
    /// processors add. Shared copy-on-write: cloning a flow file is cheap. The core
    /// attribute [`FILE_SIZE`] is derived from `claim`, not held here: read attributes with
    /// [`FlowFile::attribute`] to see it.
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
        match self.attributes.last_entry() {
            Some((name, value)) if same_text(name, "uuid") => Some(value),
            _ => self.attributes.get_shared("uuid"),
        }
    }

    /// An attribute's value, as processors and expressions read it: from the map, except
    /// [`FILE_SIZE`], the content's size (formatted when asked for).
    pub fn attribute(&self, name: &str) -> Option<Cow<'_, str>> {
        if name == FILE_SIZE {
            return Some(Cow::Owned(self.size().to_string()));
        }
        self.attributes.get(name).map(Cow::Borrowed)
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
    fn file_size_is_read_from_the_content_not_the_map() {
        let mut ff = FlowFile {
            id: 1,
            attributes: [("uuid", "u-1"), ("fileSize", "999")].into_iter().collect(),
            claim: None,
            entry_date: 0,
            lineage_start: 0,
            queue_seq: 0,
        };
        // A stale entry (an old journal's, a source's) never shows: the content decides.
        assert_eq!(ff.attribute(FILE_SIZE).as_deref(), Some("0"));
        ff.claim = Some(ContentClaim {
            file: 3,
            offset: 10,
            len: 42,
        });
        assert_eq!(ff.attribute(FILE_SIZE).as_deref(), Some("42"));
        assert_eq!(ff.attribute("uuid").as_deref(), Some("u-1"));
        assert_eq!(ff.attribute("missing"), None);
    }

    /// The changes `map` remembers since `base`, as texts.
    fn changes<'a>(
        map: &'a Attributes,
        base: &Attributes,
    ) -> Option<Vec<(&'a str, Option<&'a str>)>> {
        map.changes_since(base).map(|c| {
            c.iter()
                .map(|(k, v)| (k.as_str(), v.as_ref().map(SmolStr::as_str)))
                .collect()
        })
    }

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
            changes(&copy, &base),
            Some(vec![("b", Some("21")), ("c", None)])
        );
        // Setting a name to the value it has changes nothing.
        copy.insert("a", "1");
        assert_eq!(copy.changes_since(&base).map(<[_]>::len), Some(2));
        // A name removed and set again holds its value again.
        let mut back = base.clone();
        back.remove("a");
        back.insert("a", "9");
        assert_eq!(changes(&back, &base), Some(vec![("a", Some("9"))]));
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

    /// A change to a map, for the model test.
    #[derive(Debug, Clone)]
    enum Change {
        Set(u8, u8),
        Remove(u8),
        Keep(u8),
        /// Keep a clone of the map as it is now, so that the next change makes a new one.
        Share,
        /// Go on from a kept clone instead.
        Resume(usize),
    }

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0u8..24, 0u8..4).prop_map(|(k, v)| Change::Set(k, v)),
            1 => (0u8..24).prop_map(Change::Remove),
            1 => (1u8..6).prop_map(Change::Keep),
            4 => Just(Change::Share),
            1 => (0usize..8).prop_map(Change::Resume),
        ]
    }

    fn name(k: u8) -> String {
        format!("name-{k:02}")
    }

    fn value(v: u8) -> String {
        // Some long enough to be shared by reference count.
        format!(
            "{v}{}",
            if v.is_multiple_of(2) {
                ""
            } else {
                " and a tail past twenty-three bytes"
            }
        )
    }

    proptest::proptest! {
        /// A map built from entries and an ordered tail reads as one built from them all:
        /// head in order or not, before the tail or among it, names repeated.
        #[test]
        fn entries_then_an_ordered_tail_read_as_all_the_entries(
            head in proptest::collection::vec(("[a-o]{1,2}", "[0-9]"), 0..6),
        ) {
            let entry = |(k, v): &(String, String)| (SmolStr::new(k), SmolStr::new(v));
            let head: Vec<(SmolStr, SmolStr)> = head.iter().map(entry).collect();
            let tail = [("m", "t1"), ("n", "t2"), ("p", "t3")]
                .map(|(k, v)| (SmolStr::new(k), SmolStr::new(v)));
            let all: Vec<(SmolStr, SmolStr)> = head.iter().cloned().chain(tail.clone()).collect();
            let built = Attributes::from_entries_then(head, tail);
            proptest::prop_assert_eq!(built.to_map(), Attributes::from_entries(all.clone()).to_map());
            proptest::prop_assert_eq!(built.len(), Attributes::from_entries(all).len());
        }

        /// Names order, and texts are equal, as `str`s do: short or long, differing in
        /// the first bytes, past them or nowhere, one the start of the other.
        #[test]
        fn names_order_as_texts_do(
            a in "(abcdefghijklmnop?)?[a-c$.]{0,4}",
            b in "(abcdefghijklmnop?)?[a-c$.]{0,4}",
        ) {
            proptest::prop_assert_eq!(name_order(&a, &b), a.cmp(&b));
            proptest::prop_assert_eq!(same_text(&a, &b), a == b);
            proptest::prop_assert!(same_text(&a, &a.clone()));
        }

        /// Any chain of changes, to maps shared or not (flat, overlaid, overlays of
        /// overlays, flattened again), reads as a `BTreeMap` changed the same way does: by
        /// name, in order from both ends, by length and by equality; every map kept
        /// along the way still reads as it did when it was kept, and has the same names as
        /// the map now exactly when the two models do.
        #[test]
        fn any_chain_of_changes_reads_as_a_map(
            start in proptest::collection::btree_map(0u8..24, 0u8..4, 0..16),
            changes in proptest::collection::vec(change(), 0..60),
        ) {
            let mut model: BTreeMap<String, String> =
                start.iter().map(|(k, v)| (name(*k), value(*v))).collect();
            let mut map = Attributes::from(model.clone());
            let mut kept: Vec<(Attributes, BTreeMap<String, String>)> = Vec::new();
            for c in changes {
                match c {
                    Change::Set(k, v) => {
                        let before = model.insert(name(k), value(v));
                        let got = map.insert(name(k), value(v));
                        proptest::prop_assert_eq!(got.as_deref(), before.as_deref());
                    }
                    Change::Remove(k) => {
                        let before = model.remove(&name(k));
                        let got = map.remove(&name(k));
                        proptest::prop_assert_eq!(got.as_deref(), before.as_deref());
                    }
                    Change::Keep(m) => {
                        model.retain(|k, _| k.len() % usize::from(m) != 0 || k.ends_with('0'));
                        map.retain(|k, _| k.len() % usize::from(m) != 0 || k.ends_with('0'));
                    }
                    Change::Share => kept.push((map.clone(), model.clone())),
                    Change::Resume(i) => {
                        if let Some((m, mm)) = kept.get(i % kept.len().max(1)) {
                            map = m.clone();
                            model = mm.clone();
                        }
                    }
                }
                proptest::prop_assert_eq!(map.len(), model.len());
                let forward: Vec<(&str, &str)> = map.iter().collect();
                let expected: Vec<(&str, &str)> =
                    model.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                proptest::prop_assert_eq!(&forward, &expected);
                let mut backward: Vec<(&str, &str)> = map.iter().rev().collect();
                backward.reverse();
                proptest::prop_assert_eq!(&backward, &expected);
                for k in 0..24 {
                    proptest::prop_assert_eq!(map.get(&name(k)), model.get(&name(k)).map(String::as_str));
                }
                proptest::prop_assert_eq!(&map, &Attributes::from(model.clone()));
                for (m, mm) in &kept {
                    proptest::prop_assert_eq!(map.same_names(m), model.keys().eq(mm.keys()));
                }
            }
            for (m, mm) in &kept {
                proptest::prop_assert_eq!(m.to_map(), mm.clone());
            }
        }
    }

    #[test]
    fn a_change_to_a_large_shared_map_overlays_it_and_is_remembered() {
        let base: Attributes = (0..12).map(|i| (format!("k{i:02}"), "v")).collect();
        let mut copy = base.clone();
        copy.insert("k03", "changed");
        copy.insert("new", "x");
        assert_eq!(copy.len(), 13);
        assert_eq!(copy.get("k03"), Some("changed"));
        assert_eq!(base.get("k03"), Some("v"));
        assert_eq!(
            changes(&copy, &base),
            Some(vec![("k03", Some("changed")), ("new", Some("x"))])
        );
        // An overlay of the overlay still reads through to the first map.
        let mut again = copy.clone();
        again.insert("k11", "last");
        assert_eq!(changes(&again, &copy), Some(vec![("k11", Some("last"))]));
        assert_eq!(again.get("k03"), Some("changed"));
        assert_eq!(again.iter().next_back(), Some(("new", "x")));
        assert_eq!(again.keys().next(), Some("k00"));
        // A removal makes it flat again, and equal maps are equal however they are held.
        again.remove("new");
        let flat: Attributes = again.iter().collect();
        assert_eq!(again, flat);
    }
}
