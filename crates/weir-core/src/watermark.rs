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

/// When a watermark left the source that made it, on a monotonic clock shared by the whole
/// process: a sink that takes the watermark measures, from it, how long the results of the
/// windows it closed took to arrive ([`crate::metrics::LatencyHistogram`]).
///
/// It travels beside the watermark in the conveyors, not in [`Watermark`] itself, so
/// processors never see it. A processor that forwards a watermark forwards its source time;
/// one that makes a watermark of its own (a source, or one that held a watermark back and
/// sends it in a later call) stamps the time it sends it.
///
/// Cost: reading the clock, once per watermark sent, never per item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceTime(u64);

impl SourceTime {
    /// The clock's origin: the first time anything in the process read it.
    pub const ZERO: SourceTime = SourceTime(0);

    /// Now.
    pub fn now() -> SourceTime {
        SourceTime(clock_epoch().elapsed().as_nanos() as u64)
    }

    /// The time since this one, zero if it is in the future.
    pub fn elapsed(self) -> std::time::Duration {
        std::time::Duration::from_nanos(SourceTime::now().0.saturating_sub(self.0))
    }
}

/// The origin of [`SourceTime`]: the first time anything read the clock.
fn clock_epoch() -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// How one input of a [`WatermarkCoalescer`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueueState {
    /// Holds the minimum back with its last watermark.
    Active,
    /// Sent nothing for the idle timeout: ignored until it sends again.
    Idle,
    /// Finished: ignored for good.
    Done,
}

/// Tracks the watermark of several input queues and reports when their minimum advances.
///
/// A queue that finished, or that went idle (nothing received for the idle timeout), no
/// longer holds the minimum back; an idle queue counts again as soon as it sends something.
/// When every unfinished queue is idle, the highest watermark among them stands. The
/// coalesced watermark never goes back.
///
/// Cost: `observe` is O(1) unless it may change the minimum, then O(queues).
#[derive(Debug, Clone)]
pub struct WatermarkCoalescer {
    per_queue: Vec<i64>,
    state: Vec<QueueState>,
    emitted: i64,
}

impl WatermarkCoalescer {
    /// A coalescer over `queues` inputs, none of which has sent a watermark yet.
    pub fn new(queues: usize) -> Self {
        WatermarkCoalescer {
            per_queue: vec![i64::MIN; queues],
            state: vec![QueueState::Active; queues],
            emitted: i64::MIN,
        }
    }

    /// Records that `queue` sent `wm`. Returns the new coalesced watermark when it advanced.
    pub fn observe(&mut self, queue: usize, wm: Watermark) -> Option<Watermark> {
        self.activate(queue);
        if wm.0 <= self.per_queue[queue] {
            return None;
        }
        let was_min = self.per_queue[queue] <= self.emitted;
        self.per_queue[queue] = wm.0;
        if was_min { self.advance() } else { None }
    }

    /// Records that `queue` sent an item: an idle queue counts again.
    #[inline]
    pub fn activate(&mut self, queue: usize) {
        if self.state[queue] == QueueState::Idle {
            self.state[queue] = QueueState::Active;
        }
    }

    /// Records that `queue` went idle. Returns the new coalesced watermark when it advanced.
    pub fn queue_idle(&mut self, queue: usize) -> Option<Watermark> {
        if self.state[queue] != QueueState::Active {
            return None;
        }
        self.state[queue] = QueueState::Idle;
        self.advance()
    }

    /// Records that `queue` finished. Returns the new coalesced watermark when it advanced.
    pub fn queue_done(&mut self, queue: usize) -> Option<Watermark> {
        if self.state[queue] == QueueState::Done {
            return None;
        }
        self.state[queue] = QueueState::Done;
        self.advance()
    }

    /// Whether `queue` is idle.
    pub fn is_idle(&self, queue: usize) -> bool {
        self.state[queue] == QueueState::Idle
    }

    /// The last coalesced watermark reported.
    pub fn current(&self) -> Watermark {
        Watermark(self.emitted)
    }

    fn advance(&mut self) -> Option<Watermark> {
        let of = |wanted: QueueState| {
            self.per_queue
                .iter()
                .zip(&self.state)
                .filter(move |(_, state)| **state == wanted)
                .map(|(wm, _)| *wm)
        };
        // Active inputs bound the watermark. When every unfinished input is idle, none does:
        // the highest watermark any of them reached stands.
        let min = match of(QueueState::Active).min() {
            Some(min) => min,
            None => of(QueueState::Idle).max()?,
        };
        if min > self.emitted {
            self.emitted = min;
            Some(Watermark(min))
        } else {
            None
        }
    }
}

