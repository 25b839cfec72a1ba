//! The head processor of an async map vertex: calls a service per item (or per batch) on
//! the shared tokio runtime and emits the results into the fused chain behind it.
//!
//! Each call is a *unit*: one item in `map_async`, a batch in `map_async_batched`. A unit
//! occupies one of `max_units` slots from the moment it is sent until its results are
//! pushed into the chain, so `max_units` (the capacity, or the batched stage's
//! parallelism) bounds what is in flight. A full set of slots stops the processor taking
//! input: the items stay in the inbox, which is backpressure.
//!
//! A unit runs as one task on the shared runtime: the call and its retries. Its outcome comes
//! back through an `mpsc` channel (lock-free, unbounded, but holding at most one message per
//! task) tagged with the slot and the slot's generation, and every hook polls that channel
//! with `try_recv`, never blocking. After sending, the task wakes the instance's thread
//! ([`TaskletWaker`]), so an idle worker does not sleep through its pause first. A message for a slot whose generation moved on (a unit
//! that timed out, or was already completed) is counted in `async_late_results` and
//! dropped.
//!
//! Emission goes through *segments*: the units between two watermarks. Ordered mode emits
//! the first segment's units in arrival order as they complete; unordered mode emits them
//! in completion order. A watermark goes out when its segment is empty, then the next
//! segment becomes first.
//!
//! Results are pushed into the chain only after the chain flushed everything pushed before,
//! and input is taken only then too; `process` does nothing on an empty inbox, and
//! `try_process_watermark` returns true only with the chain flushed. So when the inbox has
//! just emptied, or a watermark was just taken, nothing emitted is left in the chain's
//! backlog, and a snapshot (the units still held, listed by their inputs, and the pending
//! watermarks) loses nothing.
//!
//! Per-unit cost on the worker: a slot lookup, one clone of the inputs (the processor keeps
//! the original for snapshots, fallbacks and error messages), one task spawn. Deadlines are
//! checked with one `Instant::now()` per call and a scan of the slots only when the earliest
//! deadline has passed.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::task::AbortHandle;
use weir_core::{
    Counter, Inbox, Item, Outbox, Processor, ProcessorContext, ProcessorResult, SnapshotEntry,
    SnapshotWriter, TaskletWaker, Watermark,
};

use crate::async_io::call::{AttemptError, CallFn, MakeCall, call_with_retries};
use crate::async_io::options::{Codec, Describe, Fallback, RetryPolicy};
use crate::async_io::{AsyncError, AsyncOptions, OutputOrder, runtime};
use crate::links::link::{Link, chain_idle, chain_watermark, save_chain};
use crate::links::state::ChainEntries;

/// Longest item description in an error.
const DESCRIPTION_LIMIT: usize = 200;

