//! One module per subcommand.

pub mod example;
pub mod explain;
pub mod flow;
pub mod job_control;
pub mod model_server;
pub mod nexmark;
pub mod processors;
pub mod run;
pub mod score;
