//! PutFile: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, eval, props};
use std::borrow::Cow;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{CommitRefused, Completion, Session, SessionError};
use weir_flow_disk::faults::{self, Step};

/// The PutFile type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(PutFile::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "PutFile",
    description: "Writes each flow file's content to a file in a directory; files appear (renamed from temporary ones) when the session, in a stateless group the transaction, commits.",
    properties: &[
        p("Directory", true, None, K::Expression).about(
            "The directory to write into, evaluated per flow file; the file is named by the `filename` attribute.",
        ),
        p(
            "Conflict Resolution Strategy",
            true,
            Some("fail"),
            K::Choice(&["replace", "ignore", "fail"]),
        ).about(
            "When a file of that name exists: `replace` it, `ignore` the flow file (to success, unwritten) or `fail` it (to failure, penalized).",
        ),
        p("Create Missing Directories", true, Some("true"), K::Bool).about(
            "Create the directory and its parents when missing; `false` sends flow files for a missing directory to failure.",
        ),
        p("Sync", false, None, K::Bool).about(
            "Sync each file and its directory to disk before its flow file moves on, so that the output survives a power loss; unset, `true` in flows with `sync: always` and `false` otherwise.",
        ),
    ],
    relationships: &["success", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

#[derive(Clone, Copy, PartialEq)]
enum Conflict {
    Replace,
    Ignore,
    Fail,
}

/// PutFile: writes content to `Directory/filename` (SEND), through a temporary file and a
/// rename so that a reader never sees half a file. With `Sync` (the default in flows with
/// `sync: always`) the file is synced before the rename and its directory after it, so a
/// flow file is dropped only once its output survives a power loss; each costs an `fsync`
/// (one per directory per trigger for the renames).
pub struct PutFile {
    dir: Template,
    conflict: Conflict,
    create_dirs: bool,
    sync: bool,
}

impl PutFile {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let conflict = match props::text(c, "Conflict Resolution Strategy").as_str() {
            "replace" => Conflict::Replace,
            "ignore" => Conflict::Ignore,
            _ => Conflict::Fail,
        };
        Ok(PutFile {
            dir: props::template(c, "Directory")?,
            conflict,
            create_dirs: props::boolean(c, "Create Missing Directories"),
            sync: props::boolean(c, "Sync"),
        })
    }
}

