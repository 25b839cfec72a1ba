//! Text files as lines: one file, every file in a directory, or a glob pattern.
//!
//! [`text`] reads the lines of its files in parallel. It splits the bytes of all the files
//! into one contiguous range per source instance; each instance reads the lines that *start*
//! in its range, so every line is read by exactly one instance and none is lost, however the
//! ranges fall. Lines come without their `\n` or `\r\n`.
//!
//! ```no_run
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! p.read_from(sources::files::text("data/*.txt")?)
//!     .flat_map(|line: String| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
//!     .write_to(sinks::stdout::lines());
//! # Ok::<(), weir::Error>(())
//! ```
//!
//! [`text_blocks`] reads the same lines many at a time, as [`TextBlock`]s of whole lines: for
//! stages that work on the text rather than on each line.
//!
//! This module also holds what the file-based sources share: the path resolution and the
//! error type [`SourceError`], the byte-range line reader behind [`text`] and
//! [`json::lines`](super::json::lines), and the warning log of malformed records used by the
//! JSON and CSV sources. [`InputFiles`], [`LineReader`] and [`MalformedLog`] are public so that
//! line-based sources in other crates reuse them instead of copying them.
//!
//! # Counters
//!
//! A text source instance registers `lines` (lines read), `bytes` (bytes of those lines,
//! terminators included) and `invalid_utf8_lines` (lines that were not valid UTF-8 and were
//! decoded lossily). Summed over the instances, `lines` and `bytes` cover every file exactly.
//! The first instance also counts `binary_files_skipped`: the input files left out as binary.

use std::borrow::Cow;
use std::fmt::Display;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Take};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use weir_core::{BoxError, Counter, ProcessorContext};

use super::identity::{self, Stamp};
use super::{BatchSource, Emitter, SourceReader};

mod blocks;

pub use blocks::{BlockRead, TEXT_BLOCK_BYTES, TextBlock, text_blocks, text_blocks_placeholder};

/// Why a file-based source could not be built or failed while reading.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The path names neither a file nor a directory.
    #[error("input path {} does not exist", path.display())]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// The glob pattern matched no regular file.
    #[error("glob pattern `{pattern}` matches no file")]
    NoMatch {
        /// The pattern as given.
        pattern: String,
    },
    /// The glob pattern is not valid (for example an unclosed `[`).
    #[error("invalid glob pattern `{pattern}`: {source}")]
    BadPattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        source: glob::PatternError,
    },
    /// Listing, opening or reading an input failed.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file or directory at fault.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// An input file changed since the read position a run resumes from was saved: the
    /// position no longer means what it meant (see `sources/identity.rs`).
    #[error("input {} {change} since the snapshot the run resumes from, so its saved read positions no longer fit the input", path.display())]
    InputChanged {
        /// The file at fault.
        path: PathBuf,
        /// What changed.
        change: String,
    },
    /// A read position saved in a snapshot does not fit the input: the files changed, or
    /// the position is damaged.
    #[error("cannot resume reading at the saved position: {reason}")]
    Position {
        /// What does not fit.
        reason: String,
    },
    /// Reading a CSV file failed: an I/O error, or a header row that cannot be read.
    #[error("cannot read CSV file {}: {source}", path.display())]
    Csv {
        /// The file at fault.
        path: PathBuf,
        /// The underlying error.
        source: csv::Error,
    },
}

/// The input change that refused a resumed run, if `error` (or an error in its chain of
/// sources) is one: [`SourceError::InputChanged`], naming the file. For a command that
/// offers to start over instead.
pub fn input_change<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a SourceError> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(change @ SourceError::InputChanged { .. }) = e.downcast_ref::<SourceError>() {
            return Some(change);
        }
        next = e.source();
    }
    None
}

/// Creates a source that reads the lines of the text files at `path`.
///
/// `path` is a file, a directory (every regular file directly in it, sorted by name;
/// subdirectories are not read) or, if it contains `*`, `?` or `[`, a glob pattern (every
/// regular file it matches, sorted by path). The file list and the file sizes are taken once,
/// here: bytes appended to a file later are not read.
///
/// The source runs one instance per worker (parallelism `None`), each reading the lines that
/// start in its share of the bytes; see the [module docs](self). Within an instance, lines
/// come in file order. A line is stripped of its trailing `\n` and of a `\r` just before it.
/// Invalid UTF-8 is decoded lossily (U+FFFD) and counted, never an error. An empty file, or
/// an empty directory, yields nothing. A binary file (a NUL byte in its first
/// [`BINARY_PROBE`] bytes) is skipped, with a warning naming it, and counted in
/// `binary_files_skipped` (see [`InputFiles::skip_binary`]).
///
/// Cost: one `String` allocation per line; file reads of up to 256 KiB. Each `read` call
/// handles at most about 64 KiB. A file read may block, so each instance reads ahead on an I/O thread of its own and its
/// chain runs on the cooperative workers.
///
/// # Errors
/// [`SourceError::NotFound`] if `path` does not exist, [`SourceError::NoMatch`] if a glob
/// matches no file, [`SourceError::BadPattern`] for an invalid glob and [`SourceError::Io`]
/// if a directory cannot be listed or a file examined. A read failure while the job runs
/// fails the job with a [`SourceError::Io`] naming the file.
pub fn text(path: impl AsRef<Path>) -> Result<BatchSource<String>, SourceError> {
    let path = path.as_ref();
    Ok(text_source(
        format!("text({})", path.display()),
        InputFiles::resolve(path)?.skip_binary()?,
    ))
}

/// How many bytes at the start of a file decide whether it is binary.
pub const BINARY_PROBE: usize = 8 * 1024;

/// Whether the file at `path` has a NUL byte in its first [`BINARY_PROBE`] bytes.
fn starts_binary(path: &Path) -> Result<bool, SourceError> {
    use std::io::Read;
    let io = |e| SourceError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let mut buf = [0u8; BINARY_PROBE];
    let mut file = File::open(path).map_err(io)?;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    Ok(memchr::memchr(0, &buf[..filled]).is_some())
}

/// A text source over already resolved files, named `name`.
fn text_source(name: String, files: InputFiles) -> BatchSource<String> {
    let total = files.total;
    let files = Arc::new(files);
    BatchSource::new(name, None, move |_| TextReader::new(Arc::clone(&files))).with_size_hint(total)
}

