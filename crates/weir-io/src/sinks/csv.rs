//! CSV files: each item serialized as one row, under a header row.
//!
//! ```no_run
//! use weir::prelude::*;
//! use serde::Serialize;
//!
//! #[derive(Clone, Serialize)]
//! struct Person { name: String, age: u32 }
//!
//! let people = vec![Person { name: "ann".into(), age: 31 }];
//! let p = Pipeline::new();
//! p.read_from(sources::collection::items(people))
//!     .write_to(sinks::csv::records::<Person>("people.csv"));
//! p.run()?;
//! # Ok::<(), weir::Error>(())
//! ```

use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use weir_core::snapshot::Guarantee;
use weir_core::{BoxError, Item, ProcessorContext};

use super::files::{SinkError, Target, TempFileWriter};
use super::{Sink, SinkWriter};

/// Creates a sink that writes each item as a CSV row into the file `path`, through the `csv`
/// crate.
///
/// The header row is taken from the field names of the first item (a struct's fields, in
/// declaration order); an input with no items gives an empty file, without a header. Every
/// item must serialize to the same fields. One instance writes the whole file (parallelism
/// `Some(1)`), in the order it receives the items. The file is written under a temporary
/// name and renamed at the end, as for every file sink (see
/// [`files`](super::files#atomic-output)); missing parent directories are created.
///
/// Cost: one serialization per item into the `csv` writer's buffer, then a 256 KiB file
/// buffer handed to an I/O thread for its `write` syscall. The instance is cooperative.
///
/// # Errors
/// The job fails with a [`SinkError`] naming the file if it cannot be created, written or
/// renamed, or if an item cannot be serialized as a row (a nested struct or a sequence
/// field, for example).
pub fn records<T: Item + Serialize>(path: impl AsRef<Path>) -> Sink<T> {
    let path = path.as_ref();
    let target = Target::File(path.to_owned());
    Sink::new(format!("csv({})", path.display()), Some(1), move |_| {
        CsvWriter::<T>::new(target.paths(0))
    })
}

/// The writer behind [`records`].
struct CsvWriter<T> {
    paths: Option<(PathBuf, PathBuf)>,
    /// The `csv` encoder, writing into the file through a shared handle...
    out: Option<csv::Writer<SharedFile>>,
    /// ...so that the writer can still ask the file for room and commit it.
    file: Option<SharedFile>,
    _item: PhantomData<fn(T)>,
}

/// A [`TempFileWriter`] that the `csv` encoder writes into and the sink also drives: the
/// encoder has no `get_mut`. The lock is never contended (one instance, one thread) and is
/// taken once per 8 KiB the encoder hands over, not per record.
#[derive(Clone)]
struct SharedFile(Arc<Mutex<TempFileWriter>>);

impl SharedFile {
    fn lock(&self) -> std::sync::MutexGuard<'_, TempFileWriter> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl io::Write for SharedFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.lock().write(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<T> CsvWriter<T> {
    fn new(paths: (PathBuf, PathBuf)) -> Self {
        CsvWriter {
            paths: Some(paths),
            out: None,
            file: None,
            _item: PhantomData,
        }
    }
}

