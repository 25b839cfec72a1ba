//! The text, JSON and flow-control processors in running flows: ExtractText,
//! RouteOnContent, RouteText, EvaluateJsonPath, SplitJson, DetectDuplicate and ControlRate.
//! A test `Feed` makes the input and `Recorder`s keep what each relationship receives.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{Item, Probe, queued_to, registry, start, wait_for};
use weir_flow::definition::Flow;
use weir_flow::provenance::{EventType, ProvenanceEvent, ProvenanceRepository, Query};

/// A flow of `feed` -> the processor `under` (its YAML given) -> one recorder per
/// relationship in `relationships`, each named after it.
fn flow(under: &str, relationships: &[&str]) -> String {
    let mut yaml = String::from(
        "flow: t\nsettings: { sync: none }\ngroups:\n  - name: g\n    processors:\n      - { name: feed, type: Feed }\n",
    );
    for line in under.lines() {
        yaml.push_str("      ");
        yaml.push_str(line);
        yaml.push('\n');
    }
    for rel in relationships {
        yaml.push_str(&format!(
            "      - {{ name: \"to-{rel}\", type: Recorder, auto_terminate: [success] }}\n"
        ));
    }
    yaml.push_str(
        "    connections:\n      - { from: feed, relationships: [success], to: under }\n",
    );
    for rel in relationships {
        yaml.push_str(&format!(
            "      - {{ from: under, relationships: [\"{rel}\"], to: \"to-{rel}\" }}\n"
        ));
    }
    yaml
}

/// The events `component` recorded, oldest first.
fn events(dir: &std::path::Path, component: &str) -> Vec<ProvenanceEvent> {
    let prov =
        ProvenanceRepository::open(&dir.join("repo/provenance"), Duration::MAX, u64::MAX).unwrap();
    prov.query(
        &Query {
            component: Some(component.into()),
            ..Query::default()
        },
        10_000,
    )
    .unwrap()
}

fn count(events: &[ProvenanceEvent], kind: EventType) -> usize {
    events.iter().filter(|e| e.event_type == kind).count()
}

