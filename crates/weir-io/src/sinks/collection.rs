//! An in-memory list as a sink: for tests and for small results read back by the caller.
//!
//! ```
//! use weir::prelude::*;
//!
//! let (sink, collected) = sinks::collection::list::<u64>();
//! let p = Pipeline::new();
//! p.read_from(sources::collection::items(1..=3u64)).map(|x| x * 2).write_to(sink);
//! p.run()?;
//! let mut out = collected.take();
//! out.sort();
//! assert_eq!(out, [2, 4, 6]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Snapshots
//!
//! A collection cannot take back what it delivered: in a job that takes snapshots, the
//! results produced after the last snapshot are delivered again after a restore
//! (at-least-once).

use std::sync::{Arc, Mutex, MutexGuard};

use weir_core::{BoxError, Item};

use super::{Sink, SinkWriter};

/// Creates a sink that collects its items into a list, and the handle to read the list.
///
/// The sink runs one instance per worker (parallelism `None`). Each instance keeps the order
/// it receives items in, but the instances' items interleave in the list in no set order:
/// sort the result, or give the stage before it a parallelism of 1, if order matters. The
/// list holds every item of the job in memory.
///
/// Cost: an instance buffers items and appends them to the shared list 1024 at a time and
/// at close, so the list's lock is taken once per 1024 items. Cooperative.
pub fn list<T: Item>() -> (Sink<T>, Collected<T>) {
    let collected = Collected {
        items: Arc::new(Mutex::new(Vec::new())),
    };
    let shared = collected.clone();
    let sink = Sink::new("list", None, move |_| ListWriter {
        buffer: Vec::new(),
        shared: shared.clone(),
    });
    (sink, collected)
}

/// Drops every item: for benchmarks and for jobs run for their side effects. The items are
/// still counted in each instance's `records_written` counter. Cooperative, any parallelism.
pub fn discard<T: Item>() -> Sink<T> {
    Sink::new("discard", None, |_: &weir_core::ProcessorContext| {
        Discard(std::marker::PhantomData)
    })
}

struct Discard<T>(std::marker::PhantomData<fn(T)>);

impl<T: Item> SinkWriter for Discard<T> {
    type Item = T;
    #[inline]
    fn write(&mut self, _item: T) -> Result<(), BoxError> {
        Ok(())
    }
}

/// The handle to the items a [`list`] sink collected. Cloning it shares the same list.
///
/// Items appear in batches while the job runs; all of them are there once it completed.
pub struct Collected<T> {
    items: Arc<Mutex<Vec<T>>>,
}

impl<T> Clone for Collected<T> {
    fn clone(&self) -> Self {
        Collected {
            items: Arc::clone(&self.items),
        }
    }
}

impl<T> std::fmt::Debug for Collected<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collected")
            .field("len", &self.len())
            .finish()
    }
}

impl<T> Collected<T> {
    /// Takes the items collected so far, leaving the list empty. Cost: one lock, no copy.
    pub fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.lock())
    }

    /// How many items the list holds now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the list holds no item now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Vec<T>> {
        // A panicking writer cannot leave the Vec half-updated: take what is there.
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How many items a writer buffers before it appends them to the shared list.
const BATCH: usize = 1024;

/// The writer behind [`list`].
struct ListWriter<T> {
    buffer: Vec<T>,
    shared: Collected<T>,
}

impl<T> ListWriter<T> {
    fn publish(&mut self) {
        if !self.buffer.is_empty() {
            self.shared.lock().append(&mut self.buffer);
        }
    }
}

impl<T: Item> SinkWriter for ListWriter<T> {
    type Item = T;

    #[inline]
    fn write(&mut self, item: T) -> Result<(), BoxError> {
        self.buffer.push(item);
        if self.buffer.len() >= BATCH {
            self.publish();
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.publish();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::files::testing::run;

    #[test]
    fn collects_every_instance_in_batches() {
        let (sink, collected) = list::<u32>();
        assert_eq!(sink.parallelism, None);
        let writer = |c: &Collected<u32>| ListWriter {
            buffer: Vec::new(),
            shared: c.clone(),
        };

        let mut w = writer(&collected);
        for i in 0..BATCH as u32 - 1 {
            w.write(i).unwrap();
        }
        assert!(
            collected.is_empty(),
            "nothing is published before a full batch"
        );
        w.write(0).unwrap();
        assert_eq!(collected.len(), BATCH);
        w.close().unwrap();

        run(writer(&collected), 0..10, 0, 2).unwrap();
        run(writer(&collected), 10..3000, 1, 2).unwrap();
        let mut all = collected.take();
        assert_eq!(all.len(), BATCH + 3000);
        assert!(collected.is_empty());
        all.drain(..BATCH);
        all.sort();
        assert_eq!(all, (0..3000).collect::<Vec<u32>>());
    }
}
