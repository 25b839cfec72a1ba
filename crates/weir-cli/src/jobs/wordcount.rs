//! Word count: the canonical batch job.
//!
//! ```
//! use weir_cli::jobs::wordcount::words;
//!
//! let found: Vec<_> = words("Hello, wörld! hello_there 42".to_string()).collect();
//! assert_eq!(found, ["hello", "wörld", "hello_there", "42"]);
//! ```
//!
//! A word is a maximal run of Unicode alphanumeric characters (`char::is_alphanumeric`) or
//! `_`, lowercased with `char::to_lowercase`. The job's output is one `word<TAB>count` line
//! per distinct word, most frequent first, ties in word order.
//!
//! The job reads its files as blocks of whole lines ([`text_blocks`]) and counts the words of
//! each block straight into its instance's table ([`count_words`], a
//! [`count_keys`](weir::BatchStage::count_keys) stage): a word is looked up where it lies in
//! the block, lowercased into a reused buffer only when it needs it, and made into a [`Word`]
//! (`CompactString`: up to 24 bytes inline, no heap allocation) only the first time the
//! instance sees it. Only each instance's `(word, count)` pairs cross to the combining
//! instances.
//!
//! [`text_blocks`]: weir::sources::files::text_blocks

use compact_str::CompactString;

use weir::Pipeline;
use weir::aggregate::KeyCounter;
use weir::sinks::Sink;
use weir::sources::BatchSource;
use weir::sources::files::TextBlock;

/// A word: a small string stored inline up to 24 bytes.
pub type Word = CompactString;

/// What lowercasing a word found by [`next_word`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// ASCII without an uppercase letter: the word is its own lowercase form.
    Lower,
    /// ASCII with an uppercase letter: ASCII lowercasing.
    AsciiUpper,
    /// Not ASCII: lowercased character by character with `char::to_lowercase`.
    Unicode,
}

/// The tokenizer's classes of a byte: a separator, a lowercase ASCII word byte (a letter, a
/// digit or `_`), an uppercase ASCII letter, or a byte of a non-ASCII character (decoded to
/// tell).
const SEPARATOR: u8 = 0;
const LOWER: u8 = 1;
const UPPER: u8 = 2;
const NON_ASCII: u8 = 4;

/// The class of every byte: one load per byte instead of range tests.
static BYTE_CLASS: [u8; 256] = byte_classes();

const fn byte_classes() -> [u8; 256] {
    let mut classes = [SEPARATOR; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        classes[b] = if byte >= 0x80 {
            NON_ASCII
        } else if byte.is_ascii_uppercase() {
            UPPER
        } else if byte.is_ascii_alphanumeric() || byte == b'_' {
            LOWER
        } else {
            SEPARATOR
        };
        b += 1;
    }
    classes
}

#[inline]
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The non-ASCII character at byte `i` of `text`.
#[inline]
fn char_at(text: &str, i: usize) -> char {
    text[i..].chars().next().expect("i is on a char boundary")
}

/// Finds the next word of `text` at or after byte `*pos`, advances `*pos` past it, and
/// returns its byte range and what lowercasing it takes. One pass over the bytes, one table
/// load per byte; non-ASCII characters are decoded only where they occur. A newline is a
/// separator like any other, so `text` may hold many lines.
#[inline]
pub fn next_word(text: &str, pos: &mut usize) -> Option<(usize, usize, Case)> {
    let bytes = text.as_bytes();
    let mut i = *pos;
    // Skip separators.
    let start = loop {
        let &b = bytes.get(i)?;
        match BYTE_CLASS[usize::from(b)] {
            SEPARATOR => i += 1,
            NON_ASCII => {
                let c = char_at(text, i);
                if is_word_char(c) {
                    break i;
                }
                i += c.len_utf8();
            }
            _ => break i,
        }
    };
    let mut seen = 0;
    while let Some(&b) = bytes.get(i) {
        let class = BYTE_CLASS[usize::from(b)];
        if class == SEPARATOR {
            break;
        }
        if class == NON_ASCII {
            let c = char_at(text, i);
            if !is_word_char(c) {
                break;
            }
            i += c.len_utf8();
        } else {
            i += 1;
        }
        seen |= class;
    }
    *pos = i;
    let case = if seen & NON_ASCII != 0 {
        Case::Unicode
    } else if seen & UPPER != 0 {
        Case::AsciiUpper
    } else {
        Case::Lower
    };
    Some((start, i, case))
}

/// Appends the lowercase form of `word`, which lowercases as `case` says, to `out`.
#[inline]
pub fn push_lowercase(word: &str, case: Case, out: &mut Word) {
    match case {
        Case::Lower => out.push_str(word),
        Case::AsciiUpper => {
            let start = out.len();
            out.push_str(word);
            out.as_mut_str()[start..].make_ascii_lowercase();
        }
        Case::Unicode => out.extend(word.chars().flat_map(char::to_lowercase)),
    }
}

