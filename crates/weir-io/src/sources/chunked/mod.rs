//! Parsing line-based files in parallel, in chunks, with the items handed out in file order.
//!
//! A [`ChunkedReader`] reads its files one after the other in chunks of about
//! [`ChunkOptions::chunk_bytes`], and hands them round-robin to a pool of
//! [`ChunkOptions::threads`] parser threads. When every line is a record (JSON Lines), a
//! chunk is the records that start in a byte range of that size, which its parser reads
//! itself; otherwise (CSV) the reader reads a chunk and cuts it just after the last record
//! that ends in it. Either way a record longer than a chunk makes its chunk longer. The
//! parsed chunks come back in the order they were cut, so the reader passes on items,
//! malformed-record reports and line numbers exactly as a single reader going through the
//! file line by line would: whatever is applied to the items in order afterwards (event
//! time, lateness, watermarks) gives the same result. With one thread it parses inline, on
//! the reading thread, with the same chunking.
//!
//! **Positions.** Each record comes back from its parser with where it ends in its chunk
//! ([`RecordEnd`]), and a malformed record keeps its place among the items, reported just
//! before the item that follows it. [`ChunkedReader::position`] is the file, byte offset and
//! line number just after the last record handed out or reported — never what the parsers
//! parsed ahead — and [`ChunkedReader::seek`] cuts chunks again from that byte, numbering
//! lines on from that line (a file's header is read again first). A reader resumed there
//! hands out exactly the records, malformed reports and line numbers that came after it:
//! what a source restored from a snapshot needs ([`SourceReader::position`]).
//!
//! ```
//! use std::sync::Arc;
//! use weir::sources::chunked::{for_each_line, ChunkFormat, ChunkOptions, ChunkedReader, Parsed};
//! use weir::sources::files::InputFiles;
//! use weir::sources::Emitter;
//!
//! /// Numbers, one per line.
//! struct Numbers;
//!
//! impl ChunkFormat for Numbers {
//!     type Item = u64;
//!     type Error = std::num::ParseIntError;
//!     type Header = ();
//!     fn parse(&self, chunk: &[u8], _: &(), out: &mut Parsed<u64, Self::Error>) {
//!         for_each_line(chunk, |line_no, line, end| {
//!             match std::str::from_utf8(line).unwrap_or("x").parse() {
//!                 Ok(n) => out.push(n, end),
//!                 Err(e) => out.push_malformed(line_no, e, end),
//!             }
//!         });
//!     }
//! }
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("n.txt");
//! std::fs::write(&path, "1\n2\nthree\r\n4")?;
//! let files = Arc::new(InputFiles::resolve(&path)?);
//! let options = ChunkOptions { threads: 2, chunk_bytes: 2 };
//! let mut reader = ChunkedReader::new(Arc::new(Numbers), files, options);
//! reader.open(0, 1);
//! let (mut items, mut bad) = (Vec::new(), Vec::new());
//! while !reader.read(&mut Emitter::unbounded(&mut items), |_path, line, _error| bad.push(line))? {}
//! assert_eq!(items, [1, 2, 4]);
//! assert_eq!(bad, [3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Cost
//!
//! When lines are records ([`ChunkFormat::lines_are_records`]), the reading thread only
//! deals out byte ranges: each parser `pread`s its range into a buffer it reuses, with the
//! byte before it (which tells whether a record starts at its first byte) and as much after
//! it as the last record that starts in it needs. The file's bytes are copied once, on the
//! parser threads, and the reading thread only takes the chunks back in order and hands out
//! their items. Such a file is read to the length it had when it was opened; one cut short
//! meanwhile fails the read, naming it. Otherwise (CSV, whose quoted fields hold newlines)
//! the reading thread reads each chunk, finds the cut with the format's own scan, and copies
//! the bytes of a record cut by the chunk's end once more into the next chunk. The line
//! numbers come from the chunks' newlines, which the last record's end counts (a parser
//! thread scans for them only when the chunk ends in something other than a record). Items
//! are moved once, into the chunk's vectors on the parser thread, in pieces of up to 1024: a
//! piece that fits the emitter's empty batch becomes that batch whole
//! ([`Emitter::emit_all`]), and only the items of a piece that does not are moved again,
//! into the batch. At most [`CHUNKS_AHEAD`]` × threads` chunks are parsed ahead, so memory
//! stays at a few chunk sizes per thread; backpressure on the emitter stops the reading, and
//! with it the parsers.
//!
//! The reader blocks on file reads and on the parsers: a [`SourceReader`]
//! built on it is not cooperative, and runs on an I/O thread of its own.

use std::collections::VecDeque;
use std::fmt::Display;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::num::NonZeroUsize;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use weir_core::error::panic_message;
use weir_core::{BoxError, Item, ProcessorContext};

use super::files::{InputFiles, MalformedLog, SourceError};
use super::{Emitter, SourceReader};

/// How a [`ChunkedReader`] cuts and parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// Parser threads; 1 parses on the reading thread. Default: the machine's cores.
    pub threads: usize,
    /// About how many bytes go into one chunk. Default: 1 MiB.
    pub chunk_bytes: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            threads: std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
            chunk_bytes: 1 << 20,
        }
    }
}

impl ChunkOptions {
    /// The default chunk size, parsed on `threads` threads (at least 1).
    pub fn with_threads(threads: usize) -> Self {
        ChunkOptions {
            threads: threads.max(1),
            ..ChunkOptions::default()
        }
    }
}

/// Where a record ends in its chunk: just after its terminator (at the chunk's end for a
/// last record without one). The reader turns it into the read position after the record,
/// so that a position taken after any item is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordEnd {
    /// Bytes of the chunk up to the record's end.
    pub byte: usize,
    /// Newlines of the chunk before `byte`.
    pub lines: u64,
}

