//! Memory kept in the forge, not on disk: a bot pull request closed without merging ends its
//! task. Its issue is not offered again until a maintainer speaks on it after the closing (a
//! comment written or edited later: an outsider's "bump" and the issue's `updated_at`, which any
//! comment moves, revive nothing), and a task without an issue is recognised by its branch.
//! Explicit work (`--issue`, `--task`) is the operator's decision and is not skipped.

use jiff::Timestamp;

use crate::forge::{ClosedPullRequest, TaskIssue};

/// An issue left out of the backlog, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub issue: u64,
    pub title: String,
    pub pull_request: u64,
    pub closed_at: Option<Timestamp>,
}

/// The issues still eligible, and those whose bot pull request was closed without merging and
/// that have not changed since.
pub(crate) fn skip_closed(issues: Vec<TaskIssue>, closed: &[ClosedPullRequest]) -> (Vec<TaskIssue>, Vec<Skipped>) {
    let mut eligible = Vec::with_capacity(issues.len());
    let mut skipped = Vec::new();
    for issue in issues {
        // The latest closing counts: a later pull request for the issue may have been closed too.
        let last_closed = closed
            .iter()
            .filter(|pr| pr.issue == Some(issue.number))
            .max_by_key(|pr| pr.closed_at);
        match last_closed {
            Some(pr) if !pr.closed_at.is_some_and(|closed_at| issue.changed_after(closed_at)) => {
                skipped.push(Skipped {
                    issue: issue.number,
                    title: issue.title.clone(),
                    pull_request: pr.number,
                    closed_at: pr.closed_at,
                });
            }
            _ => eligible.push(issue),
        }
    }
    (eligible, skipped)
}

/// The closed bot pull requests for tasks without an issue (the task file's), by branch.
pub(crate) fn closed_task_branches(closed: &[ClosedPullRequest]) -> Vec<&ClosedPullRequest> {
    closed.iter().filter(|pr| pr.issue.is_none()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::{IssueComment, Role};

    fn at(text: &str) -> Option<Timestamp> {
        Some(text.parse().expect("timestamp"))
    }

    fn closed(issue: u64, when: &str) -> ClosedPullRequest {
        ClosedPullRequest {
            number: 40 + issue,
            title: "t".into(),
            branch: format!("upkeep/{issue}-t"),
            url: "u".into(),
            closed_at: at(when),
            issue: Some(issue),
            task_key: None,
        }
    }

    fn issue(number: u64, updated: &str, comments: Vec<IssueComment>) -> TaskIssue {
        TaskIssue {
            number,
            title: "t".into(),
            author: "alice".into(),
            role: Role::Maintainer,
            body: String::new(),
            comments,
            updated_at: at(updated),
        }
    }

    #[test]
    fn a_closed_pull_request_skips_its_issue_until_the_issue_changes() {
        let closings = [closed(7, "2024-03-01T00:00:00Z")];
        let (eligible, skipped) = skip_closed(vec![issue(7, "2024-02-01T00:00:00Z", vec![])], &closings);
        assert!(eligible.is_empty());
        assert_eq!(skipped[0].pull_request, 47);
        let comment = IssueComment {
            created_at: at("2024-03-02T00:00:00Z"),
            role: Role::Maintainer,
            ..IssueComment::new("alice", "try again, smaller")
        };
        let (eligible, skipped) = skip_closed(vec![issue(7, "2024-02-01T00:00:00Z", vec![comment])], &closings);
        assert_eq!(eligible.len(), 1);
        assert!(skipped.is_empty());
        // Any comment moves `updated_at`: it says nothing about who changed the issue.
        let (eligible, _) = skip_closed(vec![issue(7, "2024-03-05T00:00:00Z", vec![])], &closings);
        assert!(eligible.is_empty(), "updated_at alone");
        let bump = IssueComment {
            created_at: at("2024-03-02T00:00:00Z"),
            ..IssueComment::new("mallory", "bump")
        };
        let (eligible, _) = skip_closed(vec![issue(7, "2024-03-05T00:00:00Z", vec![bump])], &closings);
        assert!(eligible.is_empty(), "an outsider's bump");
        let edited = IssueComment {
            created_at: at("2024-02-02T00:00:00Z"),
            edited_at: at("2024-03-03T00:00:00Z"),
            role: Role::Maintainer,
            ..IssueComment::new("alice", "smaller steps, please")
        };
        let (eligible, _) = skip_closed(vec![issue(7, "2024-03-05T00:00:00Z", vec![edited])], &closings);
        assert_eq!(eligible.len(), 1, "a maintainer's comment edited after the closing");
        let (eligible, _) = skip_closed(vec![issue(8, "2024-01-01T00:00:00Z", vec![])], &closings);
        assert_eq!(eligible.len(), 1, "another issue");
    }
}
