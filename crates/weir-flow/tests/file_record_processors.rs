//! ListFile, FetchFile, ConvertRecord and SplitRecord in running flows: listing a tree with
//! NiFi's attributes, the listing state across restarts (traditional and stateless), the
//! filters, FetchFile's relationships and completion strategies, and records converted and
//! split with their attributes.

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use support::{Item, Probe, Recorded, start, wait_for};
use weir_flow::definition::Flow;

/// Writes `content` to `path` (parents created) and sets its modification time `age` ago.
/// Puts a file at `path` with `content`, last modified `age` ago, in one step: written and
/// dated under a temporary name outside the listed directory, then renamed into place, so that
/// a listing never sees it with the time of its writing (and lists it twice).
fn touch(path: &Path, content: &[u8], age: Duration) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let staged = tempfile::NamedTempFile::new_in(std::env::temp_dir()).unwrap();
    fs::write(staged.path(), content).unwrap();
    set_age(staged.path(), age);
    staged.persist(path).unwrap();
}

fn set_age(path: &Path, age: Duration) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

const OLD: Duration = Duration::from_secs(60);

/// ListFile → FetchFile → `fetched` (success) / `other` (the rest), in a traditional group
/// or, with `stateless`, a stateless one feeding the recorders through a port.
fn list_fetch_flow(input: &Path, list_props: &str, stateless: bool) -> String {
    let input = input.display();
    if stateless {
        return format!(
            r#"flow: list-fetch
settings: {{ sync: none }}
groups:
  - name: g
    engine: stateless
    timeout: 30 s
    processors:
      - name: list
        type: ListFile
        properties: {{ Input Directory: "{input}"{list_props} }}
      - name: fetch
        type: FetchFile
        auto_terminate: [not.found, permission.denied, failure]
    connections:
      - {{ from: list, relationships: [success], to: fetch }}
      - {{ from: fetch, relationships: [success], to: out }}
    ports:
      output:
        - {{ name: out }}
  - name: sink
    processors:
      - {{ name: fetched, type: Recorder, auto_terminate: [success] }}
connections:
  - {{ from: g/out, to: fetched }}
"#
        );
    }
    format!(
        r#"flow: list-fetch
settings: {{ sync: none }}
groups:
  - name: g
    processors:
      - name: list
        type: ListFile
        schedule: {{ strategy: timer, period: 50 ms }}
        properties: {{ Input Directory: "{input}"{list_props} }}
      - {{ name: fetch, type: FetchFile, penalty: 10 ms }}
      - {{ name: fetched, type: Recorder, auto_terminate: [success] }}
      - {{ name: other, type: Recorder, auto_terminate: [success] }}
    connections:
      - {{ from: list, relationships: [success], to: fetch }}
      - {{ from: fetch, relationships: [success], to: fetched }}
      - {{ from: fetch, relationships: [not.found, permission.denied, failure], to: other }}
"#
    )
}

/// What a recorder received, by `path` + `filename`: (content, attributes).
fn by_file(recorded: &[Recorded]) -> BTreeMap<String, (String, BTreeMap<String, String>)> {
    recorded
        .iter()
        .map(|r| {
            (
                format!("{}{}", r.attr("path"), r.attr("filename")),
                (
                    String::from_utf8_lossy(&r.content).into_owned(),
                    r.attributes.clone(),
                ),
            )
        })
        .collect()
}

fn names(recorded: &[Recorded]) -> Vec<String> {
    by_file(recorded).into_keys().collect()
}

/// Waits until `recorder` has `n` flow files and the engine is idle, then checks no more came.
fn expect_count(engine: &weir_flow::engine::Engine, probe: &Probe, recorder: &str, n: usize) {
    assert!(
        wait_for(Duration::from_secs(20), || probe.count(recorder) >= n),
        "{recorder}: {} of {n}: {:?}",
        probe.count(recorder),
        names(&probe.recorded(recorder))
    );
    engine.wait_until_idle(Duration::from_millis(400));
    assert_eq!(
        probe.count(recorder),
        n,
        "{:?}",
        names(&probe.recorded(recorder))
    );
}

