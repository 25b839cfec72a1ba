//! `weir flow run` over contents of every size the content repository treats differently:
//! a small file, files that share a claim file and fill it, and files of their own (1 MiB
//! and more). Every file reaches the output byte for byte, the input directory empties, and
//! no claim file is left behind, in a traditional group and in a stateless one.

mod support;

use support::command as weir;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// Bytes no two files share, so that a claim read at the wrong offset shows.
fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The sizes of the first run that lost five files of six: 1 KiB, three of 600 KiB (which
/// share a claim file and fill it), 2 MiB and 5 MiB (files of their own).
fn inputs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let sizes = [1 << 10, 600 << 10, 600 << 10, 600 << 10, 2 << 20, 5 << 20];
    let mut out = BTreeMap::new();
    for (i, &len) in sizes.iter().enumerate() {
        let name = format!("in-{i}.bin");
        let data = content(i as u64 + 1, len);
        fs::write(dir.join(&name), &data).unwrap();
        out.insert(name, data);
    }
    out
}

fn four_processors(input: &Path, out: &Path, engine: &str) -> String {
    format!(
        r#"flow: four-processors
groups:
  - name: main
{engine}
    processors:
      - name: read
        type: GetFile
        properties: {{ Input Directory: "{input}", Batch Size: "10" }}
      - name: tag
        type: UpdateAttribute
        properties:
          seen: "yes"
      - name: route
        type: RouteOnAttribute
        properties:
          seen: ${{seen:equals('yes')}}
        auto_terminate: [unmatched]
      - name: write
        type: PutFile
        properties: {{ Directory: "{out}" }}
        auto_terminate: [success, failure]
    connections:
      - {{ from: read, relationships: [success], to: tag }}
      - {{ from: tag, relationships: [success], to: route }}
      - {{ from: route, relationships: [seen], to: write }}
"#,
        input = input.display(),
        out = out.display(),
    )
}

fn claim_files(repo: &Path) -> Vec<String> {
    match fs::read_dir(repo.join("content")) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".claim"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn run_four_processors(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (input, out, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    fs::create_dir_all(&input).unwrap();
    fs::create_dir_all(&out).unwrap();
    let expected = inputs(&input);
    let flow = dir.path().join("flow.yaml");
    fs::write(&flow, four_processors(&input, &out, engine)).unwrap();
    let run = weir()
        .args(["flow", "run"])
        .arg(&flow)
        .arg("--repo")
        .arg(&repo)
        .arg("--until-idle")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        !stderr.contains("No such file"),
        "content went missing: {stderr}"
    );
    let mut got = BTreeMap::new();
    for e in fs::read_dir(&out).unwrap() {
        let e = e.unwrap();
        got.insert(
            e.file_name().to_string_lossy().into_owned(),
            fs::read(e.path()).unwrap(),
        );
    }
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (name, data) in &expected {
        assert!(got[name] == *data, "{name} differs from its input");
    }
    assert_eq!(
        fs::read_dir(&input).unwrap().count(),
        0,
        "inputs were taken"
    );
    // Every flow file left the flow: at most the shared claim file taking appends remains
    // until the next start, which removes it.
    let left = claim_files(&repo);
    assert!(left.len() <= 1, "claim files left: {left:?}");
    // A second run finds nothing to do and leaves no claim file at all.
    let again = weir()
        .args(["flow", "run"])
        .arg(&flow)
        .arg("--repo")
        .arg(&repo)
        .arg("--until-idle")
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(claim_files(&repo), Vec::<String>::new());
}

#[test]
fn four_processors_deliver_files_of_every_size_byte_for_byte() {
    run_four_processors("");
}

#[test]
fn a_stateless_group_delivers_files_of_every_size_deletes_its_sources_and_leaks_no_claim() {
    run_four_processors("    engine: stateless\n    timeout: 30 s");
}

/// A stateless group whose MergeContent waits for more triggers its sources again within
/// the transaction: GetFile must not take again a file it took and has not yet deleted (it
/// took the one file once per trigger, and the merge held it three times).
#[test]
fn a_stateless_merge_waiting_for_more_does_not_take_a_file_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (input, out, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    fs::create_dir_all(&input).unwrap();
    fs::write(input.join("only.txt"), b"the one line").unwrap();
    let flow = dir.path().join("flow.yaml");
    fs::write(
        &flow,
        format!(
            r#"flow: merge-once
groups:
  - name: main
    engine: stateless
    timeout: 30 s
    processors:
      - {{ name: read, type: GetFile, properties: {{ Input Directory: "{}" }} }}
      - {{ name: merge, type: MergeContent, properties: {{ Minimum Number of Entries: "3", Max Bin Age: 1 sec, Demarcator: "|" }}, auto_terminate: [original, failure] }}
      - {{ name: write, type: PutFile, properties: {{ Directory: "{}" }}, auto_terminate: [success, failure] }}
    connections:
      - {{ from: read, relationships: [success], to: merge }}
      - {{ from: merge, relationships: [merged], to: write }}
"#,
            input.display(),
            out.display()
        ),
    )
    .unwrap();
    let run = weir()
        .args(["flow", "run"])
        .arg(&flow)
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
    let outputs: Vec<Vec<u8>> = fs::read_dir(&out)
        .unwrap()
        .map(|e| fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(outputs, [b"the one line".to_vec()]);
    assert_eq!(fs::read_dir(&input).unwrap().count(), 0);
}
