//! GitHub Actions integration, active when `GITHUB_ACTIONS=true`.
//!
//! In a workflow people read the job summary, later steps read step outputs, and failures should
//! show as annotations rather than only as log lines; and a workflow started by labelling an
//! issue must work exactly that issue. This module reads what the runner gives a step
//! (`GITHUB_EVENT_NAME`, `GITHUB_EVENT_PATH`, `GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`) and
//! writes back in the formats the runner parses.
//!
//! Guarantees:
//! - Outputs use the runner's file-command format: `name=value` for a one-line value and
//!   `name<<DELIMITER`, value, `DELIMITER` for a value with line breaks, with a random
//!   `ghadelimiter_<uuid>` delimiter that does not occur in the value (as actions/toolkit does).
//!   Every output is always written, empty when it does not apply, so a workflow can test it.
//! - Everything written to the summary, the outputs and annotations passes secret redaction,
//!   then [`crate::text::escape_terminal`]: control characters from the model, a provider's
//!   error text or the forge arrive as visible escapes (`\u{1b}`), never raw.
//! - Workflow commands (`::error::` and friends) go to stderr. GitHub's documentation shows them
//!   on stdout, but the runner feeds stdout and stderr to the same command processor (actions/
//!   runner `ScriptHandler.cs`: an `OutputManager` over `ActionCommandManager` on each stream),
//!   and stderr keeps `--json` stdout pure JSON Lines.
//! - While the run goes, command processing is paused with `::stop-commands::<random token>`:
//!   the progress lines carry text from the model, from issues anyone can open and from diffs,
//!   and a line there that reads `::add-mask::…` or `::error::…` must not act on the job.

mod issue_event;
mod report;

use std::io::Write as _;
use std::path::PathBuf;

use crate::config::{ConfigError, EventWork, RunSettings};
use crate::secrets::Redactor;
use crate::summary::RunSummary;

pub(crate) use issue_event::{EventTask, issue_task, read_issues_event};
pub(crate) use report::{annotation, format_output, job_summary, outputs, workflow_command};

/// Longest question or error kept in an output, the summary or an annotation. GitHub caps a
/// job's outputs at 1 MB and a step summary at 1 MiB; a runaway model reply must not break
/// either, and a human reads the whole text in the log anyway.
pub(crate) const MAX_TEXT_CHARS: usize = 32 * 1024;

/// What the runner gives this step. Exists only inside GitHub Actions.
#[derive(Debug, Clone, Default)]
pub(crate) struct Actions {
    output: Option<PathBuf>,
    summary: Option<PathBuf>,
    event_name: Option<String>,
    event_path: Option<PathBuf>,
}

/// What the report says about the run besides the [`RunSummary`].
#[derive(Debug, Clone, Default)]
pub(crate) struct RunContext {
    /// The repository as the user named it.
    pub repo: String,
    /// The issue the run was started for.
    pub issue: Option<u64>,
    pub dry_run: bool,
}

impl Actions {
    /// `Some` when running as a GitHub Actions step (`GITHUB_ACTIONS=true`, as the runner sets).
    pub(crate) fn from_env() -> Option<Self> {
        if std::env::var("GITHUB_ACTIONS").ok().as_deref() != Some("true") {
            return None;
        }
        let path = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Some(Self {
            output: path("GITHUB_OUTPUT"),
            summary: path("GITHUB_STEP_SUMMARY"),
            event_name: std::env::var("GITHUB_EVENT_NAME").ok().filter(|v| !v.is_empty()),
            event_path: path("GITHUB_EVENT_PATH"),
        })
    }

