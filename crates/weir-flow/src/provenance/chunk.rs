//! The events of one write as one stored value (format 5): each long text and each attribute
//! map once, and per event a record of small numbers.
//!
//! ```text
//! chunk  := part*              the parts of one write, each the events of one hand-over
//! part   := TAG, part length (u32, little-endian), body length (u32, little-endian), body,
//!           texts
//! texts  := count, (length, UTF-8 bytes)*
//! body   := record*, in the order the events come (a map just before its first event)
//! record := FULL, n, (name, value)*                          a map in full, in name order
//!         | LIKE, shape, value*                               a map with the names of map
//!                                                            `shape`, a value per name
//!         | CHANGED, base, n, (name, value)*, m, name*        map `base` with n entries set
//!                                                            and m names removed
//!         | EVENT + event type, id delta, time delta, map, size, flow file, component,
//!           component type, details, transit URI, parent count, parent*, child count, child*
//! ```
//!
//! Every number is a varint (LEB128; the time delta zigzag-encoded). Ids and times are
//! differences from the event before; maps are numbered in the order they come. A text is
//! named by one number: [`NONE`], [`SAME`] ("as this field of the event before": a session's
//! events share their component, type and transit URI; in a LIKE map, "as the shape's
//! value") or text `n - FIRST`. The flow files of one source carry the same attribute names
//! and many of the same values: each flow file's first map is written LIKE the one before. A long text is
//! listed once, found again by where it is held (a flow file's events share its uuid, every
//! map holding a long value shares it); a short one is listed where it comes, as cheap to
//! write as to look up. The events of a stateless transaction name each uuid six times and a
//! flow file's map mostly changes by an attribute or two from one processor to the next:
//! each is written once.
//!
//! Cost: per event a look-up by address for its flow file, a pointer comparison of its map
//! with the flow file's latest and a dozen varints; per distinct map the names a processor changed and their values, which a
//! copied map remembers (see [`Attributes::changes_since`]), else an entry-by-entry
//! comparison with the flow file's previous map.
//! No text is hashed by its bytes except a long one at an address not seen before. Decoding
//! allocates each long text once (then shared by every event and map naming it) and checks
//! every length and reference: a damaged chunk is an error, never a panic.

use std::convert::Infallible;

use rustc_hash::{FxHashMap, FxHashSet};
use varint_rs::{VarintReader, VarintWriter};

use super::{EventType, ProvenanceError, ProvenanceEvent};
use crate::flowfile::{Attributes, SmolStr, same_text};

/// The first bytes of a format-5 chunk and of each of its parts. A format-4 chunk starts with
/// its number of events, never zero, so the two are told apart by the first byte.
pub(super) const TAG: [u8; 2] = [0, 5];

/// The bytes of a part before its body: [`TAG`], the part's length and the body's.
const HEADER: usize = TAG.len() + 8;

/// True when `bytes` are a chunk of this format.
pub(super) fn is_chunk(bytes: &[u8]) -> bool {
    bytes.starts_with(&TAG)
}

/// A text as a chunk names it: [`NONE`], [`SAME`], or `n` for text `n - FIRST`.
type TextRef = u64;
/// No text (an optional field not set).
const NONE: TextRef = 0;
/// The text this field had in the event before.
const SAME: TextRef = 1;
/// The reference to the chunk's first text.
const FIRST: TextRef = 2;

/// Record kinds: a map in full, like another, as changes, and an event (plus its type's
/// number).
const FULL: u64 = 0;
const LIKE: u64 = 1;
const CHANGED: u64 = 2;
const EVENT: u64 = 3;

/// The event types by number, as records carry them.
const EVENT_TYPES: [EventType; 13] = [
    EventType::CREATE,
    EventType::RECEIVE,
    EventType::FETCH,
    EventType::SEND,
    EventType::DROP,
    EventType::EXPIRE,
    EventType::ROUTE,
    EventType::ATTRIBUTES_MODIFIED,
    EventType::CONTENT_MODIFIED,
    EventType::CLONE,
    EventType::FORK,
    EventType::JOIN,
    EventType::REMOTE_INVOCATION,
];

/// An event type's number (its place in [`EVENT_TYPES`]).
fn type_number(t: EventType) -> u64 {
    EVENT_TYPES
        .iter()
        .position(|&x| x == t)
        .expect("every event type is listed") as u64
}

