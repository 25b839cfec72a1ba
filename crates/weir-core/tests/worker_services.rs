//! Services polled by the executor's workers ([`Executor::attach_worker_services`]).
//!
//! A hang fails with a timeout instead of stalling the suite; nothing synchronises by sleeping.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_core::builtin_processors::{CollectSink, IterSource};
use weir_core::{
    Dag, Edge, Error, Executor, ExecutorConfig, Job, JobConfig, Progress, Vertex, WorkerService,
};

/// How long an answer may take before the test calls it a lost wake-up.
const TIMEOUT: Duration = Duration::from_secs(20);

fn executor(workers: usize) -> Executor {
    Executor::new(ExecutorConfig {
        workers,
        ..ExecutorConfig::default()
    })
    .expect("start an executor")
}

/// Answers each request with the name of the thread that polled it.
struct Echo {
    requests: Receiver<u64>,
    answers: Sender<(u64, String)>,
    dropped: Sender<()>,
}

impl WorkerService for Echo {
    fn poll(&mut self) -> Progress {
        match self.requests.try_recv() {
            Ok(n) => {
                let name = std::thread::current().name().unwrap_or("").to_string();
                let _ = self.answers.send((n, name));
                Progress::MadeProgress
            }
            Err(TryRecvError::Empty) => Progress::NoProgress,
            Err(TryRecvError::Disconnected) => Progress::Done,
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.dropped.send(());
    }
}

struct Attached {
    requests: Vec<Sender<u64>>,
    answers: Receiver<(u64, String)>,
    dropped: Receiver<()>,
}

/// Attaches one service per worker, each made by `make` from its request queue and the
/// sender it signals its drop on; returns the request queues and the drop signal.
fn attach(
    executor: &Executor,
    make: impl Fn(Receiver<u64>, Sender<()>) -> Box<dyn WorkerService>,
) -> (Vec<Sender<u64>>, Receiver<()>) {
    let (dropped_tx, dropped) = channel();
    let mut requests = Vec::new();
    let services = (0..executor.workers())
        .map(|_| {
            let (tx, rx) = channel();
            requests.push(tx);
            make(rx, dropped_tx.clone())
        })
        .collect();
    executor.attach_worker_services(services).unwrap();
    (requests, dropped)
}

fn attach_echoes(executor: &Executor) -> Attached {
    let (answer_tx, answers) = channel();
    let (requests, dropped) = attach(executor, |requests, dropped| {
        Box::new(Echo {
            requests,
            answers: answer_tx.clone(),
            dropped,
        })
    });
    Attached {
        requests,
        answers,
        dropped,
    }
}

#[test]
fn a_worker_without_tasklets_polls_its_service_on_its_own_thread() {
    let executor = executor(2);
    let echo = attach_echoes(&executor);
    let wakers = executor.worker_wakers();
    for (i, tx) in echo.requests.iter().enumerate() {
        tx.send(i as u64).unwrap();
        wakers[i].wake();
        let (n, thread) = echo.answers.recv_timeout(TIMEOUT).expect("answered");
        assert_eq!(n, i as u64);
        assert_eq!(thread, format!("weir-worker-{i}"));
        assert_eq!(wakers[i].index(), i);
        assert_eq!(
            wakers[i].thread().and_then(|t| t.name()),
            Some(thread.as_str())
        );
    }
}

#[test]
fn a_request_to_a_parked_worker_is_never_lost() {
    // Each round trip leaves the worker idle, so it yields, then parks with no timeout (it has
    // no tasklets): a lost wake-up would leave a request unanswered.
    let executor = executor(1);
    let echo = attach_echoes(&executor);
    let waker = &executor.worker_wakers()[0];
    for n in 0..20_000u64 {
        echo.requests[0].send(n).unwrap();
        waker.wake();
        let (got, _) = echo
            .answers
            .recv_timeout(TIMEOUT)
            .unwrap_or_else(|_| panic!("request {n} was not answered: a lost wake-up"));
        assert_eq!(got, n);
    }
}

#[test]
fn a_service_shares_its_worker_with_tasklets_and_a_done_service_is_dropped() {
    let executor = executor(2);
    let echo = attach_echoes(&executor);
    let wakers = executor.worker_wakers();
    let (job, collected) = submit_numbers(&executor, || 0..10_000);
    for (i, tx) in echo.requests.iter().enumerate() {
        tx.send(i as u64).unwrap();
        wakers[i].wake();
        assert_eq!(echo.answers.recv_timeout(TIMEOUT).unwrap().0, i as u64);
    }
    assert_eq!(finished(job, &collected), 10_000);

    // Closing a service's queue makes it answer Done: its worker drops it.
    let Attached {
        requests, dropped, ..
    } = echo;
    drop(requests);
    for w in &wakers {
        w.wake();
    }
    for _ in &wakers {
        dropped
            .recv_timeout(TIMEOUT)
            .expect("a done service is dropped by its worker");
    }
}

#[test]
fn services_must_be_one_per_worker() {
    let executor = executor(2);
    let err = executor.attach_worker_services(Vec::new()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::WorkerServiceCount {
                given: 0,
                workers: 2
            }
        ),
        "{err}"
    );
}

