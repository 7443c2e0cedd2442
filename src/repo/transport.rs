//! libgit2's smart-HTTP transport, carried by reqwest instead of libgit2's own HTTP client.
//!
//! Why: libgit2's HTTP client writes a request's headers and its body in two writes on a
//! socket without `TCP_NODELAY`, so the body of every POST of the smart protocol waits for the
//! server's delayed ACK of the headers (40 ms on Linux, more elsewhere); it cannot be
//! interrupted while it waits for a server; and it has no stall timeout. reqwest sends with
//! `TCP_NODELAY`, keeps connections alive between the requests of one operation, honours
//! `HTTPS_PROXY`/`NO_PROXY`, and trusts the system's certificate store as well as the bundled
//! roots. libgit2 still speaks the git protocol (negotiation, shallow, packs, push status);
//! this module only moves its bytes.
//!
//! Guarantees:
//! - The token leaves the process only as an HTTP Basic `Authorization` header
//!   (`x-access-token:<token>`, as GitHub expects), and only on requests to the origin
//!   (scheme, host, port) of the URL the operator gave, pinned when the operation starts, not
//!   taken from whatever URL libgit2 ends up contacting. reqwest drops it on a redirect to
//!   another origin, and the requests after such a redirect go without it. It is never part of
//!   a URL or an error message.
//! - Every wait (connecting, sending, the server's answer, each chunk of it) gives up within a
//!   tenth of a second of an interrupt or the run's deadline, and after the stall timeout
//!   without a byte moving in either direction; the connection is dropped then.
//! - A 401 or 403 is a [`git2::ErrorCode::Auth`] error raised before anything is downloaded
//!   (the ref advertisement comes first), so a wrong token fails after one refusal.
//! - A non-smart server (a dumb HTTP host, a login page) is a clear error, not a parse failure
//!   deep in libgit2.
//!
//! The requests run on a small runtime of their own; libgit2's thread waits for each step
//! without getting stuck (`repo::waiting`). What one operation may do (token, origin, stop,
//! stall timeout) is its [`Transfer`], which reaches the transport libgit2 creates through the
//! thread's context (`repo::transfer`); `setup` registers `factory` for `http` and
//! `https`, and its `with_transfer` runs an operation with that context set.

use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use git2::transport::{Service, SmartSubtransport, SmartSubtransportStream, Transport};
use git2::{Error, ErrorClass, ErrorCode};
use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use reqwest::{Client, RequestBuilder, Response};
use secrecy::{ExposeSecret, SecretString};

use super::stop::{DEFAULT_STALL_TIMEOUT, Stop};
use super::transfer::current;
use super::waiting::{Activity, wait};

/// What an operation's transfers may do: built by the code that starts a fetch or push.
pub(crate) use super::transfer::Transfer;

/// The user agent git hosts see. Some serve the smart protocol only to agents that start with
/// `git/`.
const USER_AGENT: &str = concat!("git/2.0 (upkeep/", env!("CARGO_PKG_VERSION"), ")");

/// How long connecting may take. There is no limit on a whole request: a large clone takes as
/// long as it takes, as long as bytes keep moving.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Request bodies are handed to the connection in pieces of this size, so that a push whose
/// upload is progressing is told apart from one the server stopped reading.
const UPLOAD_CHUNK: usize = 64 * 1024;

/// The transport factory [`super::setup`] registers for `http` and `https`.
pub(super) fn factory(remote: &git2::Remote<'_>) -> Result<Transport, Error> {
    let transfer = current()
        // An operation started without `with_transfer`: no token, and never stopped early.
        .unwrap_or_else(|| Transfer::new("", None, Stop::never(), DEFAULT_STALL_TIMEOUT));
    Transport::smart(remote, true, HttpSubtransport::new(transfer))
}

/// One process-wide client: its connection pool lets the requests of one operation share a
/// connection.
fn client() -> io::Result<Client> {
    static CLIENT: OnceLock<Result<Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // The shared configuration (proxy, certificates), under git's own user agent.
            crate::http::client_builder()
                .user_agent(USER_AGENT)
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .map_err(|error| format!("could not start the HTTP client: {error}"))
        })
        .clone()
        .map_err(io::Error::other)
}

