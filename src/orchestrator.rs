//! Cycles, modes and budgets: the whole run.
//!
//! A cycle is a fresh copy of the base branch plus turns until `finish`, `ask_question` or a
//! budget. Single mode runs one cycle; continuous mode starts the next cycle on a fresh copy
//! after `finish{completed}` (the same clone, refreshed in place to exactly what the remote
//! has: see [`Workspace::refresh_blocking`]) and stops on `no_tasks` (exit 0), a question (3),
//! a budget (4) or after `--max-cycles` (0). The orchestrator owns the workspace, the agent and
//! the forge, and maps every way a run can end to one [`ExitStatus`], with a `run_finished`
//! event.

use tokio_util::sync::CancellationToken;

use crate::agent::budget::{Budget, Limit};
use crate::agent::prompt::{CyclePrompt, DEFAULT_TREE_BUDGET, FileTree, SystemPrompt, TaskSource};
use crate::agent::{Agent, CycleError, CycleOutcome};
use crate::cli::ForgeKind;
use crate::config::{Config, ConfigError, FileConfig, Mode, REPO_CONFIG_FILE, RepoSettings, RepoSource};
use crate::events::{Event, EventSink, Scope, Verbosity};
use crate::exit::ExitStatus;
use crate::forge::{Forge, dry_run::DryRun, github::GitHubForge, local::LocalForge, none::NoForge};
use crate::llm::{self, Provider, pricing};
use crate::secrets::Redactor;
use crate::tools::declared::DeclaredTool;
use crate::tools::path::PathPolicy;
use crate::tools::registry::ExtraTool;
use crate::tools::{FinishStatus, ToolContext, ToolRegistry, ToolSelection, sandbox, spec::reply_schema};
use crate::workspace::{CloneRequest, GitAuth, Workspace, WorkspaceError};

/// Everything that can end a run early, by exit code.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error("{0}")]
    Usage(#[from] ConfigError),
    #[error("interrupted")]
    Interrupted,
    #[error("{0:#}")]
    Failure(anyhow::Error),
}

impl From<CycleError> for RunError {
    fn from(error: CycleError) -> Self {
        match error {
            CycleError::Interrupted => RunError::Interrupted,
            other => RunError::Failure(anyhow::Error::new(other)),
        }
    }
}

impl From<WorkspaceError> for RunError {
    fn from(error: WorkspaceError) -> Self {
        match error {
            WorkspaceError::Interrupted => RunError::Interrupted,
            other => RunError::Failure(anyhow::Error::new(other)),
        }
    }
}

/// How a run ended, for `run_finished` and the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunEnd {
    NoTasks,
    Completed,
    PullRequest,
    MaxCycles,
    Question,
    Limit,
}

impl RunEnd {
    fn as_str(self) -> &'static str {
        match self {
            RunEnd::NoTasks => "no_tasks",
            RunEnd::Completed => "completed",
            RunEnd::PullRequest => "pull_request",
            RunEnd::MaxCycles => "max_cycles",
            RunEnd::Question => "question",
            RunEnd::Limit => "limit",
        }
    }

    fn exit(self) -> ExitStatus {
        match self {
            RunEnd::NoTasks | RunEnd::Completed | RunEnd::PullRequest | RunEnd::MaxCycles => ExitStatus::Done,
            RunEnd::Question => ExitStatus::Question,
            RunEnd::Limit => ExitStatus::Budget,
        }
    }
}

/// The secrets this run knows: every credential variable in the environment.
pub fn redactor_for(config: &Config) -> Redactor {
    let mut redactor = Redactor::from_env();
    if let Some(key) = &config.provider.api_key {
        redactor.add(key.clone());
    }
    if let Some(token) = &config.github.token {
        redactor.add(token.clone());
    }
    redactor
}

/// Opens the event sink a run writes to.
pub fn event_sink(config: &Config) -> Result<EventSink, ConfigError> {
    let trace = match &config.trace {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|error| ConfigError::key("--trace", format!("{}: {error}", path.display())))?,
        ),
        None => None,
    };
    let verbosity = if config.quiet {
        Verbosity::Quiet
    } else {
        Verbosity::Normal
    };
    Ok(EventSink::new(redactor_for(config), config.json, trace, verbosity))
}

