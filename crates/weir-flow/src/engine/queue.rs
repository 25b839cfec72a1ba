//! Connections: durable queues with back pressure, prioritizers, swapping, expiration and
//! penalization.
//!
//! The queue holds flow files whose latest state is committed in the flow-file repository.
//! In memory, the *active* flow files are ordered by their [`SortKey`]; beyond the swap
//! threshold the lowest-priority [`SWAP_BATCH`] go to a swap file (logged as a swap-out). A
//! swap file comes back (logged as a swap-in) when the active set is empty or when its best
//! flow file outranks the active ones, so dequeue order is exact across swapping. Flow files
//! taken by a session stay counted (in flight) until the session commits or rolls back.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::definition::{Connection, Prioritizer};
use crate::flowfile::{FlowFile, KeyPart, SortKey};
use crate::repository::journal::{FlowFileRepository, Op, RepositoryError, Txn};
use crate::repository::swap::{self, SWAP_BATCH, SwapInfo};

/// One connection's queue.
#[derive(Debug)]
pub struct Queue {
    /// Index in the flow's connections and the repository's queue table.
    pub index: u32,
    /// Its definition.
    pub connection: Connection,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    active: BTreeMap<SortKey, FlowFile>,
    penalized: Vec<(Instant, FlowFile)>,
    swaps: Vec<SwapInfo>,
    in_flight: u64,
    in_flight_bytes: u64,
    count: u64,
    bytes: u64,
    high_water: u64,
}

/// Counts for status and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Every queued flow file: active, penalized, swapped out and in flight.
    pub count: u64,
    /// Their content bytes.
    pub bytes: u64,
    /// Flow files in memory (active and penalized).
    pub in_memory: u64,
    /// Flow files in swap files.
    pub swapped: u64,
    /// The largest count ever reached.
    pub high_water: u64,
}

fn sort_key(prioritizers: &[Prioritizer], ff: &FlowFile) -> SortKey {
    let parts = prioritizers
        .iter()
        .filter(|p| **p != Prioritizer::FirstInFirstOut)
        .map(|p| match p {
            Prioritizer::OldestFlowFileFirst => KeyPart::Number(ff.entry_date),
            Prioritizer::NewestFlowFileFirst => KeyPart::Number(-ff.entry_date),
            Prioritizer::PriorityAttribute => match ff.attribute("priority") {
                None => KeyPart::Missing,
                Some(v) => v
                    .trim()
                    .parse::<i64>()
                    .map_or_else(|_| KeyPart::Text(v.to_string()), KeyPart::Number),
            },
            Prioritizer::FirstInFirstOut => KeyPart::Missing,
        })
        .collect();
    SortKey {
        parts,
        seq: ff.queue_seq,
    }
}

