//! How an async stage calls its service: ordering, capacity, timeout, retries, fallback.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use weir_backoff::Backoff;

use serde::Serialize;

use crate::event_time::Timestamped;
use serde::de::DeserializeOwned;

/// The order in which an async stage emits its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputOrder {
    /// In input order: a slow item holds back the results of the items after it. Flink's
    /// `orderedWait`.
    Ordered,
    /// In completion order, but never across a watermark: a watermark goes out only after
    /// every item that arrived before it, and no result of an item after it goes out before
    /// it. Flink's `unorderedWait`.
    Unordered,
}

/// When and how often a failed call is tried again.
///
/// `max_attempts` counts every call, the first one included: `fixed(d, 3)` calls at most
/// three times. The per-item timeout covers the first call through the last retry, so a
/// strategy whose delays outlast the timeout is cut short by it.
///
/// ```
/// use std::time::Duration;
/// use weir::async_io::RetryStrategy;
///
/// let s = RetryStrategy::exponential(Duration::from_millis(10), 2.0, Duration::from_millis(50), 5);
/// let delays: Vec<_> = (2..=6).map(|n| s.delay_before(n)).collect();
/// assert_eq!(delays, [
///     Some(Duration::from_millis(10)),
///     Some(Duration::from_millis(20)),
///     Some(Duration::from_millis(40)),
///     Some(Duration::from_millis(50)), // capped
///     None,                            // a sixth call is past max_attempts
/// ]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryStrategy {
    /// One call, no retry. The default.
    None,
    /// Retries after the same delay each time.
    Fixed {
        /// The pause before each retry.
        delay: Duration,
        /// Calls in all, the first included.
        max_attempts: u32,
    },
    /// Retries after `initial`, then a delay `multiplier` times longer each time, capped at
    /// `max_delay`.
    Exponential {
        /// The pause before the first retry.
        initial: Duration,
        /// The growth factor of the pause (at least 1).
        multiplier: f64,
        /// The longest pause.
        max_delay: Duration,
        /// Calls in all, the first included.
        max_attempts: u32,
    },
}

impl RetryStrategy {
    /// Retries after `delay`, making at most `max_attempts` calls in all.
    pub fn fixed(delay: Duration, max_attempts: u32) -> Self {
        RetryStrategy::Fixed {
            delay,
            max_attempts,
        }
    }

    /// Retries with exponential backoff: `initial`, `initial * multiplier`, ... capped at
    /// `max_delay`, making at most `max_attempts` calls in all. A multiplier below 1 counts
    /// as 1.
    pub fn exponential(
        initial: Duration,
        multiplier: f64,
        max_delay: Duration,
        max_attempts: u32,
    ) -> Self {
        RetryStrategy::Exponential {
            initial,
            multiplier,
            max_delay,
            max_attempts,
        }
    }

    /// The most calls made for one item (or batch), the first included; at least 1.
    pub fn max_attempts(&self) -> u32 {
        match *self {
            RetryStrategy::None => 1,
            RetryStrategy::Fixed { max_attempts, .. }
            | RetryStrategy::Exponential { max_attempts, .. } => max_attempts.max(1),
        }
    }

    /// The pause before call number `attempt` (2 for the first retry), or `None` when that
    /// call is past `max_attempts` (or `attempt` is below 2).
    pub fn delay_before(&self, attempt: u32) -> Option<Duration> {
        if attempt < 2 || attempt > self.max_attempts() {
            return None;
        }
        match *self {
            RetryStrategy::None => None,
            RetryStrategy::Fixed { delay, .. } => Some(delay),
            RetryStrategy::Exponential {
                initial,
                multiplier,
                max_delay,
                ..
            } => Some(Backoff::new(initial, multiplier, max_delay).pause(attempt - 2)),
        }
    }
}

