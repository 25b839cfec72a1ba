//! The tight yardstick for a JSON Lines file: the query's loop fed by every thread of the run,
//! as a good engineer writes it without an engine.
//!
//! The file is cut at fixed 1 MiB offsets; each chunk holds the lines that start in it. Every
//! thread (the caller and `threads - 1` helpers) claims the next chunk, `pread`s it into a
//! buffer it reuses, checks its UTF-8 once and parses each line fully (every key, every
//! string with its escapes, every number, as strictly as the engine) into a 40-byte
//! [`Record`] with only what q0, q5, q7 and q11 read, with a path written for the
//! generator's field order (strings stepped over by the engine's own string scanner, the
//! fastest this code base has) and the engine's parser for any other line. The caller folds the
//! records in file order into the query's state (the hand loops of `hand.rs`, so windows
//! fire and state is evicted as the watermark passes); when the chunk it needs next is still
//! being parsed by a helper, it parses a later one meanwhile, so no thread waits while there
//! is work. At most [`AHEAD`] chunks are parsed ahead of the fold.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::sync::Condvar;

use weir_nexmark::parse::string_end;

use super::*;

/// A chunk's size: where the file is cut (a chunk ends at the end of its last line).
const CHUNK: u64 = 1 << 20;
/// How many chunks may be parsed ahead of the one the fold takes next.
const AHEAD: usize = 8;
/// The page size reads are aligned to.
const PAGE: usize = 4096;

/// What the hand loops read of an event: its time, and a bid's auction, bidder and price.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    time: i64,
    auction: i64,
    bidder: i64,
    price: i64,
    is_bid: bool,
}

impl EventView for Record {
    #[inline]
    fn time(&self) -> i64 {
        self.time
    }
    #[inline]
    fn bid(&self) -> Option<(i64, i64, i64)> {
        self.is_bid
            .then_some((self.auction, self.bidder, self.price))
    }
}

/// Parsed chunks, and who does what next.
struct Claims {
    /// The first chunk no thread has claimed.
    next_unclaimed: usize,
    /// Chunks parsed and not yet folded: their records and malformed lines.
    ready: BTreeMap<usize, (Vec<Record>, u64)>,
    /// The chunk the fold takes next.
    next_folded: usize,
    /// Emptied record vectors, for the next chunks.
    spare: Vec<Vec<Record>>,
}

struct Shared {
    file: File,
    chunks: usize,
    size: u64,
    claims: Mutex<Claims>,
    changed: Condvar,
}

impl Shared {
    /// Claims the next chunk if it is within [`AHEAD`] of the fold.
    fn claim(&self, claims: &mut Claims) -> Option<usize> {
        let c = claims.next_unclaimed;
        (c < self.chunks && c <= claims.next_folded + AHEAD).then(|| {
            claims.next_unclaimed += 1;
            c
        })
    }
}

/// The records of a file in file order, parsed on `threads` threads.
pub(crate) struct TightFileRecords {
    shared: Arc<Shared>,
    /// The chunk being folded, and the next record of it.
    current: Vec<Record>,
    position: usize,
    buffer: Vec<u8>,
    helpers: Vec<std::thread::JoinHandle<()>>,
    pub(crate) malformed: u64,
}

impl TightFileRecords {
    pub(crate) fn open(path: &Path, threads: usize) -> Self {
        let file = File::open(path).expect("event file");
        let size = file.metadata().expect("event file").len();
        let shared = Arc::new(Shared {
            file,
            chunks: size.div_ceil(CHUNK) as usize,
            size,
            claims: Mutex::new(Claims {
                next_unclaimed: 0,
                ready: BTreeMap::new(),
                next_folded: 0,
                spare: Vec::new(),
            }),
            changed: Condvar::new(),
        });
        let helpers = (1..threads)
            .map(|_| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || helper(&shared))
            })
            .collect();
        TightFileRecords {
            shared,
            current: Vec::new(),
            position: 0,
            buffer: Vec::with_capacity(CHUNK as usize + 4096),
            helpers,
            malformed: 0,
        }
    }
}

/// A helper thread: claims, parses and hands in chunks until none is left.
fn helper(shared: &Shared) {
    let mut buffer = Vec::with_capacity(CHUNK as usize + 4096);
    let mut claims = shared.claims.lock().expect("claims");
    loop {
        if claims.next_unclaimed >= shared.chunks {
            return;
        }
        let Some(c) = shared.claim(&mut claims) else {
            claims = shared.changed.wait(claims).expect("claims");
            continue;
        };
        let mut records = claims.spare.pop().unwrap_or_default();
        drop(claims);
        let malformed = parse_chunk(shared, c, &mut buffer, &mut records);
        claims = shared.claims.lock().expect("claims");
        claims.ready.insert(c, (records, malformed));
        shared.changed.notify_all();
    }
}

