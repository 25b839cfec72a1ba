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

use std::path::PathBuf;

use clap::builder::{PathBufValueParser, TypedValueParser};

/// The value parser of every `--output` that names a file: any path but `-`, refused before
/// anything runs. Such a file is written under a temporary name and renamed into place when
/// the job succeeds, which standard output cannot be; and taken as a file's name, `-` leaves
/// a file that tools reading one take for their standard input.
pub(crate) fn output_file() -> impl TypedValueParser<Value = PathBuf> {
    PathBufValueParser::new().try_map(|path: PathBuf| {
        if path.as_os_str() == "-" {
            Err(
                "standard output is not an output here (the file is written under a \
                 temporary name and renamed into place); name a file",
            )
        } else {
            Ok(path)
        }
    })
}
