//! What the server's threads share: its configuration, the requests recorded for tests to
//! inspect, the refused refs and the open connections.

use std::collections::HashMap;
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};

use super::request::find_header;

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

pub(super) struct Shared {
    pub(super) root: PathBuf,
    pub(super) backend: PathBuf,
    pub(super) token: Option<String>,
    pub(super) hooks_dir: PathBuf,
    pub(super) requests: Mutex<Vec<RecordedRequest>>,
    pub(super) rejected_refs: Mutex<Vec<String>>,
    pub(super) connections: Mutex<HashMap<u64, TcpStream>>,
    pub(super) stopping: AtomicBool,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
