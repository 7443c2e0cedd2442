//! Cycles, modes and budgets: the whole run.
//!
//! A cycle is a fresh copy of the base branch plus turns until `finish`, `ask_question` or a
//! budget. Single mode runs one cycle; continuous mode starts the next cycle on a fresh copy
//! after `finish{completed}` (the same clone, refreshed in place to exactly what the remote
//! has: see [`crate::repo::git::Workspace::refresh`]) and stops on `no_tasks` (exit 0), a question (3),
//! a budget (4) or after `--max-cycles` (0). The run owns the workspace, the agent and
//! the forge, and maps every way a run can end to one [`ExitStatus`], with a `run_finished`
//! event.
//!
//! Git work (clone, refresh, and the commit and push inside `create_pull_request`) stops on an
//! interrupt (exit 130) and at the `--timeout` deadline, which is a budget like the others
//! (exit 4). Every temporary directory of the run is removed before the run reports, and an
//! interrupted run says the clone was removed only once it is.

mod checks;
mod clones;
mod cycle;
mod cycles;
mod ending;
mod mergeable;
mod record;
mod shared;

use tokio_util::sync::CancellationToken;

use crate::briefing::Briefing;
use crate::config::{Config, ConfigError, RepoSource};
use crate::conversation::local::LocalResume;
use crate::events::{EventSink, Scope, Verbosity};
use crate::exit::ExitStatus;
use crate::forge::{Forge, dry_run::DryRun, github::GitHubForge, local::LocalForge, none::NoForge};
use crate::kinds::ForgeKind;
use crate::outcome::Outcome;
use crate::secrets::Redactor;
use crate::summary::RunSummary;

use clones::Carried;
use cycle::CycleBrief;
use ending::RunError;
use record::RunRecord;
use shared::Run;

/// How long the end of a run waits for git work that is winding down to remove its clone before
/// removing the directory itself.
const CLEANUP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The secrets this run knows: every credential variable in the environment.
pub(crate) fn redactor_for(config: &Config) -> Redactor {
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
pub(crate) fn open_trace(path: &std::path::Path) -> Result<std::fs::File, ConfigError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| ConfigError::key("--trace", format!("{}: {error}", path.display())))
}

/// Opens the event sink a run writes to.
pub(crate) fn event_sink(config: &Config) -> Result<EventSink, ConfigError> {
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
pub(crate) async fn run(config: Config, cancel: CancellationToken) -> RunSummary {
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
    let scope = crate::repo::cleanup::Scope::new();
    let mut record = RunRecord::default();
    let mut carried = Carried::new(&config.local_questions);
    let (result, budget) = run_cycles(&config, &events, &cancel, &scope, &mut carried, &mut record).await;
    // Continuous mode's kept clone goes with the rest of the run's directories.
    drop(carried);
    let left = tokio::task::spawn_blocking(move || scope.settle(CLEANUP_GRACE))
        .await
        .unwrap_or_default();
    for (path, error) in &left {
        events.alert(&format!(
            "upkeep: could not remove the temporary directory {}: {error}",
            path.display()
        ));
    }
    let (outcome, error) = ending::conclude(&result, &events, left.is_empty());
    let dashboard = record.dashboard.take();
    let summary = record.into_summary(budget, outcome, error);
    // An interrupted run reports at once; every other run brings its dashboard up to date.
    if let Some(plan) = dashboard.filter(|_| outcome != Outcome::Interrupted) {
        match build_forge(&config) {
            Ok(forge) => crate::dashboard::update(forge.as_ref(), &plan, &summary, &events).await,
            Err(error) => events.alert(&format!("upkeep: warning: the dashboard was not updated: {error}")),
        }
    }
    events.emit(Scope::default(), summary.finished_event());
    summary
}

/// The run from the answer it records to its last cycle, and the budget it spent (`None` when
/// it never got as far as its first model call's preparations).
async fn run_cycles(
    config: &Config,
    events: &EventSink,
    cancel: &CancellationToken,
    scope: &crate::repo::cleanup::Scope,
    carried: &mut Carried,
    record: &mut RunRecord,
) -> (Result<Outcome, RunError>, Option<crate::agent::budget::Budget>) {
    let pending = match &config.local_questions {
        LocalResume::Pending(pending) => Some(pending.clone()),
        LocalResume::Resume(question) => {
            if let Err(error) = crate::conversation::local::record_answer(config, question).await {
                return (Err(error.into()), None);
            }
            None
        }
        LocalResume::Nothing => None,
    };
    let (run, asking) = match Run::equip(config, events, cancel, scope.clone()).await {
        Ok(equipped) => equipped,
        Err(error) => return (Err(error), None),
    };
    let result = run.whole(&asking, pending, carried, record).await;
    (result, Some(run.budget.into_inner()))
}

/// `upkeep prompt`: clones and reads the repository as a run's first cycle does, and returns
/// the briefing without asking a model, through the same steps the run takes before its first
/// model call (`Run::first_clone`, `Run::brief_cycle`). Errors carry the exit status
/// they map to.
pub(crate) async fn prompt(config: &Config, cancel: CancellationToken) -> Result<Briefing, (ExitStatus, String)> {
    let fail = |error: RunError| (error.outcome().exit_status(), error.to_string());
    // A question waiting for its answer holds the run back before any clone: there is no
    // first cycle to show.
    if let (LocalResume::Pending(pending), RepoSource::Local(path)) = (&config.local_questions, &config.source) {
        return Err((
            ExitStatus::Question,
            crate::conversation::local::describe_pending(path, pending),
        ));
    }
    let events = event_sink(config).map_err(|error| fail(RunError::Usage(error)))?;
    let run = Run::for_prompt(config, &events, &cancel).map_err(|error| fail(RunError::Usage(error)))?;
    let mut carried = Carried::new(&config.local_questions);
    let first = run.first_clone(&mut carried).await.map_err(fail)?;
    match run
        .brief_cycle(1, first, carried.resumed.as_ref(), &[])
        .await
        .map_err(fail)?
    {
        CycleBrief::Ready { cycle, .. } => Ok(cycle.briefing),
        CycleBrief::Nothing(reason) => Err((ExitStatus::Done, reason)),
        CycleBrief::Mergeable { settled, .. } => Err((ExitStatus::Done, mergeable::prompt_refusal(&settled))),
        CycleBrief::Checks { stop, .. } => Err(match *stop {
            crate::conversation::fix::ChecksStop::GiveUp(give_up) => (
                crate::outcome::Outcome::ChecksFailed.exit_status(),
                format!(
                    "upkeep stops working the checks of pull request #{}: {}",
                    give_up.pr, give_up.reason
                ),
            ),
            crate::conversation::fix::ChecksStop::Nothing(reason) => (ExitStatus::Done, reason),
        }),
    }
}
