//! Failures across the APIs: each API's context-length error in its own words (never retried),
//! and the retry wrapper: rate limits, server errors, timeouts, spent quota, refused connections.

use std::time::Duration;

use serde_json::Value;
use upkeep::cli::ProviderKind;
use upkeep::llm::ollama::Ollama;
use upkeep::llm::openai::OpenAi;
use upkeep::llm::retry::{RetryPolicy, Retrying};
use upkeep::llm::{Provider, ProviderError};
use wiremock::{MockServer, ResponseTemplate};

use super::super::support::model_api::{anthropic_error, gemini_error, ollama_error, openai_error};
use super::{
    ANTHROPIC_PATH, Conversation, GEMINI_PATH, KEY, OLLAMA_PATH, OPENAI_PATH, REPLY, answer, anthropic,
    assert_answered_after_one_failure, fast_retries, gemini, ollama, openai, openai_reply, requests, settings,
};

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

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried() {
    let server = MockServer::start().await;
    let limited = openai_error(
        "Rate limit reached for gpt-4.1",
        "requests",
        Some("rate_limit_exceeded"),
        None,
    );
    let limited = ResponseTemplate::new(429)
        .insert_header("retry-after", "0")
        .set_body_json(limited);
    let reply = openai_reply(REPLY, "stop");
    assert_answered_after_one_failure(&server, OPENAI_PATH, limited, reply, openai(&server)).await;
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
    let broken = ResponseTemplate::new(500).set_body_json(broken);
    let reply = openai_reply(REPLY, "stop");
    assert_answered_after_one_failure(&server, OPENAI_PATH, broken, reply, openai(&server)).await;
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
