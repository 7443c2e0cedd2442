//! Continuous mode's fresh copy without a new clone: the same workspace brought back to exactly
//! what the remote's base branch has now, for about the cost of a `git fetch` plus
//! `git reset --hard`.
//!
//! Guarantees: afterwards the work tree holds exactly the tip's files (every local change,
//! untracked and ignored file removed), HEAD is on the base branch at the tip, no other local
//! branch or leftover ref exists (tags stay, as a fresh clone has them), the scratch directory
//! is empty, and the fetched tip is the new base commit. On error the clone is in an unknown
//! state: it is dropped (and removed), never worked in.

use std::sync::Arc;

use git2::Repository;

use super::checkout::{empty_dir, remove_path};
use super::fetch::{self, FetchSpec};
use super::git::{GitAuth, Workspace, WorkspaceError, finish};
use super::layout::open_layout;
use super::stop::Stop;
use super::transport::Transfer;

impl Workspace {
    /// [`Workspace::refresh_blocking`] on a blocking thread. On error the workspace is dropped
    /// (and its directory removed): a half-refreshed clone is never worked in.
    pub async fn refresh(mut self, auth: GitAuth, stop: Stop) -> Result<Self, WorkspaceError> {
        let blocking_stop = stop.clone();
        let task = tokio::task::spawn_blocking(move || self.refresh_blocking(&auth, &blocking_stop).map(|()| self));
        finish(task, &stop).await
    }

    /// Brings the clone back to exactly what the remote's base branch has now, as a fresh clone
    /// would have it; `stop` governs this and every later operation on the workspace.
    pub fn refresh_blocking(&mut self, auth: &GitAuth, stop: &Stop) -> Result<(), WorkspaceError> {
        let inner = Arc::get_mut(&mut self.inner).ok_or_else(|| {
            WorkspaceError::Io(std::io::Error::other(
                "the clone is still in use by git work that has not ended",
            ))
        })?;
        inner.stop = stop.clone();
        let repo = open_layout(&inner.layout)?;
        let transfer = Transfer::new(&inner.url, auth.token.clone(), stop.clone(), inner.stall_timeout);
        let spec = FetchSpec {
            url: &inner.url,
            branch: Some(&inner.base),
            depth: inner.depth,
            is_local: inner.is_local,
            have: Some(inner.base_commit),
        };
        let url = inner.url.clone();
        let fetched = fetch::fetch_branch(&repo, &spec, &transfer, stop).map_err(|failure| {
            failure.into_error(&transfer, stop, &url, auth, "fetch", |message| WorkspaceError::Fetch {
                url: url.clone(),
                message,
            })
        })?;
        let tip = repo.find_commit(fetched.tip)?;
        // Checked out from wherever HEAD is now (maybe the bot's branch): HEAD is the baseline,
        // so files the bot committed that the tip lacks are removed too. libgit2 removes
        // untracked and ignored files itself but, like `git clean -fdx`, skips nested
        // repositories; it names every untracked and ignored entry to `notify`, so what it left
        // behind is removed below without a second walk of the tree.
        let strays = std::cell::RefCell::new(Vec::new());
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout
            .force()
            .remove_untracked(true)
            .remove_ignored(true)
            .notify_on(git2::CheckoutNotificationType::UNTRACKED | git2::CheckoutNotificationType::IGNORED)
            .notify(|_, path, _, _, _| {
                if let Some(path) = path {
                    strays.borrow_mut().push(path.to_owned());
                }
                !stop.is_stopped()
            });
        let checked_out = repo.checkout_tree(tip.as_object(), Some(&mut checkout));
        drop(checkout);
        if let Some(reason) = stop.reason() {
            return Err(reason.into());
        }
        checked_out?;
        for stray in strays.into_inner() {
            remove_path(&inner.layout.root.join(stray))?;
        }
        let local = format!("refs/heads/{}", inner.base);
        repo.reference(&local, tip.id(), true, "upkeep: refresh to the remote's tip")?;
        repo.set_head(&local)?;
        repo.cleanup_state()?;
        delete_leftover_refs(&repo, &inner.base)?;
        empty_dir(&inner.layout.scratch)?;
        inner.base_commit = tip.id();
        inner.saved = std::sync::Mutex::new(None);
        // A forced checkout of the tip leaves the index holding the tip's tree.
        self.mark_index_clean();
        Ok(())
    }
}

/// Deletes every ref a fresh clone of the base would not have: other local branches (the
/// bot's), the stash, notes, remote-tracking branches other than the base's (they would be
/// stale: a refresh fetches only the base). Tags stay, as a fresh clone has them.
fn delete_leftover_refs(repo: &Repository, base: &str) -> Result<(), WorkspaceError> {
    let keep = [format!("refs/heads/{base}"), format!("refs/remotes/origin/{base}")];
    let mut leftovers = Vec::new();
    for reference in repo.references()? {
        let reference = reference?;
        let name = reference.name()?;
        if !name.starts_with("refs/tags/") && !keep.iter().any(|kept| kept == name) {
            leftovers.push(name.to_owned());
        }
    }
    for name in leftovers {
        repo.find_reference(&name)?.delete()?;
    }
    Ok(())
}
