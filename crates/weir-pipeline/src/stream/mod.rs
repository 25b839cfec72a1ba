//! Streams: infinite stages in event time, with watermarks, windows and stream joins.
//!
//! ```
//! use weir::prelude::*;
//! use weir::stream::{KeyedWindowResult, WindowDefinition};
//!
//! // Clicks (user, time in ms) arriving a little out of order.
//! let clicks = vec![("ann", 1_000), ("bob", 1_500), ("ann", 1_200), ("ann", 2_100), ("bob", 3_000)];
//! let p = Pipeline::new();
//! let (sink, out) = sinks::collection::list();
//! p.read_from(sources::stream::items(clicks))
//!     .with_timestamps(|c: &(&str, i64)| c.1, 500) // allow 500 ms of disorder
//!     .grouping_key(|c: &(&str, i64)| c.0.to_string())
//!     .window(WindowDefinition::tumbling(2_000))
//!     .aggregate(aggregate::counting())
//!     .write_to(sink);
//! p.run().unwrap();
//! let mut counts: Vec<(i64, String, u64)> =
//!     out.take().into_iter().map(|r: KeyedWindowResult<String, u64>| (r.start, r.key, r.value)).collect();
//! counts.sort();
//! assert_eq!(counts, [(0, "ann".into(), 2), (0, "bob".into(), 1), (2_000, "ann".into(), 1), (2_000, "bob".into(), 1)]);
//! ```
//!
//! A stream source gives a [`StreamSourceStage`]; choosing how items get their event time
//! ([`with_timestamps`](StreamSourceStage::with_timestamps),
//! [`with_native_timestamps`](StreamSourceStage::with_native_timestamps) or
//! [`with_ingestion_timestamps`](StreamSourceStage::with_ingestion_timestamps)) gives a
//! [`StreamStage`]. Each source instance sends a watermark, `highest time seen − allowed lag`,
//! after the items it covers; an item behind it is late, dropped and counted in the
//! `late_events` counter. A finite stream source ends with a watermark of +∞, so every window
//! closes. Every processor follows the minimum watermark of its inputs. A source instance that
//! reads nothing for the job's idle timeout (60 s by default, [`JobConfig::idle_timeout`], or
//! [`StreamSourceStage::with_idle_timeout`]) says so in band, and stops holding its consumers
//! back until it sends again; backpressure never makes a source idle.
//!
//! Inside, a stream stage carries [`Timestamped`] items through the same fused chains as a
//! batch stage: a `map` on a stream is a batch `map` that keeps the timestamp.
//!
//! [`JobConfig::idle_timeout`]: weir_core::JobConfig::idle_timeout

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use weir_core::{Item, PartitionKey};

use crate::graph::{HeadFn, NodeKind, StageType, TerminalFn, WatermarkUse};
use crate::pipeline::{BatchStage, JoinClause, Pipeline, Source, route_by, wrap_with};
use weir_exec::aggregate::AggregateOperation;
use weir_exec::async_io::AsyncOptions;
use weir_exec::links::join::KeyFn;
use weir_exec::links::link::{Link, erase, unerase};
use weir_exec::links::state::StateCodec;
use weir_exec::links::stream_join::{StreamJoin, StreamMerge};
use weir_exec::links::stream_source::EventTimePolicy;
use weir_exec::links::transform::ExpiringKeyedLink;
use weir_exec::links::window::{
    Frame, FrameAccumulate, Frames, RunningAggregate, SessionLink, SlidingAggregate, SlidingCombine,
};
use weir_io::sinks::Sink;

pub use weir_exec::event_time::{
    KeyedWindowResult, Timestamped, Window, WindowDefinition, WindowResult,
};
pub use weir_exec::links::state::Durable;
use weir_exec::links::timers::TimerKeyedLink;
pub use weir_exec::links::timers::Timers;
pub use weir_io::sources::stream::StreamSource;
use weir_io::sources::stream::StreamSourceParts;

