//! Events from a NEXMark generator written apart from this project: the `nexmark` crate
//! (RisingWave's port of the Beam generator), with its own random source, string tables,
//! rate model and out-of-order groups. Shared by the NEXMark bench and the end-to-end tests
//! (each includes this file by path).
//!
//! Its file is written by `serde_json` from a JSON object per event, so the fields come in
//! `serde_json`'s order (alphabetical: `auction`, `bidder`, `channel`, ...), not in the order
//! this project's generator writes them. Results over it are checked against the reference
//! computed from the generator's events directly ([`independent_events`]), without parsing
//! the file.

// The bench and the tests each use a part of this module.
#![allow(dead_code)]

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::json;
use weir_nexmark::Event;

/// The event time of the first event: the same as this project's generator.
const BASE_TIME_MS: u64 = 1_436_918_400_000;

/// Events are shuffled inside groups of this many (about 50 ms at 20,000 events/s).
const OUT_OF_ORDER_GROUP: usize = 1000;

/// The independent generator's first `count` events at `rate` events/s of event time.
fn generator(rate: u64) -> nexmark::EventGenerator {
    let rate = usize::try_from(rate).expect("a rate that fits");
    nexmark::EventGenerator::new(nexmark::config::NexmarkConfig {
        base_time: BASE_TIME_MS,
        first_rate: rate,
        next_rate: rate,
        rate_shape: nexmark::config::RateShape::Square,
        out_of_order_group_size: OUT_OF_ORDER_GROUP,
        ..nexmark::config::NexmarkConfig::default()
    })
}

/// A non-negative id or amount as the model's integer.
fn int(n: impl TryInto<i64>) -> i64 {
    n.try_into().ok().expect("fits in 64 bits")
}

/// The events of the independent generator, in this project's model.
pub fn independent_events(count: u64, rate: u64) -> impl Iterator<Item = Event> {
    use nexmark::event::Event as Their;
    use weir_nexmark::model::{Auction, Bid, Person};
    generator(rate)
        .take(usize::try_from(count).expect("a count that fits"))
        .map(|e| match e {
            Their::Person(p) => Event::Person(Box::new(Person {
                id: int(p.id),
                name: p.name.into(),
                email_address: p.email_address.into(),
                credit_card: p.credit_card.into(),
                city: p.city.into(),
                state: p.state.into(),
                date_time: int(p.date_time),
                extra: p.extra.into(),
            })),
            Their::Auction(a) => Event::Auction(Box::new(Auction {
                id: int(a.id),
                item_name: a.item_name.into(),
                description: a.description.into(),
                initial_bid: int(a.initial_bid),
                reserve: int(a.reserve),
                date_time: int(a.date_time),
                expires: int(a.expires),
                seller: int(a.seller),
                category: int(a.category),
                extra: a.extra.into(),
            })),
            Their::Bid(b) => Event::Bid(Bid {
                auction: int(b.auction),
                bidder: int(b.bidder),
                price: int(b.price),
                channel: b.channel.into(),
                url: b.url.into(),
                date_time: int(b.date_time),
                extra: b.extra.into(),
            }),
        })
}

/// One event of the independent generator as a JSON object, written by `serde_json`.
fn to_json(e: &nexmark::event::Event) -> serde_json::Value {
    use nexmark::event::Event as Their;
    match e {
        Their::Person(p) => json!({
            "extra": p.extra, "state": p.state, "city": p.city, "credit_card": p.credit_card,
            "email_address": p.email_address, "name": p.name, "id": p.id,
            "date_time": p.date_time, "type": "person",
        }),
        Their::Auction(a) => json!({
            "extra": a.extra, "category": a.category, "seller": a.seller, "expires": a.expires,
            "date_time": a.date_time, "reserve": a.reserve, "initial_bid": a.initial_bid,
            "description": a.description, "item_name": a.item_name, "id": a.id,
            "type": "auction",
        }),
        Their::Bid(b) => json!({
            "extra": b.extra, "date_time": b.date_time, "url": b.url, "channel": b.channel,
            "price": b.price, "bidder": b.bidder, "auction": b.auction, "type": "bid",
        }),
    }
}

/// Writes the independent generator's first `count` events at `rate` events/s to `path`,
/// one JSON object a line; through a temporary file, so `path` exists only when complete.
pub fn write_independent_file(count: u64, rate: u64, path: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
    for e in generator(rate).take(usize::try_from(count).expect("a count that fits")) {
        serde_json::to_writer(&mut out, &to_json(&e))?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    drop(out);
    std::fs::rename(&tmp, path)
}