impl Queue {
    /// A queue for `connection`, holding what recovery found.
    pub fn new(
        index: u32,
        connection: Connection,
        flowfiles: Vec<FlowFile>,
        swaps: Vec<SwapInfo>,
    ) -> Queue {
        let mut st = State::default();
        for s in &swaps {
            st.count += s.count;
            st.bytes += s.bytes;
        }
        st.swaps = swaps;
        for ff in flowfiles {
            st.count += 1;
            st.bytes += ff.size();
            st.active
                .insert(sort_key(&connection.prioritizers, &ff), ff);
        }
        st.high_water = st.count;
        Queue {
            index,
            connection,
            state: Mutex::new(st),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts now.
    pub fn counts(&self) -> QueueCounts {
        let st = self.lock();
        QueueCounts {
            count: st.count,
            bytes: st.bytes,
            in_memory: (st.active.len() + st.penalized.len()) as u64,
            swapped: st.swaps.iter().map(|s| s.count).sum(),
            high_water: st.high_water,
        }
    }

    /// The queued flow file whose `uuid` is `uuid`, in memory or in a swap file (in
    /// `swap_dir`); `None` when it is not queued here (never was, moved on, or is taken by a
    /// session right now). For observers: a scan of the whole queue, and swap files are read
    /// without the queue's lock.
    ///
    /// # Errors
    /// A swap file that cannot be read.
    pub fn find(&self, uuid: &str, swap_dir: &Path) -> std::io::Result<Option<FlowFile>> {
        let swapped: Vec<u64> = {
            let st = self.lock();
            let in_memory = st
                .active
                .values()
                .chain(st.penalized.iter().map(|(_, ff)| ff))
                .find(|ff| ff.uuid() == uuid);
            if let Some(ff) = in_memory {
                return Ok(Some(ff.clone()));
            }
            st.swaps.iter().map(|s| s.id).collect()
        };
        for id in swapped {
            match swap::read(swap_dir, id) {
                Ok(flowfiles) => {
                    if let Some(ff) = flowfiles.into_iter().find(|ff| ff.uuid() == uuid) {
                        return Ok(Some(ff));
                    }
                }
                // Swapped in (and deleted) since the lock was released.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// True when back pressure applies: the count or size threshold is reached.
    pub fn is_full(&self) -> bool {
        let st = self.lock();
        st.count >= self.connection.back_pressure_count
            || st.bytes >= self.connection.back_pressure_size
    }

    /// True when a flow file could be taken now (not counting penalized ones still waiting).
    pub fn has_available(&self, now: Instant) -> bool {
        let st = self.lock();
        !st.active.is_empty() || !st.swaps.is_empty() || st.penalized.iter().any(|(t, _)| *t <= now)
    }

    /// The earliest time a penalized flow file becomes available.
    pub fn next_penalty_end(&self) -> Option<Instant> {
        self.lock().penalized.iter().map(|(t, _)| *t).min()
    }

    /// Adds committed flow files; swaps out when the active set passes the threshold.
    ///
    /// # Errors
    /// A swap-out that cannot be committed (the flow files stay in memory).
    pub fn enqueue(
        &self,
        repo: &FlowFileRepository,
        flowfiles: Vec<FlowFile>,
    ) -> Result<(), RepositoryError> {
        self.enqueue_with_penalties(repo, flowfiles.into_iter().map(|f| (f, None)).collect())
    }

    /// As [`Queue::enqueue`], each flow file penalized until its time if given.
    ///
    /// # Errors
    /// As [`Queue::enqueue`].
    pub fn enqueue_with_penalties(
        &self,
        repo: &FlowFileRepository,
        flowfiles: Vec<(FlowFile, Option<Instant>)>,
    ) -> Result<(), RepositoryError> {
        let mut st = self.lock();
        for (ff, until) in flowfiles {
            st.count += 1;
            st.bytes += ff.size();
            match until {
                Some(t) => st.penalized.push((t, ff)),
                None => {
                    st.active
                        .insert(sort_key(&self.connection.prioritizers, &ff), ff);
                }
            }
        }
        st.high_water = st.high_water.max(st.count);
        while st.active.len() >= self.connection.swap_threshold + SWAP_BATCH {
            self.swap_out(repo, &mut st)?;
        }
        Ok(())
    }

    fn swap_out(&self, repo: &FlowFileRepository, st: &mut State) -> Result<(), RepositoryError> {
        let mut batch: Vec<FlowFile> = Vec::with_capacity(SWAP_BATCH);
        for _ in 0..SWAP_BATCH {
            let Some((_, ff)) = st.active.pop_last() else {
                break;
            };
            batch.push(ff);
        }
        batch.reverse(); // highest priority first
        let id = repo.next_swap_id();
        let mut claims: HashMap<u64, u64> = HashMap::new();
        for ff in &batch {
            if let Some(c) = ff.claim {
                *claims.entry(c.file).or_default() += 1;
            }
        }
        let info = SwapInfo {
            id,
            queue: self.index,
            count: batch.len() as u64,
            bytes: batch.iter().map(FlowFile::size).sum(),
            min_key: sort_key(&self.connection.prioritizers, &batch[0]),
            max_id: batch.iter().map(|f| f.id).max().unwrap_or(0),
            max_seq: batch.iter().map(|f| f.queue_seq).max().unwrap_or(0),
            claims: claims.into_iter().collect(),
        };
        let dir = repo.swap_dir();
        let written = swap::write(&dir, id, &batch).map_err(|source| RepositoryError::Io {
            path: dir.display().to_string(),
            source,
        });
        let result = written.and_then(|()| {
            repo.commit(Txn {
                ops: vec![Op::SwapOut {
                    info: info.clone(),
                    ids: batch.iter().map(|f| f.id).collect(),
                }],
                events: vec![],
            })
        });
        match result {
            Ok(_) => {
                st.swaps.push(info);
                Ok(())
            }
            Err(e) => {
                for ff in batch {
                    st.active
                        .insert(sort_key(&self.connection.prioritizers, &ff), ff);
                }
                Err(e)
            }
        }
    }

    fn swap_in_if_needed(
        &self,
        repo: &FlowFileRepository,
        st: &mut State,
    ) -> Result<(), RepositoryError> {
        loop {
            let best = st
                .swaps
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.min_key.cmp(&b.1.min_key))
                .map(|(i, s)| (i, s.min_key.clone()));
            let Some((i, key)) = best else { return Ok(()) };
            let outranks = st.active.first_key_value().is_none_or(|(k, _)| key < *k);
            if !outranks {
                return Ok(());
            }
            let info = st.swaps[i].clone();
            let dir = repo.swap_dir();
            let flowfiles = swap::read(&dir, info.id).map_err(|source| RepositoryError::Io {
                path: swap::swap_path(&dir, info.id).display().to_string(),
                source,
            })?;
            repo.commit_swap_in(self.index, info.id, &flowfiles)?;
            st.swaps.remove(i);
            for ff in flowfiles {
                st.active
                    .insert(sort_key(&self.connection.prioritizers, &ff), ff);
            }
        }
    }

    /// Takes up to `max` flow files, best first, for a session; flow files past their
    /// expiration come back separately (the session drops them with an EXPIRE event).
    ///
    /// # Errors
    /// A swap-in that cannot be read or committed.
    pub fn poll(
        &self,
        repo: &FlowFileRepository,
        max: usize,
        now: Instant,
    ) -> Result<(Vec<FlowFile>, Vec<FlowFile>), RepositoryError> {
        let mut st = self.lock();
        if st.penalized.iter().any(|(t, _)| *t <= now) {
            let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut st.penalized)
                .into_iter()
                .partition(|(t, _)| *t <= now);
            st.penalized = waiting;
            for (_, ff) in ready {
                st.active
                    .insert(sort_key(&self.connection.prioritizers, &ff), ff);
            }
        }
        let expire_before = (!self.connection.expiration.is_zero()).then(|| {
            chrono::Utc::now().timestamp_millis() - self.connection.expiration.as_millis() as i64
        });
        let (mut out, mut expired) = (Vec::new(), Vec::new());
        while out.len() < max {
            self.swap_in_if_needed(repo, &mut st)?;
            let Some((_, ff)) = st.active.pop_first() else {
                break;
            };
            st.in_flight += 1;
            st.in_flight_bytes += ff.size();
            if expire_before.is_some_and(|t| ff.entry_date < t) {
                expired.push(ff);
            } else {
                out.push(ff);
            }
        }
        Ok((out, expired))
    }

    /// A session committed: `n` flow files of `bytes` taken from this queue are gone.
    pub fn acknowledge(&self, n: u64, bytes: u64) {
        let mut st = self.lock();
        st.in_flight -= n;
        st.in_flight_bytes -= bytes;
        st.count -= n;
        st.bytes -= bytes;
    }

    /// A session rolled back: its flow files come back, penalized until `until` if given.
    pub fn requeue(&self, flowfiles: Vec<FlowFile>, until: Option<Instant>) {
        let mut st = self.lock();
        for ff in flowfiles {
            st.in_flight -= 1;
            st.in_flight_bytes -= ff.size();
            match until {
                Some(t) => st.penalized.push((t, ff)),
                None => {
                    st.active
                        .insert(sort_key(&self.connection.prioritizers, &ff), ff);
                }
            }
        }
    }
}

/// How long to wait for a penalized flow file, at most `cap`.
pub fn penalty_wait(queues: &[&Queue], now: Instant, cap: Duration) -> Duration {
    queues
        .iter()
        .filter_map(|q| q.next_penalty_end())
        .map(|t| t.saturating_duration_since(now))
        .min()
        .unwrap_or(cap)
        .min(cap)
}
