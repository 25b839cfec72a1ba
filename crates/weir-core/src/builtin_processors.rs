//! Small built-in processors: an iterator source, map and filter, and collecting or counting
//! sinks. They serve tests, benchmarks and examples of the processor contract; the processors
//! that pipelines run (the `weir-exec` crate) are fused chains on the same contract.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::ProcessorResult;
use crate::inbox::Inbox;
use crate::item::Item;
use crate::outbox::Outbox;
use crate::processor::{Processor, ProcessorContext};

/// Emits every item of an iterator on output 0, then finishes.
///
/// Every instance emits its own iterator: build it from the [`ProcessorContext`] to split
/// work between instances.
pub struct IterSource<I: Iterator> {
    iter: I,
    pending: Option<I::Item>,
}

impl<I: Iterator> IterSource<I> {
    /// A source over `iter`.
    pub fn new(iter: impl IntoIterator<IntoIter = I>) -> Self {
        IterSource {
            iter: iter.into_iter(),
            pending: None,
        }
    }
}

impl<I> Processor for IterSource<I>
where
    I: Iterator + Send + 'static,
    I::Item: Item,
{
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let port = outbox.port::<I::Item>(0);
        while let Some(item) = self.pending.take().or_else(|| self.iter.next()) {
            if let Err(item) = port.offer(item) {
                self.pending = Some(item);
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Applies a function to every item of input 0 and emits the result on output 0.
pub struct MapP<T, R, F> {
    f: F,
    pending: Option<R>,
    _types: PhantomData<fn(T) -> R>,
}

impl<T, R, F: FnMut(T) -> R> MapP<T, R, F> {
    /// A map processor.
    pub fn new(f: F) -> Self {
        MapP {
            f,
            pending: None,
            _types: PhantomData,
        }
    }
}

impl<T: Item, R: Item, F: FnMut(T) -> R + Send + 'static> Processor for MapP<T, R, F> {
    /// Moved by input alone.
    fn next_call(&self) -> crate::NextCall {
        crate::NextCall::OnWake
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<T>();
        let port = outbox.port::<R>(0);
        loop {
            let out = match self.pending.take() {
                Some(r) => r,
                None => match items.pop_front() {
                    Some(t) => (self.f)(t),
                    None => return Ok(()),
                },
            };
            if let Err(out) = port.offer(out) {
                self.pending = Some(out);
                return Ok(());
            }
        }
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        match self.pending.take() {
            Some(r) => match outbox.port::<R>(0).offer(r) {
                Ok(()) => Ok(true),
                Err(r) => {
                    self.pending = Some(r);
                    Ok(false)
                }
            },
            None => Ok(true),
        }
    }
}

/// Emits the items of input 0 for which a predicate holds.
pub struct FilterP<T, F> {
    f: F,
    _types: PhantomData<fn(T)>,
}

impl<T, F: FnMut(&T) -> bool> FilterP<T, F> {
    /// A filter processor.
    pub fn new(f: F) -> Self {
        FilterP {
            f,
            _types: PhantomData,
        }
    }
}

impl<T: Item, F: FnMut(&T) -> bool + Send + 'static> Processor for FilterP<T, F> {
    /// Moved by input alone.
    fn next_call(&self) -> crate::NextCall {
        crate::NextCall::OnWake
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<T>();
        let port = outbox.port::<T>(0);
        while let Some(item) = items.front() {
            if (self.f)(item) {
                if !port.has_room() {
                    return Ok(());
                }
                let item = items.pop_front().expect("front exists");
                if port.offer(item).is_err() {
                    unreachable!("the port had room");
                }
            } else {
                items.pop_front();
            }
        }
        Ok(())
    }
}

/// Collects every item it receives into a shared `Vec`.
pub struct CollectSink<T> {
    target: Arc<Mutex<Vec<T>>>,
}

impl<T: Item> CollectSink<T> {
    /// A supplier whose instances all append to the returned `Vec`. Takes the lock once per
    /// inbox batch.
    #[allow(clippy::type_complexity)] // the supplier is an unnameable closure
    pub fn supplier() -> (
        impl Fn(&ProcessorContext) -> CollectSink<T> + Send + Sync + 'static,
        Arc<Mutex<Vec<T>>>,
    ) {
        let target = Arc::new(Mutex::new(Vec::new()));
        let handle = Arc::clone(&target);
        (
            move |_: &ProcessorContext| CollectSink {
                target: Arc::clone(&target),
            },
            handle,
        )
    }
}

impl<T: Item> Processor for CollectSink<T> {
    /// Moved by input alone.
    fn next_call(&self) -> crate::NextCall {
        crate::NextCall::OnWake
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let mut target = self.target.lock().unwrap_or_else(|e| e.into_inner());
        target.extend(inbox.items::<T>().drain(..));
        Ok(())
    }
}

/// Counts and drops every item it receives.
pub struct CountSink<T> {
    count: Arc<AtomicU64>,
    _types: PhantomData<fn(T)>,
}

impl<T: Item> CountSink<T> {
    /// A supplier whose instances all add to the returned counter, once per batch.
    #[allow(clippy::type_complexity)] // the supplier is an unnameable closure
    pub fn supplier() -> (
        impl Fn(&ProcessorContext) -> CountSink<T> + Send + Sync + 'static,
        Arc<AtomicU64>,
    ) {
        let count = Arc::new(AtomicU64::new(0));
        let handle = Arc::clone(&count);
        (
            move |_: &ProcessorContext| CountSink {
                count: Arc::clone(&count),
                _types: PhantomData,
            },
            handle,
        )
    }
}

impl<T: Item> Processor for CountSink<T> {
    /// Moved by input alone.
    fn next_call(&self) -> crate::NextCall {
        crate::NextCall::OnWake
    }

    fn process(
        &mut self,
        _ordinal: usize,
        inbox: &mut Inbox,
        _outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        let items = inbox.items::<T>();
        self.count.fetch_add(items.len() as u64, Ordering::Relaxed);
        items.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::verify_processor;

    #[test]
    fn iter_source() {
        verify_processor(|_| IterSource::new(0..10u32)).expect_output((0..10u32).collect());
    }

    #[test]
    fn map() {
        verify_processor(|_| MapP::new(|x: u32| x + 1))
            .input((0..100u32).collect())
            .expect_output((1..101u32).collect());
    }

    #[test]
    fn filter() {
        verify_processor(|_| FilterP::new(|x: &u32| x.is_multiple_of(3)))
            .input((0..30u32).collect())
            .expect_output((0..30u32).filter(|x| x.is_multiple_of(3)).collect());
    }

    #[test]
    fn collect_sink() {
        let (supplier, target) = CollectSink::<u32>::supplier();
        verify_processor(supplier)
            .input((0..10u32).collect())
            .expect_output::<()>(vec![]);
        // Four runs of the harness, each collecting all ten.
        assert_eq!(target.lock().unwrap().len(), 40);
    }

    #[test]
    fn count_sink() {
        let (supplier, count) = CountSink::<u32>::supplier();
        verify_processor(supplier)
            .input((0..10u32).collect())
            .expect_output::<()>(vec![]);
        assert_eq!(count.load(Ordering::Relaxed), 40);
    }
}
