//! The temporary clone a cycle works in, and every git operation on it (git2).
//!
//! A [`Workspace`] owns a [`tempfile::TempDir`]: dropping it removes the clone on every exit
//! path, including errors and interrupts. Layout inside the temporary directory: `repo/` is the
//! clone, `tmp/` is a private scratch directory for commands the model runs.
//!
//! Guarantees: the base branch is never committed to or pushed; only branches under `upkeep/`
//! are force-pushed; a token reaches the server only as an HTTP header (see [`crate::git_http`]),
//! never a URL or the clone's `.git/config`; a push the server refuses is an error, not success.
//!
//! Continuous mode reuses one workspace: [`Workspace::refresh_blocking`] brings it back to
//! exactly what the remote's base branch has now (fetched at the clone's depth, working tree
//! checked out with every untracked and ignored file removed, no local branch but the base,
//! scratch emptied), which costs about a `git fetch` plus `git reset --hard` instead of a
//! whole clone.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use git2::{Cred, CredentialType, FetchOptions, PushOptions, RemoteCallbacks, Repository};
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;

/// Prefix of every branch upkeep creates, and the only branches it force-pushes.
pub const BOT_BRANCH_PREFIX: &str = "upkeep/";

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("could not create a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    #[error("clone of {url} failed: {message}")]
    Clone { url: String, message: String },
    #[error("fetch from {url} failed: {message}")]
    Fetch { url: String, message: String },
    #[error("authentication failed for {url}: the server rejected the token{hint}")]
    AuthRejected { url: String, hint: String },
    #[error("the repository {0} has no commits yet; upkeep needs a base branch to work from")]
    EmptyRepository(String),
    #[error("base branch `{0}` does not exist in the repository")]
    MissingBase(String),
    #[error("push of {branch} was rejected by the remote: {message}")]
    PushRejected { branch: String, message: String },
    #[error("refusing to push `{0}`: upkeep only pushes branches under upkeep/")]
    NotABotBranch(String),
    #[error("nothing to commit: the working tree has no changes")]
    NothingToCommit,
    #[error("interrupted")]
    Interrupted,
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

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
/// `x-access-token`, as GitHub expects; see [`crate::git_http`]); SSH uses the running ssh-agent.
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
    pub url: String,
    /// Local paths use libgit2's local transport, which cannot make shallow clones; their
    /// history is already on disk, so a full clone costs little.
    pub is_local: bool,
    pub base: Option<String>,
    /// 0 = full history.
    pub depth: u32,
    pub auth: GitAuth,
}

pub struct Workspace {
    // Held for its Drop: removes the clone and the scratch directory.
    _dir: tempfile::TempDir,
    root: PathBuf,
    scratch: PathBuf,
    url: String,
    base: String,
    base_commit: git2::Oid,
    // How the clone was made, so that a refresh fetches the same way.
    depth: u32,
    is_local: bool,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("root", &self.root)
            .field("base", &self.base)
            .finish()
    }
}

impl Workspace {
    /// Clones on a blocking thread; cancelling the token aborts the transfer and removes the
    /// partial clone.
    pub async fn clone_repo(request: CloneRequest, cancel: CancellationToken) -> Result<Self, WorkspaceError> {
        tokio::task::spawn_blocking(move || Self::clone_blocking(&request, &cancel))
            .await
            .map_err(|join| WorkspaceError::Io(std::io::Error::other(join.to_string())))?
    }

