//! `weir score`: scores a CSV data set against a model server that speaks the TensorFlow
//! Serving / KServe v1 REST protocol.
//!
//! ```text
//! weir score --input rows.csv --url http://127.0.0.1:8501/v1/models/NAME:predict \
//!            --output scores.csv [--batch-size 64] [--parallelism 8] [--timeout-ms 5000] \
//!            [--retries 3] [--unordered] [--max-wait-ms 10] \
//!            [--state-dir DIR [--snapshot-interval-ms 1000] [--guarantee exactly-once]]
//! ```
//!
//! The input has a header row with an `id` column; every other column is a numeric feature,
//! in header order. Rows go to the server in batches as `POST {"instances": [[f1, ...], ...]}`
//! and the reply `{"predictions": [p1, ...]}` is matched to them by position. The output is
//! `id,score`, one line per scored row; a prediction that is a list (or anything but a
//! number) is written as its JSON text.
//!
//! The plan is three stages in one vertex: the CSV reader, `map_async_batched` (at most
//! `parallelism` requests of `batch_size` rows in flight, over one pooled keep-alive
//! `reqwest` client built by a `ServiceFactory`), and the CSV writer. A failed or timed-out
//! request is retried with exponential backoff (100 ms doubling up to 2 s) `--retries`
//! times, except for a client error (4xx but 408 and 429); `--timeout-ms` bounds each
//! attempt. When the retries run out, the job fails: reading stops, no output file is left,
//! and the one-line error names the batch's first id. A row that cannot be scored (wrong
//! field count, a feature that is not a finite number, an empty id, invalid UTF-8) is
//! skipped, counted, and reported with its line number.
//!
//! With `--state-dir` the job takes snapshots (see [`crate::snapshots`]) and running the same
//! command again after a crash resumes it. A snapshot holds the reader's place in the input
//! (a byte offset, [`RowPosition`]), the rows sent to the server but not yet written (the
//! async stage's `snapshot_inputs`), and the output's committed part files (the CSV sink
//! writes each snapshot's rows to a part beside `--output` and joins them at the end). A
//! resumed run scores again exactly the rows that no committed part holds: those in flight
//! when the snapshot was taken, then the input after its place. The output file of a resumed
//! run equals an uninterrupted run's (byte for byte in input order; the same lines with
//! `--unordered`). The job is named after the input and output files, not the URL, so a
//! restarted model server at another address resumes the same job.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use clap::Args;
use serde::{Deserialize, Serialize};
use weir::async_io::{AsyncError, AsyncOptions, RetryStrategy, ServiceFactory};
use weir::core::{BoxError, Counter, ProcessorContext};
use weir::sources::{BatchSource, Emitter, SourceReader};
use weir::{Executor, ExecutorConfig, JobConfig, Pipeline, sinks};

use crate::progress;
use crate::snapshots::{Ended, SnapshotArgs, Snapshots, job_name, path_part};
use crate::ui::UiArgs;

/// Arguments of `weir score`.
#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// The CSV file to score: an `id` column and numeric feature columns.
    #[arg(long)]
    pub input: PathBuf,
    /// The model's predict URL, e.g. http://127.0.0.1:8501/v1/models/NAME:predict.
    #[arg(long)]
    pub url: String,
    /// The CSV file to write `id,score` lines to.
    #[arg(long, value_parser = super::output_file())]
    pub output: PathBuf,
    /// Rows per request.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch_size: u32,
    /// Requests in flight at most.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub parallelism: u32,
    /// Time allowed for each request attempt, in milliseconds.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Retries of a failed or timed-out request before the run fails.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub retries: u32,
    /// Write scores in completion order instead of input order.
    #[arg(long)]
    pub unordered: bool,
    /// How long a partial batch waits for more rows, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub max_wait_ms: u64,
    /// Snapshots, to resume after a crash without rescoring the committed rows.
    #[command(flatten)]
    pub snapshots: SnapshotArgs,
    /// The observability server.
    #[command(flatten)]
    pub ui: UiArgs,
}

/// One input row. Serde: rows in flight are saved in snapshots.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    id: String,
    features: Vec<f64>,
}

