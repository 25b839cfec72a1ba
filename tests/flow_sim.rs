//! The flow simulator: random flows over random contents, run by `weir flow run` under
//! injected faults, checked against a model of what must reach each PutFile.
//!
//! Each seed makes, from a small random generator of its own:
//! - a flow: GetFile, or ListFile → FetchFile (Completion Strategy: Delete File), → a chain of stages (UpdateAttribute, ReplaceText, a CompressContent
//!   pair, Funnel, SplitText with a rename) → RouteOnAttribute → on each branch a
//!   MergeContent or not (bins held across triggers, a bin limit, Max Bin Age) → two
//!   PutFiles, in a
//!   traditional group or a stateless one, each connection with random back pressure,
//!   swap threshold and prioritizers, GetFile with a random batch size; every failure
//!   relationship goes to a third PutFile, which must stay empty;
//! - input files with sizes across every boundary of the content repository (0 B, 1 B,
//!   600 KiB, 1 MiB − 1, 1 MiB, 1 MiB + 1, several MiB);
//! - a list of runs, each with a fault plan (see `weir_flow::faults`): a simulated power
//!   loss before or after a counted disk step (unsynced bytes lost), an I/O error on a
//!   write, a full disk for a few writes, or a processor that panics. A last run has none.
//!
//! The model computes each output file's name and bytes from the inputs alone, without the
//! engine; behind a MergeContent, the pieces between demarcators of all the branch's files
//! must be the branch's contents, each exactly once. After the last run every expected file is in its directory exactly once, byte for
//! byte, nothing else is (no temporary file either), the input directory is empty, and no
//! claim file is left but the one still taking appends.
//!
//! A failing seed prints itself; `WEIR_SIM_SEED=S` replays it (the flow, the inputs and
//! the fault plans are the seed's; thread timing is not, so a rare interleaving may need a
//! few replays). CI runs the fixed seeds below; `WEIR_SIM_SEEDS=N` runs N more from
//! `WEIR_SIM_FIRST` (default 1000).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Seeds every run of the test checks (CI): chosen once, kept so that a regression shows.
const FIXED_SEEDS: std::ops::Range<u64> = 1..17;

/// A simulated power loss's exit code (`weir_flow::faults::CRASH_EXIT_CODE`).
const CRASH_EXIT_CODE: i32 = 86;

/// xorshift64*: the simulator's own generator, so that a seed means the same everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// One stage of the chain between GetFile and the router.
#[derive(Debug, Clone)]
enum Stage {
    /// UpdateAttribute setting `sim.tag`.
    Tag(u64),
    /// ReplaceText, literal, entire text: every `@@` becomes `#`.
    Replace,
    /// CompressContent compress then decompress.
    CompressPair,
    Funnel,
    /// SplitText by `lines` lines, then UpdateAttribute naming each split
    /// `ORIGINAL-INDEX`.
    Split {
        lines: usize,
    },
}

/// A MergeContent on a branch.
#[derive(Debug, Clone)]
struct Merge {
    min: u64,
    max: u64,
    bins: u64,
    correlate: bool,
}

/// Between merged contents: no content holds `<`.
const DEMARCATOR: &str = "<<MERGE>>";

#[derive(Debug)]
struct Scenario {
    seed: u64,
    stateless: bool,
    stages: Vec<Stage>,
    /// Per branch (left, right): a MergeContent before its PutFile, or none.
    merges: [Option<Merge>; 2],
    batch: u64,
    /// ListFile → FetchFile (deleting each file after its commit) instead of GetFile.
    list_fetch: bool,
    /// Per connection, its YAML options.
    connection_options: Vec<String>,
    inputs: BTreeMap<String, Vec<u8>>,
    plans: Vec<String>,
}

const CLAIM_FILE_SIZE: usize = 1 << 20;

/// Text of `size` bytes in lines, holding some `@@` for ReplaceText: no `\r`, no empty
/// line and no newline at the end, so that a split of it is its lines.
fn text(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 200);
    let mut line = 0u64;
    while out.len() < size {
        if line > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(format!("{line:06}").as_bytes());
        if rng.chance(10) {
            out.extend_from_slice(b"@@");
        }
        for _ in 0..rng.below(120) {
            out.push(b'a' + rng.below(26) as u8);
        }
        line += 1;
    }
    out.truncate(size);
    if out.last() == Some(&b'\n') {
        *out.last_mut().unwrap() = b'z';
    }
    out
}

