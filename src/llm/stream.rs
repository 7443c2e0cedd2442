//! Reading a streamed reply: server-sent events (OpenAI, Anthropic, Gemini) parsed by the
//! `eventsource-stream` crate, or Ollama's newline-delimited JSON split by `tokio-util`'s
//! `LinesCodec`.
//!
//! Guarantees: every wait for the next piece is bounded by the idle timeout, so a reply that
//! keeps streaming is never cut while one that stalls is; the whole reply is bounded in size; a
//! stream that ends before the API's last event is a retryable [`ProviderError::Transport`]
//! (the retry asks again from scratch, a half reply is never used); dropping the future (an
//! interrupt) closes the connection at once. A server that ignores `stream: true` and answers
//! with one JSON body is read whole, as before streaming.

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt, TryStreamExt};
use serde_json::Value;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

use super::http::Endpoint;
use super::{Completion, ProviderError};

/// The most of a reply read into memory. Replies are kilobytes; this only stops a misbehaving
/// server from exhausting memory.
const MAX_REPLY_BYTES: usize = 32 * 1024 * 1024;

/// How a provider's stream is cut into events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    ServerSentEvents,
    JsonLines,
}

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

/// Reads `response` to the end through `accumulator`, telling `progress` the reply text's
/// size as it grows.
async fn read<A: Accumulator>(
    endpoint: &Endpoint,
    response: reqwest::Response,
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
    if content_type.starts_with("application/json") {
        let body = read_whole(endpoint, response).await?;
        let value = serde_json::from_slice(&body).map_err(|error| ProviderError::MalformedResponse {
            provider: endpoint.provider,
            message: format!("the body of the answer is not JSON: {error}"),
        })?;
        accumulator.whole(endpoint, value)?;
        return accumulator.finish(endpoint, true);
    }
    let bytes = response.bytes_stream();
    let done = match framing {
        Framing::ServerSentEvents => {
            let events = bytes.eventsource().map(|item| match item {
                Ok(event) => Ok((event.event, event.data)),
                Err(eventsource_stream::EventStreamError::Transport(error)) => Err(endpoint.transport(error)),
                Err(other) => Err(ProviderError::MalformedResponse {
                    provider: endpoint.provider,
                    message: format!("unreadable event stream: {other}"),
                }),
            });
            drain(endpoint, events, progress, &mut accumulator).await?
        }
        Framing::JsonLines => {
            let reader = tokio_util::io::StreamReader::new(bytes.map_err(std::io::Error::other));
            let lines =
                FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_REPLY_BYTES)).map(|item| match item {
                    Ok(line) => Ok((String::new(), line)),
                    Err(LinesCodecError::Io(error)) => Err(ProviderError::Transport {
                        provider: endpoint.provider,
                        message: format!(
                            "request to {} failed while reading the reply: {}",
                            endpoint.shown_url,
                            endpoint.redact(crate::text::error_chain(&error))
                        ),
                        timed_out: false,
                    }),
                    Err(LinesCodecError::MaxLineLengthExceeded) => Err(too_large(endpoint)),
                });
            drain(endpoint, lines, progress, &mut accumulator).await?
        }
    };
    accumulator.finish(endpoint, done)
}

/// Feeds events to the accumulator until the API's final event or the end of the stream;
/// returns whether the final event came.
async fn drain<A: Accumulator>(
    endpoint: &Endpoint,
    events: impl Stream<Item = Result<(String, String), ProviderError>>,
    progress: Option<&(dyn Fn(u64) + Send + Sync)>,
    accumulator: &mut A,
) -> Result<bool, ProviderError> {
    let mut events = std::pin::pin!(events);
    let mut received: usize = 0;
    let mut text: u64 = 0;
    loop {
        let next = tokio::time::timeout(endpoint.idle_timeout, events.next())
            .await
            .map_err(|_| endpoint.idle_timeout_error("data from the model"))?;
        let Some(event) = next else {
            return Ok(false);
        };
        let (name, data) = event?;
        received += data.len();
        if received > MAX_REPLY_BYTES {
            return Err(too_large(endpoint));
        }
        if data.trim().is_empty() {
            continue;
        }
        match accumulator.event(endpoint, &name, &data)? {
            Step::Done => return Ok(true),
            Step::More(0) => {}
            Step::More(added) => {
                text += added as u64;
                if let Some(progress) = progress {
                    progress(text);
                }
            }
        }
    }
}

async fn read_whole(endpoint: &Endpoint, mut response: reqwest::Response) -> Result<Vec<u8>, ProviderError> {
    let mut body = Vec::new();
    loop {
        let chunk = tokio::time::timeout(endpoint.idle_timeout, response.chunk())
            .await
            .map_err(|_| endpoint.idle_timeout_error("data from the model"))?
            .map_err(|error| endpoint.transport(error))?;
        let Some(chunk) = chunk else {
            return Ok(body);
        };
        if body.len() + chunk.len() > MAX_REPLY_BYTES {
            return Err(too_large(endpoint));
        }
        body.extend_from_slice(&chunk);
    }
}

fn too_large(endpoint: &Endpoint) -> ProviderError {
    ProviderError::MalformedResponse {
        provider: endpoint.provider,
        message: format!("the reply is larger than {} MiB", MAX_REPLY_BYTES / (1024 * 1024)),
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
