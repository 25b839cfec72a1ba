//! The snapshot flags shared by the commands that run jobs, and `weir snapshots list`.
//!
//! ```text
//! weir nexmark run --query q5 --input events.jsonl --output q5.csv --state-dir state
//! weir snapshots list --state-dir state
//! ```
//!
//! With `--state-dir`, a job snapshots its state into `DIR/snapshots/<job>/` every
//! `--snapshot-interval-ms` (1000 by default). Its name is derived from the command (the query
//! and the input for `weir nexmark run`, the input and the output for `weir score`), so running
//! the same command again after a crash resumes from the newest
//! complete snapshot; after a successful run its snapshots are removed, so the next run starts
//! afresh.
//!
//! **Savepoints**, as Flink's: with `--savepoint`, SIGINT or SIGTERM takes a snapshot at once,
//! keeps a copy in `DIR/savepoints/<job>/<id>/` (which no run removes) and stops the job; the
//! same command resumes from it. `--restore-from ID|PATH` starts from a chosen snapshot or
//! savepoint instead of the newest: the job's other snapshots are removed first, so a crash
//! later resumes on that line of history. `weir snapshots list` marks savepoints.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use weir::core::snapshot::{
    Guarantee, LocalDirStore, Manifest, SnapshotConfig, SnapshotStore, copy_snapshot, verify,
};
use weir::sources::files::input_change;
use weir::{Executor, Job, JobConfig, Pipeline};

/// The default time between snapshots.
const DEFAULT_INTERVAL_MS: u64 = 1000;

/// `--state-dir`, `--snapshot-interval-ms` and `--guarantee`.
#[derive(Debug, Clone, Args)]
pub struct SnapshotArgs {
    /// Take snapshots of the job's state into this directory, and resume from the newest
    /// complete one when the same command runs again (after a crash or kill).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Time between snapshots, in ms [default: 1000 with --state-dir].
    #[arg(long, value_name = "N", requires = "state_dir",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub snapshot_interval_ms: Option<u64>,
    /// What a resumed job guarantees: exactly-once, at-least-once, or none (no snapshots).
    #[arg(long, value_name = "G", default_value = "exactly-once", requires = "state_dir",
          value_parser = parse_guarantee)]
    pub guarantee: Guarantee,
    /// When an input file changed since the snapshot a rerun would resume from: `refuse`
    /// the run, naming the file, or `restart` the job from the beginning (its snapshots are
    /// removed).
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = OnInputChange::Refuse,
          requires = "state_dir")]
    pub on_input_change: OnInputChange,
    /// On SIGINT or SIGTERM, take a savepoint (a snapshot kept in DIR/savepoints) and stop;
    /// the same command resumes from it. A second signal exits at once.
    #[arg(long, requires = "state_dir")]
    pub savepoint: bool,
    /// Start from this snapshot or savepoint instead of the newest: its id (as `weir
    /// snapshots list` shows it) or its folder. The job's other snapshots are removed.
    #[arg(long, value_name = "ID|PATH", requires = "state_dir")]
    pub restore_from: Option<String>,
}

/// What a rerun does when its input changed since its newest snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnInputChange {
    /// Refuse to run, naming the file that changed.
    Refuse,
    /// Remove the job's snapshots and start from the beginning.
    Restart,
}

fn parse_guarantee(s: &str) -> Result<Guarantee, String> {
    s.parse()
}

/// A job's snapshot settings and where they live, from the command line.
#[derive(Debug, Clone)]
pub struct Snapshots {
    store: Arc<LocalDirStore>,
    savepoints: Arc<LocalDirStore>,
    dir: PathBuf,
    config: SnapshotConfig,
    on_input_change: OnInputChange,
    savepoint_on_signal: bool,
    restore_from: Option<String>,
    /// With `--savepoint`: the signal watcher of the submitted job, for [`Snapshots::join`].
    watcher: Arc<std::sync::Mutex<Option<SavepointOnSignal>>>,
}

/// How a job run by a command ended, when it did not fail.
#[derive(Debug)]
pub enum Ended {
    /// It ran to the end.
    Completed,
    /// A signal stopped it after a savepoint (`--savepoint`); [`Snapshots::join`] said where.
    Stopped,
}

