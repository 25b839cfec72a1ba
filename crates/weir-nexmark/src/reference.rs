//! Reference results of the NEXMark queries: plain, single-threaded Rust over a slice of
//! events in file order, written for obviousness, not speed. Tests and the CLI's check mode
//! compare the engine's output with these.
//!
//! ```
//! use weir_nexmark::reference::{self, CsvRow, Options};
//! use weir_nexmark::{Bid, Event};
//!
//! let bid = |auction, price, date_time| Event::Bid(Bid {
//!     auction, bidder: 1, price, date_time,
//!     channel: Default::default(), url: Default::default(), extra: Default::default(),
//! });
//! let events = [bid(1, 10, 1_000), bid(2, 30, 2_000), bid(3, 30, 9_999), bid(4, 99, 10_000)];
//! let q7 = reference::q7(&events, &Options::default());
//! let rows: Vec<String> = q7.rows.iter().map(|r| r.to_csv_row()).collect();
//! assert_eq!(rows, ["0,10000,2,1,30,2000", "0,10000,3,1,30,9999", "10000,20000,4,1,99,10000"]);
//! assert_eq!(reference::Q7Row::HEADER, "window_start,window_end,auction,bidder,price,date_time");
//! ```
//!
//! # Semantics (`docs/nexmark.md`)
//!
//! - **Lateness.** The input is one source with one watermark over all event types,
//!   `max(date_time seen) - allowed_lag`. An event with `date_time` below the watermark at
//!   its arrival (computed from the events before it) is late: every query drops it, and
//!   [`Output::late_events`] counts it. See [`split_late`].
//! - **End of input** closes every window: the results are those of the whole input less the
//!   late events. (No on-time event can fall into a window that has closed: a window closes
//!   when the watermark reaches its end, and an on-time event is at or after the watermark.)
//! - **Windows** are aligned to the epoch and hold `start <= t < end`: tumbling
//!   `[k*S, (k+1)*S)`, hopping `[k*D, k*D + S)` for every `k` whose window holds `t`.
//! - **q0–q3** give one row per matching event or join match; duplicates in, duplicates out.
//!   q3's join is unwindowed over the whole input, so a seller that appears after its auction
//!   still matches. **q4** gives the final values at end of input; **q8**'s rows are
//!   distinct.
//!
//! - **q6 and q9** find each auction's winning bid (see [`q9`]); q6 averages a seller's last
//!   10 winning prices in close (`expires`) order. **q11** cuts each bidder's bids into
//!   sessions; **q12** reads in processing time, so only its bids per bidder over all
//!   windows can be checked ([`q12`], [`comparable_rows`]).
//!
//! Row order: q0–q3, q7, q9 and q10 follow the input order; q4, q5, q6, q8, q11 and q12 are
//! sorted by their columns. The README lets an engine emit rows in any order: compare
//! sorted.
//!
//! # Output
//!
//! Every row type implements [`CsvRow`]: its `HEADER` is the README's, and
//! [`to_csv_row`](CsvRow::to_csv_row) writes integers as integers and floats with Rust's
//! `{}` (the shortest text that reads back as the same `f64`); strings are quoted as RFC 4180
//! requires when they hold a comma, a quote or a line break.
//!
//! Extreme times near the ends of the `i64` range do not panic: window bounds saturate.
//!
//! Cost: O(n) time and memory for n events, with hash maps; q5 touches each bid 5 times.

use std::io::Write as _;

use compact_str::CompactString;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::model::{Auction, Bid, Event, Person};
use crate::query::Query;

/// The default allowed lag of the watermark, 4 s.
pub const DEFAULT_ALLOWED_LAG_MS: u64 = 4000;
/// q5's window size.
pub const Q5_WINDOW_MS: i64 = 10_000;
/// q5's window slide.
pub const Q5_SLIDE_MS: i64 = 2_000;
/// q7's tumbling window size.
pub const Q7_WINDOW_MS: i64 = 10_000;
/// q8's tumbling window size.
pub const Q8_WINDOW_MS: i64 = 10_000;
/// q6 averages the winning prices of each seller's last this many closed auctions.
pub const Q6_LAST_AUCTIONS: usize = 10;
/// q11's session gap: a bidder's session ends after this much time without a bid.
pub const Q11_SESSION_GAP_MS: i64 = 10_000;
/// q12's tumbling window size, in processing (wall-clock) time.
pub const Q12_WINDOW_MS: i64 = 10_000;
/// q1's price factor.
pub const Q1_FACTOR: f64 = 0.908;
/// q2 keeps bids whose auction is a multiple of this.
pub const Q2_MODULUS: i64 = 123;
/// q3's category.
pub const Q3_CATEGORY: i64 = 10;
/// q3's seller states.
pub const Q3_STATES: [&str; 3] = ["OR", "ID", "CA"];

/// How the reference treats time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How far the watermark stays behind the largest time seen, in ms. Default
    /// [`DEFAULT_ALLOWED_LAG_MS`].
    pub allowed_lag_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            allowed_lag_ms: DEFAULT_ALLOWED_LAG_MS,
        }
    }
}

/// A query's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Output<R> {
    /// The rows; see the [module docs](self) for their order.
    pub rows: Vec<R>,
    /// How many input events were late and dropped (of every type, not only those the query
    /// reads).
    pub late_events: u64,
}

/// A row of a query's CSV output.
pub trait CsvRow {
    /// The CSV header, exactly as in the README (no line terminator).
    const HEADER: &'static str;

    /// Appends the row, without a line terminator, to `out`.
    fn write_csv(&self, out: &mut Vec<u8>);

    /// The row as CSV text, without a line terminator.
    fn to_csv_row(&self) -> String {
        let mut out = Vec::with_capacity(64);
        self.write_csv(&mut out);
        // Rows are built from `str`s and numbers only.
        String::from_utf8(out).expect("CSV rows are valid UTF-8")
    }
}

/// A number field of a CSV row, appended as its `Display` form (`{}`) reads: integers as
/// integers, floats as the shortest text that reads back as the same `f64`.
trait CsvNumber: Copy {
    /// Appends the number to `out`.
    fn append(self, out: &mut Vec<u8>);
}

// Integers go through `itoa`, not the formatting machinery: q0 writes four per row, and
// this cut its CLI run's CPU time by about 7%.
macro_rules! csv_integer {
    ($($t:ty),+) => {$(
        impl CsvNumber for $t {
            fn append(self, out: &mut Vec<u8>) {
                out.extend_from_slice(itoa::Buffer::new().format(self).as_bytes());
            }
        }
    )+};
}
csv_integer!(i64, u64);

impl CsvNumber for f64 {
    fn append(self, out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{self}");
    }
}

/// Appends a number field (see [`CsvNumber`]).
fn num(out: &mut Vec<u8>, v: impl CsvNumber) {
    v.append(out);
}

