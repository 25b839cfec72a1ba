//! The chunked reader against whole-file parsing: order, positions, malformed lines, seeks.

use std::fs;
use std::path::PathBuf;

use proptest::prelude::*;

use super::*;
use crate::sources::files::LineReader;

/// Lines as text; a line that is not UTF-8 is malformed. `ranged`: whether the parsers
/// read byte ranges themselves (see [`ChunkFormat::lines_are_records`]) or the reader cuts
/// the chunks, as for CSV.
#[derive(Debug, Clone, Copy)]
struct Utf8Lines {
    ranged: bool,
}

/// Both ways of reading, for the tests that run each.
const BOTH: [Utf8Lines; 2] = [Utf8Lines { ranged: true }, Utf8Lines { ranged: false }];

impl ChunkFormat for Utf8Lines {
    type Item = String;
    type Error = std::str::Utf8Error;
    type Header = ();

    fn lines_are_records(&self) -> bool {
        self.ranged
    }

    fn parse(&self, chunk: &[u8], _: &(), out: &mut Parsed<String, Self::Error>) {
        for_each_line(chunk, |number, line, end| match std::str::from_utf8(line) {
            Ok(text) => out.push(text.to_owned(), end),
            Err(e) => out.push_malformed(number, e, end),
        });
    }
}

/// Panics on a line `boom`.
struct Fragile;

impl ChunkFormat for Fragile {
    type Item = ();
    type Error = String;
    type Header = ();

    fn parse(&self, chunk: &[u8], _: &(), _: &mut Parsed<(), String>) {
        for_each_line(chunk, |_, line, _| assert_ne!(line, b"boom", "boom"));
    }
}

type Outcome = (Vec<String>, Vec<(PathBuf, u64)>);

/// Reads everything with `options`, in calls that take at most `batch` items.
fn chunked(path: &Path, lines: Utf8Lines, options: ChunkOptions, batch: usize) -> Outcome {
    let files = Arc::new(InputFiles::resolve(path).unwrap());
    let mut reader = ChunkedReader::new(Arc::new(lines), Arc::clone(&files), options);
    reader.open(0, 1);
    let (mut items, mut bad) = (Vec::new(), Vec::new());
    loop {
        let limit = items.len() + batch;
        let mut out = Emitter::new(&mut items, limit);
        if reader
            .read(&mut out, |p, line, _| bad.push((p.to_owned(), line)))
            .unwrap()
        {
            break;
        }
    }
    assert_eq!(reader.bytes_read(), files.total_bytes());
    (items, bad)
}

/// The single reader: the line reader, line by line.
fn line_by_line(path: &Path) -> Outcome {
    let mut reader = LineReader::new(Arc::new(InputFiles::resolve(path).unwrap()), true);
    reader.open(0, 1);
    let (mut items, mut bad) = (Vec::new(), Vec::new());
    while !reader
        .read(|line| {
            match std::str::from_utf8(line.bytes) {
                Ok(text) => items.push(text.to_owned()),
                Err(_) => bad.push((line.path.to_owned(), line.number)),
            }
            true
        })
        .unwrap()
    {}
    (items, bad)
}

/// Reads instance `index` of `count` in calls of at most `batch` items, taking the
/// position after each call with how many items and malformed lines came before it.
fn read_with_positions(
    files: &Arc<InputFiles>,
    (lines, options): (Utf8Lines, ChunkOptions),
    (index, count): (usize, usize),
    batch: usize,
) -> (Outcome, Vec<(usize, usize, Vec<u8>)>) {
    let mut reader = ChunkedReader::new(Arc::new(lines), Arc::clone(files), options);
    reader.open(index, count);
    let (mut items, mut bad) = (Vec::new(), Vec::new());
    let mut positions = vec![(0, 0, reader.position())];
    loop {
        let limit = items.len() + batch;
        let done = reader
            .read(&mut Emitter::new(&mut items, limit), |p, line, _| {
                bad.push((p.to_owned(), line))
            })
            .unwrap();
        positions.push((items.len(), bad.len(), reader.position()));
        if done {
            break;
        }
    }
    ((items, bad), positions)
}

