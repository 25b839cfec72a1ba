//! What observers see of a running flow, and the controls they have: the engine's
//! [`MonitoredFlow`], read through a [`FlowMonitor`].
//!
//! The monitor reads the counters the engine keeps anyway (per component: flow files and
//! bytes in and out, tasks, bulletins; per queue: counts and bytes), so watching a flow costs
//! it nothing per flow file. Each read takes the queues' locks one at a time, briefly.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Shared;
use crate::definition::Flow;
use crate::provenance::{Lineage, LineageLimits, ProvenanceEvent, Query};
pub use weir_flow_api::monitor::{
    Bulletin, BulletinLevel, ConnectionView, ControlError, FlowMonitor, FlowState, GroupView,
    MonitoredFlow, ProcessorView, ProvenanceUnavailable, RunState,
};

/// How many bulletins each component keeps (the newest).
pub(crate) const BULLETINS_KEPT: usize = 20;

/// The traditional engine's [`MonitoredFlow`] (its stateless groups' members included),
/// read by a [`FlowMonitor`].
pub(crate) struct EngineMonitor {
    shared: Arc<Shared>,
    /// Members of stateless groups: shown as disabled.
    stateless: Arc<BTreeSet<usize>>,
}

impl std::fmt::Debug for EngineMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineMonitor")
            .field("flow", &self.shared.flow.name)
            .finish()
    }
}

impl EngineMonitor {
    /// A monitor of the engine `shared` is of.
    pub(crate) fn monitor(shared: Arc<Shared>) -> FlowMonitor {
        let stateless = Arc::new(crate::stateless::members(&shared.flow));
        FlowMonitor::new(Arc::new(EngineMonitor { shared, stateless }))
    }

    fn flow(&self) -> &Flow {
        &self.shared.flow
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
}

impl MonitoredFlow for EngineMonitor {
    fn name(&self) -> &str {
        &self.flow().name
    }

    fn state(&self) -> FlowState {
        if !self.shared.stopping() {
            FlowState::Running
        } else if self.failure().is_some() {
            FlowState::Failed
        } else {
            FlowState::Stopped
        }
    }

    fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    fn processors(&self) -> Vec<ProcessorView> {
        (0..self.flow().processors.len())
            .map(|i| self.view(i))
            .collect()
    }

    fn processor(&self, name: &str) -> Option<ProcessorView> {
        self.index_of(name).map(|i| self.view(i))
    }

    fn connections(&self) -> Vec<ConnectionView> {
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

    fn groups(&self) -> Vec<GroupView> {
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

    fn set_running(&self, name: &str, run: bool) -> Result<ProcessorView, ControlError> {
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

    fn provenance(
        &self,
        query: &Query,
        limit: usize,
    ) -> Result<Vec<ProvenanceEvent>, ProvenanceUnavailable> {
        self.shared
            .provenance
            .query(query, limit)
            .map_err(|e| ProvenanceUnavailable(Box::new(e)))
    }

    fn lineage(&self, uuid: &str, limits: LineageLimits) -> Result<Lineage, ProvenanceUnavailable> {
        self.shared
            .provenance
            .lineage(uuid, limits)
            .map_err(|e| ProvenanceUnavailable(Box::new(e)))
    }

    fn content(&self, uuid: &str) -> std::io::Result<Option<Vec<u8>>> {
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
