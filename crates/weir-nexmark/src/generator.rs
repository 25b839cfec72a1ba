//! A deterministic, splittable NEXMark event generator that follows the rules of
//! `docs/nexmark.md` (those of the Apache Beam reference generator).
//!
//! Event number `n` maps to exactly one [`Event`], computed from `n` alone: any instance can
//! generate any event, in any order, and a split into parallel generators yields exactly the
//! events of one generator.
//!
//! ```
//! use weir_nexmark::generator::{Generator, GeneratorConfig};
//! use weir_nexmark::EventKind;
//!
//! let generator = Generator::new(GeneratorConfig { count: Some(100), ..Default::default() })?;
//! let events: Vec<_> = generator.iter().collect();
//! assert_eq!(events.len(), 100);
//! assert_eq!(events[0].kind(), EventKind::Person); // id % 50 == 0
//! assert_eq!(events[1].kind(), EventKind::Auction); // 1..=3
//! assert_eq!(events[4].kind(), EventKind::Bid); // 4..=49
//! assert_eq!(generator.event(42), events[42]); // random access
//!
//! // Two instances, each taking every other event, make the same events.
//! let mut split: Vec<_> = generator.instance(0, 2).chain(generator.instance(1, 2)).collect();
//! split.sort_by_key(|e| (e.date_time(), e.to_json()));
//! let mut whole = events.clone();
//! whole.sort_by_key(|e| (e.date_time(), e.to_json()));
//! assert_eq!(split, whole);
//! # Ok::<(), weir_nexmark::generator::ConfigError>(())
//! ```
//!
//! # The rules
//!
//! Event number `n` has the event id `id = first_event_id + n`, and `rem = id % 50`.
//!
//! - **Type.** `rem < 1`: a person; `rem < 4`: an auction; otherwise a bid (1 : 3 : 46).
//! - **New ids.** A person gets `id / 50 + 1000`; an auction `3 * (id / 50) + rem - 1 + 1000`.
//!   The newest auction a bid can see is `3 * (id / 50) + 2 + 1000`.
//! - **Random person** (a bidder or seller that is not hot): uniform among the last 1000
//!   people created and the 10 ids after the newest, which do not exist yet, so that some
//!   joins miss.
//! - **Random auction** (the auction of a bid that is not hot): uniform among the last 100
//!   auctions created, the newest included. (Beam also adds 10 ids ahead here; the README does
//!   not, and neither do we.)
//! - **Hot items.** A bid goes to the newest auction whose base-0 id is a multiple of 100 with
//!   probability 1/2, and comes from the hot bidder (the newest base-0 person id rounded down
//!   to a multiple of 100, plus 1) with probability 3/4. An auction's seller is the hot seller
//!   (that person id rounded down, without the 1) with probability 3/4.
//! - **Prices** (`initial_bid`, bid `price`): `round(10^(U*6) * 100)` cents, U uniform in
//!   [0, 1). `reserve = initial_bid + ` another such price.
//! - **Category:** `10 + U[0, 5)`.
//! - **Expiry:** `date_time + 1 + U[0, 2*horizon)` (at least `+ 1`). The horizon is
//!   [`GeneratorConfig::auction_horizon_ms`]; by default, as in Beam, it is the event time
//!   that the next 100 auctions take to appear, `1666 * 1000 / rate` ms, so that about 100
//!   auctions are open at any time. At the default rate of 10 M events/s that is 0 ms, and
//!   every auction expires 1 ms after it opens; at 1000 events/s, 1666 ms.
//! - **Strings.** States from {AZ, CA, ID, OR, WA, WY}; cities from a list of 10 (`phoenix`,
//!   `los angeles`, ...); names from 11 first and 9 last names (`peter jones`), all in lower
//!   case as in the README's example; e-mail addresses of 3–6 and 3–4 random letters
//!   (`abcdef@ghij.com`); credit cards of four groups of four digits; item names (up to 19
//!   characters) and descriptions (up to 99) of random letters with a space about every 13th,
//!   trimmed. Bids carry a channel and URL as in the Flink generator: with probability 1/2 one
//!   of the hot channels Google, Facebook, Baidu and Apple, otherwise one of 10,000
//!   `channel-N`, each with its own URL.
//! - **Strings.** [`GeneratorConfig::strings`] mixes characters that JSON escapes
//!   ([`StringStyle::Escaped`]) or multi-byte UTF-8 ([`StringStyle::Unicode`]) into the
//!   random strings, as other producers' files hold them; the default is letters only.
//! - **Sizes.** `extra` is random letters that pad each event to an average
//!   [nominal size](Event::nominal_size) of 200 (person), 500 (auction) or 100 (bid) bytes,
//!   with Beam's rule: a length uniform within ±20% of what is missing. As JSON, events are
//!   larger (about 320, 640 and 260 bytes): the field names alone of a bid take more than 100.
//! - **Times.** Event `n` happens at `base_time_ms + n * 1000 / rate` ms (integer division:
//!   the README's `n * (1e6 / R) / 1000`, without rounding drift). With
//!   [`out_of_order_ms`](GeneratorConfig::out_of_order_ms) `M > 0`, each event's time is moved
//!   back by `U[0, M)` ms, so events come out of order by less than `M` ms and, for `M` no
//!   more than the allowed lag, none is late.
//!
//! # Randomness
//!
//! Each event draws from its own random stream: SplitMix64 (Steele, Lea and Flood, 2014)
//! started from `mix64(mix64(seed) ^ id)`, where `mix64` is SplitMix64's output function
//! (Stafford's Mix13). `U[0, k)` takes the high 64 bits of a 64×64-bit product (Lemire's
//! method without rejection: the bias is below `k / 2^64`), and `U` in [0, 1) takes 53 bits.
//! Random strings are slices of fixed 64 KiB tables of random letters (built once per process
//! from a fixed seed) at a random offset, so a string costs two draws and no allocation. The
//! time jitter is always the first draw, so changing `out_of_order_ms` changes only the times
//! (and the expiry, which is relative to the time).
//!
//! # Cost
//!
//! About 10 random draws per event and no heap allocation but the box of a person or an
//! auction ([`Event`]): strings of up to 24 bytes are built inline and longer ones refer to
//! the static tables. See `benches/generator.rs` for
//! the measured rate.

