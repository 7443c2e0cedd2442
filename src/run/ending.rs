//! How a run ends: every error that can stop it early ([`RunError`], one per exit code), how
//! it is reported as an [`Outcome`], with the mapping from git, tool and cycle errors
//! (an interrupt or the `--timeout` deadline met during git work arrives as a
//! [`StopReason`] and is reported as such, not as a failure).

use crate::agent::CycleError;
use crate::config::ConfigError;
use crate::conversation::local::ResumeError;
use crate::events::EventSink;
use crate::forge::ForgeError;
use crate::outcome::Outcome;
use crate::repo::fs::OpenError;
use crate::repo::{StopReason, WorkspaceError};

/// Everything that can end a run early, by how it is reported.
#[derive(Debug, thiserror::Error)]
pub(super) enum RunError {
    #[error("{0}")]
    Usage(#[from] ConfigError),
    /// What the operator asked for cannot be worked (no such base branch, an empty
    /// repository): said before any model call, like a configuration error.
    #[error(transparent)]
    Unworkable(WorkspaceError),
    /// The interrupt, or `--timeout` (a budget: exit 4).
    #[error("{}", match .0 { StopReason::Interrupted => "interrupted", StopReason::Deadline => "--timeout reached during git work" })]
    Stopped(StopReason),
    #[error("{}", crate::text::error_chain(.0))]
    Failure(RunFailure),
}

/// What makes a run fail once it started, by concern, each with its source.
#[derive(Debug, thiserror::Error)]
pub(super) enum RunFailure {
    /// The cycle failed: the model's provider, a tool's git or forge work, upkeep's setup.
    #[error(transparent)]
    Cycle(CycleError),
    /// Git work outside a tool (clone, refresh, checkout of a continued branch).
    #[error(transparent)]
    Git(WorkspaceError),
    /// The forge, read before the model is asked (a `--pr` pull request, the conversation).
    #[error(transparent)]
    Forge(ForgeError),
    /// Counting the pull requests `pr_limit` and `pr_hourly_limit` hold back.
    #[error("checking pr_limit and pr_hourly_limit")]
    Limits(#[source] ForgeError),
    /// A bot pull request rebased in the clone whose branch the forge did not replace (a lease
    /// broken by a push meanwhile, a protected branch, the network).
    #[error("{pull} was rebased in the clone but not pushed")]
    Rebase {
        pull: String,
        #[source]
        source: ForgeError,
    },
    /// The conversation on the forge refused the cycle's work after the first cycle.
    #[error("{0}")]
    Refused(String),
    /// Settings that changed under the run after its first cycle (a broken `.upkeep.toml`
    /// merged meanwhile).
    #[error(transparent)]
    Settings(ConfigError),
    /// The local repository's record of questions could not be written.
    #[error(transparent)]
    Resume(ResumeError),
    /// The clone could not be opened through the gate.
    #[error(transparent)]
    Open(OpenError),
}

impl RunError {
    /// How a run this error ended is reported (which gives its exit status).
    pub(super) fn outcome(&self) -> Outcome {
        match self {
            RunError::Usage(_) | RunError::Unworkable(_) => Outcome::UsageError,
            RunError::Stopped(reason) => Outcome::from(*reason),
            RunError::Failure(_) => Outcome::Error,
        }
    }
}

impl From<CycleError> for RunError {
    fn from(error: CycleError) -> Self {
        match error {
            // A tool's git work (the commit and push of `create_pull_request`) cut short
            // arrives here as the stop itself.
            CycleError::Stopped(reason) => RunError::Stopped(reason),
            other => RunError::Failure(RunFailure::Cycle(other)),
        }
    }
}

impl From<ResumeError> for RunError {
    fn from(error: ResumeError) -> Self {
        match error {
            ResumeError::Usage(error) => RunError::Usage(error),
            // The repository's git config failed under us: nothing the operator typed is wrong.
            error @ ResumeError::Repository { .. } => RunError::Failure(RunFailure::Resume(error)),
        }
    }
}

impl From<OpenError> for RunError {
    fn from(error: OpenError) -> Self {
        match error {
            // The clone cannot be read: a runtime failure, nothing the operator typed.
            error @ OpenError::Root { .. } => RunError::Failure(RunFailure::Open(error)),
            // A `protected_paths` pattern that does not parse: the operator's to fix.
            error @ OpenError::Pattern { .. } => RunError::Usage(ConfigError(error.to_string())),
        }
    }
}

impl From<WorkspaceError> for RunError {
    fn from(error: WorkspaceError) -> Self {
        match error {
            WorkspaceError::Stopped(reason) => RunError::Stopped(reason),
            // What the operator asked for cannot be worked: said before any model call.
            error @ (WorkspaceError::MissingBase { .. } | WorkspaceError::EmptyRepository(_)) => {
                RunError::Unworkable(error)
            }
            other => RunError::Failure(RunFailure::Git(other)),
        }
    }
}

/// How a run that ended with `result` is reported: its outcome (which gives the exit status)
/// and error text (redacted), once people were told what happened. `clone_removed`: every
/// temporary directory is gone, which an interrupted run may then say.
pub(super) fn conclude(
    result: &Result<Outcome, RunError>,
    events: &EventSink,
    clone_removed: bool,
) -> (Outcome, Option<String>) {
    match result {
        Ok(outcome) => (*outcome, None),
        Err(error @ (RunError::Usage(_) | RunError::Unworkable(_))) => {
            events.alert(&format!("upkeep: configuration error: {error}"));
            (Outcome::UsageError, Some(error.to_string()))
        }
        Err(RunError::Stopped(StopReason::Interrupted)) => {
            events.alert(if clone_removed {
                "upkeep: interrupted; the temporary clone was removed and nothing was pushed after the interrupt"
            } else {
                "upkeep: interrupted; nothing was pushed after the interrupt"
            });
            (Outcome::Interrupted, Some("interrupted".to_owned()))
        }
        Err(RunError::Stopped(StopReason::Deadline)) => {
            events.alert("upkeep: stopped: --timeout reached during git work");
            (Outcome::Limit, None)
        }
        Err(error @ RunError::Failure(_)) => {
            events.alert(&format!("upkeep: error: {error}"));
            (Outcome::Error, Some(events.redactor().redact(&error.to_string())))
        }
    }
}
