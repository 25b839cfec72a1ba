//! The modules of `weir-core` form layers: the only modules that reach each other in a cycle
//! are the executor, the job and the stall watchdog, which own one another's lifetimes. Item
//! types, inboxes, outboxes, inbound streams, processors and the DAG each sit below what uses
//! them, so a change to one does not ripple through the runtime. A `crate::` path that
//! closes a new cycle fails this test; move the type both sides need into a module of its
//! own below them (as `item_type`, `inbound` and `job_watch` are).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The one cycle the runtime keeps: a job holds its executor, the executor its jobs, and
/// the watchdog watches jobs for the executor.
const ALLOWED_CYCLE: [&str; 3] = ["executor", "job", "stall"];

/// Each top-level module of `src/` and the top-level modules its code (not its comments or
/// unit tests) names through `crate::`.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap();
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let module = top.trim_end_matches(".rs").to_string();
            if module == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let deps = graph.entry(module.clone()).or_default();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (at, _) in line.match_indices("crate::") {
                    let name: String = line[at + "crate::".len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != module {
                        deps.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// The modules from which `from` is reachable and which it reaches: its cycle.
fn cycle_of(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let reach = |start: &str, forward: bool| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.to_string()];
        while let Some(m) = todo.pop() {
            let next: Vec<String> = if forward {
                graph.get(&m).into_iter().flatten().cloned().collect()
            } else {
                graph
                    .iter()
                    .filter(|(_, deps)| deps.contains(&m))
                    .map(|(k, _)| k.clone())
                    .collect()
            };
            for n in next {
                if graph.contains_key(&n) && seen.insert(n.clone()) {
                    todo.push(n);
                }
            }
        }
        seen
    };
    let down = reach(from, true);
    let up = reach(from, false);
    down.intersection(&up).cloned().collect()
}

#[test]
fn no_module_cycle_but_the_executor_and_its_jobs() {
    let graph = module_graph();
    assert!(graph.len() > 15, "modules found: {:?}", graph.keys());
    let allowed: BTreeSet<String> = ALLOWED_CYCLE.iter().map(|s| s.to_string()).collect();
    for module in graph.keys() {
        let cycle = cycle_of(&graph, module);
        if cycle.is_empty() {
            continue;
        }
        assert!(
            cycle.is_subset(&allowed),
            "module `{module}` is in a cycle with {cycle:?}; only {allowed:?} may be"
        );
    }
}
