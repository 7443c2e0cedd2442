//! `upkeep fleet`: the repositories of a list or an organisation, this worker's shard of them,
//! each run as its own `upkeep run`, `--jobs` at a time.
//!
//! Guarantees:
//! - Isolation: every repository's run is [`crate::run::run`] with a [`crate::config::Config`] of its own
//!   (its clone and temporary directories, its budgets, its `.upkeep.toml`), exactly as
//!   `upkeep run --repo` would resolve it; the fleet adds only the `repo` tag on its events
//!   and the share of `--fleet-max-cost` it may spend ([`super::budget`], [`super::member`]).
//! - One repository's failure never stops the others: a configuration error, a failed run,
//!   even a crash of its task becomes that repository's outcome, and the fleet goes on.
//! - An interrupt stops every run (they share the cancellation token, and each removes its
//!   clone before it reports), starts no new one, and the fleet exits 130 once all have
//!   reported.
//! - Bad fleet input (flags, the list file, the shard) is a usage error before any repository
//!   starts (exit 2); an organisation that cannot be listed is a failure (exit 1). So is a
//!   configuration error that every repository of the shard shares (no `GITHUB_TOKEN` for a
//!   list of GitHub repositories, for example): said once, not once per repository.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::budget::{FleetBudget, SettleOnDrop, Share};
use super::list::{self, FleetEntry};
use super::member;
use super::report;
use super::shard::Shard;
use crate::cli::{FleetArgs, RunArgs};
use crate::config::{ConfigError, GitHubSettings};
use crate::events::{EventSink, Verbosity};
use crate::exit::ExitStatus;
use crate::outcome::Outcome;
use crate::repo_outcome::RepoOutcome;
use crate::secrets::Redactor;

/// `--jobs` when not given: enough to overlap the runs' waiting on the model and the network,
/// few enough to stay well inside the providers' and GitHub's rate limits.
pub const DEFAULT_JOBS: u32 = 4;

