//! The temporary clone a cycle works in, and every git operation on it (git2).
//!
//! Layout inside the run's private temporary directory ([`TempRoot`], removed on every way
//! out): `git/` is the git directory, `repo/` the work tree, `tmp/` a scratch directory for
//! commands. The work tree has no `.git` entry at all: the git directory is opened by path,
//! never discovered, so nothing written into the work tree (by a command, or committed in the
//! repository) can change which repository upkeep commits to or where it pushes. Commands may
//! write only the work tree and the scratch directory; they get `GIT_DIR` and `GIT_WORK_TREE`
//! ([`Workspace::git_env`]) so `git log` and `git diff` still work, but cannot write history:
//! only upkeep commits.
//!
//! Guarantees: fetches and pushes go to the URL the operator gave, through an anonymous remote
//! (never a remote or URL read from any configuration), and no user or system git configuration
//! applies ([`super::setup`]); the token reaches the server only as an HTTP header, only on the
//! operator URL's origin ([`super::transport`]), never in a URL or the git directory; the base
//! branch is never committed to or pushed; only branches under `upkeep/` are force-pushed; a
//! push the server refuses is an error, not success. All of it runs on blocking threads, ends
//! within moments of an interrupt or the run's deadline ([`Stop`]), and gives up on a transfer
//! that stalls.
//!
//! Continuous mode reuses one workspace: [`Workspace::refresh`] (in `refresh.rs`) brings it back
//! to exactly what the remote's base branch has now.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use git2::{PushOptions, Repository};
use secrecy::SecretString;
use tokio::task::JoinHandle;

use super::checkout::checkout_fresh;
use super::cleanup::{Scope, TempRoot};
pub use super::error::WorkspaceError;
use super::fetch::{self, Failure, FetchSpec, credential_callbacks};
use super::stop::{DEFAULT_STALL_TIMEOUT, Stop};
use super::transport::{Transfer, with_transfer};
use crate::secrets::Redactor;

/// Prefix of every branch upkeep creates, and the only branches it force-pushes.
pub const BOT_BRANCH_PREFIX: &str = "upkeep/";

/// How long the async side still waits for blocking git work after asking it to stop. The work
/// polls the same [`Stop`] and usually ends within a tenth of a second; this bounds the rest
/// (libgit2 steps that cannot be interrupted). Work left running after that keeps its clone
/// until it ends, and the run's cleanup removes the directory in any case.
const WIND_DOWN: Duration = Duration::from_secs(3);

/// Who commits. The default is an obviously-automated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Default for Identity {
    fn default() -> Self {
        Self {
            name: "upkeep".into(),
            email: "upkeep@users.noreply.github.com".into(),
        }
    }
}

/// Credentials for fetch and push. HTTP(S) remotes get the token as Basic credentials (username
/// `x-access-token`, as GitHub expects; see [`super::transport`]); SSH uses the running
/// ssh-agent.
#[derive(Clone, Default)]
pub struct GitAuth {
    pub token: Option<SecretString>,
}

impl std::fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GitAuth {{ token: {} }}",
            if self.token.is_some() { "set" } else { "none" }
        )
    }
}

#[derive(Debug, Clone)]
pub struct CloneRequest {
    /// The repository URL (or local path) exactly as the operator gave it.
    pub url: String,
    /// Local paths use libgit2's local transport, which cannot make shallow clones; their
    /// history is already on disk, so a full clone costs little.
    pub is_local: bool,
    pub base: Option<String>,
    /// 0 = full history.
    pub depth: u32,
    pub auth: GitAuth,
    /// A transfer with nothing moving for this long is abandoned.
    pub stall_timeout: Duration,
    /// The cleanup scope the temporary directory belongs to (the run's).
    pub scope: Scope,
}

impl CloneRequest {
    /// A depth-1 clone of the default branch, without credentials.
    pub fn new(url: impl Into<String>, is_local: bool) -> Self {
        Self {
            url: url.into(),
            is_local,
            base: None,
            depth: 1,
            auth: GitAuth::default(),
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            scope: Scope::default(),
        }
    }
}

/// Where the parts of a workspace live.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub root: PathBuf,
    pub git_dir: PathBuf,
    pub scratch: PathBuf,
}

