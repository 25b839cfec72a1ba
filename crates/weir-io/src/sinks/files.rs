//! Text files: a single file, or one part file per sink instance in a directory.
//!
//! [`text`] and [`text_with`] write one file from a single instance; [`parts`] and
//! [`parts_with`] write `part-00000`, `part-00001`, ... in a directory, one per instance, so
//! every worker writes in parallel. Each record is one item formatted as text.
//!
//! ```no_run
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! p.read_from(sources::files::text("books/")?)
//!     .flat_map(|line: String| {
//!         // Lowercase words: runs of letters and digits.
//!         line.split(|c: char| !c.is_alphanumeric())
//!             .filter(|w| !w.is_empty())
//!             .map(str::to_lowercase)
//!             .collect::<Vec<_>>()
//!     })
//!     .grouping_key(|word: &String| word.clone())
//!     .aggregate(aggregate::counting())
//!     .write_to(sinks::files::parts_with("counts/", |(word, n): &(String, u64), out: &mut Vec<u8>| {
//!         out.extend_from_slice(format!("{word}\t{n}\n").as_bytes());
//!     }));
//! p.run()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Atomic output
//!
//! An instance writes into a temporary file next to its target (`<name>.tmp`, or
//! `.part-NNNNN.tmp` in the directory) and renames it to the final name when it closes, at
//! the end of the input. A job that fails leaves nothing under the final name (and removes
//! its temporary file), and a rerun replaces the old output whole. The files are not
//! fsync'ed: this guards against a failed job, not against a machine crash.
//!
//! In a job that takes snapshots the sinks are transactional instead: each snapshot epoch
//! goes to a numbered part file beside the output (`<name>.part-NNNNNNNN`), synced in phase 1
//! and renamed into place in phase 2, and when the job ends the parts are joined, in order,
//! into the output file, which is synced. A killed and resumed job's file is then the same
//! as that of a run that never failed. Without snapshots they behave as above.
//!
//! # Formatting where the items are
//!
//! A single file has one writer, but the stages before it often run on every worker. Then
//! those stages also format the records, into blocks of bytes that they send to the writer,
//! which only appends them: formatting (numbers to text, JSON) runs on every core, and one
//! item crosses to the writer per block instead of one per record. The planner does this
//! for [`text`], [`text_with`], [`text_with_header`] and [`json`](super::json) whenever the
//! sink cannot run in the vertex before it; the plan shows a `format` stage there. Each
//! instance's records keep their order, and a block always reaches the writer before the
//! next snapshot barrier, so the files are the same, transactional ones.
//!
//! The writer here is shared by every file sink, the [`json`](super::json) and
//! [`csv`](super::csv) ones included, and so is the error type [`SinkError`].

use std::fmt::{self, Display};
use std::fs::{self, File};
use std::io::{self, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use weir_core::snapshot::Guarantee;
use weir_core::{BoxError, Item, ProcessorContext, TaskletWaker};

use super::epochs::{self, EpochState};
use super::{Sink, SinkWriter};
use weir_exec::links::factories::Preformat;
use weir_exec::links::factories::wrap_with;
use weir_exec::links::format::{FormatLink, FormattedRecords};
use weir_exec::links::sink::sink_terminal;

pub use weir_exec::connector::SinkError;

/// Creates a sink that writes each item as a line of text, `{item}\n`, into the file `path`.
///
/// One instance writes the whole file (parallelism `Some(1)`), in the order it receives the
/// items. Missing parent directories are created. The file appears, complete, when the job
/// ends; see [atomic output](self#atomic-output).
///
/// Cost: one `Display::fmt` per item into a 256 KiB buffer, done by the stages before the
/// sink when they run on every worker ([formatting](self#formatting-where-the-items-are));
/// each full buffer is handed to an I/O thread for its `write` syscall, so the instance is
/// cooperative.
///
/// # Errors
/// The job fails with a [`SinkError`] naming the file if it cannot be created, written or
/// renamed, or if an item's `Display` fails.
pub fn text<T: Item + Display>(path: impl AsRef<Path>) -> Sink<T> {
    let path = &absolute(path.as_ref());
    file_sink(
        format!("text({})", path.display()),
        Target::File(path.to_owned()),
        display_line::<T>,
    )
}

/// Creates a sink that writes each item, formatted by `format`, into the file `path`.
///
/// `format` appends the bytes of one whole record to the buffer, its line terminator
/// included: the sink adds nothing, so a record may be `word\tcount\n`, end with `\r\n`, or
/// be binary. Otherwise as [`text`].
pub fn text_with<T: Item>(
    path: impl AsRef<Path>,
    format: impl Fn(&T, &mut Vec<u8>) + Send + Sync + 'static,
) -> Sink<T> {
    let path = &absolute(path.as_ref());
    file_sink(
        format!("text({})", path.display()),
        Target::File(path.to_owned()),
        infallible(format),
    )
}

/// Like [`text_with`], with `header` (a line terminator included) written first, even when
/// no item arrives: for a CSV file with a header row.
pub fn text_with_header<T: Item>(
    path: impl AsRef<Path>,
    header: impl Into<String>,
    format: impl Fn(&T, &mut Vec<u8>) + Send + Sync + 'static,
) -> Sink<T> {
    let path = &absolute(path.as_ref());
    let header: Arc<[u8]> = Arc::from(header.into().into_bytes());
    file_sink_with_header(
        format!("text({})", path.display()),
        Target::File(path.to_owned()),
        infallible(format),
        Some(header),
    )
}

/// Creates a sink that writes each item as a line of text, `{item}\n`, into one part file per
/// instance in the directory `dir`.
///
/// The sink runs one instance per worker (parallelism `None`); instance `i` writes
/// `dir/part-{i:05}` (`part-00000`, `part-00001`, ...) with the items it receives, in order,
/// and writes an empty file if it receives none. `dir` and its parents are created. Other
/// files in `dir` are left alone, including part files from an earlier run with more
/// instances. Each part file appears, complete, when its instance finishes; see
/// [atomic output](self#atomic-output).
///
/// Cost: as [`text`], per instance.
///
/// # Errors
/// The job fails with a [`SinkError`] naming the file or directory at fault.
pub fn parts<T: Item + Display>(dir: impl AsRef<Path>) -> Sink<T> {
    let dir = &absolute(dir.as_ref());
    file_sink(
        format!("parts({})", dir.display()),
        Target::Parts(dir.to_owned()),
        display_line::<T>,
    )
}

/// Creates a sink that writes each item, formatted by `format`, into one part file per
/// instance in the directory `dir`.
///
/// `format` appends one whole record, its terminator included, as in [`text_with`].
/// Otherwise as [`parts`].
pub fn parts_with<T: Item>(
    dir: impl AsRef<Path>,
    format: impl Fn(&T, &mut Vec<u8>) + Send + Sync + 'static,
) -> Sink<T> {
    let dir = &absolute(dir.as_ref());
    file_sink(
        format!("parts({})", dir.display()),
        Target::Parts(dir.to_owned()),
        infallible(format),
    )
}

/// `path` made absolute against the working directory (`.` components dropped), as a sink
/// names and remembers its target: the same file named as `out.csv`, `./out.csv` or from
/// another directory is the same sink, and a job resumed from elsewhere finds its committed
/// parts. Nothing is read from the disk (symbolic links are kept).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Formats `{item}\n`.
pub(crate) fn display_line<T: Display>(item: &T, out: &mut Vec<u8>) -> Result<(), BoxError> {
    /// `fmt::Write` for the buffer: unlike `io::Write`, it reports a failing `Display` as an
    /// error instead of panicking.
    struct Bytes<'a>(&'a mut Vec<u8>);
    impl fmt::Write for Bytes<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0.extend_from_slice(s.as_bytes());
            Ok(())
        }
    }
    fmt::Write::write_fmt(&mut Bytes(out), format_args!("{item}\n"))?;
    Ok(())
}