/// A tree of files (spaces, unicode, 0 bytes, hidden files and directories) is listed once
/// with NiFi's attributes and fetched; new and changed files are listed again, and a
/// restart on the same repository lists only what is new.
#[test]
fn list_file_lists_a_tree_once_with_nifis_attributes_and_only_new_files_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    touch(&input.join("a.txt"), b"alpha", OLD);
    touch(&input.join("sub/b c.txt"), b"bravo", OLD);
    touch(
        &input.join("sub/deeper/ünï €.txt"),
        "ünïcode".as_bytes(),
        OLD,
    );
    touch(&input.join("empty.txt"), b"", OLD);
    touch(&input.join(".hidden"), b"x", OLD);
    touch(&input.join(".git/config"), b"x", OLD);
    fs::create_dir_all(input.join("empty-dir")).unwrap();
    let yaml = list_fetch_flow(&input, "", false);
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    expect_count(&engine, &probe, "fetched", 4);
    let got = by_file(&probe.recorded("fetched"));
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        [
            "./a.txt",
            "./empty.txt",
            "sub/b c.txt",
            "sub/deeper/ünï €.txt"
        ]
    );
    let (content, attrs) = &got["sub/b c.txt"];
    assert_eq!(content, "bravo");
    let absolute_input = std::path::absolute(&input).unwrap();
    assert_eq!(
        attrs["absolute.path"],
        format!("{}/sub/", absolute_input.display())
    );
    assert_eq!(attrs["file.size"], "5");
    let mode = fs::metadata(input.join("sub/b c.txt"))
        .unwrap()
        .permissions()
        .mode();
    let expected_permissions: String = (0..9)
        .map(|i| {
            if mode & (1 << (8 - i)) == 0 {
                '-'
            } else {
                ['r', 'w', 'x'][i % 3]
            }
        })
        .collect();
    assert_eq!(attrs["file.permissions"], expected_permissions);
    assert!(!attrs["file.owner"].is_empty() && !attrs["file.group"].is_empty());
    let time = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000$").unwrap();
    for name in [
        "file.lastModifiedTime",
        "file.lastAccessTime",
        "file.creationTime",
    ] {
        assert!(time.is_match(&attrs[name]), "{name}: {}", attrs[name]);
    }
    assert_eq!(got["./empty.txt"].0, "");
    assert_eq!(got["./empty.txt"].1["file.size"], "0");
    assert_eq!(got["sub/deeper/ünï €.txt"].0, "ünïcode");
    assert_eq!(got["./a.txt"].1["path"], "./");

    // A changed file and a new one are listed; the rest are not.
    touch(&input.join("a.txt"), b"alpha 2", Duration::from_secs(30));
    touch(&input.join("sub/new.txt"), b"new", Duration::from_secs(1));
    expect_count(&engine, &probe, "fetched", 6);
    let later: Vec<(String, String)> = probe.recorded("fetched")[4..]
        .iter()
        .map(|r| {
            (
                r.attr("filename").to_string(),
                String::from_utf8_lossy(&r.content).into_owned(),
            )
        })
        .collect();
    assert_eq!(
        later,
        [
            ("a.txt".to_string(), "alpha 2".to_string()),
            ("new.txt".to_string(), "new".to_string())
        ]
    );
    engine.stop().unwrap();

    // A restart on the same repository lists nothing again, then only the next new file.
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    engine.wait_until_idle(Duration::from_millis(400));
    assert_eq!(
        probe.count("fetched"),
        0,
        "{:?}",
        names(&probe.recorded("fetched"))
    );
    touch(
        &input.join("after restart.txt"),
        b"third",
        Duration::from_secs(1),
    );
    expect_count(&engine, &probe, "fetched", 1);
    assert_eq!(names(&probe.recorded("fetched")), ["./after restart.txt"]);
    engine.stop().unwrap();
}

