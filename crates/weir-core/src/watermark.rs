//! Event-time watermarks.
//!
//! A watermark `w` is a promise from upstream: no more items with an event time below `w`
//! will arrive (items that do are *late*). It travels in-band through the conveyors, after the
//! items that preceded it. A processor with several inputs follows the *minimum* over them:
//! [`WatermarkCoalescer`] keeps that minimum, and the tasklet hands each advance to
//! [`Processor::try_process_watermark`](crate::Processor::try_process_watermark).

/// A point in event time, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Watermark(pub i64);

impl Watermark {
    /// The watermark a finished finite source sends: every window may close.
    pub const MAX: Watermark = Watermark(i64::MAX);
    /// No progress yet.
    pub const MIN: Watermark = Watermark(i64::MIN);

    /// The timestamp.
    pub fn timestamp(self) -> i64 {
        self.0
    }
}

/// Tracks the watermark of several input queues and reports when their minimum advances.
///
/// A queue that finished (its producer sent the done marker) no longer holds the minimum back.
/// Cost: `observe` is O(1) unless it changes the minimum, then O(queues).
#[derive(Debug, Clone)]
pub struct WatermarkCoalescer {
    per_queue: Vec<i64>,
    done: Vec<bool>,
    emitted: i64,
}

impl WatermarkCoalescer {
    /// A coalescer over `queues` inputs, none of which has sent a watermark yet.
    pub fn new(queues: usize) -> Self {
        WatermarkCoalescer {
            per_queue: vec![i64::MIN; queues],
            done: vec![false; queues],
            emitted: i64::MIN,
        }
    }

    /// Records that `queue` sent `wm`. Returns the new coalesced watermark when it advanced.
    pub fn observe(&mut self, queue: usize, wm: Watermark) -> Option<Watermark> {
        if wm.0 <= self.per_queue[queue] {
            return None;
        }
        let was_min = self.per_queue[queue] <= self.emitted;
        self.per_queue[queue] = wm.0;
        if was_min { self.advance() } else { None }
    }

    /// Records that `queue` finished. Returns the new coalesced watermark when it advanced.
    pub fn queue_done(&mut self, queue: usize) -> Option<Watermark> {
        if self.done[queue] {
            return None;
        }
        self.done[queue] = true;
        self.advance()
    }

    /// The last coalesced watermark reported.
    pub fn current(&self) -> Watermark {
        Watermark(self.emitted)
    }

    fn advance(&mut self) -> Option<Watermark> {
        let min = self
            .per_queue
            .iter()
            .zip(&self.done)
            .filter(|(_, done)| !**done)
            .map(|(wm, _)| *wm)
            .min()?;
        if min > self.emitted {
            self.emitted = min;
            Some(Watermark(min))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimum_over_queues() {
        let mut c = WatermarkCoalescer::new(2);
        assert_eq!(c.observe(0, Watermark(10)), None);
        assert_eq!(c.observe(1, Watermark(5)), Some(Watermark(5)));
        assert_eq!(c.observe(1, Watermark(20)), Some(Watermark(10)));
        assert_eq!(c.observe(0, Watermark(8)), None, "watermarks never go back");
        assert_eq!(c.observe(0, Watermark(30)), Some(Watermark(20)));
    }

    #[test]
    fn finished_queue_stops_holding_back() {
        let mut c = WatermarkCoalescer::new(2);
        assert_eq!(c.observe(0, Watermark(10)), None);
        assert_eq!(c.queue_done(1), Some(Watermark(10)));
        assert_eq!(c.queue_done(0), None, "no queue left: nothing new to say");
    }
}
