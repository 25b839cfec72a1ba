//! What the core benchmarks share: turning criterion's timed calls into items per second.

use std::time::Duration;

/// Throughput in items per second: the mean over the measured samples, and the slowest and
/// fastest sample.
pub struct Rate {
    pub mean: f64,
    pub slowest: f64,
    pub fastest: f64,
}

/// The rate of the last `measured` samples (criterion's timed calls; the earlier ones are
/// warm-up), each `(iterations, time)`, with `items_per_iter` items per iteration.
pub fn items_per_second(samples: &[(u64, Duration)], items_per_iter: u64, measured: usize) -> Rate {
    let measured = &samples[samples.len().saturating_sub(measured)..];
    let rate = |iters: u64, time: Duration| (iters * items_per_iter) as f64 / time.as_secs_f64();
    let per_sample = measured.iter().map(|(i, d)| rate(*i, *d));
    Rate {
        mean: rate(
            measured.iter().map(|(i, _)| i).sum(),
            measured.iter().map(|(_, d)| *d).sum(),
        ),
        slowest: per_sample.clone().fold(f64::INFINITY, f64::min),
        fastest: per_sample.fold(0.0, f64::max),
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.mean.is_nan() {
            return f.write_str("not run");
        }
        write!(
            f,
            "{:.1} M items/s (samples {:.1}..{:.1})",
            self.mean / 1e6,
            self.slowest / 1e6,
            self.fastest / 1e6
        )
    }
}
