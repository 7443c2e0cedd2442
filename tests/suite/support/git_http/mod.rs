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
//!
//! This module runs the listener and its connections; parsing, handling, the CGI call and the
//! hooks live in its submodules.

// Not every test binary uses every part of this module.
#![allow(dead_code)]

mod cgi;
mod handler;
mod hooks;
mod request;
mod response;
mod shared;

use std::collections::HashMap;
use std::fs;
use std::io::{BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use self::handler::handle_request;
use self::hooks::write_hooks;
use self::shared::{Shared, lock};

pub use self::shared::RecordedRequest;

/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A smart-HTTP git server on `127.0.0.1`, serving every bare repository under a
/// root directory. Stops its threads and closes its listener on drop.
pub struct GitHttpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
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
