//! Where a source head gets its batches: from its reader directly, or, for a reader that may
//! block, from a read-ahead thread.
//!
//! A [`SourceReader`] that is not cooperative (file and socket reads can block) runs on an
//! I/O thread of its own, `weir-io-<vertex>-<instance>`, which reads batches ahead into a
//! bounded queue of [`READ_AHEAD`] batches. The head stays cooperative: it takes a ready batch
//! without waiting, so the CPU work behind the source (parsing in the chain, tokenizing,
//! hashing, windows) runs on the cooperative workers, and a slow disk or a quiet socket never
//! holds a worker. A full queue stops the thread: that is backpressure reaching the reader.
//!
//! Cost per batch of up to [`BATCH`] items: one queue hand-off (a lock-free push and pop), one
//! `Vec` allocation on the I/O thread, one wake-up of the head's worker.
//!
//! # Positions
//!
//! A snapshot must record where the reader is as far as the *head* is concerned: after the
//! last item handed to the chain, not after what the I/O thread has read ahead. So the thread
//! asks the reader for its [`position`](SourceReader::position) after every read that
//! emitted something and sends it with the batch; the feed's [`position`](SourceFeed::position)
//! is that of the last batch taken.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use weir_core::error::panic_message;
use weir_core::snapshot::Guarantee;
use weir_core::{BoxError, ProcessorContext, TaskletWaker};

use crate::connector::{Emitter, SourceReader};

/// The most items a source hands to its chain at once.
pub const BATCH: usize = 1024;

/// Batches the read-ahead thread may hold ready before it waits for the head: enough to ride
/// out the head's worker being busy with its other tasklets for a scheduler slice or two.
pub const READ_AHEAD: usize = 16;

/// What one read gave, besides the items it appended.
#[derive(Debug)]
pub enum ReadOutcome {
    /// More may come: call again.
    More,
    /// The input is exhausted (and the reader closed, on a read-ahead thread).
    Exhausted,
    /// The reader failed. The items read before the failure were appended and must still
    /// go down the chain before the job fails with this.
    Failed(BoxError),
}

/// A source's reader, run inline or on a read-ahead thread. See the [module docs](self).
pub struct SourceFeed<R: SourceReader> {
    /// The reader, until it moves to its thread (or for good, when it is cooperative).
    reader: Option<R>,
    ahead: Option<ReadAhead<R::Item>>,
    thread_name: String,
    waker: TaskletWaker,
    closed: bool,
    /// Once the reader moved to its thread: the position after the last batch taken.
    handed: Option<Vec<u8>>,
    /// Whether the reader can replay (its position was `Some` when it was opened).
    replayable: bool,
    /// Whether positions are taken at all: only a job that snapshots saves them, and a
    /// position may cost (a file source's carries its input's listing).
    positions: bool,
}

/// What the read-ahead thread sends.
enum Message<T> {
    /// Items, their partition runs, and the reader's position after the last of them.
    Batch(Vec<T>, Vec<(usize, u32)>, Option<Vec<u8>>),
    /// The reader is exhausted; the result of closing it.
    End(Result<(), BoxError>),
    Failed(BoxError),
}

struct ReadAhead<T> {
    rx: Option<Receiver<Message<T>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    ended: bool,
}

impl<R: SourceReader> SourceFeed<R> {
    /// A feed that will read from `reader` on an I/O thread of its own, once started.
    pub fn new(reader: R) -> Self {
        SourceFeed {
            reader: Some(reader),
            ahead: None,
            thread_name: String::new(),
            waker: TaskletWaker::default(),
            closed: false,
            handed: None,
            replayable: false,
            positions: false,
        }
    }

