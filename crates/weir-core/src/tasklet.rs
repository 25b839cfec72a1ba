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

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::conveyor::{Receiver, Signal};
use crate::error::ProcessorResult;
use crate::inbox::Inbox;
use crate::item::Item;
use crate::metrics::InstanceMetrics;
use crate::outbox::Outbox;
use crate::processor::{Processor, ProcessorContext, TaskletWaker};
use crate::watermark::{Watermark, WatermarkCoalescer};

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

/// The outcome of one drain of an inbound stream.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamDrain {
    pub items: usize,
    /// The stream's coalesced watermark advanced to this.
    pub watermark: Option<Watermark>,
    /// The stream finished during this drain.
    pub finished: bool,
}

/// The input side of one ordinal, without its item type.
pub(crate) trait InboundStream: Send {
    fn ordinal(&self) -> usize;
    fn priority(&self) -> i32;
    fn is_done(&self) -> bool;
    /// Moves up to `limit` items into `inbox`, visiting the upstream queues fairly. `now` dates
    /// the activity of the queues that delivered something.
    fn drain_into(&mut self, inbox: &mut Inbox, limit: usize, now: Instant) -> StreamDrain;
    /// Marks the queues that delivered nothing for `timeout` idle. Returns the stream's
    /// coalesced watermark if that advanced it.
    fn check_idle(&mut self, now: Instant, timeout: Duration) -> Option<Watermark>;
    /// Whether every unfinished queue is idle.
    fn is_idle(&self) -> bool;
    /// Items waiting in the conveyors right now.
    fn fill(&self) -> usize;
}

/// The conveyors from every upstream instance into one input ordinal.
pub(crate) struct ConveyorStream<T> {
    receivers: Vec<Receiver<T>>,
    done: Vec<bool>,
    live: usize,
    next: usize,
    ordinal: usize,
    priority: i32,
    coalescer: WatermarkCoalescer,
    /// When each queue last delivered anything.
    last_seen: Vec<Instant>,
}

impl<T: Item> ConveyorStream<T> {
    pub(crate) fn new(receivers: Vec<Receiver<T>>, ordinal: usize, priority: i32) -> Self {
        let n = receivers.len();
        ConveyorStream {
            receivers,
            done: vec![false; n],
            live: n,
            next: 0,
            ordinal,
            priority,
            coalescer: WatermarkCoalescer::new(n),
            last_seen: vec![Instant::now(); n],
        }
    }
}

impl<T: Item> InboundStream for ConveyorStream<T> {
    fn ordinal(&self) -> usize {
        self.ordinal
    }
    fn priority(&self) -> i32 {
        self.priority
    }
    fn is_done(&self) -> bool {
        self.live == 0
    }

    fn drain_into(&mut self, inbox: &mut Inbox, limit: usize, now: Instant) -> StreamDrain {
        let mut result = StreamDrain::default();
        if self.live == 0 {
            return result;
        }
        let queue: &mut VecDeque<T> = inbox.items::<T>();
        let n = self.receivers.len();
        // Start one queue later each time, so no upstream instance is favoured.
        let start = self.next;
        self.next = if start + 1 >= n { 0 } else { start + 1 };
        for k in 0..n {
            let i = (start + k) % n;
            if self.done[i] {
                continue;
            }
            loop {
                let room = limit - result.items;
                if room == 0 {
                    break;
                }
                let d = self.receivers[i].drain_into(queue, room);
                result.items += d.items;
                if d.items > 0 || d.signal.is_some() {
                    self.last_seen[i] = now;
                    self.coalescer.activate(i);
                }
                match d.signal {
                    Some(Signal::Watermark(wm)) => {
                        if let Some(advanced) = self.coalescer.observe(i, wm) {
                            result.watermark = Some(advanced);
                        }
                    }
                    Some(Signal::Done) => {
                        self.done[i] = true;
                        self.live -= 1;
                        if let Some(advanced) = self.coalescer.queue_done(i) {
                            result.watermark = Some(advanced);
                        }
                        break;
                    }
                    None => break,
                }
            }
            if result.items >= limit {
                break;
            }
        }
        result.finished = self.live == 0;
        result
    }

    fn fill(&self) -> usize {
        self.receivers.iter().map(Receiver::len).sum()
    }

    fn check_idle(&mut self, now: Instant, timeout: Duration) -> Option<Watermark> {
        let mut advanced = None;
        for i in 0..self.receivers.len() {
            if !self.done[i]
                && !self.coalescer.is_idle(i)
                && now.duration_since(self.last_seen[i]) >= timeout
            {
                advanced = self.coalescer.queue_idle(i).or(advanced);
            }
        }
        advanced
    }

    fn is_idle(&self) -> bool {
        self.live > 0
            && (0..self.receivers.len()).all(|i| self.done[i] || self.coalescer.is_idle(i))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Completing,
    EmittingDone,
    Finished,
}

/// One processor instance and everything around it.
pub(crate) struct ProcessorTasklet {
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
    pending_watermark: Option<Watermark>,
    /// The stream whose inbox holds items not yet processed.
    active: Option<usize>,
    next_stream: usize,
    state: State,
    inbox_limit: usize,
    idle_timeout: Duration,
    last_idle_check: Instant,
    metrics: Arc<InstanceMetrics>,
    waker: TaskletWaker,
    cooperative: bool,
    closed: bool,
}

impl ProcessorTasklet {
    pub(crate) fn new(
        ctx: &ProcessorContext,
        processor: Box<dyn Processor>,
        mut streams: Vec<Box<dyn InboundStream>>,
        inboxes: Vec<Inbox>,
        outbox: Outbox,
        (inbox_limit, idle_timeout): (usize, Duration),
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
            idle_timeout,
            last_idle_check: Instant::now(),
            metrics,
            waker,
            cooperative,
            closed: false,
        }
    }