/// The events of one hand-over, encoded: a part of the chunk of the write that takes it, and
/// what it holds, for that chunk's span and index entries.
#[derive(Debug)]
pub(super) struct Part {
    /// The part: [`TAG`], lengths, body and texts.
    pub(super) bytes: Vec<u8>,
    /// Its first and last event id.
    pub(super) first_id: u64,
    pub(super) last_id: u64,
    /// The earliest and latest event times.
    pub(super) min_time_ms: i64,
    pub(super) max_time_ms: i64,
    /// How many events it holds.
    pub(super) events: u64,
    /// The components named, in order of first appearance.
    pub(super) components: Vec<String>,
    /// Where in `bytes` each uuid named (as a flow file, a parent or a child) is, each once.
    uuids: Vec<std::ops::Range<usize>>,
}

impl Part {
    /// The uuids the part names, each once.
    pub(super) fn uuids(&self) -> impl Iterator<Item = &[u8]> {
        self.uuids.iter().map(|r| &self.bytes[r.clone()])
    }
}

/// Texts at most this long are listed where they come: a `SmolStr` holds them inline, so
/// each copy has its own address and finding one again would mean hashing its bytes.
const INLINE: usize = 23;

/// Appends varints to a chunk being written.
struct Out<'b>(&'b mut Vec<u8>);

impl VarintWriter for Out<'_> {
    type Error = Infallible;

    #[inline]
    fn write(&mut self, byte: u8) -> Result<(), Infallible> {
        self.0.push(byte);
        Ok(())
    }
}

impl Out<'_> {
    /// Most numbers written are under 128 (references, counts, deltas): one byte, pushed
    /// without the general loop.
    #[inline]
    fn u64(&mut self, v: u64) {
        if v < 0x80 {
            self.0.push(v as u8);
        } else {
            let Ok(()) = self.write_u64_varint(v);
        }
    }

    fn i64(&mut self, v: i64) {
        let Ok(()) = self.write_i64_varint(v);
    }
}

/// The chunk's texts while encoding.
struct Texts<'a> {
    list: Vec<&'a str>,
    /// Long texts by where they are held (address and length). Texts held at once by live
    /// values are equal when their identities are; the events borrowed are alive throughout.
    by_identity: FxHashMap<(usize, usize), TextRef>,
    /// Long texts by their bytes, for one first met at a new address.
    by_text: FxHashMap<&'a str, TextRef>,
}

impl<'a> Texts<'a> {
    /// The reference to `text`, listed if new (a short one always).
    #[inline]
    fn text(&mut self, text: &'a str) -> TextRef {
        let next = self.list.len() as TextRef + FIRST;
        if text.len() <= INLINE {
            self.list.push(text);
            return next;
        }
        let identity = (text.as_ptr() as usize, text.len());
        if let Some(&r) = self.by_identity.get(&identity) {
            return r;
        }
        let r = *self.by_text.entry(text).or_insert(next);
        if r == next {
            self.list.push(text);
        }
        self.by_identity.insert(identity, r);
        r
    }
}

/// A field of the events whose text mostly repeats from one event to the next.
#[derive(Default)]
struct Field<'a>(Option<&'a str>);

impl<'a> Field<'a> {
    fn text(&mut self, text: &'a str, texts: &mut Texts<'a>) -> TextRef {
        if self.0.is_some_and(|last| same_text(last, text)) {
            return SAME;
        }
        self.0 = Some(text);
        texts.text(text)
    }
}

/// Writes a CHANGED record turning `base` (map number `base_number`) into `map`. Returns
/// false, having written nothing, when the changes are not much fewer than `map`'s entries.
fn write_changes<'a>(
    map: &'a Attributes,
    base: &'a Attributes,
    base_number: u64,
    texts: &mut Texts<'a>,
    out: &mut Out<'_>,
) -> bool {
    let (mut m, mut b) = (map.entries().peekable(), base.entries().peekable());
    // Beyond this many changes the map goes in full.
    let most = map.len() / 2;
    let (mut set, mut removed) = (Vec::new(), Vec::new());
    // Both maps are in name order, mostly with the same names and values.
    while set.len() + removed.len() <= most {
        let (Some((mk, mv)), Some((bk, bv))) = (m.peek(), b.peek()) else {
            break;
        };
        if same_text(mk, bk) {
            if !same_text(mv, bv) {
                set.push(m.next().expect("peeked"));
            } else {
                m.next();
            }
            b.next();
        } else if mk.as_str() < bk.as_str() {
            set.push(m.next().expect("peeked"));
        } else {
            removed.push(&b.next().expect("peeked").0);
        }
    }
    if set.len() + removed.len() + m.len() + b.len() > most {
        return false;
    }
    set.extend(m);
    removed.extend(b.map(|(k, _)| k));
    out.u64(CHANGED);
    out.u64(base_number);
    out.u64(set.len() as u64);
    for (k, v) in set {
        out.u64(texts.text(k));
        out.u64(texts.text(v));
    }
    out.u64(removed.len() as u64);
    for k in removed {
        out.u64(texts.text(k));
    }
    true
}

