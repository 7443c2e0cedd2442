//! Walking the work tree through the gate, as git would see it: `.gitignore` honoured, hidden
//! files included, the git directory never entered, symlinks listed but never followed.
//!
//! Why not the `ignore` crate's walker: it opens directories and `.gitignore` files by path
//! string, outside the directory capability, and would block on a `.gitignore` that is a FIFO.
//! Here every directory is opened and every ignore file read through [`WorkTree`]; only the
//! pattern matching is the `ignore` crate's (`ignore::gitignore`).
//!
//! A walk checks the run's cancellation token before every entry: on a repository of 100,000
//! files it is seconds of work, and an interrupt must end it within one entry's work (the
//! caller runs it off the async threads, see `repo::blocking`).

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use tokio_util::sync::CancellationToken;

use super::fs::{EntryKind, GateError, RepoPath, WorkTree};

/// Largest `.gitignore` read; larger ones are ignored rather than read whole.
const MAX_IGNORE_FILE_BYTES: u64 = 256 * 1024;

/// Matchers are rooted at a virtual absolute path (`/` + the directory's repository path): the
/// `ignore` crate strips the root from candidates as a plain prefix, which an absolute path
/// followed by `/` makes exact.
fn virtual_path(path: &RepoPath) -> PathBuf {
    Path::new("/").join(path.as_path())
}

/// The matcher of `dir/.gitignore`, when there is a readable one.
fn load_ignore(tree: &WorkTree, dir: &RepoPath) -> Option<Gitignore> {
    let file = dir.child(".gitignore".as_ref())?;
    if tree.kind(&file) != Some(EntryKind::File) {
        return None;
    }
    let Ok(content) = tree.read_resolved(&file, MAX_IGNORE_FILE_BYTES) else {
        return None;
    };
    if content.truncated {
        return None;
    }
    let mut builder = GitignoreBuilder::new(virtual_path(dir));
    for line in String::from_utf8_lossy(&content.bytes).lines() {
        // A malformed pattern is skipped, as git skips it.
        let _ = builder.add_line(None, line);
    }
    builder.build().ok()
}

/// Whether `path` is ignored by the levels that apply to it (deepest first, as git decides).
fn ignored(levels: &[Option<Gitignore>], path: &RepoPath, is_dir: bool) -> bool {
    let candidate = virtual_path(path);
    for matcher in levels.iter().rev().flatten() {
        let verdict = matcher.matched(&candidate, is_dir);
        if verdict.is_ignore() {
            return true;
        }
        if verdict.is_whitelist() {
            return false;
        }
    }
    false
}

/// Visits every unignored file and symlink under `start` (a directory), in a depth-first walk
/// with each directory's entries sorted by name, until `visit` breaks or `cancel` is cancelled
/// (the caller then drops what it collected). Directories that cannot be read are skipped (a
/// walk lists what it can).
pub(crate) fn walk(
    tree: &WorkTree,
    start: &RepoPath,
    cancel: &CancellationToken,
    mut visit: impl FnMut(&RepoPath, EntryKind) -> ControlFlow<()>,
) -> Result<(), GateError> {
    // The ignore files of every directory above the start apply too.
    let mut levels = Vec::new();
    let mut ancestors: Vec<RepoPath> = Vec::new();
    let mut current = start.parent();
    while let Some(dir) = current {
        current = dir.parent();
        ancestors.push(dir);
    }
    for dir in ancestors.iter().rev() {
        levels.push(load_ignore(tree, dir));
    }
    let entries = tree.entries(start)?;
    levels.push(load_ignore(tree, start));
    let _ = walk_dir(tree, entries, &mut levels, cancel, &mut visit);
    Ok(())
}

fn walk_dir(
    tree: &WorkTree,
    entries: Vec<(RepoPath, EntryKind)>,
    levels: &mut Vec<Option<Gitignore>>,
    cancel: &CancellationToken,
    visit: &mut impl FnMut(&RepoPath, EntryKind) -> ControlFlow<()>,
) -> ControlFlow<()> {
    for (path, kind) in entries {
        if cancel.is_cancelled() {
            return ControlFlow::Break(());
        }
        match kind {
            EntryKind::Dir => {
                if ignored(levels, &path, true) {
                    continue;
                }
                let Ok(children) = tree.entries(&path) else {
                    continue;
                };
                levels.push(load_ignore(tree, &path));
                let flow = walk_dir(tree, children, levels, cancel, visit);
                levels.pop();
                flow?;
            }
            EntryKind::File | EntryKind::Symlink => {
                if !ignored(levels, &path, false) {
                    visit(&path, kind)?;
                }
            }
            EntryKind::Other => {}
        }
    }
    ControlFlow::Continue(())
}

/// Unignored files and symlinks under `start`, at most `limit`; the flag says whether more were
/// left out. Cut short when `cancel` is cancelled.
pub(crate) fn list(
    tree: &WorkTree,
    start: &RepoPath,
    limit: usize,
    cancel: &CancellationToken,
) -> Result<(Vec<RepoPath>, bool), GateError> {
    let mut files = Vec::new();
    let mut truncated = false;
    walk(tree, start, cancel, |path, _| {
        if files.len() >= limit {
            truncated = true;
            return ControlFlow::Break(());
        }
        files.push(path.clone());
        ControlFlow::Continue(())
    })?;
    Ok((files, truncated))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The interrupt comes while the first file is visited: nothing after it is visited.
    #[test]
    fn a_walk_stops_at_the_next_entry_once_cancelled() {
        let dir = tempfile::tempdir().expect("tempdir");
        for path in ["a.txt", "b/c.txt", "b/d.txt", "e.txt"] {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, "x").expect("write");
        }
        let tree = WorkTree::open(dir.path(), &[]).expect("open");
        let cancel = CancellationToken::new();
        let mut visited = Vec::new();
        walk(&tree, &RepoPath::root(), &cancel, |path, _| {
            visited.push(path.display());
            cancel.cancel();
            ControlFlow::Continue(())
        })
        .expect("walk");
        assert_eq!(visited, ["a.txt"]);
        let (listed, truncated) = list(&tree, &RepoPath::root(), 10, &cancel).expect("list");
        assert_eq!((listed.len(), truncated), (0, false));
        let (listed, _) = list(&tree, &RepoPath::root(), 10, &CancellationToken::new()).expect("list");
        assert_eq!(listed.len(), 4, "an uncancelled walk lists everything");
    }
}
