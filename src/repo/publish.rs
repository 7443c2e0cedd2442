//! Committing, diffing and pushing the clone's work: the bot branch only, never the base; a
//! change holding a known secret is refused before anything is committed; a push goes to the
//! operator's URL only, forced or as a fast-forward.

use std::path::Path;

use git2::{PushOptions, Repository};

use super::error::WorkspaceError;
use super::fetch::{Failure, credential_callbacks};
use super::git::Workspace;
use super::layout::{BOT_BRANCH_PREFIX, GitAuth, Identity};
use super::setup::with_transfer;
use super::transport::Transfer;
use crate::secrets::Redactor;

/// How a branch is pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PushMode {
    /// Replaces whatever the remote branch holds (a bot branch rebuilt on a fresh base).
    Force,
    /// Only on top of what the remote branch holds (a pull request others may have pushed to).
    FastForward,
    /// Replaces the remote branch only while it still points at this commit (a bot branch
    /// rebased onto its base): `git push --force-with-lease`.
    ForceWithLease(git2::Oid),
}

impl Workspace {
    /// [`Workspace::commit_blocking`] on a blocking thread.
    pub async fn commit(
        &self,
        branch: &str,
        message: &str,
        identity: &Identity,
        secrets: &Redactor,
    ) -> Result<git2::Oid, WorkspaceError> {
        let (branch, message, identity, secrets) =
            (branch.to_owned(), message.to_owned(), identity.clone(), secrets.clone());
        self.run_blocking(move |workspace| workspace.commit_blocking(&branch, &message, &identity, &secrets))
            .await
    }

