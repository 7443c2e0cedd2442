//! Errors as annotations after commands resume, usage errors too; secrets never reach outputs,
//! summary or annotations; outside Actions nothing is written.

use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::super::support::conformance::Api;
use super::super::support::github::{FakeGitHub, NAME, OWNER, issue_json, repository, user};
use super::super::support::model_api::{model_server, openai_error, run_against, streamed};
use super::super::support::{Script, TestRepo, Upkeep, finish, reply, run_replay};
use super::{Runner, paused_span};

#[test]
fn a_failing_run_writes_an_error_annotation_after_commands_resume() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    // The model's plan tries to smuggle a workflow command into the log.
    let script = Script::with_usage(
        &[reply(
            "::error::forged by the model",
            &[("read_file", json!({"path": "README.md"}))],
        )],
        1200,
        345,
    );
    let out = run_replay(runner.upkeep(), &repo, &script, &["--task", "t"]);
    out.assert_code(1);

    let (_, resumed) = paused_span(&out.stderr);
    let error = out
        .stderr
        .find("::error::upkeep failed (exit code 1)")
        .expect("an error annotation");
    assert!(
        error > resumed,
        "the annotation comes after commands resume:\n{}",
        out.stderr
    );
    let annotation = out.stderr[error..].lines().next().expect("line");
    assert!(annotation.contains("replay script exhausted"), "{annotation}");
    // The forged line only ever appears inside the paused span.
    for (at, _) in out.stderr.match_indices("forged by the model") {
        assert!(at < resumed, "{}", out.stderr);
    }

    let outputs = runner.outputs();
    assert_eq!(outputs["outcome"], "error");
    assert_eq!(outputs["exit-code"], "1");
    let summary = runner.summary();
    assert!(
        summary.contains("### upkeep failed") && summary.contains("#### Error"),
        "{summary}"
    );
    assert!(summary.contains("replay script exhausted"), "{summary}");
}

#[test]
fn a_usage_error_in_actions_is_reported_too() {
    let runner = Runner::new();
    let out = runner
        .upkeep()
        .args(["run", "--repo", "/nonexistent/repository", "--provider", "ollama"])
        .run();
    out.assert_code(2);
    let outputs = runner.outputs();
    assert_eq!(outputs["outcome"], "usage_error");
    assert_eq!(outputs["exit-code"], "2");
    assert!(
        out.stderr
            .contains("::error::upkeep configuration error (exit code 2): invalid `--repo`"),
        "{}",
        out.stderr
    );
}

#[test]
fn secrets_never_reach_the_outputs_the_summary_or_annotations() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let secret = format!("sk-{}", uuid::Uuid::new_v4().simple());
    let script = Script::with_usage(
        &[reply(
            "ask",
            &[(
                "ask_question",
                json!({"question_text": format!("Is {secret} the key?\nReally?")}),
            )],
        )],
        1200,
        345,
    );
    let out = run_replay(
        runner.upkeep().env("OPENAI_API_KEY", &secret),
        &repo,
        &script,
        &["--task", "t"],
    );
    out.assert_code(3);
    let outputs = std::fs::read_to_string(runner.output_path()).expect("outputs");
    let summary = runner.summary();
    for (what, text) in [("outputs", &outputs), ("summary", &summary), ("stderr", &out.stderr)] {
        assert!(!text.contains(&secret), "{what} leaks the secret:\n{text}");
    }
    assert!(runner.outputs()["question"].contains("[REDACTED]"));
}

#[test]
fn outside_actions_nothing_is_written() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let script = Script::with_usage(&[finish("no_tasks")], 1200, 345);
    let out = run_replay(
        Upkeep::new()
            .env("GITHUB_OUTPUT", runner.output_path())
            .env("GITHUB_STEP_SUMMARY", runner.summary_path()),
        &repo,
        &script,
        &[],
    );
    out.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(runner.output_path()).expect("file"),
        "earlier=kept\n"
    );
    assert!(!out.stderr.contains("::stop-commands::"));
}

