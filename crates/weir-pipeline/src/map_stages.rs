//! Pipeline stages over partitioned maps ([`weir_maps`]): reading a map
//! ([`source`]), writing one ([`sink`]) and
//! enriching items by keyed lookup ([`BatchStage::map_using_map`]).
//!
//! ```
//! use weir::{Pipeline, sinks, sources};
//!
//! // The owners are the shared executor's workers, which `run` uses.
//! let service = weir::maps::shared();
//! let prices = service.map::<String, u64>("prices").unwrap();
//! prices.put("apple".into(), 3).unwrap();
//! let orders = service.map::<String, u64>("order-totals").unwrap();
//!
//! let p = Pipeline::new();
//! p.read_from(sources::collection::items(vec![("apple".to_string(), 2u64), ("pear".to_string(), 1)]))
//!     .map_using_map(&prices, |(fruit, _)| fruit.clone(), |(fruit, n), price| {
//!         price.map(|p| (fruit, n * p))
//!     })
//!     .write_to(sinks::map(&orders));
//! p.run().unwrap();
//! assert_eq!(orders.get(&"apple".to_string()).unwrap(), Some(6));
//! assert_eq!(orders.get(&"pear".to_string()).unwrap(), None);
//! ```
//!
//! Every stage uses the map's partitioning (`weir_partition`), which is also the one
//! partitioned edges use: instance `i` of a vertex with `n` instances handles the partitions
//! [`Partitioner::owner_table`](weir_core::Partitioner::owner_table)`(n)` gives it.
//!
//! The stages never wait for an owner on a worker thread: with the owners on the executor's
//! workers ([`crate::maps::on_executor`]) the owner that must answer may be the waiting
//! worker itself. They send their calls and poll the answers ([`Pending::try_take`]) on later
//! calls. Only `init` waits, on the thread that submits the job.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_core::snapshot::Guarantee;
use weir_core::{
    BoxError, Counter, DEFAULT_PARTITION_COUNT, Edge, Item, Outbox, Partitioner, ProcessorContext,
    ProcessorResult, Watermark,
};
use weir_maps::{MapKey, MapValue, PartitionedMap, Pending, Store};

use crate::graph::{RouteFn, SinkRoute, SinkTerminalFactory};
use crate::pipeline::{BatchStage, wrap_with};
use weir_exec::connector::{Emitter, SourceReader};
use weir_exec::links::link::{Link, delegate_to_next, erase};
use weir_exec::links::state::{Durable, LinkEntries, LinkWriter};
use weir_io::sinks::Sink;
use weir_io::sources::BatchSource;

/// The partitions instance `index` of `total` handles: the same split partitioned edges make.
fn partitions_of(partitioner: Partitioner, index: usize, total: usize) -> Vec<u32> {
    let owners = partitioner.owner_table(total.max(1));
    (0..partitioner.count())
        .filter(|&p| owners[p as usize] as usize == index)
        .collect()
}

/// Reads every entry of `map` as `(key, value)` pairs, each instance reading its share of the
/// partitions. Each partition is read as it was when the instance opened it: the owner hands
/// out its copy-on-write store, so the read is consistent per partition and costs no copy of
/// the map. Not replayable: a job restored from a snapshot reads the map again.
pub fn source<K: MapKey, V: MapValue>(map: &PartitionedMap<K, V>) -> BatchSource<(K, V)> {
    let map = map.clone();
    BatchSource::new(format!("map-source({})", map.name()), None, move |_| {
        MapReader {
            map: map.clone(),
            pending: Vec::new(),
            current: Vec::new(),
        }
    })
}

struct MapReader<K, V> {
    map: PartitionedMap<K, V>,
    /// The partitions still to read, newest request last.
    pending: Vec<Pending<Arc<Store<K, V>>>>,
    /// The entries of the partition being emitted, in reverse.
    current: Vec<(K, V)>,
}