fn build_forge(config: &Config) -> Result<Box<dyn Forge>, ConfigError> {
    let forge: Box<dyn Forge> = match (config.forge, &config.source) {
        (ForgeKind::Local, RepoSource::Local(path)) => Box::new(LocalForge::new(path.clone())),
        (ForgeKind::None, _) => Box::new(NoForge),
        (ForgeKind::Github, RepoSource::GitHub { owner, name, .. }) => Box::new(
            GitHubForge::new(&config.github, owner, name, config.draft)
                .map_err(|error| ConfigError(error.to_string()))?,
        ),
        (kind, _) => return Err(ConfigError::key("--forge", format!("{kind:?} does not fit --repo"))),
    };
    Ok(if config.dry_run {
        Box::new(DryRun::new(forge))
    } else {
        forge
    })
}

/// What a run did, for the exit code, the final summary and CI integrations.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub status: ExitStatus,
    /// `run_finished.outcome`: `pull_request`, `completed`, `no_tasks`, `max_cycles`,
    /// `question`, `limit`, `interrupted`, `error` or `usage_error`.
    pub outcome: String,
    pub cycles: u32,
    /// Model calls over the whole run.
    pub turns: u32,
    pub usage: crate::llm::Usage,
    pub cost_usd: f64,
    pub pull_requests: Vec<crate::forge::PullRequest>,
    pub question: Option<String>,
    /// The error that ended the run, when one did.
    pub error: Option<String>,
}

impl RunSummary {
    /// A run that a configuration error stopped before any work.
    pub fn usage_error(error: &ConfigError) -> Self {
        RunSummary {
            status: ExitStatus::Usage,
            outcome: "usage_error".into(),
            cycles: 0,
            turns: 0,
            usage: crate::llm::Usage::default(),
            cost_usd: 0.0,
            pull_requests: Vec::new(),
            question: None,
            error: Some(error.to_string()),
        }
    }
}

/// Runs upkeep as configured. Never panics on bad input; every path out emits `run_finished`
/// (except a trace file that cannot be opened, which is reported before the run starts).
pub async fn run(config: Config, cancel: CancellationToken) -> RunSummary {
    let events = match event_sink(&config) {
        Ok(events) => events,
        Err(error) => {
            eprintln!("upkeep: {error}");
            return RunSummary::usage_error(&error);
        }
    };
    let mut runner = Runner {
        config: &config,
        events: &events,
        cancel: &cancel,
        cycles: 0,
        budget: None,
        pull_requests: Vec::new(),
        question: None,
        kept: None,
    };
    let result = runner.run().await;
    let (status, outcome, error) = match &result {
        Ok(end) => (end.exit(), end.as_str(), None),
        Err(RunError::Usage(error)) => {
            events.say(&format!("upkeep: configuration error: {error}"));
            (ExitStatus::Usage, "usage_error", Some(error.to_string()))
        }
        Err(RunError::Interrupted) => {
            events
                .say("upkeep: interrupted; the temporary clone was removed and nothing was pushed after the interrupt");
            (ExitStatus::Interrupted, "interrupted", Some("interrupted".to_owned()))
        }
        Err(RunError::Failure(error)) => {
            events.say(&format!("upkeep: error: {error:#}"));
            (
                ExitStatus::Failure,
                "error",
                Some(events.redactor().redact(&format!("{error:#}"))),
            )
        }
    };
    let (usage, cost_usd, turns) = runner
        .budget
        .as_ref()
        .map(|b| (b.usage, b.cost_usd, b.turns))
        .unwrap_or_default();
    events.emit(
        Scope::default(),
        Event::RunFinished {
            outcome: outcome.into(),
            exit_code: status.code(),
            cycles: runner.cycles,
            usage,
            cost_usd,
        },
    );
    RunSummary {
        status,
        outcome: outcome.into(),
        cycles: runner.cycles,
        turns,
        usage,
        cost_usd,
        pull_requests: runner.pull_requests,
        question: runner.question,
        error,
    }
}

