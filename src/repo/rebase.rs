//! Bringing a bot branch up to date with its base (DESIGN section 14, "Mergeable"): a bot pull
//! request whose base moved on is rebased onto it, when only the bot has committed to it.
//!
//! Guarantees:
//! - Only branches under `upkeep/` are rewritten, and only when every commit on the branch
//!   since its merge base was authored and committed by the bot's identity (its email). A
//!   human's commit (or a merge) on it means [`RebaseOutcome::HumanCommits`]: nothing is
//!   rewritten or pushed, and the caller comments instead.
//! - A commit that does not apply on the new base is [`RebaseOutcome::Conflict`], naming the
//!   commit and the paths; nothing is pushed, and the caller runs a fix cycle or comments.
//! - The push is forced with a lease: the remote branch is replaced only while it still points
//!   at the tip that was rebased (checked in libgit2's push negotiation against what the
//!   server advertises, as `git push --force-with-lease` does), so a commit pushed meanwhile is
//!   never lost; the push is then refused.
//! - The branch and base are fetched with their whole history (a shallow clone is deepened; a
//!   local clone, shallow only by its `shallow` file over the source's objects, has that cut
//!   lifted): the merge base must be known to tell the bot's commits from the base's.
//! - Whether a branch merges into its base is decided by a test merge in the clone
//!   ([`Workspace::merge_check`]) that is never written anywhere; the change a branch makes is
//!   read as a bounded patch ([`Workspace::branch_change`]) for a cycle that makes it again.
//! - [`Workspace::rebase_in_clone`] rebases without pushing, for a forge that publishes the
//!   branch its own way (the local forge writes into the source); the push's lease is the
//!   caller's, on the `from` tip it returns.

use git2::{Oid, Repository, Signature};

use super::git::{BOT_BRANCH_PREFIX, GitAuth, Identity, PushMode, Workspace, WorkspaceError};

/// What [`Workspace::rebase_bot_branch_blocking`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebaseOutcome {
    /// The branch already contains its base's tip, or the base already holds every commit (or
    /// every change) of the branch: nothing to do.
    UpToDate,
    /// The branch was rebased onto the base's tip (and, by [`Workspace::rebase_bot_branch_blocking`],
    /// pushed); `commits` were brought over, those whose change the base holds dropped.
    Rebased { from: Oid, to: Oid, commits: usize },
    /// Someone other than the bot committed to the branch: left untouched.
    HumanCommits { commits: Vec<ForeignCommit> },
    /// A commit of the branch does not apply on the base: left untouched.
    Conflict {
        commit: Oid,
        summary: String,
        paths: Vec<String>,
    },
}

/// Whether a bot branch merges into its base ([`Workspace::merge_check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeCheck {
    /// The base holds the branch already.
    Merged,
    /// A merge of `tip` (the branch's tip) would be clean.
    Clean { tip: Oid },
    /// A merge of `tip` (the branch's tip) would conflict in `paths`.
    Conflicts { tip: Oid, paths: Vec<String> },
}

/// A commit on a bot branch that the bot did not make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignCommit {
    pub commit: Oid,
    /// `Name <email>` of its author.
    pub author: String,
    pub summary: String,
}

impl Workspace {
    /// Rebases the remote's `branch` onto the remote's base branch when only `bot` committed to
    /// it, and pushes it with a lease; on success the work tree is on the rebased branch.
    pub fn rebase_bot_branch_blocking(
        &self,
        branch: &str,
        bot: &Identity,
        auth: &GitAuth,
    ) -> Result<RebaseOutcome, WorkspaceError> {
        let outcome = self.rebase_in_clone_blocking(branch, bot, auth)?;
        if let RebaseOutcome::Rebased { from, to, .. } = &outcome {
            self.push_with_lease_blocking(branch, auth, *from)?;
            self.mark_saved(*to);
        }
        Ok(outcome)
    }

    /// [`Workspace::rebase_in_clone_blocking`] on a blocking thread.
    pub async fn rebase_in_clone(
        &self,
        branch: &str,
        bot: &Identity,
        auth: &GitAuth,
    ) -> Result<RebaseOutcome, WorkspaceError> {
        let (branch, bot, auth) = (branch.to_owned(), bot.clone(), auth.clone());
        self.run_blocking(move |workspace| workspace.rebase_in_clone_blocking(&branch, &bot, &auth))
            .await
    }

    /// Pushes the clone's `branch` over the remote's while the remote still holds `lease`
    /// (`git push --force-with-lease`).
    pub fn push_with_lease_blocking(&self, branch: &str, auth: &GitAuth, lease: Oid) -> Result<(), WorkspaceError> {
        self.push_refspec(branch, auth, PushMode::ForceWithLease(lease))
    }

