//! What the whole-job benchmarks share: timing a child process with its CPU time, peak
//! memory and context switches, waiting for the shared machine to be quiet before a run, and
//! reading `--name value` flags.

#![allow(unsafe_code)] // wait4, for the child's usage; kill, to stop a child that runs until told.
#![allow(dead_code)] // each bench uses what it needs

use std::process::Command;
use std::time::{Duration, Instant};

/// What a finished child process took.
#[derive(Debug, Clone, Copy)]
pub struct ChildUsage {
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// User plus system CPU time of the child (its threads included).
    pub cpu: Duration,
    /// Peak RSS (`ru_maxrss`), in KiB. Linux counts the parent's RSS at the spawn in it too,
    /// so the parent must stay small.
    pub max_rss_kib: u64,
    /// Voluntary context switches of all the child's threads (`ru_nvcsw`): each is a thread
    /// that blocked or parked and was woken again, so at rest they count the wake-ups.
    pub voluntary_switches: u64,
    /// Involuntary context switches (`ru_nivcsw`): a thread preempted while it could run.
    pub involuntary_switches: u64,
}

/// Runs `cmd` to completion; returns its wall time and peak RSS in KiB.
///
/// # Panics
/// If the child cannot be started or does not exit with status 0.
pub fn time_child(cmd: &mut Command) -> (Duration, u64) {
    let usage = run_child(cmd);
    (usage.wall, usage.max_rss_kib)
}

/// Runs `cmd` to completion; returns its wall time, CPU time, peak RSS and context switches.
///
/// # Panics
/// If the child cannot be started or does not exit with status 0.
#[allow(clippy::zombie_processes)] // the child is reaped by wait4, which also reports its usage
pub fn run_child(cmd: &mut Command) -> ChildUsage {
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    reap(cmd, child.id() as libc::pid_t, start)
}

/// Runs `cmd` for `duration` of wall-clock time, then asks it to stop with SIGTERM and waits
/// for its exit; returns its usage as [`run_child`] does. For a command that runs until told
/// to stop (a flow, a server).
///
/// # Panics
/// If the child cannot be started, exits before `duration` is up, or does not exit with
/// status 0 after the signal.
#[allow(clippy::zombie_processes)] // the child is reaped by wait4, which also reports its usage
pub fn run_child_for(cmd: &mut Command, duration: Duration) -> ChildUsage {
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    std::thread::sleep(duration); // the measured run itself, not synchronisation
    // An early exit fails at once: reaped here, its pid could be reused before the kill.
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child; WNOHANG returns at once; the pointers are to live
    // locals.
    let early = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
    assert_eq!(
        early, 0,
        "{cmd:?} ended before its {duration:?} were up (status {status})"
    );
    // SAFETY: `pid` is our own child, still running and not reaped.
    let killed = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(killed, 0, "could not signal {cmd:?}");
    reap(cmd, pid, start)
}

/// Waits for child `pid` with `wait4` and returns its usage; panics unless it exited with
/// status 0.
fn reap(cmd: &Command, pid: libc::pid_t, start: Instant) -> ChildUsage {
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child; status and usage point to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert_eq!(waited, pid, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed with status {status}"
    );
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    ChildUsage {
        wall: elapsed,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss as u64,
        voluntary_switches: usage.ru_nvcsw as u64,
        involuntary_switches: usage.ru_nivcsw as u64,
    }
}

/// The machine's CPU counters from `/proc/stat`: (busy, total) jiffies over all CPUs, where
/// busy counts everything but idle and I/O wait (steal by other virtual machines included).
fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let total: u64 = fields.iter().sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// The share of the machine's CPU time (all cores) that was busy over the next `window`.
/// Call it while this process is idle: it then measures everyone else.
pub fn cpu_busy(window: Duration) -> f64 {
    let Some((busy0, total0)) = cpu_jiffies() else {
        return 0.0;
    };
    std::thread::sleep(window); // the sampling window, not synchronisation
    let Some((busy1, total1)) = cpu_jiffies() else {
        return 0.0;
    };
    (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64
}

/// Waits, for at most `patience`, until the rest of the machine keeps its CPUs busy less
/// than `threshold` of the time over half a second; returns the busy share last seen. The
/// machine is shared with other builds, and a run that starts in their middle measures them.
pub fn wait_for_quiet(threshold: f64, patience: Duration) -> f64 {
    let start = Instant::now();
    loop {
        let busy = cpu_busy(Duration::from_millis(500));
        if busy < threshold || start.elapsed() >= patience {
            return busy;
        }
    }
}

/// The CPU time this process has used so far, all its threads together. Around a part that
/// only its own busy threads run, the difference is their work, whatever else the shared
/// machine runs meanwhile (a thread waiting for a CPU adds wall time, not CPU time).
pub fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The value after `--name` on the command line, if any.
pub fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}
