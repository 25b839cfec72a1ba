//! Word count on the ~100 MB Zipf corpus: `weir run wordcount` at parallelism 1 and 2 against
//! a tight hand-written Rust loop doing the same reading, tokenising, counting, sorting and
//! writing on as many threads (see [`hand_loop`]).
//!
//! ```text
//! cargo bench --bench wordcount                      # generates the corpus on first use
//! cargo bench --bench wordcount -- --corpus FILE --runs 5
//! ```
//!
//! Every measurement is a child process (the `weir` binary, or this bench re-invoked as the
//! hand loop), timed wall-clock from spawn to exit; the bench runs `--runs` rounds of one run
//! of each, and reports each one's best run (and its peak RSS, the child's `ru_maxrss`) and
//! its median time. The outputs of all runs must be byte-identical, or the bench fails. The
//! machine is shared: each run starts once other work keeps less than 10% of the CPU time
//! busy (or after 30 s of waiting); the column `others` is the share of the CPU time other
//! work kept busy just before the best run.

mod support;

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rustc_hash::FxHashMap;
use weir_cli::jobs::wordcount::{Word, format_line, lowercase, next_word};

const DEFAULT_CORPUS: &str = "target/corpus/zipf-100mb.txt";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--hand-loop") {
        let threads: usize = args[2].parse().expect("thread count");
        hand_loop(Path::new(&args[3]), Path::new(&args[4]), threads).expect("hand loop");
        return;
    }
    let flag = |name: &str| support::flag(&args, name);
    let corpus = PathBuf::from(flag("--corpus").unwrap_or_else(|| DEFAULT_CORPUS.to_string()));
    let runs: usize = flag("--runs").map_or(3, |r| r.parse().expect("--runs N"));
    if !corpus.exists() {
        eprintln!("generating {} ...", corpus.display());
        let status = Command::new("python3")
            .args(["scripts/gen-corpus.py", "--output"])
            .arg(&corpus)
            .status()
            .expect("python3 runs scripts/gen-corpus.py");
        assert!(status.success(), "corpus generation failed");
    }
    let bytes = std::fs::metadata(&corpus).expect("corpus").len();
    let out_dir = tempfile::tempdir().expect("temp dir");
    let weir = env!("CARGO_BIN_EXE_weir");
    let me = std::env::current_exe().expect("own path");

    println!(
        "word count, {} ({:.1} MB), best of {runs} rounds, the runs of a round alternated",
        corpus.display(),
        bytes as f64 / 1e6
    );
    let configs = [
        ("hand loop", 1, false),
        ("hand loop", 2, false),
        ("weir", 1, true),
        ("weir", 2, true),
    ];
    // Per configuration, every run's (wall time, peak RSS, others' CPU share before it).
    let mut runs_of: Vec<Vec<(Duration, u64, f64)>> = vec![Vec::new(); configs.len()];
    // Rounds of one run per configuration: a spell of load on the shared machine then
    // falls on every configuration alike, not on one.
    for _ in 0..runs {
        for (&(name, threads, is_weir), runs) in configs.iter().zip(&mut runs_of) {
            let output = output_of(out_dir.path(), name, threads);
            let mut cmd = if is_weir {
                let mut c = Command::new(weir);
                c.args(["run", "wordcount", "--input"])
                    .arg(&corpus)
                    .arg("--output")
                    .arg(&output)
                    .args(["--parallelism", &threads.to_string()]);
                c
            } else {
                let mut c = Command::new(&me);
                c.args(["--hand-loop", &threads.to_string()])
                    .arg(&corpus)
                    .arg(&output);
                c
            };
            // The machine is shared: start when other work leaves the CPUs mostly idle.
            let others = support::wait_for_quiet(0.10, Duration::from_secs(30));
            let (elapsed, rss) = support::time_child(cmd.stdout(std::process::Stdio::null()));
            runs.push((elapsed, rss, others));
        }
    }
    let mut reference: Option<Vec<u8>> = None;
    for &(name, threads, _) in &configs {
        let produced = std::fs::read(output_of(out_dir.path(), name, threads)).expect("output");
        match &reference {
            None => reference = Some(produced),
            Some(r) => assert!(
                *r == produced,
                "{name} at {threads} thread(s) produced different output"
            ),
        }
    }
    // The best run of each configuration, and its median time.
    let results: Vec<_> = configs
        .iter()
        .zip(&runs_of)
        .map(|(&(name, threads, _), runs)| {
            let best = *runs.iter().min_by_key(|r| r.0).expect("a run");
            let mut times: Vec<Duration> = runs.iter().map(|r| r.0).collect();
            times.sort();
            (name, threads, best, times[times.len() / 2])
        })
        .collect();
    println!(
        "{:<10} {:>7} {:>9} {:>9} {:>13} {:>15} {:>7} {:>10} {:>15}",
        "run",
        "threads",
        "seconds",
        "MB/s",
        "peak RSS MiB",
        "vs hand loop",
        "others",
        "median s",
        "median vs hand"
    );
    for &(name, threads, (time, rss, others), median) in &results {
        let hand = results
            .iter()
            .find(|r| r.0 == "hand loop" && r.1 == threads)
            .expect("hand loop ran");
        println!(
            "{:<10} {:>7} {:>9.3} {:>9.1} {:>13.1} {:>14.2}x {:>6.0}% {:>10.3} {:>14.2}x",
            name,
            threads,
            time.as_secs_f64(),
            bytes as f64 / 1e6 / time.as_secs_f64(),
            rss as f64 / 1024.0,
            hand.2.0.as_secs_f64() / time.as_secs_f64(),
            others * 100.0,
            median.as_secs_f64(),
            hand.3.as_secs_f64() / median.as_secs_f64()
        );
    }
}

