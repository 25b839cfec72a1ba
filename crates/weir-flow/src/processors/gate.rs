//! Work a stateless group's destinations must finish before its sources acknowledge.
//!
//! PutDatabaseRecord keeps one database transaction open for the whole group transaction and
//! commits it when the group commits, in its session's completion hook. But the engine runs
//! the completion hooks in the order the sessions were committed, sources first: a broker
//! source would acknowledge its messages before the database commit, and a crash between the
//! two would lose them. So a destination also leaves its commit here, as a [`Pending`]; a
//! broker source's hook runs what is pending ([`settle`]) before it acknowledges, and gives its
//! messages back instead when that fails.
//!
//! A copy of a stateless group runs its triggers and its completion hooks on one thread (see
//! `crate::stateless`), so what is pending is kept per thread: a copy sees only its own.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// A destination's commit: `Err` with why when it failed.
type Commit = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// A commit to run once, by whichever of the source's and the destination's hooks comes first.
pub(crate) struct Pending(Mutex<Option<Commit>>);

impl Pending {
    /// `commit`, to be run once.
    pub(crate) fn new(
        commit: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> Arc<Pending> {
        Arc::new(Pending(Mutex::new(Some(Box::new(commit)))))
    }

    /// Runs the commit unless it ran already (then `Ok`).
    pub(crate) fn run(&self) -> Result<(), String> {
        let commit = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        commit.map_or(Ok(()), |c| c())
    }

    /// Drops the commit without running it (the group rolled back).
    pub(crate) fn discard(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

thread_local! {
    static PENDING: RefCell<Vec<Arc<Pending>>> = const { RefCell::new(Vec::new()) };
}

/// Leaves `pending` for the sources of the group transaction running on this thread.
pub(crate) fn hold(pending: &Arc<Pending>) {
    PENDING.with(|p| p.borrow_mut().push(Arc::clone(pending)));
}

/// Forgets `pending` (its destination's hook settled it).
pub(crate) fn forget(pending: &Arc<Pending>) {
    PENDING.with(|p| p.borrow_mut().retain(|x| !Arc::ptr_eq(x, pending)));
}

/// Runs every commit pending on this thread, in order; a source acknowledges only when this
/// is `Ok`. All are run even after a failure (each is its own destination's), and the first
/// error is returned.
pub(crate) fn settle() -> Result<(), String> {
    let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    let mut result = Ok(());
    for p in pending {
        if let Err(e) = p.run()
            && result.is_ok()
        {
            result = Err(e);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_pending_commit_runs_once_whoever_comes_first_and_not_after_a_discard() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = |fail: bool| {
            let runs = Arc::clone(&runs);
            Pending::new(move || {
                runs.fetch_add(1, Ordering::SeqCst);
                if fail { Err("refused".into()) } else { Ok(()) }
            })
        };
        let (a, b, c) = (counted(false), counted(true), counted(false));
        hold(&a);
        hold(&b);
        hold(&c);
        c.discard();
        assert_eq!(settle(), Err("refused".to_string()));
        assert_eq!(
            runs.load(Ordering::SeqCst),
            2,
            "a and b, not the discarded c"
        );
        // The destinations' own hooks come after: nothing runs twice.
        assert_eq!(a.run(), Ok(()));
        assert_eq!(b.run(), Ok(()));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        let d = counted(false);
        hold(&d);
        forget(&d);
        assert_eq!(settle(), Ok(()));
        assert_eq!(
            runs.load(Ordering::SeqCst),
            2,
            "forgotten, not run by the sources"
        );
    }
}
