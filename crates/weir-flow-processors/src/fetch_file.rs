//! FetchFile: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuildError, ProcessError, Processor, Trigger, eval, props};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{Completion, FileIdentity, FlowFileRef, Session};

/// The FetchFile type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(FetchFile::new(c)?)),
};

const LOG_LEVELS: &[&str] = &["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "NONE"];

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "FetchFile",
    description: "Replaces each flow file's content with a file's (the one ListFile listed, by default), then optionally moves or deletes the file once the commit holding its content is durable.",
    properties: &[
        p("File to Fetch", true, Some("${absolute.path}/${filename}"), K::Expression)
            .about("The path of the file to read, evaluated per flow file."),
        p(
            "Completion Strategy",
            true,
            Some("None"),
            K::Choice(&["None", "Move File", "Delete File"]),
        )
        .about("What becomes of the file once its content is safely in the flow: left, moved to the Move Destination Directory, or deleted."),
        p("Move Destination Directory", false, None, K::Expression)
            .about("Where Move File moves the file (created when missing), evaluated per flow file."),
        p(
            "Move Conflict Strategy",
            true,
            Some("Rename"),
            K::Choice(&["Rename", "Replace File", "Keep Existing", "Fail"]),
        )
        .about("When the destination already holds a file of that name: move under a new unique name, replace it, delete the fetched file and keep it, or route the flow file to failure without fetching."),
        p(
            "Log level when file not found",
            true,
            Some("ERROR"),
            K::Choice(LOG_LEVELS),
        )
        .about("The level at which a missing file is logged (NONE: not logged)."),
        p(
            "Log level when permission denied",
            true,
            Some("ERROR"),
            K::Choice(LOG_LEVELS),
        )
        .about("The level at which a file that cannot be read for its permissions is logged (NONE: not logged)."),
    ],
    relationships: &["success", "not.found", "permission.denied", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

#[derive(Debug, Clone, Copy, PartialEq)]
enum CompletionStrategy {
    None,
    Move,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum MoveConflict {
    Rename,
    Replace,
    KeepExisting,
    Fail,
}

/// A log level of NiFi's names (FATAL logs as an error; NONE not at all).
#[derive(Debug, Clone, Copy, PartialEq)]
enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    None,
}

impl LogLevel {
    fn parse(name: &str) -> LogLevel {
        match name.to_ascii_uppercase().as_str() {
            "TRACE" => LogLevel::Trace,
            "DEBUG" => LogLevel::Debug,
            "INFO" => LogLevel::Info,
            "WARN" => LogLevel::Warn,
            "NONE" => LogLevel::None,
            _ => LogLevel::Error,
        }
    }

    fn log(self, message: &str) {
        match self {
            LogLevel::Trace => tracing::trace!("{message}"),
            LogLevel::Debug => tracing::debug!("{message}"),
            LogLevel::Info => tracing::info!("{message}"),
            LogLevel::Warn => tracing::warn!("{message}"),
            LogLevel::Error => tracing::error!("{message}"),
            LogLevel::None => {}
        }
    }
}

/// FetchFile: reads the file `File to Fetch` names into the flow file's content (FETCH),
/// the bytes copied in the kernel. A missing file goes to `not.found`, an unreadable one to
/// `permission.denied`, any other error to `failure` (each penalized). Delete File deletes
/// the file once the commit holding its content is durable, again at recovery after a crash
/// in between, and only while it is still the file that was read. Move File moves it after
/// the commit too (a crash in between leaves it in place, never the content lost); a file
/// replaced since it was read is left alone.
pub struct FetchFile {
    file: Template,
    completion: CompletionStrategy,
    destination: Option<Template>,
    conflict: MoveConflict,
    not_found_level: LogLevel,
    permission_level: LogLevel,
}

/// A file to move once the session commits.
struct PendingMove {
    source: PathBuf,
    identity: FileIdentity,
    directory: PathBuf,
}

impl FetchFile {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let completion = match props::text(c, "Completion Strategy")
            .to_ascii_lowercase()
            .as_str()
        {
            "move file" => CompletionStrategy::Move,
            "delete file" => CompletionStrategy::Delete,
            _ => CompletionStrategy::None,
        };
        let destination = props::opt(c, "Move Destination Directory")
            .filter(|d| !d.trim().is_empty())
            .map(|_| props::template(c, "Move Destination Directory"))
            .transpose()?;
        if completion == CompletionStrategy::Move && destination.is_none() {
            return Err(BuildError::Invalid(
                "Move Destination Directory: required when Completion Strategy is Move File".into(),
            ));
        }
        let conflict = match props::text(c, "Move Conflict Strategy")
            .to_ascii_lowercase()
            .as_str()
        {
            "replace file" => MoveConflict::Replace,
            "keep existing" => MoveConflict::KeepExisting,
            "fail" => MoveConflict::Fail,
            _ => MoveConflict::Rename,
        };
        Ok(FetchFile {
            file: props::template(c, "File to Fetch")?,
            completion,
            destination,
            conflict,
            not_found_level: LogLevel::parse(&props::text(c, "Log level when file not found")),
            permission_level: LogLevel::parse(&props::text(c, "Log level when permission denied")),
        })
    }

    /// Routes `ff` to `relationship`, penalized, logging `why` at `level`.
    fn reject(
        session: &mut dyn Session,
        ff: FlowFileRef,
        relationship: &str,
        level: LogLevel,
        why: String,
    ) -> Result<(), ProcessError> {
        level.log(&format!("FetchFile: {why}; routing to {relationship}"));
        session.penalize(ff);
        session.transfer(ff, relationship)?;
        Ok(())
    }

    /// Fetches one flow file's file; returns the move to make after the commit, if any.
    fn fetch(
        &self,
        session: &mut dyn Session,
        ff: FlowFileRef,
    ) -> Result<Option<PendingMove>, ProcessError> {
        let path = match eval(&self.file, session, ff) {
            Ok(p) => PathBuf::from(p.into_owned()),
            Err(e) => {
                Self::reject(
                    session,
                    ff,
                    "failure",
                    LogLevel::Error,
                    format!("File to Fetch: {e}"),
                )?;
                return Ok(None);
            }
        };
        // The destination is checked before the file is read: a move that cannot happen
        // leaves the file where it is and the flow file at failure.
        let mut directory = None;
        if self.completion == CompletionStrategy::Move
            && let Some(template) = &self.destination
        {
            let dir = match eval(template, session, ff) {
                Ok(d) => PathBuf::from(d.into_owned()),
                Err(e) => {
                    Self::reject(
                        session,
                        ff,
                        "failure",
                        LogLevel::Error,
                        format!("Move Destination Directory: {e}"),
                    )?;
                    return Ok(None);
                }
            };
            if let Err(why) = self.check_destination(&dir, &path) {
                Self::reject(session, ff, "failure", LogLevel::Error, why)?;
                return Ok(None);
            }
            directory = Some(dir);
        }
        let mut file = match fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let why = format!("file {} not found", path.display());
                Self::reject(session, ff, "not.found", self.not_found_level, why)?;
                return Ok(None);
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                let why = format!("cannot read {}: permission denied", path.display());
                Self::reject(session, ff, "permission.denied", self.permission_level, why)?;
                return Ok(None);
            }
            Err(e) => {
                let why = format!("cannot open {}: {e}", path.display());
                Self::reject(session, ff, "failure", LogLevel::Error, why)?;
                return Ok(None);
            }
        };
        let meta = match file.metadata() {
            Ok(m) if m.is_file() => m,
            Ok(_) => {
                let why = format!("{} is not a regular file", path.display());
                Self::reject(session, ff, "failure", LogLevel::Error, why)?;
                return Ok(None);
            }
            Err(e) => {
                let why = format!("cannot read {}: {e}", path.display());
                Self::reject(session, ff, "failure", LogLevel::Error, why)?;
                return Ok(None);
            }
        };
        if let Err(e) = session.write_from(ff, &mut file, meta.len()) {
            let why = format!("cannot read {}: {e}", path.display());
            Self::reject(session, ff, "failure", LogLevel::Error, why)?;
            return Ok(None);
        }
        session.report(ff, EventType::FETCH, Some(crate::file_uri(&path)), None);
        session.transfer(ff, "success")?;
        let identity = FileIdentity::of(&meta);
        Ok(match (self.completion, directory) {
            (CompletionStrategy::Delete, _) => {
                session.delete_source_on_commit(path.display().to_string(), identity);
                None
            }
            (CompletionStrategy::Move, Some(directory)) => Some(PendingMove {
                source: path,
                identity,
                directory,
            }),
            _ => None,
        })
    }

    /// Makes sure `dir` can take `source` (created when missing); `Err` says why not.
    fn check_destination(&self, dir: &Path, source: &Path) -> Result<(), String> {
        match fs::metadata(dir) {
            Ok(m) if !m.is_dir() => {
                return Err(format!(
                    "Move Destination Directory {} is not a directory",
                    dir.display()
                ));
            }
            Ok(_) => {}
            Err(_) => fs::create_dir_all(dir).map_err(|e| {
                format!(
                    "cannot create Move Destination Directory {}: {e}",
                    dir.display()
                )
            })?,
        }
        if self.conflict == MoveConflict::Fail
            && let Some(name) = source.file_name()
            && dir.join(name).exists()
        {
            return Err(format!(
                "{} already exists and Move Conflict Strategy is Fail",
                dir.join(name).display()
            ));
        }
        Ok(())
    }
}

