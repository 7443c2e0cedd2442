//! SIGINT and SIGTERM cancel the run's [`CancellationToken`]: every provider call, tool call
//! and git operation watches it, so the run unwinds, temporary directories are removed, and
//! nothing is pushed after the signal. A second signal exits at once with status 130, after
//! removing every temporary directory still on disk (git work still winding down gets a moment
//! to end first; see [`crate::repo::cleanup`]).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How long the second interrupt waits for git work that is ending to remove its own clone.
const SECOND_INTERRUPT_GRACE: Duration = Duration::from_secs(1);

pub fn cancel_on_signal(cancel: CancellationToken) {
    tokio::spawn(async move {
        let mut signals = 0;
        loop {
            if !wait_for_signal().await {
                return;
            }
            signals += 1;
            if signals == 1 {
                cancel.cancel();
            } else {
                let left = tokio::task::spawn_blocking(|| crate::repo::cleanup::settle(SECOND_INTERRUPT_GRACE))
                    .await
                    .unwrap_or_default();
                if left.is_empty() {
                    eprintln!("upkeep: second interrupt; temporary directories removed, exiting now");
                } else {
                    for (path, error) in left {
                        eprintln!("upkeep: second interrupt; could not remove {}: {error}", path.display());
                    }
                }
                std::process::exit(130);
            }
        }
    });
}

/// Waits for SIGINT or SIGTERM; false when signals cannot be watched.
async fn wait_for_signal() -> bool {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        tracing::warn!("cannot watch SIGINT/SIGTERM; interrupts will kill upkeep without cleanup");
        return false;
    };
    tokio::select! {
        _ = interrupt.recv() => true,
        _ = terminate.recv() => true,
    }
}
