use super::*;
use serde_json::{Value, json};

fn source() -> RepoSource {
    RepoSource::GitHub {
        owner: "octo".into(),
        name: "widgets".into(),
        clone_url: "https://github.com/octo/widgets.git".into(),
    }
}

fn user(login: &str, kind: &str) -> Value {
    json!({"login": login, "id": 1, "node_id": "MDQ6VXNlcjE=", "type": kind, "site_admin": false})
}

/// An `issue_comment` payload as GitHub sends it (abridged to the fields that matter).
fn issue_comment(association: &str, login: &str, kind: &str, on_pull_request: bool, body: &str) -> String {
    let mut issue = json!({"number": 7, "title": "Rename greet", "state": "open", "user": user("alice", "User")});
    if on_pull_request {
        issue["pull_request"] = json!({"url": "https://api.github.com/repos/octo/widgets/pulls/7"});
    }
    json!({
        "action": "created",
        "issue": issue,
        "comment": {"id": 11, "body": body, "author_association": association, "user": user(login, kind),
                    "created_at": "2024-03-02T00:00:00Z"},
        "repository": {"id": 1, "full_name": "octo/widgets"},
        "sender": user(login, kind),
    })
    .to_string()
}

fn review(association: &str, branch: &str) -> String {
    json!({
        "action": "submitted",
        "review": {"id": 80, "body": "Please rename", "state": "changes_requested",
                   "author_association": association, "user": user("alice", "User")},
        "pull_request": {"number": 9, "state": "open", "head": {"ref": branch, "sha": "abc"}},
        "repository": {"id": 1, "full_name": "octo/widgets"},
    })
    .to_string()
}

fn read(event: &str, payload: &str) -> FeedbackEvent {
    read_feedback_event(event, payload, &source(), "@upkeep", Some("upkeep-bot")).expect("valid payload")
}

#[test]
fn a_maintainers_comment_on_an_issue_names_the_issue() {
    for association in ["OWNER", "MEMBER", "COLLABORATOR"] {
        assert_eq!(
            read(
                "issue_comment",
                &issue_comment(association, "alice", "User", false, "Yes")
            ),
            FeedbackEvent::Issue(7)
        );
    }
}

#[test]
fn comments_by_others_or_bots_start_nothing() {
    for (association, login, kind) in [
        ("NONE", "mallory", "User"),
        ("CONTRIBUTOR", "mallory", "User"),
        ("FIRST_TIME_CONTRIBUTOR", "mallory", "User"),
        ("OWNER", "upkeep-bot", "User"),
        ("MEMBER", "some-app[bot]", "Bot"),
    ] {
        let event = read(
            "issue_comment",
            &issue_comment(association, login, kind, false, "@upkeep go"),
        );
        assert!(
            matches!(event, FeedbackEvent::Ignored(_)),
            "{association} {login}: {event:?}"
        );
    }
}

#[test]
fn a_pull_request_comment_needs_the_trigger_phrase() {
    assert_eq!(
        read(
            "issue_comment",
            &issue_comment("OWNER", "alice", "User", true, "@Upkeep rename it")
        ),
        FeedbackEvent::PullRequest(7)
    );
    assert!(matches!(
        read(
            "issue_comment",
            &issue_comment("OWNER", "alice", "User", true, "looks good")
        ),
        FeedbackEvent::Ignored(_)
    ));
}

#[test]
fn reviews_count_on_bot_branches_only() {
    assert_eq!(
        read("pull_request_review", &review("MEMBER", "upkeep/7-rename")),
        FeedbackEvent::PullRequest(9)
    );
    assert!(matches!(
        read("pull_request_review", &review("MEMBER", "feature/rename")),
        FeedbackEvent::Ignored(_)
    ));
    assert!(matches!(
        read("pull_request_review", &review("NONE", "upkeep/7-rename")),
        FeedbackEvent::Ignored(_)
    ));
    assert!(read_feedback_event("issue_comment", "not json", &source(), "@upkeep", None).is_err());
}

/// The bot's own comment mentioning the trigger, with a collaborator's token and the login in
/// another case, is the bot's: it starts nothing.
#[test]
fn the_bots_own_comment_starts_nothing_whatever_its_association_or_case() {
    let event = read(
        "issue_comment",
        &issue_comment("COLLABORATOR", "Upkeep-Bot", "User", true, "@upkeep pushed abc"),
    );
    assert!(
        matches!(&event, FeedbackEvent::Ignored(why) if why.contains("upkeep's own")),
        "{event:?}"
    );
}