impl Processor for FetchFile {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        let mut moves = Vec::new();
        for &ff in &ffs {
            if let Some(m) = self.fetch(session, ff)? {
                moves.push(m);
            }
        }
        if !moves.is_empty() {
            let conflict = self.conflict;
            // After the commit is durable: the flow holds the content before the file goes.
            session.on_complete(move |completion| {
                if completion != Completion::Committed {
                    return;
                }
                for m in moves {
                    if let Err(e) = move_file(&m, conflict) {
                        tracing::warn!(
                            "FetchFile: cannot move {} to {}: {e}",
                            m.source.display(),
                            m.directory.display()
                        );
                    }
                }
            });
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

/// Moves `m.source` into `m.directory` by `conflict`, if it is still the file that was read.
fn move_file(m: &PendingMove, conflict: MoveConflict) -> io::Result<()> {
    let meta = match fs::symlink_metadata(&m.source) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if FileIdentity::of(&meta) != m.identity {
        tracing::info!(
            "FetchFile: {} changed since it was fetched; it is not moved",
            m.source.display()
        );
        return Ok(());
    }
    let Some(name) = m.source.file_name().and_then(|n| n.to_str()) else {
        return Err(io::Error::other("the file has no name"));
    };
    let mut target = m.directory.join(name);
    if target.exists() {
        match conflict {
            MoveConflict::Replace => {}
            MoveConflict::KeepExisting => return fs::remove_file(&m.source),
            MoveConflict::Fail => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} appeared since the fetch", target.display()),
                ));
            }
            MoveConflict::Rename => target = m.directory.join(unique_name(name)),
        }
    }
    match fs::rename(&m.source, &target) {
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            // Another file system: copied beside the target, renamed into place, then the
            // source removed, so the target is never seen half written.
            let tmp = m
                .directory
                .join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4()));
            fs::copy(&m.source, &tmp)
                .and_then(|_| fs::rename(&tmp, &target))
                .inspect_err(|_| {
                    let _ = fs::remove_file(&tmp);
                })?;
            fs::remove_file(&m.source)
        }
        other => other,
    }
}

