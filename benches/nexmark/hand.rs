//! The hand-written loops, the yardstick: q0, q5, q7 and q11 as a good engineer writes them.

use super::*;

/// The reference's event time: one watermark over all events, `max(date_time seen) - lag`;
/// an event below it is late, and a late event does not move it.
pub(crate) struct EventClock {
    pub(crate) max_seen: i64,
    pub(crate) lag: i64,
}

impl EventClock {
    pub(crate) fn new(lag: i64) -> Self {
        EventClock {
            max_seen: i64::MIN,
            lag,
        }
    }

    /// Whether an event at `t` is on time; if so, it counts as seen.
    #[inline]
    pub(crate) fn admit(&mut self, t: i64) -> bool {
        if t < self.max_seen.saturating_sub(self.lag) {
            return false;
        }
        self.max_seen = self.max_seen.max(t);
        true
    }

    #[inline]
    pub(crate) fn watermark(&self) -> i64 {
        self.max_seen.saturating_sub(self.lag)
    }
}

/// What the query hand loops read of an event: its time, and a bid's auction, bidder and
/// price. The generator's events and the tight file loop's records both give it.
pub(crate) trait EventView {
    fn time(&self) -> i64;
    fn bid(&self) -> Option<(i64, i64, i64)>;
}

impl EventView for Event {
    #[inline]
    fn time(&self) -> i64 {
        self.date_time()
    }
    #[inline]
    fn bid(&self) -> Option<(i64, i64, i64)> {
        match self {
            Event::Bid(b) => Some((b.auction, b.bidder, b.price)),
            _ => None,
        }
    }
}

/// The source alone: every event checksummed, as the source-only Weir job's sink does.
pub(crate) fn hand_source(events: impl Iterator<Item = Event>) -> Checksum {
    let mut sum = Checksum::default();
    for e in events {
        sum.add(&e);
    }
    sum
}

/// q0: every on-time bid, as a row.
pub(crate) fn hand_q0(events: impl Iterator<Item = impl EventView>, lag: i64) -> Checksum {
    let mut clock = EventClock::new(lag);
    let mut sum = Checksum::default();
    for e in events {
        let t = e.time();
        if !clock.admit(t) {
            continue;
        }
        if let Some((auction, bidder, price)) = e.bid() {
            sum.add(&Q0Row {
                auction,
                bidder,
                price,
                date_time: t,
            });
        }
    }
    sum
}

/// q5's state: bid counts per auction in 2 s frames, oldest first; a 10 s window is the sum
/// of its five frames. A window fires once the watermark reaches its end, and the frames no
/// later window needs are recycled.
pub(crate) struct HotItems {
    /// (frame start, bids per auction), sorted by start.
    pub(crate) frames: VecDeque<(i64, FxHashMap<i64, u32>)>,
    /// The first window start not fired yet.
    pub(crate) next_start: i64,
    /// The watermark at which the first window that holds a frame fires: the end of
    /// [`first_window`](Self::first_window), kept up to date so that each event costs one
    /// comparison.
    pub(crate) fire_at: i64,
    pub(crate) spare: Vec<FxHashMap<i64, u32>>,
    pub(crate) window: FxHashMap<i64, u32>,
    pub(crate) top: Vec<i64>,
}

