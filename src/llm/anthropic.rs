//! `anthropic`: the Messages API (`POST /v1/messages`), streamed.
//!
//! The system prompt is the top-level `system` field, the conversation alternates user and
//! assistant turns and always ends with the user (no assistant prefill, which structured output
//! does not allow). The reply shape is enforced through `output_config.format` with the schema
//! cleaned of what Anthropic refuses; a model without structured output answers 400, and the
//! provider then falls back to JSON in plain text for the rest of the run. `max_tokens` is
//! required by the API.
//!
//! Prompt caching: the system prompt and the messages the history policy names as stable
//! (`CacheHints::breakpoints`) carry `cache_control: {type: ephemeral}` breakpoints, at most
//! four in a request as the API allows (the newest ones win). Usage is normalised: Anthropic's
//! `input_tokens` counts only the tokens after the last cache breakpoint, so the cache reads
//! and writes are added to it.
//!
//! `--base-url` is the host root, as in Anthropic's SDKs; `/v1` is added unless the URL
//! already ends in a version path.

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

const NAME: &str = "anthropic";
pub const DEFAULT_MODEL: &str = crate::kinds::ProviderKind::Anthropic.default_model();
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
/// Room for a reply that writes whole files; the API requires a number.
pub const MAX_TOKENS: u32 = 8192;
/// The API refuses a request with more `cache_control` breakpoints than this.
const MAX_BREAKPOINTS: usize = 4;

const SCHEMA_REFUSAL_MARKERS: &[&str] = &[
    "output_config",
    "output_format",
    "json_schema",
    "schema",
    "structured output",
];

pub struct Anthropic {
    endpoint: Endpoint,
    model: String,
    structured: StructuredOutput,
    /// `--max-reply-tokens`.
    max_reply_tokens: Option<u64>,
    /// `--temperature`; none sent without it.
    temperature: Option<f64>,
}

impl Anthropic {
    pub fn new(settings: &ProviderSettings) -> Result<Self, ConfigError> {
        let url = format!("{}/messages", versioned_base_url(settings, DEFAULT_BASE_URL, "v1"));
        Ok(Self {
            endpoint: Endpoint::new(NAME, url, settings.api_key.clone(), settings.request_timeout)?,
            model: model(settings, DEFAULT_MODEL),
            structured: StructuredOutput::new(settings.structured_output, reply_form::SCHEMA_OR_INSTRUCTION),
            max_reply_tokens: settings.max_reply_tokens,
            temperature: settings.temperature,
        })
    }

    fn body(&self, request: &CompletionRequest<'_>, structured: bool) -> Value {
        let cache_system = !request.system.is_empty();
        let room = MAX_BREAKPOINTS - usize::from(cache_system);
        let marked = &request.cache.breakpoints[request.cache.breakpoints.len().saturating_sub(room)..];
        let messages: Vec<Value> = request
            .messages
            .iter()
            .enumerate()
            .map(|(index, message)| {
                let role = match message.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": [text_block(&message.content, marked.contains(&index))]})
            })
            .collect();
        let max_tokens = request
            .reply_cap(self.max_reply_tokens)
            .unwrap_or(u64::from(MAX_TOKENS));
        let mut body = json!({"model": self.model, "max_tokens": max_tokens, "stream": true});
        if cache_system {
            body["system"] = json!([text_block(request.system, true)]);
        }
        body["messages"] = json!(messages);
        if let Some(temperature) = self.temperature {
            body["temperature"] = json!(temperature);
        }
        if structured {
            body["output_config"] = json!({
                "format": {"type": "json_schema", "schema": schema::anthropic(request.reply_schema)},
            });
        }
        body
    }
}

/// A text content block, with a cache breakpoint after it when `cache` is set.
fn text_block(text: &str, cache: bool) -> Value {
    let mut block = json!({"type": "text", "text": text});
    if cache {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
    block
}

#[async_trait]
impl reply_form::SchemaOrInstruction for Anthropic {
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
            |http| {
                let http = http.header("anthropic-version", API_VERSION);
                match &self.endpoint.api_key {
                    Some(key) => Ok(http.header("x-api-key", secret_header(NAME, "", key)?)),
                    None => Ok(http),
                }
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
    stop_reason: Option<String>,
    usage: ResponseUsage,
}

/// A whole message, or the `message` of `message_start`.
#[derive(Deserialize)]
struct Message {
    #[serde(default)]
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

/// Anthropic's usage fields. `message_start` carries them all; `message_delta` carries the
/// output count and (in newer API versions) cumulative input counts.
#[derive(Deserialize, Default, Clone, Copy)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl ResponseUsage {
    /// Later counts replace earlier ones field by field (the API's counts are cumulative).
    fn update(&mut self, later: ResponseUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later.cache_creation_input_tokens.or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later.cache_read_input_tokens.or(self.cache_read_input_tokens);
    }

    fn normalised(self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let written = self.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            input_tokens: self
                .input_tokens
                .unwrap_or(0)
                .saturating_add(read)
                .saturating_add(written),
            output_tokens: self.output_tokens.unwrap_or(0),
            cached_input_tokens: read,
            cache_write_tokens: written,
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: Message,
    },
    ContentBlockDelta {
        delta: Delta,
    },
    MessageDelta {
        #[serde(default)]
        delta: Option<MessageDelta>,
        #[serde(default)]
        usage: Option<ResponseUsage>,
    },
    MessageStop,
    Error,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

impl Accumulator for Reply {
    fn event(&mut self, endpoint: &Endpoint, _name: &str, data: &str) -> Result<Step, ProviderError> {
        let value = stream::json(endpoint, data)?;
        match stream::parse::<Event>(endpoint, value, "a message event")? {
            Event::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.usage.update(usage);
                }
            }
            Event::ContentBlockDelta { delta } if delta.kind == "text_delta" => {
                let text = delta.text.unwrap_or_default();
                self.content.push_str(&text);
                return Ok(Step::More(text.len()));
            }
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|delta| delta.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = usage {
                    self.usage.update(usage);
                }
            }
            Event::MessageStop => return Ok(Step::Done),
            Event::ContentBlockDelta { .. } | Event::Error | Event::Other => {}
        }
        Ok(Step::More(0))
    }

    fn whole(&mut self, endpoint: &Endpoint, body: Value) -> Result<(), ProviderError> {
        let message: Message = stream::parse(endpoint, body, "a message")?;
        self.content = message
            .content
            .into_iter()
            .filter(|block| block.kind == "text")
            .filter_map(|block| block.text)
            .collect();
        self.stop_reason = message.stop_reason;
        if let Some(usage) = message.usage {
            self.usage.update(usage);
        }
        Ok(())
    }

    fn finish(self, endpoint: &Endpoint, done: bool) -> Result<Completion, ProviderError> {
        if !done {
            return Err(stream::cut_short(endpoint));
        }
        let stop = match self.stop_reason.as_deref() {
            Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
            Some("refusal") if self.content.trim().is_empty() => {
                StopReason::Refusal("the model declined to answer".into())
            }
            Some("refusal") => StopReason::Refusal(self.content.clone()),
            _ => StopReason::Complete,
        };
        Ok(Completion {
            content: self.content,
            usage_report: UsageReport::of(self.usage.input_tokens, self.usage.output_tokens),
            usage: self.usage.normalised(),
            stop,
        })
    }
}
