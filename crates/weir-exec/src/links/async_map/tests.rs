//! The async map processor through the test harness, with deterministic fake services: the
//! behaviours Flink's `AsyncWaitOperatorTest` checks.
//!
//! No test depends on how long something takes. Where an order must be forced, a fake call
//! waits for another item's call to have finished; where a completion must arrive at a
//! chosen moment (late, twice), the test sends it itself on the processor's completion
//! channel. Timeouts that must fire are tiny and hit calls that never finish; timeouts that
//! must not fire are generous.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use weir_core::conveyor::Message;
use weir_core::test_support::verify_processor;
use weir_core::{Inbox, Item, Outbox, Processor, ProcessorContext, Watermark};

use super::{AsyncMapHead, AsyncSpec, Completion, Units};
use crate::async_io::call::{CallFn, MakeCall, batch_call, item_call};
use crate::async_io::{AsyncOptions, RetryStrategy};
use crate::links::link::{Emit, Link};

const GENEROUS: Duration = Duration::from_secs(60);

fn emit<T: Item>() -> Box<dyn Link<T>> {
    Box::new(Emit::new())
}

fn units(max_units: usize) -> Units {
    Units {
        max_units,
        batch_size: 1,
        max_wait: Duration::ZERO,
    }
}

fn batches(parallelism: usize, batch_size: usize, max_wait: Duration) -> Units {
    Units {
        max_units: parallelism,
        batch_size,
        max_wait,
    }
}

fn spec<R: Item>(
    options: AsyncOptions<u32, R>,
    units: Units,
    call: CallFn<u32, R>,
) -> Arc<AsyncSpec<u32, R>> {
    let make_call: MakeCall<u32, R> = Arc::new(move || Ok(Arc::clone(&call)));
    Arc::new(AsyncSpec::new(options, units, make_call))
}

fn head<R: Item>(spec: &Arc<AsyncSpec<u32, R>>) -> AsyncMapHead<u32, R> {
    AsyncMapHead::new(Arc::clone(spec), emit::<R>())
}

/// Completes every call at once with `f(item)`.
fn instant(f: fn(u32) -> u32) -> CallFn<u32, u32> {
    item_call(move |x: u32| async move { Ok::<_, Infallible>(vec![f(x)]) })
}

/// Never completes.
fn hanging<R: Item>() -> CallFn<u32, R> {
    item_call(|_x: u32| std::future::pending::<Result<Vec<R>, Infallible>>())
}

/// Item `a` finishes only after item `b`'s call has finished (once, in any run), so the
/// completion order is forced, without timing.
struct After {
    flags: Mutex<HashMap<u32, watch::Sender<bool>>>,
}

impl After {
    fn new() -> Arc<Self> {
        Arc::new(After {
            flags: Mutex::new(HashMap::new()),
        })
    }

    fn flag(&self, item: u32) -> watch::Sender<bool> {
        self.flags
            .lock()
            .unwrap()
            .entry(item)
            .or_insert_with(|| watch::channel(false).0)
            .clone()
    }

    /// A call returning `x * 10` that, for each `(a, b)` in `deps`, makes `a` wait for `b`.
    fn call(self: &Arc<Self>, deps: &'static [(u32, u32)]) -> CallFn<u32, u32> {
        let me = Arc::clone(self);
        item_call(move |x: u32| {
            let wait_for = deps
                .iter()
                .find(|d| d.0 == x)
                .map(|d| me.flag(d.1).subscribe());
            let done = me.flag(x);
            async move {
                if let Some(mut rx) = wait_for {
                    let _ = rx.wait_for(|finished| *finished).await;
                }
                done.send_replace(true);
                Ok::<_, Infallible>(vec![x * 10])
            }
        })
    }
}

fn ctx() -> ProcessorContext {
    ProcessorContext::new("async", 0, 1, 1)
}

/// Calls `try_process` until `done(output so far)`, for at most a minute.
fn poll_until<R: Item>(
    p: &mut AsyncMapHead<u32, R>,
    outbox: &mut Outbox,
    out: &mut weir_core::outbox::TestDrain<R>,
    seen: &mut Vec<Message<R>>,
    done: impl Fn(&[Message<R>]) -> bool,
) {
    let start = Instant::now();
    while !done(seen) {
        assert!(start.elapsed() < GENEROUS, "gave up waiting");
        p.try_process(outbox).unwrap();
        seen.extend(out.drain_messages());
        std::thread::yield_now();
    }
}

