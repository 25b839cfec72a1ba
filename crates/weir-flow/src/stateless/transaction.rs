//! One stateless transaction's state: the group's queues and content in memory, the
//! provenance events held until commit, what was taken from outside the group, and the
//! sources' completion hooks.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rustc_hash::FxHashMap;

use crate::engine::{BeforeCommitHook, Completion, CompletionHook, Shared};
use crate::flowfile::{ContentClaim, FlowFile};
use crate::processors::Processor;
use crate::provenance::{EventType, ProvenanceEvent};
use crate::repository::journal::Op;

use super::ProvenanceBacklog;

/// Claim files with this bit are the transaction's memory, not the content repository.
const MEMORY: u64 = 1 << 63;

/// What a committed session hands to its transaction.
pub(crate) struct Absorbed {
    /// Flow files sent to connections: (connection, flow file, penalized until).
    pub(crate) enqueue: Vec<(usize, FlowFile, Option<Instant>)>,
    /// Flow files given back unchanged to the queue they came from.
    pub(crate) returned: Vec<(u32, FlowFile)>,
    /// The session's provenance events.
    pub(crate) events: Vec<ProvenanceEvent>,
    /// Events recorded only if the transaction commits, even at a rollback's SEND rule.
    pub(crate) commit_only_events: Vec<ProvenanceEvent>,
    /// Flow files taken from queues outside the group (input ports).
    pub(crate) taken: Vec<(u32, FlowFile)>,
    /// Flow files that expired in those queues.
    pub(crate) expired: Vec<(u32, FlowFile)>,
    /// The session's completion hooks.
    pub(crate) completions: Vec<CompletionHook>,
    /// The session's hooks to run before the transaction commits.
    pub(crate) before_commit: Vec<BeforeCommitHook>,
    /// Source files to delete once the transaction's commit is durable
    /// ([`crate::repository::journal::Op::DeleteSource`]) and components' new states
    /// ([`crate::repository::journal::Op::SetState`]), for the commit's frame.
    pub(crate) repository_ops: Vec<Op>,
}

/// Everything a transaction holds when it ends.
pub(crate) struct Parts {
    /// The committed sessions' events, a batch per session (as handed over: moving every
    /// event into one vector copied them once per session that grew it).
    pub(crate) events: Vec<Vec<ProvenanceEvent>>,
    /// Events recorded only if the transaction commits, a batch per session.
    pub(crate) commit_only_events: Vec<Vec<ProvenanceEvent>>,
    /// SEND and REMOTE_INVOCATION events of sessions that rolled back.
    pub(crate) always: Vec<ProvenanceEvent>,
    pub(crate) taken: Vec<(u32, FlowFile)>,
    pub(crate) outputs: Vec<(usize, FlowFile)>,
    pub(crate) completions: Vec<CompletionHook>,
    /// Hooks to run before the commit's frame and the completions.
    pub(crate) before_commit: Vec<BeforeCommitHook>,
    /// Source files to delete and states to set with the commit's frame.
    pub(crate) repository_ops: Vec<Op>,
}

#[derive(Default)]
struct State {
    /// By connection index (Fx hashing: the keys are ours, and SipHash showed in profiles of
    /// this path, looked up several times per flow file).
    queues: FxHashMap<usize, VecDeque<FlowFile>>,
    content: Vec<bytes::Bytes>,
    events: Vec<Vec<ProvenanceEvent>>,
    always: Vec<ProvenanceEvent>,
    taken: Vec<(u32, FlowFile)>,
    outputs: Vec<(usize, FlowFile)>,
    completions: Vec<CompletionHook>,
    before_commit: Vec<BeforeCommitHook>,
    /// Batches of events recorded only at a commit.
    commit_only_events: Vec<Vec<ProvenanceEvent>>,
    repository_ops: Vec<Op>,
    /// The failure port a flow file reached first, and that flow file described.
    failure: Option<(usize, String)>,
    /// Grows with every flow file moved, taken or created: a trigger that leaves it
    /// unchanged made no progress.
    progress: u64,
}

/// A stateless transaction. See the [module docs](super).
pub(crate) struct Transaction {
    internal: Arc<Vec<bool>>,
    /// The copy's sources, readied while a processor waits (see [`Transaction::work_ahead`]).
    sources: Arc<[Arc<dyn Processor>]>,
    /// What the copy's last commit left to record (see [`Transaction::work_ahead`]).
    backlog: Arc<ProvenanceBacklog>,
    state: Mutex<State>,
}

/// A flow file as a bulletin names it: its uuid, and the attributes that identify what a
/// source received (a message's delivery tag and redelivery flag, a JetStream message's
/// sequence and delivery count, a file's name).
pub(crate) fn describe(ff: &FlowFile) -> String {
    let mut out = format!("flow file {}", ff.uuid());
    let identifying: Vec<String> = ff
        .attributes
        .iter()
        .filter(|(k, v)| {
            k.starts_with("amqp$")
                || k.starts_with("jetstream.")
                // A created flow file's name is its uuid: said once already.
                || *k == "filename" && *v != ff.uuid()
        })
        .map(|(k, v)| {
            let v: String = v.chars().take(80).collect();
            format!("{k}={v}")
        })
        .collect();
    if !identifying.is_empty() {
        out.push_str(" (");
        out.push_str(&identifying.join(", "));
        out.push(')');
    }
    out
}