    pub fn clone_blocking(request: &CloneRequest, cancel: &CancellationToken) -> Result<Self, WorkspaceError> {
        // libgit2's object cache keeps every tree and commit read, for lookups upkeep never
        // repeats; on a 100k-file clone that is about 8 MB of peak memory. Process-wide and
        // idempotent, so set here, before the first clone.
        git2::opts::enable_caching(false);
        let started = std::time::Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("upkeep-")
            .tempdir()
            .map_err(WorkspaceError::TempDir)?;
        let root = dir.path().join("repo");
        let scratch = dir.path().join("tmp");
        std::fs::create_dir(&scratch)?;

        let attempts = Cell::new(0u32);
        let mut callbacks = credential_callbacks(&attempts);
        callbacks.transfer_progress(|_| !cancel.is_cancelled());
        let mut fetch = FetchOptions::new();
        fetch.remote_callbacks(callbacks);
        set_depth(&mut fetch, request.depth, request.is_local);
        let mut builder = git2::build::RepoBuilder::new();
        builder.fetch_options(fetch);
        // The files are checked out below, once it is known whether checkout filters can apply.
        let mut no_checkout = git2::build::CheckoutBuilder::new();
        no_checkout.dry_run();
        builder.with_checkout(no_checkout);
        if let Some(base) = &request.base {
            builder.branch(base);
        }
        let cloned = crate::git_http::with_token(request.auth.token.as_ref(), || builder.clone(&request.url, &root))?;
        let repo = cloned.map_err(|error| {
            if cancel.is_cancelled() {
                WorkspaceError::Interrupted
            } else if is_auth_rejection(&error, &attempts) {
                WorkspaceError::AuthRejected {
                    url: request.url.clone(),
                    hint: auth_hint(&request.auth),
                }
            } else if let Some(base) = request
                .base
                .as_ref()
                .filter(|_| error.code() == git2::ErrorCode::NotFound)
            {
                WorkspaceError::MissingBase(base.clone())
            } else {
                WorkspaceError::Clone {
                    url: request.url.clone(),
                    message: error.message().to_owned(),
                }
            }
        })?;
        let head = match repo.head() {
            Ok(head) => head,
            Err(error) if error.code() == git2::ErrorCode::UnbornBranch => {
                return Err(WorkspaceError::EmptyRepository(request.url.clone()));
            }
            Err(error) => return Err(error.into()),
        };
        let base = head.shorthand().unwrap_or("HEAD").to_owned();
        let base_commit = head.peel_to_commit()?.id();
        drop(head);
        let tree = repo.find_commit(base_commit)?.tree_id();
        // Closed before the checkout: its pack stays mapped while it is open (see
        // `checkout_fresh`).
        drop(repo);
        let fetched = started.elapsed();
        checkout_fresh(&root, tree, cancel)?;
        tracing::debug!(?fetched, checked_out = ?started.elapsed() - fetched, "cloned {}", request.url);
        Ok(Self {
            _dir: dir,
            root: root.canonicalize()?,
            scratch,
            url: request.url.clone(),
            base,
            base_commit,
            depth: request.depth,
            is_local: request.is_local,
        })
    }

    /// [`Workspace::refresh_blocking`] on a blocking thread. On error the workspace is dropped
    /// (and its directory removed): a half-refreshed clone is never worked in.
    pub async fn refresh(mut self, auth: GitAuth, cancel: CancellationToken) -> Result<Self, WorkspaceError> {
        tokio::task::spawn_blocking(move || self.refresh_blocking(&auth, &cancel).map(|()| self))
            .await
            .map_err(|join| WorkspaceError::Io(std::io::Error::other(join.to_string())))?
    }

