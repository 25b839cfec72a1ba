//! Async stages on [`BatchStage`]: calls to outside services that never block a worker. See
//! [`weir_exec::async_io`].

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use weir_core::{BoxError, Item};

use super::BatchStage;
use crate::error::Misuse;
use crate::graph::{HeadFn, NodeKind};
use weir_exec::async_io::call::{MakeCall, batch_call, item_call};
use weir_exec::async_io::{AsyncOptions, OutputOrder, ServiceFactory};
use weir_exec::links::async_map::{AsyncMapHead, AsyncSpec, Units};
use weir_exec::links::link::unerase;

impl<T: Item + Debug> BatchStage<T> {
    /// Calls `f` for every item on the shared async runtime and emits the results of the
    /// future it returns: zero or more per item, in input order or in completion order as
    /// `options` says.
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir::async_io::AsyncOptions;
    /// use weir::prelude::*;
    ///
    /// let p = Pipeline::new();
    /// let (sink, results) = sinks::collection::list();
    /// p.read_from(sources::collection::items(1..=20u64))
    ///     .map_async(AsyncOptions::ordered().capacity(8), |x: u64| async move {
    ///         tokio::time::sleep(Duration::from_millis(x % 3)).await; // a remote call
    ///         Ok::<_, std::io::Error>(vec![x * 10])
    ///     })
    ///     .local_parallelism(1)
    ///     .write_to(sink);
    /// p.run().unwrap();
    /// assert_eq!(results.take(), (1..=20u64).map(|x| x * 10).collect::<Vec<_>>());
    /// ```
    ///
    /// Each instance keeps at most `options.limits().capacity` items in flight and takes no input
    /// while full: backpressure, never blocking. The returned future runs on the runtime of
    /// [`weir_exec::async_io::runtime`], so it may await any tokio I/O or timer; `f` itself is
    /// called there too. An error from the future fails the job (after the retries `options`
    /// allows), at once, without waiting for the other items; a timeout fails it too unless
    /// a fallback is set. Errors name the item by its `Debug` text.
    ///
    /// The stage is a vertex of its own, fed round-robin: with several instances, each one
    /// keeps its own input's order. Give it `local_parallelism(1)` (and a single-instance
    /// input) for one global order.
    ///
    /// Cost per item on the worker: one clone of the item, one task spawn, one channel
    /// message back; the call itself runs off the worker.
    pub fn map_async<R, F, Fut, I, E>(&self, options: AsyncOptions<T, R>, f: F) -> BatchStage<R>
    where
        R: Item,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<I, E>> + Send + 'static,
        I: IntoIterator<Item = R>,
        E: Into<BoxError>,
    {
        let call = item_call(f);
        let make_call: MakeCall<T, R> = Arc::new(move || Ok(Arc::clone(&call)));
        let units = Units {
            max_units: options.limits().capacity,
            batch_size: 1,
            max_wait: Duration::ZERO,
        };
        self.async_stage("map-async", options, units, make_call)
    }

