//! `gemini`: the Gemini API's `streamGenerateContent` (server-sent events, `alt=sse`).
//!
//! The system prompt goes in `systemInstruction`, the conversation in `contents` with the roles
//! `user` and `model`. The reply shape is enforced with `responseJsonSchema` (plain JSON Schema,
//! `anyOf` included, unlike the OpenAPI-style `responseSchema`); should a model refuse it, the
//! provider keeps `responseMimeType: application/json` and drops the schema for the rest of the
//! run. The key travels in the `x-goog-api-key` header, never in the URL, so no error or log
//! line that quotes a URL can leak it.
//!
//! Gemini caches repeated prefixes by itself (implicit caching) and reports the tokens read
//! from the cache as `cachedContentTokenCount`, already included in `promptTokenCount`; there
//! is no write charge. `--base-url` is the host root, as in Google's SDKs; `/v1beta` is added
//! unless the URL already ends in a version path.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{Endpoint, secret_header};
use super::openai::{model, versioned_base_url};
use super::reply_form::{self, StructuredOutput};
use super::schema;
use super::stream::{self, Accumulator, Framing, Step};
use super::{Completion, CompletionRequest, ProviderError, Role, StopReason, Usage, UsageReport};
use crate::settings::{ConfigError, ProviderSettings};

const NAME: &str = "gemini";
pub const DEFAULT_MODEL: &str = crate::kinds::ProviderKind::Gemini.default_model();
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

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
    endpoint: Endpoint,
    model: String,
    structured: StructuredOutput,
    /// `--max-reply-tokens`.
    max_reply_tokens: Option<u64>,
    /// `--temperature`; none sent without it.
    temperature: Option<f64>,
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
        let base = versioned_base_url(settings, DEFAULT_BASE_URL, "v1beta");
        let url = format!("{base}/{path}:streamGenerateContent?alt=sse");
        Ok(Self {
            endpoint: Endpoint::new(NAME, url, settings.api_key.clone(), settings.request_timeout)?,
            model,
            structured: StructuredOutput::new(settings.structured_output, reply_form::SCHEMA_OR_INSTRUCTION),
            max_reply_tokens: settings.max_reply_tokens,
            temperature: settings.temperature,
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
        let mut body = json!({});
        if !request.system.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": request.system}]});
        }
        body["contents"] = json!(contents);
        let mut generation_config = json!({"responseMimeType": "application/json"});
        if let Some(cap) = request.reply_cap(self.max_reply_tokens) {
            generation_config["maxOutputTokens"] = json!(cap);
        }
        if let Some(temperature) = self.temperature {
            generation_config["temperature"] = json!(temperature);
        }
        if structured {
            generation_config["responseJsonSchema"] = schema::gemini(request.reply_schema);
        }
        body["generationConfig"] = generation_config;
        body
    }
}

#[async_trait]
impl reply_form::SchemaOrInstruction for Gemini {
    const NAME: &'static str = NAME;
    const REFUSAL_MARKERS: &'static [&'static str] = SCHEMA_REFUSAL_MARKERS;

    fn model_name(&self) -> &str {
        &self.model
    }

    fn structured_output(&self) -> &StructuredOutput {
        &self.structured
    }

    async fn exchange(&self, request: &CompletionRequest<'_>, structured: bool) -> Result<Completion, ProviderError> {
        let body = self.body(request, structured);
        stream::exchange(
            &self.endpoint,
            &body,
            |http| match &self.endpoint.api_key {
                Some(key) => Ok(http.header("x-goog-api-key", secret_header(NAME, "", key)?)),
                None => Ok(http),
            },
            Framing::ServerSentEvents,
            request.progress,
            Reply::default(),
        )
        .await
    }
}

#[derive(Default)]
struct Reply {
    content: String,
    finish_reason: Option<String>,
    blocked: Option<String>,
    usage: Usage,
    usage_report: Option<UsageReport>,
    /// Whether any chunk came with candidates (a whole answer without any is malformed).
    candidates_seen: bool,
}