impl<T: Item> Source for StreamSource<T> {
    type Stage = StreamSourceStage<T>;
    fn read_into(self, pipeline: &Pipeline) -> Self::Stage {
        StreamSourceStage::new(pipeline.clone(), self.into_parts())
    }
}

/// A stream source just read, before its event time is chosen.
pub struct StreamSourceStage<T> {
    pipeline: crate::Pipeline,
    source: StreamSourceParts<T>,
    idle_timeout: Option<Duration>,
}

impl<T: Item> StreamSourceStage<T> {
    pub(crate) fn new(pipeline: crate::Pipeline, source: StreamSourceParts<T>) -> Self {
        StreamSourceStage {
            pipeline,
            source,
            idle_timeout: None,
        }
    }

    /// How long a source instance may read nothing before it declares itself idle, and one
    /// of its partitions (see [`Emitter::emit_from`](weir_io::sources::Emitter::emit_from))
    /// before it stops holding the instance's watermark back. An idle instance tells its
    /// consumers in band, after everything it sent, and they stop waiting for its watermark
    /// until it sends again. Time the source spends held back by backpressure does not
    /// count. Default: the job's [`JobConfig::idle_timeout`](weir_core::JobConfig::idle_timeout)
    /// (60 s).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Takes each item's event time from `timestamp`, allowing items to arrive up to
    /// `allowed_lag` ms behind the highest time seen.
    pub fn with_timestamps(
        self,
        timestamp: impl Fn(&T) -> i64 + Send + Sync + 'static,
        allowed_lag: i64,
    ) -> StreamStage<T> {
        self.attach(EventTimePolicy {
            timestamp: Arc::new(timestamp),
            allowed_lag,
            idle_timeout: None, // set by attach
        })
    }

    /// Uses the time the source itself attaches to items (see
    /// [`StreamSource::with_native_timestamps`]).
    ///
    /// # Panics
    /// If the source has no native timestamps.
    pub fn with_native_timestamps(self, allowed_lag: i64) -> StreamStage<T> {
        let timestamp = self.source.native.clone().unwrap_or_else(|| {
            panic!(
                "stream source '{}' has no native timestamps",
                self.source.name
            )
        });
        self.attach(EventTimePolicy {
            timestamp,
            allowed_lag,
            idle_timeout: None, // set by attach
        })
    }

    /// Stamps each item with the wall-clock time it is read.
    pub fn with_ingestion_timestamps(self) -> StreamStage<T> {
        self.attach(EventTimePolicy {
            timestamp: Arc::new(|_: &T| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64)
            }),
            allowed_lag: 0,
            idle_timeout: None, // set by attach
        })
    }

    fn attach(self, mut policy: EventTimePolicy<T>) -> StreamStage<T> {
        policy.idle_timeout = self.idle_timeout;
        let head = Arc::clone(&self.source.head);
        let stage = self.pipeline.add_source_node::<Timestamped<T>>(
            self.source.name,
            self.source.parallelism,
            Arc::new(move |ctx, chain| head(ctx, chain, policy.clone())),
            self.source.pooled_parsing,
        );
        StreamStage { inner: stage }
    }
}

/// An infinite stage of items in event time. See the [module docs](self).
pub struct StreamStage<T> {
    inner: BatchStage<Timestamped<T>>,
}