impl Scenario {
    fn new(seed: u64) -> Scenario {
        let mut rng = Rng::new(seed);
        let stateless = rng.chance(30);
        let mut stages = Vec::new();
        for _ in 0..1 + rng.below(4) {
            stages.push(match rng.below(5) {
                0 => Stage::Tag(rng.below(1000)),
                1 => Stage::Replace,
                2 => Stage::CompressPair,
                3 => Stage::Funnel,
                _ => Stage::Split {
                    lines: *rng.pick(&[1, 3, 50, 1000]),
                },
            });
        }
        // At most one split: a split of splits names its outputs as the model does too, but
        // one keeps the output count (and the run) small.
        let mut seen_split = false;
        stages.retain(|s| {
            let split = matches!(s, Stage::Split { .. });
            let keep = !(split && seen_split);
            seen_split |= split;
            keep
        });
        let sizes: &[usize] = &[
            0,
            1,
            100,
            4095,
            600 << 10,
            CLAIM_FILE_SIZE - 1,
            CLAIM_FILE_SIZE,
            CLAIM_FILE_SIZE + 1,
            3 << 20,
        ];
        let mut inputs = BTreeMap::new();
        for i in 0..2 + rng.below(6) {
            let size = *rng.pick(sizes);
            // Splits of large files make thousands of flow files: keep those smaller.
            let size = if seen_split {
                size.min(200 << 10)
            } else {
                size
            };
            let prefix = if rng.chance(50) { "a" } else { "b" };
            inputs.insert(format!("{prefix}-{i:03}.txt"), text(&mut rng, size));
        }
        let connections = count_connections(&stages);
        let connection_options = (0..connections)
            .map(|_| {
                let mut o = Vec::new();
                if rng.chance(50) {
                    o.push(format!(
                        "back_pressure: {{ count: {}, size: {} }}",
                        rng.pick(&[1, 2, 5, 50, 10_000]),
                        rng.pick(&["\"1 KB\"", "\"700 KB\"", "\"2 MB\"", "\"1 GB\""])
                    ));
                }
                if rng.chance(30) {
                    o.push(format!("swap_threshold: {}", rng.pick(&[1, 5, 100])));
                }
                if rng.chance(40) {
                    o.push(format!(
                        "prioritizers: [{}]",
                        rng.pick(&[
                            "OldestFlowFileFirst",
                            "NewestFlowFileFirst",
                            "FirstInFirstOut",
                            "PriorityAttribute",
                            "NewestFlowFileFirst, OldestFlowFileFirst",
                        ])
                    ));
                }
                o.join(", ")
            })
            .collect();
        let mut plans = Vec::new();
        for _ in 0..rng.below(4) {
            plans.push(match rng.below(6) {
                0 | 1 => format!("crash-before={}", 1 + rng.below(300)),
                2 => format!("crash-after={}", 1 + rng.below(300)),
                3 => format!("eio={}", 1 + rng.below(60)),
                4 => format!("enospc={}+{}", 1 + rng.below(60), 1 + rng.below(5)),
                _ => {
                    let names = processor_names(&stages);
                    format!("panic={}@{}", rng.pick(&names), 1 + rng.below(3))
                }
            });
        }
        let merge = |rng: &mut Rng| {
            rng.chance(30).then(|| {
                let min = 1 + rng.below(4);
                Merge {
                    min,
                    max: min + rng.below(6),
                    bins: 1 + rng.below(5),
                    correlate: rng.chance(50),
                }
            })
        };
        let merges = [merge(&mut rng), merge(&mut rng)];
        let batch = *rng.pick(&[1, 2, 10, 100]);
        // Drawn last, so that the other draws of a seed stay as they were.
        let list_fetch = rng.chance(40);
        Scenario {
            seed,
            stateless,
            stages,
            merges,
            batch,
            list_fetch,
            connection_options,
            inputs,
            plans,
        }
    }

