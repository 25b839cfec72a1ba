//! Built-in jobs: ready-made pipelines the `weir` command runs by name.

pub mod affinity;
pub mod wordcount;
