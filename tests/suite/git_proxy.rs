//! A TCP proxy on loopback in front of a test git server, that can make the git protocol's
//! POSTs stall (the server stops answering mid-operation) or trickle (a slow link), so tests can
//! interrupt git work in the middle and check timeouts. Everything else passes through.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone, Copy)]
pub enum Behaviour {
    /// From the POST to this service (`git-upload-pack`, `git-receive-pack`) on, nothing more
    /// is forwarded on that connection in either direction; the connection stays open.
    Stall(&'static str),
    /// The server's answers reach the client at this many bytes per second, in one piece a
    /// second (so a client sees long pauses between pieces, as on a congested link).
    Throttle(usize),
    /// On each connection, the server's answers pass until this many bytes went through; then
    /// nothing more does (a server that goes silent in the middle of sending a pack).
    StallAfter(usize),
}

pub struct GitProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    behaviour: Behaviour,
    stopping: AtomicBool,
    stalls: AtomicUsize,
    streams: Mutex<Vec<TcpStream>>,
}

impl GitProxy {
    /// `upstream` as a server URL gives it: `http://127.0.0.1:PORT`.
    pub fn start(upstream: &str, behaviour: Behaviour) -> Self {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .parse()
            .expect("upstream is http://IP:PORT");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let shared = Arc::new(Shared {
            upstream,
            behaviour,
            stopping: AtomicBool::new(false),
            stalls: AtomicUsize::new(0),
            streams: Mutex::new(Vec::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept = std::thread::spawn(move || {
            for client in listener.incoming() {
                if accept_shared.stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(accept_shared.upstream) else {
                    continue;
                };
                relay(client, server, &accept_shared);
            }
        });
        Self {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many connections were stalled so far.
    pub fn stalls(&self) -> usize {
        self.shared.stalls.load(Ordering::SeqCst)
    }
}

impl Drop for GitProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5));
        if let Ok(streams) = self.shared.streams.lock() {
            for stream in streams.iter() {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Two pumps per connection; `stalled` is shared so the answer direction stops too.
fn relay(client: TcpStream, server: TcpStream, shared: &Arc<Shared>) {
    let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    if let Ok(mut streams) = shared.streams.lock() {
        streams.extend([client.try_clone(), server.try_clone()].into_iter().flatten());
    }
    let stalled = Arc::new(AtomicBool::new(false));
    let (up_shared, up_stalled) = (Arc::clone(shared), Arc::clone(&stalled));
    std::thread::spawn(move || pump_requests(client_reader, server, &up_shared, &up_stalled));
    let down_shared = Arc::clone(shared);
    std::thread::spawn(move || pump_answers(server_reader, client, &down_shared, &stalled));
}

fn pump_requests(mut from: TcpStream, mut to: TcpStream, shared: &Shared, stalled: &AtomicBool) {
    let mut window: Vec<u8> = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let Ok(n) = from.read(&mut buf) else { return };
        if n == 0 || shared.stopping.load(Ordering::SeqCst) {
            let _ = to.shutdown(Shutdown::Write);
            return;
        }
        if let Behaviour::Stall(service) = shared.behaviour {
            window.extend_from_slice(&buf[..n]);
            let needle = format!("/{service} HTTP/1.1");
            if window.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                stalled.store(true, Ordering::SeqCst);
                shared.stalls.fetch_add(1, Ordering::SeqCst);
                // Swallow everything from now on, keeping the connection open.
                while matches!(from.read(&mut buf), Ok(n) if n > 0) {}
                return;
            }
            let keep = window.len().saturating_sub(256);
            window.drain(..keep);
        }
        if to.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

fn pump_answers(mut from: TcpStream, mut to: TcpStream, shared: &Shared, stalled: &AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut passed = 0;
    loop {
        let Ok(mut n) = from.read(&mut buf) else { return };
        if n == 0 || shared.stopping.load(Ordering::SeqCst) {
            let _ = to.shutdown(Shutdown::Write);
            return;
        }
        if let Behaviour::StallAfter(limit) = shared.behaviour {
            if passed + n >= limit && !stalled.swap(true, Ordering::SeqCst) {
                shared.stalls.fetch_add(1, Ordering::SeqCst);
            }
            n = n.min(limit.saturating_sub(passed));
            passed += n;
            if n == 0 {
                continue;
            }
        } else if stalled.load(Ordering::SeqCst) {
            continue;
        }
        let pieces: Vec<&[u8]> = match shared.behaviour {
            Behaviour::Throttle(per_second) => buf[..n].chunks(per_second.max(1)).collect(),
            Behaviour::Stall(_) | Behaviour::StallAfter(_) => vec![&buf[..n]],
        };
        for piece in pieces {
            if to.write_all(piece).is_err() {
                return;
            }
            if let Behaviour::Throttle(_) = shared.behaviour {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}