fn infallible<T>(
    format: impl Fn(&T, &mut Vec<u8>) + Send + Sync + 'static,
) -> impl Fn(&T, &mut Vec<u8>) -> Result<(), BoxError> + Send + Sync + 'static {
    move |item, out| {
        format(item, out);
        Ok(())
    }
}

/// Where a file sink writes.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// One file, from one instance.
    File(PathBuf),
    /// One part file per instance in a directory.
    Parts(PathBuf),
}

impl Target {
    /// The parallelism this target allows.
    fn parallelism(&self) -> Option<usize> {
        match self {
            Target::File(_) => Some(1),
            Target::Parts(_) => None,
        }
    }

    /// The final and the temporary path of instance `index`.
    pub(crate) fn paths(&self, index: usize) -> (PathBuf, PathBuf) {
        match self {
            Target::File(path) => {
                let mut tmp = path.clone().into_os_string();
                tmp.push(".tmp");
                (path.clone(), tmp.into())
            }
            Target::Parts(dir) => (
                dir.join(format!("part-{index:05}")),
                dir.join(format!(".part-{index:05}.tmp")),
            ),
        }
    }
}

/// Builds a file sink named `name` that encodes each item with `format`, which appends one
/// whole record. The text and JSON Lines sinks are this with different formats.
///
/// Where the sink cannot run in the vertex of the stages before it (a single file behind
/// stages on every worker), they format the records and the sink appends the bytes: see
/// [`weir_exec::links::format`].
pub(crate) fn file_sink<T, F>(name: String, target: Target, format: F) -> Sink<T>
where
    T: Item,
    F: Fn(&T, &mut Vec<u8>) -> Result<(), BoxError> + Send + Sync + 'static,
{
    file_sink_with_header(name, target, format, None)
}

/// [`file_sink`], with `header` written first in each file, even when no item arrives.
fn file_sink_with_header<T, F>(
    name: String,
    target: Target,
    format: F,
    header: Option<Arc<[u8]>>,
) -> Sink<T>
where
    T: Item,
    F: Fn(&T, &mut Vec<u8>) -> Result<(), BoxError> + Send + Sync + 'static,
{
    let format = Arc::new(format);
    // An encoding error names the file the records were for, as the writer would.
    let named = match &target {
        Target::File(_) => target.paths(0).1,
        Target::Parts(dir) => dir.clone(),
    };
    let preformat = Preformat {
        format: wrap_with::<T, FormattedRecords>({
            let format = Arc::clone(&format);
            move |next| Box::new(FormatLink::new(Arc::clone(&format), named.clone(), next))
        }),
        terminal: {
            let (target, header) = (target.clone(), header.clone());
            Arc::new(move |ctx: &ProcessorContext| {
                let mut writer =
                    FileWriter::new(target.paths(ctx.global_index()), Arc::new(append_block));
                writer.header = header.clone();
                writer.count = |block: &FormattedRecords| block.records;
                sink_terminal(writer)
            })
        },
    };
    Sink::new(name, target.parallelism(), move |ctx: &ProcessorContext| {
        let mut writer = FileWriter::new(target.paths(ctx.global_index()), Arc::clone(&format));
        writer.header = header.clone();
        writer
    })
    .with_preformat(preformat)
}

/// Appends a block of records formatted before they reached the sink.
fn append_block(block: &FormattedRecords, out: &mut Vec<u8>) -> Result<(), BoxError> {
    out.extend_from_slice(&block.bytes);
    Ok(())
}

/// The buffer of a [`TempFileWriter`].
const WRITE_BUFFER: usize = 256 * 1024;

/// Buffered bytes at which a [`TempFileWriter`] writes them out: a little under the buffer
/// size, so a record that crosses it rarely makes the buffer grow.
const SPILL_AT: usize = WRITE_BUFFER - 16 * 1024;

/// Full buffers a [`TempFileWriter`] may have handed to its I/O thread and not got back.
const WRITES_IN_FLIGHT: usize = 4;