/// The lowercase form of `word`, which lowercases as `case` says: `word` itself when it is
/// already lowercase, or else its lowercase form written into `scratch` (cleared first).
/// Copies nothing for the common word, and allocates only for a word that needs lowercasing
/// and is longer than 24 bytes (once: `scratch` keeps its buffer).
#[inline]
pub fn lowercase<'a>(word: &'a str, case: Case, scratch: &'a mut Word) -> &'a str {
    if case == Case::Lower {
        return word;
    }
    scratch.clear();
    push_lowercase(word, case, scratch);
    scratch.as_str()
}

/// The lowercased words of a line, in order. Owns the line; allocates only for words longer
/// than 24 bytes.
pub fn words(line: impl AsRef<str>) -> Words<impl AsRef<str>> {
    Words { line, pos: 0 }
}

/// Iterator returned by [`words`].
pub struct Words<S> {
    line: S,
    pos: usize,
}

impl<S: AsRef<str>> Iterator for Words<S> {
    type Item = Word;

    #[inline]
    fn next(&mut self) -> Option<Word> {
        let line = self.line.as_ref();
        let (start, end, case) = next_word(line, &mut self.pos)?;
        let mut word = Word::default();
        push_lowercase(&line[start..end], case, &mut word);
        Some(word)
    }
}

/// Writes one output line, `word<TAB>count<LF>`.
pub fn format_line(entry: &(Word, u64), out: &mut Vec<u8>) {
    use std::io::Write;
    // Writing into a Vec cannot fail.
    let _ = writeln!(out, "{}\t{}", entry.0, entry.1);
}

/// Counts the words of `text`, any number of whole lines, into `counts`, each lowercased:
/// what the job does with each block.
///
/// Cost per word: one pass over its bytes, one hash and one probe of the table. Nothing is
/// copied or allocated for a word already counted, unless it needs lowercasing: then it is
/// lowercased into a buffer reused for the whole text.
#[inline]
pub fn count_words(text: &str, counts: &mut KeyCounter<Word>) {
    let mut pos = 0;
    let mut scratch = Word::default();
    while let Some((start, end, case)) = next_word(text, &mut pos) {
        counts.add(lowercase(&text[start..end], case, &mut scratch));
    }
}

/// The word-count pipeline: blocks of lines from `source`, `(word, count)` pairs to `sink`,
/// most frequent first.
pub fn pipeline(source: BatchSource<TextBlock>, sink: Sink<(Word, u64)>) -> Pipeline {
    let p = Pipeline::new();
    p.read_from(source)
        .count_keys(|block: &TextBlock, counts: &mut KeyCounter<Word>| {
            count_words(block.as_str(), counts);
        })
        .sort_by(|a: &(Word, u64), b: &(Word, u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)))
        .write_to(sink);
    p
}

