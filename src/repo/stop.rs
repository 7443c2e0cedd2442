//! When git work must stop: the run was interrupted (Ctrl-C, SIGTERM) or reached its
//! `--timeout`. Every blocking git operation polls a [`Stop`] (in libgit2's progress callbacks
//! and in the HTTP transport's waits), so it ends within a fraction of a second of either.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Why work stopped before it finished: the one stop every layer carries (git work, a tool, a
/// cycle, the run), so it is matched where it is reported, never found again in an error chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StopReason {
    /// Ctrl-C or SIGTERM.
    #[error("interrupted")]
    Interrupted,
    /// The run's `--timeout` passed: a budget, not a failure.
    #[error("--timeout reached")]
    Deadline,
}

/// The run's interrupt token and deadline, cheap to clone into blocking threads.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    cancel: CancellationToken,
    deadline: Option<Instant>,
}

impl Stop {
    pub fn new(cancel: CancellationToken, deadline: Option<Instant>) -> Self {
        Self { cancel, deadline }
    }

    /// Never stops: for tools and tests that run git work to completion.
    pub fn never() -> Self {
        Self::default()
    }

    pub fn reason(&self) -> Option<StopReason> {
        if self.cancel.is_cancelled() {
            Some(StopReason::Interrupted)
        } else if self.deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            Some(StopReason::Deadline)
        } else {
            None
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.reason().is_some()
    }

    /// Resolves once the work must stop (for the async side, which stops waiting then).
    pub async fn stopped(&self) -> StopReason {
        let deadline = async {
            match self.deadline {
                Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = self.cancel.cancelled() => StopReason::Interrupted,
            () = deadline => StopReason::Deadline,
        }
    }
}

/// How long a transfer may go without a byte moving before it is abandoned.
pub(crate) const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(120);
