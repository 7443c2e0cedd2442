//! Secrets (tokens, API keys) never reach a log line, an event, a prompt, a tool result, a pull
//! request, or a file inside the clone. Each test plants known fake secrets in upkeep's
//! environment and searches every output for them.

use super::support::model_api::model_requests;
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::{TestRepo, Upkeep, reply};

const API_KEY: &str = "sk-upkeep-test-7f3a9c2e51d84b6aa0c4";
const GITHUB_TOKEN: &str = "ghp_upkeepTestToken0123456789abcdefXYZ";

fn chat_completion(content: &str) -> serde_json::Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_never_leave_the_process_or_land_in_the_clone() {
    let repo = TestRepo::new();
    let server = MockServer::start().await;
    // A model that (as if prompt-injected) tries every way to exfiltrate the secrets.
    let replies = [
        reply(
            "look at the environment",
            &[(
                "run_shell_command",
                json!({"command": "env; echo key=$OPENAI_API_KEY token=$GITHUB_TOKEN"}),
            )],
        ),
        reply(
            "write the secret everywhere",
            &[
                (
                    "write_file",
                    json!({"path": "leak.txt", "content": format!("key {API_KEY} token {GITHUB_TOKEN}\n")}),
                ),
                (
                    "create_pull_request",
                    json!({"title": format!("Leak {API_KEY}"), "body": format!("token {GITHUB_TOKEN}")}),
                ),
                ("ask_question", json!({"question_text": format!("is {API_KEY} right?")})),
            ],
        ),
    ];
    for (index, content) in replies.iter().enumerate() {
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(chat_completion(content)))
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 1).expect("small"))
            .mount(&server)
            .await;
    }
    let trace_dir = tempfile::tempdir().expect("tempdir");
    let trace = trace_dir.path().join("trace.jsonl");
    let out = Upkeep::new()
        .env("OPENAI_API_KEY", API_KEY)
        .env("GITHUB_TOKEN", GITHUB_TOKEN)
        .env("UPKEEP_LOG", "trace")
        .args([
            "run",
            "--json",
            "--allow-dangerous-tools",
            "--task",
            "t",
            "--provider",
            "openai",
            "--base-url",
        ])
        .args([format!("{}/v1", server.uri())])
        .args(["--trace"])
        .args([&trace])
        .args(["--repo"])
        .args([repo.path()])
        .run_async()
        .await;
    out.assert_code(3);

    let trace_text = std::fs::read_to_string(&trace).expect("trace");
    let requests = model_requests(&server).await;
    let request_bodies: String = requests
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    let branch = repo.bot_branches().pop().expect("a pull request branch");
    let places = [
        ("stdout events", out.stdout.clone()),
        ("stderr and logs", out.stderr.clone()),
        ("trace", trace_text),
        ("prompts sent to the model", request_bodies),
        ("pull request description", repo.description(&branch)),
        (
            "file in the pull request",
            repo.git(&["show", &format!("{branch}:leak.txt")]),
        ),
        ("commit message", repo.git(&["log", "-1", "--format=%B", &branch])),
    ];
    for (place, text) in &places {
        assert!(!text.contains(API_KEY), "API key leaked into {place}: {text}");
        assert!(!text.contains(GITHUB_TOKEN), "token leaked into {place}: {text}");
    }
    // The command ran, with neither variable in its environment.
    let shell = out
        .events_of("tool_result")
        .into_iter()
        .find(|e| e["tool"] == "run_shell_command")
        .expect("ran");
    let output = shell["output"].as_str().expect("output");
    assert!(output.contains("key= token="), "variables were not inherited: {output}");
    assert!(
        !output.contains("[REDACTED]"),
        "nothing needed redacting because nothing was inherited: {output}"
    );
    // The key was used where it belongs: the Authorization header.
    let auth = requests[0]
        .headers
        .get("authorization")
        .expect("auth header")
        .to_str()
        .expect("ascii");
    assert_eq!(auth, format!("Bearer {API_KEY}"));
    assert!(repo.description(&branch).contains("[REDACTED]"));
}

/// A token written in two halves, each harmless on its own, once reached a commit: redaction
/// looks at one call at a time. The commit now checks every changed file whole and refuses.
#[test]
fn a_secret_assembled_across_calls_is_never_committed() {
    let repo = TestRepo::new();
    let (first, second) = GITHUB_TOKEN.split_at(12);
    let script = super::support::Script::new(&[
        reply(
            "assemble",
            &[
                (
                    "write_file",
                    json!({"path": "config.txt", "content": format!("token = {first}|\n")}),
                ),
                (
                    "edit_file",
                    json!({"path": "config.txt", "old_text": "|", "new_text": second}),
                ),
                (
                    "create_pull_request",
                    json!({"title": "Add config", "body": "Adds config."}),
                ),
            ],
        ),
        reply(
            "stuck",
            &[(
                "ask_question",
                json!({"question_text": "Where should the token come from?"}),
            )],
        ),
    ]);
    let out = super::support::run_replay(
        Upkeep::new().env("GITHUB_TOKEN", GITHUB_TOKEN),
        &repo,
        &script,
        &["--task", "Add a config file"],
    );
    out.assert_code(3);
    let results = out.events_of("tool_result");
    let proposal = results
        .iter()
        .find(|result| result["tool"] == "create_pull_request")
        .expect("create_pull_request ran");
    assert_eq!(proposal["ok"], false, "{proposal}");
    assert!(
        proposal["output"]
            .as_str()
            .unwrap_or("")
            .contains("config.txt contains a secret value"),
        "{proposal}"
    );
    assert!(repo.bot_branches().is_empty(), "nothing was published");
    assert!(!out.stdout.contains(GITHUB_TOKEN) && !out.stderr.contains(GITHUB_TOKEN));
    // The unsaved change is reported, with the secret redacted from the diff.
    let unsaved = out.events_of("unsaved_changes");
    assert_eq!(unsaved.len(), 1, "{}", out.stdout);
    assert!(
        unsaved[0]["diff"].as_str().unwrap_or("").contains("[REDACTED]"),
        "{}",
        unsaved[0]
    );
}