fn io_to_git(error: &io::Error) -> Error {
    net_error(error.to_string())
}

struct HttpSubtransport {
    transfer: Arc<Transfer>,
    /// The repository's URL as the server last redirected it, so that the POST after a
    /// redirected advertisement goes where the advertisement came from (a renamed repository).
    redirected: Mutex<Option<String>>,
}

impl HttpSubtransport {
    fn new(transfer: Arc<Transfer>) -> Self {
        Self {
            transfer,
            redirected: Mutex::new(None),
        }
    }

    fn base(&self, url: &str) -> String {
        let redirected = self.redirected.lock().map(|base| base.clone()).unwrap_or_default();
        redirected.unwrap_or_else(|| url.trim_end_matches('/').to_owned())
    }

    /// GET `info/refs`, checked before libgit2 reads a byte of it.
    fn advertisement(&self, url: &str, service: &str) -> Result<RpcStream, Error> {
        let base = self.base(url);
        let target = format!("{base}/info/refs?service={service}");
        let request = client()
            .map_err(|error| io_to_git(&error))?
            .get(&target)
            .header(ACCEPT, "*/*")
            .header("Pragma", "no-cache");
        let request = authorized(request, self.transfer.token_for(&target).as_ref());
        let activity = Activity::new();
        let response = wait(&self.transfer, &activity, request.send())
            .map_err(|error| io_to_git(&error))?
            .map_err(transfer_error)?;
        tracing::debug!(url = %response.url(), status = %response.status(), "git advertisement");
        check_status(&response, self.transfer.has_token())?;
        let expected = format!("application/x-{service}-advertisement");
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        if !content_type.starts_with(&expected) {
            return Err(Error::new(
                ErrorCode::GenericError,
                ErrorClass::Http,
                format!("not a smart-HTTP git server: it answered `{content_type}` instead of `{expected}`"),
            ));
        }
        let redirected = response.url().as_str().split_once("/info/refs").map(|(base, _)| base);
        if let (Some(redirected), Ok(mut slot)) = (
            redirected.filter(|redirected| *redirected != base),
            self.redirected.lock(),
        ) {
            *slot = Some(redirected.to_owned());
        }
        Ok(RpcStream::receiving(Arc::clone(&self.transfer), activity, response))
    }
}

impl SmartSubtransport for HttpSubtransport {
    fn action(&self, url: &str, action: Service) -> Result<Box<dyn SmartSubtransportStream>, Error> {
        let (service, listing) = match action {
            Service::UploadPackLs => ("git-upload-pack", true),
            Service::UploadPack => ("git-upload-pack", false),
            Service::ReceivePackLs => ("git-receive-pack", true),
            Service::ReceivePack => ("git-receive-pack", false),
        };
        if listing {
            return Ok(Box::new(self.advertisement(url, service)?));
        }
        let target = format!("{}/{service}", self.base(url));
        Ok(Box::new(RpcStream::Sending(RpcRequest {
            token: self.transfer.token_for(&target),
            transfer: Arc::clone(&self.transfer),
            url: target,
            service,
            body: Vec::new(),
        })))
    }

    fn close(&self) -> Result<(), Error> {
        Ok(())
    }
}

/// A POST the protocol is writing: sent as a whole at the first read (libgit2 writes the
/// request, then reads the response).
struct RpcRequest {
    url: String,
    service: &'static str,
    token: Option<SecretString>,
    transfer: Arc<Transfer>,
    body: Vec<u8>,
}

impl RpcRequest {
    /// Errors are `io::Error`s: libgit2 reads them as a stream's failure, keeping the message.
    fn send(self) -> io::Result<RpcStream> {
        let size = self.body.len();
        let activity = Activity::new();
        let request = client()?
            .post(&self.url)
            .header(CONTENT_TYPE, format!("application/x-{}-request", self.service))
            .header(ACCEPT, format!("application/x-{}-result", self.service))
            .header(CONTENT_LENGTH, size)
            .body(upload(Bytes::from(self.body), Arc::clone(&activity)));
        let request = authorized(request, self.token.as_ref());
        let response = wait(&self.transfer, &activity, request.send())?
            .map_err(|error| io::Error::other(transfer_error(error).message().to_owned()))?;
        tracing::debug!(url = %response.url(), status = %response.status(), size, "git request");
        check_status(&response, self.transfer.has_token())
            .map_err(|error| io::Error::other(error.message().to_owned()))?;
        Ok(RpcStream::receiving(self.transfer, activity, response))
    }
}

