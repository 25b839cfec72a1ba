//! Running a batch pipeline and reading one branch's results as an iterator.

use std::sync::mpsc;

use weir_core::{CancelHandle, Executor, Item, Job, JobConfig};

use super::BatchStage;
use crate::error::{Error, Result};
use weir_io::sinks::reactive::iter_sink;

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

/// A running batch job's results as a blocking iterator, from
/// [`BatchStage::results`](crate::BatchStage::results).
///
/// `next` blocks until an item arrives or the job ends: call it from an ordinary thread,
/// never from a cooperative processor or an async task. Items come through a buffer of the
/// size given to `results`; while it is full the job's sink stops and backpressure holds
/// the sources. When the job fails or is cancelled, the iterator yields one `Err` with the
/// job's error (as `Job::join` reports it) after the items that made it, then `None`.
/// Dropping the iterator before its end cancels the job.
pub struct JobResults<T> {
    rx: mpsc::Receiver<T>,
    job: Option<Job>,
    cancel: CancelHandle,
}

impl<T> std::fmt::Debug for JobResults<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobResults")
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

impl<T> JobResults<T> {
    /// A handle that cancels the job, from any thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// The job, while it has not ended: for its metrics and status.
    pub fn job(&self) -> Option<&Job> {
        self.job.as_ref()
    }
}

impl<T> Iterator for JobResults<T> {
    type Item = Result<T, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Ok(item) = self.rx.recv() {
            return Some(Ok(item));
        }
        // Every sender is gone: the sink completed, or the job stopped.
        let job = self.job.take()?;
        job.join().err().map(|e| Err(e.into()))
    }
}

impl<T> Drop for JobResults<T> {
    fn drop(&mut self) {
        if self.job.is_some() {
            self.cancel.cancel();
        }
    }
}

/// Wraps a submitted job and the receiver of its results sink.
fn job_results<T>(job: Job, rx: mpsc::Receiver<T>) -> JobResults<T> {
    JobResults {
        rx,
        cancel: job.cancel_handle(),
        job: Some(job),
    }
}