    /// Opens the reader on the calling thread (the job's submitter), so that a bad path or
    /// an unreachable server refuses the job before anything runs.
    pub fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.thread_name = format!("weir-io-{}-{}", ctx.vertex(), ctx.global_index());
        self.waker = ctx.waker().clone();
        match &mut self.reader {
            Some(reader) => {
                reader.open(ctx)?;
                self.positions = ctx.guarantee() != Guarantee::None;
                self.replayable = self.positions && reader.position().is_some();
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Whether the reader can replay its input ([`SourceReader::position`] is `Some`), in
    /// a job that snapshots (false in one that does not: nothing asks).
    pub fn replayable(&self) -> bool {
        self.replayable
    }

    /// The reader's position after the last item [`read`](Self::read) handed out; `None`
    /// when it cannot replay, or when the job takes no snapshots.
    pub fn position(&self) -> Option<Vec<u8>> {
        match (&self.reader, &self.ahead) {
            (Some(reader), None) if self.positions => reader.position(),
            _ => self.handed.clone(),
        }
    }

    /// Moves the reader to `position` (see [`SourceReader::seek`]). Only before the first
    /// read: a restore comes right after `open`.
    pub fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        match &mut self.reader {
            Some(reader) if self.ahead.is_none() => reader.seek(position),
            _ => Err("a source can only seek before it reads".into()),
        }
    }

    /// When an instance whose last read found nothing should read again: a cooperative
    /// reader says ([`SourceReader::next_read`]); a read-ahead thread wakes the instance
    /// when it has a batch.
    pub fn next_read(&self) -> weir_core::NextCall {
        match &self.reader {
            Some(reader) if reader.is_cooperative() => reader.next_read(),
            _ => weir_core::NextCall::OnWake,
        }
    }

    /// How many partitions the reader reads (see [`SourceReader::partitions`]).
    pub fn partitions(&self) -> usize {
        self.reader.as_ref().map_or(1, SourceReader::partitions)
    }

    /// Appends the next batch to `items` (at most [`BATCH`]), with the partition runs in
    /// `runs` when given. Never blocks: with a read-ahead thread, no batch ready yet is
    /// `More` with nothing appended.
    pub fn read(
        &mut self,
        items: &mut Vec<R::Item>,
        runs: Option<&mut Vec<(usize, u32)>>,
    ) -> ReadOutcome {
        if let Some(reader) = self.reader.as_mut().filter(|r| r.is_cooperative()) {
            let mut out = match runs {
                Some(runs) => Emitter::with_partitions(items, BATCH, runs),
                None => Emitter::new(items, BATCH),
            };
            return match reader.read(&mut out) {
                Ok(true) => ReadOutcome::Exhausted,
                Ok(false) => ReadOutcome::More,
                Err(e) => ReadOutcome::Failed(e),
            };
        }
        if self.ahead.is_none() {
            match self.start() {
                Ok(ahead) => self.ahead = Some(ahead),
                Err(e) => return ReadOutcome::Failed(e),
            }
        }
        let ahead = self.ahead.as_mut().expect("started above");
        let Some(rx) = &ahead.rx else {
            return ReadOutcome::Exhausted;
        };
        match rx.try_recv() {
            Ok(Message::Batch(batch, batch_runs, position)) => {
                if position.is_some() {
                    self.handed = position;
                }
                let base = items.len();
                if let Some(runs) = runs {
                    runs.extend(batch_runs.into_iter().map(|(at, p)| (base + at, p)));
                }
                if items.is_empty() {
                    *items = batch;
                } else {
                    items.extend(batch);
                }
                ReadOutcome::More
            }
            Ok(Message::End(closed)) => {
                ahead.ended = true;
                match closed {
                    Ok(()) => ReadOutcome::Exhausted,
                    Err(e) => ReadOutcome::Failed(e),
                }
            }
            Ok(Message::Failed(e)) => {
                ahead.ended = true;
                ReadOutcome::Failed(e)
            }
            Err(TryRecvError::Empty) => ReadOutcome::More,
            Err(TryRecvError::Disconnected) => {
                ReadOutcome::Failed("the read-ahead thread ended without a word".into())
            }
        }
    }

    fn start(&mut self) -> Result<ReadAhead<R::Item>, BoxError> {
        let reader = self
            .reader
            .take()
            .expect("a feed starts its thread once, with its reader");
        // Nothing handed out yet: the position is where the reader stands (after a seek).
        self.handed = if self.positions {
            reader.position()
        } else {
            None
        };
        let (tx, rx) = mpsc::sync_channel(READ_AHEAD);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, waker) = (Arc::clone(&stop), self.waker.clone());
            let positions = self.positions;
            thread::Builder::new()
                .name(self.thread_name.clone())
                .spawn(move || read_ahead(reader, &tx, &stop, &waker, positions))
                .map_err(|e| format!("cannot start the read-ahead thread: {e}"))?
        };
        Ok(ReadAhead {
            rx: Some(rx),
            stop,
            thread: Some(thread),
            ended: false,
        })
    }

    /// Stops the read-ahead thread, if any, and closes the reader. Returns the reader's
    /// `close` error when the reader never left this thread.
    pub fn close(&mut self) -> Result<(), BoxError> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        if let Some(ahead) = &mut self.ahead {
            ahead.stop.store(true, Ordering::Release);
            // Dropping the receiver frees a thread blocked on a full queue.
            drop(ahead.rx.take());
            if let Some(t) = ahead.thread.take() {
                t.thread().unpark();
                if t.join().is_err() && !ahead.ended {
                    return Err("the read-ahead thread panicked".into());
                }
            }
            return Ok(());
        }
        match &mut self.reader {
            Some(reader) => reader.close(),
            None => Ok(()),
        }
    }
}