/// One output line.
#[derive(Debug, Clone, Serialize)]
struct Scored {
    id: String,
    score: String,
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// The server answered with an error status.
    #[error("HTTP {status} from {url}: {body}")]
    Status {
        /// The status code and reason.
        status: String,
        /// Whether the status is worth retrying (5xx, 408, 429).
        transient: bool,
        /// The URL.
        url: String,
        /// The start of the reply's body.
        body: String,
    },
    /// The request could not be sent or its reply not read (connection refused, reset,
    /// timed out).
    #[error("request to {url} failed: {cause}")]
    Request {
        /// The URL.
        url: String,
        /// The error and its causes.
        cause: String,
    },
    /// The reply was not `{"predictions": [...]}` with one prediction per row.
    #[error("bad reply from {url}: {problem}")]
    BadReply {
        /// The URL.
        url: String,
        /// What was wrong.
        problem: String,
    },
}

impl ScoreError {
    fn request(url: &str, e: &reqwest::Error) -> Self {
        let mut cause = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            let text = s.to_string();
            if !cause.contains(&text) {
                cause.push_str(": ");
                cause.push_str(&text);
            }
            source = s.source();
        }
        ScoreError::Request {
            url: url.to_string(),
            cause,
        }
    }

    /// Whether a retry may help.
    fn is_transient(&self) -> bool {
        match self {
            ScoreError::Status { transient, .. } => *transient,
            ScoreError::Request { .. } => true,
            ScoreError::BadReply { .. } => false,
        }
    }
}

#[derive(Serialize)]
struct PredictRequest<'a> {
    instances: Vec<&'a [f64]>,
}

#[derive(Deserialize)]
struct PredictReply {
    predictions: Vec<serde_json::Value>,
}

/// Sends one batch and matches the predictions to its rows.
async fn score_batch(
    client: reqwest::Client,
    url: Arc<str>,
    rows: Vec<Row>,
    requests: Arc<AtomicU64>,
) -> Result<Vec<Scored>, ScoreError> {
    requests.fetch_add(1, Ordering::Relaxed);
    let body = PredictRequest {
        instances: rows.iter().map(|r| &r.features[..]).collect(),
    };
    let reply = client
        .post(&*url)
        .json(&body)
        .send()
        .await
        .map_err(|e| ScoreError::request(&url, &e))?;
    let status = reply.status();
    if !status.is_success() {
        let text = reply.text().await.unwrap_or_default();
        let body: String = text
            .trim()
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        return Err(ScoreError::Status {
            status: status.to_string(),
            transient: status.is_server_error()
                || status == reqwest::StatusCode::REQUEST_TIMEOUT
                || status == reqwest::StatusCode::TOO_MANY_REQUESTS,
            url: url.to_string(),
            body,
        });
    }
    let reply: PredictReply = reply.json().await.map_err(|e| ScoreError::BadReply {
        url: url.to_string(),
        problem: e.to_string(),
    })?;
    if reply.predictions.len() != rows.len() {
        return Err(ScoreError::BadReply {
            url: url.to_string(),
            problem: format!(
                "{} predictions for {} rows",
                reply.predictions.len(),
                rows.len()
            ),
        });
    }
    Ok(rows
        .into_iter()
        .zip(reply.predictions)
        .map(|(row, p)| Scored {
            id: row.id,
            score: p.to_string(),
        })
        .collect())
}

/// The input's columns: which one is the id, which are features.
#[derive(Debug, Clone)]
struct Layout {
    id: usize,
    features: Vec<(usize, String)>,
    width: usize,
}

/// Reads the header of `path` and finds the columns.
fn layout(path: &Path) -> anyhow::Result<Layout> {
    let file =
        File::open(path).with_context(|| format!("cannot open input '{}'", path.display()))?;
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(file);
    let headers = reader
        .headers()
        .with_context(|| format!("cannot read the header row of '{}'", path.display()))?
        .clone();
    let names: Vec<String> = headers.iter().map(|h| h.trim().to_string()).collect();
    let Some(id) = names.iter().position(|h| h == "id") else {
        return Err(anyhow!(
            "input '{}' has no 'id' column; its columns are: {}",
            path.display(),
            names.join(", ")
        ));
    };
    let features: Vec<(usize, String)> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != id)
        .map(|(i, n)| (i, n.clone()))
        .collect();
    if features.is_empty() {
        return Err(anyhow!(
            "input '{}' has no feature column besides 'id'",
            path.display()
        ));
    }
    Ok(Layout {
        id,
        features,
        width: names.len(),
    })
}

/// The rows that could not be scored: how many, and the first few with their line.
#[derive(Debug, Default)]
struct BadRows {
    count: u64,
    first: Vec<(u64, String)>,
}

/// How many bad rows are reported one by one.
const BAD_ROWS_SHOWN: usize = 10;

/// About how many bytes the reader handles per call.
const READ_BUDGET: u64 = 64 * 1024;

