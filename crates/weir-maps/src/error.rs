//! What can go wrong using partitioned maps.

use std::path::PathBuf;

/// An error from a map, a task at a key owner, or the partition table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// No map of that name was created in this service.
    #[error("no map named '{0}' exists in this map service; create it with MapService::map first")]
    UnknownMap(String),
    /// A map of that name exists with other key or value types.
    #[error("map '{name}' holds {existing}, not {requested}")]
    TypeMismatch {
        /// The map's name.
        name: String,
        /// The types it was created with.
        existing: &'static str,
        /// The types asked for.
        requested: &'static str,
    },
    /// A blocking call was made on a thread that runs an owner: inside an entry processor or
    /// a task at a key owner, or, when the owners run on an executor's workers, in anything
    /// such a worker runs (a pipeline stage). Waiting there could wait on the thread's own
    /// owner queue and deadlock, so it is refused.
    #[error(
        "blocking map call '{call}' refused on the thread of owner {owner} (an owner thread, or an executor worker that runs the owner): it could wait on that owner's own queue and deadlock; read co-located entries through the PartitionView, or use the _async form and poll its Pending without waiting"
    )]
    CalledFromOwner {
        /// The refused call.
        call: &'static str,
        /// The owner whose thread it was made on.
        owner: usize,
    },
    /// The entry processor or task panicked on its owner (the message is logged there). Its
    /// partition stays owned and usable; an entry it was changing may be half changed.
    #[error(
        "the entry processor or task panicked on its owner thread; see the log for the message"
    )]
    TaskPanicked,
    /// The map service has shut down.
    #[error("the map service has shut down")]
    ShutDown,
    /// A key read through a [`PartitionView`](crate::PartitionView) is not in the view's
    /// partition, so it is not local.
    #[error(
        "key of partition {key_partition} read in the view of partition {partition}: only co-located keys are local; use a routed call"
    )]
    NotLocal {
        /// The view's partition.
        partition: u32,
        /// The key's partition.
        key_partition: u32,
    },
    /// A partition or owner number out of range.
    #[error("{what} {value} is out of range (there are {count})")]
    OutOfRange {
        /// `"partition"` or `"owner"`.
        what: &'static str,
        /// The number given.
        value: usize,
        /// How many exist.
        count: usize,
    },
    /// A map of another service was passed.
    #[error("map '{0}' belongs to another map service")]
    ForeignMap(String),
    /// Reading or writing a saved map failed.
    #[error("map file I/O on {path}: {message}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        message: String,
    },
    /// A saved map file is damaged or does not belong to this map.
    #[error("map file {path} is damaged: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}
