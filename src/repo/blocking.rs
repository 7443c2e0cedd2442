//! Work on the work tree run off the async threads. A walk of a large repository, a search
//! reading tens of thousands of files or a read of a 16 MiB file takes seconds; run inside an
//! async call it holds its thread until it is done, and the interrupt the run is racing it
//! against is not even looked at meanwhile (DESIGN section 9: an interrupt takes effect within
//! a second on any repository size).
//!
//! [`WorkTree::off_thread`] runs the work on tokio's blocking pool with its own handle on the
//! tree and a clone of the run's cancellation token, and returns on the interrupt at once. The
//! work checks the token between files (`repo::walk` does it before every entry), so work the
//! caller stopped waiting for ends within one file's work instead of running on behind the
//! unwinding run; what it returns then is dropped, never taken for a whole result.

use tokio_util::sync::CancellationToken;

use super::StopReason;
use super::fs::WorkTree;

impl WorkTree {
    /// Runs `work` on a blocking thread and waits for its value or for `cancel`, whichever
    /// comes first. `work` gets the tree and the token; it should stop once the token is
    /// cancelled (its value is then dropped: the caller gets [`StopReason::Interrupted`]).
    pub(crate) async fn off_thread<T, F>(&self, cancel: &CancellationToken, work: F) -> Result<T, StopReason>
    where
        T: Send + 'static,
        F: FnOnce(&WorkTree, &CancellationToken) -> T + Send + 'static,
    {
        if cancel.is_cancelled() {
            return Err(StopReason::Interrupted);
        }
        let tree = self.clone();
        let token = cancel.clone();
        let handle = tokio::task::spawn_blocking(move || work(&tree, &token));
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(StopReason::Interrupted),
            joined = handle => match joined {
                // Work that saw the token stopped part-way: its value is not the whole answer.
                Ok(_) if cancel.is_cancelled() => Err(StopReason::Interrupted),
                Ok(value) => Ok(value),
                // A panic in the work is a bug of upkeep's: it goes on as it would have in place.
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                // The runtime is shutting down: the run is ending anyway.
                Err(_) => Err(StopReason::Interrupted),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn tree() -> (tempfile::TempDir, WorkTree) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.txt"), "a\n").expect("write");
        let tree = WorkTree::open(dir.path(), &[]).expect("open");
        (dir, tree)
    }

    #[tokio::test]
    async fn the_work_runs_on_its_own_handle_and_its_value_comes_back() {
        let (_dir, tree) = tree();
        let cancel = CancellationToken::new();
        let text = tree
            .off_thread(&cancel, |tree, _| tree.read_text("a.txt", 16).expect("read"))
            .await;
        assert_eq!(text, Ok(Some("a\n".to_owned())));
    }

    /// The work never ends by itself: only the token stops it. The caller returns on the
    /// interrupt, and the work then sees the token and ends.
    #[tokio::test]
    async fn an_interrupt_returns_at_once_and_the_work_sees_it() {
        let (_dir, tree) = tree();
        let cancel = CancellationToken::new();
        let (started, wait_started) = mpsc::channel();
        let (ended, wait_ended) = mpsc::channel();
        let interrupter = cancel.clone();
        let waiting = tree.off_thread(&cancel, move |_, token| {
            let _ = started.send(());
            while !token.is_cancelled() {
                std::thread::yield_now();
            }
            let _ = ended.send(());
        });
        let interrupt = async move {
            tokio::task::spawn_blocking(move || wait_started.recv())
                .await
                .expect("joined")
                .expect("the work started");
            interrupter.cancel();
        };
        let (result, ()) = tokio::join!(waiting, interrupt);
        assert_eq!(result, Err(StopReason::Interrupted));
        tokio::task::spawn_blocking(move || wait_ended.recv())
            .await
            .expect("joined")
            .expect("the work saw the token and ended");
    }

    #[tokio::test]
    async fn nothing_starts_once_interrupted() {
        let (_dir, tree) = tree();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let result = tree.off_thread(&cancel, |_, _| panic!("must not run")).await;
        assert_eq!(result, Err(StopReason::Interrupted));
    }
}
