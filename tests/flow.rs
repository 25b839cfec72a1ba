//! `weir flow` end to end: validation errors with lines, a kill -9 loop, lineage.

mod support;

use support::command as weir;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn flow_yaml(input: &Path, out: &Path) -> String {
    format!(
        r#"flow: kill-loop
groups:
  - name: main
    processors:
      - name: read
        type: GetFile
        schedule: {{ strategy: timer, period: 50 ms }}
        properties: {{ Input Directory: "{input}", Batch Size: "2" }}
      - name: split
        type: SplitText
        properties: {{ Line Split Count: "1" }}
        auto_terminate: [original, failure]
      - name: tag
        type: UpdateAttribute
        properties:
          filename: ${{segment.original.filename}}-${{fragment.index}}
          line.number: ${{fragment.index}}
      - name: route
        type: RouteOnAttribute
        properties:
          even: ${{line.number:mod(2):equals(0)}}
      - name: write-even
        type: PutFile
        properties: {{ Directory: "{out}/even", Conflict Resolution Strategy: replace }}
        auto_terminate: [success, failure]
      - name: write-odd
        type: PutFile
        properties: {{ Directory: "{out}/odd", Conflict Resolution Strategy: replace }}
        auto_terminate: [success, failure]
    connections:
      - {{ from: read, relationships: [success], to: split }}
      - {{ from: split, relationships: [splits], to: tag }}
      - {{ from: tag, relationships: [success], to: route }}
      - {{ from: route, relationships: [even], to: write-even }}
      - {{ from: route, relationships: [unmatched], to: write-odd }}
"#,
        input = input.display(),
        out = out.display()
    )
}

/// The CLI runs GetFile → SplitText → UpdateAttribute → RouteOnAttribute → PutFile and is
/// killed with SIGKILL at random moments (`WEIR_FLOW_KILLS`, default 20), then run to idle:
/// every line is in exactly one output file with the right content, the input directory is
/// empty, and no queue holds anything.
#[test]
fn kill_9_loop_loses_and_duplicates_nothing() {
    let kills: u32 = std::env::var("WEIR_FLOW_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let (input, out, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    fs::create_dir_all(&input).unwrap();
    let mut expected: BTreeMap<String, String> = BTreeMap::new();
    for f in 0..20 {
        let lines: Vec<String> = (1..=150).map(|l| format!("file {f} line {l}")).collect();
        for (i, l) in lines.iter().enumerate() {
            let parity = if (i + 1) % 2 == 0 { "even" } else { "odd" };
            expected.insert(format!("{parity}/f{f:02}.txt-{}", i + 1), l.clone());
        }
        fs::write(input.join(format!("f{f:02}.txt")), lines.join("\n") + "\n").unwrap();
    }
    let flow = dir.path().join("flow.yaml");
    fs::write(&flow, flow_yaml(&input, &out)).unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..kills {
        let mut child = weir()
            .args(["flow", "run"])
            .arg(&flow)
            .arg("--repo")
            .arg(&repo)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(50 + seed % 400));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    let status = weir()
        .args(["flow", "run"])
        .arg(&flow)
        .arg("--repo")
        .arg(&repo)
        .arg("--until-idle")
        .status()
        .unwrap();
    assert!(status.success());
    let mut got: BTreeMap<String, String> = BTreeMap::new();
    for parity in ["even", "odd"] {
        for e in fs::read_dir(out.join(parity)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with('.'), "a temporary file was left: {name}");
            got.insert(
                format!("{parity}/{name}"),
                fs::read_to_string(e.path()).unwrap(),
            );
        }
    }
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);
    assert_eq!(
        fs::read_dir(&input).unwrap().count(),
        0,
        "the input directory is empty"
    );
    let status = weir()
        .args(["flow", "status", "--repo"])
        .arg(&repo)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    for line in text.lines().skip(1).take_while(|l| !l.is_empty()) {
        let queued: u64 = line
            .split_whitespace()
            .rev()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(queued, 0, "{line}");
    }
}