/// Appends a string field, quoted as RFC 4180 requires if it holds `,`, `"`, `\r` or `\n`.
fn text(out: &mut Vec<u8>, s: &str) {
    if s.contains([',', '"', '\r', '\n']) {
        out.push(b'"');
        for b in s.bytes() {
            if b == b'"' {
                out.push(b'"');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(s.as_bytes());
    }
}

macro_rules! csv_row {
    ($row:ty, $query:expr, |$self:ident, $out:ident| $($field:expr => $kind:ident),+ $(,)?) => {
        impl CsvRow for $row {
            const HEADER: &'static str = $query.header();

            fn write_csv(&$self, $out: &mut Vec<u8>) {
                let mut first = true;
                $(
                    if !first {
                        $out.push(b',');
                    }
                    first = false;
                    $kind($out, $field);
                )+
                let _ = first;
            }
        }
    };
}

/// A row of q0: a bid passed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q0Row {
    /// The auction bid on.
    pub auction: i64,
    /// The bidder.
    pub bidder: i64,
    /// The price, in cents.
    pub price: i64,
    /// The bid's time.
    pub date_time: i64,
}
csv_row!(Q0Row, Query::Q0, |self, out| self.auction => num, self.bidder => num, self.price => num, self.date_time => num);

/// A row of q1: a bid with its price converted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Q1Row {
    /// The auction bid on.
    pub auction: i64,
    /// The bidder.
    pub bidder: i64,
    /// `price * 0.908`.
    pub price: f64,
    /// The bid's time.
    pub date_time: i64,
}
csv_row!(Q1Row, Query::Q1, |self, out| self.auction => num, self.bidder => num, self.price => num, self.date_time => num);

/// A row of q2: a bid on an auction whose id is a multiple of 123.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q2Row {
    /// The auction bid on.
    pub auction: i64,
    /// The price, in cents.
    pub price: i64,
}
csv_row!(Q2Row, Query::Q2, |self, out| self.auction => num, self.price => num);

/// A row of q3: a category-10 auction joined with its seller from OR, ID or CA.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q3Row {
    /// The seller's name.
    pub name: CompactString,
    /// The seller's city.
    pub city: CompactString,
    /// The seller's state.
    pub state: CompactString,
    /// The auction's id.
    pub id: i64,
}
csv_row!(Q3Row, Query::Q3, |self, out| &self.name => text, &self.city => text, &self.state => text, self.id => num);

/// A row of q4: the average winning price of a category.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Q4Row {
    /// The category.
    pub category: i64,
    /// The average, over the category's auctions with a valid bid, of each one's highest
    /// valid bid.
    pub avg_price: f64,
}
csv_row!(Q4Row, Query::Q4, |self, out| self.category => num, self.avg_price => num);

/// A row of q5: an auction with the most bids in a hopping window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q5Row {
    /// The window's start, in ms.
    pub window_start: i64,
    /// The window's end (exclusive), in ms.
    pub window_end: i64,
    /// The auction.
    pub auction: i64,
    /// Its bids in the window, the window's maximum.
    pub num: u64,
}
csv_row!(Q5Row, Query::Q5, |self, out| self.window_start => num, self.window_end => num, self.auction => num, self.num => num);

/// A row of q7: a bid with the highest price of its tumbling window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q7Row {
    /// The window's start, in ms.
    pub window_start: i64,
    /// The window's end (exclusive), in ms.
    pub window_end: i64,
    /// The auction bid on.
    pub auction: i64,
    /// The bidder.
    pub bidder: i64,
    /// The price, the window's maximum.
    pub price: i64,
    /// The bid's time.
    pub date_time: i64,
}
csv_row!(Q7Row, Query::Q7, |self, out| self.window_start => num, self.window_end => num, self.auction => num, self.bidder => num, self.price => num, self.date_time => num);

/// A row of q8: a person who opened an auction in the tumbling window they registered in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q8Row {
    /// The person's id.
    pub id: i64,
    /// The person's name.
    pub name: CompactString,
    /// The window's start, in ms.
    pub window_start: i64,
}
csv_row!(Q8Row, Query::Q8, |self, out| self.id => num, &self.name => text, self.window_start => num);

/// A row of q6: a seller's average selling price, at the close of one of its auctions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Q6Row {
    /// The seller.
    pub seller: i64,
    /// The average winning price of the seller's last (up to) 10 closed auctions with a
    /// winning bid, this one included.
    pub avg_price: f64,
}
csv_row!(Q6Row, Query::Q6, |self, out| self.seller => num, self.avg_price => num);

/// A row of q9: a closed auction and its winning bid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q9Row {
    /// The auction's id.
    pub id: i64,
    /// Its item name.
    pub item_name: CompactString,
    /// Its description.
    pub description: CompactString,
    /// Its initial bid.
    pub initial_bid: i64,
    /// Its reserve price.
    pub reserve: i64,
    /// When it opened.
    pub date_time: i64,
    /// When it closed.
    pub expires: i64,
    /// Its seller.
    pub seller: i64,
    /// Its category.
    pub category: i64,
    /// Its `extra`.
    pub extra: CompactString,
    /// The winning bid's auction (the auction's id).
    pub auction: i64,
    /// The winning bidder.
    pub bidder: i64,
    /// The winning price.
    pub price: i64,
    /// When the winning bid was placed.
    pub bid_date_time: i64,
    /// The winning bid's `extra`.
    pub bid_extra: CompactString,
}
csv_row!(Q9Row, Query::Q9, |self, out|
    self.id => num, &self.item_name => text, &self.description => text, self.initial_bid => num,
    self.reserve => num, self.date_time => num, self.expires => num, self.seller => num,
    self.category => num, &self.extra => text, self.auction => num, self.bidder => num,
    self.price => num, self.bid_date_time => num, &self.bid_extra => text);

/// A row of q10: a bid with the UTC date and minute of its time, its partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q10Row {
    /// The auction bid on.
    pub auction: i64,
    /// The bidder.
    pub bidder: i64,
    /// The price, in cents.
    pub price: i64,
    /// The bid's time.
    pub date_time: i64,
    /// The bid's `extra`.
    pub extra: CompactString,
    /// The date of `date_time`, UTC, `yyyy-MM-dd`.
    pub dt: CompactString,
    /// The hour and minute of `date_time`, UTC, `HH:mm`.
    pub hm: CompactString,
}
csv_row!(Q10Row, Query::Q10, |self, out|
    self.auction => num, self.bidder => num, self.price => num, self.date_time => num,
    &self.extra => text, &self.dt => text, &self.hm => text);

impl Q10Row {
    /// Appends the row as CSV without its partition columns `dt` and `hm` (no line
    /// terminator): a line of a partition file, whose path holds them.
    pub fn write_csv_without_partition(&self, out: &mut Vec<u8>) {
        num(out, self.auction);
        out.push(b',');
        num(out, self.bidder);
        out.push(b',');
        num(out, self.price);
        out.push(b',');
        num(out, self.date_time);
        out.push(b',');
        text(out, &self.extra);
    }
}

/// A row of q11: one session of a bidder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q11Row {
    /// The bidder.
    pub bidder: i64,
    /// The bids in the session.
    pub bid_count: u64,
    /// The time of the session's first bid.
    pub window_start: i64,
    /// The time of its last bid plus the gap (exclusive).
    pub window_end: i64,
}
csv_row!(Q11Row, Query::Q11, |self, out| self.bidder => num, self.bid_count => num, self.window_start => num, self.window_end => num);

