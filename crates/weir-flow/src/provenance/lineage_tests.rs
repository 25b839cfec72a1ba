//! Bounded lineage: limits, frontier and cost across huge splits and merges.

use super::tests::event_with;
use super::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// An event of `flowfile` of type `t` with these parents and children.
fn linked(
    id: u64,
    t: EventType,
    flowfile: &str,
    parents: &[String],
    children: &[String],
) -> ProvenanceEvent {
    ProvenanceEvent {
        event_type: t,
        parents: parents.to_vec(),
        children: children.to_vec(),
        ..event_with(id, flowfile, BTreeMap::new().into())
    }
}

fn line(i: usize) -> String {
    format!("line-{i:05}")
}

/// A file split into `n` lines (FORK), each line routed (ROUTE), the lines merged into one
/// (JOIN) and the merge sent: written as the engine writes them, one batch per session.
fn split_and_merge(n: usize) -> (tempfile::TempDir, ProvenanceRepository) {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    let lines: Vec<String> = (0..n).map(line).collect();
    let file = ["file".to_string()];
    let merged = ["merged".to_string()];
    let mut id = 0;
    let mut next = || {
        id += 1;
        id
    };
    store
        .insert(vec![linked(next(), EventType::CREATE, "file", &[], &[])])
        .unwrap();
    store
        .insert(vec![linked(next(), EventType::FORK, "file", &file, &lines)])
        .unwrap();
    for chunk in lines.chunks(1000) {
        let routes = chunk
            .iter()
            .map(|l| linked(next(), EventType::ROUTE, l, &[], &[]))
            .collect();
        store.insert(routes).unwrap();
    }
    store
        .insert(vec![linked(
            next(),
            EventType::JOIN,
            "merged",
            &lines,
            &merged,
        )])
        .unwrap();
    store
        .insert(vec![linked(next(), EventType::SEND, "merged", &[], &[])])
        .unwrap();
    (dir, store)
}

fn limits(depth: u32, max_flowfiles: usize) -> LineageLimits {
    LineageLimits {
        depth,
        max_flowfiles,
    }
}

fn frontier_of(lineage: &Lineage) -> BTreeMap<&str, (usize, usize)> {
    lineage
        .frontier
        .iter()
        .map(|f| (f.flowfile.as_str(), (f.more_parents, f.more_children)))
        .collect()
}

#[test]
fn a_line_of_a_huge_split_and_merge_gets_a_bounded_lineage_with_its_frontier() {
    let n = 5_000;
    let (_dir, store) = split_and_merge(n);
    let lineage = store.lineage(&line(7), LineageLimits::default()).unwrap();
    let max = LineageLimits::DEFAULT_MAX_FLOWFILES;
    // The search stopped at the limit: it looked up no more flow files than it holds.
    assert_eq!(lineage.flowfiles.len(), max);
    assert_eq!(lineage.visited, max);
    // Nearest first: the line, its parent and child, then its siblings.
    assert_eq!(
        lineage.flowfiles[..3],
        [line(7), "file".into(), "merged".into()]
    );
    assert_eq!(lineage.parents, ["file"]);
    assert_eq!(lineage.children, ["merged"]);
    let lines_held = max - 2;
    assert!(lineage.truncated);
    assert_eq!(lineage.omitted, n - lines_held);
    assert_eq!(
        frontier_of(&lineage),
        BTreeMap::from([
            ("file", (0, n - lines_held)),
            ("merged", (n - lines_held, 0)),
        ])
    );
    // Events: the create, fork, join and send, and each held line's route.
    assert_eq!(lineage.events.len(), 4 + lines_held);
    let held: BTreeSet<&str> = lineage.flowfiles.iter().map(String::as_str).collect();
    assert!(
        lineage
            .events
            .iter()
            .all(|e| held.contains(e.flowfile.as_str()))
    );
    assert!(lineage.events.windows(2).all(|w| w[0].id < w[1].id));
}

