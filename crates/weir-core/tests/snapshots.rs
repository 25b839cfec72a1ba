//! Snapshots in the core runtime: barriers, alignment, the two phases, restarts from the last
//! snapshot and restores at another parallelism, with a two-phase sink whose committed
//! output must hold every item exactly once.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_core::snapshot::{
    Guarantee, LocalDirStore, Manifest, RestartPolicy, SavepointError, SnapshotConfig,
    SnapshotStore, copy_snapshot, verify,
};
use weir_core::{
    Dag, Edge, Error, Executor, ExecutorConfig, Inbox, JobConfig, Outbox, Partitioner, Processor,
    ProcessorContext, ProcessorResult, SnapshotEntry, SnapshotWriter, Vertex,
};

const KEYS: u64 = 100;

/// Emits `0..end`, `per_call` per call; saves its position. With a `hold`, it waits at the
/// half-way mark until the sink has committed that many times, so that snapshots surely
/// complete before a failure is injected.
struct CountingSource {
    next: u64,
    end: u64,
    per_call: u64,
    hold: Option<(Arc<AtomicU64>, u64)>,
}

impl Processor for CountingSource {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if let Some((commits, needed)) = &self.hold
            && self.next >= self.end / 2
            && commits.load(Ordering::Relaxed) < *needed
        {
            return Ok(false);
        }
        let stop = (self.next + self.per_call).min(self.end);
        while self.next < stop {
            if outbox.port::<u64>(0).offer(self.next).is_err() {
                return Ok(false);
            }
            self.next += 1;
        }
        Ok(self.next == self.end)
    }

    fn save_to_snapshot(
        &mut self,
        _: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        writer.put(b"next".to_vec(), self.next.to_le_bytes().to_vec());
        Ok(true)
    }

    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        for e in entries {
            self.next = u64::from_le_bytes(e.value.try_into().map_err(|_| "bad position")?);
        }
        Ok(())
    }
}

/// Fails once, at the first item after `after_commits` commits, if armed.
struct Faulty {
    armed: Arc<AtomicBool>,
    commits: Arc<AtomicU64>,
    after_commits: u64,
}

impl Processor for Faulty {
    fn process(&mut self, _: usize, inbox: &mut Inbox, outbox: &mut Outbox) -> ProcessorResult<()> {
        let items = inbox.items::<u64>();
        while let Some(&x) = items.front() {
            if self.commits.load(Ordering::Relaxed) >= self.after_commits
                && self.armed.swap(false, Ordering::Relaxed)
            {
                return Err(format!("injected failure at item {x}").into());
            }
            if outbox.port::<u64>(0).offer(x).is_err() {
                break;
            }
            items.pop_front();
        }
        Ok(())
    }
}

/// Counts and sums items by key (`x % KEYS`), keyed state saved by partition; emits
/// `(key, count, sum)` at the end.
#[derive(Default)]
struct KeyedSum {
    totals: HashMap<u64, (u64, u64)>,
    emitted: Vec<(u64, u64, u64)>,
    started: bool,
}

