//! Fault injection for the flow simulator: crashes that lose what was not synced, I/O errors,
//! a full disk, and panicking processors, at counted points of a run.
//!
//! Every step of the flow repositories and of PutFile that touches the disk (a write, a
//! sync, a file created, a rename, a directory synced) goes through [`step`], and every
//! processor trigger through [`trigger`]. Without a plan they cost one load of an
//! initialised `OnceLock`. A plan comes from the environment variable `WEIR_FLOW_FAULTS`,
//! read once per process; the flow simulator (`tests/flow_sim.rs`) sets it on the `weir flow
//! run` it starts. It is a comma-separated list of:
//!
//! - `crash-before=N` / `crash-after=N`: at the N-th disk step (counted from 1 across the
//!   process), before or after it runs, simulate a power loss: every file this process
//!   created or wrote is cut back to what was last synced (a file created and never synced,
//!   or whose directory was never synced since, is removed), then the process exits with
//!   [`CRASH_EXIT_CODE`]. Renames are taken as durable as they happen.
//! - `eio=N`: the N-th write fails with an I/O error, once.
//! - `enospc=N+K`: writes N to N+K−1 fail as a full disk would.
//! - `panic=NAME@N`: the N-th trigger of processor NAME panics.
//!
//! From a crash on, every thread that reaches a disk step (or finishes one) stops there, so
//! nothing acts on a write or sync after the moment of the crash; the crash waits (up to a
//! second) for steps already under way before it cuts the files. This is a testing hook: a
//! plan adds a lock and two counters to every step.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The exit code of a simulated power loss.
pub const CRASH_EXIT_CODE: i32 = 86;

/// The environment variable holding a plan.
pub const PLAN_VARIABLE: &str = "WEIR_FLOW_FAULTS";

/// What a disk step does, for the injector's bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// Creates `path` (new and empty): it is lost at a crash until synced and its
    /// directory synced.
    Create,
    /// Writes to `path` (appends or the whole file): lost at a crash past the last sync.
    Write,
    /// Syncs `path`'s data: what it holds now survives a crash.
    Sync,
    /// Renames a file to `path`, taken as durable at once; what was synced of the source
    /// is what survives of the target.
    Rename {
        /// The file renamed.
        from: &'a Path,
    },
    /// Syncs directory `path`: the files created in it survive a crash.
    SyncDir,
    /// Cuts `path` to a length (recovery truncating a torn tail).
    Truncate,
    /// Removes `path`.
    Remove,
}

#[derive(Debug, Default)]
struct Plan {
    crash_before: Option<u64>,
    crash_after: Option<u64>,
    eio: Option<u64>,
    enospc: Option<(u64, u64)>,
    panic: Option<(String, u64)>,
}

#[derive(Debug, Default)]
struct Books {
    steps: u64,
    writes: u64,
    /// Per file written or created: the length that survives a crash (None: nothing yet).
    durable: HashMap<PathBuf, Option<u64>>,
    /// Files created since their directory was last synced.
    unlinked: Vec<PathBuf>,
    triggers: HashMap<String, u64>,
}

struct Injector {
    plan: Plan,
    /// Held only for bookkeeping, never while a step runs: steps take other locks (the
    /// content repository's) and must not wait on one another through this one.
    books: Mutex<Books>,
    crashed: AtomicBool,
    /// Steps running now.
    in_flight: AtomicUsize,
}

fn injector() -> Option<&'static Injector> {
    static INJECTOR: OnceLock<Option<Injector>> = OnceLock::new();
    INJECTOR
        .get_or_init(|| {
            let text = std::env::var(PLAN_VARIABLE).ok()?;
            let plan = parse(&text).unwrap_or_else(|e| panic!("{PLAN_VARIABLE}: {e}"));
            Some(Injector {
                plan,
                books: Mutex::new(Books::default()),
                crashed: AtomicBool::new(false),
                in_flight: AtomicUsize::new(0),
            })
        })
        .as_ref()
}