/// Validation's message for `yaml`, which must be refused.
fn refused(yaml: &str) -> String {
    let probe = Arc::new(Probe::default());
    match Flow::parse_with(yaml, "t.yaml", &registry(&probe)) {
        Ok(_) => panic!("validation took the flow:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

fn by_name(recorded: &[support::Recorded]) -> BTreeMap<String, support::Recorded> {
    recorded
        .iter()
        .map(|r| (r.attr("name").to_string(), r.clone()))
        .collect()
}

fn item(name: &str, content: &[u8], attributes: &[(&str, &str)]) -> Item {
    let mut it = Item::new("", attributes);
    it.attributes.push(("name".into(), name.into()));
    it.content = content.to_vec();
    it
}

#[test]
fn extract_text_sets_capture_groups_and_routes_by_match() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: ExtractText
  properties:
    Maximum Buffer Size: 8 B
    Include Capture Group 0: "false"
    id: 'id=(\d+)'
    word: '([a-zé]+)'
    many: '(\w)(\w)?'
    last: '(\w)$'"#,
        &["matched", "unmatched"],
    );
    let engine = start(&yaml, &probe, dir.path());
    // `é` is two bytes: bytes 6 and 7 of "id=42 é!", which a buffer of 8 bytes holds, while
    // the buffer's end cuts the `é` of "id=1 xyé" after its first byte.
    probe.feed(
        "feed",
        [
            item("both", "id=42 é!".as_bytes(), &[]),
            item("cut", "id=1 xyé".as_bytes(), &[]),
            item("empty", b"", &[]),
            item("digits", b"1234", &[]),
            item("latin", b"id=7 \xff\xfe", &[]),
            item("beyond", b"........id=9", &[]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-matched")
        + probe.count("to-unmatched")
        == 6));
    let matched = by_name(&probe.recorded("to-matched"));
    let both = &matched["both"].attributes;
    assert_eq!(both["id"], "42");
    assert_eq!(both["id.1"], "42");
    assert_eq!(both["word"], "id", "the first match only");
    assert_eq!(both["many"], "i");
    assert_eq!(both["many.2"], "d");
    assert!(!both.contains_key("id.0"), "capture group 0 is left out");
    assert_eq!(
        both["last"], "é",
        "a character that ends at the buffer's end is read"
    );
    assert_eq!(matched["cut"].attr("word"), "id");
    assert_eq!(
        matched["cut"].attr("last"),
        "y",
        "a character the buffer cuts is left out"
    );
    assert_eq!(matched["digits"].attr("many.1"), "1");
    assert_eq!(matched["digits"].attr("many.2"), "2");
    assert!(!matched["digits"].attributes.contains_key("id"));
    assert_eq!(
        matched["latin"].attr("id"),
        "7",
        "invalid UTF-8 reads as replacement characters"
    );
    let unmatched = by_name(&probe.recorded("to-unmatched"));
    assert!(unmatched.contains_key("empty"));
    // Only the first 8 bytes are looked at: `id=9` is past them, and the dots match nothing.
    assert!(unmatched.contains_key("beyond"));
    assert!(!unmatched["beyond"].attributes.contains_key("id"));
    engine.stop().unwrap();
    let evs = events(dir.path(), "under");
    assert_eq!(count(&evs, EventType::ATTRIBUTES_MODIFIED), 4);
}

#[test]
fn extract_text_refuses_what_its_regex_engine_cannot_do() {
    let message = refused(&flow(
        "- name: under\n  type: ExtractText\n  properties:\n    behind: '(?<=a)b'\n    Enable Canonical Equivalence: \"true\"",
        &["matched", "unmatched"],
    ));
    assert!(message.contains("properties.behind"), "{message}");
    assert!(
        message.contains("properties.Enable Canonical Equivalence"),
        "{message}"
    );
}

#[test]
fn route_on_content_clones_to_every_matching_route() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: RouteOnContent
  properties:
    Match Requirement: content must contain match
    errors: '(?m)^ERROR'
    level: '${level}'
    empty: '^$'"#,
        &["errors", "level", "empty", "unmatched"],
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            item("error", b"ok\nERROR disk", &[("level", "disk")]),
            // The attribute is matched literally: `a.b` does not match `axb`.
            item("quoted", b"axb", &[("level", "a.b")]),
            item("literal", b"xa.by", &[("level", "a.b")]),
            item("none", b"fine", &[("level", "nothing")]),
            item("blank", b"", &[]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-errors")
        + probe.count("to-level")
        + probe.count("to-empty")
        + probe.count("to-unmatched")
        == 7));
    let names = |r: &str| -> Vec<String> {
        let mut n: Vec<String> = probe
            .recorded(r)
            .iter()
            .map(|x| x.attr("name").to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names("to-errors"), ["error"]);
    // A missing attribute is empty, and an empty expression matches anything.
    assert_eq!(names("to-level"), ["blank", "error", "literal"]);
    assert_eq!(names("to-empty"), ["blank"]);
    assert_eq!(names("to-unmatched"), ["none", "quoted"]);
    for r in ["errors", "level", "empty", "unmatched"] {
        for got in probe.recorded(&format!("to-{r}")) {
            assert_eq!(got.attr("RouteOnContent.Route"), r);
        }
    }
    engine.stop().unwrap();
    let evs = events(dir.path(), "under");
    assert_eq!(
        count(&evs, EventType::CLONE),
        2,
        "a copy for each second route"
    );
    assert_eq!(count(&evs, EventType::ROUTE), 7);
}

#[test]
fn route_on_content_matches_the_whole_content_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        "- name: under\n  type: RouteOnContent\n  properties:\n    number: '\\d+'\n    anything: '(?s).*'",
        &["number", "anything", "unmatched"],
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [item("n", b"123", &[]), item("mixed", b"12a\n", &[])],
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-number")
        + probe.count("to-anything")
        == 3));
    assert_eq!(probe.recorded("to-number")[0].attr("name"), "n");
    assert_eq!(probe.count("to-unmatched"), 0);
    engine.stop().unwrap();
}