    /// What the event that started the workflow asks of the run, judged on the command line's
    /// settings as an input of [`crate::config::Config::resolve`]: an `issues` event with action `labeled`
    /// and the task label makes the run work exactly that issue (branch `upkeep/<N>-…`,
    /// `Closes #N`, questions posted there). Without `--task`, the issue itself becomes the
    /// task: on GitHub read through the forge with its comments and their authors' roles, as
    /// `--issue N`.
    ///
    /// A comment or review event ([`crate::conversation::triggers`]) resumes an issue whose
    /// question a maintainer answered, or works the feedback on the bot's pull request;
    /// [`EventWork::NothingToDo`] says such an event does not concern upkeep. A checks event
    /// ([`crate::conversation::check_events`]) works the bot's pull request whose checks failed.
    pub(crate) async fn judge_event(&self, settings: &RunSettings) -> Result<EventWork, ConfigError> {
        let Some(event_name) = self.event_name.as_deref() else {
            return Ok(EventWork::AsConfigured);
        };
        if crate::conversation::triggers::EVENTS.contains(&event_name) {
            let text = self.read_payload(event_name)?;
            return crate::conversation::triggers::judge(settings, event_name, &text).await;
        }
        if crate::conversation::check_events::EVENTS.contains(&event_name) {
            let text = self.read_payload(event_name)?;
            return crate::conversation::check_events::judge(settings, event_name, &text).await;
        }
        if event_name != "issues" {
            return Ok(EventWork::AsConfigured);
        }
        let path = self
            .event_path
            .as_ref()
            .ok_or_else(|| ConfigError("GITHUB_EVENT_NAME is `issues` but GITHUB_EVENT_PATH is not set".into()))?;
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError(format!("reading the event payload {}: {error}", path.display())))?;
        let label = settings.operator_label();
        let issue = match read_issues_event(&text, &label, &settings.source)? {
            EventTask::Ignored(why) => {
                eprintln!("upkeep: {}; working as configured", crate::text::escape_terminal(&why));
                return Ok(EventWork::AsConfigured);
            }
            EventTask::Issue(issue) => issue,
        };
        eprintln!("upkeep: working issue #{} (labelled `{label}`)", issue.number);
        // On GitHub the cycle reads the issue and its comments as `--issue N` does, so every
        // comment reaches the model with its author's role through the one conversation
        // renderer; other forges cannot read the issue back and work from the payload.
        let task = (settings.forge != crate::kinds::ForgeKind::Github).then(|| issue_task(&issue));
        Ok(EventWork::LabelledIssue {
            number: issue.number,
            task,
        })
    }

    /// The payload of the event `event_name` that started the workflow.
    fn read_payload(&self, event_name: &str) -> Result<String, ConfigError> {
        let path = self.event_path.as_ref().ok_or_else(|| {
            ConfigError(format!(
                "GITHUB_EVENT_NAME is `{event_name}` but GITHUB_EVENT_PATH is not set"
            ))
        })?;
        std::fs::read_to_string(path)
            .map_err(|error| ConfigError(format!("reading the event payload {}: {error}", path.display())))
    }

    /// Writes the outputs, the job summary and an annotation for how the run ended. Problems
    /// writing them are reported but do not change the exit code: the run's work is done.
    pub(crate) fn report(&self, summary: &RunSummary, context: &RunContext, redactor: &Redactor) {
        let problems = [
            self.append_outputs(&outputs(summary), redactor),
            self.append_summary(&job_summary(summary, context), redactor),
        ];
        let mut stderr = std::io::stderr().lock();
        for problem in problems.into_iter().filter_map(Result::err) {
            let _ = writeln!(stderr, "{}", workflow_command("warning", &redactor.redact(&problem)));
        }
        if let Some((command, message)) = annotation(summary) {
            let _ = writeln!(stderr, "{}", workflow_command(command, &redactor.redact(&message)));
        }
    }

    /// Appends step outputs (redacted) in the runner's file-command format; `Err` says why they
    /// could not be written.
    pub(crate) fn append_outputs(&self, outputs: &[(&str, String)], redactor: &Redactor) -> Result<(), String> {
        let Some(path) = &self.output else {
            return Ok(());
        };
        let text: String = outputs
            .iter()
            .map(|(name, value)| format_output(name, &redactor.redact(value)))
            .collect();
        append(path, &text).map_err(|error| format!("could not write the step outputs to {}: {error}", path.display()))
    }

    /// Appends Markdown (redacted, control characters escaped) to the job summary; `Err` says
    /// why it could not be written.
    pub(crate) fn append_summary(&self, markdown: &str, redactor: &Redactor) -> Result<(), String> {
        let Some(path) = &self.summary else {
            return Ok(());
        };
        append(path, &crate::text::escape_terminal(&redactor.redact(markdown)))
            .map_err(|error| format!("could not write the job summary to {}: {error}", path.display()))
    }
}

fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    // One write per file: the runner reads the file after the step, and a half-written
    // heredoc would make it fail the step.
    file.write_all(text.as_bytes())?;
    file.flush()
}

/// Pauses the runner's processing of workflow commands until dropped. While paused, a line on
/// stdout or stderr that looks like a workflow command is only text.
pub(crate) struct CommandsPaused {
    token: String,
}

/// Starts a pause; the token is random so nothing in the paused output can end it early.
pub(crate) fn pause_workflow_commands() -> CommandsPaused {
    let token = format!("upkeep-{}", uuid::Uuid::new_v4().simple());
    let _ = writeln!(std::io::stderr().lock(), "::stop-commands::{token}");
    CommandsPaused { token }
}

impl Drop for CommandsPaused {
    fn drop(&mut self) {
        // Also on unwinding: the command processor is shared by the whole job, and later steps
        // must not be left with their commands ignored.
        let _ = writeln!(std::io::stderr().lock(), "::{}::", self.token);
    }
}