    /// The YAML of the flow, reading `input` and writing under `out`.
    fn yaml(&self, input: &Path, out: &Path) -> String {
        let mut procs = String::new();
        let mut conns = Vec::<(String, String, String)>::new();
        // Every processor retries soon: a penalized flow file must not hold a run for the
        // default 30 s.
        let common = "penalty: 100 ms, yield: 100 ms";
        if self.list_fetch {
            // ListFile's state and the flow files it lists commit together, and FetchFile
            // deletes a file only once the commit holding its content is durable (again at
            // recovery): a file fetched twice would go to not.found, and so to `failures`.
            let _ = writeln!(
                procs,
                "      - {{ name: list, type: ListFile, {common}, schedule: {{ strategy: timer, period: 50 ms }}, properties: {{ Input Directory: \"{}\" }} }}",
                input.display(),
            );
            let _ = writeln!(
                procs,
                "      - {{ name: read, type: FetchFile, {common}, properties: {{ Completion Strategy: Delete File }} }}"
            );
            conns.push(("list".into(), "success".into(), "read".into()));
            for rel in ["not.found", "permission.denied", "failure"] {
                conns.push(("read".into(), rel.into(), "failures".into()));
            }
        } else {
            let _ = writeln!(
                procs,
                "      - {{ name: read, type: GetFile, {common}, properties: {{ Input Directory: \"{}\", Batch Size: \"{}\" }} }}",
                input.display(),
                self.batch
            );
        }
        let mut last = ("read".to_string(), "success".to_string());
        for (i, stage) in self.stages.iter().enumerate() {
            let name = format!("s{i}");
            match stage {
                Stage::Tag(v) => {
                    let _ = writeln!(
                        procs,
                        "      - {{ name: {name}, type: UpdateAttribute, {common}, properties: {{ sim.tag: \"{v}\", priority: \"{v}\" }} }}"
                    );
                    conns.push((last.0.clone(), last.1.clone(), name.clone()));
                    last = (name, "success".into());
                }
                Stage::Replace => {
                    let _ = writeln!(
                        procs,
                        "      - {{ name: {name}, type: ReplaceText, {common}, properties: {{ Search Value: \"@@\", Replacement Value: \"#\", Replacement Strategy: Literal Replace, Evaluation Mode: Entire text }} }}"
                    );
                    conns.push((last.0.clone(), last.1.clone(), name.clone()));
                    conns.push((name.clone(), "failure".into(), "failures".into()));
                    last = (name, "success".into());
                }
                Stage::CompressPair => {
                    for (half, mode) in [("c", "compress"), ("d", "decompress")] {
                        let n = format!("{name}{half}");
                        let _ = writeln!(
                            procs,
                            "      - {{ name: {n}, type: CompressContent, {common}, properties: {{ Mode: {mode} }} }}"
                        );
                        conns.push((last.0.clone(), last.1.clone(), n.clone()));
                        conns.push((n.clone(), "failure".into(), "failures".into()));
                        last = (n, "success".into());
                    }
                }
                Stage::Funnel => {
                    let _ = writeln!(procs, "      - {{ name: {name}, type: Funnel }}");
                    conns.push((last.0.clone(), last.1.clone(), name.clone()));
                    last = (name, "success".into());
                }
                Stage::Split { lines } => {
                    let _ = writeln!(
                        procs,
                        "      - {{ name: {name}, type: SplitText, {common}, properties: {{ Line Split Count: \"{lines}\" }}, auto_terminate: [original] }}"
                    );
                    conns.push((last.0.clone(), last.1.clone(), name.clone()));
                    conns.push((name.clone(), "failure".into(), "failures".into()));
                    let rename = format!("{name}r");
                    let _ = writeln!(
                        procs,
                        "      - {{ name: {rename}, type: UpdateAttribute, {common}, properties: {{ filename: \"${{segment.original.filename}}-${{fragment.index}}\" }} }}"
                    );
                    conns.push((name, "splits".into(), rename.clone()));
                    last = (rename, "success".into());
                }
            }
        }
        let _ = writeln!(
            procs,
            "      - {{ name: route, type: RouteOnAttribute, {common}, properties: {{ left: \"${{filename:startsWith('a')}}\" }} }}"
        );
        conns.push((last.0, last.1, "route".into()));
        for (name, dir) in [("left", "a"), ("right", "b"), ("failures", "failures")] {
            let _ = writeln!(
                procs,
                "      - {{ name: {name}, type: PutFile, {common}, properties: {{ Directory: \"{}\", Conflict Resolution Strategy: replace }}, auto_terminate: [success] }}",
                out.join(dir).display()
            );
            // A failed write goes round again.
            conns.push((name.into(), "failure".into(), name.into()));
        }
        for ((rel, put), merge) in [("left", "left"), ("unmatched", "right")]
            .into_iter()
            .zip(&self.merges)
        {
            let Some(m) = merge else {
                conns.push(("route".into(), rel.into(), put.into()));
                continue;
            };
            let name = format!("merge-{put}");
            let correlation = if m.correlate {
                ", Correlation Attribute Name: sim.tag"
            } else {
                ""
            };
            let _ = writeln!(
                procs,
                "      - {{ name: {name}, type: MergeContent, {common}, properties: {{ Minimum Number of Entries: \"{}\", Maximum Number of Entries: \"{}\", Maximum number of Bins: \"{}\", Max Bin Age: 1 sec, Demarcator: \"{DEMARCATOR}\"{correlation} }}, auto_terminate: [original] }}",
                m.min, m.max, m.bins
            );
            conns.push(("route".into(), rel.into(), name.clone()));
            conns.push((name.clone(), "merged".into(), put.into()));
            conns.push((name, "failure".into(), "failures".into()));
        }
        let mut yaml = format!(
            "flow: sim-{}\nsettings: {{ sync: always, checkpoint_interval: 300 ms }}\ngroups:\n  - name: main\n",
            self.seed
        );
        if self.stateless {
            yaml.push_str("    engine: stateless\n    timeout: 30 s\n");
        }
        yaml.push_str("    processors:\n");
        yaml.push_str(&procs);
        yaml.push_str("    connections:\n");
        for (i, (from, rel, to)) in conns.iter().enumerate() {
            let options = self
                .connection_options
                .get(i)
                .filter(|o| !o.is_empty() && !self.stateless)
                .map(|o| format!(", {o}"))
                .unwrap_or_default();
            let _ = writeln!(
                yaml,
                "      - {{ from: {from}, relationships: [{rel}], to: {to}{options} }}"
            );
        }
        yaml
    }

