//! Provenance as processors and observers see it: the kinds of event, an event, a query and
//! a flow file's lineage. The store that keeps them is the engine's.

use serde::{Deserialize, Serialize};

use crate::flowfile::{Attributes, SmolStr};

/// The kinds of provenance event, as NiFi names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::upper_case_acronyms, non_camel_case_types)]
pub enum EventType {
    /// A flow file made from nothing (GenerateFlowFile).
    CREATE,
    /// Data received from outside (GetFile, ListenHTTP).
    RECEIVE,
    /// Content fetched from outside into an existing flow file.
    FETCH,
    /// Data sent outside (PutFile, InvokeHTTP).
    SEND,
    /// Removed by the flow (auto-termination).
    DROP,
    /// Removed by a queue's expiration.
    EXPIRE,
    /// Routed to a relationship by a routing processor.
    ROUTE,
    /// Attributes changed.
    ATTRIBUTES_MODIFIED,
    /// Content changed.
    CONTENT_MODIFIED,
    /// A copy made (one relationship to several connections).
    CLONE,
    /// Children made from a parent (SplitText).
    FORK,
    /// One child made from several parents (MergeContent).
    JOIN,
    /// A remote service invoked (InvokeHTTP's response).
    REMOTE_INVOCATION,
}

impl EventType {
    /// Parses an event type's name.
    pub fn parse(name: &str) -> Option<EventType> {
        use EventType::*;
        Some(match name.to_ascii_uppercase().as_str() {
            "CREATE" => CREATE,
            "RECEIVE" => RECEIVE,
            "FETCH" => FETCH,
            "SEND" => SEND,
            "DROP" => DROP,
            "EXPIRE" => EXPIRE,
            "ROUTE" => ROUTE,
            "ATTRIBUTES_MODIFIED" => ATTRIBUTES_MODIFIED,
            "CONTENT_MODIFIED" => CONTENT_MODIFIED,
            "CLONE" => CLONE,
            "FORK" => FORK,
            "JOIN" => JOIN,
            "REMOTE_INVOCATION" => REMOTE_INVOCATION,
            _ => return None,
        })
    }
}

/// One provenance event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvenanceEvent {
    /// Unique, increasing id (set at commit).
    pub id: u64,
    /// What happened.
    pub event_type: EventType,
    /// When (ms since the epoch).
    pub time_ms: i64,
    /// The flow file's `uuid` (shared with its `uuid` attribute, not copied).
    pub flowfile: SmolStr,
    /// The component's name (or the queue's key for EXPIRE).
    pub component: SmolStr,
    /// The component's type.
    pub component_type: SmolStr,
    /// The flow file's attributes after the event (shared with the flow file, not copied).
    pub attributes: Attributes,
    /// Content size after the event.
    pub size: u64,
    /// Parents' uuids (FORK, JOIN, CLONE).
    pub parents: Vec<String>,
    /// Children's uuids (FORK, JOIN, CLONE).
    pub children: Vec<String>,
    /// The relationship (ROUTE) or another detail (shared: a processor's events hold one
    /// text, not a copy each).
    pub details: Option<SmolStr>,
    /// Where data went or came from (SEND, RECEIVE, FETCH, REMOTE_INVOCATION), shared as
    /// `details` is.
    pub transit_uri: Option<SmolStr>,
}

/// Which events a query returns.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Only this flow file's events.
    pub flowfile: Option<String>,
    /// Only this component's events.
    pub component: Option<String>,
    /// Only events at or after this time (ms).
    pub since_ms: Option<i64>,
    /// Only events at or before this time (ms).
    pub until_ms: Option<i64>,
    /// Only events of this type.
    pub event_type: Option<EventType>,
    /// The newest events first (and, with a limit, the newest ones), as NiFi's provenance
    /// list shows them; `false`: oldest first.
    pub newest_first: bool,
}

/// How far a [`Lineage`] reaches from the flow file asked about, as NiFi's lineage view
/// does: a first graph near the flow file, which a user expands node by node.
///
/// The search goes breadth first over parent and child links and stops (it reads no more)
/// at whichever limit it reaches first, so a lineage across a split into thousands or a
/// merge of thousands costs at most `max_flowfiles` look-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineageLimits {
    /// Hops from the flow file asked about: 0 is the flow file alone, 1 adds its parents
    /// and children, 2 their parents and children (its siblings and grandparents), ...
    pub depth: u32,
    /// At most this many flow files (the one asked about included; at least 1).
    pub max_flowfiles: usize,
}

impl LineageLimits {
    /// The default depth: parents, children, siblings and one hop beyond.
    pub const DEFAULT_DEPTH: u32 = 3;
    /// The default number of flow files: a graph a person can read and a response that
    /// stays small (tens of kilobytes).
    pub const DEFAULT_MAX_FLOWFILES: usize = 200;
    /// No limit: every related flow file (parents up to the roots, children down to the
    /// leaves). Costs a look-up per related flow file, which across a merge can be many
    /// thousands.
    pub const UNBOUNDED: LineageLimits = LineageLimits {
        depth: u32::MAX,
        max_flowfiles: usize::MAX,
    };
}

impl Default for LineageLimits {
    /// [`DEFAULT_DEPTH`](Self::DEFAULT_DEPTH) and
    /// [`DEFAULT_MAX_FLOWFILES`](Self::DEFAULT_MAX_FLOWFILES).
    fn default() -> LineageLimits {
        LineageLimits {
            depth: Self::DEFAULT_DEPTH,
            max_flowfiles: Self::DEFAULT_MAX_FLOWFILES,
        }
    }
}

/// A flow file of a [`Lineage`] with related flow files the lineage does not hold: where
/// a user can expand the graph (its own lineage has them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineageFrontier {
    /// The flow file's `uuid`.
    pub flowfile: String,
    /// How many of its direct parents the lineage does not hold.
    pub more_parents: usize,
    /// How many of its direct children the lineage does not hold.
    pub more_children: usize,
}

/// A flow file's lineage within [`LineageLimits`]: the flow files it is related to through
/// FORK, JOIN and CLONE (parents, children, and on through theirs) that the limits reach,
/// all their events, and where the lineage goes on beyond them.
#[derive(Debug, Clone, Serialize)]
pub struct Lineage {
    /// The flow file asked about.
    pub flowfile: String,
    /// Its direct parents that the lineage holds (the others are counted in `frontier`).
    pub parents: Vec<String>,
    /// Its direct children that the lineage holds (the others are counted in `frontier`).
    pub children: Vec<String>,
    /// Every flow file the lineage holds, nearest first (the one asked about, then one hop
    /// away, ...).
    pub flowfiles: Vec<String>,
    /// The flow files of `flowfiles` with parents or children it does not hold, in the
    /// same order.
    pub frontier: Vec<LineageFrontier>,
    /// How many distinct flow files are parents or children of those held, but not held
    /// themselves: 0 when the lineage is whole.
    pub omitted: usize,
    /// Whether a limit left related flow files out (`omitted > 0`).
    pub truncated: bool,
    /// How many flow files' events the search looked up: the measure of its cost, at most
    /// the limits' `max_flowfiles`.
    pub visited: usize,
    /// Every event of every flow file held (those naming it as a parent or child
    /// included), oldest first.
    pub events: Vec<ProvenanceEvent>,
}
