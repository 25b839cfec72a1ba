//! The content processors in running flows: MergeContent, ReplaceText, CompressContent and
//! CryptographicHashContent. A test `Feed` makes the input and `Recorder`s keep what each
//! relationship receives.

mod support;

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use support::{Item, Probe, start, wait_for};
use weir_flow::provenance::{EventType, ProvenanceRepository, Query};

fn contents(probe: &Probe, recorder: &str) -> BTreeMap<String, Vec<u8>> {
    probe
        .recorded(recorder)
        .into_iter()
        .map(|r| (r.attr("name").to_string(), r.content))
        .collect()
}

#[test]
fn merge_content_bins_by_correlation_attribute_and_flushes_old_bins() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: merge
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - name: merge
        type: MergeContent
        properties:
          Minimum Number of Entries: "3"
          Maximum Number of Entries: "3"
          Correlation Attribute Name: group
          Demarcator: '\n'
          Max Bin Age: 400 ms
      - { name: merged, type: Recorder, auto_terminate: [success] }
      - { name: originals, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: merge }
      - { from: merge, relationships: [merged], to: merged }
      - { from: merge, relationships: [original], to: originals }
      - { from: merge, relationships: [failure], to: originals }
"#;
    let engine = start(yaml, &probe, dir.path());
    let items = [
        ("a1", "a"),
        ("b1", "b"),
        ("a2", "a"),
        ("b2", "b"),
        ("a3", "a"),
        ("c1", "c"),
        ("b3", "b"),
    ];
    probe.feed(
        "feed",
        items
            .iter()
            .map(|(n, g)| Item::new(n, &[("group", g), ("name", n)])),
    );
    assert!(wait_for(Duration::from_secs(10), || probe.count("merged")
        == 3
        && probe.count("originals") == 7));
    let merged = probe.recorded("merged");
    let by_group: BTreeMap<&str, (&[u8], &str)> = merged
        .iter()
        .map(|r| (r.attr("group"), (&r.content[..], r.attr("merge.count"))))
        .collect();
    assert_eq!(
        by_group,
        BTreeMap::from([
            ("a", (&b"a1\na2\na3"[..], "3")),
            ("b", (&b"b1\nb2\nb3"[..], "3")),
            // c never fills its bin: it goes once it is older than Max Bin Age.
            ("c", (&b"c1"[..], "1")),
        ])
    );
    // The full bins merged before the lone one.
    assert_eq!(merged[2].attr("group"), "c");
    engine.stop().unwrap();
    let prov =
        ProvenanceRepository::open(&dir.path().join("repo/provenance"), Duration::MAX, u64::MAX)
            .unwrap();
    let joins = prov
        .query(
            &Query {
                event_type: Some(EventType::JOIN),
                ..Query::default()
            },
            100,
        )
        .unwrap();
    assert_eq!(joins.len(), 3);
    assert_eq!(joins.iter().map(|e| e.parents.len()).sum::<usize>(), 7);
}

