//! Transactional file output: each snapshot epoch goes to a part file of its own, made
//! durable in phase 1 and renamed into place in phase 2, and the parts are joined into the
//! final file when the job ends.
//!
//! A file sink in a job that takes snapshots ([`ProcessorContext::guarantee`] is not
//! [`Guarantee::None`](weir_core::snapshot::Guarantee::None)) writes what it receives into
//! `<FILE>.part-NNNNNNNN.tmp` (numbered from 1, one per epoch that wrote anything) on its
//! I/O thread:
//!
//! - **prepare** (phase 1): the part is synced to disk and closed, and its directory synced
//!   so that its name survives a power loss; its number and the parts' length go into the
//!   snapshot ([`EpochState`]).
//! - **commit** (phase 2): prepared parts are renamed to `<FILE>.part-NNNNNNNN`. Idempotent:
//!   a part already renamed, or already joined, is fine.
//! - **restore**: the snapshot's parts are taken back (and committed again); parts numbered
//!   after them, from epochs the snapshot does not hold, are deleted, renamed or not. Each
//!   output's state is saved under the index of the instance whose file it is, so a run at
//!   lower parallelism adopts the outputs of missing instances (and joins them at its end),
//!   and a run at higher parallelism gives each back to its own instance.
//! - **the end** (the terminal snapshot's commit): the header and the parts, in order, are
//!   written to `<FILE>.tmp`, synced and renamed to `FILE`; then the parts are removed. If
//!   the process dies on the way, the restored run joins again: while every part is there the
//!   result is the same, and once one is gone `FILE` is already complete. The join checks
//!   what it joins against the saved length: parts that fall short, or a part gone beside a
//!   `FILE` that is not their join (an older output), fail the job naming the part.
//!
//! So while the job runs, the committed epochs lie beside `FILE` as numbered parts, and when
//! it ends `FILE` holds exactly the committed output, the same as a run that never failed.
//!
//! [`ProcessorContext::guarantee`]: weir_core::ProcessorContext::guarantee

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::files::SinkError;

/// What a file sink instance saves in a snapshot: for each output file it owns, how many
/// parts belong to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EpochState {
    /// The final file.
    pub path: PathBuf,
    /// Parts `1..=parts` hold the output so far.
    pub parts: u64,
    /// Their length in bytes, all together: the final join checks the parts, or a file
    /// joined before, against it.
    pub bytes: u64,
}

/// Encodes the states an instance saves (its own output first).
pub(crate) fn encode(states: &[EpochState]) -> Vec<u8> {
    postcard::to_stdvec(states).expect("a part list always encodes")
}

/// Decodes what [`encode`] made.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<EpochState>, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("a damaged list of prepared parts ({e})"))
}

/// Part `n` of `path`, committed.
pub(crate) fn part_path(path: &Path, n: u64) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".part-{n:08}"));
    p.into()
}

/// Part `n` of `path`, while it is written or prepared.
pub(crate) fn part_tmp(path: &Path, n: u64) -> PathBuf {
    let mut p = part_path(path, n).into_os_string();
    p.push(".tmp");
    p.into()
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> SinkError + '_ {
    move |source| SinkError::Write {
        path: path.to_owned(),
        source,
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Syncs the directory `path` is in, so that its entry survives a crash.
pub(crate) fn sync_parent(path: &Path) -> Result<(), SinkError> {
    sync_dir(parent(path))
}

/// Syncs `dir`, so that renames and removals in it survive a crash.
fn sync_dir(dir: &Path) -> Result<(), SinkError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(dir))
}