/// A malformed record of a chunk, kept in its place among the items.
#[derive(Debug)]
struct Malformed<E> {
    /// Its line, counted from the chunk's first line (1).
    line: u64,
    error: E,
    end: RecordEnd,
    /// How many good records of the chunk come before it.
    items_before: usize,
}

/// Chunks in flight per parser thread (cut and not yet handed out). Chunks come back in
/// order, so a parser that gets less of the machine for a while holds the others up once
/// they are that far ahead: 2 made the parsers wait for each other on a busy 2-core machine.
pub const CHUNKS_AHEAD: usize = 4;

/// Items per piece of a [`Parsed`]: as many as a source hands its chain at once, so that a
/// whole piece can become the batch.
const PIECE: usize = weir_exec::links::read_ahead::BATCH;

/// What a format makes of one chunk: the items and the malformed records in file order,
/// each with where its record ends.
///
/// The items are kept in pieces of up to 1024, each of which the reader can hand on whole,
/// as the batch, without moving its items (see [`Emitter::emit_all`]).
///
/// Cost: 16 bytes per record beside the item, in vectors reused from chunk to chunk.
#[derive(Debug)]
pub struct Parsed<T, E> {
    pieces: Vec<Vec<T>>,
    /// The items in `pieces`.
    len: usize,
    /// Empty vectors for the next pieces.
    spare: Vec<Vec<T>>,
    ends: Vec<RecordEnd>,
    malformed: Vec<Malformed<E>>,
}

impl<T, E> Default for Parsed<T, E> {
    fn default() -> Self {
        Parsed {
            pieces: Vec::new(),
            len: 0,
            spare: Vec::new(),
            ends: Vec::new(),
            malformed: Vec::new(),
        }
    }
}

impl<T, E> Parsed<T, E> {
    /// Adds the item of a good record that ends at `end`.
    #[inline]
    pub fn push(&mut self, item: T, end: RecordEnd) {
        if self.pieces.last().is_none_or(|piece| piece.len() >= PIECE) {
            let piece = self
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(PIECE));
            self.pieces.push(piece);
        }
        if let Some(piece) = self.pieces.last_mut() {
            piece.push(item);
        }
        self.len += 1;
        self.ends.push(end);
    }

    /// Adds a malformed record that starts on `line` (counted from 1 at the chunk's first
    /// line) and ends at `end`, with what is wrong with it.
    pub fn push_malformed(&mut self, line: u64, error: E, end: RecordEnd) {
        let items_before = self.len;
        self.malformed.push(Malformed {
            line,
            error,
            end,
            items_before,
        });
    }

    /// Makes room for `additional` more items.
    pub fn reserve(&mut self, additional: usize) {
        self.pieces.reserve(additional.div_ceil(PIECE));
        self.ends.reserve(additional);
    }

    /// The items so far, in file order.
    pub fn items(&self) -> impl Iterator<Item = &T> {
        self.pieces.iter().flatten()
    }

    /// Where the last record (good or malformed) ends.
    fn last_end(&self) -> Option<RecordEnd> {
        let item = self.ends.last().copied();
        let malformed = self.malformed.last().map(|m| m.end);
        item.into_iter().chain(malformed).max_by_key(|end| end.byte)
    }

    /// Empties it, keeping the vectors' capacity.
    fn clear(&mut self) {
        for mut piece in self.pieces.drain(..) {
            piece.clear();
            self.spare.push(piece);
        }
        self.len = 0;
        self.ends.clear();
        self.malformed.clear();
    }
}

/// A record format: how to find where records end and how to parse a chunk of whole records.
///
/// Implementations are shared by the parser threads, so `parse` takes `&self`.
pub trait ChunkFormat: Send + Sync + 'static {
    /// What a good record becomes.
    type Item: Send + 'static;
    /// What is wrong with a malformed record.
    type Error: Display + Send + 'static;
    /// What the start of each file tells about its records (a CSV header row); `()` when
    /// nothing.
    type Header: Default + Send + Sync + 'static;

    /// Where the last whole record in `bytes` ends, just after its terminating `\n`; `None`
    /// if none does. `bytes` starts at a record's start. Default: after the last `\n`.
    fn last_record_end(&self, bytes: &[u8]) -> Option<usize> {
        memchr::memrchr(b'\n', bytes).map(|i| i + 1)
    }

    /// Whether every `\n` ends a record, as the default
    /// [`last_record_end`](Self::last_record_end) says. Then a record starts just after the
    /// first `\n` at or after any byte, so a chunk can be found from a byte range alone and
    /// the parser threads read their own ranges of the file (see the module docs' Cost).
    /// Default: yes. A format that overrides `last_record_end` (CSV, whose quoted fields hold
    /// newlines) must say no; so is a format with a header, whatever this says.
    fn lines_are_records(&self) -> bool {
        true
    }

    /// Whether files start with a header record, read by [`read_header`](Self::read_header)
    /// before the chunks. Default: no.
    fn has_header(&self) -> bool {
        false
    }

    /// Reads the header from the start of `bytes`, the file at `path` up to the first
    /// record end that [`last_record_end`](Self::last_record_end) finds (or the whole file).
    /// Returns it and where it ends, after its terminator: a format whose records may also
    /// end otherwise (CSV's lone `\r`) ends it there, and the rest is parsed as records.
    ///
    /// # Errors
    /// A header that cannot be read fails the job; the error names the file.
    fn read_header(
        &self,
        _path: &Path,
        bytes: &[u8],
    ) -> Result<(Self::Header, usize), SourceError> {
        Ok((Self::Header::default(), bytes.len()))
    }

    /// Parses `chunk`, whole records of one file starting at a record's start, into `out`,
    /// in file order, each with where it ends. Line numbers of malformed records count from
    /// 1 at the chunk's first line; a record's line is the line it starts on.
    fn parse(&self, chunk: &[u8], header: &Self::Header, out: &mut Parsed<Self::Item, Self::Error>);
}