impl<T> Clone for StreamStage<T> {
    fn clone(&self) -> Self {
        StreamStage {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Debug for StreamStage<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamStage")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<T: Item> StreamStage<T> {
    fn wrap<R>(inner: BatchStage<Timestamped<R>>) -> StreamStage<R> {
        StreamStage { inner }
    }

    /// [`wrap`](Self::wrap) for a stage that keeps each item's event time and passes
    /// watermarks on untouched: throttled watermarks serve it as well as every one.
    fn keeping_time<R: Item>(inner: BatchStage<Timestamped<R>>) -> StreamStage<R> {
        StreamStage {
            inner: inner.using_watermarks(WatermarkUse::Transparent),
        }
    }

    /// Renames the stage, as it appears in plans and errors.
    pub fn named(self, name: impl Into<String>) -> Self {
        StreamStage {
            inner: self.inner.named(name),
        }
    }

    /// Sets the number of instances of this stage's vertex on each member.
    pub fn local_parallelism(self, n: usize) -> Self {
        StreamStage {
            inner: self.inner.local_parallelism(n),
        }
    }

    /// Applies `f` to every item; the event time stays.
    pub fn map<R: Item>(&self, f: impl Fn(T) -> R + Send + Sync + 'static) -> StreamStage<R> {
        Self::keeping_time(self.inner.map(move |t: Timestamped<T>| Timestamped {
            timestamp: t.timestamp,
            item: f(t.item),
        }))
    }

    /// Keeps the items for which `f` is true.
    pub fn filter(&self, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> StreamStage<T> {
        Self::keeping_time(self.inner.filter(move |t: &Timestamped<T>| f(&t.item)))
    }

    /// Replaces every item by the items `f` returns, all at the item's event time.
    pub fn flat_map<R, I>(&self, f: impl Fn(T) -> I + Send + Sync + 'static) -> StreamStage<R>
    where
        R: Item,
        I: IntoIterator<Item = R> + 'static,
        I::IntoIter: Send,
    {
        Self::keeping_time(self.inner.flat_map(move |t: Timestamped<T>| {
            let timestamp = t.timestamp;
            f(t.item)
                .into_iter()
                .map(move |item| Timestamped { timestamp, item })
        }))
    }

    /// Maps and filters in one step: `f` returns `Some(result)` or nothing.
    pub fn filter_map<R: Item>(
        &self,
        f: impl Fn(T) -> Option<R> + Send + Sync + 'static,
    ) -> StreamStage<R> {
        Self::keeping_time(self.inner.filter_map(move |t: Timestamped<T>| {
            let timestamp = t.timestamp;
            f(t.item).map(|item| Timestamped { timestamp, item })
        }))
    }

    /// Maps with state kept per processor instance (see [`BatchStage::map_stateful`]).
    pub fn map_stateful<S, R>(
        &self,
        create: impl Fn() -> S + Send + Sync + 'static,
        f: impl Fn(&mut S, T) -> Option<R> + Send + Sync + 'static,
    ) -> StreamStage<R>
    where
        S: Send + 'static,
        R: Item,
    {
        Self::keeping_time(
            self.inner
                .map_stateful(create, move |s: &mut S, t: Timestamped<T>| {
                    let timestamp = t.timestamp;
                    f(s, t.item).map(|item| Timestamped { timestamp, item })
                }),
        )
    }

    /// Calls `f` on every item, passing it on unchanged.
    pub fn peek_with(&self, f: impl Fn(&T) + Send + Sync + 'static) -> StreamStage<T> {
        Self::keeping_time(self.inner.peek_with(move |t: &Timestamped<T>| f(&t.item)))
    }

    /// Spreads the items round-robin over the next stage's instances.
    pub fn rebalance(&self) -> StreamStage<T> {
        Self::keeping_time(self.inner.rebalance())
    }

    /// The items of this stream and of `other`; the watermark is the lower of the two.
    pub fn merge(&self, other: &StreamStage<T>) -> StreamStage<T> {
        Self::keeping_time(self.inner.merge(&other.inner))
    }

    /// Groups the items by `key`: for keyed windows and keyed state.
    pub fn grouping_key<K>(
        &self,
        key: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> KeyedStreamStage<T, K>
    where
        K: Item + Hash + Eq + PartitionKey,
    {
        KeyedStreamStage {
            stage: self.clone(),
            key: Arc::new(key),
        }
    }

    /// Cuts the stream into windows, for a non-keyed windowed aggregation.
    pub fn window(&self, window: WindowDefinition) -> WindowedStage<T> {
        WindowedStage {
            keyed: self.grouping_key(|_: &T| 0u8).window(window),
        }
    }

    /// Enriches each item from a batch stage read completely first (a lookup table): a left
    /// outer join, as [`BatchStage::hash_join`]. The item keeps its event time.
    pub fn hash_join<K, B, R>(
        &self,
        build: &BatchStage<B>,
        on: JoinClause<T, B, K>,
        merge: impl Fn(&T, Option<&B>) -> R + Send + Sync + 'static,
    ) -> StreamStage<R>
    where
        K: Item + Hash + Eq,
        B: Item,
        R: Item,
    {
        let (probe_key, build_key) = on.into_keys();
        let on = crate::join_on(
            move |t: &Timestamped<T>| probe_key(&t.item),
            move |b: &B| build_key(b),
        );
        Self::wrap(
            self.inner
                .hash_join(build, on, move |t: &Timestamped<T>, b| Timestamped {
                    timestamp: t.timestamp,
                    item: merge(&t.item, b),
                }),
        )
    }

    /// Joins with another stream: two items match when their keys are equal and they fall in
    /// the same window (tumbling windows only). `merge` gets the window and both items.
    ///
    /// # Panics
    /// If `window` is not tumbling.
    pub fn join_windowed<U, K, R>(
        &self,
        other: &StreamStage<U>,
        window: WindowDefinition,
        on: JoinClause<T, U, K>,
        merge: impl Fn(&Window, &T, &U) -> R + Send + Sync + 'static,
    ) -> StreamStage<R>
    where
        T: Durable,
        U: Item + Durable,
        K: Item + Hash + Eq + PartitionKey + Durable,
        R: Item,
    {
        assert!(
            matches!(window, WindowDefinition::Tumbling { .. }),
            "a windowed stream join needs tumbling windows"
        );
        self.join_streams(
            "join-windowed",
            other,
            Some(Frames::of(&window)),
            None,
            on,
            merge,
        )
    }

    /// Joins with another stream over all time: every pair with equal keys matches, whenever
    /// each arrives. Each side's items are kept for `ttl` ms of event time (`None`: for ever,
    /// which suits finite streams).
    pub fn join<U, K, R>(
        &self,
        other: &StreamStage<U>,
        on: JoinClause<T, U, K>,
        ttl: Option<i64>,
        merge: impl Fn(&T, &U) -> R + Send + Sync + 'static,
    ) -> StreamStage<R>
    where
        T: Durable,
        U: Item + Durable,
        K: Item + Hash + Eq + PartitionKey + Durable,
        R: Item,
    {
        self.join_streams(
            "join",
            other,
            None,
            ttl,
            on,
            move |_: &Window, t: &T, u: &U| merge(t, u),
        )
    }

    fn join_streams<U, K, R>(
        &self,
        name: &str,
        other: &StreamStage<U>,
        frames: Option<Frames>,
        ttl: Option<i64>,
        on: JoinClause<T, U, K>,
        merge: impl Fn(&Window, &T, &U) -> R + Send + Sync + 'static,
    ) -> StreamStage<R>
    where
        T: Durable,
        U: Item + Durable,
        K: Item + Hash + Eq + PartitionKey + Durable,
        R: Item,
    {
        let (left_key, right_key): (KeyFn<T, K>, KeyFn<U, K>) = on.into_keys();
        let merge: StreamMerge<T, U, R> = Arc::new(move |w, t, u| Some(merge(w, t, u)));
        let left_route = {
            let k = Arc::clone(&left_key);
            route_by::<Timestamped<T>, K>(Arc::new(move |t: &Timestamped<T>| k(&t.item)))
        };
        let right_route = {
            let k = Arc::clone(&right_key);
            route_by::<Timestamped<U>, K>(Arc::new(move |t: &Timestamped<U>| k(&t.item)))
        };
        let head: HeadFn = Arc::new(move |chain| {
            Box::new(StreamJoin::new(
                (Arc::clone(&left_key), Arc::clone(&right_key)),
                frames,
                ttl,
                Arc::clone(&merge),
                unerase::<Timestamped<R>>(chain),
                (
                    StateCodec::postcard(),
                    StateCodec::postcard(),
                    StateCodec::postcard(),
                ),
            ))
        });
        let kind = NodeKind::StreamJoin {
            head,
            left_route,
            right_route,
        };
        Self::wrap(self.inner.add_node(name, kind, vec![other.inner.node_id()]))
    }

    /// Writes every item (without its timestamp) to `sink`.
    pub fn write_to(&self, sink: Sink<T>) {
        self.inner
            .map(|t: Timestamped<T>| t.item)
            .named("strip-timestamps")
            .using_watermarks(WatermarkUse::Transparent)
            .write_to(sink);
    }

    /// The same items with their event times, as a batch-typed stage of [`Timestamped`]
    /// (for sinks that want the time).
    pub fn with_timestamp_items(&self) -> BatchStage<Timestamped<T>> {
        self.inner.clone()
    }
}

impl<T: Item + Debug> StreamStage<T> {
    /// Calls an async function per item (see [`BatchStage::map_async`]); each result keeps
    /// its input's event time. In unordered mode results still never cross a watermark: the
    /// watermark goes on only after every item that arrived before it.
    pub fn map_async<R, F, Fut, I, E>(&self, options: AsyncOptions<T, R>, f: F) -> StreamStage<R>
    where
        R: Item,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<I, E>> + Send + 'static,
        I: IntoIterator<Item = R>,
        E: Into<weir_core::BoxError>,
    {
        Self::wrap(
            self.inner
                .map_async(options.timestamped(), move |t: Timestamped<T>| {
                    let timestamp = t.timestamp;
                    let call = f(t.item);
                    async move {
                        call.await.map(|results| {
                            results
                                .into_iter()
                                .map(|item| Timestamped { timestamp, item })
                                .collect::<Vec<_>>()
                        })
                    }
                }),
        )
    }

    /// Calls an async function per batch of items (see [`BatchStage::map_async_batched`]);
    /// each result keeps the event time of the item at its position.
    pub fn map_async_batched<R, F, Fut, E>(
        &self,
        batch_size: usize,
        max_wait: std::time::Duration,
        parallelism: usize,
        options: AsyncOptions<T, R>,
        f: F,
    ) -> StreamStage<R>
    where
        R: Item,
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Vec<R>, E>> + Send + 'static,
        E: Into<weir_core::BoxError>,
    {
        let f = Arc::new(f);
        Self::wrap(self.inner.map_async_batched(
            batch_size,
            max_wait,
            parallelism,
            options.timestamped(),
            move |batch: Vec<Timestamped<T>>| {
                let (times, items): (Vec<i64>, Vec<T>) =
                    batch.into_iter().map(|t| (t.timestamp, t.item)).unzip();
                let call = f(items);
                async move {
                    // A wrong result count is the batched stage's error to report: keep the count.
                    call.await.map(|results| {
                        let last = times.last().copied().unwrap_or(i64::MIN);
                        results
                            .into_iter()
                            .enumerate()
                            .map(|(i, item)| Timestamped {
                                timestamp: times.get(i).copied().unwrap_or(last),
                                item,
                            })
                            .collect::<Vec<_>>()
                    })
                }
            },
        ))
    }
}

/// A stream whose items are grouped by a key. See [`StreamStage::grouping_key`].
pub struct KeyedStreamStage<T, K> {
    stage: StreamStage<T>,
    key: KeyFn<T, K>,
}

impl<T: Item, K: Item + Hash + Eq + PartitionKey> KeyedStreamStage<T, K> {
    /// Cuts each key's items into windows.
    pub fn window(&self, window: WindowDefinition) -> KeyedWindowedStage<T, K> {
        KeyedWindowedStage {
            stage: self.stage.clone(),
            key: Arc::clone(&self.key),
            window,
            single_stage: false,
        }
    }

    /// Maps with state per key. With `ttl`, a key's state is dropped once the watermark is
    /// `ttl` ms past the last item of that key; without, it lives for the whole stream.
    ///
    /// Each key's state, with its last event time, is saved in snapshots by key partition;
    /// hence `S` and `K` are [`Durable`].
    pub fn map_stateful<S, R>(
        &self,
        ttl: Option<i64>,
        create: impl Fn() -> S + Send + Sync + 'static,
        f: impl Fn(&mut S, &K, T) -> Option<R> + Send + Sync + 'static,
    ) -> StreamStage<R>
    where
        S: Durable,
        K: Durable,
        R: Item,
    {
        let key = Arc::clone(&self.key);
        let (create, f) = (Arc::new(create), Arc::new(f));
        let wrap = wrap_with::<Timestamped<T>, Timestamped<R>>(move |next| {
            Box::new(ExpiringKeyedLink {
                states: Default::default(),
                ttl: ttl.unwrap_or(i64::MAX),
                evicted_at: i64::MIN,
                key: Arc::clone(&key),
                create: Arc::clone(&create),
                f: Arc::clone(&f),
                next,
                codec: (StateCodec::postcard(), StateCodec::postcard()),
            })
        });
        let k = Arc::clone(&self.key);
        let route = route_by::<Timestamped<T>, K>(Arc::new(move |t: &Timestamped<T>| k(&t.item)));
        StreamStage::<T>::wrap(self.stage.inner.add_node(
            "map-stateful",
            NodeKind::Keyed { wrap, route },
            vec![],
        ))
    }
    /// Processes each key's items with a state and event-time timers, as Flink's keyed
    /// process functions do: for a result that is due at a time of the query's choosing (an
    /// auction's expiry, say), not at a window's end.
    ///
    /// `on_item(state, key, timestamp, item, timers)` updates the key's state (made by
    /// `create` for a key's first item) and may set timers ([`Timers::at`]). A timer at `t`
    /// fires once the watermark passes `t`, and the end of the input fires every timer:
    /// `on_timer(state, key, t, out)` appends results to `out`, which come out stamped `t`
    /// before the watermark goes on, so they are never late downstream; each key's timers
    /// fire in time order. `on_timer` returns whether to keep the key's state: `false`
    /// drops it with the key's other timers (a key seen again starts afresh).
    ///
    /// Items are not dropped as late here (the source did that); a timer set behind the
    /// watermark fires with the next one. Each key's state and timers are saved in snapshots
    /// by key partition; hence `S` and `K` are [`Durable`].
    ///
    /// ```
    /// use weir::prelude::*;
    ///
    /// // Each key's items in event-time order, numbered: a timer at each item's time
    /// // releases the buffered items up to it once no earlier item can come.
    /// let p = Pipeline::new();
    /// let (sink, out) = sinks::collection::list();
    /// p.read_from(sources::stream::items(vec![('a', 20i64), ('b', 5), ('a', 10), ('a', 30)]))
    ///     .with_timestamps(|e: &(char, i64)| e.1, 15)
    ///     .grouping_key(|e: &(char, i64)| e.0)
    ///     .process_with_timers(
    ///         || (Vec::<i64>::new(), 0u32),
    ///         |(buffer, _), _key, t, _e: (char, i64), timers| {
    ///             buffer.push(t);
    ///             timers.at(t);
    ///         },
    ///         |(buffer, released), key, t, out| {
    ///             buffer.sort_unstable();
    ///             let ready = buffer.partition_point(|&time| time <= t);
    ///             for time in buffer.drain(..ready) {
    ///                 *released += 1;
    ///                 out.push((*key, *released, time));
    ///             }
    ///             true // keep the count
    ///         },
    ///     )
    ///     .write_to(sink);
    /// p.run()?;
    /// let mut got = out.take();
    /// got.sort();
    /// assert_eq!(got, [('a', 1, 10), ('a', 2, 20), ('a', 3, 30), ('b', 1, 5)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Cost: a hash lookup per item, a B-tree entry per distinct timer time.
    pub fn process_with_timers<S, R>(
        &self,
        create: impl Fn() -> S + Send + Sync + 'static,
        on_item: impl Fn(&mut S, &K, i64, T, &mut Timers) + Send + Sync + 'static,
        on_timer: impl Fn(&mut S, &K, i64, &mut Vec<R>) -> bool + Send + Sync + 'static,
    ) -> StreamStage<R>
    where
        S: Durable,
        K: Durable,
        R: Item,
    {
        let key = Arc::clone(&self.key);
        let (create, on_item, on_timer) = (Arc::new(create), Arc::new(on_item), Arc::new(on_timer));
        let wrap = wrap_with::<Timestamped<T>, Timestamped<R>>(move |next| {
            Box::new(TimerKeyedLink::new(
                Arc::clone(&key),
                Arc::clone(&create),
                Arc::clone(&on_item),
                Arc::clone(&on_timer),
                next,
                (StateCodec::postcard(), StateCodec::postcard()),
            ))
        });
        let k = Arc::clone(&self.key);
        let route = route_by::<Timestamped<T>, K>(Arc::new(move |t: &Timestamped<T>| k(&t.item)));
        StreamStage::<T>::wrap(self.stage.inner.add_node(
            "process-with-timers",
            NodeKind::Keyed { wrap, route },
            vec![],
        ))
    }
}

/// A keyed stream cut into windows. See [`KeyedStreamStage::window`].
pub struct KeyedWindowedStage<T, K> {
    stage: StreamStage<T>,
    key: KeyFn<T, K>,
    window: WindowDefinition,
    single_stage: bool,
}

impl<T: Item, K: Item + Hash + Eq + PartitionKey> KeyedWindowedStage<T, K> {
    /// Aggregates in one stage: every item goes to its key's instance and is accumulated
    /// there, where by default each instance first accumulates its own items per frame and
    /// sends one partial per key and frame when the watermark passes the frame.
    ///
    /// The default moves fewer items across the shuffle when keys repeat within a frame, and
    /// is the faster for throughput. It sends each frame's partials in a burst when the frame
    /// closes, and the window's results wait for that burst; in one stage nothing is sent at
    /// the close, so results come out sooner. Pick this for latency, or when keys seldom
    /// repeat within a frame. Session windows always run in one stage.
    ///
    /// ```
    /// use weir_exec::aggregate::counting;
    /// use weir_exec::event_time::{KeyedWindowResult, WindowDefinition};
    /// use weir_io::{sinks, sources};
    /// use weir_pipeline::Pipeline;
    ///
    /// let p = Pipeline::new();
    /// let (sink, out) = sinks::collection::list();
    /// p.read_from(sources::stream::items([(1_i64, 'a'), (2, 'b'), (2_500, 'a')]))
    ///     .with_timestamps(|(t, _): &(i64, char)| *t, 0)
    ///     .grouping_key(|(_, k): &(i64, char)| *k)
    ///     .window(WindowDefinition::sliding(2_000, 1_000))
    ///     .single_stage()
    ///     .aggregate(counting())
    ///     .map(|r: KeyedWindowResult<char, u64>| (r.end, r.key, r.value))
    ///     .write_to(sink);
    /// p.run().unwrap();
    /// let mut rows = out.take();
    /// rows.sort();
    /// let a_b = [(1_000, 'a', 1), (1_000, 'b', 1), (2_000, 'a', 1), (2_000, 'b', 1)];
    /// assert_eq!(rows[..4], a_b);
    /// assert_eq!(rows[4..], [(3_000, 'a', 1), (4_000, 'a', 1)]);
    /// ```
    pub fn single_stage(mut self) -> Self {
        self.single_stage = true;
        self
    }

    /// A window stage of one link after an edge partitioned by the key: a session window,
    /// or a window in one stage. `link` makes the link over the rest of the chain.
    fn after_shuffle<R: Item>(
        &self,
        name: &str,
        watermarks: WatermarkUse,
        link: impl Fn(Box<dyn Link<Timestamped<R>>>) -> Box<dyn Link<Timestamped<T>>>
        + Send
        + Sync
        + 'static,
    ) -> StreamStage<R> {
        let wrap = wrap_with::<Timestamped<T>, Timestamped<R>>(link);
        let key = Arc::clone(&self.key);
        let route = route_by::<Timestamped<T>, K>(Arc::new(move |t: &Timestamped<T>| key(&t.item)));
        StreamStage::<T>::wrap(
            self.stage
                .inner
                .add_node(name, NodeKind::Keyed { wrap, route }, vec![])
                .using_watermarks(watermarks),
        )
    }

    /// Aggregates each key's items per window. A window's result comes out when the watermark
    /// passes its end, stamped with the window's last instant (`end - 1`).
    ///
    /// Open frames and sessions are saved in snapshots by key partition: keys and
    /// accumulators are [`Durable`].
    pub fn aggregate<Op>(&self, op: Op) -> StreamStage<KeyedWindowResult<K, Op::Output>>
    where
        Op: AggregateOperation<T>,
        Op::Acc: Durable,
        K: Durable,
    {
        let op = Arc::new(op);
        let window = self.window;
        let codec = || {
            (
                StateCodec::<K>::postcard(),
                StateCodec::<Op::Acc>::postcard(),
            )
        };
        if let WindowDefinition::Session { gap } = window {
            let key = Arc::clone(&self.key);
            return self.after_shuffle("session-window", WatermarkUse::Exact, move |next| {
                Box::new(SessionLink::new(
                    gap,
                    Arc::clone(&key),
                    Arc::clone(&op),
                    next,
                    codec(),
                ))
            });
        }
        // Frames end on multiples of the slide, epoch-aligned: a window closes only when the
        // watermark reaches one. The global window closes on the final watermark alone.
        let watermarks = match window {
            WindowDefinition::Tumbling { size } => WatermarkUse::Frames(size),
            WindowDefinition::Sliding { slide, .. } => WatermarkUse::Frames(slide),
            WindowDefinition::Global => WatermarkUse::Transparent,
            WindowDefinition::Session { .. } => WatermarkUse::Exact,
        };
        if self.single_stage {
            let key = Arc::clone(&self.key);
            // A sliding window whose operation deducts keeps each key's next value running;
            // any other folds each key's frames at the close.
            let running = matches!(window, WindowDefinition::Sliding { .. }) && op.has_deduct();
            return self.after_shuffle("window", watermarks, move |next| {
                if running {
                    Box::new(RunningAggregate::new(
                        &window,
                        Arc::clone(&key),
                        Arc::clone(&op),
                        next,
                        codec(),
                    ))
                } else {
                    Box::new(SlidingAggregate::new(
                        &window,
                        Arc::clone(&key),
                        Arc::clone(&op),
                        next,
                        codec(),
                    ))
                }
            });
        }
        let key = Arc::clone(&self.key);
        let acc_op = Arc::clone(&op);
        let accumulate: TerminalFn = Arc::new(move || {
            let link: Box<dyn Link<Timestamped<T>>> =
                Box::new(FrameAccumulate::<T, K, _, Op>::new(
                    &window,
                    Arc::clone(&key),
                    Arc::clone(&acc_op),
                    codec(),
                ));
            erase(link)
        });
        let combine: HeadFn = Arc::new(move |chain| {
            Box::new(SlidingCombine::<T, K, Op>::new(
                &window,
                Arc::clone(&op),
                unerase(chain),
                codec(),
            ))
        });
        let route =
            route_by::<Frame<K, Op::Acc>, K>(Arc::new(|f: &Frame<K, Op::Acc>| f.key.clone()));
        let kind = NodeKind::Aggregate {
            local: "accumulate",
            accumulate,
            partial: StageType::of::<Frame<K, Op::Acc>>(),
            route: Some(route),
            combine,
        };
        StreamStage::<T>::wrap(
            self.stage
                .inner
                .add_node("window", kind, vec![])
                .using_watermarks(watermarks),
        )
    }
}

/// A stream cut into windows, without a key. See [`StreamStage::window`].
pub struct WindowedStage<T> {
    keyed: KeyedWindowedStage<T, u8>,
}

impl<T: Item> WindowedStage<T> {
    /// Aggregates all items per window. A window's result comes out when the watermark passes
    /// its end. One instance combines them all.
    pub fn aggregate<Op>(&self, op: Op) -> StreamStage<WindowResult<Op::Output>>
    where
        Op: AggregateOperation<T>,
        Op::Acc: Durable,
    {
        self.keyed.aggregate(op).map(|r| WindowResult {
            start: r.start,
            end: r.end,
            value: r.value,
        })
    }
}
