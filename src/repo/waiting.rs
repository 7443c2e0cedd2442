//! Waiting on the network from libgit2's thread without ever being stuck there: each step of
//! a transfer runs on a small runtime of its own while the calling thread polls, every tenth
//! of a second, for an interrupt, the run's deadline and a stall (nothing moved for the stall
//! timeout). Giving up drops the request, and with it the connection.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::transfer::Transfer;

/// How often a waiting transfer checks for an interrupt, the deadline and a stall.
const POLL: Duration = Duration::from_millis(100);

/// The runtime the requests run on: one worker thread is plenty for waiting on sockets.
fn runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("upkeep-git-http")
                .enable_all()
                .build()
                .map_err(|error| format!("could not start the git HTTP runtime: {error}"))
        })
        .as_ref()
        .map_err(|message| io::Error::other(message.clone()))
}

/// When bytes last moved, for the stall timeout.
pub(super) struct Activity {
    epoch: Instant,
    last_millis: AtomicU64,
}

impl Activity {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            last_millis: AtomicU64::new(0),
        })
    }

    pub(super) fn touch(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_millis.fetch_max(now, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_millis.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }
}

/// Runs `future` on the transport's runtime and waits for it, giving up (and dropping the
/// request with its connection) on an interrupt, the deadline, or when nothing moved for the
/// stall timeout.
pub(super) fn wait<T: Send + 'static>(
    transfer: &Transfer,
    activity: &Activity,
    future: impl Future<Output = T> + Send + 'static,
) -> io::Result<T> {
    let (sender, receiver) = sync_channel(1);
    let task = runtime()?.spawn(async move {
        // The receiver is gone only when the wait was abandoned.
        let _ = sender.send(future.await);
    });
    activity.touch();
    loop {
        match receiver.recv_timeout(POLL) {
            Ok(value) => {
                activity.touch();
                return Ok(value);
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("the HTTP request to the git server was lost"));
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        if transfer.stop().is_stopped() {
            task.abort();
            return Err(io::Error::other("git transfer stopped"));
        }
        if activity.idle() >= transfer.stall_timeout() {
            task.abort();
            transfer.mark_stalled();
            return Err(io::Error::other(format!(
                "the git server sent nothing for {} s",
                transfer.stall_timeout().as_secs()
            )));
        }
    }
}
