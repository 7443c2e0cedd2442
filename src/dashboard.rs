//! `dashboard = true`: after every run, the repository's "upkeep dashboard" issue says what the
//! bot is doing there: its open pull requests, those whose failing checks it stopped working
//! or on which no check reported (they need a human), the questions waiting for an answer, the pending
//! tasks, the limits, and the last run's outcome and cost (DESIGN section 13).
//!
//! Everything shown is read from the forge at the end of the run (nothing is remembered
//! between runs), so whichever worker ran last wrote a complete picture. Forge text is never
//! copied into the issue: issues and pull requests appear as `#N` references (GitHub renders
//! their titles), bot branches by name, and the run's error as one escaped line, so nothing
//! anyone wrote in an issue can mention people or inject Markdown through the dashboard.
//! How the issue is found and kept single is the forge's business
//! ([`crate::forge::github::dashboard`]). A dashboard that cannot be written is a warning: the
//! run's own work is done.

use std::fmt::Write as _;

use super::limits::Limits;
use crate::events::{Event, EventSink, Scope};
use crate::forge::{DashboardUpdate, Forge, OpenPullRequest, TaskIssue};
use crate::summary::RunSummary;

/// Longest error text shown.
const MAX_ERROR_CHARS: usize = 300;

/// What the dashboard needs from the run's last cycle.
#[derive(Debug, Clone)]
pub struct DashboardPlan {
    pub base: String,
    pub label: String,
    pub limits: Limits,
}

/// Updates the dashboard issue and says what happened.
pub async fn update(forge: &dyn Forge, plan: &DashboardPlan, summary: &RunSummary, events: &EventSink) {
    let state = match read_state(forge, plan).await {
        Ok(state) => state,
        Err(error) => {
            events.alert(&format!("upkeep: warning: the dashboard was not updated: {error}"));
            return;
        }
    };
    // Whatever went into it (an error message), no secret leaves through the issue.
    let body = events
        .redactor()
        .redact(&render(plan, &state, summary, jiff::Timestamp::now()));
    match forge.update_dashboard(&body).await {
        Ok(Some(update)) => {
            let (url, action) = match update {
                DashboardUpdate::Created(url) => (url, "created"),
                DashboardUpdate::Updated(url) => (url, "updated"),
            };
            events.emit(
                Scope::default(),
                Event::Dashboard {
                    url,
                    action: action.to_owned(),
                },
            );
        }
        Ok(None) => {
            events.say("upkeep: no dashboard written: dry runs write none, and only the github forge keeps one")
        }
        Err(error) => events.alert(&format!("upkeep: warning: the dashboard was not updated: {error}")),
    }
}

/// What the forge shows now.
pub struct ForgeState {
    pub open: Vec<OpenPullRequest>,
    pub issues: Vec<TaskIssue>,
    pub opened_last_hour: Option<usize>,
    /// Open bot pull requests whose failing checks upkeep stopped working, or that it cannot keep
    /// mergeable (DESIGN section 14).
    pub needs_human: Vec<u64>,
    /// Open bot pull requests on whose head upkeep said no check appeared (DESIGN section 14,
    /// "Pushes that start no checks").
    pub no_checks: Vec<u64>,
}

/// Open pull requests whose comments are read for the note that upkeep stopped, at most.
const MAX_READ_FOR_NOTES: usize = 10;

async fn read_state(forge: &dyn Forge, plan: &DashboardPlan) -> Result<ForgeState, crate::forge::ForgeError> {
    let open = forge.open_pull_requests(&plan.base).await?;
    let issues = forge.task_issues(&plan.label).await?;
    let hour_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
    let opened_last_hour = forge
        .pull_request_activity(&plan.base, hour_ago)
        .await?
        .opened_since
        .map(|branches| branches.len());
    // A pull request needs a human once the bot said on it that it stopped working its checks,
    // or that no check appeared on it (the notes' markers, read like the fix attempts: from
    // the bot's own comments only). A pull request whose comments cannot be read is left out
    // of that list, not the dashboard.
    // A note about an earlier head commit no longer holds once someone pushed: only a note on
    // the current head counts (any note, where the forge does not say the head).
    let mut needs_human = Vec::new();
    let mut no_checks = Vec::new();
    let numbered = open.iter().filter_map(|pr| Some((pr.number?, pr.head_sha.as_deref())));
    for (number, head) in numbered.take(MAX_READ_FOR_NOTES) {
        let on_head = |said: &[String]| {
            said.iter()
                .any(|sha| head.is_none_or(|head| sha.eq_ignore_ascii_case(head)))
        };
        match forge.fix_attempts(number).await {
            Ok(attempts) if on_head(&attempts.gave_up_on) => needs_human.push(number),
            Ok(attempts) if on_head(&attempts.no_checks_on) => no_checks.push(number),
            Ok(_) => {}
            Err(error) => tracing::warn!("could not read the comments of pull request #{number}: {error}"),
        }
        // Or that it cannot keep it mergeable (a human's commits on it, or a re-doing that did
        // not help).
        let pull = crate::forge::mergeable::PullRequestRef {
            number: Some(number),
            branch: String::new(),
        };
        match forge.mergeable_notes(&pull).await {
            Ok(notes) if notes.needs_human(head) && !needs_human.contains(&number) => needs_human.push(number),
            Ok(_) => {}
            Err(error) => tracing::warn!("could not read the comments of pull request #{number}: {error}"),
        }
    }
    Ok(ForgeState {
        open,
        issues,
        opened_last_hour,
        needs_human,
        no_checks,
    })
}

