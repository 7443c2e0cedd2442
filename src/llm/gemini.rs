//! `gemini`: the Gemini API's `generateContent`.
//!
//! The system prompt goes in `systemInstruction`, the conversation in `contents` with the roles
//! `user` and `model`. The reply shape is enforced with `responseJsonSchema` (plain JSON Schema,
//! `anyOf` included, unlike the OpenAPI-style `responseSchema`); should a model refuse it, the
//! provider keeps `responseMimeType: application/json` and drops the schema for the rest of the
//! run. The key travels in the `x-goog-api-key` header, never in the URL, so no error or log
//! line that quotes a URL can leak it.

use async_trait::async_trait;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openai::{base_url, model};
use super::retry::{http_client, post_json, secret_header};
use super::schema::{self, StructuredOutput};
use super::{Completion, CompletionRequest, Provider, ProviderError, Role, StopReason, Usage};
use crate::config::{ConfigError, ProviderSettings};

const NAME: &str = "gemini";
pub const DEFAULT_MODEL: &str = "gemini-2.5-flash";
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

const SCHEMA_REFUSAL_MARKERS: &[&str] = &["responsejsonschema", "response_json_schema", "schema"];

/// Finish reasons that mean the model's output was blocked rather than finished.
const BLOCKED: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
];

pub struct Gemini {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<SecretString>,
    structured: StructuredOutput,
}

impl Gemini {
    pub fn new(settings: &ProviderSettings) -> Result<Self, ConfigError> {
        let model = model(settings, DEFAULT_MODEL);
        // The model is part of the URL path: anything but a plain name would change the request.
        let path = if model.starts_with("models/") || model.starts_with("tunedModels/") {
            model.clone()
        } else {
            format!("models/{model}")
        };
        let name = path.split_once('/').map_or(path.as_str(), |(_, name)| name);
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(ConfigError::key(
                "--model",
                format!("{model:?} is not a Gemini model name"),
            ));
        }
        Ok(Self {
            client: http_client(NAME, settings.request_timeout)?,
            url: format!("{}/{path}:generateContent", base_url(settings, DEFAULT_BASE_URL)),
            model,
            api_key: settings.api_key.clone(),
            structured: StructuredOutput::default(),
        })
    }

    fn body(&self, request: &CompletionRequest<'_>, structured: bool) -> Value {
        let contents: Vec<Value> = request
            .messages
            .iter()
            .map(|message| {
                let role = match message.role {
                    Role::User => "user",
                    Role::Assistant => "model",
                };
                json!({"role": role, "parts": [{"text": message.content}]})
            })
            .collect();
        let mut generation_config = json!({"responseMimeType": "application/json"});
        if structured {
            generation_config["responseJsonSchema"] = schema::gemini(request.reply_schema);
        }
        let mut body = json!({"contents": contents, "generationConfig": generation_config});
        if !request.system.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": request.system}]});
        }
        body
    }

    async fn send(&self, body: &Value) -> Result<Value, ProviderError> {
        let mut http = self.client.post(&self.url).json(body);
        if let Some(key) = &self.api_key {
            let value = secret_header(NAME, "", key)?;
            http = http.header("x-goog-api-key", value);
        }
        post_json(NAME, http, self.api_key.as_ref()).await
    }
}

#[async_trait]
impl Provider for Gemini {
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
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    candidates: Option<Vec<Candidate>>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
    /// Thought summaries are the model's reasoning, not its reply.
    #[serde(default)]
    thought: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
    #[serde(default)]
    block_reason_message: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    /// Thinking tokens are billed as output, so they count toward the budget too.
    #[serde(default)]
    thoughts_token_count: Option<u64>,
}

fn parse(answer: Value) -> Result<Completion, ProviderError> {
    let response: Response = serde_json::from_value(answer).map_err(|error| ProviderError::MalformedResponse {
        provider: NAME,
        message: format!("not a generateContent answer: {error}"),
    })?;
    let usage = response
        .usage_metadata
        .map(|usage| Usage {
            input_tokens: usage.prompt_token_count.unwrap_or(0),
            output_tokens: usage.candidates_token_count.unwrap_or(0) + usage.thoughts_token_count.unwrap_or(0),
        })
        .unwrap_or_default();
    // A blocked prompt gets no candidates at all, only the reason.
    if let Some(reason) = response
        .prompt_feedback
        .as_ref()
        .and_then(|feedback| feedback.block_reason.as_deref())
    {
        let detail = response
            .prompt_feedback
            .as_ref()
            .and_then(|feedback| feedback.block_reason_message.as_deref());
        let reason = match detail {
            Some(detail) => format!("the prompt was blocked ({reason}): {detail}"),
            None => format!("the prompt was blocked ({reason})"),
        };
        return Ok(Completion {
            content: String::new(),
            usage,
            stop: StopReason::Refusal(reason),
        });
    }
    let Some(candidate) = response.candidates.and_then(|candidates| candidates.into_iter().next()) else {
        return Err(ProviderError::MalformedResponse {
            provider: NAME,
            message: "the answer has no candidates".into(),
        });
    };
    let content: String = candidate
        .content
        .map(|content| content.parts)
        .unwrap_or_default()
        .into_iter()
        .filter(|part| part.thought != Some(true))
        .filter_map(|part| part.text)
        .collect();
    let stop = match candidate.finish_reason.as_deref() {
        Some("MAX_TOKENS") => StopReason::Length,
        Some(reason) if BLOCKED.contains(&reason) => StopReason::Refusal(format!("the reply was blocked ({reason})")),
        _ => StopReason::Complete,
    };
    Ok(Completion { content, usage, stop })
}