/// One chunk of the stream: a `GenerateContentResponse` with a piece of the reply.
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
    /// Part of `prompt_token_count`, read from the implicit or explicit cache.
    #[serde(default)]
    cached_content_token_count: Option<u64>,
}

impl Reply {
    fn add(&mut self, endpoint: &Endpoint, value: Value) -> Result<usize, ProviderError> {
        let response: Response = stream::parse(endpoint, value, "a generateContent answer")?;
        // Every chunk repeats the counts so far; the last one is the call's.
        if let Some(usage) = response.usage_metadata {
            self.usage_report = Some(UsageReport::of(
                usage.prompt_token_count,
                usage.candidates_token_count.or(usage.thoughts_token_count),
            ));
            self.usage = Usage {
                input_tokens: usage.prompt_token_count.unwrap_or(0),
                output_tokens: usage
                    .candidates_token_count
                    .unwrap_or(0)
                    .saturating_add(usage.thoughts_token_count.unwrap_or(0)),
                cached_input_tokens: usage.cached_content_token_count.unwrap_or(0),
                cache_write_tokens: 0,
            };
        }
        // A blocked prompt gets no candidates at all, only the reason.
        if let Some(feedback) = response.prompt_feedback {
            if let Some(reason) = feedback.block_reason {
                self.blocked = Some(match feedback.block_reason_message {
                    Some(detail) => format!("the prompt was blocked ({reason}): {detail}"),
                    None => format!("the prompt was blocked ({reason})"),
                });
            }
        }
        let mut added = 0;
        if let Some(candidate) = response.candidates.and_then(|candidates| candidates.into_iter().next()) {
            self.candidates_seen = true;
            let parts = candidate.content.map(|content| content.parts).unwrap_or_default();
            for text in parts
                .into_iter()
                .filter(|part| part.thought != Some(true))
                .filter_map(|part| part.text)
            {
                added += text.len();
                self.content.push_str(&text);
            }
            if candidate.finish_reason.is_some() {
                self.finish_reason = candidate.finish_reason;
            }
        }
        Ok(added)
    }
}

impl Accumulator for Reply {
    fn event(&mut self, endpoint: &Endpoint, _name: &str, data: &str) -> Result<Step, ProviderError> {
        let value = stream::json(endpoint, data)?;
        Ok(Step::More(self.add(endpoint, value)?))
    }

    fn whole(&mut self, endpoint: &Endpoint, body: Value) -> Result<(), ProviderError> {
        // A non-streaming answer, or the JSON array `streamGenerateContent` sends without `alt=sse`.
        match body {
            Value::Array(chunks) => {
                for chunk in chunks {
                    self.add(endpoint, chunk)?;
                }
            }
            other => {
                self.add(endpoint, other)?;
            }
        }
        if !self.candidates_seen && self.blocked.is_none() {
            return Err(ProviderError::MalformedResponse {
                provider: NAME,
                message: "the answer has no candidates".into(),
            });
        }
        Ok(())
    }

    fn finish(self, endpoint: &Endpoint, _done: bool) -> Result<Completion, ProviderError> {
        if let Some(reason) = self.blocked {
            return Ok(Completion {
                content: String::new(),
                usage: self.usage,
                usage_report: self.usage_report.unwrap_or(UsageReport::Missing),
                stop: StopReason::Refusal(reason),
            });
        }
        // Gemini has no end-of-stream event: the last chunk is the one with a finish reason.
        let Some(finish_reason) = self.finish_reason else {
            return Err(stream::cut_short(endpoint));
        };
        let stop = match finish_reason.as_str() {
            "MAX_TOKENS" => StopReason::Length,
            reason if BLOCKED.contains(&reason) => StopReason::Refusal(format!("the reply was blocked ({reason})")),
            _ => StopReason::Complete,
        };
        Ok(Completion {
            content: self.content,
            usage: self.usage,
            usage_report: self.usage_report.unwrap_or(UsageReport::Missing),
            stop,
        })
    }
}
