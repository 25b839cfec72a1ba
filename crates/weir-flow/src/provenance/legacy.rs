//! Formats 1 to 4 of the store, read so that an older store keeps working: format 4's
//! chunks (one postcard `Vec` of events, each map stored in full, as the id of a later event
//! holding it, or as changes from such a map) are read where they are; the single events
//! of formats 1 to 3 are converted when the store is opened.

use fjall::PartitionHandle;
use serde::Deserialize;
#[cfg(test)]
use serde::Serialize;

use super::{EventType, ProvenanceError, ProvenanceEvent};
use crate::flowfile::SmolStr;

/// How an event's attributes are stored: `A` is the map, `Set` the entries set and `Removed`
/// the names removed (vectors when read, slices when written: the same encoding).
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(super) enum StoredAttributes<A, Set, Removed> {
    /// In full.
    Inline(A),
    /// The same map as this later event's, written with it.
    SameAs(u64),
    /// The map of `base`, a later event of the same flow file written with it, with `set`
    /// added or replaced and `removed` taken out (format 3).
    Changed {
        base: u64,
        set: Set,
        removed: Removed,
    },
}

/// Entries set and names removed, as read.
type ReadChanges = (Vec<(String, String)>, Vec<String>);

/// [`StoredAttributes`] as read.
type ReadAttributes =
    StoredAttributes<crate::flowfile::Attributes, Vec<(String, String)>, Vec<String>>;

/// [`StoredAttributes`] as written, borrowed from the events (tests write older stores).
#[cfg(test)]
pub(super) type WrittenAttributes<'a> =
    StoredAttributes<&'a crate::flowfile::Attributes, &'a [(&'a str, &'a str)], &'a [&'a str]>;

/// An event as written: [`ProvenanceEvent`]'s fields in its order (borrowed), with
/// [`StoredAttributes`] for its attributes.
#[cfg(test)]
#[derive(Serialize)]
struct StoredEventRef<'a, A: Serialize> {
    id: u64,
    event_type: EventType,
    time_ms: i64,
    flowfile: &'a str,
    component: &'a str,
    component_type: &'a str,
    attributes: A,
    size: u64,
    parents: &'a [String],
    children: &'a [String],
    details: Option<&'a str>,
    transit_uri: Option<&'a str>,
}

/// An event as read back; see [`StoredEventRef`].
#[derive(Deserialize)]
struct StoredEvent {
    id: u64,
    event_type: EventType,
    time_ms: i64,
    flowfile: SmolStr,
    component: SmolStr,
    component_type: SmolStr,
    attributes: ReadAttributes,
    size: u64,
    parents: Vec<String>,
    children: Vec<String>,
    details: Option<SmolStr>,
    transit_uri: Option<SmolStr>,
}

impl StoredEvent {
    fn into_event(self, attributes: crate::flowfile::Attributes) -> ProvenanceEvent {
        ProvenanceEvent {
            id: self.id,
            event_type: self.event_type,
            time_ms: self.time_ms,
            flowfile: self.flowfile,
            component: self.component,
            component_type: self.component_type,
            attributes,
            size: self.size,
            parents: self.parents,
            children: self.children,
            details: self.details,
            transit_uri: self.transit_uri,
        }
    }
}

/// Appends `e`, with `attributes` for its map, to `buffer`, as formats 2 to 4 stored an event.
#[cfg(test)]
pub(super) fn encode(
    e: &ProvenanceEvent,
    attributes: WrittenAttributes<'_>,
    buffer: &mut Vec<u8>,
) -> Result<(), ProvenanceError> {
    let stored = StoredEventRef {
        id: e.id,
        event_type: e.event_type,
        time_ms: e.time_ms,
        flowfile: &e.flowfile,
        component: &e.component,
        component_type: &e.component_type,
        attributes,
        size: e.size,
        parents: &e.parents,
        children: &e.children,
        details: e.details.as_deref(),
        transit_uri: e.transit_uri.as_deref(),
    };
    buffer.extend(postcard::to_allocvec(&stored)?);
    Ok(())
}

/// Decodes a chunk of format 4: its events in id order, each with its map resolved from the
/// later events of the chunk it refers to.
pub(super) fn decode_chunk(bytes: &[u8]) -> Result<Vec<ProvenanceEvent>, ProvenanceError> {
    let stored: Vec<StoredEvent> = postcard::from_bytes(bytes)?;
    let ids: Vec<u64> = stored.iter().map(|e| e.id).collect();
    let mut maps: Vec<Option<crate::flowfile::Attributes>> = vec![None; stored.len()];
    let mut events = Vec::with_capacity(stored.len());
    // A map refers to a later event's: resolve from the last event back.
    for (i, mut e) in stored.into_iter().enumerate().rev() {
        let attributes = std::mem::replace(&mut e.attributes, StoredAttributes::SameAs(0));
        let map = match attributes {
            StoredAttributes::Inline(map) => map,
            StoredAttributes::SameAs(base) | StoredAttributes::Changed { base, .. } => {
                let Some(base_map) = ids
                    .binary_search(&base)
                    .ok()
                    .filter(|j| *j > i)
                    .and_then(|j| maps[j].clone())
                else {
                    return Err(ProvenanceError::MissingAttributes {
                        id: e.id,
                        holder: base,
                    });
                };
                let mut map = base_map;
                if let StoredAttributes::Changed { set, removed, .. } = attributes {
                    for k in removed {
                        map.remove(&k);
                    }
                    map.extend(set);
                }
                map
            }
        };
        maps[i] = Some(map.clone());
        events.push(e.into_event(map));
    }
    events.reverse();
    Ok(events)
}

/// Decodes an event of a store of format 2 or 3 (partition `old`), reading its attributes
/// through the later events it refers to (each a larger id, so the walk ends), then applying
/// their changes.
pub(super) fn decode_format_3(
    old: &PartitionHandle,
    bytes: &[u8],
) -> Result<ProvenanceEvent, ProvenanceError> {
    let mut stored: StoredEvent = postcard::from_bytes(bytes)?;
    let id = stored.id;
    let mut attributes = std::mem::replace(&mut stored.attributes, StoredAttributes::SameAs(0));
    let mut changes: Vec<ReadChanges> = Vec::new();
    let mut at = id;
    let mut map = loop {
        let base = match attributes {
            StoredAttributes::Inline(a) => break a,
            StoredAttributes::SameAs(holder) => holder,
            StoredAttributes::Changed { base, set, removed } => {
                changes.push((set, removed));
                base
            }
        };
        let missing = ProvenanceError::MissingAttributes { id, holder: base };
        if base <= at {
            return Err(missing);
        }
        let Some(held) = old.get(base.to_be_bytes())? else {
            return Err(missing);
        };
        attributes = postcard::from_bytes::<StoredEvent>(&held)?.attributes;
        at = base;
    };
    // The change nearest the map first, the event's own last.
    for (set, removed) in changes.into_iter().rev() {
        for k in removed {
            map.remove(&k);
        }
        map.extend(set);
    }
    Ok(stored.into_event(map))
}

/// A chunk of format 4 of `events`, each with the attributes given (tests write older stores).
#[cfg(test)]
pub(super) fn encode_chunk(events: Vec<(&ProvenanceEvent, WrittenAttributes<'_>)>) -> Vec<u8> {
    let mut buffer = postcard::to_allocvec(&events.len()).expect("a length encodes");
    for (e, attributes) in events {
        encode(e, attributes, &mut buffer).expect("an event encodes");
    }
    buffer
}
