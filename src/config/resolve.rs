//! Flags, environment and the operator's `--config` -> the [`RunSettings`] that
//! [`super::Config::resolve`] completes, checked before any work.
//!
//! [`command_line`] reads the command line once, in a fixed order of small steps, each of which checks what it
//! reads and names the offending flag or key in its error. The order is part of the contract:
//! when several things are wrong, the first step's error is the one reported (the repository,
//! then the task, the mode, the provider, the forge, the budgets, the operator's file, ...).
//! Guarantees: a run that would need a secret it does not have stops here, not halfway
//! through; printing the prompt never needs an API key or a write token; nothing here calls a
//! model, clones or writes.

use std::time::Duration;

use secrecy::SecretString;

use super::LocalResume;
use super::file::FileConfig;
use super::inputs::Purpose;
use super::source::RepoSource;
use super::{
    Budgets, DEFAULT_MAX_CYCLES, DEFAULT_OUTPUT_CAP, DEFAULT_REQUEST_TIMEOUT_SECS, DEFAULT_SHELL_TIMEOUT_SECS,
    DEFAULT_TRIGGER_PHRASE, GitHubSettings, Mode, ProviderSettings, RunSettings, env_secret,
};
use crate::cli::RunArgs;
use crate::config::agent_settings::AgentSettings;
use crate::exec::CommandSettings;
use crate::kinds::{ForgeKind, ProviderKind, StructuredOutputMode};
use crate::repo::Identity;
use crate::settings::ConfigError;

/// The command line's errors, as [`super::Config::resolve`] reports them, without reading anything
/// the run starts from (the event, the repository's questions): what every repository of a
/// fleet shares.
pub(crate) fn check_command_line(args: &RunArgs) -> Result<(), ConfigError> {
    command_line(args, Purpose::Run).map(drop)
}

/// The command line read in its fixed order, into the settings [`super::Config::resolve`] completes.
pub(crate) fn command_line(args: &RunArgs, purpose: Purpose) -> Result<RunSettings, ConfigError> {
    let github = GitHubSettings::from_env();
    let source = RepoSource::parse(&args.repo, &github.server_url)?;
    let task = task(args)?;
    let mode = mode(args)?;
    check_base_branch(args, &source)?;
    check_keep_clone(args)?;
    if args.options.max_cycles.is_some() && !args.options.continuous {
        tracing::warn!("--max-cycles has no effect without --continuous (a single run is one cycle)");
    }
    let mut provider = provider_settings(args, purpose)?;
    let forge = forge(args, &source, &github, purpose)?;
    let budgets = budgets(args)?;
    let operator = operator_file(args)?;
    let commands = command_settings(args, &operator)?;
    let allow_tools = allowed_tools(args)?;
    let answer = answer(args, forge)?;
    check_pull_request(args, forge)?;
    let trigger_phrase = trigger_phrase(args, &operator)?;
    provider.context_window = context_window(args, &operator, provider.kind);
    provider.structured_output = structured_output(args, &operator, provider.kind);
    let agents = AgentSettings::resolve(args, &operator.agents, &operator.checks, &operator.tools)?;
    Ok(RunSettings {
        source,
        task,
        mode,
        max_cycles: args.options.max_cycles.unwrap_or(DEFAULT_MAX_CYCLES),
        dangerous_tools: args.options.allow_dangerous_tools,
        provider,
        forge,
        dry_run: args.options.dry_run,
        json: args.json,
        // The trace file is opened once, by the run's event sink, which reports a file it
        // cannot open as a usage error before any work.
        trace: args.trace.clone(),
        budgets,
        depth: args.options.depth.unwrap_or(1),
        keep_clone: args.keep_clone.clone(),
        git_stall_timeout: args
            .options
            .git_stall_timeout
            .map_or(crate::repo::stop::DEFAULT_STALL_TIMEOUT, Duration::from_secs),
        draft: args.options.draft,
        commands,
        allow_tools,
        identity: identity(args),
        github,
        quiet: args.quiet,
        full_history: args.full_history,
        issue: args.issue,
        pull_request: args.pull_request,
        answer,
        trigger_phrase,
        overrides: overrides(args),
        operator,
        agents,
        fleet_member: None,
        local_questions: LocalResume::Nothing,
    })
}