/// A fresh reader of instance `index` of `count`, moved to `position`, read to the end.
fn resumed(
    files: &Arc<InputFiles>,
    (lines, options): (Utf8Lines, ChunkOptions),
    (index, count): (usize, usize),
    position: &[u8],
) -> Outcome {
    let mut reader = ChunkedReader::new(Arc::new(lines), Arc::clone(files), options);
    reader.open(index, count);
    reader.seek(position).unwrap();
    let (mut items, mut bad) = (Vec::new(), Vec::new());
    while !reader
        .read(&mut Emitter::unbounded(&mut items), |p, line, _| {
            bad.push((p.to_owned(), line))
        })
        .unwrap()
    {}
    (items, bad)
}

/// Resumes at every position of a read of `files` and checks that what follows is
/// exactly the rest: the items after it, the malformed lines after it, same numbers.
fn check_every_resume(
    files: &Arc<InputFiles>,
    first: (Utf8Lines, ChunkOptions),
    then: (Utf8Lines, ChunkOptions),
    share: (usize, usize),
    batch: usize,
) -> Outcome {
    let ((items, bad), positions) = read_with_positions(files, first, share, batch);
    for (k, b, position) in positions {
        let (rest, rest_bad) = resumed(files, then, share, &position);
        assert_eq!(
            rest,
            items[k..],
            "resumed after {k} items, {first:?} then {then:?}"
        );
        assert_eq!(
            rest_bad,
            bad[b..],
            "resumed after {k} items and {b} malformed"
        );
    }
    (items, bad)
}

fn content() -> impl Strategy<Value = Vec<u8>> {
    // Short and long lines (longer than the small chunks), LF or CRLF, with or without a
    // final newline, and invalid UTF-8 bytes anywhere.
    (
        prop::collection::vec(prop_oneof!["[a-z é]{0,6}", "[a-z]{20,90}"], 0..30),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec((any::<prop::sample::Index>(), 0x80u8..=0xff), 0..3),
    )
        .prop_map(|(lines, crlf, final_newline, invalid)| {
            let mut bytes = lines.join(if crlf { "\r\n" } else { "\n" }).into_bytes();
            if final_newline && !lines.is_empty() {
                bytes.push(b'\n');
            }
            for (at, byte) in invalid {
                let i = at.index(bytes.len() + 1);
                bytes.insert(i, byte);
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Whatever the threads and the chunk size, the items and the malformed lines with
    /// their numbers are those of a single reader going line by line.
    #[test]
    fn chunked_parsing_is_the_single_reader(
        files in prop::collection::vec(content(), 1..=3),
        threads in 1..=4usize,
        chunk_bytes in 1..48usize,
        batch in 1..50usize,
        ranged in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (i, bytes) in files.iter().enumerate() {
            fs::write(dir.path().join(format!("f{i}.txt")), bytes).unwrap();
        }
        let want = line_by_line(dir.path());
        let lines = Utf8Lines { ranged };
        let got = chunked(dir.path(), lines, ChunkOptions { threads, chunk_bytes }, batch);
        prop_assert_eq!(got, want);
    }

    /// A reader moved to the position taken after any call goes on with exactly the
    /// items and malformed lines (with their numbers) that came after it, across chunk
    /// and file boundaries, lines longer than a chunk and CRLF, whatever the threads
    /// and chunk sizes before and after; together, a single reader's.
    #[test]
    fn a_seek_resumes_after_the_last_item_handed_out(
        files in prop::collection::vec(content(), 1..=4),
        threads in (1..=3usize, 1..=3usize),
        chunk_bytes in (1..48usize, 1..48usize),
        batch in 1..8usize,
        count in 1..=2usize,
        ranged in (any::<bool>(), any::<bool>()),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (i, bytes) in files.iter().enumerate() {
            fs::write(dir.path().join(format!("f{i}.txt")), bytes).unwrap();
        }
        let input = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        let first = (
            Utf8Lines { ranged: ranged.0 },
            ChunkOptions { threads: threads.0, chunk_bytes: chunk_bytes.0 },
        );
        let then = (
            Utf8Lines { ranged: ranged.1 },
            ChunkOptions { threads: threads.1, chunk_bytes: chunk_bytes.1 },
        );
        let mut all: Outcome = Default::default();
        for index in 0..count {
            let (items, bad) = check_every_resume(&input, first, then, (index, count), batch);
            all.0.extend(items);
            all.1.extend(bad);
        }
        if count == 1 {
            prop_assert_eq!(all, line_by_line(dir.path()));
        } else {
            prop_assert_eq!(all.0.len(), line_by_line(dir.path()).0.len());
        }
    }
}

#[test]
fn invalid_utf8_at_every_position_is_reported_on_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.txt");
    let base = b"ab\r\ncd\n\nefgh\r\nij".to_vec();
    for at in 0..=base.len() {
        let mut bytes = base.clone();
        bytes.insert(at, 0xff);
        fs::write(&path, &bytes).unwrap();
        let want = line_by_line(&path);
        assert_eq!(want.1.len(), 1, "one bad line with 0xff at {at}");
        for (threads, lines) in [1, 2, 4].into_iter().zip(BOTH.into_iter().cycle()) {
            for chunk_bytes in [1, 3, 7, 1 << 20] {
                let options = ChunkOptions {
                    threads,
                    chunk_bytes,
                };
                assert_eq!(
                    chunked(&path, lines, options, 2),
                    want,
                    "0xff at {at}, {lines:?}, {options:?}"
                );
            }
        }
    }
}

#[test]
fn empty_file_no_final_newline_and_a_line_longer_than_a_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.txt");
    let options = ChunkOptions {
        threads: 2,
        chunk_bytes: 8,
    };
    for lines in BOTH {
        fs::write(&path, "").unwrap();
        assert_eq!(chunked(&path, lines, options, 10), (vec![], vec![]));
        let long = "x".repeat(100);
        fs::write(&path, format!("a\r\n{long}\r\nb")).unwrap();
        let (items, bad) = chunked(&path, lines, options, 10);
        assert_eq!(items, ["a", long.as_str(), "b"]);
        assert!(bad.is_empty());
        fs::write(&path, "only\r").unwrap();
        assert_eq!(chunked(&path, lines, options, 10).0, ["only\r"]);
    }
}

#[test]
fn a_panicking_parser_fails_the_read_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.txt");
    fs::write(
        &path,
        "fine\n".repeat(1000) + "boom\n" + &"fine\n".repeat(1000),
    )
    .unwrap();
    for threads in [1, 3] {
        let files = Arc::new(InputFiles::resolve(&path).unwrap());
        let options = ChunkOptions {
            threads,
            chunk_bytes: 64,
        };
        let mut reader = ChunkedReader::new(Arc::new(Fragile), files, options);
        reader.open(0, 1);
        let mut items = Vec::new();
        let err = loop {
            match reader.read(&mut Emitter::unbounded(&mut items), |_, _, _| {}) {
                Ok(true) => panic!("read past a panic"),
                Ok(false) => {}
                Err(e) => break e,
            }
        };
        let text = err.to_string();
        assert!(text.contains("a.txt") && text.contains("boom"), "{text}");
        // Dropping the reader joins its parser threads.
        drop(reader);
    }
}