#[test]
fn replace_text_strategies_and_evaluation_modes() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: replace
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - name: regex-lines
        type: ReplaceText
        properties: { Search Value: '(\w+) (\w+)', Replacement Value: '$2 $1', Evaluation Mode: Line-by-Line }
      - name: regex-entire
        type: ReplaceText
        properties: { Replacement Value: '[$1]', Evaluation Mode: Entire text }
      - name: literal
        type: ReplaceText
        properties: { Search Value: o, Replacement Value: '0', Replacement Strategy: Literal Replace, Evaluation Mode: Entire text }
      - name: prepend
        type: ReplaceText
        properties: { Replacement Value: '> ', Replacement Strategy: Prepend, Evaluation Mode: Line-by-Line }
      - name: append
        type: ReplaceText
        properties: { Replacement Value: ';', Replacement Strategy: Append, Evaluation Mode: Entire text }
      - name: always
        type: ReplaceText
        properties: { Replacement Value: '${name:toUpper()}', Replacement Strategy: Always Replace, Evaluation Mode: Entire text }
      - { name: out-regex-lines, type: Recorder, auto_terminate: [success] }
      - { name: out-regex-entire, type: Recorder, auto_terminate: [success] }
      - { name: out-literal, type: Recorder, auto_terminate: [success] }
      - { name: out-prepend, type: Recorder, auto_terminate: [success] }
      - { name: out-append, type: Recorder, auto_terminate: [success] }
      - { name: out-always, type: Recorder, auto_terminate: [success] }
      - { name: failed, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: regex-lines }
      - { from: feed, relationships: [success], to: regex-entire }
      - { from: feed, relationships: [success], to: literal }
      - { from: feed, relationships: [success], to: prepend }
      - { from: feed, relationships: [success], to: append }
      - { from: feed, relationships: [success], to: always }
      - { from: regex-lines, relationships: [success], to: out-regex-lines }
      - { from: regex-entire, relationships: [success], to: out-regex-entire }
      - { from: literal, relationships: [success], to: out-literal }
      - { from: prepend, relationships: [success], to: out-prepend }
      - { from: append, relationships: [success], to: out-append }
      - { from: always, relationships: [success], to: out-always }
      - { from: regex-lines, relationships: [failure], to: failed }
      - { from: regex-entire, relationships: [failure], to: failed }
      - { from: literal, relationships: [failure], to: failed }
      - { from: prepend, relationships: [failure], to: failed }
      - { from: append, relationships: [failure], to: failed }
      - { from: always, relationships: [failure], to: failed }
"#;
    let engine = start(yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            Item::new("hello world\nfoo bar\n", &[("name", "text")]),
            Item {
                attributes: vec![("name".into(), "binary".into())],
                content: vec![0xff, 0xfe, b'\n', 0x80],
            },
        ],
    );
    let outs = [
        ("out-regex-lines", "world hello\nbar foo\n"),
        ("out-regex-entire", "[hello world\nfoo bar\n]"),
        ("out-literal", "hell0 w0rld\nf00 bar\n"),
        ("out-prepend", "> hello world\n> foo bar\n"),
        ("out-append", "hello world\nfoo bar\n;"),
        ("out-always", "TEXT"),
    ];
    assert!(wait_for(Duration::from_secs(10), || {
        outs.iter().all(|(o, _)| probe.count(o) >= 1) && probe.count("failed") >= 5
    }));
    for (out, want) in outs {
        let got = contents(&probe, out);
        if out == "out-always" {
            // Always Replace on the entire text does not read the content (as in NiFi), so
            // binary content is replaced too.
            assert_eq!(got["binary"], b"BINARY", "{out}");
        } else {
            assert!(!got.contains_key("binary"), "{out} took binary content");
        }
        assert_eq!(
            String::from_utf8_lossy(&got["text"]),
            want,
            "{out}: {:?}",
            got
        );
    }
    // Every processor that reads the text sends the invalid UTF-8 to failure, unchanged.
    let failed = probe.recorded("failed");
    assert_eq!(failed.len(), 5);
    assert!(
        failed
            .iter()
            .all(|r| r.attr("name") == "binary" && r.content == [0xff, 0xfe, b'\n', 0x80])
    );
    engine.stop().unwrap();
}

/// `fileSize` follows the content without being stored: an expression reads the size before
/// and after ReplaceText rewrites it, a route can test it, and provenance shows it per event.
#[test]
fn file_size_is_the_contents_size_as_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: file-size
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - name: before
        type: UpdateAttribute
        properties: { size.before: '${fileSize}' }
      - name: grow
        type: ReplaceText
        properties: { Replacement Strategy: Append, Replacement Value: '+++', Evaluation Mode: Entire text }
      - name: route
        type: RouteOnAttribute
        properties: { big: '${fileSize:gt(5)}' }
      - { name: big, type: Recorder, auto_terminate: [success] }
      - { name: small, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: before }
      - { from: before, relationships: [success], to: grow }
      - { from: grow, relationships: [success, failure], to: route }
      - { from: route, relationships: [big], to: big }
      - { from: route, relationships: [unmatched], to: small }