impl<T: Item + Serialize> SinkWriter for CsvWriter<T> {
    type Item = T;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        if let Some((path, tmp)) = self.paths.take() {
            let waker = ctx.waker().clone();
            // With snapshots, by epochs; the header row goes into the first part, with the
            // first record.
            let writer = if ctx.guarantee() == Guarantee::None {
                TempFileWriter::create(path, tmp, waker)?
            } else {
                TempFileWriter::epochs(path, tmp, None, waker, ctx.global_index())?
            };
            let file = SharedFile(Arc::new(Mutex::new(writer)));
            self.out = Some(csv::Writer::from_writer(file.clone()));
            self.file = Some(file);
        }
        Ok(())
    }

    /// # Panics
    /// If called before `open`: the runtime never does.
    fn write(&mut self, item: T) -> Result<(), BoxError> {
        let out = self
            .out
            .as_mut()
            .expect("SinkWriter::write called before open");
        out.serialize(&item).map_err(|e| {
            let path = out.get_ref().lock().tmp_path().to_owned();
            match e.kind() {
                csv::ErrorKind::Io(io) => SinkError::Write {
                    path,
                    source: io::Error::new(io.kind(), e),
                },
                _ => SinkError::Encode {
                    path,
                    source: e.into(),
                },
            }
        })?;
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        while !self.poll_close()? {
            std::thread::park_timeout(std::time::Duration::from_millis(1));
        }
        Ok(())
    }

    fn has_room(&mut self) -> Result<bool, BoxError> {
        match &self.file {
            Some(file) => Ok(file.lock().has_room()?),
            None => Ok(true),
        }
    }

    fn poll_close(&mut self) -> Result<bool, BoxError> {
        let (Some(out), Some(file)) = (&mut self.out, &self.file) else {
            return Ok(true);
        };
        // The encoder's own small buffer goes into the file's buffer; that never blocks.
        out.flush().map_err(|source| SinkError::Write {
            path: file.lock().tmp_path().to_owned(),
            source,
        })?;
        Ok(file.lock().poll_commit()?)
    }

    /// Writes are handed to an I/O thread: encoding runs on the worker, which never blocks.
    fn is_cooperative(&self) -> bool {
        true
    }

    /// The epoch's part file, synced; see [`super::epochs`] and
    /// [`SinkWriter::prepare_outputs`]. Blocks for that `fsync`.
    fn prepare_outputs(&mut self, _instance: usize) -> Result<Vec<(usize, Vec<u8>)>, BoxError> {
        let (Some(out), Some(file)) = (&mut self.out, &self.file) else {
            return Ok(Vec::new());
        };
        // The encoder's buffered rows belong to this epoch.
        out.flush().map_err(|source| SinkError::Write {
            path: file.lock().tmp_path().to_owned(),
            source,
        })?;
        Ok(file.lock().prepare()?)
    }

    fn commit(&mut self) -> Result<bool, BoxError> {
        match &self.file {
            Some(file) => Ok(file.lock().poll_publish()?),
            None => Ok(true),
        }
    }

    /// Takes back the saved parts; once the output has any, the header row is in the first,
    /// so the encoder writes no other.
    fn restore_output(&mut self, owner: usize, prepared: Vec<u8>) -> Result<(), BoxError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let parts = file.lock().restore(owner, &prepared)?;
        if parts > 0 {
            self.out = Some(
                csv::WriterBuilder::new()
                    .has_headers(false)
                    .from_writer(file.clone()),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde::Deserialize;

    use super::*;
    use crate::sinks::files::testing::run;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Person {
        name: String,
        age: u32,
    }

    #[test]
    fn writes_a_header_and_one_row_per_item() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("people.csv");
        let items = vec![
            Person {
                name: "ann".into(),
                age: 30,
            },
            Person {
                name: "b, \"quoted\"\nname".into(),
                age: 40,
            },
        ];
        let writer = CsvWriter::<Person>::new(Target::File(path.clone()).paths(0));
        run(writer, items.clone(), 0, 1).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("name,age\nann,30\n"), "{text}");
        let back: Vec<Person> = csv::Reader::from_path(&path)
            .unwrap()
            .deserialize()
            .map(Result::unwrap)
            .collect();
        assert_eq!(back, items);
    }

    fn person(name: &str, age: u32) -> Person {
        Person {
            name: name.into(),
            age,
        }
    }

    #[test]
    fn with_snapshots_a_resumed_file_has_one_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("people.csv");
        let ctx = || {
            ProcessorContext::new("test", 0, 1, 0)
                .with_guarantee(weir_core::snapshot::Guarantee::AtLeastOnce)
        };
        let writer = || CsvWriter::<Person>::new(Target::File(path.clone()).paths(0));
        let commit = |w: &mut CsvWriter<Person>| {
            while !w.commit().unwrap() {
                std::thread::park_timeout(std::time::Duration::from_millis(1));
            }
        };
        let saved = {
            let mut w = writer();
            w.open(&ctx()).unwrap();
            w.write(person("ann", 30)).unwrap();
            let saved = w.prepare_outputs(0).unwrap();
            commit(&mut w);
            w.write(person("lost", 1)).unwrap();
            saved
        };
        let mut w = writer();
        w.open(&ctx()).unwrap();
        for (owner, prepared) in saved {
            w.restore_output(owner, prepared).unwrap();
        }
        commit(&mut w);
        w.write(person("bob", 40)).unwrap();
        while !w.poll_close().unwrap() {}
        w.prepare_outputs(0).unwrap();
        commit(&mut w);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "name,age\nann,30\nbob,40\n"
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn many_rows_are_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("people.csv");
        let items: Vec<Person> = (0..50_000)
            .map(|i| Person {
                name: format!("p{i}"),
                age: i,
            })
            .collect();
        run(
            CsvWriter::<Person>::new(Target::File(path.clone()).paths(0)),
            items.clone(),
            0,
            1,
        )
        .unwrap();
        let back: Vec<Person> = csv::Reader::from_path(&path)
            .unwrap()
            .deserialize()
            .map(Result::unwrap)
            .collect();
        assert_eq!(back, items);
    }

    #[test]
    fn an_unserializable_item_fails_with_the_path() {
        #[derive(Clone, Serialize)]
        struct Nested {
            inner: Vec<Person>,
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.csv");
        let item = Nested {
            inner: vec![Person {
                name: "a".into(),
                age: 1,
            }],
        };
        let err = run(
            CsvWriter::<Nested>::new(Target::File(path.clone()).paths(0)),
            [item],
            0,
            1,
        )
        .unwrap_err();
        assert!(err.to_string().contains("bad.csv"), "{err}");
        assert!(!path.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