#[test]
fn a_seek_resumes_after_a_long_line_crlf_and_malformed_lines() {
    let dir = tempfile::tempdir().unwrap();
    let long = "y".repeat(300);
    fs::write(
        dir.path().join("a.txt"),
        [&b"a\r\nb\xff\r\n"[..], long.as_bytes(), b"\r\n\r\nc\r\n"].concat(),
    )
    .unwrap();
    let mut b = b"d\n\xfe\n".to_vec();
    b.extend_from_slice(&b"e\n".repeat(100));
    b.extend_from_slice(b"f\xff");
    fs::write(dir.path().join("b.txt"), b).unwrap();
    let input = Arc::new(InputFiles::resolve(dir.path()).unwrap());
    let want = line_by_line(dir.path());
    let lines: Vec<u64> = want.1.iter().map(|(_, l)| *l).collect();
    assert_eq!(lines, [2, 2, 103]);
    for threads in [1, 2, 4] {
        for chunk_bytes in [1, 5, 64, 1 << 20] {
            for lines in BOTH {
                let options = ChunkOptions {
                    threads,
                    chunk_bytes,
                };
                let reading = (lines, options);
                let got = check_every_resume(&input, reading, reading, (0, 1), 3);
                assert_eq!(got, want, "{lines:?}, {options:?}");
            }
        }
    }
}