/// Why a fleet could not start.
#[derive(Debug, thiserror::Error)]
enum FleetError {
    #[error("{0}")]
    Usage(#[from] ConfigError),
    /// The organisation could not be listed (exit 1).
    #[error("listing the repositories of {org}: {source}")]
    Listing {
        org: String,
        #[source]
        source: crate::forge::ForgeError,
    },
}

/// What this worker runs.
struct FleetPlan {
    entries: Vec<FleetEntry>,
    listed: usize,
    shard: Option<Shard>,
    jobs: usize,
    fleet_max_cost: Option<f64>,
}

/// Runs the fleet; returns the worst repository's exit status (see [`crate::repo_outcome`]).
pub async fn run(args: &FleetArgs, cancel: CancellationToken) -> ExitStatus {
    let events = match fleet_events(&args.run) {
        Ok(events) => events,
        Err(error) => return report::start_failed(None, &FleetError::Usage(error).to_string(), ExitStatus::Usage),
    };
    let plan = match plan(args).await {
        Ok(plan) => plan,
        Err(FleetError::Usage(error)) => {
            return report::start_failed(Some(&events), &error.to_string(), ExitStatus::Usage);
        }
        Err(error @ FleetError::Listing { .. }) => {
            return report::start_failed(Some(&events), &error.to_string(), ExitStatus::Failure);
        }
    };
    let shard_text = plan.shard.map(|shard| format!(" (shard {shard})")).unwrap_or_default();
    events.say(&format!(
        "upkeep fleet: {} of {} repositories{shard_text}, {} at a time",
        plan.entries.len(),
        plan.listed,
        plan.jobs
    ));
    let actions = crate::actions::Actions::from_env();
    let outcomes = {
        // Inside Actions, nothing the runs print (model text, issue text) may act on the job.
        let _paused = actions.as_ref().map(|_| crate::actions::pause_workflow_commands());
        execute(&plan, &args.run, &cancel).await
    };
    report::finished(&events, actions.as_ref(), plan.shard, &outcomes, args.run.json)
}

/// The fleet's own event sink: `fleet_finished` on stdout (`--json`) and in the trace.
fn fleet_events(run: &RunArgs) -> Result<EventSink, ConfigError> {
    let trace = run.trace.as_deref().map(crate::run::open_trace).transpose()?;
    let verbosity = if run.quiet { Verbosity::Quiet } else { Verbosity::Normal };
    Ok(EventSink::new(Redactor::from_env(), run.json, trace, verbosity))
}

async fn plan(args: &FleetArgs) -> Result<FleetPlan, FleetError> {
    // `--repo` is `run`'s; the action and scripts may still set UPKEEP_REPO, which is ignored.
    let from_environment = std::env::var("UPKEEP_REPO").ok();
    if !args.run.repo.is_empty() && from_environment.as_deref() != Some(args.run.repo.as_str()) {
        return Err(ConfigError::key("--repo", "`upkeep fleet` takes --repos FILE or --org ORG").into());
    }
    if let Some(cost) = args.fleet_max_cost {
        if !(cost.is_finite() && cost > 0.0) {
            return Err(ConfigError::key("--fleet-max-cost", "must be a positive number of US dollars").into());
        }
    }
    let shard = args
        .shard
        .as_deref()
        .map(str::parse::<Shard>)
        .transpose()
        .map_err(ConfigError)?;
    let github = GitHubSettings::from_env();
    let entries = match (&args.repos, &args.org) {
        (Some(path), _) => list::read_list(path, &github.server_url)?,
        (None, Some(org)) => {
            let org = org.trim();
            if org.is_empty() || org.contains('/') {
                return Err(ConfigError::key("--org", format!("{org:?} is not an organisation name")).into());
            }
            let listing = crate::forge::github::org::list_repositories(&github, org, &args.topic)
                .await
                .map_err(|source| FleetError::Listing {
                    org: org.to_owned(),
                    source,
                })?;
            tracing::info!(
                "{org}: {} repositories; skipped {} archived, {} forks, {} without the topic",
                listing.repositories.len(),
                listing.skipped_archived,
                listing.skipped_forks,
                listing.skipped_without_topic
            );
            listing
                .repositories
                .iter()
                .map(|full_name| list::github_entry(full_name, &github.server_url))
                .collect()
        }
        (None, None) => return Err(ConfigError("upkeep fleet needs --repos FILE or --org ORG".into()).into()),
    };
    let (entries, repeated) = list::dedupe(entries);
    for name in repeated {
        tracing::warn!("{name} is listed more than once; it runs once");
    }
    let listed = entries.len();
    let entries: Vec<FleetEntry> = entries
        .into_iter()
        .filter(|entry| shard.is_none_or(|shard| shard.contains(&entry.key)))
        .collect();
    if let Some(error) = member::shared_usage_error(&entries, &args.run) {
        return Err(error.into());
    }
    Ok(FleetPlan {
        entries,
        listed,
        shard,
        jobs: args.jobs.unwrap_or(DEFAULT_JOBS) as usize,
        fleet_max_cost: args.fleet_max_cost,
    })
}

/// Runs every repository of the plan, `jobs` at a time, and returns their outcomes in the
/// plan's order.
async fn execute(plan: &FleetPlan, defaults: &RunArgs, cancel: &CancellationToken) -> Vec<RepoOutcome> {
    let slots = Arc::new(Semaphore::new(plan.jobs));
    let budget = Arc::new(FleetBudget::new(plan.fleet_max_cost));
    let mut outcomes: Vec<Option<RepoOutcome>> = vec![None; plan.entries.len()];
    let mut running = JoinSet::new();
    // Which repository each task runs, so a task that crashes is reported as that repository's.
    let mut tasks: HashMap<tokio::task::Id, usize> = HashMap::new();
    for (index, entry) in plan.entries.iter().enumerate() {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot,
            () = cancel.cancelled() => break,
        };
        let Ok(slot) = slot else { break };
        if cancel.is_cancelled() {
            break;
        }
        let share = budget.reserve(slots.available_permits() + 1);
        if share == Share::Exhausted {
            outcomes[index] = Some(RepoOutcome::not_run(
                &entry.display,
                Outcome::FleetBudget,
                Some("--fleet-max-cost is spent; not started".into()),
            ));
            continue;
        }
        let (entry, defaults, cancel, budget) = (entry.clone(), defaults.clone(), cancel.clone(), Arc::clone(&budget));
        let task = running.spawn(async move {
            // Settled and freed on every way out of the task, a crash included.
            let _slot = slot;
            let settle = SettleOnDrop {
                budget,
                share,
                spent: 0.0,
            };
            let outcome = member::run(&entry, &defaults, share, cancel).await;
            settle.with(outcome.cost_usd);
            (index, outcome)
        });
        tasks.insert(task.id(), index);
        while let Some(done) = running.try_join_next() {
            record(&mut outcomes, &plan.entries, &tasks, done);
        }
    }
    while let Some(done) = running.join_next().await {
        record(&mut outcomes, &plan.entries, &tasks, done);
    }
    outcomes
        .into_iter()
        .zip(&plan.entries)
        .map(|(outcome, entry)| {
            outcome.unwrap_or_else(|| {
                RepoOutcome::not_run(
                    &entry.display,
                    Outcome::NotStarted,
                    Some("interrupted before this repository started".into()),
                )
            })
        })
        .collect()
}

fn record(
    outcomes: &mut [Option<RepoOutcome>],
    entries: &[FleetEntry],
    tasks: &HashMap<tokio::task::Id, usize>,
    done: Result<(usize, RepoOutcome), tokio::task::JoinError>,
) {
    match done {
        Ok((index, outcome)) => outcomes[index] = Some(outcome),
        Err(error) => {
            let Some(&index) = tasks.get(&error.id()) else {
                tracing::error!("a repository's run crashed: {error}");
                return;
            };
            let repo = &entries[index].display;
            tracing::error!("the run of {repo} crashed: {error}");
            outcomes[index] = Some(RepoOutcome::not_run(
                repo,
                Outcome::Error,
                Some(format!("the run crashed: {error}")),
            ));
        }
    }
}
