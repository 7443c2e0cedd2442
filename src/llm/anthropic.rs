//! `anthropic`: the Messages API (`POST /v1/messages`).
//!
//! The system prompt is the top-level `system` field, the conversation alternates user and
//! assistant turns and always ends with the user (no assistant prefill, which structured output
//! does not allow). The reply shape is enforced through `output_config.format` with the schema
//! cleaned of what Anthropic refuses; a model without structured output answers 400, and the
//! provider then falls back to JSON in plain text for the rest of the run. `max_tokens` is
//! required by the API.

use async_trait::async_trait;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openai::{base_url, model};
use super::retry::{http_client, post_json, secret_header};
use super::schema::{self, StructuredOutput};
use super::{Completion, CompletionRequest, Provider, ProviderError, Role, StopReason, Usage};
use crate::config::{ConfigError, ProviderSettings};

const NAME: &str = "anthropic";
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
/// Room for a reply that writes whole files; the API requires a number.
const MAX_TOKENS: u32 = 8192;

const SCHEMA_REFUSAL_MARKERS: &[&str] = &[
    "output_config",
    "output_format",
    "json_schema",
    "schema",
    "structured output",
];

pub struct Anthropic {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<SecretString>,
    structured: StructuredOutput,
}

impl Anthropic {
    pub fn new(settings: &ProviderSettings) -> Result<Self, ConfigError> {
        Ok(Self {
            client: http_client(NAME, settings.request_timeout)?,
            url: format!("{}/v1/messages", base_url(settings, DEFAULT_BASE_URL)),
            model: model(settings, DEFAULT_MODEL),
            api_key: settings.api_key.clone(),
            structured: StructuredOutput::default(),
        })
    }

    fn body(&self, request: &CompletionRequest<'_>, structured: bool) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|message| {
                let role = match message.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": message.content})
            })
            .collect();
        let mut body = json!({"model": self.model, "max_tokens": MAX_TOKENS, "messages": messages});
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        if structured {
            body["output_config"] = json!({
                "format": {"type": "json_schema", "schema": schema::anthropic(request.reply_schema)},
            });
        }
        body
    }

    async fn send(&self, body: &Value) -> Result<Value, ProviderError> {
        let mut http = self
            .client
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .json(body);
        if let Some(key) = &self.api_key {
            let value = secret_header(NAME, "", key)?;
            http = http.header("x-api-key", value);
        }
        post_json(NAME, http, self.api_key.as_ref()).await
    }
}

#[async_trait]
impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ProviderError> {
        let answer = self
            .structured
            .send_with_fallback(NAME, SCHEMA_REFUSAL_MARKERS, |structured| {
                let body = self.body(&request, structured);
                async move { self.send(&body).await }
            })
            .await?;
        parse(answer)
    }
}

#[derive(Deserialize)]
struct Response {
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

/// One content block; only `text` blocks carry the reply (`thinking` and others are skipped).
#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

fn parse(answer: Value) -> Result<Completion, ProviderError> {
    let response: Response = serde_json::from_value(answer).map_err(|error| ProviderError::MalformedResponse {
        provider: NAME,
        message: format!("not a message: {error}"),
    })?;
    let content: String = response
        .content
        .into_iter()
        .filter(|block| block.kind == "text")
        .filter_map(|block| block.text)
        .collect();
    let usage = response
        .usage
        .map(|usage| Usage {
            input_tokens: usage.input_tokens.unwrap_or(0),
            output_tokens: usage.output_tokens.unwrap_or(0),
        })
        .unwrap_or_default();
    let stop = match response.stop_reason.as_deref() {
        Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
        Some("refusal") if content.trim().is_empty() => StopReason::Refusal("the model declined to answer".into()),
        Some("refusal") => StopReason::Refusal(content.clone()),
        _ => StopReason::Complete,
    };
    Ok(Completion { content, usage, stop })
}
