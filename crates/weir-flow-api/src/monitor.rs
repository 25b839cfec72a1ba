//! What observers see of a running flow, and the controls they have: a [`FlowMonitor`].
//!
//! An engine implements [`MonitoredFlow`] and hands out a [`FlowMonitor`] over it; a
//! dashboard or an exporter holds monitors and so depends on this crate, not on the
//! engines. The engines' reads cost a flow nothing per flow file: they are of counters the
//! engine keeps anyway.

use std::sync::Arc;

use crate::provenance::{Lineage, LineageLimits, ProvenanceEvent, Query};

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

/// Why a flow's provenance could not be read: the engine's store failed. Its text is the
/// store's error's.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ProvenanceUnavailable(pub Box<dyn std::error::Error + Send + Sync>);

/// A running flow as its monitor reads and controls it: implemented by an engine. See
/// [`FlowMonitor`], whose methods say what each one answers.
pub trait MonitoredFlow: Send + Sync {
    /// See [`FlowMonitor::name`].
    fn name(&self) -> &str;
    /// See [`FlowMonitor::state`].
    fn state(&self) -> FlowState;
    /// See [`FlowMonitor::failure`].
    fn failure(&self) -> Option<String>;
    /// See [`FlowMonitor::processors`].
    fn processors(&self) -> Vec<ProcessorView>;
    /// See [`FlowMonitor::processor`].
    fn processor(&self, name: &str) -> Option<ProcessorView>;
    /// See [`FlowMonitor::connections`].
    fn connections(&self) -> Vec<ConnectionView>;
    /// See [`FlowMonitor::groups`].
    fn groups(&self) -> Vec<GroupView>;
    /// See [`FlowMonitor::set_running`].
    ///
    /// # Errors
    /// [`ControlError`].
    fn set_running(&self, name: &str, run: bool) -> Result<ProcessorView, ControlError>;
    /// See [`FlowMonitor::provenance`].
    ///
    /// # Errors
    /// [`ProvenanceUnavailable`].
    fn provenance(
        &self,
        query: &Query,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceUnavailable>;
    /// See [`FlowMonitor::lineage`].
    ///
    /// # Errors
    /// [`ProvenanceUnavailable`].
    fn lineage(&self, uuid: &str, limits: LineageLimits) -> Result<Lineage, ProvenanceUnavailable>;
    /// See [`FlowMonitor::content`].
    ///
    /// # Errors
    /// A swap or claim file that cannot be read for another reason than being gone.
    fn content(&self, uuid: &str) -> std::io::Result<Option<Vec<u8>>>;
}

/// A read-mostly view of a running flow, with start and stop of its processors. Cheap to
/// clone (shared); it stays readable after the engine stopped.
#[derive(Clone)]
pub struct FlowMonitor(Arc<dyn MonitoredFlow>);

impl std::fmt::Debug for FlowMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowMonitor")
            .field("flow", &self.name())
            .finish()
    }
}

impl FlowMonitor {
    /// A monitor of `flow`.
    pub fn new(flow: Arc<dyn MonitoredFlow>) -> FlowMonitor {
        FlowMonitor(flow)
    }

    /// The flow's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// Running, stopped or failed.
    pub fn state(&self) -> FlowState {
        self.0.state()
    }

    /// The failure that stopped the flow, if any.
    pub fn failure(&self) -> Option<String> {
        self.0.failure()
    }

    /// Every processor and port, in definition order.
    pub fn processors(&self) -> Vec<ProcessorView> {
        self.0.processors()
    }

    /// The processor named `name`.
    pub fn processor(&self, name: &str) -> Option<ProcessorView> {
        self.0.processor(name)
    }

    /// Every connection, in definition order.
    pub fn connections(&self) -> Vec<ConnectionView> {
        self.0.connections()
    }

    /// The process groups, in the order their first component is defined.
    pub fn groups(&self) -> Vec<GroupView> {
        self.0.groups()
    }

    /// Starts (`run` true) or stops the processor `name`, as NiFi's start and stop do: a
    /// stopped processor is not triggered (a trigger running now finishes), and a source
    /// that takes data outside triggers (ListenHTTP) refuses it. Returns its view after the
    /// change. Starting a running processor, or stopping a stopped one, changes nothing.
    ///
    /// # Errors
    /// [`ControlError`]: no such processor, or a member of a stateless group.
    pub fn set_running(&self, name: &str, run: bool) -> Result<ProcessorView, ControlError> {
        self.0.set_running(name, run)
    }

    /// Provenance events matching `query`, oldest first, at most `limit`.
    ///
    /// # Errors
    /// [`ProvenanceUnavailable`]: the store failed.
    pub fn provenance(
        &self,
        query: &Query,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceUnavailable> {
        self.0.provenance(query, limit)
    }

    /// The lineage of flow file `uuid` within `limits`: related flow files, all their
    /// events, and where it goes on beyond the limits. Empty (no events) for a flow file
    /// provenance does not know. Costs a look-up per flow file it holds.
    ///
    /// # Errors
    /// [`ProvenanceUnavailable`]: the store failed.
    pub fn lineage(
        &self,
        uuid: &str,
        limits: LineageLimits,
    ) -> Result<Lineage, ProvenanceUnavailable> {
        self.0.lineage(uuid, limits)
    }

    /// The content of flow file `uuid` while it is queued in one of the flow's connections
    /// (its claim is then still in the content repository); `None` when it is not queued:
    /// it left the flow, never existed, or a session holds it at this moment. Costs a scan of
    /// every queue, and the swap files are read.
    ///
    /// # Errors
    /// A swap or claim file that cannot be read for another reason than being gone.
    pub fn content(&self, uuid: &str) -> std::io::Result<Option<Vec<u8>>> {
        self.0.content(uuid)
    }
}
