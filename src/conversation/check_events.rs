//! The GitHub Actions events that say checks finished on the bot's own pull request:
//! `check_suite` completed (CI apps other than GitHub Actions) and `workflow_run` completed
//! (GitHub Actions workflows, whose check suites start no `check_suite` workflow). Such an event
//! makes the run work that pull request as `upkeep run --pr N` does: review feedback first, then
//! the failing checks (DESIGN section 14, "Triggers").
//!
//! The workflow's job guard admits only a failure on an `upkeep/` branch of the repository
//! itself; upkeep checks the same again from the payload (a workflow can be written without the
//! guard), and the run then refuses any pull request the bot did not open
//! ([`super::follow_up::check_workable`]). An event that does not concern upkeep (a success,
//! another branch, a fork's run, another repository) ends the run at once, doing nothing: a
//! finished check is no reason to work the backlog.
//!
//! GitHub leaves `pull_requests` empty in some cases (a suite that finished before the pull
//! request was opened, and always for a fork's branch); the open pull request is then looked up
//! by its head branch through the forge.

use serde::Deserialize;

use crate::config::{ConfigError, EventWork, RepoSource, RunSettings};
use crate::repo::BOT_BRANCH_PREFIX;

/// The events handled here.
pub(crate) const EVENTS: &[&str] = &["check_suite", "workflow_run"];

/// The conclusions that call for a fix: a failure. `action_required`, `cancelled`, `neutral`,
/// `skipped`, `stale` and `success` ask nothing of the code (as [`crate::forge::checks`]
/// classifies check runs).
const FAILED: [&str; 2] = ["failure", "timed_out"];

/// What a checks event means for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChecksEvent {
    /// Work this pull request (the payload named it).
    PullRequest(u64),
    /// Work the open pull request whose head is this bot branch (the payload named none).
    Branch(String),
    /// Nothing to do, and why.
    Ignored(String),
}

#[derive(Deserialize)]
struct Payload {
    action: Option<String>,
    check_suite: Option<Finished>,
    workflow_run: Option<Finished>,
    repository: Option<EventRepository>,
}

/// The part of a check suite or a workflow run read here (the webhook's documented shape).
#[derive(Deserialize)]
struct Finished {
    #[serde(default)]
    head_branch: Option<String>,
    #[serde(default)]
    conclusion: Option<String>,
    /// Only a workflow run names it; a check suite's head is always in its repository (a fork's
    /// branch has no `head_branch` there).
    #[serde(default)]
    head_repository: Option<EventRepository>,
    #[serde(default)]
    pull_requests: Vec<EventPull>,
}

#[derive(Deserialize)]
struct EventPull {
    number: u64,
    #[serde(default)]
    head: Option<EventRef>,
    #[serde(default)]
    base: Option<EventRef>,
}

#[derive(Deserialize)]
struct EventRef {
    #[serde(rename = "ref", default)]
    ref_name: String,
    #[serde(default)]
    repo: Option<EventRepoRef>,
}

#[derive(Deserialize)]
struct EventRepoRef {
    #[serde(default)]
    id: Option<u64>,
}

#[derive(Deserialize)]
struct EventRepository {
    #[serde(default)]
    full_name: String,
}

