//! ListFile: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::session::{Session, StateMap};

/// The ListFile type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(ListFile::new(c)?)),
};

const TRACKING_TIMESTAMPS: &str = "Tracking Timestamps";
const TRACKING_ENTITIES: &str = "Tracking Entities";
const NO_TRACKING: &str = "No Tracking";
const TIME_WINDOW: &str = "Tracking Time Window";
const ALL_AVAILABLE: &str = "All Available";

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "ListFile",
    description: "Lists the files of a directory tree as empty flow files carrying each file's name, path and metadata, each new or changed file once, remembering what it listed across restarts; FetchFile reads them.",
    properties: &[
        p("Input Directory", true, None, K::Text)
            .about("The directory whose files are listed."),
        p(
            "Listing Strategy",
            true,
            Some(TRACKING_TIMESTAMPS),
            K::Choice(&[TRACKING_TIMESTAMPS, TRACKING_ENTITIES, NO_TRACKING]),
        )
        .about("Tracking Timestamps lists a file when its modification time is newer than what was listed before; Tracking Entities lists a file of the tracking window not listed before or changed (time or size) since; No Tracking lists every file at every run. What was listed is kept in the processor's state."),
        p("Entity Tracking Time Window", true, Some("3 hours"), K::Duration)
            .about("With Tracking Entities: only files modified within this window are listed, and the listed ones are remembered for as long."),
        p(
            "Entity Tracking Initial Listing Target",
            true,
            Some(TIME_WINDOW),
            K::Choice(&[TIME_WINDOW, ALL_AVAILABLE]),
        )
        .about("With Tracking Entities, what the first listing takes: the files of the tracking window, or every file."),
        p("Recurse Subdirectories", true, Some("true"), K::Bool)
            .about("Whether files in subdirectories are listed too."),
        p("File Filter", true, Some("[^\\.].*"), K::Regex)
            .about("Only files whose name matches this regular expression (whole name) are listed."),
        p("Path Filter", false, None, K::Regex)
            .about("When recursing, only files in subdirectories whose path relative to the Input Directory matches this regular expression are listed (files directly in it always are)."),
        p("Include File Attributes", true, Some("true"), K::Bool)
            .about("Whether each flow file carries the file's owner, group, permissions and times."),
        p("Minimum File Age", true, Some("0 sec"), K::Duration)
            .about("A file modified more recently than this is left for a later listing."),
        p("Maximum File Age", false, None, K::Duration)
            .about("A file not modified for longer than this is not listed."),
        p("Minimum File Size", true, Some("0 B"), K::Size)
            .about("A file smaller than this is not listed."),
        p("Maximum File Size", false, None, K::Size)
            .about("A file larger than this is not listed."),
        p("Ignore Hidden Files", true, Some("true"), K::Bool)
            .about("Whether files and directories whose name starts with a dot are skipped."),
    ],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: true,
};

/// How long a file's modification time must lie before the listing's start for the file to
/// be listed (Tracking Timestamps). A file written while the tree is walked, in a directory
/// already read, has a time after the walk's start less the clock's coarseness (the kernel
/// stamps files from a clock a tick behind): keeping the listed times below this lag keeps
/// every such file newer than the state, so a later listing finds it.
const LISTING_LAG: Duration = Duration::from_millis(100);

/// The state's key for the newest modification time listed, in nanoseconds since the epoch.
const LISTED_TIMESTAMP: &str = "listing.timestamp.nanos";
/// The state's prefix for the files listed with exactly that time (`id.0`, `id.1`, ...).
const LISTED_ID_PREFIX: &str = "id.";

