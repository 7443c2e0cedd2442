use super::*;
use crate::forge::{IssueComment, OWN_QUESTION_AUTHOR, PullRequest};

/// An issue whose comments come in order (ids 1, 2, ...); upkeep's questions are the bot's,
/// `mallory` has no write access, everyone else has.
fn issue(number: u64, title: &str, comments: &[(&str, &str)]) -> TaskIssue {
    use crate::forge::Role;
    TaskIssue {
        number,
        title: title.to_owned(),
        author: "alice".into(),
        role: Role::Maintainer,
        body: String::new(),
        comments: comments
            .iter()
            .zip(1..)
            .map(|((author, body), id)| IssueComment {
                id,
                role: match *author {
                    OWN_QUESTION_AUTHOR => Role::Bot,
                    "mallory" => Role::Other,
                    _ => Role::Maintainer,
                },
                ..IssueComment::new(*author, *body)
            })
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
            head_sha: None,
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
            // Someone without write access wrote after the question: it still waits for a
            // maintainer's answer (their comment answers nothing).
            issue(10, "Add tests", &[(OWN_QUESTION_AUTHOR, "Which?"), ("mallory", "+1")]),
        ],
        opened_last_hour: Some(1),
        needs_human: vec![12],
        no_checks: Vec::new(),
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
        "### Questions waiting for an answer\n\n- #7\n- #10\n",
        "### Pull requests needing a human\n\nupkeep stopped working their failing checks, no check reported on them, or it cannot keep them mergeable, and said why on each.\n\n- #12 (`upkeep/12-fix-typo`)\n",
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

/// A dashboard for `main` and the `upkeep` label, with no limits.
fn unlimited_plan() -> DashboardPlan {
    DashboardPlan {
        base: "main".into(),
        label: "upkeep".into(),
        limits: Limits {
            pr_limit: None,
            pr_hourly_limit: None,
            schedules: Vec::new(),
        },
    }
}

fn open_pull_request(number: u64, branch: &str, head: char) -> OpenPullRequest {
    OpenPullRequest {
        number: Some(number),
        branch: branch.into(),
        title: "t".into(),
        url: format!("https://github.com/o/r/pull/{number}"),
        task_key: None,
        head_sha: Some(head.to_string().repeat(40)),
    }
}

/// A forge with open bot pull requests and the notes the bot left on them: about their
/// checks (`attempts`) and about keeping them mergeable (`mergeable`: the kind, on head `abc`).
#[derive(Default)]
struct Notes {
    open: Vec<OpenPullRequest>,
    attempts: Vec<(u64, crate::forge::fix_attempts::FixAttempts)>,
    mergeable: Vec<(u64, crate::forge::mergeable::NoteKind)>,
}

#[async_trait::async_trait]
impl Forge for Notes {
    fn name(&self) -> &'static str {
        "notes"
    }

    async fn open_pull_requests(&self, _base: &str) -> Result<Vec<OpenPullRequest>, crate::forge::ForgeError> {
        Ok(self.open.clone())
    }

    async fn publish(
        &self,
        _workspace: &crate::repo::Workspace,
        _draft: &crate::forge::PullRequestDraft,
    ) -> Result<crate::forge::PullRequest, crate::forge::ForgeError> {
        Err(crate::forge::ForgeError::Other("publishes nothing".into()))
    }

    async fn post_question(
        &self,
        _issue: Option<u64>,
        _question: &str,
    ) -> Result<Option<String>, crate::forge::ForgeError> {
        Ok(None)
    }

    async fn fix_attempts(
        &self,
        number: u64,
    ) -> Result<crate::forge::fix_attempts::FixAttempts, crate::forge::ForgeError> {
        Ok(self
            .attempts
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, attempts)| attempts.clone())
            .unwrap_or_default())
    }

    async fn mergeable_notes(
        &self,
        pull: &crate::forge::mergeable::PullRequestRef,
    ) -> Result<crate::forge::mergeable::MergeableNotes, crate::forge::ForgeError> {
        let markers = self
            .mergeable
            .iter()
            .filter(|(number, _)| Some(*number) == pull.number)
            .map(|(_, kind)| crate::forge::mergeable::mergeable_marker(*kind, "abc"))
            .collect();
        Ok(crate::forge::mergeable::MergeableNotes { markers })
    }
}

/// A pull request on whose head the bot said no check appeared is listed as needing a human,
/// marked "no checks reported"; one whose checks it stopped fixing, as before; others not.
#[tokio::test]
async fn a_pull_request_without_checks_is_listed_as_needing_a_human() {
    let forge = Notes {
        open: vec![
            open_pull_request(12, "upkeep/12-fix-typo", 'a'),
            open_pull_request(13, "upkeep/13-add-docs", 'b'),
            open_pull_request(14, "upkeep/14-rename", 'e'),
            // upkeep gave up on an earlier head; someone pushed since, so it is not listed.
            open_pull_request(15, "upkeep/15-tidy", 'd'),
        ],
        attempts: vec![
            (
                12,
                crate::forge::fix_attempts::FixAttempts {
                    gave_up_on: vec!["a".repeat(40)],
                    ..Default::default()
                },
            ),
            (
                13,
                crate::forge::fix_attempts::FixAttempts {
                    no_checks_on: vec!["b".repeat(40)],
                    ..Default::default()
                },
            ),
            (
                15,
                crate::forge::fix_attempts::FixAttempts {
                    gave_up_on: vec!["c".repeat(40)],
                    ..Default::default()
                },
            ),
        ],
        ..Notes::default()
    };
    let plan = unlimited_plan();
    let state = read_state(&forge, &plan).await.expect("read");
    let summary = RunSummary::without_work(crate::outcome::Outcome::ChecksFailed, None);
    let now: jiff::Timestamp = "2024-01-02T03:04:05Z".parse().expect("timestamp");
    let text = render(&plan, &state, &summary, now);
    let needing = text
        .split("### Pull requests needing a human")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("the section");
    assert!(needing.contains("- #12 (`upkeep/12-fix-typo`)\n"), "{needing}");
    assert!(
        needing.contains("- #13 (`upkeep/13-add-docs`): no checks reported\n"),
        "{needing}"
    );
    assert!(!needing.contains("#14"), "{needing}");
    assert!(!needing.contains("#15"), "{needing}");
}

/// A human's commits on a conflicting pull request, or a re-doing that did not help, make it
/// one needing a human; a re-doing alone does not.
#[tokio::test]
async fn pull_requests_upkeep_cannot_keep_mergeable_need_a_human() {
    let plan = unlimited_plan();
    use crate::forge::mergeable::NoteKind;
    let forge = Notes {
        // #7's head moved on since upkeep's note (on `abc`).
        open: [4, 5, 6, 7]
            .into_iter()
            .map(|number| OpenPullRequest {
                head_sha: Some(if number == 7 { "def" } else { "abc" }.into()),
                ..open_pull_request(number, &format!("upkeep/{number}-x"), 'a')
            })
            .collect(),
        mergeable: vec![
            (4, NoteKind::HumanCommits),
            (5, NoteKind::Redo),
            (6, NoteKind::GaveUp),
            (7, NoteKind::HumanCommits),
        ],
        ..Notes::default()
    };
    let state = read_state(&forge, &plan).await.expect("read");
    assert_eq!(state.needs_human, [4, 6]);
}
