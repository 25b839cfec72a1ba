//! Parsing line-based files in parallel, in chunks, with the items handed out in file order.
//!
//! A [`ChunkedReader`] reads its files one after the other in chunks of about
//! [`ChunkOptions::chunk_bytes`], each cut just after the last record that ends in it (a line
//! longer than a chunk makes its chunk longer), and hands the chunks round-robin to a pool of
//! [`ChunkOptions::threads`] parser threads. The parsed chunks come back in the order they were
//! cut, so the reader passes on items, malformed-record reports and line numbers exactly as a
//! single reader going through the file line by line would: whatever is applied to the items
//! in order afterwards (event time, lateness, watermarks) gives the same result. With one
//! thread it parses inline, on the reading thread, with the same chunking.
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
//!         for_each_line(chunk, |line_no, line| {
//!             match std::str::from_utf8(line).unwrap_or("x").parse() {
//!                 Ok(n) => out.items.push(n),
//!                 Err(e) => out.malformed.push((line_no, e)),
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
//! The reading thread copies each chunk once from the file, and the bytes of a record cut by
//! the chunk's end once more into the next chunk; it finds the cut with one backward `memchr`
//! (or the format's own scan, for CSV's quoted newlines). Each parser thread counts the
//! newlines of its chunks for the line numbers. Items are moved twice: into the chunk's
//! vector on the parser thread and into the emitter's batch. At most `2 × threads` chunks
//! are parsed ahead, so memory stays at a few chunk sizes per reader; backpressure on the
//! emitter stops the reading, and with it the parsers.
//!
//! The reader blocks on file reads and on the parsers: a [`SourceReader`]
//! built on it is not cooperative, and runs on an I/O thread of its own.

use std::collections::VecDeque;
use std::fmt::Display;
use std::fs::File;
use std::io::{self, Read};
use std::num::NonZeroUsize;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

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

/// What a format makes of one chunk: the items in order, and the malformed records.
#[derive(Debug)]
pub struct Parsed<T, E> {
    /// The items of the chunk's good records, in file order.
    pub items: Vec<T>,
    /// Each malformed record: its line number counted from the chunk's first line (1), and
    /// what is wrong with it. In file order.
    pub malformed: Vec<(u64, E)>,
}

