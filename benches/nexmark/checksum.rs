//! Row checksums: what the checking sink and the hand loops compute, and how results compare.

use super::*;

/// SplitMix64's output function: a fixed, well-mixing permutation of 64 bits.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stable hash of a row's fields in order, the same in every process and on every run.
pub(crate) struct RowHasher(u64);

impl RowHasher {
    /// Starts a hash; `tag` tells the row types apart.
    #[inline]
    pub(crate) fn new(tag: u64) -> Self {
        RowHasher(mix64(tag))
    }

    #[inline]
    pub(crate) fn int(self, v: i64) -> Self {
        RowHasher(mix64(self.0.rotate_left(23) ^ v as u64))
    }

    #[inline]
    pub(crate) fn float(self, v: f64) -> Self {
        self.int(v.to_bits() as i64)
    }

    pub(crate) fn text(mut self, s: &str) -> Self {
        let bytes = s.as_bytes();
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self = self.int(i64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.int(i64::from_le_bytes(last)).int(bytes.len() as i64)
    }

    #[inline]
    pub(crate) fn finish(self) -> u64 {
        self.0
    }
}

/// What the checking sink and the hand loops hash: a query's row, or an event.
pub(crate) trait RowHash {
    fn row_hash(&self) -> u64;
}

impl RowHash for Q0Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(0)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .int(self.date_time)
            .finish()
    }
}

impl RowHash for Q1Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(1)
            .int(self.auction)
            .int(self.bidder)
            .float(self.price)
            .int(self.date_time)
            .finish()
    }
}

impl RowHash for Q2Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(2).int(self.auction).int(self.price).finish()
    }
}

impl RowHash for Q3Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(3)
            .text(&self.name)
            .text(&self.city)
            .text(&self.state)
            .int(self.id)
            .finish()
    }
}

impl RowHash for Q4Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(4)
            .int(self.category)
            .float(self.avg_price)
            .finish()
    }
}

impl RowHash for Q5Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(5)
            .int(self.window_start)
            .int(self.window_end)
            .int(self.auction)
            .int(self.num as i64)
            .finish()
    }
}

impl RowHash for Q7Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(7)
            .int(self.window_start)
            .int(self.window_end)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .int(self.date_time)
            .finish()
    }
}

impl RowHash for Q8Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(8)
            .int(self.id)
            .text(&self.name)
            .int(self.window_start)
            .finish()
    }
}

impl RowHash for Q6Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(6)
            .int(self.seller)
            .float(self.avg_price)
            .finish()
    }
}

impl RowHash for Q9Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(9)
            .int(self.id)
            .text(&self.item_name)
            .text(&self.description)
            .int(self.initial_bid)
            .int(self.reserve)
            .int(self.date_time)
            .int(self.expires)
            .int(self.seller)
            .int(self.category)
            .text(&self.extra)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .int(self.bid_date_time)
            .text(&self.bid_extra)
            .finish()
    }
}

impl RowHash for Q10Row {
    fn row_hash(&self) -> u64 {
        RowHasher::new(13)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .int(self.date_time)
            .text(&self.extra)
            .text(&self.dt)
            .text(&self.hm)
            .finish()
    }
}

impl RowHash for Q11Row {
    #[inline]
    fn row_hash(&self) -> u64 {
        RowHasher::new(14)
            .int(self.bidder)
            .int(self.bid_count as i64)
            .int(self.window_start)
            .int(self.window_end)
            .finish()
    }
}

/// Events, for the source-only runs: their type, time and main ids.
impl RowHash for Event {
    #[inline]
    fn row_hash(&self) -> u64 {
        match self {
            Event::Person(p) => RowHasher::new(10).int(p.id).int(p.date_time),
            Event::Auction(a) => RowHasher::new(11).int(a.id).int(a.seller).int(a.date_time),
            Event::Bid(b) => RowHasher::new(12)
                .int(b.auction)
                .int(b.bidder)
                .int(b.price)
                .int(b.date_time),
        }
        .finish()
    }
}

/// A row count and the wrapping sum of the rows' hashes: equal for equal multisets of rows,
/// whatever their order or the instance that saw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Checksum {
    pub(crate) rows: u64,
    pub(crate) sum: u64,
}

impl Checksum {
    #[inline]
    pub(crate) fn add(&mut self, row: &impl RowHash) {
        self.rows += 1;
        self.sum = self.sum.wrapping_add(row.row_hash());
    }

    pub(crate) fn merge(&mut self, other: Checksum) {
        self.rows += other.rows;
        self.sum = self.sum.wrapping_add(other.sum);
    }

    pub(crate) fn of<R: RowHash>(rows: &[R]) -> Checksum {
        let mut c = Checksum::default();
        for r in rows {
            c.add(r);
        }
        c
    }

    pub(crate) fn to_line(self) -> String {
        format!("{} {:016x}", self.rows, self.sum)
    }

    pub(crate) fn from_line(line: &str) -> Option<Checksum> {
        let mut parts = line.split_whitespace();
        let rows = parts.next()?.parse().ok()?;
        let sum = u64::from_str_radix(parts.next()?, 16).ok()?;
        Some(Checksum { rows, sum })
    }
}

impl std::fmt::Display for Checksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} rows, checksum {:016x}", self.rows, self.sum)
    }
}

/// The sink of every Weir run: takes the query's real rows and checksums them; each instance
/// adds its checksum to the shared one at close.
pub(crate) struct ChecksumSink<R> {
    pub(crate) local: Checksum,
    pub(crate) shared: Arc<Mutex<Checksum>>,
    pub(crate) row: PhantomData<fn(R)>,
}

impl<R: RowHash + Item> SinkWriter for ChecksumSink<R> {
    type Item = R;

    #[inline]
    fn write(&mut self, row: R) -> Result<(), BoxError> {
        self.local.add(&row);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.shared.lock().expect("checksum lock").merge(self.local);
        Ok(())
    }
}

pub(crate) fn checksum_sink<R: RowHash + Item>(shared: &Arc<Mutex<Checksum>>) -> Sink<R> {
    let shared = Arc::clone(shared);
    Sink::new("checksum", None, move |_| ChecksumSink {
        local: Checksum::default(),
        shared: Arc::clone(&shared),
        row: PhantomData,
    })
}

/// What a run reads: `None` for the source alone, or a query.
pub(crate) fn what_name(query: Option<Query>) -> &'static str {
    query.map_or("source", Query::name)
}

pub(crate) fn parse_what(name: &str) -> Option<Query> {
    (name != "source").then(|| name.parse().expect("a query name or `source`"))
}
