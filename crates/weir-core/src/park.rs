//! Parking an idle thread that runs tasklets, and waking it when its work arrives.
//!
//! A [`Parker`] belongs to one thread: an executor worker, or the thread of a
//! non-cooperative tasklet. The thread parks on it when a pass over its tasklets made no
//! progress, and is woken two ways:
//!
//! - **[`wake`](Parker::wake)**: unconditional, for whoever hands the thread work outside
//!   the conveyors (a new tasklet, a worker service's message, an async reply). It sets a
//!   flag before it unparks, and the thread checks the flag right before it parks, so a wake
//!   is never lost, even if something the thread ran in between consumed its park token.
//! - **[`nudge`](Parker::nudge)**: for a tasklet that just moved items through a conveyor,
//!   to wake the thread at the conveyor's other end. A busy thread is not disturbed: a nudge
//!   costs one read of a flag that stays in the nudger's cache while the thread works, and
//!   wakes only a thread that is about to park or parked.
//!
//! # The handshake behind `nudge`
//!
//! Before parking, the thread raises its *parking* flag ([`prepare_park`](Parker::prepare_park),
//! a store followed by a sequentially consistent fence) and then looks at its inputs one last
//! time (a whole pass over its tasklets). A tasklet on another thread publishes its items
//! (the conveyor's release store), issues a sequentially consistent fence
//! ([`fence_before_nudges`]) and reads the flag ([`nudge`](Parker::nudge)). The two fences are
//! ordered one way or the other: either the nudger sees the flag and wakes the thread, or
//! the thread's last look sees the items. So a thread never parks with items waiting that
//! it was not told about, and its timed pause only bounds the wait for work that comes
//! from elsewhere (timers, polled systems).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use weir_core::park::{Parker, fence_before_nudges};
//!
//! let parker = Arc::new(Parker::new());
//! let other = Arc::clone(&parker);
//! let t = std::thread::spawn(move || {
//!     other.bind_current();
//!     other.prepare_park();
//!     // ... a last look for work found nothing ...
//!     other.park(Some(Duration::from_secs(60)));
//! });
//! // A producer publishes work, then:
//! fence_before_nudges();
//! parker.nudge(); // wakes the thread if it is parking; otherwise its last look sees the work
//! parker.wake(); // (for the example: make sure it does not sleep its 60 s)
//! t.join().unwrap();
//! ```

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::thread::{self, Thread};
use std::time::Duration;

/// The park state of one thread that runs tasklets (see the [module docs](self)).
///
/// `Send + Sync`; share it in an `Arc`. Nothing here allocates.
#[derive(Debug, Default)]
pub struct Parker {
    thread: OnceLock<Thread>,
    /// Written by the owner only, read by every nudger: on a line of its own, so that the
    /// wakes' writes to `woken` do not keep taking it from the nudgers' caches.
    parking: Padded<AtomicBool>,
    /// Set by every wake, cleared by the owner right before it parks.
    woken: AtomicBool,
}

/// A value alone on its cache line (two, for the adjacent-line prefetcher).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

impl Parker {
    /// A parker not yet bound to a thread: wakes before [`bind`](Self::bind) are remembered
    /// and skip the thread's first park.
    pub fn new() -> Self {
        Parker::default()
    }

    /// Binds the parker to `thread`, the one that will park on it. Later binds are ignored.
    pub fn bind(&self, thread: Thread) {
        let _ = self.thread.set(thread);
    }

    /// Binds the parker to the calling thread. Later binds are ignored.
    pub fn bind_current(&self) {
        self.bind(thread::current());
    }

    /// The bound thread, if any.
    pub fn thread(&self) -> Option<&Thread> {
        self.thread.get()
    }

