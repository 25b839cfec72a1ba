//! Items and their types.
//!
//! Items are plain typed Rust values. An edge carries one item type, checked once when the DAG
//! is wired ([`ItemType`](crate::ItemType) compares `TypeId`s), never per item. `Clone` is
//! required because a broadcast edge and [`Outbox::offer_to_all`](crate::Outbox::offer_to_all)
//! copy an item to several consumers; wrap large payloads in `Arc` to make that cheap.

/// What can travel along an edge: `Send + Clone + 'static`. Implemented for every such type.
pub trait Item: Send + Clone + 'static {}
impl<T: Send + Clone + 'static> Item for T {}
