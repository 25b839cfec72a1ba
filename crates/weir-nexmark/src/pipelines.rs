//! The NEXMark queries as Weir stream pipelines.
//!
//! ```
//! use weir::prelude::*;
//! use weir_nexmark::generator::GeneratorConfig;
//! use weir_nexmark::{Query, pipelines, reference, source};
//!
//! let config = GeneratorConfig { count: Some(20_000), ..Default::default() };
//! let p = Pipeline::new();
//! let events = p.read_from(source::stream_generator(config.clone(), None)?).with_native_timestamps(4_000);
//! let (sink, rows) = sinks::collection::list();
//! pipelines::csv_rows(Query::Q5, &events).write_to(sink);
//! p.run()?;
//!
//! let all: Vec<_> = weir_nexmark::Generator::new(config)?.iter().collect();
//! let mut want = reference::csv_rows(Query::Q5, &all, &reference::Options::default()).rows;
//! let mut got = rows.take();
//! got.sort();
//! want.sort();
//! assert_eq!(got, want);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Each query takes the event stream, with event time already chosen, and returns a stream of
//! its typed rows ([`reference`](crate::reference)'s row types, so results compare directly).
//! Plans, per query:
//!
//! - q0–q2: one fused vertex behind the source (filter and map on the event).
//! - q3: category-10 auctions and OR/ID/CA persons, joined by seller over the whole stream.
//! - q4: auctions joined with slim bids by auction; the valid bids' maximum per auction in a
//!   global window; their average per category in a second global window (final values at
//!   the end of a finite stream).
//! - q5: bid counts per auction in 10 s windows sliding by 2 s (two-stage, with `deduct`),
//!   then per window the auctions with the highest count.
//! - q7: per 10 s tumbling window, the highest price and the bids that have it, accumulated
//!   where the bids are read and combined in one instance.
//! - q6: q9's winning bids, slimmed to seller, expiry, id and price; per seller, held until
//!   the watermark passes their expiry (so that they come in close order from every
//!   instance) and averaged over the last 10 as each comes.
//! - q8: persons and auctions joined by id in 10 s tumbling windows, then distinct rows.
//! - q9: auctions and bids by auction id into keyed state with event-time timers
//!   ([`process_with_timers`](weir::stream::KeyedStreamStage::process_with_timers)): each
//!   auction keeps its best valid bid so far; a timer at its expiry emits the winner once
//!   the watermark passes it. A bid also waits, until the watermark passes its time, for an
//!   auction that arrives after it (out of order).
//! - q10: every bid with its UTC date and minute, one fused vertex; written as one CSV file or
//!   as a directory of partitions ([`crate::partitioned`]).
//! - q11: bid counts per bidder in session windows with a 10 s gap.
//! - q12: bid counts per bidder in 10 s tumbling windows of the time each event was read
//!   (the stream must be stamped with ingestion time: [`Query::in_processing_time`]).

use std::path::Path;

use weir::aggregate::{aggregate_operation, averaging, max_by};
use weir::join_on;
use weir::stream::Timers;
use weir::stream::{KeyedWindowResult, StreamStage, Window, WindowDefinition, WindowResult};
use weir::{Item, sinks};

use crate::model::{Auction, Bid, Event, Person};
use crate::query::Query;
use crate::reference::{
    CsvRow, Q0Row, Q1_FACTOR, Q1Row, Q2_MODULUS, Q2Row, Q3_CATEGORY, Q3_STATES, Q3Row, Q4Row,
    Q5_SLIDE_MS, Q5_WINDOW_MS, Q5Row, Q6_LAST_AUCTIONS, Q6Row, Q7_WINDOW_MS, Q7Row, Q8_WINDOW_MS,
    Q8Row, Q9Row, Q10Row, Q11_SESSION_GAP_MS, Q11Row, Q12_WINDOW_MS, Q12Row,
};

fn bids(events: &StreamStage<Event>) -> StreamStage<Bid> {
    events.filter_map(|e| match e {
        Event::Bid(b) => Some(b),
        _ => None,
    })
}

fn auctions(events: &StreamStage<Event>) -> StreamStage<Auction> {
    events.filter_map(|e| match e {
        Event::Auction(a) => Some(*a),
        _ => None,
    })
}