use std::fmt;
use std::sync::OnceLock;

use compact_str::CompactString;

use crate::model::{Auction, Bid, Event, EventKind, Person};

/// Persons per 50 events.
pub const PERSON_PROPORTION: u64 = 1;
/// Auctions per 50 events.
pub const AUCTION_PROPORTION: u64 = 3;
/// Bids per 50 events.
pub const BID_PROPORTION: u64 = 46;
/// The period of the event-type pattern.
pub const TOTAL_PROPORTION: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;
/// The id of the first person.
pub const FIRST_PERSON_ID: i64 = 1000;
/// The id of the first auction.
pub const FIRST_AUCTION_ID: i64 = 1000;
/// The first category; categories are `FIRST_CATEGORY_ID..FIRST_CATEGORY_ID + 5`.
pub const FIRST_CATEGORY_ID: i64 = 10;
/// How many categories there are.
pub const CATEGORIES: u64 = 5;
/// The default base time, 2015-07-15T00:00:00Z in ms (the README's example).
pub const DEFAULT_BASE_TIME_MS: i64 = 1_436_918_400_000;
/// The default rate, events per second of event time.
pub const DEFAULT_RATE: u64 = 10_000_000;
/// The default number of events.
pub const DEFAULT_COUNT: u64 = 10_000_000;

/// How many of the newest people a random person is drawn from.
const ACTIVE_PEOPLE: u64 = 1000;
/// How many ids past the newest person a random person may have.
const PERSON_ID_LEAD: u64 = 10;
/// How many of the newest auctions a random auction is drawn from.
const IN_FLIGHT_AUCTIONS: u64 = 100;
/// Hot auctions, sellers and bidders are multiples of this (base 0).
const HOT_RATIO: u64 = 100;
/// Events it takes to create [`IN_FLIGHT_AUCTIONS`] auctions.
const EVENTS_PER_IN_FLIGHT_AUCTIONS: u64 =
    IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION / AUCTION_PROPORTION;
/// Average nominal sizes, in bytes.
const PERSON_SIZE: usize = 200;
const AUCTION_SIZE: usize = 500;
const BID_SIZE: usize = 100;

/// What a [`Generator`] generates. Build it with struct update syntax:
///
/// ```
/// use weir_nexmark::generator::GeneratorConfig;
///
/// let config = GeneratorConfig { count: Some(1000), seed: 7, ..Default::default() };
/// assert_eq!(config.rate, 10_000_000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// The id of event number 0. Ids decide the event types and the entity ids; event
    /// numbers decide the times. Default 0.
    pub first_event_id: u64,
    /// How many events, numbered `0..count`; `None` for no end. Default 10,000,000.
    pub count: Option<u64>,
    /// Events per second of event time, at least 1. It sets the timestamps only: a generator
    /// runs as fast as it is driven. Default 10,000,000.
    pub rate: u64,
    /// The time of event number 0, in ms since the Unix epoch. Default
    /// [`DEFAULT_BASE_TIME_MS`].
    pub base_time_ms: i64,
    /// The seed. The same seed gives the same events. Default 0.
    pub seed: u64,
    /// Moves each event's time back by a random `U[0, M)` ms, so that events are out of order
    /// by less than `M` ms. 0 (the default) keeps times in order.
    pub out_of_order_ms: u64,
    /// Half the average time from an auction's opening to its expiry, in ms; `None` (the
    /// default) for Beam's rule, the event time 100 auctions take to appear. See the
    /// [module docs](self#the-rules).
    pub auction_horizon_ms: Option<u64>,
    /// What the random strings (e-mail addresses, item names, descriptions, `extra`) are
    /// made of. Default [`StringStyle::Ascii`].
    pub strings: StringStyle,
}

/// What the generator's random strings are made of: lower-case letters as in the README
/// (the default), or content that tests a reader the way other producers' files do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StringStyle {
    /// Lower-case ASCII letters (and spaces in names and descriptions).
    #[default]
    Ascii,
    /// About one character in eight is one that JSON escapes or producers often escape:
    /// `"`, `\`, a newline, a tab, U+0001 (written `\u0001`) or `/`.
    Escaped,
    /// About one character in four is not ASCII: two-, three- and four-byte UTF-8 (`é`,
    /// `ж`, `中`, `😀`; a four-byte one is a surrogate pair when escaped as `\u`).
    Unicode,
}

impl StringStyle {
    /// Every style, in order.
    pub const ALL: [StringStyle; 3] = [
        StringStyle::Ascii,
        StringStyle::Escaped,
        StringStyle::Unicode,
    ];

    /// The style's name: `ascii`, `escaped` or `unicode`.
    pub const fn name(self) -> &'static str {
        match self {
            StringStyle::Ascii => "ascii",
            StringStyle::Escaped => "escaped",
            StringStyle::Unicode => "unicode",
        }
    }

    /// The characters mixed in among the letters, and one in how many characters is one.
    const fn mixed_in(self) -> (&'static [char], u64) {
        match self {
            StringStyle::Ascii => (&[], 1),
            StringStyle::Escaped => (&['"', '\\', '\n', '\t', '\u{1}', '/'], 8),
            StringStyle::Unicode => (&['é', 'ß', 'ж', 'λ', '中', '語', '😀', '🚀'], 4),
        }
    }
}

