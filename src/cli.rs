//! Command-line definitions (clap). Every `run` option also reads `UPKEEP_<OPTION>` from the
//! environment; clap applies flag > environment, and [`crate::config`] adds the repository's
//! `.upkeep.toml` and the built-in defaults below that. Options that a file may set are
//! `Option`s here so that "not given" stays distinguishable from "given the default value".

// The doc comments below are the command line's help text, where brackets are TOML tables
// (`[[tools]]`) and clap's `[default: ...]`, not links to items.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::{Args, Parser, Subcommand};
use serde::{Deserialize, Serialize};

pub use crate::kinds::{ForgeKind, ProviderKind, StructuredOutputMode};

#[derive(Debug, Parser)]
#[command(name = "upkeep", version, about = "An autonomous maintenance bot for git repositories", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Work a repository: one task, the next task from its backlog, or (--continuous) until none is left.
    Run(Box<RunArgs>),
    /// Offline end-to-end demo: a sample repository, a scripted model, a real local pull request.
    Demo(DemoArgs),
    /// Print the tools exactly as the model sees them.
    Tools(ToolsArgs),
    /// Print the system prompt and first message exactly as the model would get them, without calling a model.
    Prompt(Box<RunArgs>),
    /// Set a repository up for upkeep: write .upkeep.toml and .github/workflows/upkeep.yml.
    Init(InitArgs),
    /// Work many repositories, each its own run: a list or an organisation, sharded across workers.
    Fleet(Box<FleetArgs>),
}

/// `upkeep run`'s command line: the repository, the options a fleet may set per repository
/// ([`RunOptions`]), and those that belong to the invocation as a whole (output, the commit
/// author, `--keep-clone`, and what one run is pointed at).
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// owner/name (GitHub), an https://, ssh:// or git@host:path URL, or a local path / file:// URL
    #[arg(long, env = "UPKEEP_REPO")]
    pub repo: String,

    #[command(flatten)]
    pub options: RunOptions,

    /// JSON Lines events on stdout; human-readable progress on stderr.
    #[arg(long, env = "UPKEEP_JSON", value_parser = BoolishValueParser::new())]
    pub json: bool,

    /// Append the events to this file.
    #[arg(long, env = "UPKEEP_TRACE")]
    pub trace: Option<PathBuf>,

    /// Benchmark knob: send every tool result whole in every request (no masking), to measure
    /// what the history policy saves. Not for real runs.
    #[arg(long, env = "UPKEEP_FULL_HISTORY", hide = true, value_parser = BoolishValueParser::new())]
    pub full_history: bool,

    /// Name on the bot's commits [default: upkeep]
    #[arg(long, env = "UPKEEP_AUTHOR_NAME")]
    pub author_name: Option<String>,

    /// Email on the bot's commits [default: upkeep@users.noreply.github.com]
    #[arg(long, env = "UPKEEP_AUTHOR_EMAIL")]
    pub author_email: Option<String>,

    /// Copy each cycle's clone (work tree and history, bot branch included) to DIR before it is
    /// removed (DIR/cycle-N in continuous mode); DIR must be new or empty.
    #[arg(long, env = "UPKEEP_KEEP_CLONE")]
    pub keep_clone: Option<PathBuf>,

    /// Print only errors and the final summary on stderr.
    #[arg(long, short, env = "UPKEEP_QUIET", value_parser = BoolishValueParser::new())]
    pub quiet: bool,

    /// Work this issue: its title, body and comments (a question's answer too) are the task.
    #[arg(long, env = "UPKEEP_ISSUE", conflicts_with = "continuous")]
    pub issue: Option<u64>,

    /// Work the review feedback on this pull request of the bot's, or with none waiting its
    /// failing checks (GitHub).
    #[arg(long = "pr", env = "UPKEEP_PR", conflicts_with_all = ["task", "task_file", "continuous", "issue"])]
    pub pull_request: Option<u64>,

    /// Local repository: the answer to the question upkeep asked there; the run resumes with it.
    #[arg(long, env = "UPKEEP_ANSWER")]
    pub answer: Option<String>,
}

