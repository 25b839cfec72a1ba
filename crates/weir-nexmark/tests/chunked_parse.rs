//! The replay's chunked parser against serde_json, line by line: for random files of valid
//! lines in every form (the generator's, with escaped and non-ASCII strings, reordered keys,
//! whitespace, unknown fields) and broken ones (truncated, edited bytes, invalid UTF-8, blank
//! lines), cut into chunks of any size and parsed on one to three threads, the events, the
//! malformed lines' numbers and errors, and their order are exactly those of reading the file
//! line by line with serde_json (`parse_line_serde`), the strings the run does not keep
//! left empty.
//!
//! The oracle splits lines on its own, as the replay's documentation says: at each `\n`,
//! without a `\r` before it; a last line without `\n` counts and keeps its `\r`.
//! A second property feeds it arbitrary bytes. `PROPTEST_CASES` sets how many files each
//! tries (defaults 48 and 1,000).

use std::sync::Arc;

use proptest::prelude::*;
use weir::sources::Emitter;
use weir::sources::chunked::{ChunkOptions, ChunkedReader};
use weir::sources::files::InputFiles;
use weir_nexmark::generator::{GeneratorConfig, StringStyle};
use weir_nexmark::model::{Auction, Bid, Person};
use weir_nexmark::parse::{KeptStrings, ParseError, parse_line_serde};
use weir_nexmark::source::EventLines;
use weir_nexmark::{CompactString, Event, Generator, Query};

/// One line of a test file, before its line end.
#[derive(Debug, Clone)]
enum Line {
    /// Event `n` of the pool as the generator writes it.
    Written(usize),
    /// Event `n` through serde_json's `Value` (keys sorted), with a space after each `,` if
    /// `spaced`, and an unknown field holding a nested value if `extra`.
    Rewritten { n: usize, spaced: bool, extra: bool },
    /// Nothing.
    Blank,
    /// Event `n` as written, cut after `at` bytes (of its length plus one).
    Truncated { n: usize, at: prop::sample::Index },
    /// Event `n` as written, with the byte at `at` replaced.
    Edited {
        n: usize,
        at: prop::sample::Index,
        byte: u8,
    },
}

fn line() -> impl Strategy<Value = Line> {
    let n = 0..POOL;
    prop_oneof![
        6 => n.clone().prop_map(Line::Written),
        3 => (n.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(n, spaced, extra)| Line::Rewritten { n, spaced, extra }),
        1 => Just(Line::Blank),
        1 => (n.clone(), any::<prop::sample::Index>()).prop_map(|(n, at)| Line::Truncated { n, at }),
        2 => (n, any::<prop::sample::Index>(), prop_oneof![
            Just(b'"'), Just(b'\\'), Just(b'u'), Just(b'{'), Just(b','), Just(0xff), Just(0xc3),
            Just(0x01), Just(b' '), Just(b'0'), Just(b'.'), any::<u8>(),
        ]).prop_map(|(n, at, byte)| Line::Edited { n, at, byte }),
    ]
}

const POOL: usize = 200;

fn pool(strings: StringStyle) -> Vec<Event> {
    let config = GeneratorConfig {
        count: Some(POOL as u64),
        strings,
        ..GeneratorConfig::default()
    };
    Generator::new(config).expect("config").iter().collect()
}

fn bytes_of(line: &Line, events: &[Event]) -> Vec<u8> {
    let written = |n: usize| {
        let mut out = Vec::new();
        events[n].write_json(&mut out);
        out
    };
    match line {
        Line::Written(n) => written(*n),
        Line::Rewritten { n, spaced, extra } => {
            let mut value = serde_json::to_value(&events[*n]).expect("as JSON");
            if *extra {
                value["x-source"] =
                    serde_json::json!({"seq": [1, -0.5e3, null, "a\"\\/\u{1F600}"]});
            }
            let text = value.to_string();
            match spaced {
                // A `,` between members is followed by `"`; one inside a string may be too,
                // and the space there changes the string as serde_json reads it too.
                true => text.replace(",\"", ", \"").into_bytes(),
                false => text.into_bytes(),
            }
        }
        Line::Blank => Vec::new(),
        Line::Truncated { n, at } => {
            let mut bytes = written(*n);
            bytes.truncate(at.index(bytes.len() + 1));
            bytes
        }
        Line::Edited { n, at, byte } => {
            let mut bytes = written(*n);
            let i = at.index(bytes.len());
            bytes[i] = *byte;
            bytes
        }
    }
}

/// `event` with the strings `kept` leaves out made empty, as the reader gives it: `kept` is
/// all, none, or q9's (an auction's item name, description and extra, a bid's extra).
fn blanked(event: Event, kept: KeptStrings) -> Event {
    let keep_q9 = kept == KeptStrings::for_query(Query::Q9);
    if kept == KeptStrings::ALL {
        return event;
    }
    let blank = |s: CompactString, q9: bool| {
        if keep_q9 && q9 {
            s
        } else {
            CompactString::default()
        }
    };
    match event {
        Event::Person(p) => Event::from(Person {
            name: blank(p.name, false),
            email_address: blank(p.email_address, false),
            credit_card: blank(p.credit_card, false),
            city: blank(p.city, false),
            state: blank(p.state, false),
            extra: blank(p.extra, true),
            ..*p
        }),
        Event::Auction(a) => Event::from(Auction {
            item_name: blank(a.item_name, true),
            description: blank(a.description, true),
            extra: blank(a.extra, true),
            ..*a
        }),
        Event::Bid(b) => Event::Bid(Bid {
            channel: blank(b.channel, false),
            url: blank(b.url, false),
            extra: blank(b.extra, true),
            ..b
        }),
    }
}

