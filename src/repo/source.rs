//! The operator's own repository when `--repo` is a local path (the `local` forge): its bot
//! branches are read, and a bot branch is written into it.
//!
//! The source is as untrusted as any repository: its configuration, a `commondir` file and
//! alternates must not redirect what upkeep writes. So nothing is fetched or pushed through a
//! remote (no URL, no `insteadOf`, no transport): the bot branch's new objects are packed from
//! the clone and written into the source's object store directly, and the branch ref and its
//! description are set there. Those are the only writes (besides the ref's log); alternates
//! are only ever read, and a `commondir` is followed only in the shape git itself creates for a
//! linked work tree. No hook runs, and user and system configuration do not apply
//! ([`super::setup`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use git2::{BranchType, Repository};

use super::git::{BOT_BRANCH_PREFIX, Workspace, WorkspaceError};

/// One of the bot's branches in the source, not merged into the base yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BotBranch {
    pub name: String,
    /// The first line of the branch description, or the name when it has none.
    pub title: String,
    /// The task the branch is for, when it has one without an issue.
    pub task_key: Option<String>,
}

/// What [`LocalSource::publish`] writes: the workspace's `branch`, with `description` as its
/// branch description and `task_key` beside it (both kept as they are when `description` is
/// `None`: a rebase changes commits, not the pull request). With `lease`, the branch is moved
/// only while the source's branch still points there.
#[derive(Debug, Clone, Default)]
pub(crate) struct BranchUpdate {
    pub branch: String,
    pub description: Option<String>,
    pub task_key: Option<String>,
    pub lease: Option<git2::Oid>,
}

/// The git config key, beside the branch description, that holds the task a bot branch is for
/// (see [`crate::forge::task::task_key`]).
const TASK_KEY_CONFIG: &str = "upkeeptask";

#[derive(Debug, Clone)]
pub(crate) struct LocalSource {
    path: PathBuf,
    /// The email on the bot's commits: a bot branch holding commits by anyone else is never
    /// moved to a tip that drops them.
    bot_email: String,
}