/// True for the events recorded even when the transaction rolls back.
pub(crate) fn recorded_on_rollback(e: &ProvenanceEvent) -> bool {
    matches!(e.event_type, EventType::SEND | EventType::REMOTE_INVOCATION)
}

impl Transaction {
    pub(crate) fn new(
        internal: Arc<Vec<bool>>,
        sources: Arc<[Arc<dyn Processor>]>,
        backlog: Arc<ProvenanceBacklog>,
    ) -> Transaction {
        Transaction {
            internal,
            sources,
            backlog,
            state: Mutex::new(State::default()),
        }
    }

    /// The copy's provenance backlog, where a commit leaves its events.
    pub(crate) fn backlog(&self) -> &ProvenanceBacklog {
        &self.backlog
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when connection `q` is inside the group (an in-memory queue).
    pub(crate) fn is_internal(&self, q: usize) -> bool {
        self.internal.get(q).copied().unwrap_or(false)
    }

    /// True for content held by a transaction.
    pub(crate) fn is_memory_claim(c: &ContentClaim) -> bool {
        c.file & MEMORY != 0
    }

    /// Takes up to `max` flow files from the in-memory queue `q`, first in first out, and
    /// hands them to `take` as they leave the queue (with the transaction locked: `take`
    /// must not call back into it). Handed over in place rather than as a new vector: a
    /// batch of flow files is large enough for its allocation to show in every session.
    pub(crate) fn poll_with<R>(
        &self,
        q: usize,
        max: usize,
        take: impl FnOnce(&mut dyn ExactSizeIterator<Item = FlowFile>) -> R,
    ) -> R {
        let mut st = self.lock();
        let st = &mut *st;
        let Some(queue) = st.queues.get_mut(&q) else {
            return take(&mut std::iter::empty());
        };
        let n = max.min(queue.len());
        st.progress += n as u64;
        take(&mut queue.drain(..n))
    }

    /// True when any of `queues` is internal and holds a flow file.
    pub(crate) fn has_input(&self, queues: &[usize]) -> bool {
        let st = self.lock();
        queues
            .iter()
            .any(|q| st.queues.get(q).is_some_and(|v| !v.is_empty()))
    }

    /// Holds `data` in memory and returns its claim.
    pub(crate) fn write(&self, data: bytes::Bytes) -> ContentClaim {
        let len = data.len() as u64;
        let mut st = self.lock();
        st.content.push(data);
        ContentClaim {
            file: MEMORY | (st.content.len() as u64 - 1),
            offset: 0,
            len,
        }
    }

    /// The content of an in-memory claim, shared (empty when there is none).
    pub(crate) fn read(&self, c: &ContentClaim) -> bytes::Bytes {
        self.read_with(c, |b| b.cloned().unwrap_or_default())
    }

    /// Runs `f` on the content of an in-memory claim, borrowed (`None` when there is none),
    /// with the transaction's state locked.
    pub(crate) fn read_with<R>(
        &self,
        c: &ContentClaim,
        f: impl FnOnce(Option<&bytes::Bytes>) -> R,
    ) -> R {
        f(self.lock().content.get((c.file & !MEMORY) as usize))
    }

    /// Takes in a committed session: its flow files move on in memory (or wait for the
    /// transaction's commit when they leave the group); its events wait for the commit.
    pub(crate) fn absorb(&self, a: Absorbed, shared: &Shared) {
        let mut st = self.lock();
        for (q, ff) in a.returned {
            let q = q as usize;
            if self.is_internal(q) {
                st.queues.entry(q).or_default().push_front(ff);
            } else {
                shared.queues[q].requeue(vec![ff], None);
            }
        }
        // A session hands over a batch: room for it at once, not by doubling (a flow file is
        // large enough for the copies of each growth to show).
        let arriving = a.enqueue.len();
        for (conn, ff, _) in a.enqueue {
            st.progress += 1;
            let to = shared.flow.connections[conn].to;
            if self.is_internal(conn) {
                let port = &shared.flow.processors[to];
                if port.failure_port && st.failure.is_none() {
                    st.failure = Some((to, describe(&ff)));
                }
                let queue = st.queues.entry(conn).or_default();
                if queue.is_empty() {
                    queue.reserve(arriving);
                }
                queue.push_back(ff);
            } else {
                st.outputs.push((conn, ff));
            }
        }
        // Kept as the session's batch; a rollback picks out the events it still records.
        if !a.events.is_empty() {
            st.events.push(a.events);
        }
        st.progress += (a.taken.len() + a.expired.len()) as u64;
        st.taken.extend(a.taken);
        st.taken.extend(a.expired);
        st.completions.extend(a.completions);
        st.before_commit.extend(a.before_commit);
        if !a.commit_only_events.is_empty() {
            st.commit_only_events.push(a.commit_only_events);
        }
        st.repository_ops.extend(a.repository_ops);
    }

    /// Takes in a rolled-back session: the transaction will roll back.
    pub(crate) fn absorb_rollback(
        &self,
        taken: Vec<(u32, FlowFile)>,
        completions: Vec<CompletionHook>,
        events: Vec<ProvenanceEvent>,
    ) {
        let mut st = self.lock();
        st.taken.extend(taken);
        st.completions.extend(completions);
        st.always
            .extend(events.into_iter().filter(recorded_on_rollback));
    }

    /// The state `component` set in a session this transaction took in, the latest, if any:
    /// what a later trigger of that component in the same transaction sees.
    pub(crate) fn pending_state(
        &self,
        component: &str,
    ) -> Option<crate::repository::journal::StateMap> {
        self.lock()
            .repository_ops
            .iter()
            .rev()
            .find_map(|op| match op {
                Op::SetState {
                    component: c,
                    state,
                } if c == component => Some(state.clone()),
                _ => None,
            })
    }

    /// The failure port a flow file reached, if any: the port's component index and the
    /// flow file, described for a bulletin.
    pub(crate) fn failure(&self) -> Option<(usize, String)> {
        self.lock().failure.clone()
    }

    /// A measure of work done so far.
    pub(crate) fn progress(&self) -> u64 {
        self.lock().progress
    }

    /// True when nothing has entered the transaction.
    pub(crate) fn is_untouched(&self) -> bool {
        let st = self.lock();
        st.progress == 0
            && st.completions.is_empty()
            && st.always.is_empty()
            && st.events.is_empty()
            && st.taken.is_empty()
            && st.repository_ops.is_empty()
            && st.before_commit.is_empty()
    }

    /// Runs every hook with `outcome` (for a transaction that ends with nothing else to do).
    pub(crate) fn settle(&self, outcome: Completion) {
        let hooks = std::mem::take(&mut self.lock().completions);
        for h in hooks {
            h(outcome);
        }
    }

    /// Work a processor's wait on an outside service can hide (see `Session::wait`): the
    /// sources ready their next trigger ([`Processor::work_ahead`]), and the copy's last
    /// commit's events are recorded ([`ProvenanceBacklog::record`]). This transaction's own
    /// events wait for a later one, so that they are recorded together: a flow file's maps
    /// are then written as changes to one another (split between two writes, its first map
    /// in the second would be written in full).
    pub(crate) fn work_ahead(&self) {
        for source in self.sources.iter() {
            if let Err(panic) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| source.work_ahead()))
            {
                tracing::warn!(
                    "a source's work ahead panicked: {}",
                    crate::engine::panic_text(&*panic)
                );
            }
        }
        self.backlog.record();
    }

    /// The content the transaction holds in memory, taken (its claims read as empty after).
    pub(crate) fn take_content(&self) -> Vec<bytes::Bytes> {
        std::mem::take(&mut self.lock().content)
    }

    /// Everything the transaction holds, for its commit or rollback.
    pub(crate) fn take_parts(&self) -> Parts {
        let mut st = self.lock();
        // Events recorded only at a commit join the rest: a rollback takes `always` and the
        // SEND events of `events`, and drops these with the parts.
        let commit_only = std::mem::take(&mut st.commit_only_events);
        Parts {
            events: std::mem::take(&mut st.events),
            commit_only_events: commit_only,
            always: std::mem::take(&mut st.always),
            taken: std::mem::take(&mut st.taken),
            outputs: std::mem::take(&mut st.outputs),
            completions: std::mem::take(&mut st.completions),
            before_commit: std::mem::take(&mut st.before_commit),
            repository_ops: std::mem::take(&mut st.repository_ops),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::processors::{ProcessError, Trigger};
    use crate::provenance::ProvenanceRepository;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A source whose work ahead panics on its first call and counts the others.
    struct Flaky(AtomicUsize);

    impl Processor for Flaky {
        fn trigger(
            &self,
            _session: &mut dyn crate::engine::Session,
        ) -> Result<Trigger, ProcessError> {
            Ok(Trigger::Idle)
        }

        fn work_ahead(&self) {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("work ahead failed");
            }
        }
    }

    #[test]
    fn a_panic_in_a_sources_work_ahead_is_caught_and_the_others_still_run() {
        let (first, second) = (
            Arc::new(Flaky(AtomicUsize::new(0))),
            Arc::new(Flaky(AtomicUsize::new(1))),
        );
        let sources: Arc<[Arc<dyn Processor>]> = Arc::new([
            Arc::clone(&first) as Arc<dyn Processor>,
            Arc::clone(&second) as Arc<dyn Processor>,
        ]);
        let dir = tempfile::tempdir().unwrap();
        let provenance = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        let backlog = Arc::new(ProvenanceBacklog::new(Arc::new(provenance)));
        let txn = Transaction::new(Arc::new(Vec::new()), sources, backlog);
        txn.work_ahead();
        txn.work_ahead();
        assert_eq!(first.0.load(Ordering::SeqCst), 2);
        assert_eq!(second.0.load(Ordering::SeqCst), 3);
        assert!(txn.is_untouched());
    }
}
