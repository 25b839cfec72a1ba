//! `weir flow run --until-idle` over a flow of the text, JSON and flow-control processors:
//! JSON orders are split (SplitJson), their fields read into attributes (EvaluateJsonPath),
//! repeated orders set aside (DetectDuplicate), notes extracted (ExtractText), rush orders
//! routed by content (RouteOnContent) and everything let through at a limited rate
//! (ControlRate); a log's error lines are routed into a file of their own (RouteText).

mod support;

use support::command as weir;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

fn flow(input: &Path, out: &Path) -> String {
    format!(
        r#"flow: orders
groups:
  - name: main
    processors:
      - {{ name: read-json, type: GetFile, properties: {{ Input Directory: "{input}", File Filter: '.*\.json' }} }}
      - {{ name: read-log, type: GetFile, properties: {{ Input Directory: "{input}", File Filter: '.*\.log' }} }}
      - name: split
        type: SplitJson
        properties: {{ JsonPath Expression: $.orders }}
        auto_terminate: [original, failure]
      - name: fields
        type: EvaluateJsonPath
        properties:
          Destination: flowfile-attribute
          order.id: $.id
          customer: $.customer
        auto_terminate: [unmatched, failure]
      - name: name
        type: UpdateAttribute
        properties: {{ filename: "${{order.id}}.json" }}
      - name: dedupe
        type: DetectDuplicate
        properties: {{ Cache Entry Identifier: "${{order.id}}", FlowFile Description: "${{customer}}" }}
        auto_terminate: [failure]
      - name: note
        type: ExtractText
        properties: {{ note: '"note":"([^"]*)"' }}
      - name: rush
        type: RouteOnContent
        properties: {{ Match Requirement: content must contain match, rush: '"note":"rush"' }}
      - name: tag-rush
        type: UpdateAttribute
        properties: {{ filename: "rush-${{filename}}" }}
      - name: rate
        type: ControlRate
        properties: {{ Rate Control Criteria: flowfile count, Maximum Rate: "2", Time Duration: 1 sec }}
        auto_terminate: [failure]
      - name: errors
        type: RouteText
        properties: {{ Matching Strategy: Contains, errors: ERROR }}
        auto_terminate: [original, unmatched]
      - name: write
        type: PutFile
        properties: {{ Directory: "{out}/orders" }}
        auto_terminate: [success, failure]
      - name: write-dups
        type: PutFile
        properties: {{ Directory: "{out}/duplicates" }}
        auto_terminate: [success, failure]
      - name: write-errors
        type: PutFile
        properties: {{ Directory: "{out}/errors" }}
        auto_terminate: [success, failure]
    connections:
      - {{ from: read-json, relationships: [success], to: split }}
      - {{ from: split, relationships: [split], to: fields }}
      - {{ from: fields, relationships: [matched], to: name }}
      - {{ from: name, relationships: [success], to: dedupe }}
      - {{ from: dedupe, relationships: [non-duplicate], to: note }}
      - {{ from: dedupe, relationships: [duplicate], to: write-dups }}
      - {{ from: note, relationships: [matched, unmatched], to: rush }}
      - {{ from: rush, relationships: [rush], to: tag-rush }}
      - {{ from: rush, relationships: [unmatched], to: rate }}
      - {{ from: tag-rush, relationships: [success], to: rate }}
      - {{ from: rate, relationships: [success], to: write }}
      - {{ from: read-log, relationships: [success], to: errors }}
      - {{ from: errors, relationships: [errors], to: write-errors }}
"#,
        input = input.display(),
        out = out.display()
    )
}

fn files(dir: &Path) -> BTreeMap<String, String> {
    match fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    fs::read_to_string(e.path()).unwrap(),
                )
            })
            .collect(),
        Err(_) => BTreeMap::new(),
    }
}

#[test]
fn a_flow_of_text_and_json_processors_runs_to_idle() {
    let dir = tempfile::tempdir().unwrap();
    let (input, out, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    fs::create_dir_all(&input).unwrap();
    fs::write(
        input.join("orders.json"),
        r#"{"orders": [
            {"id": "o1", "customer": "Zoë", "note": "rush"},
            {"id": "o2", "customer": "Al \"the\" Pal", "note": "gift wrap"},
            {"id": "o1", "customer": "Zoë again", "note": "rush"},
            {"id": "o3", "customer": "Ünal"}
        ]}"#,
    )
    .unwrap();
    fs::write(
        input.join("app.log"),
        "INFO start\nERROR disk full\nINFO retry\nERROR disk still full",
    )
    .unwrap();
    let yaml = dir.path().join("flow.yaml");
    fs::write(&yaml, flow(&input, &out)).unwrap();
    let started = Instant::now();
    let run = weir()
        .args(["flow", "run"])
        .arg(&yaml)
        .arg("--repo")
        .arg(&repo)
        .arg("--until-idle")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let orders = files(&out.join("orders"));
    assert_eq!(
        orders,
        BTreeMap::from([
            (
                "rush-o1.json".to_string(),
                r#"{"id":"o1","customer":"Zoë","note":"rush"}"#.to_string()
            ),
            (
                "o2.json".to_string(),
                r#"{"id":"o2","customer":"Al \"the\" Pal","note":"gift wrap"}"#.to_string()
            ),
            (
                "o3.json".to_string(),
                r#"{"id":"o3","customer":"Ünal"}"#.to_string()
            ),
        ])
    );
    assert_eq!(
        files(&out.join("duplicates")),
        BTreeMap::from([(
            "o1.json".to_string(),
            r#"{"id":"o1","customer":"Zoë again","note":"rush"}"#.to_string()
        )])
    );
    assert_eq!(
        files(&out.join("errors")),
        BTreeMap::from([(
            "app.log".to_string(),
            "ERROR disk full\nERROR disk still full".to_string()
        )])
    );
    // Three orders at two a second: the third waited for the next second.
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(
        fs::read_dir(&input).unwrap().count(),
        0,
        "inputs were taken"
    );
}
