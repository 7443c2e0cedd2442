//! Every way git work on the workspace can fail, in words an operator (or the model, for the
//! failures it can act on) understands. Never carries a token: URLs are the operator's, and
//! transport messages are built without credentials.

use std::path::PathBuf;

use super::stop::StopReason;

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("could not create a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    #[error("clone of {url} failed: {message}")]
    Clone { url: String, message: String },
    #[error("fetch from {url} failed: {message}")]
    Fetch { url: String, message: String },
    #[error("authentication failed for {url}: the server rejected the token{hint}")]
    AuthRejected { url: String, hint: String },
    #[error("the repository {0} has no commits yet; upkeep needs a base branch to work from")]
    EmptyRepository(String),
    #[error("base branch `{branch}` does not exist in the repository{}", match default { Some(default) => format!(" (its default branch is `{default}`: pass --base {default}, or leave --base out)"), None => String::new() })]
    MissingBase { branch: String, default: Option<String> },
    #[error("push of {branch} was rejected by the remote: {message}")]
    PushRejected { branch: String, message: String },
    #[error("refusing to push `{0}`: upkeep only pushes branches under upkeep/")]
    NotABotBranch(String),
    #[error("nothing to commit: the working tree has no changes")]
    NothingToCommit,
    /// A file of the change (or its message) holds a secret value upkeep knows.
    #[error("{0} holds a secret value (a token or API key upkeep holds); nothing was committed")]
    SecretInChange(String),
    /// The interrupt or the run's `--timeout` (a budget, exit 4) stopped git work: not a failure.
    #[error("{}", match .0 { StopReason::Interrupted => "interrupted", StopReason::Deadline => "--timeout reached during git work" })]
    Stopped(StopReason),
    #[error(
        "{operation} of {url} stalled: nothing moved for {seconds} s (raise UPKEEP_GIT_STALL_TIMEOUT on a slow link)"
    )]
    Stalled {
        operation: &'static str,
        url: String,
        seconds: u64,
    },
    #[error("refusing to use {path}: {reason}")]
    UnsafeSource { path: PathBuf, reason: String },
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<StopReason> for WorkspaceError {
    fn from(reason: StopReason) -> Self {
        WorkspaceError::Stopped(reason)
    }
}
