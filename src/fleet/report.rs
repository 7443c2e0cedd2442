//! What `upkeep fleet` says at the end: the table of outcomes (stdout, or stderr with `--json`,
//! whose stdout is JSON Lines only), `fleet_finished`, and inside GitHub Actions the table in
//! the job summary plus the step outputs `outcome` (the worst repository's) and `exit-code`.

use std::io::Write as _;
use std::path::PathBuf;

use super::outcome::RepoOutcome;
use super::shard::Shard;
use super::{run, table};
use crate::cli::RunArgs;
use crate::events::{Event, EventSink, Scope, Verbosity};
use crate::exit::ExitStatus;
use crate::secrets::Redactor;
use crate::summary::RunSummary;

/// The runner's files for this step, when running in GitHub Actions.
pub struct ActionsReport {
    summary: Option<PathBuf>,
    output: Option<PathBuf>,
}

impl ActionsReport {
    pub fn from_env() -> Option<Self> {
        if std::env::var("GITHUB_ACTIONS").ok().as_deref() != Some("true") {
            return None;
        }
        let path = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Some(Self {
            summary: path("GITHUB_STEP_SUMMARY"),
            output: path("GITHUB_OUTPUT"),
        })
    }

    fn write(&self, shard: Option<Shard>, outcomes: &[RepoOutcome], status: ExitStatus, redactor: &Redactor) {
        let append = |path: &PathBuf, text: &str| {
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(text.as_bytes()));
            if let Err(error) = written {
                eprintln!("upkeep: cannot write {}: {error}", path.display());
            }
        };
        if let Some(path) = &self.summary {
            let title = match shard {
                Some(shard) => format!("upkeep fleet, shard {shard}"),
                None => "upkeep fleet".to_owned(),
            };
            append(path, &redactor.redact(&table::render_markdown(&title, outcomes)));
        }
        if let Some(path) = &self.output {
            let worst = outcomes
                .iter()
                .filter(|outcome| outcome.status == status)
                .map(|outcome| outcome.outcome.as_str())
                .next()
                .unwrap_or("no_repositories");
            let text = crate::actions::format_output("outcome", worst)
                + &crate::actions::format_output("exit-code", &status.code().to_string());
            append(path, &text);
        }
    }
}

/// The end of a fleet: table, event, Actions report; returns the exit status.
pub fn finished(
    events: &EventSink,
    actions: Option<&ActionsReport>,
    shard: Option<Shard>,
    outcomes: &[RepoOutcome],
    json: bool,
) -> ExitStatus {
    let status = run::fleet_status(outcomes);
    let text = events.redactor().redact(&table::render_text(outcomes));
    let text = crate::text::escape_terminal(&text);
    // A closed pipe is not an error.
    let _ = if json {
        std::io::stderr().lock().write_all(text.as_bytes())
    } else {
        std::io::stdout().lock().write_all(text.as_bytes())
    };
    run::emit(events, run::finished_event(outcomes, status));
    if let Some(actions) = actions {
        actions.write(shard, outcomes, status, events.redactor());
    }
    status
}

/// A fleet that could not start: the reason, and `fleet_finished` with no repositories.
pub fn start_failed(events: Option<&EventSink>, message: &str, status: ExitStatus) -> ExitStatus {
    let redactor = Redactor::from_env();
    eprintln!(
        "upkeep fleet: {}",
        crate::text::escape_terminal(&redactor.redact(message))
    );
    if let Some(events) = events {
        run::emit(
            events,
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
pub fn repository_usage_error(args: &RunArgs, repo: &str, summary: &RunSummary) {
    let trace = args
        .trace
        .as_deref()
        .and_then(|path| crate::orchestrator::open_trace(path).ok());
    let events = EventSink::new(Redactor::from_env(), args.json, trace, Verbosity::Quiet).for_repo(repo.to_owned());
    events.alert(&format!(
        "upkeep: configuration error: {}",
        summary.error.as_deref().unwrap_or_default()
    ));
    events.emit(Scope::default(), summary.finished_event());
}
