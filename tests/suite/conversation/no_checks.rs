//! A bot pull request on whose head no check ever reports (DESIGN section 14, "Pushes that
//! start no checks"), end to end with the real binary and the GitHub stand-in: within the
//! documented wait it is pending and nothing is said; after it, upkeep says so on the pull
//! request once per head commit, with why (the `GITHUB_TOKEN` rule) and where the fix is.

use upkeep::forge::fix_attempts::parse_no_checks_marker;

use super::super::support::github::FakeGitHub;
use super::super::support::{RunOutput, Script, finish, git};
use super::{BOT, BOT_EMAIL, push_commit};

const BRANCH: &str = "upkeep/7-greeting";

/// The bot's pull request #3 whose head commit was made `minutes` ago and has no check run and
/// no commit status.
async fn pull_request_committed_minutes_ago(minutes: u64) -> (FakeGitHub, String) {
    let hub = FakeGitHub::start(BOT).await;
    push_commit(&hub, BRANCH, "GREETING.md", "hello\n", BOT_EMAIL);
    // The same commit again, dated `minutes` ago.
    let bare = hub.bare();
    let tree = git(bare, &["rev-parse", &format!("{BRANCH}^{{tree}}")]);
    let parent = git(bare, &["rev-parse", &format!("{BRANCH}~1")]);
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        - minutes * 60;
    let date = format!("@{seconds} +0000");
    let output = std::process::Command::new("git")
        .current_dir(bare)
        .args(["commit-tree", &tree, "-p", &parent, "-m", "Add a greeting"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_COMMITTER_DATE", &date)
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_EMAIL", BOT_EMAIL)
        .env("GIT_AUTHOR_EMAIL", BOT_EMAIL)
        .env("GIT_COMMITTER_NAME", "upkeep")
        .env("GIT_AUTHOR_NAME", "upkeep")
        .output()
        .expect("git");
    assert!(output.status.success(), "{output:?}");
    let head = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    git(bare, &["update-ref", &format!("refs/heads/{BRANCH}"), &head]);
    hub.add_pull(3, BRANCH, "Add a greeting", BOT, None);
    (hub, head)
}

async fn run_pr(hub: &FakeGitHub) -> RunOutput {
    let script = Script::new(&[finish("completed")]);
    hub.upkeep(&["--pr", "3", "--replay"])
        .args([script.path()])
        .run_async()
        .await
}

fn outcome(out: &RunOutput) -> String {
    out.events_of("run_finished")
        .first()
        .and_then(|e| e["outcome"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// 20 minutes without a check: said once on the pull request (marker, why, where the fix is),
/// the run ends needing a human, and the next run says nothing more.
#[tokio::test(flavor = "multi_thread")]
async fn no_check_twenty_minutes_after_the_commit_is_said_once() {
    let (hub, head) = pull_request_committed_minutes_ago(20).await;
    let out = run_pr(&hub).await;
    out.assert_code(3);
    assert_eq!(outcome(&out), "checks_failed", "{}\n{}", out.stdout, out.stderr);
    assert!(out.events_of("model_response").is_empty(), "the model was asked");
    assert_eq!(out.events_of("checks")[0]["state"], "none");
    let comments = hub.bot_comments(3);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert_eq!(parse_no_checks_marker(&comments[0]).as_deref(), Some(head.as_str()));
    assert!(
        comments[0].contains("`GITHUB_TOKEN` start no workflows")
            && comments[0].contains("docs/actions.md#pushes-that-start-no-checks")
            && comments[0].contains("15 minutes"),
        "{}",
        comments[0]
    );
    assert!(out.stderr.contains("no checks reported"), "{}", out.stderr);

    let again = run_pr(&hub).await;
    again.assert_code(3);
    assert_eq!(hub.bot_comments(3).len(), 1, "said once per head commit");
    assert_eq!(git(hub.bare(), &["rev-parse", BRANCH]), head, "nothing pushed");
    hub.assert_conformant();
}

/// A commit of a minute ago may still get its checks: pending, nothing said.
#[tokio::test(flavor = "multi_thread")]
async fn no_check_a_minute_after_the_commit_is_pending() {
    let (hub, _) = pull_request_committed_minutes_ago(1).await;
    let out = run_pr(&hub).await;
    out.assert_code(0);
    assert_eq!(outcome(&out), "no_tasks", "{}\n{}", out.stdout, out.stderr);
    assert!(hub.bot_comments(3).is_empty(), "{:#?}", hub.bot_comments(3));
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("pending"), "{said}");
    hub.assert_conformant();
}
