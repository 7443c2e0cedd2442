//! The model APIs' answers as their documentation shows them, for test servers: streamed
//! replies cut into several events (server-sent events for OpenAI, Anthropic and Gemini,
//! newline-delimited JSON for Ollama) with each API's usage fields, and each API's error
//! bodies. Every event and body is checked against the API's description before it is served
//! (see [`super::conformance`]), so the tests cannot drift into shapes the real APIs never send.

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::conformance::{Api, Body, assert_conforms};
use super::{RunOutput, TestRepo, Upkeep};

/// `text` cut into three pieces on character boundaries, as a stream delivers it.
pub fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let third = chars.len().div_ceil(3).max(1);
    chars.chunks(third).map(|chunk| chunk.iter().collect()).collect()
}

/// An SSE body: `(event name, data)` pairs; each data checked as `api`'s stream chunk unless it
/// is OpenAI's `[DONE]`.
pub fn sse_body(api: Api, events: &[(Option<&str>, Value)], separator: &str) -> String {
    let mut body = String::new();
    for (name, data) in events {
        assert_conforms(api, Body::StreamChunk, data);
        if let Some(name) = name {
            body.push_str(&format!("event: {name}{separator}"));
        }
        body.push_str(&format!("data: {data}{separator}{separator}"));
    }
    body
}

fn event_stream(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("cache-control", "no-cache")
        .set_body_raw(body, "text/event-stream; charset=utf-8")
}

// --- OpenAI Chat Completions -------------------------------------------------------------------

/// Chat Completions usage: `prompt_tokens` includes the cached ones.
pub fn openai_usage(prompt: u64, completion: u64, cached: u64) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    })
}

fn openai_chunk(delta: Value, finish_reason: Value) -> Value {
    json!({
        "id": "chatcmpl-C3dX0FZr4sDpL0a8m1c2",
        "object": "chat.completion.chunk",
        "created": 1_755_000_000,
        "model": "gpt-4.1-2025-04-14",
        "service_tier": "default",
        "system_fingerprint": "fp_b3f1157249",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        "usage": null,
        "obfuscation": "x1"
    })
}

/// The events of a streamed chat completion with `stream_options.include_usage`: the role, the
/// content in pieces, the finish reason, then the usage in a chunk with no choices, then
/// `[DONE]`. `refusal` replaces the content with a refusal.
pub fn openai_events(content: &str, finish_reason: &str, usage: Value, refusal: Option<&str>) -> Vec<String> {
    let mut events = vec![openai_chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )];
    match refusal {
        Some(refusal) => {
            for piece in pieces(refusal) {
                events.push(openai_chunk(json!({"refusal": piece}), Value::Null));
            }
        }
        None => {
            for piece in pieces(content) {
                events.push(openai_chunk(json!({"content": piece}), Value::Null));
            }
        }
    }
    events.push(openai_chunk(json!({}), json!(finish_reason)));
    let mut last = openai_chunk(json!({}), Value::Null);
    last["choices"] = json!([]);
    last["usage"] = usage;
    events.push(last);
    let mut lines: Vec<String> = events
        .into_iter()
        .map(|event| {
            assert_conforms(Api::OpenAi, Body::StreamChunk, &event);
            format!("data: {event}\n\n")
        })
        .collect();
    lines.push("data: [DONE]\n\n".into());
    lines
}

/// A streamed chat completion (see [`openai_events`]).
pub fn openai_stream(content: &str, finish_reason: &str, usage: Value) -> ResponseTemplate {
    event_stream(openai_events(content, finish_reason, usage, None).concat())
}

/// A server that answers the `replies` in order, one per request, each as a streamed chat
/// completion reporting 120 input and 30 output tokens.
pub async fn openai_sequence(replies: &[String]) -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    for (index, content) in replies.iter().enumerate() {
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .respond_with(openai_stream(content, "stop", openai_usage(120, 30, 0)))
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 1).expect("at most 255 replies"))
            .mount(&server)
            .await;
    }
    server
}

/// A chat completion's error body, as `ErrorResponse` describes it.
pub fn openai_error(message: &str, kind: &str, code: Option<&str>, param: Option<&str>) -> Value {
    let body = json!({"error": {"message": message, "type": kind, "param": param, "code": code}});
    assert_conforms(Api::OpenAi, Body::Error, &body);
    body
}

// --- Anthropic Messages ------------------------------------------------------------------------

/// Messages usage as `message_start` carries it: `input_tokens` excludes the cache reads and
/// writes.
pub fn anthropic_usage(input: u64, cache_read: u64, cache_write: u64) -> Value {
    json!({
        "input_tokens": input,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": 1,
        "service_tier": "standard"
    })
}

/// The events of a streamed message: `message_start` (with `usage`), a text block in pieces
/// with a `ping` among them, `message_delta` with the stop reason and the output tokens, then
/// `message_stop`.
pub fn anthropic_events(text: &str, stop_reason: &str, usage: Value, output_tokens: u64) -> Vec<(&'static str, Value)> {
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage
            }}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for piece in pieces(text) {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
}