/// `name` with a random uuid before its extension (`a.csv`: `a-<uuid>.csv`), NiFi's rename.
fn unique_name(name: &str) -> String {
    let id = uuid::Uuid::new_v4();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{id}.{ext}"),
        _ => format!("{name}-{id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(source: &Path, directory: &Path) -> PendingMove {
        PendingMove {
            source: source.to_path_buf(),
            identity: FileIdentity::of(&fs::metadata(source).unwrap()),
            directory: directory.to_path_buf(),
        }
    }

    #[test]
    fn each_conflict_strategy_moves_as_nifi_does() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("done");
        fs::create_dir(&dest).unwrap();
        for (conflict, expect_files) in [
            (MoveConflict::Replace, 1),
            (MoveConflict::KeepExisting, 1),
            (MoveConflict::Rename, 2),
        ] {
            let src = dir.path().join("a.csv");
            fs::write(&src, "new").unwrap();
            fs::write(dest.join("a.csv"), "old").unwrap();
            move_file(&pending(&src, &dest), conflict).unwrap();
            assert!(!src.exists(), "{conflict:?}");
            assert_eq!(
                fs::read_dir(&dest).unwrap().count(),
                expect_files,
                "{conflict:?}"
            );
            let kept = fs::read_to_string(dest.join("a.csv")).unwrap();
            assert_eq!(
                kept,
                if conflict == MoveConflict::Replace {
                    "new"
                } else {
                    "old"
                }
            );
            for e in fs::read_dir(&dest).unwrap() {
                fs::remove_file(e.unwrap().path()).unwrap();
            }
        }
        // A file rewritten since the fetch stays where it is.
        let src = dir.path().join("b.txt");
        fs::write(&src, "1").unwrap();
        let m = pending(&src, &dest);
        fs::write(&src, "12").unwrap();
        move_file(&m, MoveConflict::Replace).unwrap();
        assert!(src.exists());
    }

    #[test]
    fn a_unique_name_keeps_the_extension() {
        let n = unique_name("data.tar.gz");
        assert!(n.starts_with("data.tar-") && n.ends_with(".gz"), "{n}");
        assert!(unique_name("README").starts_with("README-"));
        assert!(unique_name(".hidden").starts_with(".hidden-"));
    }
}
