//! The NEXMark event model: people, auctions and bids, as in the event file format of
//! `docs/nexmark.md`.
//!
//! Each struct has exactly the README's fields, under the README's JSON names. [`Event`] is
//! the tagged union one line of an event file holds; it serialises with the tag first,
//! `{"type":"bid",...}`, and deserialises strictly through [`parse`](crate::parse).
//!
//! ```
//! use weir_nexmark::{Bid, CompactString, Event};
//!
//! let bid = Event::Bid(Bid {
//!     auction: 1000,
//!     bidder: 1001,
//!     price: 5321,
//!     channel: CompactString::const_new("Google"),
//!     url: CompactString::const_new("https://www.nexmark.com/a/item.htm"),
//!     date_time: 1_436_918_400_002,
//!     extra: CompactString::default(),
//! });
//! let line = bid.to_json();
//! assert!(line.starts_with(r#"{"type":"bid","auction":1000,"bidder":1001,"price":5321,"#));
//! assert_eq!(weir_nexmark::parse::parse_line(line.as_bytes()).unwrap(), bid);
//! assert_eq!(bid.date_time(), 1_436_918_400_002);
//! ```
//!
//! # Types
//!
//! Integers are `i64`: the README asks for JSON integers within 64 bits, and the SQL engines
//! NEXMark is checked against use `BIGINT`. Times are milliseconds since the Unix epoch.
//! Strings are [`CompactString`]s: up to 24 bytes inline, and the generator hands out longer
//! ones as references to static tables, so generating and cloning a bid allocates nothing.
//! Parsed strings longer than 24 bytes take one heap allocation each.
//!
//! Every type here is an [`Item`](weir::Item): `Send + Clone + 'static`. An [`Event`] takes
//! 104 bytes, a [`Bid`]'s: persons and auctions, 8% of the generated events, are boxed.

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// A person registering with the auction site.
///
/// JSON: `{"type":"person","id":..,"name":..,"email_address":..,"credit_card":..,"city":..,
/// "state":..,"date_time":..,"extra":..}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Person {
    /// The person's id, unique per person in generated data (the newest is
    /// `event_id / 50 + 1000`).
    pub id: i64,
    /// First and last name, `"peter jones"`.
    pub name: CompactString,
    /// An email address, `"abcdefg@hijkl.com"`.
    pub email_address: CompactString,
    /// A credit card number, four groups of four digits.
    pub credit_card: CompactString,
    /// The city the person lives in.
    pub city: CompactString,
    /// The US state the person lives in, two capital letters (q3 keeps OR, ID and CA).
    pub state: CompactString,
    /// When the person registered, in ms since the Unix epoch.
    pub date_time: i64,
    /// Padding that brings the event to its nominal size.
    pub extra: CompactString,
}

/// An item put up for auction by a seller.
///
/// JSON: `{"type":"auction","id":..,"item_name":..,"description":..,"initial_bid":..,
/// "reserve":..,"date_time":..,"expires":..,"seller":..,"category":..,"extra":..}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Auction {
    /// The auction's id, unique per auction in generated data.
    pub id: i64,
    /// The name of the item sold.
    pub item_name: CompactString,
    /// A description of the item.
    pub description: CompactString,
    /// The opening price, in cents.
    pub initial_bid: i64,
    /// The lowest price the seller accepts, in cents.
    pub reserve: i64,
    /// When the auction opened, in ms since the Unix epoch.
    pub date_time: i64,
    /// When the auction closes, in ms since the Unix epoch (q4 counts bids up to and
    /// including this instant).
    pub expires: i64,
    /// The id of the [`Person`] selling the item.
    pub seller: i64,
    /// The item's category, 10 to 14 in generated data.
    pub category: i64,
    /// Padding that brings the event to its nominal size.
    pub extra: CompactString,
}