impl<K: MapKey, V: MapValue> SourceReader for MapReader<K, V> {
    type Item = (K, V);

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        let partitioner = self.map.service().table().partitioner();
        let mine = partitions_of(partitioner, ctx.global_index(), ctx.total_parallelism());
        // Asked for all at once; the owners answer in parallel while earlier ones are emitted.
        self.pending = mine
            .into_iter()
            .rev()
            .map(|p| self.map.partition_snapshot(p))
            .collect();
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, (K, V)>) -> Result<bool, BoxError> {
        loop {
            while let Some(entry) = self.current.pop() {
                if !out.emit(entry) {
                    return Ok(false);
                }
            }
            let Some(next) = self.pending.last_mut() else {
                return Ok(true);
            };
            match next.try_take() {
                Some(store) => {
                    self.pending.pop();
                    let store = store?;
                    self.current = store.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                }
                // The owner has not answered yet: come back without blocking the worker.
                None => return Ok(false),
            }
        }
    }
}

/// Puts every `(key, value)` pair into `map`.
///
/// The sink's input comes over a partitioned edge by the key, so that each instance puts the
/// entries of the partitions it owns, and each partition has one writer; after a
/// `grouping_key(..).aggregate(..)` by the same key the input is partitioned so already,
/// and the sink joins the aggregation's vertex with no extra edge. Each instance groups its
/// items by partition and sends each group to the partition's owner in one message.
///
/// # With snapshots: exactly-once
///
/// In a job that takes snapshots the sink is transactional. The entries written since the
/// last snapshot are held back (the last value of each key) and put when the snapshot is
/// durable (phase 2), so the map never shows an entry a restore would take back. Each
/// snapshot holds, for every partition the sink wrote, that partition's entries as they
/// will be once it commits, saved under the partition; a restored job puts each such
/// partition back whole, at its new owner (also at another parallelism). After a failure
/// and a restore, in this process or in a new one with an empty map, the map holds exactly
/// the state of the snapshot, and then the writes of the items replayed after it.
///
/// Costs: the entries of one snapshot interval in memory; at each snapshot, the entries of
/// every partition written so far encoded into the snapshot (the map's partitions are read
/// from their owners without a copy). Entries of partitions the job never wrote are neither
/// saved nor touched by a restore.
///
/// Without snapshots entries are put as they come, at most 8 groups of 4096 per instance
/// in flight. The map lives in memory; [`PartitionedMap::save`] keeps it across restarts.
pub fn sink<K, V>(map: &PartitionedMap<K, V>) -> Sink<(K, V)>
where
    K: MapKey + Durable,
    V: MapValue + Durable,
{
    let partitioner = map.service().table().partitioner();
    let route: RouteFn =
        Arc::new(move |edge: Edge| edge.partitioned_with(partitioner, |(k, _): &(K, V)| k.clone()));
    let terminal_map = map.clone();
    let terminal: SinkTerminalFactory =
        Arc::new(move |_| erase::<(K, V)>(Box::new(MapSink::new(terminal_map.clone()))));
    Sink::from_terminal(format!("map-sink({})", map.name()), None, terminal).routed(SinkRoute {
        route,
        by_pair_key: partitioner == Partitioner::default(),
    })
}

/// Items a map sink instance buffers before sending them to the owners (no snapshots).
const SINK_BATCH: usize = 4096;
/// Messages a map sink instance may have in flight before it reports no room.
const SINK_IN_FLIGHT: usize = 8;
/// The key of a map sink's snapshot entries (one per partition, saved under the partition).
const PARTITION_STATE: &[u8] = b"map-partition";

/// Entries by partition.
type ByPartition<K, V> = FxHashMap<u32, FxHashMap<K, V>>;

/// One partition a map sink's snapshot holds: the map's entries of it, asked of its owner.
struct Base<K, V> {
    partition: u32,
    pending: Pending<Arc<Store<K, V>>>,
    entries: Option<Arc<Store<K, V>>>,
}

