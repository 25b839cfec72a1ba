//! An in-memory collection as a source: for tests, examples and small lookup tables.
//!
//! ```
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! p.read_from(sources::collection::items(vec![1u64, 2, 3]))
//!     .map(|x: u64| x * 10)
//!     .write_to(sinks::stdout::lines());
//! p.run()?;
//! # Ok::<(), weir::Error>(())
//! ```

use std::sync::{Arc, Mutex};

use weir_core::{BoxError, Item};

use super::{BatchSource, Emitter, SourceReader};

/// Creates a source that emits `items`, in order.
///
/// It runs as a single instance (parallelism `Some(1)`), so the order is kept. The source
/// keeps the collection, so a pipeline built on it can run more than once.
///
/// Cost: every item is cloned once per job run, when the instance is created; after that
/// items are moved out, at most 4096 per `read` call. The instance is cooperative.
pub fn items<T: Item>(items: impl IntoIterator<Item = T>) -> BatchSource<T> {
    BatchSource::new("items", Some(1), reader_factory(items))
}

/// A factory of readers that each emit a copy of `items`; shared with the stream form.
pub(crate) fn reader_factory<T: Item>(
    items: impl IntoIterator<Item = T>,
) -> impl Fn(&weir_core::ProcessorContext) -> ItemsReader<T> + Send + Sync + 'static {
    // A `Mutex` makes the collection `Sync` for the factory, which an `Item` need not be.
    let items = Arc::new(Mutex::new(items.into_iter().collect::<Vec<T>>()));
    move |_| {
        let items = items.lock().unwrap_or_else(|e| e.into_inner()).clone();
        ItemsReader {
            items: items.into_iter(),
            taken: 0,
        }
    }
}

/// How many items a reader emits per `read` call at most.
const STEP: usize = 4096;

/// The reader behind [`items`].
pub(crate) struct ItemsReader<T> {
    items: std::vec::IntoIter<T>,
    /// How many items were handed out: the position.
    taken: u64,
}

impl<T: Item> SourceReader for ItemsReader<T> {
    type Item = T;

    fn read(&mut self, out: &mut Emitter<'_, T>) -> Result<bool, BoxError> {
        for item in self.items.by_ref().take(STEP) {
            self.taken += 1;
            if !out.emit(item) {
                break;
            }
        }
        Ok(self.items.len() == 0)
    }

    /// How many items were handed out, 8 bytes.
    fn position(&self) -> Option<Vec<u8>> {
        Some(self.taken.to_le_bytes().to_vec())
    }

    /// Drops the items handed out before: the collection is the same in every run.
    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        let n = super::generator::decode_u64(position)?;
        let skip = n.saturating_sub(self.taken);
        if skip > self.items.len() as u64 {
            return Err(format!("position {n} is past the collection's end").into());
        }
        if skip > 0 {
            self.items.nth(skip as usize - 1);
        }
        self.taken = n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::files::testing::{run, run_throttled};

    fn reader(items: Vec<u32>) -> ItemsReader<u32> {
        ItemsReader {
            items: items.into_iter(),
            taken: 0,
        }
    }

    #[test]
    fn emits_all_items_in_order_in_bounded_steps() {
        let items: Vec<u32> = (0..10_000).collect();
        let mut r = reader(items.clone());
        let mut first = Vec::new();
        assert!(!r.read(&mut Emitter::unbounded(&mut first)).unwrap());
        assert_eq!(first.len(), STEP);
        assert_eq!(run(reader(items.clone()), 0, 1).0, items);
    }

    #[test]
    fn empty_collection_is_done_at_once() {
        assert!(run(reader(Vec::new()), 0, 1).0.is_empty());
    }

    #[test]
    fn backpressure_stops_and_resumes_without_loss() {
        let items: Vec<u32> = (0..10_000).collect();
        for k in [1, 2, 5, 4096, 5000] {
            assert_eq!(run_throttled(reader(items.clone()), k), items);
        }
    }

    #[test]
    fn source_runs_one_instance() {
        let source = items(vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(source.parallelism, Some(1));
        assert_eq!(source.name(), "items");
    }
}
