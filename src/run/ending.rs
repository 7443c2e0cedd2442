//! How a run ends: every error that can stop it early ([`RunError`], one per exit code) and
//! every way it can end normally ([`RunEnd`]), with the mapping from git, tool and cycle errors
//! (an interrupt or the `--timeout` deadline met during git work is reported as such, not as a
//! failure).

use crate::agent::CycleError;
use crate::config::ConfigError;
use crate::events::EventSink;
use crate::exit::ExitStatus;
use crate::limits::HeldBy;
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

/// How a run ended, for `run_finished` and the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunEnd {
    NoTasks,
    Completed,
    PullRequest,
    MaxCycles,
    Question,
    Limit,
    /// The model made the same failing call five times in a row (exit 4, like a budget).
    Stuck,
    /// A fleet limit or the schedule held the cycle back before any model call (exit 0).
    Held(HeldBy),
}

impl RunEnd {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            RunEnd::Held(by) => by.as_str(),
            RunEnd::NoTasks => "no_tasks",
            RunEnd::Completed => "completed",
            RunEnd::PullRequest => "pull_request",
            RunEnd::MaxCycles => "max_cycles",
            RunEnd::Question => "question",
            RunEnd::Limit => "limit",
            RunEnd::Stuck => "stuck",
        }
    }

    pub(super) fn exit(self) -> ExitStatus {
        match self {
            RunEnd::NoTasks | RunEnd::Completed | RunEnd::PullRequest | RunEnd::MaxCycles | RunEnd::Held(_) => {
                ExitStatus::Done
            }
            RunEnd::Question => ExitStatus::Question,
            RunEnd::Limit | RunEnd::Stuck => ExitStatus::Budget,
        }
    }
}

/// How a run that ended with `result` is reported: its exit status, `run_finished.outcome` and
/// error text (redacted), once people were told what happened. `clone_removed`: every
/// temporary directory is gone, which an interrupted run may then say.
pub(super) fn conclude(
    result: &Result<RunEnd, RunError>,
    events: &EventSink,
    clone_removed: bool,
) -> (ExitStatus, &'static str, Option<String>) {
    match result {
        Ok(end) => (end.exit(), end.as_str(), None),
        Err(RunError::Usage(error)) => {
            events.alert(&format!("upkeep: configuration error: {error}"));
            (ExitStatus::Usage, "usage_error", Some(error.to_string()))
        }
        Err(RunError::Interrupted) => {
            events.alert(if clone_removed {
                "upkeep: interrupted; the temporary clone was removed and nothing was pushed after the interrupt"
            } else {
                "upkeep: interrupted; nothing was pushed after the interrupt"
            });
            (ExitStatus::Interrupted, "interrupted", Some("interrupted".to_owned()))
        }
        Err(RunError::Deadline) => {
            events.alert("upkeep: stopped: --timeout reached during git work");
            (ExitStatus::Budget, "limit", None)
        }
        Err(RunError::Failure(error)) => {
            events.alert(&format!("upkeep: error: {error:#}"));
            (
                ExitStatus::Failure,
                "error",
                Some(events.redactor().redact(&format!("{error:#}"))),
            )
        }
    }
}
