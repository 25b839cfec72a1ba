//! The processors a planned pipeline runs: fused chains of links with their heads and
//! terminals.

pub(crate) mod aggregate;
pub(crate) mod async_map;
pub(crate) mod format;
pub(crate) mod join;
pub(crate) mod link;
pub(crate) mod probe_buffer;
pub(crate) mod read_ahead;
pub(crate) mod sink;
pub(crate) mod sort;
pub(crate) mod source;
pub(crate) mod state;
pub(crate) mod stream_join;
pub(crate) mod stream_source;
pub(crate) mod transform;
pub(crate) mod window;

#[cfg(test)]
mod tests;
