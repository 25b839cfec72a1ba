//! A copy's provenance backlog: the events of its last commit, recorded while the copy next
//! waits instead of on its serial path.
//!
//! A commit that writes no journal frame (nothing came from or leaves into a traditional
//! connection) records its events best effort: the provenance writer stores them
//! asynchronously, and a failure is logged. Encoding the events and freeing them cost about
//! a third of the copy's time per message, during which the copy's next transaction could
//! not start. So the commit [`hold`](ProvenanceBacklog::hold)s them, its completion hooks
//! acknowledge at once, and they are recorded by the first of:
//!
//! - the next transaction's first wait on an outside service (a database batch, a broker
//!   with nothing ready), through `Transaction::work_ahead`;
//! - the next commit or rollback, before its own events (the backlog holds one
//!   transaction's events at most);
//! - the copy resting (an idle trigger, a rollback, a schedule) or ending, including by a
//!   panic: dropping the backlog records what it holds.
//!
//! The commit's in-memory content, which nothing reads after it, is freed at the same time
//! (a few buffers per flow file).
//!
//! A transaction's events are recorded together, in one write: each flow file's maps after
//! its first are written as the few changes from the one before.
//! Events keep their order: ids are given when they are recorded, the backlog's before any
//! later transaction's.

use std::sync::{Arc, Mutex};

use crate::provenance::{ProvenanceEvent, ProvenanceRepository};

/// A copy's events committed and not yet recorded, a batch per session, and the content
/// its last commit left to free. See the [module docs](self).
pub(crate) struct ProvenanceBacklog {
    provenance: Arc<ProvenanceRepository>,
    held: Mutex<Held>,
}

/// What one commit left: its events, and its in-memory content (freeing a transaction's
/// buffers, a few per flow file, is work its commit need not wait for either).
#[derive(Default)]
struct Held {
    events: Vec<Vec<ProvenanceEvent>>,
    content: Vec<bytes::Bytes>,
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

    /// Holds a commit's events, a batch per session, and its content, no longer read, for
    /// later. Records (and frees) what an earlier commit left first, so that one
    /// transaction's are held at most.
    pub(crate) fn hold(&self, batches: Vec<Vec<ProvenanceEvent>>, content: Vec<bytes::Bytes>) {
        let earlier = std::mem::replace(
            &mut *self.held(),
            Held {
                events: batches,
                content,
            },
        );
        // The new events get their ids only when recorded, so the earlier ones stay first.
        record_events(&self.provenance, earlier.events);
    }

    /// Records `batches` now, after what the backlog holds (a rollback's SEND events).
    pub(crate) fn record_now(&self, batches: Vec<Vec<ProvenanceEvent>>) {
        self.record();
        record_events(&self.provenance, batches);
    }

    /// Records what the backlog holds, if anything: gives the events their ids, encodes
    /// them, hands them to the provenance writer in one write and frees them. Cost: the
    /// encoding (about 1.6 K instructions per event) and the frees.
    pub(crate) fn record(&self) {
        let held = std::mem::take(&mut *self.held());
        record_events(&self.provenance, held.events);
        drop(held.content);
    }
}

impl Drop for ProvenanceBacklog {
    fn drop(&mut self) {
        self.record();
    }
}

/// Records `batches` of events, made in no journal frame, in one hand-over to the store.
///
/// The copy encodes them itself, where they are in cache: encoding them on the provenance
/// writer instead cost about three times the CPU time, which the brokers and the database
/// on the other core then lack (measured: 0.027–0.031 against 0.033–0.044 CPU seconds per
/// 1,000 messages at concurrency 1, and about 9% more messages/s at concurrency 4).
fn record_events(provenance: &ProvenanceRepository, mut batches: Vec<Vec<ProvenanceEvent>>) {
    batches.retain(|b| !b.is_empty());
    if batches.is_empty() {
        return;
    }
    for batch in &mut batches {
        super::direct_event_ids(batch);
    }
    if let Err(e) = provenance.insert_batches(batches) {
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

    #[test]
    fn held_events_are_stored_only_when_recorded_and_then_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let provenance = store(dir.path());
        let backlog = ProvenanceBacklog::new(Arc::clone(&provenance));
        // Three sessions' batches, one of them empty.
        let content = bytes::Bytes::from(b"a transaction's content".to_vec());
        backlog.hold(
            vec![sends("first", 3), sends("second", 2), Vec::new()],
            vec![content.clone()],
        );
        assert_eq!(provenance.len().unwrap(), 0, "held, not yet recorded");
        assert!(!content.is_unique(), "the content is held too");
        backlog.record();
        assert_eq!(provenance.len().unwrap(), 5);
        assert!(
            content.is_unique(),
            "and freed when the events are recorded"
        );
        backlog.record();
        assert_eq!(provenance.len().unwrap(), 5, "recorded once");
    }

    #[test]
    fn a_second_hold_records_the_first_and_a_drop_records_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let provenance = store(dir.path());
        let backlog = ProvenanceBacklog::new(Arc::clone(&provenance));
        backlog.hold(vec![sends("first", 4)], Vec::new());
        backlog.hold(vec![sends("second", 2)], Vec::new());
        assert_eq!(provenance.len().unwrap(), 4, "one transaction held at most");
        backlog.record_now(vec![sends("rolled-back", 1)]);
        assert_eq!(provenance.len().unwrap(), 7);
        backlog.hold(vec![sends("last", 3)], Vec::new());
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
