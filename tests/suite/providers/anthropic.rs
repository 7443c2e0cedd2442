//! Anthropic Messages: system blocks, cache breakpoints (never more than four), the base URL,
//! and overload (529, and inside the stream) retried.

use serde_json::json;
use upkeep::cli::ProviderKind;
use upkeep::llm::anthropic::Anthropic;
use upkeep::llm::{CacheHints, CompletionRequest, Message, Provider, StopReason, Usage};
use wiremock::{MockServer, ResponseTemplate};

use super::super::support::conformance::{Api, assert_requests_conform};
use super::super::support::model_api::{anthropic_error, anthropic_stream, anthropic_usage};
use super::{
    ANTHROPIC_PATH, Conversation, KEY, REPLY, SYSTEM, answer, answer_once, anthropic,
    assert_answered_after_one_failure, assert_malformed, assert_no_dangerous_tool, assert_unauthorized, body,
    fast_retries, header, requests, roles, settings,
};

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
    let overloaded = ResponseTemplate::new(529).set_body_json(overloaded);
    let reply = anthropic_reply(REPLY, "end_turn");
    assert_answered_after_one_failure(&server, ANTHROPIC_PATH, overloaded, reply, anthropic(&server)).await;
}

#[tokio::test]
async fn anthropic_overloaded_inside_the_stream_is_retried() {
    // The API may report overload as an `error` event after the stream has started.
    let server = MockServer::start().await;
    let mut events =
        super::super::support::model_api::anthropic_events(REPLY, "end_turn", anthropic_usage(10, 0, 0), 5);
    events.truncate(3);
    events.push(("error", anthropic_error("overloaded_error", "Overloaded")));
    let broken_stream = ResponseTemplate::new(200).set_body_raw(
        super::super::support::model_api::anthropic_body(&events),
        "text/event-stream",
    );
    let reply = anthropic_reply(REPLY, "end_turn");
    assert_answered_after_one_failure(&server, ANTHROPIC_PATH, broken_stream, reply, anthropic(&server)).await;
}
