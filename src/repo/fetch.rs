//! Fetching one branch from the operator's URL, for a clone and for a refresh, and telling apart
//! why a transfer failed (interrupt, deadline, stall, refused credentials, anything else).
//!
//! The remote is anonymous: created from the URL the operator gave, with the one refspec this
//! fetch needs, so no remote, refspec or URL rewrite from any configuration takes part.

use std::cell::Cell;
use std::sync::Arc;

use git2::{Cred, CredentialType, FetchOptions, Oid, RemoteCallbacks, Repository};

use super::error::WorkspaceError;
use super::layout::GitAuth;
use super::setup::with_transfer;
use super::stop::Stop;
use super::transport::Transfer;

/// What to fetch.
pub(super) struct FetchSpec<'a> {
    pub url: &'a str,
    /// The branch; `None` = the remote's default branch (its `HEAD`).
    pub branch: Option<&'a str>,
    /// 0 = full history.
    pub depth: u32,
    pub is_local: bool,
    /// The commit the clone already has for this branch: when the remote's tip is the same,
    /// nothing is downloaded.
    pub have: Option<Oid>,
}

/// The branch fetched and the tip the remote advertised for it.
pub(super) struct Fetched {
    pub branch: String,
    pub tip: Oid,
}

/// A failed transfer, before it is known why.
pub(super) enum Failure {
    /// libgit2 failed; `attempts` counts the calls to the credential callback.
    Git { error: git2::Error, attempts: u32 },
    /// Already explained.
    Known(WorkspaceError),
}

impl From<WorkspaceError> for Failure {
    fn from(error: WorkspaceError) -> Self {
        Failure::Known(error)
    }
}

impl From<git2::Error> for Failure {
    fn from(error: git2::Error) -> Self {
        Failure::Known(WorkspaceError::Git(error))
    }
}

impl Failure {
    /// The error to report: the stop that ended the work, a stall, a refusal of the
    /// credentials, or `other` with libgit2's message.
    pub(super) fn into_error(
        self,
        transfer: &Transfer,
        stop: &Stop,
        url: &str,
        auth: &GitAuth,
        operation: &'static str,
        other: impl FnOnce(String) -> WorkspaceError,
    ) -> WorkspaceError {
        let (error, attempts) = match self {
            Failure::Known(error) => return error,
            Failure::Git { error, attempts } => (error, attempts),
        };
        if let Some(reason) = stop.reason() {
            reason.into()
        } else if transfer.stalled() {
            WorkspaceError::Stalled {
                operation,
                url: url.to_owned(),
                seconds: transfer.stall_timeout().as_secs(),
            }
        } else if attempts > 1 || error.code() == git2::ErrorCode::Auth {
            WorkspaceError::AuthRejected {
                url: url.to_owned(),
                hint: auth_hint(auth),
            }
        } else {
            other(error.message().to_owned())
        }
    }
}

