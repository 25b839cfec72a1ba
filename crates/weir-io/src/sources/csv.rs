//! CSV files with a header row, deserialized into `T` by column name.
//!
//! [`records`] takes the same paths as [`files::text`](super::files::text) (a file, a
//! directory or a glob pattern). A CSV record may span lines (a quoted field with a newline),
//! so files are not split by byte range between instances: instance `i` of `n` reads files
//! `i`, `i + n`, ... Within an instance, each file is cut into chunks at record ends
//! (newlines outside quoted fields) that a pool of threads parses
//! ([`chunked`](super::chunked)); the rows come back in file order, with the line numbers a
//! single reader gives. A row that does not fit `T` is skipped and counted, never an error.
//!
//! ```no_run
//! use weir::prelude::*;
//! use serde::Deserialize;
//!
//! #[derive(Clone, Debug, Deserialize)]
//! struct Person { name: String, age: u32 }
//!
//! let p = Pipeline::new();
//! p.read_from(sources::csv::records::<Person>("people.csv")?)
//!     .filter(|p: &Person| p.age >= 18)
//!     .write_to(sinks::stdout::logger());
//! # Ok::<(), weir::Error>(())
//! ```
//!
//! # Counters
//!
//! An instance registers `malformed_records`: rows with the wrong number of fields or a
//! value that does not deserialize into its field. The first 20 per instance are logged with
//! `tracing::warn!`, naming the file and the 1-based line number; a summary follows at close.
//! Blank lines are skipped silently and not counted.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use csv::ByteRecord;
use serde::de::DeserializeOwned;
use weir_core::Item;

use super::BatchSource;
use super::chunked::{ChunkFormat, ChunkOptions, ChunkedSource, Parsed, RecordEnd};
use super::files::{InputFiles, SourceError};

/// Creates a source that reads the CSV files at `path`, one `T` per row.
///
/// Every file starts with a header row; the columns are matched to `T`'s fields by name
/// (serde's `Deserialize`), so their order does not matter. Paths resolve as in
/// [`files::text`](super::files::text), once, here. The source runs one instance per worker
/// (parallelism `None`) and deals out whole files: instance `i` of `n` reads files `i`,
/// `i + n`, ..., so a single file is read by one instance. Rows come in file order.
///
/// A malformed row is counted in `malformed_records` and logged with its file and line
/// number; it does not fail the job.
///
/// Cost: each file is read in 1 MiB chunks, cut by a scan for the last newline outside
/// quotes, and parsed on a pool of threads (one per core): a row is parsed into a reused
/// record buffer and deserialized from it, so only `T`'s own fields allocate. The rows are
/// handed out in file order, read ahead on an I/O thread per instance.
///
/// # Errors
/// As [`files::text`](super::files::text): [`SourceError::NotFound`],
/// [`SourceError::NoMatch`], [`SourceError::BadPattern`] or [`SourceError::Io`]. While the
/// job runs, a file that cannot be opened fails it with [`SourceError::Io`], and a read
/// failure or an unreadable header row with [`SourceError::Csv`], both naming the file.
pub fn records<T: DeserializeOwned + Item>(
    path: impl AsRef<Path>,
) -> Result<BatchSource<T>, SourceError> {
    records_with(path, ChunkOptions::default())
}

/// [`records`], with each file cut and parsed as `options` say: `threads: 1` parses on the
/// instance's reading thread alone.
///
/// # Errors
/// As [`records`].
pub fn records_with<T: DeserializeOwned + Item>(
    path: impl AsRef<Path>,
    options: ChunkOptions,
) -> Result<BatchSource<T>, SourceError> {
    let path = path.as_ref();
    let files = Arc::new(InputFiles::resolve(path)?);
    let format = Arc::new(CsvFormat::<T>::default());
    Ok(BatchSource::new(
        format!("csv({})", path.display()),
        None,
        move |_| ChunkedSource::new(Arc::clone(&format), Arc::clone(&files), options),
    ))
}

