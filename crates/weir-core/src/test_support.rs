//! The processor test harness, modelled on Jet's `TestSupport`.
//!
//! ```
//! use weir_core::processors::MapP;
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
//! - checks that each call made progress (took input or emitted) or that the outbox was full,
//!   unless [`Verifier::disable_progress_assertion`] is set;
//! - drives `complete_edge` and `complete` to the end;
//! - warns about cooperative calls slower than the time limit (5 ms by default);
//! - compares the output with what was expected, in order or in any order.
//!
//! It panics with a description of the first failure, so it is meant for tests.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use crate::inbox::Inbox;
use crate::item::Item;
use crate::outbox::Outbox;
use crate::processor::{Processor, ProcessorContext, ProcessorSupplier};

/// Starts verifying the processors `supplier` creates.
pub fn verify_processor<P, S>(supplier: S) -> Verifier<S>
where
    P: Processor,
    S: Fn(&ProcessorContext) -> P + Send + Sync + 'static,
{
    Verifier {
        supplier,
        inputs: Vec::new(),
        assert_progress: true,
        time_limit: Duration::from_millis(5),
        outbox_capacities: vec![1, 1024],
        slow_calls: 0,
    }
}

trait Feed {
    fn len(&self) -> usize;
    fn new_inbox(&self) -> Inbox;
    fn fill(&self, inbox: &mut Inbox, from: usize, n: usize);
}

struct TypedFeed<T>(Vec<T>);

impl<T: Item> Feed for TypedFeed<T> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn new_inbox(&self) -> Inbox {
        Inbox::of::<T>()
    }
    fn fill(&self, inbox: &mut Inbox, from: usize, n: usize) {
        inbox
            .items::<T>()
            .extend(self.0[from..from + n].iter().cloned());
    }
}

/// A processor under test. See the [module docs](self).
pub struct Verifier<S> {
    supplier: S,
    inputs: Vec<Box<dyn Feed>>,
    assert_progress: bool,
    time_limit: Duration,
    outbox_capacities: Vec<usize>,
    slow_calls: usize,
}

impl<S: ProcessorSupplier> Verifier<S> {
    /// Adds the items of the next input ordinal (the first call is ordinal 0).
    pub fn input<T: Item>(mut self, items: Vec<T>) -> Self {
        self.inputs.push(Box::new(TypedFeed(items)));
        self
    }

    /// Allows calls that make no progress, for processors that wait on something outside
    /// the inbox (a timer, an async reply).
    pub fn disable_progress_assertion(mut self) -> Self {
        self.assert_progress = false;
        self
    }

