//! Transient failures: [`Retrying`] tries a call again when its error says it may pass.
//!
//! The providers classify failures alike (see `llm::http`); [`Retrying`] decides with
//! [`ProviderError::is_retryable`]: rate limits, overload, server errors, timeouts and streams
//! cut before their last event are tried again with exponential backoff and full jitter (the
//! whole request: a half-received reply is discarded, never stitched); auth, validation,
//! context-length and spend-limit errors are not, because repeating them only burns time.

use std::time::Duration;

use async_trait::async_trait;

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

    async fn server_window(&self) -> Option<super::server_facts::ServerWindow> {
        self.inner.server_window().await
    }

    async fn count_tokens(&self, text: &str) -> Option<u64> {
        self.inner.count_tokens(text).await
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
            url,
        } => ProviderError::Http {
            provider,
            status,
            message: message + &note,
            retry_after,
            url,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