impl Iterator for TightFileRecords {
    type Item = Record;

    #[inline]
    fn next(&mut self) -> Option<Record> {
        loop {
            if let Some(&r) = self.current.get(self.position) {
                self.position += 1;
                return Some(r);
            }
            let shared = Arc::clone(&self.shared);
            let mut claims = shared.claims.lock().expect("claims");
            let mut spent = std::mem::take(&mut self.current);
            spent.clear();
            claims.spare.push(spent);
            let want = claims.next_folded;
            if want >= shared.chunks {
                return None;
            }
            if let Some((records, malformed)) = claims.ready.remove(&want) {
                claims.next_folded += 1;
                shared.changed.notify_all();
                self.malformed += malformed;
                self.current = records;
                self.position = 0;
                continue;
            }
            // The chunk is not parsed yet: parse it if no one has claimed it, else a later
            // one while its helper finishes, else wait.
            match shared.claim(&mut claims) {
                Some(c) => {
                    let mut records = claims.spare.pop().unwrap_or_default();
                    drop(claims);
                    let malformed = parse_chunk(&shared, c, &mut self.buffer, &mut records);
                    let mut claims = shared.claims.lock().expect("claims");
                    claims.ready.insert(c, (records, malformed));
                }
                None => {
                    drop(shared.changed.wait(claims).expect("claims"));
                }
            }
        }
    }
}

impl Drop for TightFileRecords {
    fn drop(&mut self) {
        // Let the helpers end: nothing more will be folded.
        self.shared.claims.lock().expect("claims").next_unclaimed = self.shared.chunks;
        self.shared.changed.notify_all();
        for h in self.helpers.drain(..) {
            h.join().expect("helper");
        }
    }
}

/// Reads chunk `c` (the lines that start in it) into `buffer` and parses them into
/// `records`; returns how many lines were malformed.
fn parse_chunk(shared: &Shared, c: usize, buffer: &mut Vec<u8>, records: &mut Vec<Record>) -> u64 {
    let start = c as u64 * CHUNK;
    let end = (start + CHUNK).min(shared.size);
    // One byte before the chunk, to see whether a line starts at its first byte.
    let from = start.saturating_sub(1);
    let len = (end - from) as usize;
    // The bytes go at the same place in a page as in the file: a destination a few bytes
    // past the source's page offset makes the kernel's copy (`rep movsb`) several times
    // slower (4K aliasing). The buffer keeps its length, so only growth is zeroed.
    let room = PAGE + len + PAGE;
    if buffer.capacity() < room {
        buffer.reserve(room - buffer.len());
    }
    let pad = (from as usize).wrapping_sub(buffer.as_ptr() as usize) % PAGE;
    if buffer.len() < pad + len {
        buffer.resize(pad + len, 0);
    }
    shared
        .file
        .read_exact_at(&mut buffer[pad..pad + len], from)
        .expect("read event file");
    // The last line that starts in the chunk runs on to its newline.
    let mut filled = pad + len;
    let mut at = end;
    while buffer[filled - 1] != b'\n' && at < shared.size {
        let n = (PAGE as u64).min(shared.size - at) as usize;
        if buffer.len() < filled + n {
            buffer.resize(filled + n, 0);
        }
        shared
            .file
            .read_exact_at(&mut buffer[filled..filled + n], at)
            .expect("read event file");
        match memchr::memchr(b'\n', &buffer[filled..filled + n]) {
            Some(i) => filled += i + 1,
            None => filled += n,
        }
        at += n as u64;
    }
    let buffer = &buffer[pad..filled];
    let first = if start == 0 {
        0
    } else {
        match memchr::memchr(b'\n', buffer) {
            Some(i) => i + 1,
            None => return 0,
        }
    };
    // A line that starts after the chunk's end belongs to the next chunk.
    if (from + first as u64) >= end {
        return 0;
    }
    let lines = &buffer[first..];
    records.reserve(lines.len() / 200);
    let valid_utf8 = simdutf8::basic::from_utf8(lines).is_ok();
    let mut malformed = 0;
    let mut line_start = 0;
    let mut each = |line: &[u8]| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let parsed = match valid_utf8 {
            true => parse_ordered(line),
            false => None,
        };
        match parsed.or_else(|| parse_other(line)) {
            Some(r) => records.push(r),
            None => malformed += 1,
        }
    };
    for nl in memchr::memchr_iter(b'\n', lines) {
        each(&lines[line_start..nl]);
        line_start = nl + 1;
    }
    if line_start < lines.len() {
        each(&lines[line_start..]);
    }
    malformed
}

