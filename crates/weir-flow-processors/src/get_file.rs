//! GetFile: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use regex::Regex;
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};
use weir_flow_api::component::Component;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::FileIdentity;
use weir_flow_api::session::Session;

/// The GetFile type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(GetFile::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "GetFile",
    description: "Takes files from a directory into flow files, deleting each once the commit holding it is durable (and only while it is still the file taken).",
    properties: &[
        p("Input Directory", true, None, K::Text).about("The directory to take files from."),
        p("File Filter", true, Some("[^\\.].*"), K::Regex).about(
            "Only files whose whole name matches this regular expression are taken (the default skips hidden files).",
        ),
        p("Keep Source File", true, Some("false"), K::Bool).about(
            "Leave each file where it is instead of deleting it once taken (it is then taken again at every trigger: for testing).",
        ),
        p("Recurse Subdirectories", true, Some("true"), K::Bool).about(
            "Also take the files of subdirectories, at any depth (the `path` attribute holds the subdirectory).",
        ),
        p("Batch Size", true, Some("10"), K::Count).about(
            "The most files taken per trigger (0 counts as 1).",
        ),
        p("Minimum File Age", true, Some("0 sec"), K::Duration).about(
            "Files modified more recently than this are left for a later trigger, so that a file still being written is not taken.",
        ),
    ],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: true,
};

/// GetFile: picks up files from a directory (RECEIVE). Without `Keep Source File`, a file is
/// deleted only after the session that holds its content is durable; a crash in between
/// deletes it at recovery, so a file is taken exactly once. A file taken by work not yet
/// committed or rolled back is not taken again meanwhile: by another concurrent task, or
/// by the same stateless transaction triggering its sources again while a MergeContent
/// waits for more.
pub struct GetFile {
    /// Files taken by sessions that have not settled yet.
    taken: Arc<Mutex<HashSet<PathBuf>>>,
    dir: PathBuf,
    filter: Regex,
    keep: bool,
    recurse: bool,
    batch: usize,
    min_age: Duration,
}

impl GetFile {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        Ok(GetFile {
            taken: Arc::default(),
            dir: PathBuf::from(props::text(c, "Input Directory")),
            filter: Regex::new(&format!("^(?:{})$", props::text(c, "File Filter")))
                .map_err(|e| e.to_string())?,
            keep: props::boolean(c, "Keep Source File"),
            recurse: props::boolean(c, "Recurse Subdirectories"),
            batch: props::count(c, "Batch Size")?.max(1) as usize,
            min_age: props::duration(c, "Minimum File Age")?,
        })
    }

    fn list(
        &self,
        dir: &Path,
        taken: &HashSet<PathBuf>,
        out: &mut Vec<PathBuf>,
    ) -> std::io::Result<()> {
        let mut entries: Vec<_> = fs::read_dir(dir)?.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if out.len() >= self.batch {
                return Ok(());
            }
            let path = e.path();
            let meta = e.metadata()?;
            if meta.is_dir() {
                if self.recurse {
                    self.list(&path, taken, out)?;
                }
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let old_enough = meta
                .modified()
                .ok()
                .and_then(|m| SystemTime::now().duration_since(m).ok())
                .is_none_or(|age| age >= self.min_age);
            if self.filter.is_match(&name) && old_enough && !taken.contains(&path) {
                out.push(path);
            }
        }
        Ok(())
    }
}

impl Processor for GetFile {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let mut files = Vec::new();
        let taken = Arc::clone(&self.taken);
        if let Err(e) = self.list(&self.dir, &lock(&taken), &mut files) {
            return Err(ProcessError::Other(format!(
                "cannot list {}: {e}",
                self.dir.display()
            )));
        }
        if files.is_empty() {
            return Ok(Trigger::Idle);
        }
        // Held from now until the session settles, however it settles.
        lock(&taken).extend(files.iter().cloned());
        let held = files.clone();
        session.on_complete(move |_| {
            let mut taken = lock(&taken);
            for path in &held {
                taken.remove(path);
            }
        });
        for path in files {
            let mut source = match fs::File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(ProcessError::Other(format!(
                        "cannot read {}: {e}",
                        path.display()
                    )));
                }
            };
            let meta = source
                .metadata()
                .map_err(|e| ProcessError::Other(format!("cannot read {}: {e}", path.display())))?;
            let len = meta.len();
            let ff = session.create();
            // File to claim in the kernel: the bytes never pass through this process.
            session
                .write_from(ff, &mut source, len)
                .map_err(|e| ProcessError::Other(format!("cannot read {}: {e}", path.display())))?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let rel = path
                .parent()
                .and_then(|p| p.strip_prefix(&self.dir).ok())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let abs = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            session.put_attribute(ff, "filename", name);
            session.put_attribute(
                ff,
                "path",
                if rel.is_empty() {
                    "./".into()
                } else {
                    format!("{rel}/")
                },
            );
            session.put_attribute(
                ff,
                "absolute.path",
                abs.parent()
                    .map(|p| format!("{}/", p.display()))
                    .unwrap_or_default(),
            );
            session.report(ff, EventType::RECEIVE, Some(crate::file_uri(&abs)), None);
            session.transfer(ff, "success")?;
            if !self.keep {
                session
                    .delete_source_on_commit(path.display().to_string(), FileIdentity::of(&meta));
            }
        }
        Ok(Trigger::Worked)
    }
}

fn lock(taken: &Mutex<HashSet<PathBuf>>) -> MutexGuard<'_, HashSet<PathBuf>> {
    taken.lock().unwrap_or_else(|p| p.into_inner())
}
