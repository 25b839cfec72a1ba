//! Chains emit lazily: however much one item expands into, and however slow the consumer,
//! what a vertex holds back stays within about two batches. Measured with a counting global
//! allocator, so every byte the job holds counts, wherever it is held.
//!
//! This file holds one test, so that nothing else allocates in the process while it runs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use weir::prelude::*;
use weir::{JobConfig, SinkWriter};

/// The system allocator, counting the bytes live now and the most ever live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`; the counters only observe sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A sink that counts what it receives and sums it, doing a little work per item.
struct Summing {
    count: Arc<AtomicU64>,
    sum: Arc<AtomicU64>,
    local: (u64, u64),
}

impl SinkWriter for Summing {
    type Item = u64;
    fn write(&mut self, item: u64) -> Result<(), weir::BoxError> {
        self.local.0 += 1;
        self.local.1 = self.local.1.wrapping_add(std::hint::black_box(item));
        Ok(())
    }
    fn close(&mut self) -> Result<(), weir::BoxError> {
        self.count.fetch_add(self.local.0, Ordering::Relaxed);
        self.sum.fetch_add(self.local.1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn a_flat_map_that_explodes_keeps_the_backlog_within_two_batches() {
    const PER_INPUT: u64 = 10_000_000;
    let (count, sum) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let p = Pipeline::new();
    let (c, s) = (Arc::clone(&count), Arc::clone(&sum));
    // Two inputs, each expanding into ten million items, into one sink instance behind a
    // queue: the flat map outruns the sink for the whole run.
    p.read_from(sources::collection::items(vec![0u64, 1]))
        .flat_map(|x: u64| (0..PER_INPUT).map(move |i| i * 2 + x))
        .write_to(Sink::new(
            "summing",
            Some(1),
            move |_: &weir::ProcessorContext| Summing {
                count: Arc::clone(&c),
                sum: Arc::clone(&s),
                local: (0, 0),
            },
        ));
    let baseline = LIVE.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let job = p
        .submit(
            &weir::Executor::shared(),
            JobConfig::default().with_default_parallelism(2),
        )
        .unwrap();
    assert!(
        job.wait_timeout(std::time::Duration::from_secs(600)),
        "job did not finish"
    );
    job.join().unwrap();
    let n = 2 * PER_INPUT;
    assert_eq!(count.load(Ordering::Relaxed), n);
    assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2);
    // Held back at most: per flat-map instance a run of 1024 and the emit backlog of 1024
    // plus one run over, and the conveyors (1024 slots each), all of 8-byte items (16 with
    // the conveyor's marker tag): well under a megabyte. Unbounded, it was 160 MB.
    let grew = PEAK.load(Ordering::Relaxed).saturating_sub(baseline);
    assert!(
        grew < 4 << 20,
        "the job held {grew} bytes at its peak; the backlog is not bounded"
    );
}