/// In a stateless group the listing state rides on the transaction's commit: a restart
/// lists nothing again.
#[test]
fn list_file_in_a_stateless_group_keeps_its_state_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    for i in 0..25 {
        touch(
            &input.join(format!("d{}/f{i:02}.txt", i % 3)),
            format!("file {i}").as_bytes(),
            OLD,
        );
    }
    let yaml = list_fetch_flow(&input, "", true);
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    expect_count(&engine, &probe, "fetched", 25);
    engine.stop().unwrap();
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    engine.wait_until_idle(Duration::from_millis(1500));
    assert_eq!(probe.count("fetched"), 0);
    touch(&input.join("d0/late.txt"), b"late", Duration::from_secs(1));
    expect_count(&engine, &probe, "fetched", 1);
    engine.stop().unwrap();
}

/// Files with the same modification time: each is listed once, and one that appears later
/// with that same time is listed then (the state keeps the names listed at the newest time).
/// A file that appears with a time older than the listed ones is not: timestamp tracking
/// cannot tell it from one already listed (NiFi's behaviour).
#[test]
fn files_with_the_newest_listed_time_are_each_listed_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let same = SystemTime::now() - OLD;
    let put = |name: &str, at: SystemTime| {
        let path = input.join(name);
        fs::create_dir_all(&input).unwrap();
        fs::write(&path, name).unwrap();
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(at)
            .unwrap();
    };
    put("one", same);
    put("two", same);
    let yaml = list_fetch_flow(&input, "", false);
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    expect_count(&engine, &probe, "fetched", 2);
    put("three", same);
    put("older", same - Duration::from_secs(10));
    expect_count(&engine, &probe, "fetched", 3);
    assert_eq!(probe.recorded("fetched")[2].attr("filename"), "three");
    engine.stop().unwrap();
}

/// File Filter, Path Filter, sizes, ages, hidden files and Recurse Subdirectories.
#[test]
fn list_file_filters_by_name_path_size_age_and_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    touch(&input.join("a.csv"), b"12345", OLD);
    touch(&input.join("big.csv"), &[b'x'; 20], OLD);
    touch(&input.join("zero.csv"), b"", OLD);
    touch(&input.join("a.txt"), b"12345", OLD);
    touch(&input.join(".h.csv"), b"12345", OLD);
    touch(&input.join("keep1/b.csv"), b"12345", OLD);
    touch(
        &input.join("keep1/old.csv"),
        b"12345",
        Duration::from_secs(7200),
    );
    touch(&input.join("keep1/young.csv"), b"12345", Duration::ZERO);
    touch(&input.join("skip/c.csv"), b"12345", OLD);
    let props = r#", File Filter: '.*\.csv', Path Filter: 'keep.*', Minimum File Size: 1 B, Maximum File Size: 10 B, Maximum File Age: 1 hour, Minimum File Age: 30 sec"#;
    let probe = Arc::new(Probe::default());
    let engine = start(&list_fetch_flow(&input, props, false), &probe, dir.path());
    expect_count(&engine, &probe, "fetched", 2);
    assert_eq!(
        names(&probe.recorded("fetched")),
        ["./a.csv", "keep1/b.csv"]
    );
    engine.stop().unwrap();

    // Not recursing, hidden files kept, no tracking: the top directory's files each time,
    // without the owner, group, permissions and times.
    let dir = tempfile::tempdir().unwrap();
    let props = r#", Recurse Subdirectories: "false", Ignore Hidden Files: "false", File Filter: '.*', Listing Strategy: No Tracking, Include File Attributes: "false""#;
    let probe = Arc::new(Probe::default());
    let engine = start(&list_fetch_flow(&input, props, false), &probe, dir.path());
    assert!(wait_for(Duration::from_secs(20), || probe.count("fetched") >= 15));
    engine.stop().unwrap();
    let recorded = probe.recorded("fetched");
    assert!(
        recorded
            .iter()
            .all(|r| r.attributes.contains_key("file.size")
                && !r.attributes.contains_key("file.owner")
                && !r.attributes.contains_key("file.lastModifiedTime"))
    );
    let listed: std::collections::BTreeSet<String> = names(&recorded).into_iter().collect();
    assert_eq!(
        listed.into_iter().collect::<Vec<_>>(),
        ["./.h.csv", "./a.csv", "./a.txt", "./big.csv", "./zero.csv"]
    );
}

