//! Strict parsing of one JSON Lines line into an [`Event`].
//!
//! The README's rules: the line is one JSON object; its `type` is `"person"`, `"auction"` or
//! `"bid"`; every field of that type is present, integers as JSON integers within 64 bits
//! (`1.0`, `1e3`, `null`, `true` and `"1"` are all errors) and strings as strings. Fields
//! that the type does not have are ignored, whatever their values. A field of the type given
//! twice is an error.
//!
//! ```
//! use weir_nexmark::parse::{parse_line, Found, ParseError};
//!
//! let ok = br#"{"type":"bid","auction":1000,"bidder":1001,"price":5321,"channel":"Google","url":"u","date_time":1436918400002,"extra":"","note":null}"#;
//! assert_eq!(parse_line(ok).unwrap().date_time(), 1436918400002);
//!
//! let bad = br#"{"type":"bid","auction":1000.0,"bidder":1001,"price":5321,"channel":"Google","url":"u","date_time":1436918400002,"extra":""}"#;
//! assert_eq!(
//!     parse_line(bad).unwrap_err(),
//!     ParseError::WrongType { field: "auction", expected: "an integer", found: Found::Float },
//! );
//! assert_eq!(
//!     parse_line(b"{\"type\":\"sale\"}").unwrap_err().to_string(),
//!     "unknown event type \"sale\" (expected person, auction or bid)",
//! );
//! ```
//!
//! # How
//!
//! Two fast paths read every valid line without serde_json: one for the generator's field
//! order (each key compared whole with the one expected), and one for any order, whitespace
//! and unknown fields, skipped as JSON without being built. Both read escapes in any string
//! and key, at a few operations per escape. Whatever they cannot read (every invalid line, and
//! a few valid ones that serde_json reads in its own way: a lone surrogate or invalid UTF-8
//! in a skipped value, nesting deeper than 64) goes to serde_json: it tokenises the line and a
//! visitor of our own files each known field's value into a slot, recording what JSON type it
//! had. The event is assembled and checked from those slots, so the error names the field at
//! fault and what it held, whatever the order of the fields; the fast paths leave every line
//! with an error to that path, so an error is the same however the line was written: tests
//! check the fast paths against serde_json on random and edited lines.
//! `Event`'s `Deserialize` goes the same way, so `serde_json::from_str::<Event>` is just as
//! strict.
//!
//! Cost: one pass over the line; one allocation per string field longer than 24 bytes; no
//! allocation for fields that are skipped, or whose strings the caller does not keep
//! ([`parse_line_keeping`]).

use std::fmt;

use compact_str::CompactString;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::model::{Auction, Bid, Event, EventKind, Person};
use crate::query::Query;

/// What is wrong with a line that is not a valid event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The line is not valid JSON (or not valid UTF-8, or has something after the value).
    #[error("not valid JSON: {message}")]
    NotJson {
        /// serde_json's description, with the column at fault.
        message: String,
    },
    /// The line is valid JSON but not an object.
    #[error("not a JSON object but {found}")]
    NotAnObject {
        /// What the line holds instead.
        found: Found,
    },
    /// The object has no `type` field.
    #[error("missing field \"type\"")]
    MissingType,
    /// The `type` is a string, but not `person`, `auction` or `bid`.
    #[error("unknown event type {found:?} (expected person, auction or bid)")]
    UnknownType {
        /// The type given.
        found: String,
    },
    /// A field the event's type requires is absent.
    #[error("{kind} lacks the field {field:?}")]
    MissingField {
        /// The event's type.
        kind: EventKind,
        /// The field's JSON name.
        field: &'static str,
    },
    /// A field holds the wrong JSON type: `null`, a boolean, a number that is not a 64-bit
    /// integer, a string for an integer or a number for a string, an array, an object.
    #[error("field {field:?} must be {expected}, found {found}")]
    WrongType {
        /// The field's JSON name.
        field: &'static str,
        /// `"an integer"` or `"a string"`.
        expected: &'static str,
        /// What it holds.
        found: Found,
    },
    /// A field the event's type has is given more than once.
    #[error("field {field:?} is given more than once")]
    DuplicateField {
        /// The field's JSON name.
        field: &'static str,
    },
}

/// The JSON type a field holds, when it is not the one required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// An integer, where a string is required.
    Integer,
    /// An integer above `i64::MAX` that still fits 64 unsigned bits.
    IntegerOutOfRange,
    /// A number with a fraction or an exponent (`1.0`, `1e3`), or an integer too large for 64
    /// bits (serde_json reads those as floating point).
    Float,
    /// A string, where an integer is required.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Found::Null => "null",
            Found::Bool => "a boolean",
            Found::Integer => "an integer",
            Found::IntegerOutOfRange => "an integer beyond the signed 64-bit range",
            Found::Float => "a number that is not a 64-bit integer",
            Found::String => "a string",
            Found::Array => "an array",
            Found::Object => "an object",
        })
    }
}

/// Parses one line (without its terminator) into an event.
///
/// Leading and trailing whitespace is allowed; anything else after the object is an error.
///
/// # Errors
/// A [`ParseError`] saying what is wrong, as listed in the [module docs](self).
pub fn parse_line(line: &[u8]) -> Result<Event, ParseError> {
    parse_line_keeping(line, KeptStrings::ALL)
}

/// Which string fields a parse keeps: the others are checked as strictly as ever but come
/// out empty, so that a query that never reads them does not pay for them.
///
/// Strings longer than 24 bytes (a bid's `url`, most `extra`s) take a heap allocation each,
/// freed wherever the event is dropped, often on another thread: for q0, q5 and q7, which
/// read no string, [`KeptStrings::for_query`] keeps none.
///
/// ```
/// use weir_nexmark::parse::{parse_line_keeping, KeptStrings};
/// use weir_nexmark::Query;
///
/// let line = br#"{"type":"person","id":1000,"name":"peter jones","email_address":"abcdefg@hijkl.com","credit_card":"1234 5678 9012 3456","city":"phoenix","state":"AZ","date_time":1436918400000,"extra":"..."}"#;
/// let kept = parse_line_keeping(line, KeptStrings::for_query(Query::Q8)).unwrap();
/// let person = kept.as_person().unwrap();
/// assert_eq!((person.name.as_str(), person.city.as_str()), ("peter jones", ""));
/// // Left out or not, a string field must still be a string.
/// let bad = br#"{"type":"bid","auction":1,"bidder":2,"price":3,"channel":"c","url":7,"date_time":4,"extra":""}"#;
/// assert!(parse_line_keeping(bad, KeptStrings::NONE).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeptStrings(u32);

impl KeptStrings {
    /// Every string field: the events as in the file.
    pub const ALL: KeptStrings = KeptStrings(u32::MAX);
    /// No string field: every string of the events is empty.
    pub const NONE: KeptStrings = KeptStrings(0);

    /// The string fields `query` reads: a person's `name`, `city` and `state` for q3, its
    /// `name` for q8, an auction's `item_name`, `description` and `extra` and a bid's
    /// `extra` for q9, a bid's `extra` for q10, none for the others.
    pub const fn for_query(query: Query) -> KeptStrings {
        match query {
            Query::Q3 => KeptStrings(Field::Name.bit() | Field::City.bit() | Field::State.bit()),
            Query::Q8 => KeptStrings(Field::Name.bit()),
            // `extra` is one field name for every event type; persons are not read.
            Query::Q9 => {
                KeptStrings(Field::ItemName.bit() | Field::Description.bit() | Field::Extra.bit())
            }
            Query::Q10 => KeptStrings(Field::Extra.bit()),
            Query::Q0
            | Query::Q1
            | Query::Q2
            | Query::Q4
            | Query::Q5
            | Query::Q6
            | Query::Q7
            | Query::Q11
            | Query::Q12 => KeptStrings::NONE,
        }
    }

    /// Whether `field`'s string is kept; the event's `type` always is (it is read).
    #[inline]
    fn keeps(self, field: Field) -> bool {
        field == Field::Type || self.0 & field.bit() != 0
    }
}

impl Default for KeptStrings {
    /// [`KeptStrings::ALL`].
    fn default() -> Self {
        KeptStrings::ALL
    }
}

/// [`parse_line`], keeping only the string fields `kept` names (see [`KeptStrings`]). Every
/// field is checked as by [`parse_line`], and the errors are the same.
///
/// Cost: as [`parse_line`], without the allocation of a long string that is not kept.
///
/// # Errors
/// As [`parse_line`].
pub fn parse_line_keeping(line: &[u8], kept: KeptStrings) -> Result<Event, ParseError> {
    // One check of the whole line: then every key and string in it is text, and a string's
    // content is a slice of `text` with no check of its own.
    match simdutf8::basic::from_utf8(line) {
        Ok(text) => parse_str_keeping(text, kept),
        Err(_) => parse_off_the_fast_paths(line, kept),
    }
}

/// [`parse_line_keeping`] for a line known to be text: the same result, without the UTF-8
/// check. A reader that checked a whole chunk of lines at once calls it for each line.
///
/// # Errors
/// As [`parse_line`].
pub fn parse_str_keeping(line: &str, kept: KeptStrings) -> Result<Event, ParseError> {
    let (bytes, text) = (line.as_bytes(), line);
    if let Some(event) = scan_ordered(bytes, text, kept) {
        return Ok(event);
    }
    if let Some(event) = scan_any(bytes, text, kept) {
        return Ok(event);
    }
    parse_off_the_fast_paths(bytes, kept)
}

/// A line neither fast path reads: serde_json decides.
#[cold]
fn parse_off_the_fast_paths(line: &[u8], kept: KeptStrings) -> Result<Event, ParseError> {
    let mut raw = serde_raw(line)?;
    // Lines off the fast paths are rare: their strings are dropped after reading.
    for (i, slot) in raw.slots.iter_mut().enumerate() {
        if let Some(Slot::Str(_)) = slot
            && !kept.keeps(FIELD_ORDER[i])
        {
            *slot = Some(Slot::Blank);
        }
    }
    raw.build()
}