/// A bid on an auction.
///
/// JSON: `{"type":"bid","auction":..,"bidder":..,"price":..,"channel":..,"url":..,
/// "date_time":..,"extra":..}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Bid {
    /// The id of the [`Auction`] bid on.
    pub auction: i64,
    /// The id of the [`Person`] bidding.
    pub bidder: i64,
    /// The price bid, in cents.
    pub price: i64,
    /// The channel the bid came through (`"Google"`, `"channel-1234"`, ...).
    pub channel: CompactString,
    /// The URL the bid came from.
    pub url: CompactString,
    /// When the bid was made, in ms since the Unix epoch.
    pub date_time: i64,
    /// Padding that brings the event to its nominal size.
    pub extra: CompactString,
}

/// One line of an event file: a person, an auction or a bid.
///
/// Serialises internally tagged, the tag first: `{"type":"person",...}`. Deserialising goes
/// through [`parse`](crate::parse), which is strict about types and reports what is wrong.
///
/// It takes 104 bytes, as a bid does: a person (160 bytes) or an auction (128), rare in the
/// stream, is boxed, at the cost of one allocation, so that every event moves as 104 bytes.
/// A stream of events is moved several times on its way (into the parser's vector, across
/// the conveyors, into each inbox); at 160 bytes, each move was a `memcpy` call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Event {
    /// A new person, boxed: see [`Event`].
    Person(Box<Person>),
    /// A new auction, boxed: see [`Event`].
    Auction(Box<Auction>),
    /// A new bid.
    Bid(Bid),
}

/// Which of the three event types an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A [`Person`].
    Person,
    /// An [`Auction`].
    Auction,
    /// A [`Bid`].
    Bid,
}