fn persons(events: &StreamStage<Event>) -> StreamStage<Person> {
    events.filter_map(|e| match e {
        Event::Person(p) => Some(*p),
        _ => None,
    })
}

/// q0: every bid.
pub fn q0(events: &StreamStage<Event>) -> StreamStage<Q0Row> {
    events.filter_map(|e| match e {
        Event::Bid(b) => Some(Q0Row {
            auction: b.auction,
            bidder: b.bidder,
            price: b.price,
            date_time: b.date_time,
        }),
        _ => None,
    })
}

/// q1: every bid, price converted.
pub fn q1(events: &StreamStage<Event>) -> StreamStage<Q1Row> {
    events.filter_map(|e| match e {
        Event::Bid(b) => Some(Q1Row {
            auction: b.auction,
            bidder: b.bidder,
            price: b.price as f64 * Q1_FACTOR,
            date_time: b.date_time,
        }),
        _ => None,
    })
}

/// q2: bids on auctions whose id is a multiple of 123.
pub fn q2(events: &StreamStage<Event>) -> StreamStage<Q2Row> {
    events.filter_map(|e| match e {
        Event::Bid(b) if b.auction % Q2_MODULUS == 0 => Some(Q2Row {
            auction: b.auction,
            price: b.price,
        }),
        _ => None,
    })
}

/// q3: category-10 auctions of sellers in OR, ID or CA, with the seller's name, city, state.
pub fn q3(events: &StreamStage<Event>) -> StreamStage<Q3Row> {
    let sellers = persons(events).filter(|p| Q3_STATES.contains(&p.state.as_str()));
    let auctions = auctions(events)
        .filter(|a| a.category == Q3_CATEGORY)
        .map(|a| (a.id, a.seller));
    auctions.join(
        &sellers,
        join_on(|a: &(i64, i64)| a.1, |p: &Person| p.id),
        None,
        |a, p| Q3Row {
            name: p.name.clone(),
            city: p.city.clone(),
            state: p.state.clone(),
            id: a.0,
        },
    )
}

/// An auction's validity interval and category: what q4 keeps of it.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct AuctionSpan {
    id: i64,
    category: i64,
    opens: i64,
    expires: i64,
}

/// q4: the average winning price per category, at the end of the input.
pub fn q4(events: &StreamStage<Event>) -> StreamStage<Q4Row> {
    let spans = auctions(events).map(|a| AuctionSpan {
        id: a.id,
        category: a.category,
        opens: a.date_time,
        expires: a.expires,
    });
    // Only what the join needs of a bid: its auction, time and price.
    let bids = bids(events).map(|b| (b.auction, b.date_time, b.price));
    spans
        .join(
            &bids,
            join_on(|a: &AuctionSpan| a.id, |b: &(i64, i64, i64)| b.0),
            None,
            |a, b| (*a, b.1, b.2),
        )
        .filter(|(a, time, _)| a.opens <= *time && *time <= a.expires)
        .grouping_key(|(a, _, _): &(AuctionSpan, i64, i64)| (a.id, a.category))
        .window(WindowDefinition::global())
        .aggregate(max_by(|(_, _, price): &(AuctionSpan, i64, i64)| *price))
        .filter_map(|r| r.value.map(|(a, _, price)| (a.category, price)))
        .grouping_key(|(category, _): &(i64, i64)| *category)
        .window(WindowDefinition::global())
        .aggregate(averaging(|(_, price): &(i64, i64)| *price as f64))
        .map(|r: KeyedWindowResult<i64, f64>| Q4Row {
            category: r.key,
            avg_price: r.value,
        })
}

/// The highest count of a window and the auctions that reach it.
fn top_auctions() -> impl weir::aggregate::AggregateOperation<
    KeyedWindowResult<i64, u64>,
    Acc = (u64, Vec<i64>),
    Output = (u64, Vec<i64>),
> {
    fn add(acc: &mut (u64, Vec<i64>), count: u64, auctions: &[i64]) {
        if count > acc.0 {
            *acc = (count, auctions.to_vec());
        } else if count == acc.0 {
            acc.1.extend_from_slice(auctions);
        }
    }
    aggregate_operation(
        || (0u64, Vec::new()),
        |acc: &mut (u64, Vec<i64>), r: &KeyedWindowResult<i64, u64>| add(acc, r.value, &[r.key]),
        |acc: &mut (u64, Vec<i64>), other: (u64, Vec<i64>)| add(acc, other.0, &other.1),
        |acc| acc,
    )
}

