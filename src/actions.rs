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
//! - Everything written to the summary, the outputs and annotations passes secret redaction.
//! - Workflow commands (`::error::` and friends) go to stderr. GitHub's documentation shows them
//!   on stdout, but the runner feeds stdout and stderr to the same command processor (actions/
//!   runner `ScriptHandler.cs`: an `OutputManager` over `ActionCommandManager` on each stream),
//!   and stderr keeps `--json` stdout pure JSON Lines.
//! - While the run goes, command processing is paused with `::stop-commands::<random token>`:
//!   the progress lines carry text from the model, from issues anyone can open and from diffs,
//!   and a line there that reads `::add-mask::…` or `::error::…` must not act on the job.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use serde::Deserialize;

use crate::config::{Config, ConfigError, DEFAULT_LABEL, RepoSource};
use crate::exit::ExitStatus;
use crate::forge::{Forge, IssueComment, OWN_QUESTION_AUTHOR, github::GitHubForge};
use crate::kinds::ForgeKind;
use crate::secrets::Redactor;
use crate::summary::RunSummary;

/// Longest question or error kept in an output, the summary or an annotation. GitHub caps a
/// job's outputs at 1 MB and a step summary at 1 MiB; a runaway model reply must not break
/// either, and a human reads the whole text in the log anyway.
const MAX_TEXT_CHARS: usize = 32 * 1024;

/// Longest issue body or comment put into the task text (the prompt has a budget).
const MAX_ISSUE_TEXT_CHARS: usize = 16 * 1024;

/// What the runner gives this step. Exists only inside GitHub Actions.
#[derive(Debug, Clone, Default)]
pub struct Actions {
    output: Option<PathBuf>,
    summary: Option<PathBuf>,
    event_name: Option<String>,
    event_path: Option<PathBuf>,
}

/// What the report says about the run besides the [`RunSummary`].
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    /// The repository as the user named it.
    pub repo: String,
    /// The issue the run was started for.
    pub issue: Option<u64>,
    pub dry_run: bool,
}

impl Actions {
    /// `Some` when running as a GitHub Actions step (`GITHUB_ACTIONS=true`, as the runner sets).
    pub fn from_env() -> Option<Self> {
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

    /// Applies the event that started the workflow: an `issues` event with action `labeled` and
    /// the task label makes the run work exactly that issue (branch `upkeep/<N>-…`, `Closes #N`,
    /// questions posted there). Without `--task`, the issue itself (title, body and, on GitHub,
    /// its comments, where answers to earlier questions are) becomes the task.
    ///
    /// A comment or review event ([`crate::conversation::events`]) resumes an issue whose
    /// question a maintainer answered, or works the feedback on the bot's pull request;
    /// `Ok(Some(why))` says such an event does not concern upkeep, and the run does nothing.
    pub async fn apply_event(&self, config: &mut Config) -> Result<Option<String>, ConfigError> {
        let Some(event_name) = self.event_name.as_deref() else {
            return Ok(None);
        };
        if crate::conversation::events::EVENTS.contains(&event_name) {
            let path = self.event_path.as_ref().ok_or_else(|| {
                ConfigError(format!(
                    "GITHUB_EVENT_NAME is `{event_name}` but GITHUB_EVENT_PATH is not set"
                ))
            })?;
            let text = std::fs::read_to_string(path)
                .map_err(|error| ConfigError(format!("reading the event payload {}: {error}", path.display())))?;
            return crate::conversation::events::apply(config, event_name, &text).await;
        }
        if event_name != "issues" {
            return Ok(None);
        }
        let path = self
            .event_path
            .as_ref()
            .ok_or_else(|| ConfigError("GITHUB_EVENT_NAME is `issues` but GITHUB_EVENT_PATH is not set".into()))?;
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError(format!("reading the event payload {}: {error}", path.display())))?;
        let label = task_label(config);
        let issue = match read_issues_event(&text, &label, &config.source)? {
            EventTask::Ignored(why) => {
                eprintln!("upkeep: {}; working as configured", crate::text::escape_terminal(&why));
                return Ok(None);
            }
            EventTask::Issue(issue) => issue,
        };
        eprintln!("upkeep: working issue #{} (labelled `{label}`)", issue.number);
        config.issue = Some(issue.number);
        if config.task.is_none() {
            let comments = issue_comments(config, &label, issue.number).await;
            config.task = Some(issue_task(&issue, &comments));
        }
        Ok(None)
    }

