//! Data affinity as a user sees it: `weir example affinity` and the example program.

use std::process::Command;

#[test]
fn weir_example_affinity_prints_owners_and_the_seed_sums() {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["example", "affinity", "--owners", "4"])
        .output()
        .expect("weir runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for (i, sum) in [15, 30, 45, 60, 75].iter().enumerate() {
        assert!(
            text.lines().any(
                |l| l.starts_with(&format!("sum of key{}-* at owner", i + 1))
                    && l.ends_with(&format!("= {sum}"))
            ),
            "{text}"
        );
    }
    // Every affinity group on one owner, printed per key.
    for i in 1..=5 {
        let owners: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("[Affinity Key] key = key{i}-")))
            .map(|l| l.rsplit("owner = ").next().unwrap())
            .collect();
        assert_eq!(owners.len(), 1, "key{i}-* spread: {owners:?}");
    }
    assert_eq!(text.matches("[No Affinity Key]").count(), 25);
    assert!(text.contains("every group is on one owner: true"), "{text}");
}

#[test]
fn weir_example_affinity_refuses_zero_owners_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["example", "affinity", "--owners", "0"])
        .output()
        .expect("weir runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--owners"));
}

mod pipelines {
    use weir::aggregate;
    use weir::core::{Executor, ExecutorConfig, JobConfig};
    use weir::maps::AffinityKey;
    use weir::{Pipeline, sinks, sources};

    fn executor(workers: usize) -> Executor {
        Executor::new(ExecutorConfig {
            workers,
            ..ExecutorConfig::default()
        })
        .expect("an executor starts")
    }

    #[test]
    fn every_map_using_map_lookup_runs_on_the_instance_holding_its_partition() {
        let executor = executor(2);
        let service = weir::maps::on_executor(&executor).unwrap();
        let customers = service.map::<u64, String>("customers").unwrap();
        customers
            .put_all((0..1000u64).map(|c| (c, format!("customer-{c}"))))
            .unwrap();
        let items = 20_000u64;
        let (sink, out) = sinks::collection::list::<(u64, String)>();
        let p = Pipeline::new();
        p.read_from(sources::collection::items((0..items).collect::<Vec<u64>>()))
            .map_using_map(
                &customers,
                |order| order % 1000,
                |order, name| name.map(|n| (order, n.clone())),
            )
            .write_to(sink);
        let job = p.submit(&executor, JobConfig::default()).unwrap();
        job.wait_timeout(std::time::Duration::from_secs(60));
        let metrics = job.metrics();
        job.join().unwrap();
        let lookups: Vec<u64> = metrics
            .iter()
            .filter(|m| m.counters.iter().any(|(n, _)| n == "map_lookups"))
            .map(|m| m.counter("map_lookups"))
            .collect();
        assert_eq!(lookups.len(), 2, "one lookup instance per worker");
        assert!(lookups.iter().all(|&n| n > 0), "{lookups:?}");
        assert_eq!(lookups.iter().sum::<u64>(), items);
        let remote: u64 = metrics
            .iter()
            .map(|m| m.counter("map_remote_lookups"))
            .sum();
        assert_eq!(
            remote, 0,
            "a lookup reached an instance without its partition"
        );
        let out = out.take();
        assert_eq!(out.len() as u64, items);
        assert!(
            out.iter()
                .all(|(o, n)| *n == format!("customer-{}", o % 1000))
        );
    }

    #[test]
    fn a_map_sink_after_an_unkeyed_stage_is_fed_by_a_partitioned_edge() {
        let executor = executor(2);
        let service = weir::maps::on_executor(&executor).unwrap();
        let squares = service.map::<u64, u64>("squares").unwrap();
        let p = Pipeline::new();
        p.read_from(sources::collection::items((0..1000u64).collect::<Vec<_>>()))
            .map(|n| (n, n * n))
            .write_to(sinks::map(&squares));
        let plan = p.explain().unwrap();
        assert!(
            plan.lines().any(|l| l.starts_with("edge")
                && l.contains("map-sink(squares)")
                && l.contains("[partitioned")),
            "{plan}"
        );
        p.submit(&executor, JobConfig::default())
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(squares.len().unwrap(), 1000);
        assert_eq!(squares.get(&31).unwrap(), Some(961));
    }

    #[test]
    fn a_map_source_reads_every_entry_and_a_map_sink_puts_them_by_owner() {
        let executor = executor(2);
        let service = weir::maps::on_executor(&executor).unwrap();
        let input = service.map::<AffinityKey, u64>("input").unwrap();
        input
            .put_all((0..5000u64).map(|i| (AffinityKey::new(format!("c{}-{i}", i % 50)), i)))
            .unwrap();
        let totals = service.map::<String, u64>("totals").unwrap();
        let p = Pipeline::new();
        p.read_from(sources::map(&input))
            .grouping_key(|(k, _): &(AffinityKey, u64)| {
                k.as_str().split('-').next().unwrap().to_string()
            })
            .aggregate(aggregate::summing(|(_, v): &(AffinityKey, u64)| *v))
            .write_to(sinks::map(&totals));
        // The sink is fused into the aggregation's combine vertex: no extra edge.
        let plan = p.explain().unwrap();
        assert!(
            plan.lines().any(|l| l.starts_with("vertex")
                && l.contains("combine")
                && l.contains("map-sink")),
            "{plan}"
        );
        p.submit(&executor, JobConfig::default())
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(totals.len().unwrap(), 50);
        for c in 0..50u64 {
            let expected: u64 = (0..5000u64).filter(|i| i % 50 == c).sum();
            assert_eq!(totals.get(&format!("c{c}")).unwrap(), Some(expected));
        }
    }
}
