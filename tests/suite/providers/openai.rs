//! OpenAI Chat Completions: the reply schema, streaming, the fallbacks for servers that
//! refuse structured output or the cache key, and how each failure is reported.

use serde_json::json;
use upkeep::cli::ProviderKind;
use upkeep::llm::openai::OpenAi;
use upkeep::llm::{CacheHints, CompletionRequest, Provider, ProviderError, StopReason, Usage};
use wiremock::{MockServer, ResponseTemplate};

use super::super::support::conformance::{Api, Body, assert_conforms, assert_requests_conform};
use super::super::support::model_api::{openai_error, openai_stream, openai_usage};
use super::{
    Conversation, KEY, OPENAI_PATH, REPLY, SYSTEM, answer, answer_once, assert_malformed, assert_no_dangerous_tool,
    assert_unauthorized, body, fast_retries, header, openai, openai_reply, requests, roles, settings,
};

#[tokio::test]
async fn openai_streams_with_schema_system_history_and_cache_key() {
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
    assert_eq!(format["json_schema"]["strict"], false);
    // Optional arguments stay optional (not required, not nullable); objects closed.
    let branches = format["json_schema"]["schema"]["properties"]["tool_calls"]["items"]["anyOf"]
        .as_array()
        .expect("one branch per tool");
    assert_eq!(branches.len(), 4);
    let list_files = branches
        .iter()
        .find(|branch| branch["properties"]["tool_name"]["enum"][0] == "list_files")
        .expect("list_files branch");
    let arguments = &list_files["properties"]["arguments"];
    assert_eq!(arguments["required"], json!([]));
    assert_eq!(arguments["properties"]["path"]["type"], "string");
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
    let events = super::super::support::model_api::openai_events(
        "",
        "stop",
        openai_usage(10, 5, 0),
        Some("I can't help with that."),
    );
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
async fn openai_steps_down_to_json_object_when_the_server_refuses_json_schema() {
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
    assert_eq!(
        body(&sent[1])["response_format"]["type"],
        "json_object",
        "the retry steps down one form"
    );
    assert_eq!(
        body(&sent[2])["response_format"]["type"],
        "json_object",
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