fn items(messages: &[Message<u32>]) -> Vec<u32> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Item(x) => Some(*x),
            _ => None,
        })
        .collect()
}

fn input_with_watermarks() -> Vec<Message<u32>> {
    use Message::{Item as I, Watermark as W};
    vec![
        I(1),
        I(2),
        W(Watermark(10)),
        I(3),
        I(4),
        I(5),
        W(Watermark(20)),
        I(6),
        I(7),
    ]
}

/// Items 1 and 3 finish after items from later in the input.
const CROSSING: &[(u32, u32)] = &[(1, 3), (4, 6), (3, 5)];

#[test]
fn ordered_output_keeps_input_order_and_watermarks_in_place() {
    use Message::{Item as I, Watermark as W};
    let after = After::new();
    // In ordered mode a finished item holds its slot until the items before it are out:
    // room for all of them, so that the forced order cannot deadlock.
    let spec = spec(
        AsyncOptions::ordered().snapshot_inputs(),
        units(8),
        after.call(CROSSING),
    );
    let expected = vec![
        I(10u32),
        I(20),
        W(Watermark(10)),
        I(30),
        I(40),
        I(50),
        W(Watermark(20)),
        I(60),
        I(70),
    ];
    verify_processor(move |_| head(&spec))
        .input_events(input_with_watermarks())
        .disable_progress_assertion()
        .expect_messages(expected.clone());
}

#[test]
fn ordered_output_survives_snapshot_and_restore_at_every_step() {
    let after = After::new();
    // In ordered mode a finished item holds its slot until the items before it are out:
    // room for all of them, so that the forced order cannot deadlock.
    let spec = spec(
        AsyncOptions::ordered().snapshot_inputs(),
        units(8),
        after.call(CROSSING),
    );
    verify_processor(move |_| head(&spec))
        .input_events(input_with_watermarks())
        .disable_progress_assertion()
        .snapshot_restore()
        .expect_messages(vec![
            Message::Item(10u32),
            Message::Item(20),
            Message::Watermark(Watermark(10)),
            Message::Item(30),
            Message::Item(40),
            Message::Item(50),
            Message::Watermark(Watermark(20)),
            Message::Item(60),
            Message::Item(70),
        ]);
}

/// Checks an unordered run: every item came out once, and each came out between the same
/// watermarks as it went in.
fn assert_never_crosses_a_watermark(
    input: &[Message<u32>],
    output: &[Message<u32>],
    f: fn(u32) -> u32,
) {
    let segments = |messages: &[Message<u32>], map: &dyn Fn(u32) -> u32| {
        let mut segments = vec![(Vec::new(), None)];
        for m in messages {
            match m {
                Message::Item(x) => segments.last_mut().unwrap().0.push(map(*x)),
                Message::Watermark(wm) => {
                    segments.last_mut().unwrap().1 = Some(*wm);
                    segments.push((Vec::new(), None));
                }
                Message::Idle | Message::Barrier(_) | Message::Done => {}
            }
        }
        for s in &mut segments {
            s.0.sort_unstable();
        }
        segments
    };
    assert_eq!(
        segments(output, &|x| x),
        segments(input, &|x| f(x)),
        "output {output:?}"
    );
}

#[test]
fn unordered_output_never_crosses_a_watermark() {
    let after = After::new();
    let spec = spec(AsyncOptions::unordered(), units(4), after.call(CROSSING));
    let input = input_with_watermarks();
    let runs = verify_processor(move |_| head(&spec))
        .input_events(input.clone())
        .disable_progress_assertion()
        .run_messages::<u32>();
    for run in runs {
        assert_never_crosses_a_watermark(&input, &run, |x| x * 10);
    }
}

#[test]
fn unordered_output_with_snapshot_and_restore() {
    let after = After::new();
    let spec = spec(
        AsyncOptions::unordered().snapshot_inputs(),
        units(4),
        after.call(CROSSING),
    );
    let input = input_with_watermarks();
    let runs = verify_processor(move |_| head(&spec))
        .input_events(input.clone())
        .disable_progress_assertion()
        .snapshot_restore()
        .run_messages::<u32>();
    for run in runs {
        assert_never_crosses_a_watermark(&input, &run, |x| x * 10);
    }
}

