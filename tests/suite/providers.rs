//! The four HTTP providers and the retry wrapper against a real HTTP server per test
//! (wiremock), answering with bodies shaped like each API's documented responses. Every test
//! asserts on what was sent (auth, model, system prompt placement, roles, schema field) as well
//! as on what was read back, because a provider that reads well but sends the wrong request
//! only fails against the real API.

use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Value, json};
use upkeep::cli::ProviderKind;
use upkeep::config::ProviderSettings;
use upkeep::llm::retry::{RetryPolicy, Retrying};
use upkeep::llm::{
    Completion, CompletionRequest, Message, Provider, ProviderError, StopReason, Usage, anthropic::Anthropic,
    gemini::Gemini, ollama::Ollama, openai::OpenAi,
};
use upkeep::tools::spec::{ToolClass, ToolSpec, object_schema, reply_schema};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

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
        CompletionRequest {
            system: SYSTEM,
            messages: &self.messages,
            reply_schema: &self.schema,
        }
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
    Gemini::new(&settings(
        ProviderKind::Gemini,
        format!("{}/v1beta", server.uri()),
        Some(KEY),
    ))
    .expect("gemini provider")
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
const GEMINI_PATH: &str = "/v1beta/models/gemini-2.5-flash:generateContent";
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

async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.expect("request recording is on")
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

fn assert_malformed(result: Result<Completion, ProviderError>) {
    match result {
        Err(ProviderError::MalformedResponse { .. }) => {}
        other => panic!("expected MalformedResponse, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions

fn openai_reply(content: &str, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4.1-2025-04-14",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": null, "annotations": []},
            "logprobs": null,
            "finish_reason": finish_reason
        }],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 85,
            "total_tokens": 1285,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}
        },
        "service_tier": "default",
        "system_fingerprint": null
    })
}

