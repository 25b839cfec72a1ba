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
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use weir_core::{BoxError, Counter, Item, NextCall, Processor, ProcessorContext};

use crate::sources::chunked::{ChunkOptions, ChunkedSource};
use crate::sources::files::{InputFiles, SourceError};
use crate::sources::json::JsonLinesFormat;
use crate::sources::{Emitter, SourceReader};
use weir_exec::event_time::TimestampFn;
use weir_exec::links::link::ErasedLink;
use weir_exec::links::stream_source::{EventTimePolicy, stream_source_head};

/// Builds a stream source's head around its chain, with the chosen event-time policy.
pub type StreamHeadFactory<T> = Arc<
    dyn Fn(&ProcessorContext, ErasedLink, EventTimePolicy<T>) -> Box<dyn Processor> + Send + Sync,
>;

/// An infinite (or finite) source of `T`s in event time. Pass it to
/// `weir::Pipeline::read_from`.
pub struct StreamSource<T> {
    name: String,
    parallelism: Option<usize>,
    head: StreamHeadFactory<T>,
    native: Option<TimestampFn<T>>,
    pooled_parsing: bool,
}

/// What the planner takes from a [`StreamSource`] (see [`StreamSource::into_parts`]).
pub struct StreamSourceParts<T> {
    /// The source's name, the name of its vertex.
    pub name: String,
    /// A fixed instance count, or `None` for one instance per worker.
    pub parallelism: Option<usize>,
    /// Builds an instance's head processor around the chain after it, with the event-time
    /// policy the pipeline chose.
    pub head: StreamHeadFactory<T>,
    /// The items' own event time, when the source declared one.
    pub native: Option<TimestampFn<T>>,
    /// Whether the source's items are parsed on a pool (see
    /// [`StreamSource::with_pooled_parsing`]).
    pub pooled_parsing: bool,
}

impl<T: Item> StreamSource<T> {
    /// Takes the source apart for the planner.
    pub fn into_parts(self) -> StreamSourceParts<T> {
        StreamSourceParts {
            name: self.name,
            parallelism: self.parallelism,
            head: self.head,
            native: self.native,
            pooled_parsing: self.pooled_parsing,
        }
    }

    /// A stream source named `name` whose instances each read with the reader `factory`
    /// makes. A reader whose `read` never returns true makes an infinite stream.
    pub fn new<R, F>(name: impl Into<String>, parallelism: Option<usize>, factory: F) -> Self
    where
        R: SourceReader<Item = T>,
        F: Fn(&ProcessorContext) -> R + Send + Sync + 'static,
    {
        let head: StreamHeadFactory<T> =
            Arc::new(move |ctx, chain, policy| stream_source_head(factory(ctx), policy, chain));
        StreamSource {
            name: name.into(),
            parallelism,
            head,
            native: None,
            pooled_parsing: false,
        }
    }

    /// Declares that items carry their own event time, read by `timestamp`; enables
    /// `weir::stream::StreamSourceStage::with_native_timestamps`.
    pub fn with_native_timestamps(
        mut self,
        timestamp: impl Fn(&T) -> i64 + Send + Sync + 'static,
    ) -> Self {
        self.native = Some(Arc::new(timestamp));
        self
    }

    /// Declares, when `pooled`, that the source's instance hands out items parsed on a pool
    /// of threads, as [`chunked`](crate::sources::chunked) readers with more than one thread
    /// do: the heavy per-item work of reading already runs on every core.
    ///
    /// A source with a single instance (one that keeps file order, say) normally has the
    /// stages after it spread over the workers behind an edge, which moves every item
    /// to another vertex. With this declaration the planner instead fuses the stateless
    /// stages after the source, and an aggregation's accumulate step, into the source's
    /// own vertex, as a hand-written loop would run them on the thread that receives the
    /// parsed items: only what is left after filtering and pre-aggregation crosses an edge.
    /// Put `rebalance` after the source to spread costly stages
    /// over the workers instead; a stage given its own
    /// `local_parallelism` keeps it.
    ///
    /// No effect on a source with an instance per worker, whose stages fuse anyway.
    pub fn with_pooled_parsing(mut self, pooled: bool) -> Self {
        self.pooled_parsing = pooled;
        self
    }
}

/// The items of a list as a finite stream, from one instance, in order. For tests and examples.
pub fn items<T: Item>(items: impl IntoIterator<Item = T>) -> StreamSource<T> {
    StreamSource::new(
        "stream-items",
        Some(1),
        super::collection::reader_factory(items),
    )
}

