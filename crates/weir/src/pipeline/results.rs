//! Running a batch pipeline and reading one branch's results as an iterator.

use weir_core::{Executor, Item, JobConfig};

use super::BatchStage;
use crate::error::{Error, Result};
use crate::sinks::stream::{JobResults, iter_sink, job_results};

impl<T: Item> BatchStage<T> {
    /// Ends this branch in a buffer of `buffer` items, runs the whole pipeline on the shared
    /// executor, and returns this branch's results as a blocking iterator.
    ///
    /// ```
    /// use weir::prelude::*;
    ///
    /// let p = Pipeline::new();
    /// let squares = p
    ///     .read_from(sources::collection::items(1..=4u64))
    ///     .map(|x: u64| x * x)
    ///     .results(64)
    ///     .unwrap();
    /// let mut all: Vec<u64> = squares.map(|r| r.unwrap()).collect();
    /// all.sort();
    /// assert_eq!(all, [1, 4, 9, 16]);
    /// ```
    ///
    /// Build every other branch first: this adds the sink and submits the pipeline. The
    /// results come through one sink instance, in the order it receives them. An upstream
    /// failure arrives as an `Err` item, never as a silent end; dropping the iterator
    /// cancels the job. See [`JobResults`].
    ///
    /// # Errors
    /// As [`Pipeline::submit`](crate::Pipeline::submit); [`Error::InvalidStage`] when
    /// `buffer` is zero.
    pub fn results(&self, buffer: usize) -> Result<JobResults<T>> {
        self.results_on(&Executor::shared(), JobConfig::default(), buffer)
    }

    /// [`results`](Self::results) on `executor` with `config`.
    ///
    /// # Errors
    /// As [`results`](Self::results).
    pub fn results_on(
        &self,
        executor: &Executor,
        config: JobConfig,
        buffer: usize,
    ) -> Result<JobResults<T>> {
        if buffer == 0 {
            return Err(Error::InvalidStage {
                stage: "results".into(),
                problem: "the buffer must hold at least 1 item".into(),
            });
        }
        let (sink, rx) = iter_sink(buffer);
        self.write_to(sink);
        let pipeline = crate::Pipeline {
            graph: std::rc::Rc::clone(&self.graph),
        };
        let job = pipeline.submit(executor, config)?;
        Ok(job_results(job, rx))
    }
}
