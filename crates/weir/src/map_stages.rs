//! Pipeline stages over partitioned maps ([`weir_maps`]): reading a map
//! ([`sources::map`](crate::sources::map)), writing one ([`sinks::map`](crate::sinks::map)) and
//! enriching items by keyed lookup ([`BatchStage::map_using_map`]).
//!
//! ```
//! use weir::maps::MapService;
//! use weir::{Pipeline, sinks, sources};
//!
//! let service = MapService::new(2);
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
//! Every stage uses the map's partitioning ([`weir_partition`]), which is also the one
//! partitioned edges use: instance `i` of a vertex with `n` instances handles the partitions
//! [`Partitioner::owner_table`](weir_core::Partitioner::owner_table)`(n)` gives it.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_core::{BoxError, Counter, Edge, Item, Partitioner, ProcessorContext, ProcessorResult};
use weir_maps::{MapKey, MapValue, PartitionedMap, Pending, Store};

use crate::connector::{Emitter, SinkWriter, SourceReader};
use crate::exec::link::{Link, delegate_to_next};
use crate::graph::RouteFn;
use crate::pipeline::{BatchStage, wrap_with};
use crate::sinks::Sink;
use crate::sources::BatchSource;

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

/// Puts every `(key, value)` pair into `map`. Each instance groups its items by partition and
/// sends each group to the partition's owner in one message, so every entry is put by its
/// owner and no extra edge is needed: a `grouping_key(..).aggregate(..)` written here adds no
/// vertex. At most 8 groups per instance are in flight; then the sink reports no room.
///
/// With snapshots the sink is at-least-once: puts of a replayed item put the same value
/// again. The map itself lives in memory; [`PartitionedMap::save`] keeps it across restarts.
pub fn sink<K: MapKey, V: MapValue>(map: &PartitionedMap<K, V>) -> Sink<(K, V)> {
    let map = map.clone();
    Sink::new(format!("map-sink({})", map.name()), None, move |_| {
        MapWriter {
            map: map.clone(),
            buffer: FxHashMap::default(),
            buffered: 0,
            in_flight: Vec::new(),
        }
    })
}

/// Items a map sink instance buffers before sending them to the owners.
const SINK_BATCH: usize = 4096;
/// Messages a map sink instance may have in flight before it reports no room.
const SINK_IN_FLIGHT: usize = 8;

struct MapWriter<K, V> {
    map: PartitionedMap<K, V>,
    buffer: FxHashMap<u32, Vec<(K, V)>>,
    buffered: usize,
    in_flight: Vec<Pending<usize>>,
}

impl<K: MapKey, V: MapValue> MapWriter<K, V> {
    fn send(&mut self) {
        for (partition, entries) in self.buffer.drain() {
            self.in_flight
                .push(self.map.put_partition_async(partition, entries));
        }
        self.buffered = 0;
    }

    /// Drops the answered messages; fails on the first failed one.
    fn reap(&mut self) -> Result<(), BoxError> {
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
}

impl<K: MapKey, V: MapValue> SinkWriter for MapWriter<K, V> {
    type Item = (K, V);

    fn write(&mut self, (key, value): (K, V)) -> Result<(), BoxError> {
        let partition = self.map.partition_of(&key);
        self.buffer.entry(partition).or_default().push((key, value));
        self.buffered += 1;
        if self.buffered >= SINK_BATCH {
            self.send();
        }
        Ok(())
    }

    fn has_room(&mut self) -> Result<bool, BoxError> {
        self.reap()?;
        Ok(self.in_flight.len() < SINK_IN_FLIGHT)
    }

    fn poll_close(&mut self) -> Result<bool, BoxError> {
        self.send();
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
    /// unless the routing disagrees; such a lookup is then fetched from the owner, blocking).
    ///
    /// Cost per item: `key_fn` and the key's partition (XXH3) once, on the sending side,
    /// where the key travels with the item; one hash-map read on the receiving side.
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
    let store = map.partition_snapshot(partition).wait().unwrap_or_default();
    slot.insert(store)
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
        let MapLookupLink {
            map,
            f,
            partitions,
            out,
            remote,
            ..
        } = self;
        // The loop holds no hashing of its own but the lookup's: the hash-map reads miss the
        // cache, and a short loop body lets the processor keep several of them in flight.
        for KeyedItem {
            partition,
            key,
            item,
        } in items.drain(..)
        {
            let slot = &mut partitions[partition as usize];
            let store = match slot {
                Some(store) => &*store,
                None => fetch_partition(map, remote.as_ref(), slot, partition),
            };
            if let Some(r) = f(item, store.get(&key)) {
                out.push(r);
            }
        }
        if let Some(c) = &self.lookups {
            c.add(n);
        }
        self.next.push_batch(&mut self.out)
    }

    delegate_to_next!();
}