/// Removes the parts of `path` numbered `from` or more, committed or not: epochs no snapshot
/// holds. `from` 1 removes every part (a fresh start).
pub(crate) fn remove_parts_from(path: &Path, from: u64) -> Result<(), SinkError> {
    let dir = parent(path);
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    let prefix = format!("{name}.part-");
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(dir)(e)),
    };
    let mut removed = false;
    for entry in entries {
        let entry = entry.map_err(io_error(dir))?;
        let file = entry.file_name();
        let Some(number) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .map(|rest| rest.strip_suffix(".tmp").unwrap_or(rest))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if number >= from {
            let stale = entry.path();
            fs::remove_file(&stale).map_err(io_error(&stale))?;
            removed = true;
        }
    }
    if removed {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Renames each prepared part into place. A part whose temporary file is gone was renamed
/// (or joined) before: fine.
pub(crate) fn publish(parts: &[(PathBuf, u64)]) -> Result<(), SinkError> {
    let mut dirs: Vec<&Path> = Vec::new();
    for (path, n) in parts {
        let (tmp, done) = (part_tmp(path, *n), part_path(path, *n));
        match fs::rename(&tmp, &done) {
            Ok(()) => {
                if !dirs.contains(&parent(path)) {
                    dirs.push(parent(path));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(SinkError::Rename {
                    from: tmp,
                    to: done,
                    source,
                });
            }
        }
    }
    for dir in dirs {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Joins `header` and the committed parts of `output` into its file (through `tmp`), then
/// removes the parts. See the [module docs](self) for why a second join after a crash is
/// harmless. What is joined is checked first: the parts must hold `output.bytes` bytes, and
/// when some are gone (a join got as far as removing them) the file must be that join's, of
/// the header's and the parts' length; anything else (a part lost, an older file of that
/// name) is an error naming the part.
pub(crate) fn join(
    output: &EpochState,
    tmp: &Path,
    header: Option<&Arc<[u8]>>,
) -> Result<(), SinkError> {
    let path = &output.path;
    let joined_len = header.map_or(0, |h| h.len() as u64) + output.bytes;
    let mut lens = Vec::with_capacity(output.parts as usize);
    let mut missing = None;
    for n in 1..=output.parts {
        match fs::metadata(part_path(path, n)) {
            Ok(meta) => lens.push(meta.len()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.get_or_insert(n);
            }
            Err(e) => return Err(io_error(&part_path(path, n))(e)),
        }
    }
    let fault = |message: String| SinkError::Write {
        source: io::Error::new(io::ErrorKind::InvalidData, message),
        path: path.to_owned(),
    };
    match missing {
        None => {
            let found: u64 = lens.iter().sum();
            if found != output.bytes {
                return Err(fault(format!(
                    "the committed parts of {} hold {found} bytes, the snapshot says {}",
                    path.display(),
                    output.bytes
                )));
            }
            let mut out = File::create(tmp).map_err(|source| SinkError::Create {
                path: tmp.to_owned(),
                source,
            })?;
            if let Some(h) = header {
                out.write_all(h).map_err(io_error(tmp))?;
            }
            for n in 1..=output.parts {
                let part = part_path(path, n);
                let mut input = File::open(&part).map_err(io_error(&part))?;
                io::copy(&mut input, &mut out).map_err(io_error(tmp))?;
            }
            out.sync_all().map_err(io_error(tmp))?;
            drop(out);
            fs::rename(tmp, path).map_err(|source| SinkError::Rename {
                from: tmp.to_owned(),
                to: path.to_owned(),
                source,
            })?;
            sync_dir(parent(path))?;
            weir_core::snapshot::crash::step("sink-joined");
        }
        // A join got as far as removing parts: the file is whole.
        Some(_) if fs::metadata(path).is_ok_and(|m| m.len() == joined_len) => {}
        Some(n) => {
            let part = part_path(path, n);
            return Err(fault(format!(
                "committed part {} is missing, and {} is not the join of the parts",
                part.display(),
                path.display()
            )));
        }
    }
    remove_parts_from(path, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_numbered_beside_the_file_and_stale_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.csv");
        assert_eq!(part_path(&out, 3), dir.path().join("out.csv.part-00000003"));
        assert_eq!(
            part_tmp(&out, 3),
            dir.path().join("out.csv.part-00000003.tmp")
        );
        for n in 1..=4 {
            fs::write(part_path(&out, n), n.to_string()).unwrap();
        }
        fs::write(part_tmp(&out, 5), "5").unwrap();
        fs::write(dir.path().join("out.csv.part-x"), "other").unwrap();
        fs::write(dir.path().join("other.part-00000009"), "other").unwrap();
        remove_parts_from(&out, 3).unwrap();
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "other.part-00000009",
                "out.csv.part-00000001",
                "out.csv.part-00000002",
                "out.csv.part-x"
            ]
        );
    }

    #[test]
    fn publish_is_idempotent_and_join_survives_being_run_twice() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let tmp = dir.path().join("out.txt.tmp");
        fs::write(part_tmp(&out, 1), "a\n").unwrap();
        fs::write(part_tmp(&out, 2), "b\n").unwrap();
        let parts = [(out.clone(), 1), (out.clone(), 2)];
        publish(&parts).unwrap();
        publish(&parts).unwrap();
        assert!(part_path(&out, 2).exists() && !part_tmp(&out, 2).exists());
        let header: Arc<[u8]> = Arc::from(&b"h\n"[..]);
        let state = EpochState {
            path: out.clone(),
            parts: 2,
            bytes: 4,
        };
        join(&state, &tmp, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "h\na\nb\n");
        // A crash after the rename, before the parts were removed: joining again gives the
        // same file.
        fs::write(part_path(&out, 1), "a\n").unwrap();
        fs::write(part_path(&out, 2), "b\n").unwrap();
        join(&state, &tmp, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "h\na\nb\n");
        // A crash while the parts were removed: the file stands.
        fs::write(part_path(&out, 2), "b\n").unwrap();
        join(&state, &tmp, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "h\na\nb\n");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        // Missing parts without the file: an error naming the part.
        fs::remove_file(&out).unwrap();
        fs::write(part_path(&out, 2), "b\n").unwrap();
        let err = join(&state, &tmp, None).unwrap_err();
        assert!(err.to_string().contains("part-00000001"), "{err}");
    }

    #[test]
    fn join_refuses_a_lost_part_beside_an_older_file_and_a_short_part() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let tmp = dir.path().join("out.txt.tmp");
        let state = EpochState {
            path: out.clone(),
            parts: 2,
            bytes: 6,
        };
        // Part 1 lost (its name never reached the disk), and an output of an earlier run:
        // not proof of a join.
        fs::write(&out, "an older output\n").unwrap();
        fs::write(part_path(&out, 2), "two\n").unwrap();
        let err = join(&state, &tmp, None).unwrap_err().to_string();
        assert!(
            err.contains("part-00000001") && err.contains("not the join"),
            "{err}"
        );
        assert_eq!(fs::read_to_string(&out).unwrap(), "an older output\n");
        // Every part there, one short.
        fs::write(part_path(&out, 1), "1").unwrap();
        let err = join(&state, &tmp, None).unwrap_err().to_string();
        assert!(err.contains("5 bytes") && err.contains("says 6"), "{err}");
        fs::write(part_path(&out, 1), "1\n").unwrap();
        join(&state, &tmp, None).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "1\ntwo\n");
    }
}
