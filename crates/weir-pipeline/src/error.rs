//! The errors of the pipeline API.

/// Why a pipeline could not be planned or run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pipeline has no stages.
    #[error("the pipeline is empty: start it with read_from")]
    Empty,
    /// No stage writes anywhere.
    #[error("the pipeline has no sink: end it with write_to")]
    NoSink,
    /// A branch ends without a sink.
    #[error("stage '{stage}' leads to no sink: every branch must end in write_to")]
    DanglingStage {
        /// The stage that has no consumer.
        stage: String,
    },
    /// A stage of another pipeline was used as an input.
    #[error("stage '{stage}' belongs to another pipeline and cannot feed '{consumer}'")]
    ForeignStage {
        /// The foreign stage.
        stage: String,
        /// The stage that used it.
        consumer: String,
    },
    /// A stage was given twice as an input of one stage.
    #[error("stage '{stage}' is used twice as an input of '{consumer}'")]
    StageUsedTwice {
        /// The repeated stage.
        stage: String,
        /// The stage that used it twice.
        consumer: String,
    },
    /// A stage was configured with a parallelism of zero.
    #[error("stage '{stage}' has a parallelism of 0; it must be at least 1")]
    ZeroParallelism {
        /// The stage.
        stage: String,
    },
    /// A stage was configured with a value it cannot work with.
    #[error("stage '{stage}': {problem}")]
    InvalidStage {
        /// The stage.
        stage: String,
        /// What is wrong, and what would be valid.
        problem: String,
    },
    /// The runtime refused or failed the job.
    #[error(transparent)]
    Runtime(#[from] weir_core::Error),
    /// A file-based source could not be built (its path, pattern or files): so that `?` on
    /// `sources::files::text(..)` and the other file sources works in a function returning
    /// [`Result`].
    #[error(transparent)]
    Source(#[from] weir_io::sources::files::SourceError),
}

/// A misuse found while a pipeline is built. It is kept with the pipeline and reported, as
/// the matching [`Error`], each time the pipeline is planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Misuse {
    ForeignStage { stage: String, consumer: String },
    StageUsedTwice { stage: String, consumer: String },
    InvalidStage { stage: String, problem: String },
}

impl From<Misuse> for Error {
    fn from(misuse: Misuse) -> Self {
        match misuse {
            Misuse::ForeignStage { stage, consumer } => Error::ForeignStage { stage, consumer },
            Misuse::StageUsedTwice { stage, consumer } => Error::StageUsedTwice { stage, consumer },
            Misuse::InvalidStage { stage, problem } => Error::InvalidStage { stage, problem },
        }
    }
}

/// The pipeline API's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