    /// Binds the processor's [`TaskletWaker`] to the thread that will call this tasklet.
    pub(crate) fn bind_waker(&self, thread: std::thread::Thread) {
        self.waker.bind(thread);
    }

    /// The processor's [`TaskletWaker`].
    pub(crate) fn waker(&self) -> &TaskletWaker {
        &self.waker
    }

    pub(crate) fn vertex(&self) -> &Arc<str> {
        &self.vertex
    }

    pub(crate) fn instance(&self) -> usize {
        self.instance
    }

    pub(crate) fn is_cooperative(&self) -> bool {
        self.cooperative
    }

    /// Does one bounded slice of work.
    pub(crate) fn call(&mut self) -> ProcessorResult<Progress> {
        let started = Instant::now();
        let out_before = self.outbox.accepted_total();
        let refused_before = self.outbox.refused_total();
        self.outbox.begin_call();
        let mut items_in = 0u64;
        let progress = match self.state {
            State::Running => self.run_inputs(&mut items_in, started)?,
            State::Completing => {
                if self.processor.complete(&mut self.outbox)? {
                    self.state = State::EmittingDone;
                    true
                } else {
                    false
                }
            }
            State::EmittingDone => {
                // A full downstream queue is not progress: let the worker back off.
                let sent = self.outbox.offer_done();
                if sent {
                    self.state = State::Finished;
                }
                sent
            }
            State::Finished => return Ok(Progress::Done),
        };
        let emitted = self.outbox.accepted_total() - out_before;
        let progress = progress || self.outbox.progress_in_call();
        for s in &self.streams {
            self.metrics.record_queue_fill(s.ordinal(), s.fill());
        }
        self.metrics.record_call(
            items_in,
            emitted,
            self.outbox.refused_total() - refused_before,
            started.elapsed(),
            progress,
        );
        Ok(match (self.state, progress) {
            (State::Finished, _) => Progress::Done,
            (_, true) => Progress::MadeProgress,
            (_, false) => Progress::NoProgress,
        })
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

    /// Lets inputs that sent nothing for the idle timeout stop holding the watermark back.
    /// Checked a few times per timeout, not on every call.
    fn check_idle_inputs(&mut self, now: Instant) {
        if now.duration_since(self.last_idle_check) < self.idle_timeout / 8 {
            return;
        }
        self.last_idle_check = now;
        for s in 0..self.streams.len() {
            let stream = &mut self.streams[s];
            let mut advanced = stream
                .check_idle(now, self.idle_timeout)
                .and_then(|wm| self.coalescer.observe(s, wm));
            if stream.is_idle() {
                advanced = self.coalescer.queue_idle(s).or(advanced);
            }
            if let Some(wm) = advanced {
                self.pending_watermark = Some(wm);
            }
        }
    }

    fn run_inputs(&mut self, items_in: &mut u64, now: Instant) -> ProcessorResult<bool> {
        self.check_idle_inputs(now);
        // 1. Items already in an inbox come first.
        let (mut progress, drained) = self.process_active()?;
        if !drained {
            return Ok(progress);
        }
        // 2. A watermark goes out after the items that arrived before it.
        if let Some(wm) = self.pending_watermark {
            if !self.processor.try_process_watermark(wm, &mut self.outbox)? {
                return Ok(progress);
            }
            self.pending_watermark = None;
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
        self.processor.try_process(&mut self.outbox)?;
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
        let n = self.streams.len();
        for k in 0..n {
            let s = (self.next_stream + k) % n;
            let stream = &mut self.streams[s];
            if stream.priority() != priority || stream.is_done() {
                continue;
            }
            let ordinal = stream.ordinal();
            let d = stream.drain_into(&mut self.inboxes[ordinal], self.inbox_limit, now);
            if d.items > 0 || d.watermark.is_some() {
                self.coalescer.activate(s);
            }
            if let Some(wm) = d.watermark
                && let Some(advanced) = self.coalescer.observe(s, wm)
            {
                self.pending_watermark = Some(advanced);
            }
            if d.finished {
                progress = true;
                if let Some(advanced) = self.coalescer.queue_done(s) {
                    self.pending_watermark = Some(advanced);
                }
            }
            if d.items > 0 {
                *items_in += d.items as u64;
                self.active = Some(s);
                self.next_stream = (s + 1) % n;
                progress = true;
                break;
            }
            if d.watermark.is_some() {
                progress = true;
            }
        }
        // 6. Process what just arrived without waiting for the next call.
        if self.active.is_some() {
            let (processed, _) = self.process_active()?;
            progress |= processed;
        }
        Ok(progress)
    }

    /// Closes the processor once; errors are logged, not raised, since the job's outcome is
    /// already decided.
    pub(crate) fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        if let Err(e) = self.processor.close() {
            tracing::warn!(vertex = %self.vertex, instance = self.instance, error = %e, "processor close failed");
        }
    }
}

impl Drop for ProcessorTasklet {
    fn drop(&mut self) {
        self.close();
    }
}