    /// [`Workspace::push_with_lease_blocking`] on a blocking thread.
    pub async fn push_with_lease(&self, branch: &str, auth: &GitAuth, lease: Oid) -> Result<(), WorkspaceError> {
        let (branch, auth) = (branch.to_owned(), auth.clone());
        self.run_blocking(move |workspace| workspace.push_with_lease_blocking(&branch, &auth, lease))
            .await
    }

    /// Rebases the remote's `branch` onto the remote's base branch in the clone only, when only
    /// `bot` committed to it: on success the clone's `branch` is the rebased one and the work
    /// tree is on it; nothing is pushed (the caller publishes it with a lease on `from`).
    pub fn rebase_in_clone_blocking(
        &self,
        branch: &str,
        bot: &Identity,
        auth: &GitAuth,
    ) -> Result<RebaseOutcome, WorkspaceError> {
        if !branch.starts_with(BOT_BRANCH_PREFIX) || branch == self.base_branch() {
            return Err(WorkspaceError::NotABotBranch(branch.to_owned()));
        }
        self.unshallow_local()?;
        let repo = self.open()?;
        let base_tip = self.fetch_whole_branch(&repo, self.base_branch(), auth)?;
        let tip = self.fetch_whole_branch(&repo, branch, auth)?;
        if tip == base_tip || repo.graph_descendant_of(tip, base_tip)? {
            return Ok(RebaseOutcome::UpToDate);
        }
        let mut walk = repo.revwalk()?;
        walk.push(tip)?;
        walk.hide(base_tip)?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
        let commits: Vec<Oid> = walk.collect::<Result<_, _>>()?;
        if commits.is_empty() {
            // Every commit of the branch is already in the base (it was merged): nothing to
            // bring over, and nothing to push.
            return Ok(RebaseOutcome::UpToDate);
        }
        let foreign: Vec<ForeignCommit> = commits
            .iter()
            .filter_map(|oid| repo.find_commit(*oid).ok())
            .filter(|commit| !made_by(commit, bot))
            .map(|commit| ForeignCommit {
                commit: commit.id(),
                author: format!(
                    "{} <{}>",
                    commit.author().name().unwrap_or("?"),
                    commit.author().email().unwrap_or("?")
                ),
                summary: commit.summary().ok().flatten().unwrap_or("").to_owned(),
            })
            .collect();
        if !foreign.is_empty() {
            return Ok(RebaseOutcome::HumanCommits { commits: foreign });
        }
        let committer = Signature::now(&bot.name, &bot.email)?;
        let mut new_tip = repo.find_commit(base_tip)?;
        let mut applied = 0;
        for oid in &commits {
            let commit = repo.find_commit(*oid)?;
            let mut index = repo.cherrypick_commit(&commit, &new_tip, 0, None)?;
            if index.has_conflicts() {
                let paths = conflict_paths(&index)?;
                return Ok(RebaseOutcome::Conflict {
                    commit: *oid,
                    summary: commit.summary().ok().flatten().unwrap_or("").to_owned(),
                    paths,
                });
            }
            let tree = repo.find_tree(index.write_tree_to(&repo)?)?;
            if tree.id() == new_tip.tree_id() {
                // The base holds this change already (a squash merge of it): dropped, as
                // `git rebase` drops it, rather than left as an empty commit.
                continue;
            }
            let message = commit.message_raw().unwrap_or_default();
            let new = repo.commit(None, &commit.author(), &committer, message, &tree, &[&new_tip])?;
            new_tip = repo.find_commit(new)?;
            applied += 1;
        }
        if applied == 0 {
            // Every change of the branch is in the base already: nothing to bring over.
            return Ok(RebaseOutcome::UpToDate);
        }
        let refname = format!("refs/heads/{branch}");
        repo.reference(&refname, new_tip.id(), true, "upkeep: rebased onto the base")?;
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout.force().remove_untracked(true);
        repo.checkout_tree(new_tip.as_object(), Some(&mut checkout))?;
        repo.set_head(&refname)?;
        let to = new_tip.id();
        Ok(RebaseOutcome::Rebased {
            from: tip,
            to,
            commits: applied,
        })
    }

    /// [`Workspace::merge_check_blocking`] on a blocking thread.
    pub async fn merge_check(&self, branch: &str, auth: &GitAuth) -> Result<MergeCheck, WorkspaceError> {
        let (branch, auth) = (branch.to_owned(), auth.clone());
        self.run_blocking(move |workspace| workspace.merge_check_blocking(&branch, &auth))
            .await
    }