/// Generates `make(n)` for `n = 0, 1, 2, ...`: `count` items, or for ever with `None`.
/// `rate` caps the items per second over all instances (0: as fast as possible), paced in
/// steps as [`throttled`] is. Instance `i`
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
            allowed = allowed.min(paced_due(started, self.rate).saturating_sub(self.made));
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

    fn next_read(&self) -> NextCall {
        if self.rate == 0 {
            return NextCall::Poll;
        }
        paced_next_read(self.started, self.made, self.rate)
    }

    /// The next number, 8 bytes.
    fn position(&self) -> Option<Vec<u8>> {
        Some(self.next.to_le_bytes().to_vec())
    }

    /// Goes on from the number; a paced generator paces from the seek on.
    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        let next = super::generator::decode_u64(position)?;
        if next % self.step != self.next % self.step {
            return Err(
                format!("number {next} is not this instance's: the parallelism changed").into(),
            );
        }
        self.next = next;
        Ok(())
    }
}

/// The fewest items a paced reader hands out per read while its pace allows, unless that
/// would hold the first of them back longer than [`MAX_PACE_STEP_MS`]: each read wakes the
/// source's worker and then its consumers, some tens of microseconds of CPU all told, so
/// below 64 items a wake the wakes cost more than the items (at 100,000 items/s over two
/// instances, a read every millisecond cost 13% of a core, every two 8%).
const PACE_BATCH: u64 = 64;

/// The longest step of a paced reader's pace, ms: at a low rate an item leaves at most this
/// long after its time, and the source wakes at most `1000 / MAX_PACE_STEP_MS` times a second.
const MAX_PACE_STEP_MS: u64 = 10;

/// The step a reader paced at `per_second` moves in, ms: long enough for [`PACE_BATCH`]
/// items, at least 1 and at most [`MAX_PACE_STEP_MS`]. At 64,000 items per second per
/// instance and more, a millisecond.
fn pace_step_ms(per_second: u64) -> u64 {
    (PACE_BATCH * 1000)
        .div_ceil(per_second.max(1))
        .clamp(1, MAX_PACE_STEP_MS)
}

/// How many items a reader paced at `per_second` since `started` may have handed out by
/// now. The pace moves in whole steps ([`pace_step_ms`]), so a busy paced source reads a
/// millisecond's items at a time instead of one item every few microseconds, and a slow one
/// a few items per wake instead of one.
fn paced_due(started: Instant, per_second: u64) -> u64 {
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    due_at(ms, per_second)
}

/// [`paced_due`] at `ms` after the start.
fn due_at(ms: u64, per_second: u64) -> u64 {
    let step = pace_step_ms(per_second);
    let ms = ms / step * step;
    u64::try_from(u128::from(ms) * u128::from(per_second) / 1000).unwrap_or(u64::MAX)
}

/// When a reader paced as in [`paced_due`], having handed out `made`, may hand out its next
/// item: the step at which [`paced_due`] passes `made`. `Poll` before its first read.
fn paced_next_read(started: Option<Instant>, made: u64, per_second: u64) -> NextCall {
    let Some(started) = started else {
        return NextCall::Poll;
    };
    NextCall::At(started + Duration::from_millis(next_due_ms(made, per_second)))
}

/// The first ms after the start at which [`due_at`] exceeds `made`: the first whole step at
/// or after the millisecond the pace allows item `made + 1`.
fn next_due_ms(made: u64, per_second: u64) -> u64 {
    let ms = ((u128::from(made) + 1) * 1000).div_ceil(u128::from(per_second.max(1)));
    let step = u128::from(pace_step_ms(per_second));
    u64::try_from(ms.div_ceil(step) * step).unwrap_or(u64::MAX)
}

/// Paces `reader` to at most `per_second` items per second of wall-clock time, over all the
/// source's instances together (each takes its share).
///
/// The pace moves in steps: a millisecond's items at a time at 64,000 items per second per
/// instance and more; below that, a step long enough for 64 items, at most 10 ms, so a slow
/// source wakes its worker at most 100 times a second and an item leaves at most 10 ms after
/// its time.
pub fn throttled<R: SourceReader>(reader: R, per_second: u64) -> Throttled<R> {
    Throttled {
        reader,
        per_second,
        started: None,
        emitted: 0,
        caught_up: false,
    }
}

/// A reader paced by [`throttled`].
pub struct Throttled<R> {
    reader: R,
    per_second: u64,
    started: Option<Instant>,
    emitted: u64,
    /// The last read handed out everything the pace allowed: the pace decides the next.
    caught_up: bool,
}

