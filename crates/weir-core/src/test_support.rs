//! The processor test harness, modelled on Jet's `TestSupport`.
//!
//! ```
//! use weir_core::builtin_processors::MapP;
//! use weir_core::test_support::verify_processor;
//!
//! verify_processor(|_| MapP::new(|s: String| s.len()))
//!     .input(vec!["a".to_string(), "bb".to_string()])
//!     .expect_output(vec![1usize, 2]);
//! ```
//!
//! [`verify_processor`] runs a fresh processor four times: with an outbox that holds one item
//! and then 1024, and with inbox batches of one item and then all of them. On every run it:
//!
//! - calls `process` again while the outbox is full, to check the processor keeps its place;
//! - checks that each call made progress (took input, emitted, or reported progress) or that
//!   the outbox was full, unless [`Verifier::disable_progress_assertion`] is set;
//! - delivers watermarks given with [`Verifier::input_events`] after the items before them,
//!   calling `try_process_watermark` until it returns true;
//! - optionally saves the processor's state whenever its inbox empties and continues with a
//!   fresh instance restored from it ([`Verifier::snapshot_restore`]);
//! - drives `complete_edge` and `complete` to the end;
//! - fails on a cooperative call that used more CPU time than the time limit (5 ms by
//!   default, ten times that in a debug build), measured on the calling thread so that a busy
//!   machine does not make it flaky; [`Verifier::allow_slow_cooperative_calls`] turns this
//!   into a warning for processors that legitimately need longer;
//! - compares the output with what was expected, in order or in any order.
//!
//! It panics with a description of the first failure, so it is meant for tests.

use std::fmt::Debug;
use std::time::Duration;

use cpu_time::ThreadTime;

use crate::conveyor::Message;
use crate::error::ProcessorResult;
use crate::inbox::Inbox;
use crate::item::Item;
use crate::outbox::{Outbox, TestDrain};
use crate::processor::{Processor, ProcessorContext, ProcessorSupplier};
use crate::snapshot::SnapshotWriter;
use crate::watermark::Watermark;

/// Starts verifying the processors `supplier` creates.
pub fn verify_processor<P, S>(supplier: S) -> Verifier<S>
where
    P: Processor,
    S: Fn(&ProcessorContext) -> P + Send + Sync + 'static,
{
    Verifier {
        supplier,
        inputs: Vec::new(),
        order: None,
        assert_progress: true,
        snapshot_restore: false,
        time_limit: DEFAULT_TIME_LIMIT,
        allow_slow_calls: false,
        slow_calls: 0,
    }
}

/// The events of one input ordinal, without their item type.
trait Feed {
    fn len(&self) -> usize;
    fn new_inbox(&self) -> Inbox;
    /// Moves up to `n` items from `from` into `inbox`, stopping before a marker. Returns
    /// the new position and the marker found there, if any (then consumed).
    fn fill(&self, inbox: &mut Inbox, from: usize, n: usize) -> (usize, Option<Marker>);
}

/// A marker in a feed: delivered after the items before it.
#[derive(Clone, Copy)]
enum Marker {
    Watermark(Watermark),
    Idle,
}

struct TypedFeed<T>(Vec<Message<T>>);

impl<T: Item> Feed for TypedFeed<T> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn new_inbox(&self) -> Inbox {
        Inbox::of::<T>()
    }
    fn fill(&self, inbox: &mut Inbox, from: usize, n: usize) -> (usize, Option<Marker>) {
        let items = inbox.items::<T>();
        let mut at = from;
        while at < self.0.len() && items.len() < n {
            let marker = match &self.0[at] {
                Message::Item(t) => {
                    items.push_back(t.clone());
                    None
                }
                Message::Watermark(wm) => Some(Marker::Watermark(*wm)),
                Message::Idle => Some(Marker::Idle),
                Message::Barrier(_) | Message::Done => None,
            };
            match marker {
                Some(marker) if items.is_empty() => return (at + 1, Some(marker)),
                Some(_) => break,
                None => {}
            }
            at += 1;
        }
        (at, None)
    }
}

/// A processor under test. See the [module docs](self).
pub struct Verifier<S> {
    supplier: S,
    inputs: Vec<Box<dyn Feed>>,
    order: Option<Vec<usize>>,
    assert_progress: bool,
    snapshot_restore: bool,
    time_limit: Duration,
    allow_slow_calls: bool,
    slow_calls: usize,
}

