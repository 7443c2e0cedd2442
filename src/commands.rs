//! The `run` and `tools` subcommands, between clap and the library.

use std::io::Write;

use tokio_util::sync::CancellationToken;

use crate::actions::{Actions, CommandsPaused, RunContext};
use crate::agent::prompt::describe_tool;
use crate::cli::{RunArgs, ToolsArgs};
use crate::config::{Config, ConfigError, Purpose, Resolved};
use crate::exit::ExitStatus;
use crate::secrets::Redactor;
use crate::startup::RunStart;
use crate::summary::RunSummary;
use crate::tools::{ToolRegistry, ToolSelection, spec::reply_schema};

/// Runs upkeep; inside GitHub Actions also applies the triggering event and reports the run as
/// step outputs, a job summary and annotations (see [`crate::actions`]).
pub async fn run(args: &RunArgs, cancel: CancellationToken) -> ExitStatus {
    let actions = Actions::from_env();
    // Workflow commands stay paused from the event to the report: judging the event prints
    // forge text (why an event does not concern upkeep, an API's error), and the run prints the
    // model's, and no line of either may act on the job.
    let paused = actions.as_ref().map(|_| crate::actions::pause_workflow_commands());
    let start = RunStart {
        purpose: Purpose::Run,
        actions: actions.as_ref(),
        fleet_member: None,
    };
    let config = match crate::startup::resolve(args, start).await {
        Ok(Resolved::Run(config)) => config,
        Ok(Resolved::NothingToDo(config, why)) => {
            return nothing_to_do(args, &config, actions.as_ref(), &why, paused);
        }
        Err(error) => {
            finished_with_usage_error(args, &error);
            return usage_error(&error, &args.repo, actions.as_ref(), paused);
        }
    };
    for warning in crate::preflight::local_warnings(&config) {
        eprintln!("upkeep: warning: {}", crate::text::escape_terminal(&warning));
    }
    let Some(actions) = actions else {
        return crate::run::run(config, cancel).await.status();
    };
    let redactor = crate::run::redactor_for(&config);
    let context = RunContext {
        repo: config.source.display_name(),
        issue: config.issue,
        dry_run: config.dry_run,
    };
    let summary = crate::run::run(config, cancel).await;
    drop(paused);
    actions.report(&summary, &context, &redactor);
    summary.status()
}

/// An Actions event that does not concern upkeep (a comment by someone without write access,
/// a review of someone else's pull request): nothing is done, and the run says why.
fn nothing_to_do(
    args: &RunArgs,
    config: &Config,
    actions: Option<&Actions>,
    why: &str,
    paused: Option<CommandsPaused>,
) -> ExitStatus {
    let redactor = crate::run::redactor_for(config);
    eprintln!(
        "upkeep: {}; nothing to do",
        crate::text::escape_terminal(&redactor.redact(why))
    );
    let summary = RunSummary::without_work(crate::outcome::Outcome::NoTasks, None);
    emit_finished(args, &redactor, &summary);
    drop(paused);
    let context = RunContext {
        repo: config.source.display_name(),
        issue: None,
        dry_run: config.dry_run,
    };
    if let Some(actions) = actions {
        actions.report(&summary, &context, &redactor);
    }
    ExitStatus::Done
}

/// With `--json` (and `--trace`), a run stopped by a usage error still ends with
/// `run_finished`, so a consumer of the events always learns how the run ended.
fn finished_with_usage_error(args: &RunArgs, error: &ConfigError) {
    emit_finished(args, &Redactor::from_env(), &RunSummary::usage_error(error));
}

/// `run_finished` for a run that ended before it began, to `--json` and `--trace`.
fn emit_finished(args: &RunArgs, redactor: &Redactor, summary: &RunSummary) {
    let trace = args.trace.as_deref().and_then(|path| crate::run::open_trace(path).ok());
    if !args.json && trace.is_none() {
        return;
    }
    let events = crate::events::EventSink::new(redactor.clone(), args.json, trace, crate::events::Verbosity::Quiet);
    events.emit(crate::events::Scope::default(), summary.finished_event());
}

