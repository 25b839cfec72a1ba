//! Formatting a file sink's records where the items are, before they travel to the writer.
//!
//! A single-file sink runs one instance; when it cannot be fused with the stages before it
//! (they run on every worker), the planner fuses a [`FormatLink`] into their vertex instead:
//! each instance formats its items into blocks of bytes ([`FormattedRecords`]), and the
//! sink's one instance only appends the blocks to its file. Formatting, the costly part
//! (numbers to text, JSON, CSV quoting), then runs on every worker, and one item crosses to
//! the writer per block instead of one per record.
//!
//! Blocks keep the order of the records of each instance. A block is handed on before any
//! watermark, idleness, end of input or snapshot barrier passes the link (every head flushes
//! its chain first), so the records of a snapshot epoch reach the writer before the barrier
//! does, and the transactional file sinks stay exactly-once.
//!
//! Cost per record: the format function into a buffer; per block (at most one per batch of
//! items the head pushes, and at most [`BLOCK_BYTES`] or so): one allocation, sized as the
//! last block, and one item sent.

use std::path::PathBuf;
use std::sync::Arc;

use weir_core::{BoxError, Outbox, ProcessorContext, ProcessorResult, Watermark};

use crate::connector::SinkError;
use crate::exec::link::Link;
use crate::exec::state::{LinkEntries, LinkWriter, refuse_save_if};

/// Bytes at which a block is handed on even in the middle of a batch.
const BLOCK_BYTES: usize = 64 * 1024;

/// Records formatted into bytes by a [`FormatLink`], for a file sink to append.
#[derive(Debug, Clone, Default)]
pub(crate) struct FormattedRecords {
    /// The records, each with its terminator.
    pub bytes: Vec<u8>,
    /// How many records `bytes` holds.
    pub records: u64,
}

/// Formats every item into blocks for the next link. See the [module docs](self).
pub(crate) struct FormatLink<T, F> {
    format: Arc<F>,
    /// The file named by an encoding error (the one the sink writes).
    path: PathBuf,
    block: FormattedRecords,
    /// The first encoding error, raised at the next flush: `push` cannot return it.
    failed: Option<BoxError>,
    next: Box<dyn Link<FormattedRecords>>,
    _item: std::marker::PhantomData<fn(T)>,
}