impl<R: SourceReader> Drop for SourceFeed<R> {
    fn drop(&mut self) {
        // A head dropped without close (a refused job) must not leave its thread behind.
        let _ = self.close();
    }
}

/// Pauses of an I/O thread whose reader had nothing: from 25 µs, doubling up to 1 ms.
const MIN_PAUSE: Duration = Duration::from_micros(25);
const MAX_PAUSE: Duration = Duration::from_millis(1);

/// The read-ahead thread: reads batches until the input ends, the reader fails, or the head
/// goes away, then closes the reader.
fn read_ahead<R: SourceReader>(
    mut reader: R,
    tx: &SyncSender<Message<R::Item>>,
    stop: &AtomicBool,
    waker: &TaskletWaker,
    positions: bool,
) {
    let mut pause = MIN_PAUSE;
    let send = |m: Message<R::Item>| {
        let sent = tx.send(m).is_ok();
        waker.wake();
        sent
    };
    while !stop.load(Ordering::Acquire) {
        let mut items = Vec::with_capacity(BATCH);
        let mut runs = Vec::new();
        let read = catch_unwind(AssertUnwindSafe(|| {
            reader.read(&mut Emitter::with_partitions(&mut items, BATCH, &mut runs))
        }));
        let got = !items.is_empty();
        // The position travels with the items it follows (see the module docs).
        let position = if positions { reader.position() } else { None };
        if got && !send(Message::Batch(items, runs, position)) {
            break;
        }
        match read {
            Ok(Ok(false)) if got => pause = MIN_PAUSE,
            Ok(Ok(false)) => {
                // Nothing to read right now: a quiet socket, a paced generator.
                thread::park_timeout(pause);
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Ok(Ok(true)) => {
                let closed = catch_unwind(AssertUnwindSafe(|| reader.close()))
                    .unwrap_or_else(|_| Err("the source reader panicked in close".into()));
                send(Message::End(closed));
                return;
            }
            Ok(Err(e)) => {
                send(Message::Failed(e));
                break;
            }
            Err(panic) => {
                let message = panic_message(&*panic);
                send(Message::Failed(
                    format!("the source reader panicked: {message}").into(),
                ));
                break;
            }
        }
    }
    match catch_unwind(AssertUnwindSafe(|| reader.close())) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "closing a stopped source reader failed"),
        Err(_) => tracing::warn!("a stopped source reader panicked in close"),
    }
}