"#;
    let engine = start(yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            Item::new("ab", &[("name", "2")]),
            Item::new("abcd", &[("name", "4")]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || {
        probe.count("big") + probe.count("small") >= 2
    }));
    let (big, small) = (probe.recorded("big"), probe.recorded("small"));
    assert_eq!(small.len(), 1, "2 + 3 bytes is not over 5");
    assert_eq!(
        (
            small[0].attr("name"),
            small[0].attr("size.before"),
            small[0].attr("fileSize")
        ),
        ("2", "2", "5")
    );
    assert_eq!(
        (
            big[0].attr("name"),
            big[0].attr("size.before"),
            big[0].attr("fileSize")
        ),
        ("4", "4", "7")
    );
    engine.stop().unwrap();
    let store =
        ProvenanceRepository::open(&dir.path().join("repo/provenance"), Duration::MAX, u64::MAX)
            .unwrap();
    let events = store.query(&Query::default(), usize::MAX).unwrap();
    let modified: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e.event_type == EventType::CONTENT_MODIFIED)
        .map(|e| {
            (
                e.attributes.get("name").unwrap_or(""),
                e.attributes.get("fileSize").unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(modified.len(), 2, "{events:?}");
    assert!(
        modified.contains(&("2", "5")) && modified.contains(&("4", "7")),
        "{modified:?}"
    );
}

/// NiFi's expressions through UpdateAttribute and RouteOnAttribute: whole and decimal
/// arithmetic, an expression inside a quoted argument, and a regular expression made from an
/// attribute per flow file (a missing attribute in it is empty text), where one that does not
/// compile makes the rule false.
#[test]
fn expressions_with_numbers_and_quoted_expressions_route_per_flow_file() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: expressions
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - name: tag
        type: UpdateAttribute
        properties:
          half: "${n:divide(2)}"
          half.decimal: "${n:divide(2.0)}"
          big: "${n:toNumber():multiply(1e7)}"
          tagged: "${literal('<${name:toUpper()}>')}"
      - name: route
        type: RouteOnAttribute
        properties: { starts: "${name:matches('${prefix}.*')}" }
      - { name: starts, type: Recorder, auto_terminate: [success] }
      - { name: other, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: tag }
      - { from: tag, relationships: [success], to: route }
      - { from: route, relationships: [starts], to: starts }
      - { from: route, relationships: [unmatched], to: other }
"#;
    let engine = start(yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            Item::new("1", &[("name", "abc"), ("prefix", "ab"), ("n", "7")]),
            Item::new("2", &[("name", "xyz"), ("prefix", "ab"), ("n", "-7")]),
            Item::new("3", &[("name", "mno"), ("n", "seven")]),
            Item::new("4", &[("name", "a(b"), ("prefix", "("), ("n", "0x10")]),
            Item::new("5", &[("name", "xyz"), ("prefix", "x"), ("n", "2.5")]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || {
        probe.count("starts") + probe.count("other") >= 5
    }));
    let seen = |recorder: &str| -> BTreeMap<String, [String; 4]> {
        probe
            .recorded(recorder)
            .into_iter()
            .map(|r| {
                let a = |k: &str| r.attr(k).to_string();
                (
                    a("name"),
                    [a("half"), a("half.decimal"), a("big"), a("tagged")],
                )
            })
            .collect()
    };
    let row = |v: [&str; 4]| v.map(str::to_string);
    assert_eq!(
        seen("starts"),
        BTreeMap::from([
            ("abc".into(), row(["3", "3.5", "7.0E7", "<ABC>"])),
            // Not a number: no value, as in NiFi.
            ("mno".into(), row(["", "", "", "<MNO>"])),
            ("xyz".into(), row(["1.25", "1.25", "2.0E7", "<XYZ>"])),
        ])
    );
    // `(` does not compile, so the rule is false.
    let other = probe.recorded("other");
    assert_eq!(other.len(), 2);
    let by_n: BTreeMap<&str, (&str, &str)> = other
        .iter()
        .map(|r| (r.attr("n"), (r.attr("half"), r.attr("half.decimal"))))
        .collect();
    assert_eq!(
        by_n,
        BTreeMap::from([("-7", ("-3", "-3.5")), ("0x10", ("8", "8.0")),])
    );
    engine.stop().unwrap();
}

/// A search value with an expression is evaluated per flow file: the compiled regex is
/// reused only while the search text stays the same.
#[test]
fn replace_text_search_from_an_attribute_changes_per_flow_file() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: replace-by-attribute
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - name: replace
        type: ReplaceText
        properties: { Search Value: '${word}', Replacement Value: '_', Evaluation Mode: Entire text }
      - { name: out, type: Recorder, auto_terminate: [success] }
      - { name: failed, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: replace }
      - { from: replace, relationships: [success], to: out }
      - { from: replace, relationships: [failure], to: failed }
"#;
    let engine = start(yaml, &probe, dir.path());
    let item = |name: &str, word: &str| Item::new("ab ab cd", &[("name", name), ("word", word)]);
    probe.feed(
        "feed",
        [
            item("1", "ab"),
            item("2", "ab"),
            item("3", "cd"),
            item("4", "("),
            item("5", "ab"),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || {
        probe.count("out") >= 4 && probe.count("failed") >= 1
    }));
    let got = contents(&probe, "out");
    let text = |k: &str| String::from_utf8_lossy(&got[k]).into_owned();
    assert_eq!(
        [text("1"), text("2"), text("3"), text("5")],
        ["_ _ cd", "_ _ cd", "ab ab _", "_ _ cd"]
    );
    // An invalid regex goes to failure, and does not break the next flow file's search.
    assert_eq!(probe.recorded("failed")[0].attr("name"), "4");
    engine.stop().unwrap();
}