/// q5: per 10 s window sliding by 2 s, the auctions with the most bids.
pub fn q5(events: &StreamStage<Event>) -> StreamStage<Q5Row> {
    hottest(
        bids(events)
            .grouping_key(|b: &Bid| b.auction)
            .window(WindowDefinition::sliding(Q5_WINDOW_MS, Q5_SLIDE_MS)),
    )
}

/// q5 with its bid counts aggregated in one stage after the shuffle
/// ([`single_stage`](weir::stream::KeyedWindowedStage::single_stage)): the same rows as
/// [`q5`], with every bid crossing the shuffle instead of one count per auction and frame,
/// so that a window's close sends no burst of partial counts. The form for latency.
pub fn q5_single_stage(events: &StreamStage<Event>) -> StreamStage<Q5Row> {
    hottest(
        bids(events)
            .grouping_key(|b: &Bid| b.auction)
            .window(WindowDefinition::sliding(Q5_WINDOW_MS, Q5_SLIDE_MS))
            .single_stage(),
    )
}

/// q5's counts of bids per auction in `windowed`, and each window's most bid auctions.
fn hottest(windowed: weir::stream::KeyedWindowedStage<Bid, i64>) -> StreamStage<Q5Row> {
    windowed
        .aggregate(weir::aggregate::counting())
        // Each count is stamped end - 1, so a tumbling window of one slide gathers exactly
        // the counts of one sliding window.
        .grouping_key(|r: &KeyedWindowResult<i64, u64>| r.end)
        .window(WindowDefinition::tumbling(Q5_SLIDE_MS))
        .aggregate(top_auctions())
        .flat_map(|r: KeyedWindowResult<i64, (u64, Vec<i64>)>| {
            let (end, (num, auctions)) = (r.key, r.value);
            auctions.into_iter().map(move |auction| Q5Row {
                window_start: end - Q5_WINDOW_MS,
                window_end: end,
                auction,
                num,
            })
        })
}

/// The highest price of a window and the bids that have it.
fn top_bids() -> impl weir::aggregate::AggregateOperation<Bid, Acc = Vec<Bid>, Output = Vec<Bid>> {
    /// Only a bid that ties or beats the top is cloned: most bids are below it.
    fn add(acc: &mut Vec<Bid>, b: &Bid) {
        match acc.first().map(|top| top.price) {
            Some(top) if b.price < top => {}
            Some(top) if b.price == top => acc.push(b.clone()),
            _ => {
                acc.clear();
                acc.push(b.clone());
            }
        }
    }
    aggregate_operation(
        Vec::new,
        add,
        |acc: &mut Vec<Bid>, other: Vec<Bid>| other.iter().for_each(|b| add(acc, b)),
        |acc| acc,
    )
}

/// q7: per 10 s tumbling window, the bids with the highest price.
pub fn q7(events: &StreamStage<Event>) -> StreamStage<Q7Row> {
    bids(events)
        .window(WindowDefinition::tumbling(Q7_WINDOW_MS))
        .aggregate(top_bids())
        .flat_map(|r: WindowResult<Vec<Bid>>| {
            let (start, end) = (r.start, r.end);
            r.value.into_iter().map(move |b| Q7Row {
                window_start: start,
                window_end: end,
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                date_time: b.date_time,
            })
        })
}

/// q8: people who opened an auction in the 10 s window they registered in, once per window.
pub fn q8(events: &StreamStage<Event>) -> StreamStage<Q8Row> {
    let people = persons(events).map(|p| (p.id, p.name));
    let sellers = auctions(events).map(|a| a.seller);
    people
        .join_windowed(
            &sellers,
            WindowDefinition::tumbling(Q8_WINDOW_MS),
            join_on(
                |p: &(i64, compact_str::CompactString)| p.0,
                |seller: &i64| *seller,
            ),
            |w: &Window, p, _| Q8Row {
                id: p.0,
                name: p.1.clone(),
                window_start: w.start,
            },
        )
        // A person with several auctions in the window matches several times: keep one row
        // per distinct (id, name, window_start), as the README defines q8's rows.
        .grouping_key(|r: &Q8Row| (r.id, r.name.clone(), r.window_start))
        .map_stateful(
            Some(2 * Q8_WINDOW_MS),
            || false,
            |seen: &mut bool, _key, row| (!std::mem::replace(seen, true)).then_some(row),
        )
}

