//! The partition owners and the registry of named maps.
//!
//! An owner is an [`OwnerDriver`]: its state (the partitions it holds and the calls waiting
//! for a partition on its way to it) and the receiving end of its queue. It runs either on a
//! thread of its own ([`MapService::new`]), which blocks on the queue, or inside a loop that
//! someone else runs ([`MapService::driven`]): an executor's worker polls it on every pass,
//! beside its tasklets. Both handle every message the same way.

use std::any::{Any, TypeId};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, ThreadId};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use rustc_hash::FxHashMap;
use weir_partition::{PartitionAware, PartitionKey, Partitioner};

use crate::map::{MapKey, MapValue, PartitionedMap};
use crate::reply::{Pending, reply_pair};
use crate::store::Store;
use crate::table::PartitionTable;
use crate::view::PartitionView;
use crate::{MapError, Replier};

thread_local! {
    /// The owner index of the current thread, when it runs an owner: set on an owner thread
    /// and on a thread that polls an owner, from its first poll until the last owner it
    /// polls is dropped, so that a blocking call from anything else that thread runs (an
    /// executor worker's tasklets) is refused too.
    static OWNER: Cell<Option<usize>> = const { Cell::new(None) };
    /// How many live owners have been run on the current thread.
    static BOUND: Cell<usize> = const { Cell::new(0) };
}

/// The owner index of the calling thread, if it runs an owner of any map service.
pub(crate) fn current_owner() -> Option<usize> {
    OWNER.with(Cell::get)
}

/// Messages an [`OwnerDriver::poll`] handles at most: enough that a busy owner pays for the
/// poll once per many messages, few enough that the tasklets sharing its worker keep their
/// turn (64 batches of `execute_on_keys` are about 2.5 ms).
pub const OWNER_POLL_BUDGET: usize = 64;

/// A callback that makes an owner's loop poll it again soon.
type WakeFn = Box<dyn Fn() + Send + Sync>;

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
    /// Per owner: called after every message sent to it, when its loop is run by someone
    /// else ([`OwnerDriver::set_waker`]); unset for an owner thread, which blocks on its queue.
    wakers: Vec<OnceLock<WakeFn>>,
    registry: Mutex<FxHashMap<String, MapInfo>>,
    next_map: AtomicU32,
    shut_down: AtomicBool,
}

impl Shared {
    /// Queues `msg` at `owner`, then wakes the owner's loop if someone else runs it. The
    /// message is in the queue before the wake, so an owner polled after the wake sees it.
    #[inline]
    fn send(&self, owner: usize, msg: Msg) -> Result<(), MapError> {
        self.senders[owner]
            .send(msg)
            .map_err(|_| MapError::ShutDown)?;
        if let Some(wake) = self.wakers[owner].get() {
            wake();
        }
        Ok(())
    }

    /// Sends `op` to the owner of `partition`.
    pub(crate) fn send_op(&self, partition: u32, op: Op) -> Result<(), MapError> {
        let owner = self.table.owner_of_partition(partition);
        self.send(owner, Msg::Op { partition, op })
    }

    /// Sends a batch to `owner`.
    pub(crate) fn send_batch(&self, owner: usize, batch: Box<dyn BatchOp>) -> Result<(), MapError> {
        self.send(owner, Msg::Batch(batch))
    }
}