/// A file written under a temporary name and renamed to its final name on commit. Dropped
/// without a commit, it removes the temporary file.
///
/// Records are appended to a plain `Vec<u8>` buffer (copied once). The blocking part, the
/// `write` syscalls and the final rename, runs on an I/O thread of its own
/// (`weir-io-<file>`): a full buffer (~256 KiB) is handed over through a bounded queue and
/// comes back empty for reuse. With [`WRITES_IN_FLIGHT`] buffers out, the writer reports no
/// room ([`has_room`](Self::has_room)) instead of blocking, and the buffer grows by at most
/// what the caller adds before it asks. Errors from the thread (a full disk) surface at the
/// next call, naming the file.
///
/// In a job that takes snapshots the writer is made with [`epochs`](Self::epochs) instead:
/// each snapshot epoch goes to a part file of its own, prepared, committed and finally joined
/// into the file as [`super::epochs`] describes.
pub(crate) struct TempFileWriter {
    tmp: PathBuf,
    buf: Vec<u8>,
    /// Empty buffers back from the thread.
    spare: Vec<Vec<u8>>,
    in_flight: usize,
    to_io: Option<SyncSender<IoJob>>,
    from_io: Receiver<IoDone>,
    thread: Option<JoinHandle<()>>,
    /// Set once the commit was handed to the thread.
    committing: bool,
    committed: bool,
    /// The epoch bookkeeping, for a writer in a job that takes snapshots.
    epochs: Option<Epochs>,
}

/// The writer's side of [`super::epochs`].
struct Epochs {
    /// The final file.
    path: PathBuf,
    /// Written first at the join (a CSV header line).
    header: Option<Arc<[u8]>>,
    /// Whether the I/O thread was told which part to write next.
    started: bool,
    /// Parts `1..=parts` hold the output so far.
    parts: u64,
    /// Their length in bytes.
    bytes: u64,
    /// The index of the instance whose output `path` is: its state is saved under it.
    owner: usize,
    /// Other instances' outputs taken over at a restore at lower parallelism, with the
    /// index each is saved under.
    adopted: Vec<(usize, EpochState)>,
    /// Prepared parts not yet renamed into place.
    pending: Vec<(PathBuf, u64)>,
    /// An answer the I/O thread owes: sealed, published or joined.
    awaiting: bool,
    /// The input ended: the next prepare is the last, and its commit joins the parts.
    closed: bool,
    final_prepared: bool,
    joined: bool,
}

/// What a [`TempFileWriter`] asks its I/O thread to do.
enum IoJob {
    Write(Vec<u8>),
    /// Close the file and rename it to its final name.
    Commit,
    /// Epochs: a fresh start: remove every part and rolled file of `path`.
    RemoveAll {
        path: PathBuf,
    },
    /// Epochs: bring the files of an output back to a snapshot's state.
    Restore {
        output: EpochState,
        header: Option<Arc<[u8]>>,
    },
    /// Epochs: the next part to write is `next`.
    Start {
        next: u64,
    },
    /// Epochs: sync and close the part being written, if any.
    Seal,
    /// Epochs: rename these prepared parts into place, then roll the committed parts of
    /// these outputs if enough lie loose.
    Publish {
        parts: Vec<(PathBuf, u64)>,
        outputs: Vec<EpochState>,
        header: Option<Arc<[u8]>>,
    },
    /// Epochs: join each output's parts into its final file.
    Join(Vec<EpochState>, Option<Arc<[u8]>>),
}

/// What the I/O thread answers.
enum IoDone {
    /// A buffer written, cleared for reuse.
    Written(Vec<u8>),
    Committed,
    Failed(SinkError),
    /// The part sealed and its length in bytes, if anything was written since the last
    /// seal.
    Sealed(Option<(u64, u64)>),
    Published,
    /// An output brought back to a snapshot's state.
    Restored,
    Joined,
}

impl TempFileWriter {
    /// Creates (or truncates) `tmp`, creating its parent directories, to become `path`, and
    /// starts its I/O thread; `waker` is woken whenever the thread finishes something.
    pub(crate) fn create(
        path: PathBuf,
        tmp: PathBuf,
        waker: TaskletWaker,
    ) -> Result<Self, SinkError> {
        create_parent(&tmp)?;
        let file = File::create(&tmp).map_err(|source| SinkError::Create {
            path: tmp.clone(),
            source,
        })?;
        Self::start(path, tmp, Some(file), waker, None)
    }

    /// A writer of `path` by snapshot epochs (see [`super::epochs`]), joining through `tmp`
    /// with `header` first; `path` is the output of instance `owner`. No file is created
    /// before the first epoch writes.
    pub(crate) fn epochs(
        path: PathBuf,
        tmp: PathBuf,
        header: Option<Arc<[u8]>>,
        waker: TaskletWaker,
        owner: usize,
    ) -> Result<Self, SinkError> {
        create_parent(&tmp)?;
        let epochs = Epochs {
            path: path.clone(),
            header,
            started: false,
            parts: 0,
            bytes: 0,
            owner,
            adopted: Vec::new(),
            pending: Vec::new(),
            awaiting: false,
            closed: false,
            final_prepared: false,
            joined: false,
        };
        Self::start(path, tmp, None, waker, Some(epochs))
    }

    fn start(
        path: PathBuf,
        tmp: PathBuf,
        file: Option<File>,
        waker: TaskletWaker,
        epochs: Option<Epochs>,
    ) -> Result<Self, SinkError> {
        let (to_io, jobs) = mpsc::sync_channel(WRITES_IN_FLIGHT + 1);
        let (done, from_io) = mpsc::channel();
        let name = format!(
            "weir-io-{}",
            path.file_name()
                .map_or_else(|| "file".into(), |n| n.to_string_lossy())
        );
        let thread_tmp = tmp.clone();
        let thread = thread::Builder::new()
            .name(name)
            .spawn(move || {
                IoThread {
                    file,
                    path,
                    tmp: thread_tmp,
                    committed: false,
                    next_part: 1,
                    part_len: 0,
                }
                .run(&jobs, &done, &waker);
            })
            .map_err(|source| SinkError::Create {
                path: tmp.clone(),
                source,
            })?;
        Ok(TempFileWriter {
            tmp,
            buf: Vec::with_capacity(WRITE_BUFFER),
            spare: Vec::new(),
            in_flight: 0,
            to_io: Some(to_io),
            from_io,
            thread: Some(thread),
            committing: false,
            committed: false,
            epochs,
        })
    }