fn parse(text: &str) -> Result<Plan, String> {
    let mut plan = Plan::default();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}` is not KEY=VALUE"))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("`{item}`: `{v}` is not a number"))
        };
        match key {
            "crash-before" => plan.crash_before = Some(number(value)?),
            "crash-after" => plan.crash_after = Some(number(value)?),
            "eio" => plan.eio = Some(number(value)?),
            "enospc" => {
                let (n, k) = value
                    .split_once('+')
                    .ok_or_else(|| format!("`{item}`: expected N+K"))?;
                plan.enospc = Some((number(n)?, number(k)?));
            }
            "panic" => {
                let (name, n) = value
                    .rsplit_once('@')
                    .ok_or_else(|| format!("`{item}`: expected NAME@N"))?;
                plan.panic = Some((name.to_string(), number(n)?));
            }
            _ => return Err(format!("unknown fault `{key}`")),
        }
    }
    Ok(plan)
}

/// Runs the disk step `op` on `path`, as the plan says: it may fail it, or crash the process
/// before or after it. Without a plan this is `op()`.
///
/// # Errors
/// `op`'s error, or an injected one.
pub fn step<T>(kind: Step<'_>, path: &Path, op: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    step_at(kind, || path.to_path_buf(), op)
}

/// [`step`] for a hot path: `path` is made only when a plan is in force.
///
/// # Errors
/// As [`step`].
pub fn step_at<T>(
    kind: Step<'_>,
    path: impl FnOnce() -> PathBuf,
    op: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    let Some(inj) = injector() else {
        return op();
    };
    let path = &path();
    if inj.crashed.load(Ordering::SeqCst) {
        stop_here();
    }
    let n = {
        let mut books = inj.lock();
        books.steps += 1;
        let n = books.steps;
        if kind == Step::Write {
            books.writes += 1;
            let w = books.writes;
            if inj.plan.eio == Some(w) {
                return Err(io::Error::other("injected I/O error"));
            }
            if let Some((from, count)) = inj.plan.enospc
                && (from..from + count).contains(&w)
            {
                return Err(io::Error::from(io::ErrorKind::StorageFull));
            }
        }
        n
    };
    if inj.plan.crash_before == Some(n) {
        power_loss(inj, n);
    }
    inj.in_flight.fetch_add(1, Ordering::SeqCst);
    let out = op();
    inj.in_flight.fetch_sub(1, Ordering::SeqCst);
    if inj.crashed.load(Ordering::SeqCst) {
        // Done after the crash's moment: nobody may act on it.
        stop_here();
    }
    let out = out?;
    let len = || std::fs::metadata(path).map(|m| m.len()).ok();
    let path = path.as_path();
    {
        let mut books = inj.lock();
        match kind {
            Step::Create => {
                books.durable.insert(path.to_path_buf(), None);
                books.unlinked.push(path.to_path_buf());
            }
            Step::Write => {
                books.durable.entry(path.to_path_buf()).or_insert(None);
            }
            Step::Sync | Step::Truncate => {
                let l = len();
                books.durable.insert(path.to_path_buf(), l);
            }
            Step::Rename { from } => {
                let synced = books.durable.remove(from).flatten().or_else(len);
                books.durable.insert(path.to_path_buf(), synced);
                books.unlinked.retain(|p| p != from);
            }
            Step::SyncDir => books.unlinked.retain(|p| p.parent() != Some(path)),
            Step::Remove => {
                books.durable.remove(path);
                books.unlinked.retain(|p| p != path);
            }
        }
    }
    if inj.plan.crash_after == Some(n) {
        power_loss(inj, n);
    }
    Ok(out)
}

impl Injector {
    fn lock(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A thread that reaches the injector after a crash stops for good (the process is about
/// to end).
fn stop_here() -> ! {
    loop {
        std::thread::park();
    }
}

/// The crash at step `n`: stops every other thread at its next step, waits for the steps
/// under way (a step blocked on a lock this thread holds is not writing: after a second the
/// crash goes on without it), cuts every file back to what was synced, removes what a crash
/// would not have kept, and ends the process.
fn power_loss(inj: &Injector, n: u64) -> ! {
    inj.crashed.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(1);
    while inj.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let books = inj.lock();
    for (path, durable) in &books.durable {
        if books.unlinked.contains(path) {
            let _ = std::fs::remove_file(path);
            continue;
        }
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
            let keep = durable.unwrap_or(0);
            if f.metadata().is_ok_and(|m| m.len() > keep) {
                let _ = f.set_len(keep);
            }
        }
    }
    eprintln!("simulated power loss at disk step {n}");
    std::process::exit(CRASH_EXIT_CODE);
}

/// Creates (or truncates) `path` for writing, as a [`Step::Create`].
///
/// # Errors
/// As [`std::fs::File::create`], or an injected error.
pub fn create(path: &Path) -> io::Result<std::fs::File> {
    step(Step::Create, path, || std::fs::File::create(path))
}

/// Renames `from` to `to`, as a [`Step::Rename`].
///
/// # Errors
/// As [`std::fs::rename`].
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    step(Step::Rename { from }, to, || std::fs::rename(from, to))
}

/// Called before each trigger of processor `name`: panics when the plan says this is the
/// one.
pub fn trigger(name: &str) {
    let Some(inj) = injector() else {
        return;
    };
    let Some((target, at)) = &inj.plan.panic else {
        return;
    };
    if target != name {
        return;
    }
    let n = {
        let mut books = inj.lock();
        let n = books.triggers.entry(name.to_string()).or_insert(0);
        *n += 1;
        *n
    };
    if n == *at {
        panic!("injected panic in processor `{name}` at its trigger {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_and_bad_ones_are_named() {
        let p = parse("crash-after=17, eio=3,enospc=5+2,panic=write@4").unwrap();
        assert_eq!(p.crash_after, Some(17));
        assert_eq!(p.eio, Some(3));
        assert_eq!(p.enospc, Some((5, 2)));
        assert_eq!(p.panic, Some(("write".into(), 4)));
        assert!(
            parse("crash=1")
                .unwrap_err()
                .contains("unknown fault `crash`")
        );
        assert!(parse("eio=x").unwrap_err().contains("`x` is not a number"));
        assert!(parse("panic=write").unwrap_err().contains("NAME@N"));
    }
}
