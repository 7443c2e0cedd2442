//! `--repo`: where the repository comes from.
//!
//! `owner/name` is a GitHub repository unless a directory by that name exists, a URL on the
//! GitHub server is GitHub, any other URL is a remote upkeep can push to but open no pull
//! request on, and a path must be a git repository with at least one commit. Guarantees: a URL
//! that carries credentials is refused without the error repeating them, and the prompt never
//! names an absolute local path.

use std::path::{Path, PathBuf};

use crate::settings::ConfigError;

/// Where the repository comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoSource {
    /// A local path (or `file://` URL), canonicalised.
    Local(PathBuf),
    /// A repository on GitHub (or GitHub Enterprise).
    GitHub {
        owner: String,
        name: String,
        clone_url: String,
    },
    /// Any other remote URL.
    Remote(String),
}

impl RepoSource {
    /// Reads `--repo`. `owner/name` is GitHub unless a directory by that name exists.
    pub fn parse(spec: &str, github_server: &str) -> Result<Self, ConfigError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(ConfigError::key("--repo", "is empty"));
        }
        if let Some(path) = spec.strip_prefix("file://") {
            return Self::local(Path::new(path), spec);
        }
        let server = github_server.trim_end_matches('/');
        refuse_credentials(spec)?;
        if spec.starts_with("https://") || spec.starts_with("http://") {
            if let Some(rest) = spec.strip_prefix(server).and_then(|r| r.strip_prefix('/')) {
                if let Some((owner, name)) = split_owner_name(rest.trim_end_matches('/').trim_end_matches(".git")) {
                    return Ok(RepoSource::GitHub {
                        owner,
                        name,
                        clone_url: spec.to_owned(),
                    });
                }
            }
            return Ok(RepoSource::Remote(spec.to_owned()));
        }
        if spec.starts_with("ssh://") || (spec.contains('@') && spec.contains(':') && !Path::new(spec).exists()) {
            return Ok(RepoSource::Remote(spec.to_owned()));
        }
        let path = Path::new(spec);
        if path.exists() {
            return Self::local(path, spec);
        }
        if let Some((owner, name)) = split_owner_name(spec) {
            // `src/proj` where `src` exists but `proj` does not is a mistyped path far more often
            // than a GitHub repository that happens to share a local folder's name.
            if Path::new(&owner).is_dir() {
                return Err(ConfigError::key(
                    "--repo",
                    format!(
                        "{spec:?} does not exist here, but {owner:?} does: a mistyped local path? (for the GitHub repository, run from another directory or give https://github.com/{spec})"
                    ),
                ));
            }
            return Ok(RepoSource::GitHub {
                clone_url: format!("{server}/{owner}/{name}.git"),
                owner,
                name,
            });
        }
        Err(ConfigError::key(
            "--repo",
            format!(
                "{spec:?} is neither owner/name, a URL (https://, ssh://, git@host:path, file://) nor an existing path"
            ),
        ))
    }

    fn local(path: &Path, spec: &str) -> Result<Self, ConfigError> {
        let canonical = path
            .canonicalize()
            .map_err(|error| ConfigError::key("--repo", format!("{spec}: {error}")))?;
        // A path anywhere inside a work tree names that work tree, as it does for git: `--repo .`
        // from a subfolder is the repository, not an error.
        let repo = crate::repo::setup::discover_repository(&canonical).map_err(|_| {
            ConfigError::key(
                "--repo",
                format!("{} is not inside a git repository", canonical.display()),
            )
        })?;
        let canonical = match repo.workdir() {
            Some(top) => top
                .canonicalize()
                .map_err(|error| ConfigError::key("--repo", format!("{}: {error}", top.display())))?,
            None => canonical,
        };
        if repo
            .head()
            .is_err_and(|error| error.code() == git2::ErrorCode::UnbornBranch)
        {
            return Err(ConfigError::key(
                "--repo",
                format!(
                    "{} has no commits yet; upkeep works from a branch, so commit something first",
                    canonical.display()
                ),
            ));
        }
        Ok(RepoSource::Local(canonical))
    }

    /// The URL git clones from.
    pub fn clone_url(&self) -> String {
        match self {
            RepoSource::Local(path) => path.display().to_string(),
            RepoSource::GitHub { clone_url, .. } => clone_url.clone(),
            RepoSource::Remote(url) => url.clone(),
        }
    }

    /// How the prompt names the repository: `owner/name`, a remote URL, or a local
    /// repository's folder name (never an absolute local path, which says nothing to the model
    /// and something about the machine).
    pub fn prompt_name(&self) -> String {
        match self {
            RepoSource::Local(path) => path
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| "repository".to_owned()),
            other => other.display_name(),
        }
    }

    pub fn display_name(&self) -> String {
        match self {
            RepoSource::GitHub { owner, name, .. } => format!("{owner}/{name}"),
            other => other.clone_url(),
        }
    }
}

/// A `--repo` URL must not carry credentials: they would end up in logs, events, the clone's
/// configuration and every error message that quotes the URL. (`git@host:path` and
/// `ssh://git@host/...` name an SSH user, not a secret, and are fine.)
fn refuse_credentials(spec: &str) -> Result<(), ConfigError> {
    let Some((scheme, rest)) = spec.split_once("://") else {
        return Ok(());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let Some((userinfo, _)) = authority.rsplit_once('@') else {
        return Ok(());
    };
    let secret_bearing = matches!(scheme, "http" | "https") || userinfo.contains(':');
    if secret_bearing {
        return Err(ConfigError::key(
            "--repo",
            format!(
                "the URL carries credentials ({scheme}://…@…); give the repository URL without them and put the token in GITHUB_TOKEN (or GH_TOKEN)"
            ),
        ));
    }
    Ok(())
}

fn split_owner_name(text: &str) -> Option<(String, String)> {
    let valid = |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    let (owner, name) = text.split_once('/')?;
    (valid(owner) && valid(name) && !name.contains('/') && owner != "." && owner != "..")
        .then(|| (owner.to_owned(), name.to_owned()))
}