    /// What must be in each output directory: name → bytes, from the inputs alone.
    fn expected(&self) -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
        let mut out: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
        out.insert("a".into(), BTreeMap::new());
        out.insert("b".into(), BTreeMap::new());
        out.insert("failures".into(), BTreeMap::new());
        for (name, data) in &self.inputs {
            let mut items = vec![(name.clone(), data.clone())];
            for stage in &self.stages {
                match stage {
                    Stage::Tag(_) | Stage::Funnel | Stage::CompressPair => {}
                    Stage::Replace => {
                        for (_, d) in &mut items {
                            *d = replace_all(d, b"@@", b"#");
                        }
                    }
                    Stage::Split { lines } => {
                        let mut next = Vec::new();
                        for (n, d) in items {
                            let all: Vec<&[u8]> = d.split(|b| *b == b'\n').collect();
                            if d.is_empty() {
                                continue;
                            }
                            for (i, chunk) in all.chunks(*lines).enumerate() {
                                next.push((format!("{n}-{}", i + 1), chunk.join(&b'\n')));
                            }
                        }
                        items = next;
                    }
                }
            }
            for (n, d) in items {
                let dir = if n.starts_with('a') { "a" } else { "b" };
                out.get_mut(dir).unwrap().insert(n, d);
            }
        }
        out
    }
}

/// `data` cut at each `at`.
fn split_on(data: &[u8], at: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + at.len() <= data.len() {
        if &data[i..i + at.len()] == at {
            out.push(data[start..i].to_vec());
            i += at.len();
            start = i;
        } else {
            i += 1;
        }
    }
    out.push(data[start..].to_vec());
    out
}

fn replace_all(data: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}

fn count_connections(stages: &[Stage]) -> usize {
    // Generous: options past the real count are unused.
    8 + stages.len() * 4
}

fn processor_names(stages: &[Stage]) -> Vec<String> {
    let mut names = vec![
        "read".to_string(),
        "route".into(),
        "left".into(),
        "right".into(),
    ];
    for (i, s) in stages.iter().enumerate() {
        match s {
            Stage::CompressPair => {
                names.push(format!("s{i}c"));
                names.push(format!("s{i}d"));
            }
            Stage::Funnel => {}
            Stage::Split { .. } => {
                names.push(format!("s{i}"));
                names.push(format!("s{i}r"));
            }
            _ => names.push(format!("s{i}")),
        }
    }
    names
}

