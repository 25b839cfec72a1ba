//! DetectDuplicate: its spec, its processor (with its cache) and its unit tests.
//!
//! NiFi keeps the identifiers in a DistributedMapCacheClient controller service; Weir has
//! no controller services, so the cache lives in the processor, bounded by `Maximum Cache
//! Entries` (the oldest entry is evicted first, as the cache server's FIFO strategy does).
//! It is held in memory: entries last while the flow runs, and a restart starts it empty.
//! A session that rolls back takes back the entries it added or aged off, so a flow file
//! retried after a failed commit is not taken for a duplicate of itself.

use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn, Problem};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{Completion, Session};

/// The DetectDuplicate type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(DetectDuplicate::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "DetectDuplicate",
    description: "Routes flow files whose identifier was seen before to duplicate, keeping the identifiers in a bounded cache.",
    properties: &[
        p("Cache Entry Identifier", true, Some("${hash.value}"), K::Expression)
            .about("The value that identifies a flow file; a blank one sends it to failure."),
        p("FlowFile Description", true, Some(""), K::Expression)
            .about("Kept with the identifier; a duplicate gets the first one's as `original.flowfile.description`."),
        p("Age Off Duration", false, None, K::Duration)
            .about("How long an identifier stays in the cache; without it, until evicted."),
        p("Cache The Entry Identifier", false, Some("true"), K::Bool)
            .about("Add identifiers not seen before to the cache; when false, only look them up."),
        p("Maximum Cache Entries", true, Some("10000"), K::Count)
            .about("How many identifiers the cache holds; the oldest is evicted first to make room."),
    ],
    relationships: &["duplicate", "non-duplicate", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

/// Checks that the cache can hold at least one entry.
pub(super) fn validate(properties: &BTreeMap<String, String>) -> Vec<Problem> {
    match properties.get("Maximum Cache Entries").map(|v| v.trim()) {
        Some("0") => vec![Problem::new("Maximum Cache Entries", "must be at least 1")],
        _ => Vec::new(),
    }
}

const ORIGINAL_DESCRIPTION: SmolStr = SmolStr::new_static("original.flowfile.description");

/// One identifier's entry.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    description: String,
    /// Milliseconds since the epoch when it was cached.
    at_ms: u64,
    /// Its place in the eviction order.
    seq: u64,
}

/// The identifiers seen, in the order they were cached.
#[derive(Debug, Default)]
struct Cache {
    entries: HashMap<String, Entry>,
    /// Identifiers by age, oldest first; an identifier removed since (aged off, taken back)
    /// stays here until it reaches the front, recognised by its `seq`.
    order: VecDeque<(String, u64)>,
    next_seq: u64,
}

/// A change a session made, taken back if it rolls back.
enum Change {
    Added(String, u64),
    Removed(String, Entry),
}

impl Cache {
    fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Adds `key` (absent), evicting the oldest entries beyond `capacity`.
    fn put(
        &mut self,
        key: &str,
        description: String,
        at_ms: u64,
        capacity: usize,
        changes: &mut Vec<Change>,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.entries.insert(
            key.to_string(),
            Entry {
                description,
                at_ms,
                seq,
            },
        );
        self.order.push_back((key.to_string(), seq));
        changes.push(Change::Added(key.to_string(), seq));
        while self.entries.len() > capacity {
            self.pop_oldest();
        }
    }

    fn remove(&mut self, key: &str, changes: &mut Vec<Change>) {
        if let Some(entry) = self.entries.remove(key) {
            changes.push(Change::Removed(key.to_string(), entry));
        }
        self.compact();
    }

    /// Evicts the oldest live entry.
    fn pop_oldest(&mut self) {
        while let Some((key, seq)) = self.order.pop_front() {
            if self.entries.get(&key).is_some_and(|e| e.seq == seq) {
                self.entries.remove(&key);
                return;
            }
        }
    }