/// Writes a CHANGED record turning map number `base_number` into a copy of it changed
/// since only by `changes`, the names with their values now (`None`: removed), as the copy
/// remembers them (see [`Attributes::changes_since`]).
fn write_named_changes<'a>(
    changes: &'a [(SmolStr, Option<SmolStr>)],
    base_number: u64,
    texts: &mut Texts<'a>,
    out: &mut Out<'_>,
) {
    out.u64(CHANGED);
    out.u64(base_number);
    out.u64(changes.iter().filter(|(_, v)| v.is_some()).count() as u64);
    for (name, value) in changes {
        if let Some(v) = value {
            out.u64(texts.text(name));
            out.u64(texts.text(v));
        }
    }
    out.u64(changes.iter().filter(|(_, v)| v.is_none()).count() as u64);
    for (name, _) in changes.iter().filter(|(_, v)| v.is_none()) {
        out.u64(texts.text(name));
    }
}

/// Writes the values of a LIKE record: per entry of the map, beside the shape's entry of the
/// same name, [`SAME`] or the map's value.
fn write_like<'a>(
    pairs: impl Iterator<Item = (&'a (SmolStr, SmolStr), &'a (SmolStr, SmolStr))>,
    texts: &mut Texts<'a>,
    out: &mut Out<'_>,
) {
    for ((_, v), (_, shape_v)) in pairs {
        out.u64(if same_text(v, shape_v) {
            SAME
        } else {
            texts.text(v)
        });
    }
}