/// An empty directory lists nothing; a missing one fails the trigger (a bulletin) and lists
/// once it exists.
#[test]
fn an_empty_or_missing_directory_lists_nothing_until_files_come() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("later");
    let yaml = list_fetch_flow(&input, "", false);
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    engine.wait_until_idle(Duration::from_millis(300));
    assert_eq!(probe.count("fetched"), 0);
    fs::create_dir_all(&input).unwrap();
    engine.wait_until_idle(Duration::from_millis(300));
    assert_eq!(probe.count("fetched"), 0);
    touch(&input.join("x"), b"x", Duration::from_secs(1));
    expect_count(&engine, &probe, "fetched", 1);
    engine.stop().unwrap();
}

fn fetch_flow(props: &str) -> String {
    format!(
        r#"flow: fetch
settings: {{ sync: always }}
groups:
  - name: g
    processors:
      - {{ name: feed, type: Feed }}
      - name: fetch
        type: FetchFile
        penalty: 10 ms
        properties: {{ File to Fetch: "${{file}}"{props} }}
      - {{ name: fetched, type: Recorder, auto_terminate: [success] }}
      - {{ name: not-found, type: Recorder, auto_terminate: [success] }}
      - {{ name: denied, type: Recorder, auto_terminate: [success] }}
      - {{ name: failed, type: Recorder, auto_terminate: [success] }}
    connections:
      - {{ from: feed, relationships: [success], to: fetch }}
      - {{ from: fetch, relationships: [success], to: fetched }}
      - {{ from: fetch, relationships: [not.found], to: not-found }}
      - {{ from: fetch, relationships: [permission.denied], to: denied }}
      - {{ from: fetch, relationships: [failure], to: failed }}
"#
    )
}

fn fetch_item(path: &Path) -> Item {
    Item::new("", &[("file", path.to_str().unwrap())])
}

/// Each of FetchFile's relationships, and the content replacing the flow file's.
#[test]
fn fetch_file_routes_missing_unreadable_and_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("ok.txt");
    fs::write(&ok, "fetched content").unwrap();
    let locked = dir.path().join("locked.txt");
    fs::write(&locked, "secret").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    // A superuser reads it anyway: then it is fetched like any file.
    let readable_anyway = fs::read(&locked).is_ok();
    let probe = Arc::new(Probe::default());
    let engine = start(
        &fetch_flow(", Log level when file not found: WARN"),
        &probe,
        dir.path(),
    );
    probe.feed(
        "feed",
        [
            fetch_item(&ok),
            fetch_item(&dir.path().join("missing.txt")),
            fetch_item(&locked),
            fetch_item(dir.path()),
        ],
    );
    let fetched = if readable_anyway { 2 } else { 1 };
    assert!(wait_for(Duration::from_secs(20), || {
        probe.count("fetched") == fetched
            && probe.count("not-found") == 1
            && probe.count("failed") == 1
            && probe.count("denied") == 1 - usize::from(readable_anyway)
    }));
    let ok_recorded = &probe.recorded("fetched")[0];
    assert_eq!(ok_recorded.content, b"fetched content");
    assert_eq!(ok_recorded.attr("fileSize"), "15");
    assert!(ok.exists(), "Completion Strategy None leaves the file");
    engine.stop().unwrap();
}