    /// The temporary file's path, for error messages.
    pub(crate) fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// The buffer to append records to. Call [`spill_if_full`](Self::spill_if_full) after.
    pub(crate) fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Takes back what the I/O thread finished. Never blocks.
    fn collect(&mut self) -> Result<(), SinkError> {
        loop {
            match self.from_io.try_recv() {
                Ok(done) => {
                    self.take(done)?;
                }
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => return Err(self.thread_gone()),
            }
        }
    }

    /// Blocks until the I/O thread gives the answer `awaited` picks, handling the ones before
    /// it; returns what [`take`](Self::take) returns for it.
    fn wait_for(
        &mut self,
        awaited: impl Fn(&IoDone) -> bool,
    ) -> Result<Option<(u64, u64)>, SinkError> {
        loop {
            let done = self.from_io.recv().map_err(|_| self.thread_gone())?;
            let last = awaited(&done);
            let taken = self.take(done)?;
            if last {
                return Ok(taken);
            }
        }
    }

    /// Handles one answer of the I/O thread; a seal's part number and length are returned.
    fn take(&mut self, done: IoDone) -> Result<Option<(u64, u64)>, SinkError> {
        match done {
            IoDone::Written(buf) => {
                self.in_flight -= 1;
                self.spare.push(buf);
            }
            IoDone::Committed => self.committed = true,
            IoDone::Failed(e) => return Err(e),
            IoDone::Sealed(part) => {
                if let Some(e) = self.epochs.as_mut() {
                    e.awaiting = false;
                }
                return Ok(part);
            }
            IoDone::Published => {
                if let Some(e) = self.epochs.as_mut() {
                    e.awaiting = false;
                    e.pending.clear();
                }
            }
            IoDone::Restored => {}
            IoDone::Joined => {
                if let Some(e) = self.epochs.as_mut() {
                    e.awaiting = false;
                    e.joined = true;
                }
            }
        }
        Ok(None)
    }

    fn thread_gone(&self) -> SinkError {
        SinkError::Write {
            path: self.tmp.clone(),
            source: io::Error::other("the file's I/O thread ended"),
        }
    }