    /// Commits every change (additions, edits, deletions; ignored files excluded) on `branch`,
    /// creating it from HEAD when needed. The base branch itself is never committed to: HEAD
    /// moves to the bot branch first. A change whose content holds a value of `secrets` is
    /// refused before anything is committed: every added or modified file is checked whole, so
    /// a token assembled over several edits is caught as surely as one written at once.
    pub fn commit_blocking(
        &self,
        branch: &str,
        message: &str,
        identity: &Identity,
        secrets: &Redactor,
    ) -> Result<git2::Oid, WorkspaceError> {
        if !branch.starts_with(BOT_BRANCH_PREFIX) {
            return Err(WorkspaceError::NotABotBranch(branch.to_owned()));
        }
        let stop = &self.inner.stop;
        let repo = self.open()?;
        let mut index = repo.index()?;
        let mut unless_stopped = |_: &Path, _: &[u8]| if stop.is_stopped() { -1 } else { 0 };
        let added = index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, Some(&mut unless_stopped))
            .and_then(|()| index.update_all(["*"], Some(&mut unless_stopped)));
        if let Some(reason) = stop.reason() {
            return Err(reason.into());
        }
        added?;
        // The index goes to disk only with the commit it stages (below): a commit refused here
        // must leave its changes unsaved, never staged as if saved (see `changes.rs`).
        let tree_id = index.write_tree()?;
        let parent = repo.head()?.peel_to_commit()?;
        if parent.tree_id() == tree_id {
            return Err(WorkspaceError::NothingToCommit);
        }
        let tree = repo.find_tree(tree_id)?;
        refuse_secrets(&repo, &parent.tree()?, &tree, secrets)?;
        if secrets.contains(message.as_bytes()) {
            return Err(WorkspaceError::SecretInChange("the commit message".into()));
        }
        let refname = format!("refs/heads/{branch}");
        if repo.head()?.name().ok() != Some(refname.as_str()) {
            repo.branch(branch, &parent, true)?;
            repo.set_head(&refname)?;
        }
        let signature = git2::Signature::now(&identity.name, &identity.email)?;
        let commit = repo.commit(Some("HEAD"), &signature, &signature, message, &tree, &[&parent])?;
        // An index that could not be written no longer holds HEAD's tree: unsaved work is then
        // diffed from the tree, as with any index upkeep did not mark.
        match index.write() {
            Ok(()) => self.mark_index_clean(),
            Err(_) => self.forget_clean_index(),
        }
        Ok(commit)
    }

    /// The unified diff from the base commit to HEAD, as `git diff` prints it.
    pub async fn diff_from_base(&self) -> Result<String, WorkspaceError> {
        self.run_blocking(Workspace::diff_from_base_blocking).await
    }

    pub fn diff_from_base_blocking(&self) -> Result<String, WorkspaceError> {
        let repo = self.open()?;
        let base_tree = repo.find_commit(self.inner.base_commit)?.tree()?;
        let head_tree = repo.head()?.peel_to_tree()?;
        let diff = repo.diff_tree_to_tree(Some(&base_tree), Some(&head_tree), None)?;
        Ok(patch_text(&diff)?)
    }

    /// [`Workspace::push_blocking`] on a blocking thread.
    pub async fn push(&self, branch: &str, auth: &GitAuth) -> Result<(), WorkspaceError> {
        let (branch, auth) = (branch.to_owned(), auth.clone());
        self.run_blocking(move |workspace| workspace.push_blocking(&branch, &auth))
            .await
    }

    /// Pushes `branch` to the operator's URL, forced (bot branches are rewritten when a pull
    /// request is updated).
    pub fn push_blocking(&self, branch: &str, auth: &GitAuth) -> Result<(), WorkspaceError> {
        self.push_refspec(branch, auth, PushMode::Force)
    }

    /// Pushes `branch`, forced or only as a fast-forward of what the remote has.
    pub(super) fn push_refspec(&self, branch: &str, auth: &GitAuth, mode: PushMode) -> Result<(), WorkspaceError> {
        if !branch.starts_with(BOT_BRANCH_PREFIX) || branch == self.inner.base {
            return Err(WorkspaceError::NotABotBranch(branch.to_owned()));
        }
        let stop = &self.inner.stop;
        let url = &self.inner.url;
        let repo = self.open()?;
        let mut remote = repo.remote_anonymous(url)?;
        let attempts = std::cell::Cell::new(0u32);
        let rejection = std::cell::RefCell::new(None::<String>);
        let mut callbacks = credential_callbacks(&attempts);
        callbacks.push_update_reference(|_refname, status| {
            if let Some(message) = status {
                *rejection.borrow_mut() = Some(message.to_owned());
            }
            Ok(())
        });
        if let PushMode::ForceWithLease(expected) = mode {
            let target = format!("refs/heads/{branch}");
            // The server's advertised tip, checked before anything is sent.
            callbacks.push_negotiation(move |updates| {
                match updates
                    .iter()
                    .find(|update| update.dst_refname().ok() == Some(target.as_str()))
                {
                    Some(update) if update.src() != expected => Err(git2::Error::from_str(
                        "the branch moved on the remote since it was rebased (lease not held); nothing was pushed",
                    )),
                    _ => Ok(()),
                }
            });
        }
        callbacks.sideband_progress(|_| !stop.is_stopped());
        let mut options = PushOptions::new();
        options.remote_callbacks(callbacks);
        let force = if mode == PushMode::FastForward { "" } else { "+" };
        let refspec = format!("{force}refs/heads/{branch}:refs/heads/{branch}");
        let transfer = Transfer::new(url, auth.token.clone(), stop.clone(), self.inner.stall_timeout);
        let result = with_transfer(&transfer, || remote.push(&[refspec.as_str()], Some(&mut options)))?;
        drop(options);
        if let Err(error) = result {
            let failure = Failure::Git {
                error,
                attempts: attempts.get(),
            };
            return Err(failure.into_error(&transfer, stop, url, auth, "push", |message| {
                WorkspaceError::PushRejected {
                    branch: branch.to_owned(),
                    message,
                }
            }));
        }
        if let Some(message) = rejection.into_inner() {
            return Err(WorkspaceError::PushRejected {
                branch: branch.to_owned(),
                message,
            });
        }
        Ok(())
    }
}

/// Refuses a change that would commit a known secret value: every file the change adds or
/// modifies is read from the new tree and checked whole.
fn refuse_secrets(
    repo: &Repository,
    old: &git2::Tree<'_>,
    new: &git2::Tree<'_>,
    secrets: &Redactor,
) -> Result<(), WorkspaceError> {
    if secrets.is_empty() {
        return Ok(());
    }
    let diff = repo.diff_tree_to_tree(Some(old), Some(new), None)?;
    for delta in diff.deltas() {
        let file = delta.new_file();
        if !file.exists() || file.id().is_zero() {
            continue;
        }
        let Ok(blob) = repo.find_blob(file.id()) else {
            continue;
        };
        if secrets.contains(blob.content()) {
            let path = file.path().map(|p| p.display().to_string()).unwrap_or_default();
            return Err(WorkspaceError::SecretInChange(path));
        }
    }
    Ok(())
}

/// A diff as `git diff` prints it (file headers, hunk headers, and lines with their `+`, `-`
/// or space), decoded lossily so binary content cannot break a report.
pub fn patch_text(diff: &git2::Diff<'_>) -> Result<String, git2::Error> {
    let mut patch = Vec::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            patch.push(line.origin() as u8);
        }
        patch.extend_from_slice(line.content());
        true
    })?;
    Ok(String::from_utf8_lossy(&patch).into_owned())
}
