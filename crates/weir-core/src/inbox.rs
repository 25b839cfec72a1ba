//! The inbox: the batch of items a processor receives on one input ordinal.
//!
//! The tasklet fills an inbox from that ordinal's conveyors only when the processor has
//! emptied it. The processor takes items from the front and may stop at any point, for
//! example when its outbox is full; the rest stay in the inbox and are offered again on the
//! next call.
//!
//! ```
//! use weir_core::Inbox;
//!
//! let mut inbox = Inbox::of::<u32>();
//! inbox.items::<u32>().extend([1, 2, 3]);
//! let items = inbox.items::<u32>();
//! assert_eq!(items.pop_front(), Some(1));
//! assert_eq!(inbox.len(), 2); // the rest wait for the next call
//! ```
//!
//! The inbox is type-erased so that one processor can have inputs of different types;
//! [`Inbox::items`] recovers the typed queue with one `TypeId` comparison per call.

use std::any::{Any, type_name};
use std::collections::VecDeque;

use crate::item::Item;

/// A queue of some item type, with the operations the runtime needs without knowing it.
pub(crate) trait ErasedQueue: Send {
    fn len(&self) -> usize;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clear(&mut self);
}

impl<T: Item> ErasedQueue for VecDeque<T> {
    fn len(&self) -> usize {
        VecDeque::len(self)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clear(&mut self) {
        VecDeque::clear(self)
    }
}

/// A drainable batch of the items received on one input ordinal.
pub struct Inbox {
    queue: Box<dyn ErasedQueue>,
}

impl Inbox {
    pub(crate) fn from_queue(queue: Box<dyn ErasedQueue>) -> Self {
        Inbox { queue }
    }

    /// An empty inbox for items of type `T`.
    pub fn of<T: Item>() -> Self {
        Inbox::from_queue(Box::new(VecDeque::<T>::new()) as Box<dyn ErasedQueue>)
    }

    /// The items, as a typed queue. Take from the front; leave what you cannot handle yet.
    ///
    /// # Panics
    /// If `T` is not the item type declared for this input ordinal. The DAG checks declared
    /// types when it is wired, so this only fires when a processor uses a different type than
    /// its vertex declared: a bug in that processor.
    #[inline]
    pub fn items<T: Item>(&mut self) -> &mut VecDeque<T> {
        match self.queue.as_any_mut().downcast_mut::<VecDeque<T>>() {
            Some(q) => q,
            None => panic!(
                "inbox read as `{}`, which is not the item type declared for this input",
                type_name::<T>()
            ),
        }
    }

    /// How many items wait.
    #[inline]
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether the inbox is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queue.len() == 0
    }

    /// Drops every waiting item.
    pub fn clear(&mut self) {
        self.queue.clear()
    }
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").field("len", &self.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "not the item type declared")]
    fn wrong_type_is_a_clear_panic() {
        let mut inbox = Inbox::of::<u32>();
        inbox.items::<String>();
    }
}