#[test]
fn route_text_routes_lines_into_flow_files_per_relationship_and_group() {
    // A choice is matched ignoring case (`starts with`), as validation reads it.
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: RouteText
  properties:
    Matching Strategy: starts with
    Ignore Case: "true"
    Grouping Regular Expression: '(\w+),.*'
    errors: ERROR
    warnings: '${warn}'"#,
        &["original", "unmatched", "errors", "warnings"],
    );
    let engine = start(&yaml, &probe, dir.path());
    let log = "error,a\r\n  WARN,b\nerror,b\ninfo,c\nwarn,b\nerror,a";
    probe.feed("feed", [item("log", log.as_bytes(), &[("warn", "warn")])]);
    // Each relationship's recorder runs on its own: wait for all of them.
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-original")
        == 1
        && probe.count("to-errors") == 1
        && probe.count("to-warnings") == 2
        && probe.count("to-unmatched") == 1));
    let errors = probe.recorded("to-errors");
    let by_group: BTreeMap<&str, &str> = errors
        .iter()
        .map(|r| {
            (
                r.attr("RouteText.Group"),
                std::str::from_utf8(&r.content).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_group,
        BTreeMap::from([("error", "error,a\r\nerror,b\nerror,a")]),
        "lines keep their endings; the last has none"
    );
    let warnings = probe.recorded("to-warnings");
    let by_group: BTreeMap<&str, &str> = warnings
        .iter()
        .map(|r| {
            (
                r.attr("RouteText.Group"),
                std::str::from_utf8(&r.content).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_group,
        BTreeMap::from([("WARN", "  WARN,b\n"), ("warn", "warn,b\n")]),
        "leading whitespace is ignored; groups keep their case"
    );
    assert_eq!(warnings[0].attr("RouteText.Route"), "warnings");
    let unmatched = probe.recorded("to-unmatched");
    assert_eq!(unmatched.len(), 1);
    assert_eq!(unmatched[0].content, b"info,c\n");
    assert_eq!(
        unmatched[0].attr("name"),
        "log",
        "a line's flow file keeps the original's attributes"
    );
    let original = &probe.recorded("to-original")[0];
    assert_eq!(original.attr("RouteText.Route"), "original");
    assert_eq!(original.content, log.as_bytes());
    engine.stop().unwrap();
    let evs = events(dir.path(), "under");
    assert_eq!(count(&evs, EventType::FORK), 1);
    assert_eq!(
        count(&evs, EventType::ROUTE),
        5,
        "four flow files of lines and the original"
    );
}

#[test]
fn route_text_matches_expressions_and_regexes_to_matched() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r##"- name: under
  type: RouteText
  auto_terminate: [unmatched]
  properties:
    Matching Strategy: Satisfies Expression
    Routing Strategy: Route to 'matched' if line matches all conditions
    Ignore Leading/Trailing Whitespace: "false"
    after-first: '${lineNo:gt(1)}'
    not-comment: '${line:startsWith("#"):not()}'"##,
        &["original", "matched"],
    );
    let regex = flow(
        r#"- name: under
  type: RouteText
  properties:
    Matching Strategy: Matches Regular Expression
    Routing Strategy: Route to 'matched' if lines matches any condition
    number: '\d+'
    empty: ''"#,
        &["original", "matched", "unmatched"],
    );
    assert!(refused(&regex).contains("properties.empty"));
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            item("text", "header\n# note\nkeep é\n\n #x".as_bytes(), &[]),
            item("nothing", b"", &[]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-original")
        == 2
        && probe.count("to-matched") >= 1));
    let matched = probe.recorded("to-matched");
    assert_eq!(
        matched.len(),
        1,
        "an empty content makes no flow file of lines"
    );
    assert_eq!(
        std::str::from_utf8(&matched[0].content).unwrap(),
        "keep é\n\n #x",
        "an empty line and one with a leading space match"
    );
    assert_eq!(matched[0].attr("RouteText.Group"), "");
    engine.stop().unwrap();
}