/// Reads a `check_suite` or `workflow_run` payload without the forge: whether it concerns a
/// failure on one of the bot's branches of this repository, and which pull request it names.
pub(crate) fn read_checks_event(event_name: &str, payload: &str, source: &RepoSource) -> Result<ChecksEvent, String> {
    let event: Payload = serde_json::from_str(payload)
        .map_err(|error| format!("the `{event_name}` event payload is not valid: {error}"))?;
    let ignored = |why: String| Ok(ChecksEvent::Ignored(why));
    let action = event.action.unwrap_or_default();
    if action != "completed" {
        return ignored(format!(
            "the `{event_name}` event is `{}`, not `completed`",
            escape(&action)
        ));
    }
    let this_repo = match source {
        RepoSource::GitHub { owner, name, .. } => format!("{owner}/{name}"),
        _ => return ignored(format!("`{event_name}` events are read only on GitHub")),
    };
    if let Some(repository) = &event.repository {
        if !repository.full_name.eq_ignore_ascii_case(&this_repo) {
            return ignored(format!(
                "the event belongs to {}, not to {this_repo}",
                escape(&repository.full_name)
            ));
        }
    }
    let finished = match event_name {
        "workflow_run" => event.workflow_run,
        _ => event.check_suite,
    }
    .ok_or_else(|| format!("the `{event_name}` event payload has no `{event_name}`"))?;
    let Some(branch) = finished.head_branch.filter(|branch| !branch.is_empty()) else {
        return ignored(format!(
            "the `{event_name}` event names no head branch in {this_repo} (a fork's branch): not upkeep's"
        ));
    };
    if !branch.starts_with(BOT_BRANCH_PREFIX) {
        return ignored(format!("branch {} is not upkeep's", escape(&branch)));
    }
    if let Some(head) = &finished.head_repository {
        if !head.full_name.eq_ignore_ascii_case(&this_repo) {
            return ignored(format!(
                "the run's branch {} belongs to {} (a fork), not to {this_repo}",
                escape(&branch),
                escape(&head.full_name)
            ));
        }
    }
    let conclusion = finished.conclusion.unwrap_or_default();
    if !FAILED.contains(&conclusion.as_str()) {
        return ignored(format!(
            "the checks on {} ended `{}`: only a failure ({}) needs a fix",
            escape(&branch),
            escape(&conclusion),
            FAILED.join(", ")
        ));
    }
    // A pull request of this repository whose head is the branch (its base and head in the
    // same repository, when the payload says so).
    let named = finished.pull_requests.iter().find(|pull| {
        let head = pull.head.as_ref();
        let same_repo = match (
            head.and_then(|h| h.repo.as_ref()).and_then(|r| r.id),
            pull.base.as_ref().and_then(|b| b.repo.as_ref()).and_then(|r| r.id),
        ) {
            (Some(head), Some(base)) => head == base,
            _ => true,
        };
        head.is_some_and(|h| h.ref_name == branch) && same_repo
    });
    Ok(match named {
        Some(pull) => ChecksEvent::PullRequest(pull.number),
        None => ChecksEvent::Branch(branch),
    })
}

fn escape(text: &str) -> String {
    crate::text::escape_control(text)
}

/// What a checks event asks of the run: the bot's pull request to work as `--pr N` does, or
/// [`EventWork::NothingToDo`] when it does not concern upkeep (or no open pull request has the
/// branch); a payload that is not of the documented shape is a configuration error. Judged on
/// the command line's settings, as an input of [`crate::config::Config::resolve`].
pub(crate) async fn judge(settings: &RunSettings, event_name: &str, payload: &str) -> Result<EventWork, ConfigError> {
    let event = read_checks_event(event_name, payload, &settings.source).map_err(ConfigError)?;
    let branch = match event {
        ChecksEvent::Ignored(why) => return Ok(EventWork::NothingToDo(why)),
        ChecksEvent::PullRequest(number) => return Ok(EventWork::PullRequest(number)),
        ChecksEvent::Branch(branch) => branch,
    };
    let RepoSource::GitHub { owner, name, .. } = &settings.source else {
        return Ok(EventWork::NothingToDo(format!(
            "`{event_name}` events are read only on GitHub"
        )));
    };
    let forge = crate::forge::github::GitHubForge::new(&settings.github, owner, name, settings.draft)
        .map_err(|error| ConfigError(error.to_string()))?;
    Ok(match forge.open_pull_request_number(&branch).await {
        Ok(Some(number)) => EventWork::PullRequest(number),
        Ok(None) => EventWork::NothingToDo(format!("no open pull request has branch {}", escape(&branch))),
        Err(error) => EventWork::NothingToDo(format!(
            "could not look up the pull request of branch {}: {error}",
            escape(&branch)
        )),
    })
}

#[cfg(test)]
#[path = "check_events_tests.rs"]
mod tests;