/// The SSE body of [`anthropic_events`] (or a prefix of them).
pub fn anthropic_body(events: &[(&'static str, Value)]) -> String {
    let events: Vec<(Option<&str>, Value)> = events.iter().map(|(name, data)| (Some(*name), data.clone())).collect();
    sse_body(Api::Anthropic, &events, "\n")
}

/// A streamed message (see [`anthropic_events`]).
pub fn anthropic_stream(text: &str, stop_reason: &str, usage: Value, output_tokens: u64) -> ResponseTemplate {
    event_stream(anthropic_body(&anthropic_events(
        text,
        stop_reason,
        usage,
        output_tokens,
    )))
}

/// A Messages API error body.
pub fn anthropic_error(kind: &str, message: &str) -> Value {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"});
    assert_conforms(Api::Anthropic, Body::Error, &body);
    body
}

// --- Gemini streamGenerateContent --------------------------------------------------------------

/// `usageMetadata`: `promptTokenCount` includes `cachedContentTokenCount`.
pub fn gemini_usage(prompt: u64, candidates: u64, thoughts: u64, cached: u64) -> Value {
    let mut usage = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        "thoughtsTokenCount": thoughts
    });
    if cached > 0 {
        usage["cachedContentTokenCount"] = json!(cached);
        usage["cacheTokensDetails"] = json!([{"modality": "TEXT", "tokenCount": cached}]);
    }
    usage
}

/// The chunks of a streamed `generateContent`: the text in pieces, the last with the finish
/// reason; every chunk carries the usage so far, as the API sends it.
pub fn gemini_events(text: &str, finish_reason: &str, usage: Value) -> Vec<Value> {
    let parts = pieces(text);
    let count = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(index, piece)| {
            let mut candidate = json!({"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0});
            if index + 1 == count {
                candidate["finishReason"] = json!(finish_reason);
            }
            json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-flash", "responseId": "mAitaLmkHPPlz7IPvtfUqQ4"})
        })
        .collect()
}

/// The SSE body of Gemini chunks (Google separates events with CRLF).
pub fn gemini_body(chunks: &[Value]) -> String {
    let events: Vec<(Option<&str>, Value)> = chunks.iter().map(|chunk| (None, chunk.clone())).collect();
    sse_body(Api::Gemini, &events, "\r\n")
}

/// A streamed `generateContent` (see [`gemini_events`]).
pub fn gemini_stream(text: &str, finish_reason: &str, usage: Value) -> ResponseTemplate {
    event_stream(gemini_body(&gemini_events(text, finish_reason, usage)))
}

/// A Google API error body (AIP-193).
pub fn gemini_error(code: u16, status: &str, message: &str) -> Value {
    let body = json!({"error": {"code": code, "message": message, "status": status}});
    assert_conforms(Api::Gemini, Body::Error, &body);
    body
}

// --- Ollama /api/chat --------------------------------------------------------------------------

/// The lines of a streamed chat: the content in pieces, then the `done` line with the stop
/// reason and the counts.
pub fn ollama_lines(content: &str, done_reason: &str, prompt_eval_count: u64, eval_count: u64) -> Vec<Value> {
    let mut lines: Vec<Value> = pieces(content)
        .into_iter()
        .map(|piece| {
            json!({"model": "llama3.1", "created_at": "2025-06-12T14:13:43.416799Z",
                   "message": {"role": "assistant", "content": piece}, "done": false})
        })
        .collect();
    let last = json!({
        "model": "llama3.1", "created_at": "2025-06-12T14:13:43.516799Z",
        "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": done_reason,
        "total_duration": 5_191_566_416u64, "load_duration": 2_154_458, "prompt_eval_count": prompt_eval_count,
        "prompt_eval_duration": 383_809_000, "eval_count": eval_count, "eval_duration": 4_799_921_000u64
    });
    assert_conforms(Api::Ollama, Body::Response, &last);
    lines.push(last);
    lines
}

/// The NDJSON body of Ollama lines.
pub fn ollama_body(lines: &[Value]) -> String {
    lines
        .iter()
        .map(|line| {
            assert_conforms(Api::Ollama, Body::StreamChunk, line);
            format!("{line}\n")
        })
        .collect()
}

/// A streamed chat (see [`ollama_lines`]).
pub fn ollama_stream(content: &str, done_reason: &str, prompt_eval_count: u64, eval_count: u64) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(
        ollama_body(&ollama_lines(content, done_reason, prompt_eval_count, eval_count)),
        "application/x-ndjson",
    )
}

/// Ollama's error body.
pub fn ollama_error(message: &str) -> Value {
    let body = json!({"error": message});
    assert_conforms(Api::Ollama, Body::Error, &body);
    body
}

// --- Any API ------------------------------------------------------------------------------------

