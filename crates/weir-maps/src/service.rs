//! The owner threads and the registry of named maps.

use std::any::{Any, TypeId};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use rustc_hash::FxHashMap;
use weir_partition::{PartitionAware, PartitionKey, Partitioner};

use crate::map::{MapKey, MapValue, PartitionedMap, Store};
use crate::reply::{Pending, reply_pair};
use crate::table::PartitionTable;
use crate::view::PartitionView;
use crate::{MapError, Replier};

thread_local! {
    /// The owner index of the current thread, when it is an owner thread.
    static OWNER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The owner index of the calling thread, if it is an owner thread of any map service.
pub(crate) fn current_owner() -> Option<usize> {
    OWNER.with(Cell::get)
}

/// Work that runs on a partition's owner with that partition's data.
pub(crate) type Op = Box<dyn FnOnce(&mut PartitionData) + Send>;

/// Work for many partitions of one owner, sent as one message.
pub(crate) trait BatchOp: Send {
    /// Runs on the owner. Items of partitions the owner no longer holds go through
    /// [`OwnerState::route`].
    fn run(self: Box<Self>, owner: &mut OwnerState);
}

pub(crate) enum Msg {
    Op {
        partition: u32,
        op: Op,
    },
    Batch(Box<dyn BatchOp>),
    Migrate {
        partition: u32,
        to: usize,
        done: Replier<u64>,
    },
    Adopt {
        partition: u32,
        data: PartitionData,
    },
    Stop,
}

/// One partition's data: a store per map, indexed by map id.
#[derive(Default)]
pub(crate) struct PartitionData {
    stores: Vec<Option<Box<dyn Any + Send>>>,
}

impl PartitionData {
    /// The store of map `id`, created empty on first use.
    #[inline]
    pub(crate) fn store<K: MapKey, V: MapValue>(&mut self, id: u32) -> &mut Arc<Store<K, V>> {
        let id = id as usize;
        if self.stores.len() <= id {
            self.stores.resize_with(id + 1, || None);
        }
        self.stores[id]
            .get_or_insert_with(|| Box::new(Arc::new(Store::<K, V>::default())))
            .downcast_mut::<Arc<Store<K, V>>>()
            .expect("a map id is registered with one key and value type")
    }

    /// The store of map `id`, if anything was ever written to it here.
    #[inline]
    pub(crate) fn store_ref<K: MapKey, V: MapValue>(&self, id: u32) -> Option<&Arc<Store<K, V>>> {
        self.stores
            .get(id as usize)?
            .as_ref()?
            .downcast_ref::<Arc<Store<K, V>>>()
    }
}

struct MapInfo {
    id: u32,
    type_id: TypeId,
    type_name: &'static str,
}

static NEXT_SERVICE: AtomicUsize = AtomicUsize::new(1);

/// What the owners and every handle share.
pub(crate) struct Shared {
    pub(crate) service_id: usize,
    pub(crate) table: PartitionTable,
    senders: Vec<Sender<Msg>>,
    registry: Mutex<FxHashMap<String, MapInfo>>,
    next_map: AtomicU32,
    shut_down: AtomicBool,
}

impl Shared {
    /// Sends `op` to the owner of `partition`.
    pub(crate) fn send_op(&self, partition: u32, op: Op) -> Result<(), MapError> {
        let owner = self.table.owner_of_partition(partition);
        self.senders[owner]
            .send(Msg::Op { partition, op })
            .map_err(|_| MapError::ShutDown)
    }

    /// Sends a batch to `owner`.
    pub(crate) fn send_batch(&self, owner: usize, batch: Box<dyn BatchOp>) -> Result<(), MapError> {
        self.senders[owner]
            .send(Msg::Batch(batch))
            .map_err(|_| MapError::ShutDown)
    }
}

/// The owner threads: stopped and joined when the last handle goes.
pub(crate) struct Threads {
    shared: Arc<Shared>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.shared.shut_down.store(true, Ordering::Release);
        for s in &self.shared.senders {
            let _ = s.send(Msg::Stop);
        }
        let me = std::thread::current().id();
        for h in self
            .handles
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            // The last handle may be dropped by a task on an owner thread: it cannot join itself.
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

/// A task that runs at the owner of its own partition key: Hazelcast's partition-aware
/// `Callable`. Submit it with [`MapService::submit`].
pub trait OwnerTask: PartitionAware + Send + 'static {
    /// What the task returns.
    type Output: Send + 'static;

    /// Runs on the owner thread, with local access to every map's entries in the partition.
    fn run(self, view: &mut PartitionView<'_>) -> Self::Output;
}

/// The partition owners of one process and the named maps they hold.
///
/// Each owner is a worker thread (`weir-owner-{i}`) with a queue; it alone touches the data of
/// the partitions it owns, so that data has no lock. A call from any other thread is a
/// message to the owner's queue; the owner runs it and answers through a [`Pending`].
///
/// ```
/// use weir_maps::MapService;
///
/// let service = MapService::new(2);
/// let orders = service.map::<String, u64>("orders").unwrap();
/// orders.put("o-1".to_string(), 10).unwrap();
/// assert_eq!(orders.get(&"o-1".to_string()).unwrap(), Some(10));
/// ```
///
/// Cheap to clone. The owner threads stop when the service and every map handle are dropped.
#[derive(Clone)]
pub struct MapService {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the owner threads alive while any handle exists.
    _threads: Arc<Threads>,
}

impl std::fmt::Debug for MapService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapService")
            .field("owners", &self.shared.table.owner_count())
            .field("table_version", &self.shared.table.version())
            .finish()
    }
}