impl std::fmt::Display for StringStyle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for StringStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        StringStyle::ALL
            .into_iter()
            .find(|style| style.name() == s)
            .ok_or_else(|| {
                format!("unknown string style '{s}': expected ascii, escaped or unicode")
            })
    }
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            first_event_id: 0,
            count: Some(DEFAULT_COUNT),
            rate: DEFAULT_RATE,
            base_time_ms: DEFAULT_BASE_TIME_MS,
            seed: 0,
            out_of_order_ms: 0,
            auction_horizon_ms: None,
            strings: StringStyle::Ascii,
        }
    }
}

/// Why a generator cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The rate is 0 events per second.
    #[error("the event rate must be at least 1 event per second")]
    ZeroRate,
    /// A batch source was asked for an unbounded number of events.
    #[error("a batch source needs a finite event count")]
    Unbounded,
}

/// Generates NEXMark events by the rules in the [module docs](self).
///
/// Cheap to clone (a few words); [`event`](Self::event) takes `&self`, so one generator can
/// serve several threads.
#[derive(Clone)]
pub struct Generator {
    config: GeneratorConfig,
    seed_key: u64,
    horizon_ms: u64,
    tables: &'static Tables,
}

impl fmt::Debug for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("config", &self.config)
            .field("horizon_ms", &self.horizon_ms)
            .finish_non_exhaustive()
    }
}