/// ListFile: lists the files under `Input Directory` as empty flow files (CREATE), with
/// NiFi's attributes. With Tracking Timestamps, the processor's state holds the newest
/// modification time listed and the files listed at exactly that time; with Tracking
/// Entities, each file of the tracking window listed, with its time and size. The state is
/// written in the same commit as the flow files (a crash keeps both or neither: a file is
/// never skipped), so a restart with the same repository lists only new and changed files.
/// One listing runs at a time (NiFi's `@TriggerSerially`): a trigger while another's session
/// is unsettled lists nothing. Each trigger walks the whole tree: its cost grows with the
/// number of files, listed or not.
pub struct ListFile {
    dir: PathBuf,
    strategy: Strategy,
    /// Tracking Entities' window.
    window: Duration,
    /// Tracking Entities' first listing takes every file, not only the window's.
    initial_all: bool,
    recurse: bool,
    file_filter: Regex,
    path_filter: Option<Regex>,
    file_attributes: bool,
    min_age: Duration,
    max_age: Option<Duration>,
    min_size: u64,
    max_size: Option<u64>,
    ignore_hidden: bool,
    /// Set while a listing's session is unsettled.
    listing: Arc<AtomicBool>,
}

/// How ListFile tells what it listed before.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Strategy {
    Timestamps,
    Entities,
    None,
}

/// A file found by the walk that passed the filters.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    /// Its path relative to the input directory: the state's identifier.
    relative: String,
    /// Its directory relative to the input directory, "" for the directory itself.
    relative_dir: String,
    name: String,
    modified_ns: i128,
    meta: FileMeta,
}

/// What a listed file's attributes tell of it.
#[derive(Debug, Clone, PartialEq)]
struct FileMeta {
    size: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    accessed_ns: i128,
    created_ns: Option<i128>,
}

