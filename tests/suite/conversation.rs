//! Conversation on the forge (DESIGN section 11), end to end with the real binary: review
//! follow-up on the bot's pull request, questions that resume (GitHub, Actions events, local),
//! memory of closed pull requests, the repository's agent instructions, and the GitHub fake's
//! conformance to the published REST description.
//!
//! This module holds the helpers the suites share and the fake's conformance test; the
//! conversations live in its submodules by subject.

mod agent_instructions;
mod check_triggers;
mod fix_cycles;
mod memory;
mod mergeable;
mod no_checks;
mod questions;
mod review_follow_up;
mod who_speaks;

use super::support::model_api::model_requests;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::git;
use super::support::github::{FakeGitHub, issue_json, repository, user};
use super::support::github_conformance::{self as conformance, Body};

const BOT: &str = "upkeep-bot";
const BOT_EMAIL: &str = "upkeep@users.noreply.github.com";

/// Pushes a commit onto `branch` of the bare repository as `email` (creating the branch from
/// main when it does not exist).
fn push_commit(hub: &FakeGitHub, branch: &str, file: &str, content: &str, email: &str) {
    let work = tempfile::tempdir().expect("tempdir");
    let bare = hub.bare().to_str().expect("utf-8").to_owned();
    git(work.path(), &["clone", "-q", &bare, "w"]);
    let dir = work.path().join("w");
    let exists = !git(&dir, &["ls-remote", "origin", &format!("refs/heads/{branch}")]).is_empty();
    if exists {
        git(&dir, &["checkout", "-q", branch]);
    } else {
        git(&dir, &["checkout", "-q", "-b", branch]);
    }
    std::fs::write(dir.join(file), content).expect("write");
    git(&dir, &["add", "-A"]);
    git(
        &dir,
        &[
            "-c",
            &format!("user.email={email}"),
            "-c",
            "user.name=someone",
            "commit",
            "-q",
            "-m",
            &format!("edit {file}"),
        ],
    );
    let output = std::process::Command::new("git")
        .current_dir(&dir)
        .args([
            "-c",
            &format!("user.email={email}"),
            "commit",
            "--amend",
            "--no-edit",
            "-q",
            "--reset-author",
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_COMMITTER_EMAIL", email)
        .env("GIT_AUTHOR_EMAIL", email)
        .env("GIT_COMMITTER_NAME", "someone")
        .env("GIT_AUTHOR_NAME", "someone")
        .output()
        .expect("git");
    assert!(output.status.success());
    git(&dir, &["push", "-q", "origin", &format!("HEAD:refs/heads/{branch}")]);
}

/// An OpenAI-compatible model that answers `replies` in order and records what it is sent.
async fn model(replies: &[String]) -> MockServer {
    let server = MockServer::start().await;
    for (i, content) in replies.iter().enumerate() {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "id": format!("chatcmpl-{i}"), "object": "chat.completion", "created": 1700000000, "model": "gpt-4.1",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
            })))
            .up_to_n_times(1)
            .mount(&server)
            .await;
    }
    server
}

/// The first user message and the system prompt the model was sent.
async fn first_prompt(server: &MockServer) -> (String, String) {
    let sent = model_requests(server).await;
    let first: Value = serde_json::from_slice(&sent.first().expect("the model was called").body).expect("JSON");
    let messages = first["messages"].as_array().expect("messages");
    let text = |role: &str| {
        messages
            .iter()
            .find(|m| m["role"] == role)
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    (text("system"), text("user"))
}

fn openai(server: &MockServer) -> [String; 4] {
    [
        "--provider".into(),
        "openai".into(),
        "--base-url".into(),
        format!("{}/v1", server.uri()),
    ]
}

#[test]
fn the_fakes_bodies_follow_githubs_description_and_a_wrong_body_fails() {
    let pulls = "GET /repos/{owner}/{repo}/pulls";
    assert_eq!(
        conformance::operation("GET", "/repos/o/r/pulls").as_deref(),
        Some(pulls)
    );
    let issue = issue_json(7, "t", "b", &["upkeep"], "2024-01-01T00:00:00Z");
    conformance::validate(
        "GET /repos/{owner}/{repo}/issues/{issue_number}",
        Body::Response("200"),
        &issue,
    )
    .expect("a documented issue");
    // The same issue with a field GitHub always sends left out, and one of the wrong type.
    let mut missing = issue.clone();
    missing.as_object_mut().expect("object").remove("node_id");
    let errors = conformance::validate(
        "GET /repos/{owner}/{repo}/issues/{issue_number}",
        Body::Response("200"),
        &missing,
    )
    .expect_err("node_id is required");
    assert!(errors.iter().any(|e| e.contains("node_id")), "{errors:?}");
    let mut wrong = issue;
    wrong["number"] = json!("7");
    assert!(
        conformance::validate(
            "GET /repos/{owner}/{repo}/issues/{issue_number}",
            Body::Response("200"),
            &wrong
        )
        .is_err()
    );
    // A reply body must have `body`.
    let replies = "POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies";
    assert!(conformance::validate(replies, Body::Request, &json!({"body": "done"})).is_ok());
    assert!(conformance::validate(replies, Body::Request, &json!({"text": "done"})).is_err());
    let mut repo = repository();
    conformance::validate("GET /repos/{owner}/{repo}/pulls", Body::Response("200"), &json!([])).expect("empty list");
    repo.as_object_mut().expect("object").remove("default_branch");
    let _ = user("x");
}