/// Calls `f(line number, line, end)` for each line of `chunk`, numbered from 1, each without
/// its `\n` or `\r\n`, with where it ends (for [`Parsed::push`]). A last line without `\n`
/// counts too (and keeps a final `\r`, as [`files::text`](super::files::text) does); nothing
/// after a final `\n` is a line.
///
/// Cost: one `memchr` scan.
#[inline]
pub fn for_each_line(chunk: &[u8], mut f: impl FnMut(u64, &[u8], RecordEnd)) {
    let mut start = 0;
    let mut number = 0;
    for end in memchr::memchr_iter(b'\n', chunk) {
        number += 1;
        let line = &chunk[start..end];
        let after = RecordEnd {
            byte: end + 1,
            lines: number,
        };
        f(number, line.strip_suffix(b"\r").unwrap_or(line), after);
        start = end + 1;
    }
    if start < chunk.len() {
        let after = RecordEnd {
            byte: chunk.len(),
            lines: number,
        };
        f(number + 1, &chunk[start..], after);
    }
}

/// Hands out the records of a [`ChunkedReader`] as a source, logging the malformed ones:
/// the reader of the JSON Lines stream replay and of the CSV source.
pub(crate) struct ChunkedSource<F: ChunkFormat> {
    chunks: ChunkedReader<F>,
    malformed: MalformedLog,
}

impl<F: ChunkFormat> ChunkedSource<F> {
    pub(crate) fn new(format: Arc<F>, files: Arc<InputFiles>, options: ChunkOptions) -> Self {
        ChunkedSource {
            chunks: ChunkedReader::new(format, files, options),
            malformed: MalformedLog::new(),
        }
    }

    /// The malformed records seen so far.
    #[cfg(test)]
    pub(crate) fn malformed(&self) -> &MalformedLog {
        &self.malformed
    }
}

impl<F: ChunkFormat> SourceReader for ChunkedSource<F>
where
    F::Item: Item,
{
    type Item = F::Item;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.chunks
            .open(ctx.global_index(), ctx.total_parallelism());
        self.malformed.open(ctx);
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, F::Item>) -> Result<bool, BoxError> {
        let malformed = &mut self.malformed;
        Ok(self
            .chunks
            .read(out, |path, line, e| malformed.record(path, line, e))?)
    }

    fn is_cooperative(&self) -> bool {
        false
    }

    /// A file, a byte offset and a line number: see [`ChunkedReader::position`].
    fn position(&self) -> Option<Vec<u8>> {
        Some(self.chunks.position())
    }

    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        Ok(self.chunks.seek(position)?)
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.malformed.close();
        Ok(())
    }
}

/// Where a [`ChunkedReader`] is, as saved in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum ChunkPosition {
    /// Before file `file` of the input (their count: after the last).
    Next { file: usize },
    /// In file `file`, at `byte`, the start of a record on line `line`.
    In { file: usize, byte: u64, line: u64 },
}

/// A chunk on its way to a parser: its bytes, or the byte range the parser reads it from.
struct Job<F: ChunkFormat> {
    /// The chunk, cut by the reader; for a `range`, a buffer to read the chunk into.
    bytes: Vec<u8>,
    /// The byte range whose chunk the parser reads itself (a format whose lines are records).
    range: Option<ByteRange>,
    /// An empty parse to fill, its vectors reused.
    parsed: Parsed<F::Item, F::Error>,
    header: Arc<F::Header>,
}

/// A byte range of a file, for a format whose lines are records: its chunk is the records
/// that start in `start..end`, read whole (see [`read_range`]).
struct ByteRange {
    input: Arc<File>,
    start: u64,
    end: u64,
    /// The file's length when it was opened: nothing after it is read.
    len: u64,
    /// Whether a record starts at `start`: the file's start, or where a seek resumed.
    at_record_start: bool,
}

/// A parsed chunk, on its way back to the reader.
struct Parts<F: ChunkFormat> {
    parsed: Parsed<F::Item, F::Error>,
    /// The chunk's buffer, for reuse.
    buffer: Vec<u8>,
    /// The chunk's newlines.
    newlines: u64,
    /// For a chunk read from a [`ByteRange`], its first byte in the file and its length
    /// (0 when no record starts in the range).
    span: Option<(u64, u64)>,
}

/// Why a chunk came back without its parse.
enum Failure {
    /// The format panicked, with this message.
    Panicked(String),
    /// Reading the chunk's range failed.
    Read(io::Error),
}

/// A parsed chunk on its way back, or why it could not be parsed.
type Done<F> = Result<Parts<F>, Failure>;

/// One parser thread and its two queues.
struct Worker<F: ChunkFormat> {
    jobs: Option<SyncSender<Job<F>>>,
    done: Receiver<Done<F>>,
    thread: Option<JoinHandle<()>>,
}

/// Where a dispatched chunk came from, to place its records when it comes back.
struct Cut {
    file: usize,
    /// Its first byte in the file, and its length; for a byte range, the range's, until the
    /// parser says where the chunk lies in it.
    start: u64,
    bytes: u64,
    /// Lines of the file before the first chunk that no parser counts: see
    /// `OpenFile::lines_skipped`.
    lines_skipped: u64,
}

