//! `PartitionedMap`: a named map split by partition, each partition held by its owner.

use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_partition::PartitionKey;

use crate::MapError;
use crate::entry::{Entry, with_entry};
use crate::progress::{Join, Progress, Token};
use crate::reply::{Pending, reply_pair};
use crate::service::{BatchOp, MapService, Op, OwnerState};
use crate::store::Store;

/// What a map key needs: a partition key (the same one edges and grouping keys use) that
/// can be hashed, compared and sent between threads.
pub trait MapKey: PartitionKey + Hash + Eq + Clone + Send + Sync + 'static {}
impl<T: PartitionKey + Hash + Eq + Clone + Send + Sync + 'static> MapKey for T {}

/// What a map value needs.
pub trait MapValue: Clone + Send + Sync + 'static {}
impl<T: Clone + Send + Sync + 'static> MapValue for T {}

/// How many keys of one owner go in one message of [`PartitionedMap::execute_on_keys`].
const BATCH: usize = 1024;
/// How many such messages may be queued at one owner per call before the caller waits: at
/// about 40 ns a key, 64 batches are 2.5 ms of an owner's work, longer than the scheduler's
/// time slice, so an owner whose core the caller takes for a moment does not run dry.
const IN_FLIGHT: usize = 64;

/// A named map of `K` to `V`, split over the partitions of its [`MapService`]; each
/// partition's entries are held by that partition's owner thread, with no lock.
///
/// Every operation is a message to the key's owner. The blocking forms wait for the answer
/// and are refused on an owner thread ([`MapError::CalledFromOwner`]); the `_async` forms
/// return a [`Pending`] to await. Calls from one thread that wait for their answers are
/// applied in order.
///
/// ```
/// use weir_maps::{AffinityKey, MapService};
///
/// let service = MapService::new(2);
/// let counts = service.map::<AffinityKey, u64>("counts").unwrap();
/// let key = AffinityKey::new("customer3-order17");
/// counts.put(key.clone(), 1).unwrap();
/// counts.execute_on_key(key.clone(), |e| *e.value_mut().unwrap() += 1).unwrap();
/// assert_eq!(counts.get(&key).unwrap(), Some(2));
/// ```
///
/// Cheap to clone: a handle.
pub struct PartitionedMap<K, V> {
    service: MapService,
    name: Arc<str>,
    id: u32,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for PartitionedMap<K, V> {
    fn clone(&self) -> Self {
        PartitionedMap {
            service: self.service.clone(),
            name: Arc::clone(&self.name),
            id: self.id,
            _types: PhantomData,
        }
    }
}

impl<K, V> std::fmt::Debug for PartitionedMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionedMap")
            .field("name", &self.name)
            .finish()
    }
}

impl<K: MapKey, V: MapValue> PartitionedMap<K, V> {
    pub(crate) fn new(service: MapService, name: &str, id: u32) -> Self {
        PartitionedMap {
            service,
            name: name.into(),
            id,
            _types: PhantomData,
        }
    }

    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// The service that holds the map.
    pub fn service(&self) -> &MapService {
        &self.service
    }

    /// The partition of `key`.
    #[inline]
    pub fn partition_of(&self, key: &K) -> u32 {
        self.service.partition_of(key)
    }