/// The most CPU time a cooperative call may take: Jet's 5 ms, with room for an unoptimised
/// build.
const DEFAULT_TIME_LIMIT: Duration = if cfg!(debug_assertions) {
    Duration::from_millis(50)
} else {
    Duration::from_millis(5)
};

/// Outbox capacities and inbox batch sizes every run combines.
const OUTBOX_CAPACITIES: [usize; 2] = [1, 1024];
const INBOX_BATCHES: [usize; 2] = [1, usize::MAX];

impl<S: ProcessorSupplier> Verifier<S> {
    /// Adds the items of the next input ordinal (the first call is ordinal 0).
    pub fn input<T: Item>(self, items: Vec<T>) -> Self {
        self.input_events(items.into_iter().map(Message::Item).collect())
    }

    /// Adds the items and watermarks of the next input ordinal, in order.
    pub fn input_events<T: Item>(mut self, events: Vec<Message<T>>) -> Self {
        self.inputs.push(Box::new(TypedFeed(events)));
        self
    }

    /// Feeds the input ordinals in this order (default `0, 1, ...`), as edge priorities would:
    /// for example `[1, 0]` when ordinal 1 is a join's build side.
    pub fn feed_order(mut self, order: Vec<usize>) -> Self {
        self.order = Some(order);
        self
    }

    /// Allows calls that make no progress, for processors that wait on something outside
    /// the inbox (a timer, an async reply).
    pub fn disable_progress_assertion(mut self) -> Self {
        self.assert_progress = false;
        self
    }

    /// Whenever the inbox empties, saves the processor's state, drops it, and goes on with a
    /// fresh instance restored from that state: the output must not change.
    pub fn snapshot_restore(mut self) -> Self {
        self.snapshot_restore = true;
        self
    }