    /// Brings the clone back to exactly what the remote's base branch has now, as a fresh clone
    /// would have it: fetches the base branch at the clone's depth, checks out its tip with every
    /// local change, untracked and ignored file removed (`reset --hard` plus `clean -fdx`),
    /// points HEAD at the base branch, deletes every other local branch (the bot's included) and
    /// every other ref the cycle may have left (stash, stale remote-tracking branches; tags stay),
    /// empties the scratch directory, and makes the fetched tip the new base commit.
    ///
    /// On error the clone is in an unknown state: drop it and clone afresh.
    pub fn refresh_blocking(&mut self, auth: &GitAuth, cancel: &CancellationToken) -> Result<(), WorkspaceError> {
        let repo = self.open()?;
        let tip = crate::git_http::with_token(auth.token.as_ref(), || self.fetch_base(&repo, auth, cancel))??;
        if cancel.is_cancelled() {
            return Err(WorkspaceError::Interrupted);
        }
        let tip = repo.find_commit(tip)?;
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
                !cancel.is_cancelled()
            });
        let checked_out = repo.checkout_tree(tip.as_object(), Some(&mut checkout));
        drop(checkout);
        if cancel.is_cancelled() {
            return Err(WorkspaceError::Interrupted);
        }
        checked_out?;
        for stray in strays.into_inner() {
            remove_path(&self.root.join(stray))?;
        }
        let local = format!("refs/heads/{}", self.base);
        repo.reference(&local, tip.id(), true, "upkeep: refresh to the remote's tip")?;
        repo.set_head(&local)?;
        repo.cleanup_state()?;
        self.delete_leftover_refs(&repo)?;
        empty_dir(&self.scratch)?;
        self.base_commit = tip.id();
        Ok(())
    }

    /// Fetches the base branch into its remote-tracking ref and returns the tip the remote
    /// advertised (not whatever the tracking ref held before: a branch deleted on the remote is
    /// an error, not a silent stale tip).
    ///
    /// One connection: the advertisement comes first, and when the remote's tip is the commit
    /// the clone already has (the usual case between two cycles) nothing is downloaded, which
    /// spares the negotiation round trips.
    fn fetch_base(
        &self,
        repo: &Repository,
        auth: &GitAuth,
        cancel: &CancellationToken,
    ) -> Result<git2::Oid, WorkspaceError> {
        let attempts = Cell::new(0u32);
        let failed = |error: git2::Error| {
            if cancel.is_cancelled() {
                WorkspaceError::Interrupted
            } else if is_auth_rejection(&error, &attempts) {
                WorkspaceError::AuthRejected {
                    url: self.url.clone(),
                    hint: auth_hint(auth),
                }
            } else {
                WorkspaceError::Fetch {
                    url: self.url.clone(),
                    message: error.message().to_owned(),
                }
            }
        };
        let wanted = format!("refs/heads/{}", self.base);
        let tracking = format!("refs/remotes/origin/{}", self.base);
        let mut remote = repo.find_remote("origin")?;
        let mut connection = remote
            .connect_auth(git2::Direction::Fetch, Some(credential_callbacks(&attempts)), None)
            .map_err(failed)?;
        let tip = connection
            .list()?
            .iter()
            .find(|head| head.name() == wanted)
            .map(|head| head.oid())
            .ok_or_else(|| WorkspaceError::MissingBase(self.base.clone()))?;
        if cancel.is_cancelled() {
            return Err(WorkspaceError::Interrupted);
        }
        if tip == self.base_commit {
            drop(connection);
            repo.reference(&tracking, tip, true, "upkeep: refresh (unchanged)")?;
            return Ok(tip);
        }
        let remote = connection.remote();
        let mut callbacks = credential_callbacks(&attempts);
        callbacks.transfer_progress(|_| !cancel.is_cancelled());
        let mut fetch = FetchOptions::new();
        fetch.remote_callbacks(callbacks);
        set_depth(&mut fetch, self.depth, self.is_local);
        let refspec = format!("+{wanted}:{tracking}");
        let downloaded = remote.download(&[refspec.as_str()], Some(&mut fetch));
        drop(fetch);
        downloaded.map_err(failed)?;
        remote.disconnect()?;
        remote.update_tips(
            None,
            git2::RemoteUpdateFlags::UPDATE_FETCHHEAD,
            git2::AutotagOption::Unspecified,
            Some("upkeep: refresh"),
        )?;
        Ok(tip)
    }

    /// Deletes every ref a fresh clone of the base would not have: other local branches (the
    /// bot's), the stash, notes, remote-tracking branches other than the base's (they would be
    /// stale: a refresh fetches only the base). Tags stay, as a fresh clone has them.
    fn delete_leftover_refs(&self, repo: &Repository) -> Result<(), WorkspaceError> {
        let keep = [
            format!("refs/heads/{}", self.base),
            format!("refs/remotes/origin/{}", self.base),
        ];
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

    /// The clone's top-level directory (canonical: symlinks resolved).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A private scratch directory outside the clone, removed with it.
    pub fn scratch(&self) -> &Path {
        &self.scratch
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The branch pull requests target.
    pub fn base_branch(&self) -> &str {
        &self.base
    }

    pub fn base_commit(&self) -> git2::Oid {
        self.base_commit
    }

    fn open(&self) -> Result<Repository, WorkspaceError> {
        Ok(Repository::open(&self.root)?)
    }

    /// Whether the working tree differs from HEAD (untracked, unignored files included).
    pub fn has_changes(&self) -> Result<bool, WorkspaceError> {
        let repo = self.open()?;
        let mut options = git2::StatusOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false);
        Ok(!repo.statuses(Some(&mut options))?.is_empty())
    }

    /// The branch HEAD points at now.
    pub fn current_branch(&self) -> Result<String, WorkspaceError> {
        let repo = self.open()?;
        let head = repo.head()?;
        Ok(head.shorthand().unwrap_or("HEAD").to_owned())
    }

    /// Commits every change (additions, edits, deletions; ignored files excluded) on `branch`,
    /// creating it from HEAD when needed. The base branch itself is never committed to: HEAD
    /// moves to the bot branch first.
    pub fn commit_all(&self, branch: &str, message: &str, identity: &Identity) -> Result<git2::Oid, WorkspaceError> {
        if !branch.starts_with(BOT_BRANCH_PREFIX) {
            return Err(WorkspaceError::NotABotBranch(branch.to_owned()));
        }
        let repo = self.open()?;
        let mut index = repo.index()?;
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
        index.update_all(["*"], None)?;
        index.write()?;
        let tree_id = index.write_tree()?;
        let parent = repo.head()?.peel_to_commit()?;
        if parent.tree_id() == tree_id {
            return Err(WorkspaceError::NothingToCommit);
        }
        let refname = format!("refs/heads/{branch}");
        if repo.head()?.name().ok() != Some(refname.as_str()) {
            repo.branch(branch, &parent, true)?;
            repo.set_head(&refname)?;
        }
        let tree = repo.find_tree(tree_id)?;
        let signature = git2::Signature::now(&identity.name, &identity.email)?;
        Ok(repo.commit(Some("HEAD"), &signature, &signature, message, &tree, &[&parent])?)
    }

    /// The unified diff from the base commit to HEAD, as `git diff` prints it.
    pub fn diff_from_base(&self) -> Result<String, WorkspaceError> {
        let repo = self.open()?;
        let base_tree = repo.find_commit(self.base_commit)?.tree()?;
        let head_tree = repo.head()?.peel_to_tree()?;
        let diff = repo.diff_tree_to_tree(Some(&base_tree), Some(&head_tree), None)?;
        Ok(patch_text(&diff)?)
    }

    /// Pushes `branch` to `origin`, forced (bot branches are rewritten when a pull request is
    /// updated). Blocking: call from a blocking thread.
    pub fn push_blocking(&self, branch: &str, auth: &GitAuth) -> Result<(), WorkspaceError> {
        if !branch.starts_with(BOT_BRANCH_PREFIX) || branch == self.base {
            return Err(WorkspaceError::NotABotBranch(branch.to_owned()));
        }
        let repo = self.open()?;
        let mut remote = repo.find_remote("origin")?;
        let attempts = Cell::new(0u32);
        let rejection = std::cell::RefCell::new(None::<String>);
        let mut callbacks = credential_callbacks(&attempts);
        callbacks.push_update_reference(|_refname, status| {
            if let Some(message) = status {
                *rejection.borrow_mut() = Some(message.to_owned());
            }
            Ok(())
        });
        let mut options = PushOptions::new();
        options.remote_callbacks(callbacks);
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        let result = crate::git_http::with_token(auth.token.as_ref(), || {
            remote.push(&[refspec.as_str()], Some(&mut options))
        })?;
        drop(options);
        if let Err(error) = result {
            if is_auth_rejection(&error, &attempts) {
                return Err(WorkspaceError::AuthRejected {
                    url: self.url.clone(),
                    hint: auth_hint(auth),
                });
            }
            return Err(WorkspaceError::PushRejected {
                branch: branch.to_owned(),
                message: error.message().to_owned(),
            });
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

/// Files one libgit2 checkout call writes, at most, in a fresh clone. Each call opens the
/// repository anew, and so maps only the part of the pack its files come from: libgit2 maps a
/// pack in one window and keeps every page it read resident until the repository is closed, so
/// a single call over a 100k-file tree holds the whole pack (37 MiB) at once. The checkout's
/// own bookkeeping (the diff it plans from, besides the index) also grows with the files per
/// call. Each call rewrites the index, so much smaller calls cost time.
const CHECKOUT_CHUNK: usize = 25_000;

/// Writes every file of `tree` into the clone at `root`, which has none yet.
///
/// libgit2 looks up attributes for every file it writes, to run checkout filters (end-of-line
/// conversion, `ident`), and each lookup resolves the file's path (`realpath`): on a large tree
/// that doubles the time of the checkout. When no attribute and no `core.autocrlf` can apply,
/// every filter is a no-op, so skipping them writes exactly the same bytes, as fast as git does.
fn checkout_fresh(root: &Path, tree: git2::Oid, cancel: &CancellationToken) -> Result<(), WorkspaceError> {
    let repo = Repository::open(root)?;
    let survey = TreeSurvey::of(&repo.find_tree(tree)?);
    let filters = survey.has_attributes || survey.paths.is_none() || config_filters_may_apply(&repo)?;
    let checkout = |repo: &Repository, paths: Option<&[&[u8]]>| -> Result<(), WorkspaceError> {
        if cancel.is_cancelled() {
            return Err(WorkspaceError::Interrupted);
        }
        let tree = repo.find_tree(tree)?;
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout
            .force()
            .disable_filters(!filters)
            .notify_on(git2::CheckoutNotificationType::UPDATED)
            .notify(|_, _, _, _, _| !cancel.is_cancelled());
        if let Some(paths) = paths {
            checkout.disable_pathspec_match(true);
            for path in paths {
                checkout.path(*path);
            }
        }
        let result = repo.checkout_tree(tree.as_object(), Some(&mut checkout));
        drop(checkout);
        match result {
            Err(_) if cancel.is_cancelled() => Err(WorkspaceError::Interrupted),
            other => Ok(other?),
        }
    };
    match &survey.paths {
        Some(paths) if paths.len() > CHECKOUT_CHUNK => {
            drop(repo);
            let all = paths.slices();
            for chunk in all.chunks(CHECKOUT_CHUNK) {
                checkout(&Repository::open(root)?, Some(chunk))?;
            }
            Ok(())
        }
        _ => checkout(&repo, None),
    }
}

/// What a fresh checkout needs to know about a tree, from one walk of it.
struct TreeSurvey {
    /// A `.gitattributes` file anywhere in the tree.
    has_attributes: bool,
    /// Every file (and submodule) path, or `None` when the walk could not finish (libgit2's walk
    /// gives up on a folder name that is not UTF-8): then nothing is assumed.
    paths: Option<PathList>,
}

/// Many paths in one buffer: a 100k-file tree would otherwise cost 100k small allocations.
struct PathList {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl PathList {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let path = &self.bytes[start..end];
                start = end;
                path
            })
            .collect()
    }
}

impl TreeSurvey {
    fn of(tree: &git2::Tree<'_>) -> Self {
        let mut has_attributes = false;
        let mut paths = PathList {
            bytes: Vec::new(),
            ends: Vec::new(),
        };
        let walked = tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            if entry.kind() != Some(git2::ObjectType::Tree) {
                has_attributes |= entry.name_bytes() == b".gitattributes";
                paths.bytes.extend_from_slice(root.as_bytes());
                paths.bytes.extend_from_slice(entry.name_bytes());
                paths.ends.push(paths.bytes.len());
            }
            git2::TreeWalkResult::Ok
        });
        Self {
            has_attributes,
            paths: walked.ok().map(|()| paths),
        }
    }
}