impl<T, E> Default for Parsed<T, E> {
    fn default() -> Self {
        Parsed {
            items: Vec::new(),
            malformed: Vec::new(),
        }
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

    /// Whether files start with a header record, read by [`read_header`](Self::read_header)
    /// before the chunks. Default: no.
    fn has_header(&self) -> bool {
        false
    }

    /// Reads the header from `record`, the first record of the file at `path` (with its
    /// terminator, if it has one).
    ///
    /// # Errors
    /// A header that cannot be read fails the job; the error names the file.
    fn read_header(&self, _path: &Path, _record: &[u8]) -> Result<Self::Header, SourceError> {
        Ok(Self::Header::default())
    }

    /// Parses `chunk`, whole records of one file starting at a record's start, into `out`.
    /// Line numbers in `out.malformed` count from 1 at the chunk's first line; a record's
    /// line is the line it starts on.
    fn parse(&self, chunk: &[u8], header: &Self::Header, out: &mut Parsed<Self::Item, Self::Error>);
}

/// Calls `f(line number, line)` for each line of `chunk`, numbered from 1, each without its
/// `\n` or `\r\n`. A last line without `\n` counts too (and keeps a final `\r`, as
/// [`files::text`](super::files::text) does); nothing after a final `\n` is a line.
///
/// Cost: one `memchr` scan.
#[inline]
pub fn for_each_line(chunk: &[u8], mut f: impl FnMut(u64, &[u8])) {
    let mut start = 0;
    let mut number = 0;
    for end in memchr::memchr_iter(b'\n', chunk) {
        number += 1;
        let line = &chunk[start..end];
        f(number, line.strip_suffix(b"\r").unwrap_or(line));
        start = end + 1;
    }
    if start < chunk.len() {
        f(number + 1, &chunk[start..]);
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

    fn close(&mut self) -> Result<(), BoxError> {
        self.malformed.close();
        Ok(())
    }
}

/// A chunk cut from a file, on its way to a parser.
struct Job<F: ChunkFormat> {
    file: usize,
    bytes: Vec<u8>,
    /// An empty vector for the items, reused.
    items: Vec<F::Item>,
    header: Arc<F::Header>,
}

/// A parsed chunk: the parse, the chunk's buffer for reuse and its newline count.
type Parts<F> = (
    Parsed<<F as ChunkFormat>::Item, <F as ChunkFormat>::Error>,
    Vec<u8>,
    u64,
);

/// A parsed chunk on its way back, or the panic message of a format that panicked.
type Done<F> = Result<Parts<F>, String>;

/// One parser thread and its two queues.
struct Worker<F: ChunkFormat> {
    jobs: Option<SyncSender<Job<F>>>,
    done: Receiver<Done<F>>,
    thread: Option<JoinHandle<()>>,
}

/// Where a dispatched chunk came from, to number its lines when it comes back.
struct Cut {
    file: usize,
    bytes: u64,
    /// How many lines of the file came before the chunk.
    lines_before: u64,
}

/// The file being cut.
struct OpenFile<H> {
    file: usize,
    input: File,
    /// Bytes read but not yet dispatched: the start of a record cut by the last chunk.
    carry: Vec<u8>,
    eof: bool,
    header: Arc<H>,
    /// Lines of the file dispatched so far (newlines up to the last cut, counted by the
    /// parsers; known once their chunks return) — see `Cut::lines_before`.
    header_lines: u64,
    header_read: bool,
}

/// The parsed chunk being handed out.
struct Ready<T> {
    file: usize,
    items: VecDeque<T>,
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
    ready: Option<Ready<F::Item>>,
    /// Spare chunk buffers, and item vectors.
    spare: Vec<Vec<u8>>,
    spare_items: Vec<Vec<F::Item>>,
    /// Chunks parsed inline (one thread), waiting to be handed out.
    inline: VecDeque<Done<F>>,
    /// Bytes of the chunks handed out so far.
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
            open: None,
            workers: Vec::new(),
            in_flight: VecDeque::new(),
            dispatched: 0,
            taken: 0,
            lines_done: 0,
            lines_file: None,
            ready: None,
            spare: Vec::new(),
            spare_items: Vec::new(),
            inline: VecDeque::new(),
            bytes_read: 0,
        }
    }

    /// Takes the share of instance `index` of `count`: files `index`, `index + count`, ...
    /// `open(0, 1)` reads every file, in order.
    pub fn open(&mut self, index: usize, count: usize) {
        let count = count.max(1);
        self.order = (index..self.files.files.len()).step_by(count).collect();
        self.next = 0;
        self.open = None;
        self.ready = None;
    }

    /// The bytes of the chunks handed out so far: every byte of the files read, once the
    /// reader is done.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Passes items to `out` until it is full or a chunk is handed out, and each malformed
    /// record of the chunks it reaches to `on_malformed(file, line, error)`, in file order.
    /// Returns true when every record was passed on.
    ///
    /// # Errors
    /// [`SourceError::Io`] naming the file if opening or reading it fails, or a header
    /// that cannot be read; a parser that panicked fails with its message.
    pub fn read(
        &mut self,
        out: &mut Emitter<'_, F::Item>,
        mut on_malformed: impl FnMut(&Path, u64, &F::Error),
    ) -> Result<bool, SourceError> {
        loop {
            if let Some(ready) = &mut self.ready {
                while let Some(item) = ready.items.pop_front() {
                    if !out.emit(item) {
                        return Ok(false);
                    }
                }
                // The emptied vector goes back to a parser with the next chunk.
                if let Some(ready) = self.ready.take() {
                    self.spare_items.push(Vec::from(ready.items));
                }
                return Ok(false);
            }
            self.fill()?;
            let Some(cut) = self.in_flight.pop_front() else {
                return Ok(true);
            };
            let (parsed, buffer, newlines) = self.take_back(cut.file)?;
            self.spare.push(buffer);
            if self.lines_file != Some(cut.file) {
                self.lines_file = Some(cut.file);
                self.lines_done = 0;
            }
            let before = self.lines_done + cut.lines_before;
            self.lines_done += newlines;
            self.bytes_read += cut.bytes;
            let path = &self.files.files[cut.file].path;
            for (line, error) in &parsed.malformed {
                on_malformed(path, before + line, error);
            }
            self.ready = Some(Ready {
                file: cut.file,
                items: VecDeque::from(parsed.items),
            });
        }
    }

