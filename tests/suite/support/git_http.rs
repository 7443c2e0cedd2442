//! A real smart-HTTP git server on loopback, for integration tests.
//!
//! Requests are parsed by a small HTTP/1.1 server (a `std::net::TcpListener` on
//! `127.0.0.1:0`, one thread per connection) and handed to `git http-backend`, run
//! as a CGI program, so clones (including shallow ones over protocol v2) and
//! pushes behave exactly as they do against a real git host, without any network
//! access beyond loopback.
//!
//! Every request is recorded (see [`GitHttpServer::requests`]) so tests can check
//! what a client sent, e.g. that a token was presented as HTTP Basic auth.

// Not every test binary uses every part of this module.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Longest accepted request line, header line or chunk-size line.
const MAX_LINE: usize = 16 * 1024;
/// Most header lines accepted in one request.
const MAX_HEADERS: usize = 128;
/// Largest accepted request body (after chunked decoding).
const MAX_BODY: usize = 512 * 1024 * 1024;
/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Environment variable carrying the refused refs (one per line) to the hook.
const REJECT_ENV: &str = "GIT_HTTP_TEST_REJECT_REFS";

/// One request as seen by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// Request method, e.g. `GET`; empty if the request line could not be parsed.
    pub method: String,
    /// Request target as sent: path plus `?query`, e.g.
    /// `/owner/name.git/info/refs?service=git-upload-pack`.
    pub path: String,
    /// Whether an `Authorization` header was present.
    pub auth_present: bool,
    /// Whether the request carried well-formed HTTP Basic credentials that are
    /// accepted: with a token configured, the password equals the token (any
    /// username); without a token, any well-formed Basic credentials.
    pub auth_valid: bool,
    /// The raw `Authorization` header value, if any.
    pub authorization: Option<String>,
    /// The `Git-Protocol` header value, if any (e.g. `version=2`).
    pub git_protocol: Option<String>,
    /// All request headers, in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// Status code returned to the client.
    pub status: u16,
    /// What `git http-backend` (and any hook) wrote to stderr, for debugging.
    pub backend_stderr: String,
}

