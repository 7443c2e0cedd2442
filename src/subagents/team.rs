//! The cycle's agents: what every sub-agent of one cycle shares (the catalogue, the run's
//! tools, the providers, prices and windows, the repository's instructions, the checks and the
//! review rounds), built by the cycle when the cycle's tools are known.
//!
//! Here the rule "a sub-agent never holds more tools than the run" is applied: an agent's tools
//! are a [`ToolRegistry::subset`] of the run's registry, a name the run does not know is a
//! usage error before the first model call, and `delegate` is withheld from an agent at
//! `--max-depth`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{AgentSettings, Models};
use crate::config::agent_catalogue::{AgentDefinition, AnswerShape, REVIEWER};
use crate::config::answer_schema::AnswerSchema;
use crate::config::{Config, ConfigError, ModelConfig, Price, ProviderSettings, RepoSettings};
use crate::instructions::AgentInstructions;
use crate::llm::{Provider, pricing, window};
use crate::tools::complete_task::CompleteTask;
use crate::tools::declared_tool::DeclaredTool;
use crate::tools::{ToolError, ToolRegistry};

/// What a cycle's team is built from.
pub(crate) struct TeamParts<'a> {
    pub config: &'a Config,
    pub settings: &'a RepoSettings,
    /// The main agent's tools: every sub-agent's are taken from them.
    pub registry: &'a ToolRegistry,
    /// The run's provider, and those of the other models agents name.
    pub provider: &'a dyn Provider,
    pub models: &'a Models,
    /// The repository's agent instructions file (AGENTS.md or the like), for the reviewer.
    pub agent_instructions: Option<&'a AgentInstructions>,
    /// Where warnings about the agents' tools go (an agent's tool this run withholds).
    pub notice: &'a (dyn Fn(&str) + Sync),
}

/// The review rounds of one cycle.
#[derive(Debug, Default)]
pub(crate) struct ReviewState {
    pub(super) rounds: u32,
    /// The digest of the last change that passed: not reviewed again.
    pub(super) approved: Option<[u8; 32]>,
    /// What the last pull request opened with, after the rounds ran out.
    pub(super) unresolved: Vec<String>,
}

pub(crate) struct Team<'a> {
    pub(super) settings: &'a AgentSettings,
    run_registry: &'a ToolRegistry,
    provider: &'a dyn Provider,
    models: &'a Models,
    provider_settings: &'a ProviderSettings,
    model_configs: &'a BTreeMap<String, ModelConfig>,
    prices: &'a BTreeMap<String, Price>,
    pub(super) protected_paths: &'a [String],
    /// The repository's instructions (`.upkeep.toml` and its agent instructions file), for the
    /// reviewer.
    pub(super) instructions: Option<String>,
    /// The task the run was given, for the reviewer.
    pub(super) task: Option<&'a str>,
    pub(super) checks: Vec<DeclaredTool>,
    pub(super) review: Mutex<ReviewState>,
}

impl<'a> Team<'a> {
    /// Checks every agent's tools against the run's and prepares the checks; a name the run
    /// does not know is a usage error.
    pub(crate) fn new(parts: TeamParts<'a>) -> Result<Self, ConfigError> {
        let TeamParts {
            config,
            settings,
            registry,
            provider,
            models,
            agent_instructions,
            notice,
        } = parts;
        let agents = &config.agents;
        for definition in agents.catalogue.agents() {
            for tool in &definition.tools {
                if tool != "delegate" && !registry.knows(tool) {
                    return Err(ConfigError(format!(
                        "[[agents]] `{}`: `tools` names `{tool}`, which is not a tool of this run",
                        definition.name
                    )));
                }
                if let Some(reason) = registry.withheld_reason(tool) {
                    notice(&format!(
                        "upkeep: warning: agent `{}` runs without `{tool}`, which this run withholds: {reason}",
                        definition.name
                    ));
                }
            }
        }
        let mut checks = Vec::new();
        for name in &agents.checks {
            let declaration = config
                .operator
                .tools
                .iter()
                .find(|tool| &tool.name == name)
                .ok_or_else(|| ConfigError(format!("the check `{name}` names no declared tool of --config")))?;
            checks.push(DeclaredTool::new(declaration, &declaration.declared_in)?);
        }
        Ok(Self {
            settings: agents,
            run_registry: registry,
            provider,
            models,
            provider_settings: &config.provider,
            model_configs: &config.operator.models,
            prices: &settings.prices,
            protected_paths: &settings.protected_paths,
            instructions: reviewer_instructions(settings.instructions.as_deref(), agent_instructions),
            task: config.task.as_deref(),
            checks,
            review: Mutex::new(ReviewState::default()),
        })
    }

