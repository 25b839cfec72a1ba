//! Pinning the executor's workers, one to a CPU, so that a woken worker runs at once.
//!
//! ```
//! use weir_core::pinning::{WorkerPinning, worker_cpus};
//!
//! // Two workers on a machine whose process may run on CPUs 2 and 5: one worker each.
//! assert_eq!(worker_cpus(WorkerPinning::Auto, 2, &[2, 5]), vec![Some(2), Some(5)]);
//! // Fewer workers than CPUs: the scheduler places them.
//! assert_eq!(worker_cpus(WorkerPinning::Auto, 1, &[2, 5]), vec![None]);
//! // Asked for: round robin over the CPUs, even with more workers than CPUs.
//! assert_eq!(
//!     worker_cpus(WorkerPinning::Always, 3, &[2, 5]),
//!     vec![Some(2), Some(5), Some(2)]
//! );
//! ```
//!
//! # Why
//!
//! A worker parks when it has nothing to do and is woken (a futex wake) by the worker that
//! hands it items or a watermark. Linux tends to queue the woken thread on the waker's CPU,
//! where the waker is still running, and moves it to the idle CPU only at the next balance:
//! the woken worker waits a scheduler slice, some 3 to 5 ms, while a CPU sits idle. On a
//! 2-core machine running the NEXMark latency bench at 1 M events/s, one of the two window
//! instances got the closing watermark about 4.5 ms late in a third of the windows; with
//! each worker pinned to its own CPU those delays were gone (docs/benchmarks/history.md).
//!
//! [`WorkerPinning::Auto`], the default, pins only when the executor has exactly one worker
//! per CPU this process may run on: the usual deployment of one engine per machine or
//! container, where each CPU is meant to run one worker. With fewer workers, pinning would
//! leave CPUs the scheduler could have used when another process loads a pinned one; with
//! more, workers would share CPUs they cannot leave.
//!
//! Only the workers are pinned. A non-cooperative tasklet's thread, I/O threads and
//! everything else float, and the scheduler moves them off a busy worker's CPU.

use std::fmt;
use std::str::FromStr;

/// Whether an executor pins each worker thread to one CPU. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerPinning {
    /// Pins worker `i` to the `i`-th CPU the process may run on, when there are exactly as
    /// many workers as those CPUs (and more than one); otherwise pins nothing.
    #[default]
    Auto,
    /// Pins worker `i` to the `(i mod n)`-th of the `n` CPUs the process may run on.
    Always,
    /// Pins nothing: the scheduler places the workers.
    Never,
}

impl WorkerPinning {
    /// The names [`FromStr`] accepts, in order.
    pub const NAMES: [&'static str; 3] = ["auto", "always", "never"];
}

impl fmt::Display for WorkerPinning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WorkerPinning::Auto => "auto",
            WorkerPinning::Always => "always",
            WorkerPinning::Never => "never",
        })
    }
}

/// A name that is none of [`WorkerPinning::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown worker pinning {0:?}: expected auto, always or never")]
pub struct UnknownPinning(pub String);

impl FromStr for WorkerPinning {
    type Err = UnknownPinning;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(WorkerPinning::Auto),
            "always" => Ok(WorkerPinning::Always),
            "never" => Ok(WorkerPinning::Never),
            other => Err(UnknownPinning(other.to_owned())),
        }
    }
}

/// The CPU for each of `workers` workers under `pinning`, given the CPUs the process may run
/// on (`allowed`, ascending); `None` leaves a worker to the scheduler. No CPUs known (an
/// empty `allowed`) pins nothing.
pub fn worker_cpus(
    pinning: WorkerPinning,
    workers: usize,
    allowed: &[usize],
) -> Vec<Option<usize>> {
    let pin = match pinning {
        WorkerPinning::Never => false,
        WorkerPinning::Auto => allowed.len() > 1 && workers == allowed.len(),
        WorkerPinning::Always => !allowed.is_empty(),
    };
    (0..workers)
        .map(|i| pin.then(|| allowed[i % allowed.len()]))
        .collect()
}

