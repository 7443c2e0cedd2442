//! The turn loop seen from the model's side: a local HTTP server stands in for an
//! OpenAI-compatible API, streams documented chat completion chunks, records every request,
//! and the tests assert on what upkeep sent (and that it matches the API's description).

use super::support::model_api::model_requests;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::support::conformance::{Api, assert_requests_conform};
use super::support::model_api::{openai_events, openai_stream, openai_usage};
use super::support::{TestRepo, Upkeep, finish, reply, signal_and_wait};

/// A streamed chat completion as the API documents it: 120 input and 30 output tokens.
fn chat_completion(content: &str) -> ResponseTemplate {
    openai_stream(content, "stop", openai_usage(120, 30, 0))
}

/// Serves `replies` in order, one per request.
async fn model_server(replies: Vec<String>) -> MockServer {
    let server = MockServer::start().await;
    for (index, content) in replies.into_iter().enumerate() {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(chat_completion(&content))
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 1).expect("few replies"))
            .mount(&server)
            .await;
    }
    server
}

fn openai_run(repo: &TestRepo, server: &MockServer, extra: &[&str]) -> Upkeep {
    Upkeep::new()
        .args(["run", "--json", "--provider", "openai", "--base-url"])
        .args([format!("{}/v1", server.uri())])
        .args(["--repo"])
        .args([repo.path()])
        .args(extra)
}

