//! Transactional file output: each snapshot epoch goes to a part file of its own, made
//! durable in phase 1 and renamed into place in phase 2; committed parts are rolled into one
//! file as the job goes, and that file becomes the output when the job ends.
//!
//! A file sink in a job that takes snapshots ([`ProcessorContext::guarantee`] is not
//! [`Guarantee::None`](weir_core::snapshot::Guarantee::None)) writes what it receives into
//! `<FILE>.part-NNNNNNNN.tmp` (numbered from 1, one per epoch that wrote anything) on its
//! I/O thread:
//!
//! - **prepare** (phase 1): the part is synced to disk and closed, and its directory synced
//!   so that its name survives a power loss; its number and the length of all the parts so
//!   far go into the snapshot ([`EpochState`]).
//! - **commit** (phase 2): prepared parts are renamed to `<FILE>.part-NNNNNNNN`. Idempotent:
//!   a part already renamed, or already rolled, is fine. Once [`ROLL_AT`] committed parts lie
//!   loose, they are **rolled**: appended to `<FILE>.rolled-NNNNNNNN` (the header, then parts
//!   1 to N), which is synced and renamed to its new number before the parts go. So a job
//!   keeps at most a few dozen files however long it runs, and a restore's cost does not grow
//!   with its age.
//! - **restore**: the committed output of a snapshot is the first `bytes` bytes of the rolled
//!   file's parts followed by the loose parts: the rolled file is cut back to that (past a
//!   crashed roll's tail, or, restoring an older snapshot, past epochs it does not hold),
//!   prepared parts it holds are renamed into place, and parts numbered after it are deleted,
//!   renamed or not.
//! - **the end** (the terminal snapshot's commit): the remaining parts are rolled, and the
//!   rolled file is renamed to `FILE`. If the process dies on the way, the restored run does it
//!   again; once the rename happened, `FILE` is complete, checked by its length.
//!
//! Every step checks lengths against the snapshot's: a part that falls short, or one missing
//! beside a `FILE` that is not the output (an older file of that name), fails the job naming
//! the file. So while the job runs the committed epochs lie beside `FILE` as the rolled file
//! and a few parts, and when it ends `FILE` holds exactly the committed output, the same as a
//! run that never failed.
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

/// A part file of an output found on disk.
struct PartFile {
    number: u64,
    /// Prepared (`.tmp`), not yet committed.
    prepared: bool,
    file: PathBuf,
}

/// The part files of `path` (committed and prepared), from one listing of its folder: the
/// cost of every step here is the folder's size, not the job's age.
fn part_files(path: &Path) -> Result<Vec<PartFile>, SinkError> {
    let dir = parent(path);
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}.part-");
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir)(e)),
    };
    let mut parts = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error(dir))?;
        let file = entry.file_name();
        let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let (digits, prepared) = match rest.strip_suffix(".tmp") {
            Some(digits) => (digits, true),
            None => (rest, false),
        };
        if let Ok(number) = digits.parse::<u64>() {
            parts.push(PartFile {
                number,
                prepared,
                file: entry.path(),
            });
        }
    }
    Ok(parts)
}

/// Removes the part files of `path` (committed or prepared) whose number `doomed` picks,
/// syncing the folder if any went.
fn remove_parts_where(path: &Path, doomed: impl Fn(&PartFile) -> bool) -> Result<(), SinkError> {
    let mut removed = false;
    for part in part_files(path)?.iter().filter(|p| doomed(p)) {
        match fs::remove_file(&part.file) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&part.file)(e)),
        }
    }
    if removed {
        sync_dir(parent(path))?;
    }
    Ok(())
}

/// Removes the parts of `path` numbered `from` or more, committed or not: epochs no snapshot
/// holds. `from` 1 removes every part (a fresh start).
pub(crate) fn remove_parts_from(path: &Path, from: u64) -> Result<(), SinkError> {
    remove_parts_where(path, |p| p.number >= from)
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

/// How many committed parts may lie loose before they are rolled.
pub(crate) const ROLL_AT: u64 = 16;

/// The rolled file of `path` holding parts `1..=n`.
pub(crate) fn rolled_path(path: &Path, n: u64) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".rolled-{n:08}"));
    p.into()
}

/// The rolled file of `path`, if any, and how many parts it holds.
fn find_rolled(path: &Path) -> Result<Option<(u64, PathBuf)>, SinkError> {
    let dir = parent(path);
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    let prefix = format!("{name}.rolled-");
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(dir)(e)),
    };
    let mut found = None;
    for entry in entries {
        let entry = entry.map_err(io_error(dir))?;
        let file = entry.file_name();
        let Some(n) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        // One at a time: a roll renames the file to its new number.
        found = Some((n, entry.path()));
    }
    Ok(found)
}

