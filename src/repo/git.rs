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

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use git2::Repository;
use tokio::task::JoinHandle;

use super::checkout::checkout_fresh;
use super::cleanup::{Scope, TempRoot};
pub use super::error::WorkspaceError;
use super::fetch::{self, FetchSpec};
pub use super::layout::{BOT_BRANCH_PREFIX, GitAuth, Identity};
use super::layout::{Layout, open_layout};
pub(super) use super::publish::PushMode;
pub use super::publish::patch_text;
use super::stop::{DEFAULT_STALL_TIMEOUT, Stop};
use super::transport::Transfer;

/// How long the async side still waits for blocking git work after asking it to stop. The work
/// polls the same [`Stop`] and usually ends within a tenth of a second; this bounds the rest
/// (libgit2 steps that cannot be interrupted). Work left running after that keeps its clone
/// until it ends, and the run's cleanup removes the directory in any case.
const WIND_DOWN: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct CloneRequest {
    /// The repository URL (or local path) exactly as the operator gave it.
    pub url: String,
    /// A local path: the clone shares its objects read-only instead of fetching them (see
    /// `local_clone.rs`), shallow at `depth` all the same.
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
    /// The checksum of the index file when upkeep last wrote it holding HEAD's tree; see
    /// `changes.rs`.
    pub clean_index: std::sync::Mutex<Option<Vec<u8>>>,
    /// The gate to the work tree, opened once with the clone (see [`Workspace::files`]).
    pub tree: super::WorkTree,
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
        // Private (0700) like their parent: the work tree, the history and the scratch space.
        super::cleanup::create_private_dir(&layout.root)?;
        super::cleanup::create_private_dir(&layout.scratch)?;
        super::cleanup::create_private_dir(&layout.git_dir)?;
        let mut options = git2::RepositoryInitOptions::new();
        options.bare(true).external_template(false).mkpath(false);
        drop(Repository::init_opts(&layout.git_dir, &options)?);
        if request.is_local {
            super::local_clone::share_objects(&layout.git_dir, Path::new(&request.url))?;
        }
        // Opened after the alternates file is written, so its object database reads it.
        let repo = open_layout(&layout)?;

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
        let tree = super::WorkTree::open(&layout.root, &[]).map_err(|error| match error {
            super::fs::OpenError::Root { source, .. } => WorkspaceError::Io(source),
            other => WorkspaceError::Io(std::io::Error::other(other.to_string())),
        })?;
        let workspace = Self {
            inner: Arc::new(Inner {
                tree,
                layout,
                url: request.url.clone(),
                base: fetched.branch,
                base_commit: fetched.tip,
                saved: std::sync::Mutex::new(None),
                clean_index: std::sync::Mutex::new(None),
                depth: request.depth,
                is_local: request.is_local,
                stall_timeout: request.stall_timeout,
                stop: stop.clone(),
                _dir: dir,
            }),
        };
        workspace.mark_index_clean();
        Ok(workspace)
    }

    /// The gate to this clone's files, opened once with the clone: every file a tool, the
    /// briefing or the settings read touches goes through it. `protected_paths` are the paths
    /// writes through it may not touch (a pattern that does not parse is an error).
    ///
    /// This is the only way to a gate: none can be opened from a path string outside the
    /// repository module.
    ///
    /// ```compile_fail
    /// let gate = upkeep::repo::WorkTree::open(std::path::Path::new("."), &[]);
    /// ```
    pub fn files(&self, protected_paths: &[String]) -> Result<super::WorkTree, super::fs::OpenError> {
        self.inner.tree.protecting(protected_paths)
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

    /// How the clone was made, so that later fetches fetch the same way.
    pub(super) fn stall_timeout(&self) -> Duration {
        self.inner.stall_timeout
    }

    pub(super) fn depth(&self) -> u32 {
        self.inner.depth
    }

    pub(super) fn is_local(&self) -> bool {
        self.inner.is_local
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
}
