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

/// A flow file's lineage: the flow files it is related to through FORK, JOIN and CLONE
/// (parents up to the roots, children down to the leaves) and all their events.
#[derive(Debug, Clone, Serialize)]
pub struct Lineage {
    /// The flow file asked about.
    pub flowfile: String,
    /// Its parents (direct).
    pub parents: Vec<String>,
    /// Its children (direct).
    pub children: Vec<String>,
    /// Every related flow file.
    pub flowfiles: Vec<String>,
    /// Every event of every related flow file, oldest first.
    pub events: Vec<ProvenanceEvent>,
}