impl HotItems {
    pub(crate) fn new() -> Self {
        HotItems {
            frames: VecDeque::new(),
            next_start: i64::MIN,
            fire_at: i64::MAX,
            spare: Vec::new(),
            window: FxHashMap::default(),
            top: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn count(&mut self, auction: i64, t: i64) {
        let frame = t.div_euclid(Q5_SLIDE_MS) * Q5_SLIDE_MS;
        // Bids come in time order give or take the lag: their frame is the newest or close.
        let mut i = self.frames.len();
        while i > 0 && self.frames[i - 1].0 > frame {
            i -= 1;
        }
        if i == 0 || self.frames[i - 1].0 != frame {
            let map = self.spare.pop().unwrap_or_default();
            self.frames.insert(i, (frame, map));
            i += 1;
            self.fire_at = self.next_fire_at();
        }
        *self.frames[i - 1].1.entry(auction).or_insert(0) += 1;
    }

    /// The first window not fired yet that holds a frame, if any.
    #[inline]
    pub(crate) fn first_window(&self) -> Option<i64> {
        let (oldest, _) = self.frames.front()?;
        Some(self.next_start.max(oldest - (Q5_WINDOW_MS - Q5_SLIDE_MS)))
    }

    pub(crate) fn next_fire_at(&self) -> i64 {
        self.first_window()
            .map_or(i64::MAX, |start| start.saturating_add(Q5_WINDOW_MS))
    }

    /// Fires every window whose end is at or below `watermark`.
    #[inline]
    pub(crate) fn advance(&mut self, watermark: i64, sum: &mut Checksum) {
        if watermark < self.fire_at {
            return;
        }
        while let Some(start) = self.first_window() {
            if start.saturating_add(Q5_WINDOW_MS) > watermark {
                break;
            }
            self.fire(start, sum);
            self.next_start = start + Q5_SLIDE_MS;
            while self.frames.front().is_some_and(|f| f.0 < self.next_start) {
                let (_, mut map) = self.frames.pop_front().expect("a frame");
                map.clear();
                self.spare.push(map);
            }
        }
        self.fire_at = self.next_fire_at();
    }

    pub(crate) fn fire(&mut self, start: i64, sum: &mut Checksum) {
        let end = start + Q5_WINDOW_MS;
        self.window.clear();
        for (_, frame) in self.frames.iter().take_while(|f| f.0 < end) {
            for (&auction, &n) in frame {
                *self.window.entry(auction).or_insert(0) += n;
            }
        }
        let mut max = 0;
        self.top.clear();
        for (&auction, &n) in &self.window {
            if n > max {
                max = n;
                self.top.clear();
            }
            if n == max {
                self.top.push(auction);
            }
        }
        for &auction in &self.top {
            sum.add(&Q5Row {
                window_start: start,
                window_end: end,
                auction,
                num: u64::from(max),
            });
        }
    }
}

/// q5: per 10 s window sliding by 2 s, the auctions with the most bids.
pub(crate) fn hand_q5(events: impl Iterator<Item = impl EventView>, lag: i64) -> Checksum {
    let mut clock = EventClock::new(lag);
    let mut state = HotItems::new();
    let mut sum = Checksum::default();
    for e in events {
        let t = e.time();
        if !clock.admit(t) {
            continue;
        }
        if let Some((auction, _, _)) = e.bid() {
            state.count(auction, t);
        }
        state.advance(clock.watermark(), &mut sum);
    }
    state.advance(i64::MAX, &mut sum);
    sum
}

/// One open window of q7: its highest price and the bids that have it.
pub(crate) struct TopBids {
    pub(crate) start: i64,
    pub(crate) price: i64,
    /// (auction, bidder, date_time) of each bid at `price`.
    pub(crate) bids: Vec<(i64, i64, i64)>,
}

/// q7: per 10 s tumbling window, the bids with the highest price.
pub(crate) fn hand_q7(events: impl Iterator<Item = impl EventView>, lag: i64) -> Checksum {
    let mut clock = EventClock::new(lag);
    let mut open: VecDeque<TopBids> = VecDeque::new();
    let mut spare: Vec<Vec<(i64, i64, i64)>> = Vec::new();
    let mut sum = Checksum::default();
    let fire = |w: TopBids, sum: &mut Checksum, spare: &mut Vec<Vec<_>>| {
        for &(auction, bidder, date_time) in &w.bids {
            sum.add(&Q7Row {
                window_start: w.start,
                window_end: w.start + Q7_WINDOW_MS,
                auction,
                bidder,
                price: w.price,
                date_time,
            });
        }
        let mut bids = w.bids;
        bids.clear();
        spare.push(bids);
    };
    for e in events {
        let t = e.time();
        if !clock.admit(t) {
            continue;
        }
        if let Some((auction, bidder, price)) = e.bid() {
            let start = t.div_euclid(Q7_WINDOW_MS) * Q7_WINDOW_MS;
            let mut i = open.len();
            while i > 0 && open[i - 1].start > start {
                i -= 1;
            }
            if i == 0 || open[i - 1].start != start {
                let bids = spare.pop().unwrap_or_default();
                open.insert(
                    i,
                    TopBids {
                        start,
                        price: i64::MIN,
                        bids,
                    },
                );
                i += 1;
            }
            let w = &mut open[i - 1];
            if price > w.price {
                w.price = price;
                w.bids.clear();
            }
            if price == w.price {
                w.bids.push((auction, bidder, t));
            }
        }
        let watermark = clock.watermark();
        while open
            .front()
            .is_some_and(|w| w.start + Q7_WINDOW_MS <= watermark)
        {
            fire(open.pop_front().expect("a window"), &mut sum, &mut spare);
        }
    }
    while let Some(w) = open.pop_front() {
        fire(w, &mut sum, &mut spare);
    }
    sum
}

/// One open session of a bidder in q11.
#[derive(Clone, Copy)]
pub(crate) struct Session {
    pub(crate) start: i64,
    /// The last bid's time plus the gap (exclusive).
    pub(crate) end: i64,
    pub(crate) count: u64,
}

/// q11: per bidder, bids per session (a 10 s gap ends one). Each bidder's open sessions
/// (nearly always one) in a map, and a min-heap of `(end, bidder, start)` with one entry per
/// open session, pushed when the session starts: a bid that only extends a session pushes
/// nothing. A popped entry whose session grew since is pushed again with the new end; one
/// whose session was merged into another (a bid bridging two, out of order within the lag)
/// finds no session with its start and is dropped.
pub(crate) fn hand_q11(events: impl Iterator<Item = impl EventView>, lag: i64) -> Checksum {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    type Ends = BinaryHeap<Reverse<(i64, i64, i64)>>;
    let mut clock = EventClock::new(lag);
    let mut open: FxHashMap<i64, Vec<Session>> = FxHashMap::default();
    let mut ends: Ends = BinaryHeap::new();
    let mut sum = Checksum::default();
    let close = |watermark: i64,
                 open: &mut FxHashMap<i64, Vec<Session>>,
                 ends: &mut Ends,
                 sum: &mut Checksum| {
        while let Some(&Reverse((end, bidder, start))) = ends.peek() {
            if end > watermark {
                break;
            }
            ends.pop();
            let Some(sessions) = open.get_mut(&bidder) else {
                continue;
            };
            let Some(i) = sessions.iter().position(|s| s.start == start) else {
                continue; // merged into another session, which has its own entry
            };
            let s = sessions[i];
            if s.end > watermark {
                ends.push(Reverse((s.end, bidder, start)));
                continue;
            }
            sessions.swap_remove(i);
            sum.add(&Q11Row {
                bidder,
                bid_count: s.count,
                window_start: s.start,
                window_end: s.end,
            });
            if sessions.is_empty() {
                open.remove(&bidder);
            }
        }
    };
    for e in events {
        let t = e.time();
        if !clock.admit(t) {
            continue;
        }
        if let Some((_, bidder, _)) = e.bid() {
            let sessions = open.entry(bidder).or_default();
            let mut merged = Session {
                start: t,
                end: t.saturating_add(Q11_SESSION_GAP_MS),
                count: 1,
            };
            // The earliest start among the sessions the bid joins: that session's entry
            // stands for the merged one, unless the bid itself starts it.
            let mut earliest_joined = i64::MAX;
            let mut i = 0;
            while i < sessions.len() {
                let s = sessions[i];
                if s.start < merged.end && merged.start < s.end {
                    sessions.swap_remove(i);
                    earliest_joined = earliest_joined.min(s.start);
                    merged.start = merged.start.min(s.start);
                    merged.end = merged.end.max(s.end);
                    merged.count += s.count;
                } else {
                    i += 1;
                }
            }
            sessions.push(merged);
            if t < earliest_joined {
                ends.push(Reverse((merged.end, bidder, merged.start)));
            }
        }
        close(clock.watermark(), &mut open, &mut ends, &mut sum);
    }
    close(i64::MAX, &mut open, &mut ends, &mut sum);
    sum
}

/// The strings `query` reads, which its runs keep when they parse (engine and hand loops
/// alike); the source alone checksums every field, so keeps them all.
pub(crate) fn kept_strings(query: Option<Query>) -> KeptStrings {
    query.map_or(KeptStrings::ALL, KeptStrings::for_query)
}

/// Runs the hand loop of `query` (or of the source alone) over `events`.
pub(crate) fn hand_run(
    query: Option<Query>,
    events: impl Iterator<Item = Event>,
    lag: i64,
) -> Checksum {
    match query {
        None => hand_source(events),
        Some(q) => hand_query(q, events, lag),
    }
}

/// Runs the hand loop of `query` over `events`.
pub(crate) fn hand_query(
    query: Query,
    events: impl Iterator<Item = impl EventView>,
    lag: i64,
) -> Checksum {
    match query {
        Query::Q0 => hand_q0(events, lag),
        Query::Q5 => hand_q5(events, lag),
        Query::Q7 => hand_q7(events, lag),
        Query::Q11 => hand_q11(events, lag),
        q => panic!("{q} has no hand loop"),
    }
}

/// Child: the hand loop of `query` over `input`.
pub(crate) fn hand_child(query: Option<Query>, input: &Input, threads: usize) -> Checksum {
    match input {
        // A query over a file: the tight loop, on as many threads as the Weir run's parallelism.
        Input::File { path, .. } if let Some(q) = query => {
            let mut records = TightFileRecords::open(path, threads);
            let sum = hand_query(q, &mut records, LAG_MS);
            assert_eq!(
                records.malformed,
                0,
                "malformed lines in {}",
                path.display()
            );
            sum
        }
        Input::File { path, .. } if threads > 1 => {
            let mut events = ParallelFileEvents::open(path, threads, kept_strings(query));
            let sum = hand_run(query, &mut events, LAG_MS);
            assert_eq!(events.malformed, 0, "malformed lines in {}", path.display());
            sum
        }
        Input::Generator(config) => hand_run(
            query,
            Generator::new(config.clone()).expect("config").iter(),
            LAG_MS,
        ),
        Input::File { path, .. } => {
            let mut events = FileEvents::open(path, kept_strings(query));
            let sum = hand_run(query, &mut events, LAG_MS);
            assert_eq!(events.malformed, 0, "malformed lines in {}", path.display());
            sum
        }
    }
}