/// Decides whether a failed call is retried.
pub type ErrorPredicate = Arc<dyn Fn(&(dyn StdError + 'static)) -> bool + Send + Sync>;
/// Decides whether a successful call's results call for a retry.
pub type ResultPredicate<R> = Arc<dyn Fn(&[R]) -> bool + Send + Sync>;
/// Replaces an item whose call timed out.
pub type Fallback<T, R> = Arc<dyn Fn(T) -> Vec<R> + Send + Sync>;
/// Names an item in an error.
pub type Describe<T> = Arc<dyn Fn(&T) -> String + Send + Sync>;

/// Encodes the inputs in flight for a snapshot.
pub struct Codec<T> {
    /// Encodes the inputs in flight into a snapshot value.
    pub encode: Encode<T>,
    /// Decodes what [`encode`](Self::encode) wrote.
    pub decode: Decode<T>,
}

/// Encodes a unit's inputs for a snapshot entry.
pub type Encode<T> = Arc<dyn Fn(&[T]) -> Result<Vec<u8>, String> + Send + Sync>;
/// Decodes a snapshot entry back into a unit's inputs.
pub type Decode<T> = Arc<dyn Fn(&[u8]) -> Result<Vec<T>, String> + Send + Sync>;

impl<T> Clone for Codec<T> {
    fn clone(&self) -> Self {
        Codec {
            encode: Arc::clone(&self.encode),
            decode: Arc::clone(&self.decode),
        }
    }
}

fn encode<T: Serialize>(items: &[T]) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(items).map_err(|e| e.to_string())
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<Vec<T>, String> {
    postcard::from_bytes(bytes).map_err(|e| e.to_string())
}

/// What [`AsyncOptions::limits`] reports: the settings an async stage checks and plans by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncLimits {
    /// Whether results keep the input's order.
    pub order: OutputOrder,
    /// Items in flight per instance, at most.
    pub capacity: usize,
    /// Time per item from its first call through its last retry.
    pub timeout: Duration,
}

/// The retry settings a call runs under.
pub struct RetryPolicy<R> {
    /// The delays between attempts, and how many there are.
    pub strategy: RetryStrategy,
    /// `None`: every error is retried (while attempts remain).
    pub on_error: Option<ErrorPredicate>,
    /// `None`: a successful call is never retried.
    pub on_result: Option<ResultPredicate<R>>,
}

impl<R> RetryPolicy<R> {
    /// Whether the error `e` is retried (while attempts remain).
    pub fn retries_error(&self, e: &(dyn StdError + 'static)) -> bool {
        self.on_error.as_ref().is_none_or(|p| p(e))
    }

    /// Whether a call that returned `results` is retried (while attempts remain).
    pub fn retries_result(&self, results: &[R]) -> bool {
        self.on_result.as_ref().is_some_and(|p| p(results))
    }
}

/// The default capacity: items in flight per processor instance.
pub const DEFAULT_CAPACITY: usize = 100;
/// The default per-item timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How an async stage calls its service. Build it with [`ordered`](Self::ordered) or
/// [`unordered`](Self::unordered) and the setters; pass it to
/// `weir::BatchStage::map_async` and its siblings.
///
/// ```
/// use std::time::Duration;
/// use weir::async_io::{AsyncOptions, RetryStrategy};
///
/// let options: AsyncOptions<u64, String> = AsyncOptions::unordered()
///     .capacity(50)
///     .timeout(Duration::from_secs(2))
///     .retry(RetryStrategy::fixed(Duration::from_millis(100), 3))
///     .retry_on_empty()
///     .on_timeout(|x| vec![format!("{x}: no answer")]);
/// ```
///
/// Defaults: capacity [`DEFAULT_CAPACITY`], timeout [`DEFAULT_TIMEOUT`], no retry, a
/// timeout fails the job, items described by their `Debug` text, no snapshot support.
pub struct AsyncOptions<T, R> {
    pub(crate) order: OutputOrder,
    pub(crate) capacity: usize,
    pub(crate) timeout: Duration,
    pub(crate) strategy: RetryStrategy,
    pub(crate) on_error: Option<ErrorPredicate>,
    pub(crate) on_result: Option<ResultPredicate<R>>,
    pub(crate) fallback: Option<Fallback<T, R>>,
    pub(crate) describe: Option<Describe<T>>,
    pub(crate) codec: Option<Codec<T>>,
}

impl<T, R> fmt::Debug for AsyncOptions<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncOptions")
            .field("order", &self.order)
            .field("capacity", &self.capacity)
            .field("timeout", &self.timeout)
            .field("retry", &self.strategy)
            .field("retry_if", &self.on_error.is_some())
            .field("retry_on_result", &self.on_result.is_some())
            .field("fallback", &self.fallback.is_some())
            .field("snapshots", &self.codec.is_some())
            .finish()
    }
}

impl<T, R> Clone for AsyncOptions<T, R> {
    fn clone(&self) -> Self {
        AsyncOptions {
            order: self.order,
            capacity: self.capacity,
            timeout: self.timeout,
            strategy: self.strategy,
            on_error: self.on_error.clone(),
            on_result: self.on_result.clone(),
            fallback: self.fallback.clone(),
            describe: self.describe.clone(),
            codec: self.codec.clone(),
        }
    }
}

