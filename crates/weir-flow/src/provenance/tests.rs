use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A ROUTE event of `flowfile` by "route" at time 1000 + `id`, with `attributes`.
pub(super) fn event_with(
    id: u64,
    flowfile: &str,
    attributes: crate::flowfile::Attributes,
) -> ProvenanceEvent {
    ProvenanceEvent {
        id,
        event_type: EventType::ROUTE,
        time_ms: 1_000 + id as i64,
        flowfile: flowfile.into(),
        component: "route".into(),
        component_type: "RouteOnAttribute".into(),
        attributes,
        size: id,
        parents: vec![],
        children: vec![],
        details: Some("even".into()),
        transit_uri: None,
    }
}

/// `events` as a query returns them: each map with `fileSize`, the event's size.
fn as_queried(events: &[ProvenanceEvent]) -> Vec<ProvenanceEvent> {
    events
        .iter()
        .cloned()
        .map(|mut e| {
            e.attributes.insert(
                crate::flowfile::FILE_SIZE,
                crate::flowfile::int_value(e.size),
            );
            e
        })
        .collect()
}

fn event(id: u64, flowfile: &str) -> ProvenanceEvent {
    event_with(
        id,
        flowfile,
        BTreeMap::from([("k".to_string(), id.to_string())]).into(),
    )
}

#[test]
fn a_query_sees_every_event_inserted_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    // Many small batches, so that the writer is surely behind when the query comes.
    for b in 0..500u64 {
        store
            .insert(
                (0..4)
                    .map(|i| event(b * 4 + i, &format!("ff-{b}")))
                    .collect(),
            )
            .unwrap();
    }
    let all = store.query(&Query::default(), usize::MAX).unwrap();
    assert_eq!(all.len(), 2_000);
    assert_eq!(store.len().unwrap(), 2_000);
    let one = store
        .query(
            &Query {
                flowfile: Some("ff-499".into()),
                ..Query::default()
            },
            10,
        )
        .unwrap();
    assert_eq!(
        one.iter().map(|e| e.id).collect::<Vec<_>>(),
        [1996, 1997, 1998, 1999]
    );
    assert_eq!(
        store
            .lineage("ff-7", LineageLimits::UNBOUNDED)
            .unwrap()
            .events
            .len(),
        4
    );
}

#[test]
fn events_of_both_id_classes_encoded_on_either_thread_read_back_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    // Journal ids and ids of events recorded without a frame, in batches of several flow
    // files, some named again in later batches, some handed over several at once: writes
    // of several parts each.
    let mut ids = Vec::new();
    for b in 0..300u64 {
        let first = if b % 3 == 0 {
            4 * b
        } else {
            (1 << 63) | (4 * b)
        };
        let batch = (0..3)
            .map(|i| event(first + i, &format!("ff-{}", (b + i) % 50)))
            .collect();
        let last = vec![event(first + 3, "ff-x")];
        // Every other pair of batches handed over at once, as a stateless transaction
        // hands over its sessions'.
        if b % 2 == 0 {
            store.insert_batches(vec![batch, last])
        } else {
            store.insert(batch).and_then(|()| store.insert(last))
        }
        .unwrap();
        ids.extend(first..first + 4);
    }
    ids.sort_unstable();
    let all = store.query(&Query::default(), usize::MAX).unwrap();
    assert_eq!(all.iter().map(|e| e.id).collect::<Vec<_>>(), ids);
    assert_eq!(store.len().unwrap(), 1_200);
    // ff-7 is named three times in every fifty batches.
    assert_eq!(
        store
            .lineage("ff-7", LineageLimits::UNBOUNDED)
            .unwrap()
            .events
            .len(),
        18
    );
    assert_eq!(
        store
            .lineage("ff-x", LineageLimits::UNBOUNDED)
            .unwrap()
            .events
            .len(),
        300
    );
}

#[test]
fn events_handed_over_before_a_drop_are_written() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        for b in 0..100u64 {
            store.insert(vec![event(b, "ff")]).unwrap();
        }
        store.insert(Vec::new()).unwrap();
    }
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    assert_eq!(store.len().unwrap(), 100);
}

#[test]
fn a_store_killed_while_creating_its_partitions_opens() {
    let dir = tempfile::tempdir().unwrap();
    drop(ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap());
    // What a kill between the tree's two files leaves: `manifest` but no `levels`.
    let spans = dir.path().join("partitions").join("chunk_spans");
    std::fs::remove_file(spans.join("levels")).unwrap();
    assert!(spans.join("manifest").exists());
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    route_and_send(&store);
    drop(store);
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    assert_eq!(store.len().unwrap(), 20);
    let put = Query {
        component: Some("put".into()),
        ..Query::default()
    };
    assert_eq!(store.query(&put, usize::MAX).unwrap().len(), 1);
}