impl SnapshotArgs {
    /// The snapshot settings, or `None` without `--state-dir` (or with `--guarantee none`).
    pub fn snapshots(&self) -> Option<Snapshots> {
        let dir = self.state_dir.clone()?;
        if self.guarantee == Guarantee::None {
            return None;
        }
        let store = Arc::new(LocalDirStore::new(&dir));
        let savepoints = Arc::new(LocalDirStore::savepoints(&dir));
        let interval =
            Duration::from_millis(self.snapshot_interval_ms.unwrap_or(DEFAULT_INTERVAL_MS));
        let config = SnapshotConfig::new(
            Arc::clone(&store) as Arc<dyn SnapshotStore>,
            interval,
            self.guarantee,
        )
        .with_savepoints(Arc::clone(&savepoints) as Arc<dyn SnapshotStore>);
        Some(Snapshots {
            store,
            savepoints,
            dir,
            config,
            on_input_change: self.on_input_change,
            savepoint_on_signal: self.savepoint,
            restore_from: self.restore_from.clone(),
            watcher: Arc::default(),
        })
    }
}

impl Snapshots {
    /// Submits `pipeline` under `config` with these settings, and says on standard error
    /// when the job resumed from a snapshot (`resumed from snapshot 7 in DIR`). When an
    /// input changed since that snapshot, the run is refused, or with `--on-input-change
    /// restart` the job's snapshots are removed and it starts from the beginning.
    ///
    /// # Errors
    /// As [`Pipeline::submit`]: an invalid pipeline, or a snapshot that does not fit it; a
    /// changed input names the file and the way to start over.
    pub fn submit(
        snapshots: Option<&Snapshots>,
        pipeline: &Pipeline,
        executor: &Executor,
        mut config: JobConfig,
    ) -> anyhow::Result<Job> {
        let mut signals = None;
        if let Some(s) = snapshots {
            config.snapshots = Some(s.config.clone());
            if let Some(from) = &s.restore_from {
                s.restore_from(&config.name, from)?;
            }
            // Caught from before the job starts: a signal during its first moments is kept
            // for the watcher, not fatal.
            if s.savepoint_on_signal {
                signals = Some(SavepointOnSignal::catch()?);
            }
        }
        let job = match pipeline.submit(executor, config.clone()) {
            Ok(job) => job,
            Err(e) => {
                let Some((s, change)) = snapshots.zip(input_change(&e).map(ToString::to_string))
                else {
                    return Err(e.into());
                };
                match s.on_input_change {
                    OnInputChange::Refuse => {
                        return Err(anyhow::Error::new(e).context(format!(
                            "{change}; restore the input, or rerun with --on-input-change restart to start the job over"
                        )));
                    }
                    OnInputChange::Restart => {
                        eprintln!("{change}: starting the job over (--on-input-change restart)");
                        s.remove_all(&config.name)?;
                        pipeline.submit(executor, config)?
                    }
                }
            }
        };
        if let (Some(s), Some(id)) = (snapshots, job.restored_from()) {
            eprintln!(
                "resumed from snapshot {id} in {}",
                s.store.location(job.name(), id, "").display()
            );
        }
        if let (Some(s), Some(signals)) = (snapshots, signals) {
            let watcher = SavepointOnSignal::watch(signals, &job)?;
            *s.watcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(watcher);
        }
        Ok(job)
    }

    /// Waits for `job` to end. With `--savepoint`, the first SIGINT or SIGTERM meanwhile
    /// takes a savepoint and stops the job; a second signal exits at once (status 130).
    /// Without it, signals keep their default action. A job stopped with a savepoint (by a
    /// signal or through the REST API) ends [`Ended::Stopped`], saying on standard error where
    /// the savepoint is and how to resume.
    ///
    /// # Errors
    /// The job's error, as [`Job::join`]; a job cancelled without a savepoint is
    /// [`weir::core::Error::Cancelled`].
    pub fn join(snapshots: Option<&Snapshots>, job: Job) -> anyhow::Result<Ended> {
        let watcher =
            snapshots.and_then(|s| s.watcher.lock().unwrap_or_else(|e| e.into_inner()).take());
        let monitor = job.monitor();
        let outcome = job.join();
        if let Some(watcher) = watcher {
            watcher.finish();
        }
        // A signal (`--savepoint`) or the REST API's stop may have taken it.
        match (outcome, monitor.stopped_with_savepoint()) {
            (Ok(()), _) => Ok(Ended::Completed),
            (Err(weir::core::Error::Cancelled), Some(savepoint)) => {
                eprintln!(
                    "stopped with savepoint {} in {}; run the same command to resume from it (or add --restore-from {} to go back to it later)",
                    savepoint.id,
                    savepoint.location.display(),
                    savepoint.id,
                );
                Ok(Ended::Stopped)
            }
            (Err(e), _) => Err(e.into()),
        }
    }

