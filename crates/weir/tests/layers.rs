//! The layers inside `weir` that the compiler cannot see (they share a crate): the
//! processors (`src/exec/`) use the shared vocabulary (`connector`, `aggregate`,
//! `event_time`, `async_io`) and the core runtime, never an API module (`pipeline`,
//! `stream`, `sources`, `sinks`, `jobs`), so that the API can change without touching what
//! runs. See ARCHITECTURE.md, "Layers and crates".

use std::path::Path;

const API_MODULES: [&str; 5] = ["pipeline", "stream", "sources", "sinks", "jobs"];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_processors_use_no_api_module() {
    let exec = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/exec");
    let mut files = Vec::new();
    rust_files(&exec, &mut files);
    assert!(files.len() > 10, "the processors are in {}", exec.display());
    let mut found = Vec::new();
    for file in files {
        // Unit tests may build pipelines to drive the processors.
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Code before the file's unit tests.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for module in API_MODULES {
                if line.contains(&format!("crate::{module}::"))
                    || line.contains(&format!("crate::{module};"))
                    || line.contains(&format!("crate::{module}}}"))
                {
                    found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the processors use API modules:\n{}",
        found.join("\n")
    );
}