    /// Whether the remote's `branch` merges cleanly into the remote's base, decided in the
    /// clone (the test merge's result is never written anywhere).
    pub fn merge_check_blocking(&self, branch: &str, auth: &GitAuth) -> Result<MergeCheck, WorkspaceError> {
        self.unshallow_local()?;
        let repo = self.open()?;
        let base_tip = self.fetch_whole_branch(&repo, self.base_branch(), auth)?;
        let tip = self.fetch_whole_branch(&repo, branch, auth)?;
        if tip == base_tip || repo.graph_descendant_of(base_tip, tip)? {
            return Ok(MergeCheck::Merged);
        }
        let index = repo.merge_commits(&repo.find_commit(base_tip)?, &repo.find_commit(tip)?, None)?;
        if !index.has_conflicts() {
            return Ok(MergeCheck::Clean { tip });
        }
        Ok(MergeCheck::Conflicts {
            tip,
            paths: conflict_paths(&index)?,
        })
    }

    /// [`Workspace::branch_change_blocking`] on a blocking thread.
    pub async fn branch_change(&self, tip: Oid, limit: usize) -> Result<String, WorkspaceError> {
        self.run_blocking(move |workspace| workspace.branch_change_blocking(tip, limit))
            .await
    }

    /// The change commit `tip` makes over its merge base with the clone's base (fetched whole
    /// by [`Workspace::merge_check_blocking`]), as a patch cut at `limit` bytes.
    pub fn branch_change_blocking(&self, tip: Oid, limit: usize) -> Result<String, WorkspaceError> {
        let repo = self.open()?;
        let base = repo.refname_to_id(&format!("refs/remotes/origin/{}", self.base_branch()))?;
        let merge_base = repo.merge_base(base, tip)?;
        let old = repo.find_commit(merge_base)?.tree()?;
        let new = repo.find_commit(tip)?.tree()?;
        let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
        let mut patch = Vec::new();
        diff.print(git2::DiffFormat::Patch, |_, _, line| {
            if matches!(line.origin(), '+' | '-' | ' ') {
                patch.push(line.origin() as u8);
            }
            patch.extend_from_slice(line.content());
            patch.len() <= limit
        })
        .or_else(|error| {
            // Stopping the printer at the limit is not a failure.
            if patch.len() > limit { Ok(()) } else { Err(error) }
        })?;
        let text = String::from_utf8_lossy(&patch).into_owned();
        Ok(match text.len() > limit {
            true => format!(
                "{}\n[... the change is longer; cut at {limit} bytes]",
                crate::text::prefix_bytes(&text, limit).0
            ),
            false => text,
        })
    }

    /// A local clone reads every object of the source already; its history is cut only by the
    /// `shallow` file written at clone time, which would hide the merge base and make the base's
    /// own history read as commits on the branch. Lifting the cut is the whole deepening; it
    /// must happen before the repository is opened (libgit2 reads the file once per opening).
    pub(super) fn unshallow_local(&self) -> Result<(), WorkspaceError> {
        if !self.is_local() {
            return Ok(());
        }
        match std::fs::remove_file(self.git_dir().join("shallow")) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error.into()),
            _ => Ok(()),
        }
    }

    /// Fetches `branch` with its whole history (deepening a shallow clone) into
    /// `refs/remotes/origin/<branch>` and returns the remote's tip.
    fn fetch_whole_branch(&self, repo: &Repository, branch: &str, auth: &GitAuth) -> Result<Oid, WorkspaceError> {
        if self.is_local() {
            // Whole already: see `unshallow_local`.
            return self.fetch_branch_tip(repo, branch, auth, 0);
        }
        // A full clone stays full; a shallow one is deepened to the whole history (libgit2
        // reads the largest depth as "unshallow").
        let depth = if self.depth() == 0 { 0 } else { u32::MAX };
        self.fetch_branch_tip(repo, branch, auth, depth)
    }
}

/// The paths an index's conflicts are in, each once.
fn conflict_paths(index: &git2::Index) -> Result<Vec<String>, WorkspaceError> {
    let mut paths: Vec<String> = index
        .conflicts()?
        .filter_map(Result::ok)
        .filter_map(|conflict| conflict.our.or(conflict.their).or(conflict.ancestor))
        .map(|entry| String::from_utf8_lossy(&entry.path).into_owned())
        .collect();
    paths.dedup();
    Ok(paths)
}

/// Whether the bot made `commit`: a single-parent commit whose author and committer both
/// carry the bot's email (a human's commit cherry-picked by the bot keeps its human author).
fn made_by(commit: &git2::Commit<'_>, bot: &Identity) -> bool {
    let is_bot = |signature: git2::Signature<'_>| {
        signature
            .email()
            .is_ok_and(|email| email.eq_ignore_ascii_case(&bot.email))
    };
    commit.parent_count() == 1 && is_bot(commit.author()) && is_bot(commit.committer())
}
