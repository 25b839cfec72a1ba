//! What observers see of a running flow, and the controls they have: a [`FlowMonitor`].
//!
//! The monitor reads the counters the engine keeps anyway (per component: flow files and
//! bytes in and out, tasks, bulletins; per queue: counts and bytes), so watching a flow costs
//! it nothing per flow file. Each read takes the queues' locks one at a time, briefly.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Shared;
use crate::definition::Flow;
use crate::provenance::{Lineage, ProvenanceError, ProvenanceEvent, Query};

/// How many bulletins each component keeps (the newest).
pub(crate) const BULLETINS_KEPT: usize = 20;

/// How grave a [`Bulletin`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulletinLevel {
    /// The component goes on (a trigger rolled back, penalized).
    Warning,
    /// The flow cannot go on as it was.
    Error,
}

impl BulletinLevel {
    /// NiFi's name: `WARNING` or `ERROR`.
    pub fn as_str(self) -> &'static str {
        match self {
            BulletinLevel::Warning => "WARNING",
            BulletinLevel::Error => "ERROR",
        }
    }
}

/// A warning or error a component reported, kept for observers (NiFi's bulletin board).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bulletin {
    /// When (ms since the epoch).
    pub time_ms: i64,
    /// Warning or error.
    pub level: BulletinLevel,
    /// What happened, naming the processor.
    pub message: String,
}

/// Whether a processor is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Triggered on its schedule.
    Running,
    /// Stopped by a user: not triggered; its input queues fill up.
    Stopped,
    /// Cannot be started or stopped alone: a member of a stateless group, which runs as one.
    Disabled,
}

/// Where a flow is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowState {
    /// Processors are scheduled.
    Running,
    /// Stopped cleanly.
    Stopped,
    /// Stopped by a failure (see [`FlowMonitor::failure`]).
    Failed,
}

impl FlowState {
    /// `running`, `stopped` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowState::Running => "running",
            FlowState::Stopped => "stopped",
            FlowState::Failed => "failed",
        }
    }
}

/// One processor (or port) as observers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessorView {
    /// Its name, unique in the flow.
    pub name: String,
    /// Its type (`GetFile`, ..., `Port`).
    pub kind: String,
    /// Its process group.
    pub group: String,
    /// Running, stopped or disabled.
    pub state: RunState,
    /// Flow files taken in by committed sessions.
    pub flowfiles_in: u64,
    /// Flow files sent out by committed sessions.
    pub flowfiles_out: u64,
    /// Their content bytes in.
    pub bytes_in: u64,
    /// Their content bytes out.
    pub bytes_out: u64,
    /// Tasks run.
    pub tasks: u64,
    /// Sessions committed.
    pub commits: u64,
    /// Triggers that failed or panicked.
    pub failures: u64,
    /// The newest bulletins, oldest first.
    pub bulletins: Vec<Bulletin>,
}

/// One connection as observers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionView {
    /// Its key, unique in the flow (`FROM[rel,...]->TO`).
    pub key: String,
    /// The component it starts at.
    pub source: String,
    /// The component it ends at.
    pub destination: String,
    /// The relationships it carries.
    pub relationships: Vec<String>,
    /// Flow files queued (in memory, swapped out or in flight).
    pub queued_count: u64,
    /// Their content bytes.
    pub queued_bytes: u64,
    /// Of which swapped out.
    pub swapped: u64,
    /// Back pressure at this many flow files.
    pub object_threshold: u64,
    /// Back pressure at this many bytes.
    pub size_threshold: u64,
    /// Whether a threshold is reached: its source is not triggered.
    pub back_pressure: bool,
}

/// One process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// Its name.
    pub name: String,
    /// Whether the stateless engine runs it.
    pub stateless: bool,
}

/// Why a start or stop was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// No processor of that name.
    #[error("flow `{flow}` has no processor `{name}`")]
    UnknownProcessor {
        /// The flow.
        flow: String,
        /// The name asked for.
        name: String,
    },
    /// A member of a stateless group: the group runs as one.
    #[error(
        "processor `{name}` belongs to stateless group `{group}`, which runs as one; it cannot be started or stopped alone"
    )]
    Disabled {
        /// The processor.
        name: String,
        /// Its group.
        group: String,
    },
}

/// A read-mostly view of a running flow, with start and stop of its processors. Cheap to
/// clone; it stays readable after the engine stopped.
#[derive(Clone)]
pub struct FlowMonitor {
    shared: Arc<Shared>,
    /// Members of stateless groups: shown as disabled.
    stateless: Arc<BTreeSet<usize>>,
}

impl std::fmt::Debug for FlowMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowMonitor")
            .field("flow", &self.shared.flow.name)
            .finish()
    }
}

impl FlowMonitor {
    pub(crate) fn new(shared: Arc<Shared>) -> FlowMonitor {
        let stateless = Arc::new(crate::stateless::members(&shared.flow));
        FlowMonitor { shared, stateless }
    }

    fn flow(&self) -> &Flow {
        &self.shared.flow
    }

    /// The flow's name.
    pub fn name(&self) -> &str {
        &self.flow().name
    }

    /// Running, stopped or failed.
    pub fn state(&self) -> FlowState {
        if !self.shared.stopping() {
            FlowState::Running
        } else if self.failure().is_some() {
            FlowState::Failed
        } else {
            FlowState::Stopped
        }
    }