    /// The file the items being handed out come from.
    pub fn current_file(&self) -> Option<&Path> {
        let file = self.ready.as_ref()?.file;
        Some(&self.files.files[file].path)
    }

    /// Cuts and dispatches chunks until `2 × threads` are in flight or the files end.
    fn fill(&mut self) -> Result<(), SourceError> {
        let ahead = if self.options.threads == 1 {
            1
        } else {
            2 * self.options.threads
        };
        while self.in_flight.len() < ahead {
            let Some((file, chunk, header, lines_before)) = self.cut()? else {
                return Ok(());
            };
            self.in_flight.push_back(Cut {
                file,
                bytes: chunk.len() as u64,
                lines_before,
            });
            let items = self.spare_items.pop().unwrap_or_default();
            self.dispatch(Job {
                file,
                bytes: chunk,
                items,
                header,
            })?;
        }
        Ok(())
    }

    /// Cuts the next chunk: its file, its bytes, its file's header and the lines before it
    /// that the parsers will not count (the header's). `None` when every file is done.
    #[allow(clippy::type_complexity)]
    fn cut(&mut self) -> Result<Option<(usize, Vec<u8>, Arc<F::Header>, u64)>, SourceError> {
        loop {
            let open = match &mut self.open {
                Some(open) => open,
                None => {
                    let Some(&file) = self.order.get(self.next) else {
                        return Ok(None);
                    };
                    self.next += 1;
                    let path = &self.files.files[file].path;
                    let input = File::open(path).map_err(|source| SourceError::Io {
                        path: path.clone(),
                        source,
                    })?;
                    self.open.insert(OpenFile {
                        file,
                        input,
                        carry: Vec::new(),
                        eof: false,
                        header: Arc::default(),
                        header_lines: 0,
                        header_read: !self.format.has_header(),
                    })
                }
            };
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
                    read_up_to(&mut open.input, &mut chunk, want).map_err(io)?;
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
                let header_end = first_record_end(&*self.format, &chunk).unwrap_or(chunk.len());
                let header = self.format.read_header(path, &chunk[..header_end])?;
                open.header = Arc::new(header);
                open.header_lines = memchr::memchr_iter(b'\n', &chunk[..header_end]).count() as u64;
                open.header_read = true;
                let mut rest = chunk.split_off(header_end);
                rest.append(&mut open.carry);
                open.carry = rest;
                self.bytes_read += header_end as u64;
                self.spare.push(chunk);
                if open.eof && open.carry.is_empty() {
                    self.open = None;
                }
                continue;
            }
            let done = open.eof && open.carry.is_empty();
            let result = (
                open.file,
                chunk,
                Arc::clone(&open.header),
                open.header_lines,
            );
            if done {
                self.open = None;
            }
            if result.1.is_empty() {
                self.spare.push(result.1);
                continue;
            }
            return Ok(Some(result));
        }
    }

    /// Sends a chunk to its parser, starting the pool on first use; with one thread, parses
    /// it here.
    fn dispatch(&mut self, job: Job<F>) -> Result<(), SourceError> {
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
        let file = job.file;
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
        let done = if self.workers.is_empty() {
            let gone = || parser_gone(&self.files.files[file].path);
            self.inline.pop_front().ok_or_else(gone)?
        } else {
            let worker = &self.workers[(self.taken % self.workers.len() as u64) as usize];
            self.taken += 1;
            let gone = |_| parser_gone(&self.files.files[file].path);
            worker.done.recv().map_err(gone)?
        };
        done.map_err(|message| SourceError::Io {
            path: self.files.files[file].path.clone(),
            source: io::Error::other(format!("the record parser panicked: {message}")),
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
fn read_up_to(input: &mut File, buf: &mut Vec<u8>, want: usize) -> io::Result<()> {
    let mut filled = buf.len();
    buf.resize(want, 0);
    while filled < want {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(filled);
                return Err(e);
            }
        }
    }
    buf.truncate(filled);
    Ok(())
}

/// Parses one chunk, catching a panic of the format.
fn parse_job<F: ChunkFormat>(format: &F, job: Job<F>) -> Done<F> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut parsed = Parsed {
            items: job.items,
            malformed: Vec::new(),
        };
        format.parse(&job.bytes, &job.header, &mut parsed);
        parsed
    }));
    let newlines = memchr::memchr_iter(b'\n', &job.bytes).count() as u64;
    match result {
        Ok(parsed) => Ok((parsed, job.bytes, newlines)),
        Err(panic) => Err(panic_message(&*panic)),
    }
}