/// Where a [`RowReader`] is, as saved in a snapshot: the CSV reader's place after the last
/// row it handed out, how many bad rows it skipped before, and the input's size then (a
/// resumed run refuses an input whose size changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct RowPosition {
    byte: u64,
    line: u64,
    record: u64,
    bad: u64,
    input_len: u64,
}

impl RowPosition {
    fn csv(&self) -> csv::Position {
        let mut p = csv::Position::new();
        p.set_byte(self.byte)
            .set_line(self.line)
            .set_record(self.record);
        p
    }
}

/// Reads the input's rows, skipping and recording the bad ones. Replayable: its position is
/// a byte offset into the input.
struct RowReader {
    path: PathBuf,
    layout: Layout,
    reader: Option<csv::Reader<File>>,
    /// Where the next row starts: after the last one handed out, or the end of the input.
    at: csv::Position,
    /// The input's size when it was opened.
    input_len: u64,
    record: csv::StringRecord,
    /// Shared with the command, which reports them. One instance reads, so its count is the
    /// job's.
    bad: Arc<Mutex<BadRows>>,
    bytes: Counter,
    bad_rows: Counter,
}

impl RowReader {
    fn new(path: PathBuf, layout: Layout, bad: Arc<Mutex<BadRows>>) -> Self {
        RowReader {
            path,
            layout,
            reader: None,
            at: csv::Position::new(),
            input_len: 0,
            record: csv::StringRecord::new(),
            bad,
            bytes: Counter::default(),
            bad_rows: Counter::default(),
        }
    }

    fn bad_rows(&self) -> std::sync::MutexGuard<'_, BadRows> {
        self.bad.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bad(&mut self, line: u64, reason: String) {
        self.bad_rows.increment();
        let mut bad = self.bad_rows();
        bad.count += 1;
        if bad.first.len() < BAD_ROWS_SHOWN {
            bad.first.push((line, reason));
        }
    }

    /// The row in `self.record`, or why it is bad.
    fn parse(&self) -> Result<Row, String> {
        let record = &self.record;
        if record.len() != self.layout.width {
            return Err(format!(
                "expected {} fields, found {}",
                self.layout.width,
                record.len()
            ));
        }
        let id = record.get(self.layout.id).unwrap_or("").trim();
        if id.is_empty() {
            return Err("the id is empty".to_string());
        }
        let mut features = Vec::with_capacity(self.layout.features.len());
        for (i, name) in &self.layout.features {
            let text = record.get(*i).unwrap_or("").trim();
            match text.parse::<f64>() {
                Ok(v) if v.is_finite() => features.push(v),
                _ => return Err(format!("column '{name}': '{text}' is not a finite number")),
            }
        }
        Ok(Row {
            id: id.to_string(),
            features,
        })
    }
}

impl SourceReader for RowReader {
    type Item = Row;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.bytes = ctx.metrics().counter("bytes");
        self.bad_rows = ctx.metrics().counter("bad_rows");
        let file = File::open(&self.path)?;
        self.input_len = file.metadata()?.len();
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .buffer_capacity(256 * 1024)
            .from_reader(file);
        reader.headers()?;
        self.bytes.add(reader.position().byte());
        self.at = reader.position().clone();
        self.reader = Some(reader);
        // A restarted job reads from the start (or seeks): the rows it skipped before count
        // again.
        *self.bad_rows() = BadRows::default();
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, Row>) -> Result<bool, BoxError> {
        let Some(mut reader) = self.reader.take() else {
            return Ok(true);
        };
        let start = reader.position().byte();
        let mut done = false;
        loop {
            match reader.read_record(&mut self.record) {
                Ok(false) => {
                    done = true;
                    break;
                }
                Ok(true) => match self.parse() {
                    Ok(row) => {
                        if !out.emit(row) {
                            break;
                        }
                    }
                    Err(reason) => {
                        let line = self.record.position().map_or(0, csv::Position::line);
                        self.bad(line, reason);
                    }
                },
                Err(e) if e.is_io_error() => return Err(e.into()),
                Err(e) => {
                    let line = e.position().map_or(0, csv::Position::line);
                    self.bad(line, e.to_string());
                }
            }
            if reader.position().byte() - start >= READ_BUDGET {
                break;
            }
        }
        self.bytes.add(reader.position().byte() - start);
        self.at = reader.position().clone();
        if !done {
            self.reader = Some(reader);
        }
        Ok(done)
    }

    fn is_cooperative(&self) -> bool {
        false
    }

    /// The byte offset, line and record number of the next row, and the bad rows so far.
    fn position(&self) -> Option<Vec<u8>> {
        let at = RowPosition {
            byte: self.at.byte(),
            line: self.at.line(),
            record: self.at.record(),
            bad: self.bad_rows().count,
            input_len: self.input_len,
        };
        Some(postcard::to_stdvec(&at).expect("a position always encodes"))
    }

    /// Seeks the input to the saved row; bad rows counted before it count again, and the
    /// ones reported before it are not reported twice.
    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        let at: RowPosition = postcard::from_bytes(position)
            .map_err(|e| format!("a damaged read position in the snapshot ({e})"))?;
        if at.input_len != self.input_len {
            return Err(format!(
                "input '{}' changed since the snapshot: {} bytes, then {}",
                self.path.display(),
                self.input_len,
                at.input_len
            )
            .into());
        }
        let header_end = self.at.byte();
        if at.byte < header_end || at.byte > self.input_len {
            return Err(format!(
                "the saved position, byte {}, is not in the rows of '{}' (bytes {header_end} to {})",
                at.byte,
                self.path.display(),
                self.input_len
            )
            .into());
        }
        let Some(reader) = self.reader.as_mut() else {
            return Err("the input is not open".into());
        };
        reader.seek(at.csv())?;
        self.at = at.csv();
        self.bytes.add(at.byte - header_end);
        let mut bad = self.bad_rows();
        bad.count = at.bad;
        bad.first.retain(|(line, _)| *line < at.line);
        Ok(())
    }
}

