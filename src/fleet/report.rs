//! What `upkeep fleet` says at the end: the table of outcomes (stdout, or stderr with `--json`,
//! whose stdout is JSON Lines only), `fleet_finished`, and inside GitHub Actions the table in
//! the job summary plus the step outputs `outcome` (the worst repository's) and `exit-code`.

use std::io::Write as _;

use super::shard::Shard;
use super::table;
use crate::actions::Actions;
use crate::cli::RunArgs;
use crate::events::{Event, EventSink, Scope, Verbosity};
use crate::exit::ExitStatus;
use crate::repo_outcome::{self as outcome, RepoOutcome};
use crate::secrets::Redactor;
use crate::summary::RunSummary;

/// The fleet's table in the job summary, and the worst repository's outcome and the fleet's exit
/// code as the step outputs `outcome` and `exit-code`.
fn report_to_actions(
    actions: &Actions,
    shard: Option<Shard>,
    outcomes: &[RepoOutcome],
    status: ExitStatus,
    redactor: &Redactor,
) {
    let title = match shard {
        Some(shard) => format!("upkeep fleet, shard {shard}"),
        None => "upkeep fleet".to_owned(),
    };
    // An empty fleet has no repository's outcome to give.
    let worst = outcomes
        .iter()
        .find(|outcome| outcome.status() == status)
        .map_or("no_repositories", |outcome| outcome.outcome.name());
    let written = [
        actions.append_summary(&table::render_markdown(&title, outcomes), redactor),
        actions.append_outputs(
            &[("outcome", worst.to_owned()), ("exit-code", status.code().to_string())],
            redactor,
        ),
    ];
    for problem in written.into_iter().filter_map(Result::err) {
        eprintln!("upkeep: {}", crate::text::escape_terminal(&problem));
    }
}

/// The end of a fleet: table, event, Actions report; returns the exit status.
pub(crate) fn finished(
    events: &EventSink,
    actions: Option<&Actions>,
    shard: Option<Shard>,
    outcomes: &[RepoOutcome],
    json: bool,
) -> ExitStatus {
    let status = outcome::worst(outcomes);
    let text = events.redactor().redact(&table::render_text(outcomes));
    let text = crate::text::escape_terminal(&text);
    // A closed pipe is not an error.
    let _ = if json {
        std::io::stderr().lock().write_all(text.as_bytes())
    } else {
        std::io::stdout().lock().write_all(text.as_bytes())
    };
    events.emit(Scope::default(), finished_event(outcomes, status));
    if let Some(actions) = actions {
        report_to_actions(actions, shard, outcomes, status, events.redactor());
    }
    status
}

/// A fleet that could not start: the reason, and `fleet_finished` with no repositories.
pub(crate) fn start_failed(events: Option<&EventSink>, message: &str, status: ExitStatus) -> ExitStatus {
    let redactor = Redactor::from_env();
    eprintln!(
        "upkeep fleet: {}",
        crate::text::escape_terminal(&redactor.redact(message))
    );
    if let Some(events) = events {
        events.emit(
            Scope::default(),
            Event::FleetFinished {
                repos: 0,
                outcomes: Vec::new(),
                usage: crate::llm::Usage::default(),
                cost_usd: 0.0,
                exit_code: status.code(),
            },
        );
    }
    status
}

/// A repository whose options did not resolve: said on stderr (tagged), and `run_finished`
/// with `repo` for `--json` and `--trace`, as every run ends with one.
pub(crate) fn repository_usage_error(args: &RunArgs, repo: &str, summary: &RunSummary) {
    let trace = args.trace.as_deref().and_then(|path| crate::run::open_trace(path).ok());
    let events = EventSink::new(Redactor::from_env(), args.json, trace, Verbosity::Quiet).for_repo(repo.to_owned());
    events.alert(&format!(
        "upkeep: configuration error: {}",
        summary.error.as_deref().unwrap_or_default()
    ));
    events.emit(Scope::default(), summary.finished_event());
}

/// The `fleet_finished` event.
fn finished_event(outcomes: &[RepoOutcome], status: ExitStatus) -> Event {
    let mut usage = crate::llm::Usage::default();
    for outcome in outcomes {
        usage += outcome.usage;
    }
    Event::FleetFinished {
        repos: outcomes.len(),
        outcomes: outcomes.to_vec(),
        usage,
        cost_usd: table::total_cost(outcomes),
        exit_code: status.code(),
    }
}