impl<T, F> FormatLink<T, F>
where
    F: Fn(&T, &mut Vec<u8>) -> Result<(), BoxError>,
{
    /// A link formatting with `format` into blocks for `next`; an encoding error names `path`.
    pub(crate) fn new(
        format: Arc<F>,
        path: PathBuf,
        next: Box<dyn Link<FormattedRecords>>,
    ) -> Self {
        FormatLink {
            format,
            path,
            block: FormattedRecords::default(),
            failed: None,
            next,
            _item: std::marker::PhantomData,
        }
    }

    /// Appends `item` to the block; false once an item failed to encode.
    #[inline]
    fn add(&mut self, item: &T) -> bool {
        if self.failed.is_some() {
            return false;
        }
        match (self.format)(item, &mut self.block.bytes) {
            Ok(()) => {
                self.block.records += 1;
                true
            }
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    /// Hands the block on, if it holds anything; the next one starts with room for as much.
    fn hand_on(&mut self) -> bool {
        if self.block.records == 0 {
            return true;
        }
        let room = self.block.bytes.len();
        let block = std::mem::replace(
            &mut self.block,
            FormattedRecords {
                bytes: Vec::with_capacity(room),
                records: 0,
            },
        );
        self.next.push(block)
    }

    /// The encoding error, if an item failed, naming the file.
    fn check(&mut self) -> ProcessorResult<()> {
        match self.failed.take() {
            Some(source) => Err(Box::new(SinkError::Encode {
                path: self.path.clone(),
                source,
            })),
            None => Ok(()),
        }
    }
}

impl<T, F> Link<T> for FormatLink<T, F>
where
    T: Send,
    F: Fn(&T, &mut Vec<u8>) -> Result<(), BoxError> + Send + Sync,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.next.init(ctx)
    }

    #[inline]
    fn push(&mut self, item: T) -> bool {
        if !self.add(&item) {
            return false;
        }
        self.block.bytes.len() < BLOCK_BYTES || self.hand_on()
    }

    fn push_batch(&mut self, items: &mut Vec<T>) -> bool {
        let mut room = true;
        for item in items.drain(..) {
            if !self.add(&item) {
                break;
            }
            if self.block.bytes.len() >= BLOCK_BYTES {
                room &= self.hand_on();
            }
        }
        // After a failure the rest of the batch is dropped: the job fails at the next flush.
        self.failed.is_none() && self.hand_on() && room
    }

    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.check()?;
        self.hand_on();
        self.next.flush(outbox)
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.check()?;
        self.hand_on();
        self.next.watermark(wm, outbox)
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.check()?;
        self.hand_on();
        self.next.idle(outbox)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.check()?;
        self.hand_on();
        self.next.complete(outbox)
    }

    fn is_cooperative(&self) -> bool {
        self.next.is_cooperative()
    }

    fn prepare_save(&mut self) -> weir_core::ProcessorResult<bool> {
        self.next.prepare_save()
    }
    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(self.block.records != 0, "records not handed on")?;
        self.next.save(&mut state.next())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        self.next.restore(&mut entries.next())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        self.next.commit()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use weir_core::{Executor, ExecutorConfig, JobConfig};

    use crate::prelude::*;

    /// Runs `p` on `parallelism` workers; the job's error, or the `records_written` of all
    /// its instances.
    fn run(p: &Pipeline, parallelism: usize) -> Result<u64, String> {
        let executor = Executor::new(ExecutorConfig {
            workers: parallelism,
            ..Default::default()
        })
        .unwrap();
        let config = JobConfig {
            default_parallelism: Some(parallelism),
            ..Default::default()
        };
        let job = p.submit(&executor, config).map_err(|e| e.to_string())?;
        while !job.wait_timeout(std::time::Duration::from_millis(20)) {}
        let written = job
            .metrics()
            .iter()
            .map(|m| m.counter("records_written"))
            .sum();
        job.join().map_err(|e| e.to_string())?;
        Ok(written)
    }

    /// Numbers tripled behind a rebalance, so the map runs on every worker, into `sink`.
    fn tripled(n: u64, sink: Sink<u64>) -> Pipeline {
        let p = Pipeline::new();
        p.read_from(sources::collection::items(0..n))
            .rebalance()
            .map(|x| x * 3)
            .write_to(sink);
        p
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_single_file_behind_every_worker_gets_the_records_formatted_there() {
        let dir = tempfile::tempdir().unwrap();
        let n = 200_000;
        let want: Vec<String> = (0..n).map(|x| (x * 3).to_string()).collect();
        for parallelism in [1, 2, 4] {
            let path = dir.path().join(format!("out-{parallelism}.txt"));
            let p = tripled(n, sinks::files::text(&path));
            let plan = p.explain().unwrap();
            assert!(plan.contains("fused(rebalance, map, format)"), "{plan}");
            // Each record counts once, though the sink receives blocks of them.
            assert_eq!(run(&p, parallelism), Ok(n));
            let mut got = lines(&path);
            if parallelism == 1 {
                assert_eq!(got, want, "one instance keeps the order");
            }
            got.sort_by_key(|l| l.parse::<u64>().unwrap());
            assert_eq!(got, want, "parallelism {parallelism}");
        }
    }

    #[test]
    fn a_sink_in_the_vertex_of_its_input_formats_there_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let p = Pipeline::new();
        p.read_from(sources::collection::items(0..10u64))
            .write_to(sinks::files::text(&path));
        let plan = p.explain().unwrap();
        assert!(!plan.contains("format"), "{plan}");
        assert_eq!(run(&p, 2), Ok(10));
        assert_eq!(lines(&path).len(), 10);
    }

    #[test]
    fn a_header_is_written_once_and_even_without_records() {
        let dir = tempfile::tempdir().unwrap();
        for n in [0, 5_000] {
            let path = dir.path().join(format!("out-{n}.csv"));
            let sink =
                sinks::files::text_with_header(&path, "x\n", |x: &u64, out: &mut Vec<u8>| {
                    out.extend_from_slice(format!("{x}\n").as_bytes());
                });
            assert_eq!(run(&tripled(n, sink), 2), Ok(n));
            let got = lines(&path);
            assert_eq!(got.len() as u64, n + 1);
            assert_eq!(got[0], "x");
        }
    }

    #[test]
    fn an_item_that_cannot_be_encoded_fails_the_job_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let p = Pipeline::new();
        p.read_from(sources::collection::items(0..1000u32))
            .rebalance()
            // A JSON object's keys must be strings: a key of bytes cannot be written.
            .map(|x| HashMap::from([(vec![x as u8], x)]))
            .write_to(sinks::json::lines(&path));
        assert!(p.explain().unwrap().contains("format"));
        let err = run(&p, 2).unwrap_err();
        assert!(
            err.contains("cannot encode") && err.contains("out.jsonl"),
            "{err}"
        );
        assert!(!path.exists(), "a failed job leaves no file");
    }
}
