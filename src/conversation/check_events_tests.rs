use super::*;
use serde_json::{Value, json};

fn source() -> RepoSource {
    RepoSource::GitHub {
        owner: "octo".into(),
        name: "widgets".into(),
        clone_url: "https://github.com/octo/widgets.git".into(),
    }
}

/// A pull request as a check suite or workflow run lists it (`pull-request-minimal`).
fn minimal_pull(number: u64, branch: &str, head_repo: u64) -> Value {
    json!({"id": 100 + number, "number": number, "url": format!("https://api.github.com/repos/octo/widgets/pulls/{number}"),
           "head": {"ref": branch, "sha": "a".repeat(40), "repo": {"id": head_repo, "url": "https://api.github.com/repos/octo/widgets", "name": "widgets"}},
           "base": {"ref": "main", "sha": "b".repeat(40), "repo": {"id": 1, "url": "https://api.github.com/repos/octo/widgets", "name": "widgets"}}})
}

fn check_suite(branch: Option<&str>, conclusion: &str, pulls: Vec<Value>) -> String {
    json!({
        "action": "completed",
        "check_suite": {"id": 5, "head_branch": branch, "head_sha": "a".repeat(40), "status": "completed",
                        "conclusion": conclusion, "pull_requests": pulls,
                        "app": {"id": 9, "slug": "circleci-checks", "name": "CircleCI Checks"}},
        "repository": {"id": 1, "full_name": "octo/widgets"},
    })
    .to_string()
}

fn workflow_run(branch: &str, head_repository: &str, conclusion: &str, pulls: Vec<Value>) -> String {
    json!({
        "action": "completed",
        "workflow_run": {"id": 30, "name": "CI", "head_branch": branch, "head_sha": "a".repeat(40),
                         "status": "completed", "conclusion": conclusion, "event": "pull_request",
                         "pull_requests": pulls,
                         "head_repository": {"id": 1, "full_name": head_repository},
                         "repository": {"id": 1, "full_name": "octo/widgets"}},
        "workflow": {"id": 3, "name": "CI"},
        "repository": {"id": 1, "full_name": "octo/widgets"},
    })
    .to_string()
}

fn read(event_name: &str, payload: &str) -> ChecksEvent {
    read_checks_event(event_name, payload, &source()).expect("a valid payload")
}

fn ignored(event: ChecksEvent) -> String {
    match event {
        ChecksEvent::Ignored(why) => why,
        other => panic!("expected the event to be ignored, got {other:?}"),
    }
}

#[test]
fn a_failure_on_the_bots_branch_names_its_pull_request() {
    let branch = "upkeep/7-greeting";
    for conclusion in ["failure", "timed_out"] {
        assert_eq!(
            read(
                "check_suite",
                &check_suite(Some(branch), conclusion, vec![minimal_pull(3, branch, 1)])
            ),
            ChecksEvent::PullRequest(3)
        );
        assert_eq!(
            read(
                "workflow_run",
                &workflow_run(branch, "octo/widgets", conclusion, vec![minimal_pull(3, branch, 1)])
            ),
            ChecksEvent::PullRequest(3)
        );
    }
    // GitHub left `pull_requests` empty: the branch is looked up through the forge.
    assert_eq!(
        read(
            "workflow_run",
            &workflow_run(branch, "octo/widgets", "failure", Vec::new())
        ),
        ChecksEvent::Branch(branch.into())
    );
    // A pull request listed for another branch, or from another repository, is not taken.
    assert_eq!(
        read(
            "check_suite",
            &check_suite(
                Some(branch),
                "failure",
                vec![minimal_pull(4, "upkeep/8-other", 1), minimal_pull(5, branch, 99)]
            )
        ),
        ChecksEvent::Branch(branch.into())
    );
}

#[test]
fn events_that_do_not_concern_upkeep_are_ignored_with_why() {
    let branch = "upkeep/7-greeting";
    for conclusion in ["success", "cancelled", "neutral", "skipped", "action_required", "stale"] {
        let why = ignored(read("check_suite", &check_suite(Some(branch), conclusion, Vec::new())));
        assert!(why.contains("only a failure"), "{why}");
    }
    let why = ignored(read("check_suite", &check_suite(Some("main"), "failure", Vec::new())));
    assert!(why.contains("not upkeep's"), "{why}");
    let why = ignored(read("check_suite", &check_suite(None, "failure", Vec::new())));
    assert!(why.contains("fork"), "{why}");
    let why = ignored(read(
        "workflow_run",
        &workflow_run(branch, "mallory/widgets", "failure", Vec::new()),
    ));
    assert!(why.contains("fork") && why.contains("mallory/widgets"), "{why}");
    let mut other_repo: Value = serde_json::from_str(&check_suite(Some(branch), "failure", Vec::new())).expect("json");
    other_repo["repository"]["full_name"] = json!("octo/gadgets");
    let why = ignored(read("check_suite", &other_repo.to_string()));
    assert!(why.contains("octo/gadgets"), "{why}");
    let mut requested: Value = serde_json::from_str(&check_suite(Some(branch), "failure", Vec::new())).expect("json");
    requested["action"] = json!("requested");
    assert!(ignored(read("check_suite", &requested.to_string())).contains("requested"));
    // Control characters in a branch name reach the log escaped.
    let why = ignored(read(
        "check_suite",
        &check_suite(Some("evil\u{1b}[2J"), "failure", Vec::new()),
    ));
    assert!(!why.contains('\u{1b}'), "{why}");
}

#[test]
fn a_payload_of_another_shape_is_an_error() {
    assert!(read_checks_event("check_suite", "not json", &source()).is_err());
    assert!(read_checks_event("workflow_run", r#"{"action": "completed"}"#, &source()).is_err());
}