    /// [`map_async`](Self::map_async) with a service shared by every instance in the
    /// process, built once by `service` (Jet's `mapUsingServiceAsync`): `f` gets the service
    /// and the item.
    ///
    /// ```
    /// use weir::async_io::{AsyncOptions, ServiceFactory};
    /// use weir::prelude::*;
    ///
    /// // A stand-in for a pooled client: cheap to share, built once per process.
    /// struct Client { rate: u64 }
    /// let client = ServiceFactory::new(|| Ok::<_, std::io::Error>(Client { rate: 3 }));
    ///
    /// let p = Pipeline::new();
    /// let (sink, results) = sinks::collection::list();
    /// p.read_from(sources::collection::items(vec![1u64, 2]))
    ///     .map_async_using(&client, AsyncOptions::ordered(), |c: &Client, x: u64| {
    ///         let rate = c.rate; // take what the future needs: it must be 'static
    ///         async move { Ok::<_, std::io::Error>(Some(x * rate)) }
    ///     })
    ///     .write_to(sink);
    /// p.run().unwrap();
    /// let mut out = results.take();
    /// out.sort();
    /// assert_eq!(out, [3, 6]);
    /// ```
    ///
    /// The service is created in the first instance's `init`: a failure refuses the job.
    pub fn map_async_using<S, R, F, Fut, I, E>(
        &self,
        service: &ServiceFactory<S>,
        options: AsyncOptions<T, R>,
        f: F,
    ) -> BatchStage<R>
    where
        S: Send + Sync + 'static,
        R: Item,
        F: Fn(&S, T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<I, E>> + Send + 'static,
        I: IntoIterator<Item = R>,
        E: Into<BoxError>,
    {
        let f = Arc::new(f);
        let service = service.clone();
        let make_call: MakeCall<T, R> = Arc::new(move || {
            let s = service.get()?;
            let f = Arc::clone(&f);
            Ok(item_call(move |item: T| f(&s, item)))
        });
        let units = Units {
            max_units: options.limits().capacity,
            batch_size: 1,
            max_wait: Duration::ZERO,
        };
        self.async_stage("map-async", options, units, make_call)
    }

    /// Calls `f` with batches of up to `batch_size` items and emits the results, which must
    /// match the batch's items one to one, in order (seed 004's scoring pattern).
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir::async_io::AsyncOptions;
    /// use weir::prelude::*;
    ///
    /// let p = Pipeline::new();
    /// let (sink, results) = sinks::collection::list();
    /// p.read_from(sources::collection::items(0..100u32))
    ///     .map_async_batched(16, Duration::from_millis(5), 4, AsyncOptions::ordered(), |batch: Vec<u32>| async move {
    ///         // one request for the whole batch, one score per item
    ///         Ok::<_, std::io::Error>(batch.iter().map(|x| f64::from(*x) / 2.0).collect())
    ///     })
    ///     .local_parallelism(1)
    ///     .write_to(sink);
    /// p.run().unwrap();
    /// assert_eq!(results.take(), (0..100u32).map(|x| f64::from(x) / 2.0).collect::<Vec<_>>());
    /// ```
    ///
    /// A batch is sent when it is full, when its first item has waited `max_wait`, before a
    /// watermark, and at the end of the input. At most `parallelism` batches are in flight
    /// per instance, so at most `parallelism × batch_size` items are being called plus one
    /// batch being filled; then the stage takes no input. Ordering, timeout (per batch),
    /// retries (of the whole batch) and the watermark rule are as in
    /// [`map_async`](Self::map_async); `options.limits().capacity` is not used. A batch that comes
    /// back with the wrong number of results fails with
    /// [`AsyncError::ResultCount`](weir_exec::async_io::AsyncError::ResultCount), which the
    /// retry strategy treats like any error. Errors name the batch by its size and first
    /// item.
    pub fn map_async_batched<R, F, Fut, E>(
        &self,
        batch_size: usize,
        max_wait: Duration,
        parallelism: usize,
        options: AsyncOptions<T, R>,
        f: F,
    ) -> BatchStage<R>
    where
        R: Item,
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<R>, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let call = batch_call(f);
        let make_call: MakeCall<T, R> = Arc::new(move || Ok(Arc::clone(&call)));
        let units = Units {
            max_units: parallelism,
            batch_size,
            max_wait,
        };
        self.async_stage("map-async-batched", options, units, make_call)
    }

    /// [`map_async_batched`](Self::map_async_batched) with a service shared by every
    /// instance in the process, built once by `service`: `f` gets the service and the batch.
    pub fn map_async_batched_using<S, R, F, Fut, E>(
        &self,
        service: &ServiceFactory<S>,
        batch_size: usize,
        max_wait: Duration,
        parallelism: usize,
        options: AsyncOptions<T, R>,
        f: F,
    ) -> BatchStage<R>
    where
        S: Send + Sync + 'static,
        R: Item,
        F: Fn(&S, Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<R>, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let f = Arc::new(f);
        let service = service.clone();
        let make_call: MakeCall<T, R> = Arc::new(move || {
            let s = service.get()?;
            let f = Arc::clone(&f);
            Ok(batch_call(move |batch: Vec<T>| f(&s, batch)))
        });
        let units = Units {
            max_units: parallelism,
            batch_size,
            max_wait,
        };
        self.async_stage("map-async-batched", options, units, make_call)
    }

    fn async_stage<R: Item>(
        &self,
        name: &str,
        options: AsyncOptions<T, R>,
        units: Units,
        make_call: MakeCall<T, R>,
    ) -> BatchStage<R> {
        let problem = if units.max_units == 0 {
            Some(if units.batch_size == 1 {
                "the capacity must be at least 1"
            } else {
                "the parallelism must be at least 1"
            })
        } else if units.batch_size == 0 {
            Some("the batch size must be at least 1")
        } else if options.limits().timeout.is_zero() {
            Some("the timeout must be longer than zero")
        } else {
            None
        };
        if let Some(problem) = problem {
            self.graph.borrow_mut().errors.push(Misuse::InvalidStage {
                stage: name.to_string(),
                problem: problem.to_string(),
            });
        }
        let ordered = options.limits().order == OutputOrder::Ordered;
        let spec = Arc::new(AsyncSpec::new(options, units, make_call));
        let head: HeadFn = Arc::new(move |chain| {
            Box::new(AsyncMapHead::new(Arc::clone(&spec), unerase::<R>(chain)))
        });
        self.add(name, NodeKind::AsyncMap { head, ordered }, vec![self.node])
    }
}