    /// Writes the outputs, the job summary and an annotation for how the run ended. Problems
    /// writing them are reported but do not change the exit code: the run's work is done.
    pub fn report(&self, summary: &RunSummary, context: &RunContext, redactor: &Redactor) {
        let mut problems = Vec::new();
        if let Some(path) = &self.output {
            let text: String = outputs(summary)
                .iter()
                .map(|(name, value)| format_output(name, &redactor.redact(value)))
                .collect();
            if let Err(error) = append(path, &text) {
                problems.push(format!(
                    "could not write the step outputs to {}: {error}",
                    path.display()
                ));
            }
        }
        if let Some(path) = &self.summary {
            let text = redactor.redact(&job_summary(summary, context));
            if let Err(error) = append(path, &text) {
                problems.push(format!(
                    "could not write the job summary to {}: {error}",
                    path.display()
                ));
            }
        }
        let mut stderr = std::io::stderr().lock();
        for problem in problems {
            let _ = writeln!(stderr, "{}", workflow_command("warning", &redactor.redact(&problem)));
        }
        if let Some(line) = annotation(summary) {
            let _ = writeln!(stderr, "{}", redactor.redact(&line));
        }
    }
}

fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    // One write per file: the runner reads the file after the step, and a half-written
    // heredoc would make it fail the step.
    file.write_all(text.as_bytes())?;
    file.flush()
}

/// The label that marks tasks: `--label`/`UPKEEP_LABEL`, the operator's config, or `upkeep`.
/// The repository's `.upkeep.toml` is not read yet (it needs a clone); workflows check the
/// label in their `if:` anyway.
fn task_label(config: &Config) -> String {
    config
        .overrides
        .label
        .clone()
        .or_else(|| config.operator.label.clone())
        .unwrap_or_else(|| DEFAULT_LABEL.to_owned())
}

/// An issue named by an `issues` `labeled` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelledIssue {
    pub number: u64,
    pub title: String,
    pub body: String,
}

/// What an `issues` event means for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventTask {
    /// Work this issue.
    Issue(LabelledIssue),
    /// The event is not for upkeep (another action or label, a closed issue, another
    /// repository); the reason is shown and the run goes on as configured.
    Ignored(String),
}

/// The parts of GitHub's `issues` webhook payload upkeep reads.
#[derive(Deserialize)]
struct IssuesEvent {
    action: Option<String>,
    label: Option<NamedLabel>,
    issue: Option<EventIssue>,
    repository: Option<EventRepository>,
}

#[derive(Deserialize)]
struct NamedLabel {
    name: String,
}

#[derive(Deserialize)]
struct EventIssue {
    number: u64,
    #[serde(default)]
    title: String,
    /// `null` when the issue has no description.
    body: Option<String>,
    state: Option<String>,
}

#[derive(Deserialize)]
struct EventRepository {
    full_name: String,
}

/// Reads an `issues` event payload. A payload that is not JSON of the documented shape is a
/// configuration error: the runner always writes one, so something is badly wrong.
pub fn read_issues_event(payload: &str, task_label: &str, source: &RepoSource) -> Result<EventTask, ConfigError> {
    let event: IssuesEvent = serde_json::from_str(payload)
        .map_err(|error| ConfigError(format!("the `issues` event payload is not valid: {error}")))?;
    let action = event.action.unwrap_or_default();
    if action != "labeled" {
        return Ok(EventTask::Ignored(format!(
            "the `issues` event is `{action}`, not `labeled`"
        )));
    }
    let label = event.label.map(|l| l.name).unwrap_or_default();
    // GitHub treats label names case-insensitively.
    if !label.eq_ignore_ascii_case(task_label) {
        return Ok(EventTask::Ignored(format!(
            "the issue was labelled `{label}`, not the task label `{task_label}`"
        )));
    }
    let issue = event
        .issue
        .ok_or_else(|| ConfigError("the `issues` event payload has no `issue`".into()))?;
    if issue.state.as_deref() == Some("closed") {
        return Ok(EventTask::Ignored(format!("issue #{} is closed", issue.number)));
    }
    // The number means nothing in another repository (the action's `repo` input can name one).
    if let (RepoSource::GitHub { owner, name, .. }, Some(repository)) = (source, &event.repository) {
        if !repository.full_name.eq_ignore_ascii_case(&format!("{owner}/{name}")) {
            return Ok(EventTask::Ignored(format!(
                "the labelled issue belongs to {}, not to {owner}/{name}",
                repository.full_name
            )));
        }
    }
    Ok(EventTask::Issue(LabelledIssue {
        number: issue.number,
        title: issue.title,
        body: issue.body.unwrap_or_default(),
    }))
}

