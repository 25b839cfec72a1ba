//! The `Character Set` of the text processors (ExtractText, RouteOnContent, RouteText):
//! the six charsets every Java platform supports, so a NiFi flow's value means the same
//! here. Decoding is lossy as Java's is: a malformed sequence reads as U+FFFD, so text
//! processors never fail on bytes; a character cut by a buffer's end is left out.

use std::borrow::Cow;

/// The names `Character Set` accepts (matched ignoring case, as validation does).
pub(crate) const NAMES: &[&str] = &[
    "UTF-8",
    "US-ASCII",
    "ISO-8859-1",
    "UTF-16",
    "UTF-16BE",
    "UTF-16LE",
];

/// One of [`NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Charset {
    Utf8,
    Ascii,
    Latin1,
    /// Big-endian unless a byte-order mark says otherwise; written with a big-endian mark.
    Utf16,
    Utf16Be,
    Utf16Le,
}

impl Charset {
    /// The charset named `name` (ignoring case), UTF-8 for a name validation would refuse.
    pub(crate) fn named(name: &str) -> Charset {
        match name.to_ascii_uppercase().as_str() {
            "US-ASCII" => Charset::Ascii,
            "ISO-8859-1" => Charset::Latin1,
            "UTF-16" => Charset::Utf16,
            "UTF-16BE" => Charset::Utf16Be,
            "UTF-16LE" => Charset::Utf16Le,
            _ => Charset::Utf8,
        }
    }

    /// `bytes` as text. UTF-8 that is valid is borrowed, not copied.
    pub(crate) fn decode<'a>(self, bytes: &'a [u8]) -> Cow<'a, str> {
        match self {
            Charset::Utf8 => String::from_utf8_lossy(bytes),
            Charset::Ascii => match std::str::from_utf8(bytes) {
                Ok(text) if text.is_ascii() => Cow::Borrowed(text),
                _ => Cow::Owned(
                    bytes
                        .iter()
                        .map(|&b| if b.is_ascii() { b as char } else { '\u{FFFD}' })
                        .collect(),
                ),
            },
            Charset::Latin1 => match std::str::from_utf8(bytes) {
                Ok(text) if text.is_ascii() => Cow::Borrowed(text),
                _ => Cow::Owned(bytes.iter().map(|&b| b as char).collect()),
            },
            Charset::Utf16 => match bytes {
                [0xFF, 0xFE, rest @ ..] => Cow::Owned(utf16(rest, u16::from_le_bytes)),
                [0xFE, 0xFF, rest @ ..] => Cow::Owned(utf16(rest, u16::from_be_bytes)),
                _ => Cow::Owned(utf16(bytes, u16::from_be_bytes)),
            },
            Charset::Utf16Be => Cow::Owned(utf16(bytes, u16::from_be_bytes)),
            Charset::Utf16Le => Cow::Owned(utf16(bytes, u16::from_le_bytes)),
        }
    }

    /// The first `limit` bytes of `bytes` as text (all of them when `limit` is larger),
    /// leaving out a character the limit cuts in two: content longer than a processor's
    /// buffer is evaluated up to the buffer's end, on whole characters.
    pub(crate) fn decode_prefix(self, bytes: &[u8], limit: usize) -> Cow<'_, str> {
        if bytes.len() <= limit {
            return self.decode(bytes);
        }
        let mut end = limit;
        match self {
            Charset::Utf8 => {
                // Back up over the continuation bytes of a character that goes on past the
                // limit (at most 3), to its first byte.
                let mut start = end;
                while start > 0 && start + 3 >= end && bytes[start - 1] & 0xC0 == 0x80 {
                    start -= 1;
                }
                if start > 0 {
                    let lead = bytes[start - 1];
                    let width = match lead {
                        0xC0..=0xDF => 2,
                        0xE0..=0xEF => 3,
                        0xF0..=0xF7 => 4,
                        _ => 1,
                    };
                    if start - 1 + width > end {
                        end = start - 1;
                    }
                }
            }
            Charset::Utf16 | Charset::Utf16Be | Charset::Utf16Le => {
                end -= end % 2;
                // A high surrogate whose low half is past the limit.
                if end >= 2 {
                    let unit = match self {
                        Charset::Utf16Le => u16::from_le_bytes([bytes[end - 2], bytes[end - 1]]),
                        Charset::Utf16 if bytes.starts_with(&[0xFF, 0xFE]) => {
                            u16::from_le_bytes([bytes[end - 2], bytes[end - 1]])
                        }
                        _ => u16::from_be_bytes([bytes[end - 2], bytes[end - 1]]),
                    };
                    if (0xD800..0xDC00).contains(&unit) {
                        end -= 2;
                    }
                }
            }
            Charset::Ascii | Charset::Latin1 => {}
        }
        self.decode(&bytes[..end])
    }

    /// `text` in this charset: a character it cannot hold is written as `?`, as Java's
    /// encoder does.
    pub(crate) fn encode(self, text: &str) -> Vec<u8> {
        match self {
            Charset::Utf8 => text.as_bytes().to_vec(),
            Charset::Ascii => text
                .chars()
                .map(|c| if c.is_ascii() { c as u8 } else { b'?' })
                .collect(),
            Charset::Latin1 => text
                .chars()
                .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                .collect(),
            Charset::Utf16 => {
                let mut out = vec![0xFE, 0xFF];
                out.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
                out
            }
            Charset::Utf16Be => text.encode_utf16().flat_map(u16::to_be_bytes).collect(),
            Charset::Utf16Le => text.encode_utf16().flat_map(u16::to_le_bytes).collect(),
        }
    }
}