/// Injects completions by hand: the order they arrive in is the order they come out.
#[test]
fn unordered_emits_in_completion_order() {
    let spec = spec(AsyncOptions::unordered(), units(8), hanging::<u32>());
    let mut p = head(&spec);
    p.init(&ctx()).unwrap();
    let (mut outbox, mut drains) = Outbox::for_test::<u32>(1, 64);
    let mut inbox = Inbox::of::<u32>();
    inbox.items::<u32>().extend([0, 1, 2, 3]);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    let tx = p.completion_sender();
    for slot in [2u32, 0, 3, 1] {
        tx.send(Completion {
            slot,
            generation: 0,
            outcome: Ok(vec![slot * 10]),
        })
        .unwrap();
    }
    p.try_process(&mut outbox).unwrap();
    assert_eq!(drains[0].drain(), [20, 0, 30, 10]);
}

#[test]
#[should_panic(expected = "item 7 got no result within 10ms")]
fn a_timeout_fails_the_job_naming_the_item() {
    let spec = spec(
        AsyncOptions::ordered().timeout(Duration::from_millis(10)),
        units(4),
        hanging::<u32>(),
    );
    verify_processor(move |_| head(&spec))
        .input(vec![7u32])
        .disable_progress_assertion()
        .expect_output::<u32>(vec![]);
}

#[test]
fn a_timeout_with_a_fallback_emits_the_replacement() {
    let spec = spec(
        AsyncOptions::ordered()
            .timeout(Duration::from_millis(5))
            .on_timeout(|x| vec![x + 1000]),
        units(3),
        hanging::<u32>(),
    );
    verify_processor(move |_| head(&spec))
        .input((0..8u32).collect())
        .disable_progress_assertion()
        .expect_output((1000..1008u32).collect());
}

/// A call that succeeds on every third call for an item, and otherwise fails or returns
/// nothing. Counting calls per item keeps it deterministic across the harness's runs.
/// Calls made per item.
type CallCounts = Arc<Mutex<HashMap<u32, u32>>>;

fn third_time_lucky(empty: bool) -> (CallFn<u32, u32>, CallCounts) {
    let calls = Arc::new(Mutex::new(HashMap::<u32, u32>::new()));
    let c = Arc::clone(&calls);
    let call = item_call(move |x: u32| {
        let n = {
            let mut calls = c.lock().unwrap();
            let n = calls.entry(x).or_default();
            *n += 1;
            *n
        };
        async move {
            match (n % 3, empty) {
                (0, _) => Ok(vec![x + 1]),
                (_, true) => Ok(vec![]),
                (_, false) => Err(format!("call {n} for {x} failed")),
            }
        }
    });
    (call, calls)
}

#[test]
fn fixed_delay_retries_on_error() {
    let (call, calls) = third_time_lucky(false);
    let spec = spec(
        AsyncOptions::ordered()
            .timeout(GENEROUS)
            .retry(RetryStrategy::fixed(Duration::from_millis(1), 3)),
        units(4),
        call,
    );
    verify_processor(move |_| head(&spec))
        .input((0..10u32).collect())
        .disable_progress_assertion()
        .expect_output((1..11u32).collect());
    // Four harness runs, three calls per item each.
    assert!(calls.lock().unwrap().values().all(|&n| n == 12));
}

#[test]
fn exponential_backoff_retries_on_an_empty_result() {
    let (call, calls) = third_time_lucky(true);
    let spec = spec(
        AsyncOptions::unordered()
            .timeout(GENEROUS)
            .retry(RetryStrategy::exponential(
                Duration::from_millis(1),
                2.0,
                Duration::from_millis(3),
                3,
            ))
            .retry_on_empty(),
        units(4),
        call,
    );
    verify_processor(move |_| head(&spec))
        .input((0..10u32).collect())
        .disable_progress_assertion()
        .expect_output_unordered((1..11u32).collect());
    assert!(calls.lock().unwrap().values().all(|&n| n == 12));
}

#[test]
#[should_panic(expected = "item 0 failed after 2 attempt(s): call 2 for 0 failed")]
fn a_failure_after_the_last_retry_fails_the_job() {
    let (call, _) = third_time_lucky(false);
    let spec = spec(
        AsyncOptions::ordered().retry(RetryStrategy::fixed(Duration::ZERO, 2)),
        units(1),
        call,
    );
    verify_processor(move |_| head(&spec))
        .input(vec![0u32])
        .disable_progress_assertion()
        .expect_output::<u32>(vec![]);
}