/// Whether configuration could make a checkout filter change a file even without a
/// `.gitattributes` in the tree: an `autocrlf` setting, or an attributes file anywhere else
/// libgit2 reads one (the repository's, the user's, the system's). Errs on the side of `true`.
fn config_filters_may_apply(repo: &Repository) -> Result<bool, git2::Error> {
    let config = repo.config()?;
    let autocrlf = config
        .get_string("core.autocrlf")
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !matches!(autocrlf.as_str(), "" | "false" | "no" | "off" | "0") {
        return Ok(true);
    }
    if config.get_string("core.attributesfile").is_ok() || repo.path().join("info/attributes").exists() {
        return Ok(true);
    }
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")));
    Ok(xdg.is_some_and(|dir| dir.join("git/attributes").exists()) || Path::new("/etc/gitattributes").exists())
}

/// Shallow fetches only over a network transport: libgit2's local transport cannot make them,
/// and a local repository's history is already on disk.
fn set_depth(fetch: &mut FetchOptions<'_>, depth: u32, is_local: bool) {
    if depth > 0 && !is_local {
        fetch.depth(i32::try_from(depth).unwrap_or(i32::MAX));
    }
}

/// Removes everything inside `dir`, keeping `dir` itself.
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        remove_path(&entry?.path())?;
    }
    Ok(())
}

