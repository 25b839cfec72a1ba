//! The processors a planned pipeline runs: fused chains of links with their heads and
//! terminals.

pub mod aggregate;
pub mod async_map;
pub mod factories;
pub mod format;
pub mod join;
pub mod link;
pub mod probe_buffer;
pub mod read_ahead;
pub mod sink;
pub mod sort;
pub mod source;
pub mod state;
pub mod stream_join;
pub mod stream_source;
pub mod timers;
pub mod transform;
pub mod window;

#[cfg(test)]
mod tests;
