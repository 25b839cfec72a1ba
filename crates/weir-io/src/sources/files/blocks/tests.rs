use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::super::TextReader;
use super::super::testing::{check_resume, run};
use super::*;

fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, content).unwrap();
    path
}

/// Every instance of `parallelism` run to the end: the blocks in instance order, and the
/// instances' counters `lines`, `bytes` and `invalid_utf8_lines` summed.
fn blocks_of(
    files: &Arc<InputFiles>,
    block_bytes: usize,
    parallelism: usize,
) -> (Vec<TextBlock>, [u64; 3]) {
    let mut blocks = Vec::new();
    let mut counters = [0; 3];
    for index in 0..parallelism {
        let reader = TextBlockReader::new(Arc::clone(files), block_bytes);
        let (out, ctx) = run(reader, index, parallelism);
        blocks.extend(out);
        let metrics = ctx.metrics().snapshot();
        for (sum, name) in counters
            .iter_mut()
            .zip(["lines", "bytes", "invalid_utf8_lines"])
        {
            *sum += metrics.counter(name);
        }
    }
    (blocks, counters)
}

/// What the line source reads from `files` at `parallelism`: the lines, and its counters.
fn lines_of(files: &Arc<InputFiles>, parallelism: usize) -> (Vec<String>, [u64; 3]) {
    let mut lines = Vec::new();
    let mut counters = [0; 3];
    for index in 0..parallelism {
        let (out, ctx) = run(TextReader::new(Arc::clone(files)), index, parallelism);
        lines.extend(out);
        let metrics = ctx.metrics().snapshot();
        for (sum, name) in counters
            .iter_mut()
            .zip(["lines", "bytes", "invalid_utf8_lines"])
        {
            *sum += metrics.counter(name);
        }
    }
    (lines, counters)
}

#[test]
fn blocks_hold_the_lines_the_line_source_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.txt", b"one\r\ntwo\n\nthr\xffee\r");
    let files = Arc::new(InputFiles::resolve(&path).unwrap());
    let (blocks, counters) = blocks_of(&files, 1 << 20, 1);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].as_str(), "one\r\ntwo\n\nthr\u{fffd}ee\r");
    assert_eq!(blocks[0].line_count(), 4);
    let lines: Vec<&str> = blocks[0].lines().collect();
    assert_eq!(lines, ["one", "two", "", "thr\u{fffd}ee\r"]);
    assert_eq!(counters, [4, 17, 1]);
    assert_eq!(lines_of(&files, 1).1, counters);
}

#[test]
fn a_block_ends_with_the_line_that_reaches_its_size_and_never_spans_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", b"aaaa\nbbbbbbbbbbbb\ncc\nd");
    write(dir.path(), "b.txt", b"e\n");
    let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
    let (blocks, _) = blocks_of(&files, 6, 1);
    let texts: Vec<&str> = blocks.iter().map(TextBlock::as_str).collect();
    // "aaaa\nb" reaches 6 bytes inside the second line, which ends the block.
    assert_eq!(texts, ["aaaa\nbbbbbbbbbbbb\n", "cc\nd", "e\n"]);
    let counts: Vec<u64> = blocks.iter().map(TextBlock::line_count).collect();
    assert_eq!(counts, [2, 2, 1]);
}

#[test]
fn empty_files_and_an_empty_directory_yield_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let empty_dir = Arc::new(InputFiles::resolve(dir.path()).unwrap());
    assert!(blocks_of(&empty_dir, 16, 3).0.is_empty());
    let path = write(dir.path(), "empty.txt", b"");
    let empty_file = Arc::new(InputFiles::resolve(&path).unwrap());
    assert_eq!(blocks_of(&empty_file, 16, 2), (Vec::new(), [0, 0, 0]));
    assert_eq!(
        text_blocks_placeholder("INPUT").name(),
        "text-blocks(INPUT)"
    );
}

