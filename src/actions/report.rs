//! What a run reports to the workflow: step outputs in the runner's file-command format, the
//! job summary in Markdown, and one annotation for how the run ended. Every text from the run
//! (titles, questions, errors) is escaped for where it lands, so it renders as text and cannot
//! end a heredoc, a command or a Markdown construct early.
//!
//! Much of that text is untrusted (the model's replies, a provider's error body, issue and pull
//! request text), so every sink also passes it through [`crate::text::escape_terminal`], the one
//! escaping for what people and runners read: [`format_output`] and [`workflow_command`] here,
//! and the job summary where it is appended ([`super::Actions::append_summary`]). A raw ESC or
//! BEL never reaches the log viewer, and a carriage return cannot split an output line. Only
//! `--json` and `--trace` carry the exact text.

use std::fmt::Write as _;

use super::{MAX_TEXT_CHARS, RunContext};
use crate::outcome::Outcome;
use crate::summary::RunSummary;

/// The step outputs, in the order they are written. Every one is always present.
pub(crate) fn outputs(summary: &RunSummary) -> Vec<(&'static str, String)> {
    let urls = pull_request_urls(summary);
    vec![
        ("outcome", summary.outcome.name().to_owned()),
        ("exit-code", summary.status().code().to_string()),
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
        // One per line; what the last review round still found in a pull request that opened
        // anyway (its body lists them too).
        (
            "unresolved-findings",
            crate::text::marked(
                crate::text::prefix_chars(&summary.unresolved_findings.join("\n"), MAX_TEXT_CHARS),
                " […]",
            ),
        ),
        // A JSON array for `fromJSON()`: each fix attempt made and each pull request given up
        // on, `{"pr", "attempt", "max", "gave_up"}`; empty when there was none.
        (
            "fix-attempts",
            if summary.fix_attempts.is_empty() {
                String::new()
            } else {
                serde_json::to_string(&summary.fix_attempts).unwrap_or_default()
            },
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

/// One output in the runner's file-command format, its value escaped
/// ([`crate::text::escape_terminal`]: line breaks kept, every other control character
/// escaped), so the only line break left is `\n` and the value cannot forge another output.
pub(crate) fn format_output(name: &str, value: &str) -> String {
    let value = crate::text::escape_terminal(value);
    let value = value.as_str();
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
/// `%` in the message cannot end or alter the command, after every other control character is
/// escaped ([`crate::text::escape_terminal`]) so the log viewer shows it as text.
pub(crate) fn workflow_command(command: &str, message: &str) -> String {
    format!("::{command}::{}", escape_data(&crate::text::escape_terminal(message)))
}

pub(crate) fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// The annotation for how the run ended, as the workflow command (`error`, `warning`, `notice`)
/// and its message: an error for failures, a warning when a budget cut it short, a notice for a
/// question; none for success. [`workflow_command`] makes the line.
pub(crate) fn annotation(summary: &RunSummary) -> Option<(&'static str, String)> {
    let code = summary.status().code();
    let error = summary
        .error
        .as_deref()
        .map(|e| crate::text::marked(crate::text::prefix_chars(e, MAX_TEXT_CHARS), " […]"));
    let failed = |what: &str| {
        let detail = error.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
        Some(("error", format!("upkeep {what} (exit code {code}){detail}")))
    };
    match summary.outcome {
        Outcome::PullRequest
        | Outcome::Completed
        | Outcome::NoTasks
        | Outcome::MaxCycles
        | Outcome::PrLimit
        | Outcome::PrHourlyLimit
        | Outcome::OutsideSchedule => None,
        Outcome::Error => failed("failed"),
        Outcome::UsageError => failed("configuration error"),
        Outcome::Interrupted | Outcome::NotStarted => failed("interrupted"),
        Outcome::Limit | Outcome::Stuck | Outcome::FleetBudget => Some((
            "warning",
            format!("upkeep stopped: a budget cut the cycle short (exit code {code})"),
        )),
        Outcome::ChecksFailed => Some((
            "warning",
            format!(
                "upkeep stopped working the failing checks of its pull request; a human needs to look (exit code {code})"
            ),
        )),
        Outcome::Question => {
            let question = summary
                .question
                .as_deref()
                .map(|q| crate::text::marked(crate::text::prefix_chars(q, MAX_TEXT_CHARS), " […]"));
            Some((
                "notice",
                format!(
                    "upkeep asked a question (exit code {code}): {}",
                    question.unwrap_or_default()
                ),
            ))
        }
    }
}

/// What follows "upkeep" in the job summary's headline: each outcome its own words, so none
/// falls into another's (a run held back by a limit, exit 0, was once headlined "failed").
fn headline(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::PullRequest => "opened a pull request",
        Outcome::Completed => "completed the task",
        Outcome::NoTasks => "found nothing to do",
        Outcome::MaxCycles => "stopped after --max-cycles",
        Outcome::PrLimit => "held back: `pr_limit` bot pull requests are open",
        Outcome::PrHourlyLimit => "held back: `pr_hourly_limit` pull requests were opened in the last hour",
        Outcome::OutsideSchedule => "held back: outside its schedule",
        Outcome::Question => "has a question for a human",
        Outcome::ChecksFailed => "stopped fixing its pull request's failing checks: a human needs to look",
        Outcome::Limit => "stopped: a budget cut the cycle short",
        Outcome::Stuck => "stopped: the model repeated the same failing call",
        Outcome::Error => "failed",
        Outcome::UsageError => "could not start: configuration error",
        Outcome::Interrupted => "was interrupted",
        Outcome::NotStarted => "did not start: the fleet was interrupted first",
        Outcome::FleetBudget => "did not start: the fleet's budget was spent",
    }
}

/// The job summary: what happened, the pull requests, the question, the usage. Markdown.
pub(crate) fn job_summary(summary: &RunSummary, context: &RunContext) -> String {
    let mut text = String::new();
    let dry = if context.dry_run { " (dry run)" } else { "" };
    let _ = writeln!(text, "### upkeep {}{dry}\n", headline(summary.outcome));
    let _ = writeln!(text, "- **Repository:** `{}`", inline_code(&context.repo));
    if let Some(issue) = context.issue {
        let _ = writeln!(text, "- **Issue:** #{issue}");
    }
    let _ = writeln!(
        text,
        "- **Outcome:** `{}` (exit code {})",
        summary.outcome,
        summary.status().code()
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
    if !summary.unresolved_findings.is_empty() {
        text.push_str("\n#### Unresolved review findings\n\n");
        text.push_str("The pull request opened after the last review round with these findings:\n\n");
        for finding in &summary.unresolved_findings {
            let _ = writeln!(text, "- {}", escape_markdown(finding));
        }
    }
    if !summary.fix_attempts.is_empty() {
        text.push_str("\n#### Fix attempts\n\n");
        for fix in &summary.fix_attempts {
            if fix.gave_up {
                // The reason may name checks, which the forge named: escaped like any forge text.
                let why = fix
                    .why
                    .as_deref()
                    .map(|why| format!(" ({})", escape_markdown(why)))
                    .unwrap_or_default();
                let _ = writeln!(
                    text,
                    "- #{}: stopped after {} of {} fix attempts{why}; a human needs to look",
                    fix.pr, fix.attempt, fix.max
                );
            } else {
                let _ = writeln!(text, "- #{}: fix attempt {} of {}", fix.pr, fix.attempt, fix.max);
            }
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

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
