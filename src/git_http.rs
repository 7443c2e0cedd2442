//! libgit2's smart-HTTP transport, carried by reqwest instead of libgit2's own HTTP client.
//!
//! Why: libgit2's HTTP client writes a request's headers and its body in two writes on a
//! socket without `TCP_NODELAY`, so the body of every POST of the smart protocol waits for the
//! server's delayed ACK of the headers (40 ms on Linux, more elsewhere). A depth-1 clone makes
//! two POSTs and a depth-1 fetch of a new commit two more: on a small repository that stall
//! was most of the clone. reqwest sends with `TCP_NODELAY`, keeps connections alive between the
//! requests of one operation, honours `HTTPS_PROXY`/`NO_PROXY`, and trusts the system's
//! certificate store as well as the bundled roots. libgit2 still speaks the git protocol
//! (negotiation, shallow, packs, push status); this module only moves its bytes.
//!
//! Guarantees:
//! - The token leaves the process only as an HTTP Basic `Authorization` header
//!   (`x-access-token:<token>`, as GitHub expects) on requests to the remote's URL; reqwest
//!   drops it on a redirect to another host. It is never part of a URL or an error message.
//! - A 401 or 403 is a [`git2::ErrorCode::Auth`] error raised before anything is downloaded
//!   (the ref advertisement comes first), so a wrong token fails after one refusal.
//! - A non-smart server (a dumb HTTP host, a login page) is a clear error, not a parse failure
//!   deep in libgit2.
//!
//! The token travels from the caller to the transport libgit2 creates through [`with_token`]:
//! libgit2 creates transports on the calling thread, inside the fetch or push call, and offers
//! no other channel to a custom transport.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use git2::transport::{Service, SmartSubtransport, SmartSubtransportStream, Transport};
use git2::{Error, ErrorClass, ErrorCode};
use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use secrecy::{ExposeSecret, SecretString};

/// The user agent git hosts see. Some serve the smart protocol only to agents that start with
/// `git/`.
const USER_AGENT: &str = concat!("git/2.0 (upkeep/", env!("CARGO_PKG_VERSION"), ")");

/// How long connecting may take. There is no limit on a whole request: a large clone takes as
/// long as it takes, and an interrupt cancels it through libgit2's progress callback.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

thread_local! {
    /// The token for the transports libgit2 creates on this thread; see [`with_token`].
    static TOKEN: RefCell<Option<SecretString>> = const { RefCell::new(None) };
}

/// Installs this transport for `http://` and `https://` remotes, once per process.
///
/// Every libgit2 operation that may create a transport (clone, fetch, push, local fetches
/// included) calls this first, directly or through [`with_token`]: libgit2 requires registering
/// a transport to be synchronized with the creation of every other transport, and this call
/// blocks until the registration is complete.
pub fn install() -> Result<(), Error> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            // Schemes: libgit2 matches URLs against `<scheme>://`.
            for scheme in ["http", "https"] {
                register(scheme).map_err(|error| error.message().to_owned())?;
            }
            Ok(())
        })
        .clone()
        .map_err(net_error)
}

#[expect(unsafe_code, reason = "git2 offers no safe way to register a transport")]
fn register(scheme: &str) -> Result<(), Error> {
    // SAFETY: `git2::transport::register` must not run while libgit2 creates a transport on
    // another thread. It runs only inside `install`'s `OnceLock` initialisation, and upkeep
    // calls `install` before every libgit2 operation that creates a transport, so any such
    // operation on another thread is blocked in `install` until the registration is done.
    unsafe {
        git2::transport::register(scheme, |remote| {
            let token = TOKEN.with(|token| token.borrow().clone());
            Transport::smart(remote, true, HttpSubtransport::new(token))
        })
    }
}

/// Runs `operation` (a libgit2 fetch, clone or push) with this transport installed and `token`
/// offered to the remotes it contacts over HTTP(S). The token is forgotten again afterwards,
/// even on a panic. Errs only if the transport cannot be installed; the operation's own result
/// is returned as it is.
pub fn with_token<T>(token: Option<&SecretString>, operation: impl FnOnce() -> T) -> Result<T, Error> {
    install()?;
    struct Restore(Option<SecretString>);
    impl Drop for Restore {
        fn drop(&mut self) {
            TOKEN.with(|token| *token.borrow_mut() = self.0.take());
        }
    }
    let previous = TOKEN.with(|slot| slot.replace(token.cloned()));
    let _restore = Restore(previous);
    Ok(operation())
}

/// One process-wide client: its connection pool lets the requests of one operation share a
/// connection, and a blocking client owns a runtime thread, which is not worth starting per
/// operation.
fn client() -> Result<Client, Error> {
    static CLIENT: OnceLock<Result<Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            Client::builder()
                .user_agent(USER_AGENT)
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(None)
                .tcp_nodelay(true)
                .build()
                .map_err(|error| format!("could not start the HTTP client: {error}"))
        })
        .clone()
        .map_err(net_error)
}

