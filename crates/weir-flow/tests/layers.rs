//! The layers inside `weir-flow` that the compiler cannot see (they share a crate): the
//! processors (`src/processors/`) work through the flow API (`weir-flow-api`: the `Session`
//! trait, flow files, specs), never through an engine (`engine`, `stateless`), so that a
//! processor runs unchanged in both engines and the engines can change without touching
//! it. See ARCHITECTURE.md, "Layers and crates".

use std::path::Path;

const ENGINE_MODULES: [&str; 2] = ["engine", "stateless"];

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
fn the_processors_use_no_engine() {
    let processors = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/processors");
    let mut files = Vec::new();
    rust_files(&processors, &mut files);
    assert!(
        files.len() > 5,
        "the processors are in {}",
        processors.display()
    );
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for module in ENGINE_MODULES {
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
        "the processors use an engine:\n{}",
        found.join("\n")
    );
}