/// What q6 and q9 need of an auction to find its winning bid.
trait AuctionSide: Item + serde::Serialize + serde::de::DeserializeOwned {
    fn id(&self) -> i64;
    fn opens(&self) -> i64;
    fn expires(&self) -> i64;
    fn reserve(&self) -> i64;
}

/// What q6 and q9 need of a bid to rank it.
trait BidSide: Item + serde::Serialize + serde::de::DeserializeOwned {
    fn auction(&self) -> i64;
    fn price(&self) -> i64;
    fn date_time(&self) -> i64;
    fn bidder(&self) -> i64;
    fn extra(&self) -> &str;
}

impl AuctionSide for Box<Auction> {
    fn id(&self) -> i64 {
        self.id
    }
    fn opens(&self) -> i64 {
        self.date_time
    }
    fn expires(&self) -> i64 {
        self.expires
    }
    fn reserve(&self) -> i64 {
        self.reserve
    }
}

impl BidSide for Bid {
    fn auction(&self) -> i64 {
        self.auction
    }
    fn price(&self) -> i64 {
        self.price
    }
    fn date_time(&self) -> i64 {
        self.date_time
    }
    fn bidder(&self) -> i64 {
        self.bidder
    }
    fn extra(&self) -> &str {
        &self.extra
    }
}

/// What q6 keeps of an auction.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct SellerAuction {
    id: i64,
    seller: i64,
    reserve: i64,
    opens: i64,
    expires: i64,
}

impl AuctionSide for SellerAuction {
    fn id(&self) -> i64 {
        self.id
    }
    fn opens(&self) -> i64 {
        self.opens
    }
    fn expires(&self) -> i64 {
        self.expires
    }
    fn reserve(&self) -> i64 {
        self.reserve
    }
}

/// What q6 keeps of a bid: its price and what ranks it among equal prices (no `extra`:
/// equal prices give q6 the same result whichever wins).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct PricedBid {
    auction: i64,
    price: i64,
    date_time: i64,
    bidder: i64,
}

impl BidSide for PricedBid {
    fn auction(&self) -> i64 {
        self.auction
    }
    fn price(&self) -> i64 {
        self.price
    }
    fn date_time(&self) -> i64 {
        self.date_time
    }
    fn bidder(&self) -> i64 {
        self.bidder
    }
    fn extra(&self) -> &str {
        ""
    }
}

/// An auction or a bid, keyed together by auction id.
#[derive(Debug, Clone)]
enum Side<A, B> {
    Auction(A),
    Bid(B),
}

/// One auction id's state while its auctions are open: each auction with its best valid bid
/// so far, and the bids that may still meet an auction arriving after them, in arrival
/// order (about time order: out of order by less than the lag).
#[derive(serde::Serialize, serde::Deserialize)]
struct Closing<A, B> {
    auctions: Vec<(A, Option<B>)>,
    pending: std::collections::VecDeque<B>,
}

/// Whether `b` may win `a`: placed within `[opens, expires]`, at or above the reserve.
fn valid<A: AuctionSide, B: BidSide>(a: &A, b: &B) -> bool {
    a.opens() <= b.date_time() && b.date_time() <= a.expires() && b.price() >= a.reserve()
}

/// Whether `b` beats `best`: a higher price, or as high and earlier (then a lower bidder,
/// then a lesser `extra`, so that the winner never depends on arrival order).
fn beats<B: BidSide>(b: &B, best: Option<&B>) -> bool {
    best.is_none_or(|w| {
        b.price() > w.price()
            || (b.price() == w.price()
                && (b.date_time(), b.bidder(), b.extra()) < (w.date_time(), w.bidder(), w.extra()))
    })
}

