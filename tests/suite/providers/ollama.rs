//! Ollama /api/chat: the schema as `format`, the context window as `num_ctx`, and its failures.

use serde_json::{Value, json};
use upkeep::cli::ProviderKind;
use upkeep::llm::ollama::Ollama;
use upkeep::llm::{Provider, StopReason};
use wiremock::{MockServer, ResponseTemplate};

use super::super::support::conformance::{Api, assert_requests_conform};
use super::super::support::model_api::{ollama_error, ollama_stream};
use super::{
    Conversation, OLLAMA_PATH, REPLY, SYSTEM, answer, answer_once, assert_malformed, assert_no_dangerous_tool,
    assert_unauthorized, body, fast_retries, header, ollama, plain_usage, requests, roles, settings,
};

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
