//! Traversers: lazy, pull-based sequences a processor emits from step by step.
//!
//! A [`Traverser`] is Jet's `Traverser<T>`: `next()` yields items until it returns `None`.
//! Unlike an iterator it is meant to be *resumed*: [`emit_from_traverser`] pushes items into an
//! output port until the port refuses one, keeps that item, and the next call continues
//! exactly there.
//!
//! ```
//! use weir_core::{Outbox, traverser::{self, Traverser, Resumable, emit_from_traverser}};
//!
//! let (mut outbox, mut drains) = Outbox::for_test::<u32>(1, 2);
//! let mut t = Resumable::new(traverser::from_iter(1..=5u32).map(|x| x * 10).filter(|x| *x != 30));
//! assert!(!emit_from_traverser(outbox.port(0), &mut t)); // port full after two
//! assert_eq!(drains[0].drain(), [10, 20]);
//! assert!(emit_from_traverser(outbox.port(0), &mut t)); // resumed at 40, then exhausted
//! assert_eq!(drains[0].drain(), [40, 50]);
//! ```
//!
//! Combinators cost nothing beyond the closures they call: they are generic and inline.

use crate::item::Item;
use crate::outbox::OutPort;

/// A lazy sequence: each `next()` yields the next item, `None` when exhausted.
pub trait Traverser {
    /// The item type.
    type Item;

    /// The next item, or `None` when the traverser is exhausted.
    fn next(&mut self) -> Option<Self::Item>;

    /// Applies `f` to every item.
    fn map<R, F: FnMut(Self::Item) -> R>(self, f: F) -> Map<Self, F>
    where
        Self: Sized,
    {
        Map { inner: self, f }
    }

    /// Keeps the items for which `f` is true.
    fn filter<F: FnMut(&Self::Item) -> bool>(self, f: F) -> Filter<Self, F>
    where
        Self: Sized,
    {
        Filter { inner: self, f }
    }

    /// Replaces each item by the items of the traverser `f` returns for it.
    fn flat_map<U: Traverser, F: FnMut(Self::Item) -> U>(self, f: F) -> FlatMap<Self, U, F>
    where
        Self: Sized,
    {
        FlatMap {
            inner: self,
            current: None,
            f,
        }
    }

    /// Yields `item` after this traverser is exhausted.
    fn append(self, item: Self::Item) -> Append<Self>
    where
        Self: Sized,
    {
        Append {
            inner: self,
            last: Some(item),
        }
    }

    /// Runs `action` once, the first time this traverser returns `None`.
    fn on_first_null<F: FnOnce()>(self, action: F) -> OnFirstNull<Self, F>
    where
        Self: Sized,
    {
        OnFirstNull {
            inner: self,
            action: Some(action),
        }
    }

    /// Adapts the traverser into an [`Iterator`].
    fn into_iter(self) -> IntoIter<Self>
    where
        Self: Sized,
    {
        IntoIter(self)
    }
}

impl<T: Traverser + ?Sized> Traverser for Box<T> {
    type Item = T::Item;
    fn next(&mut self) -> Option<T::Item> {
        (**self).next()
    }
}

/// A traverser over any iterator.
pub fn from_iter<I: IntoIterator>(iter: I) -> FromIter<I::IntoIter> {
    FromIter(iter.into_iter())
}

/// A traverser that yields nothing.
pub fn empty<T>() -> FromIter<std::iter::Empty<T>> {
    FromIter(std::iter::empty())
}

/// A traverser that yields one item.
pub fn singleton<T>(item: T) -> FromIter<std::option::IntoIter<T>> {
    FromIter(Some(item).into_iter())
}

/// See [`from_iter`].
pub struct FromIter<I>(I);
impl<I: Iterator> Traverser for FromIter<I> {
    type Item = I::Item;
    #[inline]
    fn next(&mut self) -> Option<I::Item> {
        self.0.next()
    }
}

/// See [`Traverser::map`].
pub struct Map<T, F> {
    inner: T,
    f: F,
}
impl<T: Traverser, R, F: FnMut(T::Item) -> R> Traverser for Map<T, F> {
    type Item = R;
    #[inline]
    fn next(&mut self) -> Option<R> {
        self.inner.next().map(&mut self.f)
    }
}