/// The terminal of [`sink`]: see there.
struct MapSink<K, V> {
    map: PartitionedMap<K, V>,
    partitioner: Partitioner,
    /// Whether the job takes snapshots: writes then wait for phase 2.
    transactional: bool,
    /// Without snapshots: items not sent yet, by partition.
    buffer: FxHashMap<u32, Vec<(K, V)>>,
    buffered: usize,
    /// With snapshots: what was written since the last snapshot, the last value per key.
    epoch: ByPartition<K, V>,
    /// Saved in a snapshot, put at its commit (several epochs if a snapshot failed).
    prepared: ByPartition<K, V>,
    /// From a restored snapshot: partitions to put back whole at the next commit.
    restored: Vec<(u32, Vec<(K, V)>)>,
    /// The partitions this instance wrote or restored, which its snapshots hold.
    written: Vec<bool>,
    /// Which partitions this instance owns, indexed by partition.
    mine: Vec<bool>,
    in_flight: Vec<Pending<usize>>,
    /// While a snapshot gets ready: the partitions it holds, with their entries in the map
    /// once the owner has answered.
    bases: Option<Vec<Base<K, V>>>,
    /// A failure, raised at the next flush: `push` cannot return it.
    failed: Option<BoxError>,
    records: u64,
    counter: Counter,
}

impl<K: MapKey + Durable, V: MapValue + Durable> MapSink<K, V> {
    fn new(map: PartitionedMap<K, V>) -> Self {
        let partitioner = map.service().table().partitioner();
        MapSink {
            map,
            partitioner,
            transactional: false,
            buffer: FxHashMap::default(),
            buffered: 0,
            epoch: FxHashMap::default(),
            prepared: FxHashMap::default(),
            restored: Vec::new(),
            written: vec![false; partitioner.count() as usize],
            mine: Vec::new(),
            in_flight: Vec::new(),
            bases: None,
            failed: None,
            records: 0,
            counter: Counter::default(),
        }
    }

    fn send_buffer(&mut self) {
        for (partition, entries) in self.buffer.drain() {
            self.in_flight
                .push(self.map.put_partition_async(partition, entries));
        }
        self.buffered = 0;
    }

    /// Drops the answered messages; fails on the first failed one.
    fn reap(&mut self) -> ProcessorResult<()> {
        let mut failed = None;
        self.in_flight.retain_mut(|p| match p.try_take() {
            None => true,
            Some(Ok(_)) => false,
            Some(Err(e)) => {
                failed.get_or_insert(e);
                false
            }
        });
        match failed {
            Some(e) => Err(Box::new(e)),
            None => Ok(()),
        }
    }

    fn has_room(&mut self) -> bool {
        self.transactional || self.in_flight.len() < SINK_IN_FLIGHT
    }

    /// The error of an item whose partition another instance owns: the input was not
    /// partitioned by the map's key, and two writers of one partition would break restores.
    #[cold]
    fn not_mine(&self, partition: u32) -> BoxError {
        format!(
            "map sink of '{}' received a key of partition {partition}, which another instance owns: its input must be partitioned by the map's key",
            self.map.name()
        )
        .into()
    }
}