#[test]
#[should_panic(expected = "item 5 failed after 1 attempt(s): fatal")]
fn an_error_the_predicate_rejects_is_not_retried() {
    #[derive(Debug)]
    struct Fatal;
    impl std::fmt::Display for Fatal {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("fatal")
        }
    }
    impl std::error::Error for Fatal {}
    let call = item_call(|_x: u32| async { Err::<Vec<u32>, _>(Fatal) });
    let spec = spec(
        AsyncOptions::ordered()
            .retry(RetryStrategy::fixed(Duration::ZERO, 5))
            .retry_if(|e| e.downcast_ref::<Fatal>().is_none()),
        units(1),
        call,
    );
    verify_processor(move |_| head(&spec))
        .input(vec![5u32])
        .disable_progress_assertion()
        .expect_output::<u32>(vec![]);
}

#[test]
fn a_full_buffer_holds_back_input() {
    let spec = spec(AsyncOptions::ordered(), units(3), hanging::<u32>());
    let mut p = head(&spec);
    p.init(&ctx()).unwrap();
    let (mut outbox, mut drains) = Outbox::for_test::<u32>(1, 64);
    let mut inbox = Inbox::of::<u32>();
    inbox.items::<u32>().extend(0..10);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    assert_eq!(
        inbox.len(),
        7,
        "three in flight, the rest wait in the inbox"
    );
    p.process(0, &mut inbox, &mut outbox).unwrap();
    assert_eq!(inbox.len(), 7, "still full");
    // Item 1 completes, but item 0 is first in line: nothing is emitted, no slot frees.
    let tx = p.completion_sender();
    tx.send(Completion {
        slot: 1,
        generation: 0,
        outcome: Ok(vec![100]),
    })
    .unwrap();
    p.process(0, &mut inbox, &mut outbox).unwrap();
    assert_eq!(inbox.len(), 7);
    assert!(drains[0].drain().is_empty());
    tx.send(Completion {
        slot: 0,
        generation: 0,
        outcome: Ok(vec![0]),
    })
    .unwrap();
    p.process(0, &mut inbox, &mut outbox).unwrap();
    assert_eq!(drains[0].drain(), [0, 100]);
    assert_eq!(inbox.len(), 5, "two slots freed, two more items taken");
}

#[test]
fn a_late_completion_after_the_timeout_is_ignored_and_completing_twice_is_harmless() {
    let spec = spec(
        AsyncOptions::ordered()
            .timeout(Duration::from_millis(1))
            .on_timeout(|x| vec![x + 1000]),
        units(2),
        hanging::<u32>(),
    );
    let ctx = ctx();
    let late = ctx.metrics().counter("async_late_results");
    let mut p = head(&spec);
    p.init(&ctx).unwrap();
    let (mut outbox, mut drains) = Outbox::for_test::<u32>(1, 64);
    let mut seen = Vec::new();
    let mut inbox = Inbox::of::<u32>();
    inbox.items::<u32>().push_back(5);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    poll_until(&mut p, &mut outbox, &mut drains[0], &mut seen, |s| {
        !s.is_empty()
    });
    assert_eq!(items(&seen), [1005], "the fallback replaced the item");
    let tx = p.completion_sender();
    tx.send(Completion {
        slot: 0,
        generation: 0,
        outcome: Ok(vec![5]),
    })
    .unwrap();
    p.try_process(&mut outbox).unwrap();
    assert!(drains[0].drain().is_empty(), "the late result is dropped");
    assert_eq!(late.get(), 1);

    // The slot is reused with a new generation; complete its unit twice.
    let spec =
        crate::links::async_map::tests::spec(AsyncOptions::ordered(), units(2), hanging::<u32>());
    let mut p = head(&spec);
    p.init(&ctx).unwrap();
    inbox.items::<u32>().push_back(6);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    let tx = p.completion_sender();
    for _ in 0..2 {
        tx.send(Completion {
            slot: 0,
            generation: 0,
            outcome: Ok(vec![6]),
        })
        .unwrap();
    }
    p.try_process(&mut outbox).unwrap();
    assert_eq!(drains[0].drain(), [6]);
    assert_eq!(late.get(), 2, "the second completion counts as late");
    assert!(p.complete(&mut outbox).unwrap());
}

