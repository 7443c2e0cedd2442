//! One agent level as its tools see it ([`SubAgents`]): who is calling, how a sub-agent is run
//! for `delegate`, and the gate before a push (in [`super::review`]).
//!
//! A sub-agent is a fresh [`Agent`] on the same turn loop, with its own provider, tools, turn
//! limit and context window, the caller's event sink and cancellation token, and the run's one
//! [`Spend`]. How it ends becomes the `delegate` call's result: its answer, or an error the
//! caller can act on (out of turns, a budget, a refusal). Only an interrupt, a provider failure
//! or a broken repository end the run, as they would for the main agent.

use async_trait::async_trait;
use serde_json::Value;

use super::task_prompt;
use super::team::Team;
use crate::agent::budget::Limit;
use crate::agent::execution::{ExecContext, Spend};
use crate::agent::{Agent, AgentEnd, CycleError, Delegation};
use crate::config::agent_catalogue::AgentDefinition;
use crate::events::{Event, Scope};
use crate::tools::delegate::{Approval, Proposal, SubAgents};
use crate::tools::spec::reply_schema;
use crate::tools::{ToolContext, ToolError};

/// The agent whose tools are running, in its team.
pub(super) struct Level<'s, 'b> {
    pub(super) team: &'s Team<'s>,
    pub(super) agent: &'s Agent<'s>,
    pub(super) exec: &'s ExecContext,
    pub(super) spend: &'s Spend<'b>,
    /// The caller's turn, for the events of the gate.
    pub(super) turn: u32,
}

impl Delegation for Team<'_> {
    /// What the tools of `agent`'s turn `turn` get: its context, sub-agents and the gate.
    fn level<'s, 'b>(
        &'s self,
        agent: &'s Agent<'s>,
        exec: &'s ExecContext,
        spend: &'s Spend<'b>,
        turn: u32,
    ) -> Box<dyn SubAgents + 's> {
        Box::new(Level {
            team: self,
            agent,
            exec,
            spend,
            turn,
        })
    }

    fn price_of(&self, model: &str) -> Option<crate::settings::Price> {
        Team::price_of(self, model)
    }
}

impl Level<'_, '_> {
    /// An event of the calling agent's turn.
    pub(super) fn emit(&self, event: Event) {
        let scope = Scope {
            cycle: Some(self.agent.cycle),
            turn: Some(self.turn),
        };
        self.agent.events.emit_as(scope, self.exec.path(), event);
    }

    /// Runs `definition` as a sub-agent of this level on `message` (its first message).
    pub(super) async fn run_agent(
        &self,
        definition: &AgentDefinition,
        message: String,
        ctx: &ToolContext<'_>,
    ) -> Result<AgentEnd, ToolError> {
        let team = self.team;
        let exec = self.exec.child(&definition.name);
        let provider = team.provider_for(definition);
        let registry = team.registry_for(definition, exec.depth())?;
        let specs = registry.specs();
        let system = task_prompt::system_prompt(definition, &specs, self.exec.path(), team.protected_paths);
        let schema = reply_schema(&specs);
        let agent = Agent {
            provider,
            registry: &registry,
            events: self.agent.events,
            cancel: self.agent.cancel,
            max_turns: definition.max_turns,
            cycle: self.agent.cycle,
            context_window: team.window_for(provider.model()),
            masking: self.agent.masking,
            team: Some(team),
        };
        let ended = agent.run(&exec, self.spend, &system, message, &schema, ctx).await;
        match ended {
            Ok(end) => Ok(end),
            Err(CycleError::Refused(reason)) => Err(ToolError::model(format!(
                "agent `{}` stopped without an answer: its model refused: {reason}",
                definition.name
            ))),
            Err(CycleError::Stopped(reason)) => Err(ToolError::Stopped(reason)),
            Err(CycleError::Provider(error)) => Err(ToolError::Fatal(
                crate::tools::Failure::Provider(error).within(format!("agent {}", exec.path())),
            )),
            Err(CycleError::Fatal(error)) => Err(ToolError::Fatal(error.within(format!("agent {}", exec.path())))),
        }
    }
}

/// The answer a sub-agent's end gives its caller, or why there is none.
fn delegate_result(name: &str, end: AgentEnd) -> Result<String, ToolError> {
    match end {
        AgentEnd::Answer(Value::String(text)) => Ok(text),
        AgentEnd::Answer(structured) => Ok(structured.to_string()),
        AgentEnd::Limit(Limit::Turns { max: turns, .. }) => Err(ToolError::model(format!(
            "agent `{name}` used its {turns} turns without calling complete_task, so it gave no answer. Ask it again with a narrower task, or do the work yourself."
        ))),
        AgentEnd::Limit(limit) => Err(ToolError::model(format!(
            "agent `{name}` stopped before answering: {limit}"
        ))),
        AgentEnd::Cycle(_) => Err(ToolError::model(format!(
            "agent `{name}` tried to end the cycle, which only you can do; it gave no answer"
        ))),
    }
}

#[async_trait]
impl SubAgents for Level<'_, '_> {
    async fn delegate(&self, agent: &str, task: &str, ctx: &ToolContext<'_>) -> Result<String, ToolError> {
        let max = self.team.settings.max_depth;
        if self.exec.depth() >= max {
            return Err(ToolError::model(format!(
                "--max-depth {max}: {} is at depth {} and may not delegate further; do the work yourself",
                self.exec.path(),
                self.exec.depth()
            )));
        }
        let catalogue = &self.team.settings.catalogue;
        let Some(definition) = catalogue.get(agent) else {
            let names: Vec<&str> = catalogue.agents().iter().map(|a| a.name.as_str()).collect();
            return Err(ToolError::model(format!(
                "there is no agent named `{}`; the agents are: {}",
                crate::text::one_line(agent),
                names.join(", ")
            )));
        };
        let end = self.run_agent(definition, task_prompt::task_message(task), ctx).await?;
        delegate_result(&definition.name, end)
    }

    async fn approve_pull_request(
        &self,
        proposal: &Proposal<'_>,
        ctx: &ToolContext<'_>,
    ) -> Result<Approval, ToolError> {
        self.approve(proposal, ctx).await
    }
}
