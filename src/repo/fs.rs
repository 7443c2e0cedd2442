//! The only gate to the work tree: every read, write and listing of repository files goes
//! through a [`WorkTree`], a directory capability (cap-std) opened once on the clone's top-level
//! directory.
//!
//! Why: paths come from the model and from the repository itself (file names, config values,
//! symlink targets), and both are untrusted. A path string checked and then reopened is the
//! classic hole: a dangling symlink, a link swapped in between check and use, `..` through a
//! link. A capability cannot name anything outside the directory it was opened on (cap-std
//! resolves every open beneath it, with openat2 `RESOLVE_BENEATH` where the kernel has it), so
//! "is this inside?" is answered by construction, not by comparing strings.
//!
//! Guarantees:
//! - Requests are relative paths. Absolute paths, `..`, NUL bytes and a `.git` component in any
//!   letter case are refused before anything is opened, and `.git` is refused again in every
//!   component a path resolves to through symlinks.
//! - Symlinks inside the tree are followed as users expect, component by component (at most
//!   [`MAX_LINK_HOPS`]); a link whose target is absolute or climbs out of the tree is refused
//!   with a message that names the link.
//! - Only regular files with a single link are read. Opens never block (`O_NONBLOCK`, no
//!   controlling terminal), so a FIFO or a device cannot hang a run, and the size cap is
//!   enforced while reading, not after.
//! - A write never follows a final symlink out and never replaces something resolution did not
//!   see: the content goes to a new file created exclusively beside the target, then renamed
//!   over it (keeping the target's permission bits). Protected paths are refused for writes,
//!   matched against the path as requested and as resolved.
//! - Listing walks directories through the capability, never following symlinks, honouring the
//!   `.gitignore` files it finds, which are read through the same gate (see `repo::walk`).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

pub use super::gate_error::GateError;
pub(crate) use super::path::{EntryKind, RepoPath, is_git_name, normalise};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt, PermissionsExt};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Symlinks followed while resolving one path, at most (the kernel's own limit is 40).
pub(crate) const MAX_LINK_HOPS: usize = 40;

impl GateError {
    /// An I/O failure on `path`; a missing file is [`GateError::NotFound`].
    fn io(path: &RepoPath, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::NotFound => GateError::NotFound(path.display()),
            _ => GateError::Io {
                path: path.display(),
                source,
            },
        }
    }
}

/// Bytes read from a file, at most the cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileBytes {
    pub bytes: Vec<u8>,
    /// The file holds more than the cap; `bytes` is its beginning.
    pub truncated: bool,
    /// The file's size when it was opened.
    pub size: u64,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Created,
    Replaced,
}

/// The work tree, as a directory capability plus the paths writes may not touch. A clone is a
/// second handle on the same capability (shared, not reopened), so work on the tree can move to
/// a blocking thread (see `repo::blocking`).
#[derive(Debug, Clone)]
pub struct WorkTree {
    dir: Arc<Dir>,
    protected: Arc<GlobSet>,
    protected_patterns: Arc<[String]>,
}