/// Thins out the watermarks a vertex forwards to those its consumers can act on: each is
/// rounded down to a multiple of the *granule* (aligned to the epoch) and sent only when that
/// multiple advances; [`Watermark::MAX`] always passes.
///
/// A planner sets a granule only when every event-time consumer downstream acts on multiples
/// of it alone (tumbling and sliding windows whose frames are multiples of it close exactly
/// when the watermark reaches a multiple), so throttling changes no result and delays no
/// window: the watermark that crosses a multiple is sent at once, rounded down to it. What it
/// saves is the watermarks in between, each of which would wake every consumer's worker: at a
/// low rate, one per item.
///
/// A granule of 1 or less passes every watermark unchanged, as if there were no throttle.
///
/// ```
/// use weir_core::watermark::{Watermark, WatermarkThrottle};
///
/// let mut t = WatermarkThrottle::new(1_000);
/// assert_eq!(t.admit(Watermark(1_999)), Some(Watermark(1_000)));
/// t.sent(Watermark(1_000));
/// assert_eq!(t.admit(Watermark(1_999)), None, "the same multiple: nothing new");
/// assert_eq!(t.admit(Watermark(2_000)), Some(Watermark(2_000)), "a window ending at 2 s closes");
/// assert_eq!(t.admit(Watermark::MAX), Some(Watermark::MAX));
/// ```
///
/// Cost: a remainder and a comparison per watermark offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatermarkThrottle {
    granule: i64,
    /// The last watermark sent through the throttle; `None` before the first.
    sent: Option<i64>,
}

impl Default for WatermarkThrottle {
    /// No throttling: every watermark passes.
    fn default() -> Self {
        WatermarkThrottle::new(1)
    }
}

impl WatermarkThrottle {
    /// A throttle to multiples of `granule` ms; 1 or less throttles nothing.
    pub fn new(granule: i64) -> Self {
        WatermarkThrottle {
            granule: granule.max(1),
            sent: None,
        }
    }

    /// The granule in ms (1: every watermark passes).
    pub fn granule(&self) -> i64 {
        self.granule
    }

    /// What to send for `wm`: `wm` rounded down to the granule, or `None` when that is no
    /// later than the last watermark sent (nothing a consumer could act on). Without a
    /// granule, `wm` itself, always.
    #[inline]
    pub fn admit(&self, wm: Watermark) -> Option<Watermark> {
        if self.granule <= 1 {
            return Some(wm);
        }
        let rounded = if wm == Watermark::MAX {
            wm
        } else {
            // Saturating: the rounding of a watermark near `i64::MIN` stays in range.
            Watermark(wm.0.saturating_sub(wm.0.rem_euclid(self.granule)))
        };
        match self.sent {
            Some(sent) if rounded.0 <= sent => None,
            _ => Some(rounded),
        }
    }

    /// Records that `wm`, as [`admit`](Self::admit) gave it, went out.
    #[inline]
    pub fn sent(&mut self, wm: Watermark) {
        if self.granule > 1 {
            self.sent = Some(wm.0);
        }
    }
}

/// Generates a source's watermarks from the event times it sees: per partition, the highest
/// timestamp seen minus the allowed lag; for the source, the minimum over its partitions that
/// are not idle. An event behind the source's current watermark is late.
///
/// ```
/// use weir_core::watermark::{EventTimeTracker, Watermark};
///
/// let mut t = EventTimeTracker::new(1, 100);
/// assert!(t.accept(0, 1_000));
/// assert_eq!(t.watermark(), Watermark(900));
/// assert!(t.accept(0, 950), "behind the highest time, but within the lag");
/// assert!(!t.accept(0, 899), "behind the watermark: late");
/// ```
#[derive(Debug, Clone)]
pub struct EventTimeTracker {
    lag: i64,
    /// Highest timestamp seen per partition; `None` before the first.
    highest: Vec<Option<i64>>,
    idle: Vec<bool>,
    /// The watermark those give, kept up to date so that `accept` reads it instead of
    /// taking the minimum over every partition per event.
    current: Watermark,
}

impl EventTimeTracker {
    /// A tracker of `partitions` partitions with `allowed_lag` (ms).
    pub fn new(partitions: usize, allowed_lag: i64) -> Self {
        EventTimeTracker {
            lag: allowed_lag.max(0),
            highest: vec![None; partitions.max(1)],
            idle: vec![false; partitions.max(1)],
            current: Watermark::MIN,
        }
    }

    /// Sees an event of `partition` at `timestamp`. Returns false, changing nothing, when the
    /// event is late (behind the current watermark).
    ///
    /// Cost: a comparison with the current watermark; the minimum over the partitions is taken
    /// again only when this event may move it (it raises the partition that holds the
    /// watermark back, or wakes an idle one).
    #[inline]
    pub fn accept(&mut self, partition: usize, timestamp: i64) -> bool {
        if timestamp < self.current.0 {
            return false;
        }
        let woke = std::mem::replace(&mut self.idle[partition], false);
        let h = &mut self.highest[partition];
        let previous = *h;
        if previous.is_none_or(|h| timestamp > h) {
            *h = Some(timestamp);
            // Raising a partition that is above the minimum leaves the minimum where it is.
            if woke || previous.is_none_or(|h| h.saturating_sub(self.lag) <= self.current.0) {
                self.current = self.minimum();
            }
        } else if woke {
            self.current = self.minimum();
        }
        true
    }

