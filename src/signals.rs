//! SIGINT and SIGTERM cancel the run's [`CancellationToken`]: every provider call, tool call
//! and clone watches it, so the run unwinds, temporary directories are removed by their
//! destructors, and nothing is pushed after the signal. A second signal exits at once.

use tokio_util::sync::CancellationToken;

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
                eprintln!("upkeep: second interrupt, exiting now");
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