/// A text source over no files, labelled `text(label)`: it plans exactly like [`text`] and
/// reads nothing. For showing a job's plan before its input exists.
pub fn text_placeholder(label: &str) -> BatchSource<String> {
    text_source(format!("text({label})"), InputFiles::empty())
}

/// The buffer of a file reader.
const READ_BUFFER: usize = 256 * 1024;

/// About how many bytes of lines a reader handles per `read` call.
const READ_BUDGET: u64 = 64 * 1024;

/// How many bytes a numbered reader may scan per `read` call to count the lines before its
/// range. Counting newlines is far cheaper than handling lines, hence the larger budget.
const SCAN_BUDGET: u64 = 4 * 1024 * 1024;

/// One input file, with its size when the source was built.
#[derive(Debug, Clone)]
pub(crate) struct InputFile {
    pub(crate) path: PathBuf,
    pub(crate) len: u64,
    /// Its modification time and inode when listed.
    pub(crate) stamp: Stamp,
    /// Where the file starts in the concatenation of all the files.
    offset: u64,
}

/// The resolved, sized inputs of a file-based source, shared by its instances.
///
/// Public so that sources in other crates (the NEXMark replay source, for one) read files
/// through the same [`LineReader`] as the built-in ones.
#[derive(Debug, Clone)]
pub struct InputFiles {
    pub(crate) files: Vec<InputFile>,
    total: u64,
    /// The files' identities, encoded, once a position needs them (see
    /// `sources/identity.rs`).
    listing: OnceLock<Vec<u8>>,
    /// Files left out as binary by [`skip_binary`](Self::skip_binary).
    skipped_binary: Vec<PathBuf>,
}

impl InputFiles {
    /// No files: what a placeholder source reads.
    fn empty() -> Self {
        InputFiles {
            files: Vec::new(),
            total: 0,
            listing: OnceLock::new(),
            skipped_binary: Vec::new(),
        }
    }

    /// Resolves a file, a directory or a glob pattern to its regular files, and sizes them,
    /// by the rules of [`text`]. The list and the sizes are taken once, here.
    ///
    /// Cost: one `stat` per file, and a directory listing or a glob walk.
    ///
    /// # Errors
    /// [`SourceError::NotFound`], [`SourceError::NoMatch`], [`SourceError::BadPattern`] or
    /// [`SourceError::Io`], as for [`text`].
    pub fn resolve(path: &Path) -> Result<Self, SourceError> {
        let paths = match path.to_str() {
            Some(pattern) if pattern.contains(['*', '?', '[']) => Self::glob(pattern)?,
            _ => Self::file_or_dir(path)?,
        };
        let mut files = Vec::with_capacity(paths.len());
        let mut total = 0;
        for (path, meta) in paths {
            let len = meta.len();
            files.push(InputFile {
                path,
                len,
                stamp: Stamp::of(&meta),
                offset: total,
            });
            total += len;
        }
        Ok(InputFiles {
            files,
            total,
            listing: OnceLock::new(),
            skipped_binary: Vec::new(),
        })
    }

    /// Leaves out the files that are not text: those with a NUL byte in their first
    /// [`BINARY_PROBE`] bytes (an image, an archive, a compiled file), as `grep` and `git`
    /// tell binary files from text. They are listed in
    /// [`skipped_binary`](Self::skipped_binary), and logged once as a warning.
    ///
    /// Cost: one read of at most [`BINARY_PROBE`] bytes per file.
    ///
    /// # Errors
    /// [`SourceError::Io`] when a file cannot be read.
    pub fn skip_binary(mut self) -> Result<Self, SourceError> {
        let mut kept = Vec::with_capacity(self.files.len());
        let mut total = 0;
        for file in std::mem::take(&mut self.files) {
            if starts_binary(&file.path)? {
                self.skipped_binary.push(file.path);
                continue;
            }
            let len = file.len;
            kept.push(InputFile {
                offset: total,
                ..file
            });
            total += len;
        }
        if !self.skipped_binary.is_empty() {
            let shown: Vec<String> = self
                .skipped_binary
                .iter()
                .take(5)
                .map(|p| p.display().to_string())
                .collect();
            let more = self.skipped_binary.len().saturating_sub(shown.len());
            tracing::warn!(
                "skipping {} binary file(s) (a NUL byte in the first {} bytes): {}{}",
                self.skipped_binary.len(),
                BINARY_PROBE,
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
        }
        self.files = kept;
        self.total = total;
        Ok(self)
    }

    /// The files [`skip_binary`](Self::skip_binary) left out.
    pub fn skipped_binary(&self) -> &[PathBuf] {
        &self.skipped_binary
    }

    /// The identity of every file, encoded, as a saved position carries it. Computed once
    /// (a checksum of each file's ends), on first use.
    pub(crate) fn listing(&self) -> &[u8] {
        self.listing.get_or_init(|| {
            let identities: Vec<_> = self.files.iter().map(identity::identify).collect();
            identity::encode_listing(&identities)
        })
    }

    /// A reader's position `at`, with the listing it belongs to.
    pub(crate) fn wrap_position(&self, at: &[u8]) -> Vec<u8> {
        identity::wrap(self.listing(), at)
    }

    /// Checks a position from [`wrap_position`](Self::wrap_position), maybe made by an
    /// earlier run, against these files: returns the reader's own position and how many of
    /// these files the saved listing covers (the rest were appended since).
    ///
    /// # Errors
    /// [`SourceError::InputChanged`] naming a file that is gone or changed, or added among
    /// the files listed before; [`SourceError::Position`] for a damaged position.
    pub(crate) fn unwrap_position<'a>(
        &self,
        position: &'a [u8],
    ) -> Result<(&'a [u8], usize), SourceError> {
        identity::unwrap(position, &self.files, |i| {
            identity::identify(&self.files[i])
        })
    }

