//! Where a run's events come from: the generator, or a JSON Lines file read by the yardsticks.

use super::*;

/// Where a run's events come from.
#[derive(Debug, Clone)]
pub(crate) enum Input {
    Generator(GeneratorConfig),
    File {
        path: PathBuf,
        /// Its events' count and rate; with [`Origin::Generator`], their whole configuration.
        events: GeneratorConfig,
        origin: Origin,
    },
}

/// Which generator wrote an event file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// This project's (`weir nexmark generate`).
    Generator,
    /// The `nexmark` crate's, written apart from this project ([`independent_file`]).
    Independent,
}

impl Input {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Input::Generator(_) => "generator",
            Input::File { .. } => "file",
        }
    }

    /// The name, with the file's generator or string style when it is not the default.
    pub(crate) fn label(&self) -> String {
        if let Input::File {
            origin: Origin::Independent,
            ..
        } = self
        {
            return "file (from the independent nexmark crate's generator)".into();
        }
        match self.config().strings {
            StringStyle::Ascii => self.name().to_string(),
            strings => format!("{} ({strings} strings)", self.name()),
        }
    }

    /// The configuration of the events it holds.
    pub(crate) fn config(&self) -> &GeneratorConfig {
        match self {
            Input::Generator(c) | Input::File { events: c, .. } => c,
        }
    }

    pub(crate) fn events(&self) -> u64 {
        self.config().count.expect("a finite input")
    }

    /// The flags that make a child read this input.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let c = self.config();
        let mut args = vec![
            "--input".into(),
            self.name().into(),
            "--count".into(),
            c.count.expect("finite").to_string(),
            "--event-rate".into(),
            c.rate.to_string(),
            "--strings".into(),
            c.strings.to_string(),
        ];
        if let Input::File { path, origin, .. } = self {
            args.extend(["--path".into(), path.display().to_string()]);
            if *origin == Origin::Independent {
                args.push("--independent".into());
            }
        }
        args
    }

    pub(crate) fn from_args(flag: &dyn Fn(&str) -> Option<String>) -> Input {
        let config = GeneratorConfig {
            count: Some(flag("--count").expect("--count").parse().expect("count")),
            rate: flag("--event-rate")
                .expect("--event-rate")
                .parse()
                .expect("rate"),
            strings: flag("--strings").map_or(StringStyle::Ascii, |s| s.parse().expect("strings")),
            ..GeneratorConfig::default()
        };
        match flag("--input").as_deref() {
            Some("generator") => Input::Generator(config),
            Some("file") => Input::File {
                path: flag("--path").expect("--path").into(),
                events: config,
                origin: if std::env::args().any(|a| a == "--independent") {
                    Origin::Independent
                } else {
                    Origin::Generator
                },
            },
            other => panic!("unknown input {other:?}"),
        }
    }
}

/// What names the files of events with `strings`: nothing for the default.
pub(crate) fn strings_suffix(strings: StringStyle) -> String {
    match strings {
        StringStyle::Ascii => String::new(),
        other => format!("-{other}"),
    }
}

/// The event file of `config`, written by the generator on first use.
pub(crate) fn event_file(config: &GeneratorConfig) -> PathBuf {
    let dir = Path::new(DATA_DIR);
    std::fs::create_dir_all(dir).expect("bench data dir");
    let path = dir.join(format!(
        "nexmark-{}-rate{}-seed{}{}.jsonl",
        config.count.expect("finite"),
        config.rate,
        config.seed,
        strings_suffix(config.strings),
    ));
    if !path.exists() {
        eprintln!("writing {} ...", path.display());
        let tmp = path.with_extension("tmp");
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp).expect("create"));
        let mut line = Vec::with_capacity(1024);
        for e in Generator::new(config.clone()).expect("config").iter() {
            line.clear();
            e.write_json_line(&mut line);
            out.write_all(&line).expect("write event file");
        }
        out.flush().expect("flush event file");
        drop(out);
        std::fs::rename(&tmp, &path).expect("rename event file");
    }
    path
}

/// The file of the independent generator's first `count` events at `rate` events/s
/// ([`independent_nexmark`](super::independent_nexmark)), written on first use.
pub(crate) fn independent_file(count: u64, rate: u64) -> PathBuf {
    let dir = Path::new(DATA_DIR);
    std::fs::create_dir_all(dir).expect("bench data dir");
    let path = dir.join(format!("nexmark-rs-{count}-rate{rate}.jsonl"));
    if !path.exists() {
        eprintln!(
            "writing {} (the nexmark crate's generator) ...",
            path.display()
        );
        super::independent_nexmark::write_independent_file(count, rate, &path)
            .expect("write the independent event file");
    }
    path
}

