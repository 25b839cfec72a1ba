//! An async [`Stream`] as a source, pulled only as fast as the pipeline takes its items.
//!
//! ```
//! use weir::prelude::*;
//!
//! let numbers = futures::stream::iter(1..=5u32);
//! let p = Pipeline::new();
//! let (sink, out) = sinks::collection::list();
//! p.read_from(sources::reactive::from_stream(numbers))
//!     .map(|x: u32| x * x)
//!     .write_to(sink);
//! p.run().unwrap();
//! let mut squares = out.take();
//! squares.sort();
//! assert_eq!(squares, [1, 4, 9, 16, 25]);
//! ```
//!
//! # The Reactive Streams contract
//!
//! - **Demand.** The stream is polled only when the source's batch has room, that is after
//!   the chain behind it flushed what it was given, and at most as many times as there is
//!   room (1024 items per call). A full downstream queue stops the polling, so an infinite
//!   stream is never drained into memory.
//! - **Completion and error, once.** After the stream ends (`None`) or yields an error
//!   ([`from_try_stream`]), it is never polled again. The end finishes the source; the
//!   error fails the job.
//! - **Cancellation.** When the job is cancelled or fails, the source instance is dropped,
//!   and the stream with it: dropping is how a Rust stream is told to stop.
//!
//! A stream cannot be replayed: a job that takes snapshots with exactly-once is refused at
//! submit, and with at-least-once the items handed out after the last snapshot are lost on a
//! restore (at most once for this source).
//!
//! The stream is polled on a cooperative worker, inside the shared runtime's context (see
//! [`weir_exec::async_io::runtime`]) so tokio timers and sockets work. Its waker is the source
//! instance's [`TaskletWaker`](weir_core::TaskletWaker): a `Pending` stream that becomes
//! ready wakes the worker, which polls it again on its next pass. Its `poll_next` must not
//! block.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures::Stream;
use weir_core::{BoxError, Item, NextCall, ProcessorContext};

use super::{BatchSource, Emitter, SourceReader};
use weir_exec::async_io::runtime;

/// Why a stream source failed.
#[derive(Debug, thiserror::Error)]
pub enum StreamSourceError {
    /// A stream can be read once; the pipeline holding it was run a second time.
    #[error("the stream of source '{source_name}' was already consumed by an earlier run")]
    AlreadyConsumed {
        /// The source's name.
        source_name: String,
    },
}

type BoxedStream<T> = Pin<Box<dyn Stream<Item = Result<T, BoxError>> + Send>>;

/// Creates a source that emits the items of `stream`, in order.
///
/// It runs as one instance (parallelism `Some(1)`) and is cooperative. The stream is taken
/// by the first run of the pipeline; a second run fails with
/// [`StreamSourceError::AlreadyConsumed`]. See the [module docs](self) for the demand,
/// completion and cancellation rules.
///
/// Cost: one `poll_next` per item, no allocation of its own.
pub fn from_stream<T, S>(stream: S) -> BatchSource<T>
where
    T: Item,
    S: Stream<Item = T> + Send + 'static,
{
    use futures::StreamExt;
    boxed("stream", Box::pin(stream.map(Ok)))
}

/// Like [`from_stream`] for a stream of results: the first `Err` fails the job with that
/// error, and the stream is not polled again.
pub fn from_try_stream<T, E, S>(stream: S) -> BatchSource<T>
where
    T: Item,
    E: Into<BoxError>,
    S: Stream<Item = Result<T, E>> + Send + 'static,
{
    use futures::StreamExt;
    boxed("stream", Box::pin(stream.map(|r| r.map_err(Into::into))))
}

fn boxed<T: Item>(name: &str, stream: BoxedStream<T>) -> BatchSource<T> {
    let slot = Arc::new(Mutex::new(Some(stream)));
    let source_name = name.to_string();
    BatchSource::new(name, Some(1), move |_| StreamReader {
        stream: slot.lock().unwrap_or_else(|e| e.into_inner()).take(),
        name: source_name.clone(),
        finished: false,
        waker: Waker::noop().clone(),
    })
}

/// The reader behind [`from_stream`].
struct StreamReader<T> {
    stream: Option<BoxedStream<T>>,
    name: String,
    finished: bool,
    /// Wakes the source's thread when a pending stream becomes ready.
    waker: Waker,
}

impl<T: Item> SourceReader for StreamReader<T> {
    type Item = T;

    /// The stream's waker wakes the instance when it is ready.
    fn next_read(&self) -> NextCall {
        NextCall::OnWake
    }

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.waker = ctx.waker().to_waker();
        if self.stream.is_none() {
            return Err(StreamSourceError::AlreadyConsumed {
                source_name: self.name.clone(),
            }
            .into());
        }
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, T>) -> Result<bool, BoxError> {
        if self.finished {
            return Ok(true);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Ok(true);
        };
        let _context = runtime()?.enter();
        let mut cx = Context::from_waker(&self.waker);
        // One poll per unit of demand: the room left in the batch.
        while out.room() > 0 {
            match stream.as_mut().poll_next(&mut cx) {
                Poll::Ready(Some(Ok(item))) => {
                    if !out.emit(item) {
                        return Ok(false);
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    self.finished = true;
                    self.stream = None;
                    return Err(e);
                }
                Poll::Ready(None) => {
                    self.finished = true;
                    self.stream = None;
                    return Ok(true);
                }
                Poll::Pending => return Ok(false),
            }
        }
        Ok(false)
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.stream = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts every poll of an endless stream of numbers.
    fn counted(polls: Arc<AtomicUsize>) -> impl Stream<Item = u64> + Send + 'static {
        futures::stream::iter(0..).inspect(move |_| {
            polls.fetch_add(1, Ordering::Relaxed);
        })
    }

    use futures::StreamExt;

    #[test]
    fn polls_no_more_than_the_room_in_the_batch() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut reader = StreamReader {
            stream: Some(Box::pin(counted(Arc::clone(&polls)).map(Ok))),
            name: "s".into(),
            finished: false,
            waker: Waker::noop().clone(),
        };
        let mut batch = Vec::new();
        assert!(!reader.read(&mut Emitter::new(&mut batch, 3)).unwrap());
        assert_eq!(batch, [0, 1, 2]);
        assert_eq!(polls.load(Ordering::Relaxed), 3, "demand was 3");
        let mut full = vec![9, 9];
        assert!(!reader.read(&mut Emitter::new(&mut full, 2)).unwrap());
        assert_eq!(polls.load(Ordering::Relaxed), 3, "no room: no poll");
    }

    #[test]
    fn an_error_ends_the_stream_once() {
        let items =
            futures::stream::iter(vec![Ok(1u8), Err::<u8, BoxError>("broken".into()), Ok(3)]);
        let mut reader = StreamReader {
            stream: Some(Box::pin(items)),
            name: "s".into(),
            finished: false,
            waker: Waker::noop().clone(),
        };
        let mut batch = Vec::new();
        let e = reader
            .read(&mut Emitter::unbounded(&mut batch))
            .unwrap_err();
        assert_eq!(e.to_string(), "broken");
        assert_eq!(batch, [1]);
        assert!(
            reader.read(&mut Emitter::unbounded(&mut batch)).unwrap(),
            "finished, never polled again"
        );
        assert_eq!(batch, [1]);
    }
}
