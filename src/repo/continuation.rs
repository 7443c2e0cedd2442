//! A cycle that goes on from a bot branch the remote already has: a review follow-up on the
//! bot's pull request, or an answered question on an issue that has one.
//!
//! Guarantees: the work tree starts at the branch's tip as the remote has it (commits others
//! pushed to it included), while the base branch stays what pull requests target; the branch is
//! pushed only as a fast-forward of what the remote has, never forced, so no commit the bot did
//! not make is ever overwritten. When someone pushed to the branch while the cycle ran, the
//! cycle's own commits are replayed on top of theirs and pushed again; a replay that conflicts
//! is refused, and their commits stay as they are.

use git2::{Oid, Repository};

use super::fetch::{self, FetchSpec};
use super::git::{BOT_BRANCH_PREFIX, GitAuth, PushMode, Workspace, WorkspaceError};
use super::transport::Transfer;

impl Workspace {
    /// Checks out `branch` as the remote has it now, on a blocking thread. Later commits go on
    /// top of it.
    pub async fn continue_branch(&self, branch: &str, auth: &GitAuth) -> Result<(), WorkspaceError> {
        let (branch, auth) = (branch.to_owned(), auth.clone());
        self.run_blocking(move |workspace| workspace.continue_branch_blocking(&branch, &auth))
            .await
    }

    pub fn continue_branch_blocking(&self, branch: &str, auth: &GitAuth) -> Result<(), WorkspaceError> {
        if !branch.starts_with(BOT_BRANCH_PREFIX) || branch == self.base_branch() {
            return Err(WorkspaceError::NotABotBranch(branch.to_owned()));
        }
        let repo = self.open()?;
        let tip = self.fetch_remote_tip(&repo, branch, auth)?;
        let commit = repo.find_commit(tip)?;
        repo.branch(branch, &commit, true)?;
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout.force().remove_untracked(true);
        repo.checkout_tree(commit.as_object(), Some(&mut checkout))?;
        repo.set_head(&format!("refs/heads/{branch}"))?;
        // The branch's commits are already carried by its pull request: only what the cycle
        // changes on top of them is unsaved work (a follow-up that changes nothing may finish).
        self.forget_clean_index();
        self.mark_saved(tip);
        Ok(())
    }

    /// Pushes `branch` on top of what the remote has. When the remote moved since the cycle
    /// started from it, the cycle's commits are replayed onto the remote's tip first.
    pub async fn push_on_top(&self, branch: &str, auth: &GitAuth) -> Result<(), WorkspaceError> {
        let (branch, auth) = (branch.to_owned(), auth.clone());
        self.run_blocking(move |workspace| workspace.push_on_top_blocking(&branch, &auth))
            .await
    }

    pub fn push_on_top_blocking(&self, branch: &str, auth: &GitAuth) -> Result<(), WorkspaceError> {
        let first = match self.push_refspec(branch, auth, PushMode::FastForward) {
            Ok(()) => return Ok(()),
            Err(error @ (WorkspaceError::PushRejected { .. } | WorkspaceError::Git(_))) => error,
            Err(other) => return Err(other),
        };
        let repo = self.open()?;
        let tracking = format!("refs/remotes/origin/{branch}");
        let started_from = repo.refname_to_id(&tracking)?;
        let theirs = self.fetch_remote_tip(&repo, branch, auth)?;
        if theirs == started_from {
            // Nobody pushed: the refusal was something else.
            return Err(first);
        }
        tracing::info!("{branch} moved on the remote while the cycle ran; replaying this cycle's commits on top");
        let ours = repo.refname_to_id(&format!("refs/heads/{branch}"))?;
        let replayed = replay(&repo, started_from, ours, theirs).map_err(|message| WorkspaceError::PushRejected {
            branch: branch.to_owned(),
            message,
        })?;
        {
            let commit = repo.find_commit(replayed)?;
            let mut checkout = git2::build::CheckoutBuilder::new();
            checkout.force();
            repo.checkout_tree(commit.as_object(), Some(&mut checkout))?;
            // The branch is HEAD: moved as a reference (`Repository::branch` refuses HEAD's).
            let refname = format!("refs/heads/{branch}");
            repo.reference(&refname, replayed, true, "upkeep: replayed on the remote's tip")?;
            repo.set_head(&refname)?;
        }
        drop(repo);
        self.push_refspec(branch, auth, PushMode::FastForward)
    }

    /// Fetches `branch` from the operator's URL into `refs/remotes/origin/<branch>` and returns
    /// the remote's tip, as deep as the clone was made.
    fn fetch_remote_tip(&self, repo: &Repository, branch: &str, auth: &GitAuth) -> Result<Oid, WorkspaceError> {
        self.fetch_branch_tip(repo, branch, auth, self.depth())
    }

    /// Fetches `branch` from the operator's URL into `refs/remotes/origin/<branch>`, `depth`
    /// commits deep (0: the whole history), and returns the remote's tip.
    pub(super) fn fetch_branch_tip(
        &self,
        repo: &Repository,
        branch: &str,
        auth: &GitAuth,
        depth: u32,
    ) -> Result<Oid, WorkspaceError> {
        let stop = self.stop();
        let url = self.url().to_owned();
        let transfer = Transfer::new(&url, auth.token.clone(), stop.clone(), self.stall_timeout());
        let spec = FetchSpec {
            url: &url,
            branch: Some(branch),
            depth,
            is_local: self.is_local(),
            have: None,
        };
        let fetched = fetch::fetch_branch(repo, &spec, &transfer, stop).map_err(|failure| {
            failure.into_error(&transfer, stop, &url, auth, "fetch", |message| WorkspaceError::Fetch {
                url: url.clone(),
                message,
            })
        })?;
        Ok(fetched.tip)
    }
}

/// Replays the commits `from..to` (first-parent, oldest first) onto `onto`, keeping each
/// commit's message and authors; returns the new tip. A conflict is an error naming the commit.
fn replay(repo: &Repository, from: Oid, to: Oid, onto: Oid) -> Result<Oid, String> {
    let git = |error: git2::Error| error.message().to_owned();
    let mut walk = repo.revwalk().map_err(git)?;
    walk.push(to).map_err(git)?;
    walk.hide(from).map_err(git)?;
    walk.simplify_first_parent().map_err(git)?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
        .map_err(git)?;
    let commits: Vec<Oid> = walk.collect::<Result<_, _>>().map_err(git)?;
    let mut tip = repo.find_commit(onto).map_err(git)?;
    for oid in commits {
        let commit = repo.find_commit(oid).map_err(git)?;
        let mut index = repo.cherrypick_commit(&commit, &tip, 0, None).map_err(git)?;
        if index.has_conflicts() {
            return Err(format!(
                "someone pushed to the branch while this cycle ran, and commit {} (\"{}\") conflicts with their commits; their commits were kept and nothing was pushed",
                &oid.to_string()[..12],
                commit.summary().ok().flatten().unwrap_or("")
            ));
        }
        let tree = repo.find_tree(index.write_tree_to(repo).map_err(git)?).map_err(git)?;
        let message = commit.message().unwrap_or_default();
        let new = repo
            .commit(None, &commit.author(), &commit.committer(), message, &tree, &[&tip])
            .map_err(git)?;
        tip = repo.find_commit(new).map_err(git)?;
    }
    Ok(tip.id())
}

impl Workspace {
    /// The commit HEAD points at (after a push, the one the remote has).
    pub async fn head_commit(&self) -> Result<Oid, WorkspaceError> {
        self.run_blocking(|workspace| Ok(workspace.open()?.head()?.peel_to_commit()?.id()))
            .await
    }
}