/// A line the generator's way does not read: through the engine's strict parser.
fn parse_other(line: &[u8]) -> Option<Record> {
    let e = parse_line_keeping(line, KeptStrings::NONE).ok()?;
    let (auction, bidder, price) = e.bid().unwrap_or_default();
    Some(Record {
        time: e.date_time(),
        auction,
        bidder,
        price,
        is_bid: matches!(e, Event::Bid(_)),
    })
}

/// A line in the generator's field order, read fully; `None` for anything else.
#[inline]
fn parse_ordered(line: &[u8]) -> Option<Record> {
    let mut c = Cursor { line, at: 0 };
    c.lit(br#"{"type":""#)?;
    let r = match *line.get(c.at)? {
        b'b' => {
            c.lit(br#"bid","auction":"#)?;
            let auction = c.int()?;
            c.lit(br#","bidder":"#)?;
            let bidder = c.int()?;
            c.lit(br#","price":"#)?;
            let price = c.int()?;
            c.lit(br#","channel":"#)?;
            c.string()?;
            c.lit(br#","url":"#)?;
            c.string()?;
            c.lit(br#","date_time":"#)?;
            let time = c.int()?;
            c.lit(br#","extra":"#)?;
            c.string()?;
            Record {
                time,
                auction,
                bidder,
                price,
                is_bid: true,
            }
        }
        b'p' => {
            c.lit(br#"person","id":"#)?;
            c.int()?;
            for key in [
                &br#","name":"#[..],
                br#","email_address":"#,
                br#","credit_card":"#,
                br#","city":"#,
                br#","state":"#,
            ] {
                c.lit(key)?;
                c.string()?;
            }
            c.lit(br#","date_time":"#)?;
            let time = c.int()?;
            c.lit(br#","extra":"#)?;
            c.string()?;
            Record {
                time,
                auction: 0,
                bidder: 0,
                price: 0,
                is_bid: false,
            }
        }
        b'a' => {
            c.lit(br#"auction","id":"#)?;
            c.int()?;
            c.lit(br#","item_name":"#)?;
            c.string()?;
            c.lit(br#","description":"#)?;
            c.string()?;
            c.lit(br#","initial_bid":"#)?;
            c.int()?;
            c.lit(br#","reserve":"#)?;
            c.int()?;
            c.lit(br#","date_time":"#)?;
            let time = c.int()?;
            for key in [&br#","expires":"#[..], br#","seller":"#, br#","category":"#] {
                c.lit(key)?;
                c.int()?;
            }
            c.lit(br#","extra":"#)?;
            c.string()?;
            Record {
                time,
                auction: 0,
                bidder: 0,
                price: 0,
                is_bid: false,
            }
        }
        _ => return None,
    };
    c.lit(b"}")?;
    (c.at == line.len()).then_some(r)
}

/// A place in a line.
struct Cursor<'a> {
    line: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn lit(&mut self, literal: &[u8]) -> Option<()> {
        let end = self.at + literal.len();
        (self.line.get(self.at..end)? == literal).then(|| self.at = end)
    }

    /// An integer as serde_json reads an `i64`: no leading zero, no fraction or exponent,
    /// not `-0`, within `-i64::MAX..=i64::MAX`.
    #[inline(always)]
    fn int(&mut self) -> Option<i64> {
        let negative = self.line.get(self.at) == Some(&b'-');
        let start = self.at + usize::from(negative);
        let digits = self.line[start.min(self.line.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        // 19 digits always fit in a `u64`; 20 never fit in an `i64`.
        if digits == 0 || digits > 19 || (digits > 1 && self.line[start] == b'0') {
            return None;
        }
        let end = start + digits;
        if let Some(b'.' | b'e' | b'E') = self.line.get(end) {
            return None;
        }
        let v = self.line[start..end]
            .iter()
            .fold(0u64, |v, &d| v * 10 + u64::from(d - b'0'));
        let v = i64::try_from(v).ok()?;
        if negative && v == 0 {
            return None;
        }
        self.at = end;
        Some(if negative { -v } else { v })
    }

    /// A string literal, skipped and checked as the engine's parser checks a string it does
    /// not keep (`parse::string_end`, the fastest way this code base has): no control
    /// character, valid escapes, `\u` surrogates in pairs. The bytes are UTF-8 (checked for
    /// the whole chunk).
    #[inline(always)]
    fn string(&mut self) -> Option<()> {
        self.at = string_end(self.line, self.at)?;
        Some(())
    }
}