    /// The total size of the files in bytes, as taken by [`resolve`](Self::resolve).
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    fn glob(pattern: &str) -> Result<Vec<(PathBuf, fs::Metadata)>, SourceError> {
        let matches = glob::glob(pattern).map_err(|source| SourceError::BadPattern {
            pattern: pattern.to_owned(),
            source,
        })?;
        let mut files = Vec::new();
        for entry in matches {
            let path = entry.map_err(|e| SourceError::Io {
                path: e.path().to_owned(),
                source: e.into(),
            })?;
            let meta = fs::metadata(&path).map_err(|source| SourceError::Io {
                path: path.clone(),
                source,
            })?;
            if meta.is_file() {
                files.push((path, meta));
            }
        }
        if files.is_empty() {
            return Err(SourceError::NoMatch {
                pattern: pattern.to_owned(),
            });
        }
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    }

    fn file_or_dir(path: &Path) -> Result<Vec<(PathBuf, fs::Metadata)>, SourceError> {
        let io = |source: io::Error, at: &Path| match source.kind() {
            io::ErrorKind::NotFound if at == path => SourceError::NotFound {
                path: path.to_owned(),
            },
            _ => SourceError::Io {
                path: at.to_owned(),
                source,
            },
        };
        let meta = fs::metadata(path).map_err(|e| io(e, path))?;
        if !meta.is_dir() {
            return Ok(vec![(path.to_owned(), meta)]);
        }
        let mut files = Vec::new();
        for entry in fs::read_dir(path).map_err(|e| io(e, path))? {
            let file = entry.map_err(|e| io(e, path))?.path();
            // Follows symbolic links, so a link to a file counts as a file.
            let meta = fs::metadata(&file).map_err(|e| io(e, &file))?;
            if meta.is_file() {
                files.push((file, meta));
            }
        }
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    }

    /// The byte ranges of instance `index` of `count`: its share of the concatenated files,
    /// cut at file boundaries.
    fn split(&self, index: usize, count: usize) -> Vec<Segment> {
        self.split_files(0..self.files.len(), index, count)
    }

    /// As [`split`](Self::split), for a run that resumes with `listed` files as a saved
    /// position's listing had them and the rest appended since: the saved files are shared
    /// out as they were, then the appended ones as a listing of their own.
    fn split_after_restore(&self, listed: usize, index: usize, count: usize) -> Vec<Segment> {
        let mut segments = self.split_files(0..listed, index, count);
        segments.extend(self.split_files(listed..self.files.len(), index, count));
        segments
    }

    /// Instance `index`'s share of the concatenation of `files`.
    fn split_files(&self, files: Range<usize>, index: usize, count: usize) -> Vec<Segment> {
        let Some(first) = self.files.get(files.start) else {
            return Vec::new();
        };
        let base = first.offset;
        let total: u64 = self.files[files.clone()].iter().map(|f| f.len).sum();
        let count = count.max(1) as u128;
        let bound = |i: u128| base + (u128::from(total) * i / count) as u64;
        let (lo, hi) = (bound(index as u128), bound(index as u128 + 1));
        self.files[files.clone()]
            .iter()
            .zip(files)
            .filter_map(|(f, file)| {
                let (start, end) = (lo.max(f.offset), hi.min(f.offset + f.len));
                (start < end).then(|| Segment {
                    file,
                    start: start - f.offset,
                    end: end - f.offset,
                })
            })
            .collect()
    }
}

/// The part of one file an instance reads: the lines that start in `[start, end)`.
#[derive(Debug, Clone, Copy)]
struct Segment {
    file: usize,
    start: u64,
    end: u64,
}

/// One line handed out by a [`LineReader`].
pub struct Line<'a> {
    /// The line without its `\n` or `\r\n`.
    pub bytes: &'a [u8],
    /// The bytes the line took in the file, terminator included.
    pub raw_len: usize,
    /// The file it comes from.
    pub path: &'a Path,
    /// Its 1-based line number in the file; 0 unless the reader is numbered.
    pub number: u64,
}

/// The segment being read.
struct OpenSegment {
    file: usize,
    reader: BufReader<Take<File>>,
    /// The file offset the reader is at: the start of the next line once `skip_partial` is done.
    pos: u64,
    end: u64,
    /// Bytes still to scan for newlines before the range (numbered readers only).
    prefix_left: u64,
    /// Whether the range starts after byte 0, so the line running into it belongs to the
    /// previous instance and must be skipped.
    skip_partial: bool,
    /// The number of the line at `pos`.
    line_no: u64,
}

/// Reads the lines that start in one instance's byte ranges, in bounded steps. The text and
/// JSON Lines sources both read through it, and so can sources in other crates: wrap it in a
/// [`SourceReader`], [`open`](Self::open) it in `SourceReader::open` and call
/// [`read`](Self::read) from `SourceReader::read`.
///
/// Cost per line: one `memchr` scan and one copy into a reused buffer; no allocation. File
/// reads of up to 256 KiB, which may block: a reader built on it is non-cooperative.
pub struct LineReader {
    files: Arc<InputFiles>,
    numbered: bool,
    /// This reader's share, from `open`: instance `index` of `count`.
    share: (usize, usize),
    segments: Vec<Segment>,
    next_segment: usize,
    current: Option<OpenSegment>,
    buf: Vec<u8>,
}

impl LineReader {
    /// A reader over `files`. A `numbered` reader gives each line its number in its file,
    /// which costs a scan of the bytes before the instance's range when it starts mid-file.
    pub fn new(files: Arc<InputFiles>, numbered: bool) -> Self {
        LineReader {
            files,
            numbered,
            share: (0, 1),
            segments: Vec::new(),
            next_segment: 0,
            current: None,
            buf: Vec::new(),
        }
    }

    /// Takes the share of instance `index` of `count`: the lines that start in its contiguous
    /// share of the bytes. `open(0, 1)` reads every line of every file, in file order.
    pub fn open(&mut self, index: usize, count: usize) {
        self.share = (index, count);
        self.segments = self.files.split(index, count);
        self.next_segment = 0;
        self.current = None;
    }

    /// Where the reader is: after the last line passed to `read`'s callback (see
    /// [`SourceReader::position`]). A file index, a byte offset in that file and the number
    /// of the next line, with the identity of every input file (see
    /// `sources/identity.rs`): about 70 bytes per file.
    pub fn position(&self) -> Vec<u8> {
        let at = match &self.current {
            // Lines of the open segment were passed: resume at the next one's first byte.
            Some(seg) if seg.prefix_left == 0 && !seg.skip_partial => LinePosition::In {
                segment: self.next_segment - 1,
                file: seg.file,
                offset: seg.pos,
                line: seg.line_no,
            },
            // Still looking for the segment's first line: start it again.
            Some(_) => LinePosition::Next {
                segment: self.next_segment - 1,
            },
            None => LinePosition::Next {
                segment: self.next_segment,
            },
        };
        self.files.wrap_position(&super::encode_position(&at))
    }