impl EventKind {
    /// The JSON tag, `"person"`, `"auction"` or `"bid"`.
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::Person => "person",
            EventKind::Auction => "auction",
            EventKind::Bid => "bid",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Event {
    /// The event's time, `date_time`, in ms since the Unix epoch: the time the watermark and
    /// the windows are computed from.
    #[inline]
    pub fn date_time(&self) -> i64 {
        match self {
            Event::Person(p) => p.date_time,
            Event::Auction(a) => a.date_time,
            Event::Bid(b) => b.date_time,
        }
    }

    /// Whether it is a person, an auction or a bid.
    #[inline]
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Person(_) => EventKind::Person,
            Event::Auction(_) => EventKind::Auction,
            Event::Bid(_) => EventKind::Bid,
        }
    }

    /// The bid, if it is one.
    #[inline]
    pub fn as_bid(&self) -> Option<&Bid> {
        match self {
            Event::Bid(b) => Some(b),
            _ => None,
        }
    }

    /// The auction, if it is one.
    #[inline]
    pub fn as_auction(&self) -> Option<&Auction> {
        match self {
            Event::Auction(a) => Some(&**a),
            _ => None,
        }
    }

    /// The person, if it is one.
    #[inline]
    pub fn as_person(&self) -> Option<&Person> {
        match self {
            Event::Person(p) => Some(&**p),
            _ => None,
        }
    }

    /// The event's nominal size in bytes, by the reference generator's (Apache Beam's)
    /// accounting, which the generator pads `extra` against so that the averages are 200
    /// (person), 500 (auction) and 100 (bid):
    ///
    /// - person: 8 (the id) + the lengths of `name`, `email_address`, `credit_card`, `city`,
    ///   `state` and `extra`;
    /// - auction: 8 (the id) + the lengths of `item_name` and `description` + 40 (five more
    ///   numbers) + the length of `extra`;
    /// - bid: 32 (four numbers) + the length of `extra`. Like the Flink generator, which added
    ///   `channel` and `url` to Beam's bid, it does not count those two.
    ///
    /// The JSON line is larger: it adds the field names, quotes and punctuation, and for bids
    /// the channel and URL (see [`to_json`](Self::to_json)).
    ///
    /// Cost: a few additions; no allocation.
    pub fn nominal_size(&self) -> usize {
        match self {
            Event::Person(p) => {
                8 + p.name.len()
                    + p.email_address.len()
                    + p.credit_card.len()
                    + p.city.len()
                    + p.state.len()
                    + p.extra.len()
            }
            Event::Auction(a) => 8 + a.item_name.len() + a.description.len() + 40 + a.extra.len(),
            Event::Bid(b) => 32 + b.extra.len(),
        }
    }

    /// Appends the event as one JSON object, without a line terminator, to `out`: the
    /// README's format, `type` first, then the fields in the README's order. Integers are
    /// written as integers; strings are escaped as JSON requires. The bytes are exactly those
    /// of `serde_json::to_writer` with the `Serialize` impl, written by hand for speed.
    ///
    /// Cost: one pass over the fields (a string needing no escape is checked and copied in
    /// bulk); no allocation beyond `out` growing.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Event::Person(p) => {
                out.extend_from_slice(br#"{"type":"person","id":"#);
                json_int(out, p.id);
                out.extend_from_slice(br#","name":"#);
                json_str(out, &p.name);
                out.extend_from_slice(br#","email_address":"#);
                json_str(out, &p.email_address);
                out.extend_from_slice(br#","credit_card":"#);
                json_str(out, &p.credit_card);
                out.extend_from_slice(br#","city":"#);
                json_str(out, &p.city);
                out.extend_from_slice(br#","state":"#);
                json_str(out, &p.state);
                out.extend_from_slice(br#","date_time":"#);
                json_int(out, p.date_time);
                out.extend_from_slice(br#","extra":"#);
                json_str(out, &p.extra);
            }
            Event::Auction(a) => {
                out.extend_from_slice(br#"{"type":"auction","id":"#);
                json_int(out, a.id);
                out.extend_from_slice(br#","item_name":"#);
                json_str(out, &a.item_name);
                out.extend_from_slice(br#","description":"#);
                json_str(out, &a.description);
                out.extend_from_slice(br#","initial_bid":"#);
                json_int(out, a.initial_bid);
                out.extend_from_slice(br#","reserve":"#);
                json_int(out, a.reserve);
                out.extend_from_slice(br#","date_time":"#);
                json_int(out, a.date_time);
                out.extend_from_slice(br#","expires":"#);
                json_int(out, a.expires);
                out.extend_from_slice(br#","seller":"#);
                json_int(out, a.seller);
                out.extend_from_slice(br#","category":"#);
                json_int(out, a.category);
                out.extend_from_slice(br#","extra":"#);
                json_str(out, &a.extra);
            }
            Event::Bid(b) => {
                out.extend_from_slice(br#"{"type":"bid","auction":"#);
                json_int(out, b.auction);
                out.extend_from_slice(br#","bidder":"#);
                json_int(out, b.bidder);
                out.extend_from_slice(br#","price":"#);
                json_int(out, b.price);
                out.extend_from_slice(br#","channel":"#);
                json_str(out, &b.channel);
                out.extend_from_slice(br#","url":"#);
                json_str(out, &b.url);
                out.extend_from_slice(br#","date_time":"#);
                json_int(out, b.date_time);
                out.extend_from_slice(br#","extra":"#);
                json_str(out, &b.extra);
            }
        }
        out.push(b'}');
    }

    /// Appends the event as one line of an event file: [`write_json`](Self::write_json)
    /// and `\n`. Its signature fits `weir::sinks::files::text_with`.
    pub fn write_json_line(&self, out: &mut Vec<u8>) {
        self.write_json(out);
        out.push(b'\n');
    }

    /// The event as one JSON object, without a line terminator. See
    /// [`write_json`](Self::write_json).
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(256);
        self.write_json(&mut out);
        // serde_json writes UTF-8 only.
        String::from_utf8(out).expect("serde_json writes valid UTF-8")
    }
}

/// Appends an integer in decimal.
#[inline]
fn json_int(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends a JSON string literal. A string with no byte to escape (a control character, a
/// quote or a backslash) is copied whole; the check has no early exit, so it vectorises.
/// Others go through serde_json's escaping.
#[inline]
fn json_str(out: &mut Vec<u8>, s: &str) {
    let plain = s
        .bytes()
        .fold(true, |ok, b| ok & (b >= 0x20) & (b != b'"') & (b != b'\\'));
    if plain {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing a string into memory cannot fail.
        serde_json::to_writer(out, s).expect("serialising a str into memory cannot fail");
    }
}

impl From<Person> for Event {
    fn from(p: Person) -> Self {
        Event::Person(Box::new(p))
    }
}

impl From<Auction> for Event {
    fn from(a: Auction) -> Self {
        Event::Auction(Box::new(a))
    }
}

impl From<Bid> for Event {
    fn from(b: Bid) -> Self {
        Event::Bid(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person() -> Person {
        Person {
            id: 1000,
            name: "peter jones".into(),
            email_address: "abcdefg@hijkl.com".into(),
            credit_card: "1234 5678 9012 3456".into(),
            city: "phoenix".into(),
            state: "AZ".into(),
            date_time: 1_436_918_400_000,
            extra: "...".into(),
        }
    }

    #[test]
    fn serialises_the_readme_format_tag_first_in_field_order() {
        let json = Event::from(person()).to_json();
        assert_eq!(
            json,
            r#"{"type":"person","id":1000,"name":"peter jones","email_address":"abcdefg@hijkl.com","credit_card":"1234 5678 9012 3456","city":"phoenix","state":"AZ","date_time":1436918400000,"extra":"..."}"#
        );
        let auction = Event::from(Auction {
            id: 1000,
            item_name: "...".into(),
            description: "...".into(),
            initial_bid: 1234,
            reserve: 2468,
            date_time: 1_436_918_400_001,
            expires: 1_436_918_405_000,
            seller: 1000,
            category: 10,
            extra: "...".into(),
        });
        assert_eq!(
            auction.to_json(),
            r#"{"type":"auction","id":1000,"item_name":"...","description":"...","initial_bid":1234,"reserve":2468,"date_time":1436918400001,"expires":1436918405000,"seller":1000,"category":10,"extra":"..."}"#
        );
    }

    #[test]
    fn hand_written_json_equals_serde_json() {
        let mut p = person();
        for name in [
            "",
            "plain",
            "tab\there",
            "quote\"",
            "back\\slash",
            "\u{1}\u{1f}\u{7f}é日🦀",
        ] {
            p.name = name.into();
            let e = Event::from(p.clone());
            assert_eq!(e.to_json(), serde_json::to_string(&e).unwrap(), "{name:?}");
        }
        for v in [0, -1, i64::MIN, i64::MAX, 1_436_918_400_000] {
            p.id = v;
            let e = Event::from(p.clone());
            assert_eq!(e.to_json(), serde_json::to_string(&e).unwrap());
        }
    }

    #[test]
    fn strings_are_escaped() {
        let mut p = person();
        p.name = "a \"quoted\"\nname\\".into();
        let json = Event::from(p.clone()).to_json();
        assert!(json.contains(r#""name":"a \"quoted\"\nname\\""#), "{json}");
        assert_eq!(
            crate::parse::parse_line(json.as_bytes()).unwrap(),
            Event::from(p)
        );
    }

    #[test]
    fn accessors_and_sizes() {
        let e = Event::from(person());
        assert_eq!(e.kind(), EventKind::Person);
        assert_eq!(e.kind().to_string(), "person");
        assert_eq!(e.date_time(), 1_436_918_400_000);
        assert!(e.as_person().is_some() && e.as_bid().is_none() && e.as_auction().is_none());
        assert_eq!(e.nominal_size(), 8 + 11 + 17 + 19 + 7 + 2 + 3);
        assert_eq!(std::mem::size_of::<Event>(), 104);
    }
}