impl<K: MapKey + Durable, V: MapValue + Durable> Link<(K, V)> for MapSink<K, V> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.counter = ctx.metrics().counter("records_written");
        self.transactional = ctx.guarantee() != Guarantee::None;
        let count = self.partitioner.count();
        if self.transactional && count > DEFAULT_PARTITION_COUNT {
            return Err(format!(
                "map '{}' has {count} partitions; a job snapshot holds at most {DEFAULT_PARTITION_COUNT}",
                self.map.name()
            )
            .into());
        }
        let owners = self.partitioner.owner_table(ctx.total_parallelism().max(1));
        let me = ctx.global_index() as u32;
        self.mine = owners.iter().map(|&o| o == me).collect();
        Ok(())
    }

    #[inline]
    fn push(&mut self, (key, value): (K, V)) -> bool {
        if self.failed.is_some() {
            return false;
        }
        let partition = self.partitioner.partition_of(&key);
        self.records += 1;
        if self.transactional {
            if !self.mine[partition as usize] {
                self.failed = Some(self.not_mine(partition));
                return false;
            }
            self.written[partition as usize] = true;
            self.epoch.entry(partition).or_default().insert(key, value);
            return true;
        }
        self.buffer.entry(partition).or_default().push((key, value));
        self.buffered += 1;
        if self.buffered >= SINK_BATCH {
            self.send_buffer();
        }
        self.has_room()
    }

    fn flush(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Published once per call, not per item.
        self.counter.add(std::mem::take(&mut self.records));
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.reap()?;
        Ok(self.has_room())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.flush(outbox)?;
        // With snapshots the last epoch goes into the terminal snapshot and commits with it.
        if !self.transactional && self.buffered > 0 {
            self.send_buffer();
        }
        self.reap()?;
        if !self.in_flight.is_empty() {
            // The owners are still putting: not idle work.
            outbox.report_progress();
        }
        Ok(self.in_flight.is_empty())
    }

    fn watermark(&mut self, _wm: Watermark, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        Ok(true)
    }

    fn idle(&mut self, _outbox: &mut Outbox) -> ProcessorResult<bool> {
        // A sink has no consumers to tell.
        Ok(true)
    }

    fn is_cooperative(&self) -> bool {
        true
    }

    fn prepare_save(&mut self) -> ProcessorResult<bool> {
        // The puts of the last commit are the base this snapshot reads: they must have landed
        // (they normally have, as the commit waits for them).
        self.reap()?;
        if !self.in_flight.is_empty() {
            return Ok(false);
        }
        let bases = match &mut self.bases {
            Some(bases) => bases,
            None => {
                // Asked for all at once: the owners answer in parallel. Nothing is pushed
                // from here to the save, so the written partitions stay these.
                let map = &self.map;
                let bases = (0..self.partitioner.count())
                    .filter(|&p| self.written[p as usize])
                    .map(|partition| Base {
                        partition,
                        pending: map.partition_snapshot(partition),
                        entries: None,
                    })
                    .collect();
                self.bases.insert(bases)
            }
        };
        let mut ready = true;
        for base in bases.iter_mut().filter(|b| b.entries.is_none()) {
            match base.pending.try_take() {
                Some(entries) => base.entries = Some(entries?),
                None => ready = false,
            }
        }
        Ok(ready)
    }

    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        if !self.restored.is_empty() {
            return Err("map sink saved before its restored partitions were put back".into());
        }
        let Some(bases) = self.bases.take() else {
            return Err("map sink saved before its partitions were read (prepare_save)".into());
        };
        for (partition, entries) in self.epoch.drain() {
            self.prepared.entry(partition).or_default().extend(entries);
        }
        let no_entries = FxHashMap::default();
        for base in bases {
            let partition = base.partition;
            let base = base.entries.expect("prepare_save answered true");
            let delta = self.prepared.get(&partition).unwrap_or(&no_entries);
            let encoded = postcard::to_stdvec(&(&*base, delta))
                .map_err(|e| format!("map sink of '{}': {e}", self.map.name()))?;
            state.put_in_partition(partition as u16, PARTITION_STATE, encoded);
        }
        Ok(())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        for e in entries.take() {
            let Some(partition) = e.partition.filter(|_| e.key == PARTITION_STATE) else {
                continue;
            };
            let (base, delta): (Store<K, V>, FxHashMap<K, V>) = postcard::from_bytes(&e.value)
                .map_err(|err| {
                    format!(
                        "map sink of '{}': saved partition {partition} does not decode: {err}",
                        self.map.name()
                    )
                })?;
            let partition = partition as u32;
            if let Some((k, _)) = base
                .iter()
                .chain(&delta)
                .find(|(k, _)| self.partitioner.partition_of(k) != partition)
            {
                return Err(format!(
                    "map sink of '{}': a saved entry of partition {partition} belongs to partition {} (a map with another partitioning?)",
                    self.map.name(),
                    self.partitioner.partition_of(k)
                )
                .into());
            }
            self.written[partition as usize] = true;
            // The delta goes last: it replaces the base's value of a key it holds.
            self.restored
                .push((partition, base.into_iter().chain(delta).collect()));
        }
        Ok(())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        // A restored partition is put back whole, then the epochs saved since go on top;
        // both go to the partition's owner in this order. Each is sent once; the commit is
        // done when the owners have answered.
        for (partition, entries) in self.restored.drain(..) {
            self.in_flight
                .push(self.map.replace_partition_async(partition, entries));
        }
        for (partition, entries) in self.prepared.drain() {
            self.in_flight.push(
                self.map
                    .put_partition_async(partition, entries.into_iter().collect()),
            );
        }
        self.reap()?;
        Ok(self.in_flight.is_empty())
    }
}

