//! Snapshots in the core runtime: barriers, alignment, the two phases, restarts from the last
//! snapshot and restores at another parallelism, with a two-phase sink whose committed
//! output must hold every item exactly once.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_core::snapshot::{Guarantee, LocalDirStore, RestartPolicy, SnapshotConfig};
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
    JobConfig {
        name: "keyed-sum".into(),
        snapshots: Some(snapshots),
        ..JobConfig::default()
    }
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
