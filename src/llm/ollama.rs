//! `ollama`: Ollama's native chat endpoint (`POST /api/chat`), for local models with no key.
//!
//! The native endpoint is used rather than Ollama's OpenAI-compatible `/v1` because its
//! `format` field takes a JSON schema and compiles it into the sampling grammar, so even small
//! local models produce the reply shape. Replies are requested whole (`stream: false`). An
//! Ollama too old to take a schema answers 400; the provider then asks for plain JSON
//! (`format: "json"`) for the rest of the run.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openai::{base_url, model};
use super::retry::{http_client, post_json};
use super::schema::{self, StructuredOutput};
use super::{Completion, CompletionRequest, Provider, ProviderError, Role, StopReason, Usage};
use crate::config::{ConfigError, ProviderSettings};

const NAME: &str = "ollama";
pub const DEFAULT_MODEL: &str = "llama3.1";
pub const DEFAULT_BASE_URL: &str = "http://localhost:11434";

const SCHEMA_REFUSAL_MARKERS: &[&str] = &["format", "schema"];

pub struct Ollama {
    client: reqwest::Client,
    url: String,
    model: String,
    structured: StructuredOutput,
}

impl Ollama {
    pub fn new(settings: &ProviderSettings) -> Result<Self, ConfigError> {
        Ok(Self {
            client: http_client(NAME, settings.request_timeout)?,
            url: format!("{}/api/chat", base_url(settings, DEFAULT_BASE_URL)),
            model: model(settings, DEFAULT_MODEL),
            structured: StructuredOutput::default(),
        })
    }

    fn body(&self, request: &CompletionRequest<'_>, structured: bool) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for message in request.messages {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            messages.push(json!({"role": role, "content": message.content}));
        }
        let format = if structured {
            schema::ollama(request.reply_schema)
        } else {
            json!("json")
        };
        json!({"model": self.model, "messages": messages, "stream": false, "format": format})
    }

    async fn send(&self, body: &Value) -> Result<Value, ProviderError> {
        post_json(NAME, self.client.post(&self.url).json(body), None).await
    }
}

#[async_trait]
impl Provider for Ollama {
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
    message: ResponseMessage,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    eval_count: Option<u64>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<String>,
}

fn parse(answer: Value) -> Result<Completion, ProviderError> {
    let response: Response = serde_json::from_value(answer).map_err(|error| ProviderError::MalformedResponse {
        provider: NAME,
        message: format!("not a chat answer: {error}"),
    })?;
    let stop = match response.done_reason.as_deref() {
        Some("length") => StopReason::Length,
        _ => StopReason::Complete,
    };
    Ok(Completion {
        content: response.message.content.unwrap_or_default(),
        usage: Usage {
            input_tokens: response.prompt_eval_count.unwrap_or(0),
            output_tokens: response.eval_count.unwrap_or(0),
        },
        stop,
    })
}