/// A row of q12: a bidder's bids in a 10 s window of processing time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q12Row {
    /// The bidder.
    pub bidder: i64,
    /// The bids the job read in the window.
    pub bid_count: u64,
    /// The window's start, wall-clock ms since the epoch.
    pub window_start: i64,
    /// The window's end (exclusive).
    pub window_end: i64,
}
csv_row!(Q12Row, Query::Q12, |self, out| self.bidder => num, self.bid_count => num, self.window_start => num, self.window_end => num);

/// What q12's result can be checked against: a bidder's bids over all windows. Its CSV row
/// is `bidder,bid_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Q12Total {
    /// The bidder.
    pub bidder: i64,
    /// Its bids in the whole input.
    pub bid_count: u64,
}

impl CsvRow for Q12Total {
    const HEADER: &'static str = "bidder,bid_count";

    fn write_csv(&self, out: &mut Vec<u8>) {
        num(out, self.bidder);
        out.push(b',');
        num(out, self.bid_count);
    }
}

/// Splits `events` into those on time, in order, and the number of late ones: an event is
/// late if its `date_time` is below `max(date_time of the events before it) - allowed_lag`.
pub fn split_late<'a>(events: &'a [Event], options: &Options) -> (Vec<&'a Event>, u64) {
    let lag = i64::try_from(options.allowed_lag_ms).unwrap_or(i64::MAX);
    let mut max_seen: Option<i64> = None;
    let mut on_time = Vec::with_capacity(events.len());
    let mut late = 0;
    for e in events {
        let t = e.date_time();
        match max_seen {
            Some(max) if t < max.saturating_sub(lag) => late += 1,
            _ => {
                on_time.push(e);
                max_seen = Some(max_seen.map_or(t, |m| m.max(t)));
            }
        }
    }
    (on_time, late)
}