#[test]
fn compress_content_gzip_round_trip_and_bad_input_to_failure() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = r#"flow: gzip
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - { name: junk, type: Feed }
      - { name: compress, type: CompressContent, properties: { Mode: compress } }
      - { name: decompress, type: CompressContent, properties: { Mode: decompress } }
      - { name: gz, type: Recorder, auto_terminate: [success] }
      - { name: plain, type: Recorder, auto_terminate: [success] }
      - { name: failed, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: compress }
      - { from: junk, relationships: [success], to: decompress }
      - { from: compress, relationships: [success], to: decompress }
      - { from: compress, relationships: [success], to: gz }
      - { from: decompress, relationships: [success], to: plain }
      - { from: compress, relationships: [failure], to: failed }
      - { from: decompress, relationships: [failure], to: failed }
"#;
    let engine = start(yaml, &probe, dir.path());
    let text: Vec<u8> = "the quick brown fox jumps over the lazy dog\n"
        .repeat(500)
        .into_bytes();
    let binary: Vec<u8> = (0..70_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let originals = BTreeMap::from([
        ("text".to_string(), text),
        ("binary".to_string(), binary),
        ("empty".to_string(), Vec::new()),
    ]);
    probe.feed(
        "feed",
        originals.iter().map(|(n, c)| Item {
            attributes: vec![("name".into(), n.clone())],
            content: c.clone(),
        }),
    );
    probe.feed("junk", [Item::new("not gzip at all", &[("name", "junk")])]);
    assert!(wait_for(Duration::from_secs(10), || probe.count("plain")
        == 3
        && probe.count("gz") == 3
        && probe.count("failed") == 1));
    for r in probe.recorded("gz") {
        assert_eq!(&r.content[..2], [0x1f, 0x8b], "gzip magic");
        assert_eq!(r.attr("mime.type"), "application/gzip");
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&r.content[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, originals[r.attr("name")], "{}", r.attr("name"));
    }
    let gz_text = probe
        .recorded("gz")
        .into_iter()
        .find(|r| r.attr("name") == "text")
        .unwrap();
    assert!(gz_text.content.len() < 2_000, "text compresses");
    assert_eq!(contents(&probe, "plain"), originals);
    let failed = probe.recorded("failed");
    assert_eq!(failed[0].attr("name"), "junk");
    assert_eq!(failed[0].content, b"not gzip at all");
    engine.stop().unwrap();
}

