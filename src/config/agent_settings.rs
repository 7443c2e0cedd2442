//! What the operator decided about sub-agents, the reviewer and checks: `--max-depth`,
//! `--max-reviews`, `--no-review`, `--review-model`, `[[agents]]` and `checks`.
//!
//! Resolved once, before any work, from the command line and the parts of the operator's file
//! that concern agents: a broken `[[agents]]` entry, or a check that names no declared tool or
//! cannot run without arguments, is exit 2 before anything is cloned. It takes those parts
//! rather than the whole file, and imports only config's leaves, so the config that holds these
//! settings and the agents that read them do not depend on each other.

use super::agent_catalogue::Catalogue;
use crate::cli::RunArgs;
use crate::config::ConfigError;
use crate::config::file::{AgentConfig, DeclaredToolConfig};

/// `--max-depth` when not given: the main agent's sub-agents may delegate once more.
pub(crate) const DEFAULT_MAX_DEPTH: u32 = 2;
/// `--max-reviews` when not given.
pub(crate) const DEFAULT_MAX_REVIEWS: u32 = 2;

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
    /// The settings from flags, environment and the operator's `--config` (its `[[agents]]`,
    /// its `checks` and the `[[tools]]` they name), checked before any work.
    pub fn resolve(
        args: &RunArgs,
        agents: &[AgentConfig],
        checks: &[String],
        declared_tools: &[DeclaredToolConfig],
    ) -> Result<Self, ConfigError> {
        let review_model = args
            .options
            .review_model
            .as_deref()
            .map(str::trim)
            .filter(|model| !model.is_empty())
            .map(str::to_owned);
        if args.options.review_model.is_some() && review_model.is_none() {
            return Err(ConfigError::key("--review-model", "is empty"));
        }
        let catalogue = Catalogue::new(agents)?;
        let mut resolved: Vec<String> = Vec::new();
        for name in checks {
            let Some(tool) = declared_tools.iter().find(|tool| &tool.name == name) else {
                return Err(ConfigError(format!(
                    "--config: `checks` names `{name}`, which is not a [[tools]] entry of the same file (checks run the operator's declared command tools)"
                )));
            };
            if let Some((parameter, _)) = tool.parameters.iter().find(|(_, parameter)| !parameter.optional) {
                return Err(ConfigError(format!(
                    "--config: the check `{name}` cannot run: its parameter `{parameter}` is required, and a check runs with no arguments"
                )));
            }
            if resolved.contains(name) {
                return Err(ConfigError(format!("--config: `checks` names `{name}` twice")));
            }
            resolved.push(name.clone());
        }
        Ok(Self {
            max_depth: args.options.max_depth.unwrap_or(DEFAULT_MAX_DEPTH),
            max_reviews: args.options.max_reviews.unwrap_or(DEFAULT_MAX_REVIEWS),
            review: !args.options.no_review,
            review_model,
            catalogue,
            checks: resolved,
        })
    }
}