/// A chunk of thousands of lines is parsed into pieces of `PIECE` items, each handed out
/// whole when it fits the emitter's empty batch (as on a read-ahead thread) and item by
/// item when it does not: either way the items, the malformed lines (placed here at the
/// pieces' edges) and the positions are those of the single reader.
#[test]
fn chunks_of_many_pieces_are_handed_out_as_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.txt");
    let mut content = Vec::new();
    for i in 0..5000 {
        if matches!(i, 0 | 1023 | 1024 | 2048 | 2049 | 4999) {
            content.extend_from_slice(b"\xff\n");
        }
        content.extend_from_slice(format!("{i}\n").as_bytes());
    }
    content.extend_from_slice(b"\xfe\n");
    fs::write(&path, &content).unwrap();
    let input = Arc::new(InputFiles::resolve(&path).unwrap());
    let want = line_by_line(&path);
    assert_eq!((want.0.len(), want.1.len()), (5000, 7));
    for (threads, lines) in [1, 2].into_iter().zip(BOTH) {
        let options = ChunkOptions {
            threads,
            chunk_bytes: 1 << 20,
        };
        for batch in [1, 7, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE] {
            // Each read into a fresh batch, so that a piece that fits becomes it.
            let mut reader = ChunkedReader::new(Arc::new(lines), Arc::clone(&input), options);
            reader.open(0, 1);
            let (mut items, mut bad) = (Vec::new(), Vec::new());
            let mut positions = Vec::new();
            loop {
                let mut fresh = Vec::with_capacity(batch);
                let done = reader
                    .read(&mut Emitter::new(&mut fresh, batch), |p, line, _| {
                        bad.push((p.to_owned(), line))
                    })
                    .unwrap();
                assert!(
                    fresh.len() <= batch,
                    "{} items in a batch of {batch}",
                    fresh.len()
                );
                items.append(&mut fresh);
                positions.push((items.len(), bad.len(), reader.position()));
                if done {
                    break;
                }
            }
            assert!(
                items == want.0 && bad == want.1,
                "{options:?}, batch {batch}"
            );
            if batch >= PIECE - 1 {
                for (k, b, position) in positions {
                    let (rest, rest_bad) = resumed(&input, (lines, options), (0, 1), &position);
                    assert!(rest == items[k..], "resumed after {k} items, batch {batch}");
                    assert_eq!(rest_bad, bad[b..], "resumed after {k} items, batch {batch}");
                }
            }
            // Into one growing batch, the pieces' items move into it.
            assert_eq!(
                chunked(&path, lines, options, batch),
                want,
                "{options:?}, batch {batch}"
            );
        }
    }
}

#[test]
fn the_position_is_of_the_items_handed_out_not_of_those_parsed_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.txt");
    let content: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    fs::write(&path, &content).unwrap();
    let input = Arc::new(InputFiles::resolve(&path).unwrap());
    let options = ChunkOptions {
        threads: 2,
        chunk_bytes: 16,
    };
    let lines = Utf8Lines { ranged: true };
    let mut reader = ChunkedReader::new(Arc::new(lines), Arc::clone(&input), options);
    reader.open(0, 1);
    let mut items = Vec::new();
    reader
        .read(&mut Emitter::new(&mut items, 1), |_, _, _| {})
        .unwrap();
    assert_eq!(items, ["1"]);
    // Chunks were parsed ahead; the position is just after line 1.
    let position = reader.position();
    let (at, _) = input.unwrap_position(&position).unwrap();
    let at: ChunkPosition = crate::sources::decode_position(at).unwrap();
    assert_eq!(
        at,
        ChunkPosition::In {
            file: 0,
            byte: 2,
            line: 2
        }
    );
    let rest = resumed(&input, (lines, options), (0, 1), &reader.position()).0;
    assert_eq!(rest.first().map(String::as_str), Some("2"));
    assert_eq!(rest.len(), 999);
}