#[test]
fn held_watermarks_coalesce_when_nothing_arrives_between_them() {
    let spec = spec(AsyncOptions::unordered(), units(2), hanging::<u32>());
    let mut p = head(&spec);
    p.init(&ctx()).unwrap();
    let (mut outbox, mut drains) = Outbox::for_test::<u32>(1, 64);
    let mut inbox = Inbox::of::<u32>();
    inbox.items::<u32>().push_back(1);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    assert!(
        p.try_process_watermark(Watermark(5), &mut outbox).unwrap(),
        "held, not refused"
    );
    assert!(p.try_process_watermark(Watermark(6), &mut outbox).unwrap());
    assert!(
        drains[0].drain_messages().is_empty(),
        "item 1 is still in flight"
    );
    p.completion_sender()
        .send(Completion {
            slot: 0,
            generation: 0,
            outcome: Ok(vec![10]),
        })
        .unwrap();
    p.try_process(&mut outbox).unwrap();
    assert_eq!(
        drains[0].drain_messages(),
        [Message::Item(10), Message::Watermark(Watermark(6))]
    );
    // With nothing in flight a watermark goes straight through.
    assert!(p.try_process_watermark(Watermark(7), &mut outbox).unwrap());
    assert_eq!(
        drains[0].drain_messages(),
        [Message::Watermark(Watermark(7))]
    );
}

#[test]
fn a_restored_processor_calls_the_saved_items_again_and_completes_the_output() {
    use Message::{Item as I, Watermark as W};
    let options = || AsyncOptions::ordered().snapshot_inputs();
    let stuck = spec(options(), units(8), hanging::<u32>());
    let mut p = head(&stuck);
    p.init(&ctx()).unwrap();
    let (mut outbox, mut drains) = Outbox::for_test::<u32>(1, 64);
    let mut inbox = Inbox::of::<u32>();
    inbox.items::<u32>().extend([1, 2, 3]);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    assert!(p.try_process_watermark(Watermark(9), &mut outbox).unwrap());
    inbox.items::<u32>().push_back(4);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    let mut writer = weir_core::SnapshotWriter::new();
    assert!(p.save_to_snapshot(&mut outbox, &mut writer).unwrap());
    p.close().unwrap();
    drop(p);
    let entries = writer.into_entries();
    assert_eq!(
        entries.len(),
        5,
        "four items in flight and the watermark between them"
    );

    let working = spec(options(), units(8), instant(|x| x * 10));
    let mut restored = head(&working);
    restored.init(&ctx()).unwrap();
    restored.restore_from_snapshot(entries).unwrap();
    let start = Instant::now();
    while !restored.complete(&mut outbox).unwrap() {
        assert!(start.elapsed() < GENEROUS, "gave up waiting");
        std::thread::yield_now();
    }
    assert_eq!(
        drains[0].drain_messages(),
        [I(10), I(20), I(30), W(Watermark(9)), I(40)]
    );
}

#[test]
fn a_snapshot_with_items_in_flight_needs_snapshot_inputs() {
    let spec = spec(AsyncOptions::ordered(), units(2), hanging::<u32>());
    let mut p = head(&spec);
    p.init(&ctx()).unwrap();
    let mut writer = weir_core::SnapshotWriter::new();
    assert!(
        p.save_to_snapshot(&mut Outbox::for_test::<u32>(1, 64).0, &mut writer)
            .unwrap(),
        "nothing in flight: fine"
    );
    let (mut outbox, _drains) = Outbox::for_test::<u32>(1, 64);
    let mut inbox = Inbox::of::<u32>();
    inbox.items::<u32>().push_back(1);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    let e = p.save_to_snapshot(&mut outbox, &mut writer).unwrap_err();
    assert!(e.to_string().contains("snapshot_inputs"), "{e}");
}

/// A batch call returning `x * 10` per item that records batch sizes and the most batches
/// in flight at once.
/// The sizes of the batches called.
type BatchSizes = Arc<Mutex<Vec<usize>>>;