/// Runs `weir score`.
pub fn score(args: ScoreArgs) -> anyhow::Result<()> {
    let ui = args.ui.start()?;
    let layout = layout(&args.input)?;
    let total_bytes = std::fs::metadata(&args.input).map_or(0, |m| m.len());
    let batch_size = args.batch_size as usize;
    let parallelism = args.parallelism as usize;
    let attempt_timeout = Duration::from_millis(args.timeout_ms);
    let retry = RetryStrategy::exponential(
        Duration::from_millis(100),
        2.0,
        Duration::from_secs(2),
        args.retries + 1,
    );
    // Every attempt may take its timeout, with the backoff pauses between them.
    let pauses: Duration = (2..=args.retries + 1)
        .filter_map(|n| retry.delay_before(n))
        .sum();
    let overall = attempt_timeout * (args.retries + 1) + pauses + Duration::from_secs(1);
    let options = if args.unordered {
        AsyncOptions::unordered()
    } else {
        AsyncOptions::ordered()
    }
    .timeout(overall)
    .retry(retry)
    .retry_if(|e| {
        e.downcast_ref::<ScoreError>()
            .is_none_or(ScoreError::is_transient)
    })
    .describe_with(|row: &Row| format!("id {}", row.id))
    // Rows sent but not yet written are saved in snapshots and sent again after a restore.
    .snapshot_inputs();

    let client = ServiceFactory::new(move || {
        reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(parallelism)
            .tcp_nodelay(true)
            .timeout(attempt_timeout)
            .build()
    });
    let url: Arc<str> = Arc::from(args.url.as_str());
    let requests = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(Mutex::new(BadRows::default()));

    let path = args.input.clone();
    let reader_bad = Arc::clone(&bad);
    let source = BatchSource::new(
        format!("csv-rows({})", args.input.display()),
        Some(1),
        move |_| RowReader::new(path.clone(), layout.clone(), Arc::clone(&reader_bad)),
    )
    .with_size_hint(total_bytes);

    let p = Pipeline::new();
    let call_requests = Arc::clone(&requests);
    p.read_from(source)
        .map_async_batched_using(
            &client,
            batch_size,
            Duration::from_millis(args.max_wait_ms),
            parallelism,
            options,
            move |client: &reqwest::Client, rows: Vec<Row>| {
                score_batch(
                    client.clone(),
                    Arc::clone(&url),
                    rows,
                    Arc::clone(&call_requests),
                )
            },
        )
        .named("score")
        .local_parallelism(1)
        .write_to(sinks::csv::records::<Scored>(&args.output));

    let executor = Executor::new(ExecutorConfig {
        workers: 1,
        ..Default::default()
    })
    .context("cannot start the worker thread")?;
    let started = Instant::now();
    // The same input and output give the same name, so a rerun finds its snapshots.
    let config = JobConfig::default()
        .with_name(job_name(
            "score",
            &[path_part(&args.input), path_part(&args.output)],
        ))
        .with_default_parallelism(1);
    let name = config.name.clone();
    let snapshots = args.snapshots.snapshots();
    let job = Snapshots::submit(snapshots.as_ref(), &p, &executor, config)
        .context("cannot start scoring")?;
    if let Some(ui) = &ui {
        ui.watch_job(&job);
    }
    let metrics = progress::watch(&job, total_bytes, "bytes", progress::Unit::Bytes);
    let outcome = Snapshots::join(snapshots.as_ref(), job);
    let bad = bad.lock().unwrap_or_else(|e| e.into_inner());
    report_bad_rows(&args.input, &bad);
    match outcome {
        Err(e) => return Err(scoring_failure(e)),
        Ok(Ended::Stopped) => return Ok(()),
        Ok(Ended::Completed) => {}
    }
    Snapshots::finished(snapshots.as_ref(), &name, "scoring")?;
    let elapsed = started.elapsed().as_secs_f64();
    // This run's rows; a resumed run's committed rows were scored before.
    let rows = progress::counter(&metrics, "records_written");
    let bad_rows = bad.count;
    outln!(
        "score: {rows} rows scored in {elapsed:.2} s ({:.0} rows/s); {} requests of up to {batch_size} rows, {parallelism} in flight; {bad_rows} bad rows skipped",
        rows as f64 / elapsed.max(1e-9),
        requests.load(Ordering::Relaxed),
    )?;
    Ok(())
}