    /// Moves the reader, opened with the same share, to `position` (from
    /// [`position`](Self::position)). The next line read is the one after the last line
    /// passed before the position was taken, numbered as it was then.
    ///
    /// Cost: one `open` and `seek` of the file; the bytes before the offset are not read.
    ///
    /// Files listed after those of the position's listing were appended since: they are
    /// shared out among the instances after the saved ones.
    ///
    /// # Errors
    /// [`SourceError::InputChanged`] if an input file changed since the position was
    /// taken; [`SourceError::Position`] if the position does not fit this share of the files
    /// (the parallelism changed); [`SourceError::Io`] if the file cannot be opened.
    pub fn seek(&mut self, position: &[u8]) -> Result<(), SourceError> {
        let (at, listed) = self.files.unwrap_position(position)?;
        let (index, count) = self.share;
        self.segments = self.files.split_after_restore(listed, index, count);
        let at: LinePosition =
            super::decode_position(at).map_err(|reason| SourceError::Position { reason })?;
        let misfit = |what: String| SourceError::Position {
            reason: format!("{what}; the input files changed since the snapshot"),
        };
        self.current = None;
        match at {
            LinePosition::Next { segment } => {
                if segment > self.segments.len() {
                    return Err(misfit(format!(
                        "segment {segment} of {}",
                        self.segments.len()
                    )));
                }
                self.next_segment = segment;
            }
            LinePosition::In {
                segment,
                file,
                offset,
                line,
            } => {
                let Some(&seg) = self.segments.get(segment).filter(|s| s.file == file) else {
                    return Err(misfit(format!("no segment {segment} of file {file}")));
                };
                let input = &self.files.files[file];
                if offset < seg.start {
                    return Err(misfit(format!(
                        "offset {offset} of {} is before this share's range",
                        input.path.display()
                    )));
                }
                if offset > input.len {
                    return Err(misfit(format!(
                        "offset {offset} is past the end of {} ({} bytes)",
                        input.path.display(),
                        input.len
                    )));
                }
                self.next_segment = segment + 1;
                if offset < seg.end {
                    self.current = Some(open_at(&self.files, seg, offset, line)?);
                }
            }
        }
        Ok(())
    }

    /// Passes lines to `on_line` until about 64 KiB were read or `on_line` returns false.
    /// Returns true when every line of the share was passed.
    ///
    /// # Errors
    /// [`SourceError::Io`] naming the file if opening or reading it fails.
    pub fn read(&mut self, mut on_line: impl FnMut(Line<'_>) -> bool) -> Result<bool, SourceError> {
        let mut budget = READ_BUDGET;
        let mut scan_budget = SCAN_BUDGET;
        loop {
            let seg = match self.current {
                Some(ref mut seg) => seg,
                None => match self.segments.get(self.next_segment) {
                    None => return Ok(true),
                    Some(&segment) => {
                        self.next_segment += 1;
                        self.current
                            .insert(open_segment(&self.files, segment, self.numbered)?)
                    }
                },
            };
            let path = &self.files.files[seg.file].path;
            let io = |source| SourceError::Io {
                path: path.clone(),
                source,
            };
            if seg.prefix_left > 0 {
                scan_prefix(seg, &mut scan_budget).map_err(io)?;
                if seg.prefix_left > 0 {
                    return Ok(false);
                }
            }
            if seg.skip_partial {
                // The line running into the range belongs to the previous instance.
                seg.skip_partial = false;
                let n = seg.reader.skip_until(b'\n').map_err(io)?;
                seg.pos += n as u64;
                // Lines follow only if it ended in a newline, and then it counts as one.
                seg.line_no += 1;
                budget = budget.saturating_sub(n as u64);
            }
            while seg.pos < seg.end {
                if budget == 0 {
                    return Ok(false);
                }
                self.buf.clear();
                let n = seg.reader.read_until(b'\n', &mut self.buf).map_err(io)?;
                if n == 0 {
                    break; // the file shrank since it was sized
                }
                seg.pos += n as u64;
                budget = budget.saturating_sub(n as u64);
                let number = if self.numbered { seg.line_no } else { 0 };
                let mut bytes = &self.buf[..];
                if let [rest @ .., b'\n'] = bytes {
                    bytes = rest.strip_suffix(b"\r").unwrap_or(rest);
                    seg.line_no += 1;
                }
                if !on_line(Line {
                    bytes,
                    raw_len: n,
                    path,
                    number,
                }) {
                    return Ok(false);
                }
            }
            self.current = None;
        }
    }
}

/// Where a [`LineReader`] is, as saved in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum LinePosition {
    /// Before segment `segment` (`segments.len()`: after the last).
    Next { segment: usize },
    /// In segment `segment`, of file `file`, at `offset`, where line `line` starts.
    In {
        segment: usize,
        file: usize,
        offset: u64,
        line: u64,
    },
}

/// Opens `segment` at `offset`, the start of line number `line`: a resumed read.
fn open_at(
    files: &InputFiles,
    segment: Segment,
    offset: u64,
    line: u64,
) -> Result<OpenSegment, SourceError> {
    let input = &files.files[segment.file];
    let io = |source| SourceError::Io {
        path: input.path.clone(),
        source,
    };
    let mut file = File::open(&input.path).map_err(io)?;
    file.seek(SeekFrom::Start(offset)).map_err(io)?;
    let left = input.len - offset;
    let capacity = usize::try_from(left)
        .unwrap_or(usize::MAX)
        .clamp(1, READ_BUFFER);
    Ok(OpenSegment {
        file: segment.file,
        reader: BufReader::with_capacity(capacity, file.take(left)),
        pos: offset,
        end: segment.end,
        prefix_left: 0,
        skip_partial: false,
        line_no: line,
    })
}