#[test]
fn cryptographic_hash_content_writes_known_digests() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let mut yaml = String::from(
        "flow: hash\nsettings: { sync: none }\ngroups:\n  - name: g\n    processors:\n      - { name: feed, type: Feed }\n",
    );
    let algorithms = ["SHA-224", "SHA-256", "SHA-384", "SHA-512"];
    for a in algorithms {
        yaml += &format!(
            "      - {{ name: h{a}, type: CryptographicHashContent, properties: {{ Hash Algorithm: {a} }}, auto_terminate: [failure] }}\n      - {{ name: out{a}, type: Recorder, auto_terminate: [success] }}\n"
        );
    }
    yaml += "    connections:\n";
    for a in algorithms {
        yaml += &format!(
            "      - {{ from: feed, relationships: [success], to: h{a} }}\n      - {{ from: h{a}, relationships: [success], to: out{a} }}\n"
        );
    }
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            Item::new("abc", &[("name", "abc")]),
            Item::new("", &[("name", "empty")]),
        ],
    );
    // FIPS 180-2 test vectors.
    let known: [(&str, &str, &str); 8] = [
        (
            "SHA-224",
            "abc",
            "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7",
        ),
        (
            "SHA-224",
            "empty",
            "d14a028c2a3a2bc9476102bb288234c415a2b01f828ea62ac5b3e42f",
        ),
        (
            "SHA-256",
            "abc",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        (
            "SHA-256",
            "empty",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ),
        (
            "SHA-384",
            "abc",
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
        ),
        (
            "SHA-384",
            "empty",
            "38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b",
        ),
        (
            "SHA-512",
            "abc",
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
        ),
        (
            "SHA-512",
            "empty",
            "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
        ),
    ];
    assert!(wait_for(Duration::from_secs(10), || algorithms
        .iter()
        .all(|a| probe.count(&format!("out{a}")) == 2)));
    for (a, name, digest) in known {
        let r = probe
            .recorded(&format!("out{a}"))
            .into_iter()
            .find(|r| r.attr("name") == name)
            .unwrap();
        assert_eq!(r.attr(&format!("content_{a}")), digest, "{a} of {name}");
        // The content is untouched.
        assert_eq!(r.content, if name == "abc" { &b"abc"[..] } else { b"" });
    }
    engine.stop().unwrap();
}

/// 1,600 flow files whose 16 correlation values come in turn: `Maximum Number of Entries`
/// of each value arrive only after many of every other value.
fn interleaved(n: usize, keys: usize) -> Vec<Item> {
    (0..n)
        .map(|i| {
            let key = format!("k{:02}", i % keys);
            Item::new(&format!("line-{i:04}"), &[("key", &key)])
        })
        .collect()
}

/// The merged flow files' lines, checked to be of one correlation value each; every line
/// of `n` must be there exactly once.
fn assert_every_line_once(merged: &[support::Recorded], n: usize) {
    let mut seen = BTreeMap::new();
    for r in merged {
        let key = r.attr("key");
        let lines: Vec<&str> = std::str::from_utf8(&r.content)
            .unwrap()
            .split('\n')
            .collect();
        assert_eq!(r.attr("merge.count"), lines.len().to_string());
        for line in lines {
            let i: usize = line.strip_prefix("line-").unwrap().parse().unwrap();
            assert_eq!(format!("k{:02}", i % 16), key, "{line} merged under {key}");
            *seen.entry(i).or_insert(0) += 1;
        }
    }
    let missing: Vec<usize> = (0..n).filter(|i| !seen.contains_key(i)).collect();
    let twice: Vec<usize> = seen
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(i, _)| *i)
        .collect();
    assert!(missing.is_empty(), "lines never merged: {missing:?}");
    assert!(twice.is_empty(), "lines merged twice: {twice:?}");
}

fn merge_flow(engine_line: &str, bins: usize, extra: &str) -> String {
    format!(
        r#"flow: merge-interleaved
settings: {{ sync: none }}
groups:
  - name: g
{engine_line}
    processors:
      - {{ name: feed, type: Feed }}
      - name: merge
        type: MergeContent
        auto_terminate: [original, failure]
        properties:
          Minimum Number of Entries: "100"
          Maximum Number of Entries: "100"
          Maximum number of Bins: "{bins}"
          Correlation Attribute Name: key
          Demarcator: '\n'
{extra}
    connections:
      - {{ from: feed, relationships: [success], to: merge }}
      - {{ from: merge, relationships: [merged], to: out }}
    ports:
      output:
        - {{ name: out }}
  - name: sink
    processors:
      - {{ name: merged, type: Recorder, auto_terminate: [success] }}
connections:
  - {{ from: g/out, to: merged }}
"#
    )
}

