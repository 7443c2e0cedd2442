//! Transient failures: how a provider's HTTP exchange turns into a [`ProviderError`], and
//! [`Retrying`], which tries again when that error says it may pass.
//!
//! Every HTTP provider builds its client with `http_client` (per-request timeout from the
//! settings) and sends through `post_json`, so they all classify failures the same way: an
//! error status becomes [`ProviderError::Http`] carrying the API's own message (read from its
//! error body) and the server's `Retry-After`; no answer at all becomes
//! [`ProviderError::Transport`]; a 2xx that is not JSON becomes
//! [`ProviderError::MalformedResponse`]. [`Retrying`] then decides with
//! [`ProviderError::is_retryable`]: rate limits, overload, server errors and timeouts are tried
//! again with exponential backoff and full jitter; auth, validation and spend-limit errors are
//! not, because repeating them only burns time.
//!
//! The API key never reaches an error or a log line: it only travels in a header marked
//! sensitive, transport errors keep only the host and port of the URL, and error bodies that
//! echo the key have it replaced before they become messages.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::{Completion, CompletionRequest, Provider, ProviderError};

/// How often and how patiently to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Calls in total, the first one included.
    pub max_attempts: u32,
    /// The backoff ceiling of the first retry; it doubles with each further retry.
    pub base_delay: Duration,
    /// No wait is longer than this, not even one the server asks for with `Retry-After`.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1 for the first retry). The server's
    /// `Retry-After` wins when present; otherwise "full jitter": a uniformly random wait up to
    /// the exponential ceiling, so clients that failed together do not retry together.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(asked) = retry_after {
            return asked.min(self.max_delay);
        }
        let factor = 1u32.checked_shl(retry.saturating_sub(1)).unwrap_or(u32::MAX);
        let ceiling = self.base_delay.saturating_mul(factor).min(self.max_delay);
        Duration::try_from_secs_f64(ceiling.as_secs_f64() * fastrand::f64()).unwrap_or(ceiling)
    }
}

/// A provider that retries another one's transient failures.
pub struct Retrying {
    inner: Box<dyn Provider>,
    policy: RetryPolicy,
}