/// An item on its way to a keyed lookup, with its key and the key's partition computed once,
/// where the item is routed: neither the edge nor the lookup hashes the key again.
#[derive(Clone)]
struct KeyedItem<K, T> {
    partition: u32,
    key: K,
    item: T,
}

impl<T: Item> BatchStage<T> {
    /// Enriches each item by a keyed lookup in `map` (Jet's `mapUsingIMap`): `f(item, value)`
    /// where `value` is `map`'s value for `key_fn(item)`; `None` from `f` drops the item.
    ///
    /// The planner sends each item over a partitioned edge to the instance that handles its
    /// key's partition; that instance holds a read-only view of exactly those partitions
    /// (taken from their owners when the job starts), so every lookup is a local hash-map
    /// read with no message and no lock. The map is read as it was when the job started (or
    /// restarted from a snapshot); later writes are not seen. Counters: `map_lookups`, and
    /// `map_remote_lookups` for a lookup of a partition the instance does not hold (always 0
    /// unless the routing disagrees; such a lookup is then fetched from the owner, blocking, which
    /// fails the job on a worker that runs the map's owners).
    ///
    /// Cost per item: `key_fn` and the key's partition (XXH3) once, on the sending side,
    /// where the key travels with the item; one hash-map read on the receiving side, whose
    /// bucket is prefetched a few items ahead so that the cache misses of a batch's lookups
    /// overlap ([`Store::prefetch`]).
    pub fn map_using_map<K, V, R>(
        &self,
        map: &PartitionedMap<K, V>,
        key_fn: impl Fn(&T) -> K + Send + Sync + 'static,
        f: impl Fn(T, Option<&V>) -> Option<R> + Send + Sync + 'static,
    ) -> BatchStage<R>
    where
        K: MapKey,
        V: MapValue,
        R: Item,
    {
        let partitioner = map.service().table().partitioner();
        let f = Arc::new(f);
        let map = map.clone();
        let route: RouteFn = Arc::new(move |edge: Edge| {
            edge.partitioned_by_partition(partitioner, |k: &KeyedItem<K, T>| k.partition)
        });
        self.map(move |item: T| {
            let key = key_fn(&item);
            KeyedItem {
                partition: partitioner.partition_of(&key),
                key,
                item,
            }
        })
        .named("map-using-map-key")
        .rebalance_with(route)
        .transform(
            "map-using-map",
            wrap_with::<KeyedItem<K, T>, R>(move |next| {
                Box::new(MapLookupLink {
                    map: map.clone(),
                    f: Arc::clone(&f),
                    next,
                    partitions: Vec::new(),
                    out: Vec::new(),
                    lookups: None,
                    remote: None,
                })
            }),
        )
    }
}

/// How many items ahead of its lookup a keyed lookup prefetches an item's bucket: enough
/// for the misses of that many lookups to be in flight together, few enough for the
/// prefetched lines to still be in L1 when their lookups come. Lookups in a 1 M-key map of
/// 271 partitions took about half the time with 8, 16 or 32, 16 by a little the fastest.
const LOOKUP_PREFETCH_DISTANCE: usize = 16;

/// Prefetches the bucket `ahead`'s lookup will read, if this instance holds its partition.
#[inline(always)]
fn prefetch_lookup<K: MapKey, V, T>(
    partitions: &[Option<Arc<Store<K, V>>>],
    ahead: &KeyedItem<K, T>,
) {
    if let Some(Some(store)) = partitions.get(ahead.partition as usize) {
        store.prefetch(&ahead.key);
    }
}

struct MapLookupLink<K, V, F, R> {
    map: PartitionedMap<K, V>,
    f: Arc<F>,
    next: Box<dyn Link<R>>,
    /// Indexed by partition: the read-only stores of the partitions this instance handles.
    partitions: Vec<Option<Arc<Store<K, V>>>>,
    out: Vec<R>,
    lookups: Option<Counter>,
    remote: Option<Counter>,
}

