use super::*;
use crate::forge::{IssueComment, PullRequest};

fn issue(number: u64, title: &str, comments: &[(&str, &str)]) -> TaskIssue {
    TaskIssue {
        number,
        title: title.to_owned(),
        author: "alice".into(),
        role: crate::forge::Role::Maintainer,
        body: String::new(),
        comments: comments
            .iter()
            .map(|(author, body)| IssueComment::new(*author, *body))
            .collect(),
        updated_at: None,
    }
}

#[test]
fn the_dashboard_lists_work_without_copying_forge_text() {
    let plan = DashboardPlan {
        base: "main".into(),
        label: "upkeep".into(),
        limits: Limits {
            pr_limit: Some(5),
            pr_hourly_limit: None,
            schedules: Vec::new(),
        },
    };
    let state = ForgeState {
        open: vec![OpenPullRequest {
            number: Some(12),
            branch: "upkeep/12-fix-typo".into(),
            title: "@everyone look <img src=x>".into(),
            url: "https://github.com/o/r/pull/12".into(),
            task_key: None,
        }],
        issues: vec![
            issue(12, "Fix typo", &[]),
            issue(
                7,
                "Rename @alice's module",
                &[("alice", "please"), (OWN_QUESTION_AUTHOR, "Which name?")],
            ),
            issue(9, "Add docs", &[(OWN_QUESTION_AUTHOR, "Where?"), ("bob", "in docs/")]),
        ],
        opened_last_hour: Some(1),
        needs_human: vec![12],
    };
    let summary = RunSummary {
        outcome: crate::outcome::Outcome::PullRequest,
        cycles: 1,
        turns: 2,
        usage: crate::llm::Usage {
            input_tokens: 1200,
            output_tokens: 300,
            ..crate::llm::Usage::default()
        },
        cost_usd: 0.0123,
        pull_requests: vec![PullRequest {
            url: "https://github.com/o/r/pull/12".into(),
            number: Some(12),
            branch: "upkeep/12-fix-typo".into(),
            title: "Fix typo".into(),
            updated: false,
            task_key: None,
            preview: None,
            answers: Vec::new(),
        }],
        question: None,
        error: Some("GitHub said `no`\nsecond line".into()),
        unsaved_changes: Vec::new(),
        unresolved_findings: Vec::new(),
        fix_attempts: Vec::new(),
    };
    let now: jiff::Timestamp = "2024-01-02T03:04:05Z".parse().expect("timestamp");
    let text = render(&plan, &state, &summary, now);
    for expected in [
        "- `pull_request` (exit code 0) at 2024-01-02T03:04:05Z",
        "- 1 cycle(s), 1200 input + 300 output tokens, $0.0123",
        "- opened #12 (`upkeep/12-fix-typo`)",
        "- error: `GitHub said 'no'`",
        "### Open pull requests\n\n- #12 (`upkeep/12-fix-typo`)\n",
        "### Questions waiting for an answer\n\n- #7\n",
        "### Pull requests needing a human\n\nupkeep stopped working their failing checks and said why on each.\n\n- #12 (`upkeep/12-fix-typo`)\n",
        "### Pending tasks (issues labelled `upkeep`)\n\n- #9\n",
        "- open bot pull requests: 1 (`pr_limit`: 5)",
        "- opened in the last hour: 1 (`pr_hourly_limit`: no limit)",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    // Titles, comments and the pull request's title never reach the issue.
    for forbidden in ["@everyone", "<img", "@alice", "Which name?", "second line"] {
        assert!(!text.contains(forbidden), "{forbidden:?} in\n{text}");
    }
}

/// A provider's error text with an ANSI sequence and a bell reaches the issue escaped.
#[test]
fn control_characters_in_the_error_reach_the_dashboard_escaped() {
    assert_eq!(
        code("quota \u{1b}[31mexceeded\u{7}"),
        "`quota \\u{1b}[31mexceeded\\u{7}`"
    );
    assert_eq!(code("a\rb\nc"), "`a b c`");
}