fn read_dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(entries) = fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Runs one seed; `Err` says what went wrong, with the seed.
fn run_seed(seed: u64) -> Result<(), String> {
    let s = Scenario::new(seed);
    // WEIR_SIM_KEEP=1 keeps the seed's directory (flow, repository, outputs) to look at.
    let keep = std::env::var_os("WEIR_SIM_KEEP").is_some();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let _cleanup = if keep {
        let _ = dir.keep();
        None
    } else {
        Some(dir)
    };
    let (input, out, repo) = (root.join("in"), root.join("out"), root.join("repo"));
    fs::create_dir_all(&input).unwrap();
    for (name, data) in &s.inputs {
        fs::write(input.join(name), data).unwrap();
    }
    let flow = root.join("flow.yaml");
    let yaml = s.yaml(&input, &out);
    fs::write(&flow, &yaml).unwrap();
    let fail = |what: String| {
        // WEIR_SIM_KEEP=1 keeps a failing seed's directory (flow, repository, outputs).
        let kept = if keep {
            format!("\nkept: {}", root.display())
        } else {
            String::new()
        };
        Err(format!(
            "seed {seed} (replay: WEIR_SIM_SEED={seed} cargo test --test flow_sim): {what}\nplans: {:?}{kept}\nflow:\n{yaml}",
            s.plans
        ))
    };
    let mut log = String::new();
    for (i, plan) in s.plans.iter().map(Some).chain([None]).enumerate() {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
        cmd.args(["flow", "run"])
            .arg(&flow)
            .arg("--repo")
            .arg(&repo)
            .arg("--until-idle")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match plan {
            Some(p) => cmd.env("WEIR_FLOW_FAULTS", p),
            None => cmd.env_remove("WEIR_FLOW_FAULTS"),
        };
        let child = cmd.spawn().unwrap();
        let started = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        let pid = child.id();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let output = match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(o) => o.unwrap(),
            Err(_) => {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                return fail(format!(
                    "run {i} ({plan:?}) still running after 120 s\n{log}"
                ));
            }
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        let code = output.status.code();
        let _ = writeln!(
            log,
            "run {i} ({plan:?}): exit {code:?} after {:.1?}",
            started.elapsed()
        );
        if plan.is_none() && !output.status.success() {
            return fail(format!("the last run failed: {code:?}\n{stderr}\n{log}"));
        }
        if code != Some(0) && code != Some(CRASH_EXIT_CODE) && code != Some(1) {
            return fail(format!("run {i} ended with {code:?}\n{stderr}\n{log}"));
        }
    }
    // Every expected output exactly once, byte for byte, and nothing else.
    for (sub, expected) in s.expected() {
        let got = read_dir_files(&out.join(&sub));
        let merged = match sub.as_str() {
            "a" => s.merges[0].is_some(),
            "b" => s.merges[1].is_some(),
            _ => false,
        };
        if merged {
            // Merged files have new names: their pieces must be the contents, each once.
            if let Some(tmp) = got.keys().find(|n| n.starts_with('.')) {
                return fail(format!("{sub}/{tmp}: a temporary file was left\n{log}"));
            }
            let mut pieces: Vec<Vec<u8>> = got
                .values()
                .flat_map(|d| split_on(d, DEMARCATOR.as_bytes()))
                .collect();
            let mut want: Vec<Vec<u8>> = expected.into_values().collect();
            pieces.sort();
            want.sort();
            if pieces != want {
                return fail(format!(
                    "{sub}: {} merged pieces in {} files, expected {} contents (first difference at {:?})\n{log}",
                    pieces.len(),
                    got.len(),
                    want.len(),
                    pieces.iter().zip(&want).position(|(a, b)| a != b)
                ));
            }
            continue;
        }
        for name in got.keys() {
            if !expected.contains_key(name) {
                return fail(format!("{sub}/{name} was not expected\n{log}"));
            }
        }
        for (name, data) in &expected {
            match got.get(name) {
                None => return fail(format!("{sub}/{name} is missing\n{log}")),
                Some(d) if d != data => {
                    return fail(format!(
                        "{sub}/{name} differs: {} bytes, expected {}\n{log}",
                        d.len(),
                        data.len()
                    ));
                }
                Some(_) => {}
            }
        }
    }
    let left: Vec<PathBuf> = fs::read_dir(&input)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    if !left.is_empty() {
        return fail(format!("inputs not taken: {left:?}\n{log}"));
    }
    let claims: Vec<String> = fs::read_dir(repo.join("content"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".claim"))
                .collect()
        })
        .unwrap_or_default();
    if claims.len() > 1 {
        return fail(format!("claim files left: {claims:?}\n{log}"));
    }
    Ok(())
}

fn seeds() -> Vec<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(seed) = var("WEIR_SIM_SEED") {
        return vec![seed];
    }
    let mut seeds: Vec<u64> = FIXED_SEEDS.collect();
    if let Some(n) = var("WEIR_SIM_SEEDS") {
        let first = var("WEIR_SIM_FIRST").unwrap_or(1000);
        seeds.extend(first..first + n);
    }
    seeds
}

/// Runs the seeds two at a time (the machine's cores) and reports every failing one.
#[test]
fn random_flows_under_faults_deliver_every_file_exactly_once() {
    let seeds = seeds();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(&seed) = seeds.get(i) else { return };
                    if let Err(e) = run_seed(seed) {
                        eprintln!("{e}");
                        failures.lock().unwrap().push(seed);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    eprintln!(
        "flow simulator: {} seed(s) run, {} failed",
        seeds.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}