/// Delete File deletes the file once the content is committed; Move File moves it, each
/// Move Conflict Strategy as NiFi's; Fail routes to failure before reading.
#[test]
fn fetch_file_deletes_or_moves_the_file_after_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let done = dir.path().join("done");
    fs::create_dir_all(&src).unwrap();
    fs::create_dir_all(&done).unwrap();

    let probe = Arc::new(Probe::default());
    let engine = start(
        &fetch_flow(", Completion Strategy: Delete File"),
        &probe,
        &dir.path().join("delete"),
    );
    fs::write(src.join("d.txt"), "delete me").unwrap();
    probe.feed("feed", [fetch_item(&src.join("d.txt"))]);
    assert!(wait_for(Duration::from_secs(20), || probe.count("fetched")
        == 1
        && !src.join("d.txt").exists()));
    assert_eq!(probe.recorded("fetched")[0].content, b"delete me");
    engine.stop().unwrap();

    for (strategy, expect_in_done, expect_failed) in [
        ("Rename", 2, 0),
        ("Replace File", 1, 0),
        ("Keep Existing", 1, 0),
        ("Fail", 1, 1),
    ] {
        for e in fs::read_dir(&done).unwrap() {
            fs::remove_file(e.unwrap().path()).unwrap();
        }
        fs::write(done.join("m.txt"), "existing").unwrap();
        fs::write(src.join("m.txt"), "moved").unwrap();
        let probe = Arc::new(Probe::default());
        let props = format!(
            ", Completion Strategy: Move File, Move Destination Directory: \"{}\", Move Conflict Strategy: {strategy}",
            done.display()
        );
        let engine = start(
            &fetch_flow(&props),
            &probe,
            &dir.path().join(strategy.replace(' ', "-")),
        );
        probe.feed("feed", [fetch_item(&src.join("m.txt"))]);
        assert!(
            wait_for(Duration::from_secs(20), || {
                probe.count("fetched") + probe.count("failed") == 1
                    && (expect_failed == 1 || !src.join("m.txt").exists())
            }),
            "{strategy}"
        );
        engine.stop().unwrap();
        assert_eq!(probe.count("failed"), expect_failed, "{strategy}");
        assert_eq!(
            fs::read_dir(&done).unwrap().count(),
            expect_in_done,
            "{strategy}"
        );
        let kept = fs::read_to_string(done.join("m.txt")).unwrap();
        let expected = if strategy == "Replace File" {
            "moved"
        } else {
            "existing"
        };
        assert_eq!(kept, expected, "{strategy}");
        assert_eq!(src.join("m.txt").exists(), strategy == "Fail", "{strategy}");
    }
}

fn record_flow(processor: &str, props: &str) -> String {
    let relationships = if processor == "SplitRecord" {
        "      - { from: convert, relationships: [splits], to: out }\n      - { from: convert, relationships: [original], to: original }\n"
    } else {
        "      - { from: convert, relationships: [success], to: out }\n"
    };
    format!(
        r#"flow: records
settings: {{ sync: none }}
groups:
  - name: g
    processors:
      - {{ name: feed, type: Feed }}
      - name: convert
        type: {processor}
        properties: {{ {props} }}
      - {{ name: out, type: Recorder, auto_terminate: [success] }}
      - {{ name: original, type: Recorder, auto_terminate: [success] }}
      - {{ name: failed, type: Recorder, auto_terminate: [success] }}
    connections:
      - {{ from: feed, relationships: [success], to: convert }}
{relationships}      - {{ from: convert, relationships: [failure], to: failed }}
"#
    )
}

