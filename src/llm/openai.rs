//! `openai`: the Chat Completions API, and every server that speaks it (Ollama's `/v1`, vLLM,
//! llama.cpp, LM Studio, OpenRouter) through `--base-url`.
//!
//! Replies are streamed (`stream: true`, with `stream_options.include_usage` so the last chunk
//! carries the usage, cached tokens included). Requests carry a `prompt_cache_key` per cycle so
//! that OpenAI routes a cycle's requests, which share their prefix, to the same prompt cache.
//! The reply shape is asked for with structured output (`response_format` of type
//! `json_schema`, `strict: false` so that optional arguments stay optional: see
//! [`super::schema`]). Local servers often do not implement it and refuse it (a 400, or a 500 from
//! servers whose validation fails on it); the provider then steps down to `json_object` with the
//! schema, then to JSON asked for in plain text (the agent's lenient parser reads it), once per
//! refusal and for the rest of the run, because a bot that stops on a missing optional feature
//! helps nobody. `--structured-output` picks a form by hand. The same goes for a
//! server that refuses the caching and streaming options by name. A key is sent only when one
//! is set: local servers need none.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{Endpoint, secret_header};
use super::reply_form::{self, ReplyForm, StructuredOutput};
use super::schema;
use super::server_facts::{self, ServerFacts, ServerWindow};
use super::stream::{self, Accumulator, Framing, Step};
use super::{Completion, CompletionRequest, Provider, ProviderError, Role, StopReason, Usage, UsageReport};
use crate::settings::{ConfigError, ProviderSettings};

const NAME: &str = "openai";
pub const DEFAULT_MODEL: &str = crate::kinds::ProviderKind::Openai.default_model();
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Words in a 400's message that mean "this server does not take the schema".
const SCHEMA_REFUSAL_MARKERS: &[&str] = &["response_format", "json_schema", "schema", "structured output"];
/// Words in a 400's message that mean "this server does not take the optional fields".
const OPTIONS_REFUSAL_MARKERS: &[&str] = &["prompt_cache_key", "stream_options"];

pub struct OpenAi {
    endpoint: Endpoint,
    model: String,
    structured: StructuredOutput,
    /// Cleared when a compatible server refuses `prompt_cache_key`/`stream_options`.
    options: AtomicBool,
    /// `--max-reply-tokens`.
    max_reply_tokens: Option<u64>,
    /// OpenAI's own API takes the reply cap as `max_completion_tokens` (its `max_tokens` is
    /// deprecated and refused by reasoning models); compatible servers know `max_tokens`.
    cap_field: &'static str,
    /// A compatible server's base URL (`…/v1`), whose self-description is worth asking for;
    /// `None` for OpenAI's own API, which publishes no window.
    compatible_base: Option<String>,
    /// Whether `--model` named the model (without it, `--base-url`'s warning already said
    /// which window is assumed).
    named_model: bool,
    /// What the server said about itself, asked once.
    facts: tokio::sync::OnceCell<ServerFacts>,
    /// `--temperature`; none sent without it (reasoning models refuse any but their own).
    temperature: Option<f64>,
}

impl OpenAi {
    pub fn new(settings: &ProviderSettings) -> Result<Self, ConfigError> {
        let base = base_url(settings, DEFAULT_BASE_URL);
        let url = format!("{base}/chat/completions");
        let own_api = url.starts_with(DEFAULT_BASE_URL);
        let cap_field = if own_api { "max_completion_tokens" } else { "max_tokens" };
        Ok(Self {
            endpoint: Endpoint::new(NAME, url, settings.api_key.clone(), settings.request_timeout)?,
            model: model(settings, DEFAULT_MODEL),
            structured: StructuredOutput::new(settings.structured_output, reply_form::CHAT_COMPLETIONS_FORMS),
            options: AtomicBool::new(true),
            max_reply_tokens: settings.max_reply_tokens,
            cap_field,
            compatible_base: (!own_api).then_some(base),
            named_model: settings.model.as_deref().is_some_and(|model| !model.trim().is_empty()),
            facts: tokio::sync::OnceCell::new(),
            temperature: settings.temperature,
        })
    }