impl WorkTree {
    /// Opens the capability on `root`. Only the repository module opens one, once per clone
    /// ([`crate::repo::Workspace::files`] hands it out): nothing outside it can turn a path
    /// string into a gate. `protected_paths` are globs (matched case-insensitively, so
    /// `.GitHub/Workflows` on a case-insensitive file system is protected too).
    pub(super) fn open(root: &Path, protected_paths: &[String]) -> Result<Self, OpenError> {
        let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority()).map_err(|source| OpenError::Root {
            root: root.to_owned(),
            source,
        })?;
        Self::with_dir(Arc::new(dir), protected_paths)
    }

    /// A gate on a directory of a unit test, outside any clone.
    #[cfg(test)]
    pub(crate) fn open_for_tests(root: &Path) -> Self {
        Self::open(root, &[]).expect("a test directory opens")
    }

    /// This gate with `protected_paths` as the paths writes may not touch, sharing its directory
    /// capability (nothing is reopened).
    pub fn protecting(&self, protected_paths: &[String]) -> Result<Self, OpenError> {
        Self::with_dir(Arc::clone(&self.dir), protected_paths)
    }

    fn with_dir(dir: Arc<Dir>, protected_paths: &[String]) -> Result<Self, OpenError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in protected_paths {
            let glob = GlobBuilder::new(pattern)
                .case_insensitive(true)
                .literal_separator(false)
                .build()
                .map_err(|source| OpenError::Pattern {
                    pattern: pattern.clone(),
                    source,
                })?;
            builder.add(glob);
        }
        let protected = builder.build().map_err(|source| OpenError::Pattern {
            pattern: protected_paths.join(", "),
            source,
        })?;
        Ok(Self {
            dir,
            protected: Arc::new(protected),
            protected_patterns: protected_paths.into(),
        })
    }

    /// Resolves a requested path through the symlinks inside the tree, the final one included.
    /// What does not exist yet is kept as requested (a file about to be created).
    pub fn resolve(&self, requested: &str) -> Result<RepoPath, GateError> {
        let lexical = normalise(requested)?;
        let mut pending: VecDeque<OsString> = lexical.parts().map(OsStr::to_owned).collect();
        let mut resolved: Vec<OsString> = Vec::new();
        let mut hops = 0;
        let mut missing = false;
        let mut last_link = String::new();
        while let Some(part) = pending.pop_front() {
            if part == ".." {
                // Only a link target can bring `..` here; climbing above the root leaves the tree.
                if resolved.pop().is_none() {
                    return Err(GateError::LinkOutside {
                        requested: requested.to_owned(),
                        link: last_link,
                    });
                }
                continue;
            }
            if is_git_name(&part) {
                return Err(match hops {
                    0 => GateError::GitDir(requested.to_owned()),
                    _ => GateError::LinkIntoGit {
                        requested: requested.to_owned(),
                        link: last_link,
                    },
                });
            }
            resolved.push(part);
            if missing {
                continue;
            }
            let here = RepoPath::from_checked_parts(&resolved);
            let meta = match self.dir.symlink_metadata(here.as_path()) {
                Ok(meta) => meta,
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    missing = true;
                    continue;
                }
                Err(error) => return Err(GateError::io(&here, error)),
            };
            if !meta.is_symlink() {
                continue;
            }
            hops += 1;
            if hops > MAX_LINK_HOPS {
                return Err(GateError::TooManyLinks(requested.to_owned()));
            }
            last_link = here.display();
            let target = self
                .dir
                .read_link_contents(here.as_path())
                .map_err(|error| GateError::io(&here, error))?;
            resolved.pop();
            let mut parts = Vec::new();
            for component in target.components() {
                match component {
                    Component::Normal(name) => parts.push(name.to_owned()),
                    Component::ParentDir => parts.push(OsString::from("..")),
                    Component::CurDir => {}
                    Component::RootDir | Component::Prefix(_) => {
                        return Err(GateError::LinkOutside {
                            requested: requested.to_owned(),
                            link: last_link,
                        });
                    }
                }
            }
            for part in parts.into_iter().rev() {
                pending.push_front(part);
            }
        }
        Ok(RepoPath::from_checked_parts(&resolved))
    }

    /// What `path` is, without following it; `None` when it does not exist.
    pub fn kind(&self, path: &RepoPath) -> Option<EntryKind> {
        if path.is_root() {
            return Some(EntryKind::Dir);
        }
        self.dir
            .symlink_metadata(path.as_path())
            .ok()
            .map(|meta| EntryKind::of(meta.file_type()))
    }

    /// Reads at most `cap` bytes of the regular file a requested path resolves to.
    pub fn read(&self, requested: &str, cap: u64) -> Result<(RepoPath, FileBytes), GateError> {
        let path = self.resolve(requested)?;
        let bytes = self.read_resolved(&path, cap)?;
        Ok((path, bytes))
    }

    /// The text of a small repository file read by upkeep itself (`.upkeep.toml`, the task
    /// file): `None` when it does not exist; an error when it is refused, larger than `cap`,
    /// or not UTF-8.
    pub fn read_text(&self, requested: &str, cap: u64) -> Result<Option<String>, GateError> {
        let (path, file) = match self.read(requested, cap) {
            Ok(read) => read,
            Err(GateError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error),
        };
        if file.truncated {
            return Err(GateError::Io {
                path: path.display(),
                source: io::Error::other(format!("larger than {cap} bytes")),
            });
        }
        String::from_utf8(file.bytes).map(Some).map_err(|_| GateError::Io {
            path: path.display(),
            source: io::Error::other("not UTF-8 text"),
        })
    }

    /// Reads at most `cap` bytes of a file already resolved (a walk's entry). A symlink swapped
    /// in since resolution is refused (`O_NOFOLLOW`), never followed.
    pub fn read_resolved(&self, path: &RepoPath, cap: u64) -> Result<FileBytes, GateError> {
        if path.is_root() {
            return Err(GateError::IsDir(path.display()));
        }
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits() | nix::fcntl::OFlag::O_NOCTTY.bits())
            .follow(FollowSymlinks::No);
        let file = self
            .dir
            .open_with(path.as_path(), &options)
            .map_err(|error| match error.raw_os_error() {
                Some(code) if code == nix::errno::Errno::ELOOP as i32 => GateError::NotRegular {
                    path: path.display(),
                    kind: "a symlink",
                },
                _ => GateError::io(path, error),
            })?;
        let meta = file.metadata().map_err(|error| GateError::io(path, error))?;
        check_regular(path, &meta)?;
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(cap)).unwrap_or(0));
        (&file)
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|error| GateError::io(path, error))?;
        let truncated = bytes.len() as u64 > cap;
        bytes.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
        Ok(FileBytes {
            bytes,
            truncated,
            size: meta.len(),
        })
    }

    /// Whether a write to `requested` would be refused as protected, checked on the path as
    /// requested and as it resolves.
    fn check_protected(&self, requested: &str, lexical: &RepoPath, resolved: &RepoPath) -> Result<(), GateError> {
        if self.protected.is_match(lexical.as_path()) || self.protected.is_match(resolved.as_path()) {
            return Err(GateError::Protected {
                requested: requested.to_owned(),
                patterns: self.protected_patterns.join(", "),
            });
        }
        Ok(())
    }

    /// Whether writing to `requested` would be refused, and where it would land.
    pub fn writable(&self, requested: &str) -> Result<RepoPath, GateError> {
        let lexical = normalise(requested)?;
        if lexical.is_root() {
            return Err(GateError::IsDir(lexical.display()));
        }
        let resolved = self.resolve(requested)?;
        self.check_protected(requested, &lexical, &resolved)?;
        Ok(resolved)
    }

    /// Writes `bytes` as the whole content of the file `requested` resolves to, creating parent
    /// folders. See the module's guarantees.
    pub fn write(&self, requested: &str, bytes: &[u8]) -> Result<(RepoPath, Written), GateError> {
        let path = self.writable(requested)?;
        let written = self.write_resolved(&path, bytes)?;
        Ok((path, written))
    }

    fn write_resolved(&self, path: &RepoPath, bytes: &[u8]) -> Result<Written, GateError> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(GateError::IsDir(path.display()));
        };
        let folder = if parent.is_root() {
            self.dir.try_clone()
        } else {
            self.dir
                .create_dir_all(parent.as_path())
                .and_then(|()| self.dir.open_dir_nofollow(parent.as_path()))
        }
        .map_err(|error| GateError::io(&parent, error))?;
        let existing = match folder.symlink_metadata(name) {
            Ok(meta) if meta.is_dir() => return Err(GateError::IsDir(path.display())),
            Ok(meta) => {
                check_regular(path, &meta)?;
                Some(meta.permissions().mode() & 0o7777)
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => None,
            Err(error) => return Err(GateError::io(path, error)),
        };
        let temporary = format!(".upkeep-write-{}-{:016x}", std::process::id(), fastrand::u64(..));
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create_new(true)
            .mode(existing.unwrap_or(0o644))
            .follow(FollowSymlinks::No);
        let result = (|| -> io::Result<()> {
            let mut file = folder.open_with(&temporary, &options)?;
            file.write_all(bytes)?;
            if let Some(mode) = existing {
                // The creation mode passed through the umask; the target's own bits are kept.
                file.set_permissions(cap_std::fs::Permissions::from_mode(mode))?;
            }
            drop(file);
            folder.rename(&temporary, &folder, name)
        })();
        if let Err(error) = result {
            let _ = folder.remove_file(&temporary);
            return Err(GateError::io(path, error));
        }
        Ok(if existing.is_some() {
            Written::Replaced
        } else {
            Written::Created
        })
    }

    /// The entries of a directory (not following symlinks), sorted by name; names the gate
    /// never hands out (`.git` in any case) are left out.
    pub fn entries(&self, dir: &RepoPath) -> Result<Vec<(RepoPath, EntryKind)>, GateError> {
        let folder = if dir.is_root() {
            self.dir.try_clone()
        } else {
            self.dir.open_dir_nofollow(dir.as_path())
        }
        .map_err(|error| GateError::io(dir, error))?;
        let mut entries = Vec::new();
        for entry in folder.entries().map_err(|error| GateError::io(dir, error))? {
            let entry = entry.map_err(|error| GateError::io(dir, error))?;
            let Some(path) = dir.child(&entry.file_name()) else {
                continue;
            };
            let kind = entry
                .file_type()
                .map(EntryKind::of)
                .map_err(|error| GateError::io(&path, error))?;
            entries.push((path, kind));
        }
        entries.sort_by(|a, b| a.0.as_path().as_os_str().cmp(b.0.as_path().as_os_str()));
        Ok(entries)
    }
}

fn check_regular(path: &RepoPath, meta: &cap_std::fs::Metadata) -> Result<(), GateError> {
    let file_type = meta.file_type();
    if file_type.is_dir() {
        return Err(GateError::IsDir(path.display()));
    }
    if !file_type.is_file() {
        let kind = if file_type.is_symlink() {
            "a symlink"
        } else {
            "a FIFO, socket or device"
        };
        return Err(GateError::NotRegular {
            path: path.display(),
            kind,
        });
    }
    if meta.nlink() > 1 {
        return Err(GateError::HardLink(path.display()));
    }
    Ok(())
}

/// The work tree could not be opened: a broken clone, or a bad `protected_paths` pattern.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the work tree {}: {source}", root.display())]
    Root {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("invalid `protected_paths` pattern {pattern:?}: {source}")]
    Pattern {
        pattern: String,
        #[source]
        source: globset::Error,
    },
}

#[cfg(test)]
#[path = "fs_tests.rs"]
mod tests;
