//! Weir batch sources of NEXMark events: the generator, split across instances, and the
//! replay of an event file.
//!
//! ```
//! use weir::prelude::*;
//! use weir_nexmark::generator::GeneratorConfig;
//! use weir_nexmark::{source, Event};
//!
//! let dir = tempfile::tempdir()?;
//! let file = dir.path().join("events.jsonl");
//!
//! // Write 1000 generated events as JSON Lines, in event order...
//! let p = Pipeline::new();
//! let config = GeneratorConfig { count: Some(1000), ..Default::default() };
//! p.read_from(source::generator(config, Some(1))?)
//!     .write_to(sinks::files::text_with(&file, Event::write_json_line));
//! p.run()?;
//!
//! // ... and replay them.
//! let p = Pipeline::new();
//! let (sink, out) = sinks::collection::list();
//! p.read_from(source::replay(&file)?).write_to(sink);
//! p.run()?;
//! assert_eq!(out.take().len(), 1000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Generator source
//!
//! [`generator`] runs as fast as it is driven: the rate sets the event times only. Instance
//! `i` of `n` generates event numbers `i`, `i + n`, `i + 2n`, ... so the instances together
//! generate each event exactly once and their times advance at the same pace. It registers
//! the counter `events`.
//!
//! # Replay source
//!
//! [`replay`] reads an event file (or the files of a directory or glob, one after the other)
//! with one instance, in file order, as the README requires. A line that does not parse, a
//! blank one included, is counted in `malformed_records` and the first 20 are logged with
//! `tracing::warn!` with their file, line number and [`ParseError`]; the job goes on. It also
//! registers `events` (events read) and `bytes` (bytes of all lines read, for progress).
//!
//! The file is read in chunks of whole lines that a pool of threads parses in parallel
//! ([`weir::sources::chunked`]); the events come back in file order, so event time,
//! lateness and watermarks are those of a single reader, and so are the line numbers of the
//! malformed lines. [`stream_replay_with`] and [`replay_with`] set the threads, and which
//! string fields the events keep ([`ReplayOptions`]): a query that reads none of them
//! parses faster without their allocations.
//!
//! Both readers are public ([`GeneratorReader`], [`ReplayReader`]), so that a streaming
//! source can wrap them and stamp each event with [`Event::date_time`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir::core::Counter;
use weir::sources::chunked::{ChunkFormat, ChunkOptions, ChunkedReader, Parsed, for_each_line};
use weir::sources::files::{InputFiles, MalformedLog, SourceError};
use weir::sources::{Emitter, SourceReader};
use weir::stream::StreamSource;
use weir::{BatchSource, BoxError, ProcessorContext};

use crate::generator::{ConfigError, Events, Generator, GeneratorConfig};
use crate::model::Event;
use crate::parse::{KeptStrings, ParseError, parse_line_keeping, parse_str_keeping};

/// How many events a [`GeneratorReader`] emits per `read` call at most.
const STEP: usize = 4096;

/// A batch source of `config`'s events, generated as fast as the job takes them.
///
/// `parallelism` fixes the number of instances (`Some(1)` keeps the events in event-number
/// order, for writing a file); `None` runs one per worker. See the [module docs](self).
///
/// Cost: one [`Generator::event`] per event. Instances are cooperative.
///
/// # Errors
/// [`ConfigError::ZeroRate`] for a zero rate; [`ConfigError::Unbounded`] if `config.count`
/// is `None` (a batch source must end).
pub fn generator(
    config: GeneratorConfig,
    parallelism: Option<usize>,
) -> Result<BatchSource<Event>, ConfigError> {
    if config.count.is_none() {
        return Err(ConfigError::Unbounded);
    }
    let generator = Generator::new(config)?;
    Ok(BatchSource::new(
        "nexmark-generator",
        parallelism,
        move |_: &ProcessorContext| GeneratorReader::new(generator.clone()),
    ))
}

/// The reader behind [`generator`]: one instance's share of a [`Generator`]'s events.
///
/// With an unbounded count it never ends, which only a streaming source can use.
pub struct GeneratorReader {
    generator: Generator,
    events: Option<Events>,
    counter: Counter,
}

impl GeneratorReader {
    /// A reader of `generator`'s events. It takes its share in `open`; read without `open`,
    /// it generates every event.
    pub fn new(generator: Generator) -> Self {
        GeneratorReader {
            generator,
            events: None,
            counter: Counter::default(),
        }
    }