/// Whether [`parse_line_keeping`] reads `line` on its own fast paths, without serde_json:
/// every valid line but those with invalid UTF-8 in a skipped value, a lone surrogate in a
/// skipped string or nesting deeper than 64 in a skipped value. For benchmarks and tests that
/// show where lines go; it parses the line (and drops the result).
pub fn reads_on_the_fast_path(line: &[u8]) -> bool {
    simdutf8::basic::from_utf8(line).is_ok_and(|text| {
        scan_ordered(line, text, KeptStrings::NONE).is_some()
            || scan_any(line, text, KeptStrings::NONE).is_some()
    })
}

/// The index after the JSON string literal that starts at `line[at]` (its opening quote), if
/// it is one the parser reads: no control character, valid escapes, `\u` surrogates in pairs;
/// its bytes are not checked as UTF-8. The parser's own way of stepping over a string it
/// does not keep, for readers that pick a few fields out of a line themselves.
///
/// Cost: as reading a string the parser does not keep; see the [module docs](self).
pub fn string_end(line: &[u8], at: usize) -> Option<usize> {
    JsonString::at(line, at).map(|s| s.next)
}

/// [`parse_line`] through serde_json alone, without its fast paths. The
/// reference the fast paths are checked against, and the yardstick of the parser benchmark.
///
/// # Errors
/// As [`parse_line`].
pub fn parse_line_serde(line: &[u8]) -> Result<Event, ParseError> {
    serde_raw(line)?.build()
}

/// The known fields of `line` as serde_json reads them, not yet checked.
fn serde_raw(line: &[u8]) -> Result<Raw, ParseError> {
    match serde_json::from_slice::<Top>(line) {
        Ok(Top::Object(raw)) => Ok(raw),
        Ok(Top::Other(found)) => Err(ParseError::NotAnObject { found }),
        Err(e) => Err(ParseError::NotJson {
            message: e.to_string(),
        }),
    }
}

/// Parses one line given as text. See [`parse_line`].
///
/// # Errors
/// As [`parse_line`].
pub fn parse_str(line: &str) -> Result<Event, ParseError> {
    parse_line(line.as_bytes())
}

impl<'de> serde::Deserialize<'de> for Event {
    /// Deserialises as strictly as [`parse_line`]; the error's message is the
    /// [`ParseError`]'s.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(TopVisitor)? {
            Top::Object(raw) => raw.build().map_err(de::Error::custom),
            Top::Other(found) => Err(de::Error::custom(ParseError::NotAnObject { found })),
        }
    }
}

/// The fields of all three event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Type,
    Id,
    Name,
    EmailAddress,
    CreditCard,
    City,
    State,
    DateTime,
    Extra,
    ItemName,
    Description,
    InitialBid,
    Reserve,
    Expires,
    Seller,
    Category,
    Auction,
    Bidder,
    Price,
    Channel,
    Url,
}

const FIELDS: usize = 21;

/// Every field, in the order of their discriminants.
const FIELD_ORDER: [Field; FIELDS] = [
    Field::Type,
    Field::Id,
    Field::Name,
    Field::EmailAddress,
    Field::CreditCard,
    Field::City,
    Field::State,
    Field::DateTime,
    Field::Extra,
    Field::ItemName,
    Field::Description,
    Field::InitialBid,
    Field::Reserve,
    Field::Expires,
    Field::Seller,
    Field::Category,
    Field::Auction,
    Field::Bidder,
    Field::Price,
    Field::Channel,
    Field::Url,
];

impl Field {
    /// Its bit in a [`KeptStrings`].
    const fn bit(self) -> u32 {
        1 << self as u32
    }

    /// The field named `name`; bytes, so that a key needs no UTF-8 check of its own.
    fn from_name(name: &[u8]) -> Option<Field> {
        Some(match name {
            b"type" => Field::Type,
            b"id" => Field::Id,
            b"name" => Field::Name,
            b"email_address" => Field::EmailAddress,
            b"credit_card" => Field::CreditCard,
            b"city" => Field::City,
            b"state" => Field::State,
            b"date_time" => Field::DateTime,
            b"extra" => Field::Extra,
            b"item_name" => Field::ItemName,
            b"description" => Field::Description,
            b"initial_bid" => Field::InitialBid,
            b"reserve" => Field::Reserve,
            b"expires" => Field::Expires,
            b"seller" => Field::Seller,
            b"category" => Field::Category,
            b"auction" => Field::Auction,
            b"bidder" => Field::Bidder,
            b"price" => Field::Price,
            b"channel" => Field::Channel,
            b"url" => Field::Url,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Field::Type => "type",
            Field::Id => "id",
            Field::Name => "name",
            Field::EmailAddress => "email_address",
            Field::CreditCard => "credit_card",
            Field::City => "city",
            Field::State => "state",
            Field::DateTime => "date_time",
            Field::Extra => "extra",
            Field::ItemName => "item_name",
            Field::Description => "description",
            Field::InitialBid => "initial_bid",
            Field::Reserve => "reserve",
            Field::Expires => "expires",
            Field::Seller => "seller",
            Field::Category => "category",
            Field::Auction => "auction",
            Field::Bidder => "bidder",
            Field::Price => "price",
            Field::Channel => "channel",
            Field::Url => "url",
        }
    }
}

/// One field's value as read, before it is checked against the field's type.
#[derive(Debug)]
enum Slot {
    Int(i64),
    Str(CompactString),
    /// A string whose value is not kept ([`KeptStrings`]): the event gets an empty one, made
    /// where it goes rather than moved there.
    Blank,
    Other(Found),
}

/// The top-level value of a line.
// It lives on the stack for one line; boxing the big variant would allocate per line.
#[allow(clippy::large_enum_variant)]
enum Top {
    Object(Raw),
    Other(Found),
}

/// The known fields of an object, read but not yet checked.
#[derive(Default)]
struct Raw {
    slots: [Option<Slot>; FIELDS],
    /// Bit `f` is set if field `f` was given more than once.
    duplicates: u32,
}

impl Raw {
    fn build(mut self) -> Result<Event, ParseError> {
        let kind = match self.slots[Field::Type as usize].take() {
            None => return Err(ParseError::MissingType),
            Some(Slot::Str(s)) => match s.as_str() {
                "person" => EventKind::Person,
                "auction" => EventKind::Auction,
                "bid" => EventKind::Bid,
                _ => {
                    return Err(ParseError::UnknownType {
                        found: s.into_string(),
                    });
                }
            },
            // `type` is always kept.
            Some(Slot::Blank) => {
                return Err(ParseError::UnknownType {
                    found: String::new(),
                });
            }
            Some(Slot::Int(_)) => return Err(wrong(Field::Type, "a string", Found::Integer)),
            Some(Slot::Other(found)) => return Err(wrong(Field::Type, "a string", found)),
        };
        self.check_duplicate(Field::Type)?;
        let mut r = Reader { raw: self, kind };
        Ok(match kind {
            EventKind::Person => Event::from(Person {
                id: r.int(Field::Id)?,
                name: r.str(Field::Name)?,
                email_address: r.str(Field::EmailAddress)?,
                credit_card: r.str(Field::CreditCard)?,
                city: r.str(Field::City)?,
                state: r.str(Field::State)?,
                date_time: r.int(Field::DateTime)?,
                extra: r.str(Field::Extra)?,
            }),
            EventKind::Auction => Event::from(Auction {
                id: r.int(Field::Id)?,
                item_name: r.str(Field::ItemName)?,
                description: r.str(Field::Description)?,
                initial_bid: r.int(Field::InitialBid)?,
                reserve: r.int(Field::Reserve)?,
                date_time: r.int(Field::DateTime)?,
                expires: r.int(Field::Expires)?,
                seller: r.int(Field::Seller)?,
                category: r.int(Field::Category)?,
                extra: r.str(Field::Extra)?,
            }),
            EventKind::Bid => Event::Bid(Bid {
                auction: r.int(Field::Auction)?,
                bidder: r.int(Field::Bidder)?,
                price: r.int(Field::Price)?,
                channel: r.str(Field::Channel)?,
                url: r.str(Field::Url)?,
                date_time: r.int(Field::DateTime)?,
                extra: r.str(Field::Extra)?,
            }),
        })
    }

    fn check_duplicate(&self, field: Field) -> Result<(), ParseError> {
        if self.duplicates & (1 << field as u32) != 0 {
            return Err(ParseError::DuplicateField {
                field: field.name(),
            });
        }
        Ok(())
    }
}

fn wrong(field: Field, expected: &'static str, found: Found) -> ParseError {
    ParseError::WrongType {
        field: field.name(),
        expected,
        found,
    }
}

/// Takes the fields of one event type out of a [`Raw`], checking each.
struct Reader {
    raw: Raw,
    kind: EventKind,
}

impl Reader {
    fn take(&mut self, field: Field) -> Result<Slot, ParseError> {
        self.raw.check_duplicate(field)?;
        self.raw.slots[field as usize]
            .take()
            .ok_or(ParseError::MissingField {
                kind: self.kind,
                field: field.name(),
            })
    }

    fn int(&mut self, field: Field) -> Result<i64, ParseError> {
        match self.take(field)? {
            Slot::Int(v) => Ok(v),
            Slot::Str(_) | Slot::Blank => Err(wrong(field, "an integer", Found::String)),
            Slot::Other(found) => Err(wrong(field, "an integer", found)),
        }
    }