fn route_and_send(store: &ProvenanceRepository) {
    // Two written batches: ids 0..10 at times 1000..1010, ids 100..110 at 2100..2110,
    // with a SEND by "put" in the second only.
    store
        .insert((0..10).map(|i| event(i, "ff-a")).collect())
        .unwrap();
    // Written before the next is handed over, so that the two are separate spans.
    store.len().unwrap();
    let mut second: Vec<ProvenanceEvent> = (100..110).map(|i| event(i, "ff-b")).collect();
    second[5].component = "put".into();
    second[5].event_type = EventType::SEND;
    store.insert(second).unwrap();
}

/// The bytes of every stored event.
fn stored_bytes(store: &ProvenanceRepository) -> usize {
    store
        .store
        .chunks
        .iter()
        .map(|kv| kv.unwrap().1.len())
        .sum()
}

fn ids(events: &[ProvenanceEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id).collect()
}

#[test]
fn queries_by_time_and_component_find_exactly_their_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    route_and_send(&store);
    let q = |query: Query| ids(&store.query(&query, usize::MAX).unwrap());
    assert_eq!(
        q(Query {
            since_ms: Some(1_005),
            until_ms: Some(1_101),
            ..Query::default()
        }),
        [5, 6, 7, 8, 9, 100, 101]
    );
    assert_eq!(
        q(Query {
            until_ms: Some(1_002),
            ..Query::default()
        }),
        [0, 1, 2]
    );
    assert_eq!(
        q(Query {
            component: Some("put".into()),
            ..Query::default()
        }),
        [105]
    );
    assert_eq!(
        q(Query {
            component: Some("route".into()),
            since_ms: Some(1_108),
            ..Query::default()
        }),
        [108, 109]
    );
    assert!(
        q(Query {
            component: Some("nobody".into()),
            ..Query::default()
        })
        .is_empty()
    );
    let limited = store
        .query(
            &Query {
                component: Some("route".into()),
                ..Query::default()
            },
            3,
        )
        .unwrap();
    assert_eq!(ids(&limited), [0, 1, 2]);
}

#[test]
fn retention_removes_old_events_and_their_spans() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        ProvenanceRepository::open(dir.path(), Duration::from_millis(1_000), u64::MAX).unwrap();
    route_and_send(&store);
    // Cutoff 1_100: the first batch (times 1000..1009) goes.
    assert_eq!(store.enforce_retention(2_100).unwrap(), 10);
    assert_eq!(store.store.spans.len().unwrap(), 1);
    let since = Query {
        since_ms: Some(0),
        ..Query::default()
    };
    assert_eq!(
        ids(&store.query(&since, usize::MAX).unwrap()),
        (100..110).collect::<Vec<_>>()
    );
}

/// Folds the index's unfolded lists into run `run` while the writer is idle. Tests use
/// runs from 2^40 on, which the writer (counting from the last run) never reaches in a
/// test.
fn fold(store: &ProvenanceRepository, run: u64) -> usize {
    store.flush();
    let mut batch = store.store.keyspace.batch();
    let folded = store.store.index.fold(&mut batch, (1 << 40) + run).unwrap();
    batch.commit().unwrap();
    folded
}

/// The ids of flow file `ff`'s events, by a query and by its lineage.
fn ids_of(store: &ProvenanceRepository, ff: &str) -> (Vec<u64>, Vec<u64>) {
    let q = Query {
        flowfile: Some(ff.into()),
        ..Query::default()
    };
    (
        ids(&store.query(&q, usize::MAX).unwrap()),
        ids(&store.lineage(ff, LineageLimits::UNBOUNDED).unwrap().events),
    )
}

