//! Cycles, modes and budgets: the whole run.
//!
//! A cycle is a fresh copy of the base branch plus turns until `finish`, `ask_question` or a
//! budget. Single mode runs one cycle; continuous mode starts the next cycle on a fresh copy
//! after `finish{completed}` (the same clone, refreshed in place to exactly what the remote
//! has: see [`Workspace::refresh`]) and stops on `no_tasks` (exit 0), a question (3),
//! a budget (4) or after `--max-cycles` (0). The orchestrator owns the workspace, the agent and
//! the forge, and maps every way a run can end to one [`ExitStatus`], with a `run_finished`
//! event.
//!
//! Git work (clone, refresh, and the commit and push inside `create_pull_request`) stops on an
//! interrupt (exit 130) and at the `--timeout` deadline, which is a budget like the others
//! (exit 4). Every temporary directory of the run is removed before the run reports, and an
//! interrupted run says the clone was removed only once it is.

use tokio_util::sync::CancellationToken;

use crate::agent::budget::{Budget, Limit};
use crate::agent::{Agent, CycleError, CycleOutcome};
use crate::briefing::{Briefing, BriefingError, brief};
use crate::config::{Config, ConfigError, FileConfig, Mode, REPO_CONFIG_FILE, RepoSettings, RepoSource};
use crate::conversation::local::LocalResume;
use crate::conversation::{ConversationError, CycleWork};
use crate::events::{Event, EventSink, Scope, Verbosity};
use crate::exit::ExitStatus;
use crate::fleet::dashboard::DashboardPlan;
use crate::fleet::limits::{Held, HeldBy, Limits};
use crate::forge::{Forge, dry_run::DryRun, github::GitHubForge, local::LocalForge, none::NoForge};
use crate::kinds::ForgeKind;
use crate::llm::{self, Provider, pricing};
use crate::repo::cleanup;
use crate::repo::questions::LocalQuestion;
use crate::repo::{CloneRequest, GitAuth, Stop, WorkTree, Workspace, WorkspaceError};
use crate::secrets::Redactor;
use crate::tools::{CommandSettings, FinishStatus, ToolContext};

/// How long the end of a run waits for git work that is winding down to remove its clone before
/// removing the directory itself.
const CLEANUP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Largest `.upkeep.toml` read.
const MAX_REPO_CONFIG_BYTES: u64 = 256 * 1024;

/// Everything that can end a run early, by exit code.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error("{0}")]
    Usage(#[from] ConfigError),
    #[error("interrupted")]
    Interrupted,
    /// `--timeout` passed during git work (a budget: exit 4).
    #[error("--timeout reached during git work")]
    Deadline,
    #[error("{0:#}")]
    Failure(anyhow::Error),
}

impl From<CycleError> for RunError {
    fn from(error: CycleError) -> Self {
        match error {
            CycleError::Interrupted => RunError::Interrupted,
            // A tool's git work (the commit and push of `create_pull_request`) cut short.
            CycleError::Fatal(error) => match stopped_git_work(&error) {
                Some(WorkspaceError::Interrupted) => RunError::Interrupted,
                Some(_) => RunError::Deadline,
                None => RunError::Failure(anyhow::Error::new(CycleError::Fatal(error))),
            },
            other => RunError::Failure(anyhow::Error::new(other)),
        }
    }
}

/// The interrupt or deadline that stopped git work somewhere in `error`'s causes, if one did.
fn stopped_git_work(error: &anyhow::Error) -> Option<&WorkspaceError> {
    error.chain().find_map(|cause| {
        let git =
            cause
                .downcast_ref::<WorkspaceError>()
                .or_else(|| match cause.downcast_ref::<crate::forge::ForgeError>() {
                    Some(crate::forge::ForgeError::Workspace(git)) => Some(git),
                    _ => None,
                });
        git.filter(|git| matches!(git, WorkspaceError::Interrupted | WorkspaceError::TimedOut))
    })
}