/// Encodes `events` (in id order, no id twice, at least one) as one part.
///
/// # Errors
/// [`ProvenanceError::Chunk`] for events whose part would exceed 4 GiB.
pub(super) fn encode<'a>(events: &[&'a ProvenanceEvent]) -> Result<Part, ProvenanceError> {
    let n = events.len();
    let mut buffer = Vec::with_capacity(HEADER + 64 * n);
    let mut texts = Texts {
        list: Vec::with_capacity(8 * n),
        by_identity: FxHashMap::with_capacity_and_hasher(n, Default::default()),
        by_text: FxHashMap::with_capacity_and_hasher(n, Default::default()),
    };
    // The maps written, by number. An event's map is written unless it is its flow file's
    // latest (the events of one session about a flow file, its DROP after its SEND): a map
    // met again otherwise (a CLONE event's, under its parent) is written again, which reads
    // back the same, and spares a look-up by address for every event.
    let mut maps: Vec<&'a Attributes> = Vec::with_capacity(n);
    // The last map written in full (or like another), the shape for the next.
    let mut last_full: Option<(u64, &'a Attributes)> = None;
    // Per flow file its latest map so far, the base for its next (`NO_MAP`: none yet), and
    // whether it is in the summary's uuids: by its uuid's place in the list of texts (a
    // short uuid, only ever made by hand, by its text).
    const NO_MAP: u64 = u64::MAX;
    let mut per_text: Vec<(u64, bool)> = Vec::new();
    let mut latest_map_short: FxHashMap<&'a str, u64> = FxHashMap::default();
    let mut listed_short: FxHashSet<&'a str> = FxHashSet::default();
    let mut summary = Summary {
        min_time_ms: i64::MAX,
        max_time_ms: i64::MIN,
        components: Vec::new(),
        uuids: Vec::new(),
    };
    #[inline]
    fn slot(per_text: &mut Vec<(u64, bool)>, r: TextRef) -> &mut (u64, bool) {
        let i = (r - FIRST) as usize;
        if per_text.len() <= i {
            per_text.resize(i + 1, (NO_MAP, false));
        }
        &mut per_text[i]
    }
    // Lists `u` (a uuid named by an event) in the summary, once; returns its reference.
    let mut uuid = |u: &'a str,
                    texts: &mut Texts<'a>,
                    per_text: &mut Vec<(u64, bool)>,
                    summary: &mut Summary<'a>| {
        let r = texts.text(u);
        let new = if u.len() > INLINE {
            !std::mem::replace(&mut slot(per_text, r).1, true)
        } else {
            listed_short.insert(u)
        };
        if new {
            summary.uuids.push(r);
        }
        r
    };
    let (mut component, mut component_type) = (Field::default(), Field::default());
    let (mut details, mut transit_uri) = (Field::default(), Field::default());
    let (mut last_flowfile, mut last_id, mut last_time) = (None::<&'a str>, 0u64, 0i64);
    buffer.extend_from_slice(&TAG);
    // The part's and the body's lengths, filled in at the end.
    buffer.extend_from_slice(&[0; 8]);
    let mut out = Out(&mut buffer);
    let mut links: Vec<TextRef> = Vec::new();
    let mut last_flowfile_ref = NONE;
    for &e in events {
        let flowfile: &'a str = &e.flowfile;
        let same_flowfile = last_flowfile.is_some_and(|last| same_text(last, flowfile));
        let flowfile_ref = if same_flowfile {
            last_flowfile_ref
        } else {
            uuid(flowfile, &mut texts, &mut per_text, &mut summary)
        };
        let base = if flowfile.len() > INLINE {
            Some(slot(&mut per_text, flowfile_ref).0).filter(|&m| m != NO_MAP)
        } else {
            latest_map_short.get(flowfile).copied()
        };
        let map = match base.filter(|&b| maps[b as usize].ptr_eq(&e.attributes)) {
            Some(m) => m,
            None => {
                let m = maps.len() as u64;
                let changed = base.is_some_and(|b| {
                    let base_map = maps[b as usize];
                    match e.attributes.changes_since(base_map) {
                        Some(changes) => {
                            write_named_changes(changes, b, &mut texts, &mut out);
                            true
                        }
                        None => write_changes(&e.attributes, base_map, b, &mut texts, &mut out),
                    }
                });
                if !changed {
                    let entries = e.attributes.entries();
                    match last_full {
                        Some((shape, shape_map)) if e.attributes.same_names(shape_map) => {
                            out.u64(LIKE);
                            out.u64(shape);
                            // Two flat maps (a source's new flow files) side by side as
                            // slices: cheaper than merging each with its (empty) base.
                            match (e.attributes.flat_entries(), shape_map.flat_entries()) {
                                (Some(m), Some(shape)) => {
                                    write_like(m.iter().zip(shape), &mut texts, &mut out)
                                }
                                _ => write_like(
                                    entries.zip(shape_map.entries()),
                                    &mut texts,
                                    &mut out,
                                ),
                            }
                        }
                        _ => {
                            out.u64(FULL);
                            out.u64(entries.len() as u64);
                            for (k, v) in entries {
                                out.u64(texts.text(k));
                                out.u64(texts.text(v));
                            }
                        }
                    }
                    last_full = Some((m, &e.attributes));
                }
                maps.push(&e.attributes);
                m
            }
        };
        if flowfile.len() > INLINE {
            slot(&mut per_text, flowfile_ref).0 = map;
        } else {
            latest_map_short.insert(flowfile, map);
        }
        summary.min_time_ms = summary.min_time_ms.min(e.time_ms);
        summary.max_time_ms = summary.max_time_ms.max(e.time_ms);
        out.u64(EVENT + type_number(e.event_type));
        out.u64(e.id.wrapping_sub(last_id));
        out.i64(e.time_ms.wrapping_sub(last_time));
        out.u64(map);
        out.u64(e.size);
        out.u64(if same_flowfile { SAME } else { flowfile_ref });
        (last_flowfile, last_flowfile_ref) = (Some(flowfile), flowfile_ref);
        let component_ref = component.text(&e.component, &mut texts);
        if component_ref != SAME && !summary.components.contains(&&*e.component) {
            summary.components.push(&e.component);
        }
        out.u64(component_ref);
        out.u64(component_type.text(&e.component_type, &mut texts));
        out.u64(
            e.details
                .as_deref()
                .map_or(NONE, |d| details.text(d, &mut texts)),
        );
        out.u64(
            e.transit_uri
                .as_deref()
                .map_or(NONE, |t| transit_uri.text(t, &mut texts)),
        );
        for list in [&e.parents, &e.children] {
            links.clear();
            links.extend(
                list.iter()
                    .map(|u| uuid(u, &mut texts, &mut per_text, &mut summary)),
            );
            out.u64(links.len() as u64);
            for &r in &links {
                out.u64(r);
            }
        }
        (last_id, last_time) = (e.id, e.time_ms);
    }
    let too_large = |n: usize| {
        u32::try_from(n).map_err(|_| {
            ProvenanceError::Chunk(format!("a part of {n} bytes of events is too large"))
        })
    };
    let body = too_large(out.0.len() - HEADER)?;
    out.u64(texts.list.len() as u64);
    let mut offsets = Vec::with_capacity(texts.list.len());
    for t in &texts.list {
        out.u64(t.len() as u64);
        offsets.push(out.0.len());
        out.0.extend_from_slice(t.as_bytes());
    }
    let part = too_large(buffer.len())?;
    buffer[TAG.len()..TAG.len() + 4].copy_from_slice(&part.to_le_bytes());
    buffer[TAG.len() + 4..HEADER].copy_from_slice(&body.to_le_bytes());
    let uuids = summary
        .uuids
        .iter()
        .map(|&r| {
            let i = (r - FIRST) as usize;
            offsets[i]..offsets[i] + texts.list[i].len()
        })
        .collect();
    Ok(Part {
        bytes: buffer,
        first_id: events[0].id,
        last_id: events[n - 1].id,
        min_time_ms: summary.min_time_ms,
        max_time_ms: summary.max_time_ms,
        events: n as u64,
        components: summary.components.into_iter().map(String::from).collect(),
        uuids,
    })
}

/// What [`encode`] gathers besides the bytes.
struct Summary<'a> {
    min_time_ms: i64,
    max_time_ms: i64,
    components: Vec<&'a str>,
    /// The uuids named, each once, as texts of the part.
    uuids: Vec<TextRef>,
}

