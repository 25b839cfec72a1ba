//! Results out of a running job: an async [`Stream`], or a blocking iterator.
//!
//! ```
//! use futures::StreamExt;
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! let (sink, mut results) = sinks::stream::channel::<u32>(16);
//! p.read_from(sources::collection::items(1..=3u32)).write_to(sink);
//! let job = p.submit(&Executor::shared(), JobConfig::default()).unwrap();
//! let rt = weir::async_io::runtime().unwrap();
//! let got: Vec<u32> = rt.block_on(async {
//!     let mut got = Vec::new();
//!     while let Some(item) = results.next().await {
//!         got.push(item.unwrap());
//!     }
//!     got
//! });
//! job.join().unwrap();
//! assert_eq!(got, [1, 2, 3]);
//! ```
//!
//! For batch jobs, [`BatchStage::results`](crate::BatchStage::results) runs the pipeline
//! and hands back a [`JobResults`] iterator, which is simpler still.
//!
//! # The Reactive Streams contract
//!
//! - **Demand.** The sink hands items to a bounded channel with a non-blocking `try_send`.
//!   When the consumer is behind and the channel is full, the sink keeps what it holds and
//!   stops taking input: backpressure reaches the sources. Nothing is sent that the channel
//!   has no room for.
//! - **Completion and error, once.** When the job completes, the channel closes and the
//!   consumer sees the end (`None`). When it fails or is cancelled, the consumer sees one
//!   `Err` after the items that made it, then the end; never a silent end.
//! - **Cancellation.** A consumer that drops the stream makes the sink fail the job with
//!   [`StreamError::ConsumerGone`], which stops every upstream stage. Dropping a
//!   [`JobResults`] cancels its job.
//!
//! Cost: one channel send per item (no allocation, no lock: tokio's and std's bounded
//! channels are lock-free on this path).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc as tokio_mpsc;
use weir_core::{CancelHandle, Item, Job, Outbox, ProcessorContext, ProcessorResult};

use super::{Sink, SinkTerminalFactory};
use crate::error::Error;
use crate::exec::link::{Link, erase};

/// Why results stopped coming.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The job failed or was cancelled before it completed; `Job::join` has the cause.
    #[error("the job ended before completing: it failed or was cancelled")]
    JobAborted,
    /// The consumer dropped its end: the job is stopped.
    #[error("the consumer of the results went away")]
    ConsumerGone,
    /// A channel sink feeds one run of one job; the pipeline holding it was run again.
    #[error("this channel sink was already used by an earlier run")]
    AlreadyUsed,
}

/// How many items a sink instance holds when the channel is full, before it stops taking
/// input.
const BACKLOG: usize = 256;

/// A bounded channel's sending end, tokio's or std's.
trait Outlet<T>: Send + 'static {
    /// Sends without blocking; `Err((item, closed))` hands the item back.
    fn try_send(&mut self, item: T) -> Result<(), (T, bool)>;
}

impl<T: Send + 'static> Outlet<T> for tokio_mpsc::Sender<T> {
    fn try_send(&mut self, item: T) -> Result<(), (T, bool)> {
        tokio_mpsc::Sender::try_send(self, item).map_err(|e| match e {
            tokio_mpsc::error::TrySendError::Full(t) => (t, false),
            tokio_mpsc::error::TrySendError::Closed(t) => (t, true),
        })
    }
}

impl<T: Send + 'static> Outlet<T> for mpsc::SyncSender<T> {
    fn try_send(&mut self, item: T) -> Result<(), (T, bool)> {
        mpsc::SyncSender::try_send(self, item).map_err(|e| match e {
            mpsc::TrySendError::Full(t) => (t, false),
            mpsc::TrySendError::Disconnected(t) => (t, true),
        })
    }
}

/// The terminal link of a channel sink.
struct ChannelTerminal<T, O> {
    outlet: Option<O>,
    backlog: VecDeque<T>,
    aborted: Arc<AtomicBool>,
    completed: bool,
}

impl<T: Item, O: Outlet<T>> Link<T> for ChannelTerminal<T, O> {
    fn init(&mut self, _ctx: &ProcessorContext) -> ProcessorResult<()> {
        if self.outlet.is_none() {
            return Err(StreamError::AlreadyUsed.into());
        }
        Ok(())
    }

    #[inline]
    fn push(&mut self, item: T) -> bool {
        self.backlog.push_back(item);
        self.backlog.len() < BACKLOG
    }