impl LocalSource {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            bot_email: crate::repo::Identity::default().email,
        }
    }

    /// The email the bot commits with (`--author-email`).
    pub(crate) fn with_bot_email(mut self, email: &str) -> Self {
        self.bot_email = email.to_owned();
        self
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the repository at exactly this path (no search upwards), refusing a `commondir`
    /// that points anywhere but the repository a linked work tree belongs to.
    pub(super) fn open(&self) -> Result<Repository, WorkspaceError> {
        super::setup::setup()?;
        let repo = Repository::open(&self.path)?;
        let git_dir = repo.path().canonicalize()?;
        let common = repo.commondir().canonicalize()?;
        let linked_work_tree = git_dir
            .parent()
            .is_some_and(|parent| parent == common.join("worktrees"));
        if git_dir != common && !linked_work_tree {
            return Err(WorkspaceError::UnsafeSource {
                path: self.path.clone(),
                reason: format!(
                    "its git directory {} names {} as its common directory, which is not the repository it is a work tree of",
                    git_dir.display(),
                    common.display()
                ),
            });
        }
        Ok(repo)
    }

    /// The bot's branches that are not merged into `base` (on a blocking thread).
    pub(crate) async fn open_bot_branches(&self, base: &str) -> Result<Vec<BotBranch>, WorkspaceError> {
        let (source, base) = (self.clone(), base.to_owned());
        tokio::task::spawn_blocking(move || source.open_bot_branches_blocking(&base))
            .await
            .map_err(|join| WorkspaceError::Io(std::io::Error::other(join.to_string())))?
    }

    fn open_bot_branches_blocking(&self, base: &str) -> Result<Vec<BotBranch>, WorkspaceError> {
        let repo = self.open()?;
        let config = repo.config()?;
        let base_tip = repo
            .find_branch(base, BranchType::Local)
            .ok()
            .and_then(|branch| branch.get().target());
        let mut open = Vec::new();
        for entry in repo.branches(Some(BranchType::Local))? {
            let (branch, _) = entry?;
            let Some(name) = branch
                .name()?
                .filter(|name| name.starts_with(BOT_BRANCH_PREFIX))
                .map(str::to_owned)
            else {
                continue;
            };
            let Some(tip) = branch.get().target() else { continue };
            let merged = match base_tip {
                Some(base_tip) => tip == base_tip || repo.graph_descendant_of(base_tip, tip)?,
                None => false,
            };
            if merged {
                continue;
            }
            let description = config
                .get_string(&format!("branch.{name}.description"))
                .unwrap_or_default();
            let title = description.lines().next().unwrap_or(&name).to_owned();
            let task_key = config.get_string(&format!("branch.{name}.{TASK_KEY_CONFIG}")).ok();
            open.push(BotBranch { name, title, task_key });
        }
        Ok(open)
    }

    /// Writes the workspace's branch into the source as `update` says, on a blocking thread. Returns whether the branch
    /// existed before. Refused when the branch is checked out in the source (moving it would
    /// desynchronise that work tree).
    pub(crate) async fn publish(&self, workspace: &Workspace, update: BranchUpdate) -> Result<bool, WorkspaceError> {
        let source = self.clone();
        workspace
            .run_blocking(move |workspace| source.publish_blocking(workspace, &update))
            .await
    }

    pub(crate) fn publish_blocking(
        &self,
        workspace: &Workspace,
        update: &BranchUpdate,
    ) -> Result<bool, WorkspaceError> {
        let branch = update.branch.as_str();
        if !branch.starts_with(BOT_BRANCH_PREFIX) {
            return Err(WorkspaceError::NotABotBranch(branch.to_owned()));
        }
        let refname = format!("refs/heads/{branch}");
        let source = self.open()?;
        if source
            .head()
            .ok()
            .and_then(|head| head.name().ok().map(str::to_owned))
            .as_deref()
            == Some(&refname)
        {
            return Err(WorkspaceError::PushRejected {
                branch: branch.to_owned(),
                message: "the branch is checked out in the repository; check out another branch first".into(),
            });
        }
        let existed = source.find_reference(&refname).is_ok();
        let clone = workspace.open()?;
        let tip = clone
            .find_reference(&refname)?
            .target()
            .ok_or_else(|| WorkspaceError::NotABotBranch(branch.to_owned()))?;
        let odb = source.odb()?;
        if !odb.exists(tip) {
            let mut walk = clone.revwalk()?;
            walk.push(tip)?;
            if odb.exists(workspace.base_commit()) {
                walk.hide(workspace.base_commit())?;
            }
            let mut pack = clone.packbuilder()?;
            pack.insert_walk(&mut walk)?;
            let mut writer = odb.packwriter()?;
            let stop = workspace.stop();
            let mut written = Ok(());
            pack.foreach(|bytes| {
                written = writer.write_all(bytes);
                written.is_ok() && !stop.is_stopped()
            })?;
            written?;
            if let Some(reason) = stop.reason() {
                return Err(reason.into());
            }
            writer.commit()?;
        }
        let current = source
            .find_reference(&refname)
            .ok()
            .and_then(|reference| reference.target());
        if let Some(lease) = update.lease.filter(|lease| current != Some(*lease)) {
            // `--force-with-lease`: the branch moved since the clone read it; whatever was
            // committed meanwhile is kept.
            return Err(WorkspaceError::PushRejected {
                branch: branch.to_owned(),
                message: format!(
                    "the branch moved since upkeep read it at {} (lease not held); nothing was written",
                    &lease.to_string()[..12]
                ),
            });
        }
        if let Some(old) = current {
            refuse_dropping_others(&source, old, tip, &self.bot_email).map_err(|message| {
                WorkspaceError::PushRejected {
                    branch: branch.to_owned(),
                    message,
                }
            })?;
        }
        source.reference(&refname, tip, true, "upkeep: pull request")?;
        let Some(description) = &update.description else {
            return Ok(existed);
        };
        let mut config = source.config()?;
        config.set_str(&format!("branch.{branch}.description"), description)?;
        let task = format!("branch.{branch}.{TASK_KEY_CONFIG}");
        match &update.task_key {
            Some(key) => config.set_str(&task, key)?,
            // Gone already is fine.
            None => {
                let _ = config.remove(&task);
            }
        }
        Ok(existed)
    }
}

impl LocalSource {
    /// The notes upkeep kept beside bot branch `branch` (marker lines, oldest first).
    pub(crate) async fn notes(&self, branch: &str) -> Result<Vec<String>, WorkspaceError> {
        let (source, branch) = (self.clone(), branch.to_owned());
        tokio::task::spawn_blocking(move || {
            let repo = source.open()?;
            let config = repo.config()?.snapshot()?;
            let mut notes = Vec::new();
            if let Ok(mut entries) = config.multivar(&format!("branch.{branch}.{NOTE_CONFIG}"), None) {
                while let Some(entry) = entries.next() {
                    if let Ok(value) = entry?.value() {
                        notes.push(value.to_owned());
                    }
                }
            }
            Ok(notes)
        })
        .await
        .map_err(|join| WorkspaceError::Io(std::io::Error::other(join.to_string())))?
    }