/// The file being cut.
struct OpenFile<H> {
    file: usize,
    /// Shared with the parsers that read its byte ranges.
    input: Arc<File>,
    /// Its length when opened: how far byte ranges go.
    len: u64,
    /// Whether parsers read its chunks from byte ranges (see
    /// [`ChunkFormat::lines_are_records`]) rather than the reader cutting them.
    ranged: bool,
    /// Where a record is known to start: the first byte read (0, or where a seek resumed).
    first: u64,
    /// Where `carry` starts in the file: the next chunk's (or byte range's) first byte.
    offset: u64,
    /// Bytes read but not yet dispatched: the start of a record cut by the last chunk.
    carry: Vec<u8>,
    eof: bool,
    header: Arc<H>,
    /// Lines before the first chunk, which the parsers do not count: the header's, or all
    /// those before the offset a seek started at.
    lines_skipped: u64,
    header_read: bool,
    /// Where a seek goes on once the header is read: a byte offset and its line number.
    resume: Option<(u64, u64)>,
}

/// The parsed chunk being handed out.
struct Ready<T, E> {
    file: usize,
    /// The chunk's first byte in its file, and the lines of the file before it.
    start: u64,
    lines_before: u64,
    /// The pieces not begun yet, and the one being handed out item by item.
    pieces: VecDeque<Vec<T>>,
    current: VecDeque<T>,
    /// Emptied vectors, for the next chunk's pieces.
    spare: Vec<Vec<T>>,
    ends: Vec<RecordEnd>,
    malformed: Vec<Malformed<E>>,
    /// Items handed out and malformed records reported so far.
    taken: usize,
    reported: usize,
    /// The chunk's own end.
    end: RecordEnd,
}

impl<T, E> Ready<T, E> {
    /// The read position after the last record handed out or reported, if any was.
    fn position(&self) -> Option<ChunkPosition> {
        let item = self.taken.checked_sub(1).map(|i| self.ends[i]);
        let bad = self.reported.checked_sub(1).map(|i| self.malformed[i].end);
        let end = item.into_iter().chain(bad).max_by_key(|end| end.byte)?;
        Some(self.at(end))
    }

    /// The position of `end`, in this chunk.
    fn at(&self, end: RecordEnd) -> ChunkPosition {
        ChunkPosition::In {
            file: self.file,
            byte: self.start + end.byte as u64,
            line: self.lines_before + end.lines + 1,
        }
    }

    /// Its vectors, emptied, for the next chunk.
    fn into_parsed(self) -> Parsed<T, E> {
        // As many vectors as this chunk filled: each piece handed on whole came back as the
        // batch's own vector, and one more per chunk would pile up.
        let filled = self.ends.len().div_ceil(PIECE);
        let mut spare = self.spare;
        spare.extend(self.pieces);
        spare.push(Vec::from(self.current));
        spare.retain(|v| v.capacity() > 0);
        spare.truncate(filled);
        spare.iter_mut().for_each(Vec::clear);
        let mut parsed = Parsed {
            pieces: Vec::new(),
            len: 0,
            spare,
            ends: self.ends,
            malformed: self.malformed,
        };
        parsed.clear();
        parsed
    }
}

/// Reads files in chunks parsed by a pool of threads, handing items out in file order. See
/// the [module docs](self).
pub struct ChunkedReader<F: ChunkFormat> {
    format: Arc<F>,
    files: Arc<InputFiles>,
    options: ChunkOptions,
    /// The files this reader reads, in order, and the next one to open.
    order: Vec<usize>,
    next: usize,
    /// This reader's share, from `open`: files `index`, `index + count`, ...
    share: (usize, usize),
    open: Option<OpenFile<F::Header>>,
    workers: Vec<Worker<F>>,
    /// Chunks dispatched and not yet taken back, oldest first; chunk `k` of the reader went
    /// to worker `k % threads`.
    in_flight: VecDeque<Cut>,
    dispatched: u64,
    taken: u64,
    /// Lines before the next chunk to come back, per file in `order` being read.
    lines_done: u64,
    lines_file: Option<usize>,
    ready: Option<Ready<F::Item, F::Error>>,
    /// The position after the last chunk handed out whole (or of the open or seek).
    at: ChunkPosition,
    /// Spare chunk buffers, and parses.
    spare: Vec<Vec<u8>>,
    spare_parsed: Vec<Parsed<F::Item, F::Error>>,
    /// Chunks parsed inline (one thread), waiting to be handed out.
    inline: VecDeque<Done<F>>,
    /// Bytes of the files before the position of the chunks handed out so far.
    bytes_read: u64,
}

impl<F: ChunkFormat> ChunkedReader<F> {
    /// A reader of `files` in `format`, cut and parsed as `options` say. It reads nothing
    /// until [`open`](Self::open).
    pub fn new(format: Arc<F>, files: Arc<InputFiles>, options: ChunkOptions) -> Self {
        ChunkedReader {
            format,
            files,
            options: ChunkOptions {
                threads: options.threads.max(1),
                chunk_bytes: options.chunk_bytes.max(1),
            },
            order: Vec::new(),
            next: 0,
            share: (0, 1),
            open: None,
            workers: Vec::new(),
            in_flight: VecDeque::new(),
            dispatched: 0,
            taken: 0,
            lines_done: 0,
            lines_file: None,
            ready: None,
            at: ChunkPosition::Next { file: 0 },
            spare: Vec::new(),
            spare_parsed: Vec::new(),
            inline: VecDeque::new(),
            bytes_read: 0,
        }
    }