/// The store of `partition`, fetched from its owner into `slot`: for an instance that does
/// not hold the partition, which only a routing disagreement causes.
#[cold]
#[inline(never)]
fn fetch_partition<'a, K: MapKey, V: MapValue>(
    map: &PartitionedMap<K, V>,
    remote: Option<&Counter>,
    slot: &'a mut Option<Arc<Store<K, V>>>,
    partition: u32,
) -> &'a Arc<Store<K, V>> {
    if let Some(c) = remote {
        c.increment();
    }
    debug_assert!(
        false,
        "map_using_map: partition {partition} reached an instance that does not handle it"
    );
    // A blocking fetch: refused on an executor worker that runs the map's owners, where it
    // could wait on itself. A lookup then fails the job rather than read an empty partition.
    match map.partition_snapshot(partition).wait() {
        Ok(store) => slot.insert(store),
        Err(e) => panic!(
            "map_using_map on '{}': partition {partition} reached an instance that does not hold it, and fetching it failed: {e}",
            map.name()
        ),
    }
}

impl<T, K, V, F, R> Link<KeyedItem<K, T>> for MapLookupLink<K, V, F, R>
where
    T: Item,
    K: MapKey,
    V: MapValue,
    R: Item,
    F: Fn(T, Option<&V>) -> Option<R> + Send + Sync,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        let partitioner = self.map.service().table().partitioner();
        let mine = partitions_of(partitioner, ctx.global_index(), ctx.total_parallelism());
        self.partitions = vec![None; partitioner.count() as usize];
        let pending: Vec<_> = mine
            .iter()
            .map(|&p| (p, self.map.partition_snapshot(p)))
            .collect();
        for (p, store) in pending {
            self.partitions[p as usize] = Some(store.wait()?);
        }
        self.lookups = Some(ctx.metrics().counter("map_lookups"));
        self.remote = Some(ctx.metrics().counter("map_remote_lookups"));
        self.next.init(ctx)
    }

    fn push(&mut self, item: KeyedItem<K, T>) -> bool {
        let mut batch = vec![item];
        self.push_batch(&mut batch)
    }

    fn push_batch(&mut self, items: &mut Vec<KeyedItem<K, T>>) -> bool {
        let n = items.len() as u64;
        // Locals, not fields: the loop keeps the output's length and the stores' table in
        // registers instead of reloading and storing them through `self` per item.
        let mut out = std::mem::take(&mut self.out);
        out.reserve(items.len());
        let MapLookupLink {
            map,
            f,
            partitions,
            remote,
            ..
        } = self;
        let partitions = partitions.as_mut_slice();
        // Each lookup waits on a cache and TLB miss for its bucket. So that these misses
        // overlap, the loop prefetches the bucket of the item `LOOKUP_PREFETCH_DISTANCE` places
        // ahead before it looks up the current one: by the time the loop gets there, the
        // bucket is on its way or in the cache.
        let mut pending = items.drain(..);
        for ahead in pending.as_slice().iter().take(LOOKUP_PREFETCH_DISTANCE) {
            prefetch_lookup(partitions, ahead);
        }
        while let Some(KeyedItem {
            partition,
            key,
            item,
        }) = pending.next()
        {
            // `pending` starts after the current item: this is the item
            // `LOOKUP_PREFETCH_DISTANCE` places ahead, the first one not prefetched yet.
            if let Some(ahead) = pending.as_slice().get(LOOKUP_PREFETCH_DISTANCE - 1) {
                prefetch_lookup(partitions, ahead);
            }
            let slot = &mut partitions[partition as usize];
            let store = match slot {
                Some(store) => &*store,
                None => fetch_partition(map, remote.as_ref(), slot, partition),
            };
            if let Some(r) = f(item, store.get(&key)) {
                out.push(r);
            }
        }
        drop(pending);
        if let Some(c) = &self.lookups {
            c.add(n);
        }
        let room = self.next.push_batch(&mut out);
        self.out = out;
        room
    }

    delegate_to_next!();
}

