//! What one git operation's transfers may do: the token and the only origin it goes to, the
//! stop that ends the operation early, the stall timeout, and whether it stalled.
//!
//! Why a file of its own: the HTTP transport reads it, the waits read it, and the code that
//! starts an operation hands it over; each of them depends on this leaf, not on the others.
//!
//! libgit2 creates a transport on the calling thread, inside the fetch or push call, and offers
//! no channel to pass it anything: the operation's [`Transfer`] reaches it through a
//! thread-local context, set by [`scoped`] for exactly the duration of the operation and read
//! by [`current`].
//!
//! Guarantees: the token is offered only for requests to the origin (scheme, host, port) of the
//! URL the operator gave, pinned when the operation starts, and only while the operation runs,
//! on its own thread; it is forgotten afterwards, even when the operation panics.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::Url;
use secrecy::SecretString;

use super::stop::Stop;

thread_local! {
    /// What the transports libgit2 creates on this thread may do; see [`scoped`].
    static CONTEXT: RefCell<Option<Arc<Transfer>>> = const { RefCell::new(None) };
}

/// What the transfers of one git operation (a clone, fetch or push) may do.
pub(crate) struct Transfer {
    token: Option<SecretString>,
    /// The only origin the token is sent to: the operator's URL's.
    origin: Option<Origin>,
    stop: Stop,
    stall: Duration,
    stalled: AtomicBool,
}

impl Transfer {
    /// For an operation on the repository at `url` (the URL the operator gave).
    pub(crate) fn new(url: &str, token: Option<SecretString>, stop: Stop, stall: Duration) -> Arc<Self> {
        Arc::new(Self {
            origin: origin_of(url),
            token,
            stop,
            stall,
            stalled: AtomicBool::new(false),
        })
    }

    /// Whether a transfer was abandoned because nothing moved for the stall timeout.
    pub(crate) fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    pub(crate) fn stall_timeout(&self) -> Duration {
        self.stall
    }

    pub(super) fn stop(&self) -> &Stop {
        &self.stop
    }

    pub(super) fn mark_stalled(&self) {
        self.stalled.store(true, Ordering::Relaxed);
    }

    /// Whether the operation has a token at all (to word a refusal).
    pub(super) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The token, for a request to `target`: only on the pinned origin.
    pub(super) fn token_for(&self, target: &str) -> Option<SecretString> {
        match (origin_of(target), &self.origin) {
            (Some(target), Some(origin)) if target == *origin => self.token.clone(),
            _ => None,
        }
    }
}

/// Scheme, host and port (the scheme's default when the URL names none).
type Origin = (String, String, u16);

/// The origin of an HTTP(S) URL; `None` for anything else, which then never gets the token.
fn origin_of(url: &str) -> Option<Origin> {
    let url = Url::parse(url).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    Some((
        url.scheme().to_owned(),
        url.host_str()?.to_ascii_lowercase(),
        url.port_or_known_default()?,
    ))
}

/// Runs `operation` with `transfer` as this thread's context, and restores the previous one
/// afterwards, even on a panic.
pub(super) fn scoped<T>(transfer: &Arc<Transfer>, operation: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<Transfer>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONTEXT.with(|context| *context.borrow_mut() = self.0.take());
        }
    }
    let previous = CONTEXT.with(|context| context.replace(Some(Arc::clone(transfer))));
    let _restore = Restore(previous);
    operation()
}

/// The transfer of the operation running on this thread, if [`scoped`] set one.
pub(super) fn current() -> Option<Arc<Transfer>> {
    CONTEXT.with(|context| context.borrow().clone())
}

#[cfg(test)]
#[path = "transfer_tests.rs"]
mod tests;
