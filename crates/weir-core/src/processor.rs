//! The processor contract: a processor is driven, it never drives.
//!
//! A [`Processor`] is a state machine the runtime calls. Each call must do a bounded amount of
//! work and return (about a millisecond at most for a cooperative processor), never block, and
//! be ready to be called again. When the outbox refuses an item the processor stops, keeps its
//! place, and resumes on the next call.
//!
//! ```
//! use weir_core::{Inbox, Outbox, Processor, ProcessorResult};
//!
//! /// Doubles every `u64`.
//! struct Doubler;
//!
//! impl Processor for Doubler {
//!     fn process(&mut self, _ordinal: usize, inbox: &mut Inbox, outbox: &mut Outbox) -> ProcessorResult<()> {
//!         let items = inbox.items::<u64>();
//!         let out = outbox.port::<u64>(0);
//!         while let Some(&x) = items.front() {
//!             if out.offer(x * 2).is_err() {
//!                 break; // full: leave x in the inbox, we are called again later
//!             }
//!             items.pop_front();
//!         }
//!         Ok(())
//!     }
//! }
//!
//! weir_core::test_support::verify_processor(|_| Doubler)
//!     .input(vec![1u64, 2, 3])
//!     .expect_output(vec![2u64, 4, 6]);
//! ```
//!
//! # Call sequence
//!
//! `init`, then any interleaving of `process` (inbox non-empty), `try_process` (inbox empty),
//! `try_process_watermark` and `complete_edge` (an input finished), then `complete` until it
//! returns true, then `close`. Inputs are drained by priority: every input of the lowest
//! priority value finishes before the next priority is read.

use std::sync::{Arc, OnceLock};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use crate::error::ProcessorResult;
use crate::inbox::Inbox;
use crate::job_watch::JobWatch;
use crate::metrics::InstanceMetrics;
use crate::outbox::Outbox;
use crate::park::Parker;
use crate::snapshot::{Guarantee, SnapshotEntry, SnapshotHold, SnapshotHolds, SnapshotWriter};
use crate::watermark::Watermark;

/// A unit of computation driven by a tasklet. See the [module docs](self).
///
/// Every hook returns `Err` to fail the job: the error is reported with the vertex and
/// instance. A panic is caught and reported the same way; it never takes the process down.
pub trait Processor: Send + 'static {
    /// Called once before anything else, on the thread that submits the job.
    fn init(&mut self, _ctx: &ProcessorContext) -> ProcessorResult<()> {
        Ok(())
    }

    /// Processes items from `inbox`, which holds items of input `ordinal`. May leave items in
    /// the inbox (when the outbox is full); they are offered again on the next call.
    ///
    /// Must return promptly and never block.
    fn process(
        &mut self,
        _ordinal: usize,
        _inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        Ok(())
    }

    /// Called when the inbox is empty: for work that needs no input. Returns true when it
    /// has nothing more to do right now.
    fn try_process(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(true)
    }

    /// The coalesced input watermark advanced to `wm`. Returns true when done with it; false
    /// to be called again with the same watermark (for example when the outbox is full).
    /// The default forwards it to every output.
    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        Ok(outbox.offer_watermark(wm))
    }

    /// Every input went idle (its producers have no data for now) and everything that arrived
    /// before was processed. Returns true when done; false to be called again while the
    /// inputs stay idle. The default tells every output, through
    /// [`Outbox::offer_idle`], so that consumers stop waiting for this one's watermark. A
    /// processor that holds results back (a backlog, frames not yet sent, calls in flight)
    /// sends them first, or returns false until it has.
    fn try_process_idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(outbox.offer_idle())
    }

    /// Input `ordinal` is exhausted and its items were all processed. Returns true when done;
    /// false to be called again.
    fn complete_edge(&mut self, _ordinal: usize, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(true)
    }

    /// Every input is exhausted. A source emits its items here. Returns true when finished;
    /// false to be called again.
    fn complete(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(true)
    }

    /// Whether this processor honours the cooperative contract. A non-cooperative one (it
    /// blocks: synchronous I/O, a file write) gets a thread of its own.
    fn is_cooperative(&self) -> bool {
        true
    }

    /// When this instance needs its next call if no input arrives: asked when a call made
    /// no progress, so that an idle worker can park for as long as its tasklets allow. Input
    /// arriving, room freeing downstream and its [`TaskletWaker`] wake the worker anyway.
    ///
    /// The default, [`NextCall::Poll`], is right for anything that watches the world outside
    /// the job without a waker; work that depends only on input (and on watermarks, which
    /// are input) answers [`NextCall::OnWake`], and work due at a time (a paced source, a
    /// timeout) [`NextCall::At`]. Backlogs need no answer here: while a call leaves items in
    /// the inbox, a watermark pending or [`try_process`](Self::try_process) unfinished, the
    /// runtime polls.
    ///
    /// Must be cheap: it is asked once per park of the worker.
    fn next_call(&self) -> NextCall {
        NextCall::Poll
    }

    /// Phase 1 of a snapshot: saves this processor's state, and a transactional sink
    /// prepares what it wrote since the last snapshot (without making it visible). Returns
    /// true when done; false to be called again (for example while a backlog is still going
    /// out through `outbox`: everything emitted before the barrier must leave first).
    ///
    /// Called between two other calls, once every input delivered the snapshot's barrier
    /// (for a source: when the snapshot is asked for), and once more, after
    /// [`complete`](Self::complete), for the processor's final state.
    fn save_to_snapshot(
        &mut self,
        _outbox: &mut Outbox,
        _writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        Ok(true)
    }

    /// Phase 2 of a snapshot: the snapshot is durable (`success`), so what was prepared in
    /// phase 1 becomes visible. Also called after a restore, for the restored snapshot: a
    /// commit must be idempotent. Returns true when done; false to be called again.
    fn snapshot_commit_finish(&mut self, _success: bool) -> ProcessorResult<bool> {
        Ok(true)
    }

    /// Restores state saved by [`save_to_snapshot`](Self::save_to_snapshot), after `init` and
    /// before any input. See [`SnapshotEntry::partition`] for which entries an instance gets.
    fn restore_from_snapshot(&mut self, _entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        Ok(())
    }

    /// Called once when the processor is dropped from the job, whether it finished or not.
    fn close(&mut self) -> ProcessorResult<()> {
        Ok(())
    }
}

