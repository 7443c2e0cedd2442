//! Flags + environment + config files -> one [`Config`].
//!
//! Precedence, highest first: flag, `UPKEEP_<OPTION>` environment variable (both handled by
//! clap), the operator's `--config` file, the target repository's `.upkeep.toml`, built-in
//! default. The operator's file ranks above the repository's because the operator runs the bot
//! and the repository is what it works on. Everything that can be checked before any work is
//! checked in [`Config::from_args`]; `.upkeep.toml` can only be read after cloning and is
//! checked before the first model call. Errors name the offending key and map to exit code 2.
//!
//! This file holds what a run is given: [`Config`], [`RepoSettings`] and their parts, and the
//! defaults. Reading is done by the files around it, each depending only on those below:
//! [`error`] (the one error), [`mod@file`] (the shapes of both config files), [`source`]
//! (`--repo`), `resolve` (flags and the operator's file -> [`Config`]) and `repo_settings`
//! (plus the repository's file -> [`RepoSettings`]). The modules that config itself uses never
//! import this file: the agents' settings read only the leaves (`config::error`,
//! `config::file`), and the fleet limits read a [`crate::fleet::limits::LimitKeys`] that
//! [`FileConfig::limit_keys`] builds. So no import loop runs through config.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;

use crate::exec::CommandSettings;
use crate::kinds::{ForgeKind, ProviderKind};
use crate::repo::Identity;

pub mod error;
pub mod file;
mod repo_settings;
mod resolve;
pub mod source;

pub use error::ConfigError;
pub use file::{
    AgentConfig, DeclaredToolConfig, FileConfig, MIN_CONTEXT_WINDOW, ModelConfig, ParameterConfig, Price,
    REPO_CONFIG_FILE,
};
pub use source::RepoSource;

pub const DEFAULT_MAX_TURNS: u32 = 20;
pub const DEFAULT_MAX_CYCLES: u32 = 10;
pub const DEFAULT_LABEL: &str = "upkeep";
pub const DEFAULT_TASKS_FILE: &str = "TODO.md";
/// Paths the file tools never change. A repository's `.upkeep.toml` can add to them but never
/// remove one (it could otherwise publish a workflow, or rewrite its own policy).
pub const DEFAULT_PROTECTED_PATHS: &[&str] = &[".github/workflows/**", ".upkeep.toml"];
pub const DEFAULT_SHELL_TIMEOUT_SECS: u64 = 120;
pub const DEFAULT_OUTPUT_CAP: usize = 30_000;
/// Long enough for a slow local model to start answering a large request.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 300;
pub const DEFAULT_GITHUB_SERVER: &str = "https://github.com";
pub const DEFAULT_GITHUB_API: &str = "https://api.github.com";
/// What a comment on the bot's pull request says to ask for work.
pub const DEFAULT_TRIGGER_PHRASE: &str = "@upkeep";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Single,
    Continuous,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Continuous => "continuous",
        }
    }
}

#[derive(Clone)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<SecretString>,
    pub replay: Option<PathBuf>,
    /// Longest wait for the API's next bytes (an idle timeout: a streaming reply is never cut).
    pub request_timeout: Duration,
    /// The context window given by `--context-window` or the operator's `[models]`; `None`
    /// means the built-in table's (see [`crate::llm::window`]).
    pub context_window: Option<u64>,
    /// `--structured-output`, else the operator's `[models."name"] structured_output`.
    pub structured_output: crate::kinds::StructuredOutputMode,
    /// `--max-reply-tokens`: the reply cap sent with every request, instead of the room the
    /// context fitting leaves.
    pub max_reply_tokens: Option<u64>,
    /// `--temperature`: sent with every request when set; otherwise the model's default.
    pub temperature: Option<f64>,
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "set"))
            .field("context_window", &self.context_window)
            .field("structured_output", &self.structured_output)
            .field("max_reply_tokens", &self.max_reply_tokens)
            .field("temperature", &self.temperature)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Budgets {
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
    pub timeout: Option<Duration>,
}

#[derive(Clone)]
pub struct GitHubSettings {
    pub server_url: String,
    pub api_url: String,
    pub token: Option<SecretString>,
    /// The bot's account, when the operator names it (`UPKEEP_BOT_LOGIN`, for GitHub App tokens,
    /// which cannot ask `GET /user` who they are); otherwise it is asked.
    pub bot_login: Option<String>,
}