impl From<WorkspaceError> for RunError {
    fn from(error: WorkspaceError) -> Self {
        match error {
            WorkspaceError::Interrupted => RunError::Interrupted,
            WorkspaceError::TimedOut => RunError::Deadline,
            // What the operator asked for cannot be worked: said before any model call.
            error @ (WorkspaceError::MissingBase { .. } | WorkspaceError::EmptyRepository(_)) => {
                RunError::Usage(ConfigError(error.to_string()))
            }
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
    /// A fleet limit or the schedule held the cycle back before any model call (exit 0).
    Held(HeldBy),
}

impl RunEnd {
    fn as_str(self) -> &'static str {
        match self {
            RunEnd::Held(by) => by.as_str(),
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
            RunEnd::NoTasks | RunEnd::Completed | RunEnd::PullRequest | RunEnd::MaxCycles | RunEnd::Held(_) => {
                ExitStatus::Done
            }
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

/// Opens `--trace FILE` for appending (runs of a fleet share it).
pub fn open_trace(path: &std::path::Path) -> Result<std::fs::File, ConfigError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| ConfigError::key("--trace", format!("{}: {error}", path.display())))
}

/// Opens the event sink a run writes to.
pub fn event_sink(config: &Config) -> Result<EventSink, ConfigError> {
    let trace = config.trace.as_deref().map(open_trace).transpose()?;
    let verbosity = if config.quiet {
        Verbosity::Quiet
    } else {
        Verbosity::Normal
    };
    let events = EventSink::new(redactor_for(config), config.json, trace, verbosity);
    Ok(match &config.fleet_member {
        Some(repo) => events.for_repo(repo.clone()),
        None => events,
    })
}

fn build_forge(config: &Config) -> Result<Box<dyn Forge>, ConfigError> {
    let forge: Box<dyn Forge> = match (config.forge, &config.source) {
        (ForgeKind::Local, RepoSource::Local(path)) => Box::new(
            LocalForge::new(path.clone())
                .with_task(config.task.clone())
                .with_bot_email(&config.identity.email),
        ),
        (ForgeKind::None, _) => Box::new(NoForge),
        (ForgeKind::Github, RepoSource::GitHub { owner, name, .. }) => Box::new(
            GitHubForge::new(&config.github, owner, name, config.draft)
                .map_err(|error| ConfigError(error.to_string()))?
                .with_bot_email(&config.identity.email),
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
    /// Changes cycles left in their clones that no pull request carries (reported, not saved).
    pub unsaved_changes: Vec<crate::repo::UnsavedChanges>,
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
            unsaved_changes: Vec::new(),
        }
    }

    /// The `run_finished` event that says how this run ended.
    pub fn finished_event(&self) -> Event {
        Event::RunFinished {
            outcome: self.outcome.clone(),
            exit_code: self.status.code(),
            cycles: self.cycles,
            usage: self.usage,
            cost_usd: self.cost_usd,
            error: self.error.clone(),
        }
    }
}

/// Runs upkeep as configured. Never panics on bad input; every path out emits `run_finished`
/// (except a trace file that cannot be opened, which is reported before the run starts).
pub async fn run(config: Config, cancel: CancellationToken) -> RunSummary {
    // A local repository's questions may give the run its task (`--answer`): read before the
    // settings are borrowed for the run.
    let mut config = config;
    let local = crate::conversation::local::resume(&mut config).await;
    let config = config;
    let events = match event_sink(&config) {
        Ok(events) => events,
        Err(error) => {
            eprintln!("upkeep: {}", crate::text::escape_terminal(&error.to_string()));
            let summary = RunSummary::usage_error(&error);
            // The trace cannot be opened; `--json` still hears how the run ended.
            EventSink::new(redactor_for(&config), config.json, None, Verbosity::Quiet).emit(
                Scope::default(),
                Event::RunFinished {
                    outcome: summary.outcome.clone(),
                    exit_code: summary.status.code(),
                    cycles: 0,
                    usage: summary.usage,
                    cost_usd: 0.0,
                    error: summary.error.clone(),
                },
            );
            return summary;
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
        scope: cleanup::Scope::new(),
        unsaved: Vec::new(),
        commands: config.commands.clone(),
        conversation: ConversationState {
            local: Some(local),
            ..ConversationState::default()
        },
        unresolved_findings: Vec::new(),
        dashboard: None,
    };
    let result = runner.run().await;
    runner.kept = None;
    let scope = runner.scope.clone();
    let left = tokio::task::spawn_blocking(move || scope.settle(CLEANUP_GRACE))
        .await
        .unwrap_or_default();
    for (path, error) in &left {
        events.alert(&format!(
            "upkeep: could not remove the temporary directory {}: {error}",
            path.display()
        ));
    }
    let (status, outcome, error) = match &result {
        Ok(end) => (end.exit(), end.as_str(), None),
        Err(RunError::Usage(error)) => {
            events.alert(&format!("upkeep: configuration error: {error}"));
            (ExitStatus::Usage, "usage_error", Some(error.to_string()))
        }
        Err(RunError::Interrupted) => {
            events.alert(if left.is_empty() {
                "upkeep: interrupted; the temporary clone was removed and nothing was pushed after the interrupt"
            } else {
                "upkeep: interrupted; nothing was pushed after the interrupt"
            });
            (ExitStatus::Interrupted, "interrupted", Some("interrupted".to_owned()))
        }
        Err(RunError::Deadline) => {
            events.alert("upkeep: stopped: --timeout reached during git work");
            (ExitStatus::Budget, "limit", None)
        }
        Err(RunError::Failure(error)) => {
            events.alert(&format!("upkeep: error: {error:#}"));
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
    let summary = RunSummary {
        status,
        outcome: outcome.into(),
        cycles: runner.cycles,
        turns,
        usage,
        cost_usd,
        pull_requests: runner.pull_requests,
        question: runner.question,
        error,
        unsaved_changes: runner.unsaved,
    };
    // An interrupted run reports at once; every other run brings its dashboard up to date.
    if let Some(plan) = runner.dashboard.filter(|_| status != ExitStatus::Interrupted) {
        match build_forge(&config) {
            Ok(forge) => crate::fleet::dashboard::update(forge.as_ref(), &plan, &summary, &events).await,
            Err(error) => events.alert(&format!("upkeep: warning: the dashboard was not updated: {error}")),
        }
    }
    events.emit(Scope::default(), summary.finished_event());
    summary
}

/// `upkeep prompt`: clones and reads the repository as a run's first cycle does, and returns
/// the briefing without asking a model. Errors carry the exit status they map to.
pub async fn prompt(config: &Config, cancel: CancellationToken) -> Result<Briefing, (ExitStatus, String)> {
    let fail = |error: RunError| {
        let status = match &error {
            RunError::Usage(_) => ExitStatus::Usage,
            RunError::Interrupted => ExitStatus::Interrupted,
            RunError::Deadline => ExitStatus::Budget,
            RunError::Failure(_) => ExitStatus::Failure,
        };
        (status, error.to_string())
    };
    let events = event_sink(config).map_err(|error| fail(RunError::Usage(error)))?;
    let mut runner = Runner {
        config,
        events: &events,
        cancel: &cancel,
        scope: cleanup::Scope::new(),
        unsaved: Vec::new(),
        commands: config.commands.clone(),
        cycles: 1,
        budget: None,
        pull_requests: Vec::new(),
        question: None,
        kept: None,
        conversation: ConversationState::default(),
        unresolved_findings: Vec::new(),
        dashboard: None,
    };
    let forge = build_forge(config).map_err(|error| fail(RunError::Usage(error)))?;
    runner.check_pull_request(forge.as_ref()).await.map_err(fail)?;
    let (workspace, settings, _) = runner.prepare(1).await.map_err(fail)?;
    let files = WorkTree::open(workspace.root(), &settings.protected_paths)
        .map_err(|error| fail(RunError::Usage(ConfigError(error.to_string()))))?;
    let conversation = match runner.conversation(1, forge.as_ref(), &workspace).await.map_err(fail)? {
        CycleWork::Work(conversation) => conversation,
        CycleWork::Nothing(reason) => return Err((ExitStatus::Done, reason)),
    };
    brief(
        config,
        &settings,
        &files,
        workspace.base_branch(),
        forge.as_ref(),
        &[],
        &conversation,
        &|text| events.alert(text),
    )
    .await
    .map_err(|error| {
        fail(match error {
            BriefingError::Config(error) => RunError::Usage(error),
            BriefingError::Forge(error) => RunError::Failure(error.into()),
        })
    })
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
    /// The run's temporary directories, waited for before the run reports.
    scope: cleanup::Scope,
    /// Changes left in clones that no pull request carries, for the run's summary.
    unsaved: Vec<crate::repo::UnsavedChanges>,
    /// The operator's command settings plus the sandbox decided for this run.
    commands: CommandSettings,
    /// What the conversation on the forge gives the run (see [`crate::conversation`]).
    conversation: ConversationState,
    /// Review findings the last cycle's pull request opened with (section 12).
    unresolved_findings: Vec<String>,
    /// Set once a cycle read `dashboard = true`: what the dashboard after the run needs.
    dashboard: Option<DashboardPlan>,
}

/// The run's part of the conversation: a local question to resume, the first cycle's clone
/// (made before `run_started`, which names the agent instructions it holds), and the base of
/// the pull request a `--pr` run follows up.
#[derive(Default)]
struct ConversationState {
    local: Option<Result<LocalResume, ConfigError>>,
    resumed: Option<LocalQuestion>,
    first: Option<(Workspace, RepoSettings, bool)>,
    pull_request_base: Option<String>,
}

impl Runner<'_> {
    async fn run(&mut self) -> Result<RunEnd, RunError> {
        let config = self.config;
        let pending = match self.conversation.local.take() {
            Some(Err(error)) => return Err(RunError::Usage(error)),
            Some(Ok(LocalResume::Pending(pending))) => Some(pending),
            Some(Ok(LocalResume::Resume(question))) => {
                self.conversation.resumed = Some(question);
                None
            }
            Some(Ok(LocalResume::Nothing)) | None => None,
        };
        let provider = llm::build(&config.provider)?;
        crate::llm::tokens::preload(provider.name(), provider.model());
        let forge = build_forge(config)?;
        let commands_enabled =
            config.dangerous_tools || !config.allow_tools.is_empty() || !config.agents.checks.is_empty();
        let models = crate::agents::Models::build(config)?;
        let sandbox = if commands_enabled {
            Some(self.decide_sandbox().await?)
        } else {
            None
        };
        self.budget = Some(Budget::new(config.budgets, None));
        // The first clone is made before `run_started`, which names the agent instructions it
        // holds; `run_started` is emitted whether or not it succeeded, so every run that got
        // past its settings reports that it started.
        // Outside the operator's schedule nothing is cloned.
        let held = match pending {
            Some(_) => None,
            None => self.outside_operator_schedule(),
        };
        let first = match (&pending, &held) {
            (None, None) => {
                self.check_pull_request(forge.as_ref()).await?;
                Some(self.prepare(1).await)
            }
            _ => None,
        };
        let instructions_files = first
            .as_ref()
            .and_then(|first| first.as_ref().ok())
            .and_then(|(workspace, _, _)| WorkTree::open(workspace.root(), &[]).ok())
            .and_then(|tree| crate::instructions::read(&tree, &|_| {}))
            .map(|found| vec![found.file])
            .unwrap_or_default();
        self.events.emit(
            Scope::default(),
            Event::RunStarted {
                repo: config.source.display_name(),
                mode: config.mode.as_str().into(),
                provider: provider.name().into(),
                model: provider.model().into(),
                dangerous_tools: config.dangerous_tools,
                sandbox: sandbox.map(|plan| crate::exec::SandboxReport::new(&plan, &config.commands.limits)),
                declared_tools: crate::briefing::exposed_declared_tools(config, &config.operator.tools),
                instructions_files,
            },
        );
        if let Some(pending) = pending {
            if let RepoSource::Local(path) = &config.source {
                self.events
                    .say(&crate::conversation::local::describe_pending(path, &pending));
            }
            self.question = pending.first().map(|q| q.question.clone());
            return Ok(RunEnd::Question);
        }
        if let Some(held) = held {
            return Ok(self.held(held));
        }
        if let Some(first) = first {
            self.conversation.first = Some(first?);
        }
        loop {
            self.cycles += 1;
            let cycle = self.cycles;
            let end = self.cycle(cycle, provider.as_ref(), &models, forge.as_ref()).await;
            if let Ok(held @ RunEnd::Held(_)) = end {
                // The cycle never started: no model call, nothing opened.
                self.cycles -= 1;
                return Ok(held);
            }
            let outcome = match &end {
                Ok(end) => end.as_str(),
                Err(RunError::Deadline) => RunEnd::Limit.as_str(),
                Err(_) => "error",
            };
            self.events.emit(
                Scope {
                    cycle: Some(cycle),
                    turn: None,
                },
                Event::CycleFinished {
                    outcome: outcome.into(),
                    unresolved_findings: std::mem::take(&mut self.unresolved_findings),
                },
            );
            let end = end.map_err(|error| match error {
                // After the first cycle the work has started: what was a usage error before
                // (a base branch deleted on the remote, a broken .upkeep.toml merged) is a failure.
                RunError::Usage(error) if cycle > 1 => RunError::Failure(error.into()),
                other => other,
            })?;
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

    /// `--pr N`: refuses, before any work, a pull request the bot did not open or that is not
    /// open (exit 2), and clones from the branch it targets.
    async fn check_pull_request(&mut self, forge: &dyn Forge) -> Result<(), RunError> {
        let Some(number) = self.config.pull_request else {
            return Ok(());
        };
        let feedback = forge
            .pull_request_feedback(number)
            .await
            .map_err(|error| RunError::Failure(error.into()))?;
        crate::conversation::follow_up::check_workable(&feedback.pull_request)
            .map_err(|reason| RunError::Usage(ConfigError::key("--pr", reason)))?;
        self.conversation.pull_request_base = Some(feedback.pull_request.base);
        Ok(())
    }

    /// The cycle's conversation on the forge; checks the clone out on the branch it continues.
    async fn conversation(&self, cycle: u32, forge: &dyn Forge, workspace: &Workspace) -> Result<CycleWork, RunError> {
        crate::conversation::for_cycle(
            self.config,
            forge,
            workspace,
            self.conversation.resumed.as_ref(),
            &|text| self.events.say(text),
        )
        .await
        .map_err(|error| match error {
            ConversationError::Refused(reason) if cycle == 1 => RunError::Usage(ConfigError(reason)),
            ConversationError::Refused(reason) => RunError::Failure(anyhow::anyhow!(reason)),
            ConversationError::Workspace(error) => RunError::from(error),
            ConversationError::Forge(crate::forge::ForgeError::Workspace(error)) => RunError::from(error),
            ConversationError::Forge(error) => RunError::Failure(error.into()),
        })
    }

    /// What ends git work early: the interrupt and the run's `--timeout` deadline.
    fn git_stop(&self) -> Stop {
        Stop::new(self.cancel.clone(), self.budget.as_ref().and_then(Budget::deadline))
    }

    /// Finds out which sandbox commands get on this machine, before any work: `--require-sandbox`
    /// refuses to start without filesystem confinement or network isolation, and without it
    /// what is missing is a warning.
    async fn decide_sandbox(&mut self) -> Result<crate::exec::SandboxPlan, RunError> {
        let commands = &self.config.commands;
        let probe = crate::exec::probe().await;
        let plan = crate::exec::SandboxPlan::decide(&probe, commands.allow_network);
        if let Some(missing) = plan.missing_requirements() {
            if commands.require_sandbox {
                return Err(
                    ConfigError(format!("--require-sandbox: this system cannot give commands {missing}")).into(),
                );
            }
            tracing::warn!("commands the model runs will have no {missing}");
        }
        self.commands.sandbox = Some(plan);
        Ok(plan)
    }

    /// `--keep-clone DIR`: copies the cycle's clone before it is removed (to `DIR`, or
    /// `DIR/cycle-N` in continuous mode) and says where.
    async fn keep_clone(&self, cycle: u32, workspace: &Workspace) {
        let Some(dir) = &self.config.keep_clone else {
            return;
        };
        let dest = match self.config.mode {
            Mode::Single => dir.clone(),
            Mode::Continuous => dir.join(format!("cycle-{cycle}")),
        };
        match workspace.keep_at(&dest).await {
            Ok(()) => self.events.alert(&format!(
                "upkeep: the clone of cycle {cycle} is kept at {} (branches: git -C {} branch)",
                dest.display(),
                dest.display()
            )),
            Err(error) => self.events.alert(&format!(
                "upkeep: could not keep the clone at {}: {error}",
                dest.display()
            )),
        }
    }

    /// Reports the changes in the clone that no pull request of the cycle carries, before the
    /// clone is removed: an `unsaved_changes` event, and the files and diff for people.
    async fn report_unsaved(&mut self, cycle: u32, workspace: &Workspace) {
        let Some(changes) = workspace.unsaved_for_report().await else {
            return;
        };
        if changes.is_empty() {
            return;
        }
        self.events.alert(&format!(
            "upkeep: the cycle ended with changes no pull request carries; they are not saved anywhere else:\n{}",
            changes.diff
        ));
        self.events.emit(
            Scope {
                cycle: Some(cycle),
                turn: None,
            },
            Event::UnsavedChanges {
                files: changes.files.clone(),
                diff: changes.diff.clone(),
            },
        );
        self.unsaved.push(changes);
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
            stall_timeout: config.git_stall_timeout,
            scope: self.scope.clone(),
        };
        Ok(Workspace::clone_repo(request, self.git_stop()).await?)
    }

    /// Refreshes a kept clone in place (on a blocking thread, like a clone).
    async fn refresh(&self, workspace: Workspace) -> Result<Workspace, RunError> {
        let auth = GitAuth {
            token: self.config.github.token.clone(),
        };
        Ok(workspace.refresh(auth, self.git_stop()).await?)
    }

    /// Clones (from cycle 2 of continuous mode: refreshes the kept clone), reads `.upkeep.toml`,
    /// and re-clones when the file names another base branch. The flag says whether the next
    /// cycle may refresh this clone: not when its base came from the default branch's
    /// `.upkeep.toml`, which a refresh of the base alone would not see change.
    async fn prepare(&mut self, cycle: u32) -> Result<(Workspace, RepoSettings, bool), RunError> {
        let config = self.config;
        let explicit_base = self
            .conversation
            .pull_request_base
            .clone()
            .or_else(|| config.overrides.base.clone())
            .or_else(|| config.operator.base.clone());
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
                Err(error @ (RunError::Interrupted | RunError::Deadline)) => return Err(error),
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

    /// The repository's `.upkeep.toml`, read through the gate (a symlink out of the clone, a
    /// FIFO or an oversized file is refused like a broken file), combined with the operator's.
    fn repo_settings(&self, workspace: &Workspace, cycle: u32) -> Result<RepoSettings, RunError> {
        let parsed = WorkTree::open(workspace.root(), &[])
            .map_err(|error| ConfigError(error.to_string()))
            .and_then(|tree| {
                tree.read_text(REPO_CONFIG_FILE, MAX_REPO_CONFIG_BYTES)
                    .map_err(|error| ConfigError(format!("{REPO_CONFIG_FILE}: {error}")))
            })
            .and_then(|text| {
                text.map_or_else(|| Ok(FileConfig::default()), |text| FileConfig::parse_repository(&text))
            });
        match parsed {
            Ok(file) => Ok(self.config.repo_settings(&file)),
            // Found before the first model call of the run: a usage error (exit 2). In a later
            // cycle the file changed under us (someone merged a broken one): a failure.
            Err(error) if cycle == 1 => Err(RunError::Usage(error)),
            Err(error) => Err(RunError::Failure(error.into())),
        }
    }

    /// Whether the operator's `schedule` holds work back now (the repository's own schedule is
    /// read from its clone, in [`Runner::cycle`]).
    fn outside_operator_schedule(&self) -> Option<Held> {
        Limits::operator_only(self.config.operator.limit_keys()).outside_schedule(jiff::Timestamp::now())
    }

    /// A cycle held back by a limit: says why (`limit_reached`), opens nothing.
    fn held(&self, held: Held) -> RunEnd {
        self.events.emit(
            Scope::default(),
            Event::LimitReached {
                limit: held.by.as_str().to_owned(),
                message: held.message,
            },
        );
        RunEnd::Held(held.by)
    }

    async fn cycle(
        &mut self,
        cycle: u32,
        provider: &dyn Provider,
        models: &crate::agents::Models,
        forge: &dyn Forge,
    ) -> Result<RunEnd, RunError> {
        let config = self.config;
        // Outside the operator's schedule nothing is cloned either.
        if let Some(held) = self.outside_operator_schedule() {
            return Ok(self.held(held));
        }
        let (workspace, settings, reusable) = match self.conversation.first.take() {
            Some(first) => first,
            None => self.prepare(cycle).await?,
        };
        let base = workspace.base_branch().to_owned();
        if settings.dashboard {
            self.dashboard = Some(DashboardPlan {
                base: base.clone(),
                label: settings.label.clone(),
                limits: settings.limits.clone(),
            });
        }
        let held = settings
            .limits
            .check(forge, &base, &self.pull_requests, jiff::Timestamp::now())
            .await
            .map_err(|error| {
                RunError::Failure(anyhow::Error::new(error).context("checking pr_limit and pr_hourly_limit"))
            })?;
        if let Some(held) = held {
            return Ok(self.held(held));
        }
        self.events.emit(
            Scope {
                cycle: Some(cycle),
                turn: None,
            },
            Event::CycleStarted {
                base: base.clone(),
                declared_tools: crate::briefing::exposed_declared_tools(config, &settings.declared_tools),
            },
        );

        let files = WorkTree::open(workspace.root(), &settings.protected_paths)
            .map_err(|error| RunError::Usage(ConfigError(error.to_string())))?;
        let task_key = config.task.as_deref().map(crate::tools::branch::task_key);
        let conversation = match self.conversation(cycle, forge, &workspace).await? {
            CycleWork::Work(conversation) => conversation,
            CycleWork::Nothing(reason) => {
                self.events.say(&format!("nothing to do: {reason}"));
                return Ok(RunEnd::NoTasks);
            }
        };
        let briefing = brief(
            config,
            &settings,
            &files,
            &base,
            forge,
            &self.pull_requests,
            &conversation,
            &|text| self.events.alert(text),
        )
        .await
        .map_err(|error| match error {
            BriefingError::Config(error) => RunError::Usage(error),
            BriefingError::Forge(error) => RunError::Failure(error.into()),
        })?;

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
            tree: &files,
            forge,
            commands: &self.commands,
            redactor: self.events.redactor(),
            cancel: self.cancel,
            identity: &config.identity,
            default_issue: briefing.default_issue,
            cycle_branch: None,
            open_pull_requests: &briefing.open_pull_requests,
            task_key: task_key.as_deref(),
            continued: briefing.continued.as_ref(),
            closed_branches: &briefing.closed_branches,
            agents: None,
        };
        // Said once: every cycle builds the same team.
        let team_notice = |text: &str| {
            if cycle == 1 {
                self.events.alert(text);
            }
        };
        let team = crate::agents::Team::new(crate::agents::team::TeamParts {
            config,
            settings: &settings,
            registry: &briefing.registry,
            provider,
            models,
            agent_instructions: briefing.agent_instructions.as_ref(),
            notice: &team_notice,
        })?;
        let agent = Agent {
            provider,
            registry: &briefing.registry,
            events: self.events,
            cancel: self.cancel,
            max_turns: settings.max_turns,
            cycle,
            context_window: crate::llm::window::window_for(&config.provider, provider.model()),
            masking: !config.full_history,
            team: Some(&team),
        };
        let opened_before = self.pull_requests.len();
        let outcome = agent
            .run_cycle(
                &briefing.system,
                briefing.first_message.clone(),
                &briefing.reply_schema,
                &ctx,
                budget,
                &mut self.pull_requests,
            )
            .await;
        // A cycle that did not end with `finish` (a budget, a question, an error, an interrupt)
        // may leave work no pull request carries: it is reported, never dropped silently.
        if !matches!(outcome, Ok(CycleOutcome::Finished { .. })) {
            self.report_unsaved(cycle, &workspace).await;
        }
        self.keep_clone(cycle, &workspace).await;
        self.unresolved_findings = team.unresolved_findings();
        let outcome = outcome?;
        let opened_pull_request = self.pull_requests.len() > opened_before;
        // The answered question reached a cycle that ended: it is settled (a budget keeps it for
        // the next run, which resumes it).
        if !matches!(outcome, CycleOutcome::Limit(_)) {
            if let Some(resumed) = self.conversation.resumed.take() {
                if let Err(error) = crate::conversation::local::settle(config, &resumed).await {
                    self.events.say(&format!("upkeep: {error}"));
                }
            }
        }
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
                    Ok(Some(place)) => self.events.alert(&place),
                    Ok(None) => {}
                    Err(error) => self
                        .events
                        .alert(&format!("upkeep: could not post the question: {error}")),
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
                self.events.alert(&format!("upkeep: stopped: {limit}"));
                if let Limit::Turns(_) = limit {
                    self.events
                        .alert("raise --max-turns (or max_turns in .upkeep.toml) to give the model more turns");
                }
                RunEnd::Limit
            }
        })
    }
}