fn recording_batches() -> (CallFn<u32, u32>, BatchSizes, Arc<AtomicUsize>) {
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let (now, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, n, m) = (Arc::clone(&sizes), Arc::clone(&now), Arc::clone(&max));
    let call = batch_call(move |batch: Vec<u32>| {
        s.lock().unwrap().push(batch.len());
        let (n, m) = (Arc::clone(&n), Arc::clone(&m));
        async move {
            /// Leaves the count when the call ends or is cancelled (a restore aborts calls).
            struct Inside(Arc<AtomicUsize>);
            impl Drop for Inside {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let inside = n.fetch_add(1, Ordering::SeqCst) + 1;
            let _inside = Inside(n);
            m.fetch_max(inside, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Ok::<_, Infallible>(batch.iter().map(|x| x * 10).collect())
        }
    });
    (call, sizes, max)
}

#[test]
fn batches_are_bounded_in_size_and_number_and_keep_order_and_watermarks() {
    let (call, sizes, max) = recording_batches();
    let spec = spec(
        AsyncOptions::ordered().snapshot_inputs(),
        batches(2, 4, GENEROUS),
        call,
    );
    let mut input: Vec<Message<u32>> = (0..14).map(Message::Item).collect();
    input.push(Message::Watermark(Watermark(100)));
    input.extend((14..30).map(Message::Item));
    let mut expected: Vec<Message<u32>> = (0..14).map(|x| Message::Item(x * 10)).collect();
    expected.push(Message::Watermark(Watermark(100)));
    expected.extend((14..30).map(|x| Message::Item(x * 10)));
    verify_processor(move |_| head(&spec))
        .input_events(input)
        .disable_progress_assertion()
        .expect_messages(expected);
    let sizes = sizes.lock().unwrap();
    assert!(sizes.iter().all(|&s| (1..=4).contains(&s)), "{sizes:?}");
    assert!(
        max.load(Ordering::SeqCst) <= 2,
        "at most two batches in flight"
    );
}

#[test]
fn unordered_batches_never_cross_a_watermark_and_survive_restore() {
    let input = input_with_watermarks();
    for restore in [false, true] {
        let (call, _, max) = recording_batches();
        let spec = spec(
            AsyncOptions::unordered().snapshot_inputs(),
            batches(3, 2, GENEROUS),
            call,
        );
        let mut verifier = verify_processor(move |_| head(&spec))
            .input_events(input.clone())
            .disable_progress_assertion();
        if restore {
            verifier = verifier.snapshot_restore();
        }
        for run in verifier.run_messages::<u32>() {
            assert_never_crosses_a_watermark(&input, &run, |x| x * 10);
        }
        if !restore {
            // With restores, calls of a replaced instance may linger until their
            // cancellation lands: the bound is per instance.
            assert!(max.load(Ordering::SeqCst) <= 3);
        }
    }
}

#[test]
fn a_partial_batch_is_sent_after_max_wait() {
    let (call, sizes, _) = recording_batches();
    let spec = spec(
        AsyncOptions::ordered(),
        batches(2, 100, Duration::from_millis(2)),
        call,
    );
    let mut p = head(&spec);
    p.init(&ctx()).unwrap();
    let (mut outbox, mut drains) = Outbox::for_test::<u32>(1, 64);
    let mut inbox = Inbox::of::<u32>();
    inbox.items::<u32>().extend([1, 2, 3]);
    p.process(0, &mut inbox, &mut outbox).unwrap();
    let mut seen = Vec::new();
    // No more input and no end of input: only max_wait can send the batch.
    poll_until(&mut p, &mut outbox, &mut drains[0], &mut seen, |s| {
        s.len() == 3
    });
    assert_eq!(items(&seen), [10, 20, 30]);
    assert_eq!(*sizes.lock().unwrap(), [3]);
}

#[test]
fn batched_calls_retry_like_single_ones() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let call = batch_call(move |batch: Vec<u32>| {
        let n = c.fetch_add(1, Ordering::SeqCst);
        async move {
            if n.is_multiple_of(2) {
                Err("flaky".to_string())
            } else {
                Ok(batch)
            }
        }
    });
    let spec = spec(
        AsyncOptions::ordered().retry(RetryStrategy::fixed(Duration::ZERO, 2)),
        batches(1, 3, GENEROUS),
        call,
    );
    verify_processor(move |_| head(&spec))
        .input((0..7u32).collect())
        .disable_progress_assertion()
        .expect_output((0..7u32).collect());
}

#[test]
#[should_panic(expected = "a batch of 3 items got 2 results")]
fn a_batch_with_the_wrong_number_of_results_fails() {
    let call = batch_call(|batch: Vec<u32>| async move {
        Ok::<_, Infallible>(batch.into_iter().skip(1).collect::<Vec<u32>>())
    });
    let spec = spec(AsyncOptions::ordered(), batches(1, 3, GENEROUS), call);
    verify_processor(move |_| head(&spec))
        .input(vec![1u32, 2, 3])
        .disable_progress_assertion()
        .expect_output::<u32>(vec![]);
}

#[test]
#[should_panic(expected = "batch of 2 item(s) starting with 8 got no result")]
fn a_batch_timeout_names_the_first_item() {
    let spec = spec(
        AsyncOptions::ordered().timeout(Duration::from_millis(5)),
        batches(1, 2, GENEROUS),
        hanging::<u32>(),
    );
    verify_processor(move |_| head(&spec))
        .input(vec![8u32, 9])
        .disable_progress_assertion()
        .expect_output::<u32>(vec![]);
}

/// A link that logs each item and watermark it sees, in order, then passes them on: it
/// proves that watermarks go down the chain, after the results before them, so that a window
/// or keyed state fused behind the stage sees them.
struct Witness {
    seen: Arc<Mutex<Vec<String>>>,
    next: Box<dyn Link<u32>>,
}

impl Link<u32> for Witness {
    fn init(&mut self, ctx: &ProcessorContext) -> weir_core::ProcessorResult<()> {
        self.next.init(ctx)
    }
    fn push(&mut self, item: u32) -> bool {
        self.seen.lock().unwrap().push(format!("item {item}"));
        self.next.push(item)
    }
    fn watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut weir_core::Outbox,
    ) -> weir_core::ProcessorResult<bool> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("wm {}", wm.timestamp()));
        self.next.watermark(wm, outbox)
    }
    fn idle(&mut self, outbox: &mut weir_core::Outbox) -> weir_core::ProcessorResult<bool> {
        self.seen.lock().unwrap().push("idle".to_string());
        self.next.idle(outbox)
    }
    fn flush(&mut self, outbox: &mut weir_core::Outbox) -> weir_core::ProcessorResult<bool> {
        self.next.flush(outbox)
    }
    fn complete(&mut self, outbox: &mut weir_core::Outbox) -> weir_core::ProcessorResult<bool> {
        self.next.complete(outbox)
    }
    fn is_cooperative(&self) -> bool {
        true
    }
    fn prepare_save(&mut self) -> weir_core::ProcessorResult<bool> {
        self.next.prepare_save()
    }
    fn save(
        &mut self,
        state: &mut crate::links::state::LinkWriter<'_>,
    ) -> weir_core::ProcessorResult<()> {
        self.next.save(&mut state.next())
    }
    fn restore(
        &mut self,
        entries: &mut crate::links::state::LinkEntries<'_>,
    ) -> weir_core::ProcessorResult<()> {
        self.next.restore(&mut entries.next())
    }
    fn commit(&mut self) -> weir_core::ProcessorResult<bool> {
        self.next.commit()
    }
}