    /// The number of the event the next read starts with, if any is left.
    pub fn next_number(&self) -> Option<u64> {
        match &self.events {
            Some(events) => events.peek_number(),
            None => self.generator.iter().peek_number(),
        }
    }
}

impl SourceReader for GeneratorReader {
    type Item = Event;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.events = Some(
            self.generator
                .instance(ctx.global_index() as u64, ctx.total_parallelism() as u64),
        );
        self.counter = ctx.metrics().counter("events");
        Ok(())
    }

    #[inline]
    fn read(&mut self, out: &mut Emitter<'_, Event>) -> Result<bool, BoxError> {
        let events = self.events.get_or_insert_with(|| self.generator.iter());
        let budget = STEP.min(out.room()).max(1);
        let mut n = 0;
        let mut done = false;
        while n < budget {
            match events.next() {
                Some(e) => {
                    n += 1;
                    if !out.emit(e) {
                        break;
                    }
                }
                None => {
                    done = true;
                    break;
                }
            }
        }
        self.counter.add(n as u64);
        Ok(done || events.peek_number().is_none())
    }

    /// The number of the next event (`u64::MAX` once every event was made), 8 bytes.
    fn position(&self) -> Option<Vec<u8>> {
        Some(
            self.next_number()
                .unwrap_or(u64::MAX)
                .to_le_bytes()
                .to_vec(),
        )
    }

    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        let number = <[u8; 8]>::try_from(position)
            .map(u64::from_le_bytes)
            .map_err(|_| "a damaged generator position")?;
        let events = self.events.get_or_insert_with(|| self.generator.iter());
        if !events.seek(number) {
            return Err(
                format!("event {number} is not this instance's: the parallelism changed").into(),
            );
        }
        Ok(())
    }
}

/// A stream source of `config`'s events, each with its `date_time` as native event time.
/// With `wall_rate`, at most that many events per second of wall-clock time leave the source
/// (all instances together); without, as fast as the job takes them. `config.count: None`
/// makes it endless. Runs one instance per worker.
///
/// # Errors
/// [`ConfigError::ZeroRate`] for a zero rate.
pub fn stream_generator(
    config: GeneratorConfig,
    wall_rate: Option<u64>,
) -> Result<StreamSource<Event>, ConfigError> {
    let generator = Generator::new(config)?;
    let source = match wall_rate {
        Some(rate) => StreamSource::new("nexmark-generator", None, move |_: &ProcessorContext| {
            weir::sources::stream::throttled(GeneratorReader::new(generator.clone()), rate)
        }),
        None => StreamSource::new("nexmark-generator", None, move |_: &ProcessorContext| {
            GeneratorReader::new(generator.clone())
        }),
    };
    Ok(source.with_native_timestamps(Event::date_time))
}

/// How a replay cuts, parses and keeps its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayOptions {
    /// The parser threads and the chunk size.
    pub chunks: ChunkOptions,
    /// The string fields the events keep; the others are checked, then left empty. Default:
    /// all. [`KeptStrings::for_query`] keeps what a query reads.
    pub strings: KeptStrings,
    /// At most this many events per second of wall-clock time, for a run a person can watch
    /// (or kill and resume); the events keep the times the file gives them. Default: `None`,
    /// as fast as the job takes them.
    pub wall_rate: Option<u64>,
}

impl From<ChunkOptions> for ReplayOptions {
    /// Cut and parsed as `chunks` says, every string kept.
    fn from(chunks: ChunkOptions) -> Self {
        ReplayOptions {
            chunks,
            strings: KeptStrings::ALL,
            wall_rate: None,
        }
    }
}

/// A stream source that replays the NEXMark event file(s) at `path` in file order, from one
/// instance, each event with its `date_time` as native event time: the README's "one source
/// with one watermark for all event types". Malformed lines as for [`replay`]. The lines are
/// parsed on every core (see the [module docs](self)), so the source is declared
/// [pooled](weir::stream::StreamSource::with_pooled_parsing): a query's filters and the
/// accumulate step of its aggregations run in the source's vertex, as they would in a loop
/// reading the parsed events, and only their output is dealt out to the workers.
///
/// # Errors
/// As [`replay`].
pub fn stream_replay(path: impl AsRef<Path>) -> Result<StreamSource<Event>, SourceError> {
    stream_replay_with(path, ReplayOptions::default())
}

