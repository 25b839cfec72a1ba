//! JSON Lines files: each item serialized as one line of JSON.
//!
//! ```no_run
//! use weir::prelude::*;
//! use serde::Serialize;
//!
//! #[derive(Clone, Serialize)]
//! struct Total { symbol: String, volume: u64 }
//!
//! let totals = vec![Total { symbol: "WEIR".into(), volume: 100 }];
//! let p = Pipeline::new();
//! p.read_from(sources::collection::items(totals))
//!     .write_to(sinks::json::lines::<Total>("totals.jsonl"));
//! p.run()?;
//! # Ok::<(), weir::Error>(())
//! ```

use std::path::Path;

use serde::Serialize;
use weir_core::{BoxError, Item};

use super::Sink;
use super::files::{Target, file_sink};

/// Creates a sink that writes each item as one line of JSON (`serde_json`, compact, then
/// `\n`) into the file `path`.
///
/// One instance writes the whole file (parallelism `Some(1)`), in the order it receives the
/// items. The file is written under a temporary name and renamed at the end, as for every
/// file sink (see [`files`](super::files#atomic-output)); missing parent directories are
/// created. Strings with newlines are escaped by JSON, so every item is exactly one line.
///
/// Cost: one `serde_json` serialization per item straight into a 256 KiB buffer (by the
/// stages before the sink when they run on every worker: see
/// [`files`](super::files#formatting-where-the-items-are)), handed to an I/O thread for its
/// `write` syscall; the instance is cooperative.
///
/// # Errors
/// The job fails with a [`SinkError`](super::files::SinkError) naming the file if it cannot
/// be created, written or renamed, or if an item cannot be serialized (a map with non-string
/// keys, a `Serialize` impl that fails).
pub fn lines<T: Item + Serialize>(path: impl AsRef<Path>) -> Sink<T> {
    let path = path.as_ref();
    file_sink(
        format!("json({})", path.display()),
        Target::File(path.to_owned()),
        json_line::<T>,
    )
}

/// Appends `item` as JSON and a newline.
fn json_line<T: Serialize>(item: &T, out: &mut Vec<u8>) -> Result<(), BoxError> {
    serde_json::to_writer(&mut *out, item)?;
    out.push(b'\n');
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::fs;
    use std::sync::Arc;

    use serde::Deserialize;

    use super::*;
    use crate::sinks::files::FileWriter;
    use crate::sinks::files::testing::run;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Rec {
        name: String,
        n: u64,
    }

    #[test]
    fn writes_one_json_value_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let items = vec![
            Rec {
                name: "a\nb".into(),
                n: 1,
            },
            Rec {
                name: "é".into(),
                n: 2,
            },
        ];
        let writer = FileWriter::new(
            Target::File(path.clone()).paths(0),
            Arc::new(json_line::<Rec>),
        );
        run(writer, items.clone(), 0, 1).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        let back: Vec<Rec> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, items);
    }

    #[test]
    fn an_unserializable_item_fails_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let bad: HashMap<Vec<u8>, u32> = HashMap::from([(vec![1], 1)]);
        let writer = FileWriter::new(
            Target::File(path.clone()).paths(0),
            Arc::new(json_line::<HashMap<Vec<u8>, u32>>),
        );
        let err = run(writer, [bad], 0, 1).unwrap_err();
        assert!(err.to_string().contains("out.jsonl"), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn sink_is_a_single_file() {
        let sink = lines::<Rec>("x.jsonl");
        assert_eq!(sink.parallelism, Some(1));
        assert_eq!(sink.name(), "json(x.jsonl)");
    }
}
