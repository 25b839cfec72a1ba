//! How a job ends, seen from inside it: its status, and a cheap watch that processors and
//! the handles they feed (a result stream) can poll or wait on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Tasklets are running.
    Running,
    /// Every tasklet finished normally.
    Completed,
    /// A processor failed or panicked; every tasklet was stopped.
    Failed,
    /// [`JobMonitor::cancel`](crate::JobMonitor::cancel) stopped it.
    Cancelled,
}

impl JobStatus {
    /// Whether the job has ended.
    pub fn is_terminal(self) -> bool {
        !matches!(self, JobStatus::Running)
    }
}

/// The default of [`JobConfig::idle_timeout`](crate::JobConfig::idle_timeout).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A read-only view of how a job ended, for processors and the handles they feed (a result
/// stream that must report the job's failure, not just its own branch's end).
///
/// Cheap to clone. Every processor of the job can get one from
/// [`ProcessorContext::job_watch`](crate::ProcessorContext::job_watch).
#[derive(Clone, Default)]
pub struct JobWatch {
    inner: Arc<WatchInner>,
}

#[derive(Default)]
struct WatchInner {
    /// The job's name, for the logs of its processors.
    name: Arc<str>,
    /// The status and, when it failed, the error's text; `None` while running.
    end: Mutex<Option<(JobStatus, Option<String>)>>,
    wakers: Mutex<Vec<std::task::Waker>>,
}

impl JobWatch {
    /// A watch of the job named `name`.
    pub(crate) fn named(name: &str) -> JobWatch {
        JobWatch {
            inner: Arc::new(WatchInner {
                name: Arc::from(name),
                ..WatchInner::default()
            }),
        }
    }

    /// The job's name (empty in a test context).
    pub fn job_name(&self) -> &str {
        &self.inner.name
    }

    /// How the job ended, and the error's text when it failed; `None` while it runs.
    pub fn outcome(&self) -> Option<(JobStatus, Option<String>)> {
        self.inner
            .end
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Like [`outcome`](Self::outcome), registering `cx`'s waker to be woken when the job
    /// ends if it has not.
    pub fn poll_outcome(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<(JobStatus, Option<String>)> {
        let end = self.inner.end.lock().unwrap_or_else(|e| e.into_inner());
        match &*end {
            Some(outcome) => std::task::Poll::Ready(outcome.clone()),
            None => {
                self.inner
                    .wakers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(cx.waker().clone());
                std::task::Poll::Pending
            }
        }
    }

    /// Records the end once and wakes everyone waiting.
    pub(crate) fn finish(&self, status: JobStatus, error: Option<String>) {
        {
            let mut end = self.inner.end.lock().unwrap_or_else(|e| e.into_inner());
            if end.is_some() {
                return;
            }
            *end = Some((status, error));
        }
        let wakers =
            std::mem::take(&mut *self.inner.wakers.lock().unwrap_or_else(|e| e.into_inner()));
        for w in wakers {
            w.wake();
        }
    }
}

impl std::fmt::Debug for JobWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobWatch")
            .field("outcome", &self.outcome())
            .finish()
    }
}
