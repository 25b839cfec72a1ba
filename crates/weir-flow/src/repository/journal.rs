//! The flow-file repository: a write-ahead log of Weir's own.
//!
//! ```text
//! DIR/flowfiles/snapshot            last checkpoint: every live flow file, swap files, counters,
//!                                   processors' states
//! DIR/flowfiles/journal-<generation>       frames since that checkpoint (frame.rs)
//! DIR/flowfiles/swap/<id>.swap      swapped-out flow files
//! DIR/content/<n>.claim             content (content.rs)
//! ```
//!
//! - **One session commit is one frame** ([`Txn`]: the session's operations and provenance
//!   events). A frame is applied whole or not at all: its checksum covers all of it.
//! - **Group commit** (`sync: always`): a committing session appends its frame to a shared
//!   buffer and waits. If no write is under way it becomes the committer: it syncs the content
//!   written so far (content before the frames that point to it), writes every waiting frame
//!   in one `write`, calls `sync_data` once, and wakes everyone it covered. `sync: interval`
//!   writes at once and syncs when the interval has passed; `sync: none` never syncs.
//! - **Processor state** (NiFi's local state: `Session::set_state`): an [`Op::SetState`] in
//!   the frame of the session that set it, so a processor's state and the flow files it
//!   emitted with it are durable together; the checkpoint holds every component's latest.
//! - **Checkpoint**: the live state goes to a temporary file, which is synced, renamed over
//!   `snapshot`, and the directory synced; then a new journal starts and the old one is
//!   deleted. Commits wait while it runs.
//! - **Errors**: a torn or NUL-filled journal tail is truncated at recovery; a bad frame with
//!   good data after it refuses to start, naming the file and offset. A failed write or sync
//!   poisons the repository: every later commit fails (nothing more is acknowledged), one
//!   checkpoint to fresh files may be tried, and the failed `fsync` is never retried, since
//!   the kernel may have dropped the dirty pages it reported on.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::content::ContentRepository;
use super::swap::{self, SwapInfo};
use super::sync_dir;
use crate::definition::SyncPolicy;
use crate::faults::{self, Step};
use crate::flowfile::FlowFile;
use crate::provenance::ProvenanceEvent;
use weir_frame::FileFormat;
use weir_frame::record::{self as frame, Corrupt};

/// One change in a transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// The flow file now sits in `queue` (created, moved, or changed in place).
    Put {
        /// Queue index in the repository's queue table.
        queue: u32,
        /// The flow file, as it is now.
        flowfile: FlowFile,
    },
    /// The flow file left the flow.
    Delete {
        /// Its id.
        id: u64,
    },
    /// Flow files were written to a swap file and left memory.
    SwapOut {
        /// The swap file.
        info: SwapInfo,
        /// The ids now in it.
        ids: Vec<u64>,
    },
    /// A swap file's flow files are back in memory (the file goes at the next checkpoint).
    SwapIn {
        /// The swap file's number.
        swap: u64,
    },
    /// A source file to delete once this frame is durable (GetFile without Keep Source
    /// File); done again at recovery when the process died before it. Either way the file is
    /// deleted only while it is still the file that was taken (see [`FileIdentity`]). A frame
    /// holding one is synced before the deletion, whatever the sync policy: the flow's copy
    /// must be durable before the source's goes.
    DeleteSource {
        /// The file's path.
        path: String,
        /// What the file was when it was taken.
        identity: FileIdentity,
    },
    /// A processor's state (NiFi's local state) is now `state`, replacing what it was; an
    /// empty map clears it.
    SetState {
        /// The component's name.
        component: String,
        /// Its whole state.
        state: StateMap,
    },
}

pub use weir_flow_api::session::{FileIdentity, StateMap};

/// Deletes the source file `path` if it is still the file `identity` describes. Returns
/// whether it deleted it: a file already gone, or another file under the name, is left.
///
/// # Errors
/// I/O errors reading the file's metadata or deleting it.
pub fn delete_source(path: &Path, identity: &FileIdentity) -> io::Result<bool> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if FileIdentity::of(&meta) != *identity {
        tracing::info!(
            "source file {} changed since it was taken; it is kept",
            path.display()
        );
        return Ok(false);
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// One session's commit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Txn {
    /// The changes, applied in order.
    pub ops: Vec<Op>,
    /// Provenance events (their ids are set from the transaction id).
    pub events: Vec<ProvenanceEvent>,
}