/// [`stream_replay`], with the file cut, parsed and kept as `options` say: `threads: 1`
/// parses on the reading thread alone.
///
/// # Errors
/// As [`replay`].
pub fn stream_replay_with(
    path: impl AsRef<Path>,
    options: impl Into<ReplayOptions>,
) -> Result<StreamSource<Event>, SourceError> {
    let path = path.as_ref();
    let options = options.into();
    let files = Arc::new(InputFiles::resolve(path)?);
    let name = format!("nexmark-replay({})", path.display());
    let source = match options.wall_rate {
        Some(rate) => StreamSource::new(name, Some(1), move |_: &ProcessorContext| {
            weir::sources::stream::throttled(
                ReplayReader::with_options(Arc::clone(&files), options),
                rate,
            )
        }),
        None => StreamSource::new(name, Some(1), move |_: &ProcessorContext| {
            ReplayReader::with_options(Arc::clone(&files), options)
        }),
    };
    Ok(source
        .with_native_timestamps(Event::date_time)
        .with_pooled_parsing(options.chunks.threads > 1))
}

/// A batch source that replays the NEXMark event file(s) at `path`: a file, a directory (its
/// files sorted by name) or a glob pattern, as for
/// [`weir::sources::files::text`]. One instance (parallelism `Some(1)`) hands out every
/// event in file order; the lines are parsed on every core. See the [module docs](self) for
/// malformed lines and counters. With more than one parser thread it is declared
/// [pooled](weir::sources::BatchSource::with_pooled_parsing), as [`stream_replay`] is.
///
/// Cost: one strict parse per line ([`parse_line`](crate::parse_line)), spread over the parser threads; file
/// reads of 1 MiB chunks. The instance is non-cooperative (file reads may block).
///
/// # Errors
/// [`SourceError::NotFound`], [`SourceError::NoMatch`], [`SourceError::BadPattern`] or
/// [`SourceError::Io`] if the input cannot be listed. A read failure while the job runs
/// fails the job with a [`SourceError::Io`] naming the file.
pub fn replay(path: impl AsRef<Path>) -> Result<BatchSource<Event>, SourceError> {
    replay_with(path, ReplayOptions::default())
}

/// [`replay`], with the file cut, parsed and kept as `options` say.
///
/// # Errors
/// As [`replay`].
pub fn replay_with(
    path: impl AsRef<Path>,
    options: impl Into<ReplayOptions>,
) -> Result<BatchSource<Event>, SourceError> {
    let path = path.as_ref();
    let options = options.into();
    let files = Arc::new(InputFiles::resolve(path)?);
    let total = files.total_bytes();
    Ok(BatchSource::new(
        format!("nexmark-replay({})", path.display()),
        Some(1),
        move |_: &ProcessorContext| ReplayReader::with_options(Arc::clone(&files), options),
    )
    .with_size_hint(total)
    .with_pooled_parsing(options.chunks.threads > 1))
}

/// The NEXMark event file format for [`ChunkedReader`]: one event per line, parsed strictly
/// by [`parse_line_keeping`] with the strings it names; a blank line is malformed too.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventLines(pub KeptStrings);

impl ChunkFormat for EventLines {
    type Item = Event;
    type Error = ParseError;
    type Header = ();

    fn parse(&self, chunk: &[u8], _: &(), out: &mut Parsed<Event, ParseError>) {
        // About one event per 100 bytes or more.
        out.reserve(chunk.len() / 128);
        // One UTF-8 check for the chunk, cheaper than one per line; a chunk that fails it has
        // its lines checked one by one, so that the others still parse.
        let text = simdutf8::basic::from_utf8(chunk).ok();
        for_each_line(chunk, |number, line, end| {
            let parsed = match text {
                Some(text) => {
                    // Lines end at a `\n` (or `\r\n`), which are ASCII: on character boundaries.
                    let start = line.as_ptr() as usize - chunk.as_ptr() as usize;
                    parse_str_keeping(&text[start..start + line.len()], self.0)
                }
                None => parse_line_keeping(line, self.0),
            };
            match parsed {
                Ok(event) => out.push(event, end),
                Err(e) => out.push_malformed(number, e, end),
            }
        });
    }
}

/// The reader behind [`replay`]: parses the lines of its files into [`Event`]s on a pool of
/// threads and hands them out in file order, counting and logging the lines that do not parse.
pub struct ReplayReader {
    chunks: ChunkedReader<EventLines>,
    malformed: MalformedLog,
    events: Counter,
    bytes: Counter,
    /// Bytes already added to `bytes`.
    counted: u64,
}

