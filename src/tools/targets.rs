//! Which issues a cycle's tools may aim at. The model chooses content, not targets (DESIGN
//! section 8b): the `issue` of `ask_question` and `create_pull_request` decides where the bot's
//! write token posts a question, which branch it pushes and which issue a merge closes, so it
//! is checked against one value built before the first turn from what the run was given, never
//! from anything the model said:
//! - a run for an issue (`--issue`, an Actions event, a follow-up on that issue's pull request)
//!   may name that issue only;
//! - a backlog run may name the eligible labelled issues its prompt offered, which never
//!   include a pull request (the forge leaves those out) or an issue whose bot pull request was
//!   closed without merging and that has not changed since;
//! - a run for a task text alone names no issue.
//!
//! A call outside the scope fails back to the model with the allowed targets, before anything
//! is committed, pushed, opened or posted.

use super::ToolError;

/// An issue whose bot pull request was closed without merging, and which has not changed since:
/// its task is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedIssue {
    pub issue: u64,
    pub pull_request: u64,
}

/// The issues a cycle may aim at, and the one a call that names none works on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    allowed: Vec<u64>,
    default: Option<u64>,
    closed: Vec<ClosedIssue>,
    /// Branches of closed bot pull requests for tasks without an issue.
    closed_branches: Vec<String>,
}

impl Targets {
    /// A run for one issue, or (`None`) for a task without one.
    pub fn run_for(issue: Option<u64>) -> Self {
        Self {
            allowed: issue.into_iter().collect(),
            default: issue,
            ..Self::default()
        }
    }

    /// A backlog run: the issues its prompt offered, the closed tasks it left out.
    pub fn backlog(
        offered: Vec<u64>,
        default: Option<u64>,
        closed: Vec<ClosedIssue>,
        closed_branches: Vec<String>,
    ) -> Self {
        Self {
            default: default.filter(|issue| offered.contains(issue)),
            allowed: offered,
            closed,
            closed_branches,
        }
    }

    /// The issue a call works on: the one it names, when the run may aim there, else the run's
    /// own. Anything else is the model's error, with the allowed targets.
    pub fn issue(&self, named: Option<u64>) -> Result<Option<u64>, ToolError> {
        let Some(number) = named else {
            return Ok(self.default);
        };
        if self.allowed.contains(&number) {
            return Ok(Some(number));
        }
        let why = match self.closed.iter().find(|closed| closed.issue == number) {
            Some(closed) => format!(
                "the bot's pull request #{} for issue #{number} was closed without merging and the issue has not changed since, so that task is over (see \"Closed without merging\" in the first message); nothing was posted, pushed or opened",
                closed.pull_request
            ),
            None => format!("issue #{number} is not a target of this run; nothing was posted, pushed or opened"),
        };
        Err(ToolError::model(format!("{why}. {}", self.allowed_text())))
    }

    /// Whether `branch` belongs to a task without an issue whose pull request was closed.
    pub fn closed_branch(&self, branch: &str) -> bool {
        self.closed_branches.iter().any(|closed| closed == branch)
    }

    fn allowed_text(&self) -> String {
        match self.allowed.as_slice() {
            [] => "This run works no issue: leave `issue` out".to_owned(),
            [only] => format!("The only issue this run may name is #{only} (or leave `issue` out)"),
            many => format!(
                "Issues this run may name: {} (or leave `issue` out)",
                many.iter().map(|n| format!("#{n}")).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(targets: &Targets, named: u64) -> String {
        match targets.issue(Some(named)) {
            Err(ToolError::RespondToModel(text)) => text,
            other => panic!("#{named} was not refused: {other:?}"),
        }
    }

    #[test]
    fn a_run_for_an_issue_aims_at_that_issue_only() {
        let run = Targets::run_for(Some(7));
        assert_eq!(run.issue(None).ok(), Some(Some(7)));
        assert_eq!(run.issue(Some(7)).ok(), Some(Some(7)));
        for other in [5, 0, u64::MAX] {
            assert!(refusal(&run, other).contains("only issue this run may name is #7"));
        }
        let task = Targets::run_for(None);
        assert_eq!(task.issue(None).ok(), Some(None));
        assert!(refusal(&task, 7).contains("works no issue"));
    }

    #[test]
    fn a_backlog_run_aims_at_what_it_offered_and_says_why_a_closed_task_is_not() {
        let closed = vec![ClosedIssue {
            issue: 7,
            pull_request: 12,
        }];
        let backlog = Targets::backlog(vec![3, 4], None, closed, vec!["upkeep/docs".into()]);
        assert_eq!(backlog.issue(Some(4)).ok(), Some(Some(4)));
        assert_eq!(backlog.issue(None).ok(), Some(None));
        let text = refusal(&backlog, 7);
        assert!(text.contains("#12") && text.contains("closed without merging") && text.contains("#3, #4"));
        assert!(backlog.closed_branch("upkeep/docs"));
        assert!(!backlog.closed_branch("upkeep/other"));
        // A default the prompt did not offer is no default.
        assert_eq!(
            Targets::backlog(vec![3], Some(9), vec![], vec![]).issue(None).ok(),
            Some(None)
        );
    }
}
