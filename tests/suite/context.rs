//! The history policy and the context window, end to end: the real binary works a real
//! repository against a model server per API that streams documented replies and records every
//! request, and the tests read what the model was sent (DESIGN section 10).

use super::support::model_api::model_requests;
use serde_json::{Value, json};
use wiremock::{MockServer, Request, ResponseTemplate};

use super::support::conformance::{Api, assert_requests_conform};
use super::support::model_api::{
    anthropic_error, gemini_error, model_server, ollama_error, openai_error, run_against, streamed,
};
use super::support::{RunOutput, TestRepo, finish, reply};

/// A repository with `count` files of about `bytes` bytes each, `src/f0.rs`...
fn repo_with_files(count: usize, bytes: usize) -> TestRepo {
    let files: Vec<(String, String)> = (0..count)
        .map(|index| {
            let line = format!("pub fn function_{index}_of_many() -> u64 {{ {index} }} // file {index}\n");
            (format!("src/f{index}.rs"), line.repeat(bytes / line.len() + 1))
        })
        .collect();
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    TestRepo::with_files(&borrowed)
}

fn read(index: usize) -> String {
    reply(
        &format!("read file {index}"),
        &[("read_file", json!({"path": format!("src/f{index}.rs")}))],
    )
}

/// Each API's own answer to a request longer than the model's window.
fn context_length_error(api: Api) -> ResponseTemplate {
    let body = match api {
        Api::OpenAi => openai_error(
            "This model's maximum context length is 1047576 tokens. However, your messages resulted in 1100230 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            Some("context_length_exceeded"),
            Some("messages"),
        ),
        Api::Anthropic => anthropic_error(
            "invalid_request_error",
            "prompt is too long: 208310 tokens > 200000 maximum",
        ),
        Api::Gemini => gemini_error(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1196733) exceeds the maximum number of tokens allowed (1048576).",
        ),
        Api::Ollama => ollama_error("the input length exceeds the context length"),
    };
    ResponseTemplate::new(400).set_body_json(body)
}

/// `upkeep run --task 'read the files'` against `server` speaking `api`.
async fn run(api: Api, server: &MockServer, repo: &TestRepo, extra: &[&str]) -> RunOutput {
    run_against(api, server, repo, &[&["--task", "read the files"], extra].concat()).await
}

/// What the server received, each body checked against the API description of its path.
async fn recorded(server: &MockServer) -> Vec<Request> {
    let requests = model_requests(server).await;
    super::support::conformance::assert_each_request_conforms(&requests);
    requests
}

fn json_body(request: &Request) -> Value {
    serde_json::from_slice(&request.body).expect("JSON body")
}

/// The tool results in a Chat Completions request, oldest first: each as its `output` text.
fn outputs(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| serde_json::from_str::<Value>(message["content"].as_str()?).ok())
        .filter_map(|content| content["tool_results"][0]["output"].as_str().map(str::to_owned))
        .collect()
}