/// The request bodies, each checked against the Chat Completions description.
fn bodies(requests: &[Request]) -> Vec<Value> {
    assert_requests_conform(Api::OpenAi, requests);
    requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("request body is JSON"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn safe_mode_keeps_run_shell_command_out_of_every_request() {
    let repo = TestRepo::new();
    let server = model_server(vec![finish("no_tasks")]).await;
    openai_run(&repo, &server, &[]).run_async().await.assert_code(0);
    let requests = model_requests(&server).await;
    assert_requests_conform(Api::OpenAi, &requests);
    assert_eq!(requests.len(), 1);
    let body = String::from_utf8_lossy(&requests[0].body);
    assert!(
        !body.contains("run_shell_command"),
        "safe mode leaked the dangerous tool: {body}"
    );
    assert!(body.contains("write_file"));

    let server = model_server(vec![finish("no_tasks")]).await;
    openai_run(&repo, &server, &["--allow-dangerous-tools"])
        .run_async()
        .await
        .assert_code(0);
    let requests = model_requests(&server).await;
    let body = String::from_utf8_lossy(&requests[0].body);
    assert!(body.contains("run_shell_command"), "the flag offers the tool");
}

#[tokio::test(flavor = "multi_thread")]
async fn history_sent_back_is_valid_json_with_tool_results_and_parse_errors() {
    let repo = TestRepo::new();
    let server = model_server(vec![
        "```json\n{'plan': 'read', 'tool_calls': [{'tool_name': 'read_file', 'arguments': {'path': 'README.md'},},],}\n```".into(),
        "I am not sure what to do.".into(),
        reply(
            "two calls, the first fails",
            &[
                ("read_file", json!({"path": "nope.txt"})),
                ("write_file", json!({"path": "x.txt", "content": "x"})),
            ],
        ),
        finish("no_tasks"),
    ])
    .await;
    let out = openai_run(&repo, &server, &["--task", "look around"]).run_async().await;
    out.assert_code(0);
    let recorded = model_requests(&server).await;
    assert_requests_conform(Api::OpenAi, &recorded);
    let requests = bodies(&recorded);
    assert_eq!(requests.len(), 4);
    let last = &requests[3]["messages"];
    let messages = last.as_array().expect("messages");
    // system, then user/assistant alternating, ending with the user.
    assert_eq!(messages[0]["role"], "system");
    for (index, message) in messages[1..].iter().enumerate() {
        let expected = if index % 2 == 0 { "user" } else { "assistant" };
        assert_eq!(message["role"], expected, "message {index} of {last}");
    }
    // Every assistant turn and every tool-result turn is valid JSON, even after a lenient parse.
    for message in &messages[2..] {
        let content = message["content"].as_str().expect("text content");
        let parsed: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("not JSON ({e}): {content}"));
        assert!(parsed.is_object());
    }
    let first_results: Value = serde_json::from_str(messages[3]["content"].as_str().expect("text")).expect("json");
    assert_eq!(first_results["tool_results"][0]["ok"], true);
    assert!(
        first_results["tool_results"][0]["output"]
            .as_str()
            .expect("output")
            .contains("# Sample")
    );
    let parse_error: Value = serde_json::from_str(messages[5]["content"].as_str().expect("text")).expect("json");
    assert!(
        parse_error["error"]
            .as_str()
            .expect("error")
            .contains("could not be used"),
        "{parse_error}"
    );
    assert!(parse_error["expected_shape"].is_string());
    let batch: Value = serde_json::from_str(messages[7]["content"].as_str().expect("text")).expect("json");
    assert_eq!(batch["tool_results"][0]["ok"], false);
    assert_eq!(batch["tool_results"][1]["skipped"], true, "{batch}");
    assert!(!repo.path().join("x.txt").exists());
    // The task and the file tree reach the model in the first user message.
    let first_user = requests[0]["messages"][1]["content"].as_str().expect("text");
    assert!(
        first_user.contains("look around") && first_user.contains("src/lib.rs"),
        "{first_user}"
    );
    // Usage from the API's own fields is counted.
    let finished = out.events_of("run_finished");
    assert_eq!(finished[0]["usage"]["input_tokens"], 480);
    assert_eq!(finished[0]["usage"]["output_tokens"], 120);
}

#[tokio::test(flavor = "multi_thread")]
async fn continuous_cycles_show_the_bots_own_open_pull_requests() {
    let repo = TestRepo::with_files(&[("TODO.md", "- [ ] add one.txt\n")]);
    let server = model_server(vec![
        reply(
            "do the task",
            &[
                ("write_file", json!({"path": "one.txt", "content": "1"})),
                (
                    "create_pull_request",
                    json!({"title": "Add one", "body": "adds one.txt"}),
                ),
                ("finish", json!({"status": "completed", "summary": "added"})),
            ],
        ),
        finish("no_tasks"),
    ])
    .await;
    openai_run(&repo, &server, &["--continuous"])
        .run_async()
        .await
        .assert_code(0);
    let requests = bodies(&model_requests(&server).await);
    assert_eq!(requests.len(), 2);
    let first = requests[0]["messages"][1]["content"].as_str().expect("text");
    let second = requests[1]["messages"][1]["content"].as_str().expect("text");
    assert!(first.contains("add one.txt"), "the task file is a task source: {first}");
    assert!(!first.contains("upkeep/add-one"));
    assert!(
        second.contains("Add one (branch upkeep/add-one)"),
        "cycle 2 sees the open pull request: {second}"
    );
}

/// Waits (bounded) until the server has seen a request: the model call is in flight.
async fn wait_for_request(server: &MockServer) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while model_requests(server).await.is_empty() {
        assert!(Instant::now() < deadline, "upkeep never called the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn interrupt_during_slow_reply(signal: nix::sys::signal::Signal) {
    let repo = TestRepo::new();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(chat_completion(&finish("no_tasks")).set_delay(Duration::from_secs(120)))
        .mount(&server)
        .await;
    let mut upkeep = openai_run(&repo, &server, &["--task", "t"]);
    let child = upkeep.spawn();
    wait_for_request(&server).await;
    assert_eq!(
        upkeep.leftover_temp_entries(),
        1,
        "the clone exists while the model thinks"
    );
    let status = signal_and_wait(child, signal).await;
    assert_eq!(
        status.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert_eq!(upkeep.leftover_temp_entries(), 0, "temporary clone removed");
    let events: Vec<Value> = String::from_utf8_lossy(&status.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("json line"))
        .collect();
    let finished = events
        .iter()
        .find(|e| e["type"] == "run_finished")
        .expect("run_finished emitted");
    assert_eq!(finished["exit_code"], 130);
    assert!(repo.bot_branches().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_during_a_slow_model_reply_exits_130_and_removes_the_clone() {
    interrupt_during_slow_reply(nix::sys::signal::Signal::SIGINT).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_slow_model_reply_exits_130_and_removes_the_clone() {
    interrupt_during_slow_reply(nix::sys::signal::Signal::SIGTERM).await;
}

/// A reply cut off at the length limit is asked again, shorter; the run goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_truncated_reply_is_asked_again_shorter() {
    let repo = TestRepo::new();
    let server = MockServer::start().await;
    let truncated = openai_stream(
        "{\"plan\": \"write a very long file\", \"tool_calls\": [{\"tool_name\": \"write_f",
        "length",
        openai_usage(120, 30, 0),
    );
    Mock::given(method("POST"))
        .respond_with(truncated)
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(chat_completion(&finish("no_tasks")))
        .with_priority(2)
        .mount(&server)
        .await;
    let out = openai_run(&repo, &server, &["--task", "t"]).run_async().await;
    out.assert_code(0);
    let requests = bodies(&model_requests(&server).await);
    assert_eq!(requests.len(), 2);
    let last = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .last()
        .expect("a message")
        .clone();
    let retry: Value = serde_json::from_str(last["content"].as_str().expect("text")).expect("json");
    assert!(retry["error"].as_str().expect("error").contains("shorter"), "{retry}");
    // The cut reply is not echoed back either, and the rejection is an event.
    let placeholder = requests[1]["messages"][2]["content"].as_str().expect("text");
    assert_eq!(
        serde_json::from_str::<Value>(placeholder).expect("valid JSON"),
        json!({"plan": "(unusable reply omitted)", "tool_calls": []})
    );
    let rejected = out.events_of("reply_rejected");
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(
        rejected[0]["reason"].as_str().expect("reason").contains("length limit"),
        "{rejected:?}"
    );
}

/// A refusal ends the run with exit 1 and says it was a refusal.
#[tokio::test(flavor = "multi_thread")]
async fn a_refusal_is_reported_as_such() {
    let repo = TestRepo::new();
    let server = MockServer::start().await;
    let refusal = openai_events("", "stop", openai_usage(120, 5, 0), Some("I can't help with that.")).concat();
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(refusal, "text/event-stream"))
        .mount(&server)
        .await;
    let out = openai_run(&repo, &server, &["--task", "t"]).run_async().await;
    out.assert_code(1);
    assert!(
        out.stderr.contains("refused") && out.stderr.contains("I can't help with that."),
        "{}",
        out.stderr
    );
    assert_eq!(out.leftover_temp_entries, 0);
}

/// With `--base-url` and no `--model`, upkeep sent OpenAI's default name to a compatible server
/// without a word and fitted requests into that model's million-token window, which a small
/// local server overflows. It now says which name it sends, and assumes the conservative window
/// of an unknown model.
#[tokio::test(flavor = "multi_thread")]
async fn a_base_url_without_a_model_is_warned_about_and_gets_a_conservative_window() {
    let repo = TestRepo::new();
    let server = model_server(vec![finish("no_tasks")]).await;
    let out = openai_run(&repo, &server, &["--task", "t"]).run_async().await;
    out.assert_code(0);
    assert!(
        out.stderr
            .contains("--base-url without --model: upkeep sends the model name gpt-4.1"),
        "{}",
        out.stderr
    );
    let context = &out.events_of("context")[0];
    assert_eq!(context["window"], 32_768, "{context}");
    let requests = model_requests(&server).await;
    assert_eq!(bodies(&requests)[0]["model"], "gpt-4.1");
}

/// A server that validates `response_format` and knows only `text` and `json_object` answers a
/// JSON schema with HTTP 500 (as llama.cpp's Python server does). The fallback fired only on a
/// 400, so upkeep retried the 500 five times and exited 1 before the model said a word. Now
/// the refusal, recognised from the body, costs one request: upkeep steps down to
/// `json_object` with the schema, says so once, and keeps that form for the rest of the run.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_refusing_json_schema_with_a_500_costs_one_request() {
    let repo = TestRepo::new();
    let server = MockServer::start().await;
    let refusal = json!({"error": {
        "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}]",
        "type": "internal_server_error",
        "param": null,
        "code": null,
    }});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(wiremock::matchers::body_partial_json(
            json!({"response_format": {"type": "json_schema"}}),
        ))
        .respond_with(ResponseTemplate::new(500).set_body_json(refusal))
        .with_priority(1)
        .mount(&server)
        .await;
    let replies = [
        reply("look", &[("read_file", json!({"path": "README.md"}))]),
        finish("no_tasks"),
    ];
    for (index, content) in replies.iter().enumerate() {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(chat_completion(content))
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 2).expect("few replies"))
            .mount(&server)
            .await;
    }
    let out = openai_run(&repo, &server, &["--task", "t", "--model", "smollm2"])
        .run_async()
        .await;
    out.assert_code(0);
    let requests = model_requests(&server).await;
    let forms: Vec<Value> = bodies(&requests)
        .iter()
        .map(|body| body["response_format"]["type"].clone())
        .collect();
    assert_eq!(
        forms,
        ["json_schema", "json_object", "json_object"],
        "one refused request, then kept"
    );
    let body = &bodies(&requests)[1];
    assert_eq!(
        body["response_format"]["schema"]["required"],
        json!(["plan", "tool_calls"]),
        "json_object carries the schema: {body}"
    );
    assert_eq!(
        out.stderr.matches("the server refused a JSON schema").count(),
        1,
        "said once: {}",
        out.stderr
    );
}

/// `--structured-output off` sends no schema at all; `json_object` starts there.
#[tokio::test(flavor = "multi_thread")]
async fn structured_output_can_be_chosen_by_hand() {
    for (choice, expected) in [("off", Value::Null), ("json_object", json!("json_object"))] {
        let repo = TestRepo::new();
        let server = model_server(vec![finish("no_tasks")]).await;
        openai_run(&repo, &server, &["--task", "t", "--structured-output", choice])
            .run_async()
            .await
            .assert_code(0);
        let requests = model_requests(&server).await;
        assert_eq!(bodies(&requests)[0]["response_format"]["type"], expected, "{choice}");
    }
}

/// No reply cap was sent, so a rambling turn on a local server generated until the server's
/// context was full (701 s for one turn). Every request now carries one: the room the context
/// fitting leaves for the reply, or `--max-reply-tokens`. A compatible server gets `max_tokens`.
#[tokio::test(flavor = "multi_thread")]
async fn every_request_carries_a_reply_cap() {
    for (extra, expected) in [
        (vec!["--context-window", "8192"], 2_048),
        (vec!["--context-window", "8192", "--max-reply-tokens", "300"], 300),
    ] {
        let repo = TestRepo::new();
        let server = model_server(vec![finish("no_tasks")]).await;
        let mut args = vec!["--task", "t", "--model", "smollm2"];
        args.extend(extra);
        openai_run(&repo, &server, &args).run_async().await.assert_code(0);
        let requests = model_requests(&server).await;
        let body = &bodies(&requests)[0];
        assert_eq!(body["max_tokens"], expected, "{args:?}");
        assert!(
            body.get("max_completion_tokens").is_none(),
            "a compatible server: {body}"
        );
    }
}

/// llama.cpp's own server words an overflow as "request (N tokens) exceeds the available context
/// size (M tokens)" (`exceed_context_size_error`), which matched none of upkeep's markers, so the
/// documented mask-and-retry never happened (exit 1). llama.cpp's Python server answers an
/// overflow with a 200 and an empty stream, which was retried five times as a cut connection.
/// Both are now taken as an overflow and masked harder once; llama.cpp's numbers are used (its
/// window, its own token count). A first request has nothing older to mask, so here the run
/// stops honestly with the context-window limit (exit 4) and names the server's window.
#[tokio::test(flavor = "multi_thread")]
async fn llama_cpp_overflows_are_recognised_and_masked_harder_once() {
    let overflow = json!({"error": {
        "code": 400,
        "message": "request (4300 tokens) exceeds the available context size (4096 tokens), try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4300,
        "n_ctx": 4096,
    }});
    for (first, window) in [
        (ResponseTemplate::new(400).set_body_json(overflow), "4096"),
        (
            ResponseTemplate::new(200).insert_header("content-type", "text/event-stream"),
            "32768",
        ),
    ] {
        let repo = TestRepo::new();
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(first)
            .mount(&server)
            .await;
        let out = openai_run(&repo, &server, &["--task", "t", "--model", "smollm2"])
            .run_async()
            .await;
        out.assert_code(4);
        let requests = model_requests(&server).await;
        assert_eq!(requests.len(), 1, "no blind retries: {}", out.stderr);
        assert!(
            out.stderr.contains("masking harder and asking once more"),
            "taken as an overflow: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&format!("context window of {window} tokens")),
            "names the window: {}",
            out.stderr
        );
    }
}

/// A weak model copied the `{"unusable_reply": "<its own text>"}` wrapper the history echoed
/// back, nesting it one level deeper each turn (18 of 20 replies in one run). An unusable reply
/// now leaves a fixed placeholder in the history, the reason goes to the next user message and
/// to a `reply_rejected` event, and a repaired reply names its repairs.
#[tokio::test(flavor = "multi_thread")]
async fn an_unusable_reply_is_never_echoed_back_and_is_reported() {
    let repo = TestRepo::new();
    let garbage = "I think GARBLED-MARKER {unusable_reply: {\"unusable_reply\": \"x\"";
    let server = model_server(vec![
        garbage.into(),
        "{\"plan\": \"read\", # first the README\n \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"README.md\"}}]".into(),
        finish("no_tasks"),
    ])
    .await;
    let out = openai_run(&repo, &server, &["--task", "t"]).run_async().await;
    out.assert_code(0);
    let requests = bodies(&model_requests(&server).await);
    assert_eq!(requests.len(), 3);
    let messages = requests[1]["messages"].as_array().expect("messages");
    let sent = serde_json::to_string(messages).expect("json");
    assert!(!sent.contains("GARBLED-MARKER"), "the raw reply was echoed: {sent}");
    assert!(!sent.contains("unusable_reply"), "{sent}");
    let placeholder = messages[2]["content"].as_str().expect("text");
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(
        serde_json::from_str::<Value>(placeholder).expect("valid JSON"),
        json!({"plan": "(unusable reply omitted)", "tool_calls": []})
    );
    let note: Value = serde_json::from_str(messages[3]["content"].as_str().expect("text")).expect("json");
    assert!(
        note["error"].as_str().expect("error").contains("could not be used"),
        "{note}"
    );
    assert!(note["expected_shape"].is_string());

    let rejected = out.events_of("reply_rejected");
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0]["turn"], 1);
    assert_eq!(rejected[0]["cycle"], 1);
    assert_eq!(rejected[0]["agent"], "root");
    assert!(
        rejected[0]["reason"].as_str().expect("reason").contains("truncated"),
        "{rejected:?}"
    );

    let responses = out.events_of("model_response");
    assert_eq!(responses.len(), 3);
    assert!(responses[0].get("repairs").is_none(), "{:?}", responses[0]);
    assert_eq!(responses[1]["repairs"], json!(["hash_comments", "missing_final_brace"]));
    assert!(responses[2].get("repairs").is_none(), "{:?}", responses[2]);
}