#[test]
fn evaluate_json_path_fills_attributes_or_replaces_content() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: EvaluateJsonPath
  properties:
    Destination: flowfile-attribute
    Null Value Representation: the string 'null'
    city: $.address.city
    key: "$['clé \"q\"']"
    first-tag: $.tags[0]
    missing: $.nope
    nothing: $.none"#,
        &["matched", "unmatched", "failure"],
    );
    let engine = start(&yaml, &probe, dir.path());
    let doc = r#"{"address": {"city": "Zürich\n\"Z\""}, "clé \"q\"": "\u00e9\ud83d\ude00", "tags": [[1, 2], "b"], "none": null}"#;
    probe.feed(
        "feed",
        [
            item("doc", doc.as_bytes(), &[]),
            item("bad", b"{\"a\": ", &[]),
            item("empty", b"", &[]),
            item("binary", b"\"\xff\"", &[]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-matched")
        + probe.count("to-failure")
        == 4));
    // Scalars only for attributes (auto-detect): the first tag is an array, so failure.
    let failed: Vec<String> = probe
        .recorded("to-failure")
        .iter()
        .map(|r| r.attr("name").to_string())
        .collect();
    assert_eq!(failed.len(), 4, "{failed:?}");
    engine.stop().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: EvaluateJsonPath
  properties:
    Destination: flowfile-attribute
    Return Type: json
    city: $.address.city
    key: "$['clé \"q\"']"
    first-tag: $.tags[0]
    missing: $.nope
    nothing: $.none"#,
        &["matched", "unmatched", "failure"],
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed("feed", [item("doc", doc.as_bytes(), &[])]);
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-matched")
        == 1));
    let got = &probe.recorded("to-matched")[0];
    assert_eq!(got.attr("city"), "Zürich\n\"Z\"");
    assert_eq!(got.attr("key"), "é😀");
    assert_eq!(got.attr("first-tag"), "[1,2]");
    assert_eq!(got.attributes.get("missing").map(String::as_str), Some(""));
    assert_eq!(got.attributes.get("nothing").map(String::as_str), Some(""));
    engine.stop().unwrap();
    assert_eq!(
        count(&events(dir.path(), "under"), EventType::ATTRIBUTES_MODIFIED),
        1
    );

    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        "- name: under\n  type: EvaluateJsonPath\n  properties:\n    result: $..name",
        &["matched", "unmatched", "failure"],
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            item(
                "names",
                br#"{"b": [{"name": {"z": 1, "n": 2}}], "a": {"name": "x"}}"#,
                &[],
            ),
            item("none", br#"[]"#, &[]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-matched")
        == 2));
    let contents: BTreeMap<String, String> = probe
        .recorded("to-matched")
        .iter()
        .map(|r| {
            (
                r.attr("name").to_string(),
                String::from_utf8(r.content.clone()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        contents["names"], r#"[{"z":1,"n":2},"x"]"#,
        "in the document's order"
    );
    assert_eq!(
        contents["none"], "[]",
        "an indefinite path that finds nothing is an empty array"
    );
    engine.stop().unwrap();
    assert_eq!(
        count(&events(dir.path(), "under"), EventType::CONTENT_MODIFIED),
        2
    );

    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        "- name: under\n  type: EvaluateJsonPath\n  properties:\n    result: $.a.b",
        &["matched", "unmatched", "failure"],
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed("feed", [item("no-b", br#"{"a": {}}"#, &[])]);
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-unmatched")
        == 1));
    assert_eq!(probe.recorded("to-unmatched")[0].content, br#"{"a": {}}"#);
    engine.stop().unwrap();
}

#[test]
fn evaluate_json_path_refuses_bad_paths_at_validation() {
    let message = refused(&flow(
        "- name: under\n  type: EvaluateJsonPath\n  properties:\n    Destination: flowfile-attribute\n    size: $.items.length()",
        &["matched", "unmatched", "failure"],
    ));
    assert!(message.contains("properties.size"), "{message}");
    let message = refused(&flow(
        "- name: under\n  type: EvaluateJsonPath\n  properties:\n    a: $.a\n    b: $.b",
        &["matched", "unmatched", "failure"],
    ));
    assert!(message.contains("properties.Destination"), "{message}");
    let message = refused(&flow(
        "- name: under\n  type: SplitJson\n  properties:\n    JsonPath Expression: '$.a['",
        &["split", "original", "failure"],
    ));
    assert!(
        message.contains("properties.JsonPath Expression"),
        "{message}"
    );
}

#[test]
fn split_json_makes_a_flow_file_per_element() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        "- name: under\n  type: SplitJson\n  properties:\n    JsonPath Expression: $.items",
        &["split", "original", "failure"],
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            item(
                "doc",
                r#"{"items": [{"k\u00e9y": "v\"1"}, [1, [2]], "s", null, 3.5]}"#.as_bytes(),
                &[],
            ),
            item("empty-array", br#"{"items": []}"#, &[]),
            item("object", br#"{"items": {"a": 1}}"#, &[]),
            item("missing", br#"{"other": []}"#, &[]),
            item("broken", br#"{"items": [1,"#, &[]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-original")
        + probe.count("to-failure")
        == 5
        && probe.count("to-split") == 5));
    let mut splits = probe.recorded("to-split");
    splits.sort_by_key(|r| r.attr("fragment.index").parse::<usize>().unwrap());
    let contents: Vec<String> = splits
        .iter()
        .map(|r| String::from_utf8(r.content.clone()).unwrap())
        .collect();
    // Objects and arrays as written (escapes included), without the spaces between tokens.
    assert_eq!(
        contents,
        [r#"{"k\u00e9y":"v\"1"}"#, "[1,[2]]", "s", "", "3.5"]
    );
    let indexes: Vec<&str> = splits.iter().map(|r| r.attr("fragment.index")).collect();
    assert_eq!(
        indexes,
        ["0", "1", "2", "3", "4"],
        "SplitJson counts from 0"
    );
    let originals = by_name(&probe.recorded("to-original"));
    let doc = &originals["doc"];
    for s in &splits {
        assert_eq!(s.attr("fragment.count"), "5");
        assert_eq!(
            s.attr("fragment.identifier"),
            doc.attr("fragment.identifier")
        );
        assert_eq!(s.attr("segment.original.filename"), doc.attr("filename"));
    }
    assert_eq!(doc.attr("fragment.count"), "5");
    assert_eq!(originals["empty-array"].attr("fragment.count"), "0");
    let mut failed: Vec<String> = probe
        .recorded("to-failure")
        .iter()
        .map(|r| r.attr("name").to_string())
        .collect();
    failed.sort();
    assert_eq!(failed, ["broken", "missing", "object"]);
    engine.stop().unwrap();
    let evs = events(dir.path(), "under");
    let forks: Vec<&ProvenanceEvent> = evs
        .iter()
        .filter(|e| e.event_type == EventType::FORK)
        .collect();
    assert_eq!(forks.len(), 1, "the empty array forks nothing");
    assert_eq!(forks[0].children.len(), 5);
}

#[test]
fn detect_duplicate_routes_repeats_and_evicts_the_oldest_at_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: DetectDuplicate
  penalty: 10 ms
  properties:
    Cache Entry Identifier: '${key}'
    FlowFile Description: 'first ${name}'
    Maximum Cache Entries: "2""#,
        &["duplicate", "non-duplicate", "failure"],
    );
    let engine = start(&yaml, &probe, dir.path());
    let feed = |items: &[(&str, &str)]| {
        probe.feed(
            "feed",
            items
                .iter()
                .map(|(name, key)| item(name, b"", &[("key", key)])),
        );
    };
    // The cache holds two: a and b stay, c evicts a, so the last a is new again.
    feed(&[("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b")]);
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-duplicate")
        == 2));
    feed(&[("c1", "c"), ("a3", "a"), ("none", "  ")]);
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-non-duplicate")
        == 4
        && probe.count("to-failure") == 1));
    let dups = by_name(&probe.recorded("to-duplicate"));
    assert_eq!(dups.keys().collect::<Vec<_>>(), ["a2", "b2"]);
    assert_eq!(dups["a2"].attr("original.flowfile.description"), "first a1");
    assert_eq!(dups["b2"].attr("original.flowfile.description"), "first b1");
    let fresh: Vec<String> = probe
        .recorded("to-non-duplicate")
        .iter()
        .map(|r| r.attr("name").to_string())
        .collect();
    assert_eq!(fresh, ["a1", "b1", "c1", "a3"]);
    engine.stop().unwrap();
    let evs = events(dir.path(), "under");
    let routes: Vec<&str> = evs
        .iter()
        .filter(|e| e.event_type == EventType::ROUTE)
        .filter_map(|e| e.details.as_deref())
        .collect();
    assert_eq!(routes.len(), 6);
    assert_eq!(
        routes
            .iter()
            .filter(|d| d.starts_with("Duplicate of"))
            .count(),
        2
    );
}

