//! Memory in the forge: an issue whose bot pull request was closed is skipped until someone
//! comments again.

use super::super::support::github::{FakeGitHub, issue_json};
use super::{BOT, BOT_EMAIL, push_commit};

#[tokio::test(flavor = "multi_thread")]
async fn an_issue_whose_bot_pull_request_was_closed_is_skipped_until_it_gets_a_new_comment() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue_json(
        7,
        "Rename the greeting",
        "Rename greet to hello.",
        &["upkeep"],
        "2024-02-01T00:00:00Z",
    ));
    push_commit(&hub, "upkeep/7-rename", "X.md", "x\n", BOT_EMAIL);
    hub.add_pull(
        12,
        "upkeep/7-rename",
        "Rename the greeting",
        BOT,
        Some("2024-03-01T00:00:00Z"),
    );
    // The first message of `upkeep prompt`, which must succeed.
    let first_message = || {
        let out = hub.prompt(&[]).run();
        out.assert_code(0);
        out.stdout_json()["first_message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let message = first_message();
    assert!(!message.contains("### Issue #7"), "offered again: {message}");
    assert!(
        message.contains("Issue #7 (Rename the greeting): pull request #12 was closed on 2024-03-01"),
        "{message}"
    );

    hub.add_issue_comment(
        7,
        "alice",
        "OWNER",
        "Try again, keep the old name.",
        "2024-03-05T00:00:00Z",
    );
    let message = first_message();
    assert!(message.contains("### Issue #7: Rename the greeting"), "{message}");
    assert!(message.contains("Try again, keep the old name."), "{message}");
    hub.assert_conformant();
}
