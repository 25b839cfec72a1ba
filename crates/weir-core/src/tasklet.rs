//! Tasklets: what a worker thread calls.
//!
//! A `ProcessorTasklet` wraps one processor instance with its inbound streams (one per input
//! ordinal, each over the conveyors from every upstream instance), its inboxes and its outbox.
//! Each `call` does a bounded slice of work and reports
//! [`Progress`]; the worker uses that to decide when to back off.
//!
//! The life of a tasklet: *running* (feed inboxes by priority, call `process`,
//! `try_process_watermark`, `complete_edge`, `try_process`), then *completing* (`complete`
//! until true), then *emitting done* (a done marker on every outbound conveyor), then
//! *finished*.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::ProcessorResult;
use crate::inbox::Inbox;
use crate::metrics::InstanceMetrics;
use crate::outbox::Outbox;
use crate::park::{Parker, fence_before_nudges};
use crate::processor::{NextCall, Processor, ProcessorContext, TaskletWaker};
use crate::snapshot::coordinator::{Coordinator, EncodedPart};
use crate::snapshot::{Guarantee, SnapshotEntry, SnapshotWriter};
use crate::watermark::{SourceTime, Watermark, WatermarkCoalescer};

use crate::inbound::InboundStream;

/// What one tasklet call achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Nothing moved: no input taken, nothing emitted, no state change.
    NoProgress,
    /// Something moved; call again soon.
    MadeProgress,
    /// Finished; never call again.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Completing,
    /// Saving the final state, which stands in for the instance in later snapshots.
    SavingFinal,
    EmittingDone,
    /// Waiting for the terminal snapshot to be durable, then committing.
    AwaitingTerminal,
    Finished,
}

/// A tasklet's part in its job's snapshots. See [`crate::snapshot`].
pub(crate) struct SnapshotDuty {
    coordinator: Arc<Coordinator>,
    slot: usize,
    exactly_once: bool,
    /// The newest snapshot this instance saved (phase 1).
    saved: u64,
    /// The newest snapshot committed here (phase 2).
    committed: u64,
    /// The snapshot being saved, and whether its part went to the coordinator (then only
    /// the barrier is left to send).
    saving: Option<(u64, bool)>,
    writer: SnapshotWriter,
    /// When a barrier newer than `saved` first arrived on some input.
    aligning_since: Option<Instant>,
    /// Whether this instance holds the coordinator back until its build-side inputs complete.
    gate: bool,
}

impl SnapshotDuty {
    /// The duty of tasklet `slot`, resuming after snapshot `restored` (0: a fresh start).
    pub(crate) fn new(coordinator: Arc<Coordinator>, slot: usize, restored: u64) -> Self {
        let exactly_once = coordinator.guarantee() == Guarantee::ExactlyOnce;
        SnapshotDuty {
            coordinator,
            slot,
            exactly_once,
            saved: restored,
            committed: restored,
            saving: None,
            writer: SnapshotWriter::new(),
            aligning_since: None,
            gate: false,
        }
    }

    fn open_gate(&mut self) {
        if std::mem::take(&mut self.gate) {
            self.coordinator.open_gate();
        }
    }

    /// Encodes what the writer collected.
    fn take_part(&mut self) -> EncodedPart {
        let entries = std::mem::take(&mut self.writer).into_entries();
        EncodedPart {
            bytes: crate::snapshot::encode_part(&entries),
            entries: entries.len() as u64,
        }
    }
}

/// One processor instance and everything around it.
pub(crate) struct ProcessorTasklet {
    /// The job, for its name in logs.
    job: crate::job_watch::JobWatch,
    vertex: Arc<str>,
    instance: usize,
    processor: Box<dyn Processor>,
    /// Sorted by (priority, ordinal).
    streams: Vec<Box<dyn InboundStream>>,
    /// Indexed by input ordinal.
    inboxes: Vec<Inbox>,
    edge_completed: Vec<bool>,
    outbox: Outbox,
    coalescer: WatermarkCoalescer,
    /// A coalesced watermark still to hand the processor, with its source time.
    pending_watermark: Option<(Watermark, SourceTime)>,
    /// The stream whose inbox holds items not yet processed.
    active: Option<usize>,
    next_stream: usize,
    state: State,
    inbox_limit: usize,
    /// Set once the processor told its consumers it is idle: the outbox's accepted total at
    /// that moment. Anything emitted since, or any input activity, makes it stale.
    idle_forwarded_at: Option<u64>,
    metrics: Arc<InstanceMetrics>,
    waker: TaskletWaker,
    /// The instances at the other ends of this one's conveyors, producers and consumers:
    /// nudged after a call that moved anything, so that one parked for want of input (or of
    /// room) wakes as soon as it has some.
    peers: Vec<TaskletWaker>,
    cooperative: bool,
    closed: bool,
    /// The last call left nothing for the processor to finish without new input: the inbox
    /// empty, no watermark pending, `try_process` done and idleness passed on. Only then
    /// does the processor's [`Processor::next_call`] count.
    settled: bool,
    snapshots: Option<SnapshotDuty>,
    /// The start of the last call, when a full downstream queue refused an item in it: the
    /// instance is backpressured from then until its next call.
    blocked_since: Option<Instant>,
    /// The outbox's count of offers refused by a full queue, when last looked at.
    blocked_seen: u64,
}