    /// Keeps `note` (one line) beside bot branch `branch`, after the ones kept before.
    pub(crate) async fn add_note(&self, branch: &str, note: &str) -> Result<(), WorkspaceError> {
        if !branch.starts_with(BOT_BRANCH_PREFIX) {
            return Err(WorkspaceError::NotABotBranch(branch.to_owned()));
        }
        let (source, branch, note) = (self.clone(), branch.to_owned(), note.replace(['\n', '\r'], " "));
        tokio::task::spawn_blocking(move || {
            let repo = source.open()?;
            let mut config = repo.config()?;
            // A pattern no value matches: the note is added, none replaced.
            config.set_multivar(&format!("branch.{branch}.{NOTE_CONFIG}"), "^\\b$", &note)?;
            Ok(())
        })
        .await
        .map_err(|join| WorkspaceError::Io(std::io::Error::other(join.to_string())))?
    }
}

/// The git config key, beside the branch description, that holds upkeep's notes about a bot
/// branch (one value per note: see [`crate::forge::mergeable`]).
const NOTE_CONFIG: &str = "upkeepnote";

/// Refuses to move a bot branch from `old` to `new` when that would drop a commit someone other
/// than the bot (author or committer other than `bot_email`) made.
fn refuse_dropping_others(repo: &Repository, old: git2::Oid, new: git2::Oid, bot_email: &str) -> Result<(), String> {
    let git = |error: git2::Error| error.message().to_owned();
    let mut walk = repo.revwalk().map_err(git)?;
    walk.push(old).map_err(git)?;
    walk.hide(new).map_err(git)?;
    let mut foreign = Vec::new();
    for oid in walk {
        let commit = repo.find_commit(oid.map_err(git)?).map_err(git)?;
        let by_bot = |signature: git2::Signature<'_>| {
            signature
                .email()
                .is_ok_and(|email| email.eq_ignore_ascii_case(bot_email))
        };
        if !(by_bot(commit.author()) && by_bot(commit.committer())) {
            foreign.push(format!(
                "{} by {}: {}",
                &commit.id().to_string()[..12],
                commit.author().email().unwrap_or("someone"),
                crate::text::escape_control(commit.summary().ok().flatten().unwrap_or_default())
            ));
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the branch has commits upkeep did not make ({}), and moving it would drop them, so it was left as it is; ask a human with ask_question",
        foreign.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use super::{BranchUpdate, LocalSource};
    use crate::repo::{CloneRequest, Identity, Stop, Workspace, WorkspaceError};

    fn git(dir: &Path, args: &[&str]) -> String {
        let output = Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=someone", "-c", "user.email=someone@example.com"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// A commit lands on the bot branch after the clone read it: the lease on the tip the clone
    /// read is not held, nothing is written, and that commit stays.
    #[test]
    fn a_commit_made_meanwhile_breaks_the_lease_and_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path();
        git(path, &["init", "-q", "-b", "main"]);
        std::fs::write(path.join("README.md"), "hi\n").expect("write");
        git(path, &["add", "-A"]);
        git(path, &["commit", "-q", "-m", "start"]);
        git(path, &["branch", "upkeep/tick", "main"]);
        let read = git(path, &["rev-parse", "upkeep/tick"]);

        let request = CloneRequest::new(path.to_str().expect("utf-8"), true);
        let workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
        std::fs::write(workspace.root().join("NEW.md"), "redone\n").expect("write");
        workspace
            .commit_blocking("upkeep/tick", "Redo", &Identity::default(), &Default::default())
            .expect("commit");

        git(path, &["checkout", "-q", "upkeep/tick"]);
        std::fs::write(path.join("MINE.md"), "the operator's\n").expect("write");
        git(path, &["add", "-A"]);
        // Another run's commit, by the bot: only the lease tells it from the tip the clone read.
        let bot = format!("user.email={}", Identity::default().email);
        git(path, &["-c", &bot, "commit", "-q", "-m", "meanwhile"]);
        git(path, &["checkout", "-q", "main"]);
        let meanwhile = git(path, &["rev-parse", "upkeep/tick"]);

        let update = BranchUpdate {
            branch: "upkeep/tick".into(),
            lease: Some(git2::Oid::from_str(&read).expect("oid")),
            ..BranchUpdate::default()
        };
        let error = LocalSource::new(path.to_path_buf())
            .publish_blocking(&workspace, &update)
            .expect_err("the lease is not held");
        assert!(
            matches!(&error, WorkspaceError::PushRejected { message, .. } if message.contains("lease not held")),
            "{error}"
        );
        assert_eq!(git(path, &["rev-parse", "upkeep/tick"]), meanwhile, "kept");
    }
}
