//! The shapes of the two config files: the operator's `--config` and the repository's
//! `.upkeep.toml`, as read from TOML, before they are combined with flags and each other.
//!
//! Both files share one shape, [`FileConfig`]; the repository's is untrusted, so
//! [`FileConfig::parse_repository`] refuses the keys only the operator may set and a
//! `tasks_file` that would leave the clone. Guarantees: unknown keys are errors (a typo does
//! not silently do nothing), every value that can be checked without the run is checked here,
//! and every error names the file and the key. This module only reads; it depends on nothing
//! that resolves a whole [`super::Config`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::exec::LimitsConfig;
use crate::limits::LimitKeys;
use crate::limits::schedule::ScheduleKeys;
use crate::settings::ConfigError;
pub(crate) use crate::settings::{DeclaredToolConfig, Price};

/// File name of the per-repository configuration.
pub const REPO_CONFIG_FILE: &str = ".upkeep.toml";
/// The most fix cycles per pull request anyone may ask for: each is a full cycle of model
/// calls, and a failure that survives this many will not yield to one more.
pub(crate) const MAX_FIX_ATTEMPTS: u32 = 10;
/// No model worth running has a smaller window, and the prompt alone needs about this much.
pub const MIN_CONTEXT_WINDOW: u64 = 1024;

/// The keys of `.upkeep.toml` (and of the operator's `--config`, which adds `[[tools]]` and
/// `[prices]`). Unknown keys are errors, so a typo does not silently do nothing.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub base: Option<String>,
    pub label: Option<String>,
    pub tasks_file: Option<String>,
    pub instructions: Option<String>,
    pub protected_paths: Option<Vec<String>>,
    pub max_turns: Option<u32>,
    /// Fix cycles per pull request whose checks fail (DESIGN section 14), at most
    /// [`MAX_FIX_ATTEMPTS`]; a repository's value can only lower the operator's.
    pub max_fix_attempts: Option<u32>,
    #[serde(default)]
    pub tools: Vec<DeclaredToolConfig>,
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// Resource limits for commands; operator-only (see [`FileConfig::parse_repository`]).
    pub limits: Option<LimitsConfig>,
    /// Fleet limits (DESIGN section 13; [`crate::limits`]): most open bot pull requests
    /// and most opened in the last hour (0: no limit), the time windows upkeep may work in and
    /// their time zone, and whether to keep the dashboard issue. A repository may tighten the
    /// operator's limits, never loosen them.
    pub pr_limit: Option<u32>,
    pub pr_hourly_limit: Option<u32>,
    pub schedule: Option<Vec<String>>,
    pub timezone: Option<String>,
    pub dashboard: Option<bool>,
    /// `schedule` and `timezone` as checked by [`FileConfig::parse`].
    #[serde(skip)]
    pub schedule_keys: ScheduleKeys,
    /// Per-model settings; operator-only (the repository's file may not set them).
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    /// The phrase that asks upkeep to act on a pull request comment; operator-only (it is
    /// needed before the repository is cloned).
    pub trigger_phrase: Option<String>,
    /// Sub-agents the model may delegate to (`[[agents]]`); operator-only (DESIGN section 12).
    #[serde(default)]
    pub agents: Vec<AgentConfig>,
    /// Declared command tools run before every push (`checks = ["cargo_test"]`); operator-only.
    #[serde(default)]
    pub checks: Vec<String>,
}

/// `[models."name"]` in the operator's config.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The model's context window in tokens (what `--context-window` sets).
    pub context_window: Option<u64>,
    /// How the reply's shape is asked of this model's server (what `--structured-output` sets).
    pub structured_output: Option<crate::kinds::StructuredOutputMode>,
}

/// `[[agents]]` in the operator's `--config`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub name: String,
    /// What the agent is for, as the `delegate` tool lists it.
    pub description: String,
    /// The agent's own instructions, appended to the sub-agent system prompt.
    pub instructions: String,
    /// Tools by name: a subset of what the run allows.
    #[serde(default)]
    pub tools: Vec<String>,
    pub max_turns: Option<u32>,
    /// The model the agent asks, when not the run's.
    pub model: Option<String>,
    /// JSON schema (a TOML table) the answer must satisfy; without one the answer is text.
    pub output_schema: Option<Value>,
}

impl FileConfig {
    /// Parses a config file's text; `origin` names the file in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let mut parsed: FileConfig =
            toml::from_str(text).map_err(|error| ConfigError(format!("{origin} is not valid: {error}")))?;
        if parsed.max_turns == Some(0) {
            return Err(ConfigError(format!(
                "{origin}: invalid `max_turns`: must be at least 1"
            )));
        }
        if let Some(asked) = parsed.max_fix_attempts.filter(|asked| *asked > MAX_FIX_ATTEMPTS) {
            return Err(ConfigError(format!(
                "{origin}: invalid `max_fix_attempts` {asked}: must be at most {MAX_FIX_ATTEMPTS} (0 turns fixing off)"
            )));
        }
        for (model, settings) in &parsed.models {
            if settings
                .context_window
                .is_some_and(|window| window < MIN_CONTEXT_WINDOW)
            {
                return Err(ConfigError(format!(
                    "{origin}: invalid `models.\"{model}\".context_window`: must be at least {MIN_CONTEXT_WINDOW} tokens"
                )));
            }
        }
        for pattern in parsed.protected_paths.iter().flatten() {
            globset::Glob::new(pattern).map_err(|error| {
                ConfigError(format!(
                    "{origin}: invalid `protected_paths` entry {pattern:?}: {error}"
                ))
            })?;
        }
        parsed.schedule_keys = ScheduleKeys::parse(parsed.schedule.as_deref(), parsed.timezone.as_deref())
            .map_err(|error| ConfigError(format!("{origin}: {error}")))?;
        Ok(parsed)
    }

    /// Parses the target repository's `.upkeep.toml`. The repository is untrusted: it may not
    /// set keys that only the operator may set, and a file it names must stay inside it.
    pub fn parse_repository(text: &str) -> Result<Self, ConfigError> {
        let parsed = Self::parse(text, REPO_CONFIG_FILE)?;
        let operator_only = [
            ("prices", !parsed.prices.is_empty()),
            ("limits", parsed.limits.is_some()),
            // The model's window: a repository cannot make upkeep send requests its model
            // refuses (or, with Ollama, reserve a huge context).
            ("models", !parsed.models.is_empty()),
            ("trigger_phrase", parsed.trigger_phrase.is_some()),
            // Sub-agents and checks decide what runs with which tools and what gates a push.
            ("agents", !parsed.agents.is_empty()),
            ("checks", !parsed.checks.is_empty()),
        ];
        if let Some((key, _)) = operator_only.iter().find(|(_, set)| *set) {
            return Err(ConfigError(format!(
                "{REPO_CONFIG_FILE}: `{key}` is operator-only: set it in the file given to --config, not in the repository"
            )));
        }
        if let Some(tasks_file) = &parsed.tasks_file {
            crate::repo::fs::normalise(tasks_file).map_err(|error| {
                ConfigError(format!(
                    "{REPO_CONFIG_FILE}: invalid `tasks_file`: {error} (it names a file inside the repository)"
                ))
            })?;
        }
        Ok(parsed)
    }

    /// The keys the fleet limits read (`pr_limit`, `pr_hourly_limit`, the checked schedule).
    pub fn limit_keys(&self) -> LimitKeys<'_> {
        LimitKeys {
            pr_limit: self.pr_limit,
            pr_hourly_limit: self.pr_hourly_limit,
            schedule: &self.schedule_keys,
        }
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError(format!("cannot read config file {}: {error}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }
}
