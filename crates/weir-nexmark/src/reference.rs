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
//! Row order: q0–q3 and q7 follow the input order; q4, q5 and q8 are sorted by their
//! columns. The README lets an engine emit rows in any order: compare sorted.
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

/// Runs `query` and returns its rows as CSV text (without the header or line terminators),
/// for callers that pick the query at run time. The header is [`Query::header`].
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
        Query::Q7 => rows(q7(events, options)),
        Query::Q8 => rows(q8(events, options)),
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
