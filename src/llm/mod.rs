//! Language-model providers behind one trait.
//!
//! The agent loop only ever sees [`Provider::complete`]: a system prompt, a conversation of
//! user/assistant turns whose content is text, and the JSON schema of the reply shape. Each
//! provider translates that into its API's own conversation format, enforces the schema where
//! the API supports structured output, and reports token usage from the API's own fields.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

pub mod anthropic;
pub mod gemini;
pub mod ollama;
pub mod openai;
pub mod pricing;
pub mod replay;
pub mod retry;
pub mod schema;

/// Who said a message in the conversation. The system prompt travels separately because every
/// API puts it somewhere different.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// One call to the model.
#[derive(Debug, Clone, Copy)]
pub struct CompletionRequest<'a> {
    pub system: &'a str,
    /// Alternating user/assistant turns, starting and ending with a user turn.
    pub messages: &'a [Message],
    /// JSON schema of the `{plan, tool_calls}` reply, one branch per enabled tool.
    pub reply_schema: &'a serde_json::Value,
}

/// Tokens counted by the API for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// Why the model stopped producing text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The reply is complete.
    Complete,
    /// The reply hit the output length limit and is probably cut off.
    Length,
    /// The model refused; the text says why when the API gives a reason.
    Refusal(String),
}

/// One reply from the model.
#[derive(Debug, Clone)]
pub struct Completion {
    pub content: String,
    pub usage: Usage,
    pub stop: StopReason,
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The API answered with an error status. `message` is the API's own error text.
    #[error("{provider}: HTTP {status}: {message}")]
    Http {
        provider: &'static str,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The request never got an answer (connection refused, reset, timed out).
    #[error("{provider}: {message}")]
    Transport {
        provider: &'static str,
        message: String,
        timed_out: bool,
    },
    /// The API answered 2xx with a body we cannot read.
    #[error("{provider}: malformed response: {message}")]
    MalformedResponse { provider: &'static str, message: String },
    /// The replay script has no more replies.
    #[error("replay script exhausted: all {served} scripted replies were used and the model was asked again")]
    ReplayExhausted { served: usize },
    /// A configuration problem found only when the provider was used.
    #[error("{provider}: {message}")]
    Config { provider: &'static str, message: String },
}

impl ProviderError {
    /// Whether trying the same request again may succeed: rate limits, overload, server errors
    /// and timeouts. Never auth, validation or spend-limit errors.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, message, .. } => {
                let spend_limit = message.contains("insufficient_quota")
                    || message.contains("credit balance")
                    || message.contains("billing");
                !spend_limit && (*status == 429 || *status == 408 || *status >= 500)
            }
            ProviderError::Transport { .. } => true,
            _ => false,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name as given to `--provider`.
    fn name(&self) -> &'static str;
    /// The model the provider asks.
    fn model(&self) -> &str;
    /// Ask the model for one reply.
    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ProviderError>;
}

/// Builds the provider a run asks for, wrapped in retries (replay is never retried: a script
/// has no transient failures).
pub fn build(settings: &crate::config::ProviderSettings) -> Result<Box<dyn Provider>, crate::config::ConfigError> {
    use crate::cli::ProviderKind;
    let provider: Box<dyn Provider> = match settings.kind {
        ProviderKind::Replay => {
            let path = settings
                .replay
                .as_deref()
                .ok_or_else(|| crate::config::ConfigError::key("--replay", "missing"))?;
            return Ok(Box::new(replay::Replay::from_file(path)?));
        }
        ProviderKind::Openai => Box::new(openai::OpenAi::new(settings)?),
        ProviderKind::Anthropic => Box::new(anthropic::Anthropic::new(settings)?),
        ProviderKind::Gemini => Box::new(gemini::Gemini::new(settings)?),
        ProviderKind::Ollama => Box::new(ollama::Ollama::new(settings)?),
    };
    Ok(Box::new(retry::Retrying::new(provider, retry::RetryPolicy::default())))
}