#[test]
fn detect_duplicate_and_control_rate_stay_out_of_stateless_groups() {
    for (kind, props) in [
        ("DetectDuplicate", "{}"),
        ("ControlRate", "{ Maximum Rate: 1 KB }"),
    ] {
        let yaml = format!(
            r#"flow: t
groups:
  - name: g
    engine: stateless
    processors:
      - {{ name: feed, type: Feed }}
      - {{ name: under, type: {kind}, properties: {props}, auto_terminate: [success, failure, duplicate, non-duplicate] }}
    connections:
      - {{ from: feed, relationships: [success], to: under }}
"#
        );
        let message = refused(&yaml);
        assert!(message.contains("traditional group"), "{kind}: {message}");
    }
}

#[test]
fn control_rate_holds_flow_files_in_the_queue_without_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: ControlRate
  properties:
    Rate Control Criteria: flowfile count
    Maximum Rate: "2"
    Time Duration: 1 sec"#,
        &["success", "failure"],
    );
    let engine = start(&yaml, &probe, dir.path());
    let tasks = || engine.monitor().processor("under").unwrap().tasks;
    let idle_tasks = tasks();
    probe.feed("feed", (0..5).map(|i| item(&format!("f{i}"), b"x", &[])));
    let fed = Instant::now();
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-success")
        == 2));
    // The other three wait in the queue until the window moves on.
    assert!(wait_for(Duration::from_secs(10), || queued_to(
        &engine, "under"
    ) == 3));
    let held_from = tasks();
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-success")
        == 4));
    assert!(
        fed.elapsed() >= Duration::from_millis(900),
        "the second pair waited for the window"
    );
    let held_tasks = tasks() - held_from;
    assert!(
        held_tasks < 20,
        "{held_tasks} triggers while holding for a second: it must rest, not spin (idle: {idle_tasks})"
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-success")
        == 5));
    assert!(fed.elapsed() >= Duration::from_millis(1800));
    assert_eq!(probe.count("to-failure"), 0);
    engine.stop().unwrap();
}