    /// The highest timestamp seen per partition (`None` before the first) and whether each
    /// is idle: what a source saves in a snapshot so that its watermark and its lateness go
    /// on after a restore exactly as they would have.
    pub fn state(&self) -> (&[Option<i64>], &[bool]) {
        (&self.highest, &self.idle)
    }

    /// Takes back what [`state`](Self::state) gave. Returns false, changing nothing, when
    /// the partition count differs.
    pub fn restore(&mut self, highest: &[Option<i64>], idle: &[bool]) -> bool {
        if highest.len() != self.highest.len() || idle.len() != self.idle.len() {
            return false;
        }
        self.highest.copy_from_slice(highest);
        self.idle.copy_from_slice(idle);
        self.current = self.minimum();
        true
    }

    /// Marks `partition` idle: it stops holding the watermark back until its next event.
    pub fn mark_idle(&mut self, partition: usize) {
        if !std::mem::replace(&mut self.idle[partition], true) {
            self.current = self.minimum();
        }
    }

    /// The source's watermark: the minimum over active partitions of highest − lag, or
    /// [`Watermark::MIN`] before every active partition has seen an event.
    #[inline]
    pub fn watermark(&self) -> Watermark {
        self.current
    }

    /// The watermark computed from the partitions: what `current` caches.
    fn minimum(&self) -> Watermark {
        let mut min = i64::MAX;
        let mut any = false;
        for (h, idle) in self.highest.iter().zip(&self.idle) {
            if *idle {
                continue;
            }
            any = true;
            match h {
                Some(h) => min = min.min(h.saturating_sub(self.lag)),
                None => return Watermark::MIN,
            }
        }
        if any { Watermark(min) } else { Watermark::MIN }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every window end that is a multiple of the granule: the throttled stream reaches it
    /// in the same step as the unthrottled one, so no window closes later.
    #[test]
    fn a_throttle_never_holds_back_a_watermark_that_closes_a_window() {
        let granule = 2_000;
        let mut t = WatermarkThrottle::new(granule);
        let mut throttled = i64::MIN;
        let mut sent = 0;
        // Watermarks a millisecond apart, some steps jumping over several multiples.
        let steps = (0..20_000i64).map(|i| i * 3 + (i / 1000) * 4_567);
        for wm in steps {
            if let Some(out) = t.admit(Watermark(wm)) {
                assert!(out.0 > throttled, "watermarks only advance");
                assert_eq!(out.0 % granule, 0, "rounded to the granule");
                assert!(out.0 <= wm, "never ahead of the watermark it stands for");
                t.sent(out);
                throttled = out.0;
                sent += 1;
            }
            // A window ending at any multiple `e <= wm` closes now in both streams.
            assert_eq!(throttled, wm - wm.rem_euclid(granule));
        }
        assert!(sent < 200, "{sent} watermarks sent for 20,000 offered");
        assert_eq!(t.admit(Watermark::MAX), Some(Watermark::MAX));
    }

    #[test]
    fn an_unsent_watermark_is_offered_again() {
        let mut t = WatermarkThrottle::new(10);
        assert_eq!(t.admit(Watermark(25)), Some(Watermark(20)));
        // The ports were full: not recorded, so the next offer still sends.
        assert_eq!(t.admit(Watermark(27)), Some(Watermark(20)));
        t.sent(Watermark(20));
        assert_eq!(t.admit(Watermark(29)), None);
    }

    #[test]
    fn without_a_granule_every_watermark_passes_unchanged() {
        let mut t = WatermarkThrottle::default();
        for wm in [5, 5, 3, i64::MIN, i64::MAX] {
            assert_eq!(t.admit(Watermark(wm)), Some(Watermark(wm)));
            t.sent(Watermark(wm));
        }
        assert_eq!(WatermarkThrottle::new(0).granule(), 1);
    }

    #[test]
    fn a_throttle_rounds_negative_and_extreme_times_down() {
        let t = WatermarkThrottle::new(1_000);
        assert_eq!(t.admit(Watermark(-1)), Some(Watermark(-1_000)));
        assert_eq!(t.admit(Watermark::MIN), Some(Watermark::MIN));
    }

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
    fn idle_queue_stops_holding_back_until_it_sends_again() {
        let mut c = WatermarkCoalescer::new(2);
        assert_eq!(c.observe(0, Watermark(10)), None);
        assert_eq!(c.queue_idle(1), Some(Watermark(10)));
        assert_eq!(c.observe(0, Watermark(20)), Some(Watermark(20)));
        c.activate(1);
        assert_eq!(
            c.observe(0, Watermark(30)),
            None,
            "queue 1 holds it back again"
        );
        assert_eq!(c.observe(1, Watermark(25)), Some(Watermark(25)));
    }

    #[test]
    fn when_every_input_is_idle_the_highest_watermark_stands() {
        let mut c = WatermarkCoalescer::new(2);
        assert_eq!(c.observe(0, Watermark(100)), None);
        assert_eq!(
            c.queue_idle(0),
            None,
            "queue 1 is active and has said nothing"
        );
        assert_eq!(c.queue_idle(1), Some(Watermark(100)));
    }

    #[test]
    fn tracker_takes_the_minimum_over_active_partitions() {
        let mut t = EventTimeTracker::new(2, 10);
        assert!(t.accept(0, 100));
        assert_eq!(
            t.watermark(),
            Watermark::MIN,
            "partition 1 has seen nothing yet"
        );
        assert!(t.accept(1, 50));
        assert_eq!(t.watermark(), Watermark(40));
        t.mark_idle(1);
        assert_eq!(t.watermark(), Watermark(90));
        assert!(!t.accept(1, 60), "late against the source's watermark");
        assert!(t.accept(1, 95));
        assert_eq!(t.watermark(), Watermark(85));
    }

    #[test]
    fn finished_queue_stops_holding_back() {
        let mut c = WatermarkCoalescer::new(2);
        assert_eq!(c.observe(0, Watermark(10)), None);
        assert_eq!(c.queue_done(1), Some(Watermark(10)));
        assert_eq!(c.queue_done(0), None, "no queue left: nothing new to say");
    }

    /// The tracker as it was before it cached its watermark: the minimum taken per event.
    #[derive(Clone)]
    struct NaiveTracker {
        lag: i64,
        highest: Vec<Option<i64>>,
        idle: Vec<bool>,
    }

    impl NaiveTracker {
        fn watermark(&self) -> Watermark {
            let mut min = i64::MAX;
            let mut any = false;
            for (h, idle) in self.highest.iter().zip(&self.idle) {
                if *idle {
                    continue;
                }
                any = true;
                match h {
                    Some(h) => min = min.min(h.saturating_sub(self.lag)),
                    None => return Watermark::MIN,
                }
            }
            if any { Watermark(min) } else { Watermark::MIN }
        }

        fn accept(&mut self, partition: usize, timestamp: i64) -> bool {
            if timestamp < self.watermark().0 {
                return false;
            }
            self.idle[partition] = false;
            let h = &mut self.highest[partition];
            if h.is_none_or(|h| timestamp > h) {
                *h = Some(timestamp);
            }
            true
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Accept(usize, i64),
        Idle(usize),
        /// Save the state, as a snapshot does.
        Save,
        /// Restore the last saved state.
        Restore,
    }

    fn step(partitions: usize) -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0..partitions, -20i64..200).prop_map(|(p, t)| Step::Accept(p, t)),
            2 => (0..partitions).prop_map(Step::Idle),
            1 => Just(Step::Save),
            1 => Just(Step::Restore),
        ]
    }

    proptest::proptest! {
        /// The cached watermark is always the minimum the naive tracker takes, and both
        /// accept and drop the same events, through idleness and restores.
        #[test]
        fn cached_watermark_is_the_minimum(
            partitions in 1usize..4,
            lag in 0i64..30,
            steps in proptest::collection::vec(step(3), 0..200),
        ) {
            let mut tracker = EventTimeTracker::new(partitions, lag);
            let mut naive = NaiveTracker {
                lag,
                highest: vec![None; partitions],
                idle: vec![false; partitions],
            };
            let mut saved = (naive.highest.clone(), naive.idle.clone());
            for (i, s) in steps.into_iter().enumerate() {
                match s {
                    Step::Accept(p, t) => {
                        let p = p % partitions;
                        proptest::prop_assert_eq!(tracker.accept(p, t), naive.accept(p, t), "step {}", i);
                    }
                    Step::Idle(p) => {
                        let p = p % partitions;
                        tracker.mark_idle(p);
                        naive.idle[p] = true;
                    }
                    Step::Save => {
                        let (h, idle) = tracker.state();
                        saved = (h.to_vec(), idle.to_vec());
                    }
                    Step::Restore => {
                        proptest::prop_assert!(tracker.restore(&saved.0, &saved.1));
                        naive.highest.clone_from(&saved.0);
                        naive.idle.clone_from(&saved.1);
                    }
                }
                proptest::prop_assert_eq!(tracker.watermark(), naive.watermark(), "after step {}", i);
            }
        }
    }
}