    /// What the compatible server says about itself: asked on first use, kept for the run.
    async fn facts(&self) -> Option<&ServerFacts> {
        let base = self.compatible_base.as_deref()?;
        Some(
            self.facts
                .get_or_init(|| async {
                    let facts = server_facts::ask(base, &self.model, self.endpoint.api_key.as_ref()).await;
                    let shown = super::http::shown_url(base);
                    match facts.window {
                        Some(window) => tracing::info!(
                            "{NAME}: the server at {shown} says its context window is {} tokens ({})",
                            window.tokens,
                            window.field.describe()
                        ),
                        None if self.named_model && super::window::built_in_window(&self.model).is_none() => {
                            tracing::warn!(
                                "{NAME}: the server at {shown} does not say its context window and upkeep does not know {}'s: upkeep assumes {} tokens; set --context-window to the server's",
                                self.model,
                                super::window::UNKNOWN_MODEL_WINDOW
                            );
                        }
                        None => {}
                    }
                    facts
                })
                .await,
        )
    }

    fn body(&self, request: &CompletionRequest<'_>, form: ReplyForm) -> Value {
        let messages = chat_messages(request);
        let mut body = json!({"model": self.model, "messages": messages, "stream": true});
        if let Some(cap) = request.reply_cap(self.max_reply_tokens) {
            body[self.cap_field] = json!(cap);
        }
        if let Some(temperature) = self.temperature {
            body["temperature"] = json!(temperature);
        }
        if self.options.load(Ordering::Relaxed) {
            body["stream_options"] = json!({"include_usage": true});
            if let Some(key) = request.cache.key {
                body["prompt_cache_key"] = json!(key);
            }
        }
        match form {
            ReplyForm::JsonSchema => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {
                        "name": "upkeep_reply",
                        // Strict mode would make every optional argument required (see
                        // `llm::schema`): the model would fill them all on every call.
                        "strict": false,
                        "schema": schema::openai(request.reply_schema),
                    },
                });
            }
            // The schema rides along: servers that take it (llama.cpp's Python server) enforce
            // it with a grammar; others ignore the extra field and still return JSON.
            ReplyForm::JsonObject => {
                body["response_format"] = json!({"type": "json_object", "schema": request.reply_schema});
            }
            ReplyForm::Instruction => {}
        }
        body
    }

    async fn exchange(&self, request: &CompletionRequest<'_>, form: ReplyForm) -> Result<Completion, ProviderError> {
        let body = self.body(request, form);
        stream::exchange(
            &self.endpoint,
            &body,
            |http| match &self.endpoint.api_key {
                Some(key) => Ok(http.header(reqwest::header::AUTHORIZATION, secret_header(NAME, "Bearer ", key)?)),
                None => Ok(http),
            },
            Framing::ServerSentEvents,
            request.progress,
            Reply::default(),
        )
        .await
    }

    /// One attempt; a server that refuses the optional fields by name is asked again without.
    async fn attempt(&self, request: &CompletionRequest<'_>, form: ReplyForm) -> Result<Completion, ProviderError> {
        match self.exchange(request, form).await {
            Err(ProviderError::Http { status, message, .. })
                if (status == 400 || status == 422)
                    && self.options.load(Ordering::Relaxed)
                    && OPTIONS_REFUSAL_MARKERS.iter().any(|marker| message.contains(marker)) =>
            {
                if self.options.swap(false, Ordering::Relaxed) {
                    tracing::warn!(
                        provider = NAME,
                        reason = message,
                        "the server refused prompt_cache_key/stream_options; sending neither for the rest of the run"
                    );
                }
                self.exchange(request, form).await
            }
            other => other,
        }
    }
}

/// The conversation as chat messages, the system prompt first: the shape OpenAI's chat
/// completions and Ollama's chat API share.
pub(super) fn chat_messages(request: &CompletionRequest<'_>) -> Vec<Value> {
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
    messages
}

#[async_trait]
impl Provider for OpenAi {
    fn name(&self) -> &'static str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn server_window(&self) -> Option<ServerWindow> {
        self.facts().await?.window
    }

    async fn count_tokens(&self, text: &str) -> Option<u64> {
        let url = self.facts().await?.tokenize_url.as_deref()?;
        server_facts::count_tokens(url, text, self.endpoint.api_key.as_ref()).await
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ProviderError> {
        self.structured
            .send_with_fallback(NAME, SCHEMA_REFUSAL_MARKERS, |form| {
                let request = &request;
                async move { self.attempt(request, form).await }
            })
            .await
    }
}