    /// Takes the share of instance `index` of `count`: files `index`, `index + count`, ...
    /// `open(0, 1)` reads every file, in order.
    pub fn open(&mut self, index: usize, count: usize) {
        let count = count.max(1);
        self.discard_in_flight();
        self.share = (index, count);
        self.order = (index..self.files.files.len()).step_by(count).collect();
        self.next = 0;
        self.bytes_read = 0;
        self.at = ChunkPosition::Next {
            file: self
                .order
                .first()
                .copied()
                .unwrap_or(self.files.files.len()),
        };
    }

    /// The bytes of the files up to the last chunk handed out (from the start of the
    /// share's first file, also after a seek): every byte of the share, once the reader is
    /// done.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Where the reader is: just after the last record handed out or reported by
    /// [`read`](Self::read), whatever the parsers have parsed ahead (see
    /// [`SourceReader::position`]). A file index, a byte offset in that file and the number
    /// of the line there, with the identity of every input file (see
    /// `sources/identity.rs`): about 70 bytes per file.
    pub fn position(&self) -> Vec<u8> {
        let at = self
            .ready
            .as_ref()
            .and_then(Ready::position)
            .unwrap_or(self.at);
        self.files.wrap_position(&super::encode_position(&at))
    }

    /// Moves the reader, opened with the same share, to `position` (from
    /// [`position`](Self::position)): the next record is the one after the last record
    /// passed before the position was taken, and lines are numbered on as they were. Chunks
    /// are cut from that byte on; a file with a header has its header read again first.
    ///
    /// Cost: one `open` and `seek` of the file; the bytes before the offset are not read
    /// (but for a header). Chunks parsed ahead are dropped.
    ///
    /// Files listed after those of the position's listing were appended since; they are
    /// read after the saved ones, shared out as every file is (by index).
    ///
    /// # Errors
    /// [`SourceError::InputChanged`] if an input file changed since the position was
    /// taken; [`SourceError::Position`] if the position does not fit this share of the files
    /// (the parallelism changed); [`SourceError::Io`] if the file cannot be opened.
    pub fn seek(&mut self, position: &[u8]) -> Result<(), SourceError> {
        let (at, _listed) = self.files.unwrap_position(position)?;
        let at: ChunkPosition =
            super::decode_position(at).map_err(|reason| SourceError::Position { reason })?;
        let misfit = |reason: String| SourceError::Position { reason };
        let count = self.files.files.len();
        let (file, resume) = match at {
            ChunkPosition::Next { file } => (file, None),
            ChunkPosition::In { file, byte, line } => (file, Some((byte, line))),
        };
        let (index, step) = self.share;
        if file < count && file % step != index % step {
            return Err(misfit(format!(
                "file {file} is not read by instance {index} of {step}"
            )));
        }
        // The first file of the share at or after `file`.
        let next = self.order.partition_point(|&f| f < file);
        self.discard_in_flight();
        self.next = next;
        self.bytes_read = self.order[..next]
            .iter()
            .map(|&f| self.files.files[f].len)
            .sum();
        if let Some((byte, line)) = resume {
            let Some(input) = self.files.files.get(file) else {
                return Err(misfit(format!(
                    "there is no file {file}; the input files changed"
                )));
            };
            if byte > input.len {
                return Err(misfit(format!(
                    "offset {byte} is past the end of {} ({} bytes); the file changed",
                    input.path.display(),
                    input.len
                )));
            }
            self.open = Some(self.open_file(file, Some((byte, line)))?);
            self.next += 1;
            self.bytes_read += byte;
        }
        self.at = at;
        Ok(())
    }

    /// Passes items to `out` until it is full or a chunk is handed out, and each malformed
    /// record of the chunks it reaches to `on_malformed(file, line, error)`, in its place
    /// among the items (in file order). Returns true when every record was passed on.
    ///
    /// # Errors
    /// [`SourceError::Io`] naming the file if opening or reading it fails, or a header
    /// that cannot be read; a parser that panicked fails with its message.
    pub fn read(
        &mut self,
        out: &mut Emitter<'_, F::Item>,
        mut on_malformed: impl FnMut(&Path, u64, &F::Error),
    ) -> Result<bool, SourceError> {
        // The parsers get the next chunks while this one is handed out, not after.
        if self.ready.is_some() && self.options.threads > 1 {
            self.fill()?;
        }
        loop {
            if let Some(ready) = &mut self.ready {
                let path = &self.files.files[ready.file].path;
                // Malformed records are reported just before the item that follows them.
                let mut report_before = |ready: &mut Ready<F::Item, F::Error>, items: usize| {
                    while let Some(bad) = ready
                        .malformed
                        .get(ready.reported)
                        .filter(|bad| bad.items_before < items)
                    {
                        on_malformed(path, ready.lines_before + bad.line, &bad.error);
                        ready.reported += 1;
                    }
                };
                loop {
                    let next = ready.taken + 1;
                    report_before(ready, next);
                    if ready.current.is_empty() {
                        let Some(mut piece) = ready.pieces.pop_front() else {
                            break;
                        };
                        if piece.len() <= out.room() {
                            // The whole piece goes at once, as it would item by item.
                            let after = ready.taken + piece.len();
                            report_before(ready, after);
                            ready.taken += piece.len();
                            let more = out.emit_all(&mut piece);
                            ready.spare.push(piece);
                            if !more {
                                return Ok(false);
                            }
                            continue;
                        }
                        let done = std::mem::replace(&mut ready.current, VecDeque::from(piece));
                        ready.spare.push(Vec::from(done));
                    }
                    let Some(item) = ready.current.pop_front() else {
                        continue;
                    };
                    ready.taken += 1;
                    if !out.emit(item) {
                        return Ok(false);
                    }
                }
                // Handed out whole: the position is the chunk's end, past any blank lines.
                if let Some(ready) = self.ready.take() {
                    self.at = ready.at(ready.end);
                    // The emptied vectors go back to a parser with the next chunk.
                    self.spare_parsed.push(ready.into_parsed());
                }
                return Ok(false);
            }
            self.fill()?;
            let Some(mut cut) = self.in_flight.pop_front() else {
                return Ok(true);
            };
            let Parts {
                parsed,
                buffer,
                newlines,
                span,
            } = self.take_back(cut.file)?;
            self.spare.push(buffer);
            if let Some((start, bytes)) = span {
                if bytes == 0 {
                    // No record starts in the range: the one before it ended past it.
                    self.spare_parsed.push(parsed);
                    continue;
                }
                (cut.start, cut.bytes) = (start, bytes);
            }
            if self.lines_file != Some(cut.file) {
                self.lines_file = Some(cut.file);
                self.lines_done = 0;
            }
            let lines_before = self.lines_done + cut.lines_skipped;
            self.lines_done += newlines;
            self.bytes_read += cut.bytes;
            self.ready = Some(Ready {
                file: cut.file,
                start: cut.start,
                lines_before,
                pieces: VecDeque::from(parsed.pieces),
                current: VecDeque::new(),
                spare: parsed.spare,
                ends: parsed.ends,
                malformed: parsed.malformed,
                taken: 0,
                reported: 0,
                end: RecordEnd {
                    byte: cut.bytes as usize,
                    lines: newlines,
                },
            });
        }
    }