/// The events of a JSON Lines file, parsed strictly, in file order; malformed lines are
/// counted.
pub(crate) struct FileEvents {
    pub(crate) reader: BufReader<File>,
    pub(crate) line: Vec<u8>,
    pub(crate) kept: KeptStrings,
    pub(crate) malformed: u64,
}

impl FileEvents {
    pub(crate) fn open(path: &Path, kept: KeptStrings) -> Self {
        FileEvents {
            reader: BufReader::with_capacity(256 * 1024, File::open(path).expect("event file")),
            line: Vec::with_capacity(1024),
            kept,
            malformed: 0,
        }
    }
}

impl Iterator for FileEvents {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            self.line.clear();
            if self
                .reader
                .read_until(b'\n', &mut self.line)
                .expect("read event file")
                == 0
            {
                return None;
            }
            let mut line = &self.line[..];
            if let Some(l) = line.strip_suffix(b"\n") {
                line = l.strip_suffix(b"\r").unwrap_or(l);
            }
            match parse_line_keeping(line, self.kept) {
                Ok(e) => return Some(e),
                Err(_) => self.malformed += 1,
            }
        }
    }
}

/// The events of a JSON Lines file parsed on `threads` threads, in file order, as a careful
/// engineer would write it without an engine: a reading thread cuts 1 MiB chunks at line
/// ends and deals them round-robin to the parser threads, and the events come back through
/// one bounded queue per parser, taken round-robin too, so in file order.
pub(crate) struct ParallelFileEvents {
    pub(crate) done: Vec<std::sync::mpsc::Receiver<(Vec<Event>, u64)>>,
    pub(crate) next: usize,
    pub(crate) current: std::vec::IntoIter<Event>,
    pub(crate) malformed: u64,
}

impl ParallelFileEvents {
    pub(crate) fn open(path: &Path, threads: usize, kept: KeptStrings) -> Self {
        use std::io::Read;
        use std::sync::mpsc::sync_channel;
        let mut jobs = Vec::new();
        let mut done = Vec::new();
        for _ in 0..threads {
            let (job_tx, job_rx) = sync_channel::<Vec<u8>>(2);
            let (done_tx, done_rx) = sync_channel(2);
            std::thread::spawn(move || {
                while let Ok(chunk) = job_rx.recv() {
                    let mut events = Vec::with_capacity(chunk.len() / 128);
                    let mut malformed = 0;
                    // Lines found with `memchr`, as the engine's chunks are: a byte-by-byte
                    // split cost a sixth of this loop's time.
                    for_each_line(&chunk, |_, line, _| match parse_line_keeping(line, kept) {
                        Ok(e) => events.push(e),
                        Err(_) => malformed += 1,
                    });
                    if done_tx.send((events, malformed)).is_err() {
                        return;
                    }
                }
            });
            jobs.push(job_tx);
            done.push(done_rx);
        }
        let mut file = File::open(path).expect("event file");
        std::thread::spawn(move || {
            let mut carry = Vec::new();
            for k in 0.. {
                let mut chunk = std::mem::take(&mut carry);
                // Read into the spare capacity, as the engine does: no zeroing first.
                chunk.reserve(1 << 20);
                let n = (&mut file)
                    .take(1 << 20)
                    .read_to_end(&mut chunk)
                    .expect("read event file");
                if n > 0
                    && let Some(end) = chunk.iter().rposition(|&b| b == b'\n')
                {
                    carry = chunk.split_off(end + 1);
                }
                if chunk.is_empty() {
                    return;
                }
                if jobs[k % jobs.len()].send(chunk).is_err() {
                    return;
                }
            }
        });
        ParallelFileEvents {
            done,
            next: 0,
            current: Vec::new().into_iter(),
            malformed: 0,
        }
    }
}

impl Iterator for ParallelFileEvents {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.current.next() {
                return Some(e);
            }
            let (events, malformed) = self.done[self.next % self.done.len()].recv().ok()?;
            self.next += 1;
            self.malformed += malformed;
            self.current = events.into_iter();
        }
    }
}
