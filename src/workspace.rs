//! The temporary clone a cycle works in, and every git operation on it (git2).
//!
//! A [`Workspace`] owns a [`tempfile::TempDir`]: dropping it removes the clone on every exit
//! path, including errors and interrupts. Layout inside the temporary directory: `repo/` is the
//! clone, `tmp/` is a private scratch directory for commands the model runs.
//!
//! Guarantees: the base branch is never committed to or pushed; only branches under `upkeep/`
//! are force-pushed; a token reaches git only through the credential callback, never a URL or
//! the clone's `.git/config`; a push the server refuses is an error, not success.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use git2::{BranchType, Cred, CredentialType, FetchOptions, PushOptions, RemoteCallbacks, Repository};
use secrecy::{ExposeSecret, SecretString};
use tokio_util::sync::CancellationToken;

/// Prefix of every branch upkeep creates, and the only branches it force-pushes.
pub const BOT_BRANCH_PREFIX: &str = "upkeep/";

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("could not create a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    #[error("clone of {url} failed: {message}")]
    Clone { url: String, message: String },
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

/// Credentials for fetch and push. HTTPS uses the token through the credential callback
/// (username `x-access-token`, as GitHub expects); SSH uses the running ssh-agent.
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
        let dir = tempfile::Builder::new()
            .prefix("upkeep-")
            .tempdir()
            .map_err(WorkspaceError::TempDir)?;
        let root = dir.path().join("repo");
        let scratch = dir.path().join("tmp");
        std::fs::create_dir(&scratch)?;

        let attempts = Cell::new(0u32);
        let mut callbacks = credential_callbacks(&request.auth, &attempts);
        callbacks.transfer_progress(|_| !cancel.is_cancelled());
        let mut fetch = FetchOptions::new();
        fetch.remote_callbacks(callbacks);
        if request.depth > 0 && !request.is_local {
            fetch.depth(i32::try_from(request.depth).unwrap_or(i32::MAX));
        }
        let mut builder = git2::build::RepoBuilder::new();
        builder.fetch_options(fetch);
        if let Some(base) = &request.base {
            builder.branch(base);
        }
        let repo = builder.clone(&request.url, &root).map_err(|error| {
            if cancel.is_cancelled() {
                WorkspaceError::Interrupted
            } else if attempts.get() > 1 || error.class() == git2::ErrorClass::Http && error.message().contains("401") {
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
        Ok(Self {
            _dir: dir,
            root: root.canonicalize()?,
            scratch,
            url: request.url.clone(),
            base,
            base_commit,
        })
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
        let mut callbacks = credential_callbacks(auth, &attempts);
        callbacks.push_update_reference(|_refname, status| {
            if let Some(message) = status {
                *rejection.borrow_mut() = Some(message.to_owned());
            }
            Ok(())
        });
        let mut options = PushOptions::new();
        options.remote_callbacks(callbacks);
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        let result = remote.push(&[refspec.as_str()], Some(&mut options));
        drop(options);
        if let Err(error) = result {
            if attempts.get() > 1 {
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

    /// The local branch names under `upkeep/` that the clone knows from the remote.
    pub fn remote_bot_branches(&self) -> Result<Vec<String>, WorkspaceError> {
        let repo = self.open()?;
        let mut names = Vec::new();
        for branch in repo.branches(Some(BranchType::Remote))? {
            let (branch, _) = branch?;
            if let Some(name) = branch.name()?.and_then(|n| n.strip_prefix("origin/")) {
                if name.starts_with(BOT_BRANCH_PREFIX) {
                    names.push(name.to_owned());
                }
            }
        }
        Ok(names)
    }
}

fn auth_hint(auth: &GitAuth) -> String {
    if auth.token.is_some() {
        "; check that GITHUB_TOKEN (or GH_TOKEN) is valid and has `contents: write` on the repository".into()
    } else {
        "; set GITHUB_TOKEN (or GH_TOKEN) for private repositories and for pushing".into()
    }
}

/// Credential callbacks that offer the token once. libgit2 calls the callback again after
/// every refusal, forever; answering a second call with an error makes a wrong token fail
/// fast, and `attempts > 1` tells the caller the failure was an auth rejection.
fn credential_callbacks<'a>(auth: &'a GitAuth, attempts: &'a Cell<u32>) -> RemoteCallbacks<'a> {
    let mut callbacks = RemoteCallbacks::new();
    callbacks.credentials(move |_url, username, allowed| {
        attempts.set(attempts.get() + 1);
        if attempts.get() > 1 {
            return Err(git2::Error::from_str("credentials rejected"));
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
            if let Some(token) = &auth.token {
                return Cred::userpass_plaintext("x-access-token", token.expose_secret());
            }
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