fn fault(path: &Path, message: String) -> SinkError {
    SinkError::Write {
        source: io::Error::new(io::ErrorKind::InvalidData, message),
        path: path.to_owned(),
    }
}

/// The length of committed parts `from..=to` of `path`, each of which must be there.
fn loose_len(path: &Path, from: u64, to: u64) -> Result<u64, SinkError> {
    let mut sum = 0;
    for n in from..=to {
        let part = part_path(path, n);
        match fs::metadata(&part) {
            Ok(meta) => sum += meta.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(fault(
                    path,
                    format!("committed part {} is missing", part.display()),
                ));
            }
            Err(e) => return Err(io_error(&part)(e)),
        }
    }
    Ok(sum)
}

/// Removes the parts of `path` numbered up to `to` (the rolled file holds them).
fn remove_parts_through(path: &Path, to: u64) -> Result<(), SinkError> {
    remove_parts_where(path, |p| p.number <= to)
}

/// Removes every file of `path`'s output in the making (parts and the rolled file): a fresh
/// start, which no snapshot holds.
pub(crate) fn remove_all(path: &Path) -> Result<(), SinkError> {
    remove_parts_from(path, 1)?;
    if let Some((_, rolled)) = find_rolled(path)? {
        fs::remove_file(&rolled).map_err(io_error(&rolled))?;
        sync_dir(parent(path))?;
    }
    Ok(())
}

/// The rolled file of `output`, holding the header and parts `1..=r`, cut to exactly that
/// (a crashed roll may have appended past it); created with the header if there is none.
/// Returns `r` and the open file, positioned at its end.
fn open_rolled(
    output: &EpochState,
    header: Option<&Arc<[u8]>>,
) -> Result<(u64, PathBuf, File), SinkError> {
    let path = &output.path;
    let header_len = header.map_or(0, |h| h.len() as u64);
    let (r, rolled) = match find_rolled(path)? {
        Some((r, rolled)) if r > 0 => (r, rolled),
        // Part 0 is the header alone: written afresh, since a crash may have cut it short.
        _ => {
            let rolled = rolled_path(path, 0);
            let mut f = File::create(&rolled).map_err(|source| SinkError::Create {
                path: rolled.clone(),
                source,
            })?;
            if let Some(h) = header {
                f.write_all(h).map_err(io_error(&rolled))?;
            }
            (0, rolled)
        }
    };
    if r > output.parts {
        return Err(fault(
            path,
            format!(
                "{} holds {r} parts, more than the {} of the snapshot",
                rolled.display(),
                output.parts
            ),
        ));
    }
    let loose = loose_len(path, r + 1, output.parts)?;
    let f = File::options()
        .append(true)
        .open(&rolled)
        .map_err(io_error(&rolled))?;
    let len = f.metadata().map_err(io_error(&rolled))?.len();
    let Some(expected) = (header_len + output.bytes)
        .checked_sub(loose)
        .filter(|&e| e <= len)
    else {
        return Err(fault(
            path,
            format!(
                "the committed output of {} holds {} bytes ({} rolled, {loose} in parts), the snapshot says {}",
                path.display(),
                len.saturating_sub(header_len) + loose,
                len.saturating_sub(header_len),
                output.bytes
            ),
        ));
    };
    f.set_len(expected).map_err(io_error(&rolled))?;
    Ok((r, rolled, f))
}

/// Appends committed parts `r+1..=output.parts` to the open rolled file and syncs it.
fn append_parts(output: &EpochState, r: u64, rolled: &Path, f: &mut File) -> Result<(), SinkError> {
    for n in r + 1..=output.parts {
        let part = part_path(&output.path, n);
        let mut input = File::open(&part).map_err(io_error(&part))?;
        io::copy(&mut input, f).map_err(io_error(rolled))?;
    }
    f.sync_all().map_err(io_error(rolled))
}

/// Phase 2, after `output`'s parts were published: rolls the committed parts into the rolled
/// file once [`ROLL_AT`] lie loose. See the [module docs](self).
pub(crate) fn roll(output: &EpochState, header: Option<&Arc<[u8]>>) -> Result<(), SinkError> {
    let held = find_rolled(&output.path)?.map_or(0, |(r, _)| r);
    if output.parts.saturating_sub(held) < ROLL_AT {
        return Ok(());
    }
    let (r, rolled, mut f) = open_rolled(output, header)?;
    append_parts(output, r, &rolled, &mut f)?;
    drop(f);
    let to = rolled_path(&output.path, output.parts);
    fs::rename(&rolled, &to).map_err(|source| SinkError::Rename {
        from: rolled.clone(),
        to: to.clone(),
        source,
    })?;
    sync_dir(parent(&output.path))?;
    weir_core::snapshot::crash::step("sink-rolled");
    remove_parts_through(&output.path, output.parts)
}