    /// The failure that stopped the flow, if any.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// Every processor and port, in definition order.
    pub fn processors(&self) -> Vec<ProcessorView> {
        (0..self.flow().processors.len())
            .map(|i| self.view(i))
            .collect()
    }

    /// The processor named `name`.
    pub fn processor(&self, name: &str) -> Option<ProcessorView> {
        self.index_of(name).map(|i| self.view(i))
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.flow().processors.iter().position(|c| c.name == name)
    }

    fn view(&self, i: usize) -> ProcessorView {
        let c = &self.flow().processors[i];
        let st = &self.shared.stats[i];
        let state = if self.stateless.contains(&i) {
            RunState::Disabled
        } else if self.shared.scheduled(i) {
            RunState::Running
        } else {
            RunState::Stopped
        };
        ProcessorView {
            name: c.name.clone(),
            kind: c.type_name().to_string(),
            group: c.group.clone(),
            state,
            flowfiles_in: st.flowfiles_in.load(Ordering::Relaxed),
            flowfiles_out: st.flowfiles_out.load(Ordering::Relaxed),
            bytes_in: st.bytes_in.load(Ordering::Relaxed),
            bytes_out: st.bytes_out.load(Ordering::Relaxed),
            tasks: st.tasks.load(Ordering::Relaxed),
            commits: st.commits.load(Ordering::Relaxed),
            failures: st.failures.load(Ordering::Relaxed),
            bulletins: st
                .bulletins
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned()
                .collect(),
        }
    }

    /// Every connection, in definition order.
    pub fn connections(&self) -> Vec<ConnectionView> {
        let names = &self.flow().processors;
        self.shared
            .queues
            .iter()
            .map(|q| {
                let c = &q.connection;
                let counts = q.counts();
                ConnectionView {
                    key: c.key.clone(),
                    source: names[c.from].name.clone(),
                    destination: names[c.to].name.clone(),
                    relationships: c.relationships.clone(),
                    queued_count: counts.count,
                    queued_bytes: counts.bytes,
                    swapped: counts.swapped,
                    object_threshold: c.back_pressure_count,
                    size_threshold: c.back_pressure_size,
                    back_pressure: counts.count >= c.back_pressure_count
                        || counts.bytes >= c.back_pressure_size,
                }
            })
            .collect()
    }

    /// The process groups, in the order their first component is defined.
    pub fn groups(&self) -> Vec<GroupView> {
        let mut seen = BTreeSet::new();
        self.flow()
            .processors
            .iter()
            .filter(|c| seen.insert(c.group.as_str()))
            .map(|c| GroupView {
                name: c.group.clone(),
                stateless: self.flow().stateless_groups.contains(&c.group),
            })
            .collect()
    }

    /// Starts (`run` true) or stops the processor `name`, as NiFi's start and stop do: a
    /// stopped processor is not triggered (a trigger running now finishes), and a source
    /// that takes data outside triggers (ListenHTTP) refuses it. Returns its view after the
    /// change. Starting a running processor, or stopping a stopped one, changes nothing.
    ///
    /// # Errors
    /// [`ControlError`]: no such processor, or a member of a stateless group.
    pub fn set_running(&self, name: &str, run: bool) -> Result<ProcessorView, ControlError> {
        let i = self
            .index_of(name)
            .ok_or_else(|| ControlError::UnknownProcessor {
                flow: self.name().to_string(),
                name: name.to_string(),
            })?;
        let c = &self.flow().processors[i];
        if self.stateless.contains(&i) {
            return Err(ControlError::Disabled {
                name: c.name.clone(),
                group: c.group.clone(),
            });
        }
        let was = self.shared.stats[i].scheduled.swap(run, Ordering::Relaxed);
        if was != run {
            tracing::info!(
                "processor `{name}` {}",
                if run { "started" } else { "stopped" }
            );
            // Its tasks wait for a wake-up (or their idle timeout) to look again.
            self.shared.wakers[i].notify_waiters();
        }
        Ok(self.view(i))
    }

    /// Provenance events matching `query`, oldest first, at most `limit`.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn provenance(
        &self,
        query: &Query,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceError> {
        self.shared.provenance.query(query, limit)
    }

    /// The lineage of flow file `uuid`: related flow files and all their events. Empty
    /// (no events) for a flow file provenance does not know.
    ///
    /// # Errors
    /// [`ProvenanceError`] from the store.
    pub fn lineage(&self, uuid: &str) -> Result<Lineage, ProvenanceError> {
        self.shared.provenance.lineage(uuid)
    }

    /// The content of flow file `uuid` while it is queued in one of the flow's connections
    /// (its claim is then still in the content repository); `None` when it is not queued:
    /// it left the flow, never existed, or a session holds it at this moment. Costs a scan of
    /// every queue, and the swap files are read.
    ///
    /// # Errors
    /// A swap or claim file that cannot be read for another reason than being gone.
    pub fn content(&self, uuid: &str) -> std::io::Result<Option<Vec<u8>>> {
        let swap_dir = self.shared.repo.swap_dir();
        for q in &self.shared.queues {
            let Some(ff) = q.find(uuid, &swap_dir)? else {
                continue;
            };
            let Some(claim) = ff.claim else {
                return Ok(Some(Vec::new()));
            };
            return match self.shared.repo.content().read(&claim) {
                Ok(bytes) => Ok(Some(bytes)),
                // Its claim file went with the flow file, between the scan and the read.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::UnexpectedEof
                    ) =>
                {
                    Ok(None)
                }
                Err(e) => Err(e),
            };
        }
        Ok(None)
    }
}