/// A configuration error before any work: exit 2, and in Actions the same report as a run,
/// the error printed while workflow commands are paused (`paused`, or a pause of its own).
fn usage_error(
    error: &ConfigError,
    repo: &str,
    actions: Option<&Actions>,
    paused: Option<CommandsPaused>,
) -> ExitStatus {
    let redactor = Redactor::from_env();
    let paused = paused.or_else(|| actions.map(|_| crate::actions::pause_workflow_commands()));
    eprintln!(
        "upkeep: {}",
        crate::text::escape_terminal(&redactor.redact(&error.to_string()))
    );
    drop(paused);
    if let Some(actions) = actions {
        let summary = RunSummary::usage_error(error);
        let context = RunContext {
            repo: repo.to_owned(),
            ..RunContext::default()
        };
        actions.report(&summary, &context, &redactor);
    }
    ExitStatus::Usage
}

/// Prints the system prompt and the first message of a first cycle exactly as the model would
/// get them, calling no model: with `--json`, as `{"system", "first_message"}`.
pub async fn prompt(args: &RunArgs, cancel: CancellationToken) -> ExitStatus {
    let config = match crate::startup::for_run(args, Purpose::Prompt).await {
        Ok(config) => config,
        Err(error) => return usage_error(&error, &args.repo, None, None),
    };
    let briefing = match crate::run::prompt(&config, cancel).await {
        Ok(briefing) => briefing,
        Err((status, message)) => {
            let redactor = crate::run::redactor_for(&config);
            eprintln!("upkeep: {}", crate::text::escape_terminal(&redactor.redact(&message)));
            return status;
        }
    };
    // Redacted exactly as the agent redacts what it sends.
    let redactor = crate::run::redactor_for(&config);
    let (system, first_message) = (
        redactor.redact(&briefing.system),
        redactor.redact(&briefing.first_message),
    );
    let text = if config.json {
        let value = serde_json::json!({"system": system, "first_message": first_message});
        serde_json::to_string(&value).unwrap_or_default()
    } else {
        format!("==> system prompt\n{system}\n==> first message\n{first_message}")
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`upkeep prompt | head`) is not an error.
    let _ = writeln!(stdout, "{text}");
    ExitStatus::Done
}

/// Prints the tools exactly as the model sees them: the same specs the prompt and the
/// structured-output schema are rendered from, declared command tools included. A declared tool
/// that would not be offered is listed after them with how to offer it.
pub fn tools(args: &ToolsArgs) -> ExitStatus {
    let (declared, agents) = match &args.config {
        Some(path) => match crate::config::FileConfig::load(path) {
            Ok(file) => (file.tools, file.agents),
            Err(error) => return usage_error(&error, "", None, None),
        },
        None => (Vec::new(), Vec::new()),
    };
    let agents = match crate::subagents::Catalogue::new(&agents) {
        Ok(catalogue) => crate::subagents::AgentSettings {
            catalogue,
            ..crate::subagents::AgentSettings::default()
        },
        Err(error) => return usage_error(&error, "", None, None),
    };
    let mut extra: Vec<crate::tools::registry::ExtraTool> = Vec::new();
    for declaration in &declared {
        match crate::tools::declared_tool::DeclaredTool::new(declaration, "--config") {
            Ok(tool) => {
                let allowed = args.allow_tool.iter().any(|name| name == tool.name());
                extra.push((Box::new(tool), allowed));
            }
            Err(error) => return usage_error(&error, "", None, None),
        }
    }
    let mut registry = ToolRegistry::new(
        // As a cycle that is not a review follow-up sees them.
        &ToolSelection {
            dangerous: args.allow_dangerous_tools,
            review: false,
        },
        extra,
    );
    crate::subagents::equip_main_agent(&mut registry, &agents);
    let specs = registry.specs();
    let withheld: Vec<&str> = declared
        .iter()
        .map(|tool| tool.name.as_str())
        .filter(|name| !specs.iter().any(|spec| spec.name == *name))
        .collect();
    let text = if args.json {
        let value = serde_json::json!({"tools": specs, "reply_schema": reply_schema(&specs), "not_offered": withheld});
        serde_json::to_string_pretty(&value).unwrap_or_default()
    } else {
        let mut text = specs.iter().map(describe_tool).collect::<Vec<_>>().join("\n\n");
        for name in withheld {
            text.push_str(&format!(
                "\n\n(declared but not offered: {name}; a run offers it with --allow-tool {name})"
            ));
        }
        text
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`upkeep tools | head`) is not an error.
    let _ = writeln!(stdout, "{text}");
    ExitStatus::Done
}