/// The issue's comments, from the forge. The payload has none, and an answer to a question the
/// bot asked earlier is a comment. Failing to read them is not fatal: title and body remain.
async fn issue_comments(config: &Config, label: &str, number: u64) -> Vec<IssueComment> {
    let RepoSource::GitHub { owner, name, .. } = &config.source else {
        return Vec::new();
    };
    if config.forge != ForgeKind::Github {
        return Vec::new();
    }
    let redactor = crate::orchestrator::redactor_for(config);
    let forge = match GitHubForge::new(&config.github, owner, name, config.draft) {
        Ok(forge) => forge,
        Err(error) => {
            eprintln!(
                "upkeep: {}",
                crate::text::escape_terminal(&redactor.redact(&error.to_string()))
            );
            return Vec::new();
        }
    };
    match forge.task_issues(label).await {
        Ok(issues) => issues
            .into_iter()
            .find(|issue| issue.number == number)
            .map(|issue| issue.comments)
            .unwrap_or_default(),
        Err(error) => {
            let error = crate::text::escape_terminal(&redactor.redact(&error.to_string()));
            eprintln!(
                "upkeep: could not read the comments on issue #{number} ({error}); working from its title and body"
            );
            Vec::new()
        }
    }
}

/// The task text for an issue: `Issue #N: title`, the body, and the comments in order.
pub fn issue_task(issue: &LabelledIssue, comments: &[IssueComment]) -> String {
    let mut text = format!("Issue #{}: {}", issue.number, issue.title.trim());
    let body = issue.body.trim();
    if !body.is_empty() {
        let _ = write!(
            text,
            "\n\n{}",
            crate::text::marked(crate::text::prefix_chars(body, MAX_ISSUE_TEXT_CHARS), " […]")
        );
    }
    if !comments.is_empty() {
        text.push_str("\n\n## Comments on the issue\n");
        for comment in comments {
            // The bot's own question reads as its own, so the comment after it reads as the answer.
            let heading = if comment.author == OWN_QUESTION_AUTHOR {
                format!("{OWN_QUESTION_AUTHOR} asked")
            } else {
                format!("comment by {}", comment.author)
            };
            let body = crate::text::marked(
                crate::text::prefix_chars(comment.body.trim_end(), MAX_ISSUE_TEXT_CHARS),
                " […]",
            );
            let _ = write!(text, "\n> {heading}:\n> {}\n", body.replace('\n', "\n> "));
        }
    }
    text
}

/// The step outputs, in the order they are written. Every one is always present.
pub fn outputs(summary: &RunSummary) -> Vec<(&'static str, String)> {
    let urls = pull_request_urls(summary);
    vec![
        ("outcome", summary.outcome.clone()),
        ("exit-code", summary.status.code().to_string()),
        // The latest one: in continuous mode each cycle opens its own, and the newest is the
        // one a follow-up step most likely wants; all of them are in `pull-request-urls`.
        ("pull-request-url", urls.last().cloned().unwrap_or_default()),
        ("pull-request-urls", urls.join("\n")),
        (
            "question",
            summary
                .question
                .as_deref()
                .map(|q| crate::text::marked(crate::text::prefix_chars(q, MAX_TEXT_CHARS), " […]"))
                .unwrap_or_default(),
        ),
    ]
}

/// Real addresses only: a dry run's "(dry run: not pushed) …" is not something to open.
fn pull_request_urls(summary: &RunSummary) -> Vec<String> {
    let mut urls: Vec<String> = Vec::new();
    for pr in &summary.pull_requests {
        if pr.url.contains("://") && !urls.contains(&pr.url) {
            urls.push(pr.url.clone());
        }
    }
    urls
}

/// One output in the runner's file-command format.
pub fn format_output(name: &str, value: &str) -> String {
    if !value.contains(['\n', '\r']) {
        return format!("{name}={value}\n");
    }
    // A delimiter inside the value would end it early; a fresh UUID practically never occurs,
    // and the loop makes "practically" certain.
    let delimiter = loop {
        let candidate = format!("ghadelimiter_{}", uuid::Uuid::new_v4());
        if !value.contains(&candidate) {
            break candidate;
        }
    };
    format!("{name}<<{delimiter}\n{value}\n{delimiter}\n")
}

/// A workflow command with its data escaped as actions/toolkit escapes it, so a line break or a
/// `%` in the message cannot end or alter the command.
pub fn workflow_command(command: &str, message: &str) -> String {
    format!("::{command}::{}", escape_data(message))
}

pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// The annotation for how the run ended: an error for failures, a warning when a budget cut it
/// short, a notice for a question; none for success.
pub fn annotation(summary: &RunSummary) -> Option<String> {
    let code = summary.status.code();
    let error = summary
        .error
        .as_deref()
        .map(|e| crate::text::marked(crate::text::prefix_chars(e, MAX_TEXT_CHARS), " […]"));
    match summary.status {
        ExitStatus::Done => None,
        ExitStatus::Failure | ExitStatus::Usage | ExitStatus::Interrupted => {
            let what = match summary.status {
                ExitStatus::Usage => "configuration error",
                ExitStatus::Interrupted => "interrupted",
                _ => "failed",
            };
            let detail = error.map(|e| format!(": {e}")).unwrap_or_default();
            Some(workflow_command(
                "error",
                &format!("upkeep {what} (exit code {code}){detail}"),
            ))
        }
        ExitStatus::Budget => Some(workflow_command(
            "warning",
            &format!("upkeep stopped: a budget cut the cycle short (exit code {code})"),
        )),
        ExitStatus::Question => {
            let question = summary
                .question
                .as_deref()
                .map(|q| crate::text::marked(crate::text::prefix_chars(q, MAX_TEXT_CHARS), " […]"));
            Some(workflow_command(
                "notice",
                &format!(
                    "upkeep asked a question (exit code {code}): {}",
                    question.unwrap_or_default()
                ),
            ))
        }
    }
}

fn headline(outcome: &str) -> &'static str {
    match outcome {
        "pull_request" => "opened a pull request",
        "completed" => "completed the task",
        "no_tasks" => "found nothing to do",
        "max_cycles" => "stopped after --max-cycles",
        "question" => "has a question for a human",
        "limit" => "stopped: a budget cut the cycle short",
        "interrupted" => "was interrupted",
        "usage_error" => "could not start: configuration error",
        _ => "failed",
    }
}

/// The job summary: what happened, the pull requests, the question, the usage. Markdown.
pub fn job_summary(summary: &RunSummary, context: &RunContext) -> String {
    let mut text = String::new();
    let dry = if context.dry_run { " (dry run)" } else { "" };
    let _ = writeln!(text, "### upkeep {}{dry}\n", headline(&summary.outcome));
    let _ = writeln!(text, "- **Repository:** `{}`", inline_code(&context.repo));
    if let Some(issue) = context.issue {
        let _ = writeln!(text, "- **Issue:** #{issue}");
    }
    let _ = writeln!(
        text,
        "- **Outcome:** `{}` (exit code {})",
        summary.outcome,
        summary.status.code()
    );
    let _ = writeln!(text, "- **Cycles:** {}", summary.cycles);
    let _ = writeln!(text, "- **Turns:** {}", summary.turns);
    let _ = writeln!(
        text,
        "- **Tokens:** {} input + {} output = {}",
        summary.usage.input_tokens,
        summary.usage.output_tokens,
        summary.usage.total()
    );
    let _ = writeln!(text, "- **Cost:** ${:.4}", summary.cost_usd);

    if !summary.pull_requests.is_empty() {
        text.push_str("\n#### Pull requests\n\n");
        for pr in &summary.pull_requests {
            let title = escape_markdown(&pr.title);
            let verb = if pr.updated { "updated" } else { "opened" };
            let link = if pr.url.contains("://") {
                format!("[{title}](<{}>)", pr.url.replace(['<', '>'], ""))
            } else {
                format!("{title}: {}", escape_markdown(&pr.url))
            };
            let _ = writeln!(text, "- {link} ({verb}, branch `{}`)", inline_code(&pr.branch));
        }
    }
    if let Some(question) = &summary.question {
        text.push_str("\n#### Question\n\n");
        for line in crate::text::marked(crate::text::prefix_chars(question, MAX_TEXT_CHARS), " […]").lines() {
            // Markdown in a question (code, lists) renders; raw HTML does not.
            let _ = writeln!(text, "> {}", line.replace('<', "&lt;"));
        }
        let place = context
            .issue
            .map(|n| format!("on issue #{n}"))
            .unwrap_or_else(|| "on the issue it concerns, or in the next run's task".into());
        let _ = writeln!(text, "\nAnswer it {place}, then run upkeep again.");
    }
    if let Some(error) = &summary.error {
        let error = crate::text::marked(crate::text::prefix_chars(error, MAX_TEXT_CHARS), " […]");
        let fence = "`".repeat(longest_backtick_run(&error).max(2) + 1);
        let _ = write!(text, "\n#### Error\n\n{fence}text\n{error}\n{fence}\n");
    }
    text.push('\n');
    text
}

fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\`*_[]<>#|".contains(c) {
            out.push('\\');
        }
        out.push(if c == '\n' || c == '\r' { ' ' } else { c });
    }
    out
}

/// Text inside single backticks cannot hold a backtick or a line break.
fn inline_code(text: &str) -> String {
    text.replace('`', "'").replace(['\n', '\r'], " ")
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// Pauses the runner's processing of workflow commands until dropped. While paused, a line on
/// stdout or stderr that looks like a workflow command is only text.
pub struct CommandsPaused {
    token: String,
}

/// Starts a pause; the token is random so nothing in the paused output can end it early.
pub fn pause_workflow_commands() -> CommandsPaused {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn github() -> RepoSource {
        RepoSource::GitHub {
            owner: "octo".into(),
            name: "widgets".into(),
            clone_url: "https://github.com/octo/widgets.git".into(),
        }
    }

    fn payload(action: &str, label: &str, repo: &str) -> String {
        serde_json::json!({
            "action": action,
            "label": {"name": label},
            "issue": {"number": 7, "title": "Fix it", "body": null, "state": "open"},
            "repository": {"full_name": repo},
        })
        .to_string()
    }

    #[test]
    fn only_the_task_label_on_this_repository_selects_the_issue() {
        let task = read_issues_event(&payload("labeled", "Upkeep", "Octo/Widgets"), "upkeep", &github());
        assert_eq!(
            task.expect("valid"),
            EventTask::Issue(LabelledIssue {
                number: 7,
                title: "Fix it".into(),
                body: String::new()
            })
        );
        for (action, label, repo) in [
            ("opened", "upkeep", "octo/widgets"),
            ("labeled", "bug", "octo/widgets"),
            ("labeled", "upkeep", "octo/other"),
        ] {
            let task = read_issues_event(&payload(action, label, repo), "upkeep", &github()).expect("valid");
            assert!(
                matches!(task, EventTask::Ignored(_)),
                "{action} {label} {repo}: {task:?}"
            );
        }
        assert!(read_issues_event("not json", "upkeep", &github()).is_err());
    }

    #[test]
    fn issue_task_has_title_body_and_comments_in_order() {
        let issue = LabelledIssue {
            number: 3,
            title: "Pick a license".into(),
            body: "We need one.".into(),
        };
        let comments = [
            IssueComment::new(OWN_QUESTION_AUTHOR, "MIT or Apache-2.0?"),
            IssueComment::new("alice", "MIT,\nplease."),
        ];
        let text = issue_task(&issue, &comments);
        assert!(text.starts_with("Issue #3: Pick a license\n\nWe need one."), "{text}");
        let asked = text.find("asked:\n> MIT or Apache-2.0?").expect("question shown");
        let answer = text.find("comment by alice:\n> MIT,\n> please.").expect("answer shown");
        assert!(asked < answer, "{text}");
        assert_eq!(issue_task(&issue, &[]), "Issue #3: Pick a license\n\nWe need one.");
    }

    #[test]
    fn multi_line_values_use_a_heredoc_whose_delimiter_is_not_in_the_value() {
        assert_eq!(format_output("outcome", "no_tasks"), "outcome=no_tasks\n");
        assert_eq!(format_output("question", ""), "question=\n");
        let text = format_output("question", "a\nb");
        let (first, rest) = text.split_once('\n').expect("lines");
        let delimiter = first.strip_prefix("question<<").expect("heredoc");
        assert!(delimiter.starts_with("ghadelimiter_"));
        assert_eq!(rest, format!("a\nb\n{delimiter}\n"));
    }

    #[test]
    fn annotation_data_is_escaped_like_the_toolkit() {
        assert_eq!(escape_data("50%\r\ndone"), "50%25%0D%0Adone");
        assert_eq!(workflow_command("error", "a\nb"), "::error::a%0Ab");
    }

    #[test]
    fn markdown_escaping_keeps_titles_and_code_intact() {
        assert_eq!(escape_markdown("Fix [x] <b>"), "Fix \\[x\\] \\<b\\>");
        assert_eq!(longest_backtick_run("a ``` b ` c"), 3);
        assert_eq!(
            crate::text::marked(crate::text::prefix_chars("héllo", 2), " […]"),
            "hé […]"
        );
    }
}