impl RecordedRequest {
    /// First value of the request header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

/// A smart-HTTP git server on `127.0.0.1`, serving every bare repository under a
/// root directory. Stops its threads and closes its listener on drop.
pub struct GitHttpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

struct Shared {
    root: PathBuf,
    backend: PathBuf,
    token: Option<String>,
    hooks_dir: PathBuf,
    requests: Mutex<Vec<RecordedRequest>>,
    rejected_refs: Mutex<Vec<String>>,
    connections: Mutex<HashMap<u64, TcpStream>>,
    stopping: AtomicBool,
}

impl GitHttpServer {
    /// Serves every bare repository under `root` (e.g. `root/owner/name.git`) at
    /// `http://127.0.0.1:PORT/owner/name.git`.
    ///
    /// With `Some(token)`, every request must carry HTTP Basic auth whose
    /// password is the token (any username); otherwise the answer is 401 with
    /// `WWW-Authenticate: Basic realm="git"`.
    ///
    /// Panics (this is test setup) if `git http-backend` cannot be found or the
    /// listener cannot be bound.
    pub fn start(root: &Path, token: Option<&str>) -> GitHttpServer {
        let backend = find_backend();
        let root = root
            .canonicalize()
            .or_else(|_| std::path::absolute(root))
            .unwrap_or_else(|_| root.to_path_buf());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address of listener");
        let hooks_dir =
            std::env::temp_dir().join(format!("git-http-test-hooks-{}-{}", std::process::id(), addr.port()));
        let shared = Arc::new(Shared {
            root,
            backend,
            token: token.map(str::to_owned),
            hooks_dir,
            requests: Mutex::new(Vec::new()),
            rejected_refs: Mutex::new(Vec::new()),
            connections: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = thread::Builder::new()
            .name(format!("git-http-{}", addr.port()))
            .spawn(move || accept_loop(listener, accept_shared))
            .expect("spawn git http server thread");
        GitHttpServer {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        }
    }

    /// Base URL, `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Makes `git-receive-pack` refuse updates (create, update, delete) of
    /// `refname` (a full ref name such as `refs/heads/protected`) in every
    /// repository served, so tests can check that a refused push is reported.
    /// Other refs in the same push are still accepted.
    ///
    /// Implemented with an `update` hook in a server-owned directory that is
    /// passed to git as `core.hooksPath` (only once some ref is refused); the
    /// repositories themselves are not modified. While active, that directory's
    /// `update`, `pre-receive`, `post-receive` and `post-update` hooks defer to
    /// a repository's own executable hook of the same name, if any.
    pub fn reject_pushes_to(&self, refname: &str) {
        write_hooks(&self.shared.hooks_dir).expect("write hook scripts for reject_pushes_to");
        let mut refs = lock(&self.shared.rejected_refs);
        if !refs.iter().any(|r| r == refname) {
            refs.push(refname.to_owned());
        }
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop, which then closes the listener and every open
        // connection and waits for the connection threads.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5));
        if let Some(handle) = self.accept_thread.take() {
            let _ = handle.join();
        }
        let _ = fs::remove_dir_all(&self.shared.hooks_dir);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn find_backend() -> PathBuf {
    let output = Command::new("git")
        .arg("--exec-path")
        .output()
        .expect("run `git --exec-path`");
    assert!(
        output.status.success(),
        "`git --exec-path` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let exec_path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let backend = Path::new(&exec_path).join("git-http-backend");
    assert!(backend.is_file(), "git-http-backend not found at {}", backend.display());
    backend
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    let mut next_id: u64 = 0;
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(_) => {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        workers.retain(|worker| !worker.is_finished());
        next_id += 1;
        let id = next_id;
        if let Ok(handle) = stream.try_clone() {
            lock(&shared.connections).insert(id, handle);
        }
        let worker_shared = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name(format!("git-http-conn-{id}"))
            .spawn(move || {
                serve_connection(stream, peer, &worker_shared);
                lock(&worker_shared.connections).remove(&id);
            });
        match spawned {
            Ok(worker) => workers.push(worker),
            Err(_) => {
                if let Some(stream) = lock(&shared.connections).remove(&id) {
                    let _ = stream.shutdown(Shutdown::Both);
                }
            }
        }
    }
    drop(listener);
    let open: Vec<TcpStream> = lock(&shared.connections).drain().map(|(_, s)| s).collect();
    for stream in open {
        let _ = stream.shutdown(Shutdown::Both);
    }
    for worker in workers {
        let _ = worker.join();
    }
}

fn serve_connection(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut writer = stream;
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match handle_request(&mut reader, &mut writer, peer, shared) {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                let _ = writer.flush();
                let _ = writer.shutdown(Shutdown::Write);
                return;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Request parsing
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Head {
    method: String,
    target: String,
    http11: bool,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn connection_has(&self, token: &str) -> bool {
        self.header_values("connection")
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    fn wants_keep_alive(&self) -> bool {
        if self.http11 {
            !self.connection_has("close")
        } else {
            self.connection_has("keep-alive")
        }
    }

    fn expects_continue(&self) -> bool {
        self.http11
            && self
                .header("expect")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"))
    }
}

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

enum ReadError {
    /// The connection was closed before a request started.
    Eof,
    /// I/O error (including a timeout or EOF in the middle of a request).
    Io,
    /// The client sent something that is not valid HTTP/1.x.
    Malformed(String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked,
}

impl Framing {
    fn has_body(self) -> bool {
        self != Framing::Length(0)
    }
}

/// Reads one line (terminated by LF, optional CR stripped). `Ok(None)` on EOF
/// before any byte.
fn read_line(reader: &mut impl BufRead, limit: usize) -> Result<Option<Vec<u8>>, ReadError> {
    let mut buf = Vec::new();
    let limit_u64 = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let n = reader
        .by_ref()
        .take(limit_u64)
        .read_until(b'\n', &mut buf)
        .map_err(|_| ReadError::Io)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if buf.len() > limit {
            ReadError::Malformed("line too long".into())
        } else {
            ReadError::Io
        });
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(buf))
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn read_head(reader: &mut impl BufRead, head: &mut Head) -> Result<(), ReadError> {
    // Tolerate a few empty lines before the request line (RFC 9112 2.2).
    let mut request_line = Vec::new();
    for _ in 0..4 {
        match read_line(reader, MAX_LINE)? {
            None => return Err(ReadError::Eof),
            Some(line) if line.is_empty() => continue,
            Some(line) => {
                request_line = line;
                break;
            }
        }
    }
    let request_line =
        String::from_utf8(request_line).map_err(|_| ReadError::Malformed("request line is not UTF-8".into()))?;
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts.as_slice() else {
        return Err(ReadError::Malformed("malformed request line".into()));
    };
    if is_token(method) {
        head.method = (*method).to_owned();
    } else {
        return Err(ReadError::Malformed("invalid method".into()));
    }
    head.target = (*target).to_owned();
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(ReadError::Malformed("invalid request target".into()));
    }
    head.http11 = match *version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(ReadError::Malformed("unsupported HTTP version".into())),
    };
    for _ in 0..=MAX_HEADERS {
        let line = read_line(reader, MAX_LINE)?.ok_or(ReadError::Io)?;
        if line.is_empty() {
            return Ok(());
        }
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err(ReadError::Malformed("obsolete header folding".into()));
        }
        let line = String::from_utf8(line).map_err(|_| ReadError::Malformed("header is not UTF-8".into()))?;
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Malformed("header without colon".into()));
        };
        if !is_token(name) {
            return Err(ReadError::Malformed("invalid header name".into()));
        }
        let value = value.trim_matches(|c| c == ' ' || c == '\t');
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(ReadError::Malformed("control character in header".into()));
        }
        head.headers.push((name.to_owned(), value.to_owned()));
    }
    Err(ReadError::Malformed("too many headers".into()))
}

fn framing(head: &Head) -> Result<Framing, String> {
    let codings: Vec<String> = head
        .header_values("transfer-encoding")
        .flat_map(|v| v.split(','))
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
        .collect();
    if head.header("transfer-encoding").is_some() {
        // Transfer-Encoding wins over Content-Length (RFC 9112 6.3).
        return if codings == ["chunked"] {
            Ok(Framing::Chunked)
        } else {
            Err("unsupported transfer-encoding".into())
        };
    }
    let mut length: Option<usize> = None;
    for value in head.header_values("content-length").flat_map(|v| v.split(',')) {
        let value = value.trim();
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err("invalid content-length".into());
        }
        let n: usize = value.parse().map_err(|_| "invalid content-length".to_owned())?;
        if length.is_some_and(|l| l != n) {
            return Err("conflicting content-length".into());
        }
        length = Some(n);
    }
    let length = length.unwrap_or(0);
    if length > MAX_BODY {
        return Err("body too large".into());
    }
    Ok(Framing::Length(length))
}

fn read_body(reader: &mut impl BufRead, framing: Framing) -> Result<Vec<u8>, ReadError> {
    match framing {
        Framing::Length(length) => read_exactly(reader, length, Vec::new()),
        Framing::Chunked => {
            let mut body = Vec::new();
            loop {
                let line = read_line(reader, MAX_LINE)?.ok_or(ReadError::Io)?;
                let line =
                    String::from_utf8(line).map_err(|_| ReadError::Malformed("invalid chunk size line".into()))?;
                let size = line.split(';').next().unwrap_or_default().trim();
                if size.is_empty() || !size.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(ReadError::Malformed("invalid chunk size".into()));
                }
                let size =
                    usize::from_str_radix(size, 16).map_err(|_| ReadError::Malformed("invalid chunk size".into()))?;
                if size == 0 {
                    // Trailer section, ended by an empty line.
                    for _ in 0..=MAX_HEADERS {
                        let trailer = read_line(reader, MAX_LINE)?.ok_or(ReadError::Io)?;
                        if trailer.is_empty() {
                            return Ok(body);
                        }
                    }
                    return Err(ReadError::Malformed("too many trailers".into()));
                }
                if body.len().checked_add(size).is_none_or(|n| n > MAX_BODY) {
                    return Err(ReadError::Malformed("body too large".into()));
                }
                body = read_exactly(reader, size, body)?;
                let end = read_line(reader, MAX_LINE)?.ok_or(ReadError::Io)?;
                if !end.is_empty() {
                    return Err(ReadError::Malformed("chunk not followed by CRLF".into()));
                }
            }
        }
    }
}

/// Appends exactly `n` bytes from `reader` to `buf`.
fn read_exactly(reader: &mut impl BufRead, n: usize, mut buf: Vec<u8>) -> Result<Vec<u8>, ReadError> {
    let before = buf.len();
    let n_u64 = u64::try_from(n).map_err(|_| ReadError::Malformed("body too large".into()))?;
    reader
        .by_ref()
        .take(n_u64)
        .read_to_end(&mut buf)
        .map_err(|_| ReadError::Io)?;
    if buf.len() - before == n {
        Ok(buf)
    } else {
        Err(ReadError::Io)
    }
}

fn percent_decode(s: &str) -> Option<String> {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hi = hex(*bytes.get(i + 1)?)?;
            let lo = hex(*bytes.get(i + 2)?)?;
            out.push(hi * 16 + lo);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.contains(&0) {
        return None;
    }
    String::from_utf8(out).ok()
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits: u32 = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `(username, password)` from an `Authorization: Basic ...` value.
fn parse_basic(value: &str) -> Option<(String, String)> {
    let (scheme, credentials) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(base64_decode(credentials.trim())?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

// ---------------------------------------------------------------------------
// Request handling
// ---------------------------------------------------------------------------

struct Response {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    stderr: String,
}

impl Response {
    fn text(status: u16, message: &str) -> Response {
        Response {
            status,
            reason: reason_phrase(status).to_owned(),
            headers: vec![("Content-Type".to_owned(), "text/plain; charset=utf-8".to_owned())],
            body: format!("{message}\n").into_bytes(),
            stderr: String::new(),
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        _ => "Unknown",
    }
}

/// Handles one request on a connection. `Ok(true)` to keep the connection open.
fn handle_request(
    reader: &mut impl BufRead,
    writer: &mut impl Write,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<bool> {
    let mut head = Head::default();
    match read_head(reader, &mut head) {
        Ok(()) => {}
        Err(ReadError::Eof) => return Ok(false),
        Err(ReadError::Io) => return Err(io::ErrorKind::UnexpectedEof.into()),
        Err(ReadError::Malformed(message)) => {
            return bad_request(writer, shared, &head, &message);
        }
    }

    let (raw_path, query) = match head.target.split_once('?') {
        Some((path, query)) => (path.to_owned(), query.to_owned()),
        None => (head.target.clone(), String::new()),
    };
    let Some(path_info) = percent_decode(&raw_path) else {
        return bad_request(writer, shared, &head, "invalid percent-encoding in path");
    };
    let framing = match framing(&head) {
        Ok(framing) => framing,
        Err(message) => return bad_request(writer, shared, &head, &message),
    };

    let authorization = head.header("authorization").map(str::to_owned);
    let credentials = authorization.as_deref().and_then(parse_basic);
    let auth_valid = match (&shared.token, &credentials) {
        (Some(token), Some((_, password))) => password == token,
        (Some(_), None) => false,
        (None, credentials) => credentials.is_some(),
    };
    let authorized = shared.token.is_none() || auth_valid;
    let mut keep_alive = head.wants_keep_alive();

    let response = if authorized {
        if head.expects_continue() && framing.has_body() {
            writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
            writer.flush()?;
        }
        let body = match read_body(reader, framing) {
            Ok(body) => body,
            Err(ReadError::Malformed(message)) => {
                return bad_request(writer, shared, &head, &message);
            }
            Err(_) => return Err(io::ErrorKind::UnexpectedEof.into()),
        };
        let remote_user = if auth_valid {
            credentials
                .as_ref()
                .map(|(user, _)| if user.is_empty() { "git" } else { user.as_str() })
        } else {
            None
        };
        run_backend(shared, &head, &path_info, &query, body, remote_user, peer)
    } else {
        if framing.has_body() {
            if head.expects_continue() {
                // The client waits for 100 Continue; it will not send the body.
                keep_alive = false;
            } else {
                match read_body(reader, framing) {
                    Ok(_) => {}
                    Err(ReadError::Malformed(message)) => {
                        return bad_request(writer, shared, &head, &message);
                    }
                    Err(_) => keep_alive = false,
                }
            }
        }
        let mut response = Response::text(401, "authentication required");
        response
            .headers
            .push(("WWW-Authenticate".to_owned(), "Basic realm=\"git\"".to_owned()));
        response
    };

    record(
        shared,
        &head,
        authorization,
        auth_valid,
        response.status,
        response.stderr.clone(),
    );
    write_response(writer, &response, head.method == "HEAD", keep_alive)?;
    Ok(keep_alive)
}

fn bad_request(writer: &mut impl Write, shared: &Shared, head: &Head, message: &str) -> io::Result<bool> {
    let authorization = head.header("authorization").map(str::to_owned);
    record(shared, head, authorization, false, 400, String::new());
    let response = Response::text(400, message);
    write_response(writer, &response, false, false)?;
    Ok(false)
}

fn record(
    shared: &Shared,
    head: &Head,
    authorization: Option<String>,
    auth_valid: bool,
    status: u16,
    backend_stderr: String,
) {
    let request = RecordedRequest {
        method: head.method.clone(),
        path: head.target.clone(),
        auth_present: authorization.is_some(),
        auth_valid,
        authorization,
        git_protocol: head.header("git-protocol").map(str::to_owned),
        headers: head.headers.clone(),
        status,
        backend_stderr,
    };
    lock(&shared.requests).push(request);
}

fn write_response(writer: &mut impl Write, response: &Response, head_only: bool, keep_alive: bool) -> io::Result<()> {
    let mut out = Vec::with_capacity(response.body.len() + 256);
    let reason: String = response.reason.chars().filter(|c| !c.is_control()).collect();
    write!(out, "HTTP/1.1 {} {}\r\n", response.status, reason)?;
    for (name, value) in &response.headers {
        let hop_by_hop = ["content-length", "transfer-encoding", "connection", "keep-alive"]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h));
        if hop_by_hop || !is_token(name) || value.chars().any(|c| c == '\r' || c == '\n') {
            continue;
        }
        write!(out, "{name}: {value}\r\n")?;
    }
    write!(out, "Content-Length: {}\r\n", response.body.len())?;
    let connection = if keep_alive { "keep-alive" } else { "close" };
    write!(out, "Connection: {connection}\r\n\r\n")?;
    if !head_only {
        out.extend_from_slice(&response.body);
    }
    writer.write_all(&out)?;
    writer.flush()
}

// ---------------------------------------------------------------------------
// CGI
// ---------------------------------------------------------------------------

fn run_backend(
    shared: &Shared,
    head: &Head,
    path_info: &str,
    query: &str,
    body: Vec<u8>,
    remote_user: Option<&str>,
    peer: SocketAddr,
) -> Response {
    let mut cmd = Command::new(&shared.backend);
    cmd.env_clear();
    for key in ["PATH", "TMPDIR", "SYSTEMROOT"] {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    cmd.env("GIT_PROJECT_ROOT", &shared.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("SERVER_SOFTWARE", "upkeep-test-git-http")
        .env("SERVER_NAME", "127.0.0.1")
        .env("SCRIPT_NAME", "")
        .env("REQUEST_METHOD", &head.method)
        .env("REQUEST_URI", &head.target)
        .env("PATH_INFO", path_info)
        .env("QUERY_STRING", query)
        .env("REMOTE_ADDR", peer.ip().to_string())
        .env("REMOTE_PORT", peer.port().to_string());

    let mut config: Vec<(&str, String)> = vec![("http.receivepack", "true".to_owned())];
    let rejected = lock(&shared.rejected_refs).clone();
    if !rejected.is_empty() {
        config.push(("core.hooksPath", shared.hooks_dir.to_string_lossy().into_owned()));
        cmd.env(REJECT_ENV, rejected.join("\n"));
    }
    cmd.env("GIT_CONFIG_COUNT", config.len().to_string());
    for (i, (key, value)) in config.iter().enumerate() {
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
            .env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }

    if let Some(user) = remote_user {
        cmd.env("REMOTE_USER", user).env("AUTH_TYPE", "Basic");
    }
    if let Some(content_type) = head.header("content-type") {
        cmd.env("CONTENT_TYPE", content_type);
    }
    if let Some(protocol) = head.header("git-protocol") {
        cmd.env("HTTP_GIT_PROTOCOL", protocol);
    }
    if let Some(encoding) = head.header("content-encoding") {
        cmd.env("HTTP_CONTENT_ENCODING", encoding);
    }
    if let Some(accept) = head.header("accept") {
        cmd.env("HTTP_ACCEPT", accept);
    }
    let has_body = !body.is_empty() || head.method == "POST" || head.method == "PUT";
    if has_body {
        cmd.env("CONTENT_LENGTH", body.len().to_string());
        cmd.stdin(Stdio::piped());
    } else {
        cmd.stdin(Stdio::null());
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());

    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => {
            let message = format!("cannot run {}: {err}", shared.backend.display());
            let mut response = Response::text(500, &message);
            response.stderr = message;
            return response;
        }
    };
    // Feed the body from another thread so a large request and a large response
    // cannot deadlock on full pipes.
    let feeder = child.stdin.take().and_then(|mut stdin| {
        thread::Builder::new()
            .name("git-http-cgi-stdin".to_owned())
            .spawn(move || {
                let _ = stdin.write_all(&body);
            })
            .ok()
    });
    let output = child.wait_with_output();
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    let output = match output {
        Ok(output) => output,
        Err(err) => {
            let message = format!("waiting for git http-backend failed: {err}");
            let mut response = Response::text(500, &message);
            response.stderr = message;
            return response;
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let mut response = match parse_cgi_output(&output.stdout) {
        Some(response) => response,
        None if output.stdout.is_empty() => {
            Response::text(500, &format!("git http-backend produced no output ({})", output.status))
        }
        None => Response::text(502, "malformed CGI response from git http-backend"),
    };
    response.stderr = stderr;
    response
}

/// Splits CGI output into status, headers and body. `None` if the header
/// section is not terminated or not well-formed.
fn parse_cgi_output(out: &[u8]) -> Option<Response> {
    let mut status: u16 = 200;
    let mut reason: Option<String> = None;
    let mut headers = Vec::new();
    let mut has_location = false;
    let mut has_status = false;
    let mut pos = 0;
    loop {
        let rest = out.get(pos..)?;
        let newline = rest.iter().position(|&b| b == b'\n')?;
        let mut line = rest.get(..newline)?;
        pos += newline + 1;
        if let Some(stripped) = line.strip_suffix(b"\r") {
            line = stripped;
        }
        if line.is_empty() {
            break;
        }
        let line = std::str::from_utf8(line).ok()?;
        let (name, value) = line.split_once(':')?;
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("status") {
            let (code, text) = value.split_once(' ').unwrap_or((value, ""));
            status = code.parse().ok().filter(|c| (100..1000).contains(c))?;
            let text = text.trim();
            if !text.is_empty() {
                reason = Some(text.to_owned());
            }
            has_status = true;
        } else {
            if name.eq_ignore_ascii_case("location") {
                has_location = true;
            }
            headers.push((name.to_owned(), value.to_owned()));
        }
    }
    if has_location && !has_status {
        status = 302;
    }
    Some(Response {
        status,
        reason: reason.unwrap_or_else(|| reason_phrase(status).to_owned()),
        headers,
        body: out.get(pos..)?.to_vec(),
        stderr: String::new(),
    })
}

// ---------------------------------------------------------------------------
// Hooks for reject_pushes_to
// ---------------------------------------------------------------------------

const UPDATE_HOOK: &str = r#"#!/bin/sh
# Written by GitHttpServer::reject_pushes_to (test support). Refuses updates of
# the refs listed one per line in $GIT_HTTP_TEST_REJECT_REFS, then defers to the
# repository's own update hook, if any.
refname=$1
set -f
old_ifs=$IFS
IFS='
'
for rejected in $GIT_HTTP_TEST_REJECT_REFS; do
    if [ "$rejected" = "$refname" ]; then
        echo "test git server: updates of $refname are refused" >&2
        exit 1
    fi
done
IFS=$old_ifs
own_hook="${GIT_DIR:-.}/hooks/update"
if [ -x "$own_hook" ]; then
    exec "$own_hook" "$@"
fi
exit 0
"#;

const FORWARDED_HOOKS: [&str; 3] = ["pre-receive", "post-receive", "post-update"];

fn forwarding_hook(name: &str) -> String {
    format!(
        "#!/bin/sh\n\
         # Written by GitHttpServer::reject_pushes_to (test support): defers to the\n\
         # repository's own {name} hook, if any.\n\
         own_hook=\"${{GIT_DIR:-.}}/hooks/{name}\"\n\
         if [ -x \"$own_hook\" ]; then\n    exec \"$own_hook\" \"$@\"\nfi\nexit 0\n"
    )
}

fn write_hooks(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    write_script(&dir.join("update"), UPDATE_HOOK)?;
    for name in FORWARDED_HOOKS {
        write_script(&dir.join(name), &forwarding_hook(name))?;
    }
    Ok(())
}

/// Writes an executable script atomically (temporary file, then rename), so a
/// hook that is running or about to run is never seen half-written.
fn write_script(path: &Path, contents: &str) -> io::Result<()> {
    if fs::read_to_string(path).is_ok_and(|existing| existing == contents) {
        return Ok(());
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, contents)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))?;
    }
    fs::rename(&tmp, path)
}