/// What is wrong with a malformed CSV row.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    /// The row has another number of fields than the header row.
    #[error("the row has {found} fields, but the header row has {expected}")]
    FieldCount {
        /// Fields in the header row.
        expected: usize,
        /// Fields in this row.
        found: usize,
    },
    /// The row cannot be read or does not deserialize into its type.
    #[error("{0}")]
    Csv(#[from] csv::Error),
}

/// CSV with a header row, for a [`ChunkedReader`](super::chunked::ChunkedReader): each
/// file's first record is its header, and each later record deserializes into a `T` by
/// column name. Records end at a newline outside quotes, so a chunk is never cut inside a
/// quoted field.
pub struct CsvFormat<T>(PhantomData<fn() -> T>);

impl<T> Default for CsvFormat<T> {
    fn default() -> Self {
        CsvFormat(PhantomData)
    }
}

impl<T: DeserializeOwned + Item> ChunkFormat for CsvFormat<T> {
    type Item = T;
    type Error = RowError;
    type Header = ByteRecord;

    fn last_record_end(&self, bytes: &[u8]) -> Option<usize> {
        last_record_end(bytes)
    }

    /// No: a quoted field holds newlines, so only a scan from a record's start finds where
    /// records end.
    fn lines_are_records(&self) -> bool {
        false
    }

    fn has_header(&self) -> bool {
        true
    }

    fn read_header(&self, path: &Path, bytes: &[u8]) -> Result<(ByteRecord, usize), SourceError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(bytes);
        let mut header = ByteRecord::new();
        reader
            .read_byte_record(&mut header)
            .map_err(|source| SourceError::Csv {
                path: path.to_owned(),
                source,
            })?;
        Ok((header, record_end(bytes, reader.position().byte() as usize)))
    }

    fn parse(&self, chunk: &[u8], header: &ByteRecord, out: &mut Parsed<T, RowError>) {
        // Flexible, so that a row of the wrong length is reported here, against the header
        // row, rather than against the chunk's first row.
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(chunk);
        let mut record = ByteRecord::new();
        let mut lines = LineCursor::default();
        loop {
            match reader.read_byte_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {
                    let start = record.position().map_or(0, csv::Position::byte) as usize;
                    let line = lines.line_at(chunk, start);
                    let end = lines.end_at(chunk, reader.position().byte() as usize);
                    if record.len() != header.len() {
                        let error = RowError::FieldCount {
                            expected: header.len(),
                            found: record.len(),
                        };
                        out.push_malformed(line, error, end);
                        continue;
                    }
                    match record.deserialize::<T>(Some(header)) {
                        Ok(item) => out.push(item, end),
                        Err(e) => out.push_malformed(line, e.into(), end),
                    }
                }
                Err(e) => {
                    let start = e.position().map_or(0, csv::Position::byte) as usize;
                    let line = lines.line_at(chunk, start);
                    let end = lines.end_at(chunk, reader.position().byte() as usize);
                    out.push_malformed(line, e.into(), end);
                }
            }
        }
    }
}

/// Numbers the records of a chunk by the line they start on, counting newlines as the
/// records go by.
///
/// The csv crate's own line number is one short for a record after a `\r\n`: it takes the
/// record's start before the `\n` of the previous terminator. So the line is counted from
/// the record's byte offset, past the line ends (and blank lines, which are skipped) before it.
#[derive(Default)]
struct LineCursor {
    byte: usize,
    line: u64,
}

impl LineCursor {
    /// The 1-based line of the record whose reading started at byte `start` of `chunk`;
    /// `start` does not decrease from one call to the next.
    fn line_at(&mut self, chunk: &[u8], start: usize) -> u64 {
        let mut start = start.min(chunk.len());
        while let Some(b'\r' | b'\n') = chunk.get(start) {
            start += 1;
        }
        self.count_to(chunk, start);
        self.line + 1
    }

    /// Where the record that the csv reader left at byte `at` of `chunk` ends: past its
    /// `\n` (the reader stops after the `\r` of a `\r\n`). Not before the last call's byte.
    fn end_at(&mut self, chunk: &[u8], at: usize) -> RecordEnd {
        self.count_to(chunk, record_end(chunk, at));
        RecordEnd {
            byte: self.byte,
            lines: self.line,
        }
    }