#[test]
fn the_writer_folds_lists_into_a_run_and_look_ups_read_both() {
    let dir = tempfile::tempdir().unwrap();
    let per_write = 4096;
    let writes = flowfile_index::FOLD_AT / per_write + 1;
    {
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        for w in 0..writes {
            let events = (0..per_write)
                .map(|i| {
                    let id = (w * per_write + i) as u64;
                    event(id, &format!("ff-{id}"))
                })
                .collect();
            store.insert(events).unwrap();
            // Each insert its own write: the writer thread would otherwise take several
            // waiting inserts in one write, and fold only at the write after.
            store.flush();
        }
        // The write after the one that reached FOLD_AT folded every list before its own.
        assert_eq!(store.store.index.run_ends.len().unwrap(), 1);
        assert_eq!(store.store.index.unfolded_len().unwrap(), per_write);
        assert!(store.store.index.runs.len().unwrap() > 1000);
        // One more write stays in its list.
        store.insert(vec![event(1 << 30, "ff-0")]).unwrap();
        assert_eq!(ids_of(&store, "ff-0").0, [0, 1 << 30]);
    }
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    let last = (writes * per_write - 1) as u64;
    for id in [0, 1, 4095, 4096, last] {
        let (query, lineage) = ids_of(&store, &format!("ff-{id}"));
        assert_eq!(query, if id == 0 { vec![0, 1 << 30] } else { vec![id] });
        assert_eq!(lineage, query);
    }
    assert_eq!(ids_of(&store, "ff-none").0, Vec::<u64>::new());
    assert_eq!(store.store.index.next_run().unwrap(), 1);
}

#[test]
fn a_damaged_run_is_an_error_naming_it_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    store.insert(vec![event(0, "ff-a")]).unwrap();
    fold(&store, 0);
    // ff-a's bucket of run 2^40 cut short by a byte.
    let (k, v) = store.store.index.runs.first_key_value().unwrap().unwrap();
    store.store.index.runs.insert(k, &v[..v.len() - 1]).unwrap();
    let q = Query {
        flowfile: Some("ff-a".into()),
        ..Query::default()
    };
    let e = store.query(&q, 10).unwrap_err().to_string();
    assert!(e.contains("a run's bucket of 23 bytes"), "{e}");
    assert!(store.lineage("ff-a", LineageLimits::UNBOUNDED).is_err());
}

#[test]
fn a_damaged_list_is_folded_as_far_as_it_is_whole_and_writes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    store.insert(vec![event(0, "ff-a")]).unwrap();
    store.flush();
    let unfolded = &store.store.index.unfolded;
    let (k, v) = unfolded.first_key_value().unwrap().unwrap();
    unfolded.insert(k, [&v[..], &[1, 2, 3]].concat()).unwrap();
    unfolded.insert(b"short key", [0; 8]).unwrap();
    assert_eq!(fold(&store, 0), 1);
    assert!(store.store.index.unfolded.is_empty().unwrap());
    store.insert(vec![event(1, "ff-a")]).unwrap();
    assert_eq!(ids_of(&store, "ff-a"), (vec![0, 1], vec![0, 1]));
}

#[test]
fn retention_removes_a_run_once_its_chunks_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::ZERO, u64::MAX).unwrap();
    store
        .insert((0..10).map(|i| event(i, "ff-a")).collect())
        .unwrap();
    assert_eq!(fold(&store, 0), 1);
    store
        .insert((10..20).map(|i| event(i, "ff-a")).collect())
        .unwrap();
    assert_eq!(fold(&store, 1), 1);
    store
        .insert((20..30).map(|i| event(i, "ff-a")).collect())
        .unwrap();
    // Times are 1000 + id: a cutoff at 1015 takes the first chunk and half the second.
    assert_eq!(store.enforce_retention(1_015).unwrap(), 15);
    assert_eq!(ids_of(&store, "ff-a").0, (15..30).collect::<Vec<_>>());
    // The first run names only the removed chunk; the second is kept, as the chunk it
    // names was only partly removed (written again, with a list of its own).
    assert_eq!(store.store.index.run_ends.len().unwrap(), 1);
    assert_eq!(store.enforce_retention(1_030).unwrap(), 15);
    assert_eq!(ids_of(&store, "ff-a").0, Vec::<u64>::new());
    assert_eq!(store.store.index.unfolded_len().unwrap(), 0);
    assert!(store.store.index.runs.is_empty().unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Writes of a few flow files' events, folds and retention in any order: a query by
    /// flow file returns exactly its events not yet removed, as the store is and once
    /// opened again.
    #[test]
    fn a_flow_files_events_are_found_through_any_folds_and_retention(
        steps in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(0..5usize, 1..12).prop_map(Step::Write),
                Just(Step::Fold),
                (0..8u64).prop_map(Step::Retain),
            ],
            1..16,
        )
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ProvenanceRepository::open(dir.path(), Duration::ZERO, u64::MAX).unwrap();
        let (mut next_id, mut cutoff, mut runs) = (0u64, 0u64, 0u64);
        let mut model: Vec<(u64, usize)> = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Write(ffs) => {
                    let events = ffs.iter().map(|&ff| {
                        model.push((next_id, ff));
                        next_id += 1;
                        event(next_id - 1, &format!("ff-{ff}"))
                    }).collect();
                    store.insert(events).unwrap();
                }
                Step::Fold => {
                    fold(&store, runs);
                    runs += 1;
                }
                Step::Retain(more) => {
                    cutoff = (cutoff + more).min(next_id);
                    store.enforce_retention(1_000 + cutoff as i64).unwrap();
                    model.retain(|&(id, _)| id >= cutoff);
                }
            }
            if i == steps.len() / 2 {
                drop(store);
                store = ProvenanceRepository::open(dir.path(), Duration::ZERO, u64::MAX).unwrap();
            }
            for ff in 0..5 {
                let want: Vec<u64> =
                    model.iter().filter(|m| m.1 == ff).map(|m| m.0).collect();
                let (query, lineage) = ids_of(&store, &format!("ff-{ff}"));
                prop_assert_eq!(&query, &want);
                prop_assert_eq!(&lineage, &want);
            }
        }
    }
}