impl MapService {
    /// Starts `owners` owner threads over the default 271 partitions.
    ///
    /// # Panics
    /// If `owners` is zero or a thread cannot be started.
    pub fn new(owners: usize) -> Self {
        Self::with_partitioner(Partitioner::default(), owners)
    }

    /// One owner per core.
    pub fn with_default_owners() -> Self {
        Self::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Starts `owners` owner threads over `partitioner`'s partitions.
    ///
    /// # Panics
    /// If `owners` is zero or a thread cannot be started.
    pub fn with_partitioner(partitioner: Partitioner, owners: usize) -> Self {
        assert!(owners > 0, "a map service needs at least one owner");
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..owners).map(|_| crossbeam_channel::unbounded()).unzip();
        let shared = Arc::new(Shared {
            service_id: NEXT_SERVICE.fetch_add(1, Ordering::Relaxed),
            table: PartitionTable::new(partitioner, owners),
            senders,
            registry: Mutex::default(),
            next_map: AtomicU32::new(0),
            shut_down: AtomicBool::new(false),
        });
        let handles = receivers
            .into_iter()
            .enumerate()
            .map(|(me, rx)| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("weir-owner-{me}"))
                    .spawn(move || owner_loop(me, shared, rx))
                    .expect("an owner thread starts")
            })
            .collect();
        let threads = Arc::new(Threads {
            shared: Arc::clone(&shared),
            handles: Mutex::new(handles),
        });
        MapService {
            shared,
            _threads: threads,
        }
    }

    /// The map named `name`, created empty if it does not exist yet.
    ///
    /// # Errors
    /// [`MapError::TypeMismatch`] when a map of that name holds other types.
    pub fn map<K: MapKey, V: MapValue>(
        &self,
        name: &str,
    ) -> Result<PartitionedMap<K, V>, MapError> {
        self.lookup::<K, V>(name, true)
    }

    /// The existing map named `name`.
    ///
    /// # Errors
    /// [`MapError::UnknownMap`] when there is none; [`MapError::TypeMismatch`].
    pub fn existing_map<K: MapKey, V: MapValue>(
        &self,
        name: &str,
    ) -> Result<PartitionedMap<K, V>, MapError> {
        self.lookup::<K, V>(name, false)
    }

    fn lookup<K: MapKey, V: MapValue>(
        &self,
        name: &str,
        create: bool,
    ) -> Result<PartitionedMap<K, V>, MapError> {
        let mut registry = self
            .shared
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let type_id = TypeId::of::<Store<K, V>>();
        let type_name = std::any::type_name::<(K, V)>();
        let id = match registry.get(name) {
            Some(info) if info.type_id == type_id => info.id,
            Some(info) => {
                return Err(MapError::TypeMismatch {
                    name: name.to_string(),
                    existing: info.type_name,
                    requested: type_name,
                });
            }
            None if create => {
                let id = self.shared.next_map.fetch_add(1, Ordering::Relaxed);
                registry.insert(
                    name.to_string(),
                    MapInfo {
                        id,
                        type_id,
                        type_name,
                    },
                );
                id
            }
            None => return Err(MapError::UnknownMap(name.to_string())),
        };
        Ok(PartitionedMap::new(self.clone(), name, id))
    }

    /// The names of the maps created so far, sorted.
    pub fn map_names(&self) -> Vec<String> {
        let registry = self
            .shared
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = registry.keys().cloned().collect();
        names.sort();
        names
    }

    /// The partition table.
    pub fn table(&self) -> &PartitionTable {
        &self.shared.table
    }

    /// The partition of `key`: the same function partitioned edges and grouping keys use.
    #[inline]
    pub fn partition_of<Q: PartitionKey + ?Sized>(&self, key: &Q) -> u32 {
        self.shared.table.partitioner().partition_of(key)
    }

    /// The owner of `key`'s partition now.
    pub fn owner_of<Q: PartitionKey + ?Sized>(&self, key: &Q) -> usize {
        self.shared.table.owner_of_partition(self.partition_of(key))
    }

    /// Runs `task` on the owner of `key`'s partition (Hazelcast's `executeOnKeyOwner`), with
    /// local access to every map's entries in that partition through the [`PartitionView`].
    ///
    /// Cost: one message to the owner's queue and one answer.
    pub fn execute_on_key_owner<Q, R, F>(&self, key: &Q, task: F) -> Pending<R>
    where
        Q: PartitionKey + ?Sized,
        R: Send + 'static,
        F: FnOnce(&mut PartitionView<'_>) -> R + Send + 'static,
    {
        let partition = self.partition_of(key);
        self.execute_on_partition(partition, task)
    }

    /// Runs a partition-aware task at the owner of its own partition key.
    pub fn submit<T: OwnerTask>(&self, task: T) -> Pending<T::Output> {
        let partition = self
            .shared
            .table
            .partitioner()
            .partition_of(task.partition_key());
        self.execute_on_partition(partition, move |view| task.run(view))
    }

    pub(crate) fn execute_on_partition<R, F>(&self, partition: u32, task: F) -> Pending<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut PartitionView<'_>) -> R + Send + 'static,
    {
        let (replier, pending) = reply_pair();
        let service_id = self.shared.service_id;
        let op: Op = Box::new(move |data| {
            let mut view = PartitionView::new(service_id, partition, data);
            replier.send(Ok(task(&mut view)));
        });
        match self.shared.send_op(partition, op) {
            Ok(()) => pending,
            Err(e) => Pending::failed(e),
        }
    }

    /// Moves `partition` to `owner` while calls keep running: the old owner hands the data
    /// over through the new owner's queue, and calls that reach the new owner first wait
    /// there until it arrives, so nothing is lost. Returns the table version after the move.
    ///
    /// # Errors
    /// [`MapError::OutOfRange`]; [`MapError::CalledFromOwner`] on an owner thread.
    pub fn move_partition(&self, partition: u32, owner: usize) -> Result<u64, MapError> {
        self.move_partition_async(partition, owner)
            .wait_as("move_partition")
    }

    /// [`move_partition`](Self::move_partition) without waiting.
    pub fn move_partition_async(&self, partition: u32, owner: usize) -> Pending<u64> {
        let table = &self.shared.table;
        if partition >= table.partition_count() {
            return Pending::failed(MapError::OutOfRange {
                what: "partition",
                value: partition as usize,
                count: table.partition_count() as usize,
            });
        }
        if owner >= table.owner_count() {
            return Pending::failed(MapError::OutOfRange {
                what: "owner",
                value: owner,
                count: table.owner_count(),
            });
        }
        let (done, pending) = reply_pair();
        let current = table.owner_of_partition(partition);
        match self.shared.senders[current].send(Msg::Migrate {
            partition,
            to: owner,
            done,
        }) {
            Ok(()) => pending,
            Err(_) => Pending::failed(MapError::ShutDown),
        }
    }

    /// Whether this service is the one `map` belongs to.
    pub(crate) fn same(&self, service_id: usize) -> bool {
        self.shared.service_id == service_id
    }
}