/// After a restore to `output` (a snapshot's state): parts numbered after it are removed,
/// prepared parts it holds are renamed into place, and the rolled file is cut back to the
/// snapshot's output (renamed to the snapshot's last part if it held more). Idempotent.
pub(crate) fn restore(output: &EpochState, header: Option<&Arc<[u8]>>) -> Result<(), SinkError> {
    let path = &output.path;
    remove_parts_from(path, output.parts + 1)?;
    let prepared: Vec<(PathBuf, u64)> = part_files(path)?
        .into_iter()
        .filter(|p| p.prepared && p.number <= output.parts)
        .map(|p| (path.clone(), p.number))
        .collect();
    publish(&prepared)?;
    let Some((r, rolled)) = find_rolled(path)? else {
        return Ok(());
    };
    if r > output.parts {
        // An older snapshot than the rolled file's: its output is a prefix of it.
        let expected = header.map_or(0, |h| h.len() as u64) + output.bytes;
        let f = File::options()
            .write(true)
            .open(&rolled)
            .map_err(io_error(&rolled))?;
        let len = f.metadata().map_err(io_error(&rolled))?.len();
        if len < expected {
            return Err(fault(
                path,
                format!(
                    "{} holds {len} bytes, the snapshot's output {expected}",
                    rolled.display()
                ),
            ));
        }
        f.set_len(expected).map_err(io_error(&rolled))?;
        f.sync_all().map_err(io_error(&rolled))?;
        drop(f);
        let to = rolled_path(path, output.parts);
        fs::rename(&rolled, &to).map_err(|source| SinkError::Rename {
            from: rolled.clone(),
            to,
            source,
        })?;
        sync_dir(parent(path))?;
        return remove_parts_through(path, output.parts);
    }
    // Parts the rolled file holds may be left from a roll that stopped before removing them.
    remove_parts_through(path, r)?;
    let (_, _, f) = open_rolled(output, header)?;
    f.sync_all().map_err(io_error(&rolled))
}