impl ReplayReader {
    /// A reader of `files`, parsing on every core. It reads the share of the instance it is
    /// opened as: everything, for the single instance of [`replay`].
    pub fn new(files: Arc<InputFiles>) -> Self {
        Self::with_options(files, ReplayOptions::default())
    }

    /// A reader of `files`, cut, parsed and kept as `options` say.
    pub fn with_options(files: Arc<InputFiles>, options: impl Into<ReplayOptions>) -> Self {
        let options = options.into();
        ReplayReader {
            chunks: ChunkedReader::new(
                Arc::new(EventLines(options.strings)),
                files,
                options.chunks,
            ),
            malformed: MalformedLog::new(),
            events: Counter::default(),
            bytes: Counter::default(),
            counted: 0,
        }
    }

    /// The malformed lines seen so far: their count, and the file and line number of the
    /// first 20.
    pub fn malformed(&self) -> &MalformedLog {
        &self.malformed
    }
}

impl SourceReader for ReplayReader {
    type Item = Event;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.chunks
            .open(ctx.global_index(), ctx.total_parallelism());
        self.malformed.open(ctx);
        self.events = ctx.metrics().counter("events");
        self.bytes = ctx.metrics().counter("bytes");
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, Event>) -> Result<bool, BoxError> {
        let malformed = &mut self.malformed;
        let before = out.room();
        let done = self
            .chunks
            .read(out, |path, line, e| malformed.record(path, line, e));
        self.events.add((before - out.room()) as u64);
        let read = self.chunks.bytes_read();
        self.bytes.add(read - self.counted);
        self.counted = read;
        Ok(done?)
    }

    fn is_cooperative(&self) -> bool {
        false
    }

    /// A file, a byte offset and a line number, just after the last event handed out (not
    /// what the parser threads parsed ahead): see [`ChunkedReader::position`].
    fn position(&self) -> Option<Vec<u8>> {
        Some(self.chunks.position())
    }

    /// Cuts chunks from the position on; `bytes` counts what is read after it.
    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        self.chunks.seek(position)?;
        self.counted = self.chunks.bytes_read();
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.malformed.close();
        Ok(())
    }
}

/// A line of an event file that did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedLine {
    /// The file.
    pub path: PathBuf,
    /// Its 1-based line number in the file.
    pub line: u64,
    /// What is wrong with it.
    pub error: ParseError,
}

/// The content of event files read whole by [`read_events`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFile {
    /// The events, in file order.
    pub events: Vec<Event>,
    /// Every line that did not parse, in file order.
    pub malformed: Vec<MalformedLine>,
}

/// Reads the event file(s) at `path` (as for [`replay`]) whole into memory, outside any job:
/// for reference results and checks.
///
/// Cost: the whole file's events in memory (104 bytes per event, a box per person or auction, plus strings over 24
/// bytes); blocks on file reads.
///
/// # Errors
/// As [`replay`], and [`SourceError::Io`] if a read fails.
pub fn read_events(path: impl AsRef<Path>) -> Result<EventFile, SourceError> {
    read_events_with(path, ReplayOptions::default())
}

