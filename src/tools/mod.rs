//! The tools the model can call, dispatched by name.
//!
//! Each tool lives in its own file and implements [`Tool`]. A tool's failure is split by
//! audience, as the contract's "error-as-content" rule needs: [`ToolError::RespondToModel`]
//! goes back to the model as the call's result and the cycle goes on, while
//! [`ToolError::Fatal`] ends the run (a rejected token, a broken repository). Tools that end
//! the cycle (`finish`, `ask_question`) say so through [`ToolOutput::EndCycle`] rather than by
//! side effect, so the agent loop stays the one place that decides when a cycle is over.

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::forge::{Forge, PullRequest};
use crate::repo::Workspace;

pub mod args;
pub mod ask_question;
pub mod branch;
pub mod complete_task;
pub mod create_pull_request;
pub mod declared;
pub mod delegate;
pub mod edit_file;
pub mod finish;
pub mod line_endings;
pub mod list_files;
pub mod read_file;
pub mod registry;
pub mod run_shell_command;
pub mod search_files;
pub mod spec;
pub mod targets;
pub mod write_file;

pub use registry::{Lookup, ToolRegistry, ToolSelection};
pub use spec::{ToolClass, ToolSpec};

/// How `finish` says the cycle ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    Completed,
    NoTasks,
}

/// A tool call that ends the cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CycleEnd {
    Finish { status: FinishStatus, summary: String },
    Question { question: String, issue: Option<u64> },
}

#[derive(Debug)]
pub enum ToolOutput {
    /// A result for the model; the batch goes on.
    Text(String),
    /// A pull request was opened or updated; the batch goes on.
    PullRequest(PullRequest),
    /// The cycle is over; the rest of the batch is skipped.
    EndCycle(CycleEnd),
    /// A sub-agent's `complete_task`: its answer; the sub-agent is done and the rest of the
    /// batch is skipped.
    Completed(Value),
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Goes back to the model as the call's (failed) result.
    #[error("{0}")]
    RespondToModel(String),
    /// Ends the run: retrying cannot help and the model cannot fix it.
    #[error(transparent)]
    Fatal(#[from] anyhow::Error),
}

impl ToolError {
    pub fn model(message: impl Into<String>) -> Self {
        ToolError::RespondToModel(message.into())
    }
}

/// Work on the tree cut short by the interrupt ends the run, as the interrupt does (the turn
/// loop reports it as the interrupt, not as a failure).
impl From<crate::repo::Interrupted> for ToolError {
    fn from(interrupted: crate::repo::Interrupted) -> Self {
        ToolError::Fatal(interrupted.into())
    }
}

/// Settings for tools that run programs (they live with the runner, in [`crate::exec`]).
pub use crate::exec::CommandSettings;

/// What a tool may touch while it runs.
pub struct ToolContext<'a> {
    pub workspace: &'a Workspace,
    /// The only way tools reach the repository's files (see [`crate::repo::fs`]).
    pub tree: &'a crate::repo::WorkTree,
    pub forge: &'a dyn Forge,
    pub commands: &'a CommandSettings,
    pub redactor: &'a crate::secrets::Redactor,
    pub cancel: &'a CancellationToken,
    pub identity: &'a crate::repo::Identity,
    /// The issues calls may name, and the one a call that names none works on: the model
    /// chooses content, never where the bot posts, pushes or closes.
    pub targets: &'a targets::Targets,
    /// Pull requests opened or updated earlier in this cycle, so a second
    /// `create_pull_request` updates the same branch instead of opening another.
    pub cycle_branch: Option<&'a str>,
    /// The bot's open pull requests when the cycle started (this run's included): working the
    /// same issue or task updates one of them instead of opening a second.
    pub open_pull_requests: &'a [crate::forge::OpenPullRequest],
    /// The key of the task text, when the run was given one (see [`crate::forge::task::task_key`]).
    pub task_key: Option<&'a str>,
    /// The bot's open pull request this cycle continues (a review follow-up, or an answered
    /// question on an issue that has one): its branch takes the commit, pushed on top.
    pub continued: Option<&'a crate::forge::ContinuedPullRequest>,
    /// The calling agent's execution context and sub-agents (`delegate`, the reviewer and checks
    /// before a push); set by the turn loop for every call, `None` where there are none.
    pub agents: Option<&'a dyn delegate::SubAgents>,
}

impl ToolContext<'_> {
    /// Model text the bot will post on the forge (a question, a pull request's title and body, a
    /// review reply): secrets redacted, mentions and upkeep's own hidden markers made inert.
    pub(crate) fn postable(&self, model_text: &str) -> String {
        crate::forge::postable(&self.redactor.redact(model_text))
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError>;
}