/// Where the run `name` on `threads` threads writes its counts.
fn output_of(dir: &Path, name: &str, threads: usize) -> PathBuf {
    dir.join(format!("{}-{threads}.tsv", name.replace(' ', "-")))
}

/// The tight baseline, written as a good engineer would write word count by hand, on
/// `threads` threads: each thread counts the lines that start in its share of the bytes
/// (shares cut at line starts), reading them in blocks of [`BLOCK`] bytes of whole lines
/// into one reused buffer. A block that is valid UTF-8 is tokenised where it lies, without a
/// copy (a newline is a separator like any other); one that is not is decoded lossily, as
/// `weir run wordcount` decodes its lines. Words are found by the job's own `next_word` and
/// lowercased by its `lowercase` (borrowed from the block when already lowercase, else
/// written into one reused `Word`), and looked up as `&str` in the thread's own
/// `FxHashMap<Word, u64>`: a word costs no allocation unless it is new to the table, and the
/// key of a word of up to 24 bytes is stored inline. The threads' tables
/// are merged into the largest, sorted and written with the job's `format_line`.
fn hand_loop(input: &Path, output: &Path, threads: usize) -> std::io::Result<()> {
    let bounds = line_bounds(input, threads)?;
    let mut maps: Vec<FxHashMap<Word, u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = bounds
            .windows(2)
            .map(|range| {
                let (start, end) = (range[0], range[1]);
                s.spawn(move || count_range(input, start, end))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect::<std::io::Result<_>>()
    })?;
    maps.sort_by_key(|m| std::cmp::Reverse(m.len()));
    let mut maps = maps.into_iter();
    let mut total = maps.next().unwrap_or_default();
    for map in maps {
        for (word, count) in map {
            *total.entry(word).or_insert(0) += count;
        }
    }
    let mut sorted: Vec<(Word, u64)> = total.into_iter().collect();
    // Words are distinct, so an unstable sort gives the one order.
    sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut text = Vec::with_capacity(sorted.len() * 16);
    for entry in &sorted {
        format_line(entry, &mut text);
    }
    std::fs::write(output, text)
}

/// Bytes read at once by a hand-loop thread: whole lines up to this size are counted per
/// block.
const BLOCK: usize = 4 << 20;

/// `threads + 1` offsets cutting the file into `threads` shares of about equal size, each
/// cut moved forward to the start of a line.
fn line_bounds(input: &Path, threads: usize) -> std::io::Result<Vec<u64>> {
    let len = std::fs::metadata(input)?.len();
    let mut file = File::open(input)?;
    let mut bounds = vec![0];
    for t in 1..threads as u64 {
        let at = (len * t / threads as u64).max(*bounds.last().expect("a bound"));
        // The line that runs over `at` belongs to the share before: cut after its newline.
        let mut cut = len;
        if at > 0 && at < len {
            file.seek(SeekFrom::Start(at - 1))?;
            let mut reader = BufReader::new(&mut file);
            let mut skipped = Vec::new();
            cut = at - 1 + reader.read_until(b'\n', &mut skipped)? as u64;
        }
        bounds.push(cut.min(len));
    }
    bounds.push(len);
    Ok(bounds)
}

/// Counts the words of the bytes `[start, end)` of `input`, which start and end at a line's
/// start.
fn count_range(input: &Path, start: u64, end: u64) -> std::io::Result<FxHashMap<Word, u64>> {
    let mut file = File::open(input)?;
    file.seek(SeekFrom::Start(start))?;
    let mut file = file.take(end - start);
    let mut map: FxHashMap<Word, u64> = FxHashMap::default();
    let mut word = Word::default();
    let mut buf = vec![0u8; BLOCK];
    // `buf[..filled]` holds bytes read and not counted yet: the start of a cut line.
    let mut filled = 0;
    loop {
        while filled < buf.len() {
            match file.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let eof = filled < buf.len();
        let whole = if eof {
            filled
        } else {
            match memchr::memrchr(b'\n', &buf[..filled]) {
                Some(nl) => nl + 1,
                None => {
                    // A line longer than the buffer: read more of it.
                    buf.resize(buf.len() * 2, 0);
                    continue;
                }
            }
        };
        count_block(&buf[..whole], &mut map, &mut word);
        buf.copy_within(whole..filled, 0);
        filled -= whole;
        if eof {
            return Ok(map);
        }
    }
}

/// Counts the words of `bytes`, whole lines.
#[inline]
fn count_block(bytes: &[u8], map: &mut FxHashMap<Word, u64>, word: &mut Word) {
    match std::str::from_utf8(bytes) {
        Ok(text) => count_words(text, map, word),
        // Rare: lossy decoding of the whole block gives what decoding each line does, since
        // a newline always ends an invalid sequence.
        Err(_) => count_words(&String::from_utf8_lossy(bytes), map, word),
    }
}

#[inline]
fn count_words(text: &str, map: &mut FxHashMap<Word, u64>, word: &mut Word) {
    let mut at = 0;
    while let Some((start, end, case)) = next_word(text, &mut at) {
        let key = lowercase(&text[start..end], case, word);
        match map.get_mut(key) {
            Some(count) => *count += 1,
            None => {
                map.insert(Word::from(key), 1);
            }
        }
    }
}
