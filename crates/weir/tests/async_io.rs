//! Async stages and the reactive bridges in whole pipelines, on the shared executor.
//!
//! Nothing here waits on a timer for synchronisation: a test that must see something happen
//! on another thread waits for a message, with a generous limit that only a hang would hit.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use weir::async_io::{AsyncOptions, ServiceFactory, runtime};
use weir::prelude::*;
use weir::sinks::reactive::StreamError;

const GENEROUS: Duration = Duration::from_secs(60);

/// Counts calls in flight, and the most at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl InFlight {
    fn enter(self: &Arc<Self>) -> impl Drop {
        struct Leave(Arc<InFlight>);
        impl Drop for Leave {
            fn drop(&mut self) {
                self.0.now.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        Leave(Arc::clone(self))
    }
}

#[test]
fn map_async_keeps_input_order_and_its_capacity() {
    let inflight = Arc::new(InFlight::default());
    let i = Arc::clone(&inflight);
    let p = Pipeline::new();
    let results = p
        .read_from(sources::collection::items(0..500u32))
        .map_async(AsyncOptions::ordered().capacity(5), move |x: u32| {
            let i = Arc::clone(&i);
            async move {
                let _inside = i.enter();
                // Later items tend to finish first.
                tokio::time::sleep(Duration::from_micros(u64::from(50 - x % 50))).await;
                Ok::<_, Infallible>(vec![x, x])
            }
        })
        .local_parallelism(1)
        .results(16)
        .unwrap();
    let got: Vec<u32> = results.map(Result::unwrap).collect();
    assert_eq!(got, (0..500u32).flat_map(|x| [x, x]).collect::<Vec<_>>());
    assert!(inflight.max.load(Ordering::SeqCst) <= 5);
}

#[test]
fn unordered_batches_at_default_parallelism_lose_nothing() {
    let p = Pipeline::new();
    let results =
        p.read_from(sources::collection::items(0..2000u64))
            .rebalance()
            .map_async_batched(
                32,
                Duration::from_millis(1),
                3,
                AsyncOptions::unordered(),
                |batch: Vec<u64>| async move {
                    Ok::<_, Infallible>(batch.iter().map(|x| x * 2).collect())
                },
            )
            .results(64)
            .unwrap();
    let mut got: Vec<u64> = results.map(Result::unwrap).collect();
    got.sort_unstable();
    assert_eq!(got, (0..2000u64).map(|x| x * 2).collect::<Vec<_>>());
}

#[test]
fn a_user_error_fails_the_job_without_waiting_for_the_other_items() {
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let p = Pipeline::new();
        let (sink, _out) = sinks::collection::list::<u32>();
        p.read_from(sources::collection::items(0..20u32))
            .map_async(
                AsyncOptions::ordered().timeout(GENEROUS),
                |x: u32| async move {
                    if x == 3 {
                        return Err(format!("no such id {x}"));
                    }
                    // Every other call never finishes: waiting for them would hang.
                    std::future::pending::<()>().await;
                    Ok(vec![x])
                },
            )
            .write_to(sink);
        let _ = done_tx.send(p.run());
    });
    let outcome = done_rx.recv_timeout(GENEROUS).expect("the job ended");
    let e = outcome.unwrap_err().to_string();
    assert!(
        e.contains("item 3 failed after 1 attempt(s): no such id 3"),
        "{e}"
    );
}

