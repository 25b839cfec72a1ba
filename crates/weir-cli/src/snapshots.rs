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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use weir::core::snapshot::{
    Guarantee, LocalDirStore, Manifest, SnapshotConfig, SnapshotStore, verify,
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
    dir: PathBuf,
    config: SnapshotConfig,
    on_input_change: OnInputChange,
}

impl SnapshotArgs {
    /// The snapshot settings, or `None` without `--state-dir` (or with `--guarantee none`).
    pub fn snapshots(&self) -> Option<Snapshots> {
        let dir = self.state_dir.clone()?;
        if self.guarantee == Guarantee::None {
            return None;
        }
        let store = Arc::new(LocalDirStore::new(&dir));
        let interval =
            Duration::from_millis(self.snapshot_interval_ms.unwrap_or(DEFAULT_INTERVAL_MS));
        let config = SnapshotConfig::new(
            Arc::clone(&store) as Arc<dyn SnapshotStore>,
            interval,
            self.guarantee,
        );
        Some(Snapshots {
            store,
            dir,
            config,
            on_input_change: self.on_input_change,
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
        if let Some(s) = snapshots {
            config.snapshots = Some(s.config.clone());
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
        Ok(job)
    }

    /// After a successful run of `job` (its name; `what` names it in the error): removes
    /// its snapshots, so that the next run of the same command starts afresh. Nothing
    /// without snapshots.
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
/// duration, and each vertex's parts. Each is checked (its parts read back and their
/// checksums verified) and flagged `ok` or `damaged`, with the file at fault.
pub fn list(args: &ListArgs) -> anyhow::Result<()> {
    if !args.state_dir.is_dir() {
        anyhow::bail!(
            "--state-dir {} is not a directory",
            args.state_dir.display()
        );
    }
    let store = LocalDirStore::new(&args.state_dir);
    let jobs = store.jobs().context("cannot list the state directory")?;
    if jobs.is_empty() {
        outln!("no snapshots in {}", args.state_dir.display())?;
    }
    for job in jobs {
        outln!("job {job}")?;
        for id in store.ids(&job)? {
            let path = store.location(&job, id, "manifest");
            let manifest = match store.read_manifest(&job, id)? {
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
            let health = match verify(&store, &job, id) {
                Ok(_) => "ok".to_string(),
                Err(e) => format!("DAMAGED: {e}"),
            };
            outln!(
                "  snapshot {id}: taken {}, {} bytes, {} ms (alignment {} ms), {}{}; {health}",
                utc(manifest.taken_at_ms),
                manifest.bytes(),
                manifest.duration_ms,
                manifest.alignment_ms,
                manifest.guarantee,
                if manifest.terminal { ", terminal" } else { "" },
            )?;
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