impl<T, R> AsyncOptions<T, R> {
    fn with_order(order: OutputOrder) -> Self {
        AsyncOptions {
            order,
            capacity: DEFAULT_CAPACITY,
            timeout: DEFAULT_TIMEOUT,
            strategy: RetryStrategy::None,
            on_error: None,
            on_result: None,
            fallback: None,
            describe: None,
            codec: None,
        }
    }

    /// Results in input order.
    pub fn ordered() -> Self {
        Self::with_order(OutputOrder::Ordered)
    }

    /// Results in completion order, never across a watermark.
    pub fn unordered() -> Self {
        Self::with_order(OutputOrder::Unordered)
    }

    /// Sets the output order.
    pub fn order(mut self, order: OutputOrder) -> Self {
        self.order = order;
        self
    }

    /// The most items in flight per processor instance (default 100). When that many are
    /// waiting, the stage takes no more input: backpressure, not blocking. Completed results
    /// that wait for an earlier item (ordered mode) count as in flight.
    ///
    /// `map_async_batched` bounds batches in flight
    /// by its `parallelism` argument instead and does not use this.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The time an item (or a batch) may take, from its first call through its last retry
    /// (default 30 s). Then the call is cancelled, and the fallback set with
    /// [`on_timeout`](Self::on_timeout) replaces it; without one, the job fails with
    /// [`AsyncError::Timeout`](super::AsyncError::Timeout) naming the item. A result that
    /// arrives later is ignored.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries failed calls with `strategy`. Every error is retried unless
    /// [`retry_if`](Self::retry_if) narrows it.
    pub fn retry(mut self, strategy: RetryStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Retries only the errors for which `predicate` is true; the others fail the job at once.
    /// The error is the one the call returned, boxed: use `downcast_ref` to inspect it.
    pub fn retry_if(
        mut self,
        predicate: impl Fn(&(dyn StdError + 'static)) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.on_error = Some(Arc::new(predicate));
        self
    }

    /// Also retries a call that succeeded with no result. When the attempts run out, the
    /// last (empty) result stands.
    pub fn retry_on_empty(self) -> Self {
        self.retry_if_result(|results: &[R]| results.is_empty())
    }

    /// Also retries a call whose results `predicate` rejects (returns true for). When the
    /// attempts run out, the last results stand.
    pub fn retry_if_result(
        mut self,
        predicate: impl Fn(&[R]) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.on_result = Some(Arc::new(predicate));
        self
    }

    /// On timeout, emits `fallback(item)` in place of the item's results instead of failing
    /// the job. In a batched stage it is called for each item of the batch.
    pub fn on_timeout(mut self, fallback: impl Fn(T) -> Vec<R> + Send + Sync + 'static) -> Self {
        self.fallback = Some(Arc::new(fallback));
        self
    }

    /// How errors name an item (default: its `Debug` text, cut at 200 characters). For
    /// example `|row| format!("id {}", row.id)`.
    pub fn describe_with(
        mut self,
        describe: impl Fn(&T) -> String + Send + Sync + 'static,
    ) -> Self {
        self.describe = Some(Arc::new(describe));
        self
    }

    /// Lets the stage save the items it has in flight in a snapshot (encoded with
    /// `postcard`), and call them again on restore. Without it, a snapshot taken while items
    /// are in flight fails with
    /// [`AsyncError::SnapshotUnsupported`](super::AsyncError::SnapshotUnsupported).
    pub fn snapshot_inputs(mut self) -> Self
    where
        T: Serialize + DeserializeOwned + 'static,
    {
        self.codec = Some(Codec {
            encode: Arc::new(encode::<T>),
            decode: Arc::new(decode::<T>),
        });
        self
    }

    /// The same options for a stream stage, whose items carry their event time: every
    /// function sees the item, and results keep the input's time.
    pub fn timestamped(self) -> AsyncOptions<Timestamped<T>, Timestamped<R>>
    where
        T: Clone + Send + 'static,
        R: Clone + Send + 'static,
    {
        let on_result = self.on_result.map(|p| -> ResultPredicate<Timestamped<R>> {
            Arc::new(move |results: &[Timestamped<R>]| {
                let items: Vec<R> = results.iter().map(|r| r.item.clone()).collect();
                p(&items)
            })
        });
        let fallback = self
            .fallback
            .map(|f| -> Fallback<Timestamped<T>, Timestamped<R>> {
                Arc::new(move |t: Timestamped<T>| {
                    let timestamp = t.timestamp;
                    f(t.item)
                        .into_iter()
                        .map(|item| Timestamped { timestamp, item })
                        .collect()
                })
            });
        let describe = self.describe.map(|d| -> Describe<Timestamped<T>> {
            Arc::new(move |t: &Timestamped<T>| d(&t.item))
        });
        let codec = self.codec.map(|c| {
            let (encode_items, decode_items) = (c.encode, c.decode);
            Codec {
                encode: Arc::new(move |items: &[Timestamped<T>]| {
                    let times: Vec<i64> = items.iter().map(|t| t.timestamp).collect();
                    let inner: Vec<T> = items.iter().map(|t| t.item.clone()).collect();
                    encode(&[(times, encode_items(&inner)?)])
                })
                    as Arc<dyn Fn(&[Timestamped<T>]) -> Result<Vec<u8>, String> + Send + Sync>,
                decode: Arc::new(move |bytes: &[u8]| {
                    let mut parts: Vec<(Vec<i64>, Vec<u8>)> = decode(bytes)?;
                    let (times, inner) = parts.pop().ok_or("an empty snapshot entry")?;
                    let items = decode_items(&inner)?;
                    if items.len() != times.len() {
                        return Err("snapshot entry: times and items differ in number".to_string());
                    }
                    Ok(times
                        .into_iter()
                        .zip(items)
                        .map(|(timestamp, item)| Timestamped { timestamp, item })
                        .collect())
                }),
            }
        });
        AsyncOptions {
            order: self.order,
            capacity: self.capacity,
            timeout: self.timeout,
            strategy: self.strategy,
            on_error: self.on_error,
            on_result,
            fallback,
            describe,
            codec,
        }
    }

    /// The order, capacity and timeout these options set, for the stage that runs them.
    pub fn limits(&self) -> AsyncLimits {
        AsyncLimits {
            order: self.order,
            capacity: self.capacity,
            timeout: self.timeout,
        }
    }

    /// The retry settings a call of these options runs under. Cost: two `Arc` clones.
    pub fn policy(&self) -> RetryPolicy<R> {
        RetryPolicy {
            strategy: self.strategy,
            on_error: self.on_error.clone(),
            on_result: self.on_result.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_and_exponential_schedules() {
        let fixed = RetryStrategy::fixed(Duration::from_millis(5), 3);
        assert_eq!(fixed.max_attempts(), 3);
        assert_eq!(fixed.delay_before(1), None);
        assert_eq!(fixed.delay_before(2), Some(Duration::from_millis(5)));
        assert_eq!(fixed.delay_before(3), Some(Duration::from_millis(5)));
        assert_eq!(fixed.delay_before(4), None);
        let none = RetryStrategy::None;
        assert_eq!(none.max_attempts(), 1);
        assert_eq!(none.delay_before(2), None);
        let slow =
            RetryStrategy::exponential(Duration::from_secs(1), 0.5, Duration::from_secs(9), 3);
        assert_eq!(
            slow.delay_before(3),
            Some(Duration::from_secs(1)),
            "a multiplier below 1 counts as 1"
        );
        assert_eq!(RetryStrategy::fixed(Duration::ZERO, 0).max_attempts(), 1);
    }

    #[test]
    fn predicates() {
        #[derive(Debug)]
        struct Transient;
        impl std::fmt::Display for Transient {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("transient")
            }
        }
        impl StdError for Transient {}

        let o: AsyncOptions<u8, u8> = AsyncOptions::ordered();
        let p = o.policy();
        assert!(p.retries_error(&Transient), "every error by default");
        assert!(!p.retries_result(&[]), "results are not retried by default");
        let p = AsyncOptions::<u8, u8>::ordered()
            .retry_if(|e| e.downcast_ref::<Transient>().is_some())
            .retry_on_empty()
            .policy();
        assert!(p.retries_error(&Transient));
        assert!(!p.retries_error(&std::fmt::Error));
        assert!(p.retries_result(&[]));
        assert!(!p.retries_result(&[1]));
    }
}

#[cfg(test)]
mod timestamped_tests {
    use super::*;

    #[test]
    fn stream_options_keep_times_through_fallback_and_snapshot_codec() {
        let options = AsyncOptions::<u32, String>::unordered()
            .on_timeout(|x: u32| vec![format!("late {x}")])
            .snapshot_inputs()
            .timestamped();
        let fallback = options.fallback.clone().unwrap();
        assert_eq!(
            fallback(Timestamped {
                timestamp: 7,
                item: 3
            }),
            [Timestamped {
                timestamp: 7,
                item: "late 3".to_string()
            }]
        );
        let codec = options.codec.clone().unwrap();
        let items = vec![
            Timestamped {
                timestamp: 5,
                item: 1u32,
            },
            Timestamped {
                timestamp: -2,
                item: 9,
            },
        ];
        let bytes = (codec.encode)(&items).unwrap();
        assert_eq!((codec.decode)(&bytes).unwrap(), items);
    }
}
