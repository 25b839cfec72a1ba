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