/// Removes a file, a symlink (not its target) or a whole directory; gone already is fine.
fn remove_path(path: &Path) -> std::io::Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(error) => Err(error),
    };
    match removed {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn auth_hint(auth: &GitAuth) -> String {
    if auth.token.is_some() {
        "; check that GITHUB_TOKEN (or GH_TOKEN) is valid and has `contents: write` on the repository".into()
    } else {
        "; set GITHUB_TOKEN (or GH_TOKEN) for private repositories and for pushing".into()
    }
}

/// Whether a failed fetch or push was the server refusing the credentials: the HTTP transport's
/// 401/403, or a second call to [`credential_callbacks`] (SSH).
fn is_auth_rejection(error: &git2::Error, attempts: &Cell<u32>) -> bool {
    attempts.get() > 1 || error.code() == git2::ErrorCode::Auth
}

/// Credential callbacks for SSH remotes, which offer the ssh-agent's key once. (HTTP(S)
/// remotes get the token from [`crate::git_http`], which never asks.) libgit2 calls the callback
/// again after every refusal, forever; answering a second call with an error makes a refused
/// key fail fast, and `attempts > 1` tells the caller the failure was an auth rejection.
fn credential_callbacks(attempts: &Cell<u32>) -> RemoteCallbacks<'_> {
    let mut callbacks = RemoteCallbacks::new();
    callbacks.credentials(move |_url, username, allowed| {
        attempts.set(attempts.get() + 1);
        if attempts.get() > 1 {
            return Err(git2::Error::from_str("credentials rejected"));
        }
        if allowed.contains(CredentialType::SSH_KEY) {
            return Cred::ssh_key_from_agent(username.unwrap_or("git"));
        }
        if allowed.contains(CredentialType::DEFAULT) {
            return Cred::default();
        }
        Err(git2::Error::from_str(
            "no credentials available: set GITHUB_TOKEN or GH_TOKEN",
        ))
    });
    callbacks
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