/// What reading `file` line by line with serde_json gives: events, and malformed lines by
/// number with their errors, in file order.
fn oracle(file: &[u8], kept: KeptStrings) -> Vec<Result<Event, (u64, ParseError)>> {
    let mut out = Vec::new();
    let mut rest = file;
    let mut number = 0;
    while !rest.is_empty() {
        number += 1;
        let (line, after) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let line = &rest[..i];
                (line.strip_suffix(b"\r").unwrap_or(line), &rest[i + 1..])
            }
            None => (rest, &rest[rest.len()..]),
        };
        out.push(match parse_line_serde(line) {
            Ok(e) => Ok(blanked(e, kept)),
            Err(e) => Err((number, e)),
        });
        rest = after;
    }
    out
}

/// What the chunked reader gives for `file`.
fn chunked(
    path: &std::path::Path,
    kept: KeptStrings,
    options: ChunkOptions,
) -> Vec<Result<Event, (u64, ParseError)>> {
    let files = Arc::new(InputFiles::resolve(path).expect("the file"));
    let mut reader = ChunkedReader::new(Arc::new(EventLines(kept)), files, options);
    reader.open(0, 1);
    let mut out = Vec::new();
    loop {
        let mut items = Vec::new();
        let mut bad = Vec::new();
        let done = reader
            .read(
                &mut Emitter::unbounded(&mut items),
                |_, line, e: &ParseError| bad.push((line, e.clone())),
            )
            .expect("read");
        // Malformed lines are reported before the item that follows them: in one read,
        // every report comes before that read's items.
        out.extend(bad.into_iter().map(Err));
        out.extend(items.into_iter().map(Ok));
        if done {
            return out;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48)
    ))]

    #[test]
    fn the_chunked_parser_reads_every_line_as_serde_json_does(
        strings in prop::sample::select(StringStyle::ALL.to_vec()),
        lines in prop::collection::vec((line(), any::<bool>()), 0..120),
        last_line_end in any::<bool>(),
        chunk_bytes in prop_oneof![1..64usize, 64..4096usize, Just(1 << 20)],
        threads in 1..4usize,
        kept in prop::sample::select(vec![
            KeptStrings::ALL, KeptStrings::NONE, KeptStrings::for_query(Query::Q9),
        ]),
    ) {
        let events = pool(strings);
        let mut file = Vec::new();
        let count = lines.len();
        for (i, (line, crlf)) in lines.iter().enumerate() {
            file.extend_from_slice(&bytes_of(line, &events));
            if i + 1 < count || last_line_end {
                file.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            }
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, &file).expect("write");
        let options = ChunkOptions { threads, chunk_bytes };
        // Malformed lines come before the items of the read that reports them, so the
        // reader's order may put them earlier than the oracle within one read: compare the
        // events in order, and the malformed lines in order.
        let (got, want) = (chunked(&path, kept, options), oracle(&file, kept));
        let events = |v: &[Result<Event, (u64, ParseError)>]| {
            v.iter().filter_map(|r| r.as_ref().ok().cloned()).collect::<Vec<_>>()
        };
        let malformed = |v: &[Result<Event, (u64, ParseError)>]| {
            v.iter().filter_map(|r| r.as_ref().err().cloned()).collect::<Vec<_>>()
        };
        prop_assert_eq!(events(&got), events(&want));
        prop_assert_eq!(malformed(&got), malformed(&want));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(1000)
    ))]

    /// Arbitrary bytes, weighted towards JSON's own, never panic a parser thread and read as
    /// serde_json reads them, line by line.
    #[test]
    fn arbitrary_bytes_read_as_serde_json_reads_them(
        file in prop::collection::vec(prop_oneof![
            4 => any::<u8>(),
            6 => prop::sample::select(b"{}[]:,\"\\u0123456789-.eE tnrfalsebid\n\r".to_vec()),
        ], 0..400),
        chunk_bytes in 1..128usize,
        threads in 1..3usize,
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bytes.jsonl");
        std::fs::write(&path, &file).expect("write");
        let options = ChunkOptions { threads, chunk_bytes };
        let got = chunked(&path, KeptStrings::ALL, options);
        let want = oracle(&file, KeptStrings::ALL);
        let malformed = |v: &[Result<Event, (u64, ParseError)>]| {
            v.iter().filter_map(|r| r.as_ref().err().cloned()).collect::<Vec<_>>()
        };
        prop_assert_eq!(got.iter().filter(|r| r.is_ok()).count(), want.iter().filter(|r| r.is_ok()).count());
        prop_assert_eq!(malformed(&got), malformed(&want));
    }
}

/// The pool holds every kind of event, so that every type's fields are read.
#[test]
fn the_pool_has_every_kind() {
    let events = pool(StringStyle::Escaped);
    assert!(events.iter().any(|e| matches!(e, Event::Person(_))));
    assert!(events.iter().any(|e| matches!(e, Event::Auction(_))));
    assert!(events.iter().any(|e| matches!(e, Event::Bid(_))));
}
