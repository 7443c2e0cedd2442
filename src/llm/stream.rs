//! Reading a streamed reply: server-sent events (OpenAI, Anthropic, Gemini) or Ollama's
//! newline-delimited JSON, cut into events by [`frames`].
//!
//! Guarantees, the same for all four APIs:
//! - **Progress, not events, keeps a reply alive.** The idle timeout (`--request-timeout`)
//!   runs from the response head and restarts only when reply text arrives; keep-alive comments,
//!   empty events, pings and events without text do not restart it, so a server cannot hold a
//!   call open by sending them forever.
//! - **A whole reply has a time limit**: [`STREAM_TIME_FACTOR`] times the idle timeout, however
//!   steadily it trickles.
//! - **Raw bytes are capped before parsing** at [`MAX_REPLY_BYTES`], and no line is held beyond
//!   [`frames::MAX_LINE_BYTES`], so a stream that never ends an event or a line costs bounded
//!   memory and (see [`frames`]) linear work.
//! - A stream that ends before the API's last event is a retryable [`ProviderError::Transport`]
//!   (the retry asks again from scratch, a half reply is never used); a stream over a limit is
//!   [`ProviderError::StreamLimit`], not retried, since asking again gets the same; dropping the
//!   future (an interrupt) closes the connection at once. A server that ignores `stream: true`
//!   and answers with one JSON body is read whole, under the same limits.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::http::Endpoint;
use super::{Completion, ProviderError};

mod frames;

pub(super) use frames::Framing;

/// The most of a reply's raw bytes read. Replies are kilobytes; this only stops a misbehaving
/// server from exhausting memory.
const MAX_REPLY_BYTES: usize = 32 * 1024 * 1024;

/// A reply's whole stream may last this many idle timeouts (30 minutes at the default
/// `--request-timeout` of 300 s): far more than the longest real reply takes, and a bound on
/// a server that trickles text forever.
pub(crate) const STREAM_TIME_FACTOR: u32 = 6;

/// What the last event meant for the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Keep reading; the event added this many bytes of reply text.
    More(usize),
    /// The API's final event: the reply is complete.
    Done,
}

/// A provider's reading of its own events into a [`Completion`].
pub(super) trait Accumulator {
    /// One event: its SSE event name (empty when it has none, and for JSON lines) and data.
    fn event(&mut self, endpoint: &Endpoint, name: &str, data: &str) -> Result<Step, ProviderError>;
    /// The whole reply as one JSON body, from a server that does not stream.
    fn whole(&mut self, endpoint: &Endpoint, body: Value) -> Result<(), ProviderError>;
    /// The reply once the stream has ended. `done` says whether the API's final event came.
    fn finish(self, endpoint: &Endpoint, done: bool) -> Result<Completion, ProviderError>;
}

/// Sends `body` to `endpoint` (with the provider's `headers`) and reads the streamed reply to
/// the end through `accumulator`.
pub(super) async fn exchange<A: Accumulator>(
    endpoint: &Endpoint,
    body: &Value,
    headers: impl FnOnce(reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, ProviderError>,
    framing: Framing,
    progress: Option<&(dyn Fn(u64) + Send + Sync)>,
    accumulator: A,
) -> Result<Completion, ProviderError> {
    let response = endpoint.open(body, headers).await?;
    read(endpoint, response, framing, progress, accumulator).await
}

/// The clocks of one reply: the idle deadline moves with progress, the total one never does.
struct Clock {
    idle: Duration,
    idle_deadline: Instant,
    total_deadline: Instant,
}

/// `duration` from now; a duration too long for the clock (a huge `--request-timeout`) means
/// "in thirty years" rather than a panic.
pub(super) fn deadline_after(duration: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(duration)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 24 * 3600))
}

impl Clock {
    fn start(endpoint: &Endpoint) -> Self {
        Self::new(endpoint.idle_timeout)
    }

    fn new(idle: Duration) -> Self {
        Self {
            idle,
            idle_deadline: deadline_after(idle),
            total_deadline: deadline_after(idle.saturating_mul(STREAM_TIME_FACTOR)),
        }
    }

