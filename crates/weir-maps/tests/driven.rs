//! Partitioned maps whose owners run in a loop the caller runs ([`MapService::driven`]): the
//! same cases as `maps.rs`, each owner polled by a thread of this test that parks when the
//! owner is idle and is unparked by the owner's waker; and the driver's own guarantees.

use std::sync::mpsc::channel;
use std::time::Duration;

use weir_maps::{MapError, MapService, OwnerDriver, OwnerPoll};

/// Runs `driver` on a thread named `test-loop-{owner}`: polls while there is work, parks
/// when there is none, ends when the service stops.
fn run_in_loop(driver: OwnerDriver) {
    let name = format!("test-loop-{}", driver.owner());
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let mut driver = driver;
            let me = std::thread::current();
            driver.set_waker(move || me.unpark());
            loop {
                match driver.poll() {
                    OwnerPoll::Progress => {}
                    // The waker unparks this thread after queueing; a message queued between
                    // the poll and the park leaves the park token set, so the park returns.
                    OwnerPoll::Idle => std::thread::park(),
                    OwnerPoll::Stopped => return,
                }
            }
        })
        .expect("a loop thread starts");
}

fn service(owners: usize) -> MapService {
    let (service, drivers) = MapService::driven(owners);
    drivers.into_iter().for_each(run_in_loop);
    service
}

#[path = "common/cases.rs"]
mod cases;

#[test]
fn calls_made_before_the_first_poll_wait_in_the_queue() {
    let (service, drivers) = MapService::driven(2);
    let map = service.map::<u64, u64>("m").unwrap();
    let pending: Vec<_> = (0..100u64).map(|k| map.put_async(k, k)).collect();
    drivers.into_iter().for_each(run_in_loop);
    for p in pending {
        assert_eq!(p.wait().unwrap(), None);
    }
    assert_eq!(map.len().unwrap(), 100);
}

#[test]
fn a_driver_runs_the_owner_on_the_polling_thread_and_stops_with_the_service() {
    let (service, mut drivers) = MapService::driven(1);
    let map = service.map::<u64, u64>("m").unwrap();
    let mut driver = drivers.pop().unwrap();
    assert_eq!(driver.poll(), OwnerPoll::Idle);
    let mut put = map.put_async(1, 10);
    let mut thread = service.execute_on_key_owner(&1u64, |view| {
        (
            view.owner(),
            std::thread::current().name().map(str::to_string),
        )
    });
    assert_eq!(
        put.try_take(),
        None,
        "nothing runs until the owner is polled"
    );
    assert_eq!(driver.poll(), OwnerPoll::Progress);
    assert_eq!(put.try_take(), Some(Ok(None)));
    let here = std::thread::current().name().map(str::to_string);
    assert_eq!(thread.try_take(), Some(Ok((0, here))));

    // The polling thread is an owner thread now: a blocking call on it is refused.
    let err = map.get(&1).unwrap_err();
    assert!(
        matches!(
            err,
            MapError::CalledFromOwner {
                call: "get",
                owner: 0
            }
        ),
        "{err}"
    );
    drop(driver);
    // Dropped on this thread, the driver no longer marks it: the call is not refused, and
    // fails only because the owner's queue went with its driver.
    assert_eq!(map.get(&1), Err(MapError::ShutDown));

    let (service, mut drivers) = MapService::driven(1);
    let mut driver = drivers.pop().unwrap();
    drop(service);
    assert_eq!(driver.poll(), OwnerPoll::Stopped);
    assert!(driver.is_stopped());
}

#[test]
fn the_waker_is_called_after_each_message_is_queued() {
    let (service, mut drivers) = MapService::driven(1);
    let mut driver = drivers.pop().unwrap();
    let (tx, woken) = channel();
    assert!(driver.set_waker(move || {
        let _ = tx.send(());
    }));
    assert!(!driver.set_waker(|| {}), "the first waker stays");
    let map = service.map::<u64, u64>("m").unwrap();
    let _pending = map.put_async(7, 1);
    woken
        .recv_timeout(Duration::from_secs(10))
        .expect("the send woke the owner's loop");
    assert_eq!(driver.poll(), OwnerPoll::Progress);
    assert_eq!(driver.poll(), OwnerPoll::Idle);
}
