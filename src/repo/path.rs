//! Paths inside the work tree, as the gate hands them out: relative, normal components only,
//! never `.git` in any letter case; and the lexical check that turns a requested path into one.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use super::gate_error::GateError;

/// A path inside the work tree: relative, made only of normal components, none of them `.git`
/// in any letter case. The empty path is the tree's root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoPath(PathBuf);

impl RepoPath {
    pub fn root() -> Self {
        Self::default()
    }

    pub fn is_root(&self) -> bool {
        self.0.as_os_str().is_empty()
    }

    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// The path as shown to people and the model (`src/main.rs`; `.` for the root).
    pub fn display(&self) -> String {
        if self.is_root() {
            ".".to_owned()
        } else {
            self.0.to_string_lossy().into_owned()
        }
    }

    /// The entry `name` inside this directory; `None` for names the gate never hands out.
    pub fn child(&self, name: &OsStr) -> Option<Self> {
        let valid = !name.is_empty()
            && name != "."
            && name != ".."
            && !is_git_name(name)
            && !name.as_encoded_bytes().contains(&b'/');
        valid.then(|| Self(self.0.join(name)))
    }

    pub fn parent(&self) -> Option<Self> {
        self.0.parent().map(|parent| Self(parent.to_owned()))
    }

    pub fn file_name(&self) -> Option<&OsStr> {
        self.0.file_name()
    }

    /// The path's components, in order.
    pub(super) fn parts(&self) -> impl Iterator<Item = &OsStr> {
        self.0.iter()
    }

    /// A path made of components the caller has already checked (the gate's resolver).
    pub(super) fn from_checked_parts<I: IntoIterator<Item = P>, P: AsRef<Path>>(parts: I) -> Self {
        Self(parts.into_iter().collect())
    }

    /// The top-level component (`src` of `src/a/b.rs`).
    pub fn first(&self) -> Option<&OsStr> {
        self.0.components().next().map(Component::as_os_str)
    }
}

/// What a directory entry is, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// FIFOs, sockets, devices: never read, never listed.
    Other,
}

impl EntryKind {
    pub(super) fn of(file_type: cap_std::fs::FileType) -> Self {
        if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }
}

/// Whether a name is `.git` in any letter case.
pub(crate) fn is_git_name(name: &OsStr) -> bool {
    name.as_encoded_bytes().eq_ignore_ascii_case(b".git")
}

/// The clean relative form of a requested path (`./a//b` -> `a/b`), or why it is refused.
pub(crate) fn normalise(requested: &str) -> Result<RepoPath, GateError> {
    if requested.trim().is_empty() {
        return Err(GateError::Empty);
    }
    if requested.contains('\0') {
        return Err(GateError::Nul(requested.to_owned()));
    }
    let mut clean = PathBuf::new();
    for component in Path::new(requested).components() {
        match component {
            Component::Normal(part) if is_git_name(part) => return Err(GateError::GitDir(requested.to_owned())),
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(GateError::ParentDir(requested.to_owned())),
            Component::RootDir | Component::Prefix(_) => return Err(GateError::Absolute(requested.to_owned())),
        }
    }
    Ok(RepoPath(clean))
}
