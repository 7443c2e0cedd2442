//! `openai`: the Chat Completions API, and every server that speaks it (Ollama's `/v1`, vLLM,
//! llama.cpp, LM Studio, OpenRouter) through `--base-url`.
//!
//! The reply shape is enforced with strict structured output (`response_format` of type
//! `json_schema`). Local servers often do not implement it and answer 400; the provider then
//! asks for JSON in plain text for the rest of the run (the agent's lenient parser reads it),
//! because a bot that stops on a missing optional feature helps nobody. A key is sent only
//! when one is set: local servers need none.

use async_trait::async_trait;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::{Value, json};

use super::retry::{http_client, post_json, secret_header};
use super::schema::{self, StructuredOutput};
use super::{Completion, CompletionRequest, Provider, ProviderError, Role, StopReason, Usage};
use crate::config::{ConfigError, ProviderSettings};

const NAME: &str = "openai";
pub const DEFAULT_MODEL: &str = "gpt-4.1";
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Words in a 400's message that mean "this server does not take the schema".
const SCHEMA_REFUSAL_MARKERS: &[&str] = &["response_format", "json_schema", "schema", "structured output"];

pub struct OpenAi {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<SecretString>,
    structured: StructuredOutput,
}

impl OpenAi {
    pub fn new(settings: &ProviderSettings) -> Result<Self, ConfigError> {
        Ok(Self {
            client: http_client(NAME, settings.request_timeout)?,
            url: format!("{}/chat/completions", base_url(settings, DEFAULT_BASE_URL)),
            model: model(settings, DEFAULT_MODEL),
            api_key: settings.api_key.clone(),
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
        let mut body = json!({"model": self.model, "messages": messages});
        if structured {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {
                    "name": "upkeep_reply",
                    "strict": true,
                    "schema": schema::openai_strict(request.reply_schema),
                },
            });
        }
        body
    }

    async fn send(&self, body: &Value) -> Result<Value, ProviderError> {
        let mut http = self.client.post(&self.url).json(body);
        if let Some(key) = &self.api_key {
            let value = secret_header(NAME, "Bearer ", key)?;
            http = http.header(reqwest::header::AUTHORIZATION, value);
        }
        post_json(NAME, http, self.api_key.as_ref()).await
    }
}

#[async_trait]
impl Provider for OpenAi {
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
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

fn parse(answer: Value) -> Result<Completion, ProviderError> {
    let response: Response = serde_json::from_value(answer).map_err(|error| ProviderError::MalformedResponse {
        provider: NAME,
        message: format!("not a chat completion: {error}"),
    })?;
    let usage = response
        .usage
        .map(|usage| Usage {
            input_tokens: usage.prompt_tokens.unwrap_or(0),
            output_tokens: usage.completion_tokens.unwrap_or(0),
        })
        .unwrap_or_default();
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(ProviderError::MalformedResponse {
            provider: NAME,
            message: "the answer has no choices".into(),
        });
    };
    let content = choice.message.content.unwrap_or_default();
    let stop = match (choice.message.refusal, choice.finish_reason.as_deref()) {
        (Some(reason), _) => StopReason::Refusal(reason),
        (None, Some("content_filter")) => StopReason::Refusal("the reply was withheld by the content filter".into()),
        (None, Some("length")) => StopReason::Length,
        _ => StopReason::Complete,
    };
    Ok(Completion { content, usage, stop })
}

/// The model from the settings, or the provider's default when none (or an empty one) is set.
pub(super) fn model(settings: &ProviderSettings, default: &str) -> String {
    settings
        .model
        .as_deref()
        .map(str::trim)
        .filter(|model| !model.is_empty())
        .unwrap_or(default)
        .to_owned()
}

/// The base URL from the settings, used as given (less a trailing slash, so that appending a
/// path never doubles it), or the provider's default.
pub(super) fn base_url(settings: &ProviderSettings, default: &str) -> String {
    settings
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .unwrap_or(default)
        .trim_end_matches('/')
        .to_owned()
}