/// Inline code that cannot be closed early or span lines, its control characters escaped
/// (a provider's error text can carry an ANSI sequence or a carriage return).
fn code(text: &str) -> String {
    format!(
        "`{}`",
        crate::text::escape_control(&text.replace('`', "'").replace(['\n', '\r'], " "))
    )
}

fn reference(number: Option<u64>, branch: &str) -> String {
    match number {
        Some(number) => format!("#{number} ({})", code(branch)),
        None => code(branch),
    }
}

/// The issue's body (the marker is the forge's to add).
pub fn render(plan: &DashboardPlan, state: &ForgeState, summary: &RunSummary, now: jiff::Timestamp) -> String {
    let mut text = String::from(
        "## upkeep dashboard\n\nupkeep rewrites this issue after every run on this repository; edits here are overwritten.\n\n",
    );
    let _ = writeln!(text, "### Last run\n");
    let _ = writeln!(
        text,
        "- {} (exit code {}) at {}",
        code(summary.outcome.name()),
        summary.status().code(),
        now.round(jiff::Unit::Second).unwrap_or(now)
    );
    let _ = writeln!(
        text,
        "- {} cycle(s), {} input + {} output tokens, ${:.4}",
        summary.cycles, summary.usage.input_tokens, summary.usage.output_tokens, summary.cost_usd
    );
    for pull_request in &summary.pull_requests {
        let verb = if pull_request.updated { "updated" } else { "opened" };
        let _ = writeln!(
            text,
            "- {verb} {}",
            reference(pull_request.number, &pull_request.branch)
        );
    }
    if let Some(error) = &summary.error {
        let line = error.lines().next().unwrap_or_default();
        let _ = writeln!(
            text,
            "- error: {}",
            code(&crate::text::marked(
                crate::text::prefix_chars(line, MAX_ERROR_CHARS),
                "…"
            ))
        );
    }

    let _ = writeln!(text, "\n### Open pull requests\n");
    list(&mut text, state.open.iter().map(|pr| reference(pr.number, &pr.branch)));

    let _ = writeln!(
        text,
        "\n### Pull requests needing a human\n\nupkeep stopped working their failing checks, no check reported on them, or it cannot keep them mergeable, and said why on each.\n"
    );
    list(
        &mut text,
        state.open.iter().filter_map(|pr| {
            let number = pr.number?;
            if state.needs_human.contains(&number) {
                Some(reference(pr.number, &pr.branch))
            } else if state.no_checks.contains(&number) {
                Some(format!("{}: no checks reported", reference(pr.number, &pr.branch)))
            } else {
                None
            }
        }),
    );

    let waiting: Vec<&TaskIssue> = state
        .issues
        .iter()
        // The same rule the conversation resumes by: the bot's last question, with no
        // maintainer's comment after it (an outsider's "+1" answers nothing).
        .filter(|issue| issue.pending_question().is_some())
        .collect();
    let _ = writeln!(text, "\n### Questions waiting for an answer\n");
    list(&mut text, waiting.iter().map(|issue| format!("#{}", issue.number)));

    let pending = state.issues.iter().filter(|issue| {
        let prefix = format!("{}{}-", crate::repo::BOT_BRANCH_PREFIX, issue.number);
        !waiting.iter().any(|w| w.number == issue.number) && !state.open.iter().any(|pr| pr.branch.starts_with(&prefix))
    });
    let _ = writeln!(text, "\n### Pending tasks (issues labelled {})\n", code(&plan.label));
    list(&mut text, pending.map(|issue| format!("#{}", issue.number)));

    let _ = writeln!(text, "\n### Limits\n");
    let limit = |value: Option<u32>| value.map_or_else(|| "no limit".to_owned(), |v| v.to_string());
    let _ = writeln!(
        text,
        "- open bot pull requests: {} (`pr_limit`: {})",
        state.open.len(),
        limit(plan.limits.pr_limit)
    );
    let hourly = state
        .opened_last_hour
        .map_or_else(|| "unknown".to_owned(), |n| n.to_string());
    let _ = writeln!(
        text,
        "- opened in the last hour: {hourly} (`pr_hourly_limit`: {})",
        limit(plan.limits.pr_hourly_limit)
    );
    for schedule in &plan.limits.schedules {
        let _ = writeln!(text, "- schedule: {}", code(&schedule.describe()));
    }
    text
}

fn list(text: &mut String, items: impl Iterator<Item = String>) {
    let mut any = false;
    for item in items {
        any = true;
        let _ = writeln!(text, "- {item}");
    }
    if !any {
        let _ = writeln!(text, "- none");
    }
}

#[cfg(test)]
#[path = "dashboard_tests.rs"]
mod tests;
