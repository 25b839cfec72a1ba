//! The answer to a routed call: a future for async callers, a blocking wait for user threads.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use futures::task::AtomicWaker;

use crate::MapError;
use crate::service::current_owner;

/// The pending result of a call routed to a partition's owner.
///
/// `.await` it from async code (it never blocks a thread), or [`wait`](Self::wait) for it on
/// a user thread. Dropping it does not cancel the call.
#[must_use = "a routed call runs anyway; wait or await to see its result"]
#[derive(Debug)]
pub struct Pending<T> {
    rx: Option<Receiver<Result<T, MapError>>>,
    failed: Option<MapError>,
    waker: Arc<AtomicWaker>,
}

/// The owner's end of a [`Pending`]: sends the result and wakes the awaiting task. Dropped
/// without sending (the call panicked), it still wakes, and the caller sees
/// [`MapError::TaskPanicked`].
pub(crate) struct Replier<T> {
    tx: Sender<Result<T, MapError>>,
    waker: Arc<AtomicWaker>,
}

/// A connected replier and pending result.
pub(crate) fn reply_pair<T>() -> (Replier<T>, Pending<T>) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let waker = Arc::new(AtomicWaker::new());
    (
        Replier {
            tx,
            waker: Arc::clone(&waker),
        },
        Pending {
            rx: Some(rx),
            failed: None,
            waker,
        },
    )
}

impl<T> Replier<T> {
    /// Hands `value` to the caller.
    pub(crate) fn send(self, value: Result<T, MapError>) {
        // The caller may have dropped its Pending: then nobody wants the value.
        let _ = self.tx.send(value);
    }
}

impl<T> Drop for Replier<T> {
    fn drop(&mut self) {
        self.waker.wake();
    }
}

impl<T> Pending<T> {
    /// A call that failed before it was sent.
    pub(crate) fn failed(error: MapError) -> Self {
        Pending {
            rx: None,
            failed: Some(error),
            waker: Arc::new(AtomicWaker::new()),
        }
    }

    /// Blocks the calling thread until the owner answers.
    ///
    /// # Errors
    /// [`MapError::CalledFromOwner`] on an owner thread (the wait could deadlock);
    /// [`MapError::TaskPanicked`] when the call panicked; [`MapError::ShutDown`].
    pub fn wait(self) -> Result<T, MapError> {
        self.wait_as("wait")
    }

    /// The result if the owner has answered, without blocking; `None` while it has not.
    /// After it returned `Some`, the pending is spent and answers `None`.
    pub fn try_take(&mut self) -> Option<Result<T, MapError>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        let rx = self.rx.as_ref()?;
        let out = match rx.try_recv() {
            Ok(v) => v,
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => Err(MapError::TaskPanicked),
        };
        self.rx = None;
        Some(out)
    }

    pub(crate) fn wait_as(mut self, call: &'static str) -> Result<T, MapError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if let Some(owner) = current_owner() {
            return Err(MapError::CalledFromOwner { call, owner });
        }
        let rx = self.rx.take().expect("a pending call has a receiver");
        rx.recv().unwrap_or(Err(MapError::TaskPanicked))
    }
}

// Nothing in a Pending is pinned: the result is moved out of a channel.
impl<T> Unpin for Pending<T> {}

impl<T> Future for Pending<T> {
    type Output = Result<T, MapError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(e) = this.failed.take() {
            return Poll::Ready(Err(e));
        }
        let Some(rx) = this.rx.as_ref() else {
            return Poll::Ready(Err(MapError::ShutDown));
        };
        match rx.try_recv() {
            Ok(v) => return Poll::Ready(v),
            Err(TryRecvError::Disconnected) => return Poll::Ready(Err(MapError::TaskPanicked)),
            Err(TryRecvError::Empty) => {}
        }
        this.waker.register(cx.waker());
        // Checked again after registering: the answer may have come in between.
        match rx.try_recv() {
            Ok(v) => Poll::Ready(v),
            Err(TryRecvError::Disconnected) => Poll::Ready(Err(MapError::TaskPanicked)),
            Err(TryRecvError::Empty) => Poll::Pending,
        }
    }
}
