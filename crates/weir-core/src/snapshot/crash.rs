//! Crash points in the snapshot protocol, for the crash-point test (`tests/snapshots.rs`):
//! the process exits at a chosen step, as a kill there would end it, and a rerun must
//! resume to exactly the output of an uninterrupted run.
//!
//! The steps are named where they happen: in the snapshot store (`part-written`,
//! `parts-synced`, `manifest-written`, `manifest-renamed`, `published`) and in the file
//! sinks (`sink-sealed`, `sink-published`, `sink-rolled`, `sink-joined`). A plan comes from the environment
//! variable [`VARIABLE`], read once per process, as `NAME@N`: the N-th time (from 1) step
//! NAME is reached, the process exits with [`EXIT_CODE`] at once, running no destructor and
//! flushing nothing (what was written is in the page cache, as after a kill).
//!
//! Without a plan a step costs one load of an initialised `OnceLock`.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable holding a plan.
pub const VARIABLE: &str = "WEIR_SNAPSHOT_CRASH";

/// The exit code of a crash at a step.
pub const EXIT_CODE: i32 = 87;

struct Plan {
    step: String,
    at: u64,
    reached: AtomicU64,
}

fn plan() -> Option<&'static Plan> {
    static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
    PLAN.get_or_init(|| {
        let text = std::env::var(VARIABLE).ok()?;
        let (step, at) = text.split_once('@')?;
        Some(Plan {
            step: step.to_owned(),
            at: at.parse().ok()?,
            reached: AtomicU64::new(0),
        })
    })
    .as_ref()
}

/// Step `name` of the snapshot protocol is done: exits the process if the plan says so.
pub fn step(name: &str) {
    let Some(plan) = plan() else {
        return;
    };
    if plan.step == name && plan.reached.fetch_add(1, Ordering::SeqCst) + 1 == plan.at {
        // No destructor runs and nothing buffered is flushed; the kernel keeps what was
        // written, as after a kill.
        std::process::exit(EXIT_CODE);
    }
}
