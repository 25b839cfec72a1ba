//! The entry an entry processor works on.

use hashbrown::hash_table;

use crate::store::Store;

/// One key's entry, handed to an entry processor on the key's owner with exclusive access.
///
/// Read it with [`value`](Self::value), change it in place with
/// [`value_mut`](Self::value_mut), replace it with [`set`](Self::set), delete it with
/// [`remove`](Self::remove). The change is visible to the next call on the key and to no call
/// before: entry processors on one key run one after another.
pub struct Entry<'a, K, V> {
    state: State<'a, K, V>,
}

enum State<'a, K, V> {
    Occupied(hash_table::OccupiedEntry<'a, (K, V)>),
    /// Absent: the table's slot, and the key to insert there.
    Vacant(hash_table::VacantEntry<'a, (K, V)>, K),
    /// Removed during this call; the key is kept for a later `set`.
    Removed(K),
    /// Removed, then set again: inserted once the processor returns.
    Reinsert(K, V),
    Moving,
}

impl<'a, K: std::hash::Hash + Eq, V> Entry<'a, K, V> {
    fn new((entry, key): (hash_table::Entry<'a, (K, V)>, K)) -> Self {
        Entry {
            state: match entry {
                hash_table::Entry::Occupied(o) => State::Occupied(o),
                hash_table::Entry::Vacant(v) => State::Vacant(v, key),
            },
        }
    }

    /// The entry's key.
    pub fn key(&self) -> &K {
        match &self.state {
            State::Occupied(o) => &o.get().0,
            State::Vacant(_, k) | State::Removed(k) | State::Reinsert(k, _) => k,
            State::Moving => unreachable!("an entry is never seen mid-move"),
        }
    }

    /// The current value, if the key is present.
    pub fn value(&self) -> Option<&V> {
        match &self.state {
            State::Occupied(o) => Some(&o.get().1),
            State::Reinsert(_, v) => Some(v),
            _ => None,
        }
    }

    /// The current value, to change in place.
    pub fn value_mut(&mut self) -> Option<&mut V> {
        match &mut self.state {
            State::Occupied(o) => Some(&mut o.get_mut().1),
            State::Reinsert(_, v) => Some(v),
            _ => None,
        }
    }

    /// Sets the value, inserting the key if absent. Returns the previous value.
    pub fn set(&mut self, value: V) -> Option<V> {
        match std::mem::replace(&mut self.state, State::Moving) {
            State::Occupied(mut o) => {
                let old = std::mem::replace(&mut o.get_mut().1, value);
                self.state = State::Occupied(o);
                Some(old)
            }
            State::Vacant(v, k) => {
                self.state = State::Occupied(v.insert((k, value)));
                None
            }
            State::Removed(k) => {
                self.state = State::Reinsert(k, value);
                None
            }
            State::Reinsert(k, old) => {
                self.state = State::Reinsert(k, value);
                Some(old)
            }
            State::Moving => unreachable!("an entry is never seen mid-move"),
        }
    }

    /// The value, inserting `init()` first if the key is absent.
    pub fn or_insert_with(&mut self, init: impl FnOnce() -> V) -> &mut V {
        if self.value().is_none() {
            self.set(init());
        }
        self.value_mut().expect("just set")
    }

    /// Removes the key. Returns the value it had.
    pub fn remove(&mut self) -> Option<V> {
        match std::mem::replace(&mut self.state, State::Moving) {
            State::Occupied(o) => {
                let ((k, v), _) = o.remove();
                self.state = State::Removed(k);
                Some(v)
            }
            State::Reinsert(k, v) => {
                self.state = State::Removed(k);
                Some(v)
            }
            other => {
                self.state = other;
                None
            }
        }
    }

    fn finish(self) -> Option<(K, V)> {
        match self.state {
            State::Reinsert(k, v) => Some((k, v)),
            _ => None,
        }
    }
}

/// Runs entry processor `f` on `key`'s entry of `store`.
#[inline]
pub(crate) fn with_entry<K: std::hash::Hash + Eq, V, R>(
    store: &mut Store<K, V>,
    key: K,
    f: impl FnOnce(&mut Entry<'_, K, V>) -> R,
) -> R {
    let mut entry = Entry::new(store.entry(key));
    let result = f(&mut entry);
    if let Some((k, v)) = entry.finish() {
        store.insert(k, v);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_remove_and_set_again_leave_the_last_state() {
        let mut m: Store<u32, u32> = Store::default();
        with_entry(&mut m, 1, |e| {
            assert_eq!(e.value(), None);
            assert_eq!(e.set(5), None);
            *e.value_mut().unwrap() += 1;
            assert_eq!(e.remove(), Some(6));
            assert_eq!(e.key(), &1);
            e.set(9);
        });
        assert_eq!(m.get(&1), Some(&9));
        with_entry(&mut m, 1, |e| e.remove());
        assert!(m.is_empty());
        with_entry(&mut m, 2, |e| *e.or_insert_with(|| 1) += 1);
        assert_eq!(m.get(&2), Some(&2));
    }
}