    /// Runs `f` on the store of `partition`, on its owner.
    fn call<R: Send + 'static>(
        &self,
        partition: u32,
        f: impl FnOnce(&mut Arc<Store<K, V>>) -> R + Send + 'static,
    ) -> Pending<R> {
        let (replier, pending) = reply_pair();
        let id = self.id;
        let op: Op = Box::new(move |data| replier.send(Ok(f(data.store::<K, V>(id)))));
        match self.service.shared.send_op(partition, op) {
            Ok(()) => pending,
            Err(e) => Pending::failed(e),
        }
    }

    /// The value of `key`, without blocking.
    pub fn get_async(&self, key: K) -> Pending<Option<V>> {
        self.call(self.partition_of(&key), move |s| s.get(&key).cloned())
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// [`MapError::CalledFromOwner`] on an owner thread; [`MapError::ShutDown`].
    pub fn get(&self, key: &K) -> Result<Option<V>, MapError> {
        self.get_async(key.clone()).wait_as("get")
    }

    /// Puts `value` under `key`, without blocking; the pending result is the previous value.
    pub fn put_async(&self, key: K, value: V) -> Pending<Option<V>> {
        self.call(self.partition_of(&key), move |s| {
            Arc::make_mut(s).insert(key, value)
        })
    }

    /// Puts `value` under `key`. Returns the previous value.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn put(&self, key: K, value: V) -> Result<Option<V>, MapError> {
        self.put_async(key, value).wait_as("put")
    }

    /// Removes `key`, without blocking; the pending result is the removed value.
    pub fn remove_async(&self, key: K) -> Pending<Option<V>> {
        self.call(self.partition_of(&key), move |s| {
            Arc::make_mut(s).remove(&key)
        })
    }

    /// Removes `key`. Returns its value.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn remove(&self, key: &K) -> Result<Option<V>, MapError> {
        self.remove_async(key.clone()).wait_as("remove")
    }

    /// Replaces `key`'s value by `f(key, current)` atomically on the owner, without blocking:
    /// `None` removes the key. The pending result is the new value.
    pub fn compute_async(
        &self,
        key: K,
        f: impl FnOnce(&K, Option<&V>) -> Option<V> + Send + 'static,
    ) -> Pending<Option<V>> {
        self.execute_on_key_async(key, move |e| {
            let new = f(e.key(), e.value());
            match new {
                Some(v) => {
                    e.set(v.clone());
                    Some(v)
                }
                None => {
                    e.remove();
                    None
                }
            }
        })
    }

    /// [`compute_async`](Self::compute_async), waiting for the new value.
    ///
    /// # Errors
    /// As [`get`](Self::get); [`MapError::TaskPanicked`] when `f` panicked.
    pub fn compute(
        &self,
        key: K,
        f: impl FnOnce(&K, Option<&V>) -> Option<V> + Send + 'static,
    ) -> Result<Option<V>, MapError> {
        self.compute_async(key, f).wait_as("compute")
    }

    /// Runs entry processor `f` on `key`'s entry on the key's owner, with exclusive access:
    /// processors on one key run one after another. Without blocking.
    pub fn execute_on_key_async<R: Send + 'static>(
        &self,
        key: K,
        f: impl FnOnce(&mut Entry<'_, K, V>) -> R + Send + 'static,
    ) -> Pending<R> {
        self.call(self.partition_of(&key), move |s| {
            with_entry(Arc::make_mut(s), key, f)
        })
    }

    /// [`execute_on_key_async`](Self::execute_on_key_async), waiting for its result.
    ///
    /// # Errors
    /// As [`compute`](Self::compute).
    pub fn execute_on_key<R: Send + 'static>(
        &self,
        key: K,
        f: impl FnOnce(&mut Entry<'_, K, V>) -> R + Send + 'static,
    ) -> Result<R, MapError> {
        self.execute_on_key_async(key, f).wait_as("execute_on_key")
    }

    /// Runs entry processor `f` on each of `keys` (a key may repeat), each on its owner, and
    /// returns when all ran. Keys are sent in batches of 1024 per owner, so the cost per key
    /// is the owner's hash-map update plus a share of one message; owners work in parallel.
    /// Up to 64 batches wait at each owner; the caller parks when an owner has that many and
    /// is woken once it is down to 32, so it sleeps and wakes once per 32 batches, not per
    /// batch.
    ///
    /// # Errors
    /// As [`compute`](Self::compute): a panic in `f` skips the rest of its batch.
    pub fn execute_on_keys<F>(
        &self,
        keys: impl IntoIterator<Item = K>,
        f: F,
    ) -> Result<(), MapError>
    where
        F: Fn(&mut Entry<'_, K, V>) + Send + Sync + 'static,
    {
        if let Some(owner) = crate::service::current_owner() {
            return Err(MapError::CalledFromOwner {
                call: "execute_on_keys",
                owner,
            });
        }
        let f = Arc::new(f);
        let table = &self.service.shared.table;
        let partitioner = table.partitioner();
        let owners = table.owner_count();
        let progress = Progress::new(owners);
        let mut sent = vec![0usize; owners];
        let mut buffers: Vec<Vec<(u32, K)>> = vec![Vec::with_capacity(BATCH); owners];
        let send = |owner: usize, items: Vec<(u32, K)>, sent: &mut [usize]| {
            // Never more than IN_FLIGHT batches queued at one owner; once there are, wait
            // until it is down to half, so the caller sleeps once per IN_FLIGHT / 2 batches
            // and the owner keeps work queued while the caller is woken and refills.
            if sent[owner] - progress.done(owner) >= IN_FLIGHT {
                progress.wait_for(owner, sent[owner] - IN_FLIGHT / 2);
            }
            let batch = KeysBatch::<K, V, F> {
                id: self.id,
                _values: PhantomData,
                items,
                f: Arc::clone(&f),
                token: Token::new(&progress, owner),
            };
            sent[owner] += 1;
            self.service.shared.send_batch(owner, Box::new(batch))
        };
        for key in keys {
            let partition = partitioner.partition_of(&key);
            let owner = table.owner_of_partition(partition);
            let buffer = &mut buffers[owner];
            buffer.push((partition, key));
            if buffer.len() == BATCH {
                let items = std::mem::replace(buffer, Vec::with_capacity(BATCH));
                send(owner, items, &mut sent)?;
            }
        }
        for (owner, buffer) in buffers.into_iter().enumerate() {
            if !buffer.is_empty() {
                send(owner, buffer, &mut sent)?;
            }
        }
        for (owner, &n) in sent.iter().enumerate() {
            progress.wait_for(owner, n);
        }
        if progress.failed() {
            return Err(MapError::TaskPanicked);
        }
        Ok(())
    }

    /// Runs entry processor `f` on every entry for which `predicate` holds, on every owner in
    /// parallel, each partition's entries one after another. Returns the keys and results.
    ///
    /// # Errors
    /// As [`compute`](Self::compute).
    pub fn execute_on_entries<R, P, F>(&self, predicate: P, f: F) -> Result<Vec<(K, R)>, MapError>
    where
        R: Send + 'static,
        P: Fn(&K, &V) -> bool + Send + Sync + 'static,
        F: Fn(&mut Entry<'_, K, V>) -> R + Send + Sync + 'static,
    {
        let predicate = Arc::new(predicate);
        let f = Arc::new(f);
        let pending: Vec<_> = (0..self.service.table().partition_count())
            .map(|p| {
                let predicate = Arc::clone(&predicate);
                let f = Arc::clone(&f);
                self.call(p, move |s| {
                    let keys: Vec<K> = s
                        .iter()
                        .filter(|(k, v)| predicate(k, v))
                        .map(|(k, _)| k.clone())
                        .collect();
                    if keys.is_empty() {
                        return Vec::new();
                    }
                    let store = Arc::make_mut(s);
                    keys.into_iter()
                        .map(|k| (k.clone(), with_entry(store, k, |e| f(e))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut out = Vec::new();
        for p in pending {
            out.extend(p.wait_as("execute_on_entries")?);
        }
        Ok(out)
    }

    /// The values of `keys` that are present. One message per partition involved.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn get_all(&self, keys: impl IntoIterator<Item = K>) -> Result<FxHashMap<K, V>, MapError> {
        let mut by_partition: FxHashMap<u32, Vec<K>> = FxHashMap::default();
        for k in keys {
            by_partition
                .entry(self.partition_of(&k))
                .or_default()
                .push(k);
        }
        let pending: Vec<_> = by_partition
            .into_iter()
            .map(|(p, keys)| {
                self.call(p, move |s| {
                    keys.into_iter()
                        .filter_map(|k| s.get(&k).cloned().map(|v| (k, v)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut out = FxHashMap::default();
        for p in pending {
            out.extend(p.wait_as("get_all")?);
        }
        Ok(out)
    }

    /// Puts every entry, one message per partition involved, without blocking. The pending
    /// result is the number of entries put, answered by the owner that finishes last.
    pub fn put_all_async(&self, entries: impl IntoIterator<Item = (K, V)>) -> Pending<usize> {
        let mut by_partition: FxHashMap<u32, Vec<(K, V)>> = FxHashMap::default();
        for (k, v) in entries {
            by_partition
                .entry(self.partition_of(&k))
                .or_default()
                .push((k, v));
        }
        let (replier, pending) = reply_pair();
        if by_partition.is_empty() {
            replier.send(Ok(0));
            return pending;
        }
        let join = Join::new(by_partition.len(), replier);
        for (partition, entries) in by_partition {
            // The join's `Arc` is loom's in the model build (see `progress`).
            let join = crate::progress::sync::Arc::clone(&join);
            let id = self.id;
            let op: Op = Box::new(move |data| {
                let n = entries.len();
                Arc::make_mut(data.store::<K, V>(id)).extend(entries);
                if let Some((replier, total)) = join.part_done(n) {
                    replier.send(Ok(total));
                }
            });
            if let Err(e) = self.service.shared.send_op(partition, op) {
                return Pending::failed(e);
            }
        }
        pending
    }

    /// Puts every entry, one message per partition involved, and waits.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn put_all(&self, entries: impl IntoIterator<Item = (K, V)>) -> Result<usize, MapError> {
        self.put_all_async(entries).wait_as("put_all")
    }

    /// Puts entries that all belong to `partition`, in one message, in order (a later entry
    /// of a key replaces an earlier one). The caller guarantees the partition; the sink of a
    /// pipeline uses it after grouping by partition. The pending result is the number put;
    /// [`MapError::OutOfRange`] for a partition the map does not have.
    pub fn put_partition_async(&self, partition: u32, entries: Vec<(K, V)>) -> Pending<usize> {
        if let Err(e) = self.check_partition(partition) {
            return Pending::failed(e);
        }
        self.call(partition, move |s| {
            let n = entries.len();
            Arc::make_mut(s).extend(entries);
            n
        })
    }

    /// Replaces every entry of `partition` by `entries` (in order: a later entry of a key
    /// wins), in one message, as one step on the owner: no call sees a mix. The caller
    /// guarantees that the entries belong to the partition; a job restored from a snapshot
    /// puts its map partitions back this way. Readers holding a
    /// [`partition_snapshot`](Self::partition_snapshot) keep the old entries. The pending
    /// result is the number of entries the partition holds now.
    pub fn replace_partition_async(&self, partition: u32, entries: Vec<(K, V)>) -> Pending<usize> {
        if let Err(e) = self.check_partition(partition) {
            return Pending::failed(e);
        }
        self.call(partition, move |s| {
            let store: Store<K, V> = entries.into_iter().collect();
            let n = store.len();
            *s = Arc::new(store);
            n
        })
    }

    /// How many entries the map holds: one message per partition.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn len(&self) -> Result<usize, MapError> {
        let pending: Vec<_> = (0..self.service.table().partition_count())
            .map(|p| self.call(p, |s| s.len()))
            .collect();
        let mut n = 0;
        for p in pending {
            n += p.wait_as("len")?;
        }
        Ok(n)
    }

    /// Whether the map is empty.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn is_empty(&self) -> Result<bool, MapError> {
        self.len().map(|n| n == 0)
    }

    /// The entries of one partition, copied.
    ///
    /// # Errors
    /// [`MapError::OutOfRange`]; as [`get`](Self::get).
    pub fn entries(&self, partition: u32) -> Result<Vec<(K, V)>, MapError> {
        self.check_partition(partition)?;
        self.call(partition, |s| {
            s.iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>()
        })
        .wait_as("entries")
    }

    /// A read-only view of one partition as it is now, without copying it: the owner hands
    /// out its copy-on-write store, and its next write to the partition copies it once.
    /// A pipeline's lookups and the map source read these.
    pub fn partition_snapshot(&self, partition: u32) -> Pending<Arc<Store<K, V>>> {
        if let Err(e) = self.check_partition(partition) {
            return Pending::failed(e);
        }
        self.call(partition, |s| Arc::clone(s))
    }

    fn check_partition(&self, partition: u32) -> Result<(), MapError> {
        let count = self.service.table().partition_count();
        if partition >= count {
            return Err(MapError::OutOfRange {
                what: "partition",
                value: partition as usize,
                count: count as usize,
            });
        }
        Ok(())
    }
}

struct KeysBatch<K, V, F> {
    id: u32,
    _values: PhantomData<fn() -> V>,
    items: Vec<(u32, K)>,
    f: Arc<F>,
    token: Token,
}

impl<K: MapKey, V: MapValue, F> BatchOp for KeysBatch<K, V, F>
where
    F: Fn(&mut Entry<'_, K, V>) + Send + Sync + 'static,
{
    fn run(self: Box<Self>, owner: &mut OwnerState) {
        let KeysBatch {
            id,
            items,
            f,
            token,
            ..
        } = *self;
        for (partition, key) in items {
            match owner.partition_mut(partition) {
                Some(data) => with_entry(Arc::make_mut(data.store::<K, V>(id)), key, |e| f(e)),
                None => {
                    // Moved away since the caller read the table: route this key alone.
                    let f = Arc::clone(&f);
                    let token = token.clone();
                    owner.route(
                        partition,
                        Box::new(move |data| {
                            let _token = token;
                            with_entry(Arc::make_mut(data.store::<K, V>(id)), key, |e| f(e));
                        }),
                    );
                }
            }
        }
    }
}
