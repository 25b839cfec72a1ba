//! What the whole-job benchmarks share: timing a child process with its peak memory, and
//! reading `--name value` flags.

#![allow(unsafe_code)] // wait4, for the child's peak RSS.
#![allow(dead_code)] // each bench uses what it needs

use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `cmd` to completion; returns its wall time and peak RSS in KiB.
///
/// # Panics
/// If the child cannot be started or does not exit with status 0.
#[allow(clippy::zombie_processes)] // the child is reaped by wait4, which also reports its peak RSS
pub fn time_child(cmd: &mut Command) -> (Duration, u64) {
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: `pid` is our unreaped child; status and usage point to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert_eq!(waited, pid, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed with status {status}"
    );
    (elapsed, usage.ru_maxrss as u64)
}

/// The value after `--name` on the command line, if any.
pub fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}