/// An owner thread's state: the partitions it holds and the calls waiting for a partition
/// that is on its way to it.
pub(crate) struct OwnerState {
    me: usize,
    shared: Arc<Shared>,
    slots: Vec<Option<PartitionData>>,
    waiting: FxHashMap<u32, Vec<Msg>>,
}

impl OwnerState {
    /// The data of `partition`, if this owner holds it now.
    #[inline]
    pub(crate) fn partition_mut(&mut self, partition: u32) -> Option<&mut PartitionData> {
        self.slots[partition as usize].as_mut()
    }

    /// Sends `op` on to whoever owns `partition`, or keeps it until the partition arrives.
    pub(crate) fn route(&mut self, partition: u32, op: Op) {
        self.handle(Msg::Op { partition, op });
    }

    fn defer_or_forward(&mut self, partition: u32, msg: Msg) {
        let owner = self.shared.table.owner_of_partition(partition);
        if owner == self.me {
            self.waiting.entry(partition).or_default().push(msg);
        } else {
            // A closed queue means the service is stopping: the call's caller sees ShutDown.
            let _ = self.shared.senders[owner].send(msg);
        }
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Op { partition, op } => match self.slots[partition as usize].as_mut() {
                Some(data) => guarded(self.me, || op(data)),
                None => self.defer_or_forward(partition, Msg::Op { partition, op }),
            },
            Msg::Batch(batch) => guarded(self.me, || batch.run(self)),
            Msg::Migrate {
                partition,
                to,
                done,
            } => {
                if self.slots[partition as usize].is_none() {
                    self.defer_or_forward(
                        partition,
                        Msg::Migrate {
                            partition,
                            to,
                            done,
                        },
                    );
                    return;
                }
                if to != self.me {
                    let data = self.slots[partition as usize].take().expect("checked");
                    // Table first, then the data: a call that reads the new owner and
                    // overtakes the data waits at the new owner.
                    self.shared.table.assign(partition, to);
                    let _ = self.shared.senders[to].send(Msg::Adopt { partition, data });
                }
                done.send(Ok(self.shared.table.version()));
            }
            Msg::Adopt { partition, data } => {
                self.slots[partition as usize] = Some(data);
                if let Some(waiting) = self.waiting.remove(&partition) {
                    for msg in waiting {
                        self.handle(msg);
                    }
                }
            }
            Msg::Stop => {}
        }
    }
}

/// Runs `f`, logging a panic instead of letting it end the owner thread.
fn guarded(me: usize, f: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(f)) {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic".into());
        tracing::error!(owner = me, "an entry processor or task panicked: {message}");
    }
}

fn owner_loop(me: usize, shared: Arc<Shared>, rx: Receiver<Msg>) {
    OWNER.with(|o| o.set(Some(me)));
    let table = &shared.table;
    let slots = (0..table.partition_count())
        .map(|p| (table.owner_of_partition(p) == me).then(PartitionData::default))
        .collect();
    let mut state = OwnerState {
        me,
        shared: Arc::clone(&shared),
        slots,
        waiting: FxHashMap::default(),
    };
    while let Ok(msg) = rx.recv() {
        if matches!(msg, Msg::Stop) {
            break;
        }
        state.handle(msg);
    }
}
