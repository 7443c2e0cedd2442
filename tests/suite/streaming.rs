//! Streaming as it happens on a real connection: a loopback server that writes each event of a
//! documented streamed reply as its own HTTP chunk, with pauses in between, or cuts the
//! connection half-way. Shows that a reply which keeps streaming is never cut by
//! `--request-timeout` (an idle timeout) while a stalled one is, that a cut stream is asked
//! again, and that an interrupt stops a stream at once.

use super::support::model_api::model_requests;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use upkeep::cli::ProviderKind;
use upkeep::config::ProviderSettings;
use upkeep::llm::retry::{RetryPolicy, Retrying};
use upkeep::llm::{
    CompletionRequest, Message, Provider, ProviderError, anthropic::Anthropic, gemini::Gemini, ollama::Ollama,
    openai::OpenAi,
};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::conformance::{Api, Body, assert_conforms};
use super::support::model_api::{
    anthropic_body, anthropic_events, anthropic_usage, gemini_body, gemini_events, gemini_usage, keep_alive,
    ollama_body, ollama_lines, openai_events, openai_usage, stream_content_type, stream_opening, text_event,
};
use super::support::{TestRepo, Upkeep, finish, signal_and_wait};

const REPLY: &str =
    r#"{"plan":"done","tool_calls":[{"tool_name":"finish","arguments":{"status":"no_tasks","summary":"nothing"}}]}"#;

/// How one connection is answered: each piece after its pause, then (or not) the end.
#[derive(Clone)]
struct Plan {
    pieces: Vec<(Duration, String)>,
    /// Send the terminating chunk; without it the connection is simply closed (a cut).
    complete: bool,
    content_type: &'static str,
    /// The status line's code and reason.
    status: &'static str,
    /// After the pieces, this one again and again after its pause, until the client hangs up
    /// (or [`MAX_REPEATS`] times, so that a client which never does cannot hold the test).
    forever: Option<(Duration, String)>,
}

/// How often a [`Plan`]'s `forever` piece is sent at most.
const MAX_REPEATS: usize = 600;

/// How long a test waits for a call that should end by itself: only a guard against a hang
/// (the outcome, not the time, is what the tests check).
const HANG_GUARD: Duration = Duration::from_secs(30);

impl Plan {
    fn new(content_type: &'static str) -> Self {
        Self {
            pieces: Vec::new(),
            complete: true,
            content_type,
            status: "200 OK",
            forever: None,
        }
    }
}

/// A loopback HTTP/1.1 server answering connection `i` with `plans[i]` (the last plan for the
/// rest), recording each request body.
struct DripServer {
    port: u16,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl DripServer {
    async fn start(plans: Vec<Plan>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let port = listener.local_addr().expect("addr").port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&bodies);
        tokio::spawn(async move {
            let mut served = 0;
            while let Ok((socket, _)) = listener.accept().await {
                let plan = plans[served.min(plans.len() - 1)].clone();
                served += 1;
                tokio::spawn(serve(socket, plan, Arc::clone(&recorded)));
            }
        });
        Self { port, bodies }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> Vec<Value> {
        self.bodies.lock().expect("lock").clone()
    }
}

async fn serve(mut socket: tokio::net::TcpStream, plan: Plan, bodies: Arc<Mutex<Vec<Value>>>) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    let (head_end, length) = loop {
        let Ok(read) = socket.read(&mut buffer).await else {
            return;
        };
        if read == 0 {
            return;
        }
        received.extend_from_slice(&buffer[..read]);
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&received[..at]).to_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (at + 4, length);
        }
    };
    while received.len() < head_end + length {
        let Ok(read) = socket.read(&mut buffer).await else {
            return;
        };
        if read == 0 {
            return;
        }
        received.extend_from_slice(&buffer[..read]);
    }
    if let Ok(body) = serde_json::from_slice(&received[head_end..head_end + length]) {
        bodies.lock().expect("lock").push(body);
    }
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        plan.status, plan.content_type
    );
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let repeated = plan
        .forever
        .iter()
        .flat_map(|piece| std::iter::repeat_n(piece.clone(), MAX_REPEATS));
    for (pause, piece) in plan.pieces.into_iter().chain(repeated) {
        tokio::time::sleep(pause).await;
        // An empty chunk would end the body.
        if piece.is_empty() {
            continue;
        }
        let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
        if socket.write_all(chunk.as_bytes()).await.is_err() || socket.flush().await.is_err() {
            return;
        }
    }
    if plan.complete {
        let _ = socket.write_all(b"0\r\n\r\n").await;
    }
    let _ = socket.shutdown().await;
}