    /// Reply text arrived.
    fn progress(&mut self) {
        self.idle_deadline = deadline_after(self.idle);
    }

    /// Waits for `next` until the nearer deadline; past it, the matching error.
    async fn wait<T>(
        &self,
        endpoint: &Endpoint,
        next: impl std::future::Future<Output = T>,
    ) -> Result<T, ProviderError> {
        let deadline = self.idle_deadline.min(self.total_deadline);
        match tokio::time::timeout_at(deadline, next).await {
            Ok(value) => Ok(value),
            Err(_) if deadline == self.total_deadline => Err(endpoint.stream_time_error()),
            Err(_) => Err(endpoint.idle_timeout_error("reply text from the model")),
        }
    }
}

/// Reads `response` to the end through `accumulator`, telling `progress` the reply text's
/// size as it grows.
async fn read<A: Accumulator>(
    endpoint: &Endpoint,
    mut response: reqwest::Response,
    framing: Framing,
    progress: Option<&(dyn Fn(u64) + Send + Sync)>,
    mut accumulator: A,
) -> Result<Completion, ProviderError> {
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let mut clock = Clock::start(endpoint);
    if content_type.starts_with("application/json") {
        let body = read_whole(endpoint, &mut clock, response).await?;
        let value = serde_json::from_slice(&body).map_err(|error| ProviderError::MalformedResponse {
            provider: endpoint.provider,
            message: format!("the body of the answer is not JSON: {error}"),
        })?;
        accumulator.whole(endpoint, value)?;
        return accumulator.finish(endpoint, true);
    }
    let mut framer = frames::Framer::new(framing);
    let mut received: usize = 0;
    let mut text: u64 = 0;
    let done = loop {
        let chunk = clock
            .wait(endpoint, response.chunk())
            .await?
            .map_err(|error| endpoint.transport(error))?;
        let frames = match chunk {
            Some(chunk) => {
                received = received.saturating_add(chunk.len());
                if received > MAX_REPLY_BYTES {
                    return Err(too_large(endpoint));
                }
                framer.push(&chunk).map_err(|error| ProviderError::StreamLimit {
                    provider: endpoint.provider,
                    message: error.to_string(),
                })?
            }
            None => {
                let last: Vec<_> = framer.finish().into_iter().collect();
                match feed(endpoint, last, &mut accumulator, &mut text, progress)? {
                    Fed::Done => break true,
                    // A 200 whose stream holds nothing at all is how some servers (llama.cpp's
                    // Python server) answer a request that overflows the context: taken as an
                    // overflow, it is masked harder and asked once more, not retried as is.
                    Fed::More { .. } if received == 0 => return Err(empty_stream(endpoint)),
                    Fed::More { .. } => break false,
                }
            }
        };
        match feed(endpoint, frames, &mut accumulator, &mut text, progress)? {
            Fed::Done => break true,
            Fed::More { progressed: false } => {}
            Fed::More { progressed: true } => clock.progress(),
        }
    };
    accumulator.finish(endpoint, done)
}

/// What a batch of events came to.
enum Fed {
    Done,
    More { progressed: bool },
}

/// Hands `frames` to the accumulator, adding the reply text they carry to `text` and telling
/// `progress` after each event that added some.
fn feed<A: Accumulator>(
    endpoint: &Endpoint,
    frames: Vec<frames::Frame>,
    accumulator: &mut A,
    text: &mut u64,
    progress: Option<&(dyn Fn(u64) + Send + Sync)>,
) -> Result<Fed, ProviderError> {
    let mut progressed = false;
    for frame in frames {
        if frame.data.trim().is_empty() {
            continue;
        }
        match accumulator.event(endpoint, &frame.name, &frame.data)? {
            Step::Done => return Ok(Fed::Done),
            Step::More(0) => {}
            Step::More(added) => {
                *text = text.saturating_add(added as u64);
                progressed = true;
                if let Some(progress) = progress {
                    progress(*text);
                }
            }
        }
    }
    Ok(Fed::More { progressed })
}

