//! End-to-end tests of the core runtime: DAGs submitted to an [`Executor`] and run to the end.
//!
//! Every test waits for its job with a timeout before joining, so a hang fails the test
//! instead of stalling the suite, and nothing synchronises by sleeping.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_core::builtin_processors::{CollectSink, CountSink, FilterP, IterSource, MapP};
use weir_core::{Dag, Edge, Vertex};
use weir_core::{
    DagError, Error, Executor, ExecutorConfig, Inbox, Job, JobConfig, JobStatus, MetricsSnapshot,
    Outbox, Partitioner, Processor, ProcessorContext, ProcessorResult,
};

/// How long any job may take before the test calls it a hang.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A private executor with two cooperative workers (the build machine has two cores).
fn executor() -> Executor {
    Executor::new(ExecutorConfig {
        workers: 2,
        ..Default::default()
    })
    .expect("start an executor")
}

/// Waits for `job` with a timeout, then joins it.
fn finish(job: Job) -> Result<(), Error> {
    assert!(
        job.wait_timeout(TIMEOUT),
        "job '{}' did not end within {TIMEOUT:?}",
        job.name()
    );
    job.join()
}

/// Shared `(instance, item)` pairs recorded by a [`RecordingSink`].
type Recorded<T> = Arc<Mutex<Vec<(usize, T)>>>;

/// Records every item it receives with its own global index.
struct RecordingSink<T> {
    instance: usize,
    target: Recorded<T>,
}

impl<T: Send + Clone + 'static> RecordingSink<T> {
    fn supplier() -> (
        impl Fn(&ProcessorContext) -> RecordingSink<T> + Send + Sync + 'static,
        Recorded<T>,
    ) {
        let target: Recorded<T> = Arc::new(Mutex::new(Vec::new()));
        let handle = Arc::clone(&target);
        let supplier = move |ctx: &ProcessorContext| RecordingSink {
            instance: ctx.global_index(),
            target: Arc::clone(&target),
        };
        (supplier, handle)
    }
}

impl<T: Send + Clone + 'static> Processor for RecordingSink<T> {
    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let mut target = self.target.lock().unwrap();
        target.extend(
            inbox
                .items::<T>()
                .drain(..)
                .map(|item| (self.instance, item)),
        );
        Ok(())
    }
}

/// Emits 0, 1, 2, ... forever; never completes on its own.
struct EndlessSource {
    next: u64,
}

impl Processor for EndlessSource {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let port = outbox.port::<u64>(0);
        while port.offer(self.next).is_ok() {
            self.next += 1;
        }
        Ok(false)
    }
}

fn endless_source() -> Vertex {
    Vertex::new("endless", |_| EndlessSource { next: 0 })
        .emits::<u64>()
        .local_parallelism(1)
}

/// The items of instance `index` out of `count` when `0..n` is split between instances.
fn share(n: u64, index: usize, count: usize) -> std::ops::Range<u64> {
    let (index, count) = (index as u64, count as u64);
    n * index / count..n * (index + 1) / count
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort_unstable();
    v
}

/// Emits `0..n`, counting every accepted offer.
struct CountingSource {
    next: u64,
    n: u64,
    emitted: Arc<AtomicU64>,
}

impl Processor for CountingSource {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let port = outbox.port::<u64>(0);
        while self.next < self.n {
            if port.offer(self.next).is_err() {
                return Ok(false);
            }
            self.next += 1;
            self.emitted.fetch_add(1, Ordering::SeqCst);
        }
        Ok(true)
    }
}

mod backpressure;
mod failures;
mod parking;
mod routing;
mod watermarks;