/// See [`Traverser::filter`].
pub struct Filter<T, F> {
    inner: T,
    f: F,
}
impl<T: Traverser, F: FnMut(&T::Item) -> bool> Traverser for Filter<T, F> {
    type Item = T::Item;
    #[inline]
    fn next(&mut self) -> Option<T::Item> {
        loop {
            let item = self.inner.next()?;
            if (self.f)(&item) {
                return Some(item);
            }
        }
    }
}

/// See [`Traverser::flat_map`].
pub struct FlatMap<T, U, F> {
    inner: T,
    current: Option<U>,
    f: F,
}
impl<T: Traverser, U: Traverser, F: FnMut(T::Item) -> U> Traverser for FlatMap<T, U, F> {
    type Item = U::Item;
    #[inline]
    fn next(&mut self) -> Option<U::Item> {
        loop {
            if let Some(current) = &mut self.current {
                if let Some(item) = current.next() {
                    return Some(item);
                }
                self.current = None;
            }
            let outer = self.inner.next()?;
            self.current = Some((self.f)(outer));
        }
    }
}

/// See [`Traverser::append`].
pub struct Append<T: Traverser> {
    inner: T,
    last: Option<T::Item>,
}
impl<T: Traverser> Traverser for Append<T> {
    type Item = T::Item;
    #[inline]
    fn next(&mut self) -> Option<T::Item> {
        self.inner.next().or_else(|| self.last.take())
    }
}

/// See [`Traverser::on_first_null`].
pub struct OnFirstNull<T, F> {
    inner: T,
    action: Option<F>,
}
impl<T: Traverser, F: FnOnce()> Traverser for OnFirstNull<T, F> {
    type Item = T::Item;
    #[inline]
    fn next(&mut self) -> Option<T::Item> {
        let item = self.inner.next();
        if item.is_none()
            && let Some(action) = self.action.take()
        {
            action();
        }
        item
    }
}

/// See [`Traverser::into_iter`].
pub struct IntoIter<T>(T);
impl<T: Traverser> Iterator for IntoIter<T> {
    type Item = T::Item;
    #[inline]
    fn next(&mut self) -> Option<T::Item> {
        self.0.next()
    }
}

/// A traverser that can take back one item: what [`emit_from_traverser`] needs to resume at
/// the exact item a port refused.
pub struct Resumable<T: Traverser> {
    inner: T,
    pending: Option<T::Item>,
}

impl<T: Traverser> Resumable<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        Resumable {
            inner,
            pending: None,
        }
    }

    /// Puts `item` back; the next `next()` returns it.
    ///
    /// # Panics
    /// If an item is already waiting: only one can be put back.
    pub fn push_back(&mut self, item: T::Item) {
        assert!(
            self.pending.is_none(),
            "Resumable holds one pushed-back item at most"
        );
        self.pending = Some(item);
    }

    /// Whether an item was put back and waits.
    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
    }
}

impl<T: Traverser> Traverser for Resumable<T> {
    type Item = T::Item;
    #[inline]
    fn next(&mut self) -> Option<T::Item> {
        self.pending.take().or_else(|| self.inner.next())
    }
}

/// Emits items from `traverser` into `port` until the traverser is exhausted (returns true)
/// or the port refuses an item (returns false). The refused item is kept in the traverser, so
/// the next call resumes exactly there. Jet's `emitFromTraverser`.
pub fn emit_from_traverser<T: Item, Tr: Traverser<Item = T>>(
    port: &mut OutPort<T>,
    traverser: &mut Resumable<Tr>,
) -> bool {
    while let Some(item) = traverser.next() {
        if let Err(item) = port.offer(item) {
            traverser.push_back(item);
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn combinators() {
        let t = from_iter(vec![1, 2, 3])
            .flat_map(|x| from_iter(vec![x; x as usize]))
            .filter(|x| *x > 1)
            .map(|x| x * 10)
            .append(0);
        assert_eq!(t.into_iter().collect::<Vec<_>>(), [20, 20, 30, 30, 30, 0]);
    }

    #[test]
    fn on_first_null_runs_once() {
        let calls = Cell::new(0);
        let mut t = singleton(1).on_first_null(|| calls.set(calls.get() + 1));
        assert_eq!(t.next(), Some(1));
        assert_eq!(t.next(), None);
        assert_eq!(t.next(), None);
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn empty_is_empty() {
        assert_eq!(empty::<u8>().next(), None);
    }
}