/// ConvertRecord: CSV to JSON with inferred types, a schema that does not fit sends the
/// flow file to failure unchanged naming the record, and a 5 MiB CSV converts whole.
#[test]
fn convert_record_converts_csv_to_json_and_fails_misfits_with_their_position() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let engine = start(
        &record_flow(
            "ConvertRecord",
            "Record Reader: CSVReader, Record Writer: JsonRecordSetWriter",
        ),
        &probe,
        dir.path(),
    );
    let big: String = std::iter::once("id,name,score\n".to_string())
        .chain((0..140_000).map(|i| format!("{i},\"name, {i}, lorem ipsum\",{}.5\n", i % 100)))
        .collect();
    assert!(big.len() > 5 << 20, "{}", big.len());
    probe.feed(
        "feed",
        [
            Item::new("a,b\n1,x\n2,\"y\"\"z\"", &[("name", "small")]),
            Item::new("a,b\n", &[("name", "header only")]),
            Item::new("a,b\n1,2\n3,4,5\n", &[("name", "ragged")]),
            Item::new(&big, &[("name", "big")]),
        ],
    );
    assert!(wait_for(Duration::from_secs(60), || probe.count("out")
        == 3
        && probe.count("failed") == 1));
    let out: BTreeMap<String, Recorded> = probe
        .recorded("out")
        .into_iter()
        .map(|r| (r.attr("name").to_string(), r))
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&out["small"].content),
        r#"[{"a":1,"b":"x"},{"a":2,"b":"y\"z"}]"#
    );
    assert_eq!(out["small"].attr("record.count"), "2");
    assert_eq!(out["small"].attr("mime.type"), "application/json");
    assert_eq!(out["header only"].content, b"[]");
    assert_eq!(out["header only"].attr("record.count"), "0");
    let big_out: Vec<serde_json::Value> = serde_json::from_slice(&out["big"].content).unwrap();
    assert_eq!(big_out.len(), 140_000);
    assert_eq!(out["big"].attr("record.count"), "140000");
    assert_eq!(
        big_out[139_999],
        serde_json::json!({"id": 139_999, "name": "name, 139999, lorem ipsum", "score": 99.5})
    );
    let failed = &probe.recorded("failed")[0];
    assert_eq!(failed.content, b"a,b\n1,2\n3,4,5\n", "unchanged");
    assert_eq!(
        failed.attr("failure.reason"),
        "record 2 (line 3): 3 values, but the header names 2 fields"
    );
    engine.stop().unwrap();
}

/// ConvertRecord with a schema text: JSON (an array, and JSON Lines) to CSV, the values
/// converted to the schema's types; a value that does not fit fails the whole flow file.
#[test]
fn convert_record_with_a_schema_text_converts_json_to_csv() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let schema = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"long"},{"name":"name","type":["null","string"]},{"name":"ok","type":"boolean","default":false}]}"#;
    let props = format!(
        "Record Reader: JsonTreeReader, Record Writer: CSVRecordSetWriter, Schema Access Strategy: \"Use 'Schema Text' Property\", Schema Text: '{schema}', Value Separator: ';'"
    );
    let engine = start(&record_flow("ConvertRecord", &props), &probe, dir.path());
    probe.feed(
        "feed",
        [
            Item::new(
                r#"[{"id":"1","name":"a;b","ok":true},{"id":2,"extra":[1]}]"#,
                &[("name", "array")],
            ),
            Item::new(
                "{\"id\":3,\"name\":\"\"}\n\n{\"id\":4}",
                &[("name", "lines")],
            ),
            Item::new("{\"id\":5}\n{\"id\":\"five\"}\n", &[("name", "misfit")]),
        ],
    );
    assert!(wait_for(Duration::from_secs(20), || probe.count("out")
        == 2
        && probe.count("failed") == 1));
    let out: BTreeMap<String, String> = probe
        .recorded("out")
        .into_iter()
        .map(|r| {
            assert_eq!(r.attr("mime.type"), "text/csv");
            (
                r.attr("name").to_string(),
                String::from_utf8(r.content).unwrap(),
            )
        })
        .collect();
    assert_eq!(out["array"], "id;name;ok\n1;\"a;b\";true\n2;;false\n");
    assert_eq!(out["lines"], "id;name;ok\n3;\"\";false\n4;;false\n");
    assert_eq!(
        probe.recorded("failed")[0].attr("failure.reason"),
        "record 2 (line 2), field `id`: \"five\" does not fit type long"
    );
    engine.stop().unwrap();
}