    fn str(&mut self, field: Field) -> Result<CompactString, ParseError> {
        match self.take(field)? {
            Slot::Str(s) => Ok(s),
            Slot::Blank => Ok(CompactString::default()),
            Slot::Int(_) => Err(wrong(field, "a string", Found::Integer)),
            Slot::Other(found) => Err(wrong(field, "a string", found)),
        }
    }
}

/// The general fast path of [`parse_line`]: reads any valid line into its event, or gives up
/// with `None` and leaves the line to serde_json.
///
/// It reads what RFC 8259 allows: whitespace between tokens, fields in any order, escapes
/// (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u` with four hex digits, and surrogate
/// pairs) in keys and strings, and unknown fields whose values are anything at all (nested
/// arrays and objects, numbers of any form, `true`, `false`, `null`), skipped without being
/// built. A field of an event type takes a string or an integer in `-i64::MAX..=i64::MAX`
/// (not `-0`, which serde_json reads as a float). Everything else (a value of the wrong
/// type, a field given twice or missing, an unknown `type`, a lone surrogate, nesting deeper
/// than [`MAX_SKIP_DEPTH`], a syntax error) returns `None`, so that every error, and every
/// line where serde_json's answer takes more than reading, goes through serde_json and is
/// reported exactly as it would be: whenever this returns `Some(event)`, serde_json reads the
/// same event.
///
/// `text` is `line`, checked to be UTF-8 by the caller.
///
/// Cost: one pass over the line, a few operations per 8 bytes of a string and per escape;
/// each value noted where it is ([`FieldValues`]) and only the event's own strings decoded,
/// only those kept; no allocation but the kept strings longer than 24 bytes (and a key with
/// an escape).
fn scan_any(line: &[u8], text: &str, kept: KeptStrings) -> Option<Event> {
    // A string's place is noted in 32 bits.
    if u32::try_from(line.len()).is_err() {
        return None;
    }
    let mut found = FieldValues::default();
    let mut at = skip_ws(line, 0);
    if line.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_ws(line, at + 1);
    if line.get(at) == Some(&b'}') {
        at += 1;
    } else {
        loop {
            let key = JsonString::at(line, at)?;
            let field = match key.escaped {
                false => Field::from_name(&line[key.content()]),
                true => Field::from_name(key.decode(text).as_bytes()),
            };
            at = skip_ws(line, key.next);
            if line.get(at) != Some(&b':') {
                return None;
            }
            at = skip_ws(line, at + 1);
            match field {
                Some(field) => {
                    let bit = field.bit();
                    if found.given & bit != 0 {
                        return None;
                    }
                    found.given |= bit;
                    at = match *line.get(at)? {
                        b'"' => {
                            let value = JsonString::at(line, at)?;
                            found.strings |= bit;
                            if value.escaped {
                                found.escaped |= bit;
                            }
                            found.values[field as usize] =
                                (value.open as u64) << 32 | value.close as u64;
                            value.next
                        }
                        b'-' | b'0'..=b'9' => {
                            let (value, next) = plain_integer(line, at)?;
                            found.values[field as usize] = value as u64;
                            next
                        }
                        _ => return None,
                    };
                }
                // A field of no event type: checked as serde_json checks it, never built.
                None => at = skip_value(line, at, 0)?,
            }
            at = skip_ws(line, at);
            match line.get(at) {
                Some(b',') => at = skip_ws(line, at + 1),
                Some(b'}') => {
                    at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    if skip_ws(line, at) != line.len() {
        return None;
    }
    found.event(EventBuilder { text, kept })
}

/// The known fields of a line as [`scan_any`] finds them: for each one given, its integer or
/// where its string is. Words, not 21 `Option<Slot>`s: a line starts with 168 bytes to
/// clear, and nothing is built until the event is, and then only its own kept strings.
#[derive(Default)]
struct FieldValues {
    /// Bit `f` ([`Field::bit`]): field `f` was given.
    given: u32,
    /// Bit `f`: field `f` holds a string; otherwise an integer.
    strings: u32,
    /// Bit `f`: field `f`'s string has an escape.
    escaped: u32,
    /// Field `f`'s integer, or its string's quotes as `open << 32 | close`.
    values: [u64; FIELDS],
}

impl FieldValues {
    /// Field `field`'s integer, if it was given one.
    #[inline(always)]
    fn int(&self, field: Field) -> Option<i64> {
        let bit = field.bit();
        (self.given & bit != 0 && self.strings & bit == 0)
            .then(|| self.values[field as usize] as i64)
    }

    /// Field `field`'s string, if it was given one.
    #[inline(always)]
    fn string(&self, field: Field) -> Option<JsonString> {
        let bit = field.bit();
        (self.strings & bit != 0).then(|| {
            let value = self.values[field as usize];
            let close = (value & u64::from(u32::MAX)) as usize;
            JsonString {
                open: (value >> 32) as usize,
                close,
                escaped: self.escaped & bit != 0,
                next: close + 1,
            }
        })
    }

    /// The event these fields make (see [`EventBuilder`]); `None` if a field of its type is
    /// missing or of the wrong type, or the type is unknown.
    fn event(&self, events: EventBuilder<'_>) -> Option<Event> {
        use Field::*;
        let kind = self.string(Field::Type)?;
        let decoded;
        let kind = match kind.escaped {
            false => &events.text.as_bytes()[kind.content()],
            true => {
                decoded = kind.decode(events.text);
                decoded.as_bytes()
            }
        };
        let (int, string) = (|f| self.int(f), |f| self.string(f));
        Some(match kind {
            b"bid" => events.bid(
                [int(Auction)?, int(Bidder)?, int(Price)?, int(DateTime)?],
                [&string(Channel)?, &string(Url)?, &string(Extra)?],
            ),
            b"person" => events.person(
                [int(Id)?, int(DateTime)?],
                [
                    &string(Name)?,
                    &string(EmailAddress)?,
                    &string(CreditCard)?,
                    &string(City)?,
                    &string(State)?,
                    &string(Extra)?,
                ],
            ),
            b"auction" => events.auction(
                [
                    int(Id)?,
                    int(InitialBid)?,
                    int(Reserve)?,
                    int(DateTime)?,
                    int(Expires)?,
                    int(Seller)?,
                    int(Category)?,
                ],
                [&string(ItemName)?, &string(Description)?, &string(Extra)?],
            ),
            _ => return None,
        })
    }
}

/// Builds an event of the fast paths from the values read for it: each of them is read first
/// and the event built only then, its strings decoded if `kept` keeps them (built as they
/// were read, each `Option<CompactString>` was moved by misaligned copies that stalled on
/// store forwarding: a third of [`scan_ordered`]'s time).
#[derive(Clone, Copy)]
struct EventBuilder<'a> {
    /// The line the values were read from, checked to be UTF-8.
    text: &'a str,
    kept: KeptStrings,
}

impl EventBuilder<'_> {
    /// `value`, the string of `field`, decoded if `kept` keeps `field`, else empty.
    #[inline(always)]
    fn keep(self, value: &JsonString, field: Field) -> CompactString {
        match self.kept.keeps(field) {
            true => value.decode(self.text),
            false => CompactString::const_new(""),
        }
    }

    /// A bid.
    #[inline(always)]
    fn bid(
        self,
        [auction, bidder, price, date_time]: [i64; 4],
        [channel, url, extra]: [&JsonString; 3],
    ) -> Event {
        Event::Bid(Bid {
            auction,
            bidder,
            price,
            channel: self.keep(channel, Field::Channel),
            url: self.keep(url, Field::Url),
            date_time,
            extra: self.keep(extra, Field::Extra),
        })
    }

    /// A person.
    #[inline(always)]
    fn person(
        self,
        [id, date_time]: [i64; 2],
        [name, email_address, credit_card, city, state, extra]: [&JsonString; 6],
    ) -> Event {
        Event::from(Person {
            id,
            name: self.keep(name, Field::Name),
            email_address: self.keep(email_address, Field::EmailAddress),
            credit_card: self.keep(credit_card, Field::CreditCard),
            city: self.keep(city, Field::City),
            state: self.keep(state, Field::State),
            date_time,
            extra: self.keep(extra, Field::Extra),
        })
    }

    /// An auction.
    #[inline(always)]
    fn auction(
        self,
        [
            id,
            initial_bid,
            reserve,
            date_time,
            expires,
            seller,
            category,
        ]: [i64; 7],
        [item_name, description, extra]: [&JsonString; 3],
    ) -> Event {
        Event::from(Auction {
            id,
            item_name: self.keep(item_name, Field::ItemName),
            description: self.keep(description, Field::Description),
            initial_bid,
            reserve,
            date_time,
            expires,
            seller,
            category,
            extra: self.keep(extra, Field::Extra),
        })
    }
}

/// How deep [`skip_value`] goes into the arrays and objects of an unknown field before it
/// leaves the line to serde_json, whose own limit (128) then decides.
const MAX_SKIP_DEPTH: u32 = 64;

/// The index after the JSON value that starts at `line[at]`, if it is valid JSON as
/// serde_json's `IgnoredAny` reads it (strings as [`JsonString::at`] reads them), nested at
/// most [`MAX_SKIP_DEPTH`] deep below `depth`; `None` otherwise.
///
/// Cost: the work of the value's strings and numbers, nothing built.
fn skip_value(line: &[u8], at: usize, depth: u32) -> Option<usize> {
    let literal = |word: &[u8]| {
        line.get(at..at + word.len())
            .filter(|w| *w == word)
            .map(|_| at + word.len())
    };
    match *line.get(at)? {
        b'"' => Some(JsonString::at(line, at)?.next),
        b'-' | b'0'..=b'9' => skip_number(line, at),
        b't' => literal(b"true"),
        b'f' => literal(b"false"),
        b'n' => literal(b"null"),
        open @ (b'[' | b'{') if depth < MAX_SKIP_DEPTH => {
            let close = if open == b'[' { b']' } else { b'}' };
            let mut at = skip_ws(line, at + 1);
            if line.get(at) == Some(&close) {
                return Some(at + 1);
            }
            loop {
                if open == b'{' {
                    at = skip_ws(line, JsonString::at(line, at)?.next);
                    if line.get(at) != Some(&b':') {
                        return None;
                    }
                    at = skip_ws(line, at + 1);
                }
                at = skip_ws(line, skip_value(line, at, depth + 1)?);
                match *line.get(at)? {
                    b',' => at = skip_ws(line, at + 1),
                    c if c == close => return Some(at + 1),
                    _ => return None,
                }
            }
        }
        _ => None,
    }
}

/// The index after the JSON number that starts at `line[at]`:
/// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, of any size; `None` if it is not
/// one. What follows it is for the caller to check, as serde_json does.
fn skip_number(line: &[u8], mut at: usize) -> Option<usize> {
    let digits = |from: usize| {
        from + line[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    if line.get(at) == Some(&b'-') {
        at += 1;
    }
    match *line.get(at)? {
        b'0' => at += 1,
        b'1'..=b'9' => at = digits(at + 1),
        _ => return None,
    }
    if line.get(at) == Some(&b'.') {
        let end = digits(at + 1);
        if end == at + 1 {
            return None;
        }
        at = end;
    }
    if let Some(b'e' | b'E') = line.get(at) {
        at += 1;
        if let Some(b'+' | b'-') = line.get(at) {
            at += 1;
        }
        let end = digits(at);
        if end == at {
            return None;
        }
        at = end;
    }
    Some(at)
}

/// The fastest path of [`parse_line`]: reads a valid line whose fields are exactly those of its
/// type, in the order [`Event::write_json`] writes them, `type` first, with no whitespace and
/// no escape in a key, straight into its event. That is every line a generator writes, and
/// its strings may hold any escape or character. Anything else (another order, a missing,
/// extra or repeated field, whitespace, a value that is not a string or a plain integer)
/// returns `None` and goes to [`scan_any`], so the errors are unchanged.
///
/// `text` is `line`, checked to be UTF-8 by the caller.
///
/// Cost: each key is compared whole with the one expected there (a few word compares),
/// instead of searched for and looked up; no [`Raw`] is filled and moved.
fn scan_ordered(line: &[u8], text: &str, kept: KeptStrings) -> Option<Event> {
    let mut c = OrderedCursor {
        line,
        at: 0,
        events: EventBuilder { text, kept },
    };
    c.expect(br#"{"type":""#)?;
    // Every field is read before the event is built (see `EventBuilder`).
    let event = match *line.get(c.at)? {
        b'b' => {
            let auction = c.int_after(br#"bid","auction":"#)?;
            let bidder = c.int_after(br#","bidder":"#)?;
            let price = c.int_after(br#","price":"#)?;
            let channel = c.str_after(br#","channel":"#)?;
            let url = c.str_after(br#","url":"#)?;
            let date_time = c.int_after(br#","date_time":"#)?;
            let extra = c.str_after(br#","extra":"#)?;
            c.end()?;
            c.events.bid(
                [auction, bidder, price, date_time],
                [&channel, &url, &extra],
            )
        }
        b'p' => {
            let id = c.int_after(br#"person","id":"#)?;
            let name = c.str_after(br#","name":"#)?;
            let email_address = c.str_after(br#","email_address":"#)?;
            let credit_card = c.str_after(br#","credit_card":"#)?;
            let city = c.str_after(br#","city":"#)?;
            let state = c.str_after(br#","state":"#)?;
            let date_time = c.int_after(br#","date_time":"#)?;
            let extra = c.str_after(br#","extra":"#)?;
            c.end()?;
            c.events.person(
                [id, date_time],
                [&name, &email_address, &credit_card, &city, &state, &extra],
            )
        }
        b'a' => {
            let id = c.int_after(br#"auction","id":"#)?;
            let item_name = c.str_after(br#","item_name":"#)?;
            let description = c.str_after(br#","description":"#)?;
            let initial_bid = c.int_after(br#","initial_bid":"#)?;
            let reserve = c.int_after(br#","reserve":"#)?;
            let date_time = c.int_after(br#","date_time":"#)?;
            let expires = c.int_after(br#","expires":"#)?;
            let seller = c.int_after(br#","seller":"#)?;
            let category = c.int_after(br#","category":"#)?;
            let extra = c.str_after(br#","extra":"#)?;
            c.end()?;
            c.events.auction(
                [
                    id,
                    initial_bid,
                    reserve,
                    date_time,
                    expires,
                    seller,
                    category,
                ],
                [&item_name, &description, &extra],
            )
        }
        _ => return None,
    };
    Some(event)
}

/// [`scan_ordered`]'s place in a line, and the values it reads there.
struct OrderedCursor<'a> {
    line: &'a [u8],
    at: usize,
    /// Builds the event once every value is read.
    events: EventBuilder<'a>,
}

impl OrderedCursor<'_> {
    /// Steps over `literal` if the line goes on with it.
    #[inline(always)]
    fn expect(&mut self, literal: &[u8]) -> Option<()> {
        let end = self.at + literal.len();
        (self.line.get(self.at..end)? == literal).then(|| self.at = end)
    }

    /// `key`, then a plain integer, as [`plain_integer`] reads it.
    #[inline(always)]
    fn int_after(&mut self, key: &[u8]) -> Option<i64> {
        self.expect(key)?;
        let (value, next) = plain_integer(self.line, self.at)?;
        self.at = next;
        Some(value)
    }

    /// `key`, then a string, as [`JsonString::at`] reads it.
    #[inline(always)]
    fn str_after(&mut self, key: &[u8]) -> Option<JsonString> {
        self.expect(key)?;
        let value = JsonString::at(self.line, self.at)?;
        self.at = value.next;
        Some(value)
    }

    /// The closing brace, and nothing after it but whitespace.
    #[inline(always)]
    fn end(&mut self) -> Option<()> {
        self.expect(b"}")?;
        (skip_ws(self.line, self.at) == self.line.len()).then_some(())
    }
}

/// The index of the first byte at or after `at` that is not JSON whitespace.
#[inline]
fn skip_ws(line: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = line.get(at) {
        at += 1;
    }
    at
}

/// A JSON string literal of a line, read and checked: where its content is, and whether it has
/// escapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct JsonString {
    /// The index of its opening quote.
    open: usize,
    /// The index of its closing quote.
    close: usize,
    /// Whether its content has an escape, so that it must be decoded to be read.
    escaped: bool,
    /// The index after its closing quote.
    next: usize,
}

impl JsonString {
    /// The string literal starting at `line[at]`, if there is one that serde_json reads as a
    /// `str`: no control character (below U+0020) in it, and every escape one of `\"`, `\\`,
    /// `\/`, `\b`, `\f`, `\n`, `\r`, `\t` or `\u` with four hex digits, a surrogate only as the
    /// first of a pair (serde_json accepts a lone surrogate only in a value it skips; such a
    /// line is left to it). Its bytes are not checked as UTF-8: the caller checked the line.
    ///
    /// Cost: up to the first escape, 16 bytes searched 8 at a time as words, then `memchr2`;
    /// from the first escape on, 64 bytes at a time ([`escaped_string_end`]), a few
    /// operations per escape whatever it is; then one pass for control characters, which
    /// vectorises.
    #[inline(always)]
    fn at(line: &[u8], at: usize) -> Option<JsonString> {
        if line.get(at) != Some(&b'"') {
            return None;
        }
        let mut from = at + 1;
        let (close, escaped) = 'found: {
            // 8 bytes at a time up to the first escape, then `memchr2` past 16 plain bytes.
            let mut plain_words = 0;
            let first = loop {
                let Some(bytes) = line.get(from..from + 8) else {
                    break from + memchr::memchr2(b'"', b'\\', &line[from..])?;
                };
                let word = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
                let specials = quotes_and_backslashes(word);
                if specials != 0 {
                    break from + (specials.trailing_zeros() / 8) as usize;
                }
                from += 8;
                plain_words += 1;
                if plain_words == 2 {
                    break from + memchr::memchr2(b'"', b'\\', &line[from..])?;
                }
            };
            if line[first] == b'"' {
                break 'found (first, false);
            }
            // A string with escapes: where there is one, there are usually many.
            let close = match escaped_string_end(line, first) {
                EscapedEnd::Close(close) => close,
                EscapedEnd::Invalid => return None,
                EscapedEnd::Surrogate => careful_string_end(line, first)?,
            };
            (close, true)
        };
        let content = &line[at + 1..close];
        // No early exit, so that it vectorises; escapes are printable, so the raw content
        // has a control character exactly when the string has one.
        if !content.iter().fold(true, |ok, &b| ok & (b >= 0x20)) {
            return None;
        }
        Some(JsonString {
            open: at,
            close,
            escaped,
            next: close + 1,
        })
    }

    /// The byte range of the content, between the quotes, escapes as written.
    #[inline]
    fn content(&self) -> std::ops::Range<usize> {
        self.open + 1..self.close
    }

    /// The string's value, its escapes decoded; `text` is the line the string was read from,
    /// checked to be UTF-8.
    ///
    /// Cost: a copy of the content, on the heap past 24 bytes; with escapes, one more pass.
    fn decode(&self, text: &str) -> CompactString {
        let raw = &text[self.content()];
        if !self.escaped {
            return CompactString::from(raw);
        }
        let mut out = CompactString::with_capacity(raw.len());
        let bytes = raw.as_bytes();
        let mut at = 0;
        while let Some(i) = memchr::memchr(b'\\', &bytes[at..]) {
            // Escapes are ASCII, so `at` and the backslash are on character boundaries.
            out.push_str(&raw[at..at + i]);
            let escape = at + i;
            let (c, next) = decode_escape(bytes, escape);
            out.push(c);
            at = next;
        }
        out.push_str(&raw[at..]);
        out
    }
}

/// Where [`escaped_string_end`] found a string's end.
enum EscapedEnd {
    /// At the closing quote at this index.
    Close(usize),
    /// Nowhere: the string has an invalid escape or no closing quote.
    Invalid,
    /// It met a `\u` surrogate, which it leaves to [`careful_string_end`].
    Surrogate,
}

/// The closing quote of a string whose first escape's backslash is `line[from]`, found 64
/// bytes at a time: the quotes and backslashes of a block as bit masks (8 bytes a word, each
/// word's bytes gathered into 8 bits by one multiplication), the characters the backslashes
/// escape from the runs of backslashes with simdjson's carry arithmetic, and then each escape
/// checked by a table look-up. The cost hardly depends on how many escapes there are.
#[inline(never)]
fn escaped_string_end(line: &[u8], mut from: usize) -> EscapedEnd {
    const EVEN_BITS: u64 = 0x5555_5555_5555_5555;
    // Whether the block's first byte is escaped by a backslash that ends the one before.
    let mut carry = 0u64;
    let mut padded = [b' '; 64];
    loop {
        let block: &[u8; 64] = match line.get(from..from + 64) {
            Some(bytes) => bytes.try_into().expect("64 bytes"),
            None if from < line.len() => {
                // The line's last bytes, padded with spaces, which are neither.
                padded.fill(b' ');
                padded[..line.len() - from].copy_from_slice(&line[from..]);
                &padded
            }
            None => return EscapedEnd::Invalid,
        };
        let [quotes, backslashes, letters_u] = block_masks(block);
        // simdjson's `find_escaped_branchless`: a run of backslashes escapes the byte after
        // it when it has an odd length.
        let backslashes = backslashes & !carry;
        let follows_escape = backslashes << 1 | carry;
        let odd_starts = backslashes & !EVEN_BITS & !follows_escape;
        let (even_starts, overflow) = odd_starts.overflowing_add(backslashes);
        let escaped = (EVEN_BITS ^ (even_starts << 1)) & follows_escape;
        carry = u64::from(overflow);
        let closing = quotes & !escaped;
        let before_close = match closing {
            0 => u64::MAX,
            c => (1 << c.trailing_zeros()) - 1,
        };
        let escaped = escaped & before_close;
        // Every escaped byte must start an escape; no branch per escape, so none to mispredict.
        let mut invalid = false;
        let mut checked = escaped;
        while checked != 0 {
            let i = checked.trailing_zeros() as usize;
            checked &= checked - 1;
            invalid |= ESCAPE_LENGTH[usize::from(block[i])] == 0;
        }
        if invalid {
            return EscapedEnd::Invalid;
        }
        // A `\u` takes four hex digits, which may run into the next block.
        let mut unicode = escaped & letters_u;
        while unicode != 0 {
            let i = unicode.trailing_zeros() as usize;
            unicode &= unicode - 1;
            match hex4(line, from + i + 1) {
                Some(0xD800..=0xDFFF) => return EscapedEnd::Surrogate,
                Some(_) => {}
                None => return EscapedEnd::Invalid,
            }
        }
        if closing != 0 {
            return EscapedEnd::Close(from + closing.trailing_zeros() as usize);
        }
        from += 64;
    }
}

/// The bit masks of the quotes, the backslashes and the `u`s of `block`: bit `i` for byte
/// `i`. Sixteen bytes at a time with SSE2, which every x86-64 processor has.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn block_masks(block: &[u8; 64]) -> [u64; 3] {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let mut masks = [0; 3];
    for (k, sixteen) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is part of every x86-64 target's baseline, so these instructions are
        // always available; the unaligned load reads the 16 bytes of `sixteen`, no more.
        unsafe {
            let bytes = _mm_loadu_si128(sixteen.as_ptr().cast::<__m128i>());
            for (mask, byte) in masks.iter_mut().zip([b'"', b'\\', b'u']) {
                let equal = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(byte as i8));
                // One bit per byte: the high bits of the byte mask.
                *mask |= u64::from(_mm_movemask_epi8(equal) as u16) << (16 * k);
            }
        }
    }
    masks
}

/// [`block_masks`] where there is no SSE2.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn block_masks(block: &[u8; 64]) -> [u64; 3] {
    block_masks_by_words(block)
}

/// The bit masks of the quotes, the backslashes and the `u`s of `block`: bit `i` for byte
/// `i`, 8 bytes at a time as words, for processors without SSE2.
#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline(always)]
fn block_masks_by_words(block: &[u8; 64]) -> [u64; 3] {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // One bit per byte, from the high bits of an exact byte mask: the multiplication moves
    // byte `k`'s bit to bit 56 + k, with no carries between them.
    let gather = |high: u64| (high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
    let mut masks = [0; 3];
    for (k, word) in block.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        for (mask, byte) in masks.iter_mut().zip([b'"', b'\\', b'u']) {
            *mask |= gather(equal_bytes(word ^ (ONES * u64::from(byte)))) << (8 * k);
        }
    }
    masks
}

/// The high bit of each zero byte of `x`, and no other bit: exact for every byte.
#[inline(always)]
fn equal_bytes(x: u64) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    // A byte is zero exactly when its high bit and its low seven bits are: adding 0x7F to
    // the low seven sets the high bit unless they are zero, and never carries out.
    !(((x & LOW7) + LOW7) | x) & !LOW7
}

/// The closing quote of a string whose first escape's backslash is `line[from]`, escape by
/// escape: for the strings with a `\u` surrogate, whose pairs [`escape_end`] reads.
#[cold]
fn careful_string_end(line: &[u8], mut from: usize) -> Option<usize> {
    loop {
        from = escape_end(line, from)?;
        let found = from + memchr::memchr2(b'"', b'\\', &line[from..])?;
        if line[found] == b'"' {
            return Some(found);
        }
        from = found;
    }
}

/// The length of the escape a backslash starts, by the byte after it: 2 for `\"`, `\\`, `\/`,
/// `\b`, `\f`, `\n`, `\r` and `\t`, 6 for `\u` (before its pair, if a surrogate), 0 for a
/// byte that starts no escape.
const ESCAPE_LENGTH: [u8; 256] = {
    let mut table = [0; 256];
    let mut i = 0;
    let simple = *b"\"\\/bfnrt";
    while i < simple.len() {
        table[simple[i] as usize] = 2;
        i += 1;
    }
    table[b'u' as usize] = 6;
    table
};

/// The index after the escape whose backslash is `line[at]`, if it is one that serde_json
/// decodes into a `str` (see [`JsonString::at`]).
///
/// Cost: a table look-up for the escapes of one character, which are most; one branch more
/// for a `\u`.
#[inline(always)]
fn escape_end(line: &[u8], at: usize) -> Option<usize> {
    match ESCAPE_LENGTH[usize::from(*line.get(at + 1)?)] {
        2 => Some(at + 2),
        0 => None,
        _ => unicode_escape_end(line, at),
    }
}

/// [`escape_end`] for a `\u` escape: four hex digits, and a surrogate only as the first of a
/// pair.
#[inline]
fn unicode_escape_end(line: &[u8], at: usize) -> Option<usize> {
    match hex4(line, at + 2)? {
        0xD800..=0xDBFF => {
            if line.get(at + 6..at + 8)? != b"\\u" {
                return None;
            }
            (0xDC00..=0xDFFF)
                .contains(&hex4(line, at + 8)?)
                .then_some(at + 12)
        }
        0xDC00..=0xDFFF => None,
        _ => Some(at + 6),
    }
}

/// The character of the escape whose backslash is `bytes[at]`, checked by [`escape_end`],
/// and the index after it.
fn decode_escape(bytes: &[u8], at: usize) -> (char, usize) {
    let simple = |c| (c, at + 2);
    match bytes[at + 1] {
        b'b' => simple('\u{8}'),
        b'f' => simple('\u{c}'),
        b'n' => simple('\n'),
        b'r' => simple('\r'),
        b't' => simple('\t'),
        b'u' => {
            let high = hex4(bytes, at + 2).map_or(0, u32::from);
            let (code, next) = match high {
                0xD800..=0xDBFF => {
                    let low = hex4(bytes, at + 8).map_or(0, u32::from);
                    (0x1_0000 + ((high - 0xD800) << 10) + (low - 0xDC00), at + 12)
                }
                _ => (high, at + 6),
            };
            (
                char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER),
                next,
            )
        }
        // `"`, `\` and `/` stand for themselves.
        c => simple(char::from(c)),
    }
}

/// The value of the four hex digits at `line[at..at + 4]`, if they are hex digits.
#[inline]
fn hex4(line: &[u8], at: usize) -> Option<u16> {
    line.get(at..at + 4)?.iter().try_fold(0u16, |v, &b| {
        let digit = (b as char).to_digit(16)?;
        Some(v << 4 | digit as u16)
    })
}

/// The high bit of each byte of `word` that is a `"` or a `\`, and no other bit: exact for
/// every byte, so that the bytes can be taken one after the other from the mask.
#[inline(always)]
fn quotes_and_backslashes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    equal_bytes(word ^ (ONES * u64::from(b'"'))) | equal_bytes(word ^ (ONES * u64::from(b'\\')))
}

/// The JSON integer starting at `line[at]` if it is one serde_json reads as an `i64` (no
/// fraction, no exponent, not `-0`, not `i64::MIN`, whose magnitude does not fit), and the index
/// after it.
// Inlined into each caller: a call per integer (five a bid) cost about 5% of a line's parse
// in instructions, most of them saving and restoring registers.
#[inline(always)]
fn plain_integer(line: &[u8], at: usize) -> Option<(i64, usize)> {
    let negative = *line.get(at)? == b'-';
    let start = at + usize::from(negative);
    let (value, end) = decimal_digits(line, start)?;
    let digits = end - start;
    // No digits, a leading zero, a fraction or an exponent: not a plain integer.
    if digits == 0 || (digits > 1 && line[start] == b'0') {
        return None;
    }
    if let Some(b'.' | b'e' | b'E') = line.get(end) {
        return None;
    }
    let magnitude = i64::try_from(value).ok()?;
    let v = if negative {
        if magnitude == 0 {
            return None;
        }
        -magnitude
    } else {
        magnitude
    };
    Some((v, end))
}

/// The run of ASCII digits from `line[start]` on: its value and the index after it, or `None`
/// if it has more than 19 digits (20 never fit in an `i64`; 19 always fit in a `u64`, so
/// nothing here overflows).
///
/// Cost: 8 digits at a time while 8 bytes are left (a timestamp's 13 digits in two steps of a
/// few multiplications), then one digit at a time.
#[inline(always)]
fn decimal_digits(line: &[u8], start: usize) -> Option<(u64, usize)> {
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    const POWERS: [u64; 9] = [
        1,
        10,
        100,
        1_000,
        10_000,
        100_000,
        1_000_000,
        10_000_000,
        100_000_000,
    ];
    let mut value: u64 = 0;
    let mut at = start;
    while let Some(bytes) = line.get(at..at + 8) {
        let word = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        let n = leading_digits(word);
        if n == 0 {
            return (at - start <= 19).then_some((value, at));
        }
        // The digits' values in the top `n` bytes, below them zeros: leading zeros. Bytes
        // after the digits may borrow in the subtraction, but only from bytes above them,
        // which the shift drops.
        let digits = word.wrapping_sub(ZEROS) << (64 - 8 * n);
        value = value
            .wrapping_mul(POWERS[n])
            .wrapping_add(eight_digits(digits));
        at += n;
        if at - start > 19 {
            return None;
        }
        if n < 8 {
            return Some((value, at));
        }
    }
    while let Some(&d @ b'0'..=b'9') = line.get(at) {
        value = value.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        at += 1;
    }
    (at - start <= 19).then_some((value, at))
}

/// How many of the 8 bytes of `word` (read little-endian: the first byte lowest) are ASCII
/// digits before the first byte that is not one.
#[inline]
fn leading_digits(word: u64) -> usize {
    const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    // A digit byte (0x30..=0x39) becomes 0x33: its high nibble, and the high nibble of it
    // plus 6. Any other byte differs. A carry out of a byte (only from 0xFA and above, not a
    // digit) reaches only the bytes above it, past the first non-digit.
    let t =
        (word & HIGH_NIBBLES) | ((word.wrapping_add(0x0606_0606_0606_0606) & HIGH_NIBBLES) >> 4);
    ((t ^ 0x3333_3333_3333_3333).trailing_zeros() / 8) as usize
}

/// The number written by 8 digit values (0 to 9), one per byte, the first (most significant)
/// in the lowest byte: pairs, then fours, then all eight, each step one multiplication.
#[inline]
fn eight_digits(digits: u64) -> u64 {
    let pairs = (digits.wrapping_mul(10 * 256 + 1) >> 8) & 0x00FF_00FF_00FF_00FF;
    let fours = (pairs.wrapping_mul(100 * 65_536 + 1) >> 16) & 0x0000_FFFF_0000_FFFF;
    fours.wrapping_mul(10_000 * (1 << 32) + 1) >> 32
}

/// Reads the top-level value: an object into a [`Raw`], anything else as what it is.
struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut raw = Raw::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key.0 {
                Some(field) => {
                    let slot = map.next_value_seed(SlotSeed)?;
                    let at = &mut raw.slots[field as usize];
                    if at.is_none() {
                        *at = Some(slot);
                    } else {
                        raw.duplicates |= 1 << field as u32;
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Top::Object(raw))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Top, E> {
        Ok(Top::Other(Found::Bool))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Top, E> {
        Ok(Top::Other(Found::Integer))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Top, E> {
        Ok(Top::Other(Found::Integer))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Top, E> {
        Ok(Top::Other(Found::Float))
    }
    fn visit_str<E>(self, _: &str) -> Result<Top, E> {
        Ok(Top::Other(Found::String))
    }
    fn visit_unit<E>(self) -> Result<Top, E> {
        Ok(Top::Other(Found::Null))
    }
    fn visit_none<E>(self) -> Result<Top, E> {
        Ok(Top::Other(Found::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Top::Other(Found::Array))
    }
}

impl<'de> serde::Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TopVisitor)
    }
}

/// A key: the known field it names, or `None` for a field to ignore.
struct Key(Option<Field>);

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key(Field::from_name(v.as_bytes())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Reads one field's value into a [`Slot`], whatever its JSON type.
struct SlotSeed;

impl<'de> DeserializeSeed<'de> for SlotSeed {
    type Value = Slot;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Slot, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SlotSeed {
    type Value = Slot;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Slot, E> {
        Ok(Slot::Other(Found::Bool))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Slot, E> {
        Ok(Slot::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Slot, E> {
        Ok(match i64::try_from(v) {
            Ok(v) => Slot::Int(v),
            Err(_) => Slot::Other(Found::IntegerOutOfRange),
        })
    }
    fn visit_f64<E>(self, _: f64) -> Result<Slot, E> {
        Ok(Slot::Other(Found::Float))
    }
    fn visit_str<E>(self, v: &str) -> Result<Slot, E> {
        Ok(Slot::Str(CompactString::from(v)))
    }
    fn visit_string<E>(self, v: String) -> Result<Slot, E> {
        Ok(Slot::Str(CompactString::from(v)))
    }
    fn visit_unit<E>(self) -> Result<Slot, E> {
        Ok(Slot::Other(Found::Null))
    }
    fn visit_none<E>(self) -> Result<Slot, E> {
        Ok(Slot::Other(Found::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Slot, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Slot::Other(Found::Array))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Slot, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Slot::Other(Found::Object))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const BID: &str = r#"{"type":"bid","auction":1000,"bidder":1001,"price":5321,"channel":"Google","url":"https://x","date_time":1436918400002,"extra":"e"}"#;
    const PERSON: &str = r#"{"type":"person","id":1000,"name":"peter jones","email_address":"abcdefg@hijkl.com","credit_card":"1234 5678 9012 3456","city":"phoenix","state":"AZ","date_time":1436918400000,"extra":"..."}"#;
    const AUCTION: &str = r#"{"type":"auction","id":1000,"item_name":"...","description":"...","initial_bid":1234,"reserve":2468,"date_time":1436918400001,"expires":1436918405000,"seller":1000,"category":10,"extra":"..."}"#;

    fn with(base: &str, field: &str, value: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(base).unwrap();
        let mut m = v.as_object().unwrap().clone();
        m.remove(field);
        let mut s = serde_json::to_string(&m).unwrap();
        s.pop();
        format!("{s},\"{field}\":{value}}}")
    }

    fn without(base: &str, field: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(base).unwrap();
        let mut m = v.as_object().unwrap().clone();
        m.remove(field);
        serde_json::to_string(&m).unwrap()
    }

    /// `event` with the strings `kept` leaves out made empty.
    fn blanked(event: Event, kept: KeptStrings) -> Event {
        let blank = |field: Field, s: CompactString| match kept.keeps(field) {
            true => s,
            false => CompactString::default(),
        };
        match event {
            Event::Person(p) => Event::from(Person {
                name: blank(Field::Name, p.name),
                email_address: blank(Field::EmailAddress, p.email_address),
                credit_card: blank(Field::CreditCard, p.credit_card),
                city: blank(Field::City, p.city),
                state: blank(Field::State, p.state),
                extra: blank(Field::Extra, p.extra),
                ..*p
            }),
            Event::Auction(a) => Event::from(Auction {
                item_name: blank(Field::ItemName, a.item_name),
                description: blank(Field::Description, a.description),
                extra: blank(Field::Extra, a.extra),
                ..*a
            }),
            Event::Bid(b) => Event::Bid(Bid {
                channel: blank(Field::Channel, b.channel),
                url: blank(Field::Url, b.url),
                extra: blank(Field::Extra, b.extra),
                ..b
            }),
        }
    }

    #[test]
    fn kept_strings_blank_the_others_on_both_paths() {
        let escaped = PERSON.replace("peter jones", r"peter\u0020jones");
        for line in [PERSON, escaped.as_str(), AUCTION, BID] {
            let all = parse_str(line).unwrap();
            for kept in [
                KeptStrings::ALL,
                KeptStrings::NONE,
                KeptStrings::for_query(Query::Q3),
                KeptStrings::for_query(Query::Q8),
            ] {
                assert_eq!(
                    parse_line_keeping(line.as_bytes(), kept).unwrap(),
                    blanked(all.clone(), kept),
                    "{line}"
                );
            }
        }
        let q8 = parse_line_keeping(escaped.as_bytes(), KeptStrings::for_query(Query::Q8)).unwrap();
        assert_eq!(q8.as_person().unwrap().name, "peter jones");
        assert_eq!(q8.as_person().unwrap().email_address, "");
    }

    #[test]
    fn parses_the_readme_examples() {
        let p = parse_str(PERSON).unwrap();
        assert_eq!(p.kind(), EventKind::Person);
        assert_eq!(p.as_person().unwrap().name, "peter jones");
        let a = parse_str(AUCTION).unwrap();
        assert_eq!(a.as_auction().unwrap().expires, 1_436_918_405_000);
        let b = parse_str(BID).unwrap();
        assert_eq!(b.as_bid().unwrap().price, 5321);
        for (text, event) in [(PERSON, p), (AUCTION, a), (BID, b)] {
            assert_eq!(event.to_json(), text, "round trip");
        }
    }

    #[test]
    fn field_order_whitespace_and_extra_fields_do_not_matter() {
        let line = r#"  { "extra":"e", "date_time":1436918400002, "zzz":[1,{"a":null}], "url":"https://x",
            "channel":"Google","price":5321,"bidder":1001,"auction":1000,"type":"bid","name":null,"id":1.5 }  "#
            .replace('\n', " ");
        assert_eq!(parse_str(&line).unwrap(), parse_str(BID).unwrap());
    }

    #[test]
    fn integers_must_be_json_integers_within_64_bits() {
        for (value, found) in [
            ("1.0", Found::Float),
            ("1e3", Found::Float),
            ("-0.5", Found::Float),
            ("18446744073709551616", Found::Float),
            ("9223372036854775808", Found::IntegerOutOfRange),
            ("null", Found::Null),
            ("true", Found::Bool),
            ("false", Found::Bool),
            ("\"1000\"", Found::String),
            ("[1000]", Found::Array),
            ("{\"v\":1000}", Found::Object),
        ] {
            assert_eq!(
                parse_str(&with(BID, "price", value)),
                Err(ParseError::WrongType {
                    field: "price",
                    expected: "an integer",
                    found
                }),
                "price {value}"
            );
        }
        let min = with(BID, "price", "-9223372036854775808");
        assert_eq!(parse_str(&min).unwrap().as_bid().unwrap().price, i64::MIN);
        let max = with(BID, "price", "9223372036854775807");
        assert_eq!(parse_str(&max).unwrap().as_bid().unwrap().price, i64::MAX);
    }

    #[test]
    fn strings_must_be_strings() {
        for (value, found) in [
            ("1", Found::Integer),
            ("1.5", Found::Float),
            ("null", Found::Null),
            ("true", Found::Bool),
        ] {
            assert_eq!(
                parse_str(&with(PERSON, "state", value)),
                Err(ParseError::WrongType {
                    field: "state",
                    expected: "a string",
                    found
                })
            );
        }
        let err = parse_str(&with(PERSON, "state", "null")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field \"state\" must be a string, found null"
        );
    }

    #[test]
    fn every_field_of_every_type_is_required() {
        for base in [PERSON, AUCTION, BID] {
            let v: serde_json::Value = serde_json::from_str(base).unwrap();
            let kind = parse_str(base).unwrap().kind();
            for field in v.as_object().unwrap().keys() {
                let err = parse_str(&without(base, field)).unwrap_err();
                let expected = if field == "type" {
                    ParseError::MissingType
                } else {
                    ParseError::MissingField {
                        kind,
                        field: Field::from_name(field.as_bytes()).unwrap().name(),
                    }
                };
                assert_eq!(err, expected, "{kind} without {field}");
            }
        }
        assert_eq!(
            parse_str(&without(AUCTION, "seller"))
                .unwrap_err()
                .to_string(),
            "auction lacks the field \"seller\""
        );
    }

    #[test]
    fn bad_type_values() {
        assert_eq!(
            parse_str(&with(BID, "type", "\"Bid\"")),
            Err(ParseError::UnknownType {
                found: "Bid".into()
            })
        );
        assert_eq!(
            parse_str(&with(BID, "type", "3")),
            Err(ParseError::WrongType {
                field: "type",
                expected: "a string",
                found: Found::Integer
            })
        );
        assert_eq!(
            parse_str(&with(BID, "type", "null")),
            Err(ParseError::WrongType {
                field: "type",
                expected: "a string",
                found: Found::Null
            })
        );
    }

    #[test]
    fn not_json_and_not_objects() {
        for line in ["", "not json", "{", "{\"type\":\"bid\",}", "{} {}", "{}x"] {
            assert!(
                matches!(parse_str(line), Err(ParseError::NotJson { .. })),
                "{line:?}"
            );
        }
        let truncated = &BID[..BID.len() - 10];
        let err = parse_str(truncated).unwrap_err();
        assert!(err.to_string().starts_with("not valid JSON: "), "{err}");
        assert!(matches!(
            parse_line(b"{\"type\":\"bid\xff\"}"),
            Err(ParseError::NotJson { .. })
        ));
        for (line, found) in [
            ("[1,2]", Found::Array),
            ("12", Found::Integer),
            ("null", Found::Null),
            ("\"bid\"", Found::String),
            ("true", Found::Bool),
            ("1.5", Found::Float),
        ] {
            assert_eq!(parse_str(line), Err(ParseError::NotAnObject { found }));
        }
        assert_eq!(parse_str("{}"), Err(ParseError::MissingType));
    }

    #[test]
    fn duplicate_fields_of_the_type_are_errors_others_are_ignored() {
        let dup = format!("{},\"price\":1}}", &BID[..BID.len() - 1]);
        assert_eq!(
            parse_str(&dup),
            Err(ParseError::DuplicateField { field: "price" })
        );
        let dup_other = format!("{},\"name\":1,\"name\":2}}", &BID[..BID.len() - 1]);
        assert!(parse_str(&dup_other).is_ok());
    }

    #[test]
    fn escaped_strings_and_keys_are_decoded() {
        let line = BID
            .replace(
                r#""channel":"Google""#,
                r#""ch\u0061nnel":"Goo\"gle\n\u00e9""#,
            )
            .replace(r#""url":"https://x""#, r#""url":"ab\/c""#);
        let bid = parse_str(&line).unwrap();
        let bid = bid.as_bid().unwrap();
        assert_eq!(bid.channel, "Goo\"gle\né");
        assert_eq!(bid.url, "ab/c");
    }

    #[test]
    fn serde_deserialize_is_as_strict() {
        let ok: Event = serde_json::from_str(BID).unwrap();
        assert_eq!(ok, parse_str(BID).unwrap());
        let err = serde_json::from_str::<Event>(&with(BID, "price", "1.0")).unwrap_err();
        assert!(
            err.to_string()
                .contains("field \"price\" must be an integer"),
            "{err}"
        );
        assert!(serde_json::from_str::<Event>("[]").is_err());
        // The derived impls of the structs are strict too.
        assert!(serde_json::from_str::<Bid>(&with(BID, "price", "1.0")).is_err());
        assert!(serde_json::from_str::<Bid>(&without(BID, "url")).is_err());
        assert!(serde_json::from_str::<Bid>(&with(BID, "price", "null")).is_err());
        assert!(serde_json::from_str::<Bid>(BID).is_ok());
    }

    /// Every byte after a backslash, and every shape of `\u` escape (surrogates alone, paired,
    /// out of order, cut short), in a kept string, a skipped one, an unknown field's value and
    /// a key, reads as serde_json reads it.
    #[test]
    fn every_escape_reads_as_serde_json_reads_it() {
        let mut escapes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b'\\', b]).collect();
        for u in [
            r"\u0041",
            r"\u00e9",
            r"\u0000",
            r"\u001F",
            r"\uFFFF",
            r"\uD83D\uDE00",
            r"\ud83d\ude00",
            r"\uD800",
            r"\uDC00",
            r"\uDBFF\uDFFF",
            r"\uD800\uD800",
            r"\uD800\u0041",
            r"\uD800\n",
            r"\uDE00\uD83D",
            r"\u12",
            r"\u12G4",
            r"\u",
            r"\uD800\u",
            r"\uD800\uDC",
        ] {
            escapes.push(u.as_bytes().to_vec());
        }
        for escape in &escapes {
            let esc = String::from_utf8_lossy(escape);
            for line in [
                BID.replace(
                    r#""channel":"Google""#,
                    &format!(r#""channel":"Go{esc}gle""#),
                ),
                BID.replace(r#""extra":"e""#, &format!(r#""extra":"{esc}""#)),
                BID.replace(
                    r#""extra":"e""#,
                    &format!(r#""extra":"e","other":"a{esc}b""#),
                ),
                BID.replace(r#""extra":"e""#, &format!(r#""extra":"e","o{esc}":1"#)),
                BID.replace(r#""type":"bid""#, &format!(r#""type":"bid{esc}""#)),
            ] {
                let line = line.as_bytes();
                let serde = parse_line_serde(line);
                for kept in [KeptStrings::ALL, KeptStrings::NONE] {
                    assert_eq!(
                        parse_line_keeping(line, kept),
                        serde.clone().map(|e| blanked(e, kept)),
                        "{}",
                        String::from_utf8_lossy(line)
                    );
                }
            }
        }
    }

    fn text() -> impl Strategy<Value = CompactString> {
        // Quotes, backslashes, control characters, non-ASCII, long and short.
        prop_oneof![
            "[a-z ]{0,30}",
            "\\PC{0,40}",
            "[\"\\\\\n\t\u{0}\u{1f}é日🦀]{0,8}",
        ]
        .prop_map(CompactString::from)
    }

    fn event() -> impl Strategy<Value = Event> {
        let person = (
            any::<i64>(),
            (text(), text(), text(), text(), text()),
            any::<i64>(),
            text(),
        )
            .prop_map(
                |(id, (name, email_address, credit_card, city, state), date_time, extra)| {
                    Event::from(Person {
                        id,
                        name,
                        email_address,
                        credit_card,
                        city,
                        state,
                        date_time,
                        extra,
                    })
                },
            );
        let auction = (
            (any::<i64>(), text(), text()),
            (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
            (any::<i64>(), any::<i64>(), text()),
        )
            .prop_map(
                |(
                    (id, item_name, description),
                    (initial_bid, reserve, date_time, expires),
                    (seller, category, extra),
                )| {
                    Event::from(Auction {
                        id,
                        item_name,
                        description,
                        initial_bid,
                        reserve,
                        date_time,
                        expires,
                        seller,
                        category,
                        extra,
                    })
                },
            );
        let bid = (
            (any::<i64>(), any::<i64>(), any::<i64>()),
            (text(), text(), any::<i64>(), text()),
        )
            .prop_map(
                |((auction, bidder, price), (channel, url, date_time, extra))| {
                    Event::Bid(Bid {
                        auction,
                        bidder,
                        price,
                        channel,
                        url,
                        date_time,
                        extra,
                    })
                },
            );
        prop_oneof![person, auction, bid]
    }

    /// Applies `edits` to `line`: at each place, 0 inserts the byte, 1 removes one, any other
    /// replaces one.
    fn edit(line: &mut Vec<u8>, edits: Vec<(prop::sample::Index, u8, usize)>) {
        for (at, byte, how) in edits {
            let i = at.index(line.len() + 1);
            match how {
                0 => line.insert(i, byte),
                1 if i < line.len() => {
                    line.remove(i);
                }
                _ if i < line.len() => line[i] = byte,
                _ => {}
            }
        }
    }

    /// A JSON string literal of `s`: as serde_json writes it, or with every character as a
    /// `\u` escape (a surrogate pair past U+FFFF).
    fn quoted(s: &str, all_escaped: bool) -> String {
        if !all_escaped {
            return serde_json::to_string(s).unwrap();
        }
        let mut out = String::from("\"");
        for unit in s.encode_utf16() {
            out.push_str(&format!("\\u{unit:04X}"));
        }
        out.push('"');
        out
    }

    /// Any JSON value as text, as an unknown field may hold it: numbers of every form (`-0`,
    /// exponents, beyond 64 bits), strings with escapes and a lone surrogate, nested arrays
    /// and objects.
    fn json_value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            any::<f64>().prop_map(|f| format!("{:e}", if f.is_finite() { f } else { 0.5 })),
            Just("-0".to_string()),
            Just("1E+3".to_string()),
            Just("0.5e-7".to_string()),
            Just("123456789012345678901234567890".to_string()),
            (text(), any::<bool>()).prop_map(|(t, e)| quoted(&t, e)),
            Just(r#""\ud800 lone""#.to_string()),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec((text(), inner), 0..4).prop_map(|v| {
                    let members: Vec<String> = v
                        .iter()
                        .map(|(k, v)| format!("{}:{v}", quoted(k, false)))
                        .collect();
                    format!("{{{}}}", members.join(" , "))
                }),
            ]
        })
    }

    /// How [`render`] writes an event.
    #[derive(Debug, Clone)]
    struct Rendering {
        /// A permutation of the fields, or `None` for the writer's order.
        order: Option<Vec<usize>>,
        /// Bit `i` set: the `i`th string (keys and values alike) is written all in `\u`.
        escaped: u64,
        /// Whitespace between tokens, taken in turn.
        spaces: Vec<&'static str>,
        /// Unknown fields and their values, inserted at the given places.
        unknown: Vec<(prop::sample::Index, CompactString, String)>,
    }

    fn rendering() -> impl Strategy<Value = Rendering> {
        (
            prop::option::of(Just((0..11).collect::<Vec<usize>>()).prop_shuffle()),
            prop_oneof![Just(0u64), any::<u64>()],
            prop::collection::vec(
                prop::sample::select(vec!["", "", " ", "\t", "\r\n ", "\n"]),
                1..6,
            ),
            prop::collection::vec((any::<prop::sample::Index>(), text(), json_value()), 0..3),
        )
            .prop_map(|(order, escaped, spaces, unknown)| Rendering {
                order,
                escaped,
                spaces,
                unknown,
            })
    }

    /// `event` as one JSON object written the way `how` says: a valid line that other
    /// producers might write.
    fn render(event: &Event, how: &Rendering) -> String {
        let line = event.to_json();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        // The writer's order, which a serde_json map (sorted) does not keep.
        let mut names: Vec<String> = Vec::new();
        let mut at = 0;
        while let Some(found) = line[at..].find("\":") {
            let end = at + found;
            let start = line[..end].rfind(['{', ',']).unwrap() + 2;
            names.push(line[start..end].to_string());
            at = end + 2;
            // Step over the value: strings may hold `":`.
            if line[at..].starts_with('"') {
                let mut i = at + 1;
                loop {
                    match line.as_bytes()[i] {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                at = i + 1;
            }
        }
        let mut fields: Vec<(String, serde_json::Value)> = names
            .iter()
            .map(|n| (n.clone(), value[n.as_str()].clone()))
            .collect();
        if let Some(order) = &how.order {
            let mut shuffled: Vec<_> = order
                .iter()
                .filter(|&&i| i < fields.len())
                .map(|&i| fields[i].clone())
                .collect();
            std::mem::swap(&mut fields, &mut shuffled);
        }
        let mut strings = 0u32;
        let mut string = |s: &str| {
            let escaped = how.escaped >> (strings % 64) & 1 == 1;
            strings += 1;
            quoted(s, escaped)
        };
        let mut members: Vec<String> = fields
            .iter()
            .map(|(k, v)| {
                let key = string(k);
                let value = match v {
                    serde_json::Value::String(s) => string(s),
                    other => other.to_string(),
                };
                (key, value)
            })
            .map(|(k, v)| format!("{k}\u{0}:\u{0}{v}"))
            .collect();
        for (place, key, value) in &how.unknown {
            // A key that is no field name: a field name with a prefix.
            let key = format!("x-{key}");
            if Field::from_name(key.as_bytes()).is_none() {
                let i = place.index(members.len() + 1);
                members.insert(i, format!("{}\u{0}:\u{0}{value}", quoted(&key, false)));
            }
        }
        let text = format!("\u{0}{{\u{0}{}\u{0}}}\u{0}", members.join("\u{0},\u{0}"));
        // Whitespace in place of each marker, in turn.
        let mut spaces = how.spaces.iter().cycle();
        text.split('\u{0}')
            .enumerate()
            .fold(String::new(), |mut out, (i, piece)| {
                if i > 0 {
                    out.push_str(spaces.next().unwrap());
                }
                out.push_str(piece);
                out
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The word masks of quotes and backslashes are exact, whatever the other bytes,
        /// and a string literal ends at its first unescaped quote wherever the escapes fall
        /// (in a word, across two, past the words read 8 at a time), as serde_json reads it.
        #[test]
        fn string_literals_end_at_their_first_unescaped_quote(
            bytes in proptest::collection::vec(
                prop_oneof![20 => b'a'..=b'z', 3 => any::<u8>(), 1 => Just(b'"'), 4 => Just(b'\\'), 1 => Just(b'u')],
                0..300,
            ),
        ) {
            for word in bytes.chunks_exact(8) {
                let mask = quotes_and_backslashes(u64::from_le_bytes(word.try_into().unwrap()));
                for (i, &b) in word.iter().enumerate() {
                    prop_assert_eq!(mask >> (8 * i + 7) & 1 == 1, b == b'"' || b == b'\\');
                }
                prop_assert_eq!(mask & 0x7F7F_7F7F_7F7F_7F7F, 0);
            }
            let mut line = vec![b'"'];
            line.extend_from_slice(&bytes);
            if let Ok(text) = std::str::from_utf8(&line) {
                let expected = serde_json::Deserializer::from_slice(&line)
                    .into_iter::<String>()
                    .next()
                    .and_then(Result::ok);
                let found = JsonString::at(&line, 0).map(|s| s.decode(text).to_string());
                prop_assert_eq!(found, expected);
            }
        }

        /// The masks of a block, by SSE2 or by words, have exactly the bytes' bits.
        #[test]
        fn block_masks_are_exact(
            block in proptest::collection::vec(
                prop_oneof![4 => any::<u8>(), 1 => Just(b'"'), 1 => Just(b'\\'), 1 => Just(b'u')],
                64,
            ),
        ) {
            let block: [u8; 64] = block.try_into().unwrap();
            let naive = [b'"', b'\\', b'u'].map(|c| {
                block.iter().enumerate().fold(0u64, |m, (i, &b)| m | u64::from(b == c) << i)
            });
            prop_assert_eq!(block_masks(&block), naive);
            prop_assert_eq!(block_masks_by_words(&block), naive);
        }

        /// Reading digits 8 at a time agrees with reading them one by one, for runs of 0 to
        /// 25 digits (past the 19 that may fit) followed by any bytes, anywhere in a line.
        #[test]
        fn decimal_digits_agrees_with_digit_by_digit(
            prefix in proptest::collection::vec(any::<u8>(), 0..10),
            digits in proptest::collection::vec(b'0'..=b'9', 0..25),
            suffix in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let line = [prefix.as_slice(), &digits, &suffix].concat();
            let start = prefix.len();
            let count = line[start..].iter().take_while(|b| b.is_ascii_digit()).count();
            let expected = (count <= 19).then(|| {
                let value = line[start..start + count]
                    .iter()
                    .fold(0u64, |v, d| v * 10 + u64::from(d - b'0'));
                (value, start + count)
            });
            prop_assert_eq!(decimal_digits(&line, start), expected);
        }

        /// Serialising any event and parsing it back gives the same event.
        #[test]
        fn round_trip(e in event()) {
            let line = e.to_json();
            prop_assert!(!line.contains('\n'), "one line: {}", line);
            prop_assert_eq!(&line, &serde_json::to_string(&e).unwrap());
            prop_assert_eq!(parse_str(&line).unwrap(), e.clone());
            let via_serde: Event = serde_json::from_str(&line).unwrap();
            prop_assert_eq!(via_serde, e);
        }

        /// Dropping any one field of a serialised event is reported as that field missing.
        #[test]
        fn any_missing_field_is_named(e in event(), pick in any::<prop::sample::Index>()) {
            let v: serde_json::Value = serde_json::from_str(&e.to_json()).unwrap();
            let keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            let field = pick.get(&keys);
            let err = parse_str(&without(&e.to_json(), field)).unwrap_err();
            if field == "type" {
                prop_assert_eq!(err, ParseError::MissingType);
            } else {
                prop_assert_eq!(err, ParseError::MissingField { kind: e.kind(), field: Field::from_name(field.as_bytes()).unwrap().name() });
            }
        }

        /// The fast path agrees with serde_json on any line made of an event by changing a
        /// few bytes: it reads the same event, or leaves the line to serde_json.
        #[test]
        fn fast_path_agrees_with_serde_json(
            e in event(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![
                Just(b' '), Just(b'"'), Just(b'\\'), Just(b'-'), Just(b'0'), Just(b'9'),
                Just(b'.'), Just(b'e'), Just(b','), Just(b':'), Just(b'{'), Just(b'}'),
                Just(b'\n'), Just(0xff), Just(0xc3), Just(0x01), any::<u8>(),
            ], 0..3usize), 0..4),
        ) {
            let mut line = e.to_json().into_bytes();
            edit(&mut line, edits);
            let serde = parse_line_serde(&line);
            if let Ok(text) = std::str::from_utf8(&line) {
                if let Some(event) = scan_any(&line, text, KeptStrings::ALL) {
                    prop_assert_eq!(Ok(event), serde.clone());
                }
                if let Some(event) = scan_ordered(&line, text, KeptStrings::ALL) {
                    prop_assert_eq!(Ok(event), serde.clone());
                }
            }
            prop_assert_eq!(parse_line(&line), serde.clone());
            // Keeping fewer strings blanks them and changes nothing else, errors included.
            for kept in [KeptStrings::NONE, KeptStrings::for_query(Query::Q3)] {
                prop_assert_eq!(parse_line_keeping(&line, kept), serde.clone().map(|e| blanked(e, kept)));
            }
        }

        /// Every way of writing an event that JSON allows (fields in any order, escapes in any
        /// key or string, whitespace between tokens, unknown fields holding any value) reads as
        /// the event, on the fast path (never serde_json), keeping any set of strings.
        #[test]
        fn any_valid_rendering_reads_on_the_fast_path(e in event(), how in rendering()) {
            let line = render(&e, &how);
            let serde = parse_line_serde(line.as_bytes());
            prop_assert_eq!(&serde, &Ok(e.clone()), "{}", line);
            let lone = line.contains(r"\ud800 lone");
            for kept in [KeptStrings::ALL, KeptStrings::NONE, KeptStrings::for_query(Query::Q9)] {
                let fast = scan_ordered(line.as_bytes(), &line, kept)
                    .or_else(|| scan_any(line.as_bytes(), &line, kept));
                // A lone surrogate is valid only where it is skipped: serde_json decides.
                prop_assert_eq!(fast.is_some(), !lone, "{}", line);
                prop_assert_eq!(parse_line_keeping(line.as_bytes(), kept), Ok(blanked(e.clone(), kept)), "{}", line);
            }
        }

        /// Any of those lines with a few bytes changed reads exactly as serde_json reads it:
        /// the same event, or the same error.
        #[test]
        fn edited_renderings_read_as_serde_json_reads_them(
            e in event(),
            how in rendering(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![
                Just(b' '), Just(b'"'), Just(b'\\'), Just(b'u'), Just(b'-'), Just(b'0'), Just(b'9'),
                Just(b'.'), Just(b'e'), Just(b','), Just(b':'), Just(b'{'), Just(b'}'), Just(b'['),
                Just(b']'), Just(b'D'), Just(b'n'), Just(b'\n'), Just(0xff), Just(0xc3), Just(0x01),
                any::<u8>(),
            ], 0..3usize), 1..4),
        ) {
            let mut line = render(&e, &how).into_bytes();
            edit(&mut line, edits);
            let serde = parse_line_serde(&line);
            for kept in [KeptStrings::ALL, KeptStrings::NONE, KeptStrings::for_query(Query::Q3)] {
                prop_assert_eq!(parse_line_keeping(&line, kept), serde.clone().map(|e| blanked(e, kept)));
            }
        }

        /// No input makes the parser panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_line(&bytes);
        }
    }
}
