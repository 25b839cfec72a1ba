//! Text files as blocks of whole lines: [`text_blocks`].
//!
//! The lines are those [`text`](super::text) reads, shared out among the instances the same
//! way (each reads the lines that start in its share of the bytes), but handed out many at a
//! time: a [`TextBlock`] holds about [`TEXT_BLOCK_BYTES`] of whole lines of one file, their
//! terminators kept. A stage that works on the text rather than on each line (counting
//! words, scanning for patterns) then costs one item per block instead of one `String` per
//! line.
//!
//! ```no_run
//! use weir::aggregate::KeyCounter;
//! use weir::prelude::*;
//! use weir::sources::files::TextBlock;
//!
//! let p = Pipeline::new();
//! p.read_from(sources::files::text_blocks("books/*.txt")?)
//!     .count_keys(|block: &TextBlock, counts: &mut KeyCounter<String>| {
//!         block.as_str().split_whitespace().for_each(|word| counts.add(word));
//!     })
//!     .map(|(word, count)| format!("{word}\t{count}"))
//!     .write_to(sinks::stdout::lines());
//! # Ok::<(), weir::Error>(())
//! ```

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom, Take};
use std::path::Path;
use std::sync::Arc;

use weir_core::{BoxError, ProcessorContext};

use super::{
    BatchSource, Emitter, InputFiles, LineReader, OpenSegment, SCAN_BUDGET, SourceError,
    SourceReader, TextCounters, open_segment, scan_prefix,
};

/// About how many bytes of lines a [`TextBlock`] of [`text_blocks`] holds: a block ends at
/// the end of the first line that reaches this size, or at the end of its file or of its
/// instance's share.
///
/// Large enough that the cost of an item (a queue hand-off, a call down the chain) is nothing
/// next to the work on its text; small enough that the blocks a source reads ahead (at most
/// 16 per instance, see `weir_exec::links::read_ahead`) stay a few MiB.
pub const TEXT_BLOCK_BYTES: usize = 256 * 1024;

/// Whole lines of one text file, as [`text_blocks`] hands them out: the lines with their
/// terminators (`\n` or `\r\n`; the last line of a file may have none), decoded as UTF-8, a
/// line that is not valid UTF-8 decoded lossily (U+FFFD), as [`text`](super::text) decodes
/// it.
///
/// A newline is just another character of the text: a tokenizer that treats it as a
/// separator can run over the whole block at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextBlock {
    text: String,
    lines: u64,
}

impl TextBlock {
    /// A block of the lines in `text`, which holds whole lines with their terminators.
    pub fn new(text: String) -> Self {
        let newlines = count_newlines(text.as_bytes());
        let lines = newlines + u64::from(!text.is_empty() && !text.ends_with('\n'));
        TextBlock { text, lines }
    }

    /// The text of the lines, terminators included.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// How many lines the block holds.
    pub fn line_count(&self) -> u64 {
        self.lines
    }

    /// The lines, each without its `\n` or `\r\n`: exactly the items [`text`](super::text)
    /// gives for them (a last line without `\n` keeps a final `\r`).
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.text
            .split_inclusive('\n')
            .map(|line| match line.strip_suffix('\n') {
                Some(line) => line.strip_suffix('\r').unwrap_or(line),
                None => line,
            })
    }

    /// The text, given up.
    pub fn into_string(self) -> String {
        self.text
    }

    /// Decodes `bytes`, `lines` whole lines: without a copy when they are valid UTF-8;
    /// otherwise line by line, each invalid line lossily. Returns the block and how many
    /// lines were invalid.
    fn decode(bytes: Vec<u8>, lines: u64) -> (Self, u64) {
        match String::from_utf8(bytes) {
            Ok(text) => (TextBlock { text, lines }, 0),
            Err(error) => {
                let bytes = error.into_bytes();
                let mut text = String::with_capacity(bytes.len() + 64);
                let mut invalid = 0;
                for line in bytes.split_inclusive(|&b| b == b'\n') {
                    match String::from_utf8_lossy(line) {
                        Cow::Borrowed(line) => text.push_str(line),
                        Cow::Owned(line) => {
                            invalid += 1;
                            text.push_str(&line);
                        }
                    }
                }
                (TextBlock { text, lines }, invalid)
            }
        }
    }
}