impl ProcessorTasklet {
    pub(crate) fn new(
        ctx: &ProcessorContext,
        processor: Box<dyn Processor>,
        mut streams: Vec<Box<dyn InboundStream>>,
        inboxes: Vec<Inbox>,
        outbox: Outbox,
        inbox_limit: usize,
    ) -> Self {
        let (vertex, instance, metrics, waker) = (
            ctx.vertex_arc(),
            ctx.global_index(),
            Arc::clone(ctx.metrics()),
            ctx.waker().clone(),
        );
        streams.sort_by_key(|s| (s.priority(), s.ordinal()));
        let n = streams.len();
        let cooperative = processor.is_cooperative();
        ProcessorTasklet {
            job: ctx.job_watch().clone(),
            vertex,
            instance,
            processor,
            streams,
            inboxes,
            edge_completed: vec![false; n],
            outbox,
            coalescer: WatermarkCoalescer::new(n),
            pending_watermark: None,
            active: None,
            next_stream: 0,
            state: State::Running,
            inbox_limit: inbox_limit.max(1),
            idle_forwarded_at: None,
            metrics,
            waker,
            peers: Vec::new(),
            cooperative,
            closed: false,
            settled: false,
            snapshots: None,
            blocked_since: None,
            blocked_seen: 0,
        }
    }

    /// Makes this tasklet take part in its job's snapshots. An instance with build-side
    /// (lower priority) inputs holds snapshots back until they complete.
    pub(crate) fn take_part_in_snapshots(&mut self, mut duty: SnapshotDuty) {
        let priorities = || self.streams.iter().map(|s| s.priority());
        if priorities().min() != priorities().max() {
            duty.gate = true;
            duty.coordinator.close_gate();
        }
        let hold = duty.exactly_once.then_some(duty.saved);
        for s in &mut self.streams {
            s.hold_above(hold);
        }
        self.snapshots = Some(duty);
    }

    /// Restores the processor from `entries` and commits the restored snapshot again
    /// (phase 2 is idempotent), before the tasklet first runs.
    ///
    /// # Errors
    /// The processor's own restore or commit error.
    pub(crate) fn restore(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        self.processor.restore_from_snapshot(entries)?;
        // A commit that asks to be called again is retried here: nothing else runs yet.
        for _ in 0..1_000_000 {
            if self.processor.snapshot_commit_finish(true)? {
                return Ok(());
            }
            std::thread::yield_now();
        }
        Err("snapshot_commit_finish() after a restore never returned true".into())
    }

    /// Binds the processor's [`TaskletWaker`] to the parker of the thread that will call
    /// this tasklet.
    pub(crate) fn bind_waker(&self, parker: Arc<Parker>) {
        self.waker.bind(parker);
    }

    /// Sets the wakers of the instances at the other ends of this one's conveyors.
    pub(crate) fn set_peers(&mut self, peers: Vec<TaskletWaker>) {
        self.peers = peers;
    }

    pub(crate) fn vertex(&self) -> &Arc<str> {
        &self.vertex
    }

    pub(crate) fn instance(&self) -> usize {
        self.instance
    }

    /// The name of the tasklet's job.
    pub(crate) fn job_name(&self) -> &str {
        self.job.job_name()
    }

    pub(crate) fn is_cooperative(&self) -> bool {
        self.cooperative
    }