fn is_stub(output: &str) -> bool {
    output.starts_with("[masked to save context")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cycle_keeps_the_last_three_results_whole_and_masks_older_ones_in_steps() {
    // Eight reads of 12 KB files (about 3,000 tokens each), then finish.
    let repo = repo_with_files(8, 12_000);
    let mut answers: Vec<ResponseTemplate> = (0..8).map(|i| streamed(Api::OpenAi, &read(i))).collect();
    answers.push(streamed(Api::OpenAi, &finish("completed")));
    let server = model_server(answers).await;
    let out = run(Api::OpenAi, &server, &repo, &[]).await;
    out.assert_code(0);
    let requests = recorded(&server).await;
    assert_eq!(requests.len(), 9);
    assert_requests_conform(Api::OpenAi, &requests);

    // The last request: eight results, the last three whole, the older ones stubs (all but
    // the newest of them: they are masked in steps) that name their call and say how to see
    // the output again.
    let last = outputs(&json_body(&requests[8]));
    assert_eq!(last.len(), 8);
    let stubs: Vec<bool> = last.iter().map(|output| is_stub(output)).collect();
    assert_eq!(stubs[..4], [true; 4], "{stubs:?}");
    assert_eq!(stubs[5..], [false; 3], "{stubs:?}");
    assert!(
        last[0].contains("read_file") && last[0].contains("src/f0.rs"),
        "{}",
        last[0]
    );
    assert!(last[0].contains("call read_file again"), "{}", last[0]);
    assert!(last[7].contains("function_7_of_many"), "the newest result is whole");
    // The model's own replies all stay.
    let replies = json_body(&requests[8])["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|message| message["role"] == "assistant")
        .count();
    assert_eq!(replies, 8);

    // Masking happens in steps: most requests start with the previous request byte for byte
    // (everything up to the end of its last message) and only add the new turn.
    let mut extensions = 0;
    let mut steps = 0;
    for pair in requests.windows(2) {
        let (before, after) = (&pair[0].body, &pair[1].body);
        let end = find(before, b"],\"stream\":true").expect("messages end before the options");
        if after.starts_with(&before[..end]) {
            extensions += 1;
        } else {
            steps += 1;
        }
    }
    assert!(steps >= 1, "older results were masked at some point");
    assert!(extensions >= 5, "{extensions} extensions, {steps} masking steps");

    // One `context` event before each call, agreeing with what was sent.
    let contexts = out.events_of("context");
    assert_eq!(contexts.len(), 9);
    for (event, request) in contexts.iter().zip(&requests) {
        assert_eq!(event["window"], 1_047_576);
        let masked = outputs(&json_body(request))
            .iter()
            .filter(|output| is_stub(output))
            .count();
        assert_eq!(event["masked_results"], masked);
        assert!(event["estimated_tokens"].as_u64().expect("estimate") > 0);
    }
    // The estimate is o200k's count of what was sent: close to the bytes / 4.
    let sent_bytes = requests[8].body.len() as f64;
    let estimated = contexts[8]["estimated_tokens"].as_f64().expect("estimate");
    assert!(
        (sent_bytes / 6.0..sent_bytes / 2.5).contains(&estimated),
        "{estimated} tokens for {sent_bytes} bytes"
    );

    // One cache key for the whole cycle.
    let keys: Vec<Value> = requests
        .iter()
        .map(|r| json_body(r)["prompt_cache_key"].clone())
        .collect();
    assert!(
        keys[0].as_str().is_some_and(|key| key.starts_with("upkeep-")),
        "{keys:?}"
    );
    assert!(keys.iter().all(|key| key == &keys[0]), "{keys:?}");
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

#[tokio::test(flavor = "multi_thread")]
async fn full_history_knob_sends_every_result_whole() {
    let repo = repo_with_files(6, 12_000);
    let mut answers: Vec<ResponseTemplate> = (0..6).map(|i| streamed(Api::OpenAi, &read(i))).collect();
    answers.push(streamed(Api::OpenAi, &finish("completed")));
    let server = model_server(answers).await;
    run(Api::OpenAi, &server, &repo, &["--full-history"])
        .await
        .assert_code(0);
    let last = outputs(&json_body(&recorded(&server).await[6]));
    assert_eq!(last.len(), 6);
    assert!(!last.iter().any(|output| is_stub(output)));
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_requests_mark_the_system_prompt_and_the_stable_prefix_for_caching() {
    let repo = repo_with_files(7, 12_000);
    let mut answers: Vec<ResponseTemplate> = (0..7).map(|i| streamed(Api::Anthropic, &read(i))).collect();
    answers.push(streamed(Api::Anthropic, &finish("completed")));
    let server = model_server(answers).await;
    run(Api::Anthropic, &server, &repo, &[]).await.assert_code(0);
    let requests = recorded(&server).await;
    assert_eq!(requests.len(), 8);
    assert_requests_conform(Api::Anthropic, &requests);
    for request in &requests {
        let body = json_body(request);
        assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
        let messages = body["messages"].as_array().expect("messages");
        let marked: Vec<usize> = (0..messages.len())
            .filter(|&i| messages[i]["content"][0].get("cache_control").is_some())
            .collect();
        assert!(marked.len() <= 3, "with the system prompt at most four: {marked:?}");
        assert_eq!(marked.first(), Some(&0), "the cycle prompt");
        assert_eq!(marked.last(), Some(&(messages.len() - 1)), "the newest message");
    }
    // Once older results are masked, the last stub is marked too: the prefix up to it stays
    // the same until the next masking step.
    let last = json_body(&requests[7]);
    let messages = last["messages"].as_array().expect("messages");
    let marked: Vec<usize> = (0..messages.len())
        .filter(|&i| messages[i]["content"][0].get("cache_control").is_some())
        .collect();
    assert_eq!(marked.len(), 3, "{marked:?}");
    let boundary = messages[marked[1]]["content"][0]["text"].as_str().expect("text");
    assert!(boundary.contains("masked to save context"), "{boundary}");
}

/// Four reads, then the API says the request is too long, then (asked again, smaller) finish.
async fn context_error_then_smaller_retry(api: Api) {
    let repo = repo_with_files(4, 12_000);
    let mut answers: Vec<ResponseTemplate> = (0..4).map(|i| streamed(api, &read(i))).collect();
    answers.push(context_length_error(api));
    answers.push(streamed(api, &finish("completed")));
    let server = model_server(answers).await;
    let out = run(api, &server, &repo, &[]).await;
    out.assert_code(0);
    let requests = recorded(&server).await;
    assert_eq!(requests.len(), 6, "{api:?}: one retry after the error");
    assert_requests_conform(api, &requests);
    // The conversation, not the whole body: the system prompt and the reply schema are the same
    // in both requests, and how large they are says nothing about the history policy.
    let conversation = |request: &Request| -> usize {
        let body = json_body(request);
        let turns = body
            .get("contents")
            .or_else(|| body.get("messages"))
            .and_then(Value::as_array);
        turns
            .expect("a conversation")
            .iter()
            .filter(|turn| turn["role"] != "system")
            .map(|turn| turn.to_string().len())
            .sum()
    };
    let refused = conversation(&requests[4]);
    let retried = conversation(&requests[5]);
    assert!(
        retried * 10 < refused * 8,
        "{api:?}: the retry is clearly smaller ({retried} bytes of conversation after {refused})"
    );
    assert!(
        String::from_utf8_lossy(&requests[5].body).contains("masked to save context"),
        "{api:?}"
    );
    // Two `context` events for that turn: the refused request and the smaller one.
    let turns: Vec<u64> = out
        .events_of("context")
        .iter()
        .map(|event| event["turn"].as_u64().expect("turn"))
        .collect();
    assert_eq!(turns, [1, 2, 3, 4, 5, 5], "{api:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_context_length_error_is_answered_with_one_smaller_request() {
    context_error_then_smaller_retry(Api::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_context_length_error_is_answered_with_one_smaller_request() {
    context_error_then_smaller_retry(Api::Anthropic).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_context_length_error_is_answered_with_one_smaller_request() {
    context_error_then_smaller_retry(Api::Gemini).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama_context_length_error_is_answered_with_one_smaller_request() {
    context_error_then_smaller_retry(Api::Ollama).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_context_length_error_ends_the_cycle_with_the_limit_outcome() {
    let repo = repo_with_files(2, 12_000);
    let server = model_server(vec![
        streamed(Api::OpenAi, &read(0)),
        context_length_error(Api::OpenAi),
        context_length_error(Api::OpenAi),
    ])
    .await;
    let out = run(Api::OpenAi, &server, &repo, &[]).await;
    out.assert_code(4);
    assert_eq!(recorded(&server).await.len(), 3);
    let finished = &out.events_of("run_finished")[0];
    assert_eq!(finished["outcome"], "limit");
    assert!(out.stderr.contains("context window"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_window_too_small_for_the_prompt_stops_before_any_call() {
    let repo = TestRepo::new();
    let server = model_server(vec![streamed(Api::OpenAi, &finish("no_tasks"))]).await;
    let out = run(Api::OpenAi, &server, &repo, &["--context-window", "1024"]).await;
    out.assert_code(4);
    assert!(recorded(&server).await.is_empty(), "nothing was sent");
    assert!(out.stderr.contains("--context-window"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama_gets_the_window_as_num_ctx_from_the_flag_or_the_operator_config() {
    let repo = TestRepo::new();
    let server = model_server(vec![streamed(Api::Ollama, &finish("no_tasks"))]).await;
    run(Api::Ollama, &server, &repo, &["--context-window", "16384"])
        .await
        .assert_code(0);
    let requests = recorded(&server).await;
    assert_requests_conform(Api::Ollama, &requests);
    assert_eq!(json_body(&requests[0])["options"]["num_ctx"], 16_384);

    let config = tempfile::tempdir().expect("tempdir");
    let path = config.path().join("operator.toml");
    std::fs::write(&path, "[models.\"llama3.1\"]\ncontext_window = 24576\n").expect("write config");
    let server = model_server(vec![streamed(Api::Ollama, &finish("no_tasks"))]).await;
    let out = run(
        Api::Ollama,
        &server,
        &repo,
        &["--config", path.to_str().expect("utf-8")],
    )
    .await;
    out.assert_code(0);
    assert_eq!(json_body(&recorded(&server).await[0])["options"]["num_ctx"], 24_576);
    assert_eq!(out.events_of("context")[0]["window"], 24_576);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repository_cannot_set_the_models_window() {
    let repo = TestRepo::with_files(&[
        ("README.md", "# r\n"),
        (".upkeep.toml", "[models.\"llama3.1\"]\ncontext_window = 1048576\n"),
    ]);
    let server = model_server(vec![streamed(Api::Ollama, &finish("no_tasks"))]).await;
    let out = run(Api::Ollama, &server, &repo, &[]).await;
    out.assert_code(2);
    assert!(out.stderr.contains("operator-only"), "{}", out.stderr);
    assert!(recorded(&server).await.is_empty());
}