/// A body that is the whole reply: every byte is reply, so every byte is progress.
async fn read_whole(
    endpoint: &Endpoint,
    clock: &mut Clock,
    mut response: reqwest::Response,
) -> Result<Vec<u8>, ProviderError> {
    let mut body = Vec::new();
    loop {
        let chunk = clock
            .wait(endpoint, response.chunk())
            .await?
            .map_err(|error| endpoint.transport(error))?;
        let Some(chunk) = chunk else {
            return Ok(body);
        };
        if body.len() + chunk.len() > MAX_REPLY_BYTES {
            return Err(too_large(endpoint));
        }
        body.extend_from_slice(&chunk);
        clock.progress();
    }
}

fn too_large(endpoint: &Endpoint) -> ProviderError {
    ProviderError::StreamLimit {
        provider: endpoint.provider,
        message: format!("the reply is larger than {} MiB", MAX_REPLY_BYTES / (1024 * 1024)),
    }
}

/// A 200 with an empty stream: most likely the request overflowed the server's context.
fn empty_stream(endpoint: &Endpoint) -> ProviderError {
    ProviderError::ContextLength {
        provider: endpoint.provider,
        message: format!(
            "{} answered 200 with an empty stream, which servers do when the request overflows the model's context window",
            endpoint.url
        ),
    }
}

/// A stream that ended before the API's final event: the connection was cut. Retryable.
pub(super) fn cut_short(endpoint: &Endpoint) -> ProviderError {
    ProviderError::Transport {
        provider: endpoint.provider,
        message: format!(
            "the reply from {} ended before it was complete (the connection was cut)",
            endpoint.shown_url
        ),
        timed_out: false,
    }
}

/// Parses one event's JSON data.
pub(super) fn json(endpoint: &Endpoint, data: &str) -> Result<Value, ProviderError> {
    serde_json::from_str(data).map_err(|error| ProviderError::MalformedResponse {
        provider: endpoint.provider,
        message: format!("an event of the reply is not JSON: {error}"),
    })
}

/// One event's (or whole answer's) JSON as the provider's type `T`: an error the API reported
/// in it becomes that error; a shape that does not fit is a malformed response naming `what`.
pub(super) fn parse<T: serde::de::DeserializeOwned>(
    endpoint: &Endpoint,
    value: Value,
    what: &str,
) -> Result<T, ProviderError> {
    if let Some(error) = reported_error(endpoint, &value) {
        return Err(error);
    }
    serde_json::from_value(value).map_err(|error| ProviderError::MalformedResponse {
        provider: endpoint.provider,
        message: format!("not {what}: {error}"),
    })
}

/// An error an API reports inside a 200 stream (`{"error": ...}` data, Anthropic's `error`
/// event), as the HTTP error its kind stands for, so retries treat it alike.
pub(super) fn reported_error(endpoint: &Endpoint, value: &Value) -> Option<ProviderError> {
    let error = value.get("error")?;
    let message = super::http::json_error_message(value).unwrap_or_else(|| error.to_string());
    let kind = error
        .get("type")
        .or_else(|| error.get("status"))
        .or_else(|| error.get("code"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .unwrap_or(match kind {
            "overloaded_error" => 529,
            "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => 429,
            "invalid_request_error" | "INVALID_ARGUMENT" => 400,
            "authentication_error" => 401,
            "permission_error" => 403,
            "not_found_error" => 404,
            "request_too_large" => 413,
            // A failure while generating (Anthropic's api_error, OpenAI's server_error,
            // Ollama's runner errors) is the server's.
            _ => 500,
        });
    Some(endpoint.http_error(status, message, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_too_long_for_the_clock_is_far_away_not_a_panic() {
        let mut clock = Clock::new(Duration::MAX);
        clock.progress();
        assert!(clock.total_deadline > Instant::now() + Duration::from_secs(365 * 24 * 3600));
        assert!(clock.idle_deadline > Instant::now() + Duration::from_secs(365 * 24 * 3600));
    }
}
