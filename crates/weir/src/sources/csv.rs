//! CSV files with a header row, deserialized into `T` by column name.
//!
//! [`records`] takes the same paths as [`files::text`](super::files::text) (a file, a
//! directory or a glob pattern). A CSV record may span lines (a quoted field with a newline),
//! so files are not split by byte range: instance `i` of `n` reads files `i`, `i + n`, ...
//! A row that does not fit `T` is skipped and counted, never an error.
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
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Counters
//!
//! An instance registers `malformed_records`: rows with the wrong number of fields or a
//! value that does not deserialize into its field. The first 20 per instance are logged with
//! `tracing::warn!`, naming the file and the 1-based line number; a summary follows at close.
//! Blank lines are skipped silently and not counted.

use std::fs::File;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use csv::ByteRecord;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use weir_core::{BoxError, Item, ProcessorContext};

use super::files::{InputFiles, MalformedLog, SourceError};
use super::{BatchSource, Emitter, SourceReader};

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
/// Cost: the row is parsed into a reused record buffer and deserialized from it, so only
/// `T`'s own fields allocate. Reads go through a 256 KiB buffer; each `read` call handles
/// about 64 KiB, read ahead on an I/O thread per instance.
///
/// # Errors
/// As [`files::text`](super::files::text): [`SourceError::NotFound`],
/// [`SourceError::NoMatch`], [`SourceError::BadPattern`] or [`SourceError::Io`]. While the
/// job runs, a file that cannot be opened fails it with [`SourceError::Io`], and a read
/// failure or an unreadable header row with [`SourceError::Csv`], both naming the file.
pub fn records<T: DeserializeOwned + Item>(
    path: impl AsRef<Path>,
) -> Result<BatchSource<T>, SourceError> {
    let path = path.as_ref();
    let files = Arc::new(InputFiles::resolve(path)?);
    Ok(BatchSource::new(
        format!("csv({})", path.display()),
        None,
        move |_| CsvReader::<T>::new(Arc::clone(&files)),
    ))
}

/// The read buffer of each file.
const READ_BUFFER: usize = 256 * 1024;

/// About how many bytes a reader handles per `read` call.
const READ_BUDGET: u64 = 64 * 1024;

/// Where a [`CsvReader`] is, as saved in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum CsvPosition {
    /// Before file `file` (past the last: done).
    Next { file: usize },
    /// In file `file`, where the record numbered `record` starts at `byte`, on `line`.
    In {
        file: usize,
        byte: u64,
        line: u64,
        record: u64,
    },
}

/// The file being read.
struct OpenFile {
    file: usize,
    reader: csv::Reader<File>,
    headers: ByteRecord,
}

/// The reader behind [`records`].
struct CsvReader<T> {
    files: Arc<InputFiles>,
    /// The next file this instance reads, and the step to the one after.
    next_file: usize,
    step: usize,
    current: Option<OpenFile>,
    record: ByteRecord,
    malformed: MalformedLog,
    _item: PhantomData<fn() -> T>,
}

impl<T> CsvReader<T> {
    fn new(files: Arc<InputFiles>) -> Self {
        CsvReader {
            files,
            next_file: 0,
            step: 1,
            current: None,
            record: ByteRecord::new(),
            malformed: MalformedLog::new(),
            _item: PhantomData,
        }
    }
}

fn open_file(files: &InputFiles, file: usize) -> Result<OpenFile, SourceError> {
    let path = &files.files[file].path;
    let input = File::open(path).map_err(|source| SourceError::Io {
        path: path.clone(),
        source,
    })?;
    let mut reader = csv::ReaderBuilder::new()
        .buffer_capacity(READ_BUFFER)
        .from_reader(input);
    let headers = reader
        .byte_headers()
        .map_err(|source| SourceError::Csv {
            path: path.clone(),
            source,
        })?
        .clone();
    Ok(OpenFile {
        file,
        reader,
        headers,
    })
}