impl Retrying {
    pub fn new(inner: Box<dyn Provider>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

#[async_trait]
impl Provider for Retrying {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ProviderError> {
        let max_attempts = self.policy.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let error = match self.inner.complete(request).await {
                Ok(completion) => return Ok(completion),
                Err(error) => error,
            };
            if !error.is_retryable() {
                return Err(error);
            }
            if attempt >= max_attempts {
                return Err(gave_up(error, attempt));
            }
            let delay = self.policy.delay(attempt, error.retry_after());
            let status = match &error {
                ProviderError::Http { status, .. } => Some(*status),
                _ => None,
            };
            tracing::warn!(
                provider = self.inner.name(),
                status,
                attempt,
                max_attempts,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error = %error,
                "model call failed; retrying"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }
}

/// The last error, saying how many attempts were made so the user knows retrying happened.
fn gave_up(error: ProviderError, attempts: u32) -> ProviderError {
    if attempts <= 1 {
        return error;
    }
    let note = format!(" (gave up after {attempts} attempts)");
    match error {
        ProviderError::Http {
            provider,
            status,
            message,
            retry_after,
        } => ProviderError::Http {
            provider,
            status,
            message: message + &note,
            retry_after,
        },
        ProviderError::Transport {
            provider,
            message,
            timed_out,
        } => ProviderError::Transport {
            provider,
            message: message + &note,
            timed_out,
        },
        other => other,
    }
}

/// The most of a response body read into memory. Replies are a few kilobytes; this only stops
/// a misbehaving server from exhausting memory.
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The most of an error message kept; some servers answer errors with whole HTML pages.
const MAX_MESSAGE_CHARS: usize = 1000;

/// Builds the HTTP client a provider uses for all its calls.
pub(super) fn http_client(
    provider: &'static str,
    timeout: Duration,
) -> Result<reqwest::Client, crate::config::ConfigError> {
    reqwest::Client::builder()
        .user_agent(concat!("upkeep/", env!("CARGO_PKG_VERSION")))
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(30)))
        .build()
        .map_err(|error| crate::config::ConfigError(format!("{provider}: cannot build the HTTP client: {error}")))
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

/// Sends a prepared request and returns the JSON body of a 2xx answer. `secret` is removed
/// from any error message the server sends back.
pub(super) async fn post_json(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    secret: Option<&SecretString>,
) -> Result<Value, ProviderError> {
    let mut response = request.send().await.map_err(|error| transport(provider, error))?;
    let status = response.status();
    let retry_after = retry_after(response.headers());
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|error| transport(provider, error))? {
        let room = MAX_BODY_BYTES.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_BODY_BYTES {
            break;
        }
    }
    if !status.is_success() {
        let message =
            error_message(&body).unwrap_or_else(|| status.canonical_reason().unwrap_or("no error message").to_owned());
        return Err(ProviderError::Http {
            provider,
            status: status.as_u16(),
            message: redact(message, secret),
            retry_after,
        });
    }
    serde_json::from_slice(&body).map_err(|error| ProviderError::MalformedResponse {
        provider,
        message: format!("the body of the HTTP {} answer is not JSON: {error}", status.as_u16()),
    })
}

/// A request that got no answer. Only the host and port of the URL are kept (the URL may carry
/// credentials a user put in `--base-url`); the cause chain is kept because "connection
/// refused" is the useful part.
fn transport(provider: &'static str, error: reqwest::Error) -> ProviderError {
    let timed_out = error.is_timeout();
    let target = error.url().and_then(|url| {
        let host = url.host_str()?;
        Some(match url.port_or_known_default() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        })
    });
    let error = error.without_url();
    let chain = crate::text::error_chain(&error);
    let mut message = match target {
        Some(target) => format!("request to {target} failed: {chain}"),
        None => chain,
    };
    if timed_out && !message.contains("timed out") {
        message.push_str(" (timed out)");
    }
    ProviderError::Transport {
        provider,
        message,
        timed_out,
    }
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
fn error_message(body: &[u8]) -> Option<String> {
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

fn json_error_message(value: &Value) -> Option<String> {
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

fn redact(message: String, secret: Option<&SecretString>) -> String {
    match secret.map(ExposeSecret::expose_secret) {
        Some(key) if !key.is_empty() && message.contains(key) => message.replace(key, "[redacted]"),
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, "7".parse().expect("header"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        let soon = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        headers.insert(RETRY_AFTER, soon.parse().expect("header"));
        let delay = retry_after(&headers).expect("date parsed");
        assert!(
            delay <= Duration::from_secs(30) && delay >= Duration::from_secs(28),
            "{delay:?}"
        );
        headers.insert(RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("header"));
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
        headers.insert(RETRY_AFTER, "-5".parse().expect("header"));
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after-ms", "1500".parse().expect("header"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn backoff_is_capped_and_honours_retry_after() {
        let policy = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(5),
        };
        for retry in 1..40 {
            assert!(policy.delay(retry, None) <= Duration::from_secs(5));
        }
        assert!(policy.delay(1, None) <= Duration::from_secs(1));
        assert_eq!(policy.delay(1, Some(Duration::from_secs(2))), Duration::from_secs(2));
        assert_eq!(policy.delay(1, Some(Duration::from_secs(3600))), Duration::from_secs(5));
    }

    #[test]
    fn error_messages_come_from_each_api_shape() {
        let openai = br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert_eq!(
            error_message(openai).as_deref(),
            Some("You exceeded your current quota (insufficient_quota)")
        );
        let anthropic = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            error_message(anthropic).as_deref(),
            Some("Overloaded (overloaded_error)")
        );
        let gemini = br#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(
            error_message(gemini).as_deref(),
            Some("API key not valid. (INVALID_ARGUMENT)")
        );
        assert_eq!(
            error_message(br#"{"error":"model not found"}"#).as_deref(),
            Some("model not found")
        );
        assert_eq!(error_message(b"  Bad Gateway \n").as_deref(), Some("Bad Gateway"));
        assert_eq!(error_message(b""), None);
    }

    #[test]
    fn keys_echoed_by_the_server_are_redacted() {
        let key = SecretString::from("sk-secret-123");
        let message = redact("Incorrect API key provided: sk-secret-123".into(), Some(&key));
        assert_eq!(message, "Incorrect API key provided: [redacted]");
    }
}