impl<R: SourceReader> SourceReader for Throttled<R> {
    type Item = R::Item;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.per_second = (self.per_second / ctx.total_parallelism().max(1) as u64).max(1);
        self.reader.open(ctx)
    }

    fn read(&mut self, out: &mut Emitter<'_, R::Item>) -> Result<bool, BoxError> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let allowed = paced_due(started, self.per_second).saturating_sub(self.emitted);
        self.caught_up = true;
        if allowed == 0 {
            return Ok(false);
        }
        let mut limited = out.limited(allowed.min(usize::MAX as u64) as usize);
        let before = limited.room();
        let done = self.reader.read(&mut limited)?;
        let read = (before - limited.room()) as u64;
        self.emitted += read;
        self.caught_up = read == allowed;
        Ok(done)
    }

    /// When the pace allows the next millisecond's items, if the last read took all it
    /// allowed; otherwise the inner reader had less to give, and it says when to ask again.
    fn next_read(&self) -> NextCall {
        if self.caught_up {
            paced_next_read(self.started, self.emitted, self.per_second)
        } else {
            self.reader.next_read()
        }
    }

    fn partitions(&self) -> usize {
        self.reader.partitions()
    }

    fn is_cooperative(&self) -> bool {
        self.reader.is_cooperative()
    }

    fn position(&self) -> Option<Vec<u8>> {
        self.reader.position()
    }

    /// Seeks the inner reader; the pace counts from the seek on.
    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        self.started = None;
        self.emitted = 0;
        self.reader.seek(position)
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.reader.close()
    }
}

/// Replays a JSON Lines file (or directory, or glob) as a finite stream, in file order, from
/// one instance. Malformed lines are counted and logged as by [`json::lines`](super::json::lines).
///
/// The lines are parsed in chunks on every core ([`chunked`](super::chunked)) and handed
/// out in file order, so event time, lateness and the line numbers of malformed lines are
/// those of a single reader. With more than one parser thread the source is declared
/// [pooled](StreamSource::with_pooled_parsing): the stateless stages after it, and an
/// aggregation's accumulate, run in its vertex.
///
/// # Errors
/// As [`json::lines`](super::json::lines).
pub fn json_lines<T: DeserializeOwned + Item>(
    path: impl AsRef<Path>,
) -> Result<StreamSource<T>, SourceError> {
    json_lines_with(path, ChunkOptions::default())
}

/// [`json_lines`], cut and parsed as `options` say: `threads: 1` parses on the reading
/// thread alone.
///
/// # Errors
/// As [`json::lines`](super::json::lines).
pub fn json_lines_with<T: DeserializeOwned + Item>(
    path: impl AsRef<Path>,
    options: ChunkOptions,
) -> Result<StreamSource<T>, SourceError> {
    let files = std::sync::Arc::new(InputFiles::resolve(path.as_ref())?);
    let format = std::sync::Arc::new(JsonLinesFormat::<T>::default());
    Ok(StreamSource::new(
        format!("json-replay({})", path.as_ref().display()),
        Some(1),
        move |_: &ProcessorContext| {
            ChunkedSource::new(
                std::sync::Arc::clone(&format),
                std::sync::Arc::clone(&files),
                options,
            )
        },
    )
    .with_pooled_parsing(options.threads > 1))
}

/// The longest line [`socket`] takes: 1 MiB.
pub const SOCKET_MAX_LINE: usize = 1 << 20;

/// Reads lines of text from a TCP server at `addr` until it closes the connection. One
/// instance; the reader blocks on the socket, so it reads ahead on an I/O thread of its own.
/// Use it with
/// `weir::stream::StreamSourceStage::with_ingestion_timestamps`
/// for a live demo.
///
/// A line is stripped of its `\n` (and a `\r` before it). Invalid UTF-8 is decoded lossily
/// (U+FFFD) and counted in `invalid_utf8_lines`; a line longer than [`SOCKET_MAX_LINE`] bytes
/// is dropped, counted in `oversized_lines` and logged with its line number. Neither fails
/// the job.
///
/// A socket cannot be replayed: a job that takes snapshots with exactly-once is refused at
/// submit; with at-least-once, the lines read after the last snapshot are lost on a restore
/// (at most once for this source).
pub fn socket(addr: SocketAddr) -> StreamSource<String> {
    socket_with_max_line(addr, SOCKET_MAX_LINE)
}