impl Processor for KeyedSum {
    fn process(&mut self, _: usize, inbox: &mut Inbox, _: &mut Outbox) -> ProcessorResult<()> {
        for x in inbox.items::<u64>().drain(..) {
            let t = self.totals.entry(x % KEYS).or_default();
            t.0 += 1;
            t.1 += x;
        }
        Ok(())
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.started {
            self.started = true;
            self.emitted = self.totals.drain().map(|(k, (c, s))| (k, c, s)).collect();
        }
        while let Some(row) = self.emitted.pop() {
            if let Err(row) = outbox.port::<(u64, u64, u64)>(0).offer(row) {
                self.emitted.push(row);
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn save_to_snapshot(
        &mut self,
        _: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        let partitioner = Partitioner::default();
        for (k, (c, s)) in &self.totals {
            let mut value = c.to_le_bytes().to_vec();
            value.extend(s.to_le_bytes());
            writer.put_keyed(
                partitioner.partition_of(k) as u16,
                k.to_le_bytes().to_vec(),
                value,
            );
        }
        Ok(true)
    }

    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        for e in entries {
            let k = u64::from_le_bytes(e.key[..8].try_into()?);
            let c = u64::from_le_bytes(e.value[..8].try_into()?);
            let s = u64::from_le_bytes(e.value[8..16].try_into()?);
            self.totals.insert(k, (c, s));
        }
        Ok(())
    }
}

/// Committed output: (instance, epoch) -> rows. A commit inserts under its epoch, so
/// committing the same epoch twice (a restore runs phase 2 again) changes nothing.
type Committed = Arc<Mutex<BTreeMap<(usize, u64), Vec<Row>>>>;

/// `(key, count, sum)`.
type Row = (u64, u64, u64);

/// A two-phase sink: rows wait in `pending`; phase 1 prepares them as epoch `epoch`; phase 2
/// commits every prepared epoch.
struct TwoPhaseSink {
    instance: usize,
    epoch: u64,
    pending: Vec<(u64, u64, u64)>,
    prepared: Vec<(u64, Vec<Row>)>,
    committed: Committed,
    commits: Arc<AtomicU64>,
}

fn encode_rows(rows: &[(u64, u64, u64)]) -> Vec<u8> {
    rows.iter()
        .flat_map(|(a, b, c)| [a.to_le_bytes(), b.to_le_bytes(), c.to_le_bytes()])
        .flatten()
        .collect()
}

fn decode_rows(bytes: &[u8]) -> Vec<(u64, u64, u64)> {
    bytes
        .chunks_exact(24)
        .map(|c| {
            let n = |i: usize| u64::from_le_bytes(c[i..i + 8].try_into().unwrap());
            (n(0), n(8), n(16))
        })
        .collect()
}

impl Processor for TwoPhaseSink {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.instance = ctx.global_index();
        Ok(())
    }

    fn process(&mut self, _: usize, inbox: &mut Inbox, _: &mut Outbox) -> ProcessorResult<()> {
        self.pending
            .extend(inbox.items::<(u64, u64, u64)>().drain(..));
        Ok(())
    }

    fn save_to_snapshot(
        &mut self,
        _: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        self.epoch += 1;
        let rows = std::mem::take(&mut self.pending);
        self.prepared.push((self.epoch, rows));
        writer.put(b"epoch".to_vec(), self.epoch.to_le_bytes().to_vec());
        for (epoch, rows) in &self.prepared {
            writer.put(epoch.to_le_bytes().to_vec(), encode_rows(rows));
        }
        Ok(true)
    }

    fn snapshot_commit_finish(&mut self, success: bool) -> ProcessorResult<bool> {
        assert!(success);
        let mut committed = self.committed.lock().unwrap();
        for (epoch, rows) in self.prepared.drain(..) {
            committed.insert((self.instance, epoch), rows);
        }
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        // A sink's own state: only this instance's epochs (a sink keeps its parallelism here).
        for e in entries {
            if e.key == b"epoch" {
                self.epoch = self.epoch.max(u64::from_le_bytes(e.value[..8].try_into()?));
            } else {
                let epoch = u64::from_le_bytes(e.key[..8].try_into()?);
                self.prepared.push((epoch, decode_rows(&e.value)));
            }
        }
        Ok(())
    }
}

struct Setup {
    committed: Committed,
    commits: Arc<AtomicU64>,
    armed: Arc<AtomicBool>,
}

fn dag(setup: &Setup, items: u64, sum_parallelism: usize, after_commits: u64) -> Dag {
    let mut dag = Dag::new();
    let hold = Arc::clone(&setup.commits);
    let source = dag.vertex(
        Vertex::new("source", move |_| CountingSource {
            next: 0,
            end: items,
            per_call: 500,
            hold: Some((Arc::clone(&hold), after_commits)),
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let (armed, commits) = (Arc::clone(&setup.armed), Arc::clone(&setup.commits));
    let faulty = dag.vertex(
        Vertex::new("faulty", move |_| Faulty {
            armed: Arc::clone(&armed),
            commits: Arc::clone(&commits),
            after_commits,
        })
        .accepts::<u64>()
        .emits::<u64>()
        .local_parallelism(2),
    );
    let sum = dag.vertex(
        Vertex::new("sum", |_| KeyedSum::default())
            .accepts::<u64>()
            .emits::<(u64, u64, u64)>()
            .local_parallelism(sum_parallelism),
    );
    let (committed, commits) = (Arc::clone(&setup.committed), Arc::clone(&setup.commits));
    let sink = dag.vertex(
        Vertex::new("sink", move |_| TwoPhaseSink {
            instance: 0,
            epoch: 0,
            pending: Vec::new(),
            prepared: Vec::new(),
            committed: Arc::clone(&committed),
            commits: Arc::clone(&commits),
        })
        .accepts::<(u64, u64, u64)>()
        .local_parallelism(1),
    );
    dag.edge(Edge::between(source, faulty));
    dag.edge(Edge::between(faulty, sum).partitioned(|x: &u64| x % KEYS));
    dag.edge(Edge::between(sum, sink));
    dag
}

fn config(dir: &std::path::Path, guarantee: Guarantee, restart: RestartPolicy) -> JobConfig {
    let mut snapshots = SnapshotConfig::new(
        Arc::new(LocalDirStore::new(dir)),
        Duration::from_millis(2),
        guarantee,
    );
    snapshots.restart = restart;
    snapshots.restart.backoff = Duration::from_millis(1);
    JobConfig::default()
        .with_name("keyed-sum")
        .with_snapshots(snapshots)
}

fn expected(items: u64) -> BTreeMap<u64, (u64, u64)> {
    let mut out = BTreeMap::new();
    for x in 0..items {
        let t: &mut (u64, u64) = out.entry(x % KEYS).or_default();
        t.0 += 1;
        t.1 += x;
    }
    out
}

fn output(committed: &Committed) -> BTreeMap<u64, (u64, u64)> {
    let mut out = BTreeMap::new();
    for rows in committed.lock().unwrap().values() {
        for &(k, c, s) in rows {
            assert!(
                out.insert(k, (c, s)).is_none(),
                "key {k} was committed twice"
            );
        }
    }
    out
}

fn setup(armed: bool) -> Setup {
    Setup {
        committed: Arc::default(),
        commits: Arc::default(),
        armed: Arc::new(AtomicBool::new(armed)),
    }
}

fn executor() -> Executor {
    Executor::new(ExecutorConfig {
        workers: 2,
        ..ExecutorConfig::default()
    })
    .unwrap()
}

#[test]
fn a_failed_job_restarts_from_its_last_snapshot_and_commits_every_item_once() {
    let dir = tempfile::tempdir().unwrap();
    let items = 200_000;
    let s = setup(true);
    let job = executor()
        .submit(
            dag(&s, items, 2, 3),
            config(dir.path(), Guarantee::ExactlyOnce, RestartPolicy::default()),
        )
        .unwrap();
    assert!(job.wait_timeout(Duration::from_secs(120)), "the job ends");
    let (restarts, restored, stats) = (job.restarts(), job.restored_from(), job.snapshot_stats());
    job.join().expect("the job recovers");
    assert!(restored.is_some(), "the restart restored a snapshot");
    assert_eq!(restarts, 1);
    assert!(
        stats.iter().any(|s| s.terminal),
        "a terminal snapshot was taken"
    );
    assert_eq!(output(&s.committed), expected(items));
}

/// `config` with savepoints kept in `DIR/savepoints`.
fn savepoint_config(dir: &std::path::Path) -> JobConfig {
    let mut config = config(dir, Guarantee::ExactlyOnce, RestartPolicy::never());
    let snapshots = config.snapshots.take().unwrap();
    config.with_snapshots(snapshots.with_savepoints(Arc::new(LocalDirStore::savepoints(dir))))
}

#[test]
fn stop_with_savepoint_keeps_it_and_the_job_resumes_from_it_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let items = 100_000;
    let s = setup(false);
    // The source waits at the half-way mark for ever: the job runs until it is stopped.
    let job = executor()
        .submit(dag(&s, items, 2, u64::MAX), savepoint_config(dir.path()))
        .unwrap();
    let savepoint = job.stop_with_savepoint().expect("a savepoint");
    assert!(matches!(job.join(), Err(Error::Cancelled)));
    let savepoints = LocalDirStore::savepoints(dir.path());
    assert_eq!(savepoints.ids("keyed-sum").unwrap(), vec![savepoint.id]);
    assert_eq!(
        savepoint.location,
        savepoints.location("keyed-sum", savepoint.id, "")
    );
    let kept = verify(&savepoints, "keyed-sum", savepoint.id)
        .unwrap()
        .expect("complete");
    assert!(kept.savepoint && !kept.terminal);
    // The job's own store holds it too, marked alike, so the same job resumes from it.
    let store = LocalDirStore::new(dir.path());
    let own = verify(&store, "keyed-sum", savepoint.id).unwrap().unwrap();
    assert_eq!(own, kept);
    // And it is the newest there: no periodic snapshot followed it before the job stopped
    // (every 2 ms one is due), so the job resumes from it.
    assert_eq!(
        store.ids("keyed-sum").unwrap().into_iter().max(),
        Some(savepoint.id)
    );

    let job = executor()
        .submit(dag(&s, items, 2, 0), savepoint_config(dir.path()))
        .unwrap();
    assert_eq!(job.restored_from(), Some(savepoint.id));
    job.join().unwrap();
    assert_eq!(output(&s.committed), expected(items));
    // No job prunes a savepoint; the next ids are above it.
    assert_eq!(savepoints.ids("keyed-sum").unwrap(), vec![savepoint.id]);
    assert!(store.ids("keyed-sum").unwrap()[0] > savepoint.id);
}

#[test]
fn a_savepoint_copied_into_a_fresh_store_restores_there() {
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let items = 60_000;
    let s = setup(false);
    let job = executor()
        .submit(dag(&s, items, 2, u64::MAX), savepoint_config(first.path()))
        .unwrap();
    let savepoint = job.stop_with_savepoint().unwrap();
    let _ = job.join();
    let copied: Manifest = copy_snapshot(
        &LocalDirStore::savepoints(first.path()),
        "keyed-sum",
        savepoint.id,
        &LocalDirStore::new(second.path()),
        "keyed-sum",
    )
    .unwrap();
    assert!(copied.savepoint);
    // At another parallelism, from another directory.
    let job = executor()
        .submit(dag(&s, items, 3, 0), savepoint_config(second.path()))
        .unwrap();
    assert_eq!(job.restored_from(), Some(savepoint.id));
    job.join().unwrap();
    assert_eq!(output(&s.committed), expected(items));
}

#[test]
fn a_savepoint_needs_a_store_and_a_running_job() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(false);
    let job = executor()
        .submit(
            dag(&s, 1_000, 1, u64::MAX),
            config(dir.path(), Guarantee::ExactlyOnce, RestartPolicy::never()),
        )
        .unwrap();
    assert_eq!(
        job.stop_with_savepoint(),
        Err(SavepointError::NotConfigured)
    );
    job.cancel();
    let _ = job.join();

    let s = setup(false);
    let job = executor()
        .submit(dag(&s, 1_000, 1, 0), savepoint_config(dir.path()))
        .unwrap();
    let monitor = job.monitor();
    job.join().unwrap();
    assert_eq!(monitor.stop_with_savepoint(), Err(SavepointError::Ended));
    assert!(
        LocalDirStore::savepoints(dir.path())
            .ids("keyed-sum")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn at_least_once_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let items = 100_000;
    let s = setup(true);
    let job = executor()
        .submit(
            dag(&s, items, 2, 2),
            config(dir.path(), Guarantee::AtLeastOnce, RestartPolicy::default()),
        )
        .unwrap();
    job.join().expect("the job recovers");
    let out = output(&s.committed);
    let want = expected(items);
    assert_eq!(out.len(), want.len());
    for (k, (c, s)) in want {
        let (got_c, got_s) = out[&k];
        assert!(got_c >= c && got_s >= s, "key {k}: {got_c} < {c}");
    }
}

#[test]
fn a_snapshot_restores_at_another_parallelism() {
    for parallelism in [1, 4] {
        let dir = tempfile::tempdir().unwrap();
        let items = 100_000;
        let s = setup(true);
        let failed = executor()
            .submit(
                dag(&s, items, 2, 2),
                config(dir.path(), Guarantee::ExactlyOnce, RestartPolicy::never()),
            )
            .unwrap()
            .join();
        assert!(
            matches!(&failed, Err(Error::ProcessorFailed { vertex, .. }) if vertex == "faulty"),
            "{failed:?}"
        );
        let job = executor()
            .submit(
                dag(&s, items, parallelism, 0),
                config(dir.path(), Guarantee::ExactlyOnce, RestartPolicy::never()),
            )
            .unwrap();
        assert!(job.restored_from().is_some());
        job.join().unwrap();
        assert_eq!(
            output(&s.committed),
            expected(items),
            "at parallelism {parallelism}"
        );
    }
}

#[test]
fn a_changed_dag_is_refused_naming_the_vertex() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(true);
    let failed = executor()
        .submit(
            dag(&s, 50_000, 2, 1),
            config(dir.path(), Guarantee::ExactlyOnce, RestartPolicy::never()),
        )
        .unwrap()
        .join();
    assert!(failed.is_err());
    let mut other = Dag::new();
    let a = other.vertex(
        Vertex::new("source", |_| CountingSource {
            next: 0,
            end: 10,
            per_call: 10,
            hold: None,
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let b = other.vertex(Vertex::new("renamed", |_| KeyedSum::default()).accepts::<u64>());
    other.edge(Edge::between(a, b));
    let err = executor()
        .submit(
            other,
            config(dir.path(), Guarantee::ExactlyOnce, RestartPolicy::never()),
        )
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("'renamed'") || text.contains("'faulty'"),
        "{text}"
    );
}

// ---- Crash windows: a store that dies around the manifest, a sink that dies in phase 2, and
// the same snapshot restored twice. The sink's committed items must hold every item once.

/// Committed items by (sink instance, epoch).
type CommittedItems = Arc<Mutex<BTreeMap<(usize, u64), Vec<u64>>>>;

/// A two-phase sink of items. A commit inserts each prepared epoch under its key, so a commit
/// repeated after a restore changes nothing. `fail_commits` makes instance 1 fail that many
/// commits, after instance 0 has committed the same snapshot.
struct ItemSink {
    instance: usize,
    epoch: u64,
    pending: Vec<u64>,
    prepared: Vec<(u64, Vec<u64>)>,
    committed: CommittedItems,
    commits: Arc<AtomicU64>,
    fail_commits: Arc<AtomicU64>,
    repeated: Arc<AtomicU64>,
    /// Commits of instance 0, and this instance's own.
    zero_commits: Arc<AtomicU64>,
    own_commits: u64,
}

impl Processor for ItemSink {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.instance = ctx.global_index();
        Ok(())
    }

    fn process(&mut self, _: usize, inbox: &mut Inbox, _: &mut Outbox) -> ProcessorResult<()> {
        self.pending.extend(inbox.items::<u64>().drain(..));
        Ok(())
    }

    fn save_to_snapshot(
        &mut self,
        _: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        self.epoch += 1;
        self.prepared
            .push((self.epoch, std::mem::take(&mut self.pending)));
        writer.put(
            (self.instance as u64).to_le_bytes().to_vec(),
            serde_json_like(self.epoch, &self.prepared),
        );
        Ok(true)
    }

    fn snapshot_commit_finish(&mut self, _success: bool) -> ProcessorResult<bool> {
        if self.instance == 1 && self.fail_commits.load(Ordering::Relaxed) > 0 {
            // Fail only once instance 0 committed this snapshot: it must commit it again.
            if self.zero_commits.load(Ordering::Relaxed) <= self.own_commits {
                return Ok(false);
            }
            self.fail_commits.fetch_sub(1, Ordering::Relaxed);
            return Err("injected failure in phase 2".into());
        }
        self.own_commits += 1;
        if self.instance == 0 {
            self.zero_commits.fetch_add(1, Ordering::Relaxed);
        }
        let mut committed = self.committed.lock().unwrap();
        for (epoch, items) in self.prepared.drain(..) {
            if committed.insert((self.instance, epoch), items).is_some() {
                self.repeated.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        for e in entries {
            if u64::from_le_bytes(e.key[..8].try_into()?) as usize != self.instance {
                continue;
            }
            let (epoch, prepared) = parse_json_like(&e.value);
            self.epoch = epoch;
            self.prepared = prepared;
        }
        Ok(())
    }
}

/// `epoch`, then each prepared epoch as (epoch, count, items...), all little-endian u64.
fn serde_json_like(epoch: u64, prepared: &[(u64, Vec<u64>)]) -> Vec<u8> {
    let mut out = epoch.to_le_bytes().to_vec();
    for (e, items) in prepared {
        out.extend(e.to_le_bytes());
        out.extend((items.len() as u64).to_le_bytes());
        for i in items {
            out.extend(i.to_le_bytes());
        }
    }
    out
}

fn parse_json_like(bytes: &[u8]) -> (u64, Vec<(u64, Vec<u64>)>) {
    let mut words = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()));
    let epoch = words.next().unwrap();
    let mut prepared = Vec::new();
    while let Some(e) = words.next() {
        let n = words.next().unwrap() as usize;
        prepared.push((e, words.by_ref().take(n).collect()));
    }
    (epoch, prepared)
}

/// Where a [`CrashingStore`] dies.
#[derive(Clone, Copy)]
enum Crash {
    /// The `n`th publish fails before the manifest is written.
    BeforeManifest(u64),
    /// The `n`th publish writes the manifest, then fails before phase 2 can start.
    AfterManifest(u64),
}

/// A local store that dies once at a chosen point, like a process killed there.
struct CrashingStore {
    inner: LocalDirStore,
    crash: Crash,
    publishes: AtomicU64,
}

impl weir_core::snapshot::SnapshotStore for CrashingStore {
    fn write_part(
        &self,
        job: &str,
        id: u64,
        file: &str,
        bytes: &[u8],
    ) -> Result<(), weir_core::snapshot::SnapshotError> {
        self.inner.write_part(job, id, file, bytes)
    }
    fn publish(
        &self,
        job: &str,
        id: u64,
        manifest: &[u8],
    ) -> Result<(), weir_core::snapshot::SnapshotError> {
        let n = self.publishes.fetch_add(1, Ordering::Relaxed) + 1;
        let died = || weir_core::snapshot::SnapshotError::Io {
            path: self.inner.location(job, id, "manifest"),
            source: std::io::Error::other("the process died here"),
        };
        match self.crash {
            Crash::BeforeManifest(at) if n == at => Err(died()),
            Crash::AfterManifest(at) if n == at => {
                self.inner.publish(job, id, manifest)?;
                Err(died())
            }
            _ => self.inner.publish(job, id, manifest),
        }
    }
    fn ids(&self, job: &str) -> Result<Vec<u64>, weir_core::snapshot::SnapshotError> {
        self.inner.ids(job)
    }
    fn read_manifest(
        &self,
        job: &str,
        id: u64,
    ) -> Result<Option<Vec<u8>>, weir_core::snapshot::SnapshotError> {
        self.inner.read_manifest(job, id)
    }
    fn read_part(
        &self,
        job: &str,
        id: u64,
        file: &str,
    ) -> Result<Vec<u8>, weir_core::snapshot::SnapshotError> {
        self.inner.read_part(job, id, file)
    }
    fn remove(&self, job: &str, id: u64) -> Result<(), weir_core::snapshot::SnapshotError> {
        self.inner.remove(job, id)
    }
    fn jobs(&self) -> Result<Vec<String>, weir_core::snapshot::SnapshotError> {
        self.inner.jobs()
    }
    fn location(&self, job: &str, id: u64, file: &str) -> std::path::PathBuf {
        self.inner.location(job, id, file)
    }
}

struct Items {
    committed: CommittedItems,
    commits: Arc<AtomicU64>,
    fail_commits: Arc<AtomicU64>,
    repeated: Arc<AtomicU64>,
    zero_commits: Arc<AtomicU64>,
    armed: Arc<AtomicBool>,
}

impl Items {
    fn new() -> Self {
        Items {
            committed: Arc::default(),
            commits: Arc::default(),
            fail_commits: Arc::default(),
            repeated: Arc::default(),
            zero_commits: Arc::default(),
            armed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// source → faulty → sink (2 instances), the source holding at half-way until the sink
    /// committed `hold` times.
    fn dag(&self, items: u64, hold: u64, fail_after: u64) -> Dag {
        let mut dag = Dag::new();
        let commits = Arc::clone(&self.commits);
        let source = dag.vertex(
            Vertex::new("source", move |_| CountingSource {
                next: 0,
                end: items,
                per_call: 200,
                hold: Some((Arc::clone(&commits), hold)),
            })
            .emits::<u64>()
            .local_parallelism(1),
        );
        let (armed, commits) = (Arc::clone(&self.armed), Arc::clone(&self.commits));
        let faulty = dag.vertex(
            Vertex::new("faulty", move |_| Faulty {
                armed: Arc::clone(&armed),
                commits: Arc::clone(&commits),
                after_commits: fail_after,
            })
            .accepts::<u64>()
            .emits::<u64>()
            .local_parallelism(1),
        );
        let (committed, commits, fail, repeated) = (
            Arc::clone(&self.committed),
            Arc::clone(&self.commits),
            Arc::clone(&self.fail_commits),
            Arc::clone(&self.repeated),
        );
        let zero_commits = Arc::clone(&self.zero_commits);
        let sink = dag.vertex(
            Vertex::new("sink", move |_| ItemSink {
                instance: 0,
                epoch: 0,
                pending: Vec::new(),
                prepared: Vec::new(),
                committed: Arc::clone(&committed),
                commits: Arc::clone(&commits),
                fail_commits: Arc::clone(&fail),
                repeated: Arc::clone(&repeated),
                zero_commits: Arc::clone(&zero_commits),
                own_commits: 0,
            })
            .accepts::<u64>()
            .local_parallelism(2),
        );
        dag.edge(Edge::between(source, faulty));
        dag.edge(Edge::between(faulty, sink));
        dag
    }

    /// Every item in `0..items` committed exactly once.
    fn assert_exactly_once(&self, items: u64) {
        let mut seen = vec![0u8; items as usize];
        for batch in self.committed.lock().unwrap().values() {
            for &i in batch {
                seen[i as usize] += 1;
            }
        }
        let wrong: Vec<usize> = (0..seen.len()).filter(|&i| seen[i] != 1).take(5).collect();
        assert!(
            wrong.is_empty(),
            "items not committed exactly once: {wrong:?}"
        );
    }
}

fn store_config(
    store: Arc<dyn weir_core::snapshot::SnapshotStore>,
    restart: RestartPolicy,
) -> JobConfig {
    let mut snapshots =
        SnapshotConfig::new(store, Duration::from_millis(2), Guarantee::ExactlyOnce);
    snapshots.restart = restart;
    snapshots.restart.backoff = Duration::from_millis(1);
    JobConfig::default()
        .with_name("items")
        .with_snapshots(snapshots)
}

fn crash_and_resume(crash: Crash) {
    let dir = tempfile::tempdir().unwrap();
    let items = 50_000;
    let s = Items::new();
    let crashing = Arc::new(CrashingStore {
        inner: LocalDirStore::new(dir.path()),
        crash,
        publishes: AtomicU64::new(0),
    });
    let failed = executor()
        .submit(
            s.dag(items, 3, u64::MAX),
            store_config(crashing, RestartPolicy::default()),
        )
        .unwrap()
        .join();
    assert!(
        matches!(&failed, Err(Error::Snapshot(_))),
        "the store's death fails the job without a restart: {failed:?}"
    );
    let job = executor()
        .submit(
            s.dag(items, 0, u64::MAX),
            store_config(
                Arc::new(LocalDirStore::new(dir.path())),
                RestartPolicy::never(),
            ),
        )
        .unwrap();
    assert!(job.restored_from().is_some(), "the next run resumes");
    job.join().unwrap();
    s.assert_exactly_once(items);
}

#[test]
fn a_crash_before_the_manifest_resumes_from_the_snapshot_before() {
    crash_and_resume(Crash::BeforeManifest(3));
}

#[test]
fn a_crash_after_the_manifest_commits_that_snapshot_on_restore() {
    crash_and_resume(Crash::AfterManifest(3));
}

#[test]
fn a_crash_during_phase_2_commits_the_rest_on_restore_and_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let items = 50_000;
    let s = Items::new();
    s.fail_commits.store(1, Ordering::Relaxed);
    let job = executor()
        .submit(
            s.dag(items, 4, u64::MAX),
            store_config(
                Arc::new(LocalDirStore::new(dir.path())),
                RestartPolicy::default(),
            ),
        )
        .unwrap();
    assert!(job.wait_timeout(Duration::from_secs(120)));
    let restarts = job.restarts();
    job.join().unwrap();
    assert_eq!(restarts, 1, "the failed commit restarted the job");
    assert_eq!(s.fail_commits.load(Ordering::Relaxed), 0);
    assert!(
        s.repeated.load(Ordering::Relaxed) > 0,
        "instance 0 committed the restored snapshot again, idempotently"
    );
    s.assert_exactly_once(items);
}

#[test]
fn the_same_snapshot_restored_twice_commits_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let items = 50_000;
    let s = Items::new();
    let store = || -> Arc<dyn weir_core::snapshot::SnapshotStore> {
        Arc::new(LocalDirStore::new(dir.path()))
    };
    s.armed.store(true, Ordering::Relaxed);
    let first = executor()
        .submit(
            s.dag(items, 3, 3),
            store_config(store(), RestartPolicy::never()),
        )
        .unwrap()
        .join();
    assert!(first.is_err(), "the injected failure stops the first run");
    // The second run fails at its first item, and takes no snapshot before it (the interval
    // is an hour).
    s.armed.store(true, Ordering::Relaxed);
    let mut no_snapshots = store_config(store(), RestartPolicy::never());
    if let Some(c) = no_snapshots.snapshots.as_mut() {
        c.interval = Duration::from_secs(3600);
    }
    let second = executor().submit(s.dag(items, 0, 0), no_snapshots).unwrap();
    let restored = second.restored_from();
    assert!(second.join().is_err());
    let third = executor()
        .submit(
            s.dag(items, 0, u64::MAX),
            store_config(store(), RestartPolicy::never()),
        )
        .unwrap();
    assert_eq!(
        third.restored_from(),
        restored,
        "the same snapshot, restored again"
    );
    third.join().unwrap();
    s.assert_exactly_once(items);
}

/// Takes one item per call, slowly, after a late start; records what it had taken at each
/// save.
struct SlowCounter {
    taken: u64,
    started: bool,
    saves: Arc<Mutex<Vec<u64>>>,
}

impl Processor for SlowCounter {
    fn process(&mut self, _: usize, inbox: &mut Inbox, _: &mut Outbox) -> ProcessorResult<()> {
        if inbox.items::<u64>().pop_front().is_some() {
            self.taken += 1;
            // Slow work, so that snapshots are asked for while items still wait in the inbox.
            std::thread::sleep(Duration::from_micros(500));
        }
        Ok(())
    }

    /// Called before the first drain of the input: a late start, so that the first drain
    /// finds the items and the end of the input together.
    fn try_process(&mut self, _: &mut Outbox) -> ProcessorResult<bool> {
        if !std::mem::replace(&mut self.started, true) {
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(true)
    }

    fn save_to_snapshot(
        &mut self,
        _: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        self.saves.lock().unwrap().push(self.taken);
        writer.put(b"taken".to_vec(), self.taken.to_le_bytes().to_vec());
        Ok(true)
    }
}

/// A [`CountingSource`] that records its position at each save.
struct RecordingSource {
    inner: CountingSource,
    saves: Arc<Mutex<Vec<u64>>>,
}

impl Processor for RecordingSource {
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.inner.complete(outbox)
    }

    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        self.saves.lock().unwrap().push(self.inner.next);
        self.inner.save_to_snapshot(outbox, writer)
    }
}

/// Once a source has finished, its final state stands in for it in every snapshot: one saying
/// it emitted everything. A consumer whose input has ended may still hold some of those items
/// in its inbox, so it must process them before it saves; a snapshot taken earlier would lose
/// them on restore. Each snapshot's consumer state must hold exactly what that snapshot's
/// source state says was emitted.
#[test]
fn a_consumer_of_a_finished_source_saves_only_after_its_last_items() {
    let dir = tempfile::tempdir().unwrap();
    let items = 200;
    let (source_saves, counter_saves) = (Arc::default(), Arc::default());
    let mut dag = Dag::new();
    let recorded = Arc::clone(&source_saves);
    let source = dag.vertex(
        Vertex::new("source", move |_| RecordingSource {
            inner: CountingSource {
                next: 0,
                end: items,
                per_call: items,
                hold: None,
            },
            saves: Arc::clone(&recorded),
        })
        .emits::<u64>()
        .local_parallelism(1),
    );
    let recorded = Arc::clone(&counter_saves);
    let counter = dag.vertex(
        Vertex::new("counter", move |_| SlowCounter {
            taken: 0,
            started: false,
            saves: Arc::clone(&recorded),
        })
        .accepts::<u64>()
        .local_parallelism(1),
    );
    dag.edge(Edge::between(source, counter));
    let mut config = config(dir.path(), Guarantee::ExactlyOnce, RestartPolicy::never());
    if let Some(c) = config.snapshots.as_mut() {
        c.interval = Duration::from_millis(1);
    }
    let job = executor().submit(dag, config).unwrap();
    assert!(job.wait_timeout(Duration::from_secs(60)), "the job ends");
    job.join().unwrap();
    let (sources, counters) = (source_saves.lock().unwrap(), counter_saves.lock().unwrap());
    assert_eq!(sources.last(), Some(&items), "the source's final state");
    assert!(
        counters.len() > sources.len(),
        "snapshots were taken after the source finished: source {sources:?}, consumer {counters:?}"
    );
    // The i-th save of each is for the same snapshot, until the source's final state stands
    // in for it.
    for (i, taken) in counters.iter().enumerate() {
        let emitted = sources[i.min(sources.len() - 1)];
        assert_eq!(
            *taken,
            emitted,
            "snapshot {}: the consumer held {taken} items, the source had emitted {emitted}: source {sources:?}, consumer {counters:?}",
            i + 1
        );
    }
}