fn open_segment(
    files: &InputFiles,
    segment: Segment,
    numbered: bool,
) -> Result<OpenSegment, SourceError> {
    let input = &files.files[segment.file];
    let io = |source| SourceError::Io {
        path: input.path.clone(),
        source,
    };
    // Start one byte early to see whether a line starts exactly at `start`; a numbered
    // reader starts at 0 and counts the lines on the way.
    let from = if numbered {
        0
    } else {
        segment.start.saturating_sub(1)
    };
    let mut file = File::open(&input.path).map_err(io)?;
    if from > 0 {
        file.seek(SeekFrom::Start(from)).map_err(io)?;
    }
    let left = input.len - from;
    let capacity = usize::try_from(left)
        .unwrap_or(usize::MAX)
        .clamp(1, READ_BUFFER);
    Ok(OpenSegment {
        file: segment.file,
        reader: BufReader::with_capacity(capacity, file.take(left)),
        pos: from,
        end: segment.end,
        prefix_left: segment.start.saturating_sub(1) - from,
        skip_partial: segment.start > 0,
        line_no: 1,
    })
}

/// Counts the newlines before the segment's range, at most `budget` bytes of them.
fn scan_prefix(seg: &mut OpenSegment, budget: &mut u64) -> io::Result<()> {
    while seg.prefix_left > 0 && *budget > 0 {
        let available = seg.reader.fill_buf()?;
        if available.is_empty() {
            seg.prefix_left = 0; // the file shrank since it was sized
            break;
        }
        let n = (available.len() as u64).min(seg.prefix_left).min(*budget) as usize;
        seg.line_no += available[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        seg.reader.consume(n);
        seg.pos += n as u64;
        seg.prefix_left -= n as u64;
        *budget -= n as u64;
    }
    Ok(())
}

/// The counters of a text source over [`InputFiles`] (see the [module docs](self)): `lines`,
/// `bytes`, `invalid_utf8_lines`, and `binary_files_skipped`, which the first instance adds.
struct TextCounters {
    /// Input files left out as binary.
    skipped_binary: u64,
    lines: Counter,
    bytes: Counter,
    invalid_utf8: Counter,
}

impl TextCounters {
    fn new(files: &InputFiles) -> Self {
        TextCounters {
            skipped_binary: files.skipped_binary().len() as u64,
            lines: Counter::default(),
            bytes: Counter::default(),
            invalid_utf8: Counter::default(),
        }
    }

    /// Registers the counters with the instance's metrics.
    fn open(&mut self, ctx: &ProcessorContext) {
        self.lines = ctx.metrics().counter("lines");
        self.bytes = ctx.metrics().counter("bytes");
        self.invalid_utf8 = ctx.metrics().counter("invalid_utf8_lines");
        let skipped = ctx.metrics().counter("binary_files_skipped");
        if ctx.global_index() == 0 {
            skipped.add(self.skipped_binary);
        }
    }

    /// Counts what one read handed out.
    fn add(&self, lines: u64, bytes: u64, invalid_utf8: u64) {
        self.lines.add(lines);
        self.bytes.add(bytes);
        self.invalid_utf8.add(invalid_utf8);
    }
}

/// The reader behind [`text`].
struct TextReader {
    lines: LineReader,
    counters: TextCounters,
}

impl TextReader {
    fn new(files: Arc<InputFiles>) -> Self {
        TextReader {
            counters: TextCounters::new(&files),
            lines: LineReader::new(files, false),
        }
    }
}

impl SourceReader for TextReader {
    type Item = String;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.lines.open(ctx.global_index(), ctx.total_parallelism());
        self.counters.open(ctx);
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, String>) -> Result<bool, BoxError> {
        let (mut lines, mut bytes, mut invalid) = (0, 0, 0);
        let done = self.lines.read(|line| {
            lines += 1;
            bytes += line.raw_len as u64;
            let text = match String::from_utf8_lossy(line.bytes) {
                Cow::Borrowed(text) => text.to_owned(),
                Cow::Owned(text) => {
                    invalid += 1;
                    text
                }
            };
            out.emit(text)
        });
        self.counters.add(lines, bytes, invalid);
        Ok(done?)
    }

    fn is_cooperative(&self) -> bool {
        false
    }

    /// A byte offset in a file: see [`LineReader::position`].
    fn position(&self) -> Option<Vec<u8>> {
        Some(self.lines.position())
    }

    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        Ok(self.lines.seek(position)?)
    }
}

/// How many malformed records an instance logs one by one before it only counts them.
const MALFORMED_WARNINGS: u64 = 20;

/// Counts the malformed records of a source instance in `malformed_records` and logs the
/// first few of them (20) with their file and line with `tracing::warn!`, then a summary at
/// close.
///
/// Cost: an atomic add per malformed record; a log line and a small allocation for each of
/// the first 20.
pub struct MalformedLog {
    counter: Counter,
    job: String,
    vertex: String,
    count: u64,
    /// The file and line of each record logged one by one.
    pub(crate) logged: Vec<(PathBuf, u64)>,
}

impl Default for MalformedLog {
    fn default() -> Self {
        Self::new()
    }
}

impl MalformedLog {
    /// A log that counts nothing until [`open`](Self::open).
    pub fn new() -> Self {
        MalformedLog {
            counter: Counter::default(),
            job: String::new(),
            vertex: String::new(),
            count: 0,
            logged: Vec::new(),
        }
    }

    /// Registers the counter `malformed_records` of the instance `ctx` describes.
    pub fn open(&mut self, ctx: &ProcessorContext) {
        self.counter = ctx.metrics().counter("malformed_records");
        self.job = ctx.job_name().to_owned();
        self.vertex = ctx.vertex().to_owned();
    }

    /// Counts one malformed record at `line` of `path`, and logs it if it is among the first.
    pub fn record(&mut self, path: &Path, line: u64, error: &dyn Display) {
        self.counter.increment();
        self.count += 1;
        if self.count <= MALFORMED_WARNINGS {
            tracing::warn!(job = %self.job, vertex = %self.vertex, "skipped a malformed record at {}:{line}: {error}", path.display());
            self.logged.push((path.to_owned(), line));
        }
    }

    /// The file and line number of each record logged one by one (the first 20 since
    /// [`new`](Self::new)), in the order they were recorded.
    pub fn logged(&self) -> &[(PathBuf, u64)] {
        &self.logged
    }