    /// Drops the open file, the chunk being handed out and those in flight (taken back
    /// from their parsers, which then wait for new ones).
    fn discard_in_flight(&mut self) {
        while let Some(cut) = self.in_flight.pop_front() {
            // A failed parse does not matter any more.
            let _ = self.take_back(cut.file);
        }
        self.inline.clear();
        self.open = None;
        self.ready = None;
        self.lines_file = None;
    }

    /// Cuts and dispatches chunks until [`CHUNKS_AHEAD`]` × threads` are in flight or the
    /// files end.
    fn fill(&mut self) -> Result<(), SourceError> {
        let ahead = if self.options.threads == 1 {
            1
        } else {
            CHUNKS_AHEAD * self.options.threads
        };
        while self.in_flight.len() < ahead {
            let Some((cut, chunk, header, range)) = self.cut()? else {
                return Ok(());
            };
            let file = cut.file;
            self.in_flight.push_back(cut);
            let parsed = self.spare_parsed.pop().unwrap_or_default();
            self.dispatch(
                file,
                Job {
                    bytes: chunk,
                    range,
                    parsed,
                    header,
                },
            )?;
        }
        Ok(())
    }

    /// Opens `file` to be cut from its start, or from `resume`, a byte offset where a
    /// record starts and the number of its line (after the header, if the format has one).
    fn open_file(
        &self,
        file: usize,
        resume: Option<(u64, u64)>,
    ) -> Result<OpenFile<F::Header>, SourceError> {
        let path = &self.files.files[file].path;
        let io = |source| SourceError::Io {
            path: path.clone(),
            source,
        };
        let mut input = File::open(path).map_err(io)?;
        let len = input.metadata().map_err(io)?.len();
        let has_header = self.format.has_header();
        let (mut offset, mut lines_skipped, mut later) = (0, 0, None);
        match resume {
            // The header comes first; `cut` goes on at the offset after it.
            Some(at) if has_header => later = Some(at),
            Some((byte, line)) => {
                input.seek(SeekFrom::Start(byte)).map_err(io)?;
                offset = byte;
                lines_skipped = line.saturating_sub(1);
            }
            None => {}
        }
        Ok(OpenFile {
            file,
            input: Arc::new(input),
            len,
            ranged: self.format.lines_are_records() && !has_header,
            first: offset,
            offset,
            carry: Vec::new(),
            eof: false,
            header: Arc::default(),
            lines_skipped,
            header_read: !has_header,
            resume: later,
        })
    }