#[tokio::test]
async fn openai_sends_strict_schema_system_and_history_and_reads_the_reply() {
    let server = MockServer::start().await;
    answer(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(200).set_body_json(openai_reply(REPLY, "stop")),
    )
    .await;
    let conversation = Conversation::new();

    let completion = openai(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.content, REPLY);
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 1200,
            output_tokens: 85
        }
    );
    assert_eq!(completion.stop, StopReason::Complete);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        header(&sent[0], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = body(&sent[0]);
    assert_eq!(body["model"], "gpt-4.1");
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
async fn openai_without_a_key_sends_no_authorization_header() {
    // Local OpenAI-compatible servers need no key; an empty bearer would confuse some.
    let server = MockServer::start().await;
    answer(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(200).set_body_json(openai_reply(REPLY, "stop")),
    )
    .await;
    let provider =
        OpenAi::new(&settings(ProviderKind::Openai, format!("{}/v1", server.uri()), None)).expect("provider");
    let conversation = Conversation::new();
    provider.complete(conversation.request()).await.expect("completion");
    assert_eq!(header(&requests(&server).await[0], "authorization"), None);
}

#[tokio::test]
async fn openai_unauthorized_is_reported_once_without_the_key() {
    let server = MockServer::start().await;
    // Echo the whole key back (a proxy might) to prove it is redacted from the message.
    let error = json!({"error": {
        "message": format!("Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys."),
        "type": "invalid_request_error", "param": null, "code": "invalid_api_key"
    }});
    answer(&server, OPENAI_PATH, ResponseTemplate::new(401).set_body_json(error)).await;
    let conversation = Conversation::new();
    let result = fast_retries(openai(&server), 5).complete(conversation.request()).await;
    assert_unauthorized(result, 401, "Incorrect API key provided");
    assert_eq!(requests(&server).await.len(), 1, "auth errors are not retried");
}

#[tokio::test]
async fn openai_truncated_reply_is_length() {
    let server = MockServer::start().await;
    let reply = ResponseTemplate::new(200).set_body_json(openai_reply(r#"{"plan":"wri"#, "length"));
    answer(&server, OPENAI_PATH, reply).await;
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
    let mut reply = openai_reply("", "stop");
    reply["choices"][0]["message"]["content"] = Value::Null;
    reply["choices"][0]["message"]["refusal"] = json!("I can't help with that.");
    answer(&server, OPENAI_PATH, ResponseTemplate::new(200).set_body_json(reply)).await;
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
        ResponseTemplate::new(200).set_body_string("<html>gateway</html>"),
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
    let refusal = json!({"error": {
        "message": "response_format json_schema is not supported",
        "type": "invalid_request_error", "param": "response_format", "code": null
    }});
    answer_once(&server, OPENAI_PATH, ResponseTemplate::new(400).set_body_json(refusal)).await;
    answer(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(200).set_body_json(openai_reply(REPLY, "stop")),
    )
    .await;
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
async fn openai_other_bad_requests_do_not_trigger_the_fallback() {
    let server = MockServer::start().await;
    let error = json!({"error": {"message": "max_tokens is too large", "type": "invalid_request_error", "param": "max_tokens", "code": null}});
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

fn anthropic_reply(text: &str, stop_reason: &str) -> Value {
    json!({
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {
            "input_tokens": 2095,
            "output_tokens": 503,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard"
        }
    })
}

#[tokio::test]
async fn anthropic_sends_system_top_level_and_schema_in_output_config() {
    let server = MockServer::start().await;
    answer(
        &server,
        ANTHROPIC_PATH,
        ResponseTemplate::new(200).set_body_json(anthropic_reply(REPLY, "end_turn")),
    )
    .await;
    let conversation = Conversation::new();

    let completion = anthropic(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.content, REPLY);
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 2095,
            output_tokens: 503
        }
    );
    assert_eq!(completion.stop, StopReason::Complete);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(header(&sent[0], "x-api-key"), Some(KEY));
    assert_eq!(header(&sent[0], "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(&sent[0], "content-type"), Some("application/json"));
    assert_eq!(header(&sent[0], "authorization"), None);
    let body = body(&sent[0]);
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["system"], SYSTEM);
    assert_eq!(roles(&body["messages"], "role"), ["user", "assistant", "user"]);
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
async fn anthropic_unauthorized_is_reported_once_without_the_key() {
    let server = MockServer::start().await;
    let error = json!({
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"
    });
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
    answer_once(
        &server,
        ANTHROPIC_PATH,
        ResponseTemplate::new(200).set_body_json(anthropic_reply(r#"{"plan":"#, "max_tokens")),
    )
    .await;
    answer(
        &server,
        ANTHROPIC_PATH,
        ResponseTemplate::new(200).set_body_json(anthropic_reply("", "refusal")),
    )
    .await;
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
        ResponseTemplate::new(200).set_body_string("{\"type\":\"message\","),
    )
    .await;
    let conversation = Conversation::new();
    assert_malformed(anthropic(&server).complete(conversation.request()).await);
}

#[tokio::test]
async fn anthropic_overloaded_529_is_retried() {
    let server = MockServer::start().await;
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    answer_once(
        &server,
        ANTHROPIC_PATH,
        ResponseTemplate::new(529).set_body_json(overloaded),
    )
    .await;
    answer(
        &server,
        ANTHROPIC_PATH,
        ResponseTemplate::new(200).set_body_json(anthropic_reply(REPLY, "end_turn")),
    )
    .await;
    let conversation = Conversation::new();
    let completion = fast_retries(anthropic(&server), 3)
        .complete(conversation.request())
        .await
        .expect("second try works");
    assert_eq!(completion.content, REPLY);
    assert_eq!(requests(&server).await.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Gemini generateContent

fn gemini_reply(text: &str, finish_reason: &str) -> Value {
    json!({
        "candidates": [{
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": finish_reason,
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 1500,
            "candidatesTokenCount": 60,
            "totalTokenCount": 1590,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1500}],
            "thoughtsTokenCount": 30
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mAitaLmkHPPlz7IPvtfUqQ4"
    })
}

#[tokio::test]
async fn gemini_sends_system_instruction_model_role_and_json_schema() {
    let server = MockServer::start().await;
    answer(
        &server,
        GEMINI_PATH,
        ResponseTemplate::new(200).set_body_json(gemini_reply(REPLY, "STOP")),
    )
    .await;
    let conversation = Conversation::new();

    let completion = gemini(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.content, REPLY);
    // Thinking tokens are billed as output.
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 1500,
            output_tokens: 90
        }
    );
    assert_eq!(completion.stop, StopReason::Complete);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(header(&sent[0], "x-goog-api-key"), Some(KEY));
    assert_eq!(sent[0].url.query(), None, "the key never travels in the URL");
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
async fn gemini_bad_keys_are_reported_once_without_the_key() {
    // Gemini answers an invalid key with 400 INVALID_ARGUMENT; it must not be mistaken for a
    // refused schema (which would resend the request).
    let cases = [
        (
            400,
            json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}),
            "API key not valid",
        ),
        (
            401,
            json!({"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}}),
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
    answer_once(
        &server,
        GEMINI_PATH,
        ResponseTemplate::new(200).set_body_json(gemini_reply("{\"pl", "MAX_TOKENS")),
    )
    .await;
    answer_once(
        &server,
        GEMINI_PATH,
        ResponseTemplate::new(200).set_body_json(gemini_reply("", "SAFETY")),
    )
    .await;
    let blocked_prompt = json!({
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        "modelVersion": "gemini-2.5-flash"
    });
    answer(
        &server,
        GEMINI_PATH,
        ResponseTemplate::new(200).set_body_json(blocked_prompt),
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
        ResponseTemplate::new(200).set_body_json(json!({"candidates": "soon"})),
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

fn ollama_reply(content: &str, done_reason: &str) -> Value {
    json!({
        "model": "llama3.1",
        "created_at": "2025-06-12T14:13:43.416799Z",
        "message": {"role": "assistant", "content": content},
        "done": true,
        "done_reason": done_reason,
        "total_duration": 5191566416u64,
        "load_duration": 2154458,
        "prompt_eval_count": 26,
        "prompt_eval_duration": 383809000,
        "eval_count": 298,
        "eval_duration": 4799921000u64
    })
}

#[tokio::test]
async fn ollama_sends_schema_as_format_and_system_as_first_message() {
    let server = MockServer::start().await;
    answer(
        &server,
        OLLAMA_PATH,
        ResponseTemplate::new(200).set_body_json(ollama_reply(REPLY, "stop")),
    )
    .await;
    let conversation = Conversation::new();

    let completion = ollama(&server)
        .complete(conversation.request())
        .await
        .expect("completion");
    assert_eq!(completion.content, REPLY);
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 26,
            output_tokens: 298
        }
    );
    assert_eq!(completion.stop, StopReason::Complete);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(header(&sent[0], "authorization"), None);
    let body = body(&sent[0]);
    assert_eq!(body["model"], "llama3.1");
    assert_eq!(body["stream"], false);
    assert_eq!(
        roles(&body["messages"], "role"),
        ["system", "user", "assistant", "user"]
    );
    assert_eq!(body["messages"][0]["content"], SYSTEM);
    assert_eq!(body["format"]["type"], "object");
    assert_eq!(body["format"]["required"], json!(["plan", "tool_calls"]));
    assert_no_dangerous_tool(&sent[0]);
}

#[tokio::test]
async fn ollama_unauthorized_is_reported_once() {
    // Ollama itself has no auth, but it often sits behind a proxy that does.
    let server = MockServer::start().await;
    answer(
        &server,
        OLLAMA_PATH,
        ResponseTemplate::new(401).set_body_json(json!({"error": "unauthorized"})),
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
    answer_once(
        &server,
        OLLAMA_PATH,
        ResponseTemplate::new(200).set_body_json(ollama_reply("{\"pl", "length")),
    )
    .await;
    answer(
        &server,
        OLLAMA_PATH,
        ResponseTemplate::new(200).set_body_string("not json"),
    )
    .await;
    let provider = ollama(&server);
    let conversation = Conversation::new();
    let truncated = provider.complete(conversation.request()).await.expect("completion");
    assert_eq!(truncated.stop, StopReason::Length);
    assert_malformed(provider.complete(conversation.request()).await);
}

// ---------------------------------------------------------------------------------------------
// Retries

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried() {
    let server = MockServer::start().await;
    let limited = json!({"error": {"message": "Rate limit reached for gpt-4.1", "type": "requests", "code": "rate_limit_exceeded"}});
    answer_once(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "0")
            .set_body_json(limited),
    )
    .await;
    answer(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(200).set_body_json(openai_reply(REPLY, "stop")),
    )
    .await;
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
    let broken =
        json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}});
    answer_once(&server, OPENAI_PATH, ResponseTemplate::new(500).set_body_json(broken)).await;
    answer(
        &server,
        OPENAI_PATH,
        ResponseTemplate::new(200).set_body_json(openai_reply(REPLY, "stop")),
    )
    .await;
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
    let unavailable = json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}});
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
    let quota = json!({"error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota", "param": null, "code": "insufficient_quota"
    }});
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
async fn timeouts_are_transport_errors_and_retried() {
    let server = MockServer::start().await;
    let slow = ResponseTemplate::new(200)
        .set_body_json(openai_reply(REPLY, "stop"))
        .set_delay(Duration::from_secs(5));
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
    assert!(error.is_retryable());
}