/// A step of the property above.
#[derive(Debug, Clone)]
enum Step {
    /// Events of these flow files, one each, in one write.
    Write(Vec<usize>),
    /// The unfolded lists folded into a run.
    Fold,
    /// Retention's cutoff moved on by this many ids.
    Retain(u64),
}

#[test]
fn a_write_is_one_chunk_with_one_list_of_its_flow_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    // Six events of "ff-a" and two of "ff-b", interleaved, in one write.
    let events: Vec<ProvenanceEvent> = (0..8)
        .map(|i| event(i, if i % 4 == 3 { "ff-b" } else { "ff-a" }))
        .collect();
    store.insert(events).unwrap();
    assert_eq!(store.len().unwrap(), 8);
    assert_eq!(store.store.chunks.len().unwrap(), 1);
    assert_eq!(store.store.index.unfolded_len().unwrap(), 2);
    assert_eq!(store.store.index.unfolded.len().unwrap(), 1);
    assert_eq!(
        ids(&store
            .lineage("ff-a", LineageLimits::UNBOUNDED)
            .unwrap()
            .events),
        [0, 1, 2, 4, 5, 6]
    );
    // A second write of ff-a: a second chunk, found by its own list.
    store.insert(vec![event(20, "ff-a")]).unwrap();
    let q = Query {
        flowfile: Some("ff-a".into()),
        ..Query::default()
    };
    assert_eq!(
        ids(&store.query(&q, usize::MAX).unwrap()),
        [0, 1, 2, 4, 5, 6, 20]
    );
    assert_eq!(ids(&store.query(&q, 2).unwrap()), [0, 1]);
}

#[test]
fn overlapping_chunks_read_in_id_order_and_each_event_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
    store
        .insert([0, 10, 20].map(|i| event(i, "ff")).to_vec())
        .unwrap();
    store.len().unwrap();
    // Handed over out of id order, and a replay of event 10.
    store
        .insert([5, 10, 15].map(|i| event(i, "ff")).to_vec())
        .unwrap();
    assert_eq!(
        ids(&store.query(&Query::default(), usize::MAX).unwrap()),
        [0, 5, 10, 15, 20]
    );
    assert_eq!(ids(&store.query(&Query::default(), 3).unwrap()), [0, 5, 10]);
    let newest = Query {
        newest_first: true,
        ..Query::default()
    };
    assert_eq!(
        ids(&store.query(&newest, usize::MAX).unwrap()),
        [20, 15, 10, 5, 0]
    );
    // The chunk holding 15 starts before the one holding 20 ends: 15 still comes second.
    assert_eq!(ids(&store.query(&newest, 2).unwrap()), [20, 15]);
    assert_eq!(
        ids(&store
            .lineage("ff", LineageLimits::UNBOUNDED)
            .unwrap()
            .events),
        [0, 5, 10, 15, 20]
    );
}

proptest! {
    // Each case opens a store of its own: a few dozen cover the overlaps.
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Newest first is oldest first reversed, whatever the chunks' overlap, the filter and
    /// the limit: with a limit, the newest events.
    #[test]
    fn newest_first_is_oldest_first_reversed(
        batches in proptest::collection::vec(
            proptest::collection::btree_set(0u64..200, 1..12), 1..12),
        limit in 1usize..40,
        since in proptest::option::of(1_000i64..1_200),
        one_flowfile in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap();
        for batch in &batches {
            let events = batch
                .iter()
                .map(|&i| event(i, if i % 2 == 0 { "even" } else { "odd" }))
                .collect();
            store.insert(events).unwrap();
            // Each batch its own chunk.
            store.len().unwrap();
        }
        let query = |newest_first| Query {
            since_ms: since,
            flowfile: one_flowfile.then(|| "even".to_string()),
            newest_first,
            ..Query::default()
        };
        let mut oldest = ids(&store.query(&query(false), usize::MAX).unwrap());
        oldest.reverse();
        oldest.truncate(limit);
        prop_assert_eq!(ids(&store.query(&query(true), limit).unwrap()), oldest);
    }
}