    /// Cuts the next chunk: where it comes from, its bytes (or a buffer for the byte range
    /// a parser reads it from) and its file's header. `None` when every file is done.
    #[allow(clippy::type_complexity)]
    fn cut(
        &mut self,
    ) -> Result<Option<(Cut, Vec<u8>, Arc<F::Header>, Option<ByteRange>)>, SourceError> {
        loop {
            if self.open.is_none() {
                let Some(&file) = self.order.get(self.next) else {
                    return Ok(None);
                };
                self.next += 1;
                self.open = Some(self.open_file(file, None)?);
            }
            let Some(open) = &mut self.open else {
                unreachable!("a file was just opened");
            };
            if open.ranged {
                // The parser reads the chunk itself: here is only the next range.
                let start = open.offset;
                if start >= open.len {
                    self.open = None;
                    continue;
                }
                let end = start
                    .saturating_add(self.options.chunk_bytes as u64)
                    .min(open.len);
                let range = ByteRange {
                    input: Arc::clone(&open.input),
                    start,
                    end,
                    len: open.len,
                    at_record_start: start == open.first,
                };
                open.offset = end;
                let cut = Cut {
                    file: open.file,
                    start,
                    bytes: end - start,
                    lines_skipped: open.lines_skipped,
                };
                let header = Arc::clone(&open.header);
                if end == open.len {
                    self.open = None;
                }
                let buffer = self.spare.pop().unwrap_or_default();
                return Ok(Some((cut, buffer, header, Some(range))));
            }
            let path = &self.files.files[open.file].path;
            let io = |source| SourceError::Io {
                path: path.clone(),
                source,
            };
            let mut chunk = self.spare.pop().unwrap_or_default();
            chunk.clear();
            chunk.append(&mut open.carry);
            let mut want = self.options.chunk_bytes;
            // Read until a record ends in the chunk (or the file does).
            let end = loop {
                if !open.eof && chunk.len() < want {
                    read_up_to(&open.input, &mut chunk, want).map_err(io)?;
                    open.eof = chunk.len() < want;
                }
                if open.eof {
                    break chunk.len();
                }
                let found = if open.header_read {
                    self.format.last_record_end(&chunk)
                } else {
                    first_record_end(&*self.format, &chunk)
                };
                match found {
                    Some(end) => break end,
                    None => want = want.saturating_mul(2),
                }
            };
            open.carry.extend_from_slice(&chunk[end..]);
            chunk.truncate(end);
            if !open.header_read {
                // The header is the first record: cut it off and read it here, before any
                // chunk of the file is parsed.
                let first = first_record_end(&*self.format, &chunk).unwrap_or(chunk.len());
                let (header, header_end) = self.format.read_header(path, &chunk[..first])?;
                let header_end = header_end.min(first);
                open.header = Arc::new(header);
                open.header_read = true;
                if let Some((byte, line)) = open.resume.take() {
                    // A seek: go on at its offset, with its line number.
                    (&*open.input).seek(SeekFrom::Start(byte)).map_err(io)?;
                    open.carry.clear();
                    open.eof = false;
                    open.offset = byte;
                    open.lines_skipped = line.saturating_sub(1);
                } else {
                    open.lines_skipped =
                        memchr::memchr_iter(b'\n', &chunk[..header_end]).count() as u64;
                    let mut rest = chunk.split_off(header_end);
                    rest.append(&mut open.carry);
                    open.carry = rest;
                    open.offset = header_end as u64;
                    self.bytes_read += header_end as u64;
                }
                self.spare.push(chunk);
                if open.eof && open.carry.is_empty() {
                    self.open = None;
                }
                continue;
            }
            let cut = Cut {
                file: open.file,
                start: open.offset,
                bytes: chunk.len() as u64,
                lines_skipped: open.lines_skipped,
            };
            open.offset += cut.bytes;
            let header = Arc::clone(&open.header);
            if open.eof && open.carry.is_empty() {
                self.open = None;
            }
            if chunk.is_empty() {
                self.spare.push(chunk);
                continue;
            }
            return Ok(Some((cut, chunk, header, None)));
        }
    }

    /// Sends a chunk of `file` to its parser, starting the pool on first use; with one
    /// thread, parses it here.
    fn dispatch(&mut self, file: usize, job: Job<F>) -> Result<(), SourceError> {
        if self.options.threads == 1 {
            self.inline.push_back(parse_job(&*self.format, job));
            return Ok(());
        }
        if self.workers.is_empty() {
            self.workers = (0..self.options.threads)
                .map(|i| start_worker(Arc::clone(&self.format), i))
                .collect::<Result<_, _>>()?;
        }
        let worker = &self.workers[(self.dispatched % self.workers.len() as u64) as usize];
        self.dispatched += 1;
        let sent = worker
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            return Err(parser_gone(&self.files.files[file].path));
        }
        Ok(())
    }

    /// Takes back the oldest chunk in flight, which came from `file`.
    fn take_back(&mut self, file: usize) -> Result<Parts<F>, SourceError> {
        let path = &self.files.files[file].path;
        let done = if self.workers.is_empty() {
            self.inline.pop_front().ok_or_else(|| parser_gone(path))?
        } else {
            let worker = &self.workers[(self.taken % self.workers.len() as u64) as usize];
            self.taken += 1;
            worker.done.recv().map_err(|_| parser_gone(path))?
        };
        done.map_err(|failure| SourceError::Io {
            path: path.clone(),
            source: match failure {
                Failure::Panicked(message) => {
                    io::Error::other(format!("the record parser panicked: {message}"))
                }
                Failure::Read(e) => e,
            },
        })
    }
}

impl<F: ChunkFormat> Drop for ChunkedReader<F> {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            worker.jobs = None;
        }
        // A parser blocked on a full result queue sees it closed when `done` drops.
        for mut worker in self.workers.drain(..) {
            drop(worker.done);
            if let Some(thread) = worker.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

fn parser_gone(path: &Path) -> SourceError {
    SourceError::Io {
        path: path.to_owned(),
        source: io::Error::other("a record parser thread ended unexpectedly"),
    }
}

/// Where the first record of `bytes` ends, for the header: after the first `\n` that the
/// format takes for a record's end.
fn first_record_end<F: ChunkFormat>(format: &F, bytes: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'\n', bytes)
        .map(|nl| nl + 1)
        .find(|&end| format.last_record_end(&bytes[..end]) == Some(end))
}

/// Appends from `input` until `buf` holds `want` bytes or the file ends.
///
/// Cost: the reads go straight into `buf`'s spare capacity, which is never zeroed first (a
/// recycled chunk keeps its capacity, so nothing is allocated either); std's `read_to_end`
/// reads in growing pieces, a handful of `read` calls per chunk.
fn read_up_to(input: &File, buf: &mut Vec<u8>, want: usize) -> io::Result<()> {
    let missing = want.saturating_sub(buf.len());
    buf.reserve(missing);
    Read::take(input, missing as u64).read_to_end(buf)?;
    Ok(())
}

/// How much more a parser reads at a time past its range's end, to find where the last
/// record that starts in the range ends.
const TAIL_READ: usize = 16 << 10;

/// The page size that [`read_range`] aligns its reads to.
const PAGE: usize = 4096;

