//! Weir.
