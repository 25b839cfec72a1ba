//! This process's own figures for `/metrics`: CPU time, resident memory and open files.
//!
//! CPU time comes from `cpu-time` (`getrusage`-like, any platform); resident memory and open
//! files from `/proc/self` on Linux, and are absent elsewhere.

use std::time::Duration;

/// A reading of the process's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStats {
    /// User plus system CPU time since the process started.
    pub cpu: Duration,
    /// Resident set size in bytes; `None` where `/proc` is missing.
    pub resident_bytes: Option<u64>,
    /// Open file descriptors; `None` where `/proc` is missing.
    pub open_fds: Option<u64>,
}

impl ProcessStats {
    /// Reads the figures now: a `clock_gettime` and two small reads of `/proc/self`.
    pub fn read() -> ProcessStats {
        ProcessStats {
            cpu: cpu_time::ProcessTime::try_now()
                .map(|t| t.as_duration())
                .unwrap_or_default(),
            resident_bytes: resident_bytes(),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|entries| entries.count() as u64),
        }
    }
}

/// `VmRSS` of `/proc/self/status`, which the kernel gives in kB.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_bytes() {
        let status = "Name:\tweir\nVmPeak:\t  1000 kB\nVmRSS:\t    2048 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss(status), Some(2048 * 1024));
        assert_eq!(parse_vm_rss("Name:\tweir\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_memory_files_and_cpu_time() {
        let s = ProcessStats::read();
        assert!(s.resident_bytes.unwrap() > 0);
        assert!(s.open_fds.unwrap() >= 3, "stdin, stdout, stderr at least");
    }
}
