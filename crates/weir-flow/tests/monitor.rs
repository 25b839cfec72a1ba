//! What observers see of a running flow through `FlowMonitor`: counts and bytes per
//! processor, queues with thresholds and back pressure, start and stop, provenance search,
//! lineage and the content of a queued flow file.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::{Item, Probe, start, wait_for};
use weir_flow::engine::{ControlError, FlowState, RunState};
use weir_flow::provenance::{EventType, LineageLimits, Query};

const FLOW: &str = r#"flow: watched
settings: { sync: none }
groups:
  - name: g
    processors:
      - { name: feed, type: Feed }
      - { name: sink, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: sink, back_pressure: { count: 3 } }
"#;

const TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn a_stopped_processor_lets_its_queue_fill_and_queued_content_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let engine = start(FLOW, &probe, dir.path());
    let monitor = engine.monitor();
    assert_eq!(monitor.name(), "watched");
    assert_eq!(monitor.state(), FlowState::Running);
    let groups = monitor.groups();
    assert_eq!(groups.len(), 1);
    assert!(!groups[0].stateless);

    // Two flow files go through while the sink runs.
    probe.feed("feed", [Item::new("ab", &[]), Item::new("cde", &[])]);
    assert!(wait_for(TIMEOUT, || probe.count("sink") == 2));
    assert!(wait_for(TIMEOUT, || {
        monitor.processor("sink").unwrap().flowfiles_in == 2
    }));
    let sink = monitor.processor("sink").unwrap();
    assert_eq!((sink.bytes_in, sink.state), (5, RunState::Running));
    assert!(sink.tasks >= 1);
    let feed = monitor.processor("feed").unwrap();
    assert_eq!((feed.flowfiles_out, feed.bytes_out), (2, 5));

    // Stopped, the sink takes nothing: the queue fills up to its threshold.
    let stopped = monitor.set_running("sink", false).unwrap();
    assert_eq!(stopped.state, RunState::Stopped);
    probe.feed(
        "feed",
        (0..3).map(|i| Item::new(&format!("queued {i}"), &[("n", &i.to_string())])),
    );
    assert!(wait_for(TIMEOUT, || monitor.connections()[0].queued_count == 3));
    let queue = &monitor.connections()[0];
    assert_eq!(
        (queue.source.as_str(), queue.destination.as_str()),
        ("feed", "sink")
    );
    assert_eq!(queue.relationships, ["success"]);
    assert_eq!(queue.object_threshold, 3);
    assert_eq!(queue.queued_bytes, 3 * 8);
    assert!(queue.back_pressure);
    assert_eq!(probe.count("sink"), 2, "a stopped processor takes nothing");

    // A queued flow file's content can be read; its provenance and lineage are there.
    let created = monitor
        .provenance(
            &Query {
                component: Some("feed".into()),
                event_type: Some(EventType::CREATE),
                ..Query::default()
            },
            100,
        )
        .unwrap();
    assert_eq!(created.len(), 5);
    let last = &created[4];
    assert_eq!(&last.attributes["n"], "2");
    assert_eq!(
        monitor.content(&last.flowfile).unwrap().as_deref(),
        Some(&b"queued 2"[..])
    );
    assert_eq!(monitor.content("no-such-flow-file").unwrap(), None);
    let lineage = monitor
        .lineage(&last.flowfile, LineageLimits::default())
        .unwrap();
    assert!(lineage.events.iter().any(|e| e.id == last.id));
    assert!(
        monitor
            .lineage("no-such-flow-file", LineageLimits::default())
            .unwrap()
            .events
            .is_empty()
    );
    let before_all = Query {
        until_ms: Some(created[0].time_ms - 1),
        ..Query::default()
    };
    assert!(monitor.provenance(&before_all, 100).unwrap().is_empty());

    // Unknown processors are refused by name.
    assert_eq!(
        monitor.set_running("nope", true),
        Err(ControlError::UnknownProcessor {
            flow: "watched".into(),
            name: "nope".into()
        })
    );

    // Started again, the sink drains the queue; the content is gone with the flow file.
    monitor.set_running("sink", true).unwrap();
    assert!(wait_for(TIMEOUT, || probe.count("sink") == 5));
    assert!(wait_for(TIMEOUT, || monitor.connections()[0].queued_count == 0));
    assert!(!monitor.connections()[0].back_pressure);
    assert_eq!(monitor.content(&last.flowfile).unwrap(), None);
    engine.stop().unwrap();
    assert_eq!(monitor.state(), FlowState::Stopped);
}

#[test]
fn members_of_a_stateless_group_are_disabled() {
    let yaml = r#"flow: sl
settings: { sync: none }
groups:
  - name: s
    engine: stateless
    processors:
      - { name: feed, type: Feed }
      - { name: sink, type: Recorder, auto_terminate: [success] }
    connections:
      - { from: feed, relationships: [success], to: sink }
"#;
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let engine = start(yaml, &probe, dir.path());
    let monitor = engine.monitor();
    assert!(monitor.groups()[0].stateless);
    assert_eq!(monitor.processor("sink").unwrap().state, RunState::Disabled);
    assert!(matches!(
        monitor.set_running("sink", false),
        Err(ControlError::Disabled { .. })
    ));
    probe.feed("feed", [Item::new("x", &[])]);
    assert!(wait_for(TIMEOUT, || probe.count("sink") == 1));
    assert!(wait_for(TIMEOUT, || monitor
        .processor("sink")
        .unwrap()
        .tasks
        > 0));
    engine.stop().unwrap();
}