/// Fetches the branch into `refs/remotes/origin/<branch>` (tags pointing into what is fetched
/// come along) and returns the tip the remote advertised: not whatever the tracking ref held
/// before, so a branch deleted on the remote is an error, not a silent stale tip.
///
/// One connection: the advertisement comes first, and when the remote's tip is the commit the
/// clone already has (the usual case between two cycles) nothing is downloaded, which spares
/// the negotiation round trips.
pub(super) fn fetch_branch(
    repo: &Repository,
    spec: &FetchSpec<'_>,
    transfer: &Arc<Transfer>,
    stop: &Stop,
) -> Result<Fetched, Failure> {
    let attempts = Cell::new(0u32);
    let git = |error: git2::Error| Failure::Git {
        error,
        attempts: attempts.get(),
    };
    with_transfer(transfer, || -> Result<Fetched, Failure> {
        let mut remote = repo.remote_anonymous(spec.url)?;
        let mut connection = remote
            .connect_auth(git2::Direction::Fetch, Some(credential_callbacks(&attempts)), None)
            .map_err(git)?;
        let heads: Vec<(String, Oid)> = connection
            .list()
            .map_err(git)?
            .iter()
            .map(|head| (head.name().to_owned(), head.oid()))
            .collect();
        if !heads.iter().any(|(name, _)| name.starts_with("refs/heads/")) {
            return Err(WorkspaceError::EmptyRepository(spec.url.to_owned()).into());
        }
        let branch = match spec.branch {
            Some(branch) => branch.to_owned(),
            None => default_branch(connection.default_branch().ok(), &heads).ok_or_else(|| WorkspaceError::Clone {
                url: spec.url.to_owned(),
                message: "the remote does not say which branch is its default; name one with --base".into(),
            })?,
        };
        let wanted = format!("refs/heads/{branch}");
        let tip = heads
            .iter()
            .find(|(name, _)| *name == wanted)
            .map(|(_, oid)| *oid)
            .ok_or_else(|| WorkspaceError::MissingBase {
                branch: branch.clone(),
                default: default_branch(connection.default_branch().ok(), &heads),
            })?;
        if let Some(reason) = stop.reason() {
            return Err(WorkspaceError::from(reason).into());
        }
        let tracking = format!("refs/remotes/origin/{branch}");
        if spec.have == Some(tip) {
            drop(connection);
            repo.reference(&tracking, tip, true, "upkeep: refresh (unchanged)")?;
            return Ok(Fetched { branch, tip });
        }
        // A local clone reads the source's objects (`local_clone`): the tip is there already, and
        // only the history's depth and the tags are the fetch's to set.
        if spec.is_local && repo.odb()?.exists(tip) {
            drop(connection);
            super::local_clone::adopt(repo, &heads, tip, spec.depth)?;
            repo.reference(&tracking, tip, true, "upkeep: fetch (objects shared with the source)")?;
            return Ok(Fetched { branch, tip });
        }
        let remote = connection.remote();
        let mut callbacks = credential_callbacks(&attempts);
        callbacks.transfer_progress(|_| !stop.is_stopped());
        callbacks.sideband_progress(|_| !stop.is_stopped());
        let mut options = FetchOptions::new();
        options.remote_callbacks(callbacks);
        options.download_tags(git2::AutotagOption::Auto);
        // Shallow fetches only over a network transport: libgit2's local transport cannot make
        // them (a local clone shares the source's objects instead, above, and gets here only if
        // the source's tip is not among them).
        if spec.depth > 0 && !spec.is_local {
            options.depth(i32::try_from(spec.depth).unwrap_or(i32::MAX));
        }
        let refspec = format!("+{wanted}:{tracking}");
        let downloaded = remote.download(&[refspec.as_str()], Some(&mut options));
        drop(options);
        downloaded.map_err(git)?;
        remote.disconnect()?;
        remote.update_tips(
            None,
            git2::RemoteUpdateFlags::UPDATE_FETCHHEAD,
            git2::AutotagOption::Auto,
            Some("upkeep: fetch"),
        )?;
        Ok(Fetched { branch, tip })
    })?
}

/// The remote's default branch: what its `HEAD` points at, or, when the server does not say,
/// the branch whose tip `HEAD` is (`main` or `master` first), as git decides it.
fn default_branch(symref: Option<git2::Buf>, heads: &[(String, Oid)]) -> Option<String> {
    if let Some(name) = symref
        .as_ref()
        .and_then(|buf| buf.as_str().ok()?.strip_prefix("refs/heads/"))
    {
        return Some(name.to_owned());
    }
    let head = heads.iter().find(|(name, _)| name == "HEAD")?.1;
    let mut candidates: Vec<&str> = heads
        .iter()
        .filter(|(_, oid)| *oid == head)
        .filter_map(|(name, _)| name.strip_prefix("refs/heads/"))
        .collect();
    candidates.sort_by_key(|name| (!matches!(*name, "main" | "master"), *name));
    candidates.first().map(|name| (*name).to_owned())
}

pub(super) fn auth_hint(auth: &GitAuth) -> String {
    if auth.token.is_some() {
        "; check that GITHUB_TOKEN (or GH_TOKEN) is valid and has `contents: write` on the repository".into()
    } else {
        "; set GITHUB_TOKEN (or GH_TOKEN) for private repositories and for pushing".into()
    }
}

/// Credential callbacks for SSH remotes, which offer the ssh-agent's key once. (HTTP(S)
/// remotes get the token from [`super::transport`], which never asks.) libgit2 calls the
/// callback again after every refusal, forever; answering a second call with an error makes a
/// refused key fail fast, and `attempts > 1` tells the caller the failure was an auth rejection.
pub(super) fn credential_callbacks(attempts: &Cell<u32>) -> RemoteCallbacks<'_> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_symref_the_default_branch_is_the_one_head_points_at() {
        let a = Oid::from_str("1111111111111111111111111111111111111111").expect("oid");
        let b = Oid::from_str("2222222222222222222222222222222222222222").expect("oid");
        let heads = vec![
            ("HEAD".to_owned(), a),
            ("refs/heads/aaa".to_owned(), a),
            ("refs/heads/main".to_owned(), a),
            ("refs/heads/zzz".to_owned(), b),
        ];
        assert_eq!(default_branch(None, &heads).as_deref(), Some("main"));
        assert_eq!(default_branch(None, &heads[1..]), None, "no HEAD advertised");
    }
}
