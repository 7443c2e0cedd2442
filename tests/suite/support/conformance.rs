//! Checks bodies against the vendors' API descriptions: the trimmed JSON Schemas in
//! `tests/conformance/` (made by `tests/conformance/generate.py` from the specs the vendors
//! publish). Every request a test's model server receives and every body or stream event it
//! sends goes through here, so a provider that drifts from the real API fails a test.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

/// A model API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    OpenAi,
    Anthropic,
    Gemini,
    Ollama,
}

/// Which body of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Body {
    /// What upkeep sends.
    Request,
    /// One event's data in a streamed answer.
    StreamChunk,
    /// A whole, non-streamed answer.
    Response,
    /// An error answer.
    Error,
}

fn file(api: Api) -> &'static str {
    match api {
        Api::OpenAi => include_str!("../../conformance/openai.json"),
        Api::Anthropic => include_str!("../../conformance/anthropic.json"),
        Api::Gemini => include_str!("../../conformance/gemini.json"),
        Api::Ollama => include_str!("../../conformance/ollama.json"),
    }
}

fn key(body: Body) -> &'static str {
    match body {
        Body::Request => "request",
        Body::StreamChunk => "stream_chunk",
        Body::Response => "response",
        Body::Error => "error",
    }
}

fn validators() -> &'static HashMap<(Api, Body), jsonschema::Validator> {
    static VALIDATORS: OnceLock<HashMap<(Api, Body), jsonschema::Validator>> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        let mut map = HashMap::new();
        for api in [Api::OpenAi, Api::Anthropic, Api::Gemini, Api::Ollama] {
            let schemas: Value = serde_json::from_str(file(api)).expect("the conformance file is JSON");
            for body in [Body::Request, Body::StreamChunk, Body::Response, Body::Error] {
                let schema = &schemas[key(body)];
                let validator = jsonschema::validator_for(schema)
                    .unwrap_or_else(|error| panic!("{api:?} {body:?} schema does not compile: {error}"));
                map.insert((api, body), validator);
            }
        }
        map
    })
}

/// What is wrong with `value` as `body` of `api`; empty when it conforms.
pub fn violations(api: Api, body: Body, value: &Value) -> Vec<String> {
    validators()[&(api, body)]
        .iter_errors(value)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect()
}

/// Panics, listing the violations, unless `value` conforms.
pub fn assert_conforms(api: Api, body: Body, value: &Value) {
    let problems = violations(api, body, value);
    assert!(
        problems.is_empty(),
        "{api:?} {body:?} does not match the API description:\n  {}\nbody: {}",
        problems.iter().take(8).cloned().collect::<Vec<_>>().join("\n  "),
        value.to_string().chars().take(2_000).collect::<String>()
    );
}

/// The API a request was sent to, by its path.
pub fn api_of(request: &wiremock::Request) -> Option<Api> {
    let path = request.url.path();
    if path.ends_with("/chat/completions") {
        Some(Api::OpenAi)
    } else if path.ends_with("/v1/messages") {
        Some(Api::Anthropic)
    } else if path.contains(":streamGenerateContent") || path.contains(":generateContent") {
        Some(Api::Gemini)
    } else if path.ends_with("/api/chat") {
        Some(Api::Ollama)
    } else {
        None
    }
}

/// Checks every request body a test server received against the API its path names.
pub fn assert_each_request_conforms(requests: &[wiremock::Request]) {
    for request in requests {
        if let Some(api) = api_of(request) {
            assert_requests_conform(api, std::slice::from_ref(request));
        }
    }
}

/// Checks every request body a test server received.
pub fn assert_requests_conform(api: Api, requests: &[wiremock::Request]) {
    assert!(!requests.is_empty(), "no request to check");
    for request in requests {
        let body: Value = serde_json::from_slice(&request.body).expect("the request body is JSON");
        assert_conforms(api, Body::Request, &body);
    }
}