    /// Does one bounded slice of work.
    pub(crate) fn call(&mut self) -> ProcessorResult<Progress> {
        let started = Instant::now();
        let backpressured = self
            .blocked_since
            .take()
            .map_or(Duration::ZERO, |since| started - since);
        let out_before = self.outbox.accepted_total();
        let refused_before = self.outbox.refused_total();
        self.outbox.begin_call();
        self.settled = false;
        let mut items_in = 0u64;
        let progress = if let Some(progress) = self.snapshot_step()? {
            progress
        } else {
            match self.state {
                State::Running => self.run_inputs(&mut items_in)?,
                State::Completing => {
                    if self.processor.complete(&mut self.outbox)? {
                        self.state = if self.snapshots.is_some() {
                            State::SavingFinal
                        } else {
                            State::EmittingDone
                        };
                        true
                    } else {
                        false
                    }
                }
                State::SavingFinal => self.save_final()?,
                State::EmittingDone => {
                    // A full downstream queue is not progress: let the worker back off.
                    let sent = self.outbox.offer_done();
                    if sent {
                        self.state = if self.snapshots.is_some() {
                            State::AwaitingTerminal
                        } else {
                            State::Finished
                        };
                    }
                    sent
                }
                State::AwaitingTerminal => self.commit_terminal()?,
                State::Finished => return Ok(Progress::Done),
            }
        };
        let emitted = self.outbox.accepted_total() - out_before;
        let progress = progress || self.outbox.progress_in_call();
        for s in &self.streams {
            self.metrics.record_queue_fill(s.ordinal(), s.fill());
        }
        let refused = self.outbox.refused_total() - refused_before;
        self.metrics.record_call(
            items_in,
            emitted,
            refused,
            started.elapsed(),
            progress,
            backpressured,
        );
        // Only a refused offer can be a full queue's: look closer only then.
        if refused > 0 {
            let blocked = self.outbox.blocked_total();
            if blocked != self.blocked_seen {
                self.blocked_seen = blocked;
                self.blocked_since = Some(started);
            }
        }
        // Items, markers or room moved: whoever waits on the other end of a conveyor may be
        // parking. A tasklet without inputs frees no room, so only what it sent concerns its
        // peers: a source that read into an accumulator, or sent a watermark the throttle
        // held back, wakes no consumer's worker.
        if progress && (!self.streams.is_empty() || self.outbox.sent_in_call()) {
            fence_before_nudges();
            for peer in &self.peers {
                peer.nudge();
            }
        }
        Ok(match (self.state, progress) {
            (State::Finished, _) => Progress::Done,
            (_, true) => Progress::MadeProgress,
            (_, false) => Progress::NoProgress,
        })
    }

    /// The snapshot work due in this call, before anything else: phase 2 of a snapshot that
    /// became durable, then phase 1 of the one asked for, once this instance's inputs have
    /// all delivered its barrier (a source, or an instance whose inputs all finished: as soon
    /// as it is asked for). `Some(progress)` when the call was spent on it.
    fn snapshot_step(&mut self) -> ProcessorResult<Option<bool>> {
        let Some(duty) = self.snapshots.as_mut() else {
            return Ok(None);
        };
        if !matches!(self.state, State::Running | State::Completing) {
            // A finishing instance's final state stands in for it from now on.
            return Ok(None);
        }
        // `requested` first: a snapshot is asked for only after the one before it committed.
        let requested = duty.coordinator.requested();
        let committed = duty.coordinator.committed();
        if committed > duty.committed && duty.saving.is_none() {
            if !self.processor.snapshot_commit_finish(true)? {
                return Ok(Some(false));
            }
            duty.committed = committed;
            self.outbox.report_progress();
        }
        if let Some((id, _)) = duty.saving {
            return self.continue_save(id).map(Some);
        }
        if requested <= duty.saved {
            return Ok(None);
        }
        let open = self
            .streams
            .iter()
            .zip(&self.edge_completed)
            .filter(|(s, completed)| !**completed && !s.is_done())
            .map(|(s, _)| s);
        // Items drained before the barrier (or before an input's end) are processed first,
        // even when every input has finished: a finished input's last items may still wait
        // in the inbox, and a snapshot saved without them would lose them, since the
        // finished producer's final state stands in for it from now on.
        let mut level = u64::MAX;
        let mut arrived = false;
        for s in open {
            level = level.min(s.barrier_level());
            arrived |= s.newest_barrier() > duty.saved;
        }
        if arrived && duty.aligning_since.is_none() {
            duty.aligning_since = Some(Instant::now());
        }
        let aligned =
            level >= requested && self.active.is_none() && self.pending_watermark.is_none();
        if !aligned {
            return Ok(None);
        }
        duty.saving = Some((requested, false));
        self.continue_save(requested).map(Some)
    }