/// A request body handed over in pieces, each one marking progress when the connection takes it.
fn upload(body: Bytes, activity: Arc<Activity>) -> reqwest::Body {
    let pieces = (0..body.len()).step_by(UPLOAD_CHUNK).map(move |start| {
        activity.touch();
        Ok::<_, io::Error>(body.slice(start..body.len().min(start + UPLOAD_CHUNK)))
    });
    reqwest::Body::wrap_stream(futures_util::stream::iter(pieces))
}

/// A response being read: the part of the last chunk libgit2 has not taken yet, and the rest.
struct Receiving {
    transfer: Arc<Transfer>,
    activity: Arc<Activity>,
    response: Option<Response>,
    pending: Bytes,
}

enum RpcStream {
    Sending(RpcRequest),
    Receiving(Receiving),
    /// A request could not be sent or a response could not be read; the error was returned.
    Failed,
}

impl RpcStream {
    fn receiving(transfer: Arc<Transfer>, activity: Arc<Activity>, response: Response) -> Self {
        Self::Receiving(Receiving {
            transfer,
            activity,
            response: Some(response),
            pending: Bytes::new(),
        })
    }
}

impl Receiving {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            let Some(mut response) = self.response.take() else {
                return Ok(0);
            };
            let (response, chunk) = wait(&self.transfer, &self.activity, async move {
                let chunk = response.chunk().await;
                (response, chunk)
            })?;
            match chunk.map_err(|error| io::Error::other(transfer_error(error).message().to_owned()))? {
                Some(chunk) => {
                    self.pending = chunk;
                    self.response = Some(response);
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending.split_to(n));
        Ok(n)
    }
}

impl Read for RpcStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if matches!(self, Self::Sending(_)) {
            // Failed until the response is in, so that a send error is not retried.
            if let Self::Sending(request) = std::mem::replace(self, Self::Failed) {
                *self = request.send()?;
            }
        }
        let result = match self {
            Self::Receiving(receiving) => receiving.read(buf),
            Self::Sending(_) | Self::Failed => Err(io::Error::other("the request to the git server failed")),
        };
        if result.is_err() {
            *self = Self::Failed;
        }
        result
    }
}

impl Write for RpcStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self {
            Self::Sending(request) => {
                request.body.extend_from_slice(data);
                Ok(data.len())
            }
            Self::Receiving(_) | Self::Failed => Err(io::Error::other(
                "git protocol error: a request was written after its response was read",
            )),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The token as HTTP Basic credentials (`x-access-token:<token>`); reqwest marks the header
/// sensitive, so no debug output of the request shows it.
fn authorized(request: RequestBuilder, token: Option<&SecretString>) -> RequestBuilder {
    match token {
        Some(token) => request.basic_auth("x-access-token", Some(token.expose_secret())),
        None => request,
    }
}

fn check_status(response: &Response, has_token: bool) -> Result<(), Error> {
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let (code, explanation) = match status.as_u16() {
        401 if has_token => (ErrorCode::Auth, "the server rejected the token"),
        401 => (ErrorCode::Auth, "the server requires authentication"),
        403 => (ErrorCode::Auth, "the token may not access this repository"),
        // Not `ErrorCode::NotFound`: to a caller that means a missing branch.
        404 => (
            ErrorCode::GenericError,
            "no such repository (or it is private and needs a token)",
        ),
        _ => (ErrorCode::GenericError, "unexpected answer from the git server"),
    };
    Err(Error::new(code, ErrorClass::Http, format!("{status}: {explanation}")))
}

fn net_error(message: String) -> Error {
    Error::new(ErrorCode::GenericError, ErrorClass::Net, message)
}

/// A transport failure: reqwest's cause chain (which never includes headers). The URL is left
/// to the caller's message.
fn transfer_error(error: reqwest::Error) -> Error {
    net_error(crate::text::error_chain(&error.without_url()))
}
