//! The four HTTP providers and the retry wrapper against a real HTTP server per test
//! (wiremock), answering with each API's documented streaming bodies (see
//! `support::model_api`). Every test asserts on what was sent (auth, model, system prompt
//! placement, roles, schema field, cache hints) as well as on what was read back, because a
//! provider that reads well but sends the wrong request only fails against the real API; every
//! request received is also checked against the vendor's API description.
//!
//! This module holds what the suites share (the conversation sent, the providers pointed at a
//! mock server, the request helpers and assertions); the tests live in one submodule per API,
//! plus `retries` for the failures every API shares.

mod anthropic;
mod gemini;
mod ollama;
mod openai;
mod retries;

use std::time::Duration;

use secrecy::SecretString;
use serde_json::Value;
use upkeep::cli::ProviderKind;
use upkeep::config::ProviderSettings;
use upkeep::llm::anthropic::Anthropic;
use upkeep::llm::gemini::Gemini;
use upkeep::llm::ollama::Ollama;
use upkeep::llm::openai::OpenAi;
use upkeep::llm::retry::{RetryPolicy, Retrying};
use upkeep::llm::{Completion, CompletionRequest, Message, Provider, ProviderError, Usage};
use upkeep::tools::spec::{ToolClass, ToolSpec, object_schema, reply_schema};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::support::model_api::{openai_stream, openai_usage};

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
        structured_output: Default::default(),
        max_reply_tokens: None,
        temperature: None,
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

/// The API at `route` answers `failure` once, then `reply`: the retry wrapper around
/// `provider` gets the reply's text, in two requests.
async fn assert_answered_after_one_failure(
    server: &MockServer,
    route: &str,
    failure: ResponseTemplate,
    reply: ResponseTemplate,
    provider: impl Provider + 'static,
) {
    answer_once(server, route, failure).await;
    answer(server, route, reply).await;
    let conversation = Conversation::new();
    let completion = fast_retries(provider, 3)
        .complete(conversation.request())
        .await
        .expect("retried");
    assert_eq!(completion.content, REPLY);
    assert_eq!(requests(server).await.len(), 2);
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

/// An OpenAI stream of `content` with plain usage, as the OpenAI and retry tests want it.
fn openai_reply(content: &str, finish_reason: &str) -> ResponseTemplate {
    openai_stream(content, finish_reason, openai_usage(1200, 85, 0))
}

/// `--temperature` reaches each API where it takes it (Chat Completions' and Messages'
/// `temperature`, Gemini's `generationConfig.temperature`, Ollama's `options.temperature`), and
/// nothing is sent without it, so each model keeps its own default (OpenAI's reasoning models
/// refuse any value but their own).
#[tokio::test(flavor = "multi_thread")]
async fn a_temperature_is_sent_where_each_api_takes_it_and_only_when_set() {
    use super::support::conformance::{Api, assert_requests_conform};
    use super::support::model_api::{model_server, run_against, streamed};
    use super::support::{TestRepo, finish};

    for (api, pointer) in [
        (Api::OpenAi, "/temperature"),
        (Api::Anthropic, "/temperature"),
        (Api::Gemini, "/generationConfig/temperature"),
        (Api::Ollama, "/options/temperature"),
    ] {
        for (extra, expected) in [(vec!["--temperature", "0"], Some(0.0)), (vec![], None)] {
            let repo = TestRepo::new();
            let server = model_server(vec![streamed(api, &finish("no_tasks"))]).await;
            let mut args = vec!["--task", "t"];
            args.extend(extra);
            run_against(api, &server, &repo, &args).await.assert_code(0);
            let sent = super::support::model_api::model_requests(&server).await;
            assert_requests_conform(api, &sent);
            let value = body(&sent[0]).pointer(pointer).and_then(Value::as_f64);
            assert_eq!(value, expected, "{api:?} {args:?}");
        }
    }
}
