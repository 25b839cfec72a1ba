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

/// What a progress bar counts.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// Bytes read, shown with binary prefixes.
    Bytes,
    /// Items (events, rows), shown as counts.
    Items,
}

/// Waits for `job` to end, drawing a bar of the processor counter `counter_name` (summed over
/// instances) against `total` when standard error is a terminal; with `total` 0 (unknown), a
/// spinner with the count and rate. Returns the job's final metrics.
pub fn watch(job: &Job, total: u64, counter_name: &str, unit: Unit) -> Vec<MetricsSnapshot> {
    let bar = std::io::stderr().is_terminal().then(|| {
        let (done, rate) = match unit {
            Unit::Bytes => ("{bytes}", "{binary_bytes_per_sec}"),
            Unit::Items => ("{human_pos}", "{per_sec}"),
        };
        let (bar, template) = if total == 0 {
            (
                ProgressBar::new_spinner(),
                format!("{{spinner}} [{{elapsed_precise}}] {done} {rate}"),
            )
        } else {
            let of = match unit {
                Unit::Bytes => "{total_bytes}",
                Unit::Items => "{human_len}",
            };
            (
                ProgressBar::new(total),
                format!(
                    "{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {done}/{of} {rate} eta {{eta}}"
                ),
            )
        };
        bar.set_style(ProgressStyle::with_template(&template).expect("the template is valid"));
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