/// The owners' lifetime: stopped (and their threads joined, if they have threads) when the
/// last handle goes.
pub(crate) struct Owners {
    shared: Arc<Shared>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Owners {
    fn drop(&mut self) {
        self.shared.shut_down.store(true, Ordering::Release);
        for owner in 0..self.shared.senders.len() {
            let _ = self.shared.send(owner, Msg::Stop);
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
/// Each owner has a queue and alone touches the data of the partitions it owns, so that data
/// has no lock. A call from any other thread is a message to the owner's queue; the owner
/// runs it and answers through a [`Pending`]. An owner runs on a thread of its own
/// (`weir-owner-{i}`, [`MapService::new`]) or is polled by a loop that someone else runs,
/// such as an executor's worker ([`MapService::driven`]).
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
/// Cheap to clone. The owners stop when the service and every map handle are dropped.
#[derive(Clone)]
pub struct MapService {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the owners running while any handle exists.
    _owners: Arc<Owners>,
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
        let (service, drivers) = Self::driven_with_partitioner(partitioner, owners);
        let handles = drivers
            .into_iter()
            .map(|driver| {
                std::thread::Builder::new()
                    .name(format!("weir-owner-{}", driver.owner()))
                    .spawn(move || driver.run())
                    .expect("an owner thread starts")
            })
            .collect();
        *service
            ._owners
            .handles
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = handles;
        service
    }

    /// A service of `owners` owners over the default 271 partitions that runs no thread of
    /// its own: the caller runs each [`OwnerDriver`] in a loop of its own, polling it and
    /// registering a waker for it ([`OwnerDriver::set_waker`]). An executor's workers run
    /// them this way, owner `i` on worker `i` (the `weir` crate's `maps::on_executor`).
    ///
    /// Calls made before a driver is polled wait in its queue. Every thread that polls an
    /// owner counts as an owner thread: blocking calls made on it are refused.
    ///
    /// # Panics
    /// If `owners` is zero.
    pub fn driven(owners: usize) -> (Self, Vec<OwnerDriver>) {
        Self::driven_with_partitioner(Partitioner::default(), owners)
    }

    /// [`driven`](Self::driven) over `partitioner`'s partitions.
    ///
    /// # Panics
    /// If `owners` is zero.
    pub fn driven_with_partitioner(
        partitioner: Partitioner,
        owners: usize,
    ) -> (Self, Vec<OwnerDriver>) {
        assert!(owners > 0, "a map service needs at least one owner");
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..owners).map(|_| crossbeam_channel::unbounded()).unzip();
        let shared = Arc::new(Shared {
            service_id: NEXT_SERVICE.fetch_add(1, Ordering::Relaxed),
            table: PartitionTable::new(partitioner, owners),
            senders,
            wakers: (0..owners).map(|_| OnceLock::new()).collect(),
            registry: Mutex::default(),
            next_map: AtomicU32::new(0),
            shut_down: AtomicBool::new(false),
        });
        let drivers = receivers
            .into_iter()
            .enumerate()
            .map(|(me, rx)| OwnerDriver::new(me, Arc::clone(&shared), rx))
            .collect();
        let owners = Arc::new(Owners {
            shared: Arc::clone(&shared),
            handles: Mutex::new(Vec::new()),
        });
        (
            MapService {
                shared,
                _owners: owners,
            },
            drivers,
        )
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
        match self.shared.send(
            current,
            Msg::Migrate {
                partition,
                to: owner,
                done,
            },
        ) {
            Ok(()) => pending,
            Err(e) => Pending::failed(e),
        }
    }

    /// Whether this service is the one `map` belongs to.
    pub(crate) fn same(&self, service_id: usize) -> bool {
        self.shared.service_id == service_id
    }
}

/// An owner's state: the partitions it holds and the calls waiting for a partition that is
/// on its way to it.
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
            let _ = self.shared.send(owner, msg);
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
                    let _ = self.shared.send(to, Msg::Adopt { partition, data });
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

/// What one [`OwnerDriver::poll`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerPoll {
    /// It handled at least one message; more may be queued (the budget ran out).
    Progress,
    /// Its queue was empty.
    Idle,
    /// The service has shut down: poll it no more, and drop it.
    Stopped,
}

/// One partition owner of a [`MapService::driven`] service, to be run by a loop of the
/// caller's: each [`poll`](Self::poll) handles up to [`OWNER_POLL_BUDGET`] queued messages
/// (calls, batches, partition moves) without blocking, exactly as an owner thread of
/// [`MapService::new`] would. The loop must poll it again soon after its waker is called
/// ([`set_waker`](Self::set_waker)), and should keep polling it while it answers
/// [`OwnerPoll::Progress`].
///
/// Poll a driver from one thread: that thread becomes an owner thread from the first poll
/// until the driver is dropped on it, and blocking map calls made on it in that time are
/// refused with [`MapError::CalledFromOwner`], whatever code makes them, since they could
/// wait on this owner's own queue.
pub struct OwnerDriver {
    state: OwnerState,
    rx: Receiver<Msg>,
    stopped: bool,
    /// The thread that polled it first, counted in that thread's `BOUND`.
    bound: Option<ThreadId>,
}

impl std::fmt::Debug for OwnerDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerDriver")
            .field("owner", &self.state.me)
            .field("queued", &self.rx.len())
            .field("stopped", &self.stopped)
            .finish()
    }
}

