//! The four HTTP providers and the retry wrapper against a real HTTP server per test
//! (wiremock), answering with each API's documented streaming bodies (see
//! `support::model_api`). Every test asserts on what was sent (auth, model, system prompt
//! placement, roles, schema field, cache hints) as well as on what was read back, because a
//! provider that reads well but sends the wrong request only fails against the real API; every
//! request received is also checked against the vendor's API description.

use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Value, json};
use upkeep::cli::ProviderKind;
use upkeep::config::ProviderSettings;
use upkeep::llm::retry::{RetryPolicy, Retrying};
use upkeep::llm::{
    CacheHints, Completion, CompletionRequest, Message, Provider, ProviderError, StopReason, Usage,
    anthropic::Anthropic, gemini::Gemini, ollama::Ollama, openai::OpenAi,
};
use upkeep::tools::spec::{ToolClass, ToolSpec, object_schema, reply_schema};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::support::conformance::{Api, Body, assert_conforms, assert_requests_conform};
use super::support::model_api::{
    anthropic_error, anthropic_stream, anthropic_usage, gemini_error, gemini_stream, gemini_usage, ollama_error,
    ollama_stream, openai_error, openai_stream, openai_usage,
};

const KEY: &str = "sk-test-5f0e9c1d-secret";
const SYSTEM: &str = "You are upkeep, a maintenance bot.";
const REPLY: &str = r#"{"plan":"read it","tool_calls":[{"tool_name":"read_file","arguments":{"path":"README.md"}}]}"#;

/// A conversation of three turns and the reply schema of the safe tools only.
struct Conversation {
    messages: Vec<Message>,
    schema: Value,
}

impl Conversation {
    fn new() -> Self {
        let specs = vec![
            ToolSpec::new(
                "read_file",
                ToolClass::Safe,
                "Read a file",
                object_schema(&[("path", "string", "relative path", true)]),
            ),
            ToolSpec::new(
                "list_files",
                ToolClass::Safe,
                "List files",
                object_schema(&[("path", "string", "folder", false)]),
            ),
            ToolSpec::new(
                "create_pull_request",
                ToolClass::Safe,
                "Open a pull request",
                object_schema(&[
                    ("title", "string", "title", true),
                    ("body", "string", "body", true),
                    ("issue", "integer", "issue number", false),
                ]),
            ),
            ToolSpec::new(
                "finish",
                ToolClass::Safe,
                "End the cycle",
                object_schema(&[
                    ("status", "string", "completed or no_tasks", true),
                    ("summary", "string", "summary", true),
                ]),
            ),
        ];
        Self {
            messages: vec![
                Message::user("Task: fix the typo in README.md"),
                Message::assistant(r#"{"plan":"look","tool_calls":[]}"#),
                Message::user("Results: none. Continue."),
            ],
            schema: reply_schema(&specs),
        }
    }

    fn request(&self) -> CompletionRequest<'_> {
        CompletionRequest::new(SYSTEM, &self.messages, &self.schema)
    }
}

fn settings(kind: ProviderKind, base_url: String, key: Option<&str>) -> ProviderSettings {
    ProviderSettings {
        kind,
        model: None,
        base_url: Some(base_url),
        api_key: key.map(|key| SecretString::from(key.to_owned())),
        replay: None,
        request_timeout: Duration::from_secs(10),
        context_window: None,
    }
}

fn openai(server: &MockServer) -> OpenAi {
    OpenAi::new(&settings(
        ProviderKind::Openai,
        format!("{}/v1", server.uri()),
        Some(KEY),
    ))
    .expect("openai provider")
}

fn anthropic(server: &MockServer) -> Anthropic {
    Anthropic::new(&settings(ProviderKind::Anthropic, server.uri(), Some(KEY))).expect("anthropic provider")
}

fn gemini(server: &MockServer) -> Gemini {
    // The host root, as Google's SDKs take it: `/v1beta` is added.
    Gemini::new(&settings(ProviderKind::Gemini, server.uri(), Some(KEY))).expect("gemini provider")
}

fn ollama(server: &MockServer) -> Ollama {
    Ollama::new(&settings(ProviderKind::Ollama, server.uri(), None)).expect("ollama provider")
}

