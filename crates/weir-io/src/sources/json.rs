//! JSON Lines files: one JSON value per line, deserialized into `T`.
//!
//! [`lines`] takes the same paths as [`files::text`](super::files::text) (a file, a directory
//! or a glob pattern) and splits the input across its instances the same way, by byte range,
//! through the same line reader. A line that does not parse as a `T` is skipped and counted,
//! never an error.
//!
//! ```no_run
//! use weir::prelude::*;
//! use serde::Deserialize;
//!
//! #[derive(Clone, Debug, Deserialize)]
//! struct Trade { symbol: String, price: f64 }
//!
//! let p = Pipeline::new();
//! p.read_from(sources::json::lines::<Trade>("trades/*.jsonl")?)
//!     .filter(|t: &Trade| t.price > 100.0)
//!     .write_to(sinks::stdout::logger());
//! # Ok::<(), weir::Error>(())
//! ```
//!
//! # Counters
//!
//! An instance registers `malformed_records`: lines that are not JSON or do not match `T`
//! (a missing field, a wrong type). The first 20 per instance are logged with
//! `tracing::warn!`, naming the file and the 1-based line number; a summary follows at close.
//! Blank lines are skipped silently and not counted.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use weir_core::{BoxError, Item, ProcessorContext};

use super::chunked::{ChunkFormat, Parsed, for_each_line};
use super::files::{InputFiles, LineReader, MalformedLog, SourceError};
use super::{BatchSource, Emitter, SourceReader};

/// Creates a source that reads the JSON Lines files at `path`, one `T` per line.
///
/// Paths, splitting and ordering are those of [`files::text`](super::files::text): one
/// instance per worker (parallelism `None`), each reading the lines that start in its share
/// of the bytes, in file order. The file list and sizes are taken once, here.
///
/// A malformed line is counted in `malformed_records` and logged with its file and line
/// number; a blank line is skipped. Neither fails the job.
///
/// Cost: one `serde_json` parse per line, straight from the read buffer; no copy into a
/// `String`. An instance whose range starts mid-file first counts the newlines before it
/// (about 4 MiB per `read` call) so its line numbers are right. Each instance reads and
/// parses ahead on an I/O thread of its own; the chain behind it runs on the workers.
///
/// # Errors
/// As [`files::text`](super::files::text): [`SourceError::NotFound`],
/// [`SourceError::NoMatch`], [`SourceError::BadPattern`] or [`SourceError::Io`]. A read
/// failure while the job runs fails the job with a [`SourceError::Io`] naming the file.
pub fn lines<T: DeserializeOwned + Item>(
    path: impl AsRef<Path>,
) -> Result<BatchSource<T>, SourceError> {
    let path = path.as_ref();
    Ok(BatchSource::new(
        format!("json({})", path.display()),
        None,
        reader_factory::<T>(path)?,
    ))
}

/// Resolves `path` and returns a factory of JSON Lines readers over it.
pub(crate) fn reader_factory<T: DeserializeOwned + Item>(
    path: &Path,
) -> Result<
    impl Fn(&weir_core::ProcessorContext) -> JsonReader<T> + Send + Sync + 'static,
    SourceError,
> {
    let files = Arc::new(InputFiles::resolve(path)?);
    Ok(move |_: &weir_core::ProcessorContext| JsonReader::<T>::new(Arc::clone(&files)))
}

/// The reader behind [`lines`].
pub(crate) struct JsonReader<T> {
    lines: LineReader,
    malformed: MalformedLog,
    _item: PhantomData<fn() -> T>,
}

impl<T> JsonReader<T> {
    fn new(files: Arc<InputFiles>) -> Self {
        JsonReader {
            lines: LineReader::new(files, true),
            malformed: MalformedLog::new(),
            _item: PhantomData,
        }
    }
}

impl<T: DeserializeOwned + Item> SourceReader for JsonReader<T> {
    type Item = T;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.lines.open(ctx.global_index(), ctx.total_parallelism());
        self.malformed.open(ctx);
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, T>) -> Result<bool, BoxError> {
        let malformed = &mut self.malformed;
        Ok(self
            .lines
            .read(|line| match serde_json::from_slice::<T>(line.bytes) {
                Ok(item) => out.emit(item),
                Err(e) => {
                    if !line.bytes.iter().all(u8::is_ascii_whitespace) {
                        malformed.record(line.path, line.number, &e);
                    }
                    true
                }
            })?)
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

    fn close(&mut self) -> Result<(), BoxError> {
        self.malformed.close();
        Ok(())
    }
}

/// JSON Lines for a [`ChunkedReader`](super::chunked::ChunkedReader): one `T` per line by serde_json; a blank line is
/// skipped, any other line that does not parse is malformed.
pub struct JsonLinesFormat<T>(PhantomData<fn() -> T>);

impl<T> Default for JsonLinesFormat<T> {
    fn default() -> Self {
        JsonLinesFormat(PhantomData)
    }
}

impl<T: DeserializeOwned + Item> ChunkFormat for JsonLinesFormat<T> {
    type Item = T;
    type Error = serde_json::Error;
    type Header = ();