impl OwnerDriver {
    fn new(me: usize, shared: Arc<Shared>, rx: Receiver<Msg>) -> Self {
        let table = &shared.table;
        let slots = (0..table.partition_count())
            .map(|p| (table.owner_of_partition(p) == me).then(PartitionData::default))
            .collect();
        OwnerDriver {
            state: OwnerState {
                me,
                shared,
                slots,
                waiting: FxHashMap::default(),
            },
            rx,
            stopped: false,
            bound: None,
        }
    }

    /// The owner's index in the partition table, `0..owners`.
    pub fn owner(&self) -> usize {
        self.state.me
    }

    /// Registers `wake`, called after every message sent to this owner (from any thread,
    /// this owner's own included), so that the loop that runs it polls it again soon. The
    /// message is queued before `wake` is called: a poll that starts after the call sees it.
    /// `wake` must not block; it runs on the sender's thread. Returns false, and keeps the
    /// first one, if a waker was already registered.
    pub fn set_waker(&self, wake: impl Fn() + Send + Sync + 'static) -> bool {
        self.state.shared.wakers[self.state.me]
            .set(Box::new(wake))
            .is_ok()
    }

    /// Handles up to [`OWNER_POLL_BUDGET`] queued messages, without blocking.
    pub fn poll(&mut self) -> OwnerPoll {
        if self.stopped {
            return OwnerPoll::Stopped;
        }
        self.bind();
        let mut handled = 0;
        while handled < OWNER_POLL_BUDGET {
            match self.rx.try_recv() {
                Ok(Msg::Stop) => {
                    self.stopped = true;
                    return OwnerPoll::Stopped;
                }
                Ok(msg) => self.state.handle(msg),
                // The senders live as long as this driver (its state holds them): only
                // `Empty` happens.
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
            handled += 1;
        }
        if handled > 0 {
            OwnerPoll::Progress
        } else {
            OwnerPoll::Idle
        }
    }

    /// Whether the service has shut down and this owner handles nothing more.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Runs the owner on the calling thread until the service shuts down, blocking on its
    /// queue while it is empty: the loop of an owner thread.
    pub fn run(mut self) {
        self.bind();
        while let Ok(msg) = self.rx.recv() {
            if matches!(msg, Msg::Stop) {
                self.stopped = true;
                break;
            }
            self.state.handle(msg);
        }
    }

    /// Marks the calling thread as this owner's.
    #[inline]
    fn bind(&mut self) {
        OWNER.with(|o| o.set(Some(self.state.me)));
        if self.bound.is_none() {
            self.bound = Some(std::thread::current().id());
            BOUND.with(|b| b.set(b.get() + 1));
        }
    }
}

impl Drop for OwnerDriver {
    fn drop(&mut self) {
        // Another thread's mark cannot be cleared from here; it stays (blocking calls there
        // are refused) until that thread ends.
        if self.bound == Some(std::thread::current().id()) {
            let left = BOUND.with(|b| {
                let left = b.get() - 1;
                b.set(left);
                left
            });
            if left == 0 {
                OWNER.with(|o| o.set(None));
            }
        }
    }
}