/// Like [`socket`], dropping lines longer than `max_line` bytes.
pub fn socket_with_max_line(addr: SocketAddr, max_line: usize) -> StreamSource<String> {
    StreamSource::new(
        format!("socket({addr})"),
        Some(1),
        move |_: &ProcessorContext| SocketReader {
            addr,
            max_line,
            stream: None,
            line: Vec::new(),
            line_number: 0,
            skipping: false,
            invalid_utf8: Counter::default(),
            oversized: Counter::default(),
        },
    )
}

struct SocketReader {
    addr: SocketAddr,
    max_line: usize,
    stream: Option<BufReader<TcpStream>>,
    /// The line read so far.
    line: Vec<u8>,
    /// Lines started so far, for log messages.
    line_number: u64,
    /// The current line is over the limit: drop bytes until its end.
    skipping: bool,
    invalid_utf8: Counter,
    oversized: Counter,
}

impl SocketReader {
    /// Ends the current line: emits it, decoded, unless it was too long. Returns whether the
    /// batch has room for more.
    fn end_line(&mut self, out: &mut Emitter<'_, String>) -> bool {
        self.line_number += 1;
        if std::mem::take(&mut self.skipping) {
            return true;
        }
        let mut bytes = std::mem::take(&mut self.line);
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                self.invalid_utf8.increment();
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }
        };
        out.emit(text)
    }
}

impl SourceReader for SocketReader {
    type Item = String;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.invalid_utf8 = ctx.metrics().counter("invalid_utf8_lines");
        self.oversized = ctx.metrics().counter("oversized_lines");
        let stream = TcpStream::connect(self.addr)
            .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
        // Wake up now and then, so that a cancelled job stops promptly.
        stream.set_read_timeout(Some(Duration::from_millis(50)))?;
        self.stream = Some(BufReader::new(stream));
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, String>) -> Result<bool, BoxError> {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                return Ok(true);
            };
            let buf = match stream.fill_buf() {
                Ok(buf) => buf,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(false);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading from {}: {e}", self.addr).into()),
            };
            if buf.is_empty() {
                // The peer closed the connection; a last line without `\n` still counts.
                self.stream = None;
                if !self.line.is_empty() || self.skipping {
                    self.end_line(out);
                }
                return Ok(true);
            }
            let (chunk, ends_line) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            let taken = chunk.len() + usize::from(ends_line);
            if !self.skipping {
                if self.line.len() + chunk.len() > self.max_line {
                    self.skipping = true;
                    self.line.clear();
                    self.oversized.increment();
                    tracing::warn!(
                        source = %self.addr,
                        line = self.line_number + 1,
                        max_bytes = self.max_line,
                        "line too long: dropped"
                    );
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            stream.consume(taken);
            if ends_line && !self.end_line(out) {
                return Ok(false);
            }
        }
    }

    fn is_cooperative(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_pace_moves_in_steps_of_a_few_items_and_at_most_ten_ms() {
        // 500 items a second: 64 items would take 128 ms, so the step is the longest.
        assert_eq!(pace_step_ms(500), MAX_PACE_STEP_MS);
        // 5,000 a second: 64 items in 12.8 ms, more than the longest step.
        assert_eq!(pace_step_ms(5_000), MAX_PACE_STEP_MS);
        // 50,000 a second: 64 items in 1.28 ms.
        assert_eq!(pace_step_ms(50_000), 2);
        // 64,000 a second and more: a millisecond's items at a time.
        assert_eq!(pace_step_ms(64_000), 1);
        assert_eq!(pace_step_ms(500_000), 1);
        assert_eq!(pace_step_ms(0), MAX_PACE_STEP_MS);
    }

    #[test]
    fn the_next_read_is_when_the_pace_allows_more_and_not_before() {
        for per_second in [1, 7, 500, 999, 5_000, 16_000, 50_000, 64_000, 1_000_000] {
            let mut made = 0;
            for ms in 0..3_000 {
                let due = due_at(ms, per_second);
                assert!(due >= made, "the pace never goes back");
                // At most one step behind the exact pace.
                let step = pace_step_ms(per_second);
                assert!(due + per_second * step / 1000 + 1 >= ms * per_second / 1000);
                if due > made {
                    assert_eq!(
                        next_due_ms(made, per_second),
                        ms,
                        "{per_second}/s: more allowed at {ms} ms"
                    );
                    made = due;
                } else {
                    assert!(
                        next_due_ms(made, per_second) > ms,
                        "{per_second}/s at {ms} ms"
                    );
                }
            }
            assert_eq!(made, due_at(2_999, per_second));
        }
    }
}
