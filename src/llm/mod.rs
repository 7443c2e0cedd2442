//! Language-model providers behind one trait.
//!
//! The agent loop only ever sees [`Provider::complete`]: a system prompt, a conversation of
//! user/assistant turns whose content is text, and the JSON schema of the reply shape. Each
//! provider translates that into its API's own conversation format, asks for a streamed reply
//! (so a long reply never runs into a timeout while tokens flow), enforces the schema where the
//! API supports structured output, passes the cache hints its API takes, and reports token
//! usage, cached tokens included, from the API's own fields.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

pub mod anthropic;
pub mod gemini;
mod http;
pub mod ollama;
pub mod openai;
pub(crate) mod pricing;
pub(crate) mod replay;
pub(crate) mod reply_form;
pub mod retry;
pub(crate) mod schema;
pub(crate) mod server_facts;
mod stream;
pub(crate) mod tokens;
pub(crate) mod window;

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

/// The path of the run's main agent; a sub-agent's path adds its name (`root>explorer`).
pub const ROOT_AGENT: &str = "root";
/// Separates the levels of an agent path.
pub const AGENT_PATH_SEPARATOR: char = '>';

/// One call to the model.
#[derive(Clone, Copy)]
pub struct CompletionRequest<'a> {
    pub system: &'a str,
    /// Alternating user/assistant turns, starting and ending with a user turn.
    pub messages: &'a [Message],
    /// JSON schema of the `{plan, tool_calls}` reply, one branch per enabled tool.
    pub reply_schema: &'a serde_json::Value,
    /// Where the request's prefix is stable, for the APIs whose prompt cache takes hints.
    pub cache: CacheHints<'a>,
    /// Told the bytes of reply text received so far, as the reply streams in (for progress).
    pub progress: Option<&'a (dyn Fn(u64) + Send + Sync)>,
    /// Which agent asks, as its path (`root>explorer`; see [`ROOT_AGENT`]). The replay provider
    /// serves each agent its own scripted replies by the path.
    pub agent: Option<&'a str>,
    /// The most tokens the reply may take: the room the context fitting left for it. Sent with
    /// every request (unless `--max-reply-tokens` says otherwise), so a rambling reply cannot
    /// generate until the server's context is full.
    pub max_reply_tokens: Option<u64>,
}

impl CompletionRequest<'_> {
    /// The reply cap to send: the operator's `--max-reply-tokens`, else the request's own.
    pub fn reply_cap(&self, operator: Option<u64>) -> Option<u64> {
        operator.or(self.max_reply_tokens)
    }
}

impl std::fmt::Debug for CompletionRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionRequest")
            .field("system_bytes", &self.system.len())
            .field("messages", &self.messages.len())
            .field("cache", &self.cache)
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl<'a> CompletionRequest<'a> {
    /// A request with no cache hints and no progress callback.
    pub fn new(system: &'a str, messages: &'a [Message], reply_schema: &'a serde_json::Value) -> Self {
        Self {
            system,
            messages,
            reply_schema,
            cache: CacheHints::default(),
            progress: None,
            agent: None,
            max_reply_tokens: None,
        }
    }
}

/// What the history policy knows about the request's stable prefix (see `agent::history`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheHints<'a> {
    /// OpenAI's `prompt_cache_key`: requests with the same key are routed to the same cache.
    pub key: Option<&'a str>,
    /// Indexes into `messages` after which the conversation is worth caching, oldest first.
    /// Anthropic puts a `cache_control` breakpoint on each (plus one on the system prompt).
    pub breakpoints: &'a [usize],
}

/// Tokens counted by the API for one call, the same way for every API: `input_tokens` is every
/// input token the call processed, of which `cached_input_tokens` were read from the provider's
/// prompt cache and `cache_write_tokens` were written to it (each API reports these
/// differently; the providers normalise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Input and output tokens (cached ones included). Counts come from the provider, so every
    /// sum saturates rather than wrapping.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Input tokens billed at the full input rate: neither read from nor written to a cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_sub(self.cached_input_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self.cached_input_tokens.saturating_add(other.cached_input_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(other.cache_write_tokens);
    }
}

