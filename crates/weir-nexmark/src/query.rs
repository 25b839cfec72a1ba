//! The NEXMark queries Weir implements, by name, with their CSV headers.
//!
//! ```
//! use weir_nexmark::Query;
//!
//! let q: Query = "q5".parse()?;
//! assert_eq!(q.header(), "window_start,window_end,auction,num");
//! assert_eq!("Q11".parse::<Query>()?.header(), "bidder,bid_count,window_start,window_end");
//! assert!("q13".parse::<Query>().unwrap_err().to_string().contains("q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11, q12"));
//! # Ok::<(), weir_nexmark::query::UnknownQuery>(())
//! ```

use std::fmt;
use std::str::FromStr;

/// One of the NEXMark queries (those of the Flink NEXMark suite, q0 to q12; see
/// `docs/nexmark.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Query {
    /// Pass every bid through.
    Q0,
    /// Bids with the price converted: `price * 0.908`.
    Q1,
    /// Bids with `auction % 123 == 0`.
    Q2,
    /// Category-10 auctions of sellers in OR, ID or CA, joined with the seller.
    Q3,
    /// Average winning price per category.
    Q4,
    /// Hot items: the auctions with the most bids per hopping window.
    Q5,
    /// Average selling price by seller: the average winning price of each seller's last 10
    /// closed auctions, at every close.
    Q6,
    /// Highest bid per tumbling window.
    Q7,
    /// New users: people who opened an auction in the window they registered in.
    Q8,
    /// Winning bids: each closed auction with its winning bid.
    Q9,
    /// Log to file system: every bid with its date and minute, partitioned by them.
    Q10,
    /// User sessions: bids per bidder per session (10 s inactivity gap).
    Q11,
    /// Processing-time windows: bids per bidder per 10 s of wall-clock time.
    Q12,
}

impl Query {
    /// Every query, in order.
    pub const ALL: [Query; 13] = [
        Query::Q0,
        Query::Q1,
        Query::Q2,
        Query::Q3,
        Query::Q4,
        Query::Q5,
        Query::Q6,
        Query::Q7,
        Query::Q8,
        Query::Q9,
        Query::Q10,
        Query::Q11,
        Query::Q12,
    ];

    /// The name, `"q0"` to `"q12"`.
    pub const fn name(self) -> &'static str {
        match self {
            Query::Q0 => "q0",
            Query::Q1 => "q1",
            Query::Q2 => "q2",
            Query::Q3 => "q3",
            Query::Q4 => "q4",
            Query::Q5 => "q5",
            Query::Q6 => "q6",
            Query::Q7 => "q7",
            Query::Q8 => "q8",
            Query::Q9 => "q9",
            Query::Q10 => "q10",
            Query::Q11 => "q11",
            Query::Q12 => "q12",
        }
    }

    /// The CSV header of its output (no line terminator), as `docs/nexmark.md` lists it.
    /// q10 written as a directory of partitions leaves out `dt` and `hm`, which the
    /// directory names hold: see [`crate::partitioned`].
    pub const fn header(self) -> &'static str {
        match self {
            Query::Q0 | Query::Q1 => "auction,bidder,price,date_time",
            Query::Q2 => "auction,price",
            Query::Q3 => "name,city,state,id",
            Query::Q4 => "category,avg_price",
            Query::Q5 => "window_start,window_end,auction,num",
            Query::Q6 => "seller,avg_price",
            Query::Q7 => "window_start,window_end,auction,bidder,price,date_time",
            Query::Q8 => "id,name,window_start",
            Query::Q9 => {
                "id,item_name,description,initial_bid,reserve,date_time,expires,seller,category,extra,auction,bidder,price,bid_date_time,bid_extra"
            }
            Query::Q10 => "auction,bidder,price,date_time,extra,dt,hm",
            Query::Q11 | Query::Q12 => "bidder,bid_count,window_start,window_end",
        }
    }
}

impl Query {
    /// Whether the query's windows are of processing (wall-clock) time, not event time: q12.
    /// Its events are stamped with the time they are read
    /// (`with_ingestion_timestamps`), so none is late, and its windows differ from run to
    /// run: only the bids per bidder summed over the windows can be checked.
    pub const fn in_processing_time(self) -> bool {
        matches!(self, Query::Q12)
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A query name that is not one of [`Query::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown query {name:?}: expected one of q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11, q12"
)]
pub struct UnknownQuery {
    /// The name given.
    pub name: String,
}

impl FromStr for Query {
    type Err = UnknownQuery;

    /// Parses `q0` ... `q12` (or `Q0` ... `Q12`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Query::ALL
            .into_iter()
            .find(|q| q.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownQuery { name: s.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for q in Query::ALL {
            assert_eq!(q.name().parse::<Query>().unwrap(), q);
            assert_eq!(q.to_string(), q.name());
        }
        assert_eq!("Q7".parse::<Query>().unwrap(), Query::Q7);
        assert_eq!("q10".parse::<Query>().unwrap(), Query::Q10);
        for bad in ["q13", "", "q", "q01", "5", "q-1"] {
            assert!(bad.parse::<Query>().is_err(), "{bad}");
        }
    }
}