/// The run options a fleet's `[[repos]]` table may set for one repository, under the option's
/// name with `_` for `-` (`--env` is `env`). The command line and the fleet file read the same
/// struct: clap parses it from flags and the environment, serde from the table
/// ([`crate::fleet::overrides`]), so an option added here is accepted by both.
#[derive(Debug, Clone, Default, PartialEq, Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunOptions {
    /// What to do. Without it the model picks the next task from the task sources.
    #[arg(long, env = "UPKEEP_TASK", conflicts_with = "task_file")]
    pub task: Option<String>,

    /// Read the task from a file.
    #[arg(long, env = "UPKEEP_TASK_FILE")]
    pub task_file: Option<PathBuf>,

    /// Repeat cycles on a fresh copy until the model finds no task or asks a question.
    #[arg(long, env = "UPKEEP_CONTINUOUS", value_parser = BoolishValueParser::new())]
    pub continuous: bool,

    /// Most cycles in continuous mode [default: 10]
    #[arg(long, env = "UPKEEP_MAX_CYCLES", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_cycles: Option<u32>,

    /// Most model calls per cycle [default: 20]
    #[arg(long, env = "UPKEEP_MAX_TURNS", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// Offer run_shell_command (and every declared command tool) to the model.
    #[arg(long, env = "UPKEEP_ALLOW_DANGEROUS_TOOLS", value_parser = BoolishValueParser::new())]
    pub allow_dangerous_tools: bool,

    /// Model provider [default: openai]
    #[arg(long, env = "UPKEEP_PROVIDER", value_enum)]
    pub provider: Option<ProviderKind>,

    /// Model name [default: per provider]
    #[arg(long, env = "UPKEEP_MODEL")]
    pub model: Option<String>,

    /// API endpoint: with openai the API root with its version path, any OpenAI-compatible server; with anthropic and gemini the host root
    #[arg(long, env = "UPKEEP_BASE_URL")]
    pub base_url: Option<String>,

    /// Longest wait for the model API's next bytes, in seconds; a reply that keeps streaming is never cut [default: 300]
    #[arg(long, env = "UPKEEP_REQUEST_TIMEOUT", value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: Option<u64>,

    /// The model's context window in tokens; every request is fitted into it [default: per model]
    #[arg(long, env = "UPKEEP_CONTEXT_WINDOW", value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1024..))]
    pub context_window: Option<u64>,

    /// How the reply's shape is asked of the server: auto steps down from a JSON schema to
    /// json_object to plain instructions, once per refusal [default: auto]
    #[arg(long, env = "UPKEEP_STRUCTURED_OUTPUT", value_enum, value_name = "FORM")]
    pub structured_output: Option<StructuredOutputMode>,

    /// The most tokens one reply may take, sent with every request [default: the room the
    /// context window leaves for the reply, at most 8192]
    #[arg(long, env = "UPKEEP_MAX_REPLY_TOKENS", value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(16..))]
    pub max_reply_tokens: Option<u64>,

    /// Sampling temperature sent with every request (0 for the most repeatable replies)
    /// [default: none sent: the model's own]
    #[arg(long, env = "UPKEEP_TEMPERATURE", value_name = "T", value_parser = temperature)]
    pub temperature: Option<f64>,

    /// Scripted model replies (JSON Lines); implies --provider replay
    #[arg(long, env = "UPKEEP_REPLAY")]
    pub replay: Option<PathBuf>,

    /// Where branches and pull requests go [default: github for GitHub repos, local for local paths]
    #[arg(long, env = "UPKEEP_FORGE", value_enum)]
    pub forge: Option<ForgeKind>,

    /// Branch pull requests target [default: the remote's default branch]
    #[arg(long, env = "UPKEEP_BASE")]
    pub base: Option<String>,

    /// Push nothing, open nothing, post nothing: print the title, body and diff instead.
    #[arg(long, env = "UPKEEP_DRY_RUN", value_parser = BoolishValueParser::new())]
    pub dry_run: bool,

    /// Token budget for the whole run (input + output).
    #[arg(long, env = "UPKEEP_MAX_TOKENS")]
    pub max_tokens: Option<u64>,

    /// Cost budget for the whole run, in US dollars.
    #[arg(long, env = "UPKEEP_MAX_COST")]
    pub max_cost: Option<f64>,

    /// Wall-clock budget for the whole run, e.g. 30m or 1h30m.
    #[arg(long, env = "UPKEEP_TIMEOUT")]
    #[serde(with = "humantime_text")]
    pub timeout: Option<humantime::Duration>,

    /// Issue label that marks tasks for the bot [default: upkeep]
    #[arg(long, env = "UPKEEP_LABEL")]
    pub label: Option<String>,

    /// Operator config (TOML): .upkeep.toml keys plus declared [[tools]] and [prices].
    #[arg(long, env = "UPKEEP_CONFIG")]
    pub config: Option<PathBuf>,

    /// Clone depth; 0 = full history [default: 1]
    #[arg(long, env = "UPKEEP_DEPTH")]
    pub depth: Option<u32>,

    /// Open pull requests as drafts.
    #[arg(long, env = "UPKEEP_DRAFT", value_parser = BoolishValueParser::new())]
    pub draft: bool,

    /// Give up a clone, fetch or push when no byte moved for this many seconds [default: 120]
    #[arg(long, env = "UPKEEP_GIT_STALL_TIMEOUT", value_parser = clap::value_parser!(u64).range(1..))]
    pub git_stall_timeout: Option<u64>,

    /// Timeout per command of run_shell_command and declared tools, in seconds [default: 120]
    #[arg(long, env = "UPKEEP_SHELL_TIMEOUT", value_parser = clap::value_parser!(u64).range(1..))]
    pub shell_timeout: Option<u64>,

    /// Pass this variable from upkeep's environment to commands (repeatable).
    #[arg(long = "env", env = "UPKEEP_ENV", value_delimiter = ',')]
    #[serde(rename = "env")]
    pub pass_env: Vec<String>,

    /// Offer this declared command tool to the model (repeatable).
    #[arg(long, env = "UPKEEP_ALLOW_TOOL", value_delimiter = ',')]
    pub allow_tool: Vec<String>,

    /// Fail (exit 2) where the OS sandbox for commands is unavailable.
    #[arg(long, env = "UPKEEP_REQUIRE_SANDBOX", value_parser = BoolishValueParser::new())]
    pub require_sandbox: bool,

    /// Let commands reach the network (by default they have none).
    #[arg(long, env = "UPKEEP_ALLOW_NETWORK", value_parser = BoolishValueParser::new())]
    pub allow_network: bool,

    /// Deepest delegation: root is 0, so 1 lets the main agent delegate and its sub-agents not [default: 2]
    #[arg(long, env = "UPKEEP_MAX_DEPTH", value_name = "N")]
    pub max_depth: Option<u32>,

    /// Review rounds before a pull request opens anyway, with the unresolved findings in its body [default: 2]
    #[arg(long, env = "UPKEEP_MAX_REVIEWS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_reviews: Option<u32>,

    /// Do not ask the reviewer agent before a pull request is pushed (checks still run).
    #[arg(long, env = "UPKEEP_NO_REVIEW", value_parser = BoolishValueParser::new())]
    pub no_review: bool,

    /// Model the reviewer uses (e.g. a cheaper one) [default: --model]
    #[arg(long, env = "UPKEEP_REVIEW_MODEL", value_name = "MODEL")]
    pub review_model: Option<String>,

    /// The phrase that asks upkeep to act on a comment on its pull request [default: @upkeep]
    #[arg(long, env = "UPKEEP_TRIGGER_PHRASE")]
    pub trigger_phrase: Option<String>,
}

