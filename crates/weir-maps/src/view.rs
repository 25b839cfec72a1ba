//! Local access to one partition's entries, for tasks run at the key owner.

use crate::MapError;
use crate::entry::{Entry, with_entry};
use crate::map::{MapKey, MapValue, PartitionedMap};
use crate::service::PartitionData;

/// Every map's entries in one partition, as a task on the partition's owner sees them: reads
/// and writes here are local, with no message and no lock.
///
/// Only keys of this partition are local; other keys are refused with
/// [`MapError::NotLocal`] rather than fetched, since a blocking call from an owner thread
/// could deadlock.
pub struct PartitionView<'a> {
    service_id: usize,
    partition: u32,
    data: &'a mut PartitionData,
}

impl<'a> PartitionView<'a> {
    pub(crate) fn new(service_id: usize, partition: u32, data: &'a mut PartitionData) -> Self {
        PartitionView {
            service_id,
            partition,
            data,
        }
    }

    /// The partition this view shows.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The owner thread the task runs on.
    pub fn owner(&self) -> usize {
        crate::service::current_owner().expect("a view exists only on an owner thread")
    }

    fn check<K: MapKey, V: MapValue>(
        &self,
        map: &PartitionedMap<K, V>,
        key: Option<&K>,
    ) -> Result<(), MapError> {
        if !map.service().same(self.service_id) {
            return Err(MapError::ForeignMap(map.name().to_string()));
        }
        if let Some(key) = key {
            let key_partition = map.partition_of(key);
            if key_partition != self.partition {
                return Err(MapError::NotLocal {
                    partition: self.partition,
                    key_partition,
                });
            }
        }
        Ok(())
    }

    /// The value of `key` in `map`, read locally.
    ///
    /// # Errors
    /// [`MapError::NotLocal`] when `key` is of another partition; [`MapError::ForeignMap`].
    pub fn get<K: MapKey, V: MapValue>(
        &self,
        map: &PartitionedMap<K, V>,
        key: &K,
    ) -> Result<Option<&V>, MapError> {
        self.check(map, Some(key))?;
        Ok(self
            .data
            .store_ref::<K, V>(map.id())
            .and_then(|s| s.get(key)))
    }

    /// Every entry of `map` in this partition, in no particular order.
    ///
    /// # Errors
    /// [`MapError::ForeignMap`].
    pub fn entries<K: MapKey, V: MapValue>(
        &self,
        map: &PartitionedMap<K, V>,
    ) -> Result<impl Iterator<Item = (&K, &V)>, MapError> {
        self.check(map, None)?;
        Ok(self
            .data
            .store_ref::<K, V>(map.id())
            .into_iter()
            .flat_map(|s| s.iter()))
    }

    /// Runs entry processor `f` on `key`'s entry of `map`, locally.
    ///
    /// # Errors
    /// [`MapError::NotLocal`]; [`MapError::ForeignMap`].
    pub fn execute_on_key<K: MapKey, V: MapValue, R>(
        &mut self,
        map: &PartitionedMap<K, V>,
        key: K,
        f: impl FnOnce(&mut Entry<'_, K, V>) -> R,
    ) -> Result<R, MapError> {
        self.check(map, Some(&key))?;
        let store = std::sync::Arc::make_mut(self.data.store::<K, V>(map.id()));
        Ok(with_entry(store, key, f))
    }
}
