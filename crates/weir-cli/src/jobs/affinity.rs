//! The data-affinity demonstration (Hazelcast's `PartitionAware`): three maps hold
//! `key{i}-{j} → i*j`; with [`AffinityKey`]s every `key{i}-*` entry of all three maps lands on
//! one partition and one owner, and a partition-aware task sums them there locally. The
//! owners are the workers of an executor ([`weir::maps::on_executor`]).
//!
//! ```
//! let report = weir_cli::jobs::affinity::run(4).unwrap();
//! assert_eq!(report.sums.iter().map(|s| s.1).collect::<Vec<_>>(), vec![15, 30, 45, 60, 75]);
//! assert!(report.affinity_groups_on_one_owner());
//! ```

use std::fmt::Write;

use weir::{Executor, ExecutorConfig};
use weir_maps::{
    AffinityKey, MapError, MapService, OwnerTask, PartitionAware, PartitionView, PartitionedMap,
};

/// Why [`run`] failed.
#[derive(Debug, thiserror::Error)]
pub enum AffinityError {
    /// The executor whose workers own the maps could not start.
    #[error(transparent)]
    Runtime(#[from] weir::core::Error),
    /// A map call failed (it does not, short of a bug).
    #[error(transparent)]
    Map(#[from] MapError),
}

/// Where one key lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The key as written, `key{i}-{j}`.
    pub key: String,
    /// Its partition.
    pub partition: u32,
    /// The owner of the partition: the index of the executor worker that holds it.
    pub owner: usize,
}

/// What [`run`] found.
#[derive(Debug, Clone)]
pub struct AffinityReport {
    /// How many owners held the maps: one per worker of the executor.
    pub owners: usize,
    /// The thread that summed each prefix at its owner, as in [`sums`](Self::sums): the
    /// owner's executor worker, `weir-worker-{owner}`.
    pub sum_threads: Vec<String>,
    /// Placement of each key as a plain string key (no affinity).
    pub without_affinity: Vec<Placement>,
    /// Placement of each key as an [`AffinityKey`].
    pub with_affinity: Vec<Placement>,
    /// `(key prefix, sum computed at its owner, owner that computed it)` for `key1..key5`.
    pub sums: Vec<(String, u64, usize)>,
}

impl AffinityReport {
    /// Whether every `key{i}-*` affinity key is on the owner of `key{i}-1`.
    pub fn affinity_groups_on_one_owner(&self) -> bool {
        self.with_affinity
            .chunks(5)
            .all(|group| group.iter().all(|p| p.owner == group[0].owner))
    }

    /// How many `key{i}-*` groups of plain keys are split over more than one owner.
    pub fn groups_split_without_affinity(&self) -> usize {
        self.without_affinity
            .chunks(5)
            .filter(|group| group.iter().any(|p| p.owner != group[0].owner))
            .count()
    }

    /// The report as the seed's post prints it: owners of each key, then the sums.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} owners, each a worker of the executor (weir-worker-0..{}), 271 partitions",
            self.owners,
            self.owners - 1
        );
        for (label, placements) in [
            ("No Affinity Key", &self.without_affinity),
            ("Affinity Key", &self.with_affinity),
        ] {
            let _ = writeln!(out);
            for (i, p) in placements.iter().enumerate() {
                if i > 0 && i % 5 == 0 {
                    let _ = writeln!(out);
                }
                let _ = writeln!(
                    out,
                    "[{label}] key = {}, partition = {}, owner = {}",
                    p.key, p.partition, p.owner
                );
            }
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "without affinity keys {} of 5 groups are split over owners; with them, every group is on one owner: {}",
            self.groups_split_without_affinity(),
            self.affinity_groups_on_one_owner()
        );
        for ((prefix, sum, owner), thread) in self.sums.iter().zip(&self.sum_threads) {
            let _ = writeln!(out, "sum of {prefix}-* at owner {owner} ({thread}) = {sum}");
        }
        out
    }
}

/// The seed's partition-aware task: sums `{prefix}-1..={prefix}-5` of a map on the owner of
/// `prefix`, reading each entry locally.
struct SumAtOwner {
    prefix: String,
    map: PartitionedMap<AffinityKey, u64>,
}

