//! Why an async stage failed.

use std::time::Duration;

use weir_core::BoxError;

/// An async stage's failure. Each variant that concerns items names them by their
/// description: the item's `Debug` text, or what
/// [`AsyncOptions::describe_with`](super::AsyncOptions::describe_with) makes of it.
#[derive(Debug, thiserror::Error)]
pub enum AsyncError {
    /// No result arrived within the timeout, counted from the first call through the last
    /// retry, and no fallback was set.
    #[error("{item} got no result within {timeout:?}")]
    Timeout {
        /// The item, or the batch and its first item.
        item: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The call failed and the retry strategy gave up (or does not retry this error).
    #[error("{item} failed after {attempts} attempt(s): {source}")]
    Failed {
        /// The item, or the batch and its first item.
        item: String,
        /// Calls made, the first one included.
        attempts: u32,
        /// The last call's error.
        #[source]
        source: BoxError,
    },
    /// The async function panicked. Not retried, and not mistaken for a timeout.
    #[error("the async call panicked: {message}")]
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// A batched call returned a different number of results than it was given items.
    #[error(
        "a batch of {sent} items got {received} results; a batched call must return one result per item, in order"
    )]
    ResultCount {
        /// Items in the batch.
        sent: usize,
        /// Results returned.
        received: usize,
    },
    /// The shared runtime could not be started.
    #[error("cannot start the shared async runtime: {reason}")]
    Runtime {
        /// The cause.
        reason: String,
    },
    /// A [`ServiceFactory`](super::ServiceFactory) failed to create its service.
    #[error("cannot create the service: {source}")]
    Service {
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// A snapshot was asked for while items were in flight, but the stage cannot encode its
    /// items.
    #[error(
        "cannot snapshot {in_flight} item(s) in flight: enable AsyncOptions::snapshot_inputs (it needs T: Serialize + DeserializeOwned)"
    )]
    SnapshotUnsupported {
        /// Items in flight.
        in_flight: usize,
    },
    /// A snapshot entry could not be encoded or decoded.
    #[error("snapshot entry {entry}: {reason}")]
    Snapshot {
        /// The entry's position.
        entry: usize,
        /// The cause.
        reason: String,
    },
}