impl AsRef<str> for TextBlock {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

/// Newlines in `bytes`, counted with `memchr`'s vector count (AVX2 where the CPU has it):
/// several times faster than a byte loop, which the compiler widens to 64-bit sums.
fn count_newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// Creates a source that reads the text files at `path` as [`TextBlock`]s of whole lines.
///
/// The files, the lines, the share of each instance, binary files skipped, invalid UTF-8
/// decoded lossily and counted, the counters (`lines`, `bytes`, `invalid_utf8_lines`,
/// `binary_files_skipped`) and the positions a snapshot saves are those of
/// [`text`](super::text); only the items differ: each is a block of about
/// [`TEXT_BLOCK_BYTES`] of whole lines of one file, in file order within an instance.
///
/// Cost per block: its bytes read from the file straight into the block's buffer, one pass
/// to count its newlines and one to validate its UTF-8; no copy when it is valid. Each instance reads ahead on an I/O thread
/// of its own.
///
/// # Errors
/// As [`text`](super::text).
pub fn text_blocks(path: impl AsRef<Path>) -> Result<BatchSource<TextBlock>, SourceError> {
    let path = path.as_ref();
    Ok(block_source(
        format!("text-blocks({})", path.display()),
        InputFiles::resolve(path)?.skip_binary()?,
        TEXT_BLOCK_BYTES,
    ))
}

/// A [`text_blocks`] source over no files, labelled `text-blocks(label)`: it plans exactly
/// like [`text_blocks`] and reads nothing. For showing a job's plan before its input exists.
pub fn text_blocks_placeholder(label: &str) -> BatchSource<TextBlock> {
    block_source(
        format!("text-blocks({label})"),
        InputFiles::empty(),
        TEXT_BLOCK_BYTES,
    )
}

/// A block source over already resolved files, named `name`, with blocks of about
/// `block_bytes`.
fn block_source(name: String, files: InputFiles, block_bytes: usize) -> BatchSource<TextBlock> {
    let total = files.total_bytes();
    let files = Arc::new(files);
    BatchSource::new(name, None, move |_| {
        TextBlockReader::new(Arc::clone(&files), block_bytes)
    })
    .with_size_hint(total)
}

/// What [`LineReader::read_block`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRead {
    /// Lines appended to the block: 0 when the call only scanned ahead, or the share ended.
    pub lines: u64,
    /// Whether every line of the share was passed.
    pub done: bool,
}

/// Bytes reserved in a block beyond its target size, for the end of its last line: a line
/// that ends within them costs no reallocation of the block.
const LINE_SLACK: usize = 4096;

impl LineReader {
    /// Appends the next lines of the share to `block`: whole lines, with their terminators,
    /// from one file, about `target` bytes of them (a block ends with the line that reaches
    /// `target`, or with the file's or the share's last line). The position advances past
    /// them, as [`read`](Self::read) passing them one by one would.
    ///
    /// A numbered reader starting mid-file counts the lines before its range first, in
    /// bounded steps: a call may then append nothing and return `done: false`.
    ///
    /// Cost: the bytes are read from the file straight into `block` (but for what the reader
    /// had buffered, copied from its buffer), plus one pass over them to count the newlines;
    /// the end of the last line is read in small pieces, and what they hold past it is given
    /// back with one seek. `block` grows once, to `target` and a little more, unless its
    /// last line is long.
    ///
    /// # Errors
    /// [`SourceError::Io`] naming the file if opening or reading it fails.
    pub fn read_block(
        &mut self,
        target: usize,
        block: &mut Vec<u8>,
    ) -> Result<BlockRead, SourceError> {
        let mut scan_budget = SCAN_BUDGET;
        loop {
            let seg = match self.current {
                Some(ref mut seg) => seg,
                None => match self.segments.get(self.next_segment) {
                    None => {
                        return Ok(BlockRead {
                            lines: 0,
                            done: true,
                        });
                    }
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
                    return Ok(BlockRead {
                        lines: 0,
                        done: false,
                    });
                }
            }
            if seg.skip_partial {
                // The line running into the range belongs to the previous instance.
                seg.skip_partial = false;
                let n = seg.reader.skip_until(b'\n').map_err(io)?;
                seg.pos += n as u64;
                seg.line_no += 1;
            }
            let start = block.len();
            if seg.pos < seg.end {
                fill_block(seg, target, block).map_err(io)?;
            }
            let appended = &block[start..];
            if !appended.is_empty() {
                let newlines = count_newlines(appended);
                seg.line_no += newlines;
                let lines = newlines + u64::from(!appended.ends_with(b"\n"));
                return Ok(BlockRead { lines, done: false });
            }
            self.current = None;
        }
    }
}