/// Each auction with its winning bid, stamped with its expiry, once the watermark passes
/// the expiry: the core of q6 and q9.
fn winning_bids<A: AuctionSide, B: BidSide>(sides: StreamStage<Side<A, B>>) -> StreamStage<(A, B)> {
    sides
        .grouping_key(|s: &Side<A, B>| match s {
            Side::Auction(a) => a.id(),
            Side::Bid(b) => b.auction(),
        })
        .process_with_timers(
            || Closing {
                auctions: Vec::new(),
                pending: std::collections::VecDeque::new(),
            },
            |st: &mut Closing<A, B>, _id, _t, side, timers: &mut Timers| match side {
                Side::Auction(a) => {
                    let mut best: Option<B> = None;
                    for b in &st.pending {
                        if valid(&a, b) && beats(b, best.as_ref()) {
                            best = Some(b.clone());
                        }
                    }
                    timers.at(a.expires());
                    st.auctions.push((a, best));
                }
                Side::Bid(b) => {
                    for (a, best) in &mut st.auctions {
                        if valid(a, &b) && beats(&b, best.as_ref()) {
                            *best = Some(b.clone());
                        }
                    }
                    // An auction that arrives later is on time, so it opens at or after the
                    // watermark: once the watermark passes the bid, no auction can take it.
                    timers.at(b.date_time());
                    st.pending.push_back(b);
                }
            },
            |st, _id, t, out| {
                // Bids the watermark passed go from the front. One behind a later bid stays a
                // little longer, harmlessly: an auction still to come opens after it.
                while st.pending.front().is_some_and(|b| b.date_time() <= t) {
                    st.pending.pop_front();
                }
                let mut i = 0;
                while i < st.auctions.len() {
                    if st.auctions[i].0.expires() <= t {
                        let (a, best) = st.auctions.swap_remove(i);
                        out.extend(best.map(|b| (a, b)));
                    } else {
                        i += 1;
                    }
                }
                !(st.auctions.is_empty() && st.pending.is_empty())
            },
        )
}

/// A seller's closed auctions waiting for the watermark, and the prices of its last 10.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct SellerPrices {
    /// `(expires, auction id, price)` of closes not yet averaged in.
    closed: Vec<(i64, i64, i64)>,
    /// The winning prices of the last closes, oldest first.
    last: std::collections::VecDeque<i64>,
}

/// q6: per seller, at each close of one of its auctions with a winning bid, the average
/// winning price of its last 10 such auctions, in close (`expires`, then id) order.
pub fn q6(events: &StreamStage<Event>) -> StreamStage<Q6Row> {
    let sides = events.filter_map(|e| match e {
        Event::Auction(a) => Some(Side::Auction(SellerAuction {
            id: a.id,
            seller: a.seller,
            reserve: a.reserve,
            opens: a.date_time,
            expires: a.expires,
        })),
        Event::Bid(b) => Some(Side::Bid(PricedBid {
            auction: b.auction,
            price: b.price,
            date_time: b.date_time,
            bidder: b.bidder,
        })),
        Event::Person(_) => None,
    });
    winning_bids(sides)
        .map(|(a, b): (SellerAuction, PricedBid)| (a.seller, a.expires, a.id, b.price))
        .grouping_key(|c: &(i64, i64, i64, i64)| c.0)
        // Winners of one seller come from every instance of the stage before, in any order:
        // each waits until the watermark passes its close, and then they go in close order.
        .process_with_timers(
            SellerPrices::default,
            |s: &mut SellerPrices, _seller, _t, c, timers: &mut Timers| {
                s.closed.push((c.1, c.2, c.3));
                timers.at(c.1);
            },
            |s, &seller, t, out| {
                s.closed.sort_unstable();
                let ready = s.closed.partition_point(|c| c.0 <= t);
                for (_, _, price) in s.closed.drain(..ready) {
                    if s.last.len() == Q6_LAST_AUCTIONS {
                        s.last.pop_front();
                    }
                    s.last.push_back(price);
                    let sum: i128 = s.last.iter().map(|&p| i128::from(p)).sum();
                    out.push(Q6Row {
                        seller,
                        avg_price: sum as f64 / s.last.len() as f64,
                    });
                }
                true // the last prices stay for the seller's next close
            },
        )
}

/// q9: each auction with its winning bid (the highest at or above the reserve placed within
/// `[date_time, expires]`, the earliest of those), when the watermark passes its expiry.
pub fn q9(events: &StreamStage<Event>) -> StreamStage<Q9Row> {
    let sides = events.filter_map(|e| match e {
        Event::Auction(a) => Some(Side::Auction(a)),
        Event::Bid(b) => Some(Side::Bid(b)),
        Event::Person(_) => None,
    });
    winning_bids(sides).map(|(a, b): (Box<Auction>, Bid)| {
        let a = *a;
        Q9Row {
            id: a.id,
            item_name: a.item_name,
            description: a.description,
            initial_bid: a.initial_bid,
            reserve: a.reserve,
            date_time: a.date_time,
            expires: a.expires,
            seller: a.seller,
            category: a.category,
            extra: a.extra,
            auction: b.auction,
            bidder: b.bidder,
            price: b.price,
            bid_date_time: b.date_time,
            bid_extra: b.extra,
        }
    })
}

