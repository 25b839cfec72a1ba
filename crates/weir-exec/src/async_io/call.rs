//! One call of a unit (an item or a batch) with its retries, as it runs on the shared runtime.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures::FutureExt;
use weir_core::error::panic_message;
use weir_core::{BoxError, Item};

use super::AsyncError;
use super::options::RetryPolicy;

/// A boxed future of one call's results.
pub type CallFuture<R> = Pin<Box<dyn Future<Output = Result<Vec<R>, BoxError>> + Send>>;
/// Calls the service for a unit's inputs: one item in `map_async`, a batch in
/// `map_async_batched`.
pub type CallFn<T, R> = Arc<dyn Fn(Vec<T>) -> CallFuture<R> + Send + Sync>;
/// Makes a processor instance's [`CallFn`] in `init`, fetching a shared service if any.
pub type MakeCall<T, R> = Arc<dyn Fn() -> Result<CallFn<T, R>, super::AsyncError> + Send + Sync>;

/// Wraps a per-item function into a unit call (a unit holds one item).
pub fn item_call<T, R, Fut, I, E>(f: impl Fn(T) -> Fut + Send + Sync + 'static) -> CallFn<T, R>
where
    T: Item,
    R: Item,
    Fut: Future<Output = Result<I, E>> + Send + 'static,
    I: IntoIterator<Item = R>,
    E: Into<BoxError>,
{
    Arc::new(move |mut items: Vec<T>| -> CallFuture<R> {
        let call = items.pop().map(&f);
        Box::pin(async move {
            match call {
                Some(fut) => match fut.await {
                    Ok(results) => Ok(results.into_iter().collect()),
                    Err(e) => Err(e.into()),
                },
                None => Ok(Vec::new()),
            }
        })
    })
}

/// Wraps a batch function into a unit call that checks the result count.
pub fn batch_call<T, R, Fut, E>(f: impl Fn(Vec<T>) -> Fut + Send + Sync + 'static) -> CallFn<T, R>
where
    T: Item,
    R: Item,
    Fut: Future<Output = Result<Vec<R>, E>> + Send + 'static,
    E: Into<BoxError>,
{
    Arc::new(move |items: Vec<T>| -> CallFuture<R> {
        let sent = items.len();
        let call = f(items);
        Box::pin(async move {
            let results = call.await.map_err(Into::into)?;
            if results.len() != sent {
                return Err(AsyncError::ResultCount {
                    sent,
                    received: results.len(),
                }
                .into());
            }
            Ok(results)
        })
    })
}

/// The last error of a unit whose retries ran out.
#[derive(Debug)]
pub struct AttemptError {
    /// The error of the last attempt.
    pub error: BoxError,
    /// How many attempts were made, the first included.
    pub attempts: u32,
}

/// Calls `call` until it succeeds with results the policy accepts, the policy stops retrying
/// this error, or the attempts run out. The inputs are cloned for each call but the last.
pub async fn call_with_retries<T: Clone, R>(
    call: &CallFn<T, R>,
    policy: &RetryPolicy<R>,
    inputs: Vec<T>,
) -> Result<Vec<R>, AttemptError> {
    let max = policy.strategy.max_attempts();
    let mut inputs = Some(inputs);
    let mut attempt = 1;
    loop {
        let arg = if attempt >= max {
            inputs.take().unwrap_or_default()
        } else {
            inputs.clone().unwrap_or_default()
        };
        // A panic in the user's future is no reason to retry, nor a timeout to wait out.
        let outcome = match AssertUnwindSafe(call(arg)).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(payload) => {
                return Err(AttemptError {
                    error: AsyncError::Panicked {
                        message: panic_message(&*payload),
                    }
                    .into(),
                    attempts: attempt,
                });
            }
        };
        let retry = match &outcome {
            Ok(results) => policy.retries_result(results),
            Err(e) => policy.retries_error(&**e),
        };
        if retry && let Some(delay) = policy.strategy.delay_before(attempt + 1) {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            attempt += 1;
            continue;
        }
        return outcome.map_err(|error| AttemptError {
            error,
            attempts: attempt,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::async_io::{AsyncOptions, RetryStrategy, runtime};

    /// A call that fails (or returns nothing) on its first `bad` attempts.
    fn flaky(bad: u32, empty: bool) -> (CallFn<u32, u32>, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let call: CallFn<u32, u32> = Arc::new(move |items: Vec<u32>| {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                if n <= bad {
                    if empty {
                        Ok(Vec::new())
                    } else {
                        Err(format!("attempt {n} failed").into())
                    }
                } else {
                    Ok(items)
                }
            })
        });
        (call, calls)
    }

    #[test]
    fn retries_until_success_and_gives_up_after_max_attempts() {
        let rt = runtime().unwrap();
        let policy = AsyncOptions::<u32, u32>::ordered()
            .retry(RetryStrategy::fixed(Duration::from_millis(1), 3))
            .policy();
        let (call, calls) = flaky(2, false);
        assert_eq!(
            rt.block_on(call_with_retries(&call, &policy, vec![7]))
                .unwrap(),
            [7]
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let (call, calls) = flaky(5, false);
        let e = rt
            .block_on(call_with_retries(&call, &policy, vec![7]))
            .unwrap_err();
        assert_eq!(e.attempts, 3);
        assert_eq!(e.error.to_string(), "attempt 3 failed");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn empty_results_are_retried_only_when_asked() {
        let rt = runtime().unwrap();
        let exp =
            RetryStrategy::exponential(Duration::from_millis(1), 2.0, Duration::from_millis(4), 5);
        let plain = AsyncOptions::<u32, u32>::ordered().retry(exp).policy();
        let (call, calls) = flaky(2, true);
        assert!(
            rt.block_on(call_with_retries(&call, &plain, vec![1]))
                .unwrap()
                .is_empty()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let on_empty = AsyncOptions::<u32, u32>::ordered()
            .retry(exp)
            .retry_on_empty()
            .policy();
        let (call, calls) = flaky(2, true);
        assert_eq!(
            rt.block_on(call_with_retries(&call, &on_empty, vec![1]))
                .unwrap(),
            [1]
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let (call, _) = flaky(9, true);
        assert!(
            rt.block_on(call_with_retries(&call, &on_empty, vec![1]))
                .unwrap()
                .is_empty(),
            "the last empty result stands"
        );
    }
}
