//! The one tokio runtime every async stage of the process shares.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

use super::AsyncError;

/// Worker threads of the shared runtime unless `WEIR_ASYNC_THREADS` says otherwise.
pub const DEFAULT_RUNTIME_THREADS: usize = 2;

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The process-wide tokio runtime that runs the futures of every async stage, started on
/// first use.
///
/// It is a multi-thread runtime with [`DEFAULT_RUNTIME_THREADS`] worker threads named
/// `weir-async` (set `WEIR_ASYNC_THREADS` to change the count before first use), with the time
/// and I/O drivers enabled. Async stages never start a runtime of their own: hundreds of
/// processor instances share these threads, and the futures spend their time waiting, not
/// computing. The cooperative workers never block on it; completions come back through
/// queues (see the [module docs](super)).
///
/// Use the handle to spawn work or to enter the runtime's context (for a client that must be
/// built inside one). Do not call [`Handle::block_on`] from a cooperative processor.
///
/// # Errors
/// [`AsyncError::Runtime`] when the runtime's threads cannot be started; every later call
/// reports the same error.
pub fn runtime() -> Result<&'static Handle, AsyncError> {
    RUNTIME
        .get_or_init(|| {
            let threads = std::env::var("WEIR_ASYNC_THREADS")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|n| *n > 0)
                .unwrap_or(DEFAULT_RUNTIME_THREADS);
            Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name("weir-async")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map(Runtime::handle)
        .map_err(|reason| AsyncError::Runtime {
            reason: reason.clone(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_runtime_per_process() {
        let a = runtime().unwrap();
        let b = runtime().unwrap();
        assert_eq!(a.id(), b.id());
        assert_eq!(a.block_on(async { 40 + 2 }), 42);
    }
}