#[test]
fn a_flow_files_changing_maps_are_stored_as_changes_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        ProvenanceRepository::open(dir.path(), Duration::from_millis(1_000), u64::MAX).unwrap();
    // Six events of one flow file, as through a group: each processor sets, changes or
    // removes an attribute of a map of twenty; the last two share a map. Another flow
    // file's events come between.
    let mut map: BTreeMap<String, String> = (0..20)
        .map(|i| (format!("attribute.{i}"), "v".repeat(50)))
        .collect();
    let mut events = Vec::new();
    for i in 0..6u64 {
        match i {
            1 => drop(map.insert("parity".into(), "even".into())),
            2 => drop(map.insert("attribute.3".into(), "changed".into())),
            3 => drop(map.remove("attribute.7")),
            4 => drop(map.insert("row.count".into(), "1".into())),
            _ => {}
        }
        let attributes: crate::flowfile::Attributes = map.clone().into();
        let shared = if i == 5 {
            events
                .last()
                .map(|e: &ProvenanceEvent| e.attributes.clone())
        } else {
            None
        };
        events.push(ProvenanceEvent {
            attributes: shared.unwrap_or(attributes),
            ..event(2 * i, "ff")
        });
        events.push(event(2 * i + 1, "other"));
    }
    store.insert(events.clone()).unwrap();
    assert_eq!(
        store.query(&Query::default(), usize::MAX).unwrap(),
        as_queried(&events)
    );
    // Only the last event of "ff" holds its map in full: the others are a few bytes.
    let stored = stored_bytes(&store);
    assert!(stored < 2 * 20 * 60, "{stored} bytes");
    // Retention (cutoff 1_004) removes the earliest events, never a base before them.
    assert_eq!(store.enforce_retention(2_004).unwrap(), 4);
    assert_eq!(
        store.query(&Query::default(), usize::MAX).unwrap(),
        as_queried(&events[4..])
    );
    let ff: Vec<ProvenanceEvent> = events[4..]
        .iter()
        .filter(|e| e.flowfile == "ff")
        .cloned()
        .collect();
    assert_eq!(
        store
            .lineage("ff", LineageLimits::UNBOUNDED)
            .unwrap()
            .events,
        as_queried(&ff)
    );
}

#[test]
fn a_store_of_an_unknown_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let keyspace = Config::new(dir.path()).open().unwrap();
        let meta = keyspace
            .open_partition("meta", PartitionCreateOptions::default())
            .unwrap();
        meta.insert("format", [9]).unwrap();
        keyspace.persist(PersistMode::SyncAll).unwrap();
    }
    let err = ProvenanceRepository::open(dir.path(), Duration::MAX, u64::MAX).unwrap_err();
    assert!(matches!(err, ProvenanceError::Format { found: 9 }), "{err}");
    assert!(err.to_string().contains("format 9"), "{err}");
}

#[test]
fn events_sharing_an_attribute_map_store_it_once_and_read_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        ProvenanceRepository::open(dir.path(), Duration::from_millis(1_000), u64::MAX).unwrap();
    let attributes: crate::flowfile::Attributes =
        BTreeMap::from([("big".to_string(), "x".repeat(10_000))]).into();
    let events: Vec<ProvenanceEvent> = (0..4)
        .map(|i| ProvenanceEvent {
            attributes: attributes.clone(),
            ..event(i, "ff")
        })
        .collect();
    store.insert(events.clone()).unwrap();
    assert_eq!(
        store.query(&Query::default(), usize::MAX).unwrap(),
        as_queried(&events)
    );
    // Stored once: the three others name the last.
    let stored = stored_bytes(&store);
    assert!(stored < 11_000, "{stored} bytes");
    // Retention (cutoff 1_002) removes the events naming the holder before the holder.
    assert_eq!(store.enforce_retention(2_002).unwrap(), 2);
    assert_eq!(
        store.query(&Query::default(), usize::MAX).unwrap(),
        as_queried(&events[2..])
    );
    assert_eq!(
        store
            .lineage("ff", LineageLimits::UNBOUNDED)
            .unwrap()
            .events,
        as_queried(&events[2..])
    );
}
