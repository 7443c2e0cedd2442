//! The values each part of upkeep is configured with, and the one configuration error.
//!
//! The boundaries (the model APIs in [`crate::llm`], the forges in [`crate::forge`], declared
//! commands in [`crate::exec`]) are built from these plain values, never from a whole resolved
//! configuration, so they depend on nothing above them; [`crate::config`] reads the command
//! line, the environment and the config files into them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use crate::kinds::ProviderKind;

mod error;

pub use error::ConfigError;

pub const DEFAULT_GITHUB_SERVER: &str = "https://github.com";
pub const DEFAULT_GITHUB_API: &str = "https://api.github.com";

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

/// A declared command tool: a fixed program plus argument templates, never a shell string.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeclaredToolConfig {
    /// Where the declaration was read (`--config <path>` or `.upkeep.toml`), for errors and
    /// for `run_started`/`cycle_started`, which say which program each exposed tool runs.
    #[serde(skip)]
    pub declared_in: String,
    pub name: String,
    pub description: String,
    pub cmd: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub parameters: BTreeMap<String, ParameterConfig>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ParameterConfig {
    #[serde(rename = "type", default = "default_parameter_type")]
    pub kind: String,
    pub description: Option<String>,
    #[serde(rename = "enum")]
    pub allowed: Option<Vec<String>>,
    pub pattern: Option<String>,
    #[serde(rename = "maxLength")]
    pub max_length: Option<usize>,
    #[serde(default)]
    pub optional: bool,
}

fn default_parameter_type() -> String {
    "string".into()
}

/// Price of a model in US dollars per million tokens. Input read from the provider's prompt
/// cache and input written to it have their own rates; a missing one means the input rate.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
    #[serde(default)]
    pub cache_write_per_mtok: Option<f64>,
}

/// The first of `names` that is set to something other than blanks: CI systems pass a secret
/// that is not configured as an empty variable, which must read as unset.
pub(crate) fn env_secret(names: &[&str]) -> Option<SecretString> {
    names
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .map(SecretString::from)
}

/// A variable's value, or `default` when it is unset or blank (see [`env_secret`]).
pub(crate) fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}