/// A reply as its chunks arrive.
#[derive(Default)]
struct Reply {
    content: String,
    refusal: Option<String>,
    finish_reason: Option<String>,
    usage: Usage,
    usage_report: Option<UsageReport>,
}

/// One streamed chunk (`chat.completion.chunk`), or a whole `chat.completion`: the same fields,
/// under `delta` or `message`.
#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
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
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl Reply {
    fn add(&mut self, endpoint: &Endpoint, value: Value) -> Result<usize, ProviderError> {
        let chunk: Chunk = stream::parse(endpoint, value, "a chat completion chunk")?;
        if let Some(usage) = chunk.usage {
            self.usage_report = Some(UsageReport::of(usage.prompt_tokens, usage.completion_tokens));
            // `prompt_tokens` already includes the cached ones; OpenAI bills no cache writes.
            self.usage = Usage {
                input_tokens: usage.prompt_tokens.unwrap_or(0),
                output_tokens: usage.completion_tokens.unwrap_or(0),
                cached_input_tokens: usage
                    .prompt_tokens_details
                    .and_then(|details| details.cached_tokens)
                    .unwrap_or(0),
                cache_write_tokens: 0,
            };
        }
        let mut added = 0;
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content {
                    added += text.len();
                    self.content.push_str(&text);
                }
                if let Some(text) = delta.refusal {
                    self.refusal.get_or_insert_with(String::new).push_str(&text);
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(added)
    }
}

impl Accumulator for Reply {
    fn event(&mut self, endpoint: &Endpoint, _name: &str, data: &str) -> Result<Step, ProviderError> {
        if data.trim() == "[DONE]" {
            return Ok(Step::Done);
        }
        let value = stream::json(endpoint, data)?;
        Ok(Step::More(self.add(endpoint, value)?))
    }

    fn whole(&mut self, endpoint: &Endpoint, body: Value) -> Result<(), ProviderError> {
        if body.get("choices").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            return Err(ProviderError::MalformedResponse {
                provider: NAME,
                message: "the answer has no choices".into(),
            });
        }
        self.add(endpoint, body).map(|_| ())
    }

    fn finish(self, endpoint: &Endpoint, done: bool) -> Result<Completion, ProviderError> {
        // Some compatible servers end with the finish reason and no `[DONE]`.
        if !done && self.finish_reason.is_none() {
            return Err(stream::cut_short(endpoint));
        }
        let stop = match (self.refusal, self.finish_reason.as_deref()) {
            (Some(reason), _) => StopReason::Refusal(reason),
            (None, Some("content_filter")) => {
                StopReason::Refusal("the reply was withheld by the content filter".into())
            }
            (None, Some("length")) => StopReason::Length,
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

/// The base URL of an API whose SDKs take the host root (Anthropic, Gemini): `version` is
/// added unless the URL already ends in a version path (`/v1`, `/v1beta`, `/v2alpha`).
pub(super) fn versioned_base_url(settings: &ProviderSettings, default_root: &str, version: &str) -> String {
    let base = base_url(settings, default_root);
    let last = base.rsplit('/').next().unwrap_or_default();
    if is_version_segment(last) {
        base
    } else {
        format!("{base}/{version}")
    }
}

/// `v1`, `v1beta`, `v2alpha3`: a `v`, digits, then optionally `alpha`/`beta` and digits.
fn is_version_segment(segment: &str) -> bool {
    let Some(rest) = segment.strip_prefix('v') else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let rest = &rest[digits..];
    let rest = rest
        .strip_prefix("alpha")
        .or_else(|| rest.strip_prefix("beta"))
        .unwrap_or(rest);
    rest.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_paths_are_recognised() {
        for version in ["v1", "v1beta", "v2alpha", "v1beta3", "v10"] {
            assert!(is_version_segment(version), "{version}");
        }
        for other in ["", "v", "vx", "api", "v1-beta", "models", "v1beta-x"] {
            assert!(!is_version_segment(other), "{other}");
        }
    }
}
