//! The one exponential backoff of Weir: how long to pause before the next attempt of
//! something that failed, whether an async call's retry, a job's restart or a connector's
//! reconnection.
//!
//! ```
//! use std::time::Duration;
//! use weir_backoff::Backoff;
//!
//! let backoff = Backoff::new(Duration::from_millis(100), 2.0, Duration::from_secs(5));
//! assert_eq!(backoff.pause(0), Duration::from_millis(100));
//! assert_eq!(backoff.pause(3), Duration::from_millis(800));
//! assert_eq!(backoff.pause(30), Duration::from_secs(5));
//! ```
//!
//! It has no dependencies, so every layer can use it: the core runtime, the execution links
//! and the connectors to outside services.

use std::time::Duration;

/// Pauses that start at `initial` and grow `multiplier` times with each further attempt, up
/// to `max`. Cheap to copy; computing a pause is a few floating-point operations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    initial: Duration,
    multiplier: f64,
    max: Duration,
}

impl Backoff {
    /// Pauses of `initial`, then `multiplier` (at least 1; less, or NaN, counts as 1) times
    /// longer each time, capped at `max`.
    pub const fn new(initial: Duration, multiplier: f64, max: Duration) -> Backoff {
        Backoff {
            initial,
            multiplier,
            max,
        }
    }

    /// The pause before the attempt after `failures` failures beyond the first (0: the first
    /// retry waits `initial`). Never more than `max`, whatever `failures` is.
    pub fn pause(&self, failures: u32) -> Duration {
        let multiplier = if self.multiplier >= 1.0 {
            self.multiplier
        } else {
            1.0
        };
        let factor = multiplier.powi(failures.min(i32::MAX as u32) as i32);
        let secs = (self.initial.as_secs_f64() * factor).min(self.max.as_secs_f64());
        Duration::try_from_secs_f64(secs).unwrap_or(self.max)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn doubling_from_100_ms_is_capped() {
        let b = Backoff::new(Duration::from_millis(100), 2.0, Duration::from_secs(10));
        let pauses: Vec<u64> = (0..9).map(|n| b.pause(n).as_millis() as u64).collect();
        assert_eq!(
            pauses,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]
        );
        assert_eq!(b.pause(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn a_multiplier_below_one_or_nan_keeps_the_initial_pause() {
        for m in [0.0, 0.5, f64::NAN] {
            let b = Backoff::new(Duration::from_millis(7), m, Duration::from_secs(1));
            assert_eq!(b.pause(5), Duration::from_millis(7));
        }
    }

    proptest! {
        /// Pauses never shrink as failures grow, and never pass the cap.
        #[test]
        fn pauses_grow_to_the_cap(
            initial_ms in 0u64..10_000,
            multiplier in 0.0f64..10.0,
            max_ms in 0u64..100_000,
            n in 0u32..200,
        ) {
            let b = Backoff::new(
                Duration::from_millis(initial_ms),
                multiplier,
                Duration::from_millis(max_ms),
            );
            prop_assert!(b.pause(n) <= b.pause(n + 1));
            prop_assert!(b.pause(n) <= Duration::from_millis(max_ms));
        }
    }
}