    /// Sets the CPU time above which a cooperative call fails the test.
    pub fn cooperative_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = limit;
        self
    }

    /// Only warns about cooperative calls over the time limit, for a processor whose calls
    /// legitimately take longer (and which should then say why).
    pub fn allow_slow_cooperative_calls(mut self) -> Self {
        self.allow_slow_calls = true;
        self
    }

    /// Runs the processor and checks that output ordinal 0 holds `expected` items, in order.
    ///
    /// # Panics
    /// On any failure, describing it.
    pub fn expect_output<O: Item + PartialEq + Debug>(self, expected: Vec<O>) {
        self.check(
            expected.into_iter().map(Message::Item).collect(),
            true,
            false,
        )
    }

    /// Runs the processor and checks that output ordinal 0 holds exactly `expected` items, in
    /// any order.
    ///
    /// # Panics
    /// On any failure, describing it.
    pub fn expect_output_unordered<O: Item + PartialEq + Debug>(self, expected: Vec<O>) {
        self.check(
            expected.into_iter().map(Message::Item).collect(),
            false,
            false,
        )
    }

    /// Runs the processor and checks that output ordinal 0 emits exactly `expected`, items
    /// and watermarks, in order.
    ///
    /// # Panics
    /// On any failure, describing it.
    pub fn expect_messages<O: Item + PartialEq + Debug>(self, expected: Vec<Message<O>>) {
        self.check(expected, true, true)
    }

    /// Runs the processor through every configuration and returns the items of each run, for
    /// checks of your own. Panics on a contract failure.
    pub fn run<O: Item>(self) -> Vec<Vec<O>> {
        self.run_messages::<O>()
            .into_iter()
            .map(|run| {
                run.into_iter()
                    .filter_map(|m| match m {
                        Message::Item(t) => Some(t),
                        _ => None,
                    })
                    .collect()
            })
            .collect()
    }

    /// Like [`run`](Self::run), with watermarks kept in the output.
    pub fn run_messages<O: Item>(mut self) -> Vec<Vec<Message<O>>> {
        let mut runs = Vec::new();
        for capacity in OUTBOX_CAPACITIES {
            for batch in INBOX_BATCHES {
                runs.push(self.run_once::<O>(capacity, batch));
            }
        }
        if self.slow_calls > 0 {
            eprintln!(
                "weir test harness: {} cooperative call(s) took longer than {:?}",
                self.slow_calls, self.time_limit
            );
        }
        runs
    }

    fn check<O: Item + PartialEq + Debug>(
        self,
        expected: Vec<Message<O>>,
        ordered: bool,
        markers: bool,
    ) {
        for (i, actual) in self.run_messages::<O>().into_iter().enumerate() {
            let actual: Vec<Message<O>> = actual
                .into_iter()
                .filter(|m| markers || matches!(m, Message::Item(_)))
                .collect();
            let context = format!(
                "outbox capacity {}, inbox batch {}",
                OUTBOX_CAPACITIES[i / 2],
                if i % 2 == 0 { "1" } else { "all" }
            );
            if ordered {
                assert_eq!(actual, expected, "output differs ({context})");
                continue;
            }
            let mut missing: Vec<&Message<O>> = expected.iter().collect();
            for item in &actual {
                match missing.iter().position(|e| *e == item) {
                    Some(p) => {
                        missing.swap_remove(p);
                    }
                    None => panic!("unexpected output {item:?} ({context})\nactual: {actual:?}"),
                }
            }
            assert!(missing.is_empty(), "missing output {missing:?} ({context})");
        }
    }

    fn run_once<O: Item>(&mut self, capacity: usize, batch: usize) -> Vec<Message<O>> {
        let ctx = ProcessorContext::new("verified", 0, 1, self.inputs.len());
        let mut p = self.supplier.create(&ctx);
        p.init(&ctx)
            .unwrap_or_else(|e| panic!("init() failed: {e}"));
        let (outbox, mut drains) = Outbox::for_test::<O>(1, capacity);
        let mut run = Run {
            p,
            ctx,
            outbox,
            drain: drains.remove(0),
            output: Vec::new(),
            cooperative: true,
            verifier: self,
        };
        run.cooperative = run.p.is_cooperative();
        let inputs = std::mem::take(&mut run.verifier.inputs);
        let order = run
            .verifier
            .order
            .clone()
            .unwrap_or_else(|| (0..inputs.len()).collect());
        for ordinal in order {
            let feed = &inputs[ordinal];
            let mut inbox = feed.new_inbox();
            let mut position = 0;
            while position < feed.len() {
                let (next, marker) = feed.fill(&mut inbox, position, batch);
                position = next;
                run.process_inbox(ordinal, &mut inbox);
                match marker {
                    Some(Marker::Watermark(wm)) => run.drive("try_process_watermark", |p, o| {
                        p.try_process_watermark(wm, o)
                    }),
                    Some(Marker::Idle) => {
                        run.drive("try_process_idle", |p, o| p.try_process_idle(o))
                    }
                    None => {}
                }
                run.maybe_restore();
            }
            run.drive("complete_edge", |p, o| p.complete_edge(ordinal, o));
        }
        run.verifier.inputs = inputs;
        run.drive("complete", |p, o| p.complete(o));
        run.p
            .close()
            .unwrap_or_else(|e| panic!("close() failed: {e}"));
        run.output
    }

    fn timed<R>(&mut self, what: &str, cooperative: bool, f: impl FnOnce() -> R) -> R {
        let start = ThreadTime::now();
        let r = f();
        let elapsed = start.elapsed();
        if cooperative && elapsed > self.time_limit {
            self.slow_calls += 1;
            let message = format!(
                "cooperative {what}() used {elapsed:?} of CPU time, over the limit of {:?}",
                self.time_limit
            );
            assert!(
                self.allow_slow_calls,
                "{message} (allow_slow_cooperative_calls() opts out)"
            );
            eprintln!("weir test harness: {message}");
        }
        r
    }
}

/// One run of the harness: the processor under test and what it emitted.
struct Run<'v, S, O> {
    p: Box<dyn Processor>,
    ctx: ProcessorContext,
    outbox: Outbox,
    drain: TestDrain<O>,
    output: Vec<Message<O>>,
    cooperative: bool,
    verifier: &'v mut Verifier<S>,
}