/// Starts parser thread `index`.
fn start_worker<F: ChunkFormat>(format: Arc<F>, index: usize) -> Result<Worker<F>, SourceError> {
    let (jobs, job_rx) = sync_channel::<Job<F>>(2);
    let (done_tx, done) = sync_channel::<Done<F>>(2);
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
mod tests {
    use std::fs;
    use std::path::PathBuf;

    use proptest::prelude::*;

    use super::*;
    use crate::sources::files::LineReader;

    /// Lines as text; a line that is not UTF-8 is malformed.
    struct Utf8Lines;

    impl ChunkFormat for Utf8Lines {
        type Item = String;
        type Error = std::str::Utf8Error;
        type Header = ();

        fn parse(&self, chunk: &[u8], _: &(), out: &mut Parsed<String, Self::Error>) {
            for_each_line(chunk, |number, line| match std::str::from_utf8(line) {
                Ok(text) => out.items.push(text.to_owned()),
                Err(e) => out.malformed.push((number, e)),
            });
        }
    }

    /// Panics on a line `boom`.
    struct Fragile;

    impl ChunkFormat for Fragile {
        type Item = ();
        type Error = String;
        type Header = ();

        fn parse(&self, chunk: &[u8], _: &(), _: &mut Parsed<(), String>) {
            for_each_line(chunk, |_, line| assert_ne!(line, b"boom", "boom"));
        }
    }

    type Outcome = (Vec<String>, Vec<(PathBuf, u64)>);

    /// Reads everything with `options`, in calls that take at most `batch` items.
    fn chunked(path: &Path, options: ChunkOptions, batch: usize) -> Outcome {
        let files = Arc::new(InputFiles::resolve(path).unwrap());
        let mut reader = ChunkedReader::new(Arc::new(Utf8Lines), Arc::clone(&files), options);
        reader.open(0, 1);
        let (mut items, mut bad) = (Vec::new(), Vec::new());
        loop {
            let limit = items.len() + batch;
            let mut out = Emitter::new(&mut items, limit);
            if reader
                .read(&mut out, |p, line, _| bad.push((p.to_owned(), line)))
                .unwrap()
            {
                break;
            }
        }
        assert_eq!(reader.bytes_read(), files.total_bytes());
        (items, bad)
    }

    /// The single reader: the line reader, line by line.
    fn line_by_line(path: &Path) -> Outcome {
        let mut reader = LineReader::new(Arc::new(InputFiles::resolve(path).unwrap()), true);
        reader.open(0, 1);
        let (mut items, mut bad) = (Vec::new(), Vec::new());
        while !reader
            .read(|line| {
                match std::str::from_utf8(line.bytes) {
                    Ok(text) => items.push(text.to_owned()),
                    Err(_) => bad.push((line.path.to_owned(), line.number)),
                }
                true
            })
            .unwrap()
        {}
        (items, bad)
    }

    fn content() -> impl Strategy<Value = Vec<u8>> {
        // Short and long lines (longer than the small chunks), LF or CRLF, with or without a
        // final newline, and invalid UTF-8 bytes anywhere.
        (
            prop::collection::vec(prop_oneof!["[a-z é]{0,6}", "[a-z]{20,90}"], 0..30),
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec((any::<prop::sample::Index>(), 0x80u8..=0xff), 0..3),
        )
            .prop_map(|(lines, crlf, final_newline, invalid)| {
                let mut bytes = lines.join(if crlf { "\r\n" } else { "\n" }).into_bytes();
                if final_newline && !lines.is_empty() {
                    bytes.push(b'\n');
                }
                for (at, byte) in invalid {
                    let i = at.index(bytes.len() + 1);
                    bytes.insert(i, byte);
                }
                bytes
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Whatever the threads and the chunk size, the items and the malformed lines with
        /// their numbers are those of a single reader going line by line.
        #[test]
        fn chunked_parsing_is_the_single_reader(
            files in prop::collection::vec(content(), 1..=3),
            threads in 1..=4usize,
            chunk_bytes in 1..48usize,
            batch in 1..50usize,
        ) {
            let dir = tempfile::tempdir().unwrap();
            for (i, bytes) in files.iter().enumerate() {
                fs::write(dir.path().join(format!("f{i}.txt")), bytes).unwrap();
            }
            let want = line_by_line(dir.path());
            let got = chunked(dir.path(), ChunkOptions { threads, chunk_bytes }, batch);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn invalid_utf8_at_every_position_is_reported_on_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        let base = b"ab\r\ncd\n\nefgh\r\nij".to_vec();
        for at in 0..=base.len() {
            let mut bytes = base.clone();
            bytes.insert(at, 0xff);
            fs::write(&path, &bytes).unwrap();
            let want = line_by_line(&path);
            assert_eq!(want.1.len(), 1, "one bad line with 0xff at {at}");
            for threads in [1, 2, 4] {
                for chunk_bytes in [1, 3, 7, 1 << 20] {
                    let options = ChunkOptions {
                        threads,
                        chunk_bytes,
                    };
                    assert_eq!(
                        chunked(&path, options, 2),
                        want,
                        "0xff at {at}, {options:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn empty_file_no_final_newline_and_a_line_longer_than_a_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        let options = ChunkOptions {
            threads: 2,
            chunk_bytes: 8,
        };
        fs::write(&path, "").unwrap();
        assert_eq!(chunked(&path, options, 10), (vec![], vec![]));
        let long = "x".repeat(100);
        fs::write(&path, format!("a\r\n{long}\r\nb")).unwrap();
        let (items, bad) = chunked(&path, options, 10);
        assert_eq!(items, ["a", long.as_str(), "b"]);
        assert!(bad.is_empty());
        fs::write(&path, "only\r").unwrap();
        assert_eq!(chunked(&path, options, 10).0, ["only\r"]);
    }

    #[test]
    fn a_panicking_parser_fails_the_read_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        fs::write(
            &path,
            "fine\n".repeat(1000) + "boom\n" + &"fine\n".repeat(1000),
        )
        .unwrap();
        for threads in [1, 3] {
            let files = Arc::new(InputFiles::resolve(&path).unwrap());
            let options = ChunkOptions {
                threads,
                chunk_bytes: 64,
            };
            let mut reader = ChunkedReader::new(Arc::new(Fragile), files, options);
            reader.open(0, 1);
            let mut items = Vec::new();
            let err = loop {
                match reader.read(&mut Emitter::unbounded(&mut items), |_, _, _| {}) {
                    Ok(true) => panic!("read past a panic"),
                    Ok(false) => {}
                    Err(e) => break e,
                }
            };
            let text = err.to_string();
            assert!(text.contains("a.txt") && text.contains("boom"), "{text}");
            // Dropping the reader joins its parser threads.
            drop(reader);
        }
    }

    #[test]
    fn instances_deal_out_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        for f in 0..5 {
            fs::write(dir.path().join(format!("{f}.txt")), format!("{f}a\n{f}b\n")).unwrap();
        }
        let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        let mut all = Vec::new();
        for index in 0..2 {
            let mut reader = ChunkedReader::new(
                Arc::new(Utf8Lines),
                Arc::clone(&files),
                ChunkOptions::with_threads(2),
            );
            reader.open(index, 2);
            let mut items = Vec::new();
            while !reader
                .read(&mut Emitter::unbounded(&mut items), |_, _, _| {})
                .unwrap()
            {}
            all.push(items);
        }
        assert_eq!(all[0], ["0a", "0b", "2a", "2b", "4a", "4b"]);
        assert_eq!(all[1], ["1a", "1b", "3a", "3b"]);
    }
}