/// The end: rolls the remaining parts of `output` and renames the rolled file to the output
/// file, then removes the parts. Done again after a crash, it finds `FILE` in place and
/// checks its length. See the [module docs](self).
pub(crate) fn join(output: &EpochState, header: Option<&Arc<[u8]>>) -> Result<(), SinkError> {
    let path = &output.path;
    let joined_len = header.map_or(0, |h| h.len() as u64) + output.bytes;
    // Without a rolled file there are fewer than `ROLL_AT` parts, unless a join renamed it.
    let unrolled = find_rolled(path)?.is_none();
    if unrolled && !(1..=output.parts).all(|n| part_path(path, n).exists()) {
        // A join renamed the rolled file into place and may have removed parts: `FILE`
        // must be that join's.
        if fs::metadata(path).is_ok_and(|m| m.len() == joined_len) {
            return remove_parts_through(path, output.parts);
        }
        let missing = (1..=output.parts)
            .find(|&n| !part_path(path, n).exists())
            .unwrap_or(1);
        return Err(fault(
            path,
            format!(
                "committed part {} is missing, and {} is not the join of the parts",
                part_path(path, missing).display(),
                path.display()
            ),
        ));
    }
    let (r, rolled, mut f) = open_rolled(output, header)?;
    append_parts(output, r, &rolled, &mut f)?;
    let len = f.metadata().map_err(io_error(&rolled))?.len();
    if len != joined_len {
        return Err(fault(
            path,
            format!(
                "the committed output of {} is {len} bytes, the snapshot says {joined_len}",
                path.display()
            ),
        ));
    }
    drop(f);
    fs::rename(&rolled, path).map_err(|source| SinkError::Rename {
        from: rolled.clone(),
        to: path.to_owned(),
        source,
    })?;
    sync_dir(parent(path))?;
    weir_core::snapshot::crash::step("sink-joined");
    remove_parts_through(path, output.parts)
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
        join(&state, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "h\na\nb\n");
        // A crash after the rename, before the parts were removed: joining again keeps the
        // file.
        fs::write(part_path(&out, 2), "b\n").unwrap();
        join(&state, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "h\na\nb\n");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        // Missing parts without the file: an error naming the part.
        fs::remove_file(&out).unwrap();
        fs::write(part_path(&out, 2), "b\n").unwrap();
        let err = join(&state, None).unwrap_err();
        assert!(err.to_string().contains("part-00000001"), "{err}");
    }

    #[test]
    fn join_refuses_a_lost_part_beside_an_older_file_and_a_short_part() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let state = EpochState {
            path: out.clone(),
            parts: 2,
            bytes: 6,
        };
        // Part 1 lost (its name never reached the disk), and an output of an earlier run:
        // not proof of a join.
        fs::write(&out, "an older output\n").unwrap();
        fs::write(part_path(&out, 2), "two\n").unwrap();
        let err = join(&state, None).unwrap_err().to_string();
        assert!(
            err.contains("part-00000001") && err.contains("not the join"),
            "{err}"
        );
        assert_eq!(fs::read_to_string(&out).unwrap(), "an older output\n");
        // Every part there, one short.
        fs::write(part_path(&out, 1), "1").unwrap();
        let err = join(&state, None).unwrap_err().to_string();
        assert!(err.contains("5 bytes") && err.contains("says 6"), "{err}");
        fs::write(part_path(&out, 1), "1\n").unwrap();
        join(&state, None).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "1\ntwo\n");
    }

    /// Writes parts `from..=to` of `out` as committed, part n holding `n\n`; returns the
    /// state after `to` with `bytes` of all parts from 1.
    fn commit_parts(out: &Path, from: u64, to: u64) -> EpochState {
        for n in from..=to {
            fs::write(part_path(out, n), format!("{n}\n")).unwrap();
        }
        let bytes = (1..=to).map(|n| format!("{n}\n").len() as u64).sum();
        EpochState {
            path: out.to_owned(),
            parts: to,
            bytes,
        }
    }

    fn expected(header: &str, to: u64) -> String {
        header.to_owned() + &(1..=to).map(|n| format!("{n}\n")).collect::<String>()
    }

    fn files(dir: &Path) -> usize {
        fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn committed_parts_are_rolled_so_a_long_job_keeps_few_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.csv");
        let header: Arc<[u8]> = Arc::from(&b"n\n"[..]);
        let mut most = 0;
        for to in 1..=1000 {
            let state = commit_parts(&out, to, to);
            roll(&state, Some(&header)).unwrap();
            most = most.max(files(dir.path()));
        }
        assert!(most <= ROLL_AT as usize + 1, "{most} files at most");
        let state = commit_parts(&out, 1001, 1000);
        join(&state, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), expected("n\n", 1000));
        assert_eq!(files(dir.path()), 1);
    }

    #[test]
    fn a_restore_cuts_the_rolled_file_back_to_the_snapshots_output() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let header: Arc<[u8]> = Arc::from(&b"h\n"[..]);
        // Rolled through part 40 (twice), then parts 41..45 loose.
        let at_20 = commit_parts(&out, 1, 20);
        roll(&at_20, Some(&header)).unwrap();
        let at_40 = commit_parts(&out, 21, 40);
        roll(&at_40, Some(&header)).unwrap();
        let at_45 = commit_parts(&out, 41, 45);
        // A crashed roll appended parts 41..45 but was not renamed.
        let mut rolled = File::options()
            .append(true)
            .open(rolled_path(&out, 40))
            .unwrap();
        rolled.write_all(b"41\n42\n").unwrap();
        drop(rolled);
        // A prepared part 46 that no snapshot holds.
        fs::write(part_tmp(&out, 46), "46\n").unwrap();
        restore(&at_45, Some(&header)).unwrap();
        restore(&at_45, Some(&header)).unwrap();
        join(&at_45, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), expected("h\n", 45));
        assert_eq!(files(dir.path()), 1);
        // Restoring an older snapshot than the rolled file: its output is cut to that one's.
        fs::remove_file(&out).unwrap();
        commit_parts(&out, 1, 40);
        let mut at_50 = commit_parts(&out, 1, 50);
        roll(&at_50, Some(&header)).unwrap();
        at_50.parts = 50;
        restore(&at_20, Some(&header)).unwrap();
        assert!(rolled_path(&out, 20).exists());
        let at_22 = commit_parts(&out, 21, 22);
        join(&at_22, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), expected("h\n", 22));
    }

    #[test]
    fn a_rolled_file_cut_short_while_its_header_was_written_is_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.csv");
        let header: Arc<[u8]> = Arc::from(&b"a,b\n"[..]);
        // Killed after creating the rolled file, before its header: an empty file.
        File::create(rolled_path(&out, 0)).unwrap();
        let state = commit_parts(&out, 1, 3);
        restore(&state, Some(&header)).unwrap();
        join(&state, Some(&header)).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), expected("a,b\n", 3));
    }

    #[test]
    fn a_fresh_start_removes_the_rolled_file_and_every_part() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let state = commit_parts(&out, 1, 20);
        roll(&state, None).unwrap();
        commit_parts(&out, 21, 23);
        fs::write(part_tmp(&out, 24), "24\n").unwrap();
        remove_all(&out).unwrap();
        assert_eq!(files(dir.path()), 0);
    }
}