    /// How many malformed records were recorded since the last [`close`](Self::close).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Logs how many malformed records were not logged one by one.
    pub fn close(&mut self) {
        if self.count > MALFORMED_WARNINGS {
            tracing::warn!(
                job = %self.job,
                vertex = %self.vertex,
                "skipped {} malformed records in all; only the first {MALFORMED_WARNINGS} were logged",
                self.count,
            );
        }
        self.count = 0;
    }
}

/// Drives source readers the way the runtime does, for the tests of every source.
#[cfg(test)]
pub(crate) mod testing {
    use weir_core::ProcessorContext;

    use crate::sources::{Emitter, SourceReader};

    /// Runs instance `index` of `parallelism` to the end; returns its items and its context.
    pub(crate) fn run<R: SourceReader>(
        mut reader: R,
        index: usize,
        parallelism: usize,
    ) -> (Vec<R::Item>, ProcessorContext) {
        let ctx = ProcessorContext::new("test", index, parallelism, 0);
        reader.open(&ctx).unwrap();
        let mut out = Vec::new();
        while !reader.read(&mut Emitter::unbounded(&mut out)).unwrap() {}
        reader.close().unwrap();
        (out, ctx)
    }

    /// Runs every instance of `parallelism`; returns their items in instance order.
    pub(crate) fn run_all<R: SourceReader>(
        make: impl Fn() -> R,
        parallelism: usize,
    ) -> Vec<R::Item> {
        (0..parallelism)
            .flat_map(|i| run(make(), i, parallelism).0)
            .collect()
    }

    /// Reads instance `index` of `parallelism` one item per `read`, taking the position after
    /// each; then, for every position, a fresh reader seeks to it and must read exactly the
    /// items after it. Returns every item, and the readers that resumed, for further checks.
    pub(crate) fn check_resume<R>(
        make: impl Fn() -> R,
        index: usize,
        parallelism: usize,
    ) -> (Vec<R::Item>, Vec<R>)
    where
        R: SourceReader,
        R::Item: PartialEq + std::fmt::Debug,
    {
        let ctx = ProcessorContext::new("test", index, parallelism, 0);
        let mut reader = make();
        reader.open(&ctx).unwrap();
        let mut items = Vec::new();
        let mut positions = vec![(0, reader.position().expect("the reader can replay"))];
        loop {
            let mut batch = Vec::new();
            let done = reader.read(&mut Emitter::new(&mut batch, 1)).unwrap();
            assert!(batch.len() <= 1);
            items.append(&mut batch);
            positions.push((items.len(), reader.position().unwrap()));
            if done {
                break;
            }
        }
        reader.close().unwrap();
        let mut resumed = Vec::new();
        for (k, position) in positions {
            let mut reader = make();
            reader
                .open(&ProcessorContext::new("test", index, parallelism, 0))
                .unwrap();
            reader.seek(&position).unwrap();
            let mut rest = Vec::new();
            while !reader.read(&mut Emitter::unbounded(&mut rest)).unwrap() {}
            assert_eq!(rest, items[k..], "resumed after {k} items");
            resumed.push(reader);
        }
        (items, resumed)
    }

