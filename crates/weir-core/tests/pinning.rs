//! Worker pinning ([`ExecutorConfig::pinning`]): what an executor reports matches the CPU
//! mask each worker thread really has, read on the worker itself by a worker service.

use std::sync::mpsc::{Sender, channel};
use std::time::Duration;

use weir_core::pinning::{allowed_cpus, current_thread_cpus, worker_cpus};
use weir_core::{Executor, ExecutorConfig, Progress, WorkerPinning, WorkerService};

/// How long the workers may take to answer before the test calls it a lost wake-up.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Reports, once, the worker's index and the CPUs its thread may run on.
struct ReportMask {
    worker: usize,
    out: Sender<(usize, Vec<usize>)>,
}

impl WorkerService for ReportMask {
    fn poll(&mut self) -> Progress {
        let _ = self.out.send((self.worker, current_thread_cpus()));
        Progress::Done
    }
}

/// Each worker's CPU mask, by worker index, as the worker itself reads it.
fn masks(executor: &Executor) -> Vec<Vec<usize>> {
    let (tx, rx) = channel();
    let workers = executor.workers();
    let services: Vec<Box<dyn WorkerService>> = (0..workers)
        .map(|worker| {
            Box::new(ReportMask {
                worker,
                out: tx.clone(),
            }) as Box<dyn WorkerService>
        })
        .collect();
    executor.attach_worker_services(services).unwrap();
    let mut masks = vec![Vec::new(); workers];
    for _ in 0..workers {
        let (worker, mask) = rx.recv_timeout(TIMEOUT).expect("every worker reports");
        masks[worker] = mask;
    }
    masks
}

fn executor(workers: usize, pinning: WorkerPinning) -> Executor {
    Executor::new(ExecutorConfig {
        workers,
        pinning,
        ..ExecutorConfig::default()
    })
    .expect("start an executor")
}

#[cfg(target_os = "linux")]
#[test]
fn each_worker_runs_on_the_cpu_the_executor_reports() {
    let allowed = allowed_cpus();
    let n = allowed.len();
    // One worker per CPU under `Auto`, more workers than CPUs under `Always`, and a single
    // worker (pinned only when asked).
    for (workers, pinning) in [
        (n, WorkerPinning::Auto),
        (n + 1, WorkerPinning::Always),
        (1, WorkerPinning::Always),
        (1, WorkerPinning::Auto),
        (n, WorkerPinning::Never),
    ] {
        let executor = executor(workers, pinning);
        let expected = worker_cpus(pinning, workers, &allowed);
        assert_eq!(
            executor.worker_cpus(),
            expected,
            "{workers} workers, {pinning}"
        );
        for (worker, mask) in masks(&executor).into_iter().enumerate() {
            match expected[worker] {
                Some(cpu) => assert_eq!(mask, vec![cpu], "worker {worker}, {pinning}"),
                None => assert_eq!(mask, allowed, "worker {worker}, {pinning}"),
            }
        }
    }
}

#[test]
fn the_default_is_auto() {
    assert_eq!(ExecutorConfig::default().pinning, WorkerPinning::Auto);
}
