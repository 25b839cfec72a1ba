//! Reading the provenance store: events by query (flow file, component, time, type) and a
//! flow file's lineage.

use super::flowfile_index::Unfolded;
use super::*;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// What the look-ups of one query or lineage have read: chunks decoded, and the index's
/// unfolded lists.
#[derive(Default)]
pub(super) struct Lookups {
    pub(super) chunks: FxHashMap<ChunkKey, ReadChunk>,
    pub(super) unfolded: Unfolded,
}

/// A decoded chunk, and once it is looked in a second time, where each flow file is named in
/// it: a lineage looks in a fork's or a merge's chunk once per flow file it holds, and each
/// look is then one hash look-up, not a scan of the thousands of uuids the event lists.
pub(super) struct ReadChunk {
    events: Vec<ProvenanceEvent>,
    /// Looks so far: a chunk looked in once (a query by flow file) is only scanned.
    looks: u32,
    by_uuid: Option<FxHashMap<String, Vec<Naming>>>,
}

/// Where an event names a flow file: the event's position in its chunk, and whether it
/// names the flow file as a parent, as a child, or (neither) only as its flow file.
#[derive(Clone, Copy)]
struct Naming {
    event: u32,
    as_parent: bool,
    as_child: bool,
}

impl ReadChunk {
    fn new(events: Vec<ProvenanceEvent>) -> ReadChunk {
        ReadChunk {
            events,
            looks: 0,
            by_uuid: None,
        }
    }

    /// Calls `visit` with each event naming `uuid`, in order, and how it names it. The
    /// first look scans the events; the second builds the index the later ones use.
    fn each_naming(&mut self, uuid: &str, mut visit: impl FnMut(&ProvenanceEvent, Naming)) {
        let naming = |i: usize, e: &ProvenanceEvent, uuid: &str| {
            let as_parent = e.parents.iter().any(|p| p == uuid);
            let as_child = e.children.iter().any(|c| c == uuid);
            (as_parent || as_child || e.flowfile == uuid).then_some(Naming {
                event: i as u32,
                as_parent,
                as_child,
            })
        };
        self.looks += 1;
        match &self.by_uuid {
            Some(index) => {
                for n in index.get(uuid).into_iter().flatten() {
                    visit(&self.events[n.event as usize], *n);
                }
            }
            None if self.looks == 1 => {
                for (i, e) in self.events.iter().enumerate() {
                    if let Some(n) = naming(i, e, uuid) {
                        visit(e, n);
                    }
                }
            }
            None => {
                let mut index: FxHashMap<String, Vec<Naming>> = FxHashMap::default();
                for (i, e) in self.events.iter().enumerate() {
                    let mut name = |u: &str, as_parent: bool, as_child: bool| {
                        let namings = index.entry(u.to_string()).or_default();
                        match namings.last_mut() {
                            Some(n) if n.event == i as u32 => {
                                n.as_parent |= as_parent;
                                n.as_child |= as_child;
                            }
                            _ => namings.push(Naming {
                                event: i as u32,
                                as_parent,
                                as_child,
                            }),
                        }
                    };
                    name(&e.flowfile, false, false);
                    for p in &e.parents {
                        name(p, true, false);
                    }
                    for c in &e.children {
                        name(c, false, true);
                    }
                }
                for n in index.get(uuid).into_iter().flatten() {
                    visit(&self.events[n.event as usize], *n);
                }
                self.by_uuid = Some(index);
            }
        }
    }
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
        self.each_event_of(uuid, cache, |e, _| {
            out.entry(e.id).or_insert_with(|| e.clone());
        })?;
        Ok(out)
    }

    /// Calls `visit` with each event naming flow file `uuid` (as the flow file, a parent or
    /// a child) and how it names it, in chunk order; an event written twice (a replayed
    /// frame) comes twice. What it reads is kept in `cache` for the next call.
    fn each_event_of(
        &self,
        uuid: &str,
        cache: &mut Lookups,
        mut visit: impl FnMut(&ProvenanceEvent, Naming),
    ) -> Result<(), ProvenanceError> {
        for key in self.chunks_of(uuid, &mut cache.unfolded)? {
            let chunk = match cache.chunks.entry(key) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let Some(events) = self.store.chunk(&key)? else {
                        continue;
                    };
                    v.insert(ReadChunk::new(events))
                }
            };
            chunk.each_naming(uuid, &mut visit);
        }
        Ok(())
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

    /// The lineage of `flowfile` within `limits`: the flow files related to it through
    /// parent and child links (FORK, JOIN, CLONE) that a breadth-first search reaches in
    /// `limits.depth` hops while it holds at most `limits.max_flowfiles`, all their events,
    /// and the frontier: the flow files held whose parents or children are not, each with
    /// how many (so a viewer can offer to expand them).
    ///
    /// Cost: one index look-up per flow file held (the chunks it reads are shared between
    /// them); the search stops at the limits rather than walking the whole lineage, so a
    /// split into thousands costs no more than a split into a few.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn lineage(
        &self,
        flowfile: &str,
        limits: LineageLimits,
    ) -> Result<Lineage, ProvenanceError> {
        self.flush();
        let max_flowfiles = limits.max_flowfiles.max(1);
        // Flow files held, in the order they were reached, each with its hops and (once
        // looked up) its parents and children.
        let mut held: Vec<Reached> = vec![Reached {
            uuid: flowfile.to_string(),
            depth: 0,
            parents: Vec::new(),
            children: Vec::new(),
        }];
        let mut index_of: FxHashMap<String, usize> = FxHashMap::default();
        index_of.insert(flowfile.to_string(), 0);
        let mut events: BTreeMap<u64, ProvenanceEvent> = BTreeMap::new();
        // Related flow files mostly share chunks (a fork's children are written with it).
        let mut cache = Lookups::default();
        let mut next = 0;
        // Breadth first: `held` is the queue, `next` its head.
        while next < held.len() {
            let (uuid, depth) = (held[next].uuid.clone(), held[next].depth);
            let (parents, children) = self.links_of(&uuid, &mut cache, &mut events)?;
            if depth < limits.depth {
                for n in parents.iter().chain(&children) {
                    if held.len() >= max_flowfiles {
                        break;
                    }
                    if !index_of.contains_key(n) {
                        index_of.insert(n.clone(), held.len());
                        held.push(Reached {
                            uuid: n.clone(),
                            depth: depth + 1,
                            parents: Vec::new(),
                            children: Vec::new(),
                        });
                    }
                }
            }
            held[next].parents = parents;
            held[next].children = children;
            next += 1;
        }
        let is_held = |u: &String| index_of.contains_key(u);
        let mut omitted: rustc_hash::FxHashSet<&str> = Default::default();
        let mut frontier = Vec::new();
        for r in &held {
            let more_parents = r.parents.iter().filter(|p| !is_held(p)).count();
            let more_children = r.children.iter().filter(|c| !is_held(c)).count();
            if more_parents + more_children > 0 {
                omitted.extend(
                    r.parents
                        .iter()
                        .chain(&r.children)
                        .filter(|u| !is_held(u))
                        .map(String::as_str),
                );
                frontier.push(LineageFrontier {
                    flowfile: r.uuid.clone(),
                    more_parents,
                    more_children,
                });
            }
        }
        let omitted = omitted.len();
        let start = &held[0];
        let mut events: Vec<ProvenanceEvent> = events.into_values().collect();
        events.sort_by_key(|e| (e.time_ms, e.id));
        Ok(Lineage {
            flowfile: flowfile.to_string(),
            parents: start
                .parents
                .iter()
                .filter(|p| is_held(p))
                .cloned()
                .collect(),
            children: start
                .children
                .iter()
                .filter(|c| is_held(c))
                .cloned()
                .collect(),
            frontier,
            omitted,
            truncated: omitted > 0,
            visited: held.len(),
            flowfiles: held.iter().map(|r| r.uuid.clone()).collect(),
            events,
        })
    }

    /// Looks up flow file `uuid`'s events (adding them to `events`) and returns its direct
    /// parents and children, each once, in the order its events name them.
    fn links_of(
        &self,
        uuid: &str,
        cache: &mut Lookups,
        events: &mut BTreeMap<u64, ProvenanceEvent>,
    ) -> Result<(Vec<String>, Vec<String>), ProvenanceError> {
        let (mut parents, mut children) = (Vec::new(), Vec::new());
        let mut seen: rustc_hash::FxHashSet<String> = Default::default();
        self.each_event_of(uuid, cache, |e, naming| {
            // A FORK's or CLONE's parent is its flow file and lists itself as the parent; a
            // JOIN's child is its flow file and lists itself as the child: the two lists say
            // who came from whom.
            if naming.as_child {
                for p in e.parents.iter().filter(|p| *p != uuid) {
                    if seen.insert(p.clone()) {
                        parents.push(p.clone());
                    }
                }
            }
            if naming.as_parent {
                for c in e.children.iter().filter(|c| *c != uuid) {
                    if seen.insert(c.clone()) {
                        children.push(c.clone());
                    }
                }
            }
            // Cloned once: a merge's JOIN is named by each of its (maybe thousands of)
            // parents.
            events.entry(e.id).or_insert_with(|| e.clone());
        })?;
        Ok((parents, children))
    }
}