/// Whether the API said what a call used. Some servers (many OpenAI-compatible ones, Ollama
/// for a cached prompt) leave the counts out; the agent then estimates them, so that budgets
/// still bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageReport {
    /// Both the input and the output count came from the API.
    Reported,
    /// At least one of them is missing; the missing ones are zero in [`Completion::usage`].
    Missing,
}

impl UsageReport {
    /// `Reported` when both counts are present.
    pub(crate) fn of(input: Option<u64>, output: Option<u64>) -> Self {
        match (input, output) {
            (Some(_), Some(_)) => UsageReport::Reported,
            _ => UsageReport::Missing,
        }
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
    pub usage_report: UsageReport,
    pub stop: StopReason,
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The API answered with an error status (or reported one inside a stream). `message` is
    /// the API's own error text; `url` is the address asked, without credentials or query.
    #[error("{provider}: HTTP {status} from {url}: {message}")]
    Http {
        provider: &'static str,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
        url: String,
    },
    /// The API said the request does not fit the model's context window. Not retried as is:
    /// the agent masks harder and asks once more.
    #[error("{provider}: the request does not fit the model's context window: {message}")]
    ContextLength { provider: &'static str, message: String },
    /// The request never got a (whole) answer: connection refused, reset, timed out, or a stream
    /// that ended before its last event.
    #[error("{provider}: {message}")]
    Transport {
        provider: &'static str,
        message: String,
        timed_out: bool,
    },
    /// The reply broke one of the limits every stream is held to (its size, its longest line,
    /// its total time). Not retried: asking again gets the same.
    #[error("{provider}: {message}")]
    StreamLimit { provider: &'static str, message: String },
    /// The API answered 2xx with a body we cannot read.
    #[error("{provider}: malformed response: {message}")]
    MalformedResponse { provider: &'static str, message: String },
    /// The replay script has no more replies (for the agent that asked).
    #[error(
        "replay script exhausted: all {served} scripted replies{for_agent} were used and the model was asked again"
    )]
    ReplayExhausted { served: usize, for_agent: String },
    /// A configuration problem found only when the provider was used.
    #[error("{provider}: {message}")]
    Config { provider: &'static str, message: String },
}

impl ProviderError {
    /// Whether trying the same request again may succeed: rate limits, overload, server errors
    /// and timeouts. Never auth, validation, context-length or spend-limit errors.
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
    /// The context window the server says it runs the model with, where it says one (see
    /// [`server_facts`]). Asked of the server at most once per run; `None` for APIs that
    /// publish none or are never asked (OpenAI's own, Anthropic, Gemini).
    async fn server_window(&self) -> Option<server_facts::ServerWindow> {
        None
    }
    /// Tokens the server's own tokenizer counts in `text`, where it offers one; `None`
    /// otherwise, and on any failure.
    async fn count_tokens(&self, _text: &str) -> Option<u64> {
        None
    }
}

/// Builds the provider a run asks for, wrapped in retries (replay is never retried: a script
/// has no transient failures).
pub fn build(settings: &crate::settings::ProviderSettings) -> Result<Box<dyn Provider>, crate::settings::ConfigError> {
    use crate::kinds::ProviderKind;
    let provider: Box<dyn Provider> = match settings.kind {
        ProviderKind::Replay => {
            let path = settings
                .replay
                .as_deref()
                .ok_or_else(|| crate::settings::ConfigError::key("--replay", "missing"))?;
            return Ok(Box::new(replay::Replay::from_file(path)?));
        }
        ProviderKind::Openai => Box::new(openai::OpenAi::new(settings)?),
        ProviderKind::Anthropic => Box::new(anthropic::Anthropic::new(settings)?),
        ProviderKind::Gemini => Box::new(gemini::Gemini::new(settings)?),
        ProviderKind::Ollama => Box::new(ollama::Ollama::new(settings)?),
    };
    Ok(Box::new(retry::Retrying::new(provider, retry::RetryPolicy::default())))
}