/// Appends to `block` the whole lines of `seg` from its position on that start before its
/// end, about `target` bytes of them, and moves its position past them.
fn fill_block(seg: &mut OpenSegment, target: usize, block: &mut Vec<u8>) -> io::Result<()> {
    // Lines starting at or after the range's end are the next instance's: take no byte past
    // it, but for the end of the line that runs over it.
    let want = (target.max(1) as u64).min(seg.end - seg.pos) as usize;
    block.reserve(want + LINE_SLACK);
    let mut taken = 0;
    while taken < want {
        let buffered = seg.reader.buffer();
        let n = if buffered.is_empty() {
            // Past the reader's buffer, straight from the file into the block.
            let left = (want - taken) as u64;
            Read::take(seg.reader.get_mut(), left).read_to_end(block)?
        } else {
            let n = buffered.len().min(want - taken);
            block.extend_from_slice(&buffered[..n]);
            seg.reader.consume(n);
            n
        };
        if n == 0 {
            break; // the file shrank since it was sized
        }
        taken += n;
    }
    seg.pos += taken as u64;
    if taken > 0 && block.last() != Some(&b'\n') {
        // The last line goes on past `want`: read it to its end.
        let n = if seg.reader.buffer().is_empty() {
            finish_line(seg.reader.get_mut(), block)?
        } else {
            seg.reader.read_until(b'\n', block)? as u64
        };
        seg.pos += n;
    }
    Ok(())
}

/// Appends the rest of the line `block` ends in, read straight from `input` in growing
/// pieces; what a piece holds past the line's newline is given back (the file is seeked back
/// over it), so that no byte goes through a second buffer. Returns the bytes appended.
///
/// Cost: a `read` per piece (4 KiB, doubling) and one `lseek`.
fn finish_line(input: &mut Take<File>, block: &mut Vec<u8>) -> io::Result<u64> {
    let mut piece = 4096u64;
    let mut appended = 0;
    loop {
        let start = block.len();
        let n = Read::take(&mut *input, piece).read_to_end(block)? as u64;
        if n == 0 {
            return Ok(appended); // the file ends without a newline
        }
        if let Some(newline) = memchr::memchr(b'\n', &block[start..]) {
            let line_end = start + newline + 1;
            let past = (block.len() - line_end) as u64;
            block.truncate(line_end);
            if past > 0 {
                let back = i64::try_from(past).expect("a piece is small");
                input.get_mut().seek(SeekFrom::Current(-back))?;
                input.set_limit(input.limit() + past);
            }
            return Ok(appended + n - past);
        }
        appended += n;
        piece = (piece * 2).min(1 << 20);
    }
}

/// The reader behind [`text_blocks`].
struct TextBlockReader {
    lines: LineReader,
    block_bytes: usize,
    counters: TextCounters,
}

impl TextBlockReader {
    fn new(files: Arc<InputFiles>, block_bytes: usize) -> Self {
        TextBlockReader {
            counters: TextCounters::new(&files),
            lines: LineReader::new(files, false),
            block_bytes,
        }
    }
}

impl SourceReader for TextBlockReader {
    type Item = TextBlock;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.lines.open(ctx.global_index(), ctx.total_parallelism());
        self.counters.open(ctx);
        Ok(())
    }

    /// Hands out one block, the block's buffer moving into the item.
    fn read(&mut self, out: &mut Emitter<'_, TextBlock>) -> Result<bool, BoxError> {
        let mut bytes = Vec::new();
        let read = self.lines.read_block(self.block_bytes, &mut bytes)?;
        if read.lines > 0 {
            let byte_count = bytes.len() as u64;
            let (block, invalid) = TextBlock::decode(bytes, read.lines);
            self.counters.add(read.lines, byte_count, invalid);
            out.emit(block);
        }
        Ok(read.done)
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

#[cfg(test)]
mod tests;
