//! Stream sources: a timed generator, a replay of JSON Lines, a TCP text socket, and an
//! in-memory list for tests.
//!
//! ```
//! use weir::prelude::*;
//!
//! // 10,000 numbered events, 100 ms of event time apart, as fast as possible.
//! let p = Pipeline::new();
//! let (sink, out) = sinks::collection::list();
//! p.read_from(sources::stream::generator(0, Some(10_000), |n| n))
//!     .with_timestamps(|n: &u64| *n as i64 * 100, 0)
//!     .window(WindowDefinition::tumbling(100_000))
//!     .aggregate(aggregate::counting())
//!     .write_to(sink);
//! p.run().unwrap();
//! assert_eq!(out.take().len(), 10);
//! ```

use std::io::{BufRead, BufReader, ErrorKind};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use weir_core::{BoxError, Item, ProcessorContext};

use crate::sources::files::SourceError;
use crate::sources::{Emitter, SourceReader};
use crate::stream::StreamSource;

/// The items of a list as a finite stream, from one instance, in order. For tests and examples.
pub fn items<T: Item>(items: impl IntoIterator<Item = T>) -> StreamSource<T> {
    StreamSource::new(
        "stream-items",
        Some(1),
        super::collection::reader_factory(items),
    )
}

/// Generates `make(n)` for `n = 0, 1, 2, ...`: `count` items, or for ever with `None`.
/// `rate` caps the items per second over all instances (0: as fast as possible). Instance `i`
/// of `p` makes the numbers `i, i+p, i+2p, ...`, so the set of items does not depend on the
/// parallelism.
pub fn generator<T: Item>(
    rate: u64,
    count: Option<u64>,
    make: impl Fn(u64) -> T + Send + Sync + 'static,
) -> StreamSource<T> {
    let make = std::sync::Arc::new(make);
    StreamSource::new("generator", None, move |_: &ProcessorContext| {
        GeneratorReader {
            make: std::sync::Arc::clone(&make),
            rate,
            count,
            next: 0,
            step: 1,
            made: 0,
            started: None,
        }
    })
}

struct GeneratorReader<F> {
    make: std::sync::Arc<F>,
    rate: u64,
    count: Option<u64>,
    next: u64,
    step: u64,
    made: u64,
    started: Option<Instant>,
}

impl<T: Item, F: Fn(u64) -> T + Send + Sync + 'static> SourceReader for GeneratorReader<F> {
    type Item = T;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.next = ctx.global_index() as u64;
        self.step = ctx.total_parallelism().max(1) as u64;
        if self.rate > 0 {
            // This instance's share of the rate.
            self.rate = (self.rate / self.step).max(1);
        }
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, T>) -> Result<bool, BoxError> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let mut allowed = out.room() as u64;
        if self.rate > 0 {
            let due = (started.elapsed().as_secs_f64() * self.rate as f64) as u64;
            allowed = allowed.min(due.saturating_sub(self.made));
        }
        for _ in 0..allowed {
            if self.count.is_some_and(|c| self.next >= c) {
                return Ok(true);
            }
            out.emit((self.make)(self.next));
            self.next += self.step;
            self.made += 1;
        }
        Ok(self.count.is_some_and(|c| self.next >= c))
    }
}

/// Paces `reader` to at most `per_second` items per second of wall-clock time, over all the
/// source's instances together (each takes its share).
pub fn throttled<R: SourceReader>(reader: R, per_second: u64) -> Throttled<R> {
    Throttled {
        reader,
        per_second,
        started: None,
        emitted: 0,
    }
}

/// A reader paced by [`throttled`].
pub struct Throttled<R> {
    reader: R,
    per_second: u64,
    started: Option<Instant>,
    emitted: u64,
}

impl<R: SourceReader> SourceReader for Throttled<R> {
    type Item = R::Item;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.per_second = (self.per_second / ctx.total_parallelism().max(1) as u64).max(1);
        self.reader.open(ctx)
    }

    fn read(&mut self, out: &mut Emitter<'_, R::Item>) -> Result<bool, BoxError> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let due = (started.elapsed().as_secs_f64() * self.per_second as f64) as u64;
        let allowed = due.saturating_sub(self.emitted);
        if allowed == 0 {
            return Ok(false);
        }
        let mut limited = out.limited(allowed.min(usize::MAX as u64) as usize);
        let before = limited.room();
        let done = self.reader.read(&mut limited)?;
        self.emitted += (before - limited.room()) as u64;
        Ok(done)
    }

    fn partitions(&self) -> usize {
        self.reader.partitions()
    }

    fn is_cooperative(&self) -> bool {
        self.reader.is_cooperative()
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.reader.close()
    }
}

/// Replays a JSON Lines file (or directory, or glob) as a finite stream, in file order, from
/// one instance. Malformed lines are counted and logged as by [`json::lines`](super::json::lines).
///
/// # Errors
/// As [`json::lines`](super::json::lines).
pub fn json_lines<T: DeserializeOwned + Item>(
    path: impl AsRef<Path>,
) -> Result<StreamSource<T>, SourceError> {
    let reader = super::json::reader_factory::<T>(path.as_ref())?;
    Ok(StreamSource::new(
        format!("json-replay({})", path.as_ref().display()),
        Some(1),
        reader,
    ))
}

/// Reads lines of text from a TCP server at `addr` until it closes the connection. One
/// instance; the reader blocks on the socket, so it runs on a thread of its own. Use it with
/// [`with_ingestion_timestamps`](crate::stream::StreamSourceStage::with_ingestion_timestamps)
/// for a live demo.
pub fn socket(addr: SocketAddr) -> StreamSource<String> {
    StreamSource::new(
        format!("socket({addr})"),
        Some(1),
        move |_: &ProcessorContext| SocketReader {
            addr,
            stream: None,
            line: String::new(),
        },
    )
}

struct SocketReader {
    addr: SocketAddr,
    stream: Option<BufReader<TcpStream>>,
    line: String,
}

impl SourceReader for SocketReader {
    type Item = String;

    fn open(&mut self, _ctx: &ProcessorContext) -> Result<(), BoxError> {
        let stream = TcpStream::connect(self.addr)
            .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
        // Wake up now and then, so that a cancelled job stops promptly.
        stream.set_read_timeout(Some(Duration::from_millis(50)))?;
        self.stream = Some(BufReader::new(stream));
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, String>) -> Result<bool, BoxError> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(true);
        };
        loop {
            match stream.read_line(&mut self.line) {
                Ok(0) => return Ok(true),
                Ok(_) => {
                    let line = std::mem::take(&mut self.line);
                    let line = line.trim_end_matches(['\n', '\r']).to_string();
                    if !out.emit(line) {
                        return Ok(false);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(false);
                }
                Err(e) => return Err(format!("reading from {}: {e}", self.addr).into()),
            }
        }
    }

    fn is_cooperative(&self) -> bool {
        false
    }
}
