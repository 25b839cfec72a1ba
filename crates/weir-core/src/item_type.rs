//! The runtime's handle on an item type without the type: [`ItemType`] compares types when a
//! DAG is wired, and builds the typed conveyors, inboxes, ports and inbound streams of an
//! edge from erased parts.

use crate::conveyor::{self, Receiver, Sender};
use crate::inbound::{ConveyorStream, InboundStream};
use crate::inbox::{ErasedQueue, Inbox};
use crate::outbox::PartitionFn;
use crate::outbox::{ErasedPort, OutPort, PartitionRoute, Route};
use std::any::{Any, TypeId, type_name};
use std::collections::VecDeque;
use std::fmt;

use crate::item::Item;

/// The runtime description of an item type: its identity, its name for error messages, and
/// the monomorphised constructors the wiring code needs to build typed conveyors and inboxes
/// without knowing the type statically.
#[derive(Clone, Copy)]
pub struct ItemType {
    id: TypeId,
    name: &'static str,
    new_conveyor: fn(usize) -> (ErasedEnd, ErasedEnd),
    new_inbox: fn() -> Inbox,
    new_port: fn(Vec<ErasedEnd>, ErasedRoute, usize) -> Box<dyn ErasedPort>,
    new_inbound: fn(Vec<ErasedEnd>, usize, i32) -> Box<dyn InboundStream>,
}

/// An erased [`Sender<T>`] or [`Receiver<T>`].
pub(crate) type ErasedEnd = Box<dyn Any + Send>;

/// A port's routing before its item type is known.
pub(crate) enum ErasedRoute {
    RoundRobin,
    Broadcast,
    /// `partition_fn` holds a `PartitionFn<T>`; `owners[p]` is the target of partition `p`.
    Partitioned {
        partition_fn: std::sync::Arc<dyn Any + Send + Sync>,
        owners: std::sync::Arc<[u32]>,
    },
}

fn new_conveyor<T: Item>(capacity: usize) -> (Box<dyn Any + Send>, Box<dyn Any + Send>) {
    let (tx, rx) = conveyor::channel::<T>(capacity);
    (Box::new(tx), Box::new(rx))
}

fn new_port<T: Item>(
    senders: Vec<ErasedEnd>,
    route: ErasedRoute,
    batch_limit: usize,
) -> Box<dyn ErasedPort> {
    let senders: Vec<Sender<T>> = senders.into_iter().map(downcast_end).collect();
    let route = match route {
        ErasedRoute::RoundRobin => Route::RoundRobin,
        ErasedRoute::Broadcast => Route::Broadcast,
        ErasedRoute::Partitioned {
            partition_fn,
            owners,
        } => {
            let Some(partition_of) = partition_fn.downcast_ref::<PartitionFn<T>>() else {
                unreachable!("the partition function's type was validated with the DAG")
            };
            Route::Partitioned(PartitionRoute {
                partition_of: std::sync::Arc::clone(partition_of),
                owners,
            })
        }
    };
    Box::new(OutPort::new(senders, route, batch_limit))
}

fn new_inbound<T: Item>(
    receivers: Vec<ErasedEnd>,
    ordinal: usize,
    priority: i32,
) -> Box<dyn InboundStream> {
    let receivers: Vec<Receiver<T>> = receivers.into_iter().map(downcast_end).collect();
    Box::new(ConveyorStream::new(receivers, ordinal, priority))
}

fn new_inbox<T: Item>() -> Inbox {
    Inbox::from_queue(Box::new(VecDeque::<T>::new()) as Box<dyn ErasedQueue>)
}

impl ItemType {
    /// The description of `T`.
    pub fn of<T: Item>() -> Self {
        ItemType {
            id: TypeId::of::<T>(),
            name: type_name::<T>(),
            new_conveyor: new_conveyor::<T>,
            new_inbox: new_inbox::<T>,
            new_port: new_port::<T>,
            new_inbound: new_inbound::<T>,
        }
    }

    /// The type's name, as `std::any::type_name` gives it.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether this describes `T`.
    pub fn is<T: 'static>(&self) -> bool {
        self.id == TypeId::of::<T>()
    }

    /// A conveyor for this type, as an erased ([`Sender<T>`], [`Receiver<T>`]) pair.
    pub(crate) fn conveyor(&self, capacity: usize) -> (Box<dyn Any + Send>, Box<dyn Any + Send>) {
        (self.new_conveyor)(capacity)
    }

    /// An empty inbox for this type.
    pub(crate) fn inbox(&self) -> Inbox {
        (self.new_inbox)()
    }

    /// An output port over erased senders of this type.
    pub(crate) fn port(
        &self,
        senders: Vec<ErasedEnd>,
        route: ErasedRoute,
        batch_limit: usize,
    ) -> Box<dyn ErasedPort> {
        (self.new_port)(senders, route, batch_limit)
    }

    /// An inbound stream over erased receivers of this type.
    pub(crate) fn inbound(
        &self,
        receivers: Vec<ErasedEnd>,
        ordinal: usize,
        priority: i32,
    ) -> Box<dyn InboundStream> {
        (self.new_inbound)(receivers, ordinal, priority)
    }
}

impl PartialEq for ItemType {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for ItemType {}

impl fmt::Debug for ItemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl fmt::Display for ItemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Downcasts an erased conveyor end. Only called by wiring code after the DAG's types were
/// checked, so a mismatch is a bug in the runtime, not in user code.
pub(crate) fn downcast_end<E: 'static>(end: Box<dyn Any + Send>) -> E {
    match end.downcast::<E>() {
        Ok(e) => *e,
        Err(_) => unreachable!(
            "conveyor end is not a {}: the DAG's types were validated before wiring",
            type_name::<E>()
        ),
    }
}