/// Reads the chunk of `range` into `buf`: from the first record that starts in the range
/// to the end of the last one, which may run past the range's end (to the `\n` that ends
/// it, or the file's length). Returns where the chunk lies in `buf` and its first byte in
/// the file; an empty window when no record starts in the range.
///
/// Consecutive ranges of a file make consecutive chunks: a record starts at the file's
/// first byte and after each `\n`, so the one byte before a range says whether its first
/// byte starts one, and a record belongs to the range it starts in.
///
/// Cost: one `pread` of the range and the byte before it, and `pread`s of [`TAIL_READ`]
/// for the rest of its last record. `buf` is overwritten from its start and only grown
/// (zeroed) when shorter than what is read, so a reused buffer costs nothing more.
///
/// # Errors
/// A failed read, or `UnexpectedEof` if the file is shorter than when it was opened.
fn read_range(range: &ByteRange, buf: &mut Vec<u8>) -> io::Result<(std::ops::Range<usize>, u64)> {
    let from = if range.at_record_start {
        range.start
    } else {
        range.start - 1
    };
    let span = (range.end - from) as usize;
    // The kernel's copy from the page cache (`rep movsb`) runs at a fraction of its speed
    // when the destination lies a few bytes past the source's place in a page (4K
    // aliasing): the range goes at the same place in a page as in the file.
    let room = PAGE + span + TAIL_READ;
    if buf.capacity() < room {
        buf.reserve(room - buf.len());
    }
    let pad = (from as usize).wrapping_sub(buf.as_ptr() as usize) % PAGE;
    let mut filled = read_into(&range.input, buf, pad, span, from)?;
    let first = if range.at_record_start {
        pad
    } else {
        // A `\n` on the range's last byte starts the next range's first record, not one of
        // this range's.
        match memchr::memchr(b'\n', &buf[pad..filled - 1]) {
            Some(newline) => pad + newline + 1,
            None => return Ok((0..0, range.end)),
        }
    };
    // The last record ends at the first `\n` from the range's last byte on, or at the
    // file's end.
    let mut end = filled;
    if range.end < range.len && buf[filled - 1] != b'\n' {
        loop {
            let at = from + (filled - pad) as u64;
            if at >= range.len {
                end = filled;
                break;
            }
            let more = TAIL_READ.min((range.len - at) as usize);
            let searched = filled;
            filled = read_into(&range.input, buf, filled, more, at)?;
            if let Some(newline) = memchr::memchr(b'\n', &buf[searched..filled]) {
                end = searched + newline + 1;
                break;
            }
        }
    }
    Ok((first..end, from + (first - pad) as u64))
}

/// Reads `n` bytes of `input` at `at` into `buf[filled..]`, growing `buf` if it is
/// shorter; returns `filled + n`.
fn read_into(
    input: &File,
    buf: &mut Vec<u8>,
    filled: usize,
    n: usize,
    at: u64,
) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let need = filled + n;
    if buf.len() < need {
        buf.resize(need, 0);
    }
    input
        .read_exact_at(&mut buf[filled..need], at)
        .map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => io::Error::new(
                e.kind(),
                "the file is shorter than when it was opened: it changed while being read",
            ),
            _ => e,
        })?;
    Ok(need)
}

/// Reads (for a byte range) and parses one chunk, catching a panic of the format.
fn parse_job<F: ChunkFormat>(format: &F, job: Job<F>) -> Done<F> {
    let Job {
        bytes: mut buffer,
        range,
        mut parsed,
        header,
    } = job;
    let (window, span) = match &range {
        None => (0..buffer.len(), None),
        Some(range) => {
            let (window, start) = read_range(range, &mut buffer).map_err(Failure::Read)?;
            let span = (start, window.len() as u64);
            (window, Some(span))
        }
    };
    let chunk = &buffer[window];
    let result = catch_unwind(AssertUnwindSafe(|| {
        if !chunk.is_empty() {
            format.parse(chunk, &header, &mut parsed);
        }
        parsed
    }));
    match result {
        Ok(parsed) => {
            // The last record's end counts the chunk's newlines when it is the chunk's end,
            // as it is unless the chunk ends in blank lines a format skips: no second scan.
            let newlines = match parsed.last_end() {
                Some(end) if end.byte == chunk.len() => end.lines,
                _ => memchr::memchr_iter(b'\n', chunk).count() as u64,
            };
            debug_assert_eq!(
                newlines,
                memchr::memchr_iter(b'\n', chunk).count() as u64,
                "a format's record ends count the chunk's newlines"
            );
            Ok(Parts {
                parsed,
                buffer,
                newlines,
                span,
            })
        }
        Err(panic) => Err(Failure::Panicked(panic_message(&*panic))),
    }
}

/// Starts parser thread `index`.
fn start_worker<F: ChunkFormat>(format: Arc<F>, index: usize) -> Result<Worker<F>, SourceError> {
    // Room for every chunk in flight at this thread: dispatching never waits for a parser.
    let (jobs, job_rx) = sync_channel::<Job<F>>(CHUNKS_AHEAD);
    let (done_tx, done) = sync_channel::<Done<F>>(CHUNKS_AHEAD);
    let thread = std::thread::Builder::new()
        .name(format!("weir-parse-{index}"))
        .spawn(move || {
            while let Ok(job) = job_rx.recv() {
                // After a panic too: the reader takes the failure back in order.
                if done_tx.send(parse_job(&*format, job)).is_err() {
                    return;
                }
            }
        })
        .map_err(|source| SourceError::Io {
            path: Default::default(),
            source,
        })?;
    Ok(Worker {
        jobs: Some(jobs),
        done,
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests;
