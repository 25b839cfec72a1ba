//! Watching a running job: a progress bar on a terminal, nothing otherwise.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use weir::Job;
use weir::core::MetricsSnapshot;

/// Sums the processor counter `name` over every instance.
pub fn counter(metrics: &[MetricsSnapshot], name: &str) -> u64 {
    metrics.iter().map(|m| m.counter(name)).sum()
}

/// Like [`watch`], for a bar counting items (the processor counter `counter_name`) up to
/// `total`.
pub fn watch_count(job: &Job, total: u64, counter_name: &str) -> Vec<MetricsSnapshot> {
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} {per_sec} eta {eta}")
                .expect("the template is valid"),
        );
        bar
    });
    while !job.wait_timeout(Duration::from_millis(100)) {
        if let Some(bar) = &bar {
            bar.set_position(counter(&job.metrics(), counter_name));
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    job.metrics()
}

/// Waits for `job` to end, drawing a bar of the processor counter `bytes_counter` against
/// `total_bytes` when standard error is a terminal. Returns the job's final metrics.
pub fn watch(job: &Job, total_bytes: u64, bytes_counter: &str) -> Vec<MetricsSnapshot> {
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(total_bytes);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}")
                .expect("the template is valid"),
        );
        bar
    });
    while !job.wait_timeout(Duration::from_millis(100)) {
        if let Some(bar) = &bar {
            bar.set_position(counter(&job.metrics(), bytes_counter));
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    job.metrics()
}
