//! Writing a tree into a fresh work tree quickly and with bounded memory, and removing what a
//! refresh leaves behind.
//!
//! Guarantees: a checkout writes exactly the bytes `git clone` would (filters run whenever an
//! attribute or setting could make one do something); it stops between files when the run must
//! stop; libgit2 refuses paths a checkout must never write (`.git` in any component, in any
//! letter case and in the NTFS and HFS spellings that name it).

use std::path::Path;

use git2::Repository;

use super::error::WorkspaceError;
use super::layout::{Layout, open_layout};
use super::stop::Stop;

/// Files one libgit2 checkout call writes, at most, in a fresh clone. Each call opens the
/// repository anew, and so maps only the part of the pack its files come from: libgit2 maps a
/// pack in one window and keeps every page it read resident until the repository is closed, so
/// a single call over a 100k-file tree holds the whole pack (37 MiB) at once. The checkout's
/// own bookkeeping (the diff it plans from, besides the index) also grows with the files per
/// call. Each call rewrites the index, so much smaller calls cost time.
const CHECKOUT_CHUNK: usize = 25_000;

/// Writes every file of `tree` into the work tree, which has none yet.
///
/// libgit2 looks up attributes for every file it writes, to run checkout filters (end-of-line
/// conversion, `ident`), and each lookup resolves the file's path (`realpath`): on a large tree
/// that doubles the time of the checkout. When no attribute and no `core.autocrlf` can apply,
/// every filter is a no-op, so skipping them writes exactly the same bytes, as fast as git does.
pub(super) fn checkout_fresh(layout: &Layout, tree: git2::Oid, stop: &Stop) -> Result<(), WorkspaceError> {
    let repo = open_layout(layout)?;
    let survey = TreeSurvey::of(&repo.find_tree(tree)?);
    let filters = survey.has_attributes || survey.paths.is_none() || config_filters_may_apply(&repo)?;
    let checkout = |repo: &Repository, paths: Option<&[&[u8]]>| -> Result<(), WorkspaceError> {
        if let Some(reason) = stop.reason() {
            return Err(reason.into());
        }
        let tree = repo.find_tree(tree)?;
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout
            .force()
            .disable_filters(!filters)
            .notify_on(git2::CheckoutNotificationType::UPDATED)
            .notify(|_, _, _, _, _| !stop.is_stopped());
        if let Some(paths) = paths {
            checkout.disable_pathspec_match(true);
            for path in paths {
                checkout.path(*path);
            }
        }
        let result = repo.checkout_tree(tree.as_object(), Some(&mut checkout));
        drop(checkout);
        match (result, stop.reason()) {
            (Err(_), Some(reason)) => Err(reason.into()),
            (other, _) => Ok(other?),
        }
    };
    match &survey.paths {
        Some(paths) if paths.len() > CHECKOUT_CHUNK => {
            drop(repo);
            let all = paths.slices();
            for chunk in all.chunks(CHECKOUT_CHUNK) {
                checkout(&open_layout(layout)?, Some(chunk))?;
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
/// `.gitattributes` in the tree: an `autocrlf` setting or an attributes file in the git
/// directory. (The user's and the system's files are never read: see [`super::setup`].) Errs
/// on the side of `true`.
fn config_filters_may_apply(repo: &Repository) -> Result<bool, git2::Error> {
    let config = repo.config()?;
    let autocrlf = config
        .get_string("core.autocrlf")
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !matches!(autocrlf.as_str(), "" | "false" | "no" | "off" | "0") {
        return Ok(true);
    }
    Ok(config.get_string("core.attributesfile").is_ok() || repo.path().join("info/attributes").exists())
}

/// Removes everything inside `dir`, keeping `dir` itself.
pub(super) fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        remove_path(&entry?.path())?;
    }
    Ok(())
}

/// Removes a file, a symlink (not its target) or a whole directory; gone already is fine.
pub(super) fn remove_path(path: &Path) -> std::io::Result<()> {
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