/// Reads a chunk's varints and texts, each read checked against the bytes' end.
struct In<'b> {
    bytes: &'b [u8],
    at: usize,
    /// Bytes the varint being read may still take (a damaged one could run on).
    budget: u8,
}

/// A damaged chunk.
fn damaged(what: impl std::fmt::Display) -> ProvenanceError {
    ProvenanceError::Chunk(what.to_string())
}

impl VarintReader for In<'_> {
    type Error = ProvenanceError;

    #[inline]
    fn read(&mut self) -> Result<u8, ProvenanceError> {
        if self.budget == 0 {
            return Err(damaged(format!("a number at byte {} runs on", self.at)));
        }
        self.budget -= 1;
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| damaged(format!("the chunk ends early, at byte {}", self.at)))?;
        self.at += 1;
        Ok(b)
    }
}

impl<'b> In<'b> {
    fn u64(&mut self) -> Result<u64, ProvenanceError> {
        self.budget = 10;
        self.read_u64_varint()
    }

    fn i64(&mut self) -> Result<i64, ProvenanceError> {
        self.budget = 10;
        self.read_i64_varint()
    }

    /// A count of things that each take at least a byte: no more than the bytes left.
    fn count(&mut self) -> Result<usize, ProvenanceError> {
        let n = self.u64()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(damaged(format!("a count of {n} at byte {}", self.at)));
        }
        Ok(n as usize)
    }

    fn text(&mut self) -> Result<&'b str, ProvenanceError> {
        let len = self.count()?;
        let bytes = &self.bytes[self.at..self.at + len];
        self.at += len;
        std::str::from_utf8(bytes).map_err(|e| damaged(format!("a text that is not UTF-8: {e}")))
    }
}

/// Decodes a chunk of this format (see [`is_chunk`]): its events in id order, each once.
///
/// # Errors
/// [`ProvenanceError::Chunk`] for a damaged chunk: one that ends early, names a text or map
/// it does not hold, or holds a text that is not UTF-8.
pub(super) fn decode(bytes: &[u8]) -> Result<Vec<ProvenanceEvent>, ProvenanceError> {
    let mut events = Vec::new();
    let mut at = 0;
    let mut parts = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if !is_chunk(rest) || rest.len() < HEADER {
            return Err(damaged(format!("no part starts at byte {at}")));
        }
        let length =
            |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().expect("4 bytes")) as usize;
        let (part_len, body_len) = (length(TAG.len()), length(TAG.len() + 4));
        if part_len < HEADER || part_len > rest.len() || body_len > part_len - HEADER {
            return Err(damaged(format!(
                "a part of {part_len} bytes with a body of {body_len} at byte {at}, in {} bytes",
                bytes.len()
            )));
        }
        decode_part(&rest[..part_len], body_len, &mut events)?;
        at += part_len;
        parts += 1;
    }
    if parts > 1 {
        // Parts of one write may interleave by id, or repeat an event replayed at recovery.
        events.sort_by_key(|e| e.id);
        events.dedup_by_key(|e| e.id);
    }
    Ok(events)
}

