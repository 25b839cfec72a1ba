//! Results out of a running job: an async [`Stream`], or a blocking iterator.
//!
//! ```
//! use futures::StreamExt;
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! let (sink, mut results) = sinks::reactive::channel::<u32>(16);
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
//! For batch jobs, `weir::BatchStage::results` runs the pipeline
//! and hands back a `JobResults` iterator, which is simpler still.
//!
//! # The Reactive Streams contract
//!
//! - **Demand.** The sink hands items to a bounded channel with a non-blocking `try_send`.
//!   When the consumer is behind and the channel is full, the sink keeps what it holds and
//!   stops taking input: backpressure reaches the sources. Nothing is sent that the channel
//!   has no room for.
//! - **Completion and error, once.** The consumer sees the end (`None`) only once the whole
//!   job has completed, not just the sink's own branch. When the job fails or is cancelled,
//!   anywhere, the consumer sees one `Err` naming the cause after the items that made it,
//!   then the end; never a silent end.
//! - **Cancellation.** A consumer that drops the stream makes the sink fail the job with
//!   [`StreamError::ConsumerGone`], which stops every upstream stage. Dropping a
//!   `JobResults` cancels its job.
//!
//! Cost: one channel send per item (no allocation, no lock: tokio's and std's bounded
//! channels are lock-free on this path).
//!
//! # Snapshots
//!
//! A channel cannot take back what it delivered: in a job that takes snapshots, the
//! results produced after the last snapshot are delivered again after a restore
//! (at-least-once).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc as tokio_mpsc;
use weir_core::{Item, JobStatus, JobWatch, Outbox, ProcessorContext, ProcessorResult};

use super::{Sink, SinkTerminalFactory};
use weir_exec::links::link::{Link, erase};

/// Why results stopped coming.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The job failed or was cancelled before it completed.
    #[error("the job ended before completing: {cause}")]
    JobAborted {
        /// The job's error, as `Job::join` reports it, or "cancelled".
        cause: String,
    },
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

/// Where a channel sink's terminal leaves its job's [`JobWatch`] for the consumer.
type WatchSlot = Arc<Mutex<Option<JobWatch>>>;

/// The terminal link of a channel sink.
struct ChannelTerminal<T, O> {
    outlet: Option<O>,
    backlog: VecDeque<T>,
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

    /// Items handed to the consumer are out of the job's hands: after a restore, those
    /// after the snapshot are handed over again (at-least-once). Nothing to save.
    fn save(
        &mut self,
        _state: &mut weir_exec::links::state::LinkWriter<'_>,
    ) -> ProcessorResult<()> {
        Ok(())
    }

    fn restore(
        &mut self,
        _entries: &mut weir_exec::links::state::LinkEntries<'_>,
    ) -> ProcessorResult<()> {
        Ok(())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        Ok(true)
    }
}

/// A sink over the sending end `outlet`, for one instance of one run. The instance leaves
/// its job's watch in `watch`, so that the consumer learns how the whole job ended.
fn channel_sink<T: Item, O: Outlet<T>>(name: &str, outlet: O, watch: WatchSlot) -> Sink<T> {
    let slot = Arc::new(Mutex::new(Some(outlet)));
    let terminal: SinkTerminalFactory = Arc::new(move |ctx| {
        let outlet = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if outlet.is_some() {
            *watch.lock().unwrap_or_else(|e| e.into_inner()) = Some(ctx.job_watch().clone());
        }
        erase::<T>(Box::new(ChannelTerminal {
            outlet,
            backlog: VecDeque::new(),
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
    let watch = WatchSlot::default();
    let sink = channel_sink("channel", tx, Arc::clone(&watch));
    (
        sink,
        ResultStream {
            rx,
            watch,
            ended: false,
        },
    )
}

/// The results of a [`channel`] sink as a [`Stream`]: `Ok` items, then, once the whole job
/// has ended, one `Err` if it did not complete, then the end.
///
/// Dropping it stops the job (see [`StreamError::ConsumerGone`]).
#[derive(Debug)]
pub struct ResultStream<T> {
    rx: tokio_mpsc::Receiver<T>,
    watch: WatchSlot,
    ended: bool,
}

impl<T> Stream for ResultStream<T> {
    type Item = Result<T, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => return Poll::Ready(Some(Ok(item))),
            Poll::Ready(None) => {}
            Poll::Pending => return Poll::Pending,
        }
        // The sink is done: the end comes with the whole job's.
        let watch = self.watch.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(watch) = watch else {
            // The sink never ran (the pipeline was not submitted, or it was refused).
            self.ended = true;
            return Poll::Ready(Some(Err(StreamError::JobAborted {
                cause: "the job never ran".into(),
            })));
        };
        match watch.poll_outcome(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready((status, error)) => {
                self.ended = true;
                match status {
                    JobStatus::Completed => Poll::Ready(None),
                    _ => Poll::Ready(Some(Err(StreamError::JobAborted {
                        cause: error.unwrap_or_else(|| "cancelled".into()),
                    }))),
                }
            }
        }
    }
}

/// A sink feeding a bounded std channel of `buffer` items, one instance, for one run, and
/// the channel's receiver: what `weir::BatchStage::results` iterates over.
pub fn iter_sink<T: Item>(buffer: usize) -> (Sink<T>, mpsc::Receiver<T>) {
    let (tx, rx) = mpsc::sync_channel(buffer);
    (channel_sink("results", tx, WatchSlot::default()), rx)
}