#[test]
fn depth_counts_hops_from_the_flow_file() {
    let n = 3_000;
    let (_dir, store) = split_and_merge(n);
    // Depth 0: the line alone, its parent and child beyond.
    let alone = store.lineage(&line(0), limits(0, 500)).unwrap();
    assert_eq!(alone.flowfiles, [line(0)]);
    assert_eq!(alone.visited, 1);
    assert!(alone.parents.is_empty() && alone.children.is_empty());
    assert_eq!(
        frontier_of(&alone),
        BTreeMap::from([(line(0).as_str(), (1, 1))])
    );
    assert_eq!(alone.omitted, 2);
    // Its own route, the fork that made it and the join it went into.
    assert_eq!(alone.events.len(), 3);
    // Depth 1: its parent and child, each with the other lines beyond.
    let near = store.lineage(&line(0), limits(1, 500)).unwrap();
    assert_eq!(near.flowfiles, [line(0), "file".into(), "merged".into()]);
    assert_eq!(
        frontier_of(&near),
        BTreeMap::from([("file", (0, n - 1)), ("merged", (n - 1, 0))])
    );
    assert_eq!(near.omitted, n - 1);
    // The file itself at depth 1: its lines up to the limit.
    let file = store.lineage("file", limits(1, 100)).unwrap();
    assert_eq!(file.flowfiles.len(), 100);
    assert_eq!(file.children.len(), 99);
    // Each line held goes on to the merge, which is not held.
    let frontier = frontier_of(&file);
    assert_eq!(frontier.len(), 100);
    assert_eq!(frontier["file"], (0, n - 99));
    assert!(file.children.iter().all(|l| frontier[l.as_str()] == (0, 1)));
    assert_eq!(file.omitted, n - 99 + 1);
    // The merged file: its parents up to the limit.
    let merged = store.lineage("merged", limits(1, 50)).unwrap();
    assert_eq!(merged.parents.len(), 49);
    assert_eq!(merged.visited, 50);
    let frontier = frontier_of(&merged);
    assert_eq!(frontier["merged"], (n - 49, 0));
    assert!(
        merged
            .parents
            .iter()
            .all(|l| frontier[l.as_str()] == (1, 0))
    );
}

#[test]
fn unbounded_lineage_is_whole_and_a_limit_below_one_holds_the_flow_file() {
    let n = 2_000;
    let (_dir, store) = split_and_merge(n);
    let whole = store.lineage(&line(3), LineageLimits::UNBOUNDED).unwrap();
    assert_eq!(whole.flowfiles.len(), n + 2);
    assert_eq!(whole.visited, n + 2);
    assert!(!whole.truncated);
    assert_eq!(whole.omitted, 0);
    assert!(whole.frontier.is_empty());
    assert_eq!(whole.events.len(), 4 + n);
    let one = store.lineage(&line(3), limits(5, 0)).unwrap();
    assert_eq!(one.flowfiles, [line(3)]);
    assert!(one.truncated);
    // Unknown: nothing, and nothing beyond.
    let unknown = store.lineage("nope", LineageLimits::default()).unwrap();
    assert!(unknown.events.is_empty());
    assert!(!unknown.truncated);
    assert_eq!(unknown.flowfiles, ["nope"]);
}