#[test]
fn control_rate_keeps_a_rate_per_group_and_checks_its_attribute() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: ControlRate
  properties:
    Rate Control Criteria: attribute value
    Rate Controlled Attribute: cost
    Maximum Rate: "10"
    Time Duration: 1 hour
    Grouping Attribute: tenant"#,
        &["success", "failure"],
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            item("a1", b"", &[("tenant", "a"), ("cost", "6")]),
            item("a2", b"", &[("tenant", "a"), ("cost", "6")]),
            item("a3", b"", &[("tenant", "a"), ("cost", "1")]),
            item("b1", b"", &[("tenant", "b"), ("cost", "10")]),
            item("c1", b"", &[("tenant", "c"), ("cost", "0")]),
            item("c2", b"", &[("tenant", "c"), ("cost", "x")]),
            item("d1", b"", &[("tenant", "d")]),
        ],
    );
    // a1 passes (6 < 10), a2 too (6 < 10 before it, 12 after: over by 2), then a's throttle
    // is closed; b1 passes; c and d have no positive cost: failure.
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-success")
        == 3
        && probe.count("to-failure") == 3));
    assert!(wait_for(Duration::from_secs(10), || queued_to(
        &engine, "under"
    ) == 1));
    let mut passed: Vec<String> = probe
        .recorded("to-success")
        .iter()
        .map(|r| r.attr("name").to_string())
        .collect();
    passed.sort();
    assert_eq!(passed, ["a1", "a2", "b1"]);
    engine.stop().unwrap();
}