/// Prints the bad rows to standard error, the first few with their line.
fn report_bad_rows(input: &Path, bad: &BadRows) {
    for (line, reason) in &bad.first {
        eprintln!("warning: {}:{line}: skipped: {reason}", input.display());
    }
    if bad.count > bad.first.len() as u64 {
        eprintln!(
            "warning: {} more bad rows skipped",
            bad.count - bad.first.len() as u64
        );
    }
}

/// The job's failure as one line: the async stage's error when there is one (it names the
/// batch's first id), else the whole chain.
fn scoring_failure(e: anyhow::Error) -> anyhow::Error {
    if let Some(a) = e.chain().find_map(|c| c.downcast_ref::<AsyncError>()) {
        return anyhow!("scoring failed: {a}");
    }
    e.context("scoring failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads everything `reader` has left.
    fn drain(reader: &mut RowReader) -> Vec<String> {
        let mut rows = Vec::new();
        while !reader.read(&mut Emitter::unbounded(&mut rows)).unwrap() {}
        rows.into_iter().map(|r| r.id).collect()
    }

    fn opened(path: &Path) -> (RowReader, Arc<Mutex<BadRows>>) {
        let bad = Arc::new(Mutex::new(BadRows::default()));
        let mut reader = RowReader::new(path.to_owned(), layout(path).unwrap(), Arc::clone(&bad));
        reader
            .open(&ProcessorContext::new("test", 0, 1, 0))
            .unwrap();
        (reader, bad)
    }

    #[test]
    fn a_seek_resumes_after_the_last_row_handed_out_with_the_bad_rows_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        std::fs::write(&path, "id,a\nr0,1\nr1,x\nr2,2\nr3,3\nr4,y\nr5,5\n").unwrap();
        let (mut reader, _) = opened(&path);
        let mut rows = Vec::new();
        // Two rows fit: r0, then r1 is bad and r2 fills the batch.
        assert!(!reader.read(&mut Emitter::new(&mut rows, 2)).unwrap());
        assert_eq!(rows.len(), 2);
        let saved = reader.position().unwrap();

        let (mut resumed, bad) = opened(&path);
        resumed.seek(&saved).unwrap();
        assert_eq!(drain(&mut resumed), ["r3", "r5"]);
        {
            let bad = bad.lock().unwrap();
            assert_eq!(bad.count, 2, "the bad row before the position counts");
            assert_eq!(
                bad.first,
                [(6, "column 'a': 'y' is not a finite number".into())]
            );
        }

        // At the end, the position says so.
        let end = resumed.position().unwrap();
        let (mut done, _) = opened(&path);
        done.seek(&end).unwrap();
        assert!(drain(&mut done).is_empty());
    }

    #[test]
    fn a_changed_input_or_a_damaged_position_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        std::fs::write(&path, "id,a\nr0,1\nr1,2\n").unwrap();
        let (mut reader, _) = opened(&path);
        drain(&mut reader);
        let saved = reader.position().unwrap();
        std::fs::write(&path, "id,a\nr0,1\nr1,2\nr2,3\n").unwrap();
        let (mut changed, _) = opened(&path);
        let e = changed.seek(&saved).unwrap_err().to_string();
        assert!(e.contains("changed since the snapshot"), "{e}");
        let e = changed.seek(&[0xff]).unwrap_err().to_string();
        assert!(e.contains("damaged read position"), "{e}");
    }
}
