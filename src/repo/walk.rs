//! Walking the work tree through the gate, as git would see it: `.gitignore` honoured, hidden
//! files included, the git directory never entered, symlinks listed but never followed.
//!
//! Why not the `ignore` crate's walker: it opens directories and `.gitignore` files by path
//! string, outside the directory capability, and would block on a `.gitignore` that is a FIFO.
//! Here every directory is opened and every ignore file read through [`WorkTree`]; only the
//! pattern matching is the `ignore` crate's (`ignore::gitignore`).

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

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
/// with each directory's entries sorted by name, until `visit` breaks. Directories that cannot
/// be read are skipped (a walk lists what it can).
pub fn walk(
    tree: &WorkTree,
    start: &RepoPath,
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
    let _ = walk_dir(tree, entries, &mut levels, &mut visit);
    Ok(())
}

fn walk_dir(
    tree: &WorkTree,
    entries: Vec<(RepoPath, EntryKind)>,
    levels: &mut Vec<Option<Gitignore>>,
    visit: &mut impl FnMut(&RepoPath, EntryKind) -> ControlFlow<()>,
) -> ControlFlow<()> {
    for (path, kind) in entries {
        match kind {
            EntryKind::Dir => {
                if ignored(levels, &path, true) {
                    continue;
                }
                let Ok(children) = tree.entries(&path) else {
                    continue;
                };
                levels.push(load_ignore(tree, &path));
                let flow = walk_dir(tree, children, levels, visit);
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
/// left out.
pub fn list(tree: &WorkTree, start: &RepoPath, limit: usize) -> Result<(Vec<RepoPath>, bool), GateError> {
    let mut files = Vec::new();
    let mut truncated = false;
    walk(tree, start, |path, _| {
        if files.len() >= limit {
            truncated = true;
            return ControlFlow::Break(());
        }
        files.push(path.clone());
        ControlFlow::Continue(())
    })?;
    Ok((files, truncated))
}
