//! What every part of the clone shares: where its parts live on disk, how its git directory is
//! opened (never by looking for a `.git` in or above the work tree), and who commits with which
//! credentials. A leaf: the rest of `repo` builds on it.

use std::path::PathBuf;

use git2::Repository;
use secrecy::SecretString;

use super::error::WorkspaceError;

/// Prefix of every branch upkeep creates, and the only branches it force-pushes.
pub const BOT_BRANCH_PREFIX: &str = "upkeep/";

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

/// Where the parts of a workspace live.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub root: PathBuf,
    pub git_dir: PathBuf,
    pub scratch: PathBuf,
}

/// Opens the clone's git directory with the work tree set beside it.
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
