//! q10's output as a directory of partitions, laid out as Flink's (and Hive's) filesystem
//! sink lays out a table `PARTITIONED BY (dt, hm)`:
//!
//! ```text
//! out/dt=2015-07-15/hm=00%3A00/part-00000-00000.csv
//! out/dt=2015-07-15/hm=00%3A01/part-00000-00001.csv
//! out/dt=2015-07-15/hm=00%3A01/part-00001-00000.csv
//! ```
//!
//! - A directory per partition, `dt=<date>/hm=<minute>`, its values escaped as Hive escapes
//!   partition values (`:` is `%3A`, as are `/`, `=`, `%` and the other characters that
//!   cannot stand in a path segment): Hive, Spark and Flink read `hm` back as `00:00`.
//! - Each sink instance writes its own files, `part-<instance>-<n>.csv`, `n` counting the
//!   files the instance opened, each with the header `auction,bidder,price,date_time,extra`:
//!   the partition columns are in the path, not in the file.
//! - A file is written as a hidden `.part-....csv.tmp` and renamed when the instance closes
//!   it: at the end of the input, or when it has [`MAX_OPEN_FILES`] files open and this one
//!   was written least recently (a later row of that partition opens a new file). A job that
//!   fails leaves no file under a final name from its open files, and removes their
//!   temporary files.
//! - It does not take part in snapshots: a job that takes them fails at its first one,
//!   naming this sink (write q10 to a single CSV file instead).
//!
//! ```
//! use weir_nexmark::partitioned::{escape_partition_value, partition_dir};
//!
//! assert_eq!(escape_partition_value("12:05"), "12%3A05");
//! assert_eq!(partition_dir("2015-07-15", "12:05"), "dt=2015-07-15/hm=12%3A05");
//! ```

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use weir::{BoxError, Sink, SinkWriter};

use crate::reference::Q10Row;

/// How many partition files an instance keeps open at once; the least recently written is
/// closed to open another.
pub const MAX_OPEN_FILES: usize = 64;

/// The header of each partition file: q10's columns less the partition columns.
pub const PARTITION_FILE_HEADER: &str = "auction,bidder,price,date_time,extra";

/// `value` escaped as a Hive partition value: each character that cannot stand in a path
/// segment or would be misread (`"#%'*/:=?\{[]^` and DEL, and control characters) as `%XX`,
/// upper-case hex.
pub fn escape_partition_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let escaped = c.is_ascii_control()
            || matches!(
                c,
                '"' | '#' | '%' | '\'' | '*' | '/' | ':' | '=' | '?' | '\\' | '{' | '[' | ']' | '^'
            );
        if escaped {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The relative directory of the partition `(dt, hm)`: `dt=<dt>/hm=<hm>`, values escaped.
pub fn partition_dir(dt: &str, hm: &str) -> String {
    format!(
        "dt={}/hm={}",
        escape_partition_value(dt),
        escape_partition_value(hm)
    )
}

/// A sink that writes q10's rows into the partition directories under `dir`; see the
/// [module docs](self). One instance per worker.
pub fn q10_sink(dir: impl AsRef<Path>) -> Sink<Q10Row> {
    let dir = std::path::absolute(dir.as_ref()).unwrap_or_else(|_| dir.as_ref().to_path_buf());
    let name = format!("q10-partitions({})", dir.display());
    Sink::new(name, None, move |ctx| PartitionWriter {
        dir: dir.clone(),
        instance: ctx.global_index(),
        files: FxHashMap::default(),
        opened: 0,
        writes: 0,
        line: Vec::with_capacity(256),
    })
}

/// One open partition file.
struct PartFile {
    out: BufWriter<File>,
    temporary: PathBuf,
    target: PathBuf,
    /// The write count when it was last written: the least is closed first.
    last_write: u64,
}

/// Writes one instance's rows; see [`q10_sink`].
struct PartitionWriter {
    dir: PathBuf,
    instance: usize,
    /// By `(dt, hm)`.
    files: FxHashMap<(compact_str::CompactString, compact_str::CompactString), PartFile>,
    opened: u64,
    writes: u64,
    line: Vec<u8>,
}

impl PartitionWriter {
    fn open(&mut self, dt: &str, hm: &str) -> Result<PartFile, BoxError> {
        let dir = self.dir.join(partition_dir(dt, hm));
        fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))?;
        let name = format!("part-{:05}-{:05}.csv", self.instance, self.opened);
        self.opened += 1;
        let temporary = dir.join(format!(".{name}.tmp"));
        let file = File::create(&temporary)
            .map_err(|e| format!("cannot create {}: {e}", temporary.display()))?;
        let mut out = BufWriter::with_capacity(64 * 1024, file);
        out.write_all(PARTITION_FILE_HEADER.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .map_err(|e| format!("cannot write {}: {e}", temporary.display()))?;
        Ok(PartFile {
            out,
            temporary,
            target: dir.join(name),
            last_write: 0,
        })
    }

    /// Flushes `file` and renames it to its final name.
    fn finish(file: PartFile) -> Result<(), BoxError> {
        let PartFile {
            out,
            temporary,
            target,
            ..
        } = file;
        out.into_inner()
            .map_err(|e| format!("cannot write {}: {}", temporary.display(), e.error()))?;
        fs::rename(&temporary, &target).map_err(|e| {
            format!(
                "cannot rename {} to {}: {e}",
                temporary.display(),
                target.display()
            )
        })?;
        Ok(())
    }
}

impl SinkWriter for PartitionWriter {
    type Item = Q10Row;

    fn write(&mut self, row: Q10Row) -> Result<(), BoxError> {
        self.writes += 1;
        let key = (row.dt.clone(), row.hm.clone());
        if !self.files.contains_key(&key) {
            if self.files.len() >= MAX_OPEN_FILES
                && let Some(oldest) = self
                    .files
                    .iter()
                    .min_by_key(|(_, f)| f.last_write)
                    .map(|(k, _)| k.clone())
            {
                let file = self.files.remove(&oldest).expect("listed just now");
                Self::finish(file)?;
            }
            let file = self.open(&row.dt, &row.hm)?;
            self.files.insert(key.clone(), file);
        }
        let file = self.files.get_mut(&key).expect("opened above");
        file.last_write = self.writes;
        self.line.clear();
        row.write_csv_without_partition(&mut self.line);
        self.line.push(b'\n');
        file.out
            .write_all(&self.line)
            .map_err(|e| format!("cannot write {}: {e}", file.temporary.display()))?;
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        for (_, file) in self.files.drain() {
            Self::finish(file)?;
        }
        Ok(())
    }

    fn is_cooperative(&self) -> bool {
        // Plain blocking file writes.
        false
    }

    fn prepare(&mut self) -> Result<Option<Vec<u8>>, BoxError> {
        Err(format!(
            "the q10 partition directory {} cannot be written transactionally, so it does not take part in snapshots: write q10 to a single CSV file in a job that takes them",
            self.dir.display()
        )
        .into())
    }
}

impl Drop for PartitionWriter {
    fn drop(&mut self) {
        // Files still open here belong to a job that failed: leave nothing half-written.
        for (_, file) in self.files.drain() {
            drop(file.out);
            let _ = fs::remove_file(&file.temporary);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_hive_does() {
        assert_eq!(escape_partition_value("2015-07-15"), "2015-07-15");
        assert_eq!(escape_partition_value("00:00"), "00%3A00");
        assert_eq!(escape_partition_value("a/b=c%d"), "a%2Fb%3Dc%25d");
        assert_eq!(escape_partition_value("\n"), "%0A");
        assert_eq!(escape_partition_value("héllo"), "héllo");
    }
}