/// Names `item` in an error by its `Debug` text, cut to 200 bytes at a character boundary.
pub fn debug_description<T: Debug>(item: &T) -> String {
    let mut text = format!("{item:?}");
    if text.len() > DESCRIPTION_LIMIT {
        let mut end = DESCRIPTION_LIMIT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// How units are formed: one item each, or batches.
pub struct Units {
    /// At most this many units (items, or batches) in flight per instance.
    pub max_units: usize,
    /// Items per unit: 1 for a per-item call.
    pub batch_size: usize,
    /// How long a partly filled batch waits for more items before it is called.
    pub max_wait: Duration,
}

/// What every instance of an async map vertex shares.
pub struct AsyncSpec<T, R> {
    /// Makes the call each unit runs (once per instance).
    pub make_call: MakeCall<T, R>,
    /// Whether results go out in input order or as they complete.
    pub order: OutputOrder,
    /// Units in flight at most: the capacity (items), or the batched stage's parallelism.
    pub max_units: usize,
    /// Items per unit at most: 1 for `map_async`.
    pub batch_size: usize,
    /// How long a partial batch waits for more items.
    pub max_wait: Duration,
    /// Time for a unit from its first call through its last retry.
    pub timeout: Duration,
    /// Which errors and results are retried, and how often.
    pub policy: RetryPolicy<R>,
    /// Replaces the results of a unit that timed out; `None`: a timeout fails the job.
    pub fallback: Option<Fallback<T, R>>,
    /// Names an item in an error.
    pub describe: Describe<T>,
    /// Encodes the inputs in flight for a snapshot; `None`: the stage refuses to snapshot while
    /// it holds any.
    pub codec: Option<Codec<T>>,
}

impl<T: Debug + 'static, R> AsyncSpec<T, R> {
    /// The spec of a stage built with `options`, forming `units`, calling what `make_call`
    /// makes.
    pub fn new(options: AsyncOptions<T, R>, units: Units, make_call: MakeCall<T, R>) -> Self {
        AsyncSpec {
            make_call,
            order: options.order,
            max_units: units.max_units,
            batch_size: units.batch_size,
            max_wait: units.max_wait,
            timeout: options.timeout,
            policy: options.policy(),
            fallback: options.fallback,
            describe: options
                .describe
                .unwrap_or_else(|| Arc::new(debug_description::<T>)),
            codec: options.codec,
        }
    }
}

impl<T, R> AsyncSpec<T, R> {
    /// Names a unit in an error: the item, or the batch by its size and first item.
    fn describe_unit(&self, inputs: &[T]) -> String {
        match inputs {
            [] => "an empty batch".to_string(),
            [one] if self.batch_size == 1 => format!("item {}", (self.describe)(one)),
            [first, ..] => format!(
                "batch of {} item(s) starting with {}",
                inputs.len(),
                (self.describe)(first)
            ),
        }
    }
}

/// A unit's progress.
enum UnitState<R> {
    /// Restored from a snapshot, not called yet.
    Queued,
    InFlight,
    Done(Vec<R>),
}

struct Unit<T, R> {
    /// Arrival order, for snapshots.
    seq: u64,
    /// The segment it belongs to.
    epoch: u64,
    inputs: Vec<T>,
    state: UnitState<R>,
    deadline: Instant,
    abort: Option<AbortHandle>,
}

struct Slot<T, R> {
    generation: u32,
    unit: Option<Unit<T, R>>,
}

/// The units that arrived between two watermarks, and the watermark that ends them.
#[derive(Default)]
struct Segment {
    /// Ordered mode: the units not yet emitted, in arrival order.
    units: VecDeque<u32>,
    /// Unordered mode: the completed units not yet emitted, in completion order.
    done: VecDeque<u32>,
    /// Units of this segment not yet emitted.
    live: usize,
    /// `None` only for the last segment, which new units join.
    watermark: Option<Watermark>,
}

/// A unit's outcome, sent back from the runtime.
pub struct Completion<R> {
    slot: u32,
    generation: u32,
    outcome: Result<Vec<R>, AttemptError>,
}

/// What the next emission step is.
enum Ready<R> {
    Results(Vec<R>),
    Watermark(Watermark),
    Nothing,
}

/// Snapshot entry tags, the first byte of each value.
const TAG_UNIT: u8 = 0;
const TAG_WATERMARK: u8 = 1;

/// The head processor of an async stage: it starts calls on the shared runtime, takes their
/// completions without waiting, and hands results to its chain in the configured order (see the
/// [module docs](self)).
pub struct AsyncMapHead<T, R> {
    spec: Arc<AsyncSpec<T, R>>,
    chain: Box<dyn Link<R>>,
    /// This instance's index and the vertex's parallelism: saved inputs are keyed by the
    /// index and restored to `index % parallelism`.
    instance: (u32, u32),
    call: Option<CallFn<T, R>>,
    runtime: Option<&'static Handle>,
    slots: Vec<Slot<T, R>>,
    free: Vec<u32>,
    occupied: usize,
    queued: usize,
    segments: VecDeque<Segment>,
    front_epoch: u64,
    next_seq: u64,
    pending: Vec<T>,
    pending_since: Option<Instant>,
    tx: mpsc::Sender<Completion<R>>,
    rx: mpsc::Receiver<Completion<R>>,
    next_deadline: Option<Instant>,
    waker: TaskletWaker,
    timeouts: Counter,
    late: Counter,
}

impl<T: Item, R: Item> AsyncMapHead<T, R> {
    /// A head running `spec` for one instance, feeding `chain`.
    pub fn new(spec: Arc<AsyncSpec<T, R>>, chain: Box<dyn Link<R>>) -> Self {
        let (tx, rx) = mpsc::channel();
        let mut segments = VecDeque::new();
        segments.push_back(Segment::default());
        AsyncMapHead {
            spec,
            chain,
            instance: (0, 1),
            call: None,
            runtime: None,
            slots: Vec::new(),
            free: Vec::new(),
            occupied: 0,
            queued: 0,
            segments,
            front_epoch: 0,
            next_seq: 0,
            pending: Vec::new(),
            pending_since: None,
            tx,
            rx,
            next_deadline: None,
            waker: TaskletWaker::default(),
            timeouts: Counter::default(),
            late: Counter::default(),
        }
    }

    /// The sender completions come back on (tests inject late and duplicate ones).
    #[cfg(test)]
    pub fn completion_sender(&self) -> mpsc::Sender<Completion<R>> {
        self.tx.clone()
    }

    fn has_free_slot(&self) -> bool {
        self.occupied < self.spec.max_units
    }

    fn epoch_of_last(&self) -> u64 {
        self.front_epoch + self.segments.len() as u64 - 1
    }

    fn segment_mut(&mut self, epoch: u64) -> &mut Segment {
        let i = (epoch - self.front_epoch) as usize;
        &mut self.segments[i]
    }

    /// Puts `inputs` in a slot of the last segment, queued or in flight.
    fn add_unit(&mut self, inputs: Vec<T>, start: bool) -> ProcessorResult<()> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    unit: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let epoch = self.epoch_of_last();
        self.slots[slot as usize].unit = Some(Unit {
            seq: self.next_seq,
            epoch,
            inputs,
            state: UnitState::Queued,
            deadline: Instant::now(),
            abort: None,
        });
        self.next_seq += 1;
        self.occupied += 1;
        let order = self.spec.order;
        let segment = self.segment_mut(epoch);
        segment.live += 1;
        if order == OutputOrder::Ordered {
            segment.units.push_back(slot);
        }
        if start {
            self.start(slot)
        } else {
            self.queued += 1;
            Ok(())
        }
    }

    /// Sends a unit's call to the runtime.
    fn start(&mut self, slot: u32) -> ProcessorResult<()> {
        let (Some(call), Some(runtime)) = (&self.call, self.runtime) else {
            unreachable!("units are started only after init");
        };
        let entry = &mut self.slots[slot as usize];
        let generation = entry.generation;
        let Some(unit) = entry.unit.as_mut() else {
            unreachable!("a started slot holds a unit");
        };
        let deadline = Instant::now() + self.spec.timeout;
        unit.state = UnitState::InFlight;
        unit.deadline = deadline;
        let inputs = unit.inputs.clone();
        let call = Arc::clone(call);
        let spec = Arc::clone(&self.spec);
        let tx = self.tx.clone();
        let waker = self.waker.clone();
        let task = runtime.spawn(async move {
            let outcome = call_with_retries(&call, &spec.policy, inputs).await;
            // The receiver is gone when the processor was dropped: nobody is waiting.
            let _ = tx.send(Completion {
                slot,
                generation,
                outcome,
            });
            // Cut the worker's idle pause short: the completion is waiting.
            waker.wake();
        });
        unit.abort = Some(task.abort_handle());
        self.next_deadline = Some(self.next_deadline.map_or(deadline, |d| d.min(deadline)));
        Ok(())
    }

    /// Starts the units restored from a snapshot.
    fn start_queued(&mut self) -> ProcessorResult<()> {
        if self.queued == 0 {
            return Ok(());
        }
        let queued: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&s| {
                matches!(
                    self.slots[s as usize].unit,
                    Some(Unit {
                        state: UnitState::Queued,
                        ..
                    })
                )
            })
            .collect();
        self.queued = 0;
        for slot in queued {
            self.start(slot)?;
        }
        Ok(())
    }

    /// Marks a unit done with `results`.
    fn finish(&mut self, slot: u32, results: Vec<R>) {
        let order = self.spec.order;
        let Some(unit) = self.slots[slot as usize].unit.as_mut() else {
            return;
        };
        unit.state = UnitState::Done(results);
        unit.abort = None;
        let epoch = unit.epoch;
        if order == OutputOrder::Unordered {
            self.segment_mut(epoch).done.push_back(slot);
        }
    }

    /// Takes the completions that arrived. A failed unit fails the job at once.
    fn drain_completions(&mut self, outbox: &mut Outbox) -> ProcessorResult<()> {
        while let Ok(c) = self.rx.try_recv() {
            let entry = &self.slots[c.slot as usize];
            let current = entry.generation == c.generation
                && matches!(
                    entry.unit,
                    Some(Unit {
                        state: UnitState::InFlight,
                        ..
                    })
                );
            if !current {
                self.late.increment();
                continue;
            }
            outbox.report_progress();
            match c.outcome {
                Ok(results) => self.finish(c.slot, results),
                Err(AttemptError { error, attempts }) => {
                    let inputs = entry.unit.as_ref().map_or(&[][..], |u| &u.inputs[..]);
                    return Err(AsyncError::Failed {
                        item: self.spec.describe_unit(inputs),
                        attempts,
                        source: error,
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Times out the units past their deadline: a fallback replaces them, or the job fails.
    fn expire(&mut self, outbox: &mut Outbox) -> ProcessorResult<()> {
        let Some(next) = self.next_deadline else {
            return Ok(());
        };
        let now = Instant::now();
        if now < next {
            return Ok(());
        }
        let mut earliest: Option<Instant> = None;
        for slot in 0..self.slots.len() {
            let Some(unit) = self.slots[slot].unit.as_mut() else {
                continue;
            };
            if !matches!(unit.state, UnitState::InFlight) {
                continue;
            }
            if unit.deadline > now {
                earliest = Some(earliest.map_or(unit.deadline, |d| d.min(unit.deadline)));
                continue;
            }
            if let Some(task) = unit.abort.take() {
                task.abort();
            }
            self.timeouts.increment();
            outbox.report_progress();
            let Some(fallback) = self.spec.fallback.clone() else {
                return Err(AsyncError::Timeout {
                    item: self.spec.describe_unit(&unit.inputs),
                    timeout: self.spec.timeout,
                }
                .into());
            };
            let results: Vec<R> = unit
                .inputs
                .iter()
                .cloned()
                .flat_map(|t| fallback(t))
                .collect();
            // A completion still on its way is now late: the generation moves on.
            self.slots[slot].generation = self.slots[slot].generation.wrapping_add(1);
            self.finish(slot as u32, results);
        }
        self.next_deadline = earliest;
        Ok(())
    }

    /// Sends the partial batch once it has waited `max_wait`.
    fn send_pending_if_due(&mut self) -> ProcessorResult<()> {
        if let Some(since) = self.pending_since
            && since.elapsed() >= self.spec.max_wait
        {
            self.send_pending()?;
        }
        Ok(())
    }

    /// Sends the partial batch if a slot is free. Returns whether nothing is pending now.
    fn send_pending(&mut self) -> ProcessorResult<bool> {
        if self.pending.is_empty() {
            return Ok(true);
        }
        if !self.has_free_slot() {
            return Ok(false);
        }
        let batch = std::mem::replace(&mut self.pending, Vec::with_capacity(self.spec.batch_size));
        self.pending_since = None;
        self.add_unit(batch, true)?;
        Ok(true)
    }

    /// Empties slot `slot` after its results were taken.
    fn release(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        entry.unit = None;
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(slot);
        self.occupied -= 1;
    }

    /// The next thing to emit from the first segment, removing it unless it is a watermark;
    /// with `units` false, only a watermark that is ready.
    fn next_ready(&mut self, units: bool) -> Ready<R> {
        let ordered = self.spec.order == OutputOrder::Ordered;
        let Some(first) = self.segments.front_mut() else {
            return Ready::Nothing;
        };
        let slot = if !units {
            None
        } else if ordered {
            match first.units.front() {
                Some(&s) => match &self.slots[s as usize].unit {
                    Some(Unit {
                        state: UnitState::Done(_),
                        ..
                    }) => {
                        first.units.pop_front();
                        Some(s)
                    }
                    _ => return Ready::Nothing,
                },
                None => None,
            }
        } else {
            first.done.pop_front()
        };
        if let Some(slot) = slot {
            first.live -= 1;
            let results = match self.slots[slot as usize].unit.take() {
                Some(Unit {
                    state: UnitState::Done(results),
                    ..
                }) => results,
                _ => Vec::new(),
            };
            self.release(slot);
            return Ready::Results(results);
        }
        match first.watermark {
            Some(wm) if first.live == 0 => Ready::Watermark(wm),
            _ => Ready::Nothing,
        }
    }

    /// Emits what is ready into the chain and flushes it. Returns true when the chain's
    /// backlog is empty (everything emitted reached the outbox) and nothing more is ready.
    fn emit(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        loop {
            if !self.chain.flush(outbox)? {
                return Ok(false);
            }
            if !self.emit_step(outbox, usize::MAX)? {
                return Ok(true);
            }
        }
    }

    /// Pushes up to `units` ready units' results into the (flushed) chain, and the
    /// watermarks ready before, between and after them. Stops early when the chain asks to,
    /// or before a watermark that must wait for a flush. Returns whether it emitted
    /// anything; the chain then needs a flush.
    fn emit_step(&mut self, outbox: &mut Outbox, mut units: usize) -> ProcessorResult<bool> {
        let mut pushed = false;
        let mut emitted = false;
        loop {
            match self.next_ready(units > 0) {
                Ready::Results(mut results) => {
                    pushed = true;
                    emitted = true;
                    units -= 1;
                    outbox.report_progress();
                    if !self.chain.push_batch(&mut results) {
                        return Ok(true);
                    }
                }
                // Items before a watermark reach the outbox before it: flush first.
                Ready::Watermark(_) if pushed => return Ok(true),
                Ready::Watermark(wm) => {
                    // Through the chain, not straight to the outbox: a window or a keyed
                    // state fused behind this stage must see it after the results before it.
                    if !chain_watermark(&mut *self.chain, wm, outbox)? {
                        return Ok(emitted);
                    }
                    self.segments.pop_front();
                    self.front_epoch += 1;
                    outbox.report_progress();
                    emitted = true;
                }
                Ready::Nothing => return Ok(emitted),
            }
        }
    }

    /// Takes input while slots are free (batched: fills the partial batch and sends it).
    /// Never touches the chain.
    fn take_input(&mut self, items: &mut VecDeque<T>) -> ProcessorResult<()> {
        if self.spec.batch_size <= 1 {
            while self.has_free_slot() {
                let Some(item) = items.pop_front() else { break };
                self.add_unit(vec![item], true)?;
            }
            return Ok(());
        }
        while !items.is_empty() {
            if self.pending.len() >= self.spec.batch_size && !self.send_pending()? {
                break;
            }
            let Some(item) = items.pop_front() else { break };
            if self.pending.is_empty() {
                self.pending_since = Some(Instant::now());
            }
            self.pending.push(item);
        }
        if self.pending.len() >= self.spec.batch_size {
            self.send_pending()?;
        }
        Ok(())
    }

    /// Starts restored units, takes completions, times out, sends a due batch.
    fn poll(&mut self, outbox: &mut Outbox) -> ProcessorResult<()> {
        self.start_queued()?;
        self.drain_completions(outbox)?;
        self.expire(outbox)?;
        self.send_pending_if_due()
    }

    /// Everything a hook does before taking input: [`poll`](Self::poll), then emit. Returns
    /// whether the chain is flushed.
    fn pump(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.poll(outbox)?;
        self.emit(outbox)
    }

    /// Queues a watermark behind the units that arrived before it.
    fn add_watermark(&mut self, wm: Watermark) {
        let n = self.segments.len();
        let last = &mut self.segments[n - 1];
        if last.live == 0 && n >= 2 {
            // Nothing arrived since the previous watermark: the newer one replaces it.
            self.segments[n - 2].watermark = Some(wm);
            return;
        }
        last.watermark = Some(wm);
        self.segments.push_back(Segment::default());
    }

    /// Every unit and watermark held, in arrival order, the partial batch last.
    fn held(&self) -> Vec<Held<'_, T>> {
        let mut by_epoch: Vec<(u64, u64, &[T])> = self
            .slots
            .iter()
            .filter_map(|s| s.unit.as_ref())
            .map(|u| (u.epoch, u.seq, &u.inputs[..]))
            .collect();
        by_epoch.sort_by_key(|&(epoch, seq, _)| (epoch, seq));
        let mut units = by_epoch.into_iter().peekable();
        let mut held = Vec::new();
        for (i, segment) in self.segments.iter().enumerate() {
            let epoch = self.front_epoch + i as u64;
            while let Some((_, _, inputs)) = units.next_if(|u| u.0 == epoch) {
                held.push(Held::Unit(inputs));
            }
            if let Some(wm) = segment.watermark {
                held.push(Held::Watermark(wm));
            }
        }
        if !self.pending.is_empty() {
            held.push(Held::Unit(&self.pending));
        }
        held
    }

    /// Cancels every call in flight.
    fn abort_all(&mut self) {
        for unit in self.slots.iter_mut().filter_map(|s| s.unit.as_mut()) {
            if let Some(task) = unit.abort.take() {
                task.abort();
            }
        }
    }
}

/// A unit or a watermark read back from a snapshot.
enum Restored<T> {
    Unit(Vec<T>),
    Watermark(Watermark),
}

/// A unit or a watermark in a snapshot.
enum Held<'a, T> {
    Unit(&'a [T]),
    Watermark(Watermark),
}

impl<T: Item, R: Item> Processor for AsyncMapHead<T, R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.runtime = Some(runtime()?);
        self.call = Some((self.spec.make_call)()?);
        self.waker = ctx.waker().clone();
        self.timeouts = ctx.metrics().counter("async_timeouts");
        self.late = ctx.metrics().counter("async_late_results");
        self.instance = (
            ctx.global_index() as u32,
            ctx.total_parallelism().max(1) as u32,
        );
        self.chain.init(ctx)
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        // Called again after the inbox emptied (the harness does, with a full outbox), this
        // must not emit: the emptied inbox may be followed by a snapshot.
        if inbox.is_empty() {
            return Ok(());
        }
        self.poll(outbox)?;
        let items = inbox.items::<T>();
        let before = items.len();
        // Refill each slot as soon as it frees: send new calls before emitting the next
        // unit's results, so the service is not kept waiting while the chain works.
        loop {
            if !self.chain.flush(outbox)? {
                break;
            }
            self.take_input(items)?;
            // With the inbox empty, nothing more is emitted in this call: see above.
            if items.is_empty() || !self.emit_step(outbox, 1)? {
                break;
            }
        }
        if items.len() < before {
            outbox.report_progress();
        }
        Ok(())
    }

    fn try_process(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.pump(outbox)?;
        Ok(true)
    }

    /// Completions wake the instance; a timeout or a partial batch's wait is due at a time.
    fn next_call(&self) -> weir_core::NextCall {
        let mut next = weir_core::NextCall::OnWake;
        if let Some(deadline) = self.next_deadline {
            next = next.earliest(weir_core::NextCall::At(deadline));
        }
        if let Some(since) = self.pending_since {
            next = next.earliest(weir_core::NextCall::At(since + self.spec.max_wait));
        }
        next
    }

    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        if !self.pump(outbox)? || !self.send_pending()? {
            return Ok(false);
        }
        self.add_watermark(wm);
        // Nothing new was drained: this can only send the watermark itself, when nothing
        // arrived before it is still held.
        self.emit(outbox)?;
        Ok(true)
    }

    fn try_process_idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Results still to come would reach consumers that stopped waiting for this one:
        // tell them only once nothing is held.
        if !self.pump(outbox)? || !self.send_pending()? {
            return Ok(false);
        }
        if self.occupied > 0 || self.segments.len() > 1 {
            return Ok(false);
        }
        chain_idle(&mut *self.chain, outbox)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.pump(outbox)? || !self.send_pending()? {
            return Ok(false);
        }
        if self.occupied > 0 || self.segments.len() > 1 {
            return Ok(false);
        }
        self.chain.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.chain.is_cooperative()
    }

    /// Saves the inputs of calls in flight or not yet started (already written, never run:
    /// they are invoked again after a restore) and the watermarks between them, in order,
    /// after the chain's backlog went out; then the chain.
    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        let mut held = Vec::new();
        let codec = self.spec.codec.clone();
        let in_flight = self.occupied + usize::from(!self.pending.is_empty());
        for (i, h) in self.held().into_iter().enumerate() {
            let value = match h {
                Held::Unit(inputs) => {
                    let Some(codec) = &codec else {
                        return Err(AsyncError::SnapshotUnsupported { in_flight }.into());
                    };
                    let mut value = vec![TAG_UNIT];
                    value.extend(
                        (codec.encode)(inputs)
                            .map_err(|reason| AsyncError::Snapshot { entry: i, reason })?,
                    );
                    value
                }
                Held::Watermark(wm) => {
                    let mut value = vec![TAG_WATERMARK];
                    value.extend(wm.timestamp().to_be_bytes());
                    value
                }
            };
            // Keyed by (instance, position): sorting restores the order of each instance.
            let mut key = self.instance.0.to_be_bytes().to_vec();
            key.extend((i as u64).to_be_bytes());
            held.push((key, value));
        }
        save_chain(&mut *self.chain, outbox, writer, |state| {
            for (key, value) in held {
                state.put(&key, value);
            }
            Ok(())
        })
    }

    /// Takes back the units and watermarks held by the old instances this one now stands
    /// for (`old % parallelism`). One old instance's come back in their order. Several
    /// (the stage runs fewer instances now) are merged: every unit first, each old
    /// instance's in its order, then one watermark, the least of the old instances' last
    /// ones, so that no unit comes out after a watermark above it and no item replayed from
    /// upstream finds the watermark already past it.
    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        let mut entries = ChainEntries::new(entries);
        let mut head = entries.head();
        let mut own = head.take();
        own.sort();
        let (me, parallelism) = self.instance;
        let mut restored: Vec<(u32, Restored<T>)> = Vec::new();
        for (i, entry) in own.into_iter().enumerate() {
            let bad = |reason: &str| AsyncError::Snapshot {
                entry: i,
                reason: reason.to_string(),
            };
            let old = entry
                .key
                .get(..4)
                .and_then(|k| <[u8; 4]>::try_from(k).ok())
                .map(u32::from_be_bytes)
                .ok_or_else(|| bad("the key has no instance"))?;
            if old % parallelism != me {
                continue;
            }
            match entry.value.split_first() {
                Some((&TAG_UNIT, bytes)) => {
                    let codec = self.spec.codec.clone().ok_or_else(|| {
                        bad("holds items, but this stage has no snapshot_inputs()")
                    })?;
                    let inputs = (codec.decode)(bytes).map_err(|reason| bad(&reason))?;
                    restored.push((old, Restored::Unit(inputs)));
                }
                Some((&TAG_WATERMARK, bytes)) => {
                    let ts: [u8; 8] = bytes
                        .try_into()
                        .map_err(|_| bad("a watermark is 8 bytes"))?;
                    let wm = Watermark(i64::from_be_bytes(ts));
                    restored.push((old, Restored::Watermark(wm)));
                }
                _ => return Err(bad("unknown entry tag").into()),
            }
        }
        let merged = restored.windows(2).any(|w| w[0].0 != w[1].0);
        let mut last_watermarks: BTreeMap<u32, Watermark> = BTreeMap::new();
        for (old, held) in restored {
            match held {
                Restored::Unit(inputs) => self.add_unit(inputs, false)?,
                Restored::Watermark(wm) if merged => {
                    last_watermarks.insert(old, wm);
                }
                Restored::Watermark(wm) => self.add_watermark(wm),
            }
        }
        if let Some(least) = last_watermarks.into_values().min() {
            self.add_watermark(least);
        }
        self.chain.restore(&mut head.next())
    }

    fn snapshot_commit_finish(&mut self, _success: bool) -> ProcessorResult<bool> {
        self.chain.commit()
    }

    fn close(&mut self) -> ProcessorResult<()> {
        self.abort_all();
        Ok(())
    }
}

impl<T, R> Drop for AsyncMapHead<T, R> {
    fn drop(&mut self) {
        for unit in self.slots.iter_mut().filter_map(|s| s.unit.as_mut()) {
            if let Some(task) = unit.abort.take() {
                task.abort();
            }
        }
    }
}