/// One step of a random flow: a new flow file, a fork of one into several, a clone, or a
/// join of several into one.
#[derive(Debug, Clone)]
enum Op {
    Create,
    Fork(usize, usize),
    Clone(usize),
    Join(Vec<usize>),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        prop_oneof![
            Just(Op::Create),
            (0..40usize, 1..6usize).prop_map(|(p, n)| Op::Fork(p, n)),
            (0..40usize).prop_map(Op::Clone),
            proptest::collection::vec(0..40usize, 2..6).prop_map(Op::Join),
        ],
        1..25,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Whatever the flow and the limits, a lineage holds at most `max_flowfiles` flow files,
    /// each within `depth` hops; it holds every flow file within `depth` hops when the
    /// limit is not reached; and its frontier counts exactly the parents and children it
    /// does not hold.
    #[test]
    fn bounded_lineage_matches_a_breadth_first_model(
        ops in ops(),
        start in 0..40usize,
        depth in 0..5u32,
        max_flowfiles in 1..12usize,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        let name = |i: usize| format!("ff-{i}");
        let mut count = 1usize;
        let mut edges: Vec<(usize, usize)> = Vec::new();
        let mut id = 0u64;
        let mut events = vec![linked(0, EventType::CREATE, &name(0), &[], &[])];
        for op in &ops {
            id += 1;
            match op {
                Op::Create => {
                    events.push(linked(id, EventType::CREATE, &name(count), &[], &[]));
                    count += 1;
                }
                Op::Fork(p, n) => {
                    let p = p % count;
                    let children: Vec<usize> = (count..count + n).collect();
                    edges.extend(children.iter().map(|&c| (p, c)));
                    let names: Vec<String> = children.iter().map(|&c| name(c)).collect();
                    events.push(linked(id, EventType::FORK, &name(p), &[name(p)], &names));
                    count += n;
                }
                Op::Clone(p) => {
                    let p = p % count;
                    edges.push((p, count));
                    events.push(linked(id, EventType::CLONE, &name(p), &[name(p)], &[name(count)]));
                    count += 1;
                }
                Op::Join(parents) => {
                    let parents: BTreeSet<usize> = parents.iter().map(|p| p % count).collect();
                    edges.extend(parents.iter().map(|&p| (p, count)));
                    let names: Vec<String> = parents.iter().map(|&p| name(p)).collect();
                    events.push(linked(id, EventType::JOIN, &name(count), &names, &[name(count)]));
                    count += 1;
                }
            }
            // A session's events are one write.
            store.insert(std::mem::take(&mut events)).unwrap();
        }
        store.insert(events).unwrap();
        let start = start % count;
        let lineage = store.lineage(&name(start), limits(depth, max_flowfiles)).unwrap();
        // The model: hops from the start over links either way.
        let mut hops = vec![u32::MAX; count];
        hops[start] = 0;
        let mut queue = VecDeque::from([start]);
        while let Some(f) = queue.pop_front() {
            for &(p, c) in &edges {
                let other = if p == f { c } else if c == f { p } else { continue };
                if hops[other] == u32::MAX {
                    hops[other] = hops[f] + 1;
                    queue.push_back(other);
                }
            }
        }
        let held: BTreeSet<usize> = lineage
            .flowfiles
            .iter()
            .map(|f| f[3..].parse().unwrap())
            .collect();
        prop_assert_eq!(held.len(), lineage.flowfiles.len());
        prop_assert!(held.len() <= max_flowfiles);
        prop_assert_eq!(lineage.visited, held.len());
        prop_assert!(held.iter().all(|&f| hops[f] <= depth));
        let within: BTreeSet<usize> = (0..count).filter(|&f| hops[f] <= depth).collect();
        if within.len() <= max_flowfiles {
            prop_assert_eq!(&held, &within);
        }
        // Nearest first.
        let order: Vec<u32> = lineage.flowfiles.iter().map(|f| hops[f[3..].parse::<usize>().unwrap()]).collect();
        prop_assert!(order.windows(2).all(|w| w[0] <= w[1]));
        let mut want_frontier = BTreeMap::new();
        let mut omitted = BTreeSet::new();
        for &f in &held {
            let parents: BTreeSet<usize> = edges.iter().filter(|e| e.1 == f).map(|e| e.0).collect();
            let children: BTreeSet<usize> = edges.iter().filter(|e| e.0 == f).map(|e| e.1).collect();
            let more_parents = parents.difference(&held).count();
            let more_children = children.difference(&held).count();
            omitted.extend(parents.difference(&held).chain(children.difference(&held)).copied());
            if more_parents + more_children > 0 {
                want_frontier.insert(name(f), (more_parents, more_children));
            }
        }
        let frontier: BTreeMap<String, (usize, usize)> = frontier_of(&lineage)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        prop_assert_eq!(frontier, want_frontier);
        prop_assert_eq!(lineage.omitted, omitted.len());
        prop_assert_eq!(lineage.truncated, !omitted.is_empty());
    }
}