/// `--timeout` in a file: the text the flag takes (`30m`, `1h30m`).
mod humantime_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Option<humantime::Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_str(&duration.to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<humantime::Duration>, D::Error> {
        let Some(text) = Option::<String>::deserialize(deserializer)? else {
            return Ok(None);
        };
        text.parse()
            .map(Some)
            .map_err(|error| serde::de::Error::custom(format!("{text:?}: {error}")))
    }
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Create the sample repository here and keep it, instead of in a temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// JSON Lines events on stdout, as with `run --json`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ToolsArgs {
    /// Include run_shell_command and every declared tool, as --allow-dangerous-tools does for a run.
    #[arg(long)]
    pub allow_dangerous_tools: bool,
    /// Operator config whose declared [[tools]] to show.
    #[arg(long, env = "UPKEEP_CONFIG")]
    pub config: Option<PathBuf>,
    /// Show this declared tool as a run with --allow-tool would offer it (repeatable).
    #[arg(long, env = "UPKEEP_ALLOW_TOOL", value_delimiter = ',')]
    pub allow_tool: Vec<String>,
    /// The tool specs and the reply schema as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct InitArgs {
    /// The repository to set up; existing files are never overwritten.
    #[arg(long, default_value = ".")]
    pub repo_dir: PathBuf,
    /// Write the workflow that runs a fleet as a matrix of shards (.github/workflows/upkeep-fleet.yml) instead.
    #[arg(long)]
    pub fleet: bool,
}

/// `upkeep fleet`: which repositories, how they are split and run; every `run` option is the
/// default for each repository (`--repo` excepted: the list says which).
#[derive(Debug, Clone, Args)]
#[command(mut_arg("repo", |arg| arg.required(false).hide(true).default_value("")))]
pub struct FleetArgs {
    /// The repositories: one per line (owner/name, a URL or a local path; `#` comments), or a
    /// .toml file of [[repos]] tables with per-repository options.
    #[arg(long, env = "UPKEEP_REPOS", required_unless_present = "org", conflicts_with = "org")]
    pub repos: Option<PathBuf>,

    /// Every repository of this GitHub organisation (or user) that is neither archived nor a fork.
    #[arg(long, env = "UPKEEP_ORG")]
    pub org: Option<String>,

    /// With --org: only repositories carrying this topic (repeatable: any of them).
    #[arg(long, env = "UPKEEP_TOPIC", value_delimiter = ',', requires = "org")]
    pub topic: Vec<String>,

    /// Work only shard I of N (I counts from 0, like JOB_COMPLETION_INDEX), e.g. 0/4.
    #[arg(long, env = "UPKEEP_SHARD", value_name = "I/N")]
    pub shard: Option<String>,

    /// Repositories worked at once [default: 4]
    #[arg(long, env = "UPKEEP_JOBS", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: Option<u32>,

    /// Cost budget for the whole fleet, in US dollars (each repository keeps --max-cost too).
    #[arg(long, env = "UPKEEP_FLEET_MAX_COST")]
    pub fleet_max_cost: Option<f64>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// `--temperature`: a finite number from 0 to 2, the range every supported API accepts.
fn temperature(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=2.0).contains(&value) => Ok(value),
        _ => Err(format!("{text:?} is not a number from 0 to 2")),
    }
}
