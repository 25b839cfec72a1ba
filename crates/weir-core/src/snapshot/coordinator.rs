//! The job's snapshot coordinator: asks for snapshots, collects the instances' parts, writes
//! them and the manifest, and releases phase 2.
//!
//! Tasklets talk to it through two counters they read once per call (`requested`,
//! `committed`) and two calls: `saved` when an instance finished phase 1 of a snapshot, and
//! `finished` when it ended, with its final state, which stands in for it in every later
//! snapshot. One snapshot is in flight at a time. The coordinator runs
//! on a thread of its own, so that writing and syncing files never stalls a worker.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::format::{Manifest, PartInfo, SnapshotError, VertexInfo};
use super::{Guarantee, Savepoint, SavepointError, SnapshotConfig, SnapshotHold, SnapshotHolds};

/// The figures of one completed snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotStats {
    /// The snapshot id.
    pub id: u64,
    /// From the request to the last instance's save.
    pub duration: Duration,
    /// Writing and syncing the parts and the manifest.
    pub write: Duration,
    /// The longest time one instance held inputs back to align barriers.
    pub alignment: Duration,
    /// The parts' total size in bytes.
    pub bytes: u64,
    /// Whether it was the terminal snapshot.
    pub terminal: bool,
    /// When its manifest became durable, in ms since the Unix epoch.
    pub completed_at_ms: u64,
}

/// One instance's saved state, encoded as its part file.
#[derive(Debug)]
pub(crate) struct EncodedPart {
    pub bytes: Vec<u8>,
    pub entries: u64,
}

/// Where a tasklet sits in the job: its vertex's index and its instance.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub vertex: usize,
    pub instance: usize,
}

struct InFlight {
    id: u64,
    requested_at: Instant,
    taken_at_ms: u64,
    parts: Vec<Option<Arc<EncodedPart>>>,
    remaining: usize,
    alignment: Duration,
    /// Taken as a savepoint: also written to the savepoint store.
    savepoint: bool,
}

/// Where a savepoint request stands.
#[derive(Debug, Clone)]
enum SavepointState {
    /// None asked for.
    Idle,
    /// Asked for: the next snapshot starts at once and is a savepoint.
    Requested,
    /// The snapshot in flight is the savepoint.
    Taking,
    /// Written (or not), for the one waiting in [`Coordinator::await_savepoint`].
    Done(Result<Savepoint, SavepointError>),
}

struct State {
    next_id: u64,
    due: Instant,
    in_flight: Option<InFlight>,
    finals: Vec<Option<Arc<EncodedPart>>>,
    final_count: usize,
    terminal_taken: bool,
    stopped: bool,
    stats: Vec<SnapshotStats>,
    savepoint: SavepointState,
    /// A savepoint is durable: the job is being stopped with it, and no periodic snapshot may
    /// follow, or the job's own store would resume from that one instead.
    savepoint_taken: bool,
}

/// See the [module docs](self).
pub struct Coordinator {
    job: String,
    config: SnapshotConfig,
    vertices: Vec<(String, usize)>,
    slots: Vec<Slot>,
    requested: AtomicU64,
    committed: AtomicU64,
    terminal_committed: AtomicBool,
    /// Holds on snapshots: instances whose build-side (lower priority) inputs are still open,
    /// as in Jet, and stages keeping state that cannot be saved. No snapshot starts while any
    /// is taken.
    holds: SnapshotHolds,
    /// This coordinator's own holds for open build sides, one per instance.
    gates: Mutex<Vec<SnapshotHold>>,
    state: Mutex<State>,
    wake: Condvar,
    /// Older snapshots whose parts were read back whole once (see `retain`).
    verified: Mutex<std::collections::BTreeSet<u64>>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("job", &self.job)
            .field("requested", &self.requested())
            .field("committed", &self.committed())
            .finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A part file's name: the vertex index, its name made file-safe, and the instance.
fn part_file(vertex_index: usize, name: &str, instance: usize) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(48)
        .collect();
    format!("v{vertex_index:03}-{safe}-{instance:04}.part")
}

