//! Small models on their own servers (llama.cpp's `llama-server`, vLLM): the context window is
//! learned from what the server publishes, and a small window is usable from the first request
//! because the server's own tokenizer counts it. The servers here answer `GET /v1/models`,
//! `GET /props` and `POST /tokenize` in the shapes those servers send.

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::support::model_api::{model_requests, openai_stream, openai_usage};
use super::support::{RunOutput, TestRepo, Upkeep, finish};

/// llama-server's `GET /v1/models`: one model, with `meta` about it (`n_ctx_train` is the
/// length the model was trained for, not the one the server runs with).
fn llama_server_models() -> Value {
    json!({
        "models": [{"name": "qwen2.5-coder-0.5b-instruct-q8_0.gguf", "model": "qwen2.5-coder-0.5b-instruct-q8_0.gguf", "type": "model", "capabilities": ["completion"]}],
        "object": "list",
        "data": [{
            "id": "qwen2.5-coder-0.5b-instruct-q8_0.gguf",
            "object": "model",
            "created": 1_750_000_000,
            "owned_by": "llamacpp",
            "meta": {"vocab_type": 2, "n_vocab": 151_936, "n_ctx_train": 32_768, "n_embd": 896, "n_params": 494_032_768, "size": 531_066_880}
        }]
    })
}

/// llama-server's `GET /props`, started with `-c 4096`.
fn llama_server_props(n_ctx: u64) -> Value {
    json!({
        "default_generation_settings": {"n_ctx": n_ctx, "params": {"n_predict": -1, "temperature": 0.8}, "speculative": false, "is_processing": false},
        "total_slots": 1,
        "model_path": "/models/qwen2.5-coder-0.5b-instruct-q8_0.gguf",
        "chat_template": "{% for message in messages %}...{% endfor %}",
        "modalities": {"vision": false},
        "build_info": "b5600-abcdef0"
    })
}

