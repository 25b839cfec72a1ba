//! Services polled by the executor's workers ([`Executor::attach_worker_services`]).
//!
//! A hang fails with a timeout instead of stalling the suite; nothing synchronises by sleeping.

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::time::Duration;

use weir_core::processors::{CollectSink, IterSource};
use weir_core::{
    Dag, Edge, Error, Executor, ExecutorConfig, JobConfig, Progress, Vertex, WorkerService,
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

fn attach_echoes(executor: &Executor) -> Attached {
    let (answer_tx, answers) = channel();
    let mut requests = Vec::new();
    let (dropped_tx, dropped) = channel();
    let services = (0..executor.workers())
        .map(|_| {
            let (tx, rx) = channel();
            requests.push(tx);
            Box::new(Echo {
                requests: rx,
                answers: answer_tx.clone(),
                dropped: dropped_tx.clone(),
            }) as Box<dyn WorkerService>
        })
        .collect();
    executor.attach_worker_services(services).unwrap();
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
    let mut dag = Dag::new();
    let source = dag.vertex(
        Vertex::new("numbers", |_| IterSource::new(0..10_000u64))
            .emits::<u64>()
            .local_parallelism(1),
    );
    let (supplier, collected) = CollectSink::<u64>::supplier();
    let sink = dag.vertex(Vertex::new("collect", supplier).accepts::<u64>());
    dag.edge(Edge::between(source, sink));
    let job = executor.submit(dag, JobConfig::default()).unwrap();
    for (i, tx) in echo.requests.iter().enumerate() {
        tx.send(i as u64).unwrap();
        wakers[i].wake();
        assert_eq!(echo.answers.recv_timeout(TIMEOUT).unwrap().0, i as u64);
    }
    assert!(job.wait_timeout(TIMEOUT));
    job.join().unwrap();
    assert_eq!(collected.lock().unwrap().len(), 10_000);

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