    fn parse(&self, chunk: &[u8], _: &(), out: &mut Parsed<T, serde_json::Error>) {
        for_each_line(chunk, |number, line, end| {
            match serde_json::from_slice::<T>(line) {
                Ok(item) => out.push(item, end),
                Err(e) => {
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        out.push_malformed(number, e, end);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::PathBuf;

    use serde::Deserialize;

    use super::*;
    use crate::sources::files::testing::{check_resume, run, run_all, run_throttled};

    #[derive(Debug, Clone, PartialEq, Deserialize)]
    struct Rec {
        name: String,
        n: u64,
    }

    fn rec(name: &str, n: u64) -> Rec {
        Rec {
            name: name.to_owned(),
            n,
        }
    }

    fn reader(path: &Path) -> impl Fn() -> JsonReader<Rec> {
        let files = Arc::new(InputFiles::resolve(path).unwrap());
        move || JsonReader::new(Arc::clone(&files))
    }

    #[test]
    fn parses_lines_and_counts_malformed_ones_with_their_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let content = concat!(
            "{\"name\":\"a\",\"n\":1}\n",
            "not json\n",                       // line 2
            "\n",                               // blank: skipped silently
            "{\"name\":\"b\"}\n",               // line 4: missing field
            "{\"name\":\"c\",\"n\":\"x\"}\r\n", // line 5: wrong type
            "   \n",                            // blank
            "{\"name\":\"d\",\"n\":4}",         // no final newline
        );
        fs::write(&path, content).unwrap();
        let mut r = reader(&path)();
        let ctx = ProcessorContext::new("test", 0, 1, 0);
        r.open(&ctx).unwrap();
        let mut out = Vec::new();
        while !r.read(&mut Emitter::unbounded(&mut out)).unwrap() {}
        r.close().unwrap();
        assert_eq!(out, [rec("a", 1), rec("d", 4)]);
        assert_eq!(ctx.metrics().snapshot().counter("malformed_records"), 3);
        let lines: Vec<u64> = r.malformed.logged.iter().map(|(_, l)| *l).collect();
        assert_eq!(lines, [2, 4, 5]);
        assert!(r.malformed.logged.iter().all(|(p, _)| *p == path));
    }

    /// Files with CRLF, blank and malformed lines, across two files.
    fn resume_files(dir: &Path) {
        let mut content = String::new();
        for i in 1..=40u64 {
            match i % 7 {
                0 => content.push_str("{broken\r\n"),
                3 => content.push('\n'),
                _ => content.push_str(&format!("{{\"name\":\"r{i}\",\"n\":{i}}}\r\n")),
            }
        }
        fs::write(dir.join("a.jsonl"), &content).unwrap();
        fs::write(dir.join("b.jsonl"), "{\"name\":\"b\",\"n\":1}\nbad\n").unwrap();
    }

    /// Every resumed reader logged the malformed lines after its position, with the numbers
    /// a whole read gives.
    fn check_resumed_malformed(resumed: &[&MalformedLog]) {
        let whole: Vec<(PathBuf, u64)> = resumed[0].logged().to_vec();
        let lines: Vec<u64> = whole.iter().map(|(_, l)| *l).collect();
        assert_eq!(lines, [7, 14, 21, 28, 35, 2]);
        for r in resumed {
            assert!(whole.ends_with(r.logged()), "{:?}", r.logged());
        }
        assert!(resumed.last().unwrap().logged().is_empty());
    }

    #[test]
    fn a_seek_resumes_after_the_last_record_and_malformed_lines_keep_their_numbers() {
        let dir = tempfile::tempdir().unwrap();
        resume_files(dir.path());
        let (items, resumed) = check_resume(reader(dir.path()), 0, 1);
        assert_eq!(items.len(), 40 - 5 - 6 + 1);
        check_resumed_malformed(&resumed.iter().map(|r| &r.malformed).collect::<Vec<_>>());
    }

    /// The same through the chunked reader of the stream replay, with chunks that cut
    /// records and files, parsed inline and on threads.
    #[test]
    fn a_chunked_seek_resumes_after_the_last_record_and_malformed_lines_keep_their_numbers() {
        use crate::sources::chunked::{ChunkOptions, ChunkedSource};

        let dir = tempfile::tempdir().unwrap();
        resume_files(dir.path());
        let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        let whole = run(reader(dir.path())(), 0, 1).0;
        for threads in [1, 2, 3] {
            for chunk_bytes in [1, 30, 1 << 20] {
                let options = ChunkOptions {
                    threads,
                    chunk_bytes,
                };
                let make = || {
                    ChunkedSource::new(
                        Arc::new(JsonLinesFormat::<Rec>::default()),
                        Arc::clone(&files),
                        options,
                    )
                };
                let (items, resumed) = check_resume(make, 0, 1);
                assert_eq!(items, whole, "{options:?}");
                check_resumed_malformed(&resumed.iter().map(|r| r.malformed()).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn line_numbers_are_right_in_every_instance() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut content = String::new();
        let mut bad = Vec::new();
        for i in 1..=3000u64 {
            if i % 211 == 0 {
                content.push_str("{broken\n");
                bad.push(i);
            } else {
                content.push_str(&format!("{{\"name\":\"r{i}\",\"n\":{i}}}\n"));
            }
        }
        fs::write(&path, &content).unwrap();
        for parallelism in 1..=4 {
            let mut logged: Vec<(PathBuf, u64)> = Vec::new();
            let mut good = 0;
            let mut malformed = 0;
            for index in 0..parallelism {
                let mut r = reader(&path)();
                let ctx = ProcessorContext::new("test", index, parallelism, 0);
                r.open(&ctx).unwrap();
                let mut batch = Vec::new();
                while !r.read(&mut Emitter::unbounded(&mut batch)).unwrap() {}
                for item in batch.drain(..) {
                    assert_eq!(item.name, format!("r{}", item.n));
                    good += 1;
                }
                r.close().unwrap();
                logged.append(&mut r.malformed.logged);
                malformed += ctx.metrics().snapshot().counter("malformed_records");
            }
            assert_eq!(good + bad.len(), 3000);
            assert_eq!(malformed, bad.len() as u64);
            let lines: Vec<u64> = logged.iter().map(|(_, l)| *l).collect();
            assert_eq!(lines, bad, "parallelism {parallelism}");
        }
    }

    #[test]
    fn warnings_are_capped_but_every_record_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        fs::write(&path, "x\n".repeat(50)).unwrap();
        let mut r = reader(&path)();
        let ctx = ProcessorContext::new("test", 0, 1, 0);
        r.open(&ctx).unwrap();
        while !r.read(&mut Emitter::unbounded(&mut Vec::new())).unwrap() {}
        r.close().unwrap();
        assert_eq!(ctx.metrics().snapshot().counter("malformed_records"), 50);
        assert_eq!(r.malformed.logged.len(), 20);
    }

    #[test]
    fn parallel_instances_and_backpressure_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let expected: Vec<Rec> = (0..5000).map(|i| rec(&format!("r{i}"), i)).collect();
        let content: String = expected
            .iter()
            .map(|r| format!("{{\"name\":\"{}\",\"n\":{}}}\n", r.name, r.n))
            .collect();
        fs::write(&path, content).unwrap();
        for parallelism in 1..=4 {
            assert_eq!(run_all(reader(&path), parallelism), expected);
        }
        for k in [1, 3, 1000] {
            assert_eq!(run_throttled(reader(&path)(), k), expected);
        }
        assert_eq!(run(reader(&path)(), 0, 1).0.len(), 5000);
    }

    /// The stream replay parses in chunks on a pool of threads; its records and malformed
    /// lines are those of the single line-by-line reader.
    #[test]
    fn chunked_parsing_matches_the_line_reader() {
        use crate::sources::chunked::{ChunkOptions, ChunkedSource};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut content = Vec::new();
        for i in 1..=3000u64 {
            match i % 97 {
                0 => content.extend_from_slice(b"{broken\r\n"),
                1 => content.extend_from_slice(b"{\"name\":\"\xff\",\"n\":1}\n"),
                2 => content.extend_from_slice(b"  \r\n"),
                3 => content.extend_from_slice(
                    format!("{{\"name\":\"{}\",\"n\":{i}}}\n", "l".repeat(300)).as_bytes(),
                ),
                _ => content
                    .extend_from_slice(format!("{{\"name\":\"r{i}\",\"n\":{i}}}\n").as_bytes()),
            }
        }
        content.extend_from_slice(b"{\"name\":\"last\",\"n\":0}");
        fs::write(&path, &content).unwrap();
        let single = {
            let mut r = reader(&path)();
            let ctx = ProcessorContext::new("test", 0, 1, 0);
            r.open(&ctx).unwrap();
            let mut out = Vec::new();
            while !r.read(&mut Emitter::unbounded(&mut out)).unwrap() {}
            (
                out,
                r.malformed.logged.clone(),
                ctx.metrics().snapshot().counter("malformed_records"),
            )
        };
        assert_eq!(single.2, 30 + 31);
        let files = Arc::new(InputFiles::resolve(&path).unwrap());
        for threads in [1, 2, 4] {
            let options = ChunkOptions {
                threads,
                chunk_bytes: 256,
            };
            let mut r = ChunkedSource::new(
                Arc::new(JsonLinesFormat::<Rec>::default()),
                Arc::clone(&files),
                options,
            );
            let ctx = ProcessorContext::new("test", 0, 1, 0);
            r.open(&ctx).unwrap();
            let mut out = Vec::new();
            while !r.read(&mut Emitter::new(&mut out, usize::MAX)).unwrap() {}
            let logged = r.malformed().logged().to_vec();
            assert_eq!(out, single.0, "{threads} threads");
            assert_eq!(logged, single.1, "{threads} threads");
            assert_eq!(
                ctx.metrics().snapshot().counter("malformed_records"),
                single.2
            );
        }
    }

    #[test]
    fn missing_path_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            lines::<Rec>(dir.path().join("nope.jsonl")),
            Err(SourceError::NotFound { .. })
        ));
    }
}