/// A service that panics in `poll` at its first request and, if told so, in its `Drop`.
struct Faulty {
    requests: Receiver<u64>,
    panic_in_drop: bool,
    dropped: Sender<()>,
}

impl WorkerService for Faulty {
    fn poll(&mut self) -> Progress {
        match self.requests.try_recv() {
            Ok(n) => panic!("faulty service got request {n}"),
            Err(TryRecvError::Empty) => Progress::NoProgress,
            Err(TryRecvError::Disconnected) => Progress::Done,
        }
    }

    fn name(&self) -> std::borrow::Cow<'static, str> {
        "faulty".into()
    }
}

impl Drop for Faulty {
    fn drop(&mut self) {
        let _ = self.dropped.send(());
        if self.panic_in_drop {
            panic!("faulty service panicked in drop");
        }
    }
}

/// Attaches one [`Faulty`] per worker; returns their request queues and the drop signal.
fn attach_faulty(executor: &Executor, panic_in_drop: bool) -> (Vec<Sender<u64>>, Receiver<()>) {
    attach(executor, |requests, dropped| {
        Box::new(Faulty {
            requests,
            panic_in_drop,
            dropped,
        })
    })
}

/// Submits a job of a one-instance source of the numbers `numbers()` gives into a sink;
/// returns the job and what the sink collects.
fn submit_numbers<I>(
    executor: &Executor,
    numbers: impl Fn() -> I + Send + Sync + 'static,
) -> (Job, Arc<Mutex<Vec<u64>>>)
where
    I: Iterator<Item = u64> + Send + 'static,
{
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("numbers", move |_| IterSource::new(numbers()))
            .emits::<u64>()
            .local_parallelism(1),
    );
    let (supplier, collected) = CollectSink::<u64>::supplier();
    let sink = dag.vertex(Vertex::new("collect", supplier).accepts::<u64>());
    dag.edge(Edge::between(source, sink));
    (
        executor.submit(dag, JobConfig::default()).unwrap(),
        collected,
    )
}

/// Waits for `job` to succeed; returns how many numbers its sink collected.
fn finished(job: Job, collected: &Mutex<Vec<u64>>) -> usize {
    assert!(job.wait_timeout(TIMEOUT), "the job hung");
    job.join().expect("the job succeeds");
    collected.lock().unwrap().len()
}

/// Runs a job of `n` numbers through a source and a sink; returns how many the sink collected.
fn run_numbers(executor: &Executor, n: u64) -> usize {
    let (job, collected) = submit_numbers(executor, move || 0..n);
    finished(job, &collected)
}