fn nanos_since_epoch(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

impl ListFile {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let whole = |name: &str| -> Result<Regex, BuildError> {
            Regex::new(&format!("^(?:{})$", props::text(c, name)))
                .map_err(|e| BuildError::Invalid(format!("{name}: {e}")))
        };
        let optional = |name: &str| props::opt(c, name).filter(|v| !v.trim().is_empty());
        Ok(ListFile {
            dir: PathBuf::from(props::text(c, "Input Directory")),
            strategy: match props::text(c, "Listing Strategy")
                .to_ascii_lowercase()
                .as_str()
            {
                "no tracking" => Strategy::None,
                "tracking entities" => Strategy::Entities,
                _ => Strategy::Timestamps,
            },
            window: props::duration(c, "Entity Tracking Time Window")?,
            initial_all: props::text(c, "Entity Tracking Initial Listing Target")
                .eq_ignore_ascii_case(ALL_AVAILABLE),
            recurse: props::boolean(c, "Recurse Subdirectories"),
            file_filter: whole("File Filter")?,
            path_filter: optional("Path Filter")
                .map(|_| whole("Path Filter"))
                .transpose()?,
            file_attributes: props::boolean(c, "Include File Attributes"),
            min_age: props::duration(c, "Minimum File Age")?,
            max_age: optional("Maximum File Age")
                .map(|_| props::duration(c, "Maximum File Age"))
                .transpose()?,
            min_size: props::size(c, "Minimum File Size")?,
            max_size: optional("Maximum File Size")
                .map(|_| props::size(c, "Maximum File Size"))
                .transpose()?,
            ignore_hidden: props::boolean(c, "Ignore Hidden Files"),
            listing: Arc::default(),
        })
    }

    /// Every file under the input directory that passes the filters, as of `now`.
    fn walk(&self, now: SystemTime) -> Result<Vec<Found>, ProcessError> {
        let meta = fs::metadata(&self.dir).map_err(|e| {
            ProcessError::Other(format!(
                "cannot list Input Directory {}: {e}",
                self.dir.display()
            ))
        })?;
        if !meta.is_dir() {
            return Err(ProcessError::Other(format!(
                "Input Directory {} is not a directory",
                self.dir.display()
            )));
        }
        let mut out = Vec::new();
        // Directories seen (device, inode): a symbolic link back up the tree is walked once.
        let mut seen = HashSet::from([(meta.dev(), meta.ino())]);
        self.walk_dir(&self.dir, "", now, &mut seen, &mut out);
        Ok(out)
    }

    fn walk_dir(
        &self,
        dir: &Path,
        relative_dir: &str,
        now: SystemTime,
        seen: &mut HashSet<(u64, u64)>,
        out: &mut Vec<Found>,
    ) {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                // A subdirectory removed or closed to us while listing: the rest is listed.
                tracing::warn!("ListFile: cannot read directory {}: {e}", dir.display());
                return;
            }
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if self.ignore_hidden && name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            // Followed through symbolic links, as NiFi's walk does.
            let meta = match fs::metadata(&path) {
                Ok(m) => m,
                // Gone since the directory was read, or a dangling link.
                Err(_) => continue,
            };
            if meta.is_dir() {
                if self.recurse && seen.insert((meta.dev(), meta.ino())) {
                    let sub = if relative_dir.is_empty() {
                        name
                    } else {
                        format!("{relative_dir}/{name}")
                    };
                    self.walk_dir(&path, &sub, now, seen, out);
                }
                continue;
            }
            if !meta.is_file() || !self.file_filter.is_match(&name) {
                continue;
            }
            if let Some(filter) = &self.path_filter
                && !relative_dir.is_empty()
                && !filter.is_match(relative_dir)
            {
                continue;
            }
            let size = meta.len();
            if size < self.min_size || self.max_size.is_some_and(|max| size > max) {
                continue;
            }
            let modified = meta.modified().unwrap_or(UNIX_EPOCH);
            // A file from the future is of age 0.
            let age = now.duration_since(modified).unwrap_or_default();
            if age < self.min_age || self.max_age.is_some_and(|max| age > max) {
                continue;
            }
            out.push(Found {
                relative: if relative_dir.is_empty() {
                    name.clone()
                } else {
                    format!("{relative_dir}/{name}")
                },
                relative_dir: relative_dir.to_string(),
                name,
                modified_ns: nanos_since_epoch(modified),
                meta: FileMeta {
                    size,
                    mode: meta.permissions().mode(),
                    uid: meta.uid(),
                    gid: meta.gid(),
                    accessed_ns: nanos_since_epoch(meta.accessed().unwrap_or(UNIX_EPOCH)),
                    created_ns: meta.created().ok().map(nanos_since_epoch),
                },
            });
        }
    }

    /// The attributes of the flow file for `f`: NiFi's names and formats.
    fn attributes(
        &self,
        f: &Found,
        absolute_dir: &str,
        names: &mut Option<Names>,
    ) -> Vec<(SmolStr, SmolStr)> {
        let mut out: Vec<(SmolStr, SmolStr)> = vec![
            ("absolute.path".into(), absolute_dir.into()),
            ("file.size".into(), f.meta.size.to_string().into()),
        ];
        if self.file_attributes {
            let names = names.get_or_insert_with(Names::read);
            out.extend([
                (
                    "file.creationTime".into(),
                    format_time(f.meta.created_ns.unwrap_or(f.modified_ns)),
                ),
                ("file.group".into(), names.group(f.meta.gid)),
                (
                    "file.lastAccessTime".into(),
                    format_time(f.meta.accessed_ns),
                ),
                ("file.lastModifiedTime".into(), format_time(f.modified_ns)),
                ("file.owner".into(), names.user(f.meta.uid)),
                ("file.permissions".into(), permissions(f.meta.mode)),
            ]);
        }
        out
    }
}

/// NiFi's time format for file attributes (`yyyy-MM-dd'T'HH:mm:ssZ`), in UTC.
fn format_time(nanos: i128) -> SmolStr {
    let secs = nanos.div_euclid(1_000_000_000) as i64;
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| SmolStr::from(t.format("%Y-%m-%dT%H:%M:%S%z").to_string()))
        .unwrap_or_default()
}

/// A mode's permission bits as `ls` shows them (`rw-r--r--`), NiFi's `file.permissions`.
fn permissions(mode: u32) -> SmolStr {
    let mut out = String::with_capacity(9);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 0o7;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    out.into()
}