/// The declared command tools, each marked allowed or not. Declarations are checked here, before
/// the first model call; `--allow-tool` naming no declared tool is a usage error too.
fn declared_tools(config: &Config, settings: &RepoSettings) -> Result<Vec<ExtraTool>, RunError> {
    let mut tools: Vec<ExtraTool> = Vec::new();
    for declaration in &settings.declared_tools {
        let tool = DeclaredTool::new(declaration, "config")?;
        let allowed = config.allow_tools.iter().any(|name| name == tool.name());
        tools.push((Box::new(tool), allowed));
    }
    for name in &config.allow_tools {
        if !settings.declared_tools.iter().any(|declared| &declared.name == name) {
            return Err(RunError::Usage(ConfigError::key(
                "--allow-tool",
                format!("no declared tool is named `{name}` (declare it under [[tools]] in --config or .upkeep.toml)"),
            )));
        }
    }
    Ok(tools)
}

struct Runner<'a> {
    config: &'a Config,
    events: &'a EventSink,
    cancel: &'a CancellationToken,
    cycles: u32,
    budget: Option<Budget>,
    pull_requests: Vec<crate::forge::PullRequest>,
    question: Option<String>,
    /// Continuous mode: the clone the last cycle ended in, refreshed in place for the next one
    /// instead of cloning again. Only held between cycles; dropping it removes the directory.
    kept: Option<Workspace>,
}

