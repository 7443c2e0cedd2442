//! Checks events in GitHub Actions (DESIGN section 14, "Triggers"), end to end with the real
//! binary and the GitHub stand-in: a `workflow_run` or `check_suite` that failed on the bot's
//! pull request makes the run work that pull request as `--pr N` does (found by its branch when
//! GitHub lists no pull request in the payload); a success, another branch or a fork's run ends
//! the run at once, doing nothing.

use serde_json::{Value, json};

use super::super::support::github::{CheckRunSpec, FakeGitHub, NAME, OWNER, repository};
use super::super::support::{RunOutput, Script, finish, git, reply};
use super::{BOT, BOT_EMAIL, push_commit};

const BRANCH: &str = "upkeep/7-greeting";

/// The bot's pull request #3 on `upkeep/7-greeting` whose `test` check failed, beside an older
/// failing one (#2) that a backlog run would take first.
async fn failing_pull_request() -> (FakeGitHub, String) {
    let hub = FakeGitHub::start(BOT).await;
    push_commit(&hub, "upkeep/5-farewell", "FAREWELL.md", "bye\n", BOT_EMAIL);
    hub.add_pull(2, "upkeep/5-farewell", "Add a farewell", BOT, None);
    let older = git(hub.bare(), &["rev-parse", "upkeep/5-farewell"]);
    hub.add_check_run(&older, CheckRunSpec::completed("test", "failure"));
    push_commit(&hub, BRANCH, "GREETING.md", "hello\n", BOT_EMAIL);
    hub.add_pull(3, BRANCH, "Add a greeting", BOT, None);
    let head = git(hub.bare(), &["rev-parse", BRANCH]);
    hub.add_check_run(
        &head,
        CheckRunSpec {
            output_text: Some("GREETING.md must end with a period".into()),
            ..CheckRunSpec::completed("test", "failure")
        },
    );
    (hub, head)
}

/// A `workflow_run` `completed` payload (abridged to what GitHub always sends and upkeep reads).
fn workflow_run(head: &str, branch: &str, head_repository: &str, conclusion: &str, pulls: Vec<Value>) -> Value {
    json!({
        "action": "completed",
        "workflow_run": {"id": 30, "name": "CI", "head_branch": branch, "head_sha": head, "status": "completed",
                         "conclusion": conclusion, "event": "push", "pull_requests": pulls,
                         "head_repository": {"id": 1, "full_name": head_repository},
                         "repository": {"id": 1, "full_name": format!("{OWNER}/{NAME}")}},
        "workflow": {"id": 3, "name": "CI"},
        "repository": repository(),
    })
}

fn check_suite(head: &str, branch: &str, conclusion: &str, pulls: Vec<Value>) -> Value {
    json!({
        "action": "completed",
        "check_suite": {"id": 5, "head_branch": branch, "head_sha": head, "status": "completed",
                        "conclusion": conclusion, "pull_requests": pulls},
        "repository": repository(),
    })
}

fn listed_pull(number: u64, head: &str) -> Value {
    json!({"id": 100 + number, "number": number,
           "url": format!("https://api.github.com/repos/{OWNER}/{NAME}/pulls/{number}"),
           "head": {"ref": BRANCH, "sha": head, "repo": {"id": 1, "url": "https://api.github.com/repos/owner/name", "name": NAME}},
           "base": {"ref": "main", "sha": "b".repeat(40), "repo": {"id": 1, "url": "https://api.github.com/repos/owner/name", "name": NAME}}})
}

/// upkeep as an Actions step started by `event`; its step outputs and job summary land in
/// `step` (`output`, `summary`).
async fn on_event_in(
    step: &std::path::Path,
    hub: &FakeGitHub,
    event: &str,
    payload: &Value,
    script: &Script,
) -> RunOutput {
    let event_path = step.join("event.json");
    std::fs::write(&event_path, payload.to_string()).expect("write");
    hub.upkeep(&["--replay"])
        .args([script.path()])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_EVENT_NAME", event)
        .env("GITHUB_EVENT_PATH", &event_path)
        .env("GITHUB_OUTPUT", step.join("output"))
        .env("GITHUB_STEP_SUMMARY", step.join("summary"))
        .run_async()
        .await
}

