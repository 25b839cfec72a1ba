//! Processors that panic or fail, through the engine API with custom processor types: the
//! session rolls back, its inputs return to their queue penalized, the engine keeps running
//! and other processors go on.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::{Item, Probe, queued, start, wait_for};
use weir_flow::definition::Flow;

const FLOW: &str = r#"flow: faults
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - { name: faulty, type: Faulty, penalty: 3 s, yield: 10 ms }
      - { name: done, type: Recorder, auto_terminate: [success] }
      - { name: feed2, type: Feed }
      - { name: other, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: faulty }
      - { from: faulty, relationships: [success], to: done }
      - { from: feed2, relationships: [success], to: other }
"#;

#[test]
fn a_panicking_or_failing_trigger_rolls_back_penalized_and_the_engine_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let engine = start(FLOW, &probe, dir.path());
    let items = [
        ("p1", "panic"),
        ("p2", "panic"),
        ("e1", "error"),
        ("e2", "error"),
        ("ok1", ""),
        ("ok2", ""),
    ];
    probe.feed(
        "feed",
        items
            .iter()
            .map(|(name, fault)| Item::new(name, &[("fault", fault), ("name", name)])),
    );
    // Every faulty flow file failed once and the good ones went through.
    assert!(wait_for(Duration::from_secs(10), || {
        probe
            .attempts()
            .iter()
            .filter(|a| a.outcome != "ok")
            .count()
            == 4
            && probe.count("done") == 2
    }));
    // The four failed flow files are back in their queue, waiting out their penalty.
    assert_eq!(queued(&engine, "feed"), 4);
    assert_eq!(engine.status().components[1].failures, 4);
    // Each failure is a bulletin on the processor, naming it and the cause.
    let faulty = engine.monitor().processor("faulty").unwrap();
    assert_eq!(faulty.bulletins.len(), 4, "{:?}", faulty.bulletins);
    assert!(
        faulty
            .bulletins
            .iter()
            .all(|b| b.level == weir_flow::engine::BulletinLevel::Warning
                && b.message.contains("processor `faulty`"))
    );
    assert_eq!(
        faulty
            .bulletins
            .iter()
            .filter(|b| b.message.contains("panicked (Faulty panics on"))
            .count(),
        2
    );
    // Other processors go on meanwhile: a separate path moves its flow files.
    probe.feed("feed2", (0..5).map(|i| Item::new(&format!("x{i}"), &[])));
    assert!(wait_for(Duration::from_secs(10), || probe.count("other") == 5));
    assert_eq!(
        queued(&engine, "feed"),
        4,
        "still penalized while the other path ran"
    );
    // After the penalty, each failed flow file is taken again and goes through.
    assert!(wait_for(Duration::from_secs(20), || probe.count("done") == 6));
    assert!(engine.failure().is_none());
    let attempts = probe.attempts();
    for a in attempts.iter().filter(|a| a.outcome != "ok") {
        let retry = attempts
            .iter()
            .find(|b| b.uuid == a.uuid && b.outcome == "ok")
            .expect("retried");
        assert!(
            retry.at.duration_since(a.at) >= Duration::from_secs(3),
            "retried only after the penalty"
        );
    }
    // Nothing was lost or doubled; the rolled-back attempt left no trace on the flow file
    // (the committed one carries the content of the successful attempt).
    let done = probe.recorded("done");
    let mut names: Vec<&str> = done.iter().map(|r| r.attr("name")).collect();
    names.sort_unstable();
    assert_eq!(names, ["e1", "e2", "ok1", "ok2", "p1", "p2"]);
    assert!(done.iter().all(|r| r.content == b"changed by Faulty"));
    engine.stop().unwrap();
}

#[test]
fn custom_types_are_validated_like_built_in_ones() {
    let probe = Arc::new(Probe::default());
    let registry = support::registry(&probe);
    let yaml = "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: f\n        type: Faulty\n        properties:\n          Colour: red\n        auto_terminate: [success]\n";
    let err = Flow::parse_with(yaml, "x.yaml", &registry)
        .unwrap_err()
        .to_string();
    assert!(err.contains("x.yaml:8:"), "{err}");
    assert!(err.contains("unknown property of Faulty"), "{err}");
    let missing =
        "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: f\n        type: Faulty\n";
    let err = Flow::parse_with(missing, "x.yaml", &registry)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("neither connected nor in auto_terminate"),
        "{err}"
    );
    // Without the registry the type is unknown.
    let ok = "flow: x\ngroups:\n  - name: g\n    processors:\n      - { name: f, type: Faulty, auto_terminate: [success] }\n";
    assert!(Flow::parse_with(ok, "x.yaml", &registry).is_ok());
    let err = Flow::parse(ok, "x.yaml").unwrap_err().to_string();
    assert!(err.contains("unknown processor type `Faulty`"), "{err}");
    // A mistyped name is answered with the closest known ones, registered types included.
    let typo = ok.replace("type: Faulty", "type: faulti");
    let err = Flow::parse_with(&typo, "x.yaml", &registry)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown processor type `faulti`; did you mean `Faulty`? (known: "),
        "{err}"
    );
}

#[test]
fn a_mistyped_type_or_property_gets_a_suggestion() {
    let yaml = "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: w\n        type: Putfile\n        properties: { Directory: /tmp }\n        auto_terminate: [success, failure]\n";
    let err = Flow::parse(yaml, "x.yaml").unwrap_err().to_string();
    assert!(
        err.contains("unknown processor type `Putfile`; did you mean `PutFile`?"),
        "{err}"
    );
    let yaml = yaml
        .replace("type: Putfile", "type: PutFile")
        .replace("Directory:", "Directroy:");
    let err = Flow::parse(&yaml, "x.yaml").unwrap_err().to_string();
    assert!(
        err.contains("unknown property of PutFile; did you mean `Directory`? (known: "),
        "{err}"
    );
    // Nothing close: the known names only.
    let yaml = yaml.replace("Directroy:", "Colour:");
    let err = Flow::parse(&yaml, "x.yaml").unwrap_err().to_string();
    assert!(
        err.contains("unknown property of PutFile (known: "),
        "{err}"
    );
}