#[cfg(test)]
mod tests {
    use weir_core::SnapshotWriter;
    use weir_maps::MapService;

    use super::*;
    use weir_exec::links::state::ChainEntries;

    /// Calls `commit` until the owners have answered.
    fn commit(sink: &mut MapSink<u64, u64>) {
        while !sink.commit().unwrap() {
            std::thread::yield_now();
        }
    }

    /// Saves as a head does: `prepare_save` until the owners have answered, then `save`.
    fn save(sink: &mut MapSink<u64, u64>, writer: &mut SnapshotWriter) {
        while !sink.prepare_save().unwrap() {
            std::thread::yield_now();
        }
        sink.save(&mut LinkWriter::head(writer)).unwrap();
    }

    fn transactional_sink(map: &PartitionedMap<u64, u64>) -> MapSink<u64, u64> {
        let mut sink = MapSink::new(map.clone());
        let ctx = ProcessorContext::new("map-sink", 0, 1, 1).with_guarantee(Guarantee::ExactlyOnce);
        sink.init(&ctx).unwrap();
        sink
    }

    #[test]
    fn with_snapshots_writes_show_only_once_their_snapshot_commits() {
        let service = MapService::new(2);
        let map = service.map::<u64, u64>("m").unwrap();
        map.put(1_000, 7).unwrap(); // not the job's: its partition is never touched
        let mut sink = transactional_sink(&map);
        let (mut outbox, _drains) = Outbox::for_test::<u64>(1, 16);
        for k in 0..100u64 {
            assert!(sink.push((k, k)));
        }
        assert!(sink.push((5, 50)), "a later value of a key");
        assert!(sink.flush(&mut outbox).unwrap());
        assert_eq!(
            map.len().unwrap(),
            1,
            "nothing is visible before a snapshot"
        );

        let mut first = SnapshotWriter::new();
        save(&mut sink, &mut first);
        assert_eq!(map.len().unwrap(), 1, "nor before the snapshot commits");
        commit(&mut sink);
        assert_eq!(map.len().unwrap(), 101);
        assert_eq!(map.get(&5).unwrap(), Some(50));

        // The next epoch is saved but never committed: the job fails here.
        for k in 100..150u64 {
            sink.push((k, k));
        }
        let mut second = SnapshotWriter::new();
        save(&mut sink, &mut second);
        let entries = second.into_entries();
        assert!(
            entries.iter().all(|e| e.partition.is_some()),
            "saved by partition"
        );

        // A new process: an empty map, restored from the second snapshot.
        let service = MapService::new(3);
        let fresh = service.map::<u64, u64>("m").unwrap();
        fresh.put(3, 99).unwrap(); // written after the snapshot: the restore takes it back
        let mut restored = transactional_sink(&fresh);
        restored
            .restore(&mut ChainEntries::new(entries).head())
            .unwrap();
        commit(&mut restored);
        let mut got: Vec<(u64, u64)> = (0..fresh.service().table().partition_count())
            .flat_map(|p| fresh.entries(p).unwrap())
            .collect();
        got.sort();
        let want: Vec<(u64, u64)> = (0..150u64)
            .map(|k| (k, if k == 5 { 50 } else { k }))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_key_of_another_instances_partition_fails_the_job_naming_the_map() {
        let service = MapService::new(1);
        let map = service.map::<u64, u64>("orders").unwrap();
        let mut sink = MapSink::new(map.clone());
        let ctx = ProcessorContext::new("map-sink", 0, 2, 1).with_guarantee(Guarantee::ExactlyOnce);
        sink.init(&ctx).unwrap();
        let theirs = (0..u64::MAX)
            .find(|k| Partitioner::default().partition_of(k) % 2 == 1)
            .unwrap();
        assert!(!sink.push((theirs, 1)));
        let (mut outbox, _drains) = Outbox::for_test::<u64>(1, 16);
        let err = sink.flush(&mut outbox).unwrap_err().to_string();
        assert!(
            err.contains("'orders'") && err.contains("partitioned by the map's key"),
            "{err}"
        );
    }
}
