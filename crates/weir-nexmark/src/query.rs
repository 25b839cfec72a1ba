//! The NEXMark queries Weir implements, by name, with their CSV headers.
//!
//! ```
//! use weir_nexmark::Query;
//!
//! let q: Query = "q5".parse()?;
//! assert_eq!(q.header(), "window_start,window_end,auction,num");
//! assert!("q6".parse::<Query>().unwrap_err().to_string().contains("q0, q1, q2, q3, q4, q5, q7, q8"));
//! # Ok::<(), weir_nexmark::query::UnknownQuery>(())
//! ```

use std::fmt;
use std::str::FromStr;

/// One of the NEXMark queries of the README (q6 is not part of it).
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
    /// Highest bid per tumbling window.
    Q7,
    /// New users: people who opened an auction in the window they registered in.
    Q8,
}

impl Query {
    /// Every query, in order.
    pub const ALL: [Query; 8] = [
        Query::Q0,
        Query::Q1,
        Query::Q2,
        Query::Q3,
        Query::Q4,
        Query::Q5,
        Query::Q7,
        Query::Q8,
    ];

    /// The name, `"q0"` to `"q8"`.
    pub const fn name(self) -> &'static str {
        match self {
            Query::Q0 => "q0",
            Query::Q1 => "q1",
            Query::Q2 => "q2",
            Query::Q3 => "q3",
            Query::Q4 => "q4",
            Query::Q5 => "q5",
            Query::Q7 => "q7",
            Query::Q8 => "q8",
        }
    }

    /// The CSV header of its output, exactly as in the README (no line terminator).
    pub const fn header(self) -> &'static str {
        match self {
            Query::Q0 | Query::Q1 => "auction,bidder,price,date_time",
            Query::Q2 => "auction,price",
            Query::Q3 => "name,city,state,id",
            Query::Q4 => "category,avg_price",
            Query::Q5 => "window_start,window_end,auction,num",
            Query::Q7 => "window_start,window_end,auction,bidder,price,date_time",
            Query::Q8 => "id,name,window_start",
        }
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A query name that is not one of [`Query::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown query {name:?}: expected one of q0, q1, q2, q3, q4, q5, q7, q8")]
pub struct UnknownQuery {
    /// The name given.
    pub name: String,
}

impl FromStr for Query {
    type Err = UnknownQuery;

    /// Parses `q0` ... `q8` (or `Q0` ... `Q8`).
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
        for bad in ["q6", "", "q", "q10", "5"] {
            assert!(bad.parse::<Query>().is_err(), "{bad}");
        }
    }
}