/// How each API streams a reply (with some usage).
pub fn streamed(api: Api, content: &str) -> ResponseTemplate {
    match api {
        Api::OpenAi => openai_stream(content, "stop", openai_usage(2_000, 50, 0)),
        Api::Anthropic => anthropic_stream(content, "end_turn", anthropic_usage(2_000, 0, 0), 50),
        Api::Gemini => gemini_stream(content, "STOP", gemini_usage(2_000, 50, 0, 0)),
        Api::Ollama => ollama_stream(content, "stop", 2_000, 50),
    }
}

/// Serves `answers` in order, one per request.
pub async fn model_server(answers: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    for (index, answer) in answers.into_iter().enumerate() {
        Mock::given(method("POST"))
            .respond_with(answer)
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 1).expect("few answers"))
            .mount(&server)
            .await;
    }
    server
}

/// `upkeep run --json` on `repo` against `server` speaking `api` (with a key where the API
/// needs one).
pub async fn run_against(api: Api, server: &MockServer, repo: &TestRepo, extra: &[&str]) -> RunOutput {
    let (provider, base, key) = match api {
        Api::OpenAi => ("openai", format!("{}/v1", server.uri()), None),
        Api::Anthropic => ("anthropic", server.uri(), Some("ANTHROPIC_API_KEY")),
        Api::Gemini => ("gemini", server.uri(), Some("GEMINI_API_KEY")),
        Api::Ollama => ("ollama", server.uri(), None),
    };
    let mut upkeep = Upkeep::new();
    if let Some(key) = key {
        upkeep = upkeep.env(key, "test-key-123");
    }
    // The stand-in plays each vendor's own API, so an OpenAI run names OpenAI's default model (a
    // compatible server with no model named gets an unknown model's small window instead).
    let model: &[&str] = match api {
        Api::OpenAi => &["--model", "gpt-4.1"],
        _ => &[],
    };
    upkeep
        .args(["run", "--json", "--provider", provider, "--base-url", &base])
        .args(model)
        .args(["--repo"])
        .args([repo.path()])
        .args(extra)
        .run_async()
        .await
}

// --- Streams that never end ---------------------------------------------------------------------

/// The events that open `api`'s streamed reply before any text (Anthropic's `message_start` and
/// `content_block_start`; OpenAI's role chunk), as one SSE or NDJSON text.
pub fn stream_opening(api: Api) -> String {
    match api {
        Api::OpenAi => openai_events("", "stop", Value::Null, None)[0].clone(),
        Api::Anthropic => anthropic_body(&anthropic_events("", "end_turn", anthropic_usage(10, 0, 0), 1)[..2]),
        Api::Gemini | Api::Ollama => String::new(),
    }
}

/// One event that holds `api`'s stream open without adding reply text, each in the way the
/// API (or a proxy before it) really does: an SSE comment and an OpenAI chunk with empty
/// content; Anthropic's `ping`; a Gemini chunk with an empty text part; an Ollama line with
/// empty content.
pub fn keep_alive(api: Api) -> String {
    match api {
        Api::OpenAi => format!(": keep-alive\n\n{}", text_event(api, "")),
        Api::Anthropic => anthropic_body(&[("ping", json!({"type": "ping"}))]),
        Api::Gemini | Api::Ollama => text_event(api, ""),
    }
}

/// One event that adds `text` to `api`'s streamed reply.
pub fn text_event(api: Api, text: &str) -> String {
    match api {
        Api::OpenAi => {
            let chunk = openai_chunk(json!({"content": text}), Value::Null);
            assert_conforms(Api::OpenAi, Body::StreamChunk, &chunk);
            format!("data: {chunk}\n\n")
        }
        Api::Anthropic => anthropic_body(&[(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        )]),
        Api::Gemini => gemini_body(&[json!({
            "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
            "modelVersion": "gemini-2.5-flash", "responseId": "mAitaLmkHPPlz7IPvtfUqQ4"
        })]),
        Api::Ollama => ollama_body(&[json!({
            "model": "llama3.1", "created_at": "2025-06-12T14:13:43.416799Z",
            "message": {"role": "assistant", "content": text}, "done": false
        })]),
    }
}

/// The content type `api` streams with.
pub fn stream_content_type(api: Api) -> &'static str {
    match api {
        Api::Ollama => "application/x-ndjson",
        _ => "text/event-stream",
    }
}

/// A streamed chat completion from a server that reports no usage (many OpenAI-compatible
/// servers ignore `stream_options.include_usage`): the usage chunk is left out.
pub fn openai_stream_without_usage(content: &str) -> ResponseTemplate {
    let mut events = openai_events(content, "stop", Value::Null, None);
    // [role, pieces..., finish, usage, [DONE]]: drop the usage chunk.
    events.remove(events.len() - 2);
    event_stream(events.concat())
}

/// The model calls `server` received, oldest first: its POSTs. upkeep also asks an
/// OpenAI-compatible server about itself (`GET /v1/models`, `GET /props`) before the first call;
/// those are not model calls.
pub async fn model_requests(server: &MockServer) -> Vec<wiremock::Request> {
    server
        .received_requests()
        .await
        .expect("recording is on")
        .into_iter()
        .filter(|request| request.method.as_str() == "POST")
        .collect()
}