/// A flow-file repository error.
#[derive(Debug, thiserror::Error)]
pub enum RepositoryError {
    /// An I/O error on a path.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The cause.
        source: io::Error,
    },
    /// A bad frame before the journal's tail.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
    /// A snapshot or frame payload that does not decode.
    #[error("cannot decode {what}: {reason}")]
    Decode {
        /// Which file or frame.
        what: String,
        /// The decoder's message.
        reason: String,
    },
    /// A write or sync failed earlier: nothing more is acknowledged.
    #[error(
        "the flow-file repository is poisoned by an earlier I/O error ({0}); nothing more is acknowledged"
    )]
    Poisoned(String),
    /// Another process (or another open in this one) holds the repository.
    #[error(
        "the repository {dir} is in use by process {holder}; stop it first (two runs on one repository would both recover and process the same flow files)"
    )]
    Locked {
        /// The repository's directory.
        dir: String,
        /// The holder's process id, as it wrote it in the lock file.
        holder: String,
    },
    /// Recovered flow files sit in a queue the flow no longer has.
    #[error(
        "the repository holds {count} flow file(s) in queue `{key}`, which the flow no longer has; put the connection back or start with an empty repository"
    )]
    UnknownQueue {
        /// The queue's key.
        key: String,
        /// Flow files in it.
        count: u64,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RepositoryError + '_ {
    move |source| RepositoryError::Io {
        path: path.display().to_string(),
        source,
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Snapshot {
    journal_generation: u64,
    last_txn: u64,
    queues: Vec<String>,
    records: Vec<(u32, FlowFile)>,
    swaps: Vec<SwapInfo>,
    next_id: u64,
    next_seq: u64,
    next_swap: u64,
    /// The id of the first event of the frame after `last_txn`.
    next_event: u64,
}

/// Every component's state, by name, in a checkpoint: written after the [`Snapshot`] in the
/// same payload, so a checkpoint written before processors had state reads as none.
type States = Vec<(String, StateMap)>;

/// What recovery found, by the current flow's queue indexes.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Flow files in memory, per queue.
    pub queues: Vec<Vec<FlowFile>>,
    /// Swap files, per queue.
    pub swaps: Vec<Vec<SwapInfo>>,
    /// Provenance events of the replayed frames, to insert again (idempotent).
    pub events: Vec<ProvenanceEvent>,
    /// Frames replayed from journals.
    pub frames_replayed: u64,
    /// Bytes of torn tail truncated.
    pub truncated_bytes: u64,
}

#[derive(Debug, Default)]
struct Live {
    records: HashMap<u64, (u32, Arc<FlowFile>)>,
    swaps: BTreeMap<u64, SwapInfo>,
    /// Swap files read back in; deleted after the next checkpoint.
    swapped_in: Vec<u64>,
    /// Each component's committed state, by name.
    states: HashMap<String, StateMap>,
}

struct Journal {
    file: Option<File>,
    generation: u64,
    pending: Vec<u8>,
    next_txn: u64,
    /// The id of the next frame's first event: ids run on from frame to frame, so a frame
    /// may hold any number of events (recovery counts them again from the snapshot's).
    next_event: u64,
    /// A frame waiting in `pending` must be synced whatever the policy.
    pending_must_sync: bool,
    /// Every frame with a transaction id up to this one is written (and synced, by policy).
    done_txn: u64,
    writing: bool,
    poisoned: Option<String>,
    last_sync: Instant,
    unsynced: bool,
}

/// The flow-file repository. See the [module docs](self).
pub struct FlowFileRepository {
    /// `DIR/lock`, locked for the repository's life: one process at a time.
    _lock: File,
    dir: PathBuf,
    sync: SyncPolicy,
    content: Arc<ContentRepository>,
    queues: Vec<String>,
    journal: Mutex<Journal>,
    written: Condvar,
    /// Notified when the journal needs the engine's maintenance: frames began to wait for
    /// an interval sync, or the repository was poisoned (see [`FlowFileRepository::attention`]).
    attention: tokio::sync::Notify,
    /// Commits hold it shared; a checkpoint holds it exclusively.
    gate: RwLock<()>,
    live: Mutex<Live>,
    next_id: AtomicU64,
    next_seq: AtomicU64,
    next_swap: AtomicU64,
    frames: AtomicU64,
    syncs: AtomicU64,
}

impl std::fmt::Debug for FlowFileRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowFileRepository")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn journal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("journal-{generation:016}"))
}