    /// Hands the buffer to the I/O thread if it may take one more. Returns whether it did.
    fn hand_off(&mut self) -> Result<bool, SinkError> {
        self.collect()?;
        if self.in_flight >= WRITES_IN_FLIGHT {
            return Ok(false);
        }
        self.start_epochs()?;
        let fresh = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(WRITE_BUFFER));
        let full = std::mem::replace(&mut self.buf, fresh);
        if let Some(job) = self.send(IoJob::Write(full))? {
            // Snapshot jobs fill the queue: the buffer waits for the next call.
            let IoJob::Write(full) = job else {
                unreachable!("the job sent")
            };
            let fresh = std::mem::replace(&mut self.buf, full);
            self.spare.push(fresh);
            return Ok(false);
        }
        self.in_flight += 1;
        Ok(true)
    }

    /// Sends `job` if the queue has room; gives it back when the queue is full (of the jobs
    /// a restore queued, say), to be sent again later.
    fn send(&mut self, job: IoJob) -> Result<Option<IoJob>, SinkError> {
        match self.to_io.as_ref().map(|tx| tx.try_send(job)) {
            Some(Ok(())) => Ok(None),
            Some(Err(TrySendError::Full(job))) => Ok(Some(job)),
            _ => Err(self.thread_gone()),
        }
    }

    /// Sends `job`, waiting for room in the queue: for the snapshot steps, which may find
    /// it full of writes.
    fn send_blocking(&mut self, job: IoJob) -> Result<(), SinkError> {
        let sent = self.to_io.as_ref().is_some_and(|tx| tx.send(job).is_ok());
        if sent {
            Ok(())
        } else {
            Err(self.thread_gone())
        }
    }

    /// In epoch mode, before the first write: a fresh start removes the parts an earlier
    /// run left (no snapshot holds them), and numbers parts from 1.
    fn start_epochs(&mut self) -> Result<(), SinkError> {
        let Some(e) = self.epochs.as_mut() else {
            return Ok(());
        };
        if e.started {
            return Ok(());
        }
        e.started = true;
        let path = e.path.clone();
        self.send_blocking(IoJob::RemoveAll { path })?;
        self.send_blocking(IoJob::Start { next: 1 })
    }

    /// Hands the buffer over if it is nearly full and the thread may take it. Never blocks.
    #[inline]
    pub(crate) fn spill_if_full(&mut self) -> Result<(), SinkError> {
        if self.buf.len() >= SPILL_AT {
            self.hand_off()?;
        }
        Ok(())
    }

    /// Whether more records may be appended now: false while the buffer is full and the I/O
    /// thread has all the buffers it may hold.
    #[inline]
    pub(crate) fn has_room(&mut self) -> Result<bool, SinkError> {
        if self.buf.len() < SPILL_AT {
            return Ok(true);
        }
        self.hand_off()
    }

    /// Writes out the buffer, closes the file and renames it to its final name, without
    /// blocking: returns false until the I/O thread has done it. Call again until true.
    ///
    /// In epoch mode it only hands the buffer over: the last epoch is prepared by the
    /// terminal snapshot, and its commit joins the parts.
    pub(crate) fn poll_commit(&mut self) -> Result<bool, SinkError> {
        self.collect()?;
        if self.epochs.is_some() {
            if !self.buf.is_empty() && !self.hand_off()? {
                return Ok(false);
            }
            if let Some(e) = self.epochs.as_mut() {
                e.closed = true;
            }
            return Ok(true);
        }
        if self.committed {
            return Ok(true);
        }
        if !self.committing {
            if !self.buf.is_empty() && !self.hand_off()? {
                return Ok(false);
            }
            if self.send(IoJob::Commit)?.is_some() {
                return Ok(false);
            }
            self.committing = true;
        }
        Ok(false)
    }

    /// [`poll_commit`](Self::poll_commit) until done, blocking: for callers that may block.
    pub(crate) fn commit(mut self) -> Result<(), SinkError> {
        while !self.poll_commit()? {
            thread::park_timeout(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Phase 1 (epoch mode): what was written since the last epoch becomes a durable part
    /// file; returns each output's state to save, with the index of the instance it is
    /// saved under (see [`SinkWriter::prepare_outputs`]). Blocks for one `fsync` of the part
    /// (and of its folder): the cost of a snapshot, once per interval.
    ///
    /// # Errors
    /// A write or sync failed, naming the file; or the writer is not in epoch mode.
    pub(crate) fn prepare(&mut self) -> Result<Vec<(usize, Vec<u8>)>, SinkError> {
        if self.epochs.is_none() {
            return Err(self.thread_gone());
        }
        self.start_epochs()?;
        if !self.buf.is_empty() {
            let full = std::mem::take(&mut self.buf);
            self.send_blocking(IoJob::Write(full))?;
            self.in_flight += 1;
        }
        self.send_blocking(IoJob::Seal)?;
        let sealed = self.wait_for(|done| matches!(done, IoDone::Sealed(_)))?;
        let e = self.epochs.as_mut().expect("checked above");
        if let Some((n, len)) = sealed {
            e.parts = n;
            e.bytes += len;
            e.pending.push((e.path.clone(), n));
        }
        if e.closed {
            e.final_prepared = true;
        }
        let own = EpochState {
            path: e.path.clone(),
            parts: e.parts,
            bytes: e.bytes,
        };
        let mut outputs = vec![(e.owner, epochs::encode(&[own]))];
        outputs.extend(
            e.adopted
                .iter()
                .map(|(owner, state)| (*owner, epochs::encode(std::slice::from_ref(state)))),
        );
        Ok(outputs)
    }

    /// Phase 2 (epoch mode): renames the prepared parts into place, and after the last
    /// epoch joins the parts into the file. Never blocks: false until done.
    pub(crate) fn poll_publish(&mut self) -> Result<bool, SinkError> {
        self.collect()?;
        let Some(e) = self.epochs.as_mut() else {
            return Ok(true);
        };
        if e.awaiting {
            return Ok(false);
        }
        let mut outputs = vec![EpochState {
            path: e.path.clone(),
            parts: e.parts,
            bytes: e.bytes,
        }];
        outputs.extend(e.adopted.iter().map(|(_, state)| state.clone()));
        let header = e.header.clone();
        if !e.pending.is_empty() {
            let parts = e.pending.clone();
            let job = IoJob::Publish {
                parts,
                outputs,
                header,
            };
            let sent = self.send(job)?.is_none();
            self.set_awaiting(sent);
            return Ok(false);
        }
        if e.final_prepared && !e.joined {
            let sent = self.send(IoJob::Join(outputs, header))?.is_none();
            self.set_awaiting(sent);
            return Ok(false);
        }
        Ok(true)
    }

    /// Epochs: whether an answer of the I/O thread is owed (a job was sent).
    fn set_awaiting(&mut self, awaiting: bool) {
        if let Some(e) = self.epochs.as_mut() {
            e.awaiting = awaiting;
        }
    }

    /// After a restore (epoch mode): takes back the outputs a snapshot saved under `owner`
    /// (see [`prepare`](Self::prepare)). This writer's own output goes on after its parts;
    /// another instance's (the sink now runs fewer instances) is adopted, saved under its
    /// owner again, and joined at the end. The I/O thread brings each output's files back to
    /// the saved state first ([`epochs::restore`]): parts numbered after the saved ones go,
    /// prepared ones are renamed into place, the rolled file is cut back.
    ///
    /// Returns how many parts the writer's own output has.
    pub(crate) fn restore(&mut self, owner: usize, prepared: &[u8]) -> Result<u64, BoxError> {
        let states = epochs::decode(prepared)?;
        for state in states {
            let own = self.epochs.as_ref().is_some_and(|e| e.path == state.path);
            let header = self
                .epochs
                .as_ref()
                .ok_or("restored a file sink that takes no snapshots")?
                .header
                .clone();
            self.send_blocking(IoJob::Restore {
                output: state.clone(),
                header,
            })?;
            // Done before anything else runs: a failure fails the restore, naming the file.
            self.wait_for(|done| matches!(done, IoDone::Restored))?;
            let e = self.epochs.as_mut().expect("checked above");
            if own {
                e.started = true;
                e.parts = state.parts;
                e.bytes = state.bytes;
                self.send_blocking(IoJob::Start {
                    next: state.parts + 1,
                })?;
            } else if !e.adopted.iter().any(|(_, a)| a.path == state.path) {
                e.adopted.push((owner, state));
            }
        }
        Ok(self.epochs.as_ref().map_or(0, |e| e.parts))
    }
}

/// Creates the folder `tmp` goes into.
fn create_parent(tmp: &Path) -> Result<(), SinkError> {
    if let Some(dir) = tmp.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|source| SinkError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
    }
    Ok(())
}

/// For writers that want an `io::Write`, such as `csv::Writer`: appends to the buffer.
impl Write for TempFileWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        self.spill_if_full().map_err(io::Error::other)?;
        Ok(data.len())
    }

    /// Does nothing: the buffer is handed over when full and at commit.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for TempFileWriter {
    fn drop(&mut self) {
        // Closing the queue makes the thread drop the file and, without a commit, remove the
        // temporary file. Joined so that nothing writes after the job has ended.
        drop(self.to_io.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The I/O thread of a [`TempFileWriter`]: writes the buffers it is given, in order, and on
/// commit closes the file and renames it. After a failure it only reports it again. Without
/// a commit, when the writer goes away, it removes the temporary file.
///
/// In epoch mode `file` starts as `None`; a write opens part `next_part`, a seal syncs and
/// closes it, and when the writer goes away only a part not yet sealed is removed: sealed
/// parts may be in a snapshot.
struct IoThread {
    file: Option<File>,
    path: PathBuf,
    tmp: PathBuf,
    committed: bool,
    next_part: u64,
    /// Bytes written to the open part.
    part_len: u64,
}

impl IoThread {
    fn run(mut self, jobs: &Receiver<IoJob>, done: &mpsc::Sender<IoDone>, waker: &TaskletWaker) {
        let epochs = self.file.is_none();
        let mut failed = false;
        while let Ok(job) = jobs.recv() {
            let answer = if failed {
                // The file failed earlier: say so again.
                (!self.committed).then(|| {
                    IoDone::Failed(SinkError::Write {
                        path: self.tmp.clone(),
                        source: io::Error::other("an earlier write failed"),
                    })
                })
            } else {
                match self.handle(job) {
                    Ok(answer) => answer,
                    Err(e) => {
                        failed = true;
                        self.file = None;
                        Some(IoDone::Failed(e))
                    }
                }
            };
            if let Some(answer) = answer {
                let _ = done.send(answer);
                waker.wake();
            }
        }
        drop(self.file.take());
        // Best effort: the job already failed for a better reason, or this part is in no
        // snapshot.
        if epochs {
            let _ = fs::remove_file(epochs::part_tmp(&self.path, self.next_part));
        } else if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }

    fn handle(&mut self, job: IoJob) -> Result<Option<IoDone>, SinkError> {
        Ok(Some(match job {
            IoJob::Write(mut buf) => {
                if self.file.is_none() {
                    // Epochs: the first write of an epoch opens its part.
                    let path = epochs::part_tmp(&self.path, self.next_part);
                    let f = File::create(&path).map_err(|source| SinkError::Create {
                        path: path.clone(),
                        source,
                    })?;
                    self.tmp = path;
                    self.file = Some(f);
                    self.part_len = 0;
                }
                let target = self.file.as_mut().expect("opened above");
                target.write_all(&buf).map_err(|source| SinkError::Write {
                    path: self.tmp.clone(),
                    source,
                })?;
                self.part_len += buf.len() as u64;
                buf.clear();
                IoDone::Written(buf)
            }
            IoJob::Commit => {
                drop(self.file.take());
                fs::rename(&self.tmp, &self.path).map_err(|source| SinkError::Rename {
                    from: self.tmp.clone(),
                    to: self.path.clone(),
                    source,
                })?;
                self.committed = true;
                IoDone::Committed
            }
            IoJob::RemoveAll { path } => {
                epochs::remove_all(&path)?;
                return Ok(None);
            }
            IoJob::Restore { output, header } => {
                epochs::restore(&output, header.as_ref())?;
                IoDone::Restored
            }
            IoJob::Start { next } => {
                self.next_part = next;
                return Ok(None);
            }
            IoJob::Seal => match self.file.take() {
                Some(f) => {
                    f.sync_all().map_err(|source| SinkError::Write {
                        path: self.tmp.clone(),
                        source,
                    })?;
                    // The part's name too: the manifest that lists it may outlive a power
                    // loss only if the directory entry does.
                    epochs::sync_parent(&self.tmp)?;
                    weir_core::snapshot::crash::step("sink-sealed");
                    let n = self.next_part;
                    self.next_part += 1;
                    IoDone::Sealed(Some((n, self.part_len)))
                }
                None => IoDone::Sealed(None),
            },
            IoJob::Publish {
                parts,
                outputs,
                header,
            } => {
                epochs::publish(&parts)?;
                weir_core::snapshot::crash::step("sink-published");
                for output in &outputs {
                    epochs::roll(output, header.as_ref())?;
                }
                IoDone::Published
            }
            IoJob::Join(outputs, header) => {
                for output in outputs {
                    epochs::join(&output, header.as_ref())?;
                }
                IoDone::Joined
            }
        }))
    }
}

/// The writer of [`file_sink`]: formats each item into a [`TempFileWriter`].
pub(crate) struct FileWriter<T, F> {
    paths: Option<(PathBuf, PathBuf)>,
    format: Arc<F>,
    /// Bytes written first, before any record (a CSV header line).
    header: Option<Arc<[u8]>>,
    /// How many records an item holds (one, but for a block formatted upstream).
    count: fn(&T) -> u64,
    out: Option<TempFileWriter>,
    _item: PhantomData<fn(T)>,
}

impl<T, F> FileWriter<T, F> {
    /// A writer of the final and temporary paths `paths`; it creates the file in `open`.
    pub(crate) fn new(paths: (PathBuf, PathBuf), format: Arc<F>) -> Self {
        FileWriter {
            paths: Some(paths),
            format,
            header: None,
            count: |_| 1,
            out: None,
            _item: PhantomData,
        }
    }
}

impl<T, F> SinkWriter for FileWriter<T, F>
where
    T: Item,
    F: Fn(&T, &mut Vec<u8>) -> Result<(), BoxError> + Send + Sync + 'static,
{
    type Item = T;

    #[inline]
    fn records_in(&self, item: &T) -> u64 {
        (self.count)(item)
    }

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        if let Some((path, tmp)) = self.paths.take() {
            if ctx.guarantee() != Guarantee::None {
                // Snapshot epochs: the header goes first when the parts are joined.
                let header = self.header.clone();
                self.out = Some(TempFileWriter::epochs(
                    path,
                    tmp,
                    header,
                    ctx.waker().clone(),
                    ctx.global_index(),
                )?);
                return Ok(());
            }
            let mut out = TempFileWriter::create(path, tmp, ctx.waker().clone())?;
            if let Some(header) = &self.header {
                out.buffer().extend_from_slice(header);
            }
            self.out = Some(out);
        }
        Ok(())
    }

    /// # Panics
    /// If called before `open`: the runtime never does.
    #[inline]
    fn write(&mut self, item: T) -> Result<(), BoxError> {
        let out = self
            .out
            .as_mut()
            .expect("SinkWriter::write called before open");
        (self.format)(&item, out.buffer()).map_err(|source| SinkError::Encode {
            path: out.tmp_path().to_owned(),
            source,
        })?;
        Ok(out.spill_if_full()?)
    }

    fn close(&mut self) -> Result<(), BoxError> {
        match self.out.take() {
            Some(out) => Ok(out.commit()?),
            None => Ok(()),
        }
    }

    fn has_room(&mut self) -> Result<bool, BoxError> {
        match &mut self.out {
            Some(out) => Ok(out.has_room()?),
            None => Ok(true),
        }
    }

    fn poll_close(&mut self) -> Result<bool, BoxError> {
        match &mut self.out {
            Some(out) => Ok(out.poll_commit()?),
            None => Ok(true),
        }
    }

    /// Writes are handed to an I/O thread: formatting runs on the worker, which never blocks.
    fn is_cooperative(&self) -> bool {
        true
    }

    /// The epoch's part file, synced, saved under this instance; outputs taken over at a
    /// restore are saved under their own instances. See [`super::epochs`]. Blocks for that
    /// `fsync`.
    fn prepare_outputs(&mut self, _instance: usize) -> Result<Vec<(usize, Vec<u8>)>, BoxError> {
        match &mut self.out {
            Some(out) => Ok(out.prepare()?),
            None => Ok(Vec::new()),
        }
    }

    fn commit(&mut self) -> Result<bool, BoxError> {
        match &mut self.out {
            Some(out) => Ok(out.poll_publish()?),
            None => Ok(true),
        }
    }

    fn restore_output(&mut self, owner: usize, prepared: Vec<u8>) -> Result<(), BoxError> {
        match &mut self.out {
            Some(out) => out.restore(owner, &prepared).map(drop),
            None => Ok(()),
        }
    }
}

/// Drives sink writers the way the runtime does, for the tests of every sink.
#[cfg(test)]
pub(crate) mod testing {
    use weir_core::ProcessorContext;

    use crate::sinks::SinkWriter;

    /// Runs instance `index` of `parallelism`: opens, writes `items`, closes.
    pub(crate) fn run<W: SinkWriter>(
        mut writer: W,
        items: impl IntoIterator<Item = W::Item>,
        index: usize,
        parallelism: usize,
    ) -> Result<(), weir_core::BoxError> {
        let ctx = ProcessorContext::new("test", index, parallelism, 0);
        writer.open(&ctx)?;
        for item in items {
            writer.write(item)?;
        }
        writer.close()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::run;
    use super::*;

    fn text_writer<T: Item + Display>(target: &Target, index: usize) -> impl SinkWriter<Item = T> {
        FileWriter::new(target.paths(index), Arc::new(display_line::<T>))
    }

    #[test]
    fn writes_a_single_file_and_renames_it_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.txt");
        let target = Target::File(path.clone());
        let mut w = text_writer::<u32>(&target, 0);
        w.open(&ProcessorContext::new("test", 0, 1, 0)).unwrap();
        w.write(1).unwrap();
        w.write(2).unwrap();
        assert!(!path.exists(), "the final name appears only at close");
        assert!(dir.path().join("sub/out.txt.tmp").exists());
        w.close().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "1\n2\n");
        assert!(!dir.path().join("sub/out.txt.tmp").exists());
    }

    #[test]
    fn large_output_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let items: Vec<u64> = (0..200_000).collect();
        run(
            text_writer::<u64>(&Target::File(path.clone()), 0),
            items.clone(),
            0,
            1,
        )
        .unwrap();
        let expected: String = items.iter().map(|i| format!("{i}\n")).collect();
        assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    }

    #[test]
    fn a_failed_job_leaves_no_file_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        fs::write(&path, "old\n").unwrap();
        {
            let mut w = text_writer::<u32>(&Target::File(path.clone()), 0);
            w.open(&ProcessorContext::new("test", 0, 1, 0)).unwrap();
            w.write(1).unwrap();
            // Dropped without close, as when the job fails.
        }
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "old\n",
            "the previous output is intact"
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file is left"
        );
    }

    #[test]
    fn parts_write_one_file_per_instance() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let target = Target::Parts(out.clone());
        let format = Arc::new(infallible(|(w, n): &(String, u64), out: &mut Vec<u8>| {
            out.extend_from_slice(w.as_bytes());
            out.push(b'\t');
            out.extend_from_slice(n.to_string().as_bytes());
            out.push(b'\n');
        }));
        for index in 0..3 {
            let items = (0..index as u64).map(|n| (format!("w{index}"), n));
            run(
                FileWriter::new(target.paths(index), Arc::clone(&format)),
                items,
                index,
                3,
            )
            .unwrap();
        }
        let mut names: Vec<String> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["part-00000", "part-00001", "part-00002"]);
        assert_eq!(fs::read_to_string(out.join("part-00000")).unwrap(), "");
        assert_eq!(
            fs::read_to_string(out.join("part-00002")).unwrap(),
            "w2\t0\nw2\t1\n"
        );
    }

    fn epoch_ctx() -> ProcessorContext {
        ProcessorContext::new("test", 0, 1, 0).with_guarantee(Guarantee::ExactlyOnce)
    }

    /// Phase 2, polled as the runtime does until the I/O thread is done.
    fn commit<W: SinkWriter>(w: &mut W) {
        while !w.commit().unwrap() {
            thread::park_timeout(Duration::from_millis(1));
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn with_snapshots_each_epoch_is_a_part_and_the_end_joins_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        let target = Target::File(path.clone());
        let mut w = FileWriter::new(target.paths(0), Arc::new(display_line::<u32>));
        w.header = Some(Arc::from(&b"n\n"[..]));
        w.open(&epoch_ctx()).unwrap();
        w.write(1).unwrap();
        w.write(2).unwrap();
        let first = w.prepare_outputs(0).unwrap();
        assert_eq!(names(dir.path()), ["out.csv.part-00000001.tmp"]);
        assert_eq!(
            fs::read_to_string(epochs::part_tmp(&path, 1)).unwrap(),
            "1\n2\n",
            "prepared: durable, not yet in place"
        );
        commit(&mut w);
        commit(&mut w);
        assert_eq!(names(dir.path()), ["out.csv.part-00000001"]);
        // An epoch that wrote nothing makes no part.
        assert_eq!(w.prepare_outputs(0).unwrap(), first);
        w.write(3).unwrap();
        while !w.poll_close().unwrap() {}
        assert!(!path.exists(), "the file appears at the terminal commit");
        w.prepare_outputs(0).unwrap();
        commit(&mut w);
        assert_eq!(fs::read_to_string(&path).unwrap(), "n\n1\n2\n3\n");
        assert_eq!(names(dir.path()), ["out.csv"]);
    }

    #[test]
    fn a_restore_takes_back_prepared_parts_and_drops_later_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let target = Target::File(path.clone());
        let writer = || FileWriter::new(target.paths(0), Arc::new(display_line::<u32>));
        let saved = {
            let mut w = writer();
            w.open(&epoch_ctx()).unwrap();
            w.write(1).unwrap();
            let saved = w.prepare_outputs(0).unwrap();
            // The snapshot of epoch 1 is durable, but the process dies before phase 2; epoch
            // 2 is prepared by a snapshot that never completes, epoch 3 is being written.
            w.write(2).unwrap();
            w.prepare_outputs(0).unwrap();
            w.write(3).unwrap();
            w.has_room().unwrap();
            saved
        };
        assert_eq!(
            names(dir.path()),
            ["out.txt.part-00000001.tmp", "out.txt.part-00000002.tmp"],
            "the part being written goes with its writer; prepared ones stay"
        );
        // A stale committed part of a later epoch (an older, damaged snapshot was skipped).
        fs::write(epochs::part_path(&path, 3), "stale\n").unwrap();
        let mut w = writer();
        w.open(&epoch_ctx()).unwrap();
        for (owner, prepared) in saved.clone() {
            w.restore_output(owner, prepared).unwrap();
        }
        commit(&mut w);
        assert_eq!(names(dir.path()), ["out.txt.part-00000001"]);
        // Restoring the same snapshot again, with part 1 already in place, is fine.
        let mut again = writer();
        again.open(&epoch_ctx()).unwrap();
        for (owner, prepared) in saved {
            again.restore_output(owner, prepared).unwrap();
        }
        commit(&mut again);
        drop(again);
        w.write(20).unwrap();
        while !w.poll_close().unwrap() {}
        w.prepare_outputs(0).unwrap();
        commit(&mut w);
        assert_eq!(fs::read_to_string(&path).unwrap(), "1\n20\n");
        assert_eq!(names(dir.path()), ["out.txt"]);
    }

    #[test]
    fn a_restore_publishes_every_saved_part_whose_phase_2_never_ran() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let target = Target::File(path.clone());
        let writer = || FileWriter::new(target.paths(0), Arc::new(display_line::<u32>));
        let saved = {
            let mut w = writer();
            w.open(&epoch_ctx()).unwrap();
            // Two snapshots complete (phase 1 of each), then the process dies before the
            // phase 2 of either: both parts are still temporary.
            w.write(1).unwrap();
            w.prepare_outputs(0).unwrap();
            w.write(2).unwrap();
            w.prepare_outputs(0).unwrap()
        };
        assert_eq!(
            names(dir.path()),
            ["out.txt.part-00000001.tmp", "out.txt.part-00000002.tmp"]
        );
        let mut w = writer();
        w.open(&epoch_ctx()).unwrap();
        for (owner, prepared) in saved {
            w.restore_output(owner, prepared).unwrap();
        }
        commit(&mut w);
        assert_eq!(
            names(dir.path()),
            ["out.txt.part-00000001", "out.txt.part-00000002"]
        );
        w.write(3).unwrap();
        while !w.poll_close().unwrap() {}
        w.prepare_outputs(0).unwrap();
        commit(&mut w);
        assert_eq!(fs::read_to_string(&path).unwrap(), "1\n2\n3\n");
        assert_eq!(names(dir.path()), ["out.txt"]);
    }

    #[test]
    fn a_fresh_start_with_snapshots_removes_parts_an_earlier_run_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        fs::write(epochs::part_path(&path, 1), "old\n").unwrap();
        fs::write(epochs::part_tmp(&path, 2), "old\n").unwrap();
        let mut w = FileWriter::new(
            Target::File(path.clone()).paths(0),
            Arc::new(display_line::<u32>),
        );
        w.open(&epoch_ctx()).unwrap();
        w.write(7).unwrap();
        while !w.poll_close().unwrap() {}
        w.prepare_outputs(0).unwrap();
        commit(&mut w);
        assert_eq!(fs::read_to_string(&path).unwrap(), "7\n");
        assert_eq!(names(dir.path()), ["out.txt"]);
    }

    #[test]
    fn sink_parallelism_follows_the_target() {
        assert_eq!(text::<u32>("x").parallelism, Some(1));
        assert_eq!(parts::<u32>("x").parallelism, None);
        assert_eq!(
            parts_with("x", |_: &u32, _: &mut Vec<u8>| {}).name(),
            format!("parts({})", absolute(Path::new("x")).display())
        );
    }

    #[test]
    fn errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, "").unwrap();
        // A directory cannot be created under a regular file.
        let target = Target::Parts(blocker.join("out"));
        let err = run(text_writer::<u32>(&target, 0), [1], 0, 1).unwrap_err();
        assert!(
            err.to_string()
                .contains(&*blocker.join("out").to_string_lossy()),
            "{err}"
        );

        struct Failing;
        impl Display for Failing {
            fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                Err(std::fmt::Error)
            }
        }
        impl Clone for Failing {
            fn clone(&self) -> Self {
                Failing
            }
        }
        let path = dir.path().join("out.txt");
        let err = run(
            text_writer::<Failing>(&Target::File(path.clone()), 0),
            [Failing],
            0,
            1,
        )
        .unwrap_err();
        assert!(err.to_string().contains("out.txt"), "{err}");
        assert!(!path.exists());
    }
}
