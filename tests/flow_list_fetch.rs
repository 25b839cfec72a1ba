//! `weir flow run` with ListFile → FetchFile → ConvertRecord → PutFile over a directory
//! tree: every CSV file becomes a JSON file in a mirrored tree, a rerun on the same
//! repository lists only new and changed files, and runs killed with SIGKILL lose no file.

mod support;

use support::command as weir;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

fn flow_yaml(input: &Path, out: &Path) -> String {
    format!(
        r#"flow: list-fetch-convert
groups:
  - name: main
    processors:
      - name: list
        type: ListFile
        schedule: {{ strategy: timer, period: 100 ms }}
        properties: {{ Input Directory: "{input}", File Filter: '.*\.csv' }}
      - name: fetch
        type: FetchFile
        auto_terminate: [not.found, permission.denied, failure]
      - name: convert
        type: ConvertRecord
        properties:
          Record Reader: CSVReader
          Record Writer: JsonRecordSetWriter
          Output Grouping: One Line Per Object
        auto_terminate: [failure]
      - name: rename
        type: UpdateAttribute
        properties:
          filename: ${{filename:substringBefore('.csv')}}.json
      - name: write
        type: PutFile
        properties: {{ Directory: "{out}/${{path}}", Conflict Resolution Strategy: replace }}
        auto_terminate: [success, failure]
    connections:
      - {{ from: list, relationships: [success], to: fetch }}
      - {{ from: fetch, relationships: [success], to: convert }}
      - {{ from: convert, relationships: [success], to: rename }}
      - {{ from: rename, relationships: [success], to: write }}
"#,
        input = input.display(),
        out = out.display()
    )
}

/// Writes a CSV of `rows` rows to `path`, modified `age` ago.
fn write_csv(path: &Path, tag: &str, rows: usize, age: Duration) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = String::from("id,name\n");
    for i in 0..rows {
        text.push_str(&format!("{i},\"{tag}, row {i}\"\n"));
    }
    fs::write(path, text).unwrap();
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

/// The JSON Lines ConvertRecord makes of [`write_csv`]'s file.
fn expected_json(tag: &str, rows: usize) -> String {
    (0..rows)
        .map(|i| format!("{{\"id\":{i},\"name\":\"{tag}, row {i}\"}}\n"))
        .collect()
}

/// Every file under `dir`, by its path relative to it.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn run_until_idle(flow: &Path, repo: &Path) {
    let output = weir()
        .args(["flow", "run"])
        .arg(flow)
        .arg("--repo")
        .arg(repo)
        .arg("--until-idle")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