#[test]
fn a_panic_in_the_async_function_fails_the_job_as_a_panic() {
    // With a generous timeout and a fallback for timeouts, a panic must neither wait out the
    // timeout nor be replaced by the fallback, nor be retried.
    let calls = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = mpsc::channel();
    let counted = Arc::clone(&calls);
    std::thread::spawn(move || {
        let p = Pipeline::new();
        let (sink, _out) = sinks::collection::list::<u32>();
        p.read_from(sources::collection::items(0..20u32))
            .map_async(
                AsyncOptions::unordered()
                    .timeout(GENEROUS)
                    .on_timeout(|x: u32| vec![x])
                    .retry(RetryStrategy::fixed(Duration::ZERO, 5)),
                move |x: u32| {
                    let counted = Arc::clone(&counted);
                    async move {
                        if x == 7 {
                            counted.fetch_add(1, Ordering::SeqCst);
                            panic!("cannot score item {x}");
                        }
                        std::future::pending::<()>().await;
                        Ok::<_, std::convert::Infallible>(vec![x])
                    }
                },
            )
            .write_to(sink);
        let _ = done_tx.send(p.run());
    });
    let outcome = done_rx.recv_timeout(GENEROUS).expect("the job ended");
    let e = outcome.unwrap_err().to_string();
    assert!(
        e.contains(
            "item 7 failed after 1 attempt(s): the async call panicked: cannot score item 7"
        ),
        "{e}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "a panic is not retried");
}

#[test]
fn a_service_factory_builds_one_service_for_every_instance() {
    let created = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&created);
    let service = ServiceFactory::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Infallible>(10u64)
    });
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::collection::items(0..100u64))
        .rebalance()
        .map_async_using(
            &service,
            AsyncOptions::unordered(),
            |factor: &u64, x: u64| {
                let factor = *factor;
                async move { Ok::<_, Infallible>(Some(x * factor)) }
            },
        )
        .map_async_batched_using(
            &service,
            8,
            Duration::from_millis(1),
            2,
            AsyncOptions::unordered(),
            |factor: &u64, b: Vec<u64>| {
                let factor = *factor;
                async move { Ok::<_, Infallible>(b.into_iter().map(|x| x + factor).collect()) }
            },
        )
        .write_to(sink);
    p.submit(
        &Executor::shared(),
        JobConfig::default().with_default_parallelism(2),
    )
    .unwrap()
    .join()
    .unwrap();
    let mut got = out.take();
    got.sort_unstable();
    assert_eq!(got, (0..100u64).map(|x| x * 10 + 10).collect::<Vec<_>>());
    assert_eq!(
        created.load(Ordering::SeqCst),
        1,
        "four instances, one service"
    );
}

#[test]
fn bad_async_settings_are_refused_before_anything_runs() {
    let p = Pipeline::new();
    let (sink, _) = sinks::collection::list::<u8>();
    p.read_from(sources::collection::items(vec![1u8]))
        .map_async(AsyncOptions::ordered().capacity(0), |x: u8| async move {
            Ok::<_, Infallible>(Some(x))
        })
        .write_to(sink);
    let e = p.run().unwrap_err().to_string();
    assert_eq!(e, "stage 'map-async': the capacity must be at least 1");
}

/// An endless stream of numbers that counts its polls and reports when it is dropped.
struct Endless {
    next: u64,
    polls: Arc<AtomicUsize>,
    dropped: mpsc::Sender<()>,
}

impl Stream for Endless {
    type Item = u64;
    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<u64>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        self.next += 1;
        Poll::Ready(Some(self.next))
    }
}

impl Drop for Endless {
    fn drop(&mut self) {
        let _ = self.dropped.send(());
    }
}

fn endless() -> (Endless, Arc<AtomicUsize>, mpsc::Receiver<()>) {
    let polls = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    (
        Endless {
            next: 0,
            polls: Arc::clone(&polls),
            dropped: tx,
        },
        polls,
        rx,
    )
}

/// What a source may have pulled beyond what was consumed: its batch (1024), the sink's
/// backlog (256) and the channel.
const BUFFERS: usize = 1024 + 256;

#[test]
fn a_stream_source_is_pulled_on_demand_and_a_dropped_consumer_stops_it() {
    let (stream, polls, dropped) = endless();
    let p = Pipeline::new();
    let (sink, mut results) = sinks::reactive::channel::<u64>(4);
    p.read_from(sources::reactive::from_stream(stream))
        .write_to(sink);
    let job = p.submit(&Executor::shared(), JobConfig::default()).unwrap();
    let rt = runtime().unwrap();
    let first: Vec<u64> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..10 {
            v.push(results.next().await.unwrap().unwrap());
        }
        v
    });
    assert_eq!(first, (1..=10).collect::<Vec<_>>());
    assert!(
        polls.load(Ordering::SeqCst) <= 10 + 4 + BUFFERS,
        "an endless stream is pulled only as far as there is room: {} polls",
        polls.load(Ordering::SeqCst)
    );
    drop(results);
    dropped
        .recv_timeout(GENEROUS)
        .expect("cancelling reached the stream");
    let e = job.join().unwrap_err().to_string();
    assert!(e.contains("the consumer of the results went away"), "{e}");
}

