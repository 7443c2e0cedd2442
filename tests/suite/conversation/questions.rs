//! Questions that resume: an `issue_comment` event resumes the right issue with its question and
//! answer, and a local `answer` reaches the next prompt.

use super::super::support::model_api::model_requests;
use serde_json::{Value, json};
use wiremock::MockServer;

use super::super::support::github::{FakeGitHub, issue_json, repository, user};
use super::super::support::{RunOutput, Script, TestRepo, Upkeep, finish, reply, run_local};
use super::{BOT, first_prompt, model, openai};

/// upkeep as an Actions step started by an `issue_comment` event with `payload`.
async fn on_issue_comment(hub: &FakeGitHub, server: &MockServer, payload: &Value) -> RunOutput {
    let events = tempfile::tempdir().expect("tempdir");
    let event_path = events.path().join("event.json");
    std::fs::write(&event_path, payload.to_string()).expect("write");
    hub.upkeep(&[])
        .args(openai(server))
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_EVENT_NAME", "issue_comment")
        .env("GITHUB_EVENT_PATH", &event_path)
        .run_async()
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_issue_comment_event_resumes_the_right_issue_with_question_and_answer() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue_json(
        7,
        "Rename the greeting",
        "Rename greet to hello.",
        &["upkeep"],
        "2024-01-01T00:00:00Z",
    ));
    hub.add_issue(issue_json(
        8,
        "Another task",
        "Unrelated.",
        &["upkeep"],
        "2024-01-01T00:00:00Z",
    ));
    let question = "<!-- upkeep:question -->\n**upkeep has a question:**\n\nKeep the old name as an alias?\n\n<sub>Answer in a comment on this issue; upkeep reads it on its next run.</sub>";
    hub.add_issue_comment(7, BOT, "NONE", question, "2024-02-01T00:00:00Z");
    let answer = hub.add_issue_comment(7, "alice", "OWNER", "Yes, for one release.", "2024-02-02T00:00:00Z");
    // The webhook payload GitHub sends for that comment (abridged to documented fields).
    let payload = json!({
        "action": "created",
        "issue": issue_json(7, "Rename the greeting", "Rename greet to hello.", &["upkeep"], "2024-02-02T00:00:00Z"),
        "comment": hub.issue_comments(7).into_iter().find(|c| c["id"] == answer).expect("comment"),
        "repository": repository(),
        "sender": user("alice"),
    });
    let server = model(&[finish("no_tasks")]).await;
    let out = on_issue_comment(&hub, &server, &payload).await;
    out.assert_code(0);
    let (_, message) = first_prompt(&server).await;
    assert!(
        message.contains("# Your task: issue #7: Rename the greeting"),
        "{message}"
    );
    assert!(
        message.contains("upkeep (you) asked:\n```comment\nKeep the old name as an alias?\n```"),
        "{message}"
    );
    assert!(
        message.contains("comment by alice (maintainer):\n```comment\nYes, for one release.\n```"),
        "{message}"
    );
    assert!(!message.contains("Another task"), "{message}");

    // The same event by someone without write access starts nothing.
    let mut stranger = payload.clone();
    stranger["comment"]["author_association"] = json!("NONE");
    stranger["comment"]["user"] = user("mallory");
    let silent = model(&[finish("no_tasks")]).await;
    let out = on_issue_comment(&hub, &silent, &stranger).await;
    out.assert_code(0);
    assert!(model_requests(&silent).await.is_empty(), "{}", out.stderr);
    assert!(out.stderr.contains("only authors with write access"), "{}", out.stderr);
    hub.assert_conformant();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_question_answered_with_answer_reaches_the_next_prompt() {
    let repo = TestRepo::new();
    let task = "Rename greet to hello";
    let asked = Script::new(&[reply(
        "unclear",
        &[("ask_question", json!({"question_text": "Keep greet as an alias?"}))],
    )]);
    let out = run_local(&repo, &asked, &["--task", task]);
    out.assert_code(3);
    assert!(out.stderr.contains("--answer 'YOUR ANSWER'"), "{}", out.stderr);
    assert_eq!(
        repo.git(&["config", "--get-regexp", "^upkeep-question\\..*\\.question$"])
            .split_once(' ')
            .map(|(_, q)| q.to_owned()),
        Some("Keep greet as an alias?".to_owned())
    );

    // Without an answer, the run shows the question and the command, and does nothing else.
    let out = run_local(&repo, &Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(3);
    assert!(out.stderr.contains("Keep greet as an alias?"), "{}", out.stderr);
    assert!(out.stderr.contains("upkeep run --repo"), "{}", out.stderr);
    let kinds: Vec<String> = out
        .events()
        .iter()
        .map(|event| event["type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["run_started", "run_finished"],
        "a waiting question still starts and ends the run"
    );

    let server = model(&[finish("completed")]).await;
    let out = Upkeep::new()
        .args(["run", "--repo"])
        .args([repo.path()])
        .args(["--json", "--answer", "Yes, keep it for one release."])
        .args(openai(&server))
        .env("OPENAI_API_KEY", "sk-test")
        .run_async()
        .await;
    out.assert_code(0);
    let (_, message) = first_prompt(&server).await;
    assert!(message.contains(task), "the task resumed: {message}");
    assert!(message.contains("# Your earlier question and its answer"), "{message}");
    assert!(
        message.contains("Keep greet as an alias?") && message.contains("Yes, keep it for one release."),
        "{message}"
    );
    // Settled: the next run has nothing waiting.
    let listing = std::process::Command::new("git")
        .current_dir(repo.path())
        .args(["config", "--get-regexp", "^upkeep-question\\."])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git");
    assert!(
        listing.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&listing.stdout)
    );
}

/// Regression: an answer that cannot be recorded (the repository's git config is locked by
/// another git process) is a runtime failure (exit 1), not a usage error (exit 2): nothing is
/// wrong with the command line.
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_that_cannot_be_recorded_is_a_failure_not_a_usage_error() {
    let repo = TestRepo::new();
    let asked = Script::new(&[reply(
        "unclear",
        &[("ask_question", json!({"question_text": "Keep greet as an alias?"}))],
    )]);
    run_local(&repo, &asked, &["--task", "Rename greet to hello"]).assert_code(3);
    // What another git process holds while it writes the config.
    std::fs::write(repo.path().join(".git/config.lock"), "").expect("lock");

    let server = model(&[finish("completed")]).await;
    let out = Upkeep::new()
        .args(["run", "--repo"])
        .args([repo.path()])
        .args(["--json", "--answer", "Yes."])
        .args(openai(&server))
        .env("OPENAI_API_KEY", "sk-test")
        .run_async()
        .await;
    out.assert_code(1);
    let finished = &out.events_of("run_finished")[0];
    assert_eq!(finished["outcome"], "error", "{finished}");
    let error = finished["error"].as_str().expect("an error");
    assert!(error.contains("recording the answer in"), "{error}");
    assert!(!out.stderr.contains("configuration error"), "{}", out.stderr);
}

/// `upkeep prompt --answer` once printed a first message without the answer's section, which
/// the run with the same flags sends: the prompt must be what the first cycle sends, byte for
/// byte, and printing it must not record the answer (only the run does).
#[tokio::test(flavor = "multi_thread")]
async fn prompt_with_answer_prints_exactly_what_the_first_cycle_sends() {
    let repo = TestRepo::new();
    let task = "Rename greet to hello";
    let asked = Script::new(&[reply(
        "unclear",
        &[("ask_question", json!({"question_text": "Keep greet as an alias?"}))],
    )]);
    run_local(&repo, &asked, &["--task", task]).assert_code(3);
    let answer = "Yes, keep it for one release.";
    let server = model(&[finish("completed")]).await;

    let printed = Upkeep::new()
        .args(["prompt", "--json", "--repo"])
        .args([repo.path()])
        .args(["--answer", answer])
        .args(openai(&server))
        .run_async()
        .await;
    printed.assert_code(0);
    let answers = std::process::Command::new("git")
        .current_dir(repo.path())
        .args(["config", "--get-regexp", "^upkeep-question\\..*\\.answer$"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git");
    assert!(
        answers.stdout.is_empty(),
        "printing the prompt recorded the answer: {}",
        String::from_utf8_lossy(&answers.stdout)
    );

    let out = Upkeep::new()
        .args(["run", "--repo"])
        .args([repo.path()])
        .args(["--json", "--answer", answer])
        .args(openai(&server))
        .env("OPENAI_API_KEY", "sk-test")
        .run_async()
        .await;
    out.assert_code(0);
    let (system, message) = first_prompt(&server).await;
    assert!(message.contains("# Your earlier question and its answer"), "{message}");
    let printed = printed.stdout_json();
    assert_eq!(printed["first_message"].as_str(), Some(message.as_str()));
    assert_eq!(printed["system"].as_str(), Some(system.as_str()));
}
