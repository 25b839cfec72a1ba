//! One module per subcommand.

pub mod explain;
pub mod nexmark;
pub mod run;