impl FlowFileRepository {
    /// Opens the repository under `dir` (created if missing) for a flow whose queues are
    /// `queues` (connection keys), recovering what an earlier run left, then checkpoints so
    /// that the run starts on a fresh journal.
    ///
    /// # Errors
    /// [`RepositoryError::Corrupt`] for a bad frame before the tail,
    /// [`RepositoryError::UnknownQueue`] for flow files in a queue the flow lost, and I/O or
    /// decoding errors.
    pub fn open(
        dir: &Path,
        sync: SyncPolicy,
        queues: &[String],
    ) -> Result<(FlowFileRepository, Recovered), RepositoryError> {
        let ff_dir = dir.join("flowfiles");
        let swap_dir = ff_dir.join("swap");
        fs::create_dir_all(&swap_dir).map_err(io_err(&swap_dir))?;
        let lock = lock_repository(dir)?;
        let snap_path = ff_dir.join("snapshot");
        let (snap, states) = match fs::read(&snap_path) {
            Ok(bytes) => decode_snapshot(&snap_path, &bytes)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Snapshot::default(), Vec::new()),
            Err(e) => return Err(io_err(&snap_path)(e)),
        };
        let mut live = Live {
            states: states.into_iter().collect(),
            ..Live::default()
        };
        for (q, ff) in snap.records {
            live.records.insert(ff.id, (q, Arc::new(ff)));
        }
        for s in snap.swaps {
            live.swaps.insert(s.id, s);
        }
        let old_queues = snap.queues;
        let mut last_txn = snap.last_txn;
        let mut next_event = snap.next_event;
        let mut recovered = Recovered::default();
        // Replay every journal from the snapshot's generation on.
        let mut gens: Vec<u64> = Vec::new();
        for entry in fs::read_dir(&ff_dir).map_err(io_err(&ff_dir))? {
            let entry = entry.map_err(io_err(&ff_dir))?;
            if let Some(g) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("journal-"))
                .and_then(|g| g.parse::<u64>().ok())
            {
                gens.push(g);
            }
        }
        gens.sort_unstable();
        let mut delete_sources = Vec::new();
        for &g in &gens {
            let path = journal_path(&ff_dir, g);
            if g < snap.journal_generation {
                continue; // covered by the snapshot; deleted below
            }
            let bytes = fs::read(&path).map_err(io_err(&path))?;
            let scan = frame::scan(&path, &bytes, last_txn)?;
            for (offset, txn, payload) in &scan.frames {
                let t: Txn =
                    postcard::from_bytes(payload).map_err(|e| RepositoryError::Decode {
                        what: format!("frame in {} at offset {offset}", path.display()),
                        reason: e.to_string(),
                    })?;
                apply_recovered(&mut live, &swap_dir, &t, &mut delete_sources)?;
                let first = next_event;
                next_event += t.events.len() as u64;
                recovered
                    .events
                    .extend(t.events.into_iter().enumerate().map(|(i, mut e)| {
                        e.id = event_id(first, i);
                        e
                    }));
                last_txn = *txn;
                recovered.frames_replayed += 1;
            }
            if scan.valid_len < bytes.len() as u64 {
                recovered.truncated_bytes += bytes.len() as u64 - scan.valid_len;
                faults::step(Step::Truncate, &path, || {
                    let f = OpenOptions::new().write(true).open(&path)?;
                    f.set_len(scan.valid_len)?;
                    f.sync_all()
                })
                .map_err(io_err(&path))?;
            }
        }
        for (path, identity) in delete_sources {
            delete_source(Path::new(&path), &identity).map_err(io_err(Path::new(&path)))?;
        }
        // Map recovered queues to the current flow's.
        let index: HashMap<&str, u32> = queues
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i as u32))
            .collect();
        let remap = |q: u32| -> Result<u32, String> {
            let key = old_queues
                .get(q as usize)
                .cloned()
                .unwrap_or_else(|| format!("#{q}"));
            index.get(key.as_str()).copied().ok_or(key)
        };
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        recovered.queues = vec![Vec::new(); queues.len()];
        recovered.swaps = vec![Vec::new(); queues.len()];
        let mut refs: HashMap<u64, u64> = HashMap::new();
        let (mut next_id, mut next_seq, mut next_swap) =
            (snap.next_id, snap.next_seq, snap.next_swap);
        let mut new_live = Live {
            states: std::mem::take(&mut live.states),
            ..Live::default()
        };
        for (id, (q, ff)) in live.records {
            next_id = next_id.max(id + 1);
            next_seq = next_seq.max(ff.queue_seq + 1);
            if let Some(c) = ff.claim {
                *refs.entry(c.file).or_default() += 1;
            }
            match remap(q) {
                Ok(nq) => {
                    recovered.queues[nq as usize].push((*ff).clone());
                    new_live.records.insert(id, (nq, ff));
                }
                Err(key) => *counts.entry(key).or_default() += 1,
            }
        }
        for (id, mut s) in live.swaps {
            next_id = next_id.max(s.max_id + 1);
            next_seq = next_seq.max(s.max_seq + 1);
            next_swap = next_swap.max(id + 1);
            for (file, n) in &s.claims {
                *refs.entry(*file).or_default() += n;
            }
            match remap(s.queue) {
                Ok(nq) => {
                    s.queue = nq;
                    recovered.swaps[nq as usize].push(s.clone());
                    new_live.swaps.insert(id, s);
                }
                Err(key) => *counts.entry(key).or_default() += s.count,
            }
        }
        if let Some((key, count)) = counts.into_iter().next() {
            return Err(RepositoryError::UnknownQueue { key, count });
        }
        for q in &mut recovered.queues {
            q.sort_by_key(|ff| ff.queue_seq);
        }
        // Swap files that no swap-out frame names are leftovers of a crash mid swap-out;
        // swapped-in files were read back. Both go after the checkpoint below.
        for entry in fs::read_dir(&swap_dir).map_err(io_err(&swap_dir))? {
            let entry = entry.map_err(io_err(&swap_dir))?;
            let name = entry.file_name();
            let id = name
                .to_str()
                .and_then(|n| n.strip_suffix(".swap"))
                .and_then(|n| n.parse::<u64>().ok());
            match id {
                Some(id) if new_live.swaps.contains_key(&id) => next_swap = next_swap.max(id + 1),
                Some(id) => {
                    next_swap = next_swap.max(id + 1);
                    new_live.swapped_in.push(id);
                }
                None => {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        let content = Arc::new(
            ContentRepository::open(&dir.join("content"), refs)
                .map_err(io_err(&dir.join("content")))?,
        );
        let last_generation = gens
            .last()
            .copied()
            .unwrap_or(0)
            .max(snap.journal_generation);
        let repo = FlowFileRepository {
            _lock: lock,
            dir: ff_dir,
            sync,
            content,
            queues: queues.to_vec(),
            journal: Mutex::new(Journal {
                file: None,
                generation: last_generation,
                pending: Vec::new(),
                next_txn: last_txn + 1,
                next_event,
                pending_must_sync: false,
                done_txn: last_txn,
                writing: false,
                poisoned: None,
                last_sync: Instant::now(),
                unsynced: false,
            }),
            written: Condvar::new(),
            attention: tokio::sync::Notify::new(),
            gate: RwLock::new(()),
            live: Mutex::new(new_live),
            next_id: AtomicU64::new(next_id.max(1)),
            next_seq: AtomicU64::new(next_seq),
            next_swap: AtomicU64::new(next_swap),
            frames: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        };
        repo.checkpoint()?;
        Ok((repo, recovered))
    }

    /// The content repository that this repository syncs before its frames.
    pub fn content(&self) -> &Arc<ContentRepository> {
        &self.content
    }

    /// The directory of swap files.
    pub fn swap_dir(&self) -> PathBuf {
        self.dir.join("swap")
    }

    /// A new flow-file id.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// A new enqueue sequence number (first-in-first-out order).
    pub fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// A new swap file number.
    pub fn next_swap_id(&self) -> u64 {
        self.next_swap.fetch_add(1, Ordering::Relaxed)
    }

    /// The queue table (connection keys) by index.
    pub fn queues(&self) -> &[String] {
        &self.queues
    }

    /// The poisoning error, if a write or sync failed.
    pub fn poisoned(&self) -> Option<String> {
        self.lock_journal().poisoned.clone()
    }

    /// Frames written and `sync_data` calls made on journals since open (group commit makes
    /// the second smaller than the first).
    pub fn counters(&self) -> (u64, u64) {
        (
            self.frames.load(Ordering::Relaxed),
            self.syncs.load(Ordering::Relaxed),
        )
    }

    fn lock_journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Commits `txn` durably (by the sync policy) and applies it to the live state. Returns
    /// its provenance events with their ids set.
    ///
    /// When this returns `Ok`, the frame is on disk (`sync: always`): acknowledge the source
    /// now. Post-commit source deletions ([`Op::DeleteSource`]) are done before it returns,
    /// after the frame is synced whatever the policy.
    ///
    /// # Errors
    /// [`RepositoryError::Poisoned`] when this or an earlier write or sync failed: the
    /// transaction is not committed and the caller rolls back.
    pub fn commit(&self, txn: Txn) -> Result<Vec<ProvenanceEvent>, RepositoryError> {
        self.commit_and(txn, |_| {})
    }

    /// Commits the swap-in of swap file `swap` (an [`Op::SwapIn`]) and makes `flowfiles`,
    /// read from it, live in `queue`, as one step: a checkpoint sees either the swap file or
    /// its flow files, never neither.
    ///
    /// # Errors
    /// As [`FlowFileRepository::commit`].
    pub fn commit_swap_in(
        &self,
        queue: u32,
        swap: u64,
        flowfiles: &[FlowFile],
    ) -> Result<(), RepositoryError> {
        let txn = Txn {
            ops: vec![Op::SwapIn { swap }],
            events: vec![],
        };
        self.commit_and(txn, |live| {
            for ff in flowfiles {
                live.records.insert(ff.id, (queue, Arc::new(ff.clone())));
            }
        })?;
        Ok(())
    }

    /// Commits `txn`, then applies it and `also` to the live state, all while holding off
    /// checkpoints.
    fn commit_and(
        &self,
        txn: Txn,
        also: impl FnOnce(&mut Live),
    ) -> Result<Vec<ProvenanceEvent>, RepositoryError> {
        let payload = postcard::to_allocvec(&txn).map_err(|e| RepositoryError::Decode {
            what: "a transaction".into(),
            reason: e.to_string(),
        })?;
        let must_sync = txn
            .ops
            .iter()
            .any(|op| matches!(op, Op::DeleteSource { .. }));
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        let first_event = self.append_and_wait(&payload, txn.events.len() as u64, must_sync)?;
        {
            let mut live = self.lock_live();
            apply_live(&mut live, &txn.ops);
            also(&mut live);
        }
        for op in &txn.ops {
            if let Op::DeleteSource { path, identity } = op
                && let Err(e) = delete_source(Path::new(path), identity)
            {
                tracing::warn!("cannot delete source file {path}: {e}");
            }
        }
        Ok(txn
            .events
            .into_iter()
            .enumerate()
            .map(|(i, mut e)| {
                e.id = event_id(first_event, i);
                e
            })
            .collect())
    }

    /// Appends a frame of `payload` holding `events` events and waits until it is written
    /// (and synced, by the policy or because `must_sync`). Returns the id of its first event.
    fn append_and_wait(
        &self,
        payload: &[u8],
        events: u64,
        must_sync: bool,
    ) -> Result<u64, RepositoryError> {
        let mut j = self.lock_journal();
        if let Some(p) = &j.poisoned {
            return Err(RepositoryError::Poisoned(p.clone()));
        }
        let txn = j.next_txn;
        j.next_txn += 1;
        let first_event = j.next_event;
        j.next_event += events;
        j.pending_must_sync |= must_sync;
        frame::encode(&mut j.pending, txn, payload);
        loop {
            if let Some(p) = &j.poisoned
                && j.done_txn < txn
            {
                return Err(RepositoryError::Poisoned(p.clone()));
            }
            if j.done_txn >= txn {
                return Ok(first_event);
            }
            if !j.writing {
                // Become the committer for every frame waiting now.
                j.writing = true;
                let batch = std::mem::take(&mut j.pending);
                let last = j.next_txn - 1;
                let frames_in_batch = last - j.done_txn;
                let mut file = j.file.take();
                let generation = j.generation;
                let sync_now = std::mem::take(&mut j.pending_must_sync)
                    || match self.sync {
                        SyncPolicy::Always => true,
                        SyncPolicy::Interval(every) => j.last_sync.elapsed() >= every,
                        SyncPolicy::None => false,
                    };
                drop(j);
                let result = self.write_batch(file.as_mut(), generation, &batch, sync_now);
                j = self.lock_journal();
                j.file = file;
                j.writing = false;
                match result {
                    Ok(()) => {
                        j.done_txn = last;
                        self.frames.fetch_add(frames_in_batch, Ordering::Relaxed);
                        if sync_now {
                            j.last_sync = Instant::now();
                            j.unsynced = false;
                        } else {
                            // The first frame to wait for an interval sync: the maintenance
                            // has a sync to time (later ones wait for the same sync).
                            if !j.unsynced && matches!(self.sync, SyncPolicy::Interval(_)) {
                                self.attention.notify_one();
                            }
                            j.unsynced = true;
                        }
                    }
                    Err(e) => {
                        tracing::error!("flow-file repository poisoned: {e}");
                        j.poisoned = Some(e);
                        self.attention.notify_one();
                    }
                }
                self.written.notify_all();
            } else {
                j = self.written.wait(j).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    fn write_batch(
        &self,
        file: Option<&mut File>,
        generation: u64,
        batch: &[u8],
        sync: bool,
    ) -> Result<(), String> {
        let file = file.ok_or("no journal open")?;
        if sync {
            self.content
                .sync()
                .map_err(|e| format!("syncing content: {e}"))?;
        }
        let path = || journal_path(&self.dir, generation);
        faults::step_at(Step::Write, path, || file.write_all(batch))
            .map_err(|e| format!("writing the journal: {e}"))?;
        if sync {
            faults::step_at(Step::Sync, path, || file.sync_data())
                .map_err(|e| format!("syncing the journal: {e}"))?;
            self.syncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Whether [`sync_if_due`](Self::sync_if_due) would sync now: frames wait for a sync and
    /// the interval passed. One lock, no I/O: the engine asks before handing the sync to a
    /// blocking thread, so an idle flow costs no thread hand-off per tick.
    pub fn sync_due(&self) -> bool {
        let SyncPolicy::Interval(every) = self.sync else {
            return false;
        };
        let j = self.lock_journal();
        j.unsynced && j.last_sync.elapsed() >= every && j.poisoned.is_none()
    }

    /// With `sync: interval`, syncs frames written since the last sync once the interval has
    /// passed (called periodically by the engine).
    pub fn sync_if_due(&self) {
        let SyncPolicy::Interval(every) = self.sync else {
            return;
        };
        let _gate = self.gate.write().unwrap_or_else(|p| p.into_inner());
        let mut j = self.lock_journal();
        if !j.unsynced || j.last_sync.elapsed() < every || j.poisoned.is_some() {
            return;
        }
        let path = journal_path(&self.dir, j.generation);
        let result = self.content.sync().and_then(|()| {
            j.file.as_ref().map_or(Ok(()), |f| {
                faults::step(Step::Sync, &path, || f.sync_data())
            })
        });
        match result {
            Ok(()) => {
                j.unsynced = false;
                j.last_sync = Instant::now();
                self.syncs.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                j.poisoned = Some(format!("syncing the journal: {e}"));
                self.attention.notify_one();
            }
        }
    }

    /// When, with `sync: interval`, the frames waiting for a sync are due to be synced:
    /// `None` when none waits (or the repository is poisoned, or the policy is not
    /// `interval`). One lock, no I/O.
    pub fn sync_deadline(&self) -> Option<Instant> {
        let SyncPolicy::Interval(every) = self.sync else {
            return None;
        };
        let j = self.lock_journal();
        (j.unsynced && j.poisoned.is_none()).then(|| j.last_sync + every)
    }

    /// Notified (one stored permit, so none is lost) when the repository needs the engine's
    /// maintenance before its next timed round: the first frame since the last sync began to
    /// wait for an interval sync ([`sync_deadline`](Self::sync_deadline) now says when), or
    /// the repository was poisoned. So the maintenance can sleep until something is due
    /// instead of polling.
    pub fn attention(&self) -> &tokio::sync::Notify {
        &self.attention
    }

    /// The committed state of `component` (empty when it never set one): what the last
    /// committed [`Op::SetState`] for it holds, recovered across restarts.
    pub fn state(&self, component: &str) -> StateMap {
        self.lock_live()
            .states
            .get(component)
            .cloned()
            .unwrap_or_default()
    }

    /// Live flow files (in memory, not swapped) and swap files.
    pub fn live_counts(&self) -> (usize, usize) {
        let live = self.lock_live();
        (live.records.len(), live.swaps.len())
    }

    /// Writes a checkpoint and starts a new journal. Commits wait while it runs. Tried even
    /// when the repository is poisoned: the snapshot holds exactly what was acknowledged, and
    /// it goes to new files.
    ///
    /// The content is synced first (the snapshot refers to it). A failure before the
    /// snapshot's rename leaves the last snapshot and the current journal as they were; one
    /// after it (syncing the directory, creating the new journal) poisons the repository,
    /// since the snapshot on disk may already name a journal that commits are not going to.
    ///
    /// # Errors
    /// I/O errors syncing content, writing the snapshot or starting the new journal.
    pub fn checkpoint(&self) -> Result<(), RepositoryError> {
        let _gate = self.gate.write().unwrap_or_else(|p| p.into_inner());
        let mut j = self.lock_journal();
        let poison = |j: &mut Journal, e: RepositoryError| {
            if j.poisoned.is_none() {
                tracing::error!("flow-file repository poisoned: {e}");
                j.poisoned = Some(e.to_string());
                self.attention.notify_one();
            }
            e
        };
        let content_dir = self.dir.with_file_name("content");
        if let Err(e) = self.content.sync() {
            return Err(poison(&mut j, io_err(&content_dir)(e)));
        }
        let new_generation = j.generation + 1;
        let (bytes, swapped_in) = {
            let mut live = self.lock_live();
            let states: States = live
                .states
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let snap = Snapshot {
                journal_generation: new_generation,
                last_txn: j.done_txn,
                queues: self.queues.clone(),
                records: live
                    .records
                    .values()
                    .map(|(q, ff)| (*q, (**ff).clone()))
                    .collect(),
                swaps: live.swaps.values().cloned().collect(),
                next_id: self.next_id.load(Ordering::Relaxed),
                next_seq: self.next_seq.load(Ordering::Relaxed),
                next_swap: self.next_swap.load(Ordering::Relaxed),
                next_event: j.next_event,
            };
            (
                encode_snapshot(&snap, &states)?,
                std::mem::take(&mut live.swapped_in),
            )
        };
        let tmp = self.dir.join("snapshot.tmp");
        let snap_path = self.dir.join("snapshot");
        let written = (|| -> io::Result<()> {
            let mut f = faults::create(&tmp)?;
            faults::step(Step::Write, &tmp, || f.write_all(&bytes))?;
            faults::step(Step::Sync, &tmp, || f.sync_all())?;
            faults::rename(&tmp, &snap_path)
        })();
        if let Err(e) = written {
            // The old snapshot and journal still hold everything: swap files read back stay
            // until a checkpoint succeeds.
            self.lock_live().swapped_in.extend(swapped_in);
            let _ = fs::remove_file(&tmp);
            return Err(io_err(&snap_path)(e));
        }
        // From here the snapshot on disk may name the new journal.
        let path = journal_path(&self.dir, new_generation);
        let file = (|| -> io::Result<File> {
            sync_dir(&self.dir)?;
            let file = faults::step(Step::Create, &path, || {
                OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .open(&path)
            })?;
            sync_dir(&self.dir)?;
            Ok(file)
        })();
        let file = match file {
            Ok(f) => f,
            Err(e) => return Err(poison(&mut j, io_err(&path)(e))),
        };
        j.file = Some(file);
        let old_generation = j.generation;
        j.generation = new_generation;
        j.unsynced = false;
        drop(j);
        for g in 0..=old_generation {
            let p = journal_path(&self.dir, g);
            if g + 64 < old_generation && !p.exists() {
                continue;
            }
            let _ = fs::remove_file(p);
        }
        let swap_dir = self.swap_dir();
        for id in swapped_in {
            let _ = fs::remove_file(swap::swap_path(&swap_dir, id));
        }
        Ok(())
    }
}

/// How long opening waits for a lock held under this process's own id to go.
const OWN_LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// The pauses between its attempts: 1 ms, doubling to 50 ms.
const OWN_LOCK_RETRY: weir_backoff::Backoff = weir_backoff::Backoff::new(
    std::time::Duration::from_millis(1),
    2.0,
    std::time::Duration::from_millis(50),
);

/// Takes the advisory lock on `DIR/lock` (held until the returned file is closed, so also
/// when the process dies) and writes this process's id in it for whoever finds it taken.
fn lock_repository(dir: &Path) -> Result<File, RepositoryError> {
    let path = dir.join("lock");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    // A lock this process holds itself may be a copy of a closed handle's descriptor that
    // a child being started on another thread took with it (fork copies every descriptor,
    // and the copy lives until the child's exec closes it): wait a little for it to go
    // before calling the repository taken.
    let started = std::time::Instant::now();
    let mut attempt = 0;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(fs::TryLockError::WouldBlock) => {
                let holder = fs::read_to_string(&path)
                    .ok()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "unknown".into());
                let ours = holder == std::process::id().to_string();
                if ours && started.elapsed() < OWN_LOCK_PATIENCE {
                    std::thread::sleep(OWN_LOCK_RETRY.pause(attempt));
                    attempt += 1;
                    continue;
                }
                return Err(RepositoryError::Locked {
                    dir: dir.display().to_string(),
                    holder,
                });
            }
            Err(fs::TryLockError::Error(e)) => return Err(io_err(&path)(e)),
        }
    }
    file.set_len(0).map_err(io_err(&path))?;
    writeln!(file, "{}", std::process::id()).map_err(io_err(&path))?;
    Ok(file)
}

/// A provenance event's id: its frame's first event id plus its index in the frame. Ids run
/// on across frames from 0, below the ids of events recorded without a frame (top bit set).
pub fn event_id(first: u64, index: usize) -> u64 {
    first + index as u64
}

/// Applies committed `ops` to the live state.
fn apply_live(live: &mut Live, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put { queue, flowfile } => {
                live.records
                    .insert(flowfile.id, (*queue, Arc::new(flowfile.clone())));
            }
            Op::Delete { id } => {
                live.records.remove(id);
            }
            Op::SwapOut { info, ids } => {
                for id in ids {
                    live.records.remove(id);
                }
                live.swaps.insert(info.id, info.clone());
            }
            Op::SwapIn { swap } => {
                live.swaps.remove(swap);
                live.swapped_in.push(*swap);
            }
            Op::DeleteSource { .. } => {}
            Op::SetState { component, state } => {
                if state.is_empty() {
                    live.states.remove(component);
                } else {
                    live.states.insert(component.clone(), state.clone());
                }
            }
        }
    }
}

fn apply_recovered(
    live: &mut Live,
    swap_dir: &Path,
    t: &Txn,
    delete_sources: &mut Vec<(String, FileIdentity)>,
) -> Result<(), RepositoryError> {
    for op in &t.ops {
        match op {
            // A swap-in read back here: the running repository had the flow files in hand.
            Op::SwapIn { swap } => {
                let Some(info) = live.swaps.remove(swap) else {
                    continue;
                };
                let flowfiles = swap::read(swap_dir, *swap)
                    .map_err(io_err(&swap::swap_path(swap_dir, *swap)))?;
                for ff in flowfiles {
                    live.records.insert(ff.id, (info.queue, Arc::new(ff)));
                }
                live.swapped_in.push(*swap);
            }
            Op::DeleteSource { path, identity } => delete_sources.push((path.clone(), *identity)),
            other => apply_live(live, std::slice::from_ref(other)),
        }
    }
    Ok(())
}

/// The repository's checkpoint (its records and swap table), framed by [`weir_frame`].
const CHECKPOINT_FILE: FileFormat =
    FileFormat::new(b"WEIRSNP1", 1, "flow-file repository checkpoint", "kind");

/// The checkpoint's payload: the [`Snapshot`], then the components' [`States`].
fn encode_snapshot(snap: &Snapshot, states: &States) -> Result<Vec<u8>, RepositoryError> {
    let encode_err = |e: postcard::Error| RepositoryError::Decode {
        what: "the snapshot".into(),
        reason: e.to_string(),
    };
    let mut payload = postcard::to_allocvec(snap).map_err(encode_err)?;
    payload.extend(postcard::to_allocvec(states).map_err(encode_err)?);
    Ok(CHECKPOINT_FILE.frame(0, &payload))
}

/// A checkpoint's [`Snapshot`] and [`States`] (none after a snapshot alone, as written
/// before processors had state).
fn decode_snapshot(path: &Path, bytes: &[u8]) -> Result<(Snapshot, States), RepositoryError> {
    let bad = |reason: String| RepositoryError::Decode {
        what: path.display().to_string(),
        reason,
    };
    let payload = CHECKPOINT_FILE
        .unframe(0, bytes)
        .map_err(|e| bad(e.to_string()))?;
    let (snap, rest) =
        postcard::take_from_bytes::<Snapshot>(payload).map_err(|e| bad(e.to_string()))?;
    let states = if rest.is_empty() {
        Vec::new()
    } else {
        postcard::from_bytes(rest).map_err(|e| bad(e.to_string()))?
    };
    Ok((snap, states))
}

/// Reads a repository's queued flow files per queue key without opening it for writing
/// (for `weir flow status`): (key, count in memory, bytes, count swapped out).
///
/// # Errors
/// As [`FlowFileRepository::open`], except that a torn tail is ignored, not truncated.
pub fn inspect(dir: &Path) -> Result<Vec<(String, u64, u64)>, RepositoryError> {
    let ff_dir = dir.join("flowfiles");
    let snap_path = ff_dir.join("snapshot");
    let bytes = fs::read(&snap_path).map_err(io_err(&snap_path))?;
    let (snap, _) = decode_snapshot(&snap_path, &bytes)?;
    let mut live = Live::default();
    for (q, ff) in snap.records {
        live.records.insert(ff.id, (q, Arc::new(ff)));
    }
    for s in snap.swaps {
        live.swaps.insert(s.id, s);
    }
    let mut last = snap.last_txn;
    let mut gens: Vec<u64> = fs::read_dir(&ff_dir)
        .map_err(io_err(&ff_dir))?
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("journal-")?
                .parse()
                .ok()
        })
        .filter(|g| *g >= snap.journal_generation)
        .collect();
    gens.sort_unstable();
    let mut ignored = Vec::new();
    for g in gens {
        let path = journal_path(&ff_dir, g);
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        for (offset, txn, payload) in frame::scan(&path, &bytes, last)?.frames {
            let t: Txn = postcard::from_bytes(payload).map_err(|e| RepositoryError::Decode {
                what: format!("frame in {} at offset {offset}", path.display()),
                reason: e.to_string(),
            })?;
            apply_recovered(&mut live, &ff_dir.join("swap"), &t, &mut ignored)?;
            last = txn;
        }
    }
    let mut out: Vec<(String, u64, u64)> = snap.queues.iter().map(|k| (k.clone(), 0, 0)).collect();
    for (q, ff) in live.records.values() {
        if let Some(row) = out.get_mut(*q as usize) {
            row.1 += 1;
            row.2 += ff.size();
        }
    }
    for s in live.swaps.values() {
        if let Some(row) = out.get_mut(s.queue as usize) {
            row.1 += s.count;
            row.2 += s.bytes;
        }
    }
    Ok(out)
}

/// How long commits may wait for a checkpoint; exposed for the engine's status line.
pub const CHECKPOINT_WARN: Duration = Duration::from_secs(1);
