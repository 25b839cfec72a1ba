//! Standard output and the log as sinks: for examples, debugging and small results.
//!
//! ```
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! p.read_from(sources::collection::items(["a", "b"]))
//!     .write_to(sinks::stdout::lines()); // prints "a" and "b", one per line
//! p.run()?;
//! # Ok::<(), weir::Error>(())
//! ```
//!
//! # Snapshots
//!
//! Standard output cannot take back what it delivered: in a job that takes snapshots, the
//! results produced after the last snapshot are delivered again after a restore
//! (at-least-once).

use std::fmt::{Debug, Display};
use std::io::{self, Stdout, Write};
use std::marker::PhantomData;

use weir_core::{BoxError, Item, ProcessorContext};

use super::files::{SinkError, display_line};
use super::{Sink, SinkWriter};

/// Creates a sink that prints each item to standard output as `{item}\n`.
///
/// One instance prints everything (parallelism `Some(1)`), so lines never interleave, in
/// the order it receives the items. Output is buffered (64 KiB) and flushed at the end of the
/// input. The instance is non-cooperative: a write to a slow terminal or pipe blocks.
///
/// Cost: one `Display::fmt` per item into the buffer; one `write` per 64 KiB.
///
/// # Errors
/// The job fails with [`SinkError::Stdout`] if standard output cannot be written (a closed
/// pipe, for example) or an item's `Display` fails.
pub fn lines<T: Item + Display>() -> Sink<T> {
    Sink::new("stdout", Some(1), |_| StdoutWriter::new(io::stdout()))
}

/// Creates a sink that logs each item with `tracing::info!` as `{item:?}`, with the job's
/// and the vertex's names as the `job` and `vertex` fields.
///
/// It runs one instance per worker (parallelism `None`), so the lines of different instances
/// interleave. Cooperative: it costs what the installed `tracing` subscriber costs, usually a
/// formatted write per item, so keep it for small outputs.
pub fn logger<T: Item + Debug>() -> Sink<T> {
    Sink::new("logger", None, |_| LogWriter {
        job: String::new(),
        vertex: String::new(),
        _item: PhantomData,
    })
}

/// The writer behind [`lines`]; `W` is standard output but for the tests.
struct StdoutWriter<T, W: Write = Stdout> {
    out: W,
    buf: Vec<u8>,
    _item: PhantomData<fn(T)>,
}

/// How many bytes [`StdoutWriter`] buffers before it writes them out.
const STDOUT_BUFFER: usize = 64 * 1024;

impl<T, W: Write> StdoutWriter<T, W> {
    fn new(out: W) -> Self {
        StdoutWriter {
            out,
            buf: Vec::with_capacity(STDOUT_BUFFER),
            _item: PhantomData,
        }
    }

    fn write_out(&mut self) -> Result<(), SinkError> {
        self.out
            .write_all(&self.buf)
            .map_err(|source| SinkError::Stdout { source })?;
        self.buf.clear();
        Ok(())
    }
}

impl<T: Item + Display, W: Write + Send + 'static> SinkWriter for StdoutWriter<T, W> {
    type Item = T;

    fn write(&mut self, item: T) -> Result<(), BoxError> {
        display_line(&item, &mut self.buf).map_err(|e| SinkError::Stdout {
            source: io::Error::other(e),
        })?;
        if self.buf.len() >= STDOUT_BUFFER {
            self.write_out()?;
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.write_out()?;
        self.out
            .flush()
            .map_err(|source| SinkError::Stdout { source })?;
        Ok(())
    }

    fn is_cooperative(&self) -> bool {
        false
    }
}

/// The writer behind [`logger`].
struct LogWriter<T> {
    job: String,
    vertex: String,
    _item: PhantomData<fn(T)>,
}

impl<T: Item + Debug> SinkWriter for LogWriter<T> {
    type Item = T;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.job = ctx.job_name().to_owned();
        self.vertex = ctx.vertex().to_owned();
        Ok(())
    }

    fn write(&mut self, item: T) -> Result<(), BoxError> {
        tracing::info!(job = %self.job, vertex = %self.vertex, "{item:?}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::files::testing::run;

    #[test]
    fn lines_writes_one_line_per_item_and_flushes_at_close() {
        let mut writer = StdoutWriter::<u32, Vec<u8>>::new(Vec::new());
        writer
            .open(&ProcessorContext::new("test", 0, 1, 0))
            .unwrap();
        for i in [1, 22, 333] {
            writer.write(i).unwrap();
        }
        assert!(writer.out.is_empty(), "buffered until close");
        writer.close().unwrap();
        assert_eq!(writer.out, b"1\n22\n333\n");
        assert_eq!(lines::<u32>().parallelism, Some(1));
    }

    #[test]
    fn logger_takes_any_debug_item() {
        let writer = LogWriter::<(String, u32)> {
            job: String::new(),
            vertex: String::new(),
            _item: PhantomData,
        };
        assert!(writer.is_cooperative());
        run(writer, [("a".to_owned(), 1)], 0, 1).unwrap();
        assert_eq!(logger::<u32>().parallelism, None);
    }
}
