//! Why the work-tree gate refused a path: the one error of `fs` (opening, reading, writing,
//! resolving symlinks) and of `path` (the lexical check of a requested path).
//!
//! A leaf of its own so that both can name it without importing each other: `path` decides what
//! a path may look like before anything is opened, `fs` opens it, and each refuses with these.

use std::io;

/// Why the gate refused. The text goes back to the model as the failed call's result, so each
/// says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("the path is empty; give a path relative to the repository root")]
    Empty,
    #[error("{0:?} contains a NUL byte")]
    Nul(String),
    #[error("{0:?} is absolute; give a path relative to the repository root (for example `src/main.rs`)")]
    Absolute(String),
    #[error(
        "{0:?} contains `..`; paths must stay inside the repository: give a path relative to its root without `..`"
    )]
    ParentDir(String),
    #[error(
        "{0:?} names the git directory (`.git`, in any letter case), which upkeep never reads or writes; use the repository's files instead"
    )]
    GitDir(String),
    #[error(
        "{requested:?} goes through the symlink {link:?}, which points outside the repository; file tools only work inside it"
    )]
    LinkOutside { requested: String, link: String },
    #[error(
        "{requested:?} goes through the symlink {link:?}, which points into the git directory; upkeep never reads or writes it"
    )]
    LinkIntoGit { requested: String, link: String },
    #[error("{0:?} goes through more than 40 symlinks; it cannot be resolved")]
    TooManyLinks(String),
    #[error("{0} does not exist")]
    NotFound(String),
    #[error("{0} is a directory")]
    IsDir(String),
    #[error("{path} is {kind}, not a regular file; upkeep reads and writes regular files only")]
    NotRegular { path: String, kind: &'static str },
    #[error(
        "{0} has more than one hard link; upkeep reads only files with a single link (a git checkout never makes hard links)"
    )]
    HardLink(String),
    #[error(
        "{requested:?} is protected (protected_paths: {patterns}); upkeep may not change it. Leave it as it is, or ask a human with ask_question"
    )]
    Protected { requested: String, patterns: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}