pub(super) struct Inner {
    pub layout: Layout,
    pub url: String,
    pub base: String,
    pub base_commit: git2::Oid,
    // How the clone was made, so that a refresh fetches the same way.
    pub depth: u32,
    pub is_local: bool,
    pub stall_timeout: Duration,
    pub stop: Stop,
    /// The last commit a pull request of this cycle carries (`None`: the base commit); see
    /// `changes.rs`.
    pub saved: std::sync::Mutex<Option<git2::Oid>>,
    // Last: removes the directory once everything above is done with it.
    pub _dir: TempRoot,
}

/// A clone and its scratch directory. Cheap handles to it travel into blocking threads; the
/// directory is removed when the last one is dropped.
pub struct Workspace {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("root", &self.inner.layout.root)
            .field("git_dir", &self.inner.layout.git_dir)
            .field("base", &self.inner.base)
            .finish()
    }
}

/// Waits for blocking git work. When the run must stop, waits at most [`WIND_DOWN`] more for the
/// work to end by itself (it polls the same `stop`), then leaves it.
pub(super) async fn finish<T>(
    mut task: JoinHandle<Result<T, WorkspaceError>>,
    stop: &Stop,
) -> Result<T, WorkspaceError> {
    let joined = |joined: Result<Result<T, WorkspaceError>, tokio::task::JoinError>| {
        joined.map_err(|join| WorkspaceError::Io(std::io::Error::other(join.to_string())))?
    };
    let reason = tokio::select! {
        result = &mut task => return joined(result),
        reason = stop.stopped() => reason,
    };
    match tokio::time::timeout(WIND_DOWN, &mut task).await {
        Ok(result) => joined(result),
        Err(_) => {
            tracing::warn!("git work did not stop within {WIND_DOWN:?} of {reason:?}; leaving it to end");
            Err(reason.into())
        }
    }
}

impl Workspace {
    /// Clones on a blocking thread into a new temporary directory, registered for cleanup before
    /// the clone starts; on any error (an interrupt included) the partial clone is removed.
    pub async fn clone_repo(request: CloneRequest, stop: Stop) -> Result<Self, WorkspaceError> {
        let dir = TempRoot::create("upkeep-", &request.scope).map_err(WorkspaceError::TempDir)?;
        let blocking_stop = stop.clone();
        let task = tokio::task::spawn_blocking(move || Self::clone_into(dir, &request, &blocking_stop));
        finish(task, &stop).await
    }

    pub fn clone_blocking(request: &CloneRequest, stop: &Stop) -> Result<Self, WorkspaceError> {
        let dir = TempRoot::create("upkeep-", &request.scope).map_err(WorkspaceError::TempDir)?;
        Self::clone_into(dir, request, stop)
    }

    /// `git init` of a separate git directory, a fetch of the base branch from the operator's
    /// URL, then a checkout into the work tree: what `git clone --separate-git-dir` does, without
    /// the `.git` file it would leave in the work tree.
    fn clone_into(dir: TempRoot, request: &CloneRequest, stop: &Stop) -> Result<Self, WorkspaceError> {
        super::setup::setup()?;
        let started = std::time::Instant::now();
        let layout = Layout {
            root: dir.path().join("repo"),
            git_dir: dir.path().join("git"),
            scratch: dir.path().join("tmp"),
        };
        std::fs::create_dir(&layout.root)?;
        std::fs::create_dir(&layout.scratch)?;
        let mut options = git2::RepositoryInitOptions::new();
        options.bare(true).external_template(false).mkpath(false);
        let repo = Repository::init_opts(&layout.git_dir, &options)?;
        repo.set_workdir(&layout.root, false)?;

        let transfer = Transfer::new(
            &request.url,
            request.auth.token.clone(),
            stop.clone(),
            request.stall_timeout,
        );
        let spec = FetchSpec {
            url: &request.url,
            branch: request.base.as_deref(),
            depth: request.depth,
            is_local: request.is_local,
            have: None,
        };
        let fetched = fetch::fetch_branch(&repo, &spec, &transfer, stop).map_err(|failure| {
            failure.into_error(&transfer, stop, &request.url, &request.auth, "clone", |message| {
                WorkspaceError::Clone {
                    url: request.url.clone(),
                    message,
                }
            })
        })?;
        let local = format!("refs/heads/{}", fetched.branch);
        repo.reference(&local, fetched.tip, true, "upkeep: clone")?;
        repo.set_head(&local)?;
        let tree = repo.find_commit(fetched.tip)?.tree_id();
        // Closed before the checkout: its pack stays mapped while it is open (see
        // `checkout_fresh`).
        drop(repo);
        let downloaded = started.elapsed();
        checkout_fresh(&layout, tree, stop)?;
        tracing::debug!(?downloaded, checked_out = ?started.elapsed() - downloaded, "cloned {}", request.url);
        Ok(Self {
            inner: Arc::new(Inner {
                layout,
                url: request.url.clone(),
                base: fetched.branch,
                base_commit: fetched.tip,
                saved: std::sync::Mutex::new(None),
                depth: request.depth,
                is_local: request.is_local,
                stall_timeout: request.stall_timeout,
                stop: stop.clone(),
                _dir: dir,
            }),
        })
    }