async fn on_event(hub: &FakeGitHub, event: &str, payload: &Value, script: &Script) -> RunOutput {
    let step = tempfile::tempdir().expect("tempdir");
    on_event_in(step.path(), hub, event, payload, script).await
}

fn fix_script() -> Script {
    Script::new(&[reply(
        "fix the check",
        &[
            ("write_file", json!({"path": "GREETING.md", "content": "hello.\n"})),
            (
                "create_pull_request",
                json!({"title": "Fix the greeting check", "body": "Added the final period."}),
            ),
            ("finish", json!({"status": "completed", "summary": "checks fixed"})),
        ],
    )])
}

/// A failed workflow run on the bot's branch whose payload lists no pull request: the pull
/// request is found by its branch, and its checks are fixed with one commit on top.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_workflow_run_on_the_bots_branch_fixes_its_pull_request() {
    let (hub, head) = failing_pull_request().await;
    let payload = workflow_run(&head, BRANCH, &format!("{OWNER}/{NAME}"), "failure", Vec::new());
    let step = tempfile::tempdir().expect("tempdir");
    let out = on_event_in(step.path(), &hub, "workflow_run", &payload, &fix_script()).await;
    out.assert_code(0);
    let attempts = out.events_of("fix_attempt");
    assert_eq!(attempts.len(), 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(attempts[0]["pr"], 3);
    assert_eq!(git(hub.bare(), &["rev-parse", &format!("{BRANCH}~1")]), head);
    // The workflow reads the attempt from the step's outputs and the job summary.
    let outputs = std::fs::read_to_string(step.path().join("output")).expect("outputs written");
    assert!(
        outputs.contains("fix-attempts=[{\"pr\":3,\"attempt\":1,\"max\":3,\"gave_up\":false}]\n"),
        "{outputs}"
    );
    let summary = std::fs::read_to_string(step.path().join("summary")).expect("summary written");
    assert!(summary.contains("- #3: fix attempt 1 of 3"), "{summary}");
    let lookups: Vec<String> = hub
        .requests()
        .await
        .into_iter()
        .filter(|(verb, path, _)| verb == "GET" && path.ends_with("/pulls"))
        .map(|(_, path, _)| path)
        .collect();
    assert!(!lookups.is_empty(), "the pull request was looked up by its branch");
    hub.assert_conformant();
}

/// A failed check suite that names the pull request works it directly.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_check_suite_naming_the_pull_request_works_it() {
    let (hub, head) = failing_pull_request().await;
    let payload = check_suite(&head, BRANCH, "timed_out", vec![listed_pull(3, &head)]);
    let out = on_event(&hub, "check_suite", &payload, &fix_script()).await;
    out.assert_code(0);
    let attempts = out.events_of("fix_attempt");
    assert_eq!(attempts.len(), 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(attempts[0]["pr"], 3);
}

/// Events that do not concern upkeep end the run at once: no model call, nothing pushed, a line
/// saying why.
#[tokio::test(flavor = "multi_thread")]
async fn a_success_a_fork_or_another_branch_starts_nothing() {
    let (hub, head) = failing_pull_request().await;
    let repo = format!("{OWNER}/{NAME}");
    let cases = [
        (
            "workflow_run",
            workflow_run(&head, BRANCH, &repo, "success", Vec::new()),
            "only a failure",
        ),
        (
            "workflow_run",
            workflow_run(&head, BRANCH, "mallory/name", "failure", Vec::new()),
            "fork",
        ),
        (
            "check_suite",
            check_suite(&head, "main", "failure", Vec::new()),
            "not upkeep's",
        ),
        (
            "check_suite",
            check_suite(&head, "upkeep/9-gone", "failure", Vec::new()),
            "no open pull request",
        ),
    ];
    for (event, payload, why) in cases {
        let out = on_event(&hub, event, &payload, &Script::new(&[finish("completed")])).await;
        out.assert_code(0);
        assert!(
            out.events_of("model_response").is_empty(),
            "{event}: the model was asked"
        );
        assert!(
            out.stderr.contains(why) || out.stdout.contains(why),
            "{event} ({why}): {}\n{}",
            out.stdout,
            out.stderr
        );
    }
    assert_eq!(git(hub.bare(), &["rev-parse", BRANCH]), head, "nothing pushed");
    assert!(hub.issue_comments(3).is_empty(), "nothing said");
}
