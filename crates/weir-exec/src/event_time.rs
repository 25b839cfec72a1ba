//! Event time: items with their timestamps, and the windows that cut a stream.
//!
//! These are the values that flow between the stream API (`weir::stream`) and the
//! processors that run it, so they live below both.
//!
//! ```
//! use weir::stream::{Timestamped, WindowDefinition};
//!
//! let click = Timestamped { timestamp: 1_500, item: "ann" };
//! assert_eq!(click.timestamp, 1_500);
//! assert_eq!(WindowDefinition::tumbling(1_000), WindowDefinition::Tumbling { size: 1_000 });
//! ```

use std::sync::Arc;

/// An item with its event time, in ms since the Unix epoch.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Timestamped<T> {
    /// The event time.
    pub timestamp: i64,
    /// The item.
    pub item: T,
}

/// A window's bounds: it holds times `start <= t < end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window {
    /// The first instant inside.
    pub start: i64,
    /// The first instant after.
    pub end: i64,
}

/// How a stream is cut into windows. Tumbling and sliding windows are aligned to the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowDefinition {
    /// Back-to-back windows `[k*size, (k+1)*size)`.
    Tumbling {
        /// Length in ms.
        size: i64,
    },
    /// Windows `[k*slide, k*slide + size)`: each item is in `size / slide` of them.
    Sliding {
        /// Length in ms.
        size: i64,
        /// Distance between window starts in ms; divides `size`.
        slide: i64,
    },
    /// Per key, a window that grows while items keep coming less than `gap` ms apart; it ends
    /// `gap` ms after its last item.
    Session {
        /// Inactivity that closes a session, in ms.
        gap: i64,
    },
    /// One window over all time, closed by the final watermark of a finite stream.
    Global,
}

impl WindowDefinition {
    /// Tumbling windows of `size` ms.
    ///
    /// # Panics
    /// If `size` is not positive.
    pub fn tumbling(size: i64) -> Self {
        assert!(size > 0, "a window size must be positive");
        WindowDefinition::Tumbling { size }
    }

    /// Sliding (hopping) windows of `size` ms every `slide` ms.
    ///
    /// # Panics
    /// If either is not positive, or `slide` does not divide `size`.
    pub fn sliding(size: i64, slide: i64) -> Self {
        assert!(
            size > 0 && slide > 0,
            "window size and slide must be positive"
        );
        assert!(size % slide == 0, "the slide must divide the window size");
        WindowDefinition::Sliding { size, slide }
    }

    /// Session windows closed by `gap` ms of inactivity per key.
    ///
    /// # Panics
    /// If `gap` is not positive.
    pub fn session(gap: i64) -> Self {
        assert!(gap > 0, "a session gap must be positive");
        WindowDefinition::Session { gap }
    }

    /// One window over the whole (finite) stream.
    pub fn global() -> Self {
        WindowDefinition::Global
    }
}

/// The result of a non-keyed window.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowResult<R> {
    /// The window's first instant.
    pub start: i64,
    /// The first instant after the window.
    pub end: i64,
    /// The aggregated value.
    pub value: R,
}

/// The result of a keyed window.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedWindowResult<K, R> {
    /// The window's first instant.
    pub start: i64,
    /// The first instant after the window.
    pub end: i64,
    /// The grouping key.
    pub key: K,
    /// The aggregated value.
    pub value: R,
}

/// Reads an item's event time.
pub type TimestampFn<T> = Arc<dyn Fn(&T) -> i64 + Send + Sync>;