    /// Drops entries older than `age` at `now_ms` from the front (oldest first): the cache
    /// does not keep what can only age off.
    fn age_off(&mut self, now_ms: u64, age_ms: u64) {
        while let Some((key, seq)) = self.order.front() {
            match self.entries.get(key) {
                Some(e) if e.seq == *seq && now_ms < e.at_ms.saturating_add(age_ms) => return,
                Some(e) if e.seq == *seq => {
                    self.entries.remove(key);
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }

    /// Keeps the eviction order from growing past twice the live entries.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order
                .retain(|(k, seq)| entries.get(k).is_some_and(|e| e.seq == *seq));
        }
    }

    /// Takes back `changes`, newest first.
    fn undo(&mut self, changes: Vec<Change>) {
        for change in changes.into_iter().rev() {
            match change {
                Change::Added(key, seq) => {
                    if self.entries.get(&key).is_some_and(|e| e.seq == seq) {
                        self.entries.remove(&key);
                    }
                }
                Change::Removed(key, entry) => {
                    if !self.entries.contains_key(&key) {
                        self.order.push_back((key.clone(), entry.seq));
                        self.entries.insert(key, entry);
                    }
                }
            }
        }
        self.compact();
    }
}

/// DetectDuplicate: a flow file whose identifier is in the cache goes to `duplicate`.
pub struct DetectDuplicate {
    identifier: Template,
    description: Template,
    age_off: Option<Duration>,
    cache_identifier: bool,
    capacity: usize,
    cache: Arc<Mutex<Cache>>,
}

impl DetectDuplicate {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let age_off = match props::opt(c, "Age Off Duration") {
            Some(_) => Some(props::duration(c, "Age Off Duration")?),
            None => None,
        };
        Ok(DetectDuplicate {
            identifier: props::template(c, "Cache Entry Identifier")?,
            description: props::template(c, "FlowFile Description")?,
            age_off,
            cache_identifier: props::opt(c, "Cache The Entry Identifier").as_deref()
                != Some("false"),
            capacity: usize::try_from(props::count(c, "Maximum Cache Entries")?)
                .unwrap_or(usize::MAX)
                .max(1),
            cache: Arc::new(Mutex::new(Cache::default())),
        })
    }