    /// Sets the time above which a cooperative call is reported as too slow.
    pub fn cooperative_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = limit;
        self
    }

    /// Runs the processor and checks that output ordinal 0 equals `expected`, in order.
    ///
    /// # Panics
    /// On any failure, describing it.
    pub fn expect_output<O: Item + PartialEq + Debug>(self, expected: Vec<O>) {
        self.check(expected, true)
    }

    /// Runs the processor and checks that output ordinal 0 holds exactly `expected`, in any order.
    ///
    /// # Panics
    /// On any failure, describing it.
    pub fn expect_output_unordered<O: Item + PartialEq + Debug>(self, expected: Vec<O>) {
        self.check(expected, false)
    }

    /// Runs the processor through every configuration and returns the output of each run, for
    /// checks of your own. Panics on a contract failure.
    pub fn run<O: Item>(mut self) -> Vec<Vec<O>> {
        let mut runs = Vec::new();
        for cap in self.outbox_capacities.clone() {
            for batch in [1, usize::MAX] {
                runs.push(self.run_once::<O>(cap, batch));
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

    fn check<O: Item + PartialEq + Debug>(self, expected: Vec<O>, ordered: bool) {
        for (i, actual) in self.run::<O>().into_iter().enumerate() {
            let (cap, batch) = (
                if i < 2 { 1 } else { 1024 },
                if i % 2 == 0 { "1" } else { "all" },
            );
            let context = format!("outbox capacity {cap}, inbox batch {batch}");
            if ordered {
                assert_eq!(actual, expected, "output differs ({context})");
            } else {
                let mut missing: Vec<&O> = expected.iter().collect();
                for item in &actual {
                    match missing.iter().position(|e| *e == item) {
                        Some(p) => {
                            missing.swap_remove(p);
                        }
                        None => panic!(
                            "unexpected output item {item:?} ({context})\nactual: {actual:?}"
                        ),
                    }
                }
                assert!(
                    missing.is_empty(),
                    "missing output items {missing:?} ({context})"
                );
            }
        }
    }

    fn timed<R>(&mut self, what: &str, f: impl FnOnce() -> R, cooperative: bool) -> R {
        let start = Instant::now();
        let r = f();
        let elapsed = start.elapsed();
        if cooperative && elapsed > self.time_limit {
            self.slow_calls += 1;
            eprintln!(
                "weir test harness: cooperative {what}() took {elapsed:?}, over {:?}",
                self.time_limit
            );
        }
        r
    }

    fn run_once<O: Item>(&mut self, capacity: usize, batch: usize) -> Vec<O> {
        let ctx = ProcessorContext::new("verified", 0, 1, self.inputs.len());
        let mut p = self.supplier.create(&ctx);
        p.init(&ctx)
            .unwrap_or_else(|e| panic!("init() failed: {e}"));
        let cooperative = p.is_cooperative();
        let (mut outbox, mut drains) = Outbox::for_test::<O>(1, capacity);
        let mut output = Vec::new();
        let inputs = std::mem::take(&mut self.inputs);
        for (ordinal, feed) in inputs.iter().enumerate() {
            let mut inbox = feed.new_inbox();
            let mut position = 0;
            loop {
                if inbox.is_empty() {
                    if position >= feed.len() {
                        break;
                    }
                    let n = batch.min(feed.len() - position);
                    feed.fill(&mut inbox, position, n);
                    position += n;
                }
                outbox.begin_call();
                let before = inbox.len();
                self.timed(
                    "process",
                    || p.process(ordinal, &mut inbox, &mut outbox),
                    cooperative,
                )
                .unwrap_or_else(|e| panic!("process() failed: {e}"));
                let consumed = before - inbox.len();
                if self.assert_progress && consumed == 0 && !outbox.progress_in_call() {
                    panic!(
                        "process() on ordinal {ordinal} took no item and emitted nothing, though the outbox had room"
                    );
                }
                if !outbox.has_room_all() {
                    // Called again with a full outbox, the processor must keep its place.
                    outbox.begin_call();
                    self.timed(
                        "process",
                        || p.process(ordinal, &mut inbox, &mut outbox),
                        cooperative,
                    )
                    .unwrap_or_else(|e| panic!("process() with a full outbox failed: {e}"));
                }
                output.extend(drains[0].drain());
            }
            self.drive(
                "complete_edge",
                &mut p,
                &mut outbox,
                &mut drains[0],
                &mut output,
                cooperative,
                |p, o| p.complete_edge(ordinal, o),
            );
        }
        self.inputs = inputs;
        self.drive(
            "complete",
            &mut p,
            &mut outbox,
            &mut drains[0],
            &mut output,
            cooperative,
            |p, o| p.complete(o),
        );
        p.close().unwrap_or_else(|e| panic!("close() failed: {e}"));
        output
    }

    #[allow(clippy::too_many_arguments)]
    fn drive<O: Item>(
        &mut self,
        what: &str,
        p: &mut Box<dyn Processor>,
        outbox: &mut Outbox,
        drain: &mut crate::outbox::TestDrain<O>,
        output: &mut Vec<O>,
        cooperative: bool,
        mut call: impl FnMut(
            &mut Box<dyn Processor>,
            &mut Outbox,
        ) -> crate::error::ProcessorResult<bool>,
    ) {
        loop {
            outbox.begin_call();
            let done = self
                .timed(what, || call(p, outbox), cooperative)
                .unwrap_or_else(|e| panic!("{what}() failed: {e}"));
            let progressed = outbox.progress_in_call();
            output.extend(drain.drain());
            if done {
                return;
            }
            if self.assert_progress && !progressed {
                panic!(
                    "{what}() returned false but emitted nothing and reported no progress, though the outbox had room"
                );
            }
        }
    }
}
