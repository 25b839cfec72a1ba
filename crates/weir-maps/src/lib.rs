//! Partitioned maps with data affinity: named maps split over 271 partitions, each partition
//! owned by one thread (an owner thread, or an executor worker that runs the owner), and work
//! sent to where its key lives.
//!
//! ```
//! use weir_maps::{AffinityKey, MapService};
//!
//! let service = MapService::new(2);
//! let map = service.map::<AffinityKey, u64>("map").unwrap();
//! for i in 1..=5u64 {
//!     for j in 1..=5u64 {
//!         map.put(AffinityKey::new(format!("key{i}-{j}")), i * j).unwrap();
//!     }
//! }
//! // Every key1-* entry lives on the owner of "key1": sum them there, with no hop.
//! let m = map.clone();
//! let sum = service
//!     .execute_on_key_owner("key1", move |view| {
//!         view.entries(&m).unwrap().map(|(_, v)| *v).sum::<u64>()
//!     })
//!     .wait()
//!     .unwrap();
//! assert_eq!(sum, 15);
//! ```
//!
//! # Ownership
//!
//! The [`PartitionTable`] says which owner holds each partition; the owner is the only thread
//! that touches its partitions' data, so the data has no lock. Every call from another thread
//! is a message to the owner's queue (a crossbeam channel), answered through a [`Pending`].
//! Entry processors ([`PartitionedMap::execute_on_key`]) run on the owner with exclusive
//! access, so updates to one key never race. Partitions can be moved between owners while
//! calls run ([`MapService::move_partition`]); nothing is lost (see the module `service`).
//!
//! An owner runs in one of two ways, with the same handling of every message:
//!
//! - on a thread of its own: [`MapService::new`] starts one owner thread (`weir-owner-{i}`)
//!   per owner, which blocks on its queue;
//! - driven by a loop someone else runs: [`MapService::driven`] hands out one
//!   [`OwnerDriver`] per owner, to be polled ([`OwnerDriver::poll`] handles up to
//!   [`OWNER_POLL_BUDGET`] messages without blocking) and woken through a callback
//!   ([`OwnerDriver::set_waker`]) that every send calls after queueing. The `weir` crate
//!   runs the owners this way on its executor's workers (`weir::maps::on_executor`), owner
//!   `i` on worker `i`: the shard-per-core model. This crate knows nothing of that executor.
//!
//! # Partition keys
//!
//! Keys are routed by [`weir_partition`], the same function partitioned edges and grouping
//! keys use: a key's owner here is the instance a keyed pipeline stage sends it to.
//! [`PartitionAware`] keys ([`AffinityKey`], [`AtKey`] for `key@partitionKey`) co-locate
//! related entries of every map.
//!
//! # Calls from owner threads
//!
//! A blocking call made on an owner thread is **refused** with [`MapError::CalledFromOwner`]:
//! it could wait on a queue that only the waiting thread drains. An owner thread is an owner's
//! own thread, and a thread that polls an [`OwnerDriver`], from its first poll until the
//! driver is dropped: on an executor worker that runs an owner, the refusal covers the
//! worker's tasklets too, not only entry processors and tasks at a key owner. Read co-located
//! entries through the [`PartitionView`], which is local; elsewhere on such a thread use the
//! `_async` forms and poll the [`Pending`] ([`Pending::try_take`]) instead of waiting.

#![forbid(missing_docs)]

mod entry;
mod error;
mod map;
mod persist;
mod progress;
mod reply;
mod service;
mod store;
mod table;
mod view;

pub use entry::Entry;
pub use error::MapError;
pub use map::{MapKey, MapValue, PartitionedMap};
pub use persist::{MAP_FORMAT_VERSION, PersistStats, partition_file};
pub use reply::Pending;
pub(crate) use reply::Replier;
pub use service::{MapService, OWNER_POLL_BUDGET, OwnerDriver, OwnerPoll, OwnerTask};
pub use store::{Store, StoreIter};
pub use table::PartitionTable;
pub use view::PartitionView;
pub use weir_partition::{AffinityKey, AtKey, PartitionAware, PartitionKey, partition_aware_hash};