    /// Runs `work` on a blocking thread with a handle to this workspace, as every git operation
    /// on it must run: off the async threads, and given up on when the run must stop.
    pub(super) async fn run_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Workspace) -> Result<T, WorkspaceError> + Send + 'static,
    ) -> Result<T, WorkspaceError> {
        let handle = Workspace {
            inner: Arc::clone(&self.inner),
        };
        let task = tokio::task::spawn_blocking(move || work(&handle));
        finish(task, &self.inner.stop).await
    }

    /// What ends this workspace's git work early.
    pub(super) fn stop(&self) -> &Stop {
        &self.inner.stop
    }

    /// The work tree: the clone's top-level directory (canonical: symlinks resolved).
    pub fn root(&self) -> &Path {
        &self.inner.layout.root
    }

    /// The git directory, outside the work tree and outside everything a command may write.
    pub fn git_dir(&self) -> &Path {
        &self.inner.layout.git_dir
    }

    /// A private scratch directory outside the work tree, removed with it.
    pub fn scratch(&self) -> &Path {
        &self.inner.layout.scratch
    }

    /// What a command needs in its environment to read history with the git CLI.
    pub fn git_env(&self) -> Vec<(String, String)> {
        vec![
            ("GIT_DIR".into(), self.git_dir().display().to_string()),
            ("GIT_WORK_TREE".into(), self.root().display().to_string()),
        ]
    }

    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The branch pull requests target.
    pub fn base_branch(&self) -> &str {
        &self.inner.base
    }

    pub fn base_commit(&self) -> git2::Oid {
        self.inner.base_commit
    }

    /// Opens the git directory by path (never discovered from the work tree) with the work tree
    /// attached in memory only.
    pub(super) fn open(&self) -> Result<Repository, WorkspaceError> {
        open_layout(&self.inner.layout)
    }

    /// Whether the working tree differs from HEAD (untracked, unignored files included).
    pub fn has_changes_blocking(&self) -> Result<bool, WorkspaceError> {
        let repo = self.open()?;
        let mut options = git2::StatusOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false);
        Ok(!repo.statuses(Some(&mut options))?.is_empty())
    }

    /// The branch HEAD points at now.
    pub async fn current_branch(&self) -> Result<String, WorkspaceError> {
        self.run_blocking(Workspace::current_branch_blocking).await
    }

    pub fn current_branch_blocking(&self) -> Result<String, WorkspaceError> {
        let repo = self.open()?;
        let head = repo.head()?;
        Ok(head.shorthand().unwrap_or("HEAD").to_owned())
    }

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
        index.write()?;
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
        Ok(repo.commit(Some("HEAD"), &signature, &signature, message, &tree, &[&parent])?)
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
        callbacks.sideband_progress(|_| !stop.is_stopped());
        let mut options = PushOptions::new();
        options.remote_callbacks(callbacks);
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
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

pub(super) fn open_layout(layout: &Layout) -> Result<Repository, WorkspaceError> {
    super::setup::setup()?;
    // Not `open_bare`, which skips the shallow file: a push from a shallow clone would then walk
    // into history the clone does not have.
    let repo = Repository::open_ext(
        &layout.git_dir,
        git2::RepositoryOpenFlags::NO_SEARCH | git2::RepositoryOpenFlags::NO_DOTGIT,
        std::iter::empty::<&std::ffi::OsStr>(),
    )?;
    repo.set_workdir(&layout.root, false)?;
    Ok(repo)
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