/// User and group names by id, from the system's files database (`/etc/passwd`,
/// `/etc/group`); an id without a name there is shown as its number.
struct Names {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

impl Names {
    fn read() -> Names {
        let table = |path: &str| -> HashMap<u32, String> {
            fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .filter_map(|line| {
                    let mut fields = line.split(':');
                    let name = fields.next()?;
                    let id = fields.nth(1)?.parse().ok()?;
                    Some((id, name.to_string()))
                })
                .collect()
        };
        Names {
            users: table("/etc/passwd"),
            groups: table("/etc/group"),
        }
    }

    fn user(&self, uid: u32) -> SmolStr {
        self.users
            .get(&uid)
            .map_or_else(|| uid.to_string().into(), SmolStr::from)
    }

    fn group(&self, gid: u32) -> SmolStr {
        self.groups
            .get(&gid)
            .map_or_else(|| gid.to_string().into(), SmolStr::from)
    }
}

/// What Tracking Timestamps has listed: the newest modification time, and the files listed
/// with exactly that time.
#[derive(Debug, Default, PartialEq)]
struct Listed {
    timestamp_ns: Option<i128>,
    at_timestamp: BTreeSet<String>,
}

impl Listed {
    fn from_state(state: &StateMap) -> Listed {
        Listed {
            timestamp_ns: state.get(LISTED_TIMESTAMP).and_then(|t| t.parse().ok()),
            at_timestamp: state
                .iter()
                .filter(|(k, _)| k.starts_with(LISTED_ID_PREFIX))
                .map(|(_, v)| v.clone())
                .collect(),
        }
    }

    fn to_state(&self) -> StateMap {
        let mut state = BTreeMap::new();
        if let Some(t) = self.timestamp_ns {
            state.insert(LISTED_TIMESTAMP.to_string(), t.to_string());
        }
        for (i, id) in self.at_timestamp.iter().enumerate() {
            state.insert(format!("{LISTED_ID_PREFIX}{i}"), id.clone());
        }
        state
    }

