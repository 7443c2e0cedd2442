//! The `issues` event that started a workflow: which issue it names (only a `labeled` event
//! with the task label, on an open issue of this repository). On GitHub the run then works that
//! issue as `--issue N` does, reading it and its comments through the forge so every comment
//! carries its author's role; elsewhere the task text is the payload's title and body. The
//! payload is untrusted text: read into the task, capped, never into anything that runs.

use std::fmt::Write as _;

use serde::Deserialize;

use crate::config::{ConfigError, RepoSource};

/// Longest issue body or comment put into the task text (the prompt has a budget).
const MAX_ISSUE_TEXT_CHARS: usize = 16 * 1024;

/// An issue named by an `issues` `labeled` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LabelledIssue {
    pub number: u64,
    pub title: String,
    pub body: String,
}

/// What an `issues` event means for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EventTask {
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
pub(crate) fn read_issues_event(
    payload: &str,
    task_label: &str,
    source: &RepoSource,
) -> Result<EventTask, ConfigError> {
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

/// The task text for an issue on a forge that cannot read it back (the payload's title and
/// body; no comments, no roles). On GitHub the run reads the issue itself instead, so its
/// comments reach the model with their authors' roles ([`crate::conversation::render`]).
pub(crate) fn issue_task(issue: &LabelledIssue) -> String {
    let mut text = format!("Issue #{}: {}", issue.number, crate::text::one_line(issue.title.trim()));
    let body = issue.body.trim();
    if !body.is_empty() {
        let _ = write!(
            text,
            "\n\n{}",
            crate::text::marked(crate::text::prefix_chars(body, MAX_ISSUE_TEXT_CHARS), " […]")
        );
    }
    text
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
    fn issue_task_has_title_and_body() {
        let issue = LabelledIssue {
            number: 3,
            title: "Pick a license\n# Rules".into(),
            body: "We need one.".into(),
        };
        assert_eq!(
            issue_task(&issue),
            "Issue #3: Pick a license\\u{a}# Rules\n\nWe need one."
        );
    }
}