#[test]
fn watermarks_go_down_the_chain_after_the_results_before_them() {
    use Message::{Item as I, Watermark as W};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    // Ordered, so that the expected output is one sequence; unordered mode shares the path.
    let spec = spec(AsyncOptions::ordered(), units(8), instant(|x| x));
    verify_processor(move |_| {
        AsyncMapHead::new(
            Arc::clone(&spec),
            Box::new(Witness {
                seen: Arc::clone(&log),
                next: emit::<u32>(),
            }),
        )
    })
    .input_events(vec![I(1u32), I(2), W(Watermark(5)), I(3)])
    .disable_progress_assertion()
    .expect_messages(vec![I(1u32), I(2), W(Watermark(5)), I(3)]);
    let seen = seen.lock().unwrap().clone();
    // Every run of the harness shows the watermark to the chain after items 1 and 2.
    for run in seen.split(|s| s == "item 3") {
        if run.is_empty() {
            continue;
        }
        let wm_at = run
            .iter()
            .position(|s| s == "wm 5")
            .expect("the chain saw the watermark");
        assert!(
            run[..wm_at].contains(&"item 1".to_string())
                && run[..wm_at].contains(&"item 2".to_string()),
            "{run:?}"
        );
    }
}

/// Emits its whole script, items and watermarks, in one call, then finishes.
struct Scripted {
    script: Vec<Message<u32>>,
}

impl Processor for Scripted {
    fn complete(&mut self, outbox: &mut Outbox) -> weir_core::ProcessorResult<bool> {
        for m in std::mem::take(&mut self.script) {
            let sent = match m {
                Message::Item(x) => outbox.port::<u32>(0).offer(x).is_ok(),
                Message::Watermark(wm) => outbox.offer_watermark(wm),
                _ => true,
            };
            assert!(sent, "the script fits in the conveyor");
        }
        Ok(true)
    }
}

/// Records items and watermarks in the order it sees them.
struct Recorder {
    seen: Arc<Mutex<Vec<Message<u32>>>>,
}

impl Processor for Recorder {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> weir_core::ProcessorResult<()> {
        let mut seen = self.seen.lock().unwrap();
        seen.extend(inbox.items::<u32>().drain(..).map(Message::Item));
        Ok(())
    }

    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        _outbox: &mut Outbox,
    ) -> weir_core::ProcessorResult<bool> {
        self.seen.lock().unwrap().push(Message::Watermark(wm));
        Ok(true)
    }
}