#[test]
fn a_stream_sink_ends_once_and_reports_a_failed_job_as_an_error() {
    let rt = runtime().unwrap();
    // Completed: the items, then the end, for good.
    let p = Pipeline::new();
    let (sink, mut results) = sinks::reactive::channel::<u8>(2);
    p.read_from(sources::collection::items(vec![1u8, 2, 3]))
        .write_to(sink);
    let job = p.submit(&Executor::shared(), JobConfig::default()).unwrap();
    let all: Vec<_> = rt.block_on(async {
        let mut v = Vec::new();
        while let Some(item) = results.next().await {
            v.push(item);
        }
        assert!(results.next().await.is_none(), "nothing after the end");
        v
    });
    assert_eq!(all, [Ok(1), Ok(2), Ok(3)]);
    job.join().unwrap();

    // Failed: the items that made it, one error, the end.
    let p = Pipeline::new();
    let (sink, mut results) = sinks::reactive::channel::<u8>(8);
    let failing = futures::stream::iter(vec![Ok(1u8), Err("upstream broke")]);
    p.read_from(sources::reactive::from_try_stream(failing))
        .write_to(sink);
    let job = p.submit(&Executor::shared(), JobConfig::default()).unwrap();
    let all: Vec<_> = rt.block_on(async {
        let mut v = Vec::new();
        while let Some(item) = results.next().await {
            v.push(item);
        }
        v
    });
    match all.last() {
        Some(Err(StreamError::JobAborted { cause })) => {
            assert!(cause.contains("upstream broke"), "{cause}")
        }
        other => panic!("expected the job's error last, got {other:?}"),
    }
    assert_eq!(all.iter().filter(|r| r.is_err()).count(), 1);
    assert!(
        job.join()
            .unwrap_err()
            .to_string()
            .contains("upstream broke")
    );
}

#[test]
fn the_results_iterator_yields_an_upstream_error_as_an_item() {
    let p = Pipeline::new();
    let failing = futures::stream::iter(vec![Ok(1u8), Ok(2), Err("disk on fire")]);
    let results: Vec<_> = p
        .read_from(sources::reactive::from_try_stream(failing))
        .results(2)
        .unwrap()
        .collect();
    let (errors, items): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_err);
    assert_eq!(errors.len(), 1, "one error, then the end");
    assert!(
        errors[0]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("disk on fire")
    );
    // The items read before the error, even in the same read, are delivered before it.
    let items: Vec<u8> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(items, [1, 2]);
}

#[test]
fn dropping_the_results_iterator_cancels_the_job() {
    let (stream, _polls, dropped) = endless();
    let p = Pipeline::new();
    let mut results = p
        .read_from(sources::reactive::from_stream(stream))
        .map(|x: u64| x * 2)
        .results(4)
        .unwrap();
    let cancel = results.cancel_handle();
    // The map runs on every worker, so the order is not set.
    let first: Vec<u64> = results.by_ref().take(5).map(Result::unwrap).collect();
    assert_eq!(first.len(), 5);
    assert!(first.iter().all(|x| x % 2 == 0));
    drop(results);
    dropped
        .recv_timeout(GENEROUS)
        .expect("the job stopped and dropped its source");
    cancel.cancel(); // harmless once the job ended
}

#[test]
fn a_result_stream_reports_a_failure_of_another_branch_after_its_own_ends() {
    let rt = weir::async_io::runtime().unwrap();
    let p = Pipeline::new();
    let (sink, mut results) = sinks::reactive::channel::<u8>(8);
    // This branch completes at once...
    p.read_from(sources::collection::items(vec![1u8, 2, 3]))
        .write_to(sink);
    // ...and this one fails only when the test says so, after the first has ended.
    let (fail, failures) = tokio::sync::mpsc::unbounded_channel::<Result<u8, &str>>();
    let other = futures::stream::unfold(failures, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    p.read_from(sources::reactive::from_try_stream(other))
        .write_to(sinks::collection::discard());
    let job = p.submit(&Executor::shared(), JobConfig::default()).unwrap();
    let all: Vec<_> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(results.next().await.expect("three items"));
        }
        fail.send(Err("the other branch broke")).unwrap();
        while let Some(item) = results.next().await {
            v.push(item);
        }
        v
    });
    assert_eq!(all[..3], [Ok(1), Ok(2), Ok(3)]);
    match &all[3..] {
        [Err(StreamError::JobAborted { cause })] => {
            assert!(cause.contains("the other branch broke"), "{cause}")
        }
        other => panic!("expected one error naming the other branch's cause, got {other:?}"),
    }
    assert!(job.join().is_err());
}

#[test]
fn a_reactive_source_refuses_a_second_run() {
    let p = Pipeline::new();
    let (sink, out) = sinks::collection::list();
    p.read_from(sources::reactive::from_stream(futures::stream::iter(vec![
        1u8, 2,
    ])))
    .write_to(sink);
    p.run().unwrap();
    assert_eq!(out.len(), 2);
    let e = p.run().unwrap_err();
    assert!(e.to_string().contains("already consumed"), "{e}");
}