impl Generator {
    /// A generator of `config`'s events.
    ///
    /// Cost: the first generator of a process builds the static string tables (about 1 ms).
    ///
    /// # Errors
    /// [`ConfigError::ZeroRate`] if `config.rate` is 0.
    pub fn new(config: GeneratorConfig) -> Result<Self, ConfigError> {
        if config.rate == 0 {
            return Err(ConfigError::ZeroRate);
        }
        let horizon_ms = config.auction_horizon_ms.unwrap_or_else(|| {
            (u128::from(EVENTS_PER_IN_FLIGHT_AUCTIONS) * 1000 / u128::from(config.rate)) as u64
        });
        Ok(Generator {
            seed_key: mix64(config.seed),
            horizon_ms,
            tables: tables(config.strings),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GeneratorConfig {
        &self.config
    }

    /// The auction horizon in use, in ms (see [`GeneratorConfig::auction_horizon_ms`]).
    pub fn auction_horizon_ms(&self) -> u64 {
        self.horizon_ms
    }

    /// The type of event number `n`, without generating it.
    #[inline]
    pub fn kind(&self, n: u64) -> EventKind {
        kind_of(self.config.first_event_id.wrapping_add(n))
    }

    /// The in-order time of event number `n`: `base_time_ms + n * 1000 / rate`, saturating.
    /// An event's `date_time` is this, less its jitter when
    /// [`out_of_order_ms`](GeneratorConfig::out_of_order_ms) is set.
    #[inline]
    pub fn timestamp(&self, n: u64) -> i64 {
        let offset = u128::from(n) * 1000 / u128::from(self.config.rate);
        self.config
            .base_time_ms
            .saturating_add(i64::try_from(offset).unwrap_or(i64::MAX))
    }

    /// Event number `n` (its id is `first_event_id + n`). Defined for every `n`, within the
    /// count or not; the same `n` always gives the same event.
    ///
    /// Cost: about 10 random draws; one allocation for a person or an auction (boxed in
    /// [`Event`]), none for a bid.
    pub fn event(&self, n: u64) -> Event {
        let id = self.config.first_event_id.wrapping_add(n);
        let mut rng = SplitMix64::for_event(self.seed_key, id);
        // Always the first draw, so that the jitter does not shift the other draws.
        let jitter = rng.below(self.config.out_of_order_ms);
        let date_time = self.timestamp(n).saturating_sub(saturate(jitter));
        match kind_of(id) {
            EventKind::Person => Event::from(self.person(id, &mut rng, date_time)),
            EventKind::Auction => Event::from(self.auction(id, &mut rng, date_time)),
            EventKind::Bid => Event::Bid(self.bid(id, &mut rng, date_time)),
        }
    }

    /// Every event, numbers `0..count` in order (no end if the count is `None`).
    pub fn iter(&self) -> Events {
        self.instance(0, 1)
    }

    /// The events of instance `index` of `count` parallel instances: numbers `index`,
    /// `index + count`, `index + 2*count`, ... below the event count. The instances together
    /// generate every event exactly once, and each one's times advance at the same pace.
    /// `count` 0 is taken as 1; an `index` at or past `count` gets nothing.
    pub fn instance(&self, index: u64, count: u64) -> Events {
        let step = count.max(1);
        Events {
            generator: self.clone(),
            next: if index < step { index } else { u64::MAX },
            end: self.config.count.unwrap_or(u64::MAX),
            step,
        }
    }

    fn person(&self, id: u64, rng: &mut SplitMix64, date_time: i64) -> Person {
        let t = self.tables;
        let name = t.names[rng.below(t.names.len() as u64) as usize].as_str();
        let mut email = CompactString::with_capacity(16);
        let user = 3 + rng.below(4) as usize;
        email.push_str(t.letters(rng, user));
        email.push('@');
        let domain = 3 + rng.below(2) as usize;
        email.push_str(t.letters(rng, domain));
        email.push_str(".com");
        let mut credit_card = CompactString::with_capacity(19);
        for i in 0..4 {
            if i > 0 {
                credit_card.push(' ');
            }
            let v = rng.below(10_000) as u32;
            for d in [v / 1000, v / 100 % 10, v / 10 % 10, v % 10] {
                credit_card.push(char::from(b'0' + d as u8));
            }
        }
        let city = CITIES[rng.below(CITIES.len() as u64) as usize];
        let state = STATES[rng.below(STATES.len() as u64) as usize];
        let size = 8 + name.len() + email.len() + credit_card.len() + city.len() + state.len();
        let extra = t.extra(rng, size, PERSON_SIZE);
        Person {
            id: last_base0_person_id(id) + FIRST_PERSON_ID,
            name: CompactString::const_new(name),
            email_address: email,
            credit_card,
            city: CompactString::const_new(city),
            state: CompactString::const_new(state),
            date_time,
            extra: CompactString::const_new(extra),
        }
    }

    fn auction(&self, id: u64, rng: &mut SplitMix64, date_time: i64) -> Auction {
        let t = self.tables;
        let seller = if rng.below(4) > 0 {
            last_base0_person_id(id) / HOT_RATIO as i64 * HOT_RATIO as i64
        } else {
            next_base0_person_id(id, rng)
        } + FIRST_PERSON_ID;
        let category = FIRST_CATEGORY_ID + rng.below(CATEGORIES) as i64;
        let initial_bid = next_price(rng);
        let expires = date_time.saturating_add(1).saturating_add(saturate(
            rng.below(self.horizon_ms.saturating_mul(2).max(1)),
        ));
        let item_name = t.words(rng, 20);
        let description = t.words(rng, 100);
        let reserve = initial_bid + next_price(rng);
        let size = 8 + item_name.len() + description.len() + 40;
        let extra = t.extra(rng, size, AUCTION_SIZE);
        Auction {
            id: last_base0_auction_id(id) + FIRST_AUCTION_ID,
            item_name: CompactString::const_new(item_name),
            description: CompactString::const_new(description),
            initial_bid,
            reserve,
            date_time,
            expires,
            seller,
            category,
            extra: CompactString::const_new(extra),
        }
    }

    fn bid(&self, id: u64, rng: &mut SplitMix64, date_time: i64) -> Bid {
        let t = self.tables;
        let auction = if rng.below(2) > 0 {
            last_base0_auction_id(id) / HOT_RATIO as i64 * HOT_RATIO as i64
        } else {
            next_base0_auction_id(id, rng)
        } + FIRST_AUCTION_ID;
        let bidder = if rng.below(4) > 0 {
            last_base0_person_id(id) / HOT_RATIO as i64 * HOT_RATIO as i64 + 1
        } else {
            next_base0_person_id(id, rng)
        } + FIRST_PERSON_ID;
        let price = next_price(rng);
        let (channel, url) = if rng.below(2) > 0 {
            let i = rng.below(HOT_CHANNELS.len() as u64) as usize;
            (HOT_CHANNELS[i], t.hot_urls[i].as_str())
        } else {
            let i = rng.below(t.channels.len() as u64) as usize;
            (t.channels[i].as_str(), t.urls[i].as_str())
        };
        let extra = t.extra(rng, 32, BID_SIZE);
        Bid {
            auction,
            bidder,
            price,
            channel: CompactString::const_new(channel),
            url: CompactString::const_new(url),
            date_time,
            extra: CompactString::const_new(extra),
        }
    }
}

/// An iterator over a [`Generator`]'s events; see [`Generator::iter`] and
/// [`Generator::instance`].
///
/// Cost: one [`Generator::event`] per item.
#[derive(Debug, Clone)]
pub struct Events {
    generator: Generator,
    next: u64,
    end: u64,
    step: u64,
}

impl Events {
    /// The number of the event the next call to `next` returns, if any.
    pub fn peek_number(&self) -> Option<u64> {
        (self.next < self.end).then_some(self.next)
    }

    /// The generator behind it.
    pub fn generator(&self) -> &Generator {
        &self.generator
    }

    /// Moves on (or back) to event `number`, which must be one of this iterator's (its
    /// index plus a multiple of its step); at or past the count, nothing is left. Returns
    /// false, changing nothing, for a number that is not this iterator's. Cost: none; the
    /// events before it are not generated.
    pub fn seek(&mut self, number: u64) -> bool {
        if number < self.end && number % self.step != self.next.min(self.end) % self.step {
            return false;
        }
        self.next = number;
        true
    }
}

impl Iterator for Events {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        if self.next >= self.end {
            return None;
        }
        let event = self.generator.event(self.next);
        self.next = self.next.saturating_add(self.step);
        Some(event)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.next >= self.end {
            0
        } else {
            (self.end - self.next).div_ceil(self.step)
        };
        let left = usize::try_from(left).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

/// `v` as an `i64`, saturating.
#[inline]
fn saturate(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The type of the event with id `id`.
#[inline]
fn kind_of(id: u64) -> EventKind {
    let rem = id % TOTAL_PROPORTION;
    if rem < PERSON_PROPORTION {
        EventKind::Person
    } else if rem < PERSON_PROPORTION + AUCTION_PROPORTION {
        EventKind::Auction
    } else {
        EventKind::Bid
    }
}

/// The base-0 id of the newest person at event `id` (the one it creates, for a person).
/// Fits an `i64` for every `u64` id.
#[inline]
fn last_base0_person_id(id: u64) -> i64 {
    (id / TOTAL_PROPORTION) as i64
}

/// The base-0 id of the newest auction at event `id`: the one it creates for an auction,
/// the last of the previous period for a person (-1 before the first auction). Fits an
/// `i64` for every `u64` id.
#[inline]
fn last_base0_auction_id(id: u64) -> i64 {
    let epoch = (id / TOTAL_PROPORTION) as i64;
    let rem = id % TOTAL_PROPORTION;
    let a = AUCTION_PROPORTION as i64;
    if rem < PERSON_PROPORTION {
        epoch * a - 1
    } else if rem >= PERSON_PROPORTION + AUCTION_PROPORTION {
        epoch * a + a - 1
    } else {
        epoch * a + (rem - PERSON_PROPORTION) as i64
    }
}

/// A random base-0 person id: one of the last [`ACTIVE_PEOPLE`] or the [`PERSON_ID_LEAD`]
/// ids after the newest.
#[inline]
fn next_base0_person_id(id: u64, rng: &mut SplitMix64) -> i64 {
    let people = last_base0_person_id(id) as u64 + 1;
    let active = people.min(ACTIVE_PEOPLE);
    (people - active + rng.below(active + PERSON_ID_LEAD)) as i64
}

/// A random base-0 auction id among the last [`IN_FLIGHT_AUCTIONS`], for a bid (which
/// always has at least one auction before it).
#[inline]
fn next_base0_auction_id(id: u64, rng: &mut SplitMix64) -> i64 {
    let max = last_base0_auction_id(id).max(0);
    let min = (max - (IN_FLIGHT_AUCTIONS as i64 - 1)).max(0);
    min + rng.below((max - min + 1) as u64) as i64
}

/// A log-uniform price in cents: `round(10^(U*6) * 100)`, 100 to 100,000,000.
#[inline]
fn next_price(rng: &mut SplitMix64) -> i64 {
    (10f64.powf(rng.unit() * 6.0) * 100.0).round() as i64
}

const STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const CITIES: [&str; 10] = [
    "phoenix",
    "los angeles",
    "san francisco",
    "boise",
    "portland",
    "bend",
    "redmond",
    "seattle",
    "kent",
    "cheyenne",
];
const FIRST_NAMES: [&str; 11] = [
    "peter", "paul", "luke", "john", "saul", "vicky", "kate", "julie", "sarah", "deiter", "walter",
];
const LAST_NAMES: [&str; 9] = [
    "shultz", "abrams", "spencer", "white", "bartels", "walton", "smith", "jones", "noris",
];
const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
/// How many cold channels there are.
const CHANNELS: usize = 10_000;
/// The size of each random-letter table.
const POOL: usize = 64 * 1024;

/// Strings built once per process, from fixed seeds: the generator hands out slices of them.
struct Tables {
    /// Every "first last" name.
    names: Vec<String>,
    /// `channel-N` for every cold channel N.
    channels: Vec<String>,
    /// The URL of each cold channel.
    urls: Vec<String>,
    /// The URL of each hot channel.
    hot_urls: Vec<String>,
    /// Random lower-case letters.
    letters: String,
    /// Random lower-case letters with a space about every 13th character.
    words: String,
}

fn tables(style: StringStyle) -> &'static Tables {
    static TABLES: [OnceLock<Tables>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    TABLES[style as usize].get_or_init(|| Tables::build(style))
}

impl Tables {
    fn build(style: StringStyle) -> Tables {
        let mut rng = SplitMix64(0x6e65_786d_6172_6b21); // "nexmark!"
        let letter = |rng: &mut SplitMix64| char::from(b'a' + rng.below(26) as u8);
        // The random strings' pools; URLs and channels stay ASCII, as a URL's characters are.
        let (mixed, one_in) = style.mixed_in();
        let pool_char = |rng: &mut SplitMix64| {
            if !mixed.is_empty() && rng.below(one_in) == 0 {
                mixed[rng.below(mixed.len() as u64) as usize]
            } else {
                letter(rng)
            }
        };
        let letters: String = (0..POOL).map(|_| pool_char(&mut rng)).collect();
        let words: String = (0..POOL)
            .map(|_| {
                if rng.below(13) == 0 {
                    ' '
                } else {
                    pool_char(&mut rng)
                }
            })
            .collect();
        // Beam's `nextString(5, '_')`: 3 or 4 letters or underscores.
        let part = |rng: &mut SplitMix64| -> String {
            let len = 3 + rng.below(2);
            (0..len)
                .map(|_| if rng.below(13) == 0 { '_' } else { letter(rng) })
                .collect()
        };
        let base_url = |rng: &mut SplitMix64| {
            format!(
                "https://www.nexmark.com/{}/{}/{}/item.htm?query=1",
                part(rng),
                part(rng),
                part(rng)
            )
        };
        let hot_urls = (0..HOT_CHANNELS.len())
            .map(|_| base_url(&mut rng))
            .collect();
        let mut urls = Vec::with_capacity(CHANNELS);
        for n in 0..CHANNELS {
            let mut url = base_url(&mut rng);
            if rng.below(10) > 0 {
                url.push_str(&format!(
                    "&channel_id={}",
                    (n as i32).reverse_bits().unsigned_abs()
                ));
            }
            urls.push(url);
        }
        Tables {
            names: FIRST_NAMES
                .iter()
                .flat_map(|f| LAST_NAMES.iter().map(move |l| format!("{f} {l}")))
                .collect(),
            channels: (0..CHANNELS).map(|n| format!("channel-{n}")).collect(),
            urls,
            hot_urls,
            letters,
            words,
        }
    }

    /// `len` random letters.
    #[inline]
    fn letters(&'static self, rng: &mut SplitMix64, len: usize) -> &'static str {
        slice(&self.letters, rng, len)
    }

    /// Beam's `nextString(max)`: 3 to `max - 1` random letters and spaces, trimmed.
    #[inline]
    fn words(&'static self, rng: &mut SplitMix64, max: u64) -> &'static str {
        let len = 3 + rng.below(max - 3) as usize;
        slice(&self.words, rng, len).trim_matches(' ')
    }

    /// Beam's `nextExtra`: random letters padding an event of `size` bytes towards an average
    /// of `target`: a length uniform in `[missing - δ, missing + δ)`, δ = 20% of what is
    /// missing.
    #[inline]
    fn extra(&'static self, rng: &mut SplitMix64, size: usize, target: usize) -> &'static str {
        if size > target {
            return "";
        }
        let missing = target - size;
        let delta = (missing as f64 * 0.2).round() as usize;
        let len = missing - delta
            + if delta == 0 {
                0
            } else {
                rng.below(2 * delta as u64) as usize
            };
        self.letters(rng, len)
    }
}

/// A random slice of about `len` bytes (at most the pool's length) of a pool: in a pool
/// with multi-byte characters its ends move in to character boundaries, so it may be up to
/// six bytes shorter. Cost: two byte tests for an ASCII pool.
#[inline]
fn slice(pool: &'static str, rng: &mut SplitMix64, len: usize) -> &'static str {
    let len = len.min(pool.len());
    let mut start = rng.below((pool.len() - len + 1) as u64) as usize;
    let mut end = start + len;
    while !pool.is_char_boundary(start) {
        start += 1;
    }
    while end > start && !pool.is_char_boundary(end) {
        end -= 1;
    }
    &pool[start..end]
}

/// SplitMix64's increment, the golden ratio in 64 bits.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function (Stafford's Mix13): a bijection that scrambles every bit.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The SplitMix64 random generator: one add and one [`mix64`] per draw.
#[derive(Debug, Clone, Copy)]
struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream of event `id` under the seed whose [`mix64`] is `seed_key`.
    #[inline]
    fn for_event(seed_key: u64, id: u64) -> Self {
        SplitMix64(mix64(seed_key ^ id))
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix64(self.0)
    }

    /// Uniform in `[0, n)`; 0 when `n` is 0.
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`, 53 bits.
    #[inline]
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn generator(config: GeneratorConfig) -> Generator {
        Generator::new(config).unwrap()
    }

    fn default_with(count: u64) -> Generator {
        generator(GeneratorConfig {
            count: Some(count),
            ..Default::default()
        })
    }

    #[test]
    fn proportions_are_1_3_46() {
        let g = default_with(100_000);
        let mut counts = [0u64; 3];
        for e in g.iter() {
            counts[e.kind() as usize] += 1;
        }
        assert_eq!(counts, [2000, 6000, 92_000]);
        // Any window of 50 consecutive ids holds exactly 1, 3 and 46.
        let g = generator(GeneratorConfig {
            first_event_id: 17,
            count: Some(50),
            ..Default::default()
        });
        let mut counts = [0u64; 3];
        for n in 0..50 {
            counts[g.kind(n) as usize] += 1;
        }
        assert_eq!(counts, [1, 3, 46]);
    }

    #[test]
    fn id_formulas_match_the_readme() {
        let g = default_with(100_000);
        let mut max_person = i64::MIN;
        let mut max_auction = i64::MIN;
        for (n, e) in g.iter().enumerate() {
            let id = n as u64;
            let rem = (id % 50) as i64;
            let epoch = (id / 50) as i64;
            match e {
                Event::Person(p) => {
                    assert_eq!(p.id, epoch + 1000);
                    max_person = p.id;
                }
                Event::Auction(a) => {
                    assert_eq!(a.id, 3 * epoch + (rem - 1) + 1000);
                    max_auction = a.id;
                    // The seller is the hot seller or among the last 1000 people + 10 ahead.
                    assert!(
                        a.seller == epoch / 100 * 100 + 1000
                            || (a.seller > max_person - 1000 && a.seller <= max_person + 10),
                        "seller {} at person {max_person}",
                        a.seller
                    );
                    assert!((10..15).contains(&a.category));
                    assert!(a.expires > a.date_time);
                    assert!(a.reserve > a.initial_bid);
                }
                Event::Bid(b) => {
                    let newest = 3 * epoch + 2 + 1000;
                    assert_eq!(newest, max_auction, "newest existing auction");
                    assert!(
                        b.auction == (newest - 1000) / 100 * 100 + 1000
                            || (b.auction > newest - 100 && b.auction <= newest),
                        "auction {} at {newest}",
                        b.auction
                    );
                    assert!(
                        b.bidder == epoch / 100 * 100 + 1001
                            || (b.bidder > max_person - 1000 && b.bidder <= max_person + 10),
                        "bidder {} at person {max_person}",
                        b.bidder
                    );
                    assert!((100..=100_000_000).contains(&b.price), "{}", b.price);
                }
            }
        }
    }

    #[test]
    fn hot_items_have_the_stated_probabilities() {
        let g = default_with(200_000);
        let (mut bids, mut hot_auction, mut hot_bidder) = (0.0, 0.0, 0.0);
        let (mut auctions, mut hot_seller) = (0.0, 0.0);
        let mut categories = [0u32; 5];
        let mut ahead = 0;
        let mut people = HashSet::new();
        for (n, e) in g.iter().enumerate() {
            let epoch = n as i64 / 50;
            match e {
                Event::Person(p) => {
                    people.insert(p.id);
                }
                Event::Bid(b) => {
                    bids += 1.0;
                    // A random auction can also be a multiple of 100; that adds ~1/200.
                    if (b.auction - 1000) % 100 == 0 {
                        hot_auction += 1.0;
                    }
                    if b.bidder == epoch / 100 * 100 + 1001 {
                        hot_bidder += 1.0;
                    }
                    if !people.contains(&b.bidder) {
                        ahead += 1;
                    }
                }
                Event::Auction(a) => {
                    auctions += 1.0;
                    if a.seller == epoch / 100 * 100 + 1000 {
                        hot_seller += 1.0;
                    }
                    categories[(a.category - 10) as usize] += 1;
                }
            }
        }
        let near = |x: f64, p: f64| (x - p).abs() < 0.01;
        assert!(
            near(hot_auction / bids, 0.5 + 0.5 / 100.0),
            "{}",
            hot_auction / bids
        );
        assert!(near(hot_bidder / bids, 0.75), "{}", hot_bidder / bids);
        assert!(
            near(hot_seller / auctions, 0.75),
            "{}",
            hot_seller / auctions
        );
        for c in categories {
            assert!(near(f64::from(c) / auctions, 0.2), "{categories:?}");
        }
        // Some bidders are people who do not exist yet, so that some joins miss.
        assert!(ahead > 0);
    }

    #[test]
    fn prices_are_log_uniform() {
        let g = default_with(50_000);
        let mut decades = [0u32; 6];
        let mut total = 0.0;
        for e in g.iter() {
            if let Event::Bid(b) = e {
                let d = ((b.price as f64 / 100.0).log10().floor() as usize).min(5);
                decades[d] += 1;
                total += 1.0;
            }
        }
        for d in decades {
            assert!(
                (f64::from(d) / total - 1.0 / 6.0).abs() < 0.01,
                "{decades:?}"
            );
        }
    }

    #[test]
    fn average_nominal_sizes_match_the_readme() {
        let g = default_with(100_000);
        let mut sums = [(0usize, 0usize, 0usize); 3];
        for e in g.iter() {
            let s = &mut sums[e.kind() as usize];
            s.0 += e.nominal_size();
            s.1 += e.to_json().len();
            s.2 += 1;
        }
        for ((nominal, json, n), target) in sums.into_iter().zip([200.0, 500.0, 100.0]) {
            let avg = nominal as f64 / n as f64;
            assert!((avg - target).abs() / target < 0.01, "{avg} vs {target}");
            let json = json as f64 / n as f64;
            eprintln!("nominal {avg:.1} B, JSON {json:.1} B (target {target})");
            // JSON adds the field names, and for bids the channel and URL.
            assert!(
                json > target + 100.0 && json < target + 170.0,
                "JSON {json}"
            );
        }
    }

    /// Each string style holds what it says, in every random string, with slices cut at
    /// character boundaries; only the strings differ from the default's events, and every
    /// event round-trips through JSON.
    #[test]
    fn string_styles_mix_in_their_characters_and_change_nothing_else() {
        let events = |strings| {
            generator(GeneratorConfig {
                count: Some(20_000),
                strings,
                ..Default::default()
            })
            .iter()
            .collect::<Vec<Event>>()
        };
        let ascii = events(StringStyle::Ascii);
        for style in [StringStyle::Escaped, StringStyle::Unicode] {
            let styled = events(style);
            let (mut mixed_in, mut total) = (0usize, 0usize);
            for (a, e) in ascii.iter().zip(&styled) {
                assert_eq!((a.kind(), a.date_time()), (e.kind(), e.date_time()));
                let strings: Vec<&str> = match e {
                    Event::Person(p) => vec![&p.email_address, &p.extra],
                    Event::Auction(x) => vec![&x.item_name, &x.description, &x.extra],
                    Event::Bid(b) => vec![&b.extra],
                };
                for text in strings {
                    total += text.chars().count();
                    mixed_in += text
                        .chars()
                        .filter(|c| !c.is_ascii_lowercase() && *c != ' ' && *c != '@' && *c != '.')
                        .count();
                }
                let json = e.to_json();
                assert!(!json.contains('\n'), "one line: {json}");
                assert_eq!(&crate::parse::parse_str(&json).unwrap(), e);
            }
            let share = mixed_in as f64 / total as f64;
            let (_, one_in) = style.mixed_in();
            assert!(
                (share - 1.0 / one_in as f64).abs() < 0.03,
                "{style}: {share:.3} of the characters mixed in"
            );
        }
        assert_eq!("unicode".parse::<StringStyle>(), Ok(StringStyle::Unicode));
        assert!(
            "latin1"
                .parse::<StringStyle>()
                .unwrap_err()
                .contains("ascii, escaped or unicode")
        );
    }

    #[test]
    fn strings_follow_the_readme_lists() {
        let g = default_with(5000);
        for e in g.iter() {
            match e {
                Event::Person(p) => {
                    assert!(STATES.contains(&p.state.as_str()));
                    assert!(CITIES.contains(&p.city.as_str()));
                    let (first, last) = p.name.split_once(' ').unwrap();
                    assert!(FIRST_NAMES.contains(&first) && LAST_NAMES.contains(&last));
                    assert!(p.email_address.ends_with(".com") && p.email_address.contains('@'));
                    assert_eq!(p.credit_card.len(), 19);
                    assert!(
                        p.credit_card
                            .split(' ')
                            .all(|g| g.len() == 4 && g.bytes().all(|b| b.is_ascii_digit()))
                    );
                }
                Event::Auction(a) => {
                    assert!(a.item_name.len() < 20 && a.description.len() < 100);
                    assert!(!a.description.starts_with(' ') && !a.description.ends_with(' '));
                }
                Event::Bid(b) => {
                    assert!(
                        HOT_CHANNELS.contains(&b.channel.as_str())
                            || b.channel.starts_with("channel-")
                    );
                    assert!(b.url.starts_with("https://www.nexmark.com/"));
                    assert!(b.extra.bytes().all(|c| c.is_ascii_lowercase()));
                }
            }
        }
    }

    #[test]
    fn timestamps_follow_the_rate() {
        let g = generator(GeneratorConfig {
            rate: 1000,
            count: Some(10),
            base_time_ms: 5,
            ..Default::default()
        });
        let times: Vec<i64> = g.iter().map(|e| e.date_time()).collect();
        assert_eq!(times, (5..15).collect::<Vec<_>>());
        let g = generator(GeneratorConfig {
            rate: 3,
            ..Default::default()
        });
        assert_eq!(g.timestamp(0), DEFAULT_BASE_TIME_MS);
        assert_eq!(g.timestamp(1), DEFAULT_BASE_TIME_MS + 333);
        assert_eq!(g.timestamp(2), DEFAULT_BASE_TIME_MS + 666);
        assert_eq!(g.timestamp(3), DEFAULT_BASE_TIME_MS + 1000);
        // 10 M events/s: 10,000 events per ms.
        let g = default_with(10);
        assert_eq!(g.timestamp(9_999), DEFAULT_BASE_TIME_MS);
        assert_eq!(g.timestamp(10_000), DEFAULT_BASE_TIME_MS + 1);
        // Extremes saturate instead of overflowing.
        let g = generator(GeneratorConfig {
            rate: 1,
            base_time_ms: i64::MAX - 5,
            ..Default::default()
        });
        assert_eq!(g.timestamp(u64::MAX), i64::MAX);
        assert!(matches!(g.event(u64::MAX - 3), Event::Bid(_)));
        let g = generator(GeneratorConfig {
            first_event_id: u64::MAX - 100,
            out_of_order_ms: u64::MAX,
            auction_horizon_ms: Some(u64::MAX),
            base_time_ms: i64::MIN + 5,
            ..Default::default()
        });
        for n in 0..200 {
            let e = g.event(n);
            assert!(e.date_time() <= i64::MIN + 5 + n as i64);
            if let Event::Auction(a) = e {
                assert!(a.expires >= a.date_time);
            }
        }
    }

    #[test]
    fn auction_horizon() {
        assert_eq!(default_with(1).auction_horizon_ms(), 0);
        let g = generator(GeneratorConfig {
            rate: 1000,
            count: Some(20_000),
            ..Default::default()
        });
        assert_eq!(g.auction_horizon_ms(), 1666);
        let mut max_len = 0;
        for a in g.iter().filter_map(|e| e.as_auction().cloned()) {
            let len = a.expires - a.date_time;
            assert!((1..=2 * 1666).contains(&len));
            max_len = max_len.max(len);
        }
        assert!(max_len > 3000);
        let g = default_with(1000);
        for a in g.iter().filter_map(|e| e.as_auction().cloned()) {
            assert_eq!(a.expires, a.date_time + 1);
        }
    }

    #[test]
    fn same_seed_same_events_other_seed_other_events() {
        let a: Vec<Event> = default_with(1000).iter().collect();
        let b: Vec<Event> = default_with(1000).iter().collect();
        assert_eq!(a, b);
        let c: Vec<Event> = generator(GeneratorConfig {
            seed: 1,
            count: Some(1000),
            ..Default::default()
        })
        .iter()
        .collect();
        assert_ne!(a, c);
        // Kinds, ids and times do not depend on the seed.
        for (x, y) in a.iter().zip(&c) {
            assert_eq!(x.kind(), y.kind());
            assert_eq!(x.date_time(), y.date_time());
        }
    }

    #[test]
    fn split_generators_equal_one() {
        let g = default_with(10_007);
        let whole: Vec<Event> = g.iter().collect();
        for parts in 1..=5u64 {
            let mut got: Vec<Option<Event>> = vec![None; whole.len()];
            for i in 0..parts {
                let mut it = g.instance(i, parts);
                while let Some(n) = it.peek_number() {
                    let e = it.next().unwrap();
                    assert!(got[n as usize].replace(e).is_none(), "event {n} twice");
                }
                assert_eq!(it.size_hint(), (0, Some(0)));
            }
            let got: Vec<Event> = got.into_iter().map(|e| e.expect("every event")).collect();
            assert_eq!(got, whole, "{parts} parts");
        }
        // A generator starting further on continues the same sequence of ids.
        let later = generator(GeneratorConfig {
            first_event_id: 5000,
            count: Some(100),
            ..Default::default()
        });
        for n in 0..100 {
            let (a, b) = (later.event(n), g.event(5000 + n));
            assert_eq!(a.kind(), b.kind());
            match (a, b) {
                (Event::Person(x), Event::Person(y)) => assert_eq!(x.id, y.id),
                (Event::Auction(x), Event::Auction(y)) => assert_eq!(x.id, y.id),
                (Event::Bid(x), Event::Bid(y)) => assert_eq!(x.auction, y.auction),
                _ => unreachable!("same kinds"),
            }
        }
        assert_eq!(g.instance(7, 3).count(), 0);
        assert_eq!(g.instance(0, 0).count(), 10_007);
    }

    #[test]
    fn out_of_order_moves_times_back_within_the_bound() {
        let in_order = default_with(20_000);
        let g = generator(GeneratorConfig {
            count: Some(20_000),
            out_of_order_ms: 3,
            ..Default::default()
        });
        let mut max_seen = i64::MIN;
        let mut disorder = 0;
        for n in 0..20_000 {
            let (a, b) = (in_order.event(n), g.event(n));
            let shift = a.date_time() - b.date_time();
            assert!((0..3).contains(&shift));
            if b.date_time() < max_seen {
                disorder += 1;
                assert!(max_seen - b.date_time() < 3);
            }
            max_seen = max_seen.max(b.date_time());
            // Only the times move.
            let mut b = b;
            match (&a, &mut b) {
                (Event::Person(x), Event::Person(y)) => y.date_time = x.date_time,
                (Event::Auction(x), Event::Auction(y)) => {
                    assert_eq!(y.expires - y.date_time, x.expires - x.date_time);
                    y.date_time = x.date_time;
                    y.expires = x.expires;
                }
                (Event::Bid(x), Event::Bid(y)) => y.date_time = x.date_time,
                _ => unreachable!("same kinds"),
            }
            assert_eq!(a, b);
        }
        assert!(disorder > 1000, "{disorder}");
    }

    #[test]
    fn zero_rate_is_an_error() {
        assert_eq!(
            Generator::new(GeneratorConfig {
                rate: 0,
                ..Default::default()
            })
            .unwrap_err(),
            ConfigError::ZeroRate
        );
    }

    #[test]
    fn random_draws_are_uniform_and_in_range() {
        let mut rng = SplitMix64::for_event(mix64(0), 0);
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[rng.below(7) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(rng.below(0), 0);
        for _ in 0..1000 {
            let u = rng.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }
}
