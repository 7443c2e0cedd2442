//! Cycles, modes and budgets: the whole run.
//!
//! A cycle is a fresh copy of the base branch plus turns until `finish`, `ask_question` or a
//! budget. Single mode runs one cycle; continuous mode starts the next cycle on a fresh copy
//! after `finish{completed}` (the same clone, refreshed in place to exactly what the remote
//! has: see [`crate::repo::git::Workspace::refresh`]) and stops on `no_tasks` (exit 0), a question (3),
//! a budget (4) or after `--max-cycles` (0). The orchestrator owns the workspace, the agent and
//! the forge, and maps every way a run can end to one [`ExitStatus`], with a `run_finished`
//! event.
//!
//! Git work (clone, refresh, and the commit and push inside `create_pull_request`) stops on an
//! interrupt (exit 130) and at the `--timeout` deadline, which is a budget like the others
//! (exit 4). Every temporary directory of the run is removed before the run reports, and an
//! interrupted run says the clone was removed only once it is.

mod clones;
mod cycle;
mod ending;
mod runner;

use tokio_util::sync::CancellationToken;

use crate::briefing::{Briefing, BriefingError, brief};
use crate::config::{Config, ConfigError, RepoSource};
use crate::conversation::CycleWork;
use crate::events::{EventSink, Scope, Verbosity};
use crate::exit::ExitStatus;
use crate::forge::{Forge, dry_run::DryRun, github::GitHubForge, local::LocalForge, none::NoForge};
use crate::kinds::ForgeKind;
use crate::repo::WorkTree;
use crate::secrets::Redactor;
use crate::summary::RunSummary;

use ending::RunError;
use runner::Runner;

/// How long the end of a run waits for git work that is winding down to remove its clone before
/// removing the directory itself.
const CLEANUP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

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
            EventSink::new(redactor_for(&config), config.json, None, Verbosity::Quiet)
                .emit(Scope::default(), summary.finished_event());
            return summary;
        }
    };
    let mut runner = Runner::new(&config, &events, &cancel, Some(local));
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
    let (status, outcome, error) = ending::conclude(&result, &events, left.is_empty());
    let dashboard = runner.dashboard.take();
    let summary = runner.into_summary(status, outcome, error);
    // An interrupted run reports at once; every other run brings its dashboard up to date.
    if let Some(plan) = dashboard.filter(|_| status != ExitStatus::Interrupted) {
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
    // `prompt` shows the first cycle's briefing.
    let mut runner = Runner::new(config, &events, &cancel, None);
    runner.cycles = 1;
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
        &cancel,
    )
    .await
    .map_err(|error| {
        fail(match error {
            BriefingError::Config(error) => RunError::Usage(error),
            BriefingError::Forge(error) => RunError::Failure(error.into()),
            BriefingError::Interrupted(_) => RunError::Interrupted,
        })
    })
}