struct Setup {
    _dir: tempfile::TempDir,
    input: PathBuf,
    out: PathBuf,
    repo: PathBuf,
    flow: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (input, out, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    fs::create_dir_all(&input).unwrap();
    let flow = dir.path().join("flow.yaml");
    fs::write(&flow, flow_yaml(&input, &out)).unwrap();
    Setup {
        _dir: dir,
        input,
        out,
        repo,
        flow,
    }
}

/// A tree of CSV files (names with spaces and unicode, a header-only file, a file that is
/// not CSV by name) becomes the same tree of JSON files; a rerun lists only the file added
/// and the file changed since.
#[test]
fn list_fetch_convert_put_mirrors_a_tree_and_a_rerun_lists_only_new_and_changed_files() {
    let s = setup();
    let old = Duration::from_secs(60);
    write_csv(&s.input.join("a.csv"), "a", 3, old);
    write_csv(&s.input.join("sub/b c.csv"), "b", 2, old);
    write_csv(&s.input.join("sub/deeper/ünï.csv"), "ü", 1, old);
    write_csv(&s.input.join("header-only.csv"), "h", 0, old);
    write_csv(&s.input.join("notes.txt"), "n", 1, old);
    run_until_idle(&s.flow, &s.repo);
    let expected = BTreeMap::from([
        ("a.json".to_string(), expected_json("a", 3)),
        ("header-only.json".to_string(), String::new()),
        ("sub/b c.json".to_string(), expected_json("b", 2)),
        ("sub/deeper/ünï.json".to_string(), expected_json("ü", 1)),
    ]);
    assert_eq!(tree(&s.out), expected);

    // Outputs cleared: what the rerun writes is what it listed.
    fs::remove_dir_all(&s.out).unwrap();
    write_csv(
        &s.input.join("sub/b c.csv"),
        "b2",
        4,
        Duration::from_secs(30),
    );
    write_csv(
        &s.input.join("sub/new.csv"),
        "new",
        1,
        Duration::from_secs(1),
    );
    run_until_idle(&s.flow, &s.repo);
    assert_eq!(
        tree(&s.out),
        BTreeMap::from([
            ("sub/b c.json".to_string(), expected_json("b2", 4)),
            ("sub/new.json".to_string(), expected_json("new", 1)),
        ])
    );

    // Nothing new: nothing written.
    fs::remove_dir_all(&s.out).unwrap();
    run_until_idle(&s.flow, &s.repo);
    assert!(tree(&s.out).is_empty());
}

/// Runs killed with SIGKILL at random moments (`WEIR_FLOW_KILLS`, default 10) while files
/// keep arriving, then a run to idle: every file's JSON is there, whole. The listing state
/// is committed with the listed flow files, so a kill never skips a file.
#[test]
fn kill_9_while_listing_loses_no_file() {
    let kills: u32 = std::env::var("WEIR_FLOW_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let s = setup();
    let mut expected = BTreeMap::new();
    let add = |n: usize, expected: &mut BTreeMap<String, String>| {
        let tag = format!("f{n:03}");
        let rows = 1 + n % 40;
        write_csv(
            &s.input.join(format!("d{}/{tag}.csv", n % 4)),
            &tag,
            rows,
            Duration::ZERO,
        );
        expected.insert(format!("d{}/{tag}.json", n % 4), expected_json(&tag, rows));
    };
    for n in 0..60 {
        add(n, &mut expected);
    }
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = 60;
    for _ in 0..kills {
        let mut child = weir()
            .args(["flow", "run"])
            .arg(&s.flow)
            .arg("--repo")
            .arg(&s.repo)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Files arrive while the flow runs.
        for _ in 0..8 {
            add(next, &mut expected);
            next += 1;
        }
        std::thread::sleep(Duration::from_millis(100 + seed % 500));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    run_until_idle(&s.flow, &s.repo);
    let got = tree(&s.out);
    let missing: Vec<&String> = expected.keys().filter(|k| !got.contains_key(*k)).collect();
    assert!(missing.is_empty(), "files never written: {missing:?}");
    assert_eq!(got, expected);
}

/// The bundled example, run with its directories moved under a temporary one: the CSV files
/// of `examples/flows/data/csv` become JSON Lines, typed by inference.
#[test]
fn the_csv_to_json_example_converts_the_bundled_data() {
    let dir = tempfile::tempdir().unwrap();
    let example = fs::read_to_string("examples/flows/csv-to-json.yaml").unwrap();
    let out = dir.path().join("json");
    let yaml = example
        .replace(
            "examples/flows/data/csv",
            &fs::canonicalize("examples/flows/data/csv")
                .unwrap()
                .display()
                .to_string(),
        )
        .replace("target/flow-json", &out.display().to_string());
    let flow = dir.path().join("flow.yaml");
    fs::write(&flow, yaml).unwrap();
    run_until_idle(&flow, &dir.path().join("repo"));
    let got = tree(&out);
    assert_eq!(
        got["orders.json"],
        concat!(
            "{\"id\":1,\"customer\":\"Ada Lovelace\",\"amount\":12.5,\"paid\":true}\n",
            "{\"id\":2,\"customer\":\"Grace Hopper\",\"amount\":7.0,\"paid\":false}\n",
            "{\"id\":3,\"customer\":\"Zoë Ångström, Ltd.\",\"amount\":1040.0,\"paid\":true}\n",
        )
    );
    assert_eq!(
        got["2024/returns.json"],
        "{\"order\":2,\"reason\":\"arrived \\\"late\\\"\"}\n{\"order\":3,\"reason\":\"\"}\n"
    );
}
