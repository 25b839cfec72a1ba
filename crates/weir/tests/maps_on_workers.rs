//! Partitioned maps whose owners are an executor's workers ([`weir::maps::on_executor`]): the
//! map test cases of `weir-maps`, run with owners on workers, and what is particular to it:
//! the owner is a worker thread, a call to a parked worker is answered, a blocking call from
//! a worker is refused, and moving partitions under a running pipeline loses nothing.
//!
//! Waits have timeouts so that a hang fails the test; nothing synchronises by sleeping.

use std::sync::OnceLock;
use std::time::Duration;

use weir::core::{Executor, ExecutorConfig, JobConfig};
use weir::maps::{MapError, MapService};
use weir::{Pipeline, sinks, sources};

/// How long a job may take before the test calls it a hang.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The executor of `workers` workers, one per worker count, shared by the tests of this file:
/// a map service does not keep its executor alive.
fn executor(workers: usize) -> Executor {
    static EXECUTORS: [OnceLock<Executor>; 8] = [const { OnceLock::new() }; 8];
    EXECUTORS[workers]
        .get_or_init(|| {
            Executor::new(ExecutorConfig {
                workers,
                ..ExecutorConfig::default()
            })
            .expect("an executor starts")
        })
        .clone()
}

/// A map service whose `owners` owners are the workers of an executor of that many workers.
fn service(owners: usize) -> MapService {
    weir::maps::on_executor(&executor(owners)).expect("one owner per worker")
}

#[path = "../../weir-maps/tests/common/cases.rs"]
mod cases;

#[test]
fn the_owner_of_a_partition_is_the_executor_worker_of_its_index() {
    let service = service(3);
    for key in 0..200u64 {
        let (owner, thread) = service
            .execute_on_key_owner(&key, |view| {
                let thread = std::thread::current().name().map(str::to_string);
                (view.owner(), thread)
            })
            .wait()
            .unwrap();
        assert_eq!(owner, service.owner_of(&key));
        assert_eq!(thread, Some(format!("weir-worker-{owner}")), "key {key}");
    }
}

#[test]
fn a_call_to_a_parked_worker_is_answered() {
    // A worker with no tasklets parks without a timeout once its owner is idle: each call
    // below finds it parked (or on its way to park), and a lost wake-up would hang it.
    let executor = Executor::new(ExecutorConfig {
        workers: 1,
        ..ExecutorConfig::default()
    })
    .unwrap();
    let service = weir::maps::on_executor(&executor).unwrap();
    let map = service.map::<u64, u64>("m").unwrap();
    let calls = 5_000u64;
    for k in 0..calls {
        let (tx, rx) = std::sync::mpsc::channel();
        let pending = map.put_async(k, k * 2);
        std::thread::spawn(move || {
            let _ = tx.send(pending.wait());
        });
        let answer = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("put {k} was never answered: a lost wake-up"));
        assert_eq!(answer, Ok(None));
    }
    assert_eq!(map.len().unwrap(), calls as usize);
    assert_eq!(map.get(&(calls - 1)).unwrap(), Some((calls - 1) * 2));
}

#[test]
fn a_blocking_map_call_in_a_pipeline_stage_is_refused_instead_of_deadlocking() {
    let executor = executor(2);
    let service = weir::maps::on_executor(&executor).unwrap();
    let prices = service.map::<u64, u64>("prices").unwrap();
    prices.put_all((0..100u64).map(|k| (k, k))).unwrap();
    let (sink, out) = sinks::collection::list::<String>();
    let p = Pipeline::new();
    let m = prices.clone();
    p.read_from(sources::collection::items((0..100u64).collect::<Vec<_>>()))
        // A stage runs on a worker, which runs an owner: waiting there is refused.
        .map(move |k| match m.get(&k) {
            Ok(v) => format!("read {v:?}"),
            Err(e) => e.to_string(),
        })
        .write_to(sink);
    let job = p.submit(&executor, JobConfig::default()).unwrap();
    assert!(job.wait_timeout(TIMEOUT), "the job hung");
    job.join().unwrap();
    let out = out.take();
    assert_eq!(out.len(), 100);
    for message in &out {
        assert!(
            message.contains("blocking map call 'get' refused")
                && message.contains("executor worker"),
            "{message}"
        );
    }
    // From this thread, which runs no owner, the same call works.
    assert_eq!(prices.get(&7).unwrap(), Some(7));
    // And in an entry processor, on the owner's worker, it is refused as on an owner thread.
    let p2 = prices.clone();
    assert!(matches!(
        prices.execute_on_key(7, move |_| p2.len()),
        Ok(Err(MapError::CalledFromOwner { call: "len", .. }))
    ));
}

#[test]
fn moving_partitions_under_a_pipeline_writing_the_map_loses_nothing() {
    let executor = executor(2);
    let service = weir::maps::on_executor(&executor).unwrap();
    let squares = service.map::<u64, u64>("squares").unwrap();
    let n = 200_000u64;
    let p = Pipeline::new();
    p.read_from(sources::collection::items((0..n).collect::<Vec<_>>()))
        .map(|k| (k, k * k))
        .write_to(sinks::map(&squares));
    let job = p.submit(&executor, JobConfig::default()).unwrap();
    // Move partitions between the two workers while the sink's puts arrive at their owners.
    let mut moves = 0u32;
    while !job.status().is_terminal() || moves < 271 {
        let partition = moves % 271;
        let to = (service.table().owner_of_partition(partition) + 1) % 2;
        service.move_partition(partition, to).unwrap();
        moves += 1;
    }
    assert!(job.wait_timeout(TIMEOUT), "the job hung");
    job.join().unwrap();
    assert!(service.table().version() > 271);
    assert_eq!(squares.len().unwrap(), n as usize);
    let all: Vec<(u64, u64)> = (0..service.table().partition_count())
        .flat_map(|p| squares.entries(p).unwrap())
        .collect();
    assert_eq!(all.len(), n as usize);
    assert!(all.iter().all(|&(k, v)| v == k * k));
}
