//! How a provider's HTTP exchange starts and how its failures become [`ProviderError`]s.
//!
//! Every HTTP provider builds its client with [`http_client`] and opens its streamed reply with
//! [`Endpoint::open`], so they all classify failures alike: an error status becomes
//! [`ProviderError::Http`] carrying the API's own message (read from its error body), the
//! server's `Retry-After` and the URL that was asked; a context-length complaint, in any of the
//! four APIs' own words, becomes [`ProviderError::ContextLength`]; no answer at all becomes
//! [`ProviderError::Transport`].
//!
//! The wait for the response head is bounded by the idle timeout from `--request-timeout`; the
//! body's limits (progress, total time, size) are [`super::stream`]'s.
//!
//! The API key never reaches an error or a log line: it only travels in a header marked
//! sensitive, URLs in errors lose any user-info and query, and error bodies that echo the key
//! have it replaced before they become messages.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::ProviderError;

/// The most of an error body read into memory; error bodies are small, some proxies answer with
/// whole HTML pages.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The most of an error message kept.
const MAX_MESSAGE_CHARS: usize = 1000;

/// Builds the HTTP client a provider uses for all its calls. Only connecting has a fixed
/// timeout; waits for data are bounded per wait by the caller (see the module comment).
pub(super) fn http_client(
    provider: &'static str,
    idle_timeout: Duration,
) -> Result<reqwest::Client, crate::settings::ConfigError> {
    reqwest::Client::builder()
        .user_agent(concat!("upkeep/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(idle_timeout.min(Duration::from_secs(30)))
        .build()
        .map_err(|error| crate::settings::ConfigError(format!("{provider}: cannot build the HTTP client: {error}")))
}

/// A header value carrying a secret, marked sensitive so that it is never printed by `Debug`.
pub(super) fn secret_header(
    provider: &'static str,
    prefix: &str,
    secret: &SecretString,
) -> Result<reqwest::header::HeaderValue, ProviderError> {
    let mut value = reqwest::header::HeaderValue::from_str(&format!("{prefix}{}", secret.expose_secret()))
        // Deliberately not the header error: it could describe the key's bytes.
        .map_err(|_| ProviderError::Config {
            provider,
            message: "the API key contains characters not allowed in an HTTP header".into(),
        })?;
    value.set_sensitive(true);
    Ok(value)
}

/// One API endpoint of one provider: where requests go and what may never be shown.
pub(super) struct Endpoint {
    pub provider: &'static str,
    pub client: reqwest::Client,
    pub url: String,
    /// The URL as errors show it: no user-info, no query.
    pub shown_url: String,
    pub api_key: Option<SecretString>,
    /// The key as a secret to redact, should a server echo it (the run-wide redaction, one
    /// implementation and one marker).
    redactor: crate::secrets::Redactor,
    pub idle_timeout: Duration,
}

impl Endpoint {
    pub(super) fn new(
        provider: &'static str,
        url: String,
        api_key: Option<SecretString>,
        idle_timeout: Duration,
    ) -> Result<Self, crate::settings::ConfigError> {
        let mut redactor = crate::secrets::Redactor::default();
        if let Some(key) = &api_key {
            redactor.add(key.clone());
        }
        Ok(Self {
            provider,
            client: http_client(provider, idle_timeout)?,
            shown_url: shown_url(&url),
            url,
            api_key,
            redactor,
            idle_timeout,
        })
    }

    /// Sends `body` (with the provider's headers added by `headers`) and returns the response
    /// once its status is a success; any other status becomes the matching error.
    pub(super) async fn open(
        &self,
        body: &Value,
        headers: impl FnOnce(reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, ProviderError>,
    ) -> Result<reqwest::Response, ProviderError> {
        let request = headers(self.client.post(&self.url).json(body))?;
        let response = match tokio::time::timeout(self.idle_timeout, request.send()).await {
            Ok(result) => result.map_err(|error| self.transport(error))?,
            Err(_) => return Err(self.idle_timeout_error("an answer")),
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let body = self.read_error_body(response).await;
        let message =
            error_message(&body).unwrap_or_else(|| status.canonical_reason().unwrap_or("no error message").to_owned());
        Err(self.http_error(status.as_u16(), message, retry_after))
    }

    /// An error the API reported, as an HTTP status (an error event inside a stream carries the
    /// status its kind stands for). Context-length complaints get their own variant.
    pub(super) fn http_error(&self, status: u16, message: String, retry_after: Option<Duration>) -> ProviderError {
        let message = self.redact(message);
        if is_context_length(status, &message) {
            return ProviderError::ContextLength {
                provider: self.provider,
                message,
            };
        }
        ProviderError::Http {
            provider: self.provider,
            status,
            message,
            retry_after,
            url: self.shown_url.clone(),
        }
    }

    /// No data for the whole idle timeout.
    pub(super) fn idle_timeout_error(&self, waiting_for: &str) -> ProviderError {
        ProviderError::Transport {
            provider: self.provider,
            message: format!(
                "request to {} timed out: no {waiting_for} for {} (--request-timeout)",
                self.shown_url,
                humantime::format_duration(self.idle_timeout)
            ),
            timed_out: true,
        }
    }

    /// A reply that streamed past its time limit (see [`super::stream`]).
    pub(super) fn stream_time_error(&self) -> ProviderError {
        let limit = self.idle_timeout.saturating_mul(super::stream::STREAM_TIME_FACTOR);
        ProviderError::StreamLimit {
            provider: self.provider,
            message: format!(
                "the reply from {} was still streaming after {}, the limit for one reply ({} times --request-timeout)",
                self.shown_url,
                humantime::format_duration(limit),
                super::stream::STREAM_TIME_FACTOR
            ),
        }
    }

    /// A request that got no (whole) answer. The cause chain is kept because "connection
    /// refused" is the useful part; reqwest's own copy of the URL is dropped for ours.
    pub(super) fn transport(&self, error: reqwest::Error) -> ProviderError {
        let timed_out = error.is_timeout();
        let chain = crate::text::error_chain(&error.without_url());
        let mut message = format!("request to {} failed: {}", self.shown_url, self.redact(chain));
        if timed_out && !message.contains("timed out") {
            message.push_str(" (timed out)");
        }
        ProviderError::Transport {
            provider: self.provider,
            message,
            timed_out,
        }
    }

    /// Reads what an error body says, within one idle timeout in all: a server that trickles
    /// its error a byte at a time cannot hold the call open (each byte would otherwise restart
    /// the wait).
    async fn read_error_body(&self, mut response: reqwest::Response) -> Vec<u8> {
        let mut body = Vec::new();
        let deadline = super::stream::deadline_after(self.idle_timeout);
        while body.len() < MAX_ERROR_BODY_BYTES {
            match tokio::time::timeout_at(deadline, response.chunk()).await {
                Ok(Ok(Some(chunk))) => {
                    body.extend_from_slice(&chunk[..chunk.len().min(MAX_ERROR_BODY_BYTES - body.len())])
                }
                // What arrived is enough to report; a body that stalls or breaks is not the error.
                _ => break,
            }
        }
        body
    }

    /// `text` with the API key replaced, should a server echo it.
    pub(super) fn redact(&self, text: String) -> String {
        self.redactor.redact(&text)
    }
}

/// A URL as an error may show it: scheme, host, port and path; never user-info or a query.
pub(super) fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => "(unparseable URL)".to_owned(),
    }
}

/// Whether an API error says the request is longer than the model's context window. Each API
/// words it its own way: OpenAI's `context_length_exceeded` code ("maximum context length",
/// also from vLLM and other compatible servers), Anthropic's `prompt is too long` (and
/// `exceed context limit` when `max_tokens` tips it over), Gemini's INVALID_ARGUMENT "input
/// token count ... exceeds the maximum number of tokens allowed", Ollama's "the input length
/// exceeds the context length", llama.cpp's "exceeds the available context size".
pub(super) fn is_context_length(status: u16, message: &str) -> bool {
    if !(status == 400 || status == 413 || status == 422) {
        return false;
    }
    let message = message.to_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "prompt is too long",
        "exceed context limit",
        "exceeds the maximum number of tokens",
        "exceeds the context length",
        "context window",
        // llama.cpp's server: "request (8317 tokens) exceeds the available context size (8192
        // tokens)", type `exceed_context_size_error`.
        "exceeds the available context size",
        "exceed_context_size_error",
    ]
    .iter()
    .any(|marker| message.contains(marker))
}

/// Reads `Retry-After` (seconds or an HTTP date), or OpenAI's `retry-after-ms`.
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|value: &reqwest::header::HeaderValue| value.to_str().ok())
            .map(str::trim)
    };
    if let Some(millis) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if let Ok(delay) = Duration::try_from_secs_f64(millis / 1000.0) {
            return Some(delay);
        }
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = httpdate::parse_http_date(value).ok()?;
    // A date in the past means "now".
    Some(date.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// The API's own words from an error body. Covers the shapes of all supported APIs:
/// `{"error": {"message", "code" | "type" | "status"}}` (OpenAI, Anthropic, Gemini),
/// `{"error": "text"}` (Ollama), `{"detail": ...}` and `{"message": ...}` (other
/// OpenAI-compatible servers), and plain text.
pub(super) fn error_message(body: &[u8]) -> Option<String> {
    let message = match serde_json::from_slice::<Value>(body) {
        Ok(value) => json_error_message(&value),
        Err(_) => None,
    };
    let message = message.or_else(|| {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    })?;
    Some(crate::text::marked(
        crate::text::prefix_chars(&message, MAX_MESSAGE_CHARS),
        "…",
    ))
}

pub(super) fn json_error_message(value: &Value) -> Option<String> {
    let error = value.get("error");
    if let Some(text) = error.and_then(Value::as_str) {
        return Some(text.to_owned());
    }
    if let Some(text) = error.and_then(|e| e.get("message")).and_then(Value::as_str) {
        // The machine-readable kind ("insufficient_quota", "overloaded_error") is what tells a
        // spend limit from a rate limit, so it stays in the message.
        let kind = ["code", "type", "status"]
            .iter()
            .find_map(|key| error.and_then(|e| e.get(*key)).and_then(Value::as_str))
            .filter(|kind| !kind.is_empty() && !text.contains(kind));
        return Some(match kind {
            Some(kind) => format!("{text} ({kind})"),
            None => text.to_owned(),
        });
    }
    for key in ["detail", "message"] {
        match value.get(key) {
            Some(Value::String(text)) => return Some(text.clone()),
            Some(Value::Null) | None => {}
            Some(other) => return Some(other.to_string()),
        }
    }
    None
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