/// GetFile → SplitText → UpdateAttribute (16 correlation values in turn) → MergeContent →
/// PutFile, killed with SIGKILL at random moments (`WEIR_FLOW_KILLS`, default 20) while
/// MergeContent holds bins, then run to idle: every line is in exactly one merged file, of
/// its own correlation value.
#[test]
fn kill_9_loop_with_merge_bins_held_loses_and_duplicates_no_line() {
    let kills: u32 = std::env::var("WEIR_FLOW_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let (input, out, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    fs::create_dir_all(&input).unwrap();
    let mut expected = std::collections::BTreeSet::new();
    for f in 0..16 {
        // 96 lines: 6 of each of the 16 correlation values, 96 of each in all.
        let lines: Vec<String> = (1..=96)
            .map(|l| format!("file {f:02} line {l:03}"))
            .collect();
        expected.extend(lines.iter().cloned());
        fs::write(input.join(format!("f{f:02}.txt")), lines.join("\n") + "\n").unwrap();
    }
    let flow = dir.path().join("flow.yaml");
    fs::write(
        &flow,
        format!(
            r#"flow: merge-kill-loop
groups:
  - name: main
    processors:
      - name: read
        type: GetFile
        schedule: {{ strategy: timer, period: 50 ms }}
        properties: {{ Input Directory: "{input}", Batch Size: "2" }}
      - name: split
        type: SplitText
        properties: {{ Line Split Count: "1" }}
        auto_terminate: [original, failure]
      - name: key
        type: UpdateAttribute
        properties:
          key: ${{fragment.index:mod(16)}}
      - name: merge
        type: MergeContent
        properties:
          Minimum Number of Entries: "96"
          Maximum Number of Entries: "96"
          Maximum number of Bins: "16"
          Correlation Attribute Name: key
          Demarcator: '\n'
          Max Bin Age: 5 s
        auto_terminate: [original, failure]
      - name: write
        type: PutFile
        properties: {{ Directory: "{out}", Conflict Resolution Strategy: fail }}
        auto_terminate: [success, failure]
    connections:
      - {{ from: read, relationships: [success], to: split }}
      - {{ from: split, relationships: [splits], to: key }}
      - {{ from: key, relationships: [success], to: merge }}
      - {{ from: merge, relationships: [merged], to: write }}
"#,
            input = input.display(),
            out = out.display()
        ),
    )
    .unwrap();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..kills {
        let mut child = weir()
            .args(["flow", "run"])
            .arg(&flow)
            .arg("--repo")
            .arg(&repo)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(50 + seed % 400));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    let status = weir()
        .args(["flow", "run"])
        .arg(&flow)
        .arg("--repo")
        .arg(&repo)
        .arg("--until-idle")
        .status()
        .unwrap();
    assert!(status.success());
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut files = 0;
    for e in fs::read_dir(&out).unwrap() {
        let text = fs::read_to_string(e.unwrap().path()).unwrap();
        files += 1;
        let lines: Vec<&str> = text.split('\n').collect();
        // A lost line would leave a bin to go by its age, short.
        assert_eq!(lines.len(), 96, "a merged file holds a full bin");
        // One correlation value per file: the line numbers agree modulo 16.
        let keys: std::collections::BTreeSet<u32> = lines
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u32>().unwrap() % 16)
            .collect();
        assert_eq!(keys.len(), 1, "{keys:?}");
        for l in lines {
            *seen.entry(l.to_string()).or_default() += 1;
        }
    }
    assert_eq!(files, 16);
    let twice: Vec<&String> = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(l, _)| l)
        .collect();
    assert!(twice.is_empty(), "lines merged twice: {twice:?}");
    let got: std::collections::BTreeSet<String> = seen.into_keys().collect();
    assert_eq!(got, expected, "every line merged once");
}

#[test]
fn each_kind_of_bad_definition_names_its_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "flow: x\ngroups:\n  - name: g\n    procesors: []\n",
            ":4:",
            "unknown field `procesors`",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: Nope\n",
            ":6:",
            "unknown processor type `Nope`",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    engine: stateless\n    processors:\n      - name: a\n        type: GenerateFlowFile\n        schedule: { strategy: cron, expression: \"0/5 * * * * ?\" }\n        auto_terminate: [success]\n",
            ":8:",
            "CRON scheduling is not allowed in a stateless group",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: GenerateFlowFile\n        properties:\n          File Size: 3 parsecs\n        auto_terminate: [success]\n",
            ":8:",
            "File Size",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: PutFile\n        properties:\n          Directory: /tmp\n          Colour: red\n        auto_terminate: [success, failure]\n",
            ":9:",
            "unknown property of PutFile",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: PutFile\n        auto_terminate: [success, failure]\n",
            ":5:",
            "Directory",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: GenerateFlowFile\n        schedule: { strategy: cron, expression: \"every day\" }\n        auto_terminate: [success]\n",
            ":7:",
            "CRON",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: GenerateFlowFile\n        yield: 5 fortnights\n        auto_terminate: [success]\n",
            ":7:",
            "yield",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: UpdateAttribute\n        properties:\n          x: ${a:nope()}\n        auto_terminate: [success]\n",
            ":8:",
            "unknown function",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: GenerateFlowFile\n    connections:\n      - { from: a, relationships: [success], to: ghost }\n",
            ":8:",
            "unknown component `ghost`",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    processors:\n      - name: a\n        type: GenerateFlowFile\n",
            ":5:",
            "neither connected nor in auto_terminate",
        ),
        (
            "flow: x\ngroups:\n  - name: g\n    engine: stateless\n    processors:\n      - name: a\n        type: GenerateFlowFile\n        schedule: { strategy: cron, expression: \"0/5 * * * * ?\" }\n        auto_terminate: [success]\n",
            ":8:",
            "stateless",
        ),
    ];
    for (i, (yaml, line, message)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.yaml"));
        fs::write(&path, yaml).unwrap();
        let out = weir()
            .args(["flow", "validate"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "case {i}: {err}");
        assert!(
            err.contains(&format!("bad{i}.yaml{line}")),
            "case {i} wants line {line}: {err}"
        );
        assert!(err.contains(message), "case {i} wants `{message}`: {err}");
    }
    let ok = weir()
        .args(["flow", "validate", "examples/flows/lines.yaml"])
        .output()
        .unwrap();
    assert!(ok.status.success());
}

