//! The one tokio runtime every async stage of the process shares: `weir-runtime`'s, which
//! the flow engines share too.

use tokio::runtime::Handle;

use super::AsyncError;

pub use weir_runtime::DEFAULT_RUNTIME_THREADS;

/// The process-wide tokio runtime that runs the futures of every async stage, started on
/// first use ([`weir_runtime::runtime`]): [`DEFAULT_RUNTIME_THREADS`] worker threads named
/// `weir-async` (`WEIR_ASYNC_THREADS` changes the count before first use). Async stages
/// never start a runtime of their own; the cooperative workers never block on it, and
/// completions come back through queues (see the [module docs](super)).
///
/// Do not call [`Handle::block_on`] from a cooperative processor.
///
/// # Errors
/// [`AsyncError::Runtime`] when the runtime's threads cannot be started; every later call
/// reports the same error.
pub fn runtime() -> Result<&'static Handle, AsyncError> {
    weir_runtime::runtime().map_err(|e| AsyncError::Runtime { reason: e.reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stages_share_the_process_runtime() {
        let a = runtime().unwrap();
        assert_eq!(a.id(), weir_runtime::runtime().unwrap().id());
        assert_eq!(a.block_on(async { 40 + 2 }), 42);
    }
}