    /// Phase 1 of snapshot `id`, resumable: the processor saves (it may first have to send its
    /// backlog), the part goes to the coordinator, then the barrier to every consumer.
    fn continue_save(&mut self, id: u64) -> ProcessorResult<bool> {
        let duty = self.snapshots.as_mut().expect("called with a duty");
        if duty.saving == Some((id, false)) {
            if !self
                .processor
                .save_to_snapshot(&mut self.outbox, &mut duty.writer)?
            {
                return Ok(self.outbox.progress_in_call());
            }
            let part = duty.take_part();
            let alignment = duty
                .aligning_since
                .take()
                .map_or(Duration::ZERO, |t| t.elapsed());
            duty.coordinator.saved(duty.slot, id, part, alignment);
            duty.saving = Some((id, true));
        }
        if !self.outbox.offer_barrier(id) {
            return Ok(true);
        }
        duty.saving = None;
        duty.saved = id;
        if duty.exactly_once {
            for s in &mut self.streams {
                s.hold_above(Some(id));
            }
        }
        Ok(true)
    }

    /// Saves the final state after `complete`; it stands in for this instance in every
    /// later snapshot.
    fn save_final(&mut self) -> ProcessorResult<bool> {
        let duty = self.snapshots.as_mut().expect("called with a duty");
        if !self
            .processor
            .save_to_snapshot(&mut self.outbox, &mut duty.writer)?
        {
            return Ok(self.outbox.progress_in_call());
        }
        let part = duty.take_part();
        duty.coordinator.finished(duty.slot, part);
        duty.open_gate();
        self.state = State::EmittingDone;
        Ok(true)
    }

    /// Commits once the terminal snapshot is durable, then finishes.
    fn commit_terminal(&mut self) -> ProcessorResult<bool> {
        let duty = self.snapshots.as_mut().expect("called with a duty");
        if !duty.coordinator.terminal_committed() {
            return Ok(false);
        }
        if self.processor.snapshot_commit_finish(true)? {
            self.state = State::Finished;
            return Ok(true);
        }
        Ok(false)
    }

    fn process_active(&mut self) -> ProcessorResult<(bool, bool)> {
        let Some(s) = self.active else {
            return Ok((false, true));
        };
        let ordinal = self.streams[s].ordinal();
        let inbox = &mut self.inboxes[ordinal];
        let before = inbox.len();
        self.processor.process(ordinal, inbox, &mut self.outbox)?;
        let after = inbox.len();
        if after == 0 {
            self.active = None;
        }
        Ok((after < before, after == 0))
    }