/// The UTC `yyyy-MM-dd` and `HH:mm` of `ms` since the epoch (proleptic Gregorian calendar;
/// a year of at least 4 digits, `-` before a year below 0). Days to a civil date by Howard
/// Hinnant's `civil_from_days`: integer arithmetic, exact over the whole `i64` range.
fn date_and_minute(ms: i64) -> (compact_str::CompactString, compact_str::CompactString) {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let minute = in_day / 60_000;
    let (hour, minute) = (minute / 60, minute % 60);
    let hm = two_digit_pair(hour, b':', minute);
    let dt = if (0..10_000).contains(&year) {
        let mut d = [0u8; 10];
        let y = year as usize;
        d[..4].copy_from_slice(&[
            b'0' + (y / 1000) as u8,
            b'0' + (y / 100 % 10) as u8,
            b'0' + (y / 10 % 10) as u8,
            b'0' + (y % 10) as u8,
        ]);
        d[4] = b'-';
        d[5..].copy_from_slice(two_digit_pair(month, b'-', day).as_bytes());
        compact_str::CompactString::from_utf8(d).expect("ASCII digits")
    } else {
        compact_str::format_compact!("{year:04}-{month:02}-{day:02}")
    };
    (dt, hm)
}

/// `aa<sep>bb` for two numbers below 100.
fn two_digit_pair(a: i64, sep: u8, b: i64) -> compact_str::CompactString {
    let bytes = [
        b'0' + (a / 10) as u8,
        b'0' + (a % 10) as u8,
        sep,
        b'0' + (b / 10) as u8,
        b'0' + (b % 10) as u8,
    ];
    compact_str::CompactString::from_utf8(bytes).expect("ASCII digits")
}

/// q10: every bid, with the UTC date and minute of its time, its partition.
pub fn q10(events: &StreamStage<Event>) -> StreamStage<Q10Row> {
    events.filter_map(|e| match e {
        Event::Bid(b) => {
            let (dt, hm) = date_and_minute(b.date_time);
            Some(Q10Row {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                date_time: b.date_time,
                extra: b.extra,
                dt,
                hm,
            })
        }
        _ => None,
    })
}

/// q11: per bidder, its bids per session (a 10 s gap ends one).
pub fn q11(events: &StreamStage<Event>) -> StreamStage<Q11Row> {
    bids(events)
        .grouping_key(|b: &Bid| b.bidder)
        .window(WindowDefinition::session(Q11_SESSION_GAP_MS))
        .aggregate(weir::aggregate::counting())
        .map(|r: KeyedWindowResult<i64, u64>| Q11Row {
            bidder: r.key,
            bid_count: r.value,
            window_start: r.start,
            window_end: r.end,
        })
}

/// q12: per bidder, its bids per 10 s tumbling window of the stream's time, which for q12
/// is processing time: stamp `events` with ingestion time
/// ([`with_ingestion_timestamps`](weir::stream::StreamSourceStage::with_ingestion_timestamps)).
pub fn q12(events: &StreamStage<Event>) -> StreamStage<Q12Row> {
    bids(events)
        .grouping_key(|b: &Bid| b.bidder)
        .window(WindowDefinition::tumbling(Q12_WINDOW_MS))
        .aggregate(weir::aggregate::counting())
        .map(|r: KeyedWindowResult<i64, u64>| Q12Row {
            bidder: r.key,
            bid_count: r.value,
            window_start: r.start,
            window_end: r.end,
        })
}