/// `--task` or `--task-file`: an empty task is a mistake, not "no task", and a task file that
/// cannot be read stops the run before it clones anything.
fn task(args: &RunArgs) -> Result<Option<String>, ConfigError> {
    match (&args.options.task, &args.options.task_file) {
        (Some(task), _) if task.trim().is_empty() => Err(ConfigError::key("--task", "is empty")),
        (Some(task), _) => Ok(Some(task.clone())),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|error| ConfigError::key("--task-file", format!("{}: {error}", path.display()))),
        (None, None) => Ok(None),
    }
}

/// `--continuous`, which picks its own tasks and so cannot be given one.
fn mode(args: &RunArgs) -> Result<Mode, ConfigError> {
    if !args.options.continuous {
        return Ok(Mode::Single);
    }
    if args.options.task.is_some() || args.options.task_file.is_some() {
        return Err(ConfigError::key(
            "--continuous",
            "cannot be combined with --task: continuous mode picks its tasks from the task sources (labelled issues, the task file), one per cycle; run a single task without --continuous",
        ));
    }
    Ok(Mode::Continuous)
}

/// A local repository on a detached HEAD has no branch for the pull request to target, so it
/// needs `--base`; better said now than after the first model call.
fn check_base_branch(args: &RunArgs, source: &RepoSource) -> Result<(), ConfigError> {
    let (RepoSource::Local(path), None) = (source, &args.options.base) else {
        return Ok(());
    };
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
    Ok(())
}

/// `--keep-clone` copies each cycle's clone into a directory: one that already holds files
/// would mix them with the clone's, or lose them.
fn check_keep_clone(args: &RunArgs) -> Result<(), ConfigError> {
    let Some(dir) = &args.keep_clone else {
        return Ok(());
    };
    let occupied = dir.exists() && std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_some());
    if occupied {
        return Err(ConfigError::key(
            "--keep-clone",
            format!("{} exists and is not an empty directory", dir.display()),
        ));
    }
    Ok(())
}

/// The model provider: which API, which model, where, and with which key. A hosted API without
/// its key stops a run here, before any work; the context window is filled in by
/// [`context_window`] once the operator's file is read.
fn provider_settings(args: &RunArgs, purpose: Purpose) -> Result<ProviderSettings, ConfigError> {
    let kind = provider_kind(args)?;
    let api_key = api_key(args, kind, purpose)?;
    if let Some(url) = &args.options.base_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::key("--base-url", format!("{url:?} is not an http(s) URL")));
        }
        if kind == ProviderKind::Openai
            && args
                .options
                .model
                .as_deref()
                .is_none_or(|model| model.trim().is_empty())
        {
            // A compatible server is rarely OpenAI's own: sending OpenAI's default name, and
            // fitting requests into that model's million-token window, fails on a small server.
            tracing::warn!(
                "--base-url without --model: upkeep sends the model name {} and assumes a {}-token context window; name the server's model with --model (and its window with --context-window)",
                kind.default_model(),
                crate::llm::window::UNKNOWN_MODEL_WINDOW
            );
        }
    }
    Ok(ProviderSettings {
        kind,
        model: args.options.model.clone(),
        base_url: args.options.base_url.clone(),
        api_key,
        replay: args.options.replay.clone(),
        request_timeout: Duration::from_secs(args.options.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT_SECS)),
        context_window: None,
        structured_output: args.options.structured_output.unwrap_or_default(),
        max_reply_tokens: args.options.max_reply_tokens,
        temperature: args.options.temperature,
    })
}