    fn run_inputs(&mut self, items_in: &mut u64) -> ProcessorResult<bool> {
        // 1. Items already in an inbox come first.
        let (mut progress, drained) = self.process_active()?;
        if !drained {
            return Ok(progress);
        }
        // 2. A watermark goes out after the items that arrived before it.
        if let Some((wm, source_time)) = self.pending_watermark {
            self.outbox.set_forwarding(Some(source_time));
            let processed = self.processor.try_process_watermark(wm, &mut self.outbox);
            self.outbox.set_forwarding(None);
            if !processed? {
                return Ok(progress);
            }
            self.metrics.record_watermark(wm.timestamp());
            if self.outbox.is_terminal() && wm != Watermark::MAX {
                // Every result of the windows this watermark closed came before it.
                self.metrics.record_window_latency(source_time.elapsed());
            }
            self.pending_watermark = None;
            self.idle_forwarded_at = None;
            progress = true;
        }
        // 3. Finished inputs, all of whose items are processed.
        for s in 0..self.streams.len() {
            if self.streams[s].is_done() && !self.edge_completed[s] {
                let ordinal = self.streams[s].ordinal();
                if !self.processor.complete_edge(ordinal, &mut self.outbox)? {
                    return Ok(progress);
                }
                self.edge_completed[s] = true;
                progress = true;
            }
        }
        // 4. Work that needs no input.
        let caught_up = self.processor.try_process(&mut self.outbox)?;
        // 5. Refill from the lowest priority still open, fairly among its streams.
        let Some(priority) = self
            .streams
            .iter()
            .zip(&self.edge_completed)
            .filter(|(_, completed)| !**completed)
            .map(|(s, _)| s.priority())
            .min()
        else {
            self.state = State::Completing;
            return Ok(true);
        };
        if let Some(duty) = self.snapshots.as_mut()
            && duty.gate
            && self.streams.iter().all(|s| s.priority() <= priority)
        {
            duty.open_gate();
        }
        let n = self.streams.len();
        for k in 0..n {
            let s = (self.next_stream + k) % n;
            let stream = &mut self.streams[s];
            if stream.priority() != priority || stream.is_done() {
                continue;
            }
            let ordinal = stream.ordinal();
            let d = stream.drain_into(&mut self.inboxes[ordinal], self.inbox_limit);
            let idle = stream.is_idle();
            if d.items > 0 || d.watermark.is_some() || d.finished {
                progress = true;
                self.idle_forwarded_at = None;
            }
            let mut advanced = if idle {
                self.coalescer
                    .queue_idle(s)
                    .map(|wm| (wm, SourceTime::now()))
            } else {
                self.coalescer.activate(s);
                None
            };
            if let Some((wm, source_time)) = d.watermark {
                advanced = self
                    .coalescer
                    .observe(s, wm)
                    .map(|wm| (wm, source_time))
                    .or(advanced);
            }
            if d.finished {
                advanced = self
                    .coalescer
                    .queue_done(s)
                    .map(|wm| (wm, SourceTime::now()))
                    .or(advanced);
            }
            if let Some(wm) = advanced {
                self.pending_watermark = Some(wm);
            }
            if d.items > 0 {
                *items_in += d.items as u64;
                self.active = Some(s);
                self.next_stream = (s + 1) % n;
                break;
            }
            if self.pending_watermark.is_some() {
                // The watermark goes out before anything drained after it.
                break;
            }
        }
        // 6. Process what just arrived without waiting for the next call.
        if self.active.is_some() {
            let (processed, _) = self.process_active()?;
            progress |= processed;
        }
        // 7. Every input idle, and everything before processed: tell the consumers, once.
        if self.active.is_none()
            && self.pending_watermark.is_none()
            && self.idle_forwarded_at != Some(self.outbox.accepted_total())
            && self.inputs_idle()
            && self.processor.try_process_idle(&mut self.outbox)?
        {
            self.idle_forwarded_at = Some(self.outbox.accepted_total());
            progress = true;
        }
        self.settled = caught_up
            && self.active.is_none()
            && self.pending_watermark.is_none()
            && (self.idle_forwarded_at == Some(self.outbox.accepted_total())
                || !self.inputs_idle());
        Ok(progress)
    }

    /// When this instance needs its next call if no input arrives (see
    /// [`Processor::next_call`]): the processor's answer once the last call left it settled,
    /// or, for a source, while it completes (a source's work is its `complete`). Anything
    /// else in flight (a backlog, a snapshot step, the end of the job) is polled.
    pub(crate) fn next_call(&self) -> NextCall {
        match self.state {
            State::Running if self.settled && !self.snapshot_in_flight() => {
                self.processor.next_call()
            }
            State::Completing if self.streams.is_empty() && !self.snapshot_in_flight() => {
                self.processor.next_call()
            }
            State::Finished => NextCall::OnWake,
            _ => NextCall::Poll,
        }
    }

    /// Whether a snapshot is under way here: a save, an alignment, or phase 2 still to come.
    /// Short-lived, and moved on by the coordinator, which wakes no one: polled.
    fn snapshot_in_flight(&self) -> bool {
        self.snapshots.as_ref().is_some_and(|d| {
            d.saving.is_some() || d.aligning_since.is_some() || d.saved > d.committed
        })
    }

    /// Whether the processor has inputs, and every unfinished one is idle.
    fn inputs_idle(&self) -> bool {
        let mut open = self
            .streams
            .iter()
            .zip(&self.edge_completed)
            .filter(|(s, completed)| !**completed && !s.is_done())
            .peekable();
        open.peek().is_some() && open.all(|(s, _)| s.is_idle())
    }

    /// Closes the processor once. Later calls return `Ok`.
    ///
    /// # Errors
    /// The processor's own `close` error; the executor fails the job with it.
    pub(crate) fn close(&mut self) -> ProcessorResult<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        if let Some(duty) = self.snapshots.as_mut() {
            duty.open_gate();
        }
        self.processor.close()
    }
}

impl Drop for ProcessorTasklet {
    fn drop(&mut self) {
        // The executor closes every tasklet before dropping it and reports the outcome; this
        // only covers a tasklet dropped without running (a job refused at submission).
        if let Err(e) = self.close() {
            tracing::warn!(job = self.job_name(), vertex = %self.vertex, instance = self.instance, error = %e, "processor close failed");
        }
    }
}
