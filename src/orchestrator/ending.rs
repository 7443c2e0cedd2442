//! How a run ends: every error that can stop it early ([`RunError`], one per exit code), how
//! it is reported as an [`Outcome`], with the mapping from git, tool and cycle errors
//! (an interrupt or the `--timeout` deadline met during git work is reported as such, not as a
//! failure).

use crate::agent::CycleError;
use crate::config::ConfigError;
use crate::events::EventSink;
use crate::outcome::Outcome;
use crate::repo::WorkspaceError;

/// Everything that can end a run early, by exit code.
#[derive(Debug, thiserror::Error)]
pub(super) enum RunError {
    #[error("{0}")]
    Usage(#[from] ConfigError),
    #[error("interrupted")]
    Interrupted,
    /// `--timeout` passed during git work (a budget: exit 4).
    #[error("--timeout reached during git work")]
    Deadline,
    #[error("{0:#}")]
    Failure(anyhow::Error),
}

impl From<CycleError> for RunError {
    fn from(error: CycleError) -> Self {
        match error {
            CycleError::Interrupted => RunError::Interrupted,
            // A tool's git work (the commit and push of `create_pull_request`) cut short.
            CycleError::Fatal(error) => match stopped_git_work(&error) {
                Some(WorkspaceError::Interrupted) => RunError::Interrupted,
                Some(_) => RunError::Deadline,
                None => RunError::Failure(anyhow::Error::new(CycleError::Fatal(error))),
            },
            other => RunError::Failure(anyhow::Error::new(other)),
        }
    }
}

/// The interrupt or deadline that stopped git work somewhere in `error`'s causes, if one did.
fn stopped_git_work(error: &anyhow::Error) -> Option<&WorkspaceError> {
    error.chain().find_map(|cause| {
        let git =
            cause
                .downcast_ref::<WorkspaceError>()
                .or_else(|| match cause.downcast_ref::<crate::forge::ForgeError>() {
                    Some(crate::forge::ForgeError::Workspace(git)) => Some(git),
                    _ => None,
                });
        git.filter(|git| matches!(git, WorkspaceError::Interrupted | WorkspaceError::TimedOut))
    })
}

impl From<WorkspaceError> for RunError {
    fn from(error: WorkspaceError) -> Self {
        match error {
            WorkspaceError::Interrupted => RunError::Interrupted,
            WorkspaceError::TimedOut => RunError::Deadline,
            // What the operator asked for cannot be worked: said before any model call.
            error @ (WorkspaceError::MissingBase { .. } | WorkspaceError::EmptyRepository(_)) => {
                RunError::Usage(ConfigError(error.to_string()))
            }
            other => RunError::Failure(anyhow::Error::new(other)),
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
        Err(RunError::Usage(error)) => {
            events.alert(&format!("upkeep: configuration error: {error}"));
            (Outcome::UsageError, Some(error.to_string()))
        }
        Err(RunError::Interrupted) => {
            events.alert(if clone_removed {
                "upkeep: interrupted; the temporary clone was removed and nothing was pushed after the interrupt"
            } else {
                "upkeep: interrupted; nothing was pushed after the interrupt"
            });
            (Outcome::Interrupted, Some("interrupted".to_owned()))
        }
        Err(RunError::Deadline) => {
            events.alert("upkeep: stopped: --timeout reached during git work");
            (Outcome::Limit, None)
        }
        Err(RunError::Failure(error)) => {
            events.alert(&format!("upkeep: error: {error:#}"));
            (Outcome::Error, Some(events.redactor().redact(&format!("{error:#}"))))
        }
    }
}