    /// The price of `model` in this cycle's price table.
    pub(crate) fn price_of(&self, model: &str) -> Option<Price> {
        pricing::price_for(model, self.prices)
    }

    /// The context window of `model`: `--context-window` for the run's own model, else the
    /// operator's `[models]`, else the built-in table (the agent then asks the server, where
    /// nobody more authoritative said one).
    pub(crate) fn window_for(&self, model: &str) -> window::ContextWindow {
        if model == self.provider.model() {
            return window::window_for(self.provider_settings, model);
        }
        match self.model_configs.get(model).and_then(|config| config.context_window) {
            Some(tokens) => window::ContextWindow {
                tokens,
                from: window::WindowSource::Operator,
            },
            None => window::ContextWindow {
                tokens: window::default_window(model),
                from: match window::built_in_window(model) {
                    Some(_) => window::WindowSource::BuiltIn,
                    None => window::WindowSource::Guess,
                },
            },
        }
    }

    /// The provider `definition` asks: its own model, the reviewer's `--review-model`, or the run's.
    pub(super) fn provider_for(&self, definition: &AgentDefinition) -> &dyn Provider {
        let review_model = (definition.name == REVIEWER)
            .then_some(self.settings.review_model.as_deref())
            .flatten();
        definition
            .model
            .as_deref()
            .or(review_model)
            .and_then(|model| self.models.get(model))
            .unwrap_or(self.provider)
    }

    /// The tools of `definition` running at `depth`: its subset of the run's, `delegate`
    /// withheld at `--max-depth`, and `complete_task`.
    pub(super) fn registry_for(&self, definition: &AgentDefinition, depth: u32) -> Result<ToolRegistry, ToolError> {
        let mut names = definition.tools.clone();
        names.push("complete_task".into());
        let outside = format!(
            "not one of the tools of agent `{}` ({})",
            definition.name,
            names.join(", ")
        );
        let mut registry = self.run_registry.subset(&definition.tools, &outside);
        let max = self.settings.max_depth;
        if definition.tools.iter().any(|tool| tool == "delegate") && depth >= max {
            registry.withhold(
                "delegate",
                &format!("--max-depth {max}: an agent at depth {depth} may not delegate further; do the work yourself"),
            );
        }
        let schema = match &definition.answer {
            AnswerShape::Text => None,
            AnswerShape::Schema(schema) => Some(Arc::new(AnswerSchema::compile(schema).map_err(|error| {
                ToolError::Fatal(crate::tools::Failure::Setup(format!(
                    "agent `{}`: output schema: {error}",
                    definition.name
                )))
            })?)),
        };
        registry.add(Box::new(CompleteTask::new(schema)));
        Ok(registry)
    }

    /// The findings a pull request of this cycle opened with, after the review rounds ran out.
    pub(crate) fn unresolved_findings(&self) -> Vec<String> {
        self.review
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unresolved
            .clone()
    }
}

/// What the reviewer is told the maintainers asked for: `.upkeep.toml`'s `instructions` and the
/// agent instructions file, each named, the file's cut noted.
fn reviewer_instructions(configured: Option<&str>, file: Option<&AgentInstructions>) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(text) = configured.map(str::trim).filter(|text| !text.is_empty()) {
        parts.push(format!("From .upkeep.toml:\n{text}"));
    }
    if let Some(file) = file.filter(|file| !file.text.trim().is_empty()) {
        let cut = match file.cut_from {
            Some(size) => format!(" (its first part; the file has {size} bytes)"),
            None => String::new(),
        };
        parts.push(format!("From {}{cut}:\n{}", file.file, file.text.trim()));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}