/// `--provider`, where `--replay FILE` implies (and may only be combined with) `replay`, and
/// the replay file must exist.
fn provider_kind(args: &RunArgs) -> Result<ProviderKind, ConfigError> {
    let kind = match (args.options.provider, &args.options.replay) {
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
        match &args.options.replay {
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
    Ok(kind)
}

/// The provider's API key, from its environment variable. A run against a hosted API needs
/// one; a custom endpoint (a local OpenAI-compatible server) usually does not, and printing
/// the prompt never does.
fn api_key(args: &RunArgs, kind: ProviderKind, purpose: Purpose) -> Result<Option<SecretString>, ConfigError> {
    let api_key = match kind {
        ProviderKind::Openai => env_secret(&["OPENAI_API_KEY"]),
        ProviderKind::Anthropic => env_secret(&["ANTHROPIC_API_KEY"]),
        ProviderKind::Gemini => env_secret(&["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
        ProviderKind::Ollama | ProviderKind::Replay => None,
    };
    let key_required = matches!(kind, ProviderKind::Anthropic | ProviderKind::Gemini)
        || (kind == ProviderKind::Openai && args.options.base_url.is_none());
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
    Ok(api_key)
}

/// Where pull requests and questions go: `--forge`, or what `--repo` implies. GitHub needs a
/// GitHub repository, and a run that publishes there needs a write token now rather than at
/// its first push.
fn forge(
    args: &RunArgs,
    source: &RepoSource,
    github: &GitHubSettings,
    purpose: Purpose,
) -> Result<ForgeKind, ConfigError> {
    let forge = match (args.options.forge, source) {
        (Some(ForgeKind::Local), RepoSource::Local(_)) | (Some(ForgeKind::None), _) => {
            args.options.forge.unwrap_or(ForgeKind::None)
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
    if forge == ForgeKind::Github && github.token.is_none() && !args.options.dry_run && purpose == Purpose::Run {
        return Err(ConfigError(
            "GITHUB_TOKEN (or GH_TOKEN) is not set; --forge github needs it to push and open pull requests (or use --dry-run)".into(),
        ));
    }
    Ok(forge)
}

/// `--max-tokens`, `--max-cost` and `--timeout`: what the whole run may spend. A cost that is
/// not a positive number would stop the run at once or never.
fn budgets(args: &RunArgs) -> Result<Budgets, ConfigError> {
    if let Some(cost) = args.options.max_cost {
        if !(cost.is_finite() && cost > 0.0) {
            return Err(ConfigError::key(
                "--max-cost",
                "must be a positive number of US dollars",
            ));
        }
    }
    Ok(Budgets {
        max_tokens: args.options.max_tokens,
        max_cost: args.options.max_cost,
        timeout: args.options.timeout.map(Into::into),
    })
}

/// The operator's `--config` (or nothing). Each declared tool remembers the file it came from,
/// so errors and the run's events can say which program an exposed tool runs.
fn operator_file(args: &RunArgs) -> Result<FileConfig, ConfigError> {
    let Some(path) = &args.options.config else {
        return Ok(FileConfig::default());
    };
    let mut file = FileConfig::load(path)?;
    for tool in &mut file.tools {
        tool.declared_in = format!("--config {}", path.display());
    }
    Ok(file)
}

/// How commands run: their timeout, the environment they may see, the sandbox they must have
/// and the resource limits the operator set (checked here, so a bad limit is exit 2 before any
/// command runs).
fn command_settings(args: &RunArgs, operator: &FileConfig) -> Result<CommandSettings, ConfigError> {
    let limits = operator
        .limits
        .unwrap_or_default()
        .resolve()
        .map_err(|error| ConfigError(format!("--config: {error}")))?;
    Ok(CommandSettings {
        timeout: Duration::from_secs(args.options.shell_timeout.unwrap_or(DEFAULT_SHELL_TIMEOUT_SECS)),
        pass_env: args.options.pass_env.clone(),
        output_cap: DEFAULT_OUTPUT_CAP,
        require_sandbox: args.options.require_sandbox,
        allow_network: args.options.allow_network,
        limits,
        sandbox: None,
    })
}

/// `--allow-tool NAME`: an empty name would allow nothing and is surely a mistake.
fn allowed_tools(args: &RunArgs) -> Result<Vec<String>, ConfigError> {
    if args.options.allow_tool.iter().any(|name| name.trim().is_empty()) {
        return Err(ConfigError::key("--allow-tool", "empty tool name"));
    }
    Ok(args.options.allow_tool.clone())
}

/// `--answer`: the answer to a question upkeep asked about a local repository. On GitHub the
/// answer is a maintainer's comment, so the flag would be silently ignored there.
fn answer(args: &RunArgs, forge: ForgeKind) -> Result<Option<String>, ConfigError> {
    match &args.answer {
        Some(answer) if answer.trim().is_empty() => Err(ConfigError::key("--answer", "is empty")),
        Some(_) if forge != ForgeKind::Local => Err(ConfigError::key(
            "--answer",
            "answers a question upkeep asked about a local repository; on GitHub, answer in a comment on the issue (a maintainer's comment is the answer)",
        )),
        other => Ok(other.clone()),
    }
}

/// `--pr` works the review feedback of a GitHub pull request, which no other forge has.
fn check_pull_request(args: &RunArgs, forge: ForgeKind) -> Result<(), ConfigError> {
    if args.pull_request.is_some() && forge != ForgeKind::Github {
        return Err(ConfigError::key(
            "--pr",
            "works review feedback on a GitHub pull request; --repo must be a GitHub repository (--forge github)",
        ));
    }
    Ok(())
}

/// What a pull request comment must say to start work: the flag, the operator's file, or
/// `@upkeep`. An empty phrase would make every comment a request.
fn trigger_phrase(args: &RunArgs, operator: &FileConfig) -> Result<String, ConfigError> {
    if args
        .options
        .trigger_phrase
        .as_deref()
        .is_some_and(|phrase| phrase.trim().is_empty())
    {
        return Err(ConfigError::key("--trigger-phrase", "is empty"));
    }
    Ok(args
        .options
        .trigger_phrase
        .clone()
        .or_else(|| operator.trigger_phrase.clone())
        .unwrap_or_else(|| DEFAULT_TRIGGER_PHRASE.to_owned()))
}

/// The model a run asks: `--model`, else the provider's default; what `[models."name"]` is keyed by.
fn model_name(args: &RunArgs, kind: ProviderKind) -> &str {
    args.options
        .model
        .as_deref()
        .map(str::trim)
        .filter(|model| !model.is_empty())
        .unwrap_or_else(|| kind.default_model())
}

/// The model's context window: `--context-window` (flag or environment) beats the operator's
/// `[models."name"]`; `None` leaves it to the server, the built-in table or the guess
/// (`llm::window::window_for`).
fn context_window(args: &RunArgs, operator: &FileConfig, kind: ProviderKind) -> Option<u64> {
    let model_name = model_name(args, kind);
    args.options
        .context_window
        .or_else(|| operator.models.get(model_name).and_then(|model| model.context_window))
}

/// `--structured-output`, else the operator's `[models."name"] structured_output`, else auto.
fn structured_output(args: &RunArgs, operator: &FileConfig, kind: ProviderKind) -> StructuredOutputMode {
    let model_name = model_name(args, kind);
    args.options
        .structured_output
        .or_else(|| {
            operator
                .models
                .get(model_name)
                .and_then(|model| model.structured_output)
        })
        .unwrap_or_default()
}

/// Who upkeep's commits are by: `--author-name`/`--author-email`, or the bot's defaults.
fn identity(args: &RunArgs) -> Identity {
    let defaults = Identity::default();
    Identity {
        name: args.author_name.clone().unwrap_or(defaults.name),
        email: args.author_email.clone().unwrap_or(defaults.email),
    }
}

/// The settings a flag may give that a config file may also set, as the top layer of
/// [`super::RunSettings::repo_settings`].
fn overrides(args: &RunArgs) -> FileConfig {
    FileConfig {
        base: args.options.base.clone(),
        label: args.options.label.clone(),
        max_turns: args.options.max_turns,
        ..FileConfig::default()
    }
}