/// A flow file a lineage search reached.
struct Reached {
    uuid: String,
    /// Hops from the flow file asked about.
    depth: u32,
    /// Its direct parents and children, once looked up.
    parents: Vec<String>,
    children: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linked(
        id: u64,
        t: EventType,
        ff: &str,
        parents: &[&str],
        children: &[&str],
    ) -> ProvenanceEvent {
        ProvenanceEvent {
            event_type: t,
            parents: parents.iter().map(|p| p.to_string()).collect(),
            children: children.iter().map(|c| c.to_string()).collect(),
            ..super::super::tests::event_with(id, ff, Default::default())
        }
    }

    /// The first look scans, the later ones read the index: both find the same events,
    /// naming the flow file the same way.
    #[test]
    fn a_chunks_index_finds_what_a_scan_finds() {
        let mut chunk = ReadChunk::new(vec![
            linked(1, EventType::FORK, "p", &["p"], &["a", "b"]),
            linked(2, EventType::ROUTE, "a", &[], &[]),
            linked(3, EventType::JOIN, "m", &["a", "b"], &["m"]),
            linked(4, EventType::CLONE, "b", &["b"], &["c"]),
        ]);
        let looks = |chunk: &mut ReadChunk, uuid: &str| {
            let mut seen = Vec::new();
            chunk.each_naming(uuid, |e, n| seen.push((e.id, n.as_parent, n.as_child)));
            seen
        };
        let want = [
            ("p", vec![(1, true, false)]),
            (
                "a",
                vec![(1, false, true), (2, false, false), (3, true, false)],
            ),
            (
                "b",
                vec![(1, false, true), (3, true, false), (4, true, false)],
            ),
            ("m", vec![(3, false, true)]),
            ("c", vec![(4, false, true)]),
            ("nobody", vec![]),
        ];
        // Every uuid first, then again: the first by a scan, every later one by the index.
        for round in 0..2 {
            for (uuid, namings) in &want {
                assert_eq!(&looks(&mut chunk, uuid), namings, "{uuid}, round {round}");
                assert!(chunk.by_uuid.is_some() || chunk.looks == 1);
            }
        }
    }
}
