//! Agents as tools (DESIGN section 12): the model hands a self-contained task to a sub-agent
//! with `delegate{agent, task}`, and a reviewer agent plus the operator's checks approve a
//! change before `create_pull_request` pushes it.
//!
//! A sub-agent is the same turn loop as the main agent ([`crate::agent::Agent`]): the same
//! `{plan, tool_calls}` protocol, the same history policy and the same budgets, with a fresh
//! context, its own instructions and a subset of the run's tools, until it calls
//! `complete_task{answer}` or runs out of turns. What it guarantees:
//! - **Never more tools than the run.** A sub-agent's tools are taken from the run's registry:
//!   a tool the run withholds stays withheld, and a call outside the agent's list is rejected,
//!   never run ([`team`]).
//! - **One execution context.** Every model call and tool call carries the run's trace id, the
//!   depth and the agent path (`root>explorer`, [`crate::agent::execution::ExecContext`]); events carry the path
//!   as `agent`. `--max-depth` bounds nesting; every level spends from the run's one budget
//!   ([`crate::agent::execution::Spend`]) and stops on the run's one cancellation token.
//! - **Validated answers.** A structured answer (the reviewer's verdict, or an `[[agents]]`
//!   entry's `output_schema`) is checked against its JSON schema; one that does not match goes
//!   back to the sub-agent to fix ([`crate::config::answer_schema`]). Model output is never trusted to be well-formed.
//! - **A gate before the push.** Checks and the reviewer run before `create_pull_request`
//!   commits; a failure is the call's result, so the model fixes and tries again; after
//!   `--max-reviews` rounds the pull request opens with the unresolved findings ([`review`]).

pub(crate) mod checks;
mod level;
pub(crate) mod models;
pub(crate) mod review;
pub(crate) mod task_prompt;
pub(crate) mod team;

pub(crate) use crate::config::agent_catalogue::Catalogue;
pub(crate) use crate::config::agent_settings::AgentSettings;
pub(crate) use models::Models;
pub(crate) use team::Team;

/// The main agent's part in delegation: `delegate`, listing every agent it may ask (with
/// `--max-depth 0` there is none to ask, and a call is rejected with the reason); and
/// `complete_task`, which only sub-agents hold, rejected with what to call instead.
pub(crate) fn equip_main_agent(registry: &mut crate::tools::ToolRegistry, settings: &AgentSettings) {
    registry.withhold(
        "complete_task",
        "complete_task ends a sub-agent; you are the main agent: end the cycle with finish",
    );
    if settings.max_depth == 0 {
        registry.withhold("delegate", "--max-depth 0: sub-agents are off for this run");
        return;
    }
    let agents = settings
        .catalogue
        .agents()
        .iter()
        .map(|agent| (agent.name.clone(), agent.description.clone()))
        .collect();
    registry.add(Box::new(crate::tools::delegate::Delegate::new(agents)));
}
