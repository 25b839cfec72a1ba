//! MergeContent: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, StartError, Trigger, props};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use weir_flow_api::component::Component;
use weir_flow_api::session::{FlowFileRef, Session, SessionFactory};

/// The MergeContent type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(MergeContent::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "MergeContent",
    description: "Joins flow files into one, binned by an attribute, by count, size and age; bins are kept across triggers until they merge.",
    properties: &[
        p("Minimum Number of Entries", true, Some("1"), K::Count).about(
            "The fewest flow files a bin needs to merge once the input runs dry (Max Bin Age merges it regardless).",
        ),
        p("Maximum Number of Entries", true, Some("1000"), K::Count).about(
            "A bin merges as soon as it holds this many flow files.",
        ),
        p("Minimum Group Size", true, Some("0 B"), K::Size).about(
            "The least total content a bin needs to merge once the input runs dry (Max Bin Age merges it regardless).",
        ),
        p("Max Bin Age", false, None, K::Duration).about(
            "A bin older than this merges with whatever it holds; unset, a bin waits for the minimums.",
        ),
        p("Maximum number of Bins", true, Some("5"), K::Count).about(
            "The most bins open at once (at least 1); a flow file that needs one more merges the oldest bin as it is.",
        ),
        p("Correlation Attribute Name", false, None, K::Text).about(
            "Flow files are binned by this attribute's value (a missing attribute counts as empty); unset, they all share one bin.",
        ),
        p("Demarcator", false, None, K::Text).about(
            "Text put between the merged contents (`\\n` stands for a newline); unset, nothing.",
        ),
    ],
    relationships: &["merged", "original", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

/// MergeContent (bin packing): merges flow files of one correlation value into one (JOIN).
///
/// Flow files go into bins by their correlation value, at most `Maximum number of Bins`
/// bins at once; when a flow file needs a new bin and the limit is reached, the oldest bin
/// is merged as it is (NiFi's rule). A bin is merged when it holds `Maximum Number of
/// Entries`, when it is older than `Max Bin Age`, or when it meets both minimums and the
/// input is exhausted for now.
///
/// In a traditional group the bins are kept across triggers in a session the processor
/// holds open (as NiFi keeps binned flow files in uncommitted sessions): a binned flow file
/// stays in its queue's journal and in flight in the queue (counted, so not idle) until the
/// merged flow file commits, in the same journal frame that removes the originals. A crash
/// before that commit finds the originals in their queue at recovery and bins them again:
/// no line lost, none merged twice, content references unchanged until the commit. At a
/// merge the flow files of the bins not merged go back to their queue unchanged (no journal
/// write) and are taken again at the next trigger, so a merge costs one more look at what the
/// other bins hold (at most `Maximum number of Bins` × `Maximum Number of Entries`). A task
/// on the runtime merges bins past `Max Bin Age` when no new input triggers the processor.
///
/// In a stateless group the bins live in the group's transaction: each trigger takes all of
/// the processor's in-memory input, bins it, merges the ready bins and gives the rest back
/// to the queue. A trigger that merged nothing and gave everything back is followed by one
/// that takes nothing, so that the engine sees no progress and triggers the sources again
/// (the transaction cannot commit while flow files wait in a bin).
pub struct MergeContent {
    rules: Arc<MergeRules>,
    /// Held bins of a traditional group, shared with the task that flushes old bins.
    held: Arc<HeldBins>,
    stateless: bool,
    /// Stateless: the last trigger gave back every flow file it took, merging nothing.
    fruitless: AtomicBool,
    /// Stateless: when each correlation value was first binned in the transaction.
    ages: Mutex<HashMap<String, Instant>>,
    flusher: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// MergeContent's configuration.
struct MergeRules {
    min_entries: usize,
    max_entries: usize,
    min_size: u64,
    max_age: Option<Duration>,
    max_bins: usize,
    correlation: Option<String>,
    demarcator: Vec<u8>,
}

/// One bin: flow files of one correlation value, in arrival order.
struct Bin {
    key: String,
    members: Vec<FlowFileRef>,
    size: u64,
    created: Instant,
}

/// The bins a traditional MergeContent keeps across triggers, and the session that holds
/// their flow files.
struct HeldBins {
    sessions: OnceLock<SessionFactory>,
    state: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// Holds every binned flow file, uncommitted, until a merge commits it.
    session: Option<Box<dyn Session>>,
    bins: Vec<Bin>,
    /// When the bins given back at the last merge were made, by correlation value: taken
    /// again, they keep their age.
    ages: HashMap<String, Instant>,
    stopped: bool,
}

impl MergeContent {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let max_bins = props::count(c, "Maximum number of Bins")?;
        if max_bins == 0 {
            return Err("Maximum number of Bins must be at least 1".into());
        }
        Ok(MergeContent {
            rules: Arc::new(MergeRules {
                min_entries: props::count(c, "Minimum Number of Entries")?.max(1) as usize,
                max_entries: props::count(c, "Maximum Number of Entries")?.max(1) as usize,
                min_size: props::size(c, "Minimum Group Size")?,
                max_age: props::opt(c, "Max Bin Age")
                    .map(|_| props::duration(c, "Max Bin Age"))
                    .transpose()?,
                max_bins: max_bins as usize,
                correlation: props::opt(c, "Correlation Attribute Name").filter(|s| !s.is_empty()),
                demarcator: props::opt(c, "Demarcator")
                    .unwrap_or_default()
                    .replace("\\n", "\n")
                    .into_bytes(),
            }),
            held: Arc::new(HeldBins {
                sessions: OnceLock::new(),
                state: Mutex::new(Held::default()),
            }),
            stateless: c.group_timeout.is_some(),
            fruitless: AtomicBool::new(false),
            ages: Mutex::new(HashMap::new()),
            flusher: Mutex::new(None),
        })
    }
}

impl MergeRules {
    /// The most flow files the bins can hold.
    fn capacity(&self) -> usize {
        self.max_bins.saturating_mul(self.max_entries).max(1)
    }

    fn key(&self, session: &dyn Session, ff: FlowFileRef) -> String {
        self.correlation
            .as_ref()
            .and_then(|a| session.attribute(ff, a))
            .unwrap_or_default()
            .to_string()
    }

    /// Puts `ff` in its bin; a full bin, or the oldest one when a new bin is needed and the
    /// limit is reached, moves to `ready`. `created` says when a new bin of a value was made.
    fn place(
        &self,
        bins: &mut Vec<Bin>,
        ready: &mut Vec<Bin>,
        key: String,
        ff: FlowFileRef,
        size: u64,
        created: impl FnOnce(&str) -> Instant,
    ) {
        let i = match bins.iter().position(|b| b.key == key) {
            Some(i) => i,
            None => {
                if bins.len() >= self.max_bins
                    && let Some(oldest) = (0..bins.len()).min_by_key(|&i| bins[i].created)
                {
                    ready.push(bins.remove(oldest));
                }
                let created = created(&key);
                bins.push(Bin {
                    key,
                    members: Vec::new(),
                    size: 0,
                    created,
                });
                bins.len() - 1
            }
        };
        let bin = &mut bins[i];
        bin.members.push(ff);
        bin.size += size;
        if bin.members.len() >= self.max_entries {
            ready.push(bins.remove(i));
        }
    }

    /// Moves to `ready` the bins older than `Max Bin Age`, and, when the input is
    /// `exhausted`, those that meet both minimums.
    fn take_ready(&self, bins: &mut Vec<Bin>, ready: &mut Vec<Bin>, now: Instant, exhausted: bool) {
        let mut i = 0;
        while i < bins.len() {
            let b = &bins[i];
            let old = self
                .max_age
                .is_some_and(|a| now.saturating_duration_since(b.created) >= a);
            let enough =
                exhausted && b.members.len() >= self.min_entries && b.size >= self.min_size;
            if old || enough {
                ready.push(bins.remove(i));
            } else {
                i += 1;
            }
        }
    }

    /// Merges `bin` in `session`: one new flow file (JOIN) to `merged`, the originals to
    /// `original`.
    fn merge(&self, session: &mut dyn Session, bin: &Bin) -> Result<(), ProcessError> {
        let mut data = Vec::with_capacity(bin.size as usize);
        for (i, &f) in bin.members.iter().enumerate() {
            if i > 0 {
                data.extend_from_slice(&self.demarcator);
            }
            session.read_with(f, |d| data.extend_from_slice(d))?;
        }
        let merged = session.create_joined(&bin.members);
        session.write_owned(merged, data)?;
        session.put_attribute(merged, "merge.count", bin.members.len().to_string());
        session.transfer(merged, "merged")?;
        for &f in &bin.members {
            session.transfer(f, "original")?;
        }
        Ok(())
    }
}

impl HeldBins {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes what the queues offer into the held session, bins it, and merges the ready
    /// bins. Returns whether anything was taken or merged.
    fn intake(&self, rules: &MergeRules) -> Result<bool, ProcessError> {
        let Some(sessions) = self.sessions.get() else {
            return Ok(false);
        };
        let mut held = self.lock();
        if held.stopped {
            return Ok(false);
        }
        let Held {
            session,
            bins,
            ages,
            ..
        } = &mut *held;
        let session = session.get_or_insert_with(|| sessions.session());
        let now = Instant::now();
        let (mut ready, mut taken, mut exhausted) = (Vec::new(), 0, false);
        // Up to what the bins can hold: each flow file past that fills or evicts a bin.
        let limit = rules.capacity();
        while taken < limit {
            let want = (limit - taken).min(1000);
            let got = session.get_batch(want)?;
            taken += got.len();
            for &ff in &got {
                let (key, size) = (rules.key(&**session, ff), session.flowfile(ff).size());
                rules.place(bins, &mut ready, key, ff, size, |k| {
                    ages.remove(k).unwrap_or(now)
                });
            }
            if got.len() < want {
                exhausted = true;
                break;
            }
        }
        if exhausted {
            // Everything given back at the last merge has been taken again.
            ages.clear();
        }
        rules.take_ready(bins, &mut ready, now, exhausted);
        if ready.is_empty() {
            return Ok(taken > 0);
        }
        self.commit(&mut held, rules, sessions, &ready)?;
        Ok(true)
    }

    /// Merges the bins past `Max Bin Age` (the flushing task's work, when no input comes).
    fn flush_old(&self, rules: &MergeRules) -> Result<(), ProcessError> {
        let Some(sessions) = self.sessions.get() else {
            return Ok(());
        };
        if sessions.held_back() {
            return Ok(());
        }
        let mut held = self.lock();
        if held.stopped || held.bins.is_empty() {
            return Ok(());
        }
        let mut ready = Vec::new();
        rules.take_ready(&mut held.bins, &mut ready, Instant::now(), false);
        if ready.is_empty() {
            return Ok(());
        }
        self.commit(&mut held, rules, sessions, &ready)
    }

    /// Commits the held session with `ready` merged; the flow files of the other bins go
    /// back to their queue unchanged (their bins' ages kept), to be taken again.
    fn commit(
        &self,
        held: &mut Held,
        rules: &MergeRules,
        sessions: &SessionFactory,
        ready: &[Bin],
    ) -> Result<(), ProcessError> {
        let Some(mut session) = held.session.take() else {
            return Ok(());
        };
        let others = std::mem::take(&mut held.bins);
        for bin in ready {
            if let Err(e) = rules.merge(&mut *session, bin) {
                // Everything held goes back, penalized; it is binned again after.
                session.rollback(true);
                return Err(e);
            }
        }
        for bin in others {
            for &f in &bin.members {
                session.give_back(f);
            }
            held.ages.insert(bin.key, bin.created);
        }
        // On failure the session rolls back: every flow file is back in its queue.
        let committed = session.commit()?;
        sessions.count(&committed);
        Ok(())
    }

    /// Gives every held flow file back to its queue and takes no more.
    fn stop(&self) {
        let mut held = self.lock();
        held.stopped = true;
        held.bins.clear();
        if let Some(session) = held.session.take() {
            session.rollback(false);
        }
    }
}

impl MergeContent {
    /// A stateless trigger: every flow file waiting is binned; ready bins merge, the rest
    /// go back to the transaction's queue (see the type's docs).
    fn trigger_in_transaction(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        if self.fruitless.swap(false, Ordering::Relaxed) {
            // The input is what the last trigger gave back: no progress, so that the group's
            // sources are triggered again before this looks at it once more.
            return Ok(Trigger::Idle);
        }
        let ffs = session.get_batch(usize::MAX)?;
        if ffs.is_empty() {
            return Ok(Trigger::Idle);
        }
        let now = Instant::now();
        let mut ages = self.ages.lock().unwrap_or_else(|p| p.into_inner());
        let (mut bins, mut ready) = (Vec::new(), Vec::new());
        for &ff in &ffs {
            let (key, size) = (self.rules.key(session, ff), session.flowfile(ff).size());
            self.rules.place(&mut bins, &mut ready, key, ff, size, |k| {
                *ages.entry(k.to_string()).or_insert(now)
            });
        }
        // Every waiting flow file was taken: the input is exhausted for now.
        self.rules.take_ready(&mut bins, &mut ready, now, true);
        for bin in &ready {
            self.rules.merge(session, bin)?;
            ages.remove(&bin.key);
        }
        for bin in &bins {
            for &f in &bin.members {
                session.give_back(f);
            }
        }
        ages.retain(|k, _| bins.iter().any(|b| b.key == *k));
        self.fruitless.store(ready.is_empty(), Ordering::Relaxed);
        Ok(Trigger::worked_if(!ready.is_empty()))
    }
}

impl Processor for MergeContent {
    fn start(&self, sessions: SessionFactory) -> Result<(), StartError> {
        if self.stateless {
            return Ok(());
        }
        let _ = self.held.sessions.set(sessions);
        if let Some(age) = self.rules.max_age {
            // Old bins merge even when no input triggers the processor.
            let tick = (age / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
            let (held, rules) = (Arc::clone(&self.held), Arc::clone(&self.rules));
            let task = tokio::spawn(async move {
                loop {
                    tokio::time::sleep(tick).await;
                    if held.lock().stopped {
                        return;
                    }
                    let (held, rules) = (Arc::clone(&held), Arc::clone(&rules));
                    let flushed = tokio::task::spawn_blocking(move || held.flush_old(&rules)).await;
                    if let Ok(Err(e)) = flushed {
                        tracing::warn!("MergeContent: merging old bins failed: {e}");
                    }
                }
            });
            *self.flusher.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        }
        Ok(())
    }

    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        if self.stateless {
            return self.trigger_in_transaction(session);
        }
        Ok(Trigger::worked_if(self.held.intake(&self.rules)?))
    }

    fn stop(&self) {
        if let Some(task) = self
            .flusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            task.abort();
        }
        self.held.stop();
    }
}