/// UTF-16 code units read by `unit` from byte pairs, lossy; an odd last byte reads as
/// U+FFFD.
fn utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> String {
    let pairs = bytes.chunks_exact(2);
    let odd = !pairs.remainder().is_empty();
    let mut text: String = char::decode_utf16(pairs.map(|p| unit([p[0], p[1]])))
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    if odd {
        text.push(char::REPLACEMENT_CHARACTER);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_matched_ignoring_case() {
        assert_eq!(Charset::named("utf-16le"), Charset::Utf16Le);
        assert_eq!(Charset::named("ISO-8859-1"), Charset::Latin1);
        assert_eq!(Charset::named("UTF-8"), Charset::Utf8);
    }

    #[test]
    fn malformed_input_reads_as_replacement_characters() {
        assert_eq!(Charset::Utf8.decode(b"a\xFFb"), "a\u{FFFD}b");
        assert_eq!(Charset::Ascii.decode(b"a\xE9b"), "a\u{FFFD}b");
        assert_eq!(Charset::Latin1.decode(b"caf\xE9"), "caf\u{e9}");
        assert_eq!(Charset::Utf16Le.decode(b"a\x00b"), "a\u{FFFD}");
    }

    #[test]
    fn utf16_reads_its_byte_order_mark() {
        assert_eq!(Charset::Utf16.decode(b"\xFF\xFEh\x00i\x00"), "hi");
        assert_eq!(Charset::Utf16.decode(b"\xFE\xFF\x00h\x00i"), "hi");
        assert_eq!(Charset::Utf16.decode(b"\x00h\x00i"), "hi");
        assert_eq!(Charset::Utf16.encode("hi"), b"\xFE\xFF\x00h\x00i");
    }

    #[test]
    fn a_character_cut_by_the_limit_is_left_out() {
        let text = "a\u{e9}\u{20ac}\u{1F600}";
        let bytes = text.as_bytes();
        // a(1) é(2) €(3) 😀(4)
        assert_eq!(Charset::Utf8.decode_prefix(bytes, 1), "a");
        assert_eq!(Charset::Utf8.decode_prefix(bytes, 2), "a");
        assert_eq!(Charset::Utf8.decode_prefix(bytes, 3), "a\u{e9}");
        assert_eq!(Charset::Utf8.decode_prefix(bytes, 5), "a\u{e9}");
        assert_eq!(Charset::Utf8.decode_prefix(bytes, 6), "a\u{e9}\u{20ac}");
        assert_eq!(Charset::Utf8.decode_prefix(bytes, 9), "a\u{e9}\u{20ac}");
        assert_eq!(Charset::Utf8.decode_prefix(bytes, 10), text);
        let wide = Charset::Utf16Le.encode("x\u{1F600}");
        assert_eq!(Charset::Utf16Le.decode_prefix(&wide, 5), "x");
        assert_eq!(Charset::Utf16Le.decode_prefix(&wide, 6), "x\u{1F600}");
    }

    proptest! {
        /// Whatever the limit, the prefix is whole characters of the text, and the longest
        /// such prefix that fits.
        #[test]
        fn prefixes_are_the_longest_whole_characters_that_fit(
            text in "[a\u{e9}\u{20ac}\u{1F600}]{0,8}",
            limit in 0usize..40,
        ) {
            for charset in [Charset::Utf8, Charset::Utf16Be, Charset::Utf16Le] {
                let bytes = charset.encode(&text);
                let prefix = charset.decode_prefix(&bytes, limit);
                prop_assert!(text.starts_with(prefix.as_ref()));
                prop_assert!(charset.encode(&prefix).len() <= limit.min(bytes.len()));
                let next = text[prefix.len()..].chars().next();
                if let Some(c) = next {
                    let longer = format!("{prefix}{c}");
                    prop_assert!(charset.encode(&longer).len() > limit);
                }
            }
        }

        /// Every charset reads back what it writes, for the characters it can hold.
        #[test]
        fn encoding_round_trips(text in "[ -~\u{e9}\u{20ac}\u{1F600}]{0,12}") {
            for charset in [Charset::Utf8, Charset::Utf16, Charset::Utf16Be, Charset::Utf16Le] {
                let bytes = charset.encode(&text);
                prop_assert_eq!(charset.decode(&bytes), text.as_str());
            }
        }
    }
}
