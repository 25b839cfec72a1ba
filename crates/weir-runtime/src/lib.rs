//! The one tokio runtime every async part of a Weir process shares: the async stages of
//! pipelines, the flow processors and connectors that talk to brokers, databases and HTTP
//! clients, and the observability server.
//!
//! ```
//! let handle = weir_runtime::runtime().expect("the runtime's threads start");
//! assert_eq!(handle.block_on(async { 40 + 2 }), 42);
//! // Every caller gets the same runtime.
//! assert_eq!(handle.id(), weir_runtime::runtime().unwrap().id());
//! ```
//!
//! It is a crate of its own so that the layers that need it (the pipeline crate `weir`, the
//! flow engines `weir-flow`) depend on it alone, not on each other.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

/// Worker threads of the shared runtime unless `WEIR_ASYNC_THREADS` says otherwise.
pub const DEFAULT_RUNTIME_THREADS: usize = 2;

/// The shared runtime could not start its threads.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the shared async runtime cannot start: {reason}")]
pub struct RuntimeError {
    /// Why, as the operating system said.
    pub reason: String,
}

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The process-wide tokio runtime, started on first use.
///
/// It is a multi-thread runtime with [`DEFAULT_RUNTIME_THREADS`] worker threads named
/// `weir-async` (set `WEIR_ASYNC_THREADS` to change the count before first use), with the time
/// and I/O drivers enabled. Weir never starts a runtime of its own elsewhere: hundreds of
/// processor instances share these threads, and their futures spend their time waiting, not
/// computing.
///
/// Use the handle to spawn work or to enter the runtime's context (for a client that must be
/// built inside one). Do not call [`Handle::block_on`] from a cooperative worker thread.
///
/// # Errors
/// [`RuntimeError`] when the runtime's threads cannot be started; every later call reports
/// the same error.
pub fn runtime() -> Result<&'static Handle, RuntimeError> {
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
        .map_err(|reason| RuntimeError {
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