#[test]
fn lines_longer_than_a_block_stay_whole() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(300_000);
    let content = format!("{long}\nshort\n{long}y");
    let path = write(dir.path(), "a.txt", content.as_bytes());
    let files = Arc::new(InputFiles::resolve(&path).unwrap());
    for parallelism in 1..=3 {
        let (blocks, counters) = blocks_of(&files, 1000, parallelism);
        let lines: Vec<&str> = blocks.iter().flat_map(TextBlock::lines).collect();
        assert_eq!(lines, [long.clone(), "short".into(), format!("{long}y")]);
        assert_eq!(counters, [3, content.len() as u64, 0]);
    }
}

#[test]
fn a_seek_resumes_after_the_last_block_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", b"one\r\ntwo\n\nthree\r\n");
    write(dir.path(), "b.txt", b"");
    write(dir.path(), "c.txt", b"four\nfive \xff\nsix");
    let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
    for parallelism in 1..=3 {
        let mut lines = Vec::new();
        for index in 0..parallelism {
            let (blocks, _) = check_resume(
                || TextBlockReader::new(Arc::clone(&files), 5),
                index,
                parallelism,
            );
            lines.extend(
                blocks
                    .iter()
                    .flat_map(|b| b.lines().map(str::to_owned).collect::<Vec<_>>()),
            );
        }
        assert_eq!(
            lines,
            ["one", "two", "", "three", "four", "five \u{fffd}", "six"]
        );
    }
}

#[test]
fn a_numbered_reader_reads_blocks_after_counting_the_lines_before_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let content: String = (1..=20_000).map(|i| format!("{i:<499}\n")).collect();
    let path = write(dir.path(), "a.txt", content.as_bytes());
    let files = Arc::new(InputFiles::resolve(&path).unwrap());
    let mut reader = LineReader::new(files, true);
    reader.open(1, 2);
    let (mut block, mut lines, mut empty_calls) = (Vec::new(), 0, 0);
    loop {
        let read = reader.read_block(64 * 1024, &mut block).unwrap();
        lines += read.lines;
        empty_calls += u64::from(read.lines == 0);
        if read.done {
            break;
        }
    }
    assert_eq!(lines, 10_000);
    assert!(empty_calls > 1, "the prefix was counted in bounded steps");
    let first = std::str::from_utf8(&block[..500]).unwrap();
    assert_eq!(first.trim_end(), "10001");
}

/// A file's content: lines of letters, non-ASCII and spaces, `\n` or `\r\n` endings, maybe
/// no final newline, maybe an invalid byte.
fn file_content() -> impl Strategy<Value = Vec<u8>> {
    let line = "[aé日 \r]{0,12}";
    (
        prop::collection::vec(line, 0..40),
        prop::bool::ANY,
        prop::bool::ANY,
        prop::option::of(0..200usize),
    )
        .prop_map(|(lines, crlf, trailing, invalid_at)| {
            let mut bytes = lines.join(if crlf { "\r\n" } else { "\n" }).into_bytes();
            if trailing && !lines.is_empty() {
                bytes.push(b'\n');
            }
            if let Some(at) = invalid_at.filter(|&at| at < bytes.len()) {
                bytes.insert(at, 0xff);
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever the block size and the parallelism, the blocks hold exactly the lines the
    /// line source reads, in the same order, with the same counters; each block is whole
    /// lines of one file.
    #[test]
    fn blocks_are_the_line_sources_lines(
        contents in prop::collection::vec(file_content(), 1..=3),
        parallelism in 1..=4usize,
        block_bytes in 1..64usize,
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (i, content) in contents.iter().enumerate() {
            write(dir.path(), &format!("f{i}.txt"), content);
        }
        let files = Arc::new(InputFiles::resolve(dir.path()).unwrap());
        let (blocks, block_counters) = blocks_of(&files, block_bytes, parallelism);
        let (lines, line_counters) = lines_of(&files, parallelism);
        let from_blocks: Vec<&str> = blocks.iter().flat_map(TextBlock::lines).collect();
        prop_assert_eq!(from_blocks, lines);
        prop_assert_eq!(block_counters, line_counters);
        for block in &blocks {
            prop_assert_eq!(block.line_count(), block.lines().count() as u64);
            prop_assert_eq!(block, &TextBlock::new(block.as_str().to_owned()));
        }
    }
}
