//! Partitioned maps ([`weir_maps`], re-exported here whole) whose partition owners are the
//! executor's workers: the shard-per-core model.
//!
//! [`on_executor`] starts a [`MapService`] with one owner per worker of an [`Executor`]:
//! owner `i` is polled by worker `i` (thread `weir-worker-{i}`) on every pass of its loop,
//! beside that worker's tasklets, through the executor's worker-service hook
//! ([`Executor::attach_worker_services`]). [`shared`] is the one for [`Executor::shared`],
//! which [`Pipeline::run`](crate::Pipeline::run) uses. A pipeline over such a map runs its
//! keyed stages at the same partition split as the owners (the partition table's initial
//! assignment is the one partitioned edges use), so instance `i` of a stage at the default
//! parallelism runs on some worker while the owner of its partitions is worker `i`.
//!
//! ```
//! use weir::{Pipeline, sinks, sources};
//!
//! let service = weir::maps::shared();
//! let squares = service.map::<u64, u64>("maps-doc-squares").unwrap();
//! let p = Pipeline::new();
//! p.read_from(sources::collection::items((0..100u64).collect::<Vec<_>>()))
//!     .map(|n| (n, n * n))
//!     .write_to(sinks::map(&squares));
//! p.run().unwrap();
//! assert_eq!(squares.get(&9).unwrap(), Some(81));
//! // The owner of key 9's partition is a worker of the shared executor.
//! let thread = service
//!     .execute_on_key_owner(&9u64, |_| std::thread::current().name().map(str::to_string))
//!     .wait()
//!     .unwrap();
//! assert!(thread.unwrap().starts_with("weir-worker-"));
//! ```
//!
//! # Blocking calls on a worker are refused
//!
//! A worker that runs an owner must never wait for a map's answer: the answer may have to come
//! from the owner that this very worker runs. So every blocking map call made on such a
//! worker — in an entry processor, a task at a key owner, or any pipeline stage — is refused
//! with [`MapError::CalledFromOwner`]. Code on a worker uses the `_async` forms and polls the
//! [`Pending`] ([`Pending::try_take`]) on its next call; the map stages do so. From any other
//! thread (the one that submits a job, `init` included) the blocking forms work as usual.
//!
//! # Lifetime
//!
//! The owners run while the executor does. A map service does not keep its executor alive:
//! once the executor's last handle is dropped and its workers stop, calls fail with
//! [`MapError::ShutDown`] (calls still queued then fail with [`MapError::TaskPanicked`]).
//! When the service and its last map handle are dropped first, each owner stops and its worker
//! drops it.

use std::sync::OnceLock;

use weir_core::{Executor, Progress, WorkerService};
pub use weir_maps::*;

/// One owner of a map service, polled by the executor worker it belongs to.
struct OwnerOnWorker(OwnerDriver);

impl WorkerService for OwnerOnWorker {
    #[inline]
    fn poll(&mut self) -> Progress {
        match self.0.poll() {
            OwnerPoll::Progress => Progress::MadeProgress,
            OwnerPoll::Idle => Progress::NoProgress,
            OwnerPoll::Stopped => Progress::Done,
        }
    }

    fn name(&self) -> std::borrow::Cow<'static, str> {
        format!("map owner {}", self.0.owner()).into()
    }
}

/// Starts a map service over the default 271 partitions whose owners are `executor`'s
/// workers, one owner per worker: owner `i` runs on worker `i`. A message to an owner wakes
/// its worker if it is parked. See the [module docs](self) for what may block where.
///
/// Cost: no thread; each worker pays one queue check per pass of its loop.
///
/// # Errors
/// None in practice: the executor is given one owner per worker, which is what it requires
/// ([`weir_core::Error::WorkerServiceCount`] otherwise).
pub fn on_executor(executor: &Executor) -> Result<MapService, weir_core::Error> {
    let (service, drivers) = MapService::driven(executor.workers());
    let services = drivers
        .into_iter()
        .zip(executor.worker_wakers())
        .map(|(driver, waker)| {
            driver.set_waker(move || waker.wake());
            Box::new(OwnerOnWorker(driver)) as Box<dyn WorkerService>
        })
        .collect();
    executor.attach_worker_services(services)?;
    Ok(service)
}

/// The map service whose owners are the workers of [`Executor::shared`], started on first
/// use and kept for the life of the process: the one to use with
/// [`Pipeline::run`](crate::Pipeline::run). Its maps are named process-wide.
///
/// # Panics
/// If the shared executor cannot be started.
pub fn shared() -> MapService {
    static SHARED: OnceLock<MapService> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            on_executor(&Executor::shared()).expect("one owner per worker of the shared executor")
        })
        .clone()
}