impl<S: ProcessorSupplier, O: Item> Run<'_, S, O> {
    fn collect(&mut self) {
        self.output.extend(self.drain.drain_messages());
    }

    /// Calls `process` until the inbox is empty, checking progress and the full-outbox case.
    fn process_inbox(&mut self, ordinal: usize, inbox: &mut Inbox) {
        while !inbox.is_empty() {
            self.outbox.begin_call();
            let before = inbox.len();
            let (p, outbox, cooperative) = (&mut self.p, &mut self.outbox, self.cooperative);
            self.verifier
                .timed("process", cooperative, || p.process(ordinal, inbox, outbox))
                .unwrap_or_else(|e| panic!("process() failed: {e}"));
            let consumed = before - inbox.len();
            if self.verifier.assert_progress && consumed == 0 && !self.outbox.progress_in_call() {
                panic!(
                    "process() on ordinal {ordinal} took no item and emitted nothing, though the outbox had room"
                );
            }
            if !self.outbox.has_room_all() {
                // Called again with a full outbox, the processor must keep its place.
                self.outbox.begin_call();
                let (p, outbox) = (&mut self.p, &mut self.outbox);
                self.verifier
                    .timed("process", cooperative, || p.process(ordinal, inbox, outbox))
                    .unwrap_or_else(|e| panic!("process() with a full outbox failed: {e}"));
            }
            self.collect();
        }
    }

    /// Calls a hook until it returns true, collecting output and checking progress.
    fn drive(
        &mut self,
        what: &str,
        mut call: impl FnMut(&mut Box<dyn Processor>, &mut Outbox) -> ProcessorResult<bool>,
    ) {
        loop {
            self.outbox.begin_call();
            let (p, outbox, cooperative) = (&mut self.p, &mut self.outbox, self.cooperative);
            let done = self
                .verifier
                .timed(what, cooperative, || call(p, outbox))
                .unwrap_or_else(|e| panic!("{what}() failed: {e}"));
            let progressed = self.outbox.progress_in_call();
            self.collect();
            if done {
                return;
            }
            if self.verifier.assert_progress && !progressed {
                panic!(
                    "{what}() returned false but emitted nothing and reported no progress, though the outbox had room"
                );
            }
        }
    }

    /// With [`Verifier::snapshot_restore`], replaces the processor by a fresh one restored from
    /// its saved state.
    fn maybe_restore(&mut self) {
        if !self.verifier.snapshot_restore {
            return;
        }
        let mut writer = SnapshotWriter::new();
        loop {
            self.outbox.begin_call();
            let saved = self
                .p
                .save_to_snapshot(&mut self.outbox, &mut writer)
                .unwrap_or_else(|e| panic!("save_to_snapshot() failed: {e}"));
            // What the processor sent before saving (its backlog) is output like any other.
            self.collect();
            if saved {
                break;
            }
        }
        self.p
            .close()
            .unwrap_or_else(|e| panic!("close() failed: {e}"));
        let mut fresh = self.verifier.supplier.create(&self.ctx);
        fresh
            .init(&self.ctx)
            .unwrap_or_else(|e| panic!("init() failed: {e}"));
        fresh
            .restore_from_snapshot(writer.into_entries())
            .unwrap_or_else(|e| panic!("restore_from_snapshot() failed: {e}"));
        self.p = fresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin_processors::MapP;

    #[test]
    fn watermarks_pass_through_in_order() {
        verify_processor(|_| MapP::new(|x: u32| x * 10))
            .input_events(vec![
                Message::Item(1u32),
                Message::Watermark(Watermark(5)),
                Message::Item(2),
            ])
            .expect_messages(vec![
                Message::Item(10u32),
                Message::Watermark(Watermark(5)),
                Message::Item(20),
            ]);
    }

    #[test]
    #[should_panic(expected = "output differs")]
    fn a_wrong_expectation_fails() {
        verify_processor(|_| MapP::new(|x: u32| x))
            .input(vec![1u32])
            .expect_output(vec![2u32]);
    }

    /// Never takes its input: the harness must call that out.
    struct Lazy;
    impl Processor for Lazy {
        fn process(
            &mut self,
            _o: usize,
            _inbox: &mut Inbox,
            _outbox: &mut Outbox,
        ) -> ProcessorResult<()> {
            Ok(())
        }
    }

    #[test]
    #[should_panic(expected = "took no item and emitted nothing")]
    fn a_processor_that_ignores_its_inbox_fails() {
        verify_processor(|_| Lazy)
            .input(vec![1u32])
            .expect_output::<u32>(vec![]);
    }
}
