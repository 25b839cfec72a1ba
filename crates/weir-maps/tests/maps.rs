//! Partitioned maps on owner threads of their own ([`MapService::new`]): operations, entry
//! processors, concurrency, moving partitions, bad use, persistence.

use weir_maps::MapService;

fn service(owners: usize) -> MapService {
    MapService::new(owners)
}

#[path = "common/cases.rs"]
mod cases;