/// The CPUs this process may run on (its main thread's affinity mask), ascending; empty
/// where the platform does not say.
pub fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        affinity(Some(rustix::process::getpid()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// The CPUs in the affinity mask of thread `pid` (the calling thread for `None`), ascending;
/// empty if the system does not tell.
#[cfg(target_os = "linux")]
fn affinity(pid: Option<rustix::process::Pid>) -> Vec<usize> {
    use rustix::thread::{CpuSet, sched_getaffinity};
    sched_getaffinity(pid).map_or_else(
        |_| Vec::new(),
        |set| (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
    )
}

/// Restricts the calling thread to `cpu`.
///
/// # Errors
/// The system's refusal (a CPU outside the process's cgroup, say), or
/// [`std::io::ErrorKind::Unsupported`] off Linux.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::thread::{CpuSet, sched_setaffinity};
        if cpu >= CpuSet::MAX_CPU {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "CPU {cpu} is beyond the {} a CPU set holds",
                    CpuSet::MAX_CPU
                ),
            ));
        }
        let mut set = CpuSet::new();
        set.set(cpu);
        sched_setaffinity(None, &set).map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

/// The CPUs the calling thread may run on, ascending; empty where the platform does not say.
pub fn current_thread_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        affinity(None)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn auto_pins_one_worker_per_cpu_and_nothing_else() {
        assert_eq!(
            worker_cpus(WorkerPinning::Auto, 4, &[0, 1, 2, 3]),
            vec![Some(0), Some(1), Some(2), Some(3)]
        );
        // Fewer or more workers than CPUs, one CPU, no CPUs known: nothing.
        assert_eq!(
            worker_cpus(WorkerPinning::Auto, 3, &[0, 1, 2, 3]),
            vec![None; 3]
        );
        assert_eq!(
            worker_cpus(WorkerPinning::Auto, 5, &[0, 1, 2, 3]),
            vec![None; 5]
        );
        assert_eq!(worker_cpus(WorkerPinning::Auto, 1, &[7]), vec![None]);
        assert_eq!(worker_cpus(WorkerPinning::Auto, 2, &[]), vec![None; 2]);
    }

    #[test]
    fn always_goes_round_the_allowed_cpus_and_never_pins_nothing() {
        assert_eq!(worker_cpus(WorkerPinning::Always, 1, &[7]), vec![Some(7)]);
        assert_eq!(
            worker_cpus(WorkerPinning::Always, 5, &[1, 4]),
            vec![Some(1), Some(4), Some(1), Some(4), Some(1)]
        );
        assert_eq!(worker_cpus(WorkerPinning::Always, 2, &[]), vec![None; 2]);
        assert_eq!(worker_cpus(WorkerPinning::Never, 2, &[0, 1]), vec![None; 2]);
    }

    #[test]
    fn names_round_trip_and_a_wrong_one_is_named() {
        for name in WorkerPinning::NAMES {
            assert_eq!(name.parse::<WorkerPinning>().unwrap().to_string(), name);
        }
        let err = "Auto".parse::<WorkerPinning>().unwrap_err();
        assert!(err.to_string().contains("\"Auto\""), "{err}");
    }

    proptest! {
        /// Every pin is an allowed CPU; under `Auto` the pins are distinct.
        #[test]
        fn pins_are_allowed_cpus(
            workers in 0usize..70,
            allowed in proptest::collection::btree_set(0usize..1024, 0..70),
        ) {
            let allowed: Vec<usize> = allowed.into_iter().collect();
            for pinning in [WorkerPinning::Auto, WorkerPinning::Always, WorkerPinning::Never] {
                let cpus = worker_cpus(pinning, workers, &allowed);
                prop_assert_eq!(cpus.len(), workers);
                for cpu in cpus.iter().flatten() {
                    prop_assert!(allowed.contains(cpu));
                }
                if pinning == WorkerPinning::Auto {
                    let pinned: Vec<usize> = cpus.iter().flatten().copied().collect();
                    let distinct: std::collections::BTreeSet<_> = pinned.iter().collect();
                    prop_assert_eq!(distinct.len(), pinned.len());
                }
            }
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_thread_runs_on_its_cpu_alone() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty(), "Linux reports the process's CPUs");
        let cpu = *allowed.last().unwrap();
        let seen = std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            current_thread_cpus()
        })
        .join()
        .unwrap();
        assert_eq!(seen, vec![cpu]);
        assert!(pin_current_thread(usize::MAX).is_err());
    }
}