/// When a waiting processor instance needs its next call ([`Processor::next_call`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextCall {
    /// Soon: within the worker's shortest pause (at most a millisecond). For an instance
    /// that polls something with no way to wake it.
    Poll,
    /// By this instant, or sooner when input arrives or it is woken.
    At(Instant),
    /// Only when input arrives, room frees downstream or its [`TaskletWaker`] is woken. The
    /// runtime still looks in now and then (a heartbeat, 50 ms by default:
    /// [`ExecutorConfig::heartbeat`](crate::ExecutorConfig::heartbeat)), which bounds how
    /// long a job that waits for input takes to see a cancellation or a snapshot.
    OnWake,
}

impl NextCall {
    /// The earlier of two: `Poll` before any instant, any instant before `OnWake`.
    pub fn earliest(self, other: NextCall) -> NextCall {
        match (self, other) {
            (NextCall::Poll, _) | (_, NextCall::Poll) => NextCall::Poll,
            (NextCall::At(a), NextCall::At(b)) => NextCall::At(a.min(b)),
            (NextCall::At(a), NextCall::OnWake) | (NextCall::OnWake, NextCall::At(a)) => {
                NextCall::At(a)
            }
            (NextCall::OnWake, NextCall::OnWake) => NextCall::OnWake,
        }
    }
}

impl Processor for Box<dyn Processor> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        (**self).init(ctx)
    }
    fn process(
        &mut self,
        ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        (**self).process(ordinal, inbox, outbox)
    }
    fn try_process(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        (**self).try_process(outbox)
    }
    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        (**self).try_process_watermark(wm, outbox)
    }
    fn try_process_idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        (**self).try_process_idle(outbox)
    }
    fn complete_edge(&mut self, ordinal: usize, outbox: &mut Outbox) -> ProcessorResult<bool> {
        (**self).complete_edge(ordinal, outbox)
    }
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        (**self).complete(outbox)
    }
    fn is_cooperative(&self) -> bool {
        (**self).is_cooperative()
    }
    fn next_call(&self) -> NextCall {
        (**self).next_call()
    }
    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        (**self).save_to_snapshot(outbox, writer)
    }
    fn snapshot_commit_finish(&mut self, success: bool) -> ProcessorResult<bool> {
        (**self).snapshot_commit_finish(success)
    }
    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        (**self).restore_from_snapshot(entries)
    }
    fn close(&mut self) -> ProcessorResult<()> {
        (**self).close()
    }
}

