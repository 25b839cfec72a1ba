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
//! - q8: persons and auctions joined by id in 10 s tumbling windows, then distinct rows.

use std::path::Path;

use weir::aggregate::{aggregate_operation, averaging, max_by};
use weir::join_on;
use weir::stream::{KeyedWindowResult, StreamStage, Window, WindowDefinition, WindowResult};
use weir::{Item, sinks};

use crate::model::{Auction, Bid, Event, Person};
use crate::query::Query;
use crate::reference::{
    CsvRow, Q0Row, Q1_FACTOR, Q1Row, Q2_MODULUS, Q2Row, Q3_CATEGORY, Q3_STATES, Q3Row, Q4Row,
    Q5_SLIDE_MS, Q5_WINDOW_MS, Q5Row, Q7_WINDOW_MS, Q7Row, Q8_WINDOW_MS, Q8Row,
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
    bids(events)
        .grouping_key(|b: &Bid| b.auction)
        .window(WindowDefinition::sliding(Q5_WINDOW_MS, Q5_SLIDE_MS))
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
        Query::Q7 => text(q7(events)),
        Query::Q8 => text(q8(events)),
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
        Query::Q7 => write(q7(events), path),
        Query::Q8 => write(q8(events), path),
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
        Query::Q7 => unit(q7(events)),
        Query::Q8 => unit(q8(events)),
    }
}
