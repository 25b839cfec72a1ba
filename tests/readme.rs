//! The README's command sessions, run as written: each line of a session's `sh` block runs in
//! a shell, with `cargo run --release --` standing for the `weir` binary and
//! `cargo run --release --example NAME --` for the example binary, both as `cargo test`
//! built them. A README edit that breaks a session breaks this test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use weir_test_support::services::{self, AMQP, POSTGRES};

/// The lines of the first `sh` block after the heading `heading` in README.md.
fn session(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let after = readme
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README.md has no heading `{heading}`"))
        .1;
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .unwrap_or_else(|| panic!("no sh block after `{heading}`"))
        .0;
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The directory of the binaries `cargo test` built (the `weir` binary's).
fn binaries() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_weir"))
        .parent()
        .expect("the binary's directory")
        .to_path_buf()
}

/// `line` with the `cargo run` forms replaced by the binaries they would run.
fn resolve(line: &str) -> String {
    let bins = binaries();
    let mut line = line.to_string();
    while let Some(at) = line.find("cargo run --release --example ") {
        let rest = &line[at + "cargo run --release --example ".len()..];
        let (name, tail) = rest.split_once(" --").unwrap_or((rest, ""));
        let example = bins.join("examples").join(name.trim());
        assert!(
            example.exists(),
            "{} is missing: `cargo test` builds the examples (or run `cargo build --examples`)",
            example.display()
        );
        line = format!("{}{}{}", &line[..at], example.display(), tail);
    }
    line.replace(
        "cargo run --release --",
        &format!("{}", bins.join("weir").display()),
    )
}

/// Runs `line` in `bash` from the repository root, failing the test with its output unless
/// it exits 0.
fn run(line: &str) -> Output {
    let resolved = resolve(line);
    let out = Command::new("bash")
        .arg("-c")
        .arg(&resolved)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "`{line}` (run as `{resolved}`) failed with {}:\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn psql_found() -> bool {
    Command::new("psql").arg("--version").output().is_ok()
}

#[test]
fn the_stateless_quick_start_runs_as_written() {
    let test = "the_stateless_quick_start_runs_as_written";
    if !services::available(test, &[AMQP, POSTGRES]) {
        return;
    }
    if !psql_found() {
        services::skip_unless_required(test, "psql not found", "install postgresql-client");
        return;
    }
    let lines = session("### Stateless groups, brokers and databases");
    assert_eq!(lines.len(), 4, "create, publish, run, select: {lines:?}");
    // A table left by an earlier run would hold rows this session did not write.
    run("psql -h 127.0.0.1 -U postgres test -q -c 'DROP TABLE IF EXISTS orders'");
    // The session's repository is the one under `target/`: start it empty.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/amqp-repo");
    let _ = std::fs::remove_dir_all(&repo);

    let mut outputs = Vec::new();
    for line in &lines {
        outputs.push(run(line));
    }
    let published = String::from_utf8_lossy(&outputs[1].stdout).to_string();
    assert!(published.contains("published 10 orders"), "{published}");
    let ran = String::from_utf8_lossy(&outputs[2].stderr).to_string()
        + &String::from_utf8_lossy(&outputs[2].stdout);
    assert!(ran.contains("0 queued"), "{ran}");
    let rows = String::from_utf8_lossy(&outputs[3].stdout).to_string();
    for i in 1..=10 {
        let row = rows
            .lines()
            .find(|l| l.split('|').nth(1).map(str::trim) == Some(&format!("order-{i}")))
            .unwrap_or_else(|| panic!("no row for order-{i}:\n{rows}"));
        let tag = row.split('|').nth(2).map(str::trim).unwrap_or_default();
        assert!(
            tag == "even-true" || tag == "even-false",
            "order-{i} tagged `{tag}`:\n{rows}"
        );
    }
    assert!(rows.contains("(10 rows)"), "{rows}");
}
