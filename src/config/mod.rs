//! Flags + environment + config files -> one [`Config`].
//!
//! Precedence, highest first: flag, `UPKEEP_<OPTION>` environment variable (both handled by
//! clap), the operator's `--config` file, the target repository's `.upkeep.toml`, built-in
//! default. The operator's file ranks above the repository's because the operator runs the bot
//! and the repository is what it works on. Everything that can be checked before any work is
//! checked in [`Config::from_args`]; `.upkeep.toml` can only be read after cloning and is
//! checked before the first model call. Errors name the offending key and map to exit code 2.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;

use crate::cli::RunArgs;
use crate::exec::CommandSettings;
use crate::kinds::{ForgeKind, ProviderKind};
use crate::repo::Identity;

pub mod error;
pub mod file;
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

/// What the settings are resolved for: a run needs credentials, printing the prompt does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Run,
    Prompt,
}

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
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "set"))
            .field("context_window", &self.context_window)
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
            bot_login: std::env::var("UPKEEP_BOT_LOGIN")
                .ok()
                .filter(|login| !login.trim().is_empty()),
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
    pub agents: crate::agents::AgentSettings,
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

fn env_secret(names: &[&str]) -> Option<SecretString> {
    names
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .map(SecretString::from)
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

impl Config {
    /// The settings of `upkeep run`: everything checked that can be before any work.
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        Self::resolve(args, Purpose::Run)
    }

    /// The settings of `upkeep prompt`, which calls no model and publishes nothing, and so
    /// needs no API key and no write token (public repositories are read without one).
    pub fn for_prompt(args: &RunArgs) -> Result<Self, ConfigError> {
        Self::resolve(args, Purpose::Prompt)
    }

    fn resolve(args: &RunArgs, purpose: Purpose) -> Result<Self, ConfigError> {
        let github = GitHubSettings::from_env();
        let source = RepoSource::parse(&args.repo, &github.server_url)?;

        let task = match (&args.task, &args.task_file) {
            (Some(task), _) if task.trim().is_empty() => return Err(ConfigError::key("--task", "is empty")),
            (Some(task), _) => Some(task.clone()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|error| ConfigError::key("--task-file", format!("{}: {error}", path.display())))?,
            ),
            (None, None) => None,
        };

        if args.continuous && (args.task.is_some() || args.task_file.is_some()) {
            return Err(ConfigError::key(
                "--continuous",
                "cannot be combined with --task: continuous mode picks its tasks from the task sources (labelled issues, the task file), one per cycle; run a single task without --continuous",
            ));
        }
        if let (RepoSource::Local(path), None) = (&source, &args.base) {
            let detached = crate::repo::setup::open_repository(path)
                .and_then(|repo| repo.head_detached())
                .unwrap_or(false);
            if detached {
                return Err(ConfigError::key(
                    "--base",
                    format!(
                        "{} has a detached HEAD, so there is no branch to target; pass --base BRANCH",
                        path.display()
                    ),
                ));
            }
        }
        if let Some(dir) = &args.keep_clone {
            let occupied = dir.exists() && std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_some());
            if occupied {
                return Err(ConfigError::key(
                    "--keep-clone",
                    format!("{} exists and is not an empty directory", dir.display()),
                ));
            }
        }
        if args.max_cycles.is_some() && !args.continuous {
            tracing::warn!("--max-cycles has no effect without --continuous (a single run is one cycle)");
        }

        let kind = match (args.provider, &args.replay) {
            (Some(kind), Some(_)) if kind != ProviderKind::Replay => {
                return Err(ConfigError::key(
                    "--provider",
                    format!("{} conflicts with --replay, which implies replay", kind.as_str()),
                ));
            }
            (_, Some(_)) => ProviderKind::Replay,
            (Some(kind), None) => kind,
            (None, None) => ProviderKind::Openai,
        };
        if kind == ProviderKind::Replay {
            match &args.replay {
                None => return Err(ConfigError::key("--provider", "replay needs --replay FILE")),
                Some(path) if !path.is_file() => {
                    return Err(ConfigError::key(
                        "--replay",
                        format!("{} does not exist", path.display()),
                    ));
                }
                Some(_) => {}
            }
        }
        let api_key = match kind {
            ProviderKind::Openai => env_secret(&["OPENAI_API_KEY"]),
            ProviderKind::Anthropic => env_secret(&["ANTHROPIC_API_KEY"]),
            ProviderKind::Gemini => env_secret(&["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
            ProviderKind::Ollama | ProviderKind::Replay => None,
        };
        // A custom endpoint (a local OpenAI-compatible server) usually needs no key.
        let key_required = matches!(kind, ProviderKind::Anthropic | ProviderKind::Gemini)
            || (kind == ProviderKind::Openai && args.base_url.is_none());
        if key_required && api_key.is_none() && purpose == Purpose::Run {
            let variable = match kind {
                ProviderKind::Openai => "OPENAI_API_KEY",
                ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
                _ => "GEMINI_API_KEY (or GOOGLE_API_KEY)",
            };
            return Err(ConfigError(format!(
                "{variable} is not set; --provider {} needs it (or try `upkeep demo`, or --replay FILE, or --base-url for a local server)",
                kind.as_str()
            )));
        }
        if let Some(url) = &args.base_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ConfigError::key("--base-url", format!("{url:?} is not an http(s) URL")));
            }
        }

        let forge = match (args.forge, &source) {
            (Some(ForgeKind::Local), RepoSource::Local(_)) | (Some(ForgeKind::None), _) => {
                args.forge.unwrap_or(ForgeKind::None)
            }
            (Some(ForgeKind::Local), _) => {
                return Err(ConfigError::key("--forge", "local needs --repo to be a local path"));
            }
            (Some(ForgeKind::Github), RepoSource::GitHub { .. }) => ForgeKind::Github,
            (Some(ForgeKind::Github), _) => {
                return Err(ConfigError::key(
                    "--forge",
                    "github needs --repo owner/name or a URL on $GITHUB_SERVER_URL",
                ));
            }
            (None, RepoSource::Local(_)) => ForgeKind::Local,
            (None, RepoSource::GitHub { .. }) => ForgeKind::Github,
            // Another host: upkeep can push but cannot open pull requests there.
            (None, RepoSource::Remote(_)) => ForgeKind::None,
        };
        if forge == ForgeKind::Github && github.token.is_none() && !args.dry_run && purpose == Purpose::Run {
            return Err(ConfigError(
                "GITHUB_TOKEN (or GH_TOKEN) is not set; --forge github needs it to push and open pull requests (or use --dry-run)".into(),
            ));
        }

        if let Some(cost) = args.max_cost {
            if !(cost.is_finite() && cost > 0.0) {
                return Err(ConfigError::key(
                    "--max-cost",
                    "must be a positive number of US dollars",
                ));
            }
        }

        let operator = match &args.config {
            Some(path) => {
                let mut file = FileConfig::load(path)?;
                for tool in &mut file.tools {
                    tool.declared_in = format!("--config {}", path.display());
                }
                file
            }
            None => FileConfig::default(),
        };
        let limits = operator
            .limits
            .unwrap_or_default()
            .resolve()
            .map_err(|error| ConfigError(format!("--config: {error}")))?;
        for name in &args.allow_tool {
            if name.trim().is_empty() {
                return Err(ConfigError::key("--allow-tool", "empty tool name"));
            }
        }

        let answer = match &args.answer {
            Some(answer) if answer.trim().is_empty() => return Err(ConfigError::key("--answer", "is empty")),
            Some(_) if forge != ForgeKind::Local => {
                return Err(ConfigError::key(
                    "--answer",
                    "answers a question upkeep asked about a local repository; on GitHub, answer in a comment on the issue (a maintainer's comment is the answer)",
                ));
            }
            other => other.clone(),
        };
        if args.pull_request.is_some() && forge != ForgeKind::Github {
            return Err(ConfigError::key(
                "--pr",
                "works review feedback on a GitHub pull request; --repo must be a GitHub repository (--forge github)",
            ));
        }
        if args
            .trigger_phrase
            .as_deref()
            .is_some_and(|phrase| phrase.trim().is_empty())
        {
            return Err(ConfigError::key("--trigger-phrase", "is empty"));
        }

        // The trace file is opened once, by the run's event sink, which reports a file it cannot
        // open as a usage error before any work.
        let trace = args.trace.clone();

        // `--context-window` (flag or environment) beats the operator's `[models."name"]`.
        let model_name = args
            .model
            .as_deref()
            .map(str::trim)
            .filter(|model| !model.is_empty())
            .unwrap_or_else(|| kind.default_model());
        let context_window = args
            .context_window
            .or_else(|| operator.models.get(model_name).and_then(|model| model.context_window));

        let agents = crate::agents::AgentSettings::resolve(args, &operator)?;

        let defaults = Identity::default();
        Ok(Config {
            source,
            task,
            mode: if args.continuous {
                Mode::Continuous
            } else {
                Mode::Single
            },
            max_cycles: args.max_cycles.unwrap_or(DEFAULT_MAX_CYCLES),
            dangerous_tools: args.allow_dangerous_tools,
            provider: ProviderSettings {
                kind,
                model: args.model.clone(),
                base_url: args.base_url.clone(),
                api_key,
                replay: args.replay.clone(),
                request_timeout: Duration::from_secs(args.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT_SECS)),
                context_window,
            },
            forge,
            dry_run: args.dry_run,
            json: args.json,
            trace,
            budgets: Budgets {
                max_tokens: args.max_tokens,
                max_cost: args.max_cost,
                timeout: args.timeout.map(Into::into),
            },
            depth: args.depth.unwrap_or(1),
            keep_clone: args.keep_clone.clone(),
            git_stall_timeout: args
                .git_stall_timeout
                .map_or(crate::repo::stop::DEFAULT_STALL_TIMEOUT, Duration::from_secs),
            draft: args.draft,
            commands: CommandSettings {
                timeout: Duration::from_secs(args.shell_timeout.unwrap_or(DEFAULT_SHELL_TIMEOUT_SECS)),
                pass_env: args.pass_env.clone(),
                output_cap: DEFAULT_OUTPUT_CAP,
                require_sandbox: args.require_sandbox,
                allow_network: args.allow_network,
                limits,
                sandbox: None,
            },
            allow_tools: args.allow_tool.clone(),
            identity: Identity {
                name: args.author_name.clone().unwrap_or(defaults.name),
                email: args.author_email.clone().unwrap_or(defaults.email),
            },
            github,
            quiet: args.quiet,
            full_history: args.full_history,
            issue: args.issue,
            pull_request: args.pull_request,
            answer,
            trigger_phrase: args
                .trigger_phrase
                .clone()
                .or_else(|| operator.trigger_phrase.clone())
                .unwrap_or_else(|| DEFAULT_TRIGGER_PHRASE.to_owned()),
            overrides: FileConfig {
                base: args.base.clone(),
                label: args.label.clone(),
                max_turns: args.max_turns,
                ..FileConfig::default()
            },
            operator,
            agents,
            fleet_member: None,
        })
    }

    /// Combines flags/environment, the operator's file, the repository's file and defaults.
    ///
    /// The repository cannot loosen the operator's policy: its `protected_paths` are added to
    /// the operator's (or the defaults), and its `max_turns`, used only where the operator set
    /// none, can lower the default but not raise it.
    pub fn repo_settings(&self, repo_file: &FileConfig) -> RepoSettings {
        let layers = [&self.overrides, &self.operator, repo_file];
        let pick = |get: &dyn Fn(&FileConfig) -> Option<String>| layers.iter().find_map(|layer| get(layer));
        let mut declared_tools = self.operator.tools.clone();
        for tool in &repo_file.tools {
            // The operator's declaration of a name wins over the repository's.
            if !declared_tools.iter().any(|t| t.name == tool.name) {
                declared_tools.push(DeclaredToolConfig {
                    declared_in: REPO_CONFIG_FILE.to_owned(),
                    ..tool.clone()
                });
            }
        }
        // Prices are the operator's alone (a repository file that sets them is refused).
        let prices = self.operator.prices.clone();
        RepoSettings {
            base: pick(&|f| f.base.clone()),
            label: pick(&|f| f.label.clone()).unwrap_or_else(|| DEFAULT_LABEL.into()),
            tasks_file: pick(&|f| f.tasks_file.clone()).unwrap_or_else(|| DEFAULT_TASKS_FILE.into()),
            instructions: pick(&|f| f.instructions.clone()),
            protected_paths: {
                let mut paths = self
                    .operator
                    .protected_paths
                    .clone()
                    .unwrap_or_else(|| DEFAULT_PROTECTED_PATHS.iter().map(|s| (*s).to_owned()).collect());
                for added in repo_file.protected_paths.iter().flatten() {
                    if !paths.contains(added) {
                        paths.push(added.clone());
                    }
                }
                paths
            },
            max_turns: [&self.overrides, &self.operator]
                .iter()
                .find_map(|layer| layer.max_turns)
                .unwrap_or_else(|| {
                    repo_file
                        .max_turns
                        .map_or(DEFAULT_MAX_TURNS, |asked| asked.min(DEFAULT_MAX_TURNS))
                }),
            declared_tools,
            prices,
            limits: crate::fleet::limits::Limits::resolve(&self.operator, repo_file),
            dashboard: self.operator.dashboard.or(repo_file.dashboard).unwrap_or(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_name_is_github_unless_a_path_exists() {
        let source = RepoSource::parse("octo/widgets", "https://ghe.example").expect("parses");
        assert_eq!(
            source,
            RepoSource::GitHub {
                owner: "octo".into(),
                name: "widgets".into(),
                clone_url: "https://ghe.example/octo/widgets.git".into()
            }
        );
        assert!(matches!(
            RepoSource::parse("https://github.com/a/b.git", DEFAULT_GITHUB_SERVER),
            Ok(RepoSource::GitHub { .. })
        ));
        assert!(matches!(
            RepoSource::parse("git@gitlab.com:a/b.git", DEFAULT_GITHUB_SERVER),
            Ok(RepoSource::Remote(_))
        ));
        assert!(RepoSource::parse("not a repo at all", DEFAULT_GITHUB_SERVER).is_err());
    }

    #[test]
    fn credentials_in_a_repository_url_are_refused_without_echoing_them() {
        for spec in [
            "https://ghp_secretvalue123@github.com/o/r.git",
            "https://user:hunter2pass@example.com/o/r.git",
            "ssh://git:hunter2pass@example.com/o/r.git",
        ] {
            let error = RepoSource::parse(spec, DEFAULT_GITHUB_SERVER)
                .expect_err(spec)
                .to_string();
            assert!(error.contains("GITHUB_TOKEN"), "{error}");
            assert!(!error.contains("secretvalue") && !error.contains("hunter2"), "{error}");
        }
        assert!(RepoSource::parse("ssh://git@example.com/o/r.git", DEFAULT_GITHUB_SERVER).is_ok());
        assert!(RepoSource::parse("git@gitlab.com:a/b.git", DEFAULT_GITHUB_SERVER).is_ok());
    }

    #[test]
    fn a_repository_cannot_loosen_the_operators_policy() {
        let error = FileConfig::parse_repository("[prices.\"gpt-4.1\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n")
            .expect_err("prices are operator-only")
            .to_string();
        assert!(error.contains("`prices`"), "{error}");
        for value in ["/dev/stdin", "../outside", ".git/config", ".GIT/HEAD"] {
            let error = FileConfig::parse_repository(&format!("tasks_file = {value:?}"))
                .expect_err(value)
                .to_string();
            assert!(error.contains("`tasks_file`"), "{value}: {error}");
        }
        let repo = FileConfig::parse_repository("protected_paths = []\nmax_turns = 1000\n").expect("parses");
        let config = test_config();
        let settings = config.repo_settings(&repo);
        assert!(settings.protected_paths.iter().any(|p| p == ".github/workflows/**"));
        assert!(settings.protected_paths.iter().any(|p| p == ".upkeep.toml"));
        assert_eq!(settings.max_turns, DEFAULT_MAX_TURNS);
        let lower = FileConfig::parse_repository("max_turns = 5\nprotected_paths = [\"LICENSE\"]").expect("parses");
        let settings = config.repo_settings(&lower);
        assert_eq!(settings.max_turns, 5);
        assert!(settings.protected_paths.iter().any(|p| p == "LICENSE"));
        assert!(settings.protected_paths.iter().any(|p| p == ".github/workflows/**"));
    }

    fn test_config() -> Config {
        let args = RunArgs {
            repo: ".".into(),
            replay: Some(PathBuf::from("Cargo.toml")),
            ..RunArgs::default()
        };
        Config::from_args(&args).expect("a replay config on this checkout")
    }

    #[test]
    fn unknown_keys_in_a_file_are_errors_naming_the_key() {
        let error = FileConfig::parse("max_turn = 3", ".upkeep.toml").expect_err("typo is refused");
        assert!(error.to_string().contains("max_turn"), "{error}");
        let error = FileConfig::parse("max_turns = \"many\"", ".upkeep.toml").expect_err("wrong type is refused");
        assert!(error.to_string().contains("max_turns"), "{error}");
    }

    #[test]
    fn limits_are_operator_only() {
        let file = FileConfig::parse("[limits]\nprocesses = 10\n", ".upkeep.toml").expect("parses");
        assert_eq!(file.limits.and_then(|limits| limits.processes), Some(10));
        let error =
            FileConfig::parse_repository("[limits]\nprocesses = 10\n").expect_err("a repository may not set limits");
        assert!(error.to_string().contains("`limits`"), "{error}");
        assert!(FileConfig::parse_repository("").is_ok());
        let error = FileConfig::parse("[limits]\nmemory = 1\n", "ops.toml").expect_err("unknown key");
        assert!(error.to_string().contains("memory"), "{error}");
    }
}
