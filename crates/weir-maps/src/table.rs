//! The partition table: which owner holds each of the 271 partitions, and its version.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use weir_partition::Partitioner;

/// Which owner holds each partition. In one process an owner is a worker thread of a
/// [`MapService`](crate::MapService); in a cluster it becomes a member plus a worker, and only
/// this table changes.
///
/// The initial assignment is [`Partitioner::owner_table`] (partition `p` to owner
/// `p % owners`), the same one partitioned edges use, so a pipeline instance `i` of a vertex
/// with as many instances as there are owners handles exactly the keys owner `i` holds.
///
/// Reads are one atomic load; [`version`](Self::version) rises with every reassignment.
#[derive(Debug)]
pub struct PartitionTable {
    partitioner: Partitioner,
    owners: Vec<AtomicU32>,
    owner_count: usize,
    version: AtomicU64,
}

impl PartitionTable {
    pub(crate) fn new(partitioner: Partitioner, owner_count: usize) -> Self {
        PartitionTable {
            partitioner,
            owners: partitioner
                .owner_table(owner_count)
                .into_iter()
                .map(AtomicU32::new)
                .collect(),
            owner_count,
            version: AtomicU64::new(1),
        }
    }

    /// The partitioner keys are routed with.
    pub fn partitioner(&self) -> Partitioner {
        self.partitioner
    }

    /// How many partitions there are (271 by default).
    pub fn partition_count(&self) -> u32 {
        self.partitioner.count()
    }

    /// How many owners there are.
    pub fn owner_count(&self) -> usize {
        self.owner_count
    }

    /// The owner of `partition` now. A partition being moved answers its new owner, which
    /// queues calls until the data arrives.
    #[inline]
    pub fn owner_of_partition(&self, partition: u32) -> usize {
        self.owners[partition as usize].load(Ordering::Acquire) as usize
    }

    /// The table's version: 1 at the start, one more for every reassignment.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The owner of every partition, indexed by partition.
    pub fn assignment(&self) -> Vec<usize> {
        (0..self.partition_count())
            .map(|p| self.owner_of_partition(p))
            .collect()
    }

    /// The partitions `owner` holds now.
    pub fn partitions_of(&self, owner: usize) -> Vec<u32> {
        (0..self.partition_count())
            .filter(|&p| self.owner_of_partition(p) == owner)
            .collect()
    }

    /// Records that `partition` now belongs to `owner`. Only the old owner calls this, while
    /// it hands the partition's data over.
    pub(crate) fn assign(&self, partition: u32, owner: usize) {
        self.owners[partition as usize].store(owner as u32, Ordering::Release);
        self.version.fetch_add(1, Ordering::AcqRel);
    }
}