impl Processor for PutFile {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(100)?;
        // Written to their temporary files: (flow file, temporary, target, directory, file).
        let mut pending = Vec::with_capacity(ffs.len());
        for &ff in &ffs {
            let Ok(dir) = eval(&self.dir, session, ff).map(std::borrow::Cow::into_owned) else {
                session.penalize(ff);
                session.transfer(ff, "failure")?;
                continue;
            };
            let name = session
                .attribute(ff, "filename")
                .map_or_else(|| "unnamed".to_string(), Cow::into_owned);
            if name.contains('/') || name == ".." {
                session.transfer(ff, "failure")?;
                continue;
            }
            // `.` components dropped: `create_dir_all("out/./")` fails while `out` is
            // missing, and `Directory: out/${path}` gives one for a file at the top
            // (`path` is `./`).
            let dir: PathBuf = std::path::Path::new(dir.as_str()).components().collect();
            let target = dir.join(&name);
            if self.create_dirs
                && let Err(e) = fs::create_dir_all(&dir)
            {
                tracing::warn!("PutFile: cannot create {}: {e}", dir.display());
                session.penalize(ff);
                session.transfer(ff, "failure")?;
                continue;
            }
            if target.exists() {
                match self.conflict {
                    Conflict::Ignore => {
                        session.transfer(ff, "success")?;
                        continue;
                    }
                    Conflict::Fail => {
                        session.penalize(ff);
                        session.transfer(ff, "failure")?;
                        continue;
                    }
                    Conflict::Replace => {}
                }
            }
            // Named by the flow file, so that two of one name in a batch do not meet, and a
            // flow file written again after a crash reuses (and renames) its own.
            let tmp = dir.join(format!(".{name}.{}.tmp", session.flowfile(ff).uuid()));
            // Claim to output in the kernel; synced and renamed below, all together.
            let written = faults::create(&tmp)
                .map_err(SessionError::from)
                .and_then(|mut out| {
                    faults::step(Step::Write, &tmp, || {
                        session.export(ff, &mut out).map_err(std::io::Error::other)
                    })?;
                    Ok(Arc::new(out))
                });
            match written {
                Ok(out) => pending.push((ff, tmp, target, dir, out)),
                Err(e) => {
                    tracing::warn!("PutFile: cannot write {}: {e}", target.display());
                    let _ = fs::remove_file(&tmp);
                    session.penalize(ff);
                    session.transfer(ff, "failure")?;
                }
            }
        }
        if self.sync {
            // Every file of the batch synced at once: the disk sees the writes together.
            let files: Vec<(PathBuf, Arc<fs::File>)> = pending
                .iter()
                .map(|(_, tmp, _, _, out)| (tmp.clone(), Arc::clone(out)))
                .collect();
            if let Err(e) = weir_flow_disk::sync_together(&files) {
                for (_, tmp, ..) in &pending {
                    let _ = fs::remove_file(tmp);
                }
                return Err(ProcessError::Other(format!(
                    "cannot sync PutFile's output: {e}"
                )));
            }
        }
        // The renames wait for the session's commit (in a stateless group, the whole
        // transaction's): a flow file rolled back after this trigger (a later processor of
        // the group failed) leaves no output behind to be written again with it.
        let mut renames: Vec<(PathBuf, PathBuf)> = Vec::with_capacity(pending.len());
        let mut dirs: Vec<PathBuf> = Vec::new();
        for (ff, tmp, target, dir, _) in pending {
            session.report(ff, EventType::SEND, Some(crate::file_uri(&target)), None);
            session.transfer(ff, "success")?;
            if self.sync && !dirs.contains(&dir) {
                dirs.push(dir);
            }
            renames.push((tmp, target));
        }
        if !renames.is_empty() {
            // What the commit step renamed, taken back if the commit then fails (its frame
            // could not be written: a full disk): the flow files come again and are written
            // again, once.
            // A rollback before that leaves only temporary files, which go too.
            let placed: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
            let record = Arc::clone(&placed);
            let temporaries: Vec<PathBuf> = renames.iter().map(|(tmp, _)| tmp.clone()).collect();
            session.before_commit(move || rename_into_place(renames, &dirs, &record));
            session.on_complete(move |completion| {
                if matches!(completion, Completion::RolledBack { .. }) {
                    let placed =
                        std::mem::take(&mut *placed.lock().unwrap_or_else(|p| p.into_inner()));
                    for file in temporaries.iter().chain(&placed) {
                        let _ = fs::remove_file(file);
                    }
                }
            });
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

/// PutFile's commit step: renames each temporary file to its target (noting it in
/// `placed`, for a commit that fails after it), then syncs each directory in `dirs` once (the
/// renames may not survive a power loss otherwise: the session then rolls back and its flow
/// files come again). A failure leaves the rest unrenamed (their temporary files are removed)
/// and rolls the session back.
fn rename_into_place(
    renames: Vec<(PathBuf, PathBuf)>,
    dirs: &[PathBuf],
    placed: &Mutex<Vec<PathBuf>>,
) -> Result<(), CommitRefused> {
    let mut renames = renames.into_iter();
    while let Some((tmp, target)) = renames.next() {
        if let Err(e) = faults::rename(&tmp, &target) {
            let _ = fs::remove_file(&tmp);
            for (tmp, _) in renames {
                let _ = fs::remove_file(&tmp);
            }
            return Err(CommitRefused::new(
                format!("PutFile: cannot write {}", target.display()),
                e,
            ));
        }
        placed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(target);
    }
    for dir in dirs {
        weir_flow_disk::sync_dir(dir).map_err(|e| {
            CommitRefused::new(
                format!("PutFile: cannot sync directory {}", dir.display()),
                e,
            )
        })?;
    }
    Ok(())
}