/// Wakes the thread that runs one processor instance, so that the instance is called again
/// soon: for work that finishes on another thread, such as an async reply.
///
/// A processor that waits for something outside its inbox reports no progress, and its
/// worker backs off, parking for up to a millisecond. Calling [`wake`](Self::wake) when the
/// awaited thing arrives cuts that pause short. Waking is only a hint: a processor must still
/// find its work by polling, and a wake may come before the instance runs anywhere (then it
/// does nothing) or when its thread is busy (then the thread's next pause is skipped).
///
/// ```
/// use weir_core::ProcessorContext;
///
/// let ctx = ProcessorContext::new("v", 0, 1, 0);
/// let waker = ctx.waker().clone(); // Send + Sync: hand it to the thread that completes work
/// std::thread::spawn(move || waker.wake()).join().unwrap();
/// ```
///
/// Cost: two atomic writes and, when the thread is parked, one futex wake.
#[derive(Debug, Clone, Default)]
pub struct TaskletWaker {
    target: Arc<WakeTarget>,
}

#[derive(Debug, Default)]
struct WakeTarget {
    parker: OnceLock<Arc<Parker>>,
}

impl Wake for WakeTarget {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(p) = self.parker.get() {
            p.wake();
        }
    }
}

impl TaskletWaker {
    /// Asks for the instance to be called soon. Never blocks.
    #[inline]
    pub fn wake(&self) {
        self.target.wake_by_ref();
    }

    /// The same, as a [`Waker`] for polling futures and streams on the instance's thread.
    pub fn to_waker(&self) -> Waker {
        Waker::from(Arc::clone(&self.target))
    }

    /// Wakes the instance's thread only if it is about to park or parked: what a tasklet
    /// does for the instances at the other ends of its conveyors after moving items, once
    /// it has called [`fence_before_nudges`](crate::park::fence_before_nudges).
    ///
    /// Cost: one load, and a wake only for a thread that is parking.
    #[inline]
    pub(crate) fn nudge(&self) {
        if let Some(p) = self.target.parker.get() {
            p.nudge();
        }
    }

    /// Binds the waker to the parker of the thread that runs the instance; later binds are
    /// ignored.
    pub(crate) fn bind(&self, parker: Arc<Parker>) {
        let _ = self.target.parker.set(parker);
    }
}

/// What a processor learns about its place in the job.
#[derive(Debug, Clone)]
pub struct ProcessorContext {
    vertex: Arc<str>,
    global_index: usize,
    local_index: usize,
    local_parallelism: usize,
    total_parallelism: usize,
    metrics: Arc<InstanceMetrics>,
    waker: TaskletWaker,
    idle_timeout: Duration,
    job: JobWatch,
    guarantee: Guarantee,
    holds: SnapshotHolds,
}

impl ProcessorContext {
    /// A context; the runtime builds these, tests may too.
    pub fn new(vertex: &str, local_index: usize, local_parallelism: usize, inputs: usize) -> Self {
        let vertex: Arc<str> = Arc::from(vertex);
        let metrics = Arc::new(InstanceMetrics::new(
            Arc::clone(&vertex),
            local_index,
            inputs,
        ));
        ProcessorContext {
            vertex,
            global_index: local_index,
            local_index,
            local_parallelism,
            total_parallelism: local_parallelism,
            metrics,
            waker: TaskletWaker::default(),
            idle_timeout: crate::job_watch::DEFAULT_IDLE_TIMEOUT,
            job: JobWatch::default(),
            guarantee: Guarantee::None,
            holds: SnapshotHolds::default(),
        }
    }

    /// The same context, in a job that takes snapshots with `guarantee` (tests).
    pub fn with_guarantee(mut self, guarantee: Guarantee) -> Self {
        self.guarantee = guarantee;
        self
    }

