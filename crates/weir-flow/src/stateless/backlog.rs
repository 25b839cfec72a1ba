//! A copy's provenance backlog: the events of its last commit, recorded while the copy next
//! waits instead of on its serial path.
//!
//! A commit that writes no journal frame (nothing came from or leaves into a traditional
//! connection) records its events best effort: the provenance writer stores them
//! asynchronously, and a failure is logged. Encoding the events made after the last wait
//! (the database's SEND, say) and freeing them all cost the commit about a fifth of the
//! copy's time per message, during which the copy's next transaction could not start. So
//! the commit [`hold`](ProvenanceBacklog::hold)s them, its completion hooks acknowledge at
//! once, and they are recorded by the first of:
//!
//! - the next transaction's first wait on an outside service (a database batch, a broker
//!   with nothing ready), through `Transaction::work_ahead`;
//! - the next commit or rollback, before its own events (the backlog holds one
//!   transaction's events at most);
//! - the copy resting (an idle trigger, a rollback, a schedule) or ending, including by a
//!   panic: dropping the backlog records what it holds.
//!
//! Events keep their order: ids are given when they are recorded, the backlog's before any
//! later transaction's.

use std::sync::{Arc, Mutex};

use crate::provenance::{Encoded, ProvenanceEvent, ProvenanceRepository};

/// What one commit left to record.
#[derive(Default)]
struct Held {
    /// Events encoded ahead, with their ids.
    encoded: Vec<Encoded>,
    /// Events still to encode (and give ids).
    batches: Vec<Vec<ProvenanceEvent>>,
    /// The events `encoded` was made from: only to free.
    spent: Vec<Vec<ProvenanceEvent>>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.encoded.is_empty() && self.batches.is_empty() && self.spent.is_empty()
    }
}

/// A copy's events committed and not yet recorded. See the [module docs](self).
pub(crate) struct ProvenanceBacklog {
    provenance: Arc<ProvenanceRepository>,
    held: Mutex<Held>,
}

impl ProvenanceBacklog {
    /// An empty backlog recording into `provenance`.
    pub(crate) fn new(provenance: Arc<ProvenanceRepository>) -> ProvenanceBacklog {
        ProvenanceBacklog {
            provenance,
            held: Mutex::new(Held::default()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds a commit's events for later: those `encoded` ahead (made from `spent`, freed
    /// when recorded) and the `batches` still to encode. Records what an earlier commit
    /// left first, so that one transaction's events are held at most.
    pub(crate) fn hold(
        &self,
        encoded: Vec<Encoded>,
        batches: Vec<Vec<ProvenanceEvent>>,
        spent: Vec<Vec<ProvenanceEvent>>,
    ) {
        let earlier = std::mem::replace(
            &mut *self.held(),
            Held {
                encoded,
                batches,
                spent,
            },
        );
        // The new events get their ids only when recorded, so the earlier ones stay first.
        self.record_held(earlier);
    }

    /// Records `batches` now, after what the backlog holds (a rollback's SEND events).
    pub(crate) fn record_now(&self, batches: Vec<Vec<ProvenanceEvent>>) {
        self.record();
        record_events(&self.provenance, Vec::new(), batches);
    }

    /// Records what the backlog holds, if anything: encodes the events still to encode,
    /// hands everything to the provenance writer and frees the events. Cost: the encoding
    /// (about 1.5 K instructions per event) and the frees.
    pub(crate) fn record(&self) {
        let held = std::mem::take(&mut *self.held());
        self.record_held(held);
    }

    fn record_held(&self, held: Held) {
        if held.is_empty() {
            return;
        }
        record_events(&self.provenance, held.encoded, held.batches);
        drop(held.spent);
    }
}

impl Drop for ProvenanceBacklog {
    fn drop(&mut self) {
        self.record();
    }
}

/// Records `batches` of events, made in no journal frame, with those `encoded` ahead (see
/// `Transaction::encode_ahead`), in one hand-over to the store.
///
/// The copy encodes them itself, where they are in cache: encoding them on the provenance
/// writer instead cost about three times the CPU time, which the brokers and the database
/// on the other core then lack (measured: 0.027–0.031 against 0.033–0.044 CPU seconds per
/// 1,000 messages at concurrency 1, and about 9% more messages/s at concurrency 4).
fn record_events(
    provenance: &ProvenanceRepository,
    encoded: Vec<Encoded>,
    mut batches: Vec<Vec<ProvenanceEvent>>,
) {
    batches.retain(|b| !b.is_empty());
    for batch in &mut batches {
        super::direct_event_ids(batch);
    }
    if let Err(e) = provenance.insert_batches(encoded, batches) {
        tracing::warn!("provenance insert failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::EventType;
    use std::time::Duration;

    fn store(dir: &std::path::Path) -> Arc<ProvenanceRepository> {
        Arc::new(ProvenanceRepository::open(dir, Duration::MAX, u64::MAX).unwrap())
    }

    /// `n` SEND events of flow files `{tag}-0`, `{tag}-1`, …
    fn sends(tag: &str, n: usize) -> Vec<ProvenanceEvent> {
        (0..n)
            .map(|i| ProvenanceEvent {
                id: 0,
                event_type: EventType::SEND,
                time_ms: 1_000,
                flowfile: format!("{tag}-{i}").into(),
                component: "put".into(),
                component_type: "PutDatabaseRecord".into(),
                attributes: Default::default(),
                size: 10,
                parents: vec![],
                children: vec![],
                details: None,
                transit_uri: Some("postgresql://127.0.0.1/test".into()),
            })
            .collect()
    }

    /// Encoded ahead as a transaction's wait does: ids given, then encoded.
    fn encoded_ahead(mut events: Vec<ProvenanceEvent>) -> (Encoded, Vec<ProvenanceEvent>) {
        super::super::direct_event_ids(&mut events);
        let batches = vec![events];
        let encoded = ProvenanceRepository::encode(&batches).unwrap();
        (encoded, batches.into_iter().flatten().collect())
    }

    #[test]
    fn held_events_are_stored_only_when_recorded_and_then_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let provenance = store(dir.path());
        let backlog = ProvenanceBacklog::new(Arc::clone(&provenance));
        let (encoded, spent) = encoded_ahead(sends("ahead", 3));
        backlog.hold(
            vec![encoded],
            vec![sends("rest", 2), Vec::new()],
            vec![spent],
        );
        assert_eq!(provenance.len().unwrap(), 0, "held, not yet recorded");
        backlog.record();
        assert_eq!(provenance.len().unwrap(), 5);
        backlog.record();
        assert_eq!(provenance.len().unwrap(), 5, "recorded once");
    }

    #[test]
    fn a_second_hold_records_the_first_and_a_drop_records_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let provenance = store(dir.path());
        let backlog = ProvenanceBacklog::new(Arc::clone(&provenance));
        backlog.hold(Vec::new(), vec![sends("first", 4)], Vec::new());
        backlog.hold(Vec::new(), vec![sends("second", 2)], Vec::new());
        assert_eq!(provenance.len().unwrap(), 4, "one transaction held at most");
        backlog.record_now(vec![sends("rolled-back", 1)]);
        assert_eq!(provenance.len().unwrap(), 7);
        backlog.hold(Vec::new(), vec![sends("last", 3)], Vec::new());
        drop(backlog);
        assert_eq!(provenance.len().unwrap(), 10);
        let ids: Vec<u64> = provenance
            .query(&crate::provenance::Query::default(), usize::MAX)
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect();
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 10, "every event once, with an id of its own");
    }
}