/// SplitRecord: splits of Records Per Split records with NiFi's fragment attributes, the
/// original with its fragment count; a header-only CSV makes no split.
#[test]
fn split_record_splits_with_fragment_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let engine = start(
        &record_flow(
            "SplitRecord",
            "Record Reader: CSVReader, Record Writer: CSVRecordSetWriter, Records Per Split: \"2\"",
        ),
        &probe,
        dir.path(),
    );
    probe.feed(
        "feed",
        [
            Item::new("n,v\n1,a\n2,b\n3,c\n4,d\n5,e", &[("filename", "five.csv")]),
            Item::new("n,v\n", &[("filename", "none.csv")]),
            Item {
                attributes: vec![("filename".into(), "bad.csv".into())],
                content: b"n\nok\n\xff\n".to_vec(),
            },
        ],
    );
    assert!(wait_for(Duration::from_secs(20), || probe.count("out")
        == 3
        && probe.count("original") == 2
        && probe.count("failed") == 1));
    let splits = probe.recorded("out");
    let contents: Vec<&[u8]> = splits.iter().map(|s| &s.content[..]).collect();
    assert_eq!(
        contents,
        [&b"n,v\n1,a\n2,b\n"[..], b"n,v\n3,c\n4,d\n", b"n,v\n5,e\n"]
    );
    let originals: BTreeMap<String, Recorded> = probe
        .recorded("original")
        .into_iter()
        .map(|r| (r.attr("filename").to_string(), r))
        .collect();
    let five = &originals["five.csv"];
    for (i, s) in splits.iter().enumerate() {
        assert_eq!(s.attr("fragment.index"), i.to_string());
        assert_eq!(s.attr("fragment.count"), "3");
        assert_eq!(
            s.attr("fragment.identifier"),
            five.attr("fragment.identifier")
        );
        assert_eq!(s.attr("segment.original.filename"), "five.csv");
        assert_eq!(s.attr("record.count"), if i < 2 { "2" } else { "1" });
        assert_eq!(s.attr("mime.type"), "text/csv");
    }
    assert_eq!(five.attr("fragment.count"), "3");
    assert_eq!(originals["none.csv"].attr("fragment.count"), "0");
    assert!(
        probe.recorded("failed")[0]
            .attr("failure.reason")
            .starts_with("record 2 (line 3): value 1 is not valid UTF-8"),
        "{:?}",
        probe.recorded("failed")[0].attributes
    );
    engine.stop().unwrap();
}