impl GitHubSettings {
    /// `GITHUB_SERVER_URL`, `GITHUB_API_URL`, `GITHUB_TOKEN` (or `GH_TOKEN`), `UPKEEP_BOT_LOGIN`.
    pub fn from_env() -> Self {
        GitHubSettings {
            server_url: env_or("GITHUB_SERVER_URL", DEFAULT_GITHUB_SERVER)
                .trim_end_matches('/')
                .to_owned(),
            api_url: env_or("GITHUB_API_URL", DEFAULT_GITHUB_API)
                .trim_end_matches('/')
                .to_owned(),
            token: env_secret(&["GITHUB_TOKEN", "GH_TOKEN"]),
            // Trimmed: a login pasted into a repository variable often carries a line break.
            bot_login: std::env::var("UPKEEP_BOT_LOGIN")
                .ok()
                .map(|login| login.trim().to_owned())
                .filter(|login| !login.is_empty()),
        }
    }
}

/// Everything a run needs, resolved from flags, environment and the operator's config.
#[derive(Clone)]
pub struct Config {
    pub source: RepoSource,
    pub task: Option<String>,
    pub mode: Mode,
    pub max_cycles: u32,
    pub dangerous_tools: bool,
    pub provider: ProviderSettings,
    pub forge: ForgeKind,
    pub dry_run: bool,
    pub json: bool,
    pub trace: Option<PathBuf>,
    pub budgets: Budgets,
    pub depth: u32,
    /// Where each cycle's clone is copied before it is removed (`--keep-clone`).
    pub keep_clone: Option<PathBuf>,
    /// How long git transfers may go without a byte moving (`--git-stall-timeout`).
    pub git_stall_timeout: Duration,
    pub draft: bool,
    pub commands: CommandSettings,
    pub allow_tools: Vec<String>,
    pub identity: Identity,
    pub github: GitHubSettings,
    pub quiet: bool,
    /// Benchmark knob (`--full-history`): no observation masking.
    pub full_history: bool,
    /// The issue the run works (`--issue`, or the GitHub Actions event that started it).
    pub issue: Option<u64>,
    /// The bot's pull request whose review feedback the run works (`--pr`, or an event).
    pub pull_request: Option<u64>,
    /// Local forge: the answer to the pending question (`--answer`).
    pub answer: Option<String>,
    /// What a pull request comment must say to start work (`@upkeep`).
    pub trigger_phrase: String,
    /// Settings given by flag or environment that a file may also set.
    pub overrides: FileConfig,
    /// The operator's `--config` file.
    pub operator: FileConfig,
    /// Sub-agents, the reviewer and checks (`--max-depth`, `--max-reviews`, `--no-review`,
    /// `--review-model`, `[[agents]]`, `checks`).
    pub agents: crate::agents::settings::AgentSettings,
    /// Set by `upkeep fleet`, which runs this repository as one of many: its events carry this
    /// name as `repo`, and its lines for people start with it.
    pub fleet_member: Option<String>,
}

/// Settings after the repository's `.upkeep.toml` is known.
#[derive(Debug, Clone)]
pub struct RepoSettings {
    pub base: Option<String>,
    pub label: String,
    pub tasks_file: String,
    pub instructions: Option<String>,
    pub protected_paths: Vec<String>,
    pub max_turns: u32,
    /// Declared command tools from the operator's config and the repository's file.
    pub declared_tools: Vec<DeclaredToolConfig>,
    pub prices: BTreeMap<String, Price>,
    /// `pr_limit`, `pr_hourly_limit` and `schedule`, the operator's tightened by the repository's.
    pub limits: crate::fleet::limits::Limits,
    /// Keep the repository's dashboard issue up to date after the run.
    pub dashboard: bool,
}

/// The first of `names` that is set to something other than blanks: CI systems pass a secret
/// that is not configured as an empty variable, which must read as unset.
fn env_secret(names: &[&str]) -> Option<SecretString> {
    names
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .map(SecretString::from)
}

/// A variable's value, or `default` when it is unset or blank (see [`env_secret`]).
fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
