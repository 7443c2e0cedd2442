//! `ollama`: Ollama's native chat endpoint (`POST /api/chat`), for local models with no key.
//!
//! The native endpoint is used rather than Ollama's OpenAI-compatible `/v1` because its
//! `format` field takes a JSON schema and compiles it into the sampling grammar, so even small
//! local models produce the reply shape, and because its `options.num_ctx` sets the context
//! window: upkeep sends the window it fits every request into, so Ollama never truncates a
//! request silently to its own (small) default. Replies stream as newline-delimited JSON; the
//! last line (`done: true`) carries the stop reason and the token counts. An Ollama too old to
//! take a schema answers 400; the provider then asks for plain JSON (`format: "json"`) for the
//! rest of the run.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::Endpoint;
use super::openai::{base_url, chat_messages, model};
use super::reply_form::{self, StructuredOutput};
use super::schema;
use super::stream::{self, Accumulator, Framing, Step};
use super::{Completion, CompletionRequest, ProviderError, StopReason, Usage, UsageReport};
use crate::settings::{ConfigError, ProviderSettings};

const NAME: &str = "ollama";
pub const DEFAULT_MODEL: &str = crate::kinds::ProviderKind::Ollama.default_model();
pub const DEFAULT_BASE_URL: &str = "http://localhost:11434";

const SCHEMA_REFUSAL_MARKERS: &[&str] = &["format", "schema"];

pub struct Ollama {
    endpoint: Endpoint,
    model: String,
    /// Sent as `options.num_ctx`.
    context_window: u64,
    structured: StructuredOutput,
    /// `--max-reply-tokens`.
    max_reply_tokens: Option<u64>,
    /// `--temperature`; none sent without it.
    temperature: Option<f64>,
}

impl Ollama {
    pub fn new(settings: &ProviderSettings) -> Result<Self, ConfigError> {
        let url = format!("{}/api/chat", base_url(settings, DEFAULT_BASE_URL));
        let model = model(settings, DEFAULT_MODEL);
        Ok(Self {
            endpoint: Endpoint::new(NAME, url, None, settings.request_timeout)?,
            context_window: settings
                .context_window
                .unwrap_or_else(|| super::window::default_window(&model)),
            model,
            structured: StructuredOutput::new(settings.structured_output, reply_form::SCHEMA_OR_INSTRUCTION),
            max_reply_tokens: settings.max_reply_tokens,
            temperature: settings.temperature,
        })
    }

    fn body(&self, request: &CompletionRequest<'_>, structured: bool) -> Value {
        let messages = chat_messages(request);
        let format = if structured {
            schema::ollama(request.reply_schema)
        } else {
            json!("json")
        };
        let mut options = json!({"num_ctx": self.context_window});
        if let Some(cap) = request.reply_cap(self.max_reply_tokens) {
            options["num_predict"] = json!(cap);
        }
        if let Some(temperature) = self.temperature {
            options["temperature"] = json!(temperature);
        }
        json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "format": format,
            "options": options,
        })
    }
}

#[async_trait]
impl reply_form::SchemaOrInstruction for Ollama {
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
            Ok,
            Framing::JsonLines,
            request.progress,
            Reply::default(),
        )
        .await
    }
}

#[derive(Default)]
struct Reply {
    content: String,
    done_reason: Option<String>,
    usage: Usage,
    usage_report: Option<UsageReport>,
}

/// One line of the stream (or the whole answer): a piece of the message; the last line has
/// `done: true`, the stop reason and the counts.
#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    message: Option<ResponseMessage>,
    #[serde(default)]
    done: bool,
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

impl Reply {
    /// Adds a line; returns the text it added and whether it was the last.
    fn add(&mut self, endpoint: &Endpoint, value: Value) -> Result<(usize, bool), ProviderError> {
        let line: Line = stream::parse(endpoint, value, "a chat answer")?;
        let text = line.message.and_then(|message| message.content).unwrap_or_default();
        self.content.push_str(&text);
        if line.done {
            self.done_reason = line.done_reason;
            // Ollama keeps its own prompt cache but reports no cached count (and leaves
            // `prompt_eval_count` out when the whole prompt came from it).
            self.usage_report = Some(UsageReport::of(line.prompt_eval_count, line.eval_count));
            self.usage = Usage {
                input_tokens: line.prompt_eval_count.unwrap_or(0),
                output_tokens: line.eval_count.unwrap_or(0),
                ..Usage::default()
            };
        }
        Ok((text.len(), line.done))
    }
}

impl Accumulator for Reply {
    fn event(&mut self, endpoint: &Endpoint, _name: &str, data: &str) -> Result<Step, ProviderError> {
        let value = stream::json(endpoint, data)?;
        match self.add(endpoint, value)? {
            (_, true) => Ok(Step::Done),
            (added, false) => Ok(Step::More(added)),
        }
    }

    fn whole(&mut self, endpoint: &Endpoint, body: Value) -> Result<(), ProviderError> {
        if body.get("message").is_none() {
            return Err(ProviderError::MalformedResponse {
                provider: NAME,
                message: "not a chat answer: no message".into(),
            });
        }
        self.add(endpoint, body).map(|_| ())
    }

    fn finish(self, endpoint: &Endpoint, done: bool) -> Result<Completion, ProviderError> {
        if !done {
            return Err(stream::cut_short(endpoint));
        }
        let stop = match self.done_reason.as_deref() {
            Some("length") => StopReason::Length,
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