#[test]
fn control_rate_can_route_what_exceeds_the_rate() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let yaml = flow(
        r#"- name: under
  type: ControlRate
  properties:
    Rate Control Criteria: data rate
    Maximum Rate: 4 B
    Time Duration: 1 hour
    Rate Exceeded Strategy: Route to 'rate exceeded'"#,
        &["success", "failure", "rate exceeded"],
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        [
            item("one", b"abc", &[]),
            item("two", b"de", &[]),
            item("three", b"f", &[]),
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || probe
        .count("to-success")
        + probe.count("to-rate exceeded")
        == 3));
    let passed: Vec<String> = probe
        .recorded("to-success")
        .iter()
        .map(|r| r.attr("name").to_string())
        .collect();
    assert_eq!(passed, ["one", "two"], "3 bytes then 2 more (over by 1)");
    assert_eq!(probe.recorded("to-rate exceeded")[0].attr("name"), "three");
    engine.stop().unwrap();
    let evs = events(dir.path(), "under");
    assert_eq!(count(&evs, EventType::ROUTE), 3);
}

#[test]
fn many_dynamic_properties_each_do_their_part() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    // Forty expressions for ExtractText and forty routes for RouteOnContent after it.
    let mut under = String::from("- name: under\n  type: ExtractText\n  properties:\n");
    let mut routes = String::from(
        "      - name: route\n        type: RouteOnContent\n        properties:\n          Match Requirement: content must contain match\n",
    );
    let mut recorders = String::new();
    let mut connections = String::new();
    for i in 0..40 {
        under.push_str(&format!("    f{i:02}: 'f{i:02}=(\\d+)'\n"));
        routes.push_str(&format!("          r{i:02}: 'f{i:02}=\\d*[02468]\\b'\n"));
        recorders.push_str(&format!(
            "      - {{ name: to-r{i:02}, type: Recorder, auto_terminate: [success] }}\n"
        ));
        connections.push_str(&format!(
            "      - {{ from: route, relationships: [r{i:02}], to: to-r{i:02} }}\n"
        ));
    }
    let mut yaml = flow(under.trim_end(), &["unmatched"]);
    let at = yaml.find("    connections:").unwrap();
    yaml.insert_str(
        at,
        &format!("{routes}{recorders}      - {{ name: to-none, type: Recorder, auto_terminate: [success] }}\n"),
    );
    yaml.push_str(&connections);
    yaml.push_str("      - { from: under, relationships: [matched], to: route }\n");
    yaml.push_str("      - { from: route, relationships: [unmatched], to: to-none }\n");
    let engine = start(&yaml, &probe, dir.path());
    let content: String = (0..40).map(|i| format!("f{i:02}={} ", i * 3)).collect();
    probe.feed("feed", [item("all", content.as_bytes(), &[])]);
    // Even values (i * 3 even for even i) route: twenty copies.
    assert!(wait_for(Duration::from_secs(10), || (0..40)
        .map(|i| probe.count(&format!("to-r{i:02}")))
        .sum::<usize>()
        == 20));
    for i in 0..40 {
        let got = probe.recorded(&format!("to-r{i:02}"));
        assert_eq!(got.len(), usize::from(i % 2 == 0), "route r{i:02}");
        if let Some(r) = got.first() {
            for j in 0..40 {
                assert_eq!(r.attr(&format!("f{j:02}")), (j * 3).to_string());
            }
            assert_eq!(r.attr("RouteOnContent.Route"), format!("r{i:02}"));
        }
    }
    assert_eq!(probe.count("to-none"), 0);
    engine.stop().unwrap();
}