/// Drops the executor on another thread and waits for its worker threads to be joined: a
/// worker that died or hangs shows as a timeout here, not as a stalled suite.
fn shut_down(executor: Executor) {
    let (done_tx, done) = channel();
    std::thread::spawn(move || {
        drop(executor);
        let _ = done_tx.send(());
    });
    done.recv_timeout(TIMEOUT)
        .expect("the executor's workers stopped");
}

fn a_panicking_service_is_dropped_and_its_worker_goes_on(panic_in_drop: bool) {
    let executor = executor(1);
    let (faulty, dropped) = attach_faulty(&executor, panic_in_drop);
    let echo = attach_echoes(&executor);
    let waker = &executor.worker_wakers()[0];

    // A job whose source runs on the worker until the service has panicked and been
    // dropped, so its tasklets are there when the panic happens and must go on after it.
    let service_gone = Arc::new(AtomicBool::new(false));
    let emitted = Arc::new(AtomicU64::new(0));
    let (started_tx, started) = sync_channel(1);
    let (gone, count) = (Arc::clone(&service_gone), Arc::clone(&emitted));
    let (job, collected) = submit_numbers(&executor, move || {
        let (gone, count, started) = (Arc::clone(&gone), Arc::clone(&count), started_tx.clone());
        (0u64..).take_while(move |_| {
            let _ = started.try_send(());
            let more = !gone.load(Ordering::Acquire);
            count.fetch_add(u64::from(more), Ordering::Relaxed);
            more
        })
    });
    started.recv_timeout(TIMEOUT).expect("the source runs");
    faulty[0].send(7).unwrap();
    waker.wake();
    dropped
        .recv_timeout(TIMEOUT)
        .expect("the panicking service is dropped");
    service_gone.store(true, Ordering::Release);
    // A service's panic fails no job.
    let got = finished(job, &collected) as u64;
    let emitted = emitted.load(Ordering::Relaxed);
    assert!(emitted > 0);
    assert_eq!(got, emitted);

    // The same worker thread still serves its other service and new jobs.
    echo.requests[0].send(1).unwrap();
    waker.wake();
    let (n, thread) = echo.answers.recv_timeout(TIMEOUT).expect("answered");
    assert_eq!((n, thread.as_str()), (1, "weir-worker-0"));
    assert_eq!(run_numbers(&executor, 10_000), 10_000);

    // The dropped service is polled no more: a request to it goes nowhere.
    assert!(faulty[0].send(8).is_err());
    shut_down(executor);
}

#[test]
fn a_service_that_panics_in_poll_is_dropped_and_its_worker_keeps_running_tasklets() {
    a_panicking_service_is_dropped_and_its_worker_goes_on(false);
}

#[test]
fn a_service_that_panics_in_poll_and_in_drop_leaves_its_worker_running() {
    a_panicking_service_is_dropped_and_its_worker_goes_on(true);
}

#[test]
fn a_done_service_that_panics_in_drop_leaves_its_worker_running() {
    let executor = executor(2);
    let (faulty, dropped) = attach_faulty(&executor, true);
    let echo = attach_echoes(&executor);
    let wakers = executor.worker_wakers();
    // Closing the queues makes both services answer Done; both panic as they are dropped.
    drop(faulty);
    for w in &wakers {
        w.wake();
    }
    for _ in &wakers {
        dropped.recv_timeout(TIMEOUT).expect("dropped");
    }
    for (i, tx) in echo.requests.iter().enumerate() {
        tx.send(i as u64).unwrap();
        wakers[i].wake();
        assert_eq!(echo.answers.recv_timeout(TIMEOUT).unwrap().0, i as u64);
    }
    assert_eq!(run_numbers(&executor, 10_000), 10_000);
    shut_down(executor);
}

#[test]
fn a_service_that_panics_in_drop_at_shutdown_does_not_hang_the_shutdown() {
    let executor = executor(2);
    let (_faulty, dropped) = attach_faulty(&executor, true);
    assert_eq!(run_numbers(&executor, 1_000), 1_000);
    shut_down(executor);
    for _ in 0..2 {
        dropped.recv_timeout(TIMEOUT).expect("dropped at shutdown");
    }
}
