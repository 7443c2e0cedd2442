//! `delegate{agent, task}`: hand a self-contained task to a sub-agent and get its answer back as
//! this call's result (DESIGN section 12).
//!
//! The tool is only the interface the model sees: its description lists the agents that may be
//! asked, and the call goes to the turn loop's [`SubAgents`] (implemented in
//! [`crate::subagents`]), which knows the caller's depth, budget and tools. The same trait carries
//! the gate `create_pull_request` asks before it pushes, so tools depend on this small interface
//! and never on how agents run.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Invocation, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool};

/// What a pull request is about to carry, for the gate before the push.
#[derive(Debug, Clone, Copy)]
pub struct Proposal<'a> {
    pub title: &'a str,
    pub body: &'a str,
    pub issue: Option<u64>,
}

/// The gate's decision when the change may be pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Checks passed and the reviewer approved (or there was nothing to ask).
    Approved,
    /// `--max-reviews` rounds are spent: push anyway, with this Markdown section (the unresolved
    /// findings) appended to the pull request's body.
    OpenWithFindings { section: String },
}

/// What tools get from the agent that calls them.
#[async_trait]
pub trait SubAgents: Send + Sync {
    /// Runs the sub-agent `agent` on `task`; its answer, or why it ended without one, as an
    /// error the caller can act on.
    async fn delegate(&self, agent: &str, task: &str, ctx: &ToolContext<'_>) -> Result<String, ToolError>;

    /// Runs the operator's checks and the reviewer on the change in the clone. A failing round
    /// is an error for the model (the findings or the check's output); nothing is committed.
    async fn approve_pull_request(&self, proposal: &Proposal<'_>, ctx: &ToolContext<'_>)
    -> Result<Approval, ToolError>;
}

/// `delegate`, describing the agents it may run: `(name, description)` in the order listed.
pub(crate) struct Delegate {
    agents: Vec<(String, String)>,
}

impl Delegate {
    pub(crate) fn new(agents: Vec<(String, String)>) -> Self {
        Self { agents }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DelegateArgs {
    /// which agent to ask
    agent: String,
    /// the task or question, complete in itself
    task: String,
}

#[async_trait]
impl TypedTool for Delegate {
    type Args = DelegateArgs;

    /// The generated schema, with `agent` narrowed to the agents of this run.
    fn spec_with(&self, mut parameters: Value) -> ToolSpec {
        let mut description = String::from(
            "Give a self-contained task to a sub-agent: it works in a fresh context (it does not see this conversation) with its own tools and returns only its answer, so what it reads does not fill your context. Agents:",
        );
        for (name, about) in &self.agents {
            description.push_str(&format!("\n- `{name}`: {about}"));
        }
        let names: Vec<Value> = self.agents.iter().map(|(name, _)| Value::from(name.as_str())).collect();
        parameters["properties"]["agent"]["enum"] = Value::Array(names);
        ToolSpec::new("delegate", ToolClass::Safe, &description, parameters)
    }

    async fn run(&self, call: Invocation<'_, DelegateArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let agent = args.agent.trim();
        let task = args.task.trim();
        if task.is_empty() {
            return Err(ToolError::model(
                "`task` is empty: say what the agent should do or answer",
            ));
        }
        let agents = ctx
            .agents
            .ok_or_else(|| ToolError::model("sub-agents are not available here"))?;
        agents.delegate(agent, task, ctx).await.map(ToolOutput::Text)
    }
}