/// The lineage of one line (a split child) shows its parent's events and its siblings.
#[test]
fn lineage_of_a_split_file_shows_its_parent_and_siblings() {
    let dir = tempfile::tempdir().unwrap();
    let (input, out, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    fs::create_dir_all(&input).unwrap();
    fs::write(input.join("three.txt"), "a\nb\nc\n").unwrap();
    let flow = dir.path().join("flow.yaml");
    fs::write(&flow, flow_yaml(&input, &out)).unwrap();
    let started = Instant::now();
    assert!(
        weir()
            .args(["flow", "run"])
            .arg(&flow)
            .arg("--repo")
            .arg(&repo)
            .arg("--until-idle")
            .status()
            .unwrap()
            .success()
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    let sends = weir()
        .args(["flow", "provenance", "--repo"])
        .arg(&repo)
        .args(["--type", "SEND"])
        .output()
        .unwrap();
    let sends: Vec<serde_json::Value> = String::from_utf8_lossy(&sends.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sends.len(), 3);
    // PutFile names where it wrote with an absolute file URI, as NiFi's does.
    for send in &sends {
        let uri = send["transit_uri"].as_str().unwrap_or_default();
        let path = url_path(uri);
        assert!(
            uri.starts_with("file:///") && path.starts_with(&out),
            "{send}"
        );
        assert!(path.is_file(), "{send}: no file at {}", path.display());
    }
    let child = sends[0]["flowfile"].as_str().unwrap();
    let lineage = weir()
        .args(["flow", "lineage", "--repo"])
        .arg(&repo)
        .args(["--flowfile", child])
        .output()
        .unwrap();
    assert!(
        lineage.status.success(),
        "{}",
        String::from_utf8_lossy(&lineage.stderr)
    );
    let l: serde_json::Value = serde_json::from_slice(&lineage.stdout).unwrap();
    let parent = l["parents"][0].as_str().unwrap().to_string();
    let events = l["events"].as_array().unwrap();
    let of = |ff: &str, t: &str| {
        events
            .iter()
            .any(|e| e["flowfile"] == ff && e["event_type"] == t)
    };
    assert!(of(&parent, "RECEIVE"), "the parent's RECEIVE");
    assert!(of(&parent, "FORK"), "the parent's FORK");
    assert!(of(child, "SEND"));
    let fork = events.iter().find(|e| e["event_type"] == "FORK").unwrap();
    let siblings = fork["children"].as_array().unwrap();
    assert_eq!(siblings.len(), 3);
    for s in siblings {
        assert!(
            l["flowfiles"].as_array().unwrap().contains(s),
            "sibling {s} in the lineage"
        );
    }
    assert_eq!(l["truncated"], false);
    assert_eq!(l["frontier"], serde_json::json!([]));
    assert!(String::from_utf8_lossy(&lineage.stderr).is_empty());
    // Bounded: at depth 1 the parent is there and its two other lines are counted, not
    // shown; the note on stderr says so.
    let near = weir()
        .args(["flow", "lineage", "--repo"])
        .arg(&repo)
        .args(["--flowfile", child, "--depth", "1"])
        .output()
        .unwrap();
    assert!(near.status.success());
    let n: serde_json::Value = serde_json::from_slice(&near.stdout).unwrap();
    assert_eq!(n["flowfiles"], serde_json::json!([child, parent]));
    assert_eq!(n["truncated"], true);
    assert_eq!(n["omitted"], 2);
    assert_eq!(
        n["frontier"],
        serde_json::json!([{"flowfile": parent, "more_parents": 0, "more_children": 2}])
    );
    let note = String::from_utf8_lossy(&near.stderr);
    assert!(
        note.contains("truncated") && note.contains("2 more related"),
        "{note}"
    );
    // --max-nodes 1: the line alone.
    let alone = weir()
        .args(["flow", "lineage", "--repo"])
        .arg(&repo)
        .args(["--flowfile", child, "--max-nodes", "1"])
        .output()
        .unwrap();
    let a: serde_json::Value = serde_json::from_slice(&alone.stdout).unwrap();
    assert_eq!(a["flowfiles"], serde_json::json!([child]));
    assert_eq!(a["omitted"], 1);
    // A limit that is not one is refused, naming the option.
    for bad in ["--max-nodes=0", "--depth=-1", "--depth=deep"] {
        let out = weir()
            .args(["flow", "lineage", "--repo"])
            .arg(&repo)
            .args(["--flowfile", child, bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let option = bad.split('=').next().unwrap();
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(option),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A flow whose source ticks every 30 s: the first tick at start, then a long wait.
fn slow_timer_flow(out: &Path) -> String {
    format!(
        r#"flow: slow-timer
groups:
  - name: main
    processors:
      - name: tick
        type: GenerateFlowFile
        schedule: {{ strategy: timer, period: 30 s }}
        properties: {{ File Size: 10 B }}
      - name: write
        type: PutFile
        properties: {{ Directory: "{out}" }}
        auto_terminate: [success, failure]
    connections:
      - {{ from: tick, relationships: [success], to: write }}
  - name: quiet
    engine: stateless
    processors:
      - name: quiet-tick
        type: GenerateFlowFile
        schedule: {{ strategy: timer, period: 45 s }}
        auto_terminate: [success]
"#,
        out = out.display()
    )
}

/// Waits until `path` holds at least one file.
fn wait_for_output(path: &Path, child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while fs::read_dir(path).map_or(0, |d| d.count()) == 0 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the flow exited before its first tick"
        );
        assert!(Instant::now() < deadline, "no output from the first tick");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGINT and SIGTERM stop a flow within about a second, whatever its timers: a source
/// waiting for its 30 s tick (traditional) or 45 s (stateless) does not hold the stop.
#[test]
fn a_signal_stops_a_flow_at_once_whatever_its_timers() {
    for signal in ["-INT", "-TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let flow = dir.path().join("flow.yaml");
        fs::write(&flow, slow_timer_flow(&out)).unwrap();
        let mut child = weir()
            .args(["flow", "run"])
            .arg(&flow)
            .arg("--repo")
            .arg(dir.path().join("repo"))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_output(&out, &mut child);
        let sent = Instant::now();
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = sent + Duration::from_secs(20);
        let exit = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("{signal}: still running 20 s after the signal");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The next tick was 30 s away: a stop that waited for it took about that long.
        let took = sent.elapsed();
        assert!(exit.success(), "{signal}: {exit:?}");
        assert!(
            took < Duration::from_secs(5),
            "{signal}: stopped after {took:?}"
        );
    }
}

/// Two runs on one repository would both recover and process the same flow files: the
/// second is refused at once, naming the first's process id, and the first runs on.
#[test]
fn a_second_run_on_the_same_repository_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let flow = dir.path().join("flow.yaml");
    let repo = dir.path().join("repo");
    fs::write(&flow, slow_timer_flow(&out)).unwrap();
    let mut first = weir()
        .args(["flow", "run"])
        .arg(&flow)
        .arg("--repo")
        .arg(&repo)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_output(&out, &mut first);
    let second = weir()
        .args(["flow", "run"])
        .arg(&flow)
        .arg("--repo")
        .arg(&repo)
        .arg("--until-idle")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    assert!(
        stderr.contains("in use by process") && stderr.contains(&first.id().to_string()),
        "{stderr}"
    );
    assert!(first.try_wait().unwrap().is_none(), "the first run goes on");
    Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(first.wait().unwrap().success());
    // Once the first has stopped, the repository opens again.
    let third = weir()
        .args(["flow", "status", "--repo"])
        .arg(&repo)
        .output()
        .unwrap();
    assert!(third.status.success());
}

/// The path of a `file:///` URI (this test's paths hold no characters that need decoding).
fn url_path(uri: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(uri.strip_prefix("file://").unwrap_or(uri))
}