#[test]
fn merge_content_keeps_bins_across_triggers_so_interleaved_keys_merge_every_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let engine = start(&merge_flow("", 16, ""), &probe, dir.path());
    probe.feed("feed", interleaved(1600, 16));
    assert!(
        wait_for(Duration::from_secs(20), || probe.count("merged") == 16),
        "merged {} of 16 bins",
        probe.count("merged")
    );
    let merged = probe.recorded("merged");
    assert!(merged.iter().all(|r| r.attr("merge.count") == "100"));
    assert_every_line_once(&merged, 1600);
    engine.wait_until_idle(Duration::from_millis(100));
    assert_eq!(
        engine
            .status()
            .connections
            .iter()
            .map(|c| c.count)
            .sum::<u64>(),
        0
    );
    engine.stop().unwrap();
}

#[test]
fn merge_content_in_a_stateless_group_merges_interleaved_keys_every_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = merge_flow("    engine: stateless\n    timeout: 30 s", 16, "");
    let engine = start(&yaml, &probe, dir.path());
    probe.feed("feed", interleaved(1600, 16));
    assert!(
        wait_for(Duration::from_secs(20), || probe.count("merged") == 16),
        "merged {} of 16 bins",
        probe.count("merged")
    );
    let merged = probe.recorded("merged");
    assert!(merged.iter().all(|r| r.attr("merge.count") == "100"));
    assert_every_line_once(&merged, 1600);
    engine.stop().unwrap();
}

#[test]
fn merge_content_at_its_bin_limit_merges_the_oldest_bin_as_it_is() {
    for engine_line in ["", "    engine: stateless\n    timeout: 30 s"] {
        let dir = tempfile::tempdir().unwrap();
        let probe = Arc::new(Probe::default());
        // The default limit, 5 bins, for 16 values in turn: every new value evicts the
        // oldest bin; the last 5 bins go by their age (a stateless transaction cannot
        // commit while a bin waits).
        let extra = "          Max Bin Age: 300 ms";
        let engine = start(&merge_flow(engine_line, 5, extra), &probe, dir.path());
        probe.feed("feed", interleaved(1600, 16));
        let lines = || {
            probe
                .recorded("merged")
                .iter()
                .map(|r| r.attr("merge.count").parse::<usize>().unwrap())
                .sum::<usize>()
        };
        assert!(
            wait_for(Duration::from_secs(20), || lines() == 1600),
            "{engine_line}: {} lines merged",
            lines()
        );
        let merged = probe.recorded("merged");
        // Evicted bins are merged as they are, far from full.
        assert!(
            merged.len() > 16 * 10,
            "{engine_line}: {} merges",
            merged.len()
        );
        assert_every_line_once(&merged, 1600);
        engine.stop().unwrap();
    }
}

#[test]
fn max_bin_age_merges_an_incomplete_bin_held_across_triggers() {
    for engine_line in ["", "    engine: stateless\n    timeout: 30 s"] {
        let dir = tempfile::tempdir().unwrap();
        let probe = Arc::new(Probe::default());
        let extra = "          Max Bin Age: 300 ms";
        let engine = start(&merge_flow(engine_line, 16, extra), &probe, dir.path());
        let fed = std::time::Instant::now();
        // 50 of the 100 a bin needs, for two values.
        probe.feed("feed", interleaved(100, 2));
        assert!(
            wait_for(Duration::from_secs(10), || probe.count("merged") == 2),
            "{engine_line}: merged {}",
            probe.count("merged")
        );
        assert!(fed.elapsed() >= Duration::from_millis(300));
        let merged = probe.recorded("merged");
        assert!(merged.iter().all(|r| r.attr("merge.count") == "50"));
        let lines: usize = merged
            .iter()
            .map(|r| r.content.split(|b| *b == b'\n').count())
            .sum();
        assert_eq!(lines, 100);
        engine.stop().unwrap();
    }
}