impl Runner<'_> {
    async fn run(&mut self) -> Result<RunEnd, RunError> {
        let config = self.config;
        let provider = llm::build(&config.provider)?;
        crate::llm::tokens::preload(provider.name(), provider.model());
        let forge = build_forge(config)?;
        let commands_enabled = config.dangerous_tools || !config.allow_tools.is_empty();
        let sandbox_kind = sandbox::probe();
        if commands_enabled && sandbox_kind == sandbox::SandboxKind::None {
            if config.commands.require_sandbox {
                return Err(ConfigError(
                    "--require-sandbox: the Landlock sandbox is not available on this system (Linux 5.13+ with Landlock enabled is needed)"
                        .into(),
                )
                .into());
            }
            tracing::warn!("Landlock is not available: commands the model runs are not confined to the clone");
        }
        self.budget = Some(Budget::new(config.budgets, None));
        self.events.emit(
            Scope::default(),
            Event::RunStarted {
                repo: config.source.display_name(),
                mode: config.mode.as_str().into(),
                provider: provider.name().into(),
                model: provider.model().into(),
                dangerous_tools: config.dangerous_tools,
                sandbox: serde_json::to_value(sandbox_kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
            },
        );
        loop {
            self.cycles += 1;
            let cycle = self.cycles;
            let end = self.cycle(cycle, provider.as_ref(), forge.as_ref()).await;
            let outcome = match &end {
                Ok(end) => end.as_str(),
                Err(RunError::Usage(_)) => "error",
                Err(_) => "error",
            };
            self.events.emit(
                Scope {
                    cycle: Some(cycle),
                    turn: None,
                },
                Event::CycleFinished {
                    outcome: outcome.into(),
                },
            );
            let end = end?;
            match (config.mode, end) {
                (Mode::Continuous, RunEnd::PullRequest | RunEnd::Completed) if cycle < config.max_cycles => continue,
                (Mode::Continuous, RunEnd::PullRequest | RunEnd::Completed) => {
                    self.events
                        .say(&format!("upkeep: --max-cycles {} reached", config.max_cycles));
                    return Ok(RunEnd::MaxCycles);
                }
                (_, end) => return Ok(end),
            }
        }
    }

    async fn clone(&self, base: Option<String>) -> Result<Workspace, RunError> {
        let config = self.config;
        let request = CloneRequest {
            url: config.source.clone_url(),
            is_local: matches!(config.source, RepoSource::Local(_)),
            base,
            depth: config.depth,
            auth: GitAuth {
                token: config.github.token.clone(),
            },
        };
        let cancel = self.cancel.clone();
        tokio::select! {
            () = self.cancel.cancelled() => Err(RunError::Interrupted),
            result = Workspace::clone_repo(request, cancel) => Ok(result?),
        }
    }

    /// Refreshes a kept clone in place (on a blocking thread, like a clone).
    async fn refresh(&self, workspace: Workspace) -> Result<Workspace, RunError> {
        let auth = GitAuth {
            token: self.config.github.token.clone(),
        };
        let cancel = self.cancel.clone();
        tokio::select! {
            () = self.cancel.cancelled() => Err(RunError::Interrupted),
            result = workspace.refresh(auth, cancel) => Ok(result?),
        }
    }

    /// Clones (from cycle 2 of continuous mode: refreshes the kept clone), reads `.upkeep.toml`,
    /// and re-clones when the file names another base branch. The flag says whether the next
    /// cycle may refresh this clone: not when its base came from the default branch's
    /// `.upkeep.toml`, which a refresh of the base alone would not see change.
    async fn prepare(&mut self, cycle: u32) -> Result<(Workspace, RepoSettings, bool), RunError> {
        let config = self.config;
        let explicit_base = config.overrides.base.clone().or_else(|| config.operator.base.clone());
        if let Some(kept) = self.kept.take() {
            match self.refresh(kept).await {
                Ok(workspace) => {
                    let settings = self.repo_settings(&workspace, cycle)?;
                    let same_base = settings
                        .base
                        .as_deref()
                        .is_none_or(|base| base == workspace.base_branch());
                    if explicit_base.is_some() || same_base {
                        return Ok((workspace, settings, true));
                    }
                    // `.upkeep.toml` now names another base: start over as cycle 1 does.
                }
                Err(RunError::Interrupted) => return Err(RunError::Interrupted),
                // A refresh that fails leaves the clone in an unknown state (it is removed); a
                // fresh clone either works or reports the real problem (network, auth, base).
                Err(error) => tracing::warn!("could not refresh the clone in place ({error}); cloning afresh"),
            }
        }
        let workspace = self.clone(explicit_base.clone()).await?;
        let settings = self.repo_settings(&workspace, cycle)?;
        match &settings.base {
            Some(base) if explicit_base.is_none() && base != workspace.base_branch() => {
                drop(workspace);
                let workspace = self.clone(Some(base.clone())).await?;
                let settings = self.repo_settings(&workspace, cycle)?;
                Ok((workspace, settings, false))
            }
            _ => Ok((workspace, settings, true)),
        }
    }

    fn repo_settings(&self, workspace: &Workspace, cycle: u32) -> Result<RepoSettings, RunError> {
        let path = workspace.root().join(REPO_CONFIG_FILE);
        let file = match std::fs::read_to_string(&path) {
            Ok(text) => match FileConfig::parse(&text, REPO_CONFIG_FILE) {
                Ok(file) => file,
                // Found before the first model call of the run: a usage error (exit 2). In a
                // later cycle the file changed under us (someone merged a broken one): a failure.
                Err(error) if cycle == 1 => return Err(RunError::Usage(error)),
                Err(error) => return Err(RunError::Failure(error.into())),
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => FileConfig::default(),
            Err(error) => {
                return Err(RunError::Failure(anyhow::anyhow!(
                    "reading {REPO_CONFIG_FILE}: {error}"
                )));
            }
        };
        // The model's window is the operator's to set: a repository cannot make upkeep send
        // requests its model refuses (or, with Ollama, make it reserve a huge context).
        if !file.models.is_empty() {
            let error = ConfigError(format!(
                "{REPO_CONFIG_FILE}: `[models]` is operator-only; set it in the file given to --config"
            ));
            return Err(if cycle == 1 {
                RunError::Usage(error)
            } else {
                RunError::Failure(error.into())
            });
        }
        Ok(self.config.repo_settings(&file))
    }

    async fn cycle(&mut self, cycle: u32, provider: &dyn Provider, forge: &dyn Forge) -> Result<RunEnd, RunError> {
        let config = self.config;
        let (workspace, settings, reusable) = self.prepare(cycle).await?;
        let base = workspace.base_branch().to_owned();
        self.events.emit(
            Scope {
                cycle: Some(cycle),
                turn: None,
            },
            Event::CycleStarted { base: base.clone() },
        );

        let paths = PathPolicy::new(workspace.root(), &settings.protected_paths)
            .map_err(|error| ConfigError::key("protected_paths", error))?;
        let registry = ToolRegistry::new(
            &ToolSelection {
                dangerous: config.dangerous_tools,
            },
            declared_tools(config, &settings)?,
        );
        let specs = registry.specs();
        let schema = reply_schema(&specs);
        let system = SystemPrompt {
            tools: &specs,
            protected_paths: &settings.protected_paths,
            max_turns: settings.max_turns,
            instructions: settings.instructions.as_deref(),
        }
        .render();

        let open_pull_requests = forge
            .open_pull_requests(&base)
            .await
            .map_err(|e| RunError::Failure(e.into()))?;
        let issues = if config.task.is_none() {
            forge
                .task_issues(&settings.label)
                .await
                .map_err(|e| RunError::Failure(e.into()))?
        } else {
            Vec::new()
        };
        // Issues that already have an open bot pull request are not offered again.
        let issues: Vec<_> = issues
            .into_iter()
            .filter(|issue| {
                let prefix = format!("{}{}-", crate::workspace::BOT_BRANCH_PREFIX, issue.number);
                !open_pull_requests.iter().any(|pr| pr.branch.starts_with(&prefix))
            })
            .collect();
        let tasks_file = std::fs::read_to_string(workspace.root().join(&settings.tasks_file)).ok();
        let default_issue = config.issue.or_else(|| match issues.as_slice() {
            [only] if config.task.is_none() => Some(only.number),
            _ => None,
        });
        let tree = FileTree::scan(workspace.root(), DEFAULT_TREE_BUDGET);
        let task = match &config.task {
            Some(task) => TaskSource::Given(task),
            None => TaskSource::Backlog {
                tasks_file: tasks_file
                    .as_deref()
                    .map(|content| (settings.tasks_file.as_str(), content)),
                issues: &issues,
            },
        };
        let first_message = CyclePrompt {
            repo: &config.source.display_name(),
            base: &base,
            task,
            open_pull_requests: &open_pull_requests,
            file_tree: &tree,
        }
        .render();

        let budget = self.budget.get_or_insert_with(|| Budget::new(config.budgets, None));
        let price = pricing::price_for(provider.model(), &settings.prices);
        if price.is_none() && config.budgets.max_cost.is_some() && provider.name() != "replay" {
            tracing::warn!(
                "no price known for model {}; --max-cost counts it as free (add [prices] to --config)",
                provider.model()
            );
        }
        budget.set_price(price);

        let ctx = ToolContext {
            workspace: &workspace,
            paths: &paths,
            forge,
            commands: &config.commands,
            redactor: self.events.redactor(),
            cancel: self.cancel,
            identity: &config.identity,
            default_issue,
            cycle_branch: None,
            open_pull_requests: &open_pull_requests,
        };
        let agent = Agent {
            provider,
            registry: &registry,
            events: self.events,
            cancel: self.cancel,
            max_turns: settings.max_turns,
            cycle,
            context_window: config.provider.window_for(provider.model()),
            masking: !config.full_history,
        };
        let opened_before = self.pull_requests.len();
        let outcome = agent
            .run_cycle(&system, first_message, &schema, &ctx, budget, &mut self.pull_requests)
            .await?;
        let opened_pull_request = self.pull_requests.len() > opened_before;
        // Only a cycle that continuous mode follows with another keeps its clone; every other end
        // (and every error above) drops it here, which removes the temporary directory.
        let continues = matches!(
            outcome,
            CycleOutcome::Finished {
                status: FinishStatus::Completed,
                ..
            }
        );
        if reusable && continues && config.mode == Mode::Continuous && cycle < config.max_cycles {
            self.kept = Some(workspace);
        }
        Ok(match outcome {
            CycleOutcome::Finished {
                status: FinishStatus::NoTasks,
                summary,
            } => {
                self.events.say(&format!("nothing to do: {summary}"));
                RunEnd::NoTasks
            }
            CycleOutcome::Finished {
                status: FinishStatus::Completed,
                summary,
            } => {
                if !summary.is_empty() {
                    self.events.say(&format!("done: {summary}"));
                }
                if opened_pull_request {
                    RunEnd::PullRequest
                } else {
                    RunEnd::Completed
                }
            }
            CycleOutcome::Question { question, issue } => {
                self.question = Some(question.clone());
                match forge.post_question(issue, &question).await {
                    Ok(Some(place)) => self.events.say(&format!("question posted: {place}")),
                    Ok(None) => {}
                    Err(error) => self
                        .events
                        .say(&format!("upkeep: could not post the question: {error}")),
                }
                self.events.emit(
                    Scope {
                        cycle: Some(cycle),
                        turn: None,
                    },
                    Event::Question { question, issue },
                );
                RunEnd::Question
            }
            CycleOutcome::Limit(limit) => {
                self.events.say(&format!("upkeep: stopped: {limit}"));
                if let Limit::Turns(_) = limit {
                    self.events
                        .say("raise --max-turns (or max_turns in .upkeep.toml) to give the model more turns");
                }
                RunEnd::Limit
            }
        })
    }
}