/// Decodes one part (its header checked), appending its events to `events`.
fn decode_part(
    bytes: &[u8],
    body_len: usize,
    events: &mut Vec<ProvenanceEvent>,
) -> Result<(), ProvenanceError> {
    let body_end = HEADER + body_len;
    let mut at = In {
        bytes,
        at: body_end,
        budget: 0,
    };
    let count = at.count()?;
    let mut texts = Vec::with_capacity(count);
    for _ in 0..count {
        texts.push(SmolStr::new(at.text()?));
    }
    let listed = |r: TextRef| -> Result<SmolStr, ProvenanceError> {
        r.checked_sub(FIRST)
            .and_then(|i| texts.get(i as usize))
            .cloned()
            .ok_or_else(|| damaged(format!("text reference {r} of {} texts", texts.len())))
    };
    let mut body = In {
        bytes: &bytes[..body_end],
        at: HEADER,
        budget: 0,
    };
    let mut maps: Vec<Attributes> = Vec::new();
    // Each field's text in the event before, for `SAME`.
    let mut last: [Option<SmolStr>; 5] = Default::default();
    let mut field = |i: usize, r: TextRef| -> Result<Option<SmolStr>, ProvenanceError> {
        let t = match r {
            NONE => return Ok(None),
            SAME => last[i]
                .clone()
                .ok_or_else(|| damaged("a text is the one before, and there is none"))?,
            r => listed(r)?,
        };
        last[i] = Some(t.clone());
        Ok(Some(t))
    };
    let required = |t: Option<SmolStr>| t.ok_or_else(|| damaged("an event's text is not set"));
    let (mut id, mut time) = (0u64, 0i64);
    while body.at < body.bytes.len() {
        match body.u64()? {
            FULL => {
                let n = body.count()?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    entries.push((listed(body.u64()?)?, listed(body.u64()?)?));
                }
                maps.push(Attributes::from_entries(entries));
            }
            LIKE => {
                let shape = body.u64()?;
                let shape = maps.get(shape as usize).ok_or_else(|| {
                    damaged(format!("map {} has the names of map {shape}", maps.len()))
                })?;
                let mut entries = Vec::with_capacity(shape.len());
                for (k, v) in shape.entries() {
                    let value = match body.u64()? {
                        SAME => v.clone(),
                        r => listed(r)?,
                    };
                    entries.push((k.clone(), value));
                }
                maps.push(Attributes::from_entries(entries));
            }
            CHANGED => {
                let base = body.u64()?;
                let mut map = maps
                    .get(base as usize)
                    .cloned()
                    .ok_or_else(|| damaged(format!("map {} changes map {base}", maps.len())))?;
                for _ in 0..body.count()? {
                    let (k, v) = (listed(body.u64()?)?, listed(body.u64()?)?);
                    map.insert(k, v);
                }
                for _ in 0..body.count()? {
                    map.remove(&listed(body.u64()?)?);
                }
                maps.push(map);
            }
            kind => {
                let event_type = *kind
                    .checked_sub(EVENT)
                    .and_then(|t| EVENT_TYPES.get(t as usize))
                    .ok_or_else(|| damaged(format!("a record of kind {kind}")))?;
                id = id.wrapping_add(body.u64()?);
                time = time.wrapping_add(body.i64()?);
                let m = body.u64()?;
                let attributes = maps.get(m as usize).cloned().ok_or_else(|| {
                    damaged(format!("event {id} names map {m} of {}", maps.len()))
                })?;
                let size = body.u64()?;
                let flowfile = required(field(0, body.u64()?)?)?;
                let component = required(field(1, body.u64()?)?)?;
                let component_type = required(field(2, body.u64()?)?)?;
                let details = field(3, body.u64()?)?;
                let transit_uri = field(4, body.u64()?)?;
                let mut links = || -> Result<Vec<String>, ProvenanceError> {
                    (0..body.count()?)
                        .map(|_| Ok(listed(body.u64()?)?.to_string()))
                        .collect()
                };
                let parents = links()?;
                let children = links()?;
                events.push(ProvenanceEvent {
                    id,
                    event_type,
                    time_ms: time,
                    flowfile,
                    component,
                    component_type,
                    attributes,
                    size,
                    parents,
                    children,
                    details,
                    transit_uri,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    use super::super::tests::event_with as event;

    fn round_trip(events: &[ProvenanceEvent]) -> (Vec<ProvenanceEvent>, usize) {
        let part = encode(&events.iter().collect::<Vec<_>>()).unwrap();
        assert!(is_chunk(&part.bytes));
        (decode(&part.bytes).unwrap(), part.bytes.len())
    }

    #[test]
    fn a_transactions_events_store_each_text_and_map_once() {
        // A hundred flow files through three processors: a long uuid each, one change of
        // the map per processor, a long value shared by every map.
        let shared = SmolStr::from("amqp://127.0.0.1:5672/a-queue-with-a-long-name");
        let mut events = Vec::new();
        for f in 0..100u64 {
            let uuid = SmolStr::from(format!("00000000-0000-4000-8000-{f:012}"));
            let mut map: Attributes = [("uuid", uuid.clone()), ("route", shared.clone())]
                .into_iter()
                .collect();
            for (step, name) in ["parse", "parity", "tag"].into_iter().enumerate() {
                map.insert(name, format!("value-{step}"));
                let mut e = event(f * 10 + step as u64, &uuid, map.clone());
                e.flowfile = uuid.clone();
                events.push(e);
            }
        }
        let (back, bytes) = round_trip(&events);
        assert_eq!(back, events);
        // Per flow file: its uuid once (36 bytes), its first map in full (about 30 bytes:
        // the long value is a table reference), each change (about 17) and about 14 bytes per
        // event; written per event in full it would be over 250.
        assert!(bytes < 100 * 160, "{bytes} bytes");
    }

    #[test]
    fn links_details_and_transit_uris_come_back() {
        let map: Attributes = BTreeMap::from([("k".to_string(), "v".to_string())]).into();
        let mut fork = event(7, "parent", map.clone());
        fork.event_type = EventType::FORK;
        fork.parents = vec!["parent".into()];
        fork.children = vec!["child-1".into(), "child-2".into()];
        fork.details = None;
        let mut send = event(9, "child-1", Attributes::new());
        send.event_type = EventType::SEND;
        send.transit_uri = Some("postgresql://127.0.0.1/test".into());
        send.time_ms = 500; // earlier than the event before: a negative difference
        let events = vec![fork, send];
        let (back, _) = round_trip(&events);
        assert_eq!(back, events);
        let part = encode(&events.iter().collect::<Vec<_>>()).unwrap();
        let uuids: Vec<&[u8]> = part.uuids().collect();
        assert_eq!(uuids, [&b"parent"[..], b"child-1", b"child-2"]);
        assert_eq!(part.components, ["route"]);
        assert_eq!((part.min_time_ms, part.max_time_ms), (500, 1_007));
        assert_eq!((part.first_id, part.last_id, part.events), (7, 9, 2));
    }

    #[test]
    fn a_chunk_of_several_parts_reads_as_their_events_in_id_order_each_once() {
        let map: Attributes = BTreeMap::from([("k".to_string(), "v".to_string())]).into();
        let a: Vec<ProvenanceEvent> = [1, 4, 6].map(|i| event(i, "ff-a", map.clone())).into();
        // Interleaved by id with the first, and a replay of event 4.
        let b: Vec<ProvenanceEvent> = [2, 4, 9].map(|i| event(i, "ff-b", map.clone())).into();
        let mut chunk = encode(&a.iter().collect::<Vec<_>>()).unwrap().bytes;
        chunk.extend(encode(&b.iter().collect::<Vec<_>>()).unwrap().bytes);
        let ids: Vec<u64> = decode(&chunk).unwrap().iter().map(|e| e.id).collect();
        assert_eq!(ids, [1, 2, 4, 6, 9]);
        // A part cut short, or bytes after the last part that are no part, are refused.
        assert!(decode(&chunk[..chunk.len() - 1]).is_err());
        chunk.push(7);
        assert!(decode(&chunk).is_err());
    }

    #[test]
    fn an_index_that_points_nowhere_is_an_error_not_a_panic() {
        let map: Attributes = BTreeMap::from([("k".to_string(), "v".to_string())]).into();
        let events = [event(1, "ff", map)];
        let buffer = encode(&events.iter().collect::<Vec<_>>()).unwrap().bytes;
        // Every truncation and every flipped byte is refused or read, never a panic.
        for len in 0..buffer.len() {
            let _ = decode(&buffer[..len]);
        }
        for i in 0..buffer.len() {
            let mut bad = buffer.clone();
            bad[i] ^= 0x5a;
            let _ = decode(&bad);
        }
        // A chunk naming a text past the end of its list is refused, naming the reference.
        let mut bad = TAG.to_vec();
        bad.extend_from_slice(&[0; 8]);
        let mut out = Out(&mut bad);
        out.u64(FULL);
        out.u64(0);
        out.u64(EVENT + type_number(EventType::DROP));
        for v in [1, 0, 0, 0, FIRST + 99, FIRST, FIRST, NONE, NONE, 0, 0] {
            out.u64(v);
        }
        let body = (bad.len() - HEADER) as u32;
        Out(&mut bad).u64(1);
        bad.push(1);
        bad.push(b'x');
        let part = bad.len() as u32;
        bad[TAG.len()..TAG.len() + 4].copy_from_slice(&part.to_le_bytes());
        bad[TAG.len() + 4..HEADER].copy_from_slice(&body.to_le_bytes());
        let err = decode(&bad).unwrap_err();
        assert!(err.to_string().contains("text reference 101 of 1"), "{err}");
    }

    /// Maps as a processor chain makes them: each step sets, changes or removes a few
    /// attributes of the one before, or keeps it shared.
    fn chains() -> impl Strategy<Value = Vec<Vec<(u8, u8, u8)>>> {
        // Per flow file, per step: (action, name, value), names and values from small sets
        // so that texts repeat and are shared or copied.
        prop::collection::vec(prop::collection::vec((0u8..5, 0u8..8, 0u8..6), 1..8), 1..12)
    }

    proptest! {
        #[test]
        fn any_events_come_back_as_they_went_in(flows in chains(), interleave in any::<bool>()) {
            let long = SmolStr::from("a value long enough to be held by reference count");
            let mut per_flow: Vec<Vec<ProvenanceEvent>> = Vec::new();
            let mut id = 0;
            for (f, steps) in flows.iter().enumerate() {
                let uuid = SmolStr::from(format!("uuid-of-flow-file-number-{f:04}"));
                // Flow files of one source: the same names, some values the same; every
                // third with one more name.
                let mut map: Attributes = [
                    ("kind", SmolStr::from("message")),
                    ("number", SmolStr::from(format!("{}", f / 2))),
                    ("uuid", uuid.clone()),
                ]
                .into_iter()
                .collect();
                if f % 3 == 2 {
                    map.insert("extra", "yes");
                }
                let mut list = Vec::new();
                let mut history: Vec<Attributes> = Vec::new();
                for &(action, name, value) in steps {
                    let name = format!("attr.{name}");
                    match action {
                        0 => {}
                        1 => drop(map.insert(&name, format!("v{value}"))),
                        2 => drop(map.remove(&name)),
                        3 => drop(map.insert(&name, long.clone())),
                        // A copy of an older map of the flow file, changed: it remembers a
                        // source that is not the flow file's latest map.
                        _ => {
                            map = history.first().cloned().unwrap_or_default();
                            map.insert(&name, format!("w{value}"));
                        }
                    }
                    history.push(map.clone());
                    id += 1 + u64::from(value);
                    let mut e = event(id, &uuid, map.clone());
                    e.flowfile = uuid.clone();
                    e.event_type = if action == 3 { EventType::SEND } else { EventType::ROUTE };
                    e.component = SmolStr::from(format!("step-{}", value % 3));
                    list.push(e);
                }
                per_flow.push(list);
            }
            // Flow files one after another, or their events interleaved.
            let mut events: Vec<ProvenanceEvent> = if interleave {
                let mut out = Vec::new();
                let longest = per_flow.iter().map(Vec::len).max().unwrap_or(0);
                for step in 0..longest {
                    for list in &per_flow {
                        if let Some(e) = list.get(step) {
                            out.push(e.clone());
                        }
                    }
                }
                out
            } else {
                per_flow.into_iter().flatten().collect()
            };
            events.sort_by_key(|e| e.id);
            let (back, _) = round_trip(&events);
            prop_assert_eq!(back, events);
        }
    }
}