/// OpenAI's events for `REPLY`, each after `pause`.
fn openai_plan(pause: Duration) -> Plan {
    Plan {
        pieces: openai_events(REPLY, "stop", openai_usage(100, 20, 0), None)
            .into_iter()
            .map(|event| (pause, event))
            .collect(),
        ..Plan::new("text/event-stream")
    }
}

fn settings(kind: ProviderKind, base_url: String, timeout: Duration) -> ProviderSettings {
    ProviderSettings {
        kind,
        model: None,
        base_url: Some(base_url),
        api_key: Some(SecretString::from("sk-test")),
        replay: None,
        request_timeout: timeout,
        context_window: None,
        structured_output: Default::default(),
        max_reply_tokens: None,
        temperature: None,
    }
}

fn retrying(provider: impl Provider + 'static, attempts: u32) -> Retrying {
    Retrying::new(
        Box::new(provider),
        RetryPolicy {
            max_attempts: attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
    )
}

fn conversation() -> (Vec<Message>, Value) {
    (vec![Message::user("Task: nothing")], json!({"type": "object"}))
}

#[tokio::test]
async fn a_reply_that_keeps_streaming_is_never_cut_by_the_request_timeout() {
    // The reply's text in six pieces a third of a second apart: two seconds in all, against a
    // one-second idle timeout that only reply text restarts. The role, finish and usage events
    // come at once, as they do from the API.
    let events = openai_events(REPLY, "stop", openai_usage(100, 20, 0), None);
    let chars: Vec<char> = REPLY.chars().collect();
    let mut pieces = vec![(Duration::ZERO, events[0].clone())];
    for piece in chars.chunks(chars.len().div_ceil(6)) {
        let piece: String = piece.iter().collect();
        pieces.push((Duration::from_millis(330), text_event(Api::OpenAi, &piece)));
    }
    pieces.extend(events[4..].iter().map(|event| (Duration::ZERO, event.clone())));
    let server = DripServer::start(vec![Plan {
        pieces,
        ..Plan::new("text/event-stream")
    }])
    .await;
    let provider = OpenAi::new(&settings(
        ProviderKind::Openai,
        format!("{}/v1", server.url()),
        Duration::from_secs(1),
    ))
    .expect("provider");
    let (messages, schema) = conversation();
    let started = Instant::now();
    let completion = provider
        .complete(CompletionRequest::new("system", &messages, &schema))
        .await
        .expect("a flowing stream is never cut");
    assert!(
        started.elapsed() > Duration::from_millis(1500),
        "the reply took longer than the timeout"
    );
    assert_eq!(completion.content, REPLY);
    assert_eq!(completion.usage.input_tokens, 100);
    for body in server.requests() {
        assert_conforms(Api::OpenAi, Body::Request, &body);
    }
}

#[tokio::test]
async fn a_stream_that_stalls_times_out_and_is_asked_again() {
    let mut stalled = openai_plan(Duration::ZERO);
    stalled.pieces.truncate(2);
    stalled.pieces.push((Duration::from_secs(30), String::new()));
    let server = DripServer::start(vec![stalled.clone(), stalled]).await;
    let provider = OpenAi::new(&settings(
        ProviderKind::Openai,
        format!("{}/v1", server.url()),
        Duration::from_millis(500),
    ))
    .expect("provider");
    let (messages, schema) = conversation();
    let started = Instant::now();
    let error = retrying(provider, 2)
        .complete(CompletionRequest::new("system", &messages, &schema))
        .await
        .expect_err("the stream stalls");
    assert!(
        matches!(&error, ProviderError::Transport { timed_out: true, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("--request-timeout"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(server.requests().len(), 2, "a timed-out stream is retried");
}

#[tokio::test]
async fn a_connection_cut_in_the_middle_of_the_stream_is_asked_again() {
    let mut cut = openai_plan(Duration::ZERO);
    cut.pieces.truncate(3);
    cut.complete = false;
    let server = DripServer::start(vec![cut, openai_plan(Duration::ZERO)]).await;
    let provider = OpenAi::new(&settings(
        ProviderKind::Openai,
        format!("{}/v1", server.url()),
        Duration::from_secs(5),
    ))
    .expect("provider");
    let (messages, schema) = conversation();
    let completion = retrying(provider, 3)
        .complete(CompletionRequest::new("system", &messages, &schema))
        .await
        .expect("the second try streams whole");
    assert_eq!(completion.content, REPLY);
    assert_eq!(server.requests().len(), 2);
}

/// A wiremock server that first answers with the beginning of a stream only (the body ends
/// before the API's last event), then with the whole stream.
async fn cut_then_whole(cut: String, whole: String, content_type: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(cut, content_type))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(whole, content_type))
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn every_apis_stream_ending_before_its_last_event_is_asked_again() {
    let (messages, schema) = conversation();
    let timeout = Duration::from_secs(5);

    let events = openai_events(REPLY, "stop", openai_usage(10, 5, 0), None);
    // Everything up to the content; no finish reason, no `[DONE]`.
    let server = cut_then_whole(events[..3].concat(), events.concat(), "text/event-stream").await;
    let provider =
        OpenAi::new(&settings(ProviderKind::Openai, format!("{}/v1", server.uri()), timeout)).expect("openai");
    let completion = retrying(provider, 3)
        .complete(CompletionRequest::new("s", &messages, &schema))
        .await
        .expect("openai retried");
    assert_eq!(completion.content, REPLY);
    assert_eq!(received(&server).await.len(), 2);

    let events = anthropic_events(REPLY, "end_turn", anthropic_usage(10, 0, 0), 5);
    let server = cut_then_whole(
        anthropic_body(&events[..5]),
        anthropic_body(&events),
        "text/event-stream",
    )
    .await;
    let provider = Anthropic::new(&settings(ProviderKind::Anthropic, server.uri(), timeout)).expect("anthropic");
    let completion = retrying(provider, 3)
        .complete(CompletionRequest::new("s", &messages, &schema))
        .await
        .expect("anthropic retried");
    assert_eq!(completion.content, REPLY);
    assert_eq!(received(&server).await.len(), 2);

    let chunks = gemini_events(REPLY, "STOP", gemini_usage(10, 5, 0, 0));
    let server = cut_then_whole(gemini_body(&chunks[..2]), gemini_body(&chunks), "text/event-stream").await;
    let provider = Gemini::new(&settings(ProviderKind::Gemini, server.uri(), timeout)).expect("gemini");
    let completion = retrying(provider, 3)
        .complete(CompletionRequest::new("s", &messages, &schema))
        .await
        .expect("gemini retried");
    assert_eq!(completion.content, REPLY);
    assert_eq!(received(&server).await.len(), 2);

    let lines = ollama_lines(REPLY, "stop", 10, 5);
    let count = lines.len();
    let server = cut_then_whole(
        ollama_body(&lines[..count - 1]),
        ollama_body(&lines),
        "application/x-ndjson",
    )
    .await;
    let provider = Ollama::new(&settings(ProviderKind::Ollama, server.uri(), timeout)).expect("ollama");
    let completion = retrying(provider, 3)
        .complete(CompletionRequest::new("s", &messages, &schema))
        .await
        .expect("ollama retried");
    assert_eq!(completion.content, REPLY);
    assert_eq!(received(&server).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_stops_a_reply_that_is_streaming() {
    // A reply that streams one event every two seconds, for a minute.
    let slow = Plan {
        pieces: openai_events(&finish("no_tasks"), "stop", openai_usage(100, 20, 0), None)
            .into_iter()
            .map(|event| (Duration::from_secs(2), event))
            .collect(),
        ..Plan::new("text/event-stream")
    };
    let server = DripServer::start(vec![slow]).await;
    let repo = TestRepo::new();
    let mut upkeep = Upkeep::new()
        .args(["run", "--json", "--task", "t", "--provider", "openai", "--base-url"])
        .args([format!("{}/v1", server.url())])
        .args(["--repo"])
        .args([repo.path()]);
    let child = upkeep.spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().is_empty() {
        assert!(Instant::now() < deadline, "upkeep never called the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The first event is on its way.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let interrupted = Instant::now();
    let output = signal_and_wait(child, nix::sys::signal::Signal::SIGINT).await;
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        interrupted.elapsed() < Duration::from_secs(5),
        "stopped at once, not after the stream: {:?}",
        interrupted.elapsed()
    );
    assert_eq!(upkeep.leftover_temp_entries(), 0);
}

/// `api`'s provider, asking the server at `url` (the host root) with idle timeout `timeout`.
fn provider_for(api: Api, url: &str, timeout: Duration) -> Box<dyn Provider> {
    match api {
        Api::OpenAi => {
            Box::new(OpenAi::new(&settings(ProviderKind::Openai, format!("{url}/v1"), timeout)).expect("openai"))
        }
        Api::Anthropic => {
            Box::new(Anthropic::new(&settings(ProviderKind::Anthropic, url.to_owned(), timeout)).expect("anthropic"))
        }
        Api::Gemini => Box::new(Gemini::new(&settings(ProviderKind::Gemini, url.to_owned(), timeout)).expect("gemini")),
        Api::Ollama => Box::new(Ollama::new(&settings(ProviderKind::Ollama, url.to_owned(), timeout)).expect("ollama")),
    }
}

/// One call to `provider`, failing the test (rather than hanging it) should it never end.
async fn call_guarded(provider: &dyn Provider) -> Result<upkeep::llm::Completion, ProviderError> {
    let (messages, schema) = conversation();
    tokio::time::timeout(
        HANG_GUARD,
        provider.complete(CompletionRequest::new("system", &messages, &schema)),
    )
    .await
    .expect("the call ended by itself (hang guard)")
}

const EVERY_API: [Api; 4] = [Api::OpenAi, Api::Anthropic, Api::Gemini, Api::Ollama];

/// Regression: the idle timeout restarted on every event, so a server sending keep-alives (SSE
/// comments, empty events, Anthropic pings, Ollama lines without text) every 100 ms held a
/// call open forever. Only reply text is progress now; each API's keep-alives end in the idle
/// timeout error.
#[tokio::test]
async fn keep_alives_forever_end_in_the_idle_timeout_for_every_api() {
    for api in EVERY_API {
        let plan = Plan {
            pieces: vec![(Duration::ZERO, stream_opening(api) + &text_event(api, "{\"plan\""))],
            forever: Some((Duration::from_millis(100), keep_alive(api))),
            ..Plan::new(stream_content_type(api))
        };
        let server = DripServer::start(vec![plan]).await;
        let provider = provider_for(api, &server.url(), Duration::from_millis(600));
        let error = call_guarded(provider.as_ref())
            .await
            .expect_err("keep-alives are not a reply");
        assert!(
            matches!(&error, ProviderError::Transport { timed_out: true, .. }),
            "{api:?}: {error:?}"
        );
        assert!(
            error.to_string().contains("no reply text") && error.to_string().contains("--request-timeout"),
            "{api:?}: {error}"
        );
        assert_eq!(server.requests().len(), 1, "{api:?}");
    }
}

/// Regression: a reply that trickles a little text forever (a byte every 100 ms) never tripped
/// the idle timeout and had no other bound. Every reply's stream now ends at
/// `STREAM_TIME_FACTOR` (6) times `--request-timeout`, with an error that is not retried.
#[tokio::test]
async fn a_reply_that_trickles_forever_ends_at_the_total_stream_limit() {
    for api in [Api::OpenAi, Api::Ollama] {
        let plan = Plan {
            pieces: vec![(Duration::ZERO, stream_opening(api))],
            forever: Some((Duration::from_millis(100), text_event(api, " "))),
            ..Plan::new(stream_content_type(api))
        };
        let server = DripServer::start(vec![plan]).await;
        // 300 ms idle: each 100 ms piece is progress; the whole stream may last 1.8 s.
        let provider = retrying(Unboxed(provider_for(api, &server.url(), Duration::from_millis(300))), 3);
        let error = call_guarded(&provider).await.expect_err("the stream never ends");
        assert!(
            matches!(&error, ProviderError::StreamLimit { .. }),
            "{api:?}: {error:?}"
        );
        assert!(
            error.to_string().contains("still streaming") && error.to_string().contains("--request-timeout"),
            "{api:?}: {error}"
        );
        assert!(!error.is_retryable(), "{api:?}");
        assert_eq!(server.requests().len(), 1, "{api:?}: asking again would trickle again");
    }
}

/// Regression: an error answer's body was read with the idle timeout per piece, so a server
/// answering 500 and trickling its error body a byte every 100 ms held the call for hours
/// (64 KiB of it). The whole error body now gets one idle timeout; the error is what arrived
/// by then.
#[tokio::test]
async fn an_error_body_that_trickles_forever_does_not_hold_the_call() {
    let error = super::support::model_api::openai_error("The server had an error", "server_error", None, None);
    // The documented error body, then whitespace (still the same JSON) that never ends.
    let plan = Plan {
        pieces: vec![(Duration::ZERO, error.to_string())],
        forever: Some((Duration::from_millis(100), " ".to_owned())),
        status: "500 Internal Server Error",
        ..Plan::new("application/json")
    };
    let server = DripServer::start(vec![plan]).await;
    let provider = provider_for(Api::OpenAi, &server.url(), Duration::from_millis(600));
    let error = call_guarded(provider.as_ref()).await.expect_err("a 500");
    assert!(matches!(&error, ProviderError::Http { status: 500, .. }), "{error:?}");
    assert!(error.to_string().contains("The server had an error"), "{error}");
}

/// A boxed provider as a provider, for [`retrying`].
struct Unboxed(Box<dyn Provider>);

#[async_trait::async_trait]
impl Provider for Unboxed {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn model(&self) -> &str {
        self.0.model()
    }
    async fn complete(&self, request: CompletionRequest<'_>) -> Result<upkeep::llm::Completion, ProviderError> {
        self.0.complete(request).await
    }
}

/// A loopback server answering one request with `prefix` and then one line that never ends:
/// `x` in 64 KiB chunks as fast as the client reads, up to 256 MiB. Returns its URL and the
/// count of bytes the client took before it hung up.
async fn endless_line_server(content_type: &'static str, prefix: String) -> (String, tokio::task::JoinHandle<u64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let url = format!("http://127.0.0.1:{}", listener.local_addr().expect("addr").port());
    let served = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        // The request is small; read until its body has surely arrived, then answer.
        let mut buffer = vec![0u8; 1 << 16];
        let mut request = Vec::new();
        while !request.windows(4).any(|w| w == b"\r\n\r\n") || !request.ends_with(b"}") {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => return 0,
                Ok(read) => request.extend_from_slice(&buffer[..read]),
            }
        }
        let mut head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        if !prefix.is_empty() {
            head.push_str(&format!("{:x}\r\n{prefix}\r\n", prefix.len()));
        }
        if socket.write_all(head.as_bytes()).await.is_err() {
            return 0;
        }
        let piece = format!("{:x}\r\n{}\r\n", 1 << 16, "x".repeat(1 << 16));
        let mut written = 0u64;
        while written < 256 << 20 {
            if socket.write_all(piece.as_bytes()).await.is_err() {
                break;
            }
            written += 1 << 16;
        }
        written
    });
    (url, served)
}

/// Regression: a `data:` line without its end grew the SSE parser's buffer without bound
/// (256 MiB in 20 s; the 32 MiB cap applied only to finished events) and was rescanned on
/// every chunk. Raw bytes are now capped before parsing and a line is refused once it is
/// longer than 8 MiB: the call ends with a size error, the client having taken a bounded
/// part of what the server had to send. The same for an Ollama line.
#[tokio::test]
async fn an_endless_line_ends_in_a_size_error_after_a_bounded_read() {
    for api in [Api::OpenAi, Api::Ollama] {
        let prefix = match api {
            Api::Ollama => String::new(),
            _ => stream_opening(api) + "data: ",
        };
        let (url, served) = endless_line_server(stream_content_type(api), prefix).await;
        let provider = provider_for(api, &url, Duration::from_secs(10));
        let error = call_guarded(provider.as_ref()).await.expect_err("the line never ends");
        assert!(
            matches!(&error, ProviderError::StreamLimit { .. }),
            "{api:?}: {error:?}"
        );
        assert!(error.to_string().contains("MiB"), "{api:?}: {error}");
        drop(provider);
        let taken = tokio::time::timeout(HANG_GUARD, served)
            .await
            .expect("the client hung up")
            .expect("server task");
        // 8 MiB read, plus what the kernel's socket buffers held: far from the 256 MiB sent to
        // a client that never stops reading.
        assert!(taken < 64 << 20, "{api:?}: the client took {} MiB", taken >> 20);
    }
}

/// What the server received, each body checked against the API description of its path.
async fn received(server: &MockServer) -> Vec<wiremock::Request> {
    let requests = model_requests(server).await;
    super::support::conformance::assert_each_request_conforms(&requests);
    requests
}