#[test]
fn in_a_job_items_after_a_watermark_are_never_emitted_before_it() {
    use weir_core::{Dag, Edge, Executor, ExecutorConfig, JobConfig, Vertex};
    // One worker: the source's whole script is queued before the async stage drains any of
    // it. Items 1 and 2 finish only after 3 and 4 have, so an inbox drain that ran past the
    // watermark would put 3 and 4 in the first segment, and unordered mode would emit their
    // results before it.
    static DEPS: &[(u32, u32)] = &[(1, 3), (2, 4)];
    let script = vec![
        Message::Item(1),
        Message::Item(2),
        Message::Watermark(Watermark(10)),
        Message::Item(3),
        Message::Item(4),
    ];
    let after = After::new();
    let spec = spec(AsyncOptions::unordered(), units(4), after.call(DEPS));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut dag = Dag::new();
    let s = script.clone();
    let source = dag.vertex(
        Vertex::new("scripted", move |_| Scripted { script: s.clone() })
            .emits::<u32>()
            .local_parallelism(1),
    );
    let async_map = dag.vertex(
        Vertex::new("async", move |_| head(&spec))
            .accepts::<u32>()
            .emits::<u32>()
            .local_parallelism(1),
    );
    let recorded = Arc::clone(&seen);
    let recorder = dag.vertex(
        Vertex::new("recorder", move |_| Recorder {
            seen: Arc::clone(&recorded),
        })
        .accepts::<u32>()
        .local_parallelism(1),
    );
    dag.edge(Edge::between(source, async_map));
    dag.edge(Edge::between(async_map, recorder));
    let executor = Executor::new(ExecutorConfig {
        workers: 1,
        ..Default::default()
    })
    .unwrap();
    let job = executor.submit(dag, JobConfig::default()).unwrap();
    assert!(job.wait_timeout(GENEROUS), "the job did not finish");
    job.join().unwrap();
    let seen = seen.lock().unwrap().clone();
    let wm = seen
        .iter()
        .position(|m| *m == Message::Watermark(Watermark(10)))
        .unwrap_or_else(|| panic!("no watermark 10 in {seen:?}"));
    let mut before: Vec<u32> = items(&seen[..wm]);
    let mut after_wm: Vec<u32> = items(&seen[wm..]);
    before.sort_unstable();
    after_wm.sort_unstable();
    assert_eq!((before, after_wm), (vec![10, 20], vec![30, 40]), "{seen:?}");
}

/// Two instances' held items restored into one: every item comes out before any watermark
/// above it, and the one watermark sent is the lower of the two instances' last ones (the
/// items of the later instance came out after the earlier one's higher watermark, and
/// windows downstream dropped them as late).
#[test]
fn held_items_of_several_instances_restored_into_one_never_follow_a_higher_watermark() {
    use Message::{Item as I, Watermark as W};
    let options = || AsyncOptions::ordered().snapshot_inputs();
    let stuck = spec(options(), units(8), hanging::<u32>());
    let mut entries = Vec::new();
    for (index, (items, wm, more)) in [([1, 2], 50, 3), ([4, 5], 20, 6)].into_iter().enumerate() {
        let mut p = head(&stuck);
        p.init(&ProcessorContext::new("async", index, 2, 1))
            .unwrap();
        let (mut outbox, _drains) = Outbox::for_test::<u32>(1, 64);
        let mut inbox = Inbox::of::<u32>();
        inbox.items::<u32>().extend(items);
        p.process(0, &mut inbox, &mut outbox).unwrap();
        assert!(p.try_process_watermark(Watermark(wm), &mut outbox).unwrap());
        inbox.items::<u32>().push_back(more);
        p.process(0, &mut inbox, &mut outbox).unwrap();
        let mut writer = weir_core::SnapshotWriter::new();
        assert!(p.save_to_snapshot(&mut outbox, &mut writer).unwrap());
        p.close().unwrap();
        entries.extend(writer.into_entries());
    }
    let working = spec(options(), units(8), instant(|x| x * 10));
    let mut restored = head(&working);
    restored.init(&ctx()).unwrap();
    restored.restore_from_snapshot(entries).unwrap();
    let (mut outbox, mut drains) = Outbox::for_test::<u32>(1, 64);
    let start = Instant::now();
    while !restored.complete(&mut outbox).unwrap() {
        assert!(start.elapsed() < GENEROUS, "gave up waiting");
        std::thread::yield_now();
    }
    let out = drains[0].drain_messages();
    assert_eq!(
        out,
        [I(10), I(20), I(30), I(40), I(50), I(60), W(Watermark(20))],
        "each instance's items in their order, then the lower watermark"
    );
}