/// The word-count pipeline over placeholder input and output, for `weir explain`: it plans
/// exactly like a real run and touches no file.
pub fn preview() -> Pipeline {
    pipeline(
        weir::sources::files::text_blocks_placeholder("INPUT"),
        weir::sinks::files::text_with("OUTPUT", format_line),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;
    use std::path::Path;
    use weir::{Executor, ExecutorConfig, JobConfig};

    /// The counts of the job over the files in `dir`, at `parallelism`, sorted.
    fn run_job(dir: &Path, parallelism: usize) -> Vec<(String, u64)> {
        let (sink, results) = weir::sinks::collection::list();
        let source = weir::sources::files::text_blocks(dir).expect("the input resolves");
        let executor = Executor::new(ExecutorConfig {
            workers: parallelism,
            ..ExecutorConfig::default()
        })
        .expect("workers start");
        let config = JobConfig::default().with_default_parallelism(parallelism);
        pipeline(source, sink)
            .submit(&executor, config)
            .expect("the job starts")
            .join()
            .expect("the job runs");
        let mut counts: Vec<(String, u64)> = results
            .take()
            .into_iter()
            .map(|(word, count)| (word.to_string(), count))
            .collect();
        counts.sort();
        counts
    }

    /// The counts computed the plain way: each line decoded lossily, split at every character
    /// that is not a word character, lowercased, counted.
    fn plain_counts(contents: &[Vec<u8>]) -> Vec<(String, u64)> {
        let mut counts = HashMap::<String, u64>::new();
        for line in contents.iter().flat_map(|c| c.split(|&b| b == b'\n')) {
            for word in reference(&String::from_utf8_lossy(line)) {
                *counts.entry(word).or_default() += 1;
            }
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort();
        counts
    }

    /// Writes `contents` as files `f0.txt`, `f1.txt`, ... of a new directory.
    fn files_of(contents: &[Vec<u8>]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (i, content) in contents.iter().enumerate() {
            std::fs::write(dir.path().join(format!("f{i}.txt")), content).expect("written");
        }
        dir
    }

    /// A file: lines of words, separators and tricky characters (a lowercase that grows, a
    /// final sigma), `\n` or `\r\n` endings, maybe no final newline, maybe invalid bytes.
    fn file_content() -> impl Strategy<Value = Vec<u8>> {
        let line = "[a-zA-Z0-9_ éÉßİΣς日\\-.,!\t\r]{0,24}";
        (
            prop::collection::vec(line, 0..30),
            prop::bool::ANY,
            prop::bool::ANY,
            prop::collection::vec((0..400usize, 0x80..=0xffu8), 0..3),
        )
            .prop_map(|(lines, crlf, trailing, invalid)| {
                let mut bytes = lines.join(if crlf { "\r\n" } else { "\n" }).into_bytes();
                if trailing && !lines.is_empty() {
                    bytes.push(b'\n');
                }
                for (at, byte) in invalid {
                    bytes.insert(at.min(bytes.len()), byte);
                }
                bytes
            })
    }

    /// A deterministic text of about `bytes` bytes: words of mixed case and script, lines up
    /// to 600,000 bytes (longer than a block), `\r\n` endings, a few invalid bytes, and no
    /// final newline.
    fn long_lines_text(bytes: usize) -> Vec<u8> {
        let vocabulary = [
            "the", "Weir", "RIVER", "été", "ÉTÉ", "straße", "x_1", "日本", "a",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut text = Vec::with_capacity(bytes + 1024);
        let mut line_left = 0;
        while text.len() < bytes {
            if line_left == 0 {
                text.extend_from_slice(b"\r\n");
                line_left = next() % 600_000;
            }
            let word = vocabulary[(next() % vocabulary.len() as u64) as usize];
            text.extend_from_slice(word.as_bytes());
            text.push([b' ', b',', b'\t', b' '][(next() % 4) as usize]);
            if next() % 100_000 == 0 {
                text.push(0xff);
            }
            line_left = line_left.saturating_sub(word.len() as u64 + 1);
        }
        text
    }

    fn reference(line: &str) -> Vec<String> {
        line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(|w| w.chars().flat_map(char::to_lowercase).collect())
            .collect()
    }

    #[test]
    fn examples() {
        let w: Vec<Word> = words("It's the END—of ÉTÉ, 3rd_time…").collect();
        assert_eq!(w, ["it", "s", "the", "end", "of", "été", "3rd_time"]);
        assert_eq!(words("").count(), 0);
        assert_eq!(words("  ,, ").count(), 0);
    }

    #[test]
    fn cases() {
        let found = |text: &str| {
            let mut pos = 0;
            std::iter::from_fn(|| next_word(text, &mut pos).map(|(_, _, case)| case))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            found("low Mixed été ÉTÉ x_1"),
            [
                Case::Lower,
                Case::AsciiUpper,
                Case::Unicode,
                Case::Unicode,
                Case::Lower
            ]
        );
        let mut scratch = Word::default();
        assert_eq!(lowercase("ÉTÉ", Case::Unicode, &mut scratch), "été");
        assert_eq!(lowercase("AbC", Case::AsciiUpper, &mut scratch), "abc");
        assert_eq!(lowercase("abc", Case::Lower, &mut scratch), "abc");
    }

    #[test]
    fn the_job_counts_a_large_file_of_long_lines_as_a_plain_split_does() {
        let contents = vec![long_lines_text(5 << 20), b"last words".to_vec()];
        let dir = files_of(&contents);
        let expected = plain_counts(&contents);
        for parallelism in [1, 2, 3] {
            assert_eq!(
                run_job(dir.path(), parallelism),
                expected,
                "parallelism {parallelism}"
            );
        }
    }

    #[test]
    fn the_job_over_empty_files_counts_nothing() {
        let dir = files_of(&[Vec::new(), Vec::new()]);
        assert!(run_job(dir.path(), 2).is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The job, which counts blocks of lines, counts what splitting each line does.
        #[test]
        fn the_job_counts_what_a_plain_split_of_each_line_counts(
            contents in prop::collection::vec(file_content(), 0..=3),
            parallelism in 1..=3usize,
        ) {
            let dir = files_of(&contents);
            prop_assert_eq!(run_job(dir.path(), parallelism), plain_counts(&contents));
        }
    }

    proptest! {
        #[test]
        fn matches_a_plain_split(line in "\\PC{0,80}") {
            let ours: Vec<String> = words(line.as_str()).map(|w| w.to_string()).collect();
            prop_assert_eq!(ours, reference(&line));
        }

        #[test]
        fn lowercase_borrows_exactly_the_words_already_lowercase(text in "[\\PC\n\r\t]{0,120}") {
            let (mut pos, mut scratch, mut found) = (0, Word::default(), Vec::new());
            while let Some((start, end, case)) = next_word(&text, &mut pos) {
                let word = &text[start..end];
                let plain_ascii_lower = word.is_ascii() && !word.bytes().any(|b| b.is_ascii_uppercase());
                prop_assert_eq!(case == Case::Lower, plain_ascii_lower);
                prop_assert_eq!(case == Case::Unicode, !word.is_ascii());
                found.push(lowercase(word, case, &mut scratch).to_string());
            }
            prop_assert_eq!(found, reference(&text));
        }
    }
}