#[test]
fn a_position_that_does_not_fit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for f in 0..3 {
        fs::write(dir.path().join(format!("{f}.txt")), "a\nb\n").unwrap();
    }
    let input = Arc::new(InputFiles::resolve(dir.path()).unwrap());
    let options = ChunkOptions::with_threads(1);
    let lines = Utf8Lines { ranged: true };
    let mut reader = ChunkedReader::new(Arc::new(lines), Arc::clone(&input), options);
    reader.open(1, 2);
    let refused = |reader: &mut ChunkedReader<Utf8Lines>, at: ChunkPosition| {
        let bytes = input.wrap_position(&crate::sources::encode_position(&at));
        matches!(reader.seek(&bytes), Err(SourceError::Position { .. }))
    };
    // Another instance's file, a file that is gone, an offset past the end, damage.
    assert!(refused(&mut reader, ChunkPosition::Next { file: 0 }));
    let gone = ChunkPosition::In {
        file: 5,
        byte: 0,
        line: 1,
    };
    assert!(refused(&mut reader, gone));
    let past = ChunkPosition::In {
        file: 1,
        byte: 5,
        line: 3,
    };
    assert!(refused(&mut reader, past));
    assert!(matches!(
        reader.seek(b"\xff\xff\xff"),
        Err(SourceError::Position { .. })
    ));
    // Past the last file: nothing left.
    let end = input.wrap_position(&crate::sources::encode_position(&ChunkPosition::Next {
        file: 3,
    }));
    reader.seek(&end).unwrap();
    let mut items: Vec<String> = Vec::new();
    assert!(
        reader
            .read(&mut Emitter::unbounded(&mut items), |_, _, _| {})
            .unwrap()
    );
    assert!(items.is_empty());
}

#[test]
fn instances_deal_out_whole_files() {
    let dir = tempfile::tempdir().unwrap();
    for f in 0..5 {
        fs::write(dir.path().join(format!("{f}.txt")), format!("{f}a\n{f}b\n")).unwrap();
    }
    let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
    let mut all = Vec::new();
    for index in 0..2 {
        let mut reader = ChunkedReader::new(
            Arc::new(Utf8Lines { ranged: true }),
            Arc::clone(&files),
            ChunkOptions::with_threads(2),
        );
        reader.open(index, 2);
        let mut items = Vec::new();
        while !reader
            .read(&mut Emitter::unbounded(&mut items), |_, _, _| {})
            .unwrap()
        {}
        all.push(items);
    }
    assert_eq!(all[0], ["0a", "0b", "2a", "2b", "4a", "4b"]);
    assert_eq!(all[1], ["1a", "1b", "3a", "3b"]);
}

/// Megabytes in chunks of the default size, with a line longer than three chunks: the
/// byte ranges after its start hold no record start, and come back empty.
#[test]
fn megabytes_with_a_line_longer_than_several_chunks_read_as_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.txt");
    let mut content = Vec::new();
    for i in 0..200_000 {
        content.extend_from_slice(format!("line {i}\n").as_bytes());
        if i == 100_000 {
            content.extend_from_slice(&b"z".repeat(3 << 20 | 17));
            content.extend_from_slice(b"\xff\r\n");
        }
    }
    assert!(content.len() > 5 << 20);
    fs::write(&path, &content).unwrap();
    let want = line_by_line(&path);
    assert_eq!((want.0.len(), want.1.len()), (200_000, 1));
    for lines in BOTH {
        for threads in [1, 2] {
            let options = ChunkOptions {
                threads,
                chunk_bytes: 1 << 20,
            };
            let got = chunked(&path, lines, options, PIECE);
            assert!(got == want, "{lines:?}, {options:?}");
        }
    }
}

/// A file cut short after it was opened fails the read, naming it, rather than ending early.
#[test]
fn a_file_cut_short_while_read_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.txt");
    fs::write(&path, "line\n".repeat(100)).unwrap();
    let files = Arc::new(InputFiles::resolve(&path).unwrap());
    // One thread: each chunk is read when the one before is handed out.
    let options = ChunkOptions {
        threads: 1,
        chunk_bytes: 50,
    };
    let mut reader = ChunkedReader::new(Arc::new(Utf8Lines { ranged: true }), files, options);
    reader.open(0, 1);
    let mut items = Vec::new();
    assert!(
        !reader
            .read(&mut Emitter::unbounded(&mut items), |_, _, _| {})
            .unwrap()
    );
    assert_eq!(items.len(), 10);
    fs::write(&path, "line\n").unwrap();
    let err = loop {
        match reader.read(&mut Emitter::unbounded(&mut items), |_, _, _| {}) {
            Ok(false) => {}
            Ok(true) => panic!("read to the end of a file cut short"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(
        err.contains("short.txt") && err.contains("shorter"),
        "{err}"
    );
}