impl Coordinator {
    /// A coordinator for a job whose vertices are `vertices` (name, parallelism) and whose
    /// tasklets are `slots`, resuming after snapshot `restored` (0: a fresh start).
    pub(crate) fn new(
        job: String,
        config: SnapshotConfig,
        vertices: Vec<(String, usize)>,
        slots: Vec<Slot>,
        (restored, next_id): (u64, u64),
        holds: SnapshotHolds,
    ) -> Self {
        let n = slots.len();
        let due = Instant::now() + config.interval;
        Coordinator {
            job,
            config,
            vertices,
            slots,
            requested: AtomicU64::new(restored),
            committed: AtomicU64::new(restored),
            terminal_committed: AtomicBool::new(false),
            holds,
            gates: Mutex::new(Vec::new()),
            state: Mutex::new(State {
                next_id: next_id.max(restored + 1),
                due,
                in_flight: None,
                finals: vec![None; n],
                final_count: 0,
                terminal_taken: false,
                stopped: false,
                stats: Vec::new(),
                savepoint: SavepointState::Idle,
                savepoint_taken: false,
            }),
            wake: Condvar::new(),
            verified: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The newest snapshot asked for. One atomic load.
    #[inline]
    pub(crate) fn requested(&self) -> u64 {
        self.requested.load(Ordering::Acquire)
    }

    /// The newest snapshot whose manifest is durable: phase 2 may commit up to it.
    #[inline]
    pub(crate) fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Whether the terminal snapshot is durable: finished instances may commit and end.
    #[inline]
    pub(crate) fn terminal_committed(&self) -> bool {
        self.terminal_committed.load(Ordering::Acquire)
    }

    /// The guarantee of the job.
    pub(crate) fn guarantee(&self) -> Guarantee {
        self.config.guarantee
    }

    /// An instance has build-side inputs still open.
    pub(crate) fn close_gate(&self) {
        let hold = self.holds.hold();
        self.gates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(hold);
    }

    /// An instance's build-side inputs completed.
    pub(crate) fn open_gate(&self) {
        drop(self.gates.lock().unwrap_or_else(|e| e.into_inner()).pop());
        self.wake.notify_all();
    }

    /// Tasklet `slot` finished phase 1 of snapshot `id` with this part.
    pub(crate) fn saved(&self, slot: usize, id: u64, part: EncodedPart, alignment: Duration) {
        let mut state = self.lock();
        if let Some(f) = state.in_flight.as_mut()
            && f.id == id
            && f.parts[slot].is_none()
        {
            f.parts[slot] = Some(Arc::new(part));
            f.remaining -= 1;
            f.alignment = f.alignment.max(alignment);
            if f.remaining == 0 {
                self.wake.notify_all();
            }
        }
    }

    /// Tasklet `slot` ended with this final state: it stands in for the instance in the
    /// snapshot in flight, if the instance has not saved for it, and in every later one.
    pub(crate) fn finished(&self, slot: usize, part: EncodedPart) {
        let part = Arc::new(part);
        let mut state = self.lock();
        if state.finals[slot].is_none() {
            state.final_count += 1;
        }
        state.finals[slot] = Some(Arc::clone(&part));
        if let Some(f) = state.in_flight.as_mut()
            && f.parts[slot].is_none()
        {
            f.parts[slot] = Some(part);
            f.remaining -= 1;
        }
        self.wake.notify_all();
    }

    /// Asks for a savepoint: the next snapshot starts at once (once no hold is taken) and is
    /// also written to the savepoint store. A request while one is pending joins it. A
    /// savepoint is taken to stop the job ([`Job::stop_with_savepoint`]): once it is durable,
    /// no periodic snapshot starts (a job that ends by itself first still takes its terminal
    /// one), so the job resumes from the savepoint.
    ///
    /// [`Job::stop_with_savepoint`]: crate::Job::stop_with_savepoint
    ///
    /// # Errors
    /// [`SavepointError::NotConfigured`] without a savepoint store,
    /// [`SavepointError::Ended`] once the job ended or its terminal snapshot was taken.
    pub(crate) fn request_savepoint(&self) -> Result<(), SavepointError> {
        if self.config.savepoints.is_none() {
            return Err(SavepointError::NotConfigured);
        }
        let mut state = self.lock();
        if state.stopped || state.terminal_taken {
            return Err(SavepointError::Ended);
        }
        if !matches!(
            state.savepoint,
            SavepointState::Requested | SavepointState::Taking
        ) {
            state.savepoint = SavepointState::Requested;
        }
        self.wake.notify_all();
        Ok(())
    }

    /// Waits for the savepoint asked for with [`request_savepoint`](Self::request_savepoint)
    /// to be durable in both stores.
    ///
    /// # Errors
    /// [`SavepointError::Ended`] when the job ends first, [`SavepointError::Failed`] when the
    /// savepoint store could not take it.
    pub(crate) fn await_savepoint(&self) -> Result<Savepoint, SavepointError> {
        let mut state = self.lock();
        loop {
            if let SavepointState::Done(result) = &state.savepoint {
                let result = result.clone();
                state.savepoint = SavepointState::Idle;
                return result;
            }
            if state.stopped || matches!(state.savepoint, SavepointState::Idle) {
                return Err(SavepointError::Ended);
            }
            state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Stops the coordinator's thread: the job ended.
    pub(crate) fn stop(&self) {
        self.lock().stopped = true;
        self.wake.notify_all();
    }

    /// The figures of every snapshot completed so far, oldest first.
    pub fn stats(&self) -> Vec<SnapshotStats> {
        self.lock().stats.clone()
    }

    /// The coordinator's loop; returns when the job ends, or with the error that must fail
    /// it (a snapshot could not be written).
    pub(crate) fn run(&self) -> Result<(), SnapshotError> {
        let total = self.slots.len();
        let mut state = self.lock();
        loop {
            if state.stopped {
                return Ok(());
            }
            if state.in_flight.as_ref().is_some_and(|f| f.remaining == 0) {
                let flight = state.in_flight.take().expect("checked");
                let terminal = state.final_count == total;
                drop(state);
                let (stats, savepoint) = self.write(flight, terminal)?;
                state = self.lock();
                state.stats.push(stats);
                if let Some(result) = savepoint {
                    state.savepoint_taken |= result.is_ok();
                    state.savepoint = SavepointState::Done(result);
                    self.wake.notify_all();
                }
                // Phase 2 may start: the manifest is durable.
                self.committed.store(stats.id, Ordering::Release);
                if terminal {
                    self.terminal_committed.store(true, Ordering::Release);
                }
                state.due = Instant::now() + self.config.interval;
                if terminal {
                    state.terminal_taken = true;
                }
                continue;
            }
            if state.in_flight.is_none() && !state.terminal_taken {
                let all_final = state.final_count == total;
                let gates_open = !self.holds.held();
                let savepoint = matches!(state.savepoint, SavepointState::Requested);
                let periodic = !state.savepoint_taken && Instant::now() >= state.due;
                if all_final || (gates_open && (savepoint || periodic)) {
                    let id = state.next_id;
                    state.next_id += 1;
                    if savepoint {
                        state.savepoint = SavepointState::Taking;
                    }
                    let parts = state.finals.clone();
                    let remaining = total - state.final_count;
                    state.in_flight = Some(InFlight {
                        id,
                        requested_at: Instant::now(),
                        taken_at_ms: now_ms(),
                        parts,
                        remaining,
                        alignment: Duration::ZERO,
                        savepoint,
                    });
                    self.requested.store(id, Ordering::Release);
                    continue;
                }
            }
            let wait = state
                .due
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            state = self
                .wake
                .wait_timeout(state, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Writes a snapshot whose parts are all in, publishes it, releases phase 2 and prunes
    /// the oldest snapshots; a savepoint also goes to the savepoint store, and its outcome
    /// comes back beside the figures (a savepoint store that fails does not fail the job).
    ///
    /// # Errors
    /// The job's own store failed: the job fails.
    #[allow(clippy::type_complexity)]
    fn write(
        &self,
        flight: InFlight,
        terminal: bool,
    ) -> Result<(SnapshotStats, Option<Result<Savepoint, SavepointError>>), SnapshotError> {
        let duration = flight.requested_at.elapsed();
        let started = Instant::now();
        let store = &self.config.store;
        let mut vertices: Vec<VertexInfo> = self
            .vertices
            .iter()
            .map(|(name, parallelism)| VertexInfo {
                name: name.clone(),
                parallelism: *parallelism,
                parts: Vec::new(),
            })
            .collect();
        for (slot, part) in self.slots.iter().zip(&flight.parts) {
            let part = part.as_ref().expect("every instance saved");
            let file = part_file(slot.vertex, &self.vertices[slot.vertex].0, slot.instance);
            store.write_part(&self.job, flight.id, &file, &part.bytes)?;
            vertices[slot.vertex].parts.push(PartInfo {
                instance: slot.instance,
                file,
                bytes: part.bytes.len() as u64,
                entries: part.entries,
            });
        }
        let manifest = Manifest {
            job: self.job.clone(),
            id: flight.id,
            taken_at_ms: flight.taken_at_ms,
            duration_ms: duration.as_millis() as u64,
            alignment_ms: flight.alignment.as_millis() as u64,
            terminal,
            guarantee: self.config.guarantee,
            savepoint: flight.savepoint,
            vertices,
        };
        let encoded = manifest.encode();
        store.publish(&self.job, flight.id, &encoded)?;
        self.retain(flight.id)?;
        let savepoint = flight
            .savepoint
            .then(|| self.keep_savepoint(&flight, &encoded));
        let stats = SnapshotStats {
            id: flight.id,
            duration,
            write: started.elapsed(),
            alignment: flight.alignment,
            bytes: manifest.bytes(),
            terminal,
            completed_at_ms: now_ms(),
        };
        Ok((stats, savepoint))
    }

    /// Writes the savepoint `flight`, whose manifest is `encoded`, to the savepoint store.
    fn keep_savepoint(
        &self,
        flight: &InFlight,
        encoded: &[u8],
    ) -> Result<Savepoint, SavepointError> {
        let store = self
            .config
            .savepoints
            .as_ref()
            .ok_or(SavepointError::NotConfigured)?;
        let failed = |e: SnapshotError| SavepointError::Failed(e.to_string());
        for (slot, part) in self.slots.iter().zip(&flight.parts) {
            let part = part.as_ref().expect("every instance saved");
            let file = part_file(slot.vertex, &self.vertices[slot.vertex].0, slot.instance);
            store
                .write_part(&self.job, flight.id, &file, &part.bytes)
                .map_err(failed)?;
        }
        store
            .publish(&self.job, flight.id, encoded)
            .map_err(failed)?;
        Ok(Savepoint {
            id: flight.id,
            location: store.location(&self.job, flight.id, ""),
        })
    }
}

impl Coordinator {
    /// Keeps the newest `keep` good snapshots, counting `newest` (just written) and older
    /// ones whose manifest and parts check out ([`super::verify`], read once per snapshot
    /// and remembered); older good ones past `keep`, incomplete ones, and damaged ones (which
    /// no restore could use) go. So a damaged newest snapshot never makes the last good one
    /// go.
    fn retain(&self, newest: u64) -> Result<(), SnapshotError> {
        let store = &self.config.store;
        let keep = self.config.keep.max(1);
        let mut good = 0;
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        for id in store.ids(&self.job)? {
            if id > newest {
                continue;
            }
            let usable = if id == newest || verified.contains(&id) {
                true
            } else {
                match super::verify(&**store, &self.job, id) {
                    Ok(Some(_)) => {
                        verified.insert(id);
                        true
                    }
                    Ok(None) => false,
                    Err(e @ SnapshotError::Corrupt { .. }) => {
                        tracing::warn!(%e, "removing a damaged snapshot");
                        false
                    }
                    Err(SnapshotError::Io { path, source })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        tracing::warn!(path = %path.display(), "removing a snapshot with a missing part");
                        false
                    }
                    Err(e) => return Err(e),
                }
            };
            if usable {
                good += 1;
                if good <= keep {
                    continue;
                }
            }
            verified.remove(&id);
            store.remove(&self.job, id)?;
        }
        Ok(())
    }
}