    fn flush(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        let Some(outlet) = self.outlet.as_mut() else {
            return Ok(self.backlog.is_empty());
        };
        while let Some(item) = self.backlog.pop_front() {
            if let Err((item, closed)) = outlet.try_send(item) {
                if closed {
                    return Err(StreamError::ConsumerGone.into());
                }
                self.backlog.push_front(item);
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.flush(outbox)? {
            return Ok(false);
        }
        // Dropping the sender closes the channel: the consumer sees the end.
        self.completed = true;
        self.outlet = None;
        Ok(true)
    }

    fn is_cooperative(&self) -> bool {
        true
    }

    fn watermark(
        &mut self,
        _wm: weir_core::Watermark,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        // A sink: the watermark ends here.
        Ok(true)
    }

    fn idle(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(true)
    }
}

impl<T, O> Drop for ChannelTerminal<T, O> {
    fn drop(&mut self) {
        if !self.completed && self.outlet.is_some() {
            // Set before the sender drops, so the consumer sees it when the channel closes.
            self.aborted.store(true, Ordering::Release);
        }
    }
}

/// A sink over the sending end `outlet`, for one instance of one run.
fn channel_sink<T: Item, O: Outlet<T>>(name: &str, outlet: O, aborted: Arc<AtomicBool>) -> Sink<T> {
    let slot = Arc::new(Mutex::new(Some(outlet)));
    let terminal: SinkTerminalFactory = Arc::new(move |_ctx| {
        erase::<T>(Box::new(ChannelTerminal {
            outlet: slot.lock().unwrap_or_else(|e| e.into_inner()).take(),
            backlog: VecDeque::new(),
            aborted: Arc::clone(&aborted),
            completed: false,
        }))
    });
    Sink::from_terminal(name, Some(1), terminal)
}

/// Creates a sink that feeds a bounded channel of `capacity` items, and the [`Stream`] that
/// reads it.
///
/// The sink runs one instance (parallelism `Some(1)`), so the stream gets the items in the
/// order that instance receives them. It serves one run of the pipeline: a second run fails
/// with [`StreamError::AlreadyUsed`]. See the [module docs](self) for the contract.
///
/// # Panics
/// If `capacity` is zero.
pub fn channel<T: Item>(capacity: usize) -> (Sink<T>, ResultStream<T>) {
    let (tx, rx) = tokio_mpsc::channel(capacity);
    let aborted = Arc::new(AtomicBool::new(false));
    let sink = channel_sink("channel", tx, Arc::clone(&aborted));
    (
        sink,
        ResultStream {
            rx,
            aborted,
            ended: false,
        },
    )
}

/// The results of a [`channel`] sink as a [`Stream`]: `Ok` items, then, if the job did not
/// complete, one `Err`, then the end.
///
/// Dropping it stops the job (see [`StreamError::ConsumerGone`]).
#[derive(Debug)]
pub struct ResultStream<T> {
    rx: tokio_mpsc::Receiver<T>,
    aborted: Arc<AtomicBool>,
    ended: bool,
}

impl<T> Stream for ResultStream<T> {
    type Item = Result<T, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => Poll::Ready(Some(Ok(item))),
            Poll::Ready(None) => {
                self.ended = true;
                if self.aborted.load(Ordering::Acquire) {
                    Poll::Ready(Some(Err(StreamError::JobAborted)))
                } else {
                    Poll::Ready(None)
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A running batch job's results as a blocking iterator, from
/// [`BatchStage::results`](crate::BatchStage::results).
///
/// `next` blocks until an item arrives or the job ends: call it from an ordinary thread,
/// never from a cooperative processor or an async task. Items come through a buffer of the
/// size given to `results`; while it is full the job's sink stops and backpressure holds
/// the sources. When the job fails or is cancelled, the iterator yields one `Err` with the
/// job's error (as `Job::join` reports it) after the items that made it, then `None`.
/// Dropping the iterator before its end cancels the job.
pub struct JobResults<T> {
    rx: mpsc::Receiver<T>,
    job: Option<Job>,
    cancel: CancelHandle,
}

impl<T> std::fmt::Debug for JobResults<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobResults")
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

impl<T> JobResults<T> {
    /// A handle that cancels the job, from any thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// The job, while it has not ended: for its metrics and status.
    pub fn job(&self) -> Option<&Job> {
        self.job.as_ref()
    }
}

impl<T> Iterator for JobResults<T> {
    type Item = Result<T, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Ok(item) = self.rx.recv() {
            return Some(Ok(item));
        }
        // Every sender is gone: the sink completed, or the job stopped.
        let job = self.job.take()?;
        job.join().err().map(|e| Err(e.into()))
    }
}

impl<T> Drop for JobResults<T> {
    fn drop(&mut self) {
        if self.job.is_some() {
            self.cancel.cancel();
        }
    }
}

/// A sink feeding a [`JobResults`] through a buffer of `buffer` items, and the receiver.
pub(crate) fn iter_sink<T: Item>(buffer: usize) -> (Sink<T>, mpsc::Receiver<T>) {
    let (tx, rx) = mpsc::sync_channel(buffer);
    (
        channel_sink("results", tx, Arc::new(AtomicBool::new(false))),
        rx,
    )
}

/// Wraps a submitted job and the receiver of its results sink.
pub(crate) fn job_results<T>(job: Job, rx: mpsc::Receiver<T>) -> JobResults<T> {
    JobResults {
        rx,
        cancel: job.cancel_handle(),
        job: Some(job),
    }
}