    pub(crate) fn for_instance(
        vertex: Arc<str>,
        (local_index, local_parallelism): (usize, usize),
        (metrics, waker): (Arc<InstanceMetrics>, TaskletWaker),
        (idle_timeout, job): (Duration, JobWatch),
        (guarantee, holds): (Guarantee, SnapshotHolds),
    ) -> Self {
        ProcessorContext {
            vertex,
            global_index: local_index,
            local_index,
            local_parallelism,
            total_parallelism: local_parallelism,
            metrics,
            waker,
            idle_timeout,
            job,
            guarantee,
            holds,
        }
    }

    pub(crate) fn vertex_arc(&self) -> Arc<str> {
        Arc::clone(&self.vertex)
    }

    /// The vertex name.
    pub fn vertex(&self) -> &str {
        &self.vertex
    }

    /// This instance's index among all instances of the vertex in the job (all members).
    pub fn global_index(&self) -> usize {
        self.global_index
    }

    /// This instance's index among the vertex's instances on this member.
    pub fn local_index(&self) -> usize {
        self.local_index
    }

    /// The vertex's instance count on this member.
    pub fn local_parallelism(&self) -> usize {
        self.local_parallelism
    }

    /// The vertex's instance count in the whole job.
    pub fn total_parallelism(&self) -> usize {
        self.total_parallelism
    }

    /// This instance's metrics; register custom counters here.
    pub fn metrics(&self) -> &Arc<InstanceMetrics> {
        &self.metrics
    }

    /// Wakes the thread that runs this instance. See [`TaskletWaker`]; in a context made
    /// with [`new`](Self::new) (tests), waking does nothing.
    pub fn waker(&self) -> &TaskletWaker {
        &self.waker
    }

    /// How long a source of this job may read nothing before it declares itself idle and
    /// stops holding its consumers' watermark back ([`JobConfig::idle_timeout`]).
    ///
    /// [`JobConfig::idle_timeout`]: crate::JobConfig::idle_timeout
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// What the job's snapshots guarantee: [`Guarantee::None`] when it takes none. A sink
    /// that commits in phase 2 only does so when this is not `None`; otherwise it makes its
    /// output visible when it completes.
    pub fn guarantee(&self) -> Guarantee {
        self.guarantee
    }

    /// Holds the job's snapshots back while the returned guard lives: for a stage that keeps
    /// state it cannot save (see [`SnapshotHolds`]). Does nothing in a job without snapshots.
    pub fn hold_snapshots(&self) -> SnapshotHold {
        self.holds.hold()
    }

    /// A view of how this instance's job ends. In a context made with [`new`](Self::new)
    /// (tests), the job never ends.
    pub fn job_watch(&self) -> &JobWatch {
        &self.job
    }

    /// The name of this instance's job, for logs (`job` beside `vertex`): empty in a context
    /// made with [`new`](Self::new).
    pub fn job_name(&self) -> &str {
        self.job.job_name()
    }
}

/// Creates the processor instances of a vertex: called once per instance, at submission.
pub trait ProcessorSupplier: Send + Sync + 'static {
    /// A new processor for the instance described by `ctx`.
    fn create(&self, ctx: &ProcessorContext) -> Box<dyn Processor>;
}

impl<F, P> ProcessorSupplier for F
where
    F: Fn(&ProcessorContext) -> P + Send + Sync + 'static,
    P: Processor,
{
    fn create(&self, ctx: &ProcessorContext) -> Box<dyn Processor> {
        Box::new(self(ctx))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_bound_waker_unparks_its_thread_and_an_unbound_one_does_nothing() {
        let unbound = TaskletWaker::default();
        unbound.wake();
        unbound.to_waker().wake_by_ref();

        let (ready_tx, ready_rx) = mpsc::channel();
        let (woke_tx, woke_rx) = mpsc::channel();
        let parked = std::thread::spawn(move || {
            ready_tx.send(()).unwrap();
            // Spurious returns aside, only the wake below ends this park.
            std::thread::park();
            woke_tx.send(()).unwrap();
        });
        let waker = TaskletWaker::default();
        let parker = Arc::new(Parker::new());
        parker.bind(parked.thread().clone());
        waker.bind(parker);
        ready_rx.recv().unwrap();
        waker.to_waker().wake();
        woke_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the parked thread woke");
        parked.join().unwrap();
    }
}