    /// Runs a single instance whose `emit` refuses (returns false) every `k`-th item of a
    /// call, and checks that `read` stops right there.
    pub(crate) fn run_throttled<R: SourceReader>(mut reader: R, k: usize) -> Vec<R::Item> {
        let ctx = ProcessorContext::new("test", 0, 1, 0);
        reader.open(&ctx).unwrap();
        let mut out = Vec::new();
        loop {
            let mut batch = Vec::new();
            let done = reader.read(&mut Emitter::new(&mut batch, k)).unwrap();
            assert!(batch.len() <= k, "read went on after emit returned false");
            out.append(&mut batch);
            if done {
                break;
            }
        }
        reader.close().unwrap();
        out
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use proptest::prelude::*;

    use super::testing::{check_resume, run, run_all, run_throttled};
    use super::*;

    fn text_reader(path: &Path) -> impl Fn() -> TextReader {
        let files = Arc::new(InputFiles::resolve(path).unwrap());
        move || TextReader::new(Arc::clone(&files))
    }

    /// The lines of `content` by the rule the source promises.
    fn expected_lines(content: &[u8]) -> Vec<String> {
        let mut lines: Vec<&[u8]> = content.split(|&b| b == b'\n').collect();
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop(); // nothing after the last newline, or an empty file
        }
        let ended = lines.len().saturating_sub(1);
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                // A `\r` goes only before a `\n`: the last line keeps it if nothing follows.
                let l = if i < ended || content.ends_with(b"\n") {
                    l.strip_suffix(b"\r").unwrap_or(l)
                } else {
                    l
                };
                String::from_utf8_lossy(l).into_owned()
            })
            .collect()
    }

    fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, content).unwrap();
        path
    }

    #[test]
    fn reads_a_file_with_crlf_and_no_final_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "a.txt", b"one\r\ntwo\n\nthree\r");
        let (lines, ctx) = run(text_reader(&path)(), 0, 1);
        assert_eq!(lines, ["one", "two", "", "three\r"]);
        let metrics = ctx.metrics().snapshot();
        assert_eq!(metrics.counter("lines"), 4);
        assert_eq!(metrics.counter("bytes"), 16);
        assert_eq!(metrics.counter("invalid_utf8_lines"), 0);
    }

    #[test]
    fn empty_file_and_empty_directory_yield_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(run_all(text_reader(dir.path()), 3).is_empty());
        let path = write(dir.path(), "empty.txt", b"");
        assert!(run_all(text_reader(&path), 2).is_empty());
    }

    #[test]
    fn binary_files_are_skipped_and_counted_at_every_size_of_their_text() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", b"alpha beta\ngamma\n");
        // A NUL at the very start, at the probe's last byte, and one just past it (text).
        write(dir.path(), "b.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
        let mut late = vec![b'x'; BINARY_PROBE - 1];
        late.push(0);
        write(dir.path(), "c.bin", &late);
        let mut past = vec![b'y'; BINARY_PROBE];
        past.extend_from_slice(b"\0tail\n");
        write(dir.path(), "d.log", &past);
        write(dir.path(), "e.txt", b"");
        let files = InputFiles::resolve(dir.path())
            .unwrap()
            .skip_binary()
            .unwrap();
        let skipped: Vec<_> = files
            .skipped_binary()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(skipped, ["b.png", "c.bin"]);
        assert_eq!(files.total, 17 + past.len() as u64);
        let files = Arc::new(files);
        for parallelism in [1, 2, 3] {
            let mut lines = Vec::new();
            let mut skipped = 0;
            for i in 0..parallelism {
                let (got, ctx) = run(TextReader::new(Arc::clone(&files)), i, parallelism);
                lines.extend(got);
                skipped += ctx.metrics().snapshot().counter("binary_files_skipped");
            }
            lines.sort();
            assert_eq!(lines.len(), 3, "parallelism {parallelism}: {lines:?}");
            assert_eq!(&lines[..2], ["alpha beta", "gamma"]);
            assert_eq!(skipped, 2, "counted once, by the first instance");
        }
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "a.txt", b"ok\nbad \xff\xfe\nfine \xc3\xa9\n");
        let (lines, ctx) = run(text_reader(&path)(), 0, 1);
        assert_eq!(lines, ["ok", "bad \u{fffd}\u{fffd}", "fine é"]);
        assert_eq!(ctx.metrics().snapshot().counter("invalid_utf8_lines"), 1);
    }

    #[test]
    fn directory_reads_regular_files_sorted_by_name() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b.txt", b"b1\nb2\n");
        write(dir.path(), "a.txt", b"a1\n");
        fs::create_dir(dir.path().join("sub")).unwrap();
        write(&dir.path().join("sub"), "c.txt", b"c1\n");
        assert_eq!(run_all(text_reader(dir.path()), 1), ["a1", "b1", "b2"]);
        assert_eq!(run_all(text_reader(dir.path()), 4), ["a1", "b1", "b2"]);
    }

    #[test]
    fn glob_reads_matching_files_sorted() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "x2.log", b"2\n");
        write(dir.path(), "x1.log", b"1\n");
        write(dir.path(), "y.txt", b"no\n");
        let pattern = dir.path().join("x?.log");
        assert_eq!(run_all(text_reader(&pattern), 2), ["1", "2"]);
    }

    #[test]
    fn missing_path_and_empty_glob_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.txt");
        match text(&missing) {
            Err(SourceError::NotFound { path }) => assert_eq!(path, missing),
            other => panic!("expected NotFound, got {:?}", other.err()),
        }
        let pattern = dir.path().join("*.csv");
        match text(&pattern) {
            Err(e @ SourceError::NoMatch { .. }) => assert!(e.to_string().contains("*.csv"), "{e}"),
            other => panic!("expected NoMatch, got {:?}", other.err()),
        }
        let bad = dir.path().join("[a");
        assert!(matches!(text(&bad), Err(SourceError::BadPattern { .. })));
    }

    #[test]
    fn backpressure_stops_and_resumes_without_loss() {
        let dir = tempfile::tempdir().unwrap();
        let content: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let path = write(dir.path(), "a.txt", content.as_bytes());
        for k in [1, 2, 7, 1000] {
            assert_eq!(
                run_throttled(text_reader(&path)(), k),
                expected_lines(content.as_bytes())
            );
        }
    }

    #[test]
    fn read_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let content = "x".repeat(99) + "\n";
        let path = write(dir.path(), "a.txt", content.repeat(10_000).as_bytes());
        let mut reader = text_reader(&path)();
        reader
            .open(&ProcessorContext::new("test", 0, 1, 0))
            .unwrap();
        let mut lines = Vec::new();
        assert!(!reader.read(&mut Emitter::unbounded(&mut lines)).unwrap());
        let n = lines.len();
        assert!(n <= READ_BUDGET as usize / 100 + 1, "{n} lines in one call");
    }

    #[test]
    fn numbered_reader_counts_lines_before_its_range() {
        let dir = tempfile::tempdir().unwrap();
        let content: String = (1..=5000).map(|i| format!("{i}\n")).collect();
        let path = write(dir.path(), "a.txt", content.as_bytes());
        let files = Arc::new(InputFiles::resolve(&path).unwrap());
        for count in 1..=4 {
            let mut seen = 0;
            for index in 0..count {
                let mut reader = LineReader::new(Arc::clone(&files), true);
                reader.open(index, count);
                while !reader
                    .read(|line| {
                        assert_eq!(
                            std::str::from_utf8(line.bytes).unwrap(),
                            line.number.to_string()
                        );
                        seen += 1;
                        true
                    })
                    .unwrap()
                {}
            }
            assert_eq!(seen, 5000);
        }
    }

    #[test]
    fn numbered_reader_counts_a_long_prefix_in_bounded_steps() {
        let dir = tempfile::tempdir().unwrap();
        // 10,000 lines of 1,000 bytes: the second half starts well past one scan budget.
        let content: String = (1..=10_000).map(|i| format!("{i:<999}\n")).collect();
        let path = write(dir.path(), "a.txt", content.as_bytes());
        let files = Arc::new(InputFiles::resolve(&path).unwrap());
        let mut reader = LineReader::new(files, true);
        reader.open(1, 2);
        let mut numbers = Vec::new();
        let mut calls = 0;
        while !reader
            .read(|line| {
                let text = std::str::from_utf8(line.bytes).unwrap();
                assert_eq!(text.trim_end(), line.number.to_string());
                numbers.push(line.number);
                true
            })
            .unwrap()
        {
            calls += 1;
        }
        assert_eq!(numbers, (5001..=10_000).collect::<Vec<u64>>());
        assert!(calls > 2, "the prefix scan took {calls} calls");
    }

    #[test]
    fn files_appended_after_a_position_are_shared_out_after_the_saved_ones() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", b"a1\na2\na3\na4\n");
        write(dir.path(), "b.txt", b"b1\nb2\n");
        let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        let read_all = |reader: &mut LineReader| {
            let mut lines = Vec::new();
            while !reader
                .read(|l| {
                    lines.push(String::from_utf8(l.bytes.to_vec()).unwrap());
                    true
                })
                .unwrap()
            {}
            lines
        };
        // Instance 0 of 2 reads its share to the end; instance 1 stops after one line.
        let mut first = LineReader::new(Arc::clone(&files), false);
        first.open(0, 2);
        assert_eq!(read_all(&mut first), ["a1", "a2", "a3"]);
        let done = first.position();
        let mut second = LineReader::new(Arc::clone(&files), false);
        second.open(1, 2);
        let mut second_lines = Vec::new();
        second
            .read(|l| {
                second_lines.push(String::from_utf8(l.bytes.to_vec()).unwrap());
                false
            })
            .unwrap();
        assert_eq!(second_lines, ["a4"]);
        let stopped = second.position();
        write(dir.path(), "c.txt", b"c1\nc2\nc3\nc4\nc5\nc6\n");
        write(dir.path(), "d.txt", b"d1\n");
        let now = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        let mut resumed = Vec::new();
        for (index, position) in [(0, &done), (1, &stopped)] {
            let mut reader = LineReader::new(Arc::clone(&now), false);
            reader.open(index, 2);
            reader.seek(position).unwrap();
            resumed.extend(read_all(&mut reader));
        }
        resumed.sort();
        assert_eq!(
            resumed,
            ["b1", "b2", "c1", "c2", "c3", "c4", "c5", "c6", "d1"],
            "the rest of the saved files, then the appended ones, each line once"
        );
    }

    #[test]
    fn a_seek_resumes_after_the_last_line_handed_out_across_files_and_shares() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", b"one\r\ntwo\n\nthree\r\n");
        write(dir.path(), "b.txt", b"");
        write(dir.path(), "c.txt", b"four\nfive \xff\nsix");
        let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        for parallelism in 1..=3 {
            let mut lines = Vec::new();
            for index in 0..parallelism {
                let (items, _) =
                    check_resume(|| TextReader::new(Arc::clone(&files)), index, parallelism);
                lines.extend(items);
            }
            assert_eq!(
                lines,
                ["one", "two", "", "three", "four", "five \u{fffd}", "six"]
            );
        }
    }

    #[test]
    fn a_numbered_reader_numbers_lines_on_after_a_seek() {
        let dir = tempfile::tempdir().unwrap();
        let content: String = (1..=300).map(|i| format!("{i}\r\n")).collect();
        write(dir.path(), "a.txt", content.as_bytes());
        write(dir.path(), "b.txt", content.as_bytes());
        let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        for (index, parallelism) in [(0, 1), (1, 2), (1, 3)] {
            let mut reader = LineReader::new(Arc::clone(&files), true);
            reader.open(index, parallelism);
            // Stop after 57 lines, then resume in a fresh reader.
            let mut seen = 0;
            while seen < 57
                && !reader
                    .read(|_| {
                        seen += 1;
                        seen < 57
                    })
                    .unwrap()
            {}
            let position = reader.position();
            let mut rest = Vec::new();
            while !reader
                .read(|l| {
                    rest.push(l.number);
                    true
                })
                .unwrap()
            {}
            let mut resumed = LineReader::new(Arc::clone(&files), true);
            resumed.open(index, parallelism);
            resumed.seek(&position).unwrap();
            let mut again = Vec::new();
            while !resumed
                .read(|l| {
                    assert_eq!(std::str::from_utf8(l.bytes).unwrap(), l.number.to_string());
                    again.push(l.number);
                    true
                })
                .unwrap()
            {}
            assert_eq!(again, rest, "instance {index} of {parallelism}");
        }
    }

    #[test]
    fn a_position_that_does_not_fit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "a.txt", b"a\nb\nc\n");
        let files = Arc::new(InputFiles::resolve(&path).unwrap());
        let mut reader = LineReader::new(Arc::clone(&files), false);
        reader.open(0, 1);
        reader.read(|_| false).unwrap();
        let position = reader.position();
        // Another share of the files has no such segment.
        let mut other = LineReader::new(Arc::clone(&files), false);
        other.open(1, 2);
        assert!(matches!(
            other.seek(&position),
            Err(SourceError::Position { .. })
        ));
        assert!(matches!(
            other.seek(b"\xff\xff\xff"),
            Err(SourceError::Position { .. })
        ));
    }

    fn file_content() -> impl Strategy<Value = Vec<u8>> {
        let line = "[aé日 \r]{0,12}";
        (
            prop::collection::vec(line, 0..40),
            prop::bool::ANY,
            prop::bool::ANY,
            prop::option::of(0..200usize),
        )
            .prop_map(|(lines, crlf, trailing, invalid_at)| {
                let mut bytes = lines.join(if crlf { "\r\n" } else { "\n" }).into_bytes();
                if trailing && !lines.is_empty() {
                    bytes.push(b'\n');
                }
                if let Some(at) = invalid_at.filter(|&at| at < bytes.len()) {
                    bytes.insert(at, 0xff);
                }
                bytes
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Every line is read by exactly one instance, in order, with the right number.
        #[test]
        fn instances_read_every_line_exactly_once(
            contents in prop::collection::vec(file_content(), 1..=3),
            parallelism in 1..=4usize,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut expected = Vec::new();
            for (i, content) in contents.iter().enumerate() {
                write(dir.path(), &format!("f{i}.txt"), content);
                expected.extend(expected_lines(content));
            }
            let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
            let mut lines = Vec::new();
            let (mut line_count, mut byte_count) = (0, 0);
            for index in 0..parallelism {
                let (out, ctx) = run(TextReader::new(Arc::clone(&files)), index, parallelism);
                lines.extend(out);
                line_count += ctx.metrics().snapshot().counter("lines");
                byte_count += ctx.metrics().snapshot().counter("bytes");
            }
            prop_assert_eq!(&lines, &expected);
            prop_assert_eq!(line_count, expected.len() as u64);
            prop_assert_eq!(byte_count, contents.iter().map(|c| c.len() as u64).sum::<u64>());

            // A numbered reader numbers each line by its place in its file.
            let mut numbers = Vec::new();
            for index in 0..parallelism {
                let mut reader = LineReader::new(Arc::clone(&files), true);
                reader.open(index, parallelism);
                while !reader.read(|line| { numbers.push(line.number); true }).unwrap() {}
            }
            let expected_numbers: Vec<u64> =
                contents.iter().flat_map(|c| 1..=expected_lines(c).len() as u64).collect();
            prop_assert_eq!(numbers, expected_numbers);
        }
    }
}