/// Text a provider sends back in an error: an ANSI colour, a bell, and a second line that reads
/// like a workflow command. A provider (or whoever sits between upkeep and it) controls this
/// text, so it must reach the runner and the terminal as inert, visible text.
const HOSTILE_PROVIDER_ERROR: &str =
    "quota \u{1b}[31mexceeded\u{7}\n::set-output name=pwned::yes\n::error::forged by the provider";

/// Reproduces a provider's error text reaching the `::error::` annotation, the job summary and
/// the step outputs with its ESC and BEL as they are: the annotation line and the summary are
/// read by people and by the runner, so every control character must arrive escaped, no line
/// of it may act as a workflow command, and `--json` must still keep the exact text.
#[tokio::test]
async fn a_provider_error_with_control_characters_reaches_no_runner_sink_raw() {
    let server = MockServer::start().await;
    let error = openai_error(HOSTILE_PROVIDER_ERROR, "invalid_request_error", None, None);
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(error))
        .mount(&server)
        .await;
    let repo = TestRepo::new();
    let runner = Runner::new();
    let out = runner
        .upkeep()
        .args(["run", "--json", "--task", "t", "--provider", "openai", "--base-url"])
        .args([format!("{}/v1", server.uri())])
        .args(["--repo"])
        .args([repo.path()])
        .run_async()
        .await;
    out.assert_code(1);

    // --json keeps the provider's text exactly.
    let finished = out.events_of("run_finished");
    let exact = finished[0]["error"].as_str().expect("run_finished.error");
    assert!(exact.contains(HOSTILE_PROVIDER_ERROR), "{exact:?}");

    let outputs_text = std::fs::read_to_string(runner.output_path()).expect("outputs");
    let summary = runner.summary();
    for (what, text) in [
        ("outputs", &outputs_text),
        ("summary", &summary),
        ("stderr", &out.stderr),
    ] {
        assert_no_raw_control(what, text);
    }
    assert!(!runner.outputs().contains_key("pwned"), "{outputs_text}");
    assert!(summary.contains("\\u{1b}[31mexceeded\\u{7}"), "{summary}");

    // After commands resume, the only workflow command is upkeep's own annotation, on one line.
    let (_, resumed) = paused_span(&out.stderr);
    let after: Vec<&str> = out.stderr[resumed..].lines().skip(1).collect();
    assert_eq!(after.len(), 1, "{after:#?}");
    assert!(
        after[0].starts_with("::error::upkeep failed (exit code 1): "),
        "{after:#?}"
    );
    assert!(after[0].contains("%0A::set-output name=pwned::yes%0A"), "{after:#?}");
}

/// Reproduces the model's question reaching the `question` output and the job summary with its
/// control characters raw: a question is the model's text, as untrusted as a provider's.
#[test]
fn a_question_with_control_characters_reaches_the_outputs_and_summary_escaped() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let question = "Which \u{1b}]0;pwned\u{7}colour?\r\nquestion=forged";
    let script = Script::with_usage(
        &[reply("ask", &[("ask_question", json!({"question_text": question}))])],
        1200,
        345,
    );
    let out = run_replay(runner.upkeep(), &repo, &script, &["--task", "t"]);
    out.assert_code(3);
    assert_eq!(out.events_of("question")[0]["question"], question, "--json stays exact");
    let outputs_text = std::fs::read_to_string(runner.output_path()).expect("outputs");
    let summary = runner.summary();
    for (what, text) in [
        ("outputs", &outputs_text),
        ("summary", &summary),
        ("stderr", &out.stderr),
    ] {
        assert_no_raw_control(what, text);
    }
    let outputs = runner.outputs();
    assert_eq!(
        outputs["question"],
        "Which \\u{1b}]0;pwned\\u{7}colour?\\u{d}\nquestion=forged"
    );
}