struct HttpSubtransport {
    token: Option<SecretString>,
    /// The repository's URL as the server last redirected it, so that the POST after a
    /// redirected advertisement goes where the advertisement came from (a renamed repository).
    redirected: Mutex<Option<String>>,
}

impl HttpSubtransport {
    fn new(token: Option<SecretString>) -> Self {
        Self {
            token,
            redirected: Mutex::new(None),
        }
    }

    fn base(&self, url: &str) -> String {
        let redirected = self.redirected.lock().map(|base| base.clone()).unwrap_or_default();
        redirected.unwrap_or_else(|| url.trim_end_matches('/').to_owned())
    }

    /// The token, for a request to `target` on behalf of the remote at `url`: only when both
    /// are on the same origin. A redirect to another host (followed for the requests after it)
    /// must not take the token along; reqwest drops it on the redirect itself.
    fn token_for(&self, target: &str, url: &str) -> Option<SecretString> {
        let origin = |url: &str| reqwest::Url::parse(url).ok().map(|url| url.origin());
        match (origin(target), origin(url)) {
            (Some(target), Some(remote)) if target == remote => self.token.clone(),
            _ => None,
        }
    }

    /// GET `info/refs`, checked before libgit2 reads a byte of it.
    fn advertisement(&self, url: &str, service: &str) -> Result<Response, Error> {
        let base = self.base(url);
        let target = format!("{base}/info/refs?service={service}");
        let token = self.token_for(&target, url);
        let request = client()?
            .get(&target)
            .header(ACCEPT, "*/*")
            .header("Pragma", "no-cache");
        let response = authorized(request, token.as_ref()).send().map_err(transfer_error)?;
        tracing::debug!(url = %response.url(), status = %response.status(), "git advertisement");
        check_status(&response, self.token.is_some())?;
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
        Ok(response)
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
            let response = self.advertisement(url, service)?;
            return Ok(Box::new(RpcStream::Receiving(response)));
        }
        let target = format!("{}/{service}", self.base(url));
        Ok(Box::new(RpcStream::Sending(RpcRequest {
            token: self.token_for(&target, url),
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
    body: Vec<u8>,
}

impl RpcRequest {
    /// Errors are `io::Error`s: libgit2 reads them as a stream's failure, keeping the message.
    fn send(self) -> io::Result<Response> {
        let as_io = |error: Error| io::Error::other(error.message().to_owned());
        let size = self.body.len();
        let request = client()
            .map_err(as_io)?
            .post(&self.url)
            .header(CONTENT_TYPE, format!("application/x-{}-request", self.service))
            .header(ACCEPT, format!("application/x-{}-result", self.service))
            .body(self.body);
        let response = authorized(request, self.token.as_ref())
            .send()
            .map_err(|error| as_io(transfer_error(error)))?;
        tracing::debug!(url = %response.url(), status = %response.status(), size, "git request");
        check_status(&response, self.token.is_some()).map_err(as_io)?;
        Ok(response)
    }
}

enum RpcStream {
    Sending(RpcRequest),
    Receiving(Response),
    /// A request could not be sent; the error was returned once.
    Failed,
}

impl Read for RpcStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if matches!(self, Self::Sending(_)) {
            // Failed until the response is in, so that a send error is not retried.
            if let Self::Sending(request) = std::mem::replace(self, Self::Failed) {
                *self = Self::Receiving(request.send()?);
            }
        }
        match self {
            Self::Receiving(response) => response.read(buf),
            Self::Sending(_) | Self::Failed => Err(io::Error::other("the request to the git server failed")),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> Option<String> {
        TOKEN.with(|token| token.borrow().as_ref().map(|token| token.expose_secret().to_owned()))
    }

    #[test]
    fn a_token_is_offered_only_during_its_operation_and_only_on_its_thread() {
        let token = SecretString::from("tok-scoped");
        let seen = with_token(Some(&token), || {
            let elsewhere = std::thread::spawn(current).join().ok().flatten();
            (current(), elsewhere)
        })
        .expect("transport installed");
        assert_eq!(seen, (Some("tok-scoped".to_owned()), None));
        assert_eq!(current(), None, "forgotten afterwards");
    }

    #[test]
    fn a_token_is_forgotten_after_a_panicking_operation_and_the_outer_one_restored() {
        let outer = SecretString::from("tok-outer");
        with_token(Some(&outer), || {
            let inner = SecretString::from("tok-inner");
            let panicked = std::panic::catch_unwind(|| with_token(Some(&inner), || panic!("inside")));
            assert!(panicked.is_err());
            assert_eq!(current(), Some("tok-outer".to_owned()));
        })
        .expect("transport installed");
        assert_eq!(current(), None);
    }
}