/// [`read_events`], with the file cut, parsed and kept as `options` say.
///
/// # Errors
/// As [`read_events`].
pub fn read_events_with(
    path: impl AsRef<Path>,
    options: impl Into<ReplayOptions>,
) -> Result<EventFile, SourceError> {
    let options = options.into();
    let files = Arc::new(InputFiles::resolve(path.as_ref())?);
    let mut chunks =
        ChunkedReader::new(Arc::new(EventLines(options.strings)), files, options.chunks);
    chunks.open(0, 1);
    let mut file = EventFile::default();
    let mut out = Emitter::unbounded(&mut file.events);
    while !chunks.read(&mut out, |path, line, error| {
        file.malformed.push(MalformedLine {
            path: path.to_owned(),
            line,
            error: error.clone(),
        });
    })? {}
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::parse::Found;

    fn drain<R: SourceReader>(reader: &mut R, index: usize, count: usize) -> Vec<R::Item> {
        let ctx = ProcessorContext::new("test", index, count, 0);
        reader.open(&ctx).unwrap();
        let mut out = Vec::new();
        while !reader.read(&mut Emitter::unbounded(&mut out)).unwrap() {}
        reader.close().unwrap();
        out
    }

    fn config(count: u64) -> GeneratorConfig {
        GeneratorConfig {
            count: Some(count),
            ..Default::default()
        }
    }

    #[test]
    fn generator_instances_split_the_events_exactly() {
        let g = Generator::new(config(10_001)).unwrap();
        let whole: Vec<Event> = g.iter().collect();
        for n in 1..=4 {
            let mut all: Vec<(u64, Event)> = Vec::new();
            for i in 0..n {
                let mut reader = GeneratorReader::new(g.clone());
                let events = drain(&mut reader, i, n);
                all.extend(
                    events
                        .into_iter()
                        .enumerate()
                        .map(|(k, e)| ((k * n + i) as u64, e)),
                );
            }
            all.sort_by_key(|(k, _)| *k);
            let all: Vec<Event> = all.into_iter().map(|(_, e)| e).collect();
            assert_eq!(all, whole, "{n} instances");
        }
    }

    #[test]
    fn generator_reader_stops_when_the_batch_is_full() {
        let mut reader = GeneratorReader::new(Generator::new(config(100)).unwrap());
        reader
            .open(&ProcessorContext::new("test", 0, 1, 0))
            .unwrap();
        let mut got = Vec::new();
        loop {
            let mut batch = Vec::new();
            let done = reader.read(&mut Emitter::new(&mut batch, 7)).unwrap();
            assert!(batch.len() <= 7);
            got.append(&mut batch);
            if done {
                break;
            }
        }
        assert_eq!(got.len(), 100);
        assert_eq!(reader.next_number(), None);
    }

    #[test]
    fn unbounded_batch_generator_is_refused() {
        let err = generator(
            GeneratorConfig {
                count: None,
                ..Default::default()
            },
            None,
        )
        .err();
        assert_eq!(err, Some(ConfigError::Unbounded));
    }

    const GOOD: &str = r#"{"type":"bid","auction":1000,"bidder":1001,"price":5321,"channel":"Google","url":"u","date_time":1436918400002,"extra":""}"#;

    #[test]
    fn replay_counts_malformed_lines_with_their_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let without_price = GOOD.replace(r#""price":5321,"#, "");
        let lines = [
            GOOD.to_owned(),                                            // 1
            "{not json".to_owned(),                                     // 2: bad JSON
            GOOD.replace(r#""type":"bid""#, r#""type":"sale""#),        // 3: unknown type
            without_price,                                              // 4: missing field
            GOOD.replace(r#""bidder":1001"#, r#""bidder":null"#),       // 5: null
            GOOD.replace(r#""channel":"Google""#, r#""channel":true"#), // 6: bool
            GOOD.replace(r#""price":5321"#, r#""price":1.0"#),          // 7: 1.0 for an integer
            GOOD.to_owned(),                                            // 8
            String::new(),                                              // 9: blank
            GOOD.replace(r#""price":5321"#, r#""price":7,"more":[1]"#), // 10: extra field, fine
        ];
        fs::write(&path, lines.join("\n") + "\r\n").unwrap();

        let files = Arc::new(InputFiles::resolve(&path).unwrap());
        let mut reader = ReplayReader::new(Arc::clone(&files));
        let ctx = ProcessorContext::new("test", 0, 1, 0);
        reader.open(&ctx).unwrap();
        let mut events = Vec::new();
        while !reader.read(&mut Emitter::unbounded(&mut events)).unwrap() {}
        let logged: Vec<u64> = reader
            .malformed()
            .logged()
            .iter()
            .map(|(_, l)| *l)
            .collect();
        reader.close().unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[2].as_bid().unwrap().price, 7);
        assert_eq!(logged, [2, 3, 4, 5, 6, 7, 9]);
        let metrics = ctx.metrics().snapshot();
        assert_eq!(metrics.counter("malformed_records"), 7);
        assert_eq!(metrics.counter("events"), 3);
        assert_eq!(metrics.counter("bytes"), fs::metadata(&path).unwrap().len());

        // Reading whole gives the same, with the reasons.
        let file = read_events(&path).unwrap();
        assert_eq!(file.events, events);
        let reasons: Vec<(u64, ParseError)> = file
            .malformed
            .into_iter()
            .map(|m| (m.line, m.error))
            .collect();
        assert!(matches!(reasons[0], (2, ParseError::NotJson { .. })));
        assert_eq!(
            reasons[1..],
            [
                (
                    3,
                    ParseError::UnknownType {
                        found: "sale".into()
                    }
                ),
                (
                    4,
                    ParseError::MissingField {
                        kind: crate::EventKind::Bid,
                        field: "price"
                    }
                ),
                (
                    5,
                    ParseError::WrongType {
                        field: "bidder",
                        expected: "an integer",
                        found: Found::Null
                    }
                ),
                (
                    6,
                    ParseError::WrongType {
                        field: "channel",
                        expected: "a string",
                        found: Found::Bool
                    }
                ),
                (
                    7,
                    ParseError::WrongType {
                        field: "price",
                        expected: "an integer",
                        found: Found::Float
                    }
                ),
                (
                    9,
                    ParseError::NotJson {
                        message: "EOF while parsing a value at line 1 column 0".into()
                    }
                ),
            ]
        );
    }

    #[test]
    fn replay_is_one_instance_in_file_order_and_survives_backpressure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let g = Generator::new(config(5000)).unwrap();
        let expected: Vec<Event> = g.iter().collect();
        let mut text = Vec::new();
        for e in &expected {
            e.write_json_line(&mut text);
        }
        fs::write(&path, text).unwrap();
        let source = replay(&path).unwrap();
        assert_eq!(source.size_hint(), Some(fs::metadata(&path).unwrap().len()));
        let files = Arc::new(InputFiles::resolve(&path).unwrap());
        let mut reader = ReplayReader::new(files);
        reader
            .open(&ProcessorContext::new("test", 0, 1, 0))
            .unwrap();
        let mut got = Vec::new();
        loop {
            let mut batch = Vec::new();
            let done = reader.read(&mut Emitter::new(&mut batch, 3)).unwrap();
            assert!(batch.len() <= 3);
            got.append(&mut batch);
            if done {
                break;
            }
        }
        assert_eq!(got, expected);
        assert_eq!(reader.malformed().count(), 0);
    }

    /// The replay parses ahead on threads, but its position is just after the last event
    /// handed out: a reader moved there goes on with exactly the events and malformed lines
    /// (same numbers) that came after it, across chunks, CRLF, a long line and two files.
    #[test]
    fn a_replay_resumed_at_any_position_goes_on_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let events: Vec<Event> = Generator::new(config(600)).unwrap().iter().collect();
        for (f, part) in events.chunks(300).enumerate() {
            let mut text = Vec::new();
            for (i, e) in part.iter().enumerate() {
                match i {
                    5 | 150 | 299 => text.extend_from_slice(b"{\"bid\":broken\r\n"),
                    9 => {
                        text.extend_from_slice(&[b'x'; 3000]);
                        text.push(b'\n');
                    }
                    _ => {}
                }
                e.write_json_line(&mut text);
                if i % 3 == 0 {
                    text.pop();
                    text.extend_from_slice(b"\r\n");
                }
            }
            fs::write(dir.path().join(format!("{f}.jsonl")), text).unwrap();
        }
        let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        let options = ChunkOptions {
            threads: 2,
            chunk_bytes: 700,
        };
        let ctx = || ProcessorContext::new("test", 0, 1, 0);
        let mut reader = ReplayReader::with_options(Arc::clone(&files), options);
        reader.open(&ctx()).unwrap();
        let (mut got, mut positions) = (Vec::new(), Vec::new());
        for batch in (1..).map(|k| k % 23 + 1) {
            positions.push((
                got.len(),
                reader.malformed().logged().len(),
                reader.position(),
            ));
            let limit = got.len() + batch;
            if reader.read(&mut Emitter::new(&mut got, limit)).unwrap() {
                break;
            }
        }
        assert!(got == events, "{} events of {}", got.len(), events.len());
        let bad = reader.malformed().logged().to_vec();
        assert_eq!(bad.len(), 2 * 4);
        for (k, b, position) in positions {
            let mut resumed = ReplayReader::with_options(Arc::clone(&files), options);
            resumed.open(&ctx()).unwrap();
            resumed.seek(&position.unwrap()).unwrap();
            let mut rest = Vec::new();
            while !resumed.read(&mut Emitter::unbounded(&mut rest)).unwrap() {}
            assert!(rest == events[k..], "resumed after {k} events");
            assert_eq!(resumed.malformed().logged(), &bad[b..], "after {k} events");
        }
    }

    #[test]
    fn missing_file_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            replay(dir.path().join("nope.jsonl")),
            Err(SourceError::NotFound { .. })
        ));
        assert!(matches!(
            read_events(dir.path().join("nope.jsonl")),
            Err(SourceError::NotFound { .. })
        ));
    }
}