/// No character that can move a terminal's cursor, recolour it or hide a line (line breaks and
/// tabs aside: the sinks' own formats use them).
fn assert_no_raw_control(what: &str, text: &str) {
    let raw: Vec<char> = text
        .chars()
        .filter(|c| *c != '\n' && *c != '\t' && (c.is_control() || ('\u{202a}'..='\u{202e}').contains(c)))
        .collect();
    assert!(raw.is_empty(), "{what} holds raw control characters {raw:?}:\n{text:?}");
}

/// Reproduces a provider's error text reaching the terminal raw through upkeep's diagnostics:
/// the retry warning carries the error, and the log formatter escaped ESC and BEL but not a
/// carriage return (which hides the start of a line) or a bidirectional override (which
/// reorders it). Every line on stderr must show them escaped.
#[tokio::test]
async fn a_retried_provider_error_reaches_the_terminal_escaped() {
    let error = openai_error(
        "overloaded\rupkeep: all good \u{202e}txt.exe\u{1b}[2J",
        "server_error",
        None,
        None,
    );
    let server = model_server(vec![
        ResponseTemplate::new(500)
            .set_body_json(error)
            .insert_header("retry-after", "0"),
        streamed(Api::OpenAi, &finish("no_tasks")),
    ])
    .await;
    let repo = TestRepo::new();
    let out = run_against(Api::OpenAi, &server, &repo, &["--task", "t"]).await;
    out.assert_code(0);
    assert!(out.stderr.contains("retrying"), "{}", out.stderr);
    assert_no_raw_control("stderr", &out.stderr);
}

/// Reproduces forge text printed while workflow commands are live: a maintainer's comment
/// starts a run, reading its issue fails, and the API's answer (here a proxy's plain-text body
/// with a second line that reads `::error::`) was printed before upkeep paused command
/// processing, so the runner would act on it. Everything upkeep prints about the triggering
/// event must be inside the pause (or on one escaped line).
#[tokio::test(flavor = "multi_thread")]
async fn forge_text_about_the_triggering_event_cannot_act_as_a_workflow_command() {
    let hub = FakeGitHub::start("upkeep-bot").await;
    hub.add_issue(issue_json(7, "A task", "Do it.", &["upkeep"], "2024-01-01T00:00:00Z"));
    let comment = hub.add_issue_comment(7, "alice", "OWNER", "Yes.", "2024-02-02T00:00:00Z");
    Mock::given(method("GET"))
        .and(wiremock::matchers::path(format!("/repos/{OWNER}/{NAME}/issues/7")))
        .respond_with(ResponseTemplate::new(422).set_body_string("proxy says no\n::error::forged by the forge\n"))
        .with_priority(1)
        .mount(&hub.api)
        .await;
    let payload = json!({
        "action": "created",
        "issue": issue_json(7, "A task", "Do it.", &["upkeep"], "2024-02-02T00:00:00Z"),
        "comment": hub.issue_comments(7).into_iter().find(|c| c["id"] == comment).expect("comment"),
        "repository": repository(),
        "sender": user("alice"),
    });
    let runner = Runner::new();
    std::fs::write(runner.event_path(), payload.to_string()).expect("write event");
    let out = runner
        .on(hub.upkeep(&["--provider", "ollama"]))
        .env("GITHUB_EVENT_NAME", "issue_comment")
        .env("GITHUB_EVENT_PATH", runner.event_path())
        .env("UPKEEP_BOT_LOGIN", "upkeep-bot")
        .run_async()
        .await;
    out.assert_code(0);
    assert!(
        out.stderr.contains("forged by the forge"),
        "the reason is shown: {}",
        out.stderr
    );
    // No line outside a paused span may be a workflow command upkeep did not write.
    let outside = match out.stderr.find("::stop-commands::") {
        Some(_) => {
            let (start, end) = paused_span(&out.stderr);
            format!("{}{}", &out.stderr[..start], &out.stderr[end..])
        }
        None => out.stderr.clone(),
    };
    for line in outside.lines() {
        assert!(
            !line.starts_with("::error::forged"),
            "a forged command outside the pause:\n{}",
            out.stderr
        );
    }
}