impl<T: DeserializeOwned + Item> SourceReader for CsvReader<T> {
    type Item = T;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.next_file = ctx.global_index();
        self.step = ctx.total_parallelism().max(1);
        self.current = None;
        self.malformed.open(ctx);
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, T>) -> Result<bool, BoxError> {
        let mut budget = READ_BUDGET;
        loop {
            let open = match self.current {
                Some(ref mut open) => open,
                None if self.next_file >= self.files.files.len() => return Ok(true),
                None => {
                    let file = self.next_file;
                    self.next_file += self.step;
                    self.current.insert(open_file(&self.files, file)?)
                }
            };
            let path = &self.files.files[open.file].path;
            let start = open.reader.position().byte();
            loop {
                match open.reader.read_byte_record(&mut self.record) {
                    Ok(false) => break,
                    Ok(true) => match self.record.deserialize::<T>(Some(&open.headers)) {
                        Ok(item) => {
                            if !out.emit(item) {
                                return Ok(false);
                            }
                        }
                        Err(e) => {
                            let line = self.record.position().map_or(0, csv::Position::line);
                            self.malformed.record(path, line, &e);
                        }
                    },
                    Err(source) if source.is_io_error() => {
                        return Err(SourceError::Csv {
                            path: path.clone(),
                            source,
                        }
                        .into());
                    }
                    Err(e) => {
                        let line = e.position().map_or(0, csv::Position::line);
                        self.malformed.record(path, line, &e);
                    }
                }
                if open.reader.position().byte() - start >= budget {
                    return Ok(false);
                }
            }
            budget = budget.saturating_sub(open.reader.position().byte() - start);
            self.current = None;
        }
    }

    fn is_cooperative(&self) -> bool {
        false
    }

    /// A file index and the byte offset, line and record number of the next record.
    fn position(&self) -> Option<Vec<u8>> {
        let at = match &self.current {
            Some(open) => {
                let p = open.reader.position();
                CsvPosition::In {
                    file: open.file,
                    byte: p.byte(),
                    line: p.line(),
                    record: p.record(),
                }
            }
            None => CsvPosition::Next {
                file: self.next_file,
            },
        };
        Some(super::encode_position(&at))
    }

    /// Opens the file of the position, reads its header row and seeks to the record.
    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        let at: CsvPosition =
            super::decode_position(position).map_err(|reason| SourceError::Position { reason })?;
        let file = match at {
            CsvPosition::Next { file } | CsvPosition::In { file, .. } => file,
        };
        // Files `i`, `i + n`, ... are this instance's: `next_file` is `i` after `open`.
        if file % self.step != self.next_file % self.step {
            return Err(SourceError::Position {
                reason: format!(
                    "file {file} is not read by instance {} of {}",
                    self.next_file % self.step,
                    self.step
                ),
            }
            .into());
        }
        self.current = None;
        self.next_file = file;
        if let CsvPosition::In {
            file,
            byte,
            line,
            record,
        } = at
        {
            if file >= self.files.files.len() {
                return Err(SourceError::Position {
                    reason: format!("there is no file {file}; the input files changed"),
                }
                .into());
            }
            let mut open = open_file(&self.files, file)?;
            let mut p = csv::Position::new();
            p.set_byte(byte).set_line(line).set_record(record);
            let path = &self.files.files[file].path;
            open.reader.seek(p).map_err(|source| SourceError::Csv {
                path: path.clone(),
                source,
            })?;
            self.current = Some(open);
            self.next_file = file + self.step;
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.current = None;
        self.malformed.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde::Deserialize;

    use super::*;
    use crate::sources::files::testing::{check_resume, run, run_all, run_throttled};

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

    fn reader(path: &Path) -> impl Fn() -> CsvReader<Person> {
        let files = Arc::new(InputFiles::resolve(path).unwrap());
        move || CsvReader::new(Arc::clone(&files))
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
            let whole = resumed[0].malformed.logged.clone();
            for r in &resumed {
                assert!(
                    whole.ends_with(&r.malformed.logged),
                    "{:?}",
                    r.malformed.logged
                );
            }
            let lines: Vec<u64> = whole.iter().map(|(_, l)| *l).collect();
            // A whole read numbers them as the csv crate does.
            assert_eq!(lines, if index == 0 { vec![4] } else { vec![3] });
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
        let lines: Vec<u64> = r.malformed.logged.iter().map(|(_, l)| *l).collect();
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

    #[test]
    fn missing_path_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            records::<Person>(dir.path().join("*.csv")),
            Err(SourceError::NoMatch { .. })
        ));
    }
}
