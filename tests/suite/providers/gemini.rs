//! Gemini streamGenerateContent: the system instruction, the `model` role, the JSON schema,
//! the base URL and model names that must not change it, and blocked replies.

use serde_json::json;
use upkeep::cli::ProviderKind;
use upkeep::llm::anthropic::Anthropic;
use upkeep::llm::gemini::Gemini;
use upkeep::llm::{Provider, StopReason, Usage};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::super::support::conformance::{Api, assert_requests_conform};
use super::super::support::model_api::{gemini_error, gemini_stream, gemini_usage};
use super::{
    Conversation, GEMINI_PATH, KEY, REPLY, SYSTEM, answer, answer_once, assert_malformed, assert_no_dangerous_tool,
    assert_unauthorized, body, fast_retries, gemini, header, requests, roles, settings,
};

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
            super::super::support::model_api::gemini_body(&[blocked_prompt]),
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