    /// Counts the newlines up to byte `to`.
    fn count_to(&mut self, chunk: &[u8], to: usize) {
        if to > self.byte {
            self.line += memchr::memchr_iter(b'\n', &chunk[self.byte..to]).count() as u64;
            self.byte = to;
        }
    }
}

/// Where the record that a csv reader of `bytes` left at byte `at` ends: past its `\n`
/// (the reader stops after the `\r` of a `\r\n`).
fn record_end(bytes: &[u8], at: usize) -> usize {
    let at = at.min(bytes.len());
    if at > 0 && bytes[at - 1] == b'\r' && bytes.get(at) == Some(&b'\n') {
        at + 1
    } else {
        at
    }
}

/// Where the last record of `bytes` (which starts at a record's start) ends: after the last
/// `\n` outside a quoted field. The states follow the csv crate's reader: a quote opens a
/// quoted field only at the start of a field, and `""` inside one is an escaped quote.
fn last_record_end(bytes: &[u8]) -> Option<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        FieldStart,
        Quoted,
        /// A quote inside a quoted field: its end, or the first of `""`.
        QuoteInQuoted,
    }
    let mut state = State::FieldStart;
    let mut last = None;
    let mut at = 0;
    while at < bytes.len() {
        match state {
            State::Quoted => match memchr::memchr(b'"', &bytes[at..]) {
                Some(i) => {
                    at += i + 1;
                    state = State::QuoteInQuoted;
                }
                None => break,
            },
            State::FieldStart if bytes[at] == b'"' => {
                at += 1;
                state = State::Quoted;
            }
            State::QuoteInQuoted if bytes[at] == b'"' => {
                at += 1;
                state = State::Quoted;
            }
            _ => match memchr::memchr3(b',', b'\n', b'\r', &bytes[at..]) {
                Some(i) => {
                    at += i;
                    if bytes[at] == b'\n' {
                        last = Some(at + 1);
                    }
                    at += 1;
                    state = State::FieldStart;
                }
                None => break,
            },
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use std::fs;

    use proptest::prelude::*;
    use serde::Deserialize;
    use weir_core::ProcessorContext;

    use super::*;
    use crate::sources::files::testing::{check_resume, run, run_all, run_throttled};
    use crate::sources::{Emitter, SourceReader};

    #[derive(Debug, Clone, PartialEq, Deserialize)]
    struct Person {
        name: String,
        age: u32,
    }

    fn person(name: &str, age: u32) -> Person {
        Person {
            name: name.to_owned(),
            age,
        }
    }

    fn reader_with(
        path: &Path,
        options: ChunkOptions,
    ) -> impl Fn() -> ChunkedSource<CsvFormat<Person>> {
        let files = Arc::new(InputFiles::resolve(path).unwrap());
        move || ChunkedSource::new(Arc::new(CsvFormat::default()), Arc::clone(&files), options)
    }

    fn reader(path: &Path) -> impl Fn() -> ChunkedSource<CsvFormat<Person>> {
        reader_with(path, ChunkOptions::with_threads(2))
    }

    #[test]
    fn a_seek_resumes_after_the_last_row_across_files_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("a.csv"),
            "name,age\r\nann,30\r\n\"b\nc\",4\r\nbad,x\r\ndan,5\r\n",
        )
        .unwrap();
        fs::write(dir.path().join("b.csv"), "age,name\n7,eve\n1\n8,fay\n").unwrap();
        fs::write(dir.path().join("c.csv"), "name,age\ngus,9").unwrap();
        let mut all = Vec::new();
        for index in 0..2 {
            let (items, resumed) = check_resume(reader(dir.path()), index, 2);
            all.extend(items);
            let whole = resumed[0].malformed().logged().to_vec();
            for r in &resumed {
                assert!(
                    whole.ends_with(r.malformed().logged()),
                    "{:?}",
                    r.malformed().logged()
                );
            }
            let lines: Vec<u64> = whole.iter().map(|(_, l)| *l).collect();
            // The line each bad row starts on (`bad,x` after a quoted field over two lines).
            assert_eq!(lines, if index == 0 { vec![5] } else { vec![3] });
        }
        assert_eq!(
            all,
            [
                person("ann", 30),
                person("b\nc", 4),
                person("dan", 5),
                person("gus", 9),
                person("eve", 7),
                person("fay", 8),
            ]
        );
    }

    #[test]
    fn reads_by_header_and_counts_malformed_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("people.csv");
        let content = concat!(
            "age,name\n",
            "30,ann\n",
            "x,bob\n",              // line 3: not a number
            "40\n",                 // line 4: too few fields
            "50,\"multi\nline\"\n", // lines 5-6: a quoted newline
            "\n",                   // blank: skipped by the csv crate
            "60,dan\r\n",
            "70,eve", // no final newline
        );
        fs::write(&path, content).unwrap();
        let mut r = reader(&path)();
        let ctx = ProcessorContext::new("test", 0, 1, 0);
        r.open(&ctx).unwrap();
        let mut out = Vec::new();
        while !r.read(&mut Emitter::unbounded(&mut out)).unwrap() {}
        r.close().unwrap();
        assert_eq!(
            out,
            [
                person("ann", 30),
                person("multi\nline", 50),
                person("dan", 60),
                person("eve", 70)
            ]
        );
        assert_eq!(ctx.metrics().snapshot().counter("malformed_records"), 2);
        let lines: Vec<u64> = r.malformed().logged().iter().map(|(_, l)| *l).collect();
        assert_eq!(lines, [3, 4]);
    }

    #[test]
    fn instances_deal_out_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        for f in 0..5u32 {
            let rows: String = (0..3)
                .map(|r| format!("p{f}{r},{}\n", f * 10 + r))
                .collect();
            fs::write(
                dir.path().join(format!("{f}.csv")),
                format!("name,age\n{rows}"),
            )
            .unwrap();
        }
        let all: Vec<Person> = (0..5u32)
            .flat_map(|f| (0..3).map(move |r| person(&format!("p{f}{r}"), f * 10 + r)))
            .collect();
        assert_eq!(run_all(reader(dir.path()), 1), all);
        let (first, _) = run(reader(dir.path())(), 0, 2);
        let names: Vec<&str> = first.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "p00", "p01", "p02", "p20", "p21", "p22", "p40", "p41", "p42"
            ]
        );
        for parallelism in 2..=6 {
            let mut got = run_all(reader(dir.path()), parallelism);
            got.sort_by_key(|p| p.age);
            assert_eq!(got, all);
        }
    }

    #[test]
    fn backpressure_and_budget_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.csv");
        let expected: Vec<Person> = (0..20_000).map(|i| person(&format!("n{i}"), i)).collect();
        let rows: String = expected
            .iter()
            .map(|p| format!("{},{}\n", p.name, p.age))
            .collect();
        fs::write(&path, format!("name,age\n{rows}")).unwrap();
        for k in [1, 4, 100_000] {
            assert_eq!(run_throttled(reader(&path)(), k), expected);
        }
    }

    #[test]
    fn empty_file_yields_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.csv");
        fs::write(&path, "").unwrap();
        assert!(run_all(reader(&path), 2).is_empty());
        fs::write(&path, "name,age\n").unwrap();
        assert!(run_all(reader(&path), 1).is_empty());
    }

    /// The single reader: the csv crate over the whole file. Rows and malformed lines.
    fn single_reader(path: &Path) -> (Vec<Person>, Vec<u64>) {
        let mut reader = csv::Reader::from_path(path).unwrap();
        let headers = reader.byte_headers().unwrap().clone();
        let (mut rows, mut bad) = (Vec::new(), Vec::new());
        let mut record = ByteRecord::new();
        let content = fs::read(path).unwrap();
        // The line a record starts on, past the line ends before it (see `LineCursor`).
        let line_of = |start: u64| {
            let mut start = start as usize;
            while let Some(b'\r' | b'\n') = content.get(start) {
                start += 1;
            }
            1 + content[..start].iter().filter(|&&b| b == b'\n').count() as u64
        };
        loop {
            match reader.read_byte_record(&mut record) {
                Ok(false) => break,
                Ok(true) => match record.deserialize::<Person>(Some(&headers)) {
                    Ok(p) => rows.push(p),
                    Err(_) => bad.push(line_of(record.position().unwrap().byte())),
                },
                Err(e) => bad.push(line_of(e.position().unwrap().byte())),
            }
        }
        (rows, bad)
    }

    fn csv_content() -> impl Strategy<Value = Vec<u8>> {
        let field = prop_oneof![
            "[a-z]{0,5}",
            "[0-9]{1,3}",
            // Quoted, with commas, newlines, CRLF and escaped quotes inside.
            "\"([a-z,\n]|\r\n|\"\"){0,12}\"",
            "[a-z]{30,60}",
        ];
        (
            prop::collection::vec(prop::collection::vec(field, 1..=3), 0..25),
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec((any::<prop::sample::Index>(), 0x80u8..=0xff), 0..2),
        )
            .prop_map(|(rows, crlf, final_newline, invalid)| {
                let end = if crlf { "\r\n" } else { "\n" };
                let mut text = String::from("name,age");
                for row in rows {
                    text.push_str(end);
                    text.push_str(&row.join(","));
                }
                if final_newline {
                    text.push_str(end);
                }
                let mut bytes = text.into_bytes();
                for (at, byte) in invalid {
                    let i = at.index(bytes.len() + 1);
                    bytes.insert(i, byte);
                }
                bytes
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Whatever the threads and the chunk size, the rows and the malformed rows' lines
        /// are the csv crate's, reading the whole file alone.
        #[test]
        fn chunked_parsing_is_the_single_reader(
            content in csv_content(),
            threads in 1..=4usize,
            chunk_bytes in 1..64usize,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("a.csv");
            fs::write(&path, &content).unwrap();
            let (rows, bad) = single_reader(&path);
            let mut r = reader_with(&path, ChunkOptions { threads, chunk_bytes })();
            let ctx = ProcessorContext::new("test", 0, 1, 0);
            r.open(&ctx).unwrap();
            let mut out = Vec::new();
            while !r.read(&mut Emitter::unbounded(&mut out)).unwrap() {}
            r.close().unwrap();
            let logged: Vec<u64> = r.malformed().logged().iter().map(|(_, l)| *l).collect();
            prop_assert_eq!(out, rows);
            prop_assert_eq!(ctx.metrics().snapshot().counter("malformed_records"), bad.len() as u64);
            prop_assert_eq!(logged, bad.into_iter().take(20).collect::<Vec<_>>());
        }

        /// A reader moved to the position taken after any row goes on with exactly the
        /// rows after it, and the malformed rows after it with their lines.
        #[test]
        fn a_seek_resumes_after_any_row(
            content in csv_content(),
            threads in 1..=3usize,
            chunk_bytes in 1..64usize,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("a.csv");
            fs::write(&path, &content).unwrap();
            let (rows, bad) = single_reader(&path);
            let (items, resumed) = check_resume(reader_with(&path, ChunkOptions { threads, chunk_bytes }), 0, 1);
            prop_assert_eq!(items, rows);
            // Each logs the first 20 one by one: those of the malformed rows after it.
            for r in &resumed {
                let lines: Vec<u64> = r.malformed().logged().iter().map(|(_, l)| *l).collect();
                let after = |m: usize| bad[m..].iter().take(20).eq(lines.iter());
                prop_assert!((0..=bad.len()).any(after), "{:?} of {:?}", lines, bad);
            }
            let whole: Vec<u64> = resumed[0].malformed().logged().iter().map(|(_, l)| *l).collect();
            prop_assert_eq!(whole, bad.into_iter().take(20).collect::<Vec<_>>());
        }
    }

    #[test]
    fn missing_path_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            records::<Person>(dir.path().join("*.csv")),
            Err(SourceError::NoMatch { .. })
        ));
    }
}