/// vLLM's `GET /v1/models`, started with `--max-model-len 8192`.
fn vllm_models() -> Value {
    json!({
        "object": "list",
        "data": [{
            "id": "Qwen/Qwen2.5-0.5B-Instruct",
            "object": "model",
            "created": 1_750_000_000,
            "owned_by": "vllm",
            "root": "Qwen/Qwen2.5-0.5B-Instruct",
            "parent": null,
            "max_model_len": 8192,
            "permission": [{"id": "modelperm-1", "object": "model_permission", "created": 1_750_000_000, "allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true, "allow_search_indices": false, "allow_view": true, "allow_fine_tuning": false, "organization": "*", "group": null, "is_blocking": false}]
        }]
    })
}

/// llama-server's `POST /tokenize`: `{"tokens": [...]}`, here one token per four bytes of the
/// content (what a small model's tokenizer makes of code and English).
fn tokenize(request: &Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
    let bytes = body["content"].as_str().map_or(0, str::len);
    ResponseTemplate::new(200).set_body_json(json!({"tokens": vec![151_643; bytes / 4]}))
}

/// A model server that finishes at once, and answers `GET` `routes` with their bodies.
async fn server_publishing(routes: &[(&str, Value)]) -> MockServer {
    let server = MockServer::start().await;
    for (route, body) in routes {
        Mock::given(method("GET"))
            .and(path(*route))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .mount(&server)
            .await;
    }
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(openai_stream(&finish("no_tasks"), "stop", openai_usage(900, 30, 0)))
        .mount(&server)
        .await;
    server
}

async fn run(server: &MockServer, extra: &[&str]) -> RunOutput {
    let repo = TestRepo::new();
    Upkeep::new()
        .args(["run", "--json", "--provider", "openai", "--task", "t", "--base-url"])
        .args([format!("{}/v1", server.uri())])
        .args(["--repo"])
        .args([repo.path()])
        .args(extra)
        .run_async()
        .await
}

fn first_context(out: &RunOutput) -> Value {
    out.events_of("context").first().cloned().expect("a context event")
}

/// llama-server started with `-c 8192` publishes the window in `/props`; upkeep assumed 32,768
/// and sent requests the server refused. It now asks, and fits into 8,192.
#[tokio::test(flavor = "multi_thread")]
async fn llama_server_window_is_read_from_props() {
    let server = server_publishing(&[
        ("/v1/models", llama_server_models()),
        ("/props", llama_server_props(8192)),
    ])
    .await;
    let out = run(&server, &["--model", "qwen2.5-coder"]).await;
    out.assert_code(0);
    let context = first_context(&out);
    assert_eq!(context["window"], 8192, "{context}");
    assert_eq!(context["window_from"], "server", "{context}");
    assert!(!out.stderr.contains("assumes"), "{}", out.stderr);
}

/// vLLM publishes `max_model_len` in its model list; `--base-url` without `--model` asks too.
#[tokio::test(flavor = "multi_thread")]
async fn vllm_window_is_read_from_max_model_len() {
    let server = server_publishing(&[("/v1/models", vllm_models())]).await;
    let out = run(&server, &["--model", "Qwen/Qwen2.5-0.5B-Instruct"]).await;
    out.assert_code(0);
    let context = first_context(&out);
    assert_eq!(
        (context["window"].clone(), context["window_from"].clone()),
        (json!(8192), json!("server"))
    );
    // Asked once per run, before the first call.
    let requests = server.received_requests().await.expect("recorded");
    let asked: Vec<String> = requests
        .iter()
        .map(|request| format!("{} {}", request.method, request.url.path()))
        .collect();
    assert_eq!(asked, ["GET /v1/models", "POST /v1/chat/completions"]);
}

/// A server that lists model names only (llama-cpp-python, Ollama's `/v1`) leaves the window to
/// the table, else the stated guess, with a warning that names the way out.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_says_nothing_gets_the_stated_guess_with_a_warning() {
    let names_only = json!({"object": "list", "data": [{"id": "local-model", "object": "model", "owned_by": "me", "permissions": []}]});
    let server = server_publishing(&[("/v1/models", names_only)]).await;
    let out = run(&server, &["--model", "local-model"]).await;
    out.assert_code(0);
    let context = first_context(&out);
    assert_eq!(
        (context["window"].clone(), context["window_from"].clone()),
        (json!(32_768), json!("guess"))
    );
    assert!(
        out.stderr.contains("does not say its context window") && out.stderr.contains("--context-window"),
        "{}",
        out.stderr
    );
}

/// The operator's window is never second-guessed: the server is not asked for one.
#[tokio::test(flavor = "multi_thread")]
async fn the_operators_window_wins_and_the_server_is_not_asked() {
    let server = server_publishing(&[("/v1/models", vllm_models())]).await;
    let out = run(
        &server,
        &["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--context-window", "16384"],
    )
    .await;
    out.assert_code(0);
    let context = first_context(&out);
    assert_eq!(
        (context["window"].clone(), context["window_from"].clone()),
        (json!(16_384), json!("operator"))
    );
}

/// With a 4,096-token window the conservative estimate (one token per 2.5 bytes) refused the
/// first request of even a small repository before it was sent: 4,212 estimated against
/// 1,581 real. llama-server's tokenizer now measures the first request, and it is sent.
#[tokio::test(flavor = "multi_thread")]
async fn the_first_request_of_a_small_repository_fits_a_4096_window_by_the_servers_count() {
    let server = server_publishing(&[
        ("/v1/models", llama_server_models()),
        ("/props", llama_server_props(4096)),
    ])
    .await;
    Mock::given(method("POST"))
        .and(path("/tokenize"))
        .respond_with(tokenize)
        .mount(&server)
        .await;
    let out = run(&server, &["--model", "qwen2.5-coder"]).await;
    out.assert_code(0);
    let context = first_context(&out);
    assert_eq!(context["window"], 4096, "{context}");
    assert!(
        context["estimated_tokens"]
            .as_u64()
            .is_some_and(|tokens| tokens <= 3072),
        "{context}"
    );
    assert_eq!(
        model_requests(&server)
            .await
            .iter()
            .filter(|r| r.url.path() == "/tokenize")
            .count(),
        1
    );
}