    /// Makes snapshot `from` (an id of this job's snapshots or savepoints, or a snapshot
    /// folder) the one `job` resumes from: the job's other snapshots are removed and the
    /// chosen one copied in when it lives elsewhere. Nothing is removed before the chosen
    /// snapshot checks out.
    fn restore_from(&self, job: &str, from: &str) -> anyhow::Result<()> {
        let (source, source_job, id) = self.resolve(job, from)?;
        verify(&source, &source_job, id)
            .with_context(|| format!("--restore-from {from}: the snapshot is damaged"))?
            .with_context(|| {
                format!("--restore-from {from}: the snapshot is incomplete (it has no manifest)")
            })?;
        let here = |store: &LocalDirStore, job: &str| {
            let dir = store.location(job, id, "");
            std::fs::canonicalize(&dir).unwrap_or(dir)
        };
        let in_place = here(&source, &source_job) == here(&self.store, job);
        for other in self.store.ids(job)? {
            if !(in_place && other == id) {
                self.store
                    .remove(job, other)
                    .with_context(|| format!("cannot remove snapshot {other} of {job}"))?;
            }
        }
        if !in_place {
            copy_snapshot(&source, &source_job, id, &*self.store, job).with_context(|| {
                format!("--restore-from {from}: cannot copy the snapshot into place")
            })?;
        }
        eprintln!(
            "restoring from snapshot {id} of {}",
            source.location(&source_job, id, "").display()
        );
        Ok(())
    }

    /// The store, job folder and id that `--restore-from` names: an id of this job's
    /// savepoints (first) or snapshots, or a snapshot folder.
    fn resolve(&self, job: &str, from: &str) -> anyhow::Result<(LocalDirStore, String, u64)> {
        if let Ok(id) = from.parse::<u64>() {
            for store in [&self.savepoints, &self.store] {
                if store.read_manifest(job, id)?.is_some() {
                    return Ok(((**store).clone(), job.to_string(), id));
                }
            }
            anyhow::bail!(
                "--restore-from {id}: this job has no complete snapshot or savepoint {id} in {}; `weir snapshots list --state-dir {}` shows them",
                self.dir.display(),
                self.dir.display()
            );
        }
        let path = Path::new(from);
        let folder = if path.file_name().is_some_and(|n| n == "manifest") {
            path.parent().unwrap_or(path)
        } else {
            path
        };
        let folder = std::fs::canonicalize(folder)
            .with_context(|| format!("--restore-from {from}: no such snapshot folder"))?;
        LocalDirStore::at(&folder).with_context(|| {
            format!(
                "--restore-from {from}: not a snapshot folder (DIR/snapshots/JOB/ID or DIR/savepoints/JOB/ID)"
            )
        })
    }

    /// After a successful run of `job` (its name; `what` names it in the error): removes
    /// its snapshots, so that the next run of the same command starts afresh; savepoints
    /// stay. Nothing without snapshots.
    ///
    /// # Errors
    /// A snapshot could not be listed or removed.
    pub fn finished(snapshots: Option<&Snapshots>, job: &str, what: &str) -> anyhow::Result<()> {
        let Some(s) = snapshots else {
            return Ok(());
        };
        s.remove_all(job).with_context(|| {
            format!(
                "{what} succeeded, but its snapshots in {} remain",
                s.dir.display()
            )
        })
    }

    fn remove_all(&self, job: &str) -> anyhow::Result<()> {
        let ids = self
            .store
            .ids(job)
            .context("cannot list the job's snapshots")?;
        for id in ids {
            self.store
                .remove(job, id)
                .with_context(|| format!("cannot remove snapshot {id} of {job}"))?;
        }
        // The job's now empty folder: best effort.
        if let Some(folder) = self.store.location(job, 0, "").parent() {
            let _ = std::fs::remove_dir(folder);
        }
        Ok(())
    }
}

/// The signal watcher of `--savepoint`: a thread that takes the savepoint on the first
/// signal and exits the process on the second.
struct SavepointOnSignal {
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

impl std::fmt::Debug for SavepointOnSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SavepointOnSignal")
    }
}

impl SavepointOnSignal {
    /// Catches SIGINT and SIGTERM from now on (they no longer end the process).
    fn catch() -> anyhow::Result<signal_hook::iterator::Signals> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .context("installing a signal handler")
    }

    /// Watches the caught `signals` on behalf of `job`.
    fn watch(
        mut signals: signal_hook::iterator::Signals,
        job: &Job,
    ) -> anyhow::Result<SavepointOnSignal> {
        let handle = signals.handle();
        let monitor = job.monitor();
        let thread = std::thread::Builder::new()
            .name("weir-savepoint".into())
            .spawn(move || {
                let mut taking: Option<std::thread::JoinHandle<_>> = None;
                for _ in signals.forever() {
                    if taking.is_some() {
                        eprintln!("second signal: exiting without waiting for the savepoint");
                        std::process::exit(130);
                    }
                    eprintln!("taking a savepoint, then stopping (a second signal exits at once)");
                    let monitor = monitor.clone();
                    taking = Some(std::thread::spawn(move || {
                        if let Err(e) = monitor.stop_with_savepoint() {
                            eprintln!("no savepoint: {e}");
                        }
                    }));
                }
                if let Some(t) = taking {
                    let _ = t.join();
                }
            })
            .context("starting the signal watcher")?;
        Ok(SavepointOnSignal { handle, thread })
    }

    /// Stops watching: the job ended.
    fn finish(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}