/// `query`'s rows as CSV text (no header, no line terminator), for writing or comparing.
pub fn csv_rows(query: Query, events: &StreamStage<Event>) -> StreamStage<String> {
    fn text<R: CsvRow + Item>(rows: StreamStage<R>) -> StreamStage<String> {
        rows.map(|r| r.to_csv_row())
    }
    match query {
        Query::Q0 => text(q0(events)),
        Query::Q1 => text(q1(events)),
        Query::Q2 => text(q2(events)),
        Query::Q3 => text(q3(events)),
        Query::Q4 => text(q4(events)),
        Query::Q5 => text(q5(events)),
        Query::Q6 => text(q6(events)),
        Query::Q7 => text(q7(events)),
        Query::Q8 => text(q8(events)),
        Query::Q9 => text(q9(events)),
        Query::Q10 => text(q10(events)),
        Query::Q11 => text(q11(events)),
        Query::Q12 => text(q12(events)),
    }
}

/// Writes `query`'s rows to the CSV file `path`, under the query's header, one row per line
/// (as [`csv_rows`], with `\n` after each). The file appears when the job ends; see
/// [`weir::sinks::files::text_with_header`].
///
/// Cost: each row formatted straight into bytes ([`CsvRow::write_csv`]), where the rows are
/// made: no string per row, and a single writer that only appends the bytes.
pub fn write_csv(query: Query, events: &StreamStage<Event>, path: &Path) {
    fn write<R: CsvRow + Item>(rows: StreamStage<R>, path: &Path) {
        let header = format!("{}\n", R::HEADER);
        rows.write_to(sinks::files::text_with_header(
            path,
            header,
            |row: &R, out: &mut Vec<u8>| {
                row.write_csv(out);
                out.push(b'\n');
            },
        ));
    }
    match query {
        Query::Q0 => write(q0(events), path),
        Query::Q1 => write(q1(events), path),
        Query::Q2 => write(q2(events), path),
        Query::Q3 => write(q3(events), path),
        Query::Q4 => write(q4(events), path),
        Query::Q5 => write(q5(events), path),
        Query::Q6 => write(q6(events), path),
        Query::Q7 => write(q7(events), path),
        Query::Q8 => write(q8(events), path),
        Query::Q9 => write(q9(events), path),
        Query::Q10 => write(q10(events), path),
        Query::Q11 => write(q11(events), path),
        Query::Q12 => write(q12(events), path),
    }
}

/// `query`'s rows, counted and dropped: for benchmarks, where formatting would dominate.
pub fn row_count(query: Query, events: &StreamStage<Event>) -> StreamStage<()> {
    fn unit<R: Item>(rows: StreamStage<R>) -> StreamStage<()> {
        rows.map(|_| ())
    }
    match query {
        Query::Q0 => unit(q0(events)),
        Query::Q1 => unit(q1(events)),
        Query::Q2 => unit(q2(events)),
        Query::Q3 => unit(q3(events)),
        Query::Q4 => unit(q4(events)),
        Query::Q5 => unit(q5(events)),
        Query::Q6 => unit(q6(events)),
        Query::Q7 => unit(q7(events)),
        Query::Q8 => unit(q8(events)),
        Query::Q9 => unit(q9(events)),
        Query::Q10 => unit(q10(events)),
        Query::Q11 => unit(q11(events)),
        Query::Q12 => unit(q12(events)),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::date_and_minute;
    use crate::reference::utc_date_and_minute;

    #[test]
    fn dates_at_the_edges() {
        let at = |ms| {
            let (dt, hm) = date_and_minute(ms);
            format!("{dt} {hm}")
        };
        assert_eq!(at(0), "1970-01-01 00:00");
        assert_eq!(at(-1), "1969-12-31 23:59");
        assert_eq!(at(1_436_918_400_000), "2015-07-15 00:00");
        assert_eq!(at(951_782_400_000), "2000-02-29 00:00");
        assert_eq!(at(4_107_542_400_000), "2100-03-01 00:00"); // 2100 is no leap year
        assert_eq!(at(-62_167_219_200_000), "0000-01-01 00:00");
        assert_eq!(at(-62_167_219_200_001), "-001-12-31 23:59");
    }

    proptest! {
        /// The pipeline's integer arithmetic and the reference's chrono agree everywhere.
        #[test]
        fn dates_agree_with_the_reference(ms in any::<i64>()) {
            prop_assert_eq!(date_and_minute(ms), utc_date_and_minute(ms));
        }

        #[test]
        fn dates_agree_around_now(ms in -5_000_000_000_000i64..5_000_000_000_000) {
            prop_assert_eq!(date_and_minute(ms), utc_date_and_minute(ms));
        }
    }
}