/// Retries with waits short enough for tests.
fn fast_retries(provider: impl Provider + 'static, max_attempts: u32) -> Retrying {
    Retrying::new(
        Box::new(provider),
        RetryPolicy {
            max_attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
    )
}

const OPENAI_PATH: &str = "/v1/chat/completions";
const ANTHROPIC_PATH: &str = "/v1/messages";
const GEMINI_PATH: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";
const OLLAMA_PATH: &str = "/api/chat";

/// Answers every POST to `route` with `response`.
async fn answer(server: &MockServer, route: &str, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(response)
        .mount(server)
        .await;
}

/// Answers the next POST to `route` (once) with `response`; later mocks answer the rest.
async fn answer_once(server: &MockServer, route: &str, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(response)
        .up_to_n_times(1)
        .mount(server)
        .await;
}

/// What the server received, each body checked against the API description of its path.
async fn requests(server: &MockServer) -> Vec<Request> {
    let requests = server.received_requests().await.expect("request recording is on");
    super::support::conformance::assert_each_request_conforms(&requests);
    requests
}

fn body(request: &Request) -> Value {
    request.body_json().expect("the request body is JSON")
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers.get(name).and_then(|value| value.to_str().ok())
}

fn roles(messages: &Value, key: &str) -> Vec<String> {
    messages
        .as_array()
        .expect("messages array")
        .iter()
        .map(|message| message[key].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The request never names a tool the run did not enable.
fn assert_no_dangerous_tool(request: &Request) {
    let text = String::from_utf8_lossy(&request.body);
    assert!(
        !text.contains("run_shell_command"),
        "dangerous tool leaked into the request: {text}"
    );
}

fn assert_unauthorized(result: Result<Completion, ProviderError>, status: u16, api_text: &str) {
    let error = result.expect_err("an auth error fails the call");
    match &error {
        ProviderError::Http {
            status: got, message, ..
        } => {
            assert_eq!(*got, status);
            assert!(message.contains(api_text), "API message kept: {message}");
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    assert!(!error.is_retryable());
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(KEY), "the key leaked into the error: {shown}");
    assert!(shown.contains(api_text), "{shown}");
}

/// Usage with no cache counts.
fn plain_usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
        ..Usage::default()
    }
}

fn assert_malformed(result: Result<Completion, ProviderError>) {
    match result {
        Err(ProviderError::MalformedResponse { .. }) => {}
        other => panic!("expected MalformedResponse, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions

fn openai_reply(content: &str, finish_reason: &str) -> ResponseTemplate {
    openai_stream(content, finish_reason, openai_usage(1200, 85, 0))
}

#[tokio::test]
async fn openai_streams_with_strict_schema_system_history_and_cache_key() {
    let server = MockServer::start().await;
    answer(
        &server,
        OPENAI_PATH,
        openai_stream(REPLY, "stop", openai_usage(1200, 85, 1024)),
    )
    .await;
    let conversation = Conversation::new();
    let request = CompletionRequest {
        cache: CacheHints {
            key: Some("upkeep-run-1"),
            breakpoints: &[0, 2],
        },
        ..conversation.request()
    };

    let completion = openai(&server).complete(request).await.expect("completion");
    assert_eq!(completion.content, REPLY);
    // `prompt_tokens` already includes the cached tokens.
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 1200,
            output_tokens: 85,
            cached_input_tokens: 1024,
            cache_write_tokens: 0,
        }
    );
    assert_eq!(completion.stop, StopReason::Complete);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_requests_conform(Api::OpenAi, &sent);
    assert_eq!(
        header(&sent[0], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = body(&sent[0]);
    assert_eq!(body["model"], "gpt-4.1");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["prompt_cache_key"], "upkeep-run-1");
    assert_eq!(
        roles(&body["messages"], "role"),
        ["system", "user", "assistant", "user"]
    );
    assert_eq!(body["messages"][0]["content"], SYSTEM);
    assert_eq!(body["messages"][3]["content"], "Results: none. Continue.");
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "upkeep_reply");
    assert_eq!(format["json_schema"]["strict"], true);
    // Strict mode: every property required, optional ones nullable, objects closed.
    let branches = format["json_schema"]["schema"]["properties"]["tool_calls"]["items"]["anyOf"]
        .as_array()
        .expect("one branch per tool");
    assert_eq!(branches.len(), 4);
    let list_files = branches
        .iter()
        .find(|branch| branch["properties"]["tool_name"]["enum"][0] == "list_files")
        .expect("list_files branch");
    let arguments = &list_files["properties"]["arguments"];
    assert_eq!(arguments["required"], json!(["path"]));
    assert_eq!(arguments["properties"]["path"]["type"], json!(["string", "null"]));
    assert_eq!(arguments["additionalProperties"], false);
    assert_no_dangerous_tool(&sent[0]);
}

#[tokio::test]
async fn openai_reports_progress_as_the_reply_streams_in() {
    let server = MockServer::start().await;
    answer(&server, OPENAI_PATH, openai_reply(REPLY, "stop")).await;
    let conversation = Conversation::new();
    let seen = std::sync::Mutex::new(Vec::new());
    let progress = |bytes: u64| seen.lock().expect("lock").push(bytes);
    let request = CompletionRequest {
        progress: Some(&progress),
        ..conversation.request()
    };
    openai(&server).complete(request).await.expect("completion");
    let seen = seen.into_inner().expect("lock");
    assert!(seen.len() >= 2, "one report per piece: {seen:?}");
    assert!(seen.windows(2).all(|pair| pair[0] < pair[1]), "{seen:?}");
    assert_eq!(seen.last().copied(), Some(REPLY.len() as u64));
}

#[tokio::test]
async fn openai_without_a_key_sends_no_authorization_header() {
    // Local OpenAI-compatible servers need no key; an empty bearer would confuse some.
    let server = MockServer::start().await;
    answer(&server, OPENAI_PATH, openai_reply(REPLY, "stop")).await;
    let provider =
        OpenAi::new(&settings(ProviderKind::Openai, format!("{}/v1", server.uri()), None)).expect("provider");
    let conversation = Conversation::new();
    provider.complete(conversation.request()).await.expect("completion");
    assert_eq!(header(&requests(&server).await[0], "authorization"), None);
}

#[tokio::test]
async fn openai_reads_a_server_that_answers_without_streaming() {
    // Some compatible servers and proxies ignore `stream: true` and answer with one body.
    let server = MockServer::start().await;
    let whole = json!({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion", "created": 1741569952,
        "model": "gpt-4.1-2025-04-14",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY, "refusal": null, "annotations": []},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": openai_usage(1200, 85, 256), "service_tier": "default", "system_fingerprint": "fp_b3f1157249"
    });
    assert_conforms(Api::OpenAi, Body::Response, &whole);
    answer(&server, OPENAI_PATH, ResponseTemplate::new(200).set_body_json(whole)).await;
    let conversation = Conversation::new();
    let completion = openai(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.content, REPLY);
    assert_eq!(completion.usage.cached_input_tokens, 256);
}

#[tokio::test]
async fn openai_unauthorized_is_reported_once_without_the_key() {
    let server = MockServer::start().await;
    // Echo the whole key back (a proxy might) to prove it is redacted from the message.
    let error = openai_error(
        &format!(
            "Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys."
        ),
        "invalid_request_error",
        Some("invalid_api_key"),
        None,
    );
    answer(&server, OPENAI_PATH, ResponseTemplate::new(401).set_body_json(error)).await;
    let conversation = Conversation::new();
    let result = fast_retries(openai(&server), 5).complete(conversation.request()).await;
    assert_unauthorized(result, 401, "Incorrect API key provided");
    assert_eq!(requests(&server).await.len(), 1, "auth errors are not retried");
}

#[tokio::test]
async fn openai_truncated_reply_is_length() {
    let server = MockServer::start().await;
    answer(&server, OPENAI_PATH, openai_reply(r#"{"plan":"wri"#, "length")).await;
    let conversation = Conversation::new();
    let completion = openai(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.stop, StopReason::Length);
    assert_eq!(completion.content, r#"{"plan":"wri"#);
}

#[tokio::test]
async fn openai_refusal_is_reported_as_refusal() {
    let server = MockServer::start().await;
    let events =
        super::support::model_api::openai_events("", "stop", openai_usage(10, 5, 0), Some("I can't help with that."));
    answer(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(200).set_body_raw(events.concat(), "text/event-stream"),
    )
    .await;
    let conversation = Conversation::new();
    let completion = openai(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.stop, StopReason::Refusal("I can't help with that.".into()));
}

#[tokio::test]
async fn openai_malformed_body_is_malformed_response() {
    let server = MockServer::start().await;
    answer(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(200).set_body_raw("data: <html>gateway</html>\n\n", "text/event-stream"),
    )
    .await;
    let conversation = Conversation::new();
    assert_malformed(openai(&server).complete(conversation.request()).await);

    // JSON, but not a chat completion.
    let server = MockServer::start().await;
    answer(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(200).set_body_json(json!({"object": "list"})),
    )
    .await;
    assert_malformed(openai(&server).complete(conversation.request()).await);
}

#[tokio::test]
async fn openai_falls_back_to_plain_json_when_the_server_refuses_structured_output() {
    // What vLLM/llama.cpp-style servers without structured output answer.
    let server = MockServer::start().await;
    let refusal = openai_error(
        "response_format json_schema is not supported",
        "invalid_request_error",
        None,
        Some("response_format"),
    );
    answer_once(&server, OPENAI_PATH, ResponseTemplate::new(400).set_body_json(refusal)).await;
    answer(&server, OPENAI_PATH, openai_reply(REPLY, "stop")).await;
    let provider = openai(&server);
    let conversation = Conversation::new();

    let first = provider
        .complete(conversation.request())
        .await
        .expect("the same call succeeds");
    assert_eq!(first.content, REPLY);
    let second = provider.complete(conversation.request()).await.expect("next call");
    assert_eq!(second.content, REPLY);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 3);
    assert_requests_conform(Api::OpenAi, &sent);
    assert!(
        body(&sent[0]).get("response_format").is_some(),
        "first try asks for the schema"
    );
    assert!(body(&sent[1]).get("response_format").is_none(), "the retry drops it");
    assert!(
        body(&sent[2]).get("response_format").is_none(),
        "and so does every later call"
    );
    assert_eq!(
        roles(&body(&sent[2])["messages"], "role"),
        ["system", "user", "assistant", "user"]
    );
}

#[tokio::test]
async fn openai_compatible_server_refusing_the_cache_key_is_asked_without_it() {
    // A strict compatible server that rejects fields it does not know.
    let server = MockServer::start().await;
    let refusal = json!({"detail": [{"type": "extra_forbidden", "loc": ["body", "prompt_cache_key"], "msg": "Extra inputs are not permitted"}]});
    answer_once(&server, OPENAI_PATH, ResponseTemplate::new(422).set_body_json(refusal)).await;
    answer(&server, OPENAI_PATH, openai_reply(REPLY, "stop")).await;
    let provider = openai(&server);
    let conversation = Conversation::new();
    let request = CompletionRequest {
        cache: CacheHints {
            key: Some("k"),
            breakpoints: &[],
        },
        ..conversation.request()
    };
    provider
        .complete(request)
        .await
        .expect("asked again without the options");
    provider.complete(request).await.expect("and without them from then on");
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 3);
    assert_eq!(body(&sent[0])["prompt_cache_key"], "k");
    for later in &sent[1..] {
        assert!(body(later).get("prompt_cache_key").is_none());
        assert!(body(later).get("stream_options").is_none());
        assert_eq!(body(later)["stream"], true);
    }
}

#[tokio::test]
async fn openai_other_bad_requests_do_not_trigger_the_fallback() {
    let server = MockServer::start().await;
    let error = openai_error(
        "max_tokens is too large",
        "invalid_request_error",
        None,
        Some("max_tokens"),
    );
    answer(&server, OPENAI_PATH, ResponseTemplate::new(400).set_body_json(error)).await;
    let conversation = Conversation::new();
    let result = openai(&server).complete(conversation.request()).await;
    assert!(
        matches!(result, Err(ProviderError::Http { status: 400, .. })),
        "{result:?}"
    );
    assert_eq!(requests(&server).await.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages

fn anthropic_reply(text: &str, stop_reason: &str) -> ResponseTemplate {
    anthropic_stream(text, stop_reason, anthropic_usage(2095, 0, 0), 503)
}

#[tokio::test]
async fn anthropic_streams_with_system_blocks_cache_breakpoints_and_schema() {
    let server = MockServer::start().await;
    // 2,095 tokens after the last breakpoint, 10,000 read from the cache, 3,000 written.
    answer(
        &server,
        ANTHROPIC_PATH,
        anthropic_stream(REPLY, "end_turn", anthropic_usage(2095, 10_000, 3_000), 503),
    )
    .await;
    let conversation = Conversation::new();
    let request = CompletionRequest {
        cache: CacheHints {
            key: Some("ignored-by-anthropic"),
            breakpoints: &[0, 2],
        },
        ..conversation.request()
    };

    let completion = anthropic(&server).complete(request).await.expect("completion");
    assert_eq!(completion.content, REPLY);
    // Normalised: every input token counted, the cached and written ones among them.
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 15_095,
            output_tokens: 503,
            cached_input_tokens: 10_000,
            cache_write_tokens: 3_000,
        }
    );
    assert_eq!(completion.stop, StopReason::Complete);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_requests_conform(Api::Anthropic, &sent);
    assert_eq!(header(&sent[0], "x-api-key"), Some(KEY));
    assert_eq!(header(&sent[0], "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(&sent[0], "content-type"), Some("application/json"));
    assert_eq!(header(&sent[0], "authorization"), None);
    let body = body(&sent[0]);
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["stream"], true);
    assert_eq!(body["system"][0]["text"], SYSTEM);
    assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(roles(&body["messages"], "role"), ["user", "assistant", "user"]);
    let marked: Vec<bool> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| message["content"][0].get("cache_control").is_some())
        .collect();
    assert_eq!(marked, [true, false, true], "breakpoints on the messages named");
    let format = &body["output_config"]["format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["schema"]["additionalProperties"], false);
    let branches = format["schema"]["properties"]["tool_calls"]["items"]["anyOf"]
        .as_array()
        .expect("branches");
    assert_eq!(branches.len(), 4);
    assert!(
        branches
            .iter()
            .all(|branch| branch["properties"]["arguments"]["additionalProperties"] == false)
    );
    assert_no_dangerous_tool(&sent[0]);
}

#[tokio::test]
async fn anthropic_never_sends_more_than_four_breakpoints() {
    let server = MockServer::start().await;
    answer(&server, ANTHROPIC_PATH, anthropic_reply(REPLY, "end_turn")).await;
    let messages: Vec<Message> = (0..9)
        .map(|i| {
            if i % 2 == 0 {
                Message::user(format!("u{i}"))
            } else {
                Message::assistant(format!("a{i}"))
            }
        })
        .collect();
    let schema = Conversation::new().schema;
    let request = CompletionRequest {
        cache: CacheHints {
            key: None,
            breakpoints: &[0, 2, 4, 6, 8],
        },
        ..CompletionRequest::new(SYSTEM, &messages, &schema)
    };
    anthropic(&server).complete(request).await.expect("completion");
    let sent = requests(&server).await;
    assert_requests_conform(Api::Anthropic, &sent);
    let text = String::from_utf8_lossy(&sent[0].body);
    assert_eq!(text.matches("cache_control").count(), 4, "{text}");
    let body = body(&sent[0]);
    // The system prompt and the newest three.
    assert!(body["messages"][8]["content"][0].get("cache_control").is_some());
    assert!(body["messages"][0]["content"][0].get("cache_control").is_none());
}

#[tokio::test]
async fn anthropic_base_url_is_the_host_root_and_a_version_path_is_not_doubled() {
    for base in ["{uri}", "{uri}/", "{uri}/v1"] {
        let server = MockServer::start().await;
        answer(&server, ANTHROPIC_PATH, anthropic_reply(REPLY, "end_turn")).await;
        let base = base.replace("{uri}", &server.uri());
        let provider = Anthropic::new(&settings(ProviderKind::Anthropic, base.clone(), Some(KEY))).expect("provider");
        let conversation = Conversation::new();
        provider
            .complete(conversation.request())
            .await
            .unwrap_or_else(|error| panic!("{base}: {error}"));
        assert_eq!(requests(&server).await[0].url.path(), "/v1/messages", "{base}");
    }
}

#[tokio::test]
async fn anthropic_unauthorized_is_reported_once_without_the_key() {
    let server = MockServer::start().await;
    let error = anthropic_error("authentication_error", "invalid x-api-key");
    answer(&server, ANTHROPIC_PATH, ResponseTemplate::new(401).set_body_json(error)).await;
    let conversation = Conversation::new();
    let result = fast_retries(anthropic(&server), 5)
        .complete(conversation.request())
        .await;
    assert_unauthorized(result, 401, "invalid x-api-key");
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn anthropic_max_tokens_is_length_and_refusal_is_refusal() {
    let server = MockServer::start().await;
    answer_once(&server, ANTHROPIC_PATH, anthropic_reply(r#"{"plan":"#, "max_tokens")).await;
    answer(&server, ANTHROPIC_PATH, anthropic_reply("", "refusal")).await;
    let provider = anthropic(&server);
    let conversation = Conversation::new();
    let truncated = provider.complete(conversation.request()).await.expect("completion");
    assert_eq!(truncated.stop, StopReason::Length);
    let refused = provider.complete(conversation.request()).await.expect("completion");
    assert!(matches!(refused.stop, StopReason::Refusal(_)), "{:?}", refused.stop);
}

#[tokio::test]
async fn anthropic_malformed_body_is_malformed_response() {
    let server = MockServer::start().await;
    answer(
        &server,
        ANTHROPIC_PATH,
        ResponseTemplate::new(200).set_body_raw(
            "event: message_start\ndata: {\"type\":\"message\",\n\n",
            "text/event-stream",
        ),
    )
    .await;
    let conversation = Conversation::new();
    assert_malformed(anthropic(&server).complete(conversation.request()).await);
}

#[tokio::test]
async fn anthropic_overloaded_529_is_retried() {
    let server = MockServer::start().await;
    let overloaded = anthropic_error("overloaded_error", "Overloaded");
    answer_once(
        &server,
        ANTHROPIC_PATH,
        ResponseTemplate::new(529).set_body_json(overloaded),
    )
    .await;
    answer(&server, ANTHROPIC_PATH, anthropic_reply(REPLY, "end_turn")).await;
    let conversation = Conversation::new();
    let completion = fast_retries(anthropic(&server), 3)
        .complete(conversation.request())
        .await
        .expect("second try works");
    assert_eq!(completion.content, REPLY);
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn anthropic_overloaded_inside_the_stream_is_retried() {
    // The API may report overload as an `error` event after the stream has started.
    let server = MockServer::start().await;
    let mut events = super::support::model_api::anthropic_events(REPLY, "end_turn", anthropic_usage(10, 0, 0), 5);
    events.truncate(3);
    events.push(("error", anthropic_error("overloaded_error", "Overloaded")));
    answer_once(
        &server,
        ANTHROPIC_PATH,
        ResponseTemplate::new(200)
            .set_body_raw(super::support::model_api::anthropic_body(&events), "text/event-stream"),
    )
    .await;
    answer(&server, ANTHROPIC_PATH, anthropic_reply(REPLY, "end_turn")).await;
    let conversation = Conversation::new();
    let completion = fast_retries(anthropic(&server), 3)
        .complete(conversation.request())
        .await
        .expect("retried");
    assert_eq!(completion.content, REPLY);
    assert_eq!(requests(&server).await.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Gemini streamGenerateContent

fn gemini_reply(text: &str, finish_reason: &str) -> ResponseTemplate {
    gemini_stream(text, finish_reason, gemini_usage(1500, 60, 30, 0))
}

#[tokio::test]
async fn gemini_streams_with_system_instruction_model_role_and_json_schema() {
    let server = MockServer::start().await;
    answer(
        &server,
        GEMINI_PATH,
        gemini_stream(REPLY, "STOP", gemini_usage(1500, 60, 30, 1024)),
    )
    .await;
    let conversation = Conversation::new();

    let completion = gemini(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.content, REPLY);
    // Thinking tokens are billed as output; `promptTokenCount` includes the cached tokens.
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 1500,
            output_tokens: 90,
            cached_input_tokens: 1024,
            cache_write_tokens: 0,
        }
    );
    assert_eq!(completion.stop, StopReason::Complete);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_requests_conform(Api::Gemini, &sent);
    assert_eq!(header(&sent[0], "x-goog-api-key"), Some(KEY));
    assert_eq!(sent[0].url.query(), Some("alt=sse"), "the key never travels in the URL");
    let body = body(&sent[0]);
    assert_eq!(body["systemInstruction"]["parts"][0]["text"], SYSTEM);
    assert_eq!(roles(&body["contents"], "role"), ["user", "model", "user"]);
    assert_eq!(
        body["contents"][0]["parts"][0]["text"],
        "Task: fix the typo in README.md"
    );
    let config = &body["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert!(config.get("responseSchema").is_none());
    let branches = config["responseJsonSchema"]["properties"]["tool_calls"]["items"]["anyOf"]
        .as_array()
        .expect("branches");
    assert_eq!(branches.len(), 4);
    assert_no_dangerous_tool(&sent[0]);
}

#[tokio::test]
async fn gemini_base_url_is_the_host_root_and_a_version_path_is_not_doubled() {
    for base in ["{uri}", "{uri}/v1beta", "{uri}/v1beta/"] {
        let server = MockServer::start().await;
        answer(&server, GEMINI_PATH, gemini_reply(REPLY, "STOP")).await;
        let base = base.replace("{uri}", &server.uri());
        let provider = Gemini::new(&settings(ProviderKind::Gemini, base.clone(), Some(KEY))).expect("provider");
        let conversation = Conversation::new();
        provider
            .complete(conversation.request())
            .await
            .unwrap_or_else(|error| panic!("{base}: {error}"));
        assert_eq!(requests(&server).await[0].url.path(), GEMINI_PATH, "{base}");
    }
}

#[tokio::test]
async fn a_wrong_base_url_is_named_in_the_error_and_the_key_never_is() {
    // A base URL with a path the API does not have: the server answers 404.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(404).set_body_string("404 page not found"))
        .mount(&server)
        .await;
    let base = format!("{}/wrong/prefix", server.uri());
    let provider = Anthropic::new(&settings(ProviderKind::Anthropic, base.clone(), Some(KEY))).expect("provider");
    let conversation = Conversation::new();
    let error = provider.complete(conversation.request()).await.expect_err("404");
    let shown = format!("{error} {error:?}");
    assert!(shown.contains(&format!("{base}/v1/messages")), "{shown}");
    assert!(!shown.contains(KEY), "{shown}");

    // Credentials put in the URL itself are not shown either.
    let port = server.address().port();
    let base = format!("http://user:{KEY}@127.0.0.1:{port}/wrong");
    let provider = Gemini::new(&settings(ProviderKind::Gemini, base, Some(KEY))).expect("provider");
    let error = provider.complete(conversation.request()).await.expect_err("404");
    let shown = format!("{error} {error:?}");
    assert!(
        shown.contains(&format!("http://127.0.0.1:{port}/wrong/v1beta/")),
        "{shown}"
    );
    assert!(!shown.contains(KEY), "{shown}");
}

#[tokio::test]
async fn gemini_bad_keys_are_reported_once_without_the_key() {
    // Gemini answers an invalid key with 400 INVALID_ARGUMENT; it must not be mistaken for a
    // refused schema (which would resend the request).
    let mut invalid = gemini_error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
    );
    invalid["error"]["details"] = json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]);
    let cases = [
        (400, invalid, "API key not valid"),
        (
            401,
            gemini_error(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials.",
            ),
            "invalid authentication credentials",
        ),
    ];
    for (status, error, text) in cases {
        let server = MockServer::start().await;
        answer(&server, GEMINI_PATH, ResponseTemplate::new(status).set_body_json(error)).await;
        let conversation = Conversation::new();
        let result = fast_retries(gemini(&server), 5).complete(conversation.request()).await;
        assert_unauthorized(result, status, text);
        assert_eq!(requests(&server).await.len(), 1);
    }
}

#[tokio::test]
async fn gemini_max_tokens_is_length_and_blocks_are_refusals() {
    let server = MockServer::start().await;
    answer_once(&server, GEMINI_PATH, gemini_reply("{\"pl", "MAX_TOKENS")).await;
    answer_once(&server, GEMINI_PATH, gemini_reply("x", "SAFETY")).await;
    let blocked_prompt = json!({
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        "modelVersion": "gemini-2.5-flash"
    });
    answer(
        &server,
        GEMINI_PATH,
        ResponseTemplate::new(200).set_body_raw(
            super::support::model_api::gemini_body(&[blocked_prompt]),
            "text/event-stream",
        ),
    )
    .await;
    let provider = gemini(&server);
    let conversation = Conversation::new();

    let truncated = provider.complete(conversation.request()).await.expect("completion");
    assert_eq!(truncated.stop, StopReason::Length);
    let unsafe_reply = provider.complete(conversation.request()).await.expect("completion");
    assert!(
        matches!(&unsafe_reply.stop, StopReason::Refusal(why) if why.contains("SAFETY")),
        "{:?}",
        unsafe_reply.stop
    );
    let blocked = provider.complete(conversation.request()).await.expect("completion");
    assert!(
        matches!(&blocked.stop, StopReason::Refusal(why) if why.contains("PROHIBITED_CONTENT")),
        "{:?}",
        blocked.stop
    );
    assert_eq!(blocked.usage.input_tokens, 12);
}

#[tokio::test]
async fn gemini_malformed_body_is_malformed_response() {
    let server = MockServer::start().await;
    answer(
        &server,
        GEMINI_PATH,
        ResponseTemplate::new(200).set_body_raw("data: {\"candidates\": \"soon\"}\r\n\r\n", "text/event-stream"),
    )
    .await;
    let conversation = Conversation::new();
    assert_malformed(gemini(&server).complete(conversation.request()).await);
}

#[test]
fn gemini_refuses_model_names_that_would_change_the_url() {
    let mut settings = settings(ProviderKind::Gemini, "http://localhost:1".into(), Some(KEY));
    settings.model = Some("gemini-2.5-flash:streamGenerateContent?alt=sse&x=".into());
    assert!(Gemini::new(&settings).is_err());
    settings.model = Some("models/gemini-2.5-pro".into());
    assert_eq!(
        Gemini::new(&settings).expect("plain name").model(),
        "models/gemini-2.5-pro"
    );
}

// ---------------------------------------------------------------------------------------------
// Ollama /api/chat

#[tokio::test]
async fn ollama_streams_with_schema_as_format_and_the_window_as_num_ctx() {
    let server = MockServer::start().await;
    answer(&server, OLLAMA_PATH, ollama_stream(REPLY, "stop", 26, 298)).await;
    let conversation = Conversation::new();

    let completion = ollama(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.content, REPLY);
    assert_eq!(completion.usage, plain_usage(26, 298));
    assert_eq!(completion.stop, StopReason::Complete);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_requests_conform(Api::Ollama, &sent);
    assert_eq!(header(&sent[0], "authorization"), None);
    let body = body(&sent[0]);
    assert_eq!(body["model"], "llama3.1");
    assert_eq!(body["stream"], true);
    // An unknown local model gets the conservative default window.
    assert_eq!(body["options"]["num_ctx"], 32_768);
    assert_eq!(
        roles(&body["messages"], "role"),
        ["system", "user", "assistant", "user"]
    );
    assert_eq!(body["messages"][0]["content"], SYSTEM);
    assert_eq!(body["format"]["type"], "object");
    assert_eq!(body["format"]["required"], json!(["plan", "tool_calls"]));
    assert_no_dangerous_tool(&sent[0]);

    // `--context-window` goes out as `num_ctx`.
    let server = MockServer::start().await;
    answer(&server, OLLAMA_PATH, ollama_stream(REPLY, "stop", 26, 298)).await;
    let mut with_window = settings(ProviderKind::Ollama, server.uri(), None);
    with_window.context_window = Some(65_536);
    Ollama::new(&with_window)
        .expect("provider")
        .complete(conversation.request())
        .await
        .expect("completion");
    let sent = requests(&server).await;
    assert_eq!(
        sent[0].body_json::<Value>().expect("JSON")["options"]["num_ctx"],
        65_536
    );
}

#[tokio::test]
async fn ollama_unauthorized_is_reported_once() {
    // Ollama itself has no auth, but it often sits behind a proxy that does.
    let server = MockServer::start().await;
    answer(
        &server,
        OLLAMA_PATH,
        ResponseTemplate::new(401).set_body_json(ollama_error("unauthorized")),
    )
    .await;
    let conversation = Conversation::new();
    let result = fast_retries(ollama(&server), 5).complete(conversation.request()).await;
    assert_unauthorized(result, 401, "unauthorized");
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn ollama_length_and_malformed() {
    let server = MockServer::start().await;
    answer_once(&server, OLLAMA_PATH, ollama_stream("{\"pl", "length", 26, 298)).await;
    answer(
        &server,
        OLLAMA_PATH,
        ResponseTemplate::new(200).set_body_raw("not json\n", "application/x-ndjson"),
    )
    .await;
    let provider = ollama(&server);
    let conversation = Conversation::new();
    let truncated = provider.complete(conversation.request()).await.expect("completion");
    assert_eq!(truncated.stop, StopReason::Length);
    assert_malformed(provider.complete(conversation.request()).await);
}

// ---------------------------------------------------------------------------------------------
// Context-length errors, in each API's own words

#[tokio::test]
async fn each_apis_context_length_error_is_recognised_and_not_retried() {
    type MakeProvider = Box<dyn Fn(&MockServer) -> Box<dyn Provider>>;
    let cases: Vec<(&str, u16, Value, MakeProvider)> = vec![
        (
            OPENAI_PATH,
            400,
            openai_error(
                "This model's maximum context length is 1047576 tokens. However, your messages resulted in 1100230 tokens. Please reduce the length of the messages.",
                "invalid_request_error",
                Some("context_length_exceeded"),
                Some("messages"),
            ),
            Box::new(|server| Box::new(openai(server))),
        ),
        (
            ANTHROPIC_PATH,
            400,
            anthropic_error(
                "invalid_request_error",
                "prompt is too long: 208310 tokens > 200000 maximum",
            ),
            Box::new(|server| Box::new(anthropic(server))),
        ),
        (
            GEMINI_PATH,
            400,
            gemini_error(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1196733) exceeds the maximum number of tokens allowed (1048576).",
            ),
            Box::new(|server| Box::new(gemini(server))),
        ),
        (
            OLLAMA_PATH,
            400,
            ollama_error("the input length exceeds the context length"),
            Box::new(|server| Box::new(ollama(server))),
        ),
    ];
    for (route, status, error, provider) in cases {
        let server = MockServer::start().await;
        answer(&server, route, ResponseTemplate::new(status).set_body_json(error)).await;
        let conversation = Conversation::new();
        let retrying = Retrying::new(
            provider(&server),
            RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(5),
            },
        );
        let result = retrying.complete(conversation.request()).await;
        assert!(
            matches!(result, Err(ProviderError::ContextLength { .. })),
            "{route}: {result:?}"
        );
        assert_eq!(
            requests(&server).await.len(),
            1,
            "{route}: the same request is not resent"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Retries

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried() {
    let server = MockServer::start().await;
    let limited = openai_error(
        "Rate limit reached for gpt-4.1",
        "requests",
        Some("rate_limit_exceeded"),
        None,
    );
    answer_once(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "0")
            .set_body_json(limited),
    )
    .await;
    answer(&server, OPENAI_PATH, openai_reply(REPLY, "stop")).await;
    let conversation = Conversation::new();
    let completion = fast_retries(openai(&server), 5)
        .complete(conversation.request())
        .await
        .expect("retried");
    assert_eq!(completion.content, REPLY);
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn server_error_is_retried() {
    let server = MockServer::start().await;
    let broken = openai_error(
        "The server had an error while processing your request.",
        "server_error",
        None,
        None,
    );
    answer_once(&server, OPENAI_PATH, ResponseTemplate::new(500).set_body_json(broken)).await;
    answer(&server, OPENAI_PATH, openai_reply(REPLY, "stop")).await;
    let conversation = Conversation::new();
    let completion = fast_retries(openai(&server), 5)
        .complete(conversation.request())
        .await
        .expect("retried");
    assert_eq!(completion.content, REPLY);
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn persistent_unavailability_gives_up_after_max_attempts() {
    let server = MockServer::start().await;
    let unavailable = gemini_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.");
    answer(
        &server,
        GEMINI_PATH,
        ResponseTemplate::new(503).set_body_json(unavailable),
    )
    .await;
    let conversation = Conversation::new();
    let error = fast_retries(gemini(&server), 3)
        .complete(conversation.request())
        .await
        .expect_err("gives up");
    assert_eq!(requests(&server).await.len(), 3);
    match error {
        ProviderError::Http {
            provider,
            status,
            message,
            ..
        } => {
            assert_eq!(provider, "gemini");
            assert_eq!(status, 503);
            assert!(message.contains("The model is overloaded"), "{message}");
            assert!(message.contains("3 attempts"), "{message}");
        }
        other => panic!("expected the last HTTP error, got {other:?}"),
    }
}

#[tokio::test]
async fn spent_quota_is_not_retried() {
    // OpenAI reports an exhausted budget as 429 too; waiting does not refill it.
    let server = MockServer::start().await;
    let quota = openai_error(
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
        Some("insufficient_quota"),
        None,
    );
    answer(&server, OPENAI_PATH, ResponseTemplate::new(429).set_body_json(quota)).await;
    let conversation = Conversation::new();
    let error = fast_retries(openai(&server), 5)
        .complete(conversation.request())
        .await
        .expect_err("fails");
    assert!(matches!(error, ProviderError::Http { status: 429, .. }), "{error:?}");
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_silent_server_times_out_and_is_retried() {
    let server = MockServer::start().await;
    let slow = openai_reply(REPLY, "stop").set_delay(Duration::from_secs(5));
    answer(&server, OPENAI_PATH, slow).await;
    let mut settings = settings(ProviderKind::Openai, format!("{}/v1", server.uri()), Some(KEY));
    settings.request_timeout = Duration::from_millis(200);
    let provider = OpenAi::new(&settings).expect("provider");
    let conversation = Conversation::new();
    let error = fast_retries(provider, 2)
        .complete(conversation.request())
        .await
        .expect_err("times out");
    assert!(
        matches!(error, ProviderError::Transport { timed_out: true, .. }),
        "{error:?}"
    );
    assert!(!format!("{error:?}").contains(KEY));
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn refused_connections_are_transport_errors() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let provider = Ollama::new(&settings(
        ProviderKind::Ollama,
        format!("http://127.0.0.1:{port}"),
        None,
    ))
    .expect("provider");
    let conversation = Conversation::new();
    let error = provider
        .complete(conversation.request())
        .await
        .expect_err("nobody listens");
    assert!(
        matches!(error, ProviderError::Transport { timed_out: false, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}/api/chat")),
        "{error}"
    );
    assert!(error.is_retryable());
}