/// Clamps an exact window bound into `i64`.
fn clamp(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// The start of the epoch-aligned tumbling window of `size` ms (positive) that holds `t`:
/// `floor(t / size) * size`, saturating at the ends of `i64`.
pub fn tumbling_window_start(t: i64, size: i64) -> i64 {
    let size = i128::from(size.max(1));
    clamp(i128::from(t).div_euclid(size) * size)
}

/// The starts of the epoch-aligned hopping windows of `size` ms sliding every `slide` ms
/// (both positive) that hold `t`, earliest first: every `k * slide` with
/// `k * slide <= t < k * slide + size`.
pub fn hopping_window_starts(t: i64, size: i64, slide: i64) -> impl Iterator<Item = i64> {
    let (t, size, slide) = (
        i128::from(t),
        i128::from(size.max(1)),
        i128::from(slide.max(1)),
    );
    let first = (t - size).div_euclid(slide) + 1;
    let last = t.div_euclid(slide);
    (first..=last).map(move |k| clamp(k * slide))
}

fn bids<'a>(events: &'a [&'a Event]) -> impl Iterator<Item = &'a Bid> {
    events.iter().filter_map(|e| e.as_bid())
}

fn auctions<'a>(events: &'a [&'a Event]) -> impl Iterator<Item = &'a Auction> {
    events.iter().filter_map(|e| e.as_auction())
}

fn persons<'a>(events: &'a [&'a Event]) -> impl Iterator<Item = &'a Person> {
    events.iter().filter_map(|e| e.as_person())
}

/// q0: every bid.
pub fn q0(events: &[Event], options: &Options) -> Output<Q0Row> {
    let (on_time, late_events) = split_late(events, options);
    let rows = bids(&on_time)
        .map(|b| Q0Row {
            auction: b.auction,
            bidder: b.bidder,
            price: b.price,
            date_time: b.date_time,
        })
        .collect();
    Output { rows, late_events }
}

/// q1: every bid, its price multiplied by 0.908 as a float.
pub fn q1(events: &[Event], options: &Options) -> Output<Q1Row> {
    let (on_time, late_events) = split_late(events, options);
    let rows = bids(&on_time)
        .map(|b| Q1Row {
            auction: b.auction,
            bidder: b.bidder,
            price: b.price as f64 * Q1_FACTOR,
            date_time: b.date_time,
        })
        .collect();
    Output { rows, late_events }
}

/// q2: the bids with `auction % 123 == 0`.
pub fn q2(events: &[Event], options: &Options) -> Output<Q2Row> {
    let (on_time, late_events) = split_late(events, options);
    let rows = bids(&on_time)
        .filter(|b| b.auction % Q2_MODULUS == 0)
        .map(|b| Q2Row {
            auction: b.auction,
            price: b.price,
        })
        .collect();
    Output { rows, late_events }
}

/// q3: category-10 auctions whose seller lives in OR, ID or CA, joined with the seller over
/// the whole input (a seller registered after the auction matches too). One row per
/// (auction, matching person) pair, in auction order.
pub fn q3(events: &[Event], options: &Options) -> Output<Q3Row> {
    let (on_time, late_events) = split_late(events, options);
    let mut sellers: FxHashMap<i64, Vec<&Person>> = FxHashMap::default();
    for p in persons(&on_time).filter(|p| Q3_STATES.contains(&p.state.as_str())) {
        sellers.entry(p.id).or_default().push(p);
    }
    let mut rows = Vec::new();
    for a in auctions(&on_time).filter(|a| a.category == Q3_CATEGORY) {
        for p in sellers.get(&a.seller).into_iter().flatten() {
            rows.push(Q3Row {
                name: p.name.clone(),
                city: p.city.clone(),
                state: p.state.clone(),
                id: a.id,
            });
        }
    }
    Output { rows, late_events }
}

/// q4: for each auction, its highest bid among those with `auction.date_time <=
/// bid.date_time <= auction.expires`; then per category the average of those prices.
/// Auctions without such a bid are left out. As in the Flink SQL, auctions are grouped by
/// (id, category). Rows sorted by category.
pub fn q4(events: &[Event], options: &Options) -> Output<Q4Row> {
    let (on_time, late_events) = split_late(events, options);
    let mut bids_of: FxHashMap<i64, Vec<&Bid>> = FxHashMap::default();
    for b in bids(&on_time) {
        bids_of.entry(b.auction).or_default().push(b);
    }
    let mut winning: FxHashMap<(i64, i64), i64> = FxHashMap::default();
    for a in auctions(&on_time) {
        let best = bids_of
            .get(&a.id)
            .into_iter()
            .flatten()
            .filter(|b| a.date_time <= b.date_time && b.date_time <= a.expires)
            .map(|b| b.price)
            .max();
        if let Some(best) = best {
            let w = winning.entry((a.id, a.category)).or_insert(best);
            *w = (*w).max(best);
        }
    }
    let mut per_category: FxHashMap<i64, (i128, u64)> = FxHashMap::default();
    for ((_, category), price) in winning {
        let s = per_category.entry(category).or_default();
        s.0 += i128::from(price);
        s.1 += 1;
    }
    let mut rows: Vec<Q4Row> = per_category
        .into_iter()
        .map(|(category, (sum, n))| Q4Row {
            category,
            avg_price: sum as f64 / n as f64,
        })
        .collect();
    rows.sort_by_key(|r| r.category);
    Output { rows, late_events }
}

/// q5: per hopping window of 10 s sliding every 2 s, the bids per auction; the auctions whose
/// count is the window's maximum. Rows sorted by window, then auction.
pub fn q5(events: &[Event], options: &Options) -> Output<Q5Row> {
    let (on_time, late_events) = split_late(events, options);
    let mut counts: FxHashMap<(i64, i64), u64> = FxHashMap::default();
    for b in bids(&on_time) {
        for start in hopping_window_starts(b.date_time, Q5_WINDOW_MS, Q5_SLIDE_MS) {
            *counts.entry((start, b.auction)).or_default() += 1;
        }
    }
    let mut max: FxHashMap<i64, u64> = FxHashMap::default();
    for (&(start, _), &n) in &counts {
        let m = max.entry(start).or_default();
        *m = (*m).max(n);
    }
    let mut rows: Vec<Q5Row> = counts
        .into_iter()
        .filter(|&((start, _), n)| max[&start] == n)
        .map(|((start, auction), num)| Q5Row {
            window_start: start,
            window_end: start.saturating_add(Q5_WINDOW_MS),
            auction,
            num,
        })
        .collect();
    rows.sort_unstable();
    Output { rows, late_events }
}

/// q7: per tumbling window of 10 s, the bids whose price is the window's highest, in input
/// order.
pub fn q7(events: &[Event], options: &Options) -> Output<Q7Row> {
    let (on_time, late_events) = split_late(events, options);
    let mut max: FxHashMap<i64, i64> = FxHashMap::default();
    for b in bids(&on_time) {
        let m = max
            .entry(tumbling_window_start(b.date_time, Q7_WINDOW_MS))
            .or_insert(b.price);
        *m = (*m).max(b.price);
    }
    let rows = bids(&on_time)
        .filter_map(|b| {
            let start = tumbling_window_start(b.date_time, Q7_WINDOW_MS);
            (max[&start] == b.price).then(|| Q7Row {
                window_start: start,
                window_end: start.saturating_add(Q7_WINDOW_MS),
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                date_time: b.date_time,
            })
        })
        .collect();
    Output { rows, late_events }
}

/// q8: the distinct (person id, name, window start) of people who opened an auction
/// (`auction.seller == person.id`) in the tumbling 10 s window they registered in. Rows
/// sorted.
pub fn q8(events: &[Event], options: &Options) -> Output<Q8Row> {
    let (on_time, late_events) = split_late(events, options);
    let opened: FxHashSet<(i64, i64)> = auctions(&on_time)
        .map(|a| (a.seller, tumbling_window_start(a.date_time, Q8_WINDOW_MS)))
        .collect();
    let rows: FxHashSet<Q8Row> = persons(&on_time)
        .map(|p| (p, tumbling_window_start(p.date_time, Q8_WINDOW_MS)))
        .filter(|(p, start)| opened.contains(&(p.id, *start)))
        .map(|(p, start)| Q8Row {
            id: p.id,
            name: p.name.clone(),
            window_start: start,
        })
        .collect();
    let mut rows: Vec<Q8Row> = rows.into_iter().collect();
    rows.sort_unstable();
    Output { rows, late_events }
}

/// The winning bid of every auction: among the bids on it placed within `[date_time,
/// expires]` (both included) at or above its reserve, the highest price, then the earliest,
/// then the lowest bidder, then the least `extra`. Auctions without one are left out. In
/// auction order (input order), each with its winner.
fn winning_bids<'a>(on_time: &'a [&'a Event]) -> Vec<(&'a Auction, &'a Bid)> {
    let mut bids_of: FxHashMap<i64, Vec<&Bid>> = FxHashMap::default();
    for b in bids(on_time) {
        bids_of.entry(b.auction).or_default().push(b);
    }
    let mut winners = Vec::new();
    for a in auctions(on_time) {
        let mut best: Option<&Bid> = None;
        for &b in bids_of.get(&a.id).into_iter().flatten() {
            if b.date_time < a.date_time || b.date_time > a.expires || b.price < a.reserve {
                continue;
            }
            let better = match best {
                None => true,
                Some(w) => {
                    b.price > w.price
                        || (b.price == w.price
                            && (b.date_time, b.bidder, &b.extra)
                                < (w.date_time, w.bidder, &w.extra))
                }
            };
            if better {
                best = Some(b);
            }
        }
        if let Some(b) = best {
            winners.push((a, b));
        }
    }
    winners
}

/// q6: for each seller, at every close of one of its auctions with a winning bid (see
/// [`q9`]), the average winning price of its last 10 such auctions. A seller's auctions
/// close in `expires` order (auction id on ties). Rows sorted by seller, then in close
/// order.
pub fn q6(events: &[Event], options: &Options) -> Output<Q6Row> {
    let (on_time, late_events) = split_late(events, options);
    let mut closes: FxHashMap<i64, Vec<(i64, i64, i64)>> = FxHashMap::default();
    for (a, b) in winning_bids(&on_time) {
        closes
            .entry(a.seller)
            .or_default()
            .push((a.expires, a.id, b.price));
    }
    let mut sellers: Vec<i64> = closes.keys().copied().collect();
    sellers.sort_unstable();
    let mut rows = Vec::new();
    for seller in sellers {
        let mut closed = closes.remove(&seller).unwrap_or_default();
        closed.sort_unstable();
        for i in 0..closed.len() {
            let last = &closed[i.saturating_sub(Q6_LAST_AUCTIONS - 1)..=i];
            let sum: i128 = last.iter().map(|c| i128::from(c.2)).sum();
            rows.push(Q6Row {
                seller,
                avg_price: sum as f64 / last.len() as f64,
            });
        }
    }
    Output { rows, late_events }
}

/// q9: every auction with a winning bid, with it: the highest bid at or above the reserve
/// placed within `[date_time, expires]`, the earliest of the highest (then the lowest
/// bidder, then the least `extra`). Rows in auction (input) order.
pub fn q9(events: &[Event], options: &Options) -> Output<Q9Row> {
    let (on_time, late_events) = split_late(events, options);
    let rows = winning_bids(&on_time)
        .into_iter()
        .map(|(a, b)| Q9Row {
            id: a.id,
            item_name: a.item_name.clone(),
            description: a.description.clone(),
            initial_bid: a.initial_bid,
            reserve: a.reserve,
            date_time: a.date_time,
            expires: a.expires,
            seller: a.seller,
            category: a.category,
            extra: a.extra.clone(),
            auction: b.auction,
            bidder: b.bidder,
            price: b.price,
            bid_date_time: b.date_time,
            bid_extra: b.extra.clone(),
        })
        .collect();
    Output { rows, late_events }
}

/// The UTC date (`yyyy-MM-dd`) and minute (`HH:mm`) of `ms` since the epoch, on the
/// proleptic Gregorian calendar, by `chrono`. Years print with at least 4 digits, and a
/// `-` before the year for years before 0. Times beyond chrono's range of years are moved
/// into it by whole 400-year cycles (146,097 days), after which the calendar repeats.
pub fn utc_date_and_minute(ms: i64) -> (CompactString, CompactString) {
    use chrono::{Datelike, NaiveDate};
    const DAY_MS: i64 = 86_400_000;
    const CYCLE_DAYS: i64 = 146_097;
    let (days, in_day) = (ms.div_euclid(DAY_MS), ms.rem_euclid(DAY_MS));
    let (cycles, day_in_cycle) = (days.div_euclid(CYCLE_DAYS), days.rem_euclid(CYCLE_DAYS));
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).expect("a valid date");
    let date = epoch
        .checked_add_days(chrono::Days::new(day_in_cycle as u64))
        .expect("within 400 years of 1970");
    let year = i64::from(date.year()) + 400 * cycles;
    let minute = in_day / 60_000;
    (
        compact_str::format_compact!("{year:04}-{:02}-{:02}", date.month(), date.day()),
        compact_str::format_compact!("{:02}:{:02}", minute / 60, minute % 60),
    )
}

/// q10: every bid, with the UTC date and minute of its time ([`utc_date_and_minute`]). Rows
/// in input order.
pub fn q10(events: &[Event], options: &Options) -> Output<Q10Row> {
    let (on_time, late_events) = split_late(events, options);
    let rows = bids(&on_time)
        .map(|b| {
            let (dt, hm) = utc_date_and_minute(b.date_time);
            Q10Row {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                date_time: b.date_time,
                extra: b.extra.clone(),
                dt,
                hm,
            }
        })
        .collect();
    Output { rows, late_events }
}

/// q11: per bidder, its bids cut into sessions: sorted by time, a bid 10 s or more after the
/// previous one starts a new session. A session runs from its first bid to its last plus
/// 10 s (exclusive). Rows sorted by bidder, then start.
pub fn q11(events: &[Event], options: &Options) -> Output<Q11Row> {
    let (on_time, late_events) = split_late(events, options);
    let mut times: FxHashMap<i64, Vec<i64>> = FxHashMap::default();
    for b in bids(&on_time) {
        times.entry(b.bidder).or_default().push(b.date_time);
    }
    let mut rows = Vec::new();
    for (bidder, mut ts) in times {
        ts.sort_unstable();
        let mut session: Option<(i64, i64, u64)> = None; // (first, last, count)
        for t in ts {
            session = match session {
                Some((first, last, n)) if t - last < Q11_SESSION_GAP_MS => Some((first, t, n + 1)),
                Some((first, last, n)) => {
                    rows.push(Q11Row {
                        bidder,
                        bid_count: n,
                        window_start: first,
                        window_end: last.saturating_add(Q11_SESSION_GAP_MS),
                    });
                    Some((t, t, 1))
                }
                None => Some((t, t, 1)),
            };
        }
        if let Some((first, last, n)) = session {
            rows.push(Q11Row {
                bidder,
                bid_count: n,
                window_start: first,
                window_end: last.saturating_add(Q11_SESSION_GAP_MS),
            });
        }
    }
    rows.sort_unstable();
    Output { rows, late_events }
}

/// q12's checkable part: the bids per bidder over the whole input. The windows themselves
/// are of wall-clock time, different in every run. q12 reads the events in processing
/// time, so none is late: every bid counts, and `late_events` is 0. Rows sorted by bidder.
pub fn q12(events: &[Event], _options: &Options) -> Output<Q12Total> {
    let mut counts: FxHashMap<i64, u64> = FxHashMap::default();
    for e in events {
        if let Event::Bid(b) = e {
            *counts.entry(b.bidder).or_default() += 1;
        }
    }
    let mut rows: Vec<Q12Total> = counts
        .into_iter()
        .map(|(bidder, bid_count)| Q12Total { bidder, bid_count })
        .collect();
    rows.sort_unstable();
    Output {
        rows,
        late_events: 0,
    }
}

/// Makes a query's CSV rows comparable with [`csv_rows`]' for the same query: q12's
/// windowed rows (`bidder,bid_count,window_start,window_end`) become the bids per bidder
/// (`bidder,bid_count`), summed over the windows, sorted by bidder; other queries' rows are
/// returned as they are.
///
/// # Errors
/// A q12 row that does not start with two integers, named.
pub fn comparable_rows(query: Query, rows: Vec<String>) -> Result<Vec<String>, String> {
    if query != Query::Q12 {
        return Ok(rows);
    }
    let mut totals: FxHashMap<i64, u64> = FxHashMap::default();
    for row in &rows {
        let mut fields = row.split(',');
        let bidder = fields.next().and_then(|f| f.parse::<i64>().ok());
        let count = fields.next().and_then(|f| f.parse::<u64>().ok());
        match (bidder, count) {
            (Some(bidder), Some(count)) => *totals.entry(bidder).or_default() += count,
            _ => return Err(format!("not a q12 row: {row:?}")),
        }
    }
    let mut totals: Vec<Q12Total> = totals
        .into_iter()
        .map(|(bidder, bid_count)| Q12Total { bidder, bid_count })
        .collect();
    totals.sort_unstable();
    Ok(totals.iter().map(CsvRow::to_csv_row).collect())
}

/// Runs `query` and returns its rows as CSV text (without the header or line terminators),
/// for callers that pick the query at run time. The header is [`Query::header`], but for
/// q12, whose rows here are [`Q12Total`]s (see [`comparable_rows`]).
pub fn csv_rows(query: Query, events: &[Event], options: &Options) -> Output<String> {
    fn rows<R: CsvRow>(out: Output<R>) -> Output<String> {
        Output {
            rows: out.rows.iter().map(CsvRow::to_csv_row).collect(),
            late_events: out.late_events,
        }
    }
    match query {
        Query::Q0 => rows(q0(events, options)),
        Query::Q1 => rows(q1(events, options)),
        Query::Q2 => rows(q2(events, options)),
        Query::Q3 => rows(q3(events, options)),
        Query::Q4 => rows(q4(events, options)),
        Query::Q5 => rows(q5(events, options)),
        Query::Q6 => rows(q6(events, options)),
        Query::Q7 => rows(q7(events, options)),
        Query::Q8 => rows(q8(events, options)),
        Query::Q9 => rows(q9(events, options)),
        Query::Q10 => rows(q10(events, options)),
        Query::Q11 => rows(q11(events, options)),
        Query::Q12 => rows(q12(events, options)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000; // one second, in ms

    fn bid(auction: i64, bidder: i64, price: i64, date_time: i64) -> Event {
        Event::Bid(Bid {
            auction,
            bidder,
            price,
            channel: "Google".into(),
            url: "u".into(),
            date_time,
            extra: "".into(),
        })
    }

    fn auction(id: i64, seller: i64, category: i64, date_time: i64, expires: i64) -> Event {
        Event::from(Auction {
            id,
            item_name: "item".into(),
            description: "d".into(),
            initial_bid: 1,
            reserve: 2,
            date_time,
            expires,
            seller,
            category,
            extra: "".into(),
        })
    }

    /// An auction with a reserve, for q6 and q9.
    fn reserved(id: i64, seller: i64, reserve: i64, date_time: i64, expires: i64) -> Event {
        match auction(id, seller, 10, date_time, expires) {
            Event::Auction(mut a) => {
                a.reserve = reserve;
                Event::Auction(a)
            }
            _ => unreachable!(),
        }
    }

    fn bid_extra(auction: i64, bidder: i64, price: i64, date_time: i64, extra: &str) -> Event {
        match bid(auction, bidder, price, date_time) {
            Event::Bid(mut b) => {
                b.extra = extra.into();
                Event::Bid(b)
            }
            _ => unreachable!(),
        }
    }

    fn person(id: i64, name: &str, state: &str, date_time: i64) -> Event {
        Event::from(Person {
            id,
            name: name.into(),
            email_address: "a@b.com".into(),
            credit_card: "1234 5678 9012 3456".into(),
            city: "boise".into(),
            state: state.into(),
            date_time,
            extra: "".into(),
        })
    }

    fn csv<R: CsvRow>(out: &Output<R>) -> Vec<String> {
        out.rows.iter().map(CsvRow::to_csv_row).collect()
    }

    fn lag(ms: u64) -> Options {
        Options { allowed_lag_ms: ms }
    }

    #[test]
    fn headers_are_the_readmes() {
        assert_eq!(Q0Row::HEADER, "auction,bidder,price,date_time");
        assert_eq!(Q1Row::HEADER, "auction,bidder,price,date_time");
        assert_eq!(Q2Row::HEADER, "auction,price");
        assert_eq!(Q3Row::HEADER, "name,city,state,id");
        assert_eq!(Q4Row::HEADER, "category,avg_price");
        assert_eq!(Q5Row::HEADER, "window_start,window_end,auction,num");
        assert_eq!(
            Q7Row::HEADER,
            "window_start,window_end,auction,bidder,price,date_time"
        );
        assert_eq!(Q8Row::HEADER, "id,name,window_start");
        assert_eq!(Q6Row::HEADER, "seller,avg_price");
        assert!(Q9Row::HEADER.starts_with("id,item_name,description,initial_bid,reserve,"));
        assert!(Q9Row::HEADER.ends_with(",auction,bidder,price,bid_date_time,bid_extra"));
        assert_eq!(Q10Row::HEADER, "auction,bidder,price,date_time,extra,dt,hm");
        assert_eq!(Q11Row::HEADER, "bidder,bid_count,window_start,window_end");
        assert_eq!(Q12Row::HEADER, Q11Row::HEADER);
    }

    #[test]
    fn lateness_one_watermark_over_all_types() {
        let events = [
            bid(1, 1, 10, 10 * S),
            person(5, "p", "OR", 7 * S), // 3 s behind the max: on time
            auction(6, 5, 10, 6 * S, 7 * S), // exactly at the watermark (10 - 4): on time
            bid(2, 1, 20, 6 * S - 1),    // 1 ms behind the watermark: late
            person(7, "q", "CA", 15 * S), // moves the watermark to 11 s
            bid(3, 1, 30, 10 * S + 999), // late
            auction(8, 7, 10, 11 * S, 20 * S), // at the watermark: on time
        ];
        let (on_time, late) = split_late(&events, &lag(4 * S as u64));
        assert_eq!(late, 2);
        assert_eq!(on_time.len(), 5);
        // With no lag, anything behind the max is late.
        assert_eq!(split_late(&events, &lag(0)).1, 5);
        // A late event does not move the watermark, and the first event is never late.
        let (_, late) = split_late(&[bid(1, 1, 1, 0), bid(1, 1, 1, i64::MIN)], &lag(10));
        assert_eq!(late, 1);
    }

    #[test]
    fn q0_q1_q2_pass_bids_through_and_drop_late_ones() {
        let events = [
            bid(123, 7, 1000, 5 * S),
            person(1, "x", "OR", 5 * S),
            bid(246, 8, 1, 4 * S), // out of order, within the lag
            bid(124, 9, 0, 5 * S),
            bid(369, 9, 5, 5 * S - 4001), // late
            bid(-123, 9, 5, 5 * S),
        ];
        let o = lag(4000);
        let out = q0(&events, &o);
        assert_eq!(out.late_events, 1);
        assert_eq!(
            csv(&out),
            [
                "123,7,1000,5000",
                "246,8,1,4000",
                "124,9,0,5000",
                "-123,9,5,5000"
            ]
        );
        let out = q1(&events, &o);
        assert_eq!(
            csv(&out),
            [
                "123,7,908,5000",
                "246,8,0.908,4000",
                "124,9,0,5000",
                "-123,9,4.54,5000"
            ]
        );
        assert_eq!(csv(&q2(&events, &o)), ["123,1000", "246,1", "-123,5"]);
    }

    #[test]
    fn q1_floats_round_trip() {
        let out = q1(&[bid(1, 1, 1234, 0), bid(1, 1, 99_999_999, 0)], &lag(0));
        for r in &out.rows {
            let text = r.to_csv_row();
            let price: f64 = text.split(',').nth(2).unwrap().parse().unwrap();
            assert_eq!(price, r.price);
        }
        assert_eq!(out.rows[0].to_csv_row(), "1,1,1120.472,0");
    }

    #[test]
    fn q3_joins_over_all_input_in_either_order() {
        let events = [
            auction(100, 1, 10, S, 2 * S), // seller 1 arrives later
            person(1, "ann, the 1st", "OR", 2 * S),
            person(2, "bob", "WA", 2 * S), // wrong state
            auction(101, 2, 10, 2 * S, 3 * S),
            auction(102, 1, 11, 2 * S, 3 * S), // wrong category
            auction(103, 3, 10, 2 * S, 3 * S), // seller never appears
            person(3, "late", "CA", -10 * S),  // late: dropped
            auction(104, 1, 10, 3 * S, 4 * S),
            person(4, "dee", "ID", 3 * S),
            auction(105, 4, 10, 3 * S, 4 * S),
        ];
        let out = q3(&events, &lag(4000));
        assert_eq!(out.late_events, 1);
        assert_eq!(
            csv(&out),
            [
                "\"ann, the 1st\",boise,OR,100",
                "\"ann, the 1st\",boise,OR,104",
                "dee,boise,ID,105"
            ]
        );
        // A person given twice matches twice: duplicates in, duplicates out.
        let dup = [
            person(1, "a", "CA", 0),
            person(1, "a", "CA", 0),
            auction(9, 1, 10, 0, 1),
        ];
        assert_eq!(q3(&dup, &lag(0)).rows.len(), 2);
    }

    #[test]
    fn q4_bounds_are_inclusive_and_auctions_without_bids_are_left_out() {
        let events = [
            auction(1, 1, 10, 10 * S, 20 * S),
            bid(1, 1, 50, 10 * S),      // at the opening: counts
            bid(1, 1, 70, 20 * S),      // at the expiry: counts
            bid(1, 1, 999, 20 * S + 1), // after: does not
            auction(2, 1, 10, 11 * S, 20 * S),
            bid(2, 1, 20, 15 * S),
            bid(3, 1, 500, 16 * S), // its auction comes later
            auction(3, 1, 11, 15 * S, 17 * S),
            bid(3, 1, 9999, 14 * S), // out of order, within the lag, but before the opening
            auction(4, 1, 12, 15 * S, 17 * S), // no bid
            auction(5, 1, 11, 16 * S, 30 * S),
            bid(5, 1, 1000, S), // late: the watermark is 20.001 s - 10 s
        ];
        let out = q4(&events, &lag(10_000));
        assert_eq!(out.late_events, 1);
        assert_eq!(csv(&out), ["10,45", "11,500"]);
        assert_eq!(out.rows[0].avg_price, 45.0);
        let odd = q4(
            &[
                auction(1, 1, 10, 0, 9),
                bid(1, 1, 1, 0),
                auction(2, 1, 10, 0, 9),
                bid(2, 1, 2, 0),
                auction(3, 1, 10, 0, 9),
                bid(3, 1, 2, 0),
            ],
            &lag(0),
        );
        assert_eq!(odd.rows[0].avg_price, 5.0 / 3.0);
        assert_eq!(csv(&odd), [format!("10,{}", 5.0f64 / 3.0)]);
    }

    #[test]
    fn window_helpers() {
        assert_eq!(tumbling_window_start(9_999, 10_000), 0);
        assert_eq!(tumbling_window_start(10_000, 10_000), 10_000);
        assert_eq!(tumbling_window_start(-1, 10_000), -10_000);
        assert_eq!(tumbling_window_start(i64::MIN, 10_000), i64::MIN);
        let starts: Vec<i64> = hopping_window_starts(10_000, 10_000, 2_000).collect();
        assert_eq!(starts, [2_000, 4_000, 6_000, 8_000, 10_000]);
        let starts: Vec<i64> = hopping_window_starts(9_999, 10_000, 2_000).collect();
        assert_eq!(starts, [0, 2_000, 4_000, 6_000, 8_000]);
        let starts: Vec<i64> = hopping_window_starts(-1, 10_000, 2_000).collect();
        assert_eq!(starts, [-10_000, -8_000, -6_000, -4_000, -2_000]);
        assert_eq!(hopping_window_starts(i64::MAX, 10_000, 2_000).count(), 5);
    }

    #[test]
    fn q5_hot_items_per_hopping_window() {
        // Auction 1: bids at 1 s and 3 s; auction 2: bids at 3 s, 3.5 s and 9.999 s;
        // auction 3: a bid at 10 s, out of order after 11 s; a late bid at 5 s.
        let events = [
            bid(1, 1, 1, S),
            bid(1, 1, 1, 3 * S),
            bid(2, 1, 1, 3 * S),
            bid(2, 1, 1, 3 * S + 500),
            bid(2, 1, 1, 10 * S - 1),
            bid(4, 1, 1, 11 * S),
            bid(3, 1, 1, 10 * S), // 1 s behind the max: on time
            bid(5, 1, 1, 5 * S),  // 6 s behind: late
        ];
        let out = q5(&events, &lag(4000));
        assert_eq!(out.late_events, 1);
        let expected = [
            // [-8, 2): auction 1 only.
            "-8000,2000,1,1",
            // [-6, 4), [-4, 6), [-2, 8): auction 1 has 2, auction 2 has 2: a tie, both kept.
            "-6000,4000,1,2",
            "-6000,4000,2,2",
            "-4000,6000,1,2",
            "-4000,6000,2,2",
            "-2000,8000,1,2",
            "-2000,8000,2,2",
            // [0, 10): auction 2 has 3.
            "0,10000,2,3",
            // [2, 12): auction 2 has 3 (3, 3.5, 9.999), auction 1 has 1, 3 and 4 have 1.
            "2000,12000,2,3",
            // [4, 14): auction 2 has 1 (9.999), 3 and 4 have 1 each: three-way tie.
            "4000,14000,2,1",
            "4000,14000,3,1",
            "4000,14000,4,1",
            "6000,16000,2,1",
            "6000,16000,3,1",
            "6000,16000,4,1",
            "8000,18000,2,1",
            "8000,18000,3,1",
            "8000,18000,4,1",
            // [10, 20): auctions 3 and 4; 9.999 s is outside.
            "10000,20000,3,1",
            "10000,20000,4,1",
        ];
        assert_eq!(csv(&out), expected);
    }

    #[test]
    fn q7_highest_bids_per_tumbling_window() {
        let events = [
            bid(1, 1, 10, S),
            bid(2, 2, 30, 2 * S),
            bid(3, 3, 30, 10 * S - 1), // tie at the window's max, last instant of the window
            bid(4, 4, 5, 10 * S),      // next window
            bid(5, 5, 40, 9 * S),      // out of order within the lag: the max of window 0
            person(1, "p", "OR", 14 * S), // watermark 10 s
            bid(6, 6, 99, 9 * S + 999), // late
        ];
        let out = q7(&events, &lag(4000));
        assert_eq!(out.late_events, 1);
        assert_eq!(
            csv(&out),
            ["10000,20000,4,4,5,10000", "0,10000,5,5,40,9000"]
        );
    }

    #[test]
    fn q8_new_users_in_the_same_window_distinct() {
        let events = [
            person(1, "ann", "OR", S),
            auction(10, 1, 10, 9 * S, 20 * S), // same window [0, 10): match
            auction(11, 1, 10, 9 * S + 1, 20 * S), // again: one row only
            person(2, "bob", "WA", 9 * S),
            auction(12, 2, 10, 10 * S, 20 * S), // next window: no match
            auction(13, 3, 10, 11 * S, 20 * S), // seller registers after, same window
            person(3, "cy", "CA", 12 * S),
            person(4, "dee", "CA", 12 * S),
            auction(14, 4, 10, 8 * S - 1, 20 * S), // late (watermark 8 s)
            auction(15, 4, 10, 20 * S, 30 * S),    // other window
        ];
        let out = q8(&events, &lag(4000));
        assert_eq!(out.late_events, 1);
        assert_eq!(csv(&out), ["1,ann,0", "3,cy,10000"]);
    }

    #[test]
    fn q9_winning_bid_bounds_reserve_and_ties() {
        let events = [
            reserved(1, 7, 100, 10 * S, 20 * S),
            bid(1, 1, 500, 10 * S - 1),        // before the opening
            bid(1, 2, 99, 12 * S),             // below the reserve
            bid(1, 3, 100, 20 * S),            // at the reserve, at the expiry: valid
            bid(1, 4, 700, 20 * S + 1),        // after the expiry
            bid_extra(2, 5, 300, 13 * S, "b"), // bid before its auction arrives
            reserved(2, 7, 0, 11 * S, 30 * S),
            bid_extra(2, 6, 300, 13 * S, "a"), // same price and time: lesser extra...
            bid(2, 4, 300, 13 * S),            // ...but bidder 4 is lower: it wins
            bid(2, 9, 300, 12 * S),            // earlier still: the winner
            reserved(3, 8, 1_000, 11 * S, 30 * S),
            bid(3, 1, 999, 15 * S), // below: auction 3 has no winner
        ];
        let out = q9(&events, &lag(10_000));
        let winners: Vec<(i64, i64, i64, i64)> = out
            .rows
            .iter()
            .map(|r| (r.id, r.bidder, r.price, r.bid_date_time))
            .collect();
        assert_eq!(winners, [(1, 3, 100, 20 * S), (2, 9, 300, 12 * S)]);
        assert!(csv(&out)[0].starts_with("1,item,d,1,100,10000,20000,7,10,,1,3,100,20000,"));
        // Without the earliest bid, equal (price, time): the lowest bidder, then the least extra.
        let ties = [
            reserved(2, 7, 0, 11 * S, 30 * S),
            bid_extra(2, 6, 300, 13 * S, "b"),
            bid_extra(2, 6, 300, 13 * S, "a"),
            bid_extra(2, 8, 300, 13 * S, ""),
        ];
        let row = &q9(&ties, &lag(0)).rows[0];
        assert_eq!((row.bidder, row.bid_extra.as_str()), (6, "a"));
    }

    #[test]
    fn q6_averages_each_sellers_last_ten_closes_in_close_order() {
        let mut events = Vec::new();
        // Seller 7: 12 auctions, closing in the reverse of their id order; auction i wins
        // at price 10 * i. Seller 8: one auction without a valid bid, one with.
        for i in 1..=12 {
            events.push(reserved(i, 7, 0, S, 100 * S - i * S));
            events.push(bid(i, 1, 10 * i, 2 * S));
        }
        events.push(reserved(50, 8, 1_000, S, 10 * S));
        events.push(bid(50, 1, 999, 2 * S));
        events.push(reserved(51, 8, 0, S, 10 * S));
        events.push(bid(51, 1, 5, 2 * S));
        let out = q6(&events, &lag(1_000 * S as u64));
        let rows: Vec<(i64, f64)> = out.rows.iter().map(|r| (r.seller, r.avg_price)).collect();
        // Closes of seller 7: auction 12 first (price 120), then 11 (110), ... then 1 (10).
        let mut want = Vec::new();
        let prices: Vec<i64> = (1..=12).rev().map(|i| 10 * i).collect();
        for n in 1..=12usize {
            let last = &prices[n.saturating_sub(10)..n];
            want.push((7, last.iter().sum::<i64>() as f64 / last.len() as f64));
        }
        want.push((8, 5.0));
        assert_eq!(rows, want);
        assert_eq!(rows[11].1, 55.0); // the last 10 closes: (100 + 90 + ... + 10) / 10
        assert_eq!(csv(&out)[0], "7,120");
    }

    #[test]
    fn q10_dates_and_minutes_are_utc() {
        let events = [
            bid_extra(1, 2, 3, 1_436_918_400_000, "x,y"), // 2015-07-15 00:00 UTC
            bid(1, 2, 3, 1_436_918_399_999),              // a millisecond before
            bid(1, 2, 3, -1),                             // just before the epoch
            person(1, "p", "OR", 0),
        ];
        assert_eq!(
            csv(&q10(&events, &lag(u64::MAX))),
            [
                "1,2,3,1436918400000,\"x,y\",2015-07-15,00:00",
                "1,2,3,1436918399999,,2015-07-14,23:59",
                "1,2,3,-1,,1969-12-31,23:59",
            ]
        );
        assert_eq!(utc_date_and_minute(951_782_400_000).0, "2000-02-29");
        assert_eq!(utc_date_and_minute(253_402_300_799_999).0, "9999-12-31");
        assert_eq!(utc_date_and_minute(253_402_300_800_000).0, "10000-01-01");
        assert_eq!(utc_date_and_minute(i64::MAX).1, "07:12"); // 9223372036854775807 % 86400000 ms
        assert!(utc_date_and_minute(i64::MIN).0.starts_with('-'));
    }

    #[test]
    fn q11_sessions_split_at_a_gap_of_ten_seconds_or_more() {
        let events = [
            bid(1, 1, 1, 0),
            bid(1, 1, 1, 10 * S - 1), // within the gap: same session
            bid(1, 2, 1, 5 * S),
            bid(1, 1, 1, 20 * S - 1), // exactly the gap after the last: a new session
            bid(1, 1, 1, 25 * S),
            bid(1, 1, 1, 12 * S), // out of order, within the lag: joins the two sessions
            bid(1, 2, 1, 0),      // late (the watermark is 25 s - 10 s): dropped
        ];
        let out = q11(&events, &lag(13_000));
        assert_eq!(out.late_events, 1);
        assert_eq!(csv(&out), ["1,5,0,35000", "2,1,5000,15000"]);
        let apart = q11(&[bid(1, 1, 1, 0), bid(1, 1, 1, 10 * S)], &lag(0));
        assert_eq!(csv(&apart), ["1,1,0,10000", "1,1,10000,20000"]);
    }

    #[test]
    fn q12_totals_count_every_bid_and_windowed_rows_sum_to_them() {
        let events = [
            bid(1, 1, 1, 10 * S),
            bid(1, 2, 1, 0), // late in event time, but q12 reads in processing time
            bid(1, 1, 1, 11 * S),
            person(3, "p", "OR", 0),
        ];
        let out = q12(&events, &lag(0));
        assert_eq!(
            (csv(&out), out.late_events),
            (vec!["1,2".into(), "2,1".into()], 0)
        );
        let windowed = vec![
            "1,1,0,10000".to_string(),
            "2,1,0,10000".into(),
            "1,1,10000,20000".into(),
        ];
        assert_eq!(
            comparable_rows(Query::Q12, windowed).unwrap(),
            ["1,2", "2,1"]
        );
        assert!(
            comparable_rows(Query::Q12, vec!["x,1".into()])
                .unwrap_err()
                .contains("x,1")
        );
        assert_eq!(comparable_rows(Query::Q7, vec!["x".into()]).unwrap(), ["x"]);
    }

    #[test]
    fn csv_rows_dispatches_every_query() {
        let events = [
            person(1, "ann", "OR", 0),
            auction(123, 1, 10, 0, 10),
            bid(123, 1, 7, 5),
        ];
        let expect = |q: Query| csv_rows(q, &events, &Options::default()).rows;
        assert_eq!(expect(Query::Q0), ["123,1,7,5"]);
        assert_eq!(expect(Query::Q1), [format!("123,1,{},5", 7.0 * 0.908)]);
        assert_eq!(expect(Query::Q2), ["123,7"]);
        assert_eq!(expect(Query::Q3), ["ann,boise,OR,123"]);
        assert_eq!(expect(Query::Q4), ["10,7"]);
        assert_eq!(expect(Query::Q5).len(), 5);
        assert_eq!(expect(Query::Q7), ["0,10000,123,1,7,5"]);
        assert_eq!(expect(Query::Q8), ["1,ann,0"]);
        assert_eq!(expect(Query::Q6), ["1,7"]);
        assert_eq!(expect(Query::Q9), ["123,item,d,1,2,0,10,1,10,,123,1,7,5,"]);
        assert_eq!(expect(Query::Q10), ["123,1,7,5,,1970-01-01,00:00"]);
        assert_eq!(expect(Query::Q11), ["1,1,5,10005"]);
        assert_eq!(expect(Query::Q12), ["1,1"]);
    }

    #[test]
    fn csv_quoting() {
        let row = Q8Row {
            id: -1,
            name: "a \"b\", c\nd".into(),
            window_start: 0,
        };
        assert_eq!(row.to_csv_row(), "-1,\"a \"\"b\"\", c\nd\",0");
    }
}
