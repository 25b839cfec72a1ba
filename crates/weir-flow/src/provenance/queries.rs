//! Reading the provenance store: events by query (flow file, component, time, type) and a
//! flow file's lineage.

use super::flowfile_index::Unfolded;
use super::*;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What the look-ups of one query or lineage have read: chunks decoded, and the index's
/// unfolded lists.
#[derive(Default)]
pub(super) struct Lookups {
    pub(super) chunks: FxHashMap<ChunkKey, Vec<ProvenanceEvent>>,
    pub(super) unfolded: Unfolded,
}

impl ProvenanceRepository {
    /// The keys of the chunks that may name flow file `uuid`, in order, each once.
    pub(super) fn chunks_of(
        &self,
        uuid: &str,
        unfolded: &mut Unfolded,
    ) -> Result<Vec<ChunkKey>, ProvenanceError> {
        let mut keys = Vec::new();
        self.store.index.chunks_of(uuid, unfolded, &mut keys)?;
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    /// The events naming flow file `uuid` (as the flow file, a parent or a child), by id,
    /// each once; what it reads is kept in `cache` for the next call.
    pub(super) fn events_of(
        &self,
        uuid: &str,
        cache: &mut Lookups,
    ) -> Result<BTreeMap<u64, ProvenanceEvent>, ProvenanceError> {
        let mut out = BTreeMap::new();
        for key in self.chunks_of(uuid, &mut cache.unfolded)? {
            let events = match cache.chunks.entry(key) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let Some(events) = self.store.chunk(&key)? else {
                        continue;
                    };
                    v.insert(events)
                }
            };
            for e in events.iter() {
                if uuids_of(e).any(|u| u == uuid) {
                    out.entry(e.id).or_insert_with(|| e.clone());
                }
            }
        }
        Ok(out)
    }

    /// Events matching `query`, at most `limit`: oldest first, or newest first (the newest
    /// ones) with `query.newest_first`.
    ///
    /// A query by flow file reads the chunks its index entries name; one by component or
    /// time reads the chunks whose spans may match; one with neither reads every chunk until
    /// `limit`.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn query(
        &self,
        query: &Query,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceError> {
        self.flush();
        let keep = |e: &ProvenanceEvent| {
            query.component.as_ref().is_none_or(|c| e.component == c)
                && query.since_ms.is_none_or(|s| e.time_ms >= s)
                && query.until_ms.is_none_or(|u| e.time_ms <= u)
                && query.event_type.is_none_or(|t| e.event_type == t)
        };
        if let Some(ff) = &query.flowfile {
            let events = self.events_of(ff, &mut Lookups::default())?.into_values();
            return Ok(if query.newest_first {
                events.rev().filter(keep).take(limit).collect()
            } else {
                events.filter(keep).take(limit).collect()
            });
        }
        let span_matches = |span: &Span| {
            query.since_ms.is_none_or(|s| span.max_time_ms >= s)
                && query.until_ms.is_none_or(|u| span.min_time_ms <= u)
                && query
                    .component
                    .as_ref()
                    .is_none_or(|c| span.components.contains(c))
        };
        if query.newest_first {
            return self.query_newest_first(&keep, &span_matches, limit);
        }
        let mut out = Vec::new();
        // Chunks come by first id but may overlap (a replayed frame written again, batches
        // handed over out of id order): an event waits here until no later chunk can hold
        // an earlier one.
        let mut pending: BTreeMap<u64, ProvenanceEvent> = BTreeMap::new();
        for kv in self.store.spans.iter() {
            let (k, v) = kv?;
            let span: Span = postcard::from_bytes(&v)?;
            if !span_matches(&span) {
                continue;
            }
            let first = first_of(&k);
            while let Some(e) = pending.first_entry()
                && *e.key() < first
            {
                out.push(e.remove());
                if out.len() >= limit {
                    return Ok(out);
                }
            }
            for e in self.store.chunk(&k)?.unwrap_or_default() {
                if keep(&e) {
                    pending.entry(e.id).or_insert(e);
                }
            }
        }
        out.extend(pending.into_values());
        out.truncate(limit);
        Ok(out)
    }

    /// [`query`](Self::query) with the newest events first. Chunks may overlap, so they are
    /// read by their last event id, highest first: an event waits until no chunk still
    /// unread can hold a newer one. Cost: one pass over the chunks' keys and summaries, then
    /// the chunks read until `limit` events are out.
    fn query_newest_first(
        &self,
        keep: &dyn Fn(&ProvenanceEvent) -> bool,
        span_matches: &dyn Fn(&Span) -> bool,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceError> {
        let mut keys = Vec::new();
        for kv in self.store.spans.iter() {
            let (k, v) = kv?;
            let span: Span = postcard::from_bytes(&v)?;
            if span_matches(&span) {
                let last = u64::from_be_bytes(k[8..16].try_into().expect("16-byte key"));
                keys.push((last, k));
            }
        }
        keys.sort_by_key(|k| std::cmp::Reverse(k.0));
        let mut out = Vec::new();
        let mut pending: BTreeMap<u64, ProvenanceEvent> = BTreeMap::new();
        for (last, k) in keys {
            while let Some(e) = pending.last_entry()
                && *e.key() > last
            {
                out.push(e.remove());
                if out.len() >= limit {
                    return Ok(out);
                }
            }
            for e in self.store.chunk(&k)?.unwrap_or_default() {
                if keep(&e) {
                    pending.entry(e.id).or_insert(e);
                }
            }
        }
        out.extend(pending.into_values().rev());
        out.truncate(limit);
        Ok(out)
    }

    /// The lineage of `flowfile`: related flow files through parent and child links, and all
    /// their events.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn lineage(&self, flowfile: &str) -> Result<Lineage, ProvenanceError> {
        const MAX_FLOWFILES: usize = 100_000;
        self.flush();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut events: BTreeMap<u64, ProvenanceEvent> = BTreeMap::new();
        let mut todo = VecDeque::from([flowfile.to_string()]);
        let (mut parents, mut children) = (BTreeSet::new(), BTreeSet::new());
        // Related flow files mostly share chunks (a fork's children are written with it).
        let mut cache = Lookups::default();
        while let Some(ff) = todo.pop_front() {
            if !seen.insert(ff.clone()) || seen.len() > MAX_FLOWFILES {
                continue;
            }
            for e in self.events_of(&ff, &mut cache)?.into_values() {
                if e.flowfile == ff || e.parents.contains(&ff) {
                    // ff's own events, and events where ff is a parent: its children.
                    for c in &e.children {
                        if ff == flowfile {
                            children.insert(c.clone());
                        }
                        todo.push_back(c.clone());
                    }
                    if e.event_type == EventType::JOIN && e.flowfile != ff {
                        todo.push_back(e.flowfile.to_string());
                        if ff == flowfile {
                            children.insert(e.flowfile.to_string());
                        }
                    }
                }
                if e.children.contains(&ff) || (e.event_type == EventType::JOIN && e.flowfile == ff)
                {
                    // ff is a child here: walk up to its parents (and from them, its siblings).
                    let parent_list: Vec<String> = if e.children.contains(&ff) && e.flowfile != ff {
                        vec![e.flowfile.to_string()]
                    } else {
                        e.parents.clone()
                    };
                    for p in parent_list.into_iter().chain(e.parents.iter().cloned()) {
                        if p != ff {
                            if ff == flowfile {
                                parents.insert(p.clone());
                            }
                            todo.push_back(p);
                        }
                    }
                }
                events.insert(e.id, e);
            }
        }
        let mut events: Vec<ProvenanceEvent> = events.into_values().collect();
        events.sort_by_key(|e| (e.time_ms, e.id));
        Ok(Lineage {
            flowfile: flowfile.to_string(),
            parents: parents.into_iter().collect(),
            children: children.into_iter().collect(),
            flowfiles: seen.into_iter().collect(),
            events,
        })
    }
}
