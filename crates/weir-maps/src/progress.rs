//! The hand-written synchronisation between a calling thread and the owners: how the caller of
//! [`execute_on_keys`](crate::PartitionedMap::execute_on_keys) waits for the owners' batches
//! ([`Progress`], [`Token`]), and how the parts of
//! [`put_all_async`](crate::PartitionedMap::put_all_async) pick the one that answers
//! ([`Join`]). The owners' queues and the replies are crossbeam channels; only this module
//! hand-rolls atomics and park/unpark.
//!
//! # Model checking
//!
//! The module is written against the small `sync` facade below: std's atomics, `Arc`,
//! `Mutex` and park/unpark normally, loom's under `--cfg loom`. The loom model in this file
//! (`model`) therefore checks the code the map runs, for a caller and one or two owners,
//! over every interleaving and every outcome loom's memory model allows (the two models with
//! three batches: every schedule with up to 5 preemptions, to stay within seconds):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p weir-maps --release --lib progress
//! ```
//!
//! A lost wake-up shows as a loom deadlock (the caller parked, every owner finished). The
//! separate target directory keeps the `--cfg loom` build from invalidating the normal one.

/// std normally, loom's model types under `--cfg loom`.
pub(crate) mod sync {
    #[cfg(not(loom))]
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Arc, Mutex};
    #[cfg(not(loom))]
    pub(crate) use std::thread::{Thread, current, panicking, park};

    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
    #[cfg(loom)]
    pub(crate) use loom::sync::{Arc, Mutex};
    #[cfg(loom)]
    pub(crate) use loom::thread::{Thread, current, park};

    #[cfg(loom)]
    loom::thread_local! {
        /// Whether the model thread is unwinding. Loom runs its threads as coroutines on one
        /// OS thread, so `std::thread::panicking` cannot tell them apart: a model marks the
        /// drops that stand for an unwinding part here instead.
        pub(crate) static PANICKING: std::cell::Cell<bool> = std::cell::Cell::new(false);
    }

    /// Whether the current thread is unwinding, as `std::thread::panicking`.
    #[cfg(loom)]
    pub(crate) fn panicking() -> bool {
        PANICKING.with(std::cell::Cell::get)
    }
}

use sync::{Arc, AtomicBool, AtomicUsize, Mutex, Ordering, Thread, fence};

/// How far the owners are through the batches of one `execute_on_keys` call, and the caller
/// to wake when one of them reaches the count it waits for.
///
/// The caller waits for a count, not for each batch: an owner wakes it only when the owner's
/// finished count reaches the caller's target, so a call of `n` batches parks and is woken
/// about `2 n / IN_FLIGHT` times instead of once per batch.
pub(crate) struct Progress {
    /// Per owner: batches finished (every part run, or dropped by a panic or a shutdown).
    done: Vec<AtomicUsize>,
    /// Per owner: the finished count the caller is parked for; `usize::MAX` when none.
    want: Vec<AtomicUsize>,
    caller: Thread,
    failed: AtomicBool,
}

impl Progress {
    /// The progress of a call over `owners` owners, made on (and waited for by) the calling
    /// thread.
    pub(crate) fn new(owners: usize) -> Arc<Self> {
        Arc::new(Progress {
            done: (0..owners).map(|_| AtomicUsize::new(0)).collect(),
            want: (0..owners).map(|_| AtomicUsize::new(usize::MAX)).collect(),
            caller: sync::current(),
            failed: AtomicBool::new(false),
        })
    }

    /// How many batches `owner` has finished.
    pub(crate) fn done(&self, owner: usize) -> usize {
        self.done[owner].load(Ordering::Acquire)
    }

    /// Whether a part of a finished batch panicked. Complete once the caller has waited for
    /// every batch it sent.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Called once per batch, when its last part is dropped.
    fn finish(&self, owner: usize) {
        // Release: the caller that sees the count sees the batch's work and `failed`.
        let done = self.done[owner].fetch_add(1, Ordering::Release) + 1;
        // Store-to-load ordering, the pair of the fence in `wait_for`: of the two fences,
        // whichever comes second in their total order sees the other side's write, so
        // either the caller sees the new count or this owner sees the caller's target.
        fence(Ordering::SeqCst);
        if done >= self.want[owner].load(Ordering::Relaxed) {
            self.caller.unpark();
        }
    }

    /// Parks the calling thread (the one that made this `Progress`) until `owner` has
    /// finished `target` batches.
    pub(crate) fn wait_for(&self, owner: usize, target: usize) {
        if self.done(owner) >= target {
            return;
        }
        self.want[owner].store(target, Ordering::Relaxed);
        // The pair of the fence in `finish`: without it the owner could read the old
        // target while this thread reads the old count, and park with nobody to wake it.
        fence(Ordering::SeqCst);
        // A spurious wake-up, or an unpark left over from an earlier target, loops here.
        while self.done(owner) < target {
            sync::park();
        }
        self.want[owner].store(usize::MAX, Ordering::Relaxed);
    }
}

/// Held by every part of one batch; the batch counts as finished when the last part drops.
/// A part dropped while its thread unwinds marks the call failed first.
#[derive(Clone)]
pub(crate) struct Token(Arc<BatchDone>);

impl Token {
    /// The token of one batch sent to `owner`.
    pub(crate) fn new(progress: &Arc<Progress>, owner: usize) -> Self {
        Token(Arc::new(BatchDone {
            progress: Arc::clone(progress),
            owner,
        }))
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        if sync::panicking() {
            self.0.progress.failed.store(true, Ordering::Release);
        }
    }
}

struct BatchDone {
    progress: Arc<Progress>,
    owner: usize,
}

impl Drop for BatchDone {
    fn drop(&mut self) {
        self.progress.finish(self.owner);
    }
}

