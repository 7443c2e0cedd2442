//! Flags + environment + config files + what started the run -> one immutable [`Config`].
//!
//! Precedence, highest first: flag, `UPKEEP_<OPTION>` environment variable (both handled by
//! clap), the operator's `--config` file, the target repository's `.upkeep.toml`, built-in
//! default. The operator's file ranks above the repository's because the operator runs the bot
//! and the repository is what it works on. Everything that can be checked before any work is
//! checked in [`Config::resolve`], which also takes what the run was started for (the Actions
//! event, a local question's `--answer`, fleet membership) as inputs, so nothing rewrites a
//! `Config` afterwards; `.upkeep.toml` can only be read after cloning and is checked before the
//! first model call. Errors name the offending key and map to exit code 2.
//!
//! This file holds what a run is given: [`Config`], [`RepoSettings`] and their parts, and the
//! defaults; the values the boundaries are built from, and the one error, live below it in
//! [`crate::settings`]. Reading is done by the files around it: [`mod@file`] (the shapes of both
//! config files), [`source`] (`--repo`), `resolve` (flags and the operator's file ->
//! [`RunSettings`]), `inputs` (those plus what the Actions event and the local questions mean
//! for the run -> [`Config`]; [`crate::startup`] asks them) and `repo_settings` (plus the
//! repository's file -> [`RepoSettings`]). Config imports nothing that reads a `Config`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::exec::CommandSettings;
use crate::kinds::ForgeKind;
use crate::repo::Identity;

pub(crate) mod agent_catalogue;
pub(crate) mod agent_settings;
pub(crate) mod answer_schema;
pub(crate) mod file;
mod inputs;
mod repo_settings;
mod resolve;
pub(crate) mod source;

pub(crate) use crate::settings::env_secret;
pub use crate::settings::{
    ConfigError, DEFAULT_GITHUB_API, DEFAULT_GITHUB_SERVER, DeclaredToolConfig, GitHubSettings, ParameterConfig, Price,
    ProviderSettings,
};
pub use file::{AgentConfig, FileConfig, MIN_CONTEXT_WINDOW, ModelConfig, REPO_CONFIG_FILE};
pub use inputs::{EventWork, LocalResume, Purpose, Resolved};
pub(crate) use resolve::{check_command_line, command_line};
pub use source::RepoSource;

pub const DEFAULT_MAX_TURNS: u32 = 20;
/// Fix cycles per pull request with failing checks when nobody says (DESIGN section 14).
pub const DEFAULT_MAX_FIX_ATTEMPTS: u32 = 3;
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

#[derive(Debug, Clone, Copy, Default)]
pub struct Budgets {
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
    pub timeout: Option<Duration>,
}

/// Everything a run needs, resolved once by [`Config::resolve`] from flags, environment, the
/// operator's config, the Actions event that started the run, the local repository's questions
/// (`--answer`) and fleet membership.
///
/// Nothing rewrites a `Config` after it is resolved: its settings are read through `Deref` to
/// [`RunSettings`], and there is no `DerefMut` and no other way to reach them mutably, so a
/// run, a cycle or a tool that wants something else per run must own that value itself. This
/// does not compile:
///
/// ```compile_fail
/// fn rewrite(config: &mut upkeep::config::Config) {
///     config.task = Some("something else".into());
/// }
/// ```
#[derive(Clone)]
pub struct Config {
    settings: RunSettings,
}

impl std::ops::Deref for Config {
    type Target = RunSettings;

    fn deref(&self) -> &RunSettings {
        &self.settings
    }
}

/// The settings a [`Config`] holds, readable through it. A `RunSettings` on its own is the
/// command line's part while [`Config::resolve`] builds the rest; only a `Config` reaches a run.
#[derive(Clone)]
pub struct RunSettings {
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
    pub agents: crate::config::agent_settings::AgentSettings,
    /// Set by `upkeep fleet`, which runs this repository as one of many: its events carry this
    /// name as `repo`, and its lines for people start with it.
    pub fleet_member: Option<String>,
    /// What the local repository's questions mean for this run (`--answer`): a question to
    /// resume (its task and issue are this run's), or questions still waiting for an answer.
    pub local_questions: LocalResume,
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
    /// Fix cycles per pull request with failing checks: the operator's (or the default),
    /// lowered by the repository's.
    pub max_fix_attempts: u32,
    /// Declared command tools from the operator's config and the repository's file.
    pub declared_tools: Vec<DeclaredToolConfig>,
    pub prices: BTreeMap<String, Price>,
    /// `pr_limit`, `pr_hourly_limit` and `schedule`, the operator's tightened by the repository's.
    pub limits: crate::limits::Limits,
    /// Keep the repository's dashboard issue up to date after the run.
    pub dashboard: bool,
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