/// A job name from the parts of a command that decide its state: the same command gives
/// the same name, so a rerun finds its snapshots.
pub fn job_name(command: &str, parts: &[String]) -> String {
    let mut name = command.to_string();
    for p in parts {
        name.push('-');
        name.push_str(p);
    }
    name
}

/// A path as it goes into a job name: absolute when it can be made so, so that the same
/// file named from another directory is the same job. A file that does not exist yet (an
/// output) is named by its folder's absolute path, so its name is the same before and after
/// it is written.
pub fn path_part(path: &Path) -> String {
    let absolute = std::fs::canonicalize(path).ok().or_else(|| {
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(folder).ok()?.join(path.file_name()?))
    });
    absolute
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

/// Arguments of `weir snapshots list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The state directory the jobs ran with.
    #[arg(long, value_name = "DIR")]
    pub state_dir: PathBuf,
}

/// `weir snapshots list`: every job's snapshots, newest first, with their id, time, size and
/// duration, and each vertex's parts; then the savepoints kept in `DIR/savepoints`. Each is
/// checked (its parts read back and their checksums verified) and flagged `ok` or `damaged`,
/// with the file at fault; a snapshot taken as a savepoint says `savepoint`.
pub fn list(args: &ListArgs) -> anyhow::Result<()> {
    if !args.state_dir.is_dir() {
        anyhow::bail!(
            "--state-dir {} is not a directory",
            args.state_dir.display()
        );
    }
    let stores = [
        ("job", LocalDirStore::new(&args.state_dir)),
        (
            "savepoints of job",
            LocalDirStore::savepoints(&args.state_dir),
        ),
    ];
    let mut any = false;
    for (title, store) in &stores {
        let jobs = store.jobs().context("cannot list the state directory")?;
        any |= !jobs.is_empty();
        for job in jobs {
            outln!("{title} {job}")?;
            list_job(store, &job)?;
        }
    }
    if !any {
        outln!("no snapshots in {}", args.state_dir.display())?;
    }
    Ok(())
}

/// Lists the snapshots of `job` in `store`, newest first.
fn list_job(store: &LocalDirStore, job: &str) -> anyhow::Result<()> {
    for id in store.ids(job)? {
        let path = store.location(job, id, "manifest");
        let manifest = match store.read_manifest(job, id)? {
            None => {
                outln!("  snapshot {id}: incomplete (no manifest)")?;
                continue;
            }
            Some(bytes) => match Manifest::decode(&path, &bytes) {
                Ok(m) => m,
                Err(e) => {
                    outln!("  snapshot {id}: damaged: {e}")?;
                    continue;
                }
            },
        };
        let health = match verify(store, job, id) {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("DAMAGED: {e}"),
        };
        outln!(
            "  snapshot {id}: taken {}, {} bytes, {} ms (alignment {} ms), {}{}{}; {health}",
            utc(manifest.taken_at_ms),
            manifest.bytes(),
            manifest.duration_ms,
            manifest.alignment_ms,
            manifest.guarantee,
            if manifest.terminal { ", terminal" } else { "" },
            if manifest.savepoint {
                ", savepoint"
            } else {
                ""
            },
        )?;
        if manifest.savepoint {
            outln!("    in {}", store.location(job, id, "").display())?;
        }
        for v in &manifest.vertices {
            let bytes: u64 = v.parts.iter().map(|p| p.bytes).sum();
            let entries: u64 = v.parts.iter().map(|p| p.entries).sum();
            outln!(
                "    {}: {} instances, {bytes} bytes, {entries} entries",
                v.name,
                v.parallelism
            )?;
        }
    }
    Ok(())
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`.
fn utc(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || format!("{ms} ms after the epoch"),
            |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_named_alike_before_and_after_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.csv");
        let before = path_part(&file);
        std::fs::write(&file, "").unwrap();
        assert_eq!(path_part(&file), before);
        assert!(Path::new(&before).is_absolute(), "{before}");
        assert_eq!(path_part(Path::new("/nonexistent/x/y")), "/nonexistent/x/y");
    }

    #[test]
    fn snapshot_times_are_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(utc(1_436_918_400_002), "2015-07-15 00:00:00.002 UTC");
    }
}