    /// Looks `key` up at `now_ms` (caching it when asked) and returns the description of the
    /// entry it duplicates, if it is a duplicate.
    fn check(
        &self,
        cache: &mut Cache,
        key: &str,
        description: String,
        now_ms: u64,
        changes: &mut Vec<Change>,
    ) -> Option<String> {
        let age_ms = self
            .age_off
            .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX));
        if let Some(age_ms) = age_ms {
            cache.age_off(now_ms, age_ms);
        }
        let original = cache.get(key).cloned();
        if let Some(entry) = &original
            && let Some(age_ms) = age_ms
            && now_ms >= entry.at_ms.saturating_add(age_ms)
        {
            // Aged off: as if never seen.
            cache.remove(key, changes);
            if self.cache_identifier {
                cache.put(key, description, now_ms, self.capacity, changes);
            }
            return None;
        }
        match original {
            Some(entry) => Some(entry.description),
            None => {
                if self.cache_identifier {
                    cache.put(key, description, now_ms, self.capacity, changes);
                }
                None
            }
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Processor for DetectDuplicate {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        if ffs.is_empty() {
            return Ok(Trigger::Idle);
        }
        let mut changes = Vec::new();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for &ff in &ffs {
                let key = session
                    .evaluate(&self.identifier, ff)
                    .map(|k| k.into_owned());
                let description = session
                    .evaluate(&self.description, ff)
                    .map(|d| d.into_owned());
                let (key, description) = match (key, description) {
                    (Ok(key), Ok(description)) if !key.trim().is_empty() => (key, description),
                    _ => {
                        tracing::warn!(
                            flowfile = %session.flowfile(ff).uuid(),
                            "DetectDuplicate: no Cache Entry Identifier; routed to failure"
                        );
                        session.penalize(ff);
                        session.transfer(ff, "failure")?;
                        continue;
                    }
                };
                match self.check(&mut cache, &key, description, now_ms(), &mut changes) {
                    Some(original) => {
                        session.put_attribute(ff, ORIGINAL_DESCRIPTION, SmolStr::from(original));
                        session.report(
                            ff,
                            EventType::ROUTE,
                            None,
                            Some(SmolStr::new_static(
                                "Duplicate of: original.flowfile.description",
                            )),
                        );
                        session.transfer(ff, "duplicate")?;
                    }
                    None => {
                        session.report(
                            ff,
                            EventType::ROUTE,
                            None,
                            Some(SmolStr::new_static("non-duplicate")),
                        );
                        session.transfer(ff, "non-duplicate")?;
                    }
                }
            }
        }
        if !changes.is_empty() {
            let cache = Arc::clone(&self.cache);
            session.on_complete(move |completion| {
                if let Completion::RolledBack { .. } = completion {
                    cache
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .undo(changes);
                }
            });
        }
        Ok(Trigger::Worked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detector(settings: &[(&str, &str)]) -> DetectDuplicate {
        let mut properties: BTreeMap<String, String> = SPEC
            .properties
            .iter()
            .filter_map(|p| p.default.map(|d| (p.name.to_string(), d.to_string())))
            .collect();
        for (k, v) in settings {
            properties.insert(k.to_string(), v.to_string());
        }
        assert!(validate(&properties).is_empty());
        DetectDuplicate::new(&super::super::component_for_tests(&SPEC, properties)).unwrap()
    }

    fn seen(d: &DetectDuplicate, cache: &mut Cache, key: &str, at: u64) -> Option<String> {
        d.check(cache, key, format!("{key}@{at}"), at, &mut Vec::new())
    }

    #[test]
    fn the_cache_holds_exactly_its_bound_and_evicts_the_oldest() {
        let d = detector(&[("Maximum Cache Entries", "3")]);
        let mut cache = Cache::default();
        for (i, key) in ["a", "b", "c"].iter().enumerate() {
            assert_eq!(seen(&d, &mut cache, key, i as u64), None);
        }
        assert_eq!(
            seen(&d, &mut cache, "a", 10),
            Some("a@0".into()),
            "at the bound all are kept"
        );
        assert_eq!(seen(&d, &mut cache, "d", 11), None);
        assert_eq!(
            seen(&d, &mut cache, "a", 12),
            None,
            "the oldest was evicted for d"
        );
        assert_eq!(cache.entries.len(), 3);
        assert_eq!(seen(&d, &mut cache, "c", 13), Some("c@2".into()));
    }

    #[test]
    fn entries_age_off() {
        let d = detector(&[("Age Off Duration", "10 sec")]);
        let mut cache = Cache::default();
        assert_eq!(seen(&d, &mut cache, "a", 1_000), None);
        assert_eq!(seen(&d, &mut cache, "a", 10_999), Some("a@1000".into()));
        assert_eq!(
            seen(&d, &mut cache, "a", 11_000),
            None,
            "aged off at exactly the duration"
        );
        assert_eq!(
            seen(&d, &mut cache, "a", 12_000),
            Some("a@11000".into()),
            "cached again"
        );
        assert_eq!(seen(&d, &mut cache, "b", 30_000), None);
        assert!(
            !cache.entries.contains_key("a"),
            "aged-off entries are dropped"
        );
    }

    #[test]
    fn lookups_alone_cache_nothing() {
        let d = detector(&[("Cache The Entry Identifier", "false")]);
        let mut cache = Cache::default();
        assert_eq!(seen(&d, &mut cache, "a", 1), None);
        assert_eq!(seen(&d, &mut cache, "a", 2), None);
        assert!(cache.entries.is_empty());
    }

    proptest::proptest! {
        /// Against a plain model (a list of keys, oldest first, cut to the bound), every
        /// lookup answers the same and the cache holds the same keys.
        #[test]
        fn the_cache_evicts_as_a_fifo_of_its_bound(
            keys in proptest::collection::vec(0u8..12, 0..200),
            bound in 1usize..8,
        ) {
            let d = detector(&[("Maximum Cache Entries", &bound.to_string())]);
            let mut cache = Cache::default();
            let mut model: VecDeque<u8> = VecDeque::new();
            for (at, key) in keys.iter().enumerate() {
                let duplicate = seen(&d, &mut cache, &key.to_string(), at as u64).is_some();
                proptest::prop_assert_eq!(duplicate, model.contains(key));
                if !duplicate {
                    model.push_back(*key);
                    if model.len() > bound {
                        model.pop_front();
                    }
                }
                proptest::prop_assert_eq!(cache.entries.len(), model.len());
                proptest::prop_assert!(cache.order.len() <= 2 * bound + 64 + 1);
            }
        }
    }

    #[test]
    fn a_rollback_takes_back_what_a_session_cached() {
        let d = detector(&[]);
        let mut cache = Cache::default();
        let mut changes = Vec::new();
        assert_eq!(
            d.check(&mut cache, "new", "n".into(), 20_000, &mut changes),
            None
        );
        assert_eq!(
            d.check(&mut cache, "new", "n".into(), 20_001, &mut changes),
            Some("n".into())
        );
        cache.undo(changes);
        assert!(!cache.entries.contains_key("new"));
        assert_eq!(
            d.check(&mut cache, "new", "n".into(), 20_002, &mut Vec::new()),
            None
        );
    }
}