/// The parts of one multi-part call whose last part to finish answers with the total of
/// what all parts did. A part that panics never reports: the replier then drops with the
/// last reference, unanswered.
pub(crate) struct Join<R> {
    remaining: AtomicUsize,
    total: AtomicUsize,
    replier: Mutex<Option<R>>,
}

impl<R> Join<R> {
    /// A join of `parts` parts (at least one) that answers through `replier`.
    pub(crate) fn new(parts: usize, replier: R) -> Arc<Self> {
        Arc::new(Join {
            remaining: AtomicUsize::new(parts),
            total: AtomicUsize::new(0),
            replier: Mutex::new(Some(replier)),
        })
    }

    /// Records a part that did `n`; the last part to report gets the replier and the total.
    pub(crate) fn part_done(&self, n: usize) -> Option<(R, usize)> {
        self.total.fetch_add(n, Ordering::AcqRel);
        if self.remaining.fetch_sub(1, Ordering::AcqRel) != 1 {
            return None;
        }
        let replier = self
            .replier
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        replier.map(|r| (r, self.total.load(Ordering::Acquire)))
    }
}

#[cfg(all(test, loom))]
mod model {
    //! Loom models of the caller/owner protocol. Each owner is a thread that drops the
    //! tokens of the batches it was sent, in order, as the owner thread does after running
    //! a batch.

    use super::sync::PANICKING;
    use super::{Join, Progress, Token};
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    /// Runs the model over every schedule, or, with `Some(n)`, over those with at most `n`
    /// preemptions. The small models are exhaustive; the two with three batches take 18 s
    /// and 34 s exhaustively and a few seconds bounded to 5 preemptions, which still covers
    /// every order of an owner's finishes against the caller's check, target and park.
    fn check(preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = preemptions;
        builder.check(f);
    }

    /// An owner thread that finishes `tokens` in order. Not joined: the caller's wait is
    /// what is checked, loom runs every thread to its end, and loom's `join` cannot take
    /// the unpark an owner may leave behind for the caller (it takes it for the join's own
    /// wake-up and fails).
    fn owner(tokens: Vec<Token>) {
        thread::spawn(move || {
            for token in tokens {
                drop(token);
            }
        });
    }

    fn tokens(progress: &Arc<Progress>, owner: usize, n: usize) -> Vec<Token> {
        (0..n).map(|_| Token::new(progress, owner)).collect()
    }

    #[test]
    fn progress_caller_wakes_for_one_owner() {
        // Two batches: the owner's wake-up may come before the caller stores its target,
        // between that store and its park, or after it parked.
        check(None, || {
            let progress = Progress::new(1);
            owner(tokens(&progress, 0, 2));
            progress.wait_for(0, 2);
            assert_eq!(progress.done(0), 2);
            assert!(!progress.failed());
        });
    }

    #[test]
    fn progress_caller_waits_for_half_then_all() {
        // The in-flight limit: wait for part of an owner's batches, then for all of them.
        // The first target's wake-up can arrive late and be left over for the second wait.
        check(Some(5), || {
            let progress = Progress::new(1);
            owner(tokens(&progress, 0, 3));
            progress.wait_for(0, 1);
            assert!(progress.done(0) >= 1);
            progress.wait_for(0, 3);
            assert_eq!(progress.done(0), 3);
        });
    }

    #[test]
    fn progress_caller_waits_for_two_owners() {
        // The end of a call: wait for owner 0, then owner 1, while both finish. Owner 0's
        // unpark may land while the caller waits for owner 1 (a left-over wake-up), and
        // owner 1 may finish before the caller looks at it.
        check(Some(5), || {
            let progress = Progress::new(2);
            owner(tokens(&progress, 0, 2));
            owner(tokens(&progress, 1, 1));
            progress.wait_for(0, 2);
            progress.wait_for(1, 1);
            assert_eq!((progress.done(0), progress.done(1)), (2, 1));
        });
    }

    #[test]
    fn progress_survives_spurious_unparks() {
        // A thread that unparks the caller for no reason (as the OS may) must not end its
        // wait early.
        check(None, || {
            let progress = Progress::new(1);
            let caller = thread::current();
            thread::spawn(move || caller.unpark());
            owner(tokens(&progress, 0, 1));
            progress.wait_for(0, 1);
            assert_eq!(progress.done(0), 1);
        });
    }

    #[test]
    fn progress_panicking_part_marks_failed() {
        // A batch whose keys were split: one part runs on owner 0 and panics, the other was
        // routed to owner 1 (its partition moved) and finishes normally, in either order.
        // Whichever drops last finishes the batch; the caller must then see the failure.
        check(None, || {
            let progress = Progress::new(2);
            let token = Token::new(&progress, 0);
            let routed = token.clone();
            thread::spawn(move || {
                PANICKING.with(|p| p.set(true));
                drop(token);
                PANICKING.with(|p| p.set(false));
            });
            owner(vec![routed]);
            progress.wait_for(0, 1);
            assert!(progress.failed());
        });
    }

    #[test]
    fn progress_join_last_part_answers_with_total() {
        // Two parts of a put_all on two owners: exactly one answers, with both counts.
        check(None, || {
            let answered = Arc::new(AtomicUsize::new(0));
            let join = Join::new(2, Arc::clone(&answered));
            let parts: Vec<_> = [3, 4]
                .into_iter()
                .map(|n| {
                    let join = Arc::clone(&join);
                    thread::spawn(move || {
                        if let Some((answered, total)) = join.part_done(n) {
                            assert_eq!(total, 7);
                            answered.fetch_add(1, Ordering::Release);
                        }
                    })
                })
                .collect();
            for p in parts {
                p.join().unwrap();
            }
            assert_eq!(answered.load(Ordering::Acquire), 1);
        });
    }
}
