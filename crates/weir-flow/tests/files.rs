//! PutFile's durability and temporary files.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::{Item, Probe, queued_to, start, wait_for};
use weir_flow::definition::Flow;

fn put_file(sync: &str, property: &str) -> String {
    format!(
        "flow: f\nsettings: {{ sync: {sync} }}\ngroups:\n  - name: g\n    processors:\n      - {{ name: a, type: GenerateFlowFile }}\n      - {{ name: put, type: PutFile, properties: {{ Directory: /tmp/x{property} }}, auto_terminate: [success, failure] }}\n    connections:\n      - {{ from: a, relationships: [success], to: put }}\n"
    )
}

/// `Sync` follows the flow's durability unless set: a flow that syncs every commit syncs
/// what PutFile hands over before its flow files are dropped.
#[test]
fn put_file_sync_follows_the_flows_sync_policy_unless_set() {
    let sync_of = |yaml: String| {
        let flow = Flow::parse(&yaml, "f.yaml").unwrap();
        let put = &flow.processors[flow.component("put").unwrap()];
        put.property("Sync").map(str::to_string)
    };
    assert_eq!(sync_of(put_file("always", "")).as_deref(), Some("true"));
    assert_eq!(sync_of(put_file("none", "")).as_deref(), Some("false"));
    assert_eq!(sync_of(put_file("interval", "")).as_deref(), Some("false"));
    assert_eq!(
        sync_of(put_file("always", ", Sync: \"false\"")).as_deref(),
        Some("false")
    );
    let bad = Flow::parse(&put_file("always", ", Sync: maybe"), "f.yaml").unwrap_err();
    assert!(bad.to_string().contains("Sync"), "{bad}");
}

/// Flow files of one name in one batch (written to temporary files of their own, synced
/// together, renamed after) leave one file per name and no temporary file.
#[test]
fn one_name_twice_in_a_batch_leaves_one_file_and_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let probe = Arc::new(Probe::default());
    let yaml = format!(
        "flow: twice\nsettings: {{ sync: always }}\ngroups:\n  - name: g\n    processors:\n      - {{ name: feed, type: Feed }}\n      - {{ name: put, type: PutFile, properties: {{ Directory: \"{}\", Conflict Resolution Strategy: replace }}, auto_terminate: [success, failure] }}\n    connections:\n      - {{ from: feed, relationships: [success], to: put }}\n",
        out.display()
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        (0..40).map(|i| {
            Item::new(
                &format!("content {i}"),
                &[("filename", if i % 2 == 0 { "even" } else { "odd" })],
            )
        }),
    );
    assert!(wait_for(Duration::from_secs(20), || {
        std::fs::read_dir(&out).map_or(0, |d| d.count()) >= 2 && queued_to(&engine, "put") == 0
    }));
    engine.stop().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["even", "odd"]);
}

/// A failure relationship looped back for retries, full: only PutFile drains it, so its
/// back pressure must not hold PutFile (it held it for good).
#[test]
fn a_full_retry_loop_does_not_hold_its_own_processor() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("not-yet");
    let probe = Arc::new(Probe::default());
    let yaml = format!(
        "flow: retry\nsettings: {{ sync: none }}\ngroups:\n  - name: g\n    processors:\n      - {{ name: feed, type: Feed }}\n      - {{ name: put, type: PutFile, penalty: 50 ms, yield: 50 ms, properties: {{ Directory: \"{}\", Create Missing Directories: \"false\" }}, auto_terminate: [success] }}\n    connections:\n      - {{ from: feed, relationships: [success], to: put }}\n      - {{ from: put, relationships: [failure], to: put, back_pressure: {{ count: 1 }} }}\n",
        out.display()
    );
    let engine = start(&yaml, &probe, dir.path());
    probe.feed(
        "feed",
        (0..3).map(|i| Item::new("x", &[("filename", &format!("f{i}"))])),
    );
    // Every write fails until the directory exists: the loop fills past its threshold.
    let monitor = engine.monitor();
    assert!(wait_for(Duration::from_secs(20), || {
        monitor
            .connections()
            .iter()
            .any(|c| c.source == "put" && c.queued_count >= 1)
    }));
    std::fs::create_dir(&out).unwrap();
    assert!(wait_for(Duration::from_secs(20), || {
        std::fs::read_dir(&out).map_or(0, |d| d.count()) == 3
    }));
    engine.stop().unwrap();
}

/// In a stateless group, PutFile's output appears with the group's commit: a processor after
/// it that fails rolls the transaction back with nothing written. (The file was written at
/// once and stayed: the retry found it there and, with `fail` on conflict, routed the flow
/// file to failure; with a generated name, as MergeContent gives, it was written twice.)
#[test]
fn a_stateless_group_rolled_back_after_put_file_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let (input, out) = (dir.path().join("in"), dir.path().join("out"));
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("a.txt"), "the content").unwrap();
    let probe = Arc::new(Probe::default());
    // `Faulty` fails each flow file's first attempt, and GetFile makes a new flow file of
    // the file after each rollback: every transaction fails after PutFile ran.
    let yaml = format!(
        r#"flow: put-then-fail
groups:
  - name: tx
    engine: stateless
    processors:
      - {{ name: read, type: GetFile, penalty: 50 ms, properties: {{ Input Directory: "{input}" }} }}
      - {{ name: mark, type: UpdateAttribute, properties: {{ fault: error }} }}
      - {{ name: put, type: PutFile, properties: {{ Directory: "{out}", Conflict Resolution Strategy: fail }}, auto_terminate: [failure] }}
      - {{ name: after, type: Faulty, penalty: 50 ms, auto_terminate: [success] }}
    connections:
      - {{ from: read, relationships: [success], to: mark }}
      - {{ from: mark, relationships: [success], to: put }}
      - {{ from: put, relationships: [success], to: after }}
"#,
        input = input.display(),
        out = out.display()
    );
    let engine = start(&yaml, &probe, dir.path());
    let written = || {
        std::fs::read_dir(&out).map_or(Vec::new(), |d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
    };
    // Three transactions, each rolled back after PutFile ran in it.
    assert!(
        wait_for(Duration::from_secs(20), || probe.attempts().len() >= 3),
        "attempts: {}; the output holds {:?}",
        probe.attempts().len(),
        written()
    );
    engine.stop().unwrap();
    assert!(probe.attempts().iter().all(|a| a.outcome == "error"));
    assert!(
        written().is_empty(),
        "rolled-back transactions left {:?}",
        written()
    );
    assert!(
        input.join("a.txt").exists(),
        "the input stays for the next try"
    );
}