    /// True when `f` is new or changed since this listing.
    fn is_new(&self, f: &Found) -> bool {
        match self.timestamp_ns {
            None => true,
            Some(t) => {
                f.modified_ns > t
                    || (f.modified_ns == t && !self.at_timestamp.contains(&f.relative))
            }
        }
    }
}

/// Tracking Timestamps: of `found`, the files to list now (new or changed, and modified
/// before `cutoff_ns`, the listing lag), and what is listed after them.
fn select(found: Vec<Found>, before: &Listed, cutoff_ns: i128) -> (Vec<Found>, Listed) {
    let chosen: Vec<Found> = found
        .into_iter()
        .filter(|f| f.modified_ns < cutoff_ns && before.is_new(f))
        .collect();
    let Some(newest) = chosen.iter().map(|f| f.modified_ns).max() else {
        return (chosen, Listed::default());
    };
    let mut at_timestamp: BTreeSet<String> = chosen
        .iter()
        .filter(|f| f.modified_ns == newest)
        .map(|f| f.relative.clone())
        .collect();
    if before.timestamp_ns == Some(newest) {
        at_timestamp.extend(before.at_timestamp.iter().cloned());
    }
    (
        chosen,
        Listed {
            timestamp_ns: Some(newest),
            at_timestamp,
        },
    )
}

impl ListFile {
    /// The files to list now (`None`: none), with the new state set in `session`.
    fn list(&self, session: &mut dyn Session) -> Result<Option<Vec<Found>>, ProcessError> {
        let started = SystemTime::now();
        let found = self.walk(started)?;
        let (chosen, state) = match self.strategy {
            Strategy::None => return Ok(Some(found).filter(|f| !f.is_empty())),
            Strategy::Timestamps => {
                let before = Listed::from_state(&session.state());
                let cutoff = nanos_since_epoch(started) - LISTING_LAG.as_nanos() as i128;
                let (chosen, after) = select(found, &before, cutoff);
                (chosen, after.to_state())
            }
            Strategy::Entities => {
                let window_start = nanos_since_epoch(started)
                    - self.window.as_nanos().min(i128::MAX as u128) as i128;
                select_entities(found, &session.state(), window_start, self.initial_all)
            }
        };
        if chosen.is_empty() {
            return Ok(None);
        }
        session.set_state(state);
        Ok(Some(chosen))
    }
}

/// The state's prefix for an entity Tracking Entities listed: `entity.<relative path>` holds
/// `<modification time in ns>,<size>`.
const ENTITY_PREFIX: &str = "entity.";

/// Tracking Entities: of `found`, the files to list now (modified at or after
/// `window_start`, unless this is the first listing and `initial_all`, and not listed before
/// with this time and size), and the state after them: every entity listed whose time is
/// still within the window. The state holds one entry per such file, written whole at each
/// listing.
fn select_entities(
    found: Vec<Found>,
    state: &StateMap,
    window_start: i128,
    initial_all: bool,
) -> (Vec<Found>, StateMap) {
    let first = !state.keys().any(|k| k.starts_with(ENTITY_PREFIX));
    let listed = |f: &Found| format!("{},{}", f.modified_ns, f.meta.size);
    let chosen: Vec<Found> = found
        .into_iter()
        .filter(|f| (first && initial_all) || f.modified_ns >= window_start)
        .filter(|f| state.get(&format!("{ENTITY_PREFIX}{}", f.relative)) != Some(&listed(f)))
        .collect();
    let mut after: StateMap = state
        .iter()
        .filter(|(k, v)| {
            k.starts_with(ENTITY_PREFIX)
                && v.split(',')
                    .next()
                    .and_then(|t| t.parse::<i128>().ok())
                    .is_some_and(|t| t >= window_start)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for f in &chosen {
        if f.modified_ns >= window_start {
            after.insert(format!("{ENTITY_PREFIX}{}", f.relative), listed(f));
        }
    }
    (chosen, after)
}

impl Processor for ListFile {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        if self.listing.swap(true, Ordering::AcqRel) {
            return Ok(Trigger::Idle);
        }
        let listed = self.list(session);
        match &listed {
            // Held until this session settles, whichever way: the next listing then reads
            // the state this one committed (or the one before, after a rollback).
            Ok(Some(_)) => {
                let listing = Arc::clone(&self.listing);
                session.on_complete(move |_| listing.store(false, Ordering::Release));
            }
            // Nothing in the session: the next trigger may list at once. (A hook here would
            // make an idle stateless transaction look like work.)
            Ok(None) | Err(_) => self.listing.store(false, Ordering::Release),
        }
        let Some(mut found) = listed? else {
            return Ok(Trigger::Idle);
        };
        // Oldest first; ties by path, so a listing's order is repeatable.
        found.sort_by(|a, b| (a.modified_ns, &a.relative).cmp(&(b.modified_ns, &b.relative)));
        let absolute_root = std::path::absolute(&self.dir).unwrap_or_else(|_| self.dir.clone());
        let mut names = None;
        session.reserve(found.len());
        for f in &found {
            let absolute_dir = if f.relative_dir.is_empty() {
                absolute_root.clone()
            } else {
                absolute_root.join(&f.relative_dir)
            };
            let absolute_dir = format!("{}/", absolute_dir.display());
            let attributes = self.attributes(f, &absolute_dir, &mut names);
            let ff = session.create_with_content(attributes, bytes::Bytes::new())?;
            session.put_attribute(ff, "filename", f.name.as_str());
            session.put_attribute(
                ff,
                "path",
                if f.relative_dir.is_empty() {
                    "./".to_string()
                } else {
                    format!("{}/", f.relative_dir)
                },
            );
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::Worked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(relative: &str, modified_ns: i128) -> Found {
        let (relative_dir, name) = relative.rsplit_once('/').unwrap_or(("", relative));
        Found {
            relative: relative.into(),
            relative_dir: relative_dir.into(),
            name: name.into(),
            modified_ns,
            meta: FileMeta {
                size: 0,
                mode: 0o644,
                uid: 0,
                gid: 0,
                accessed_ns: 0,
                created_ns: None,
            },
        }
    }

    fn names(files: &[Found]) -> Vec<&str> {
        files.iter().map(|f| f.relative.as_str()).collect()
    }

    #[test]
    fn a_first_listing_takes_every_file_older_than_the_lag() {
        let (chosen, after) = select(
            vec![found("a", 10), found("b/c", 20), found("young", 95)],
            &Listed::default(),
            90,
        );
        assert_eq!(names(&chosen), ["a", "b/c"]);
        assert_eq!(after.timestamp_ns, Some(20));
        assert_eq!(after.at_timestamp, BTreeSet::from(["b/c".to_string()]));
        // The young file comes at the next listing, the others do not come again.
        let (chosen, after) = select(
            vec![found("a", 10), found("b/c", 20), found("young", 95)],
            &after,
            200,
        );
        assert_eq!(names(&chosen), ["young"]);
        assert_eq!(after.timestamp_ns, Some(95));
    }

    #[test]
    fn a_file_with_the_newest_listed_time_but_not_listed_comes_next_time() {
        let (_, after) = select(
            vec![found("a", 50), found("b", 50)],
            &Listed::default(),
            100,
        );
        assert_eq!(after.at_timestamp.len(), 2);
        // `c` appeared later with the same time: listed, and the set grows.
        let (chosen, after) = select(
            vec![found("a", 50), found("b", 50), found("c", 50)],
            &after,
            100,
        );
        assert_eq!(names(&chosen), ["c"]);
        assert_eq!(after.at_timestamp.len(), 3);
        assert_eq!(Listed::from_state(&after.to_state()), after);
        // Nothing new: nothing listed.
        let (chosen, _) = select(vec![found("a", 50), found("c", 50)], &after, 100);
        assert!(chosen.is_empty());
    }

    #[test]
    fn a_modified_file_is_listed_again_and_an_older_time_is_not() {
        let before = Listed {
            timestamp_ns: Some(50),
            at_timestamp: BTreeSet::from(["a".to_string()]),
        };
        let (chosen, after) = select(vec![found("a", 60), found("old", 40)], &before, 100);
        assert_eq!(names(&chosen), ["a"]);
        assert_eq!(after.at_timestamp, BTreeSet::from(["a".to_string()]));
    }

    #[test]
    fn tracking_entities_lists_new_and_changed_files_of_the_window() {
        // First listing: the window's files (from 50), or all of them.
        let files = vec![found("old", 10), found("a", 60), found("b", 70)];
        let (chosen, state) = select_entities(files.clone(), &StateMap::new(), 50, false);
        assert_eq!(names(&chosen), ["a", "b"]);
        assert_eq!(state.len(), 2);
        let (chosen, _) = select_entities(files.clone(), &StateMap::new(), 50, true);
        assert_eq!(names(&chosen), ["old", "a", "b"]);
        // Nothing changed: nothing listed. A file moved in with an older time within the
        // window, and one whose size changed, are.
        assert!(
            select_entities(files.clone(), &state, 50, false)
                .0
                .is_empty()
        );
        let mut grown = found("a", 60);
        grown.meta.size = 9;
        let (chosen, state) = select_entities(
            vec![found("old", 10), grown, found("b", 70), found("c", 55)],
            &state,
            50,
            false,
        );
        assert_eq!(names(&chosen), ["a", "c"]);
        assert_eq!(state.len(), 3);
        // Entities that left the window are forgotten.
        let (_, state) = select_entities(vec![], &state, 65, false);
        assert_eq!(state.keys().collect::<Vec<_>>(), ["entity.b"]);
    }

    #[test]
    fn nifi_formats_for_times_and_permissions() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00+0000");
        assert_eq!(
            format_time(1_700_000_000_999_999_999),
            "2023-11-14T22:13:20+0000"
        );
        assert_eq!(permissions(0o100644), "rw-r--r--");
        assert_eq!(permissions(0o40751), "rwxr-x--x");
    }
}
