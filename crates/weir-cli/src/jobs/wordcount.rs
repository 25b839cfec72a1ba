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
//! Words are [`Word`]s (`CompactString`): up to 24 bytes live inline, so the common word costs
//! no heap allocation on its way from the tokenizer to the counting map.

use compact_str::CompactString;

use weir::Pipeline;
use weir::aggregate::counting;
use weir::sinks::Sink;
use weir::sources::BatchSource;

/// A word: a small string stored inline up to 24 bytes.
pub type Word = CompactString;

#[inline]
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[inline]
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Finds the next word of `line` at or after byte `*pos`, advances `*pos` past it, and returns
/// its byte range and whether it is pure ASCII. One pass over the bytes; non-ASCII characters
/// are decoded only where they occur.
#[inline]
pub fn next_word(line: &str, pos: &mut usize) -> Option<(usize, usize, bool)> {
    let bytes = line.as_bytes();
    let mut i = *pos;
    // Skip separators.
    let start = loop {
        let &b = bytes.get(i)?;
        if b < 0x80 {
            if is_word_byte(b) {
                break i;
            }
            i += 1;
        } else {
            let c = line[i..].chars().next().expect("i is on a char boundary");
            if is_word_char(c) {
                break i;
            }
            i += c.len_utf8();
        }
    };
    let mut ascii = true;
    while let Some(&b) = bytes.get(i) {
        if b < 0x80 {
            if !is_word_byte(b) {
                break;
            }
            i += 1;
        } else {
            let c = line[i..].chars().next().expect("i is on a char boundary");
            if !is_word_char(c) {
                break;
            }
            ascii = false;
            i += c.len_utf8();
        }
    }
    *pos = i;
    Some((start, i, ascii))
}

/// Appends the lowercase form of `word` to `out`.
#[inline]
pub fn push_lowercase(word: &str, ascii: bool, out: &mut Word) {
    if ascii {
        let start = out.len();
        out.push_str(word);
        out.as_mut_str()[start..].make_ascii_lowercase();
    } else {
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
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
        let (start, end, ascii) = next_word(line, &mut self.pos)?;
        let mut word = Word::default();
        push_lowercase(&line[start..end], ascii, &mut word);
        Some(word)
    }
}

/// Writes one output line, `word<TAB>count<LF>`.
pub fn format_line(entry: &(Word, u64), out: &mut Vec<u8>) {
    use std::io::Write;
    // Writing into a Vec cannot fail.
    let _ = writeln!(out, "{}\t{}", entry.0, entry.1);
}

/// The word-count pipeline: lines from `source`, `(word, count)` pairs to `sink`, most
/// frequent first.
pub fn pipeline(source: BatchSource<String>, sink: Sink<(Word, u64)>) -> Pipeline {
    let p = Pipeline::new();
    p.read_from(source)
        .flat_map(words)
        .grouping_key(|word: &Word| word.clone())
        .aggregate(counting())
        .sort_by(|a: &(Word, u64), b: &(Word, u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)))
        .write_to(sink);
    p
}

/// The word-count pipeline over placeholder input and output, for `weir explain`: it plans
/// exactly like a real run and touches no file.
pub fn preview() -> Pipeline {
    pipeline(
        weir::sources::files::text_placeholder("INPUT"),
        weir::sinks::files::text_with("OUTPUT", format_line),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    proptest! {
        #[test]
        fn matches_a_plain_split(line in "\\PC{0,80}") {
            let ours: Vec<String> = words(line.as_str()).map(|w| w.to_string()).collect();
            prop_assert_eq!(ours, reference(&line));
        }
    }
}
