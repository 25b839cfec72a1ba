//! What the end-to-end tests share: running the `weir` binary that cargo built for them and
//! reading what it wrote. Each test file takes the part it needs (`mod support;`).

// Each test file uses a part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A command running the `weir` binary, without the settings a developer's shell may hold
/// (`WEIR_LOG`, `WEIR_UI_TOKEN`), so that a test sees the defaults.
pub fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env_remove("WEIR_LOG").env_remove("WEIR_UI_TOKEN");
    c
}

/// Runs `weir ARGS` to the end; its status and output.
pub fn weir(args: &[&str]) -> Output {
    command().args(args).output().expect("weir runs")
}

/// What a run wrote to standard error (invalid UTF-8 replaced).
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What a run wrote to standard output (invalid UTF-8 replaced).
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The lines of the file at `path`, sorted: a job's rows, which come in no fixed order.
pub fn sorted_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

/// `dir/events.jsonl`: `count` NEXMark events from `weir nexmark generate` at 2,000 events
/// per second of event time (so many windows close), with `extra` generator flags.
pub fn nexmark_events(dir: &Path, count: u64, extra: &[&str]) -> PathBuf {
    let path = dir.join("events.jsonl");
    let count = count.to_string();
    let mut args = vec!["nexmark", "generate", "--events", &count, "--rate", "2000"];
    args.extend(extra);
    args.extend(["--output", path.to_str().unwrap()]);
    let o = weir(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    path
}
