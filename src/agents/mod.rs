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
//!   depth and the agent path (`root>explorer`, [`context::ExecContext`]); events carry the path
//!   as `agent`. `--max-depth` bounds nesting; every level spends from the run's one budget
//!   ([`context::Spend`]) and stops on the run's one cancellation token.
//! - **Validated answers.** A structured answer (the reviewer's verdict, or an `[[agents]]`
//!   entry's `output_schema`) is checked against its JSON schema; one that does not match goes
//!   back to the sub-agent to fix ([`answer`]). Model output is never trusted to be well-formed.
//! - **A gate before the push.** Checks and the reviewer run before `create_pull_request`
//!   commits; a failure is the call's result, so the model fixes and tries again; after
//!   `--max-reviews` rounds the pull request opens with the unresolved findings ([`review`]).

use crate::cli::RunArgs;
use crate::config::{ConfigError, FileConfig};

pub mod answer;
pub mod catalogue;
pub mod checks;
pub mod context;
mod level;
pub mod models;
pub mod prompt;
pub mod review;
pub mod team;

pub use catalogue::{AgentDefinition, Catalogue};
pub use context::{ExecContext, Spend};
pub use models::Models;
pub use team::Team;

/// The main agent's part in delegation: `delegate`, listing every agent it may ask (with
/// `--max-depth 0` there is none to ask, and a call is rejected with the reason); and
/// `complete_task`, which only sub-agents hold, rejected with what to call instead.
pub fn equip_main_agent(registry: &mut crate::tools::ToolRegistry, settings: &AgentSettings) {
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

/// `--max-depth` when not given: the main agent's sub-agents may delegate once more.
pub const DEFAULT_MAX_DEPTH: u32 = 2;
/// `--max-reviews` when not given.
pub const DEFAULT_MAX_REVIEWS: u32 = 2;

/// What the operator decided about sub-agents, the reviewer and checks.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// Deepest delegation level: root is 0.
    pub max_depth: u32,
    /// Review rounds before a pull request opens anyway with the unresolved findings.
    pub max_reviews: u32,
    /// Whether the reviewer approves changes before they are pushed (`--no-review` clears it).
    pub review: bool,
    /// The reviewer's model, when not the main one (`--review-model`).
    pub review_model: Option<String>,
    /// The built-in agents and the operator's `[[agents]]`.
    pub catalogue: Catalogue,
    /// Declared command tools run before every push (`checks`).
    pub checks: Vec<String>,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            max_depth: DEFAULT_MAX_DEPTH,
            max_reviews: DEFAULT_MAX_REVIEWS,
            review: true,
            review_model: None,
            catalogue: Catalogue::builtin(),
            checks: Vec::new(),
        }
    }
}

impl AgentSettings {
    /// The settings from flags, environment and the operator's `--config`, checked before any
    /// work: a broken `[[agents]]` entry or a check that names no declared tool is exit 2.
    pub fn resolve(args: &RunArgs, operator: &FileConfig) -> Result<Self, ConfigError> {
        let review_model = args
            .review_model
            .as_deref()
            .map(str::trim)
            .filter(|model| !model.is_empty())
            .map(str::to_owned);
        if args.review_model.is_some() && review_model.is_none() {
            return Err(ConfigError::key("--review-model", "is empty"));
        }
        let catalogue = Catalogue::new(&operator.agents)?;
        let mut checks: Vec<String> = Vec::new();
        for name in &operator.checks {
            let Some(tool) = operator.tools.iter().find(|tool| &tool.name == name) else {
                return Err(ConfigError(format!(
                    "--config: `checks` names `{name}`, which is not a [[tools]] entry of the same file (checks run the operator's declared command tools)"
                )));
            };
            if let Some((parameter, _)) = tool.parameters.iter().find(|(_, parameter)| !parameter.optional) {
                return Err(ConfigError(format!(
                    "--config: the check `{name}` cannot run: its parameter `{parameter}` is required, and a check runs with no arguments"
                )));
            }
            if checks.contains(name) {
                return Err(ConfigError(format!("--config: `checks` names `{name}` twice")));
            }
            checks.push(name.clone());
        }
        Ok(Self {
            max_depth: args.max_depth.unwrap_or(DEFAULT_MAX_DEPTH),
            max_reviews: args.max_reviews.unwrap_or(DEFAULT_MAX_REVIEWS),
            review: !args.no_review,
            review_model,
            catalogue,
            checks,
        })
    }
}
