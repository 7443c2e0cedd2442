//! The tools the model can call, dispatched by name.
//!
//! Each tool lives in its own file and implements [`Tool`]. A tool's failure is split by
//! audience, as the contract's "error-as-content" rule needs: [`ToolError::RespondToModel`]
//! goes back to the model as the call's result and the cycle goes on, while
//! [`ToolError::Fatal`] ends the run (a rejected token, a broken repository). Tools that end
//! the cycle (`finish`, `ask_question`) say so through [`ToolOutput::EndCycle`] rather than by
//! side effect, so the agent loop stays the one place that decides when a cycle is over.
//!
//! Each call is one [`Invocation`]: the [`ToolContext`] of the run and the cycle, and the
//! arguments. Most tools are `TypedTool`s, whose arguments are a serde struct the schema the
//! model sees is generated from ([`args`]).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::forge::PullRequest;
use crate::repo::Workspace;

pub(crate) mod args;
pub(crate) mod ask_question;
pub(crate) mod branch;
pub(crate) mod complete_task;
pub(crate) mod create_pull_request;
pub(crate) mod declared_tool;
pub(crate) mod delegate;
pub(crate) mod edit_file;
pub(crate) mod failure;
pub(crate) mod finish;
pub(crate) mod line_endings;
pub(crate) mod list_files;
pub(crate) mod pull_request_scope;
pub(crate) mod read_file;
pub(crate) mod registry;
pub(crate) mod run_shell_command;
pub(crate) mod search_files;
pub mod spec;
pub(crate) mod targets;
pub(crate) mod write_file;

pub use failure::Failure;
pub use pull_request_scope::{CyclePullRequests, PullRequestScope};
pub use registry::{Lookup, ToolRegistry, ToolSelection};
pub use spec::{ToolClass, ToolSpec};

/// How `finish` says the cycle ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, JsonSchema)]
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
    Fatal(#[from] Failure),
    /// The interrupt or the deadline stopped the tool's work: the run stops, and says why.
    #[error("{0}")]
    Stopped(crate::repo::StopReason),
}

impl ToolError {
    pub fn model(message: impl Into<String>) -> Self {
        ToolError::RespondToModel(message.into())
    }

    /// Git work that failed (`doing` says what it was) ends the run; git work the interrupt or
    /// the deadline stopped is that stop.
    pub fn from_git(error: crate::repo::WorkspaceError, doing: &'static str) -> Self {
        match error {
            crate::repo::WorkspaceError::Stopped(reason) => ToolError::Stopped(reason),
            source => ToolError::Fatal(Failure::Git { doing, source }),
        }
    }
}

/// Work on the tree cut short by the interrupt ends the run, as the interrupt does (the turn
/// loop reports it as the interrupt, not as a failure).
impl From<crate::repo::StopReason> for ToolError {
    /// Work on the tree cut short by the interrupt is the run's one stop, not a failure.
    fn from(reason: crate::repo::StopReason) -> Self {
        ToolError::Stopped(reason)
    }
}

/// Settings for tools that run programs (they live with the runner, in [`crate::exec`]).
pub use crate::exec::CommandSettings;

/// What a tool may touch while it runs: the run's and the cycle's parts every tool shares.
pub struct ToolContext<'a> {
    pub workspace: &'a Workspace,
    /// The only way tools reach the repository's files (see [`crate::repo::fs`]).
    pub tree: &'a crate::repo::WorkTree,
    pub commands: &'a CommandSettings,
    pub redactor: &'a crate::secrets::Redactor,
    pub cancel: &'a CancellationToken,
    /// The issues calls may name, and the one a call that names none works on: the model
    /// chooses content, never where the bot posts, pushes or closes.
    pub targets: &'a targets::Targets,
    /// What only `create_pull_request` (and the gate it asks before a push) works from.
    pub pull_request: &'a PullRequestScope<'a>,
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

/// One call of a tool, as the turn loop hands it over: what the run and the cycle let the tool
/// touch, and the call's arguments (typed, for a `TypedTool`; the model's object as sent, for
/// a tool whose arguments are only known at run time, such as a declared command tool).
pub struct Invocation<'a, A> {
    pub ctx: &'a ToolContext<'a>,
    pub args: A,
}

/// A call whose arguments are still the model's JSON object.
pub type RawInvocation<'a> = Invocation<'a, &'a Map<String, Value>>;

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    async fn call(&self, call: RawInvocation<'_>) -> Result<ToolOutput, ToolError>;
}

/// A tool whose arguments are a serde struct: the schema the model sees is generated from
/// [`TypedTool::Args`] and the call reads the same struct ([`args::parse`]), so the two cannot
/// disagree. A malformed argument is the call's error, naming the argument.
#[async_trait]
pub(crate) trait TypedTool: Send + Sync {
    type Args: DeserializeOwned + JsonSchema + Send;

    /// The tool's spec around `parameters`, the schema generated from [`TypedTool::Args`]
    /// (a tool may narrow it with what only the run knows, such as `delegate`'s agent names).
    fn spec_with(&self, parameters: Value) -> ToolSpec;

    async fn run(&self, call: Invocation<'_, Self::Args>) -> Result<ToolOutput, ToolError>;
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn spec(&self) -> ToolSpec {
        self.spec_with(args::schema_for::<T::Args>())
    }

    async fn call(&self, call: RawInvocation<'_>) -> Result<ToolOutput, ToolError> {
        let args = args::parse::<T::Args>(call.args)?;
        self.run(Invocation { ctx: call.ctx, args }).await
    }
}
