//! Data affinity, as in Hazelcast's `PartitionAware` walkthrough: related entries of three
//! maps land on one owner, and a task sent to that owner sums them locally. The owners are
//! the executor's worker threads.
//!
//! Run it with `cargo run --example affinity` (or `weir example affinity`).

use weir::maps::AffinityKey;

fn main() {
    // The built-in demonstration: placements with and without affinity keys, and the sums.
    let report = weir_cli::jobs::affinity::run(4).expect("the demonstration runs");
    print!("{}", report.render());
    assert_eq!(
        report.sums.iter().map(|s| s.1).collect::<Vec<_>>(),
        vec![15, 30, 45, 60, 75]
    );

    // The same idea by hand, on the maps of the shared executor: put co-located entries, then
    // run a closure at their owner, which is one of the executor's workers.
    let service = weir::maps::shared();
    let orders = service
        .map::<AffinityKey, u64>("orders")
        .expect("a new map");
    for j in 1..=3 {
        orders
            .put(AffinityKey::new(format!("customer7-order{j}")), j * 100)
            .expect("put");
    }
    let o = orders.clone();
    let total = service
        .execute_on_key_owner("customer7", move |view| {
            let total = view
                .entries(&o)
                .expect("same service")
                .map(|(_, v)| *v)
                .sum::<u64>();
            let thread = std::thread::current().name().map(str::to_string);
            (total, thread.unwrap_or_default())
        })
        .wait()
        .expect("the task runs");
    let (total, thread) = total;
    println!(
        "orders of customer7, summed on owner {} ({thread}): {total}",
        service.owner_of("customer7")
    );
    assert_eq!(total, 600);
}
