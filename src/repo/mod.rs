//! The only gate to the repository: the work tree as a directory capability (`fs`, `walk`).

pub mod fs;
pub mod walk;

pub use fs::{EntryKind, GateError, RepoPath, WorkTree, Written};