impl PartitionAware for SumAtOwner {
    type Key = str;
    fn partition_key(&self) -> &str {
        &self.prefix
    }
}

impl OwnerTask for SumAtOwner {
    type Output = Result<(u64, usize, String), MapError>;
    fn run(self, view: &mut PartitionView<'_>) -> Self::Output {
        let mut sum = 0;
        for j in 1..=5 {
            let key = AffinityKey::new(format!("{}-{j}", self.prefix));
            sum += view.get(&self.map, &key)?.copied().unwrap_or(0);
        }
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        Ok((sum, view.owner(), thread))
    }
}

/// Runs the demonstration on an executor of `owners` workers, each the owner of its share of
/// the partitions.
///
/// # Errors
/// The executor could not start; a map call failed (it does not, short of a bug).
pub fn run(owners: usize) -> Result<AffinityReport, AffinityError> {
    let owners = owners.max(1);
    let executor = Executor::new(ExecutorConfig {
        workers: owners,
        ..ExecutorConfig::default()
    })?;
    let service: MapService = weir::maps::on_executor(&executor)?;
    let plain: Vec<PartitionedMap<String, u64>> = ["plain1", "plain2", "plain3"]
        .iter()
        .map(|n| service.map(n))
        .collect::<Result<_, _>>()?;
    let affine: Vec<PartitionedMap<AffinityKey, u64>> = ["map1", "map2", "map3"]
        .iter()
        .map(|n| service.map(n))
        .collect::<Result<_, _>>()?;
    let keys_values: Vec<(String, u64)> = (1..=5u64)
        .flat_map(|i| (1..=5u64).map(move |j| (format!("key{i}-{j}"), i * j)))
        .collect();
    for (key, value) in &keys_values {
        for m in &plain {
            m.put(key.clone(), *value)?;
        }
        for m in &affine {
            m.put(AffinityKey::new(key.clone()), *value)?;
        }
    }
    let placement = |key: &str, partition: u32| Placement {
        key: key.to_string(),
        partition,
        owner: service.table().owner_of_partition(partition),
    };
    let without_affinity = keys_values
        .iter()
        .map(|(k, _)| placement(k, service.partition_of(k.as_str())))
        .collect();
    let with_affinity = keys_values
        .iter()
        .map(|(k, _)| placement(k, service.partition_of(&AffinityKey::new(k.clone()))))
        .collect();
    let pending: Vec<_> = (1..=5)
        .map(|i| {
            service.submit(SumAtOwner {
                prefix: format!("key{i}"),
                map: affine[0].clone(),
            })
        })
        .collect();
    let mut sums = Vec::new();
    let mut sum_threads = Vec::new();
    for (i, p) in pending.into_iter().enumerate() {
        let (sum, owner, thread) = p.wait()??;
        sums.push((format!("key{}", i + 1), sum, owner));
        sum_threads.push(thread);
    }
    Ok(AffinityReport {
        owners,
        sum_threads,
        without_affinity,
        with_affinity,
        sums,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_sums_are_computed_at_the_owners_of_their_keys() {
        let report = run(4).unwrap();
        let sums: Vec<u64> = report.sums.iter().map(|s| s.1).collect();
        assert_eq!(sums, vec![15, 30, 45, 60, 75]);
        assert!(report.affinity_groups_on_one_owner());
        assert!(report.groups_split_without_affinity() > 0);
        for ((prefix, _, owner), thread) in report.sums.iter().zip(&report.sum_threads) {
            assert_eq!(
                thread,
                &format!("weir-worker-{owner}"),
                "summed off its worker"
            );
            let group = report
                .with_affinity
                .iter()
                .find(|p| p.key.starts_with(&format!("{prefix}-")))
                .unwrap();
            assert_eq!(*owner, group.owner, "{prefix} summed away from its entries");
        }
        let text = report.render();
        assert!(text.contains("[Affinity Key] key = key3-4"));
        assert!(text.contains("sum of key5-* at owner"));
    }
}