/// Bad record and file properties are refused at validation, naming the property.
#[test]
fn bad_properties_are_refused_at_validation_naming_the_field() {
    let flow = |processor: &str, props: &str| {
        format!(
            "flow: f\ngroups:\n  - name: g\n    processors:\n      - {{ name: p, type: {processor}, properties: {{ {props} }}, auto_terminate: [success, failure, splits, original, not.found, permission.denied] }}\n"
        )
    };
    let error = |yaml: String| match Flow::parse(&yaml, "f.yaml") {
        Ok(_) => panic!("accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    };
    let record = "Record Reader: CSVReader, Record Writer: JsonRecordSetWriter";
    let e = error(flow(
        "ConvertRecord",
        &format!(
            "{record}, Schema Access Strategy: \"Use 'Schema Text' Property\", Schema Text: '{{\"type\":\"record\",\"fields\":[{{\"name\":\"a\",\"type\":\"money\"}}]}}'"
        ),
    ));
    assert!(
        e.contains("properties.Schema Text") && e.contains("unknown type `money`"),
        "{e}"
    );
    let e = error(flow(
        "ConvertRecord",
        &format!("{record}, Schema Access Strategy: \"Use 'Schema Text' Property\""),
    ));
    assert!(
        e.contains("properties.Schema Text") && e.contains("required"),
        "{e}"
    );
    let e = error(flow(
        "ConvertRecord",
        &format!("{record}, Value Separator: '::'"),
    ));
    assert!(e.contains("properties.Value Separator"), "{e}");
    let e = error(flow(
        "ConvertRecord",
        "Record Reader: XMLReader, Record Writer: CSVRecordSetWriter",
    ));
    assert!(e.contains("properties.Record Reader"), "{e}");
    let e = error(flow(
        "SplitRecord",
        &format!("{record}, Records Per Split: \"0\""),
    ));
    assert!(e.contains("properties.Records Per Split"), "{e}");
    let e = error(flow("FetchFile", "Completion Strategy: Move File"));
    assert!(e.contains("properties.Move Destination Directory"), "{e}");
    let e = error(flow("ListFile", "Listing Strategy: Tracking Everything"));
    assert!(e.contains("properties.Listing Strategy"), "{e}");
    let e = error(flow("ListFile", "Input Directory: /tmp, Path Filter: '('"));
    assert!(e.contains("properties.Path Filter"), "{e}");
}

/// In a stateless group, a transaction that rolls back (a record that does not fit sends its
/// flow file to a failure port) drops ListFile's new state with it: once the bad file is
/// fixed (its modification time put back), both files are listed again and come through.
#[test]
fn a_rolled_back_stateless_transaction_drops_the_listing_state() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let at = SystemTime::now() - OLD;
    let write = |name: &str, content: &str| {
        let path = input.join(name);
        fs::create_dir_all(&input).unwrap();
        fs::write(&path, content).unwrap();
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(at)
            .unwrap();
    };
    write("good.csv", "a,b\n1,2\n");
    write("bad.csv", "a,b\n1,2,3\n");
    let yaml = format!(
        r#"flow: rollback
settings: {{ sync: none }}
groups:
  - name: g
    engine: stateless
    timeout: 30 s
    processors:
      - name: list
        type: ListFile
        yield: 50 ms
        properties: {{ Input Directory: "{input}" }}
      - name: fetch
        type: FetchFile
        auto_terminate: [not.found, permission.denied, failure]
      - name: convert
        type: ConvertRecord
        properties: {{ Record Reader: CSVReader, Record Writer: JsonRecordSetWriter }}
    connections:
      - {{ from: list, relationships: [success], to: fetch }}
      - {{ from: fetch, relationships: [success], to: convert }}
      - {{ from: convert, relationships: [success], to: out }}
      - {{ from: convert, relationships: [failure], to: failed }}
    ports:
      output:
        - {{ name: out }}
        - {{ name: failed, failure: true }}
  - name: sink
    processors:
      - {{ name: converted, type: Recorder, auto_terminate: [success] }}
      - {{ name: rejected, type: Recorder, auto_terminate: [success] }}
connections:
  - {{ from: g/out, to: converted }}
  - {{ from: g/failed, to: rejected }}
"#,
        input = input.display()
    );
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    // Rolled back again and again: nothing comes through while the bad file is there.
    assert!(wait_for(Duration::from_secs(20), || {
        engine.monitor().processor("list").unwrap().tasks >= 5
    }));
    assert_eq!(probe.count("converted"), 0);
    write("bad.csv", "a,b\n3,4\n");
    expect_count(&engine, &probe, "converted", 2);
    let mut contents: Vec<String> = probe
        .recorded("converted")
        .iter()
        .map(|r| String::from_utf8_lossy(&r.content).into_owned())
        .collect();
    contents.sort();
    assert_eq!(contents, [r#"[{"a":1,"b":2}]"#, r#"[{"a":3,"b":4}]"#]);
    engine.stop().unwrap();
}

/// Tracking Entities lists what Tracking Timestamps cannot: a file moved in with an older
/// modification time (within the window; one outside it is not listed). Its state survives
/// a restart too.
#[test]
fn tracking_entities_lists_files_moved_in_with_old_times() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    touch(&input.join("first.txt"), b"1", Duration::from_secs(10));
    let yaml = list_fetch_flow(
        &input,
        ", Listing Strategy: Tracking Entities, Entity Tracking Time Window: 1 hour",
        false,
    );
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    expect_count(&engine, &probe, "fetched", 1);
    // Older than the one listed, but within the window; and one outside it.
    touch(&input.join("moved in.txt"), b"22", Duration::from_secs(600));
    touch(
        &input.join("ancient.txt"),
        b"333",
        Duration::from_secs(7200),
    );
    expect_count(&engine, &probe, "fetched", 2);
    assert_eq!(
        probe.recorded("fetched")[1].attr("filename"),
        "moved in.txt"
    );
    engine.stop().unwrap();
    let probe = Arc::new(Probe::default());
    let engine = start(&yaml, &probe, dir.path());
    engine.wait_until_idle(Duration::from_millis(400));
    assert_eq!(probe.count("fetched"), 0);
    engine.stop().unwrap();
}