    /// Makes the thread run another pass soon, also if it is parked or about to park.
    ///
    /// Cost: one sequentially consistent store and one unpark (an atomic swap, plus a futex
    /// wake when the thread is parked).
    #[inline]
    pub fn wake(&self) {
        self.woken.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Wakes the thread only if it is about to park or parked. Call it after publishing the
    /// thread's work and [`fence_before_nudges`]; without the fence a wake can be missed
    /// (the thread then finds the work after its timed pause).
    ///
    /// Cost: one load of a line that stays shared while the thread works.
    #[inline]
    pub fn nudge(&self) {
        if self.parking.0.load(Ordering::Relaxed) {
            self.wake();
        }
    }

    /// Called by the owning thread before its last look for work: from here on, nudges wake
    /// it. Follow it with that look, then [`park`](Self::park), or [`cancel_park`] if the
    /// look found work.
    ///
    /// [`cancel_park`]: Self::cancel_park
    pub fn prepare_park(&self) {
        self.parking.0.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Called by the owning thread when its last look found work after all: nudges stop
    /// waking it.
    pub fn cancel_park(&self) {
        self.parking.0.store(false, Ordering::Relaxed);
    }

    /// Parks the calling (owning) thread for `timeout`, or until woken if `None`, unless a
    /// wake came since the last park; then clears the parking flag. A spurious return is
    /// possible, as with [`thread::park`].
    pub fn park(&self, timeout: Option<Duration>) {
        // SeqCst on both sides of `woken`: a wake whose flag this swap does not see unparks
        // after it, so the park below returns.
        if !self.woken.swap(false, Ordering::SeqCst) {
            match timeout {
                Some(t) => thread::park_timeout(t),
                None => thread::park(),
            }
        }
        self.parking.0.store(false, Ordering::Relaxed);
    }
}

/// The fence a tasklet issues after moving items through its conveyors and before nudging
/// the threads at their other ends (see the [module docs](self#the-handshake-behind-nudge)).
///
/// Cost: one full fence (`mfence` or a locked instruction on x86), once per call that moved
/// anything, not per item.
#[inline]
pub fn fence_before_nudges() {
    fence(Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_wake_before_the_park_skips_it() {
        let parker = Parker::new();
        parker.bind_current();
        parker.wake();
        // Would sleep an hour if the wake were lost.
        parker.park(Some(Duration::from_secs(3600)));
    }

    #[test]
    fn a_nudge_wakes_only_a_parking_thread() {
        let parker = Parker::new();
        parker.bind_current();
        parker.nudge();
        assert!(
            !parker.woken.load(Ordering::SeqCst),
            "not parking: left alone"
        );
        parker.prepare_park();
        parker.nudge();
        assert!(parker.woken.load(Ordering::SeqCst));
        parker.park(Some(Duration::from_secs(3600)));
        assert!(
            !parker.parking.0.load(Ordering::SeqCst),
            "park clears the flag"
        );
    }

    /// The handshake: a consumer that parks after an empty last look is always woken by a
    /// producer that publishes, fences and nudges. A lost wake would show as a park that
    /// ran its whole (long) timeout.
    #[test]
    fn a_published_item_is_seen_or_its_nudge_wakes_the_consumer() {
        const ROUNDS: u64 = 20_000;
        let parker = Arc::new(Parker::new());
        let published = Arc::new(AtomicU64::new(0));
        let consumer = {
            let (parker, published) = (Arc::clone(&parker), Arc::clone(&published));
            std::thread::spawn(move || {
                parker.bind_current();
                let mut seen = 0;
                while seen < ROUNDS {
                    let now = published.load(Ordering::Acquire);
                    if now > seen {
                        seen = now;
                        continue;
                    }
                    parker.prepare_park();
                    if published.load(Ordering::Acquire) > seen {
                        parker.cancel_park();
                        continue;
                    }
                    let parked = std::time::Instant::now();
                    parker.park(Some(Duration::from_secs(30)));
                    assert!(
                        parked.elapsed() < Duration::from_secs(30),
                        "a nudge was lost: the consumer slept its whole pause with item {} waiting",
                        published.load(Ordering::Acquire)
                    );
                }
            })
        };
        for i in 1..=ROUNDS {
            published.store(i, Ordering::Release);
            fence_before_nudges();
            parker.nudge();
            if i % 64 == 0 {
                std::thread::yield_now();
            }
        }
        consumer.join().unwrap();
    }
}
