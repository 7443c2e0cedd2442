//! `--keep-clone DIR`: a copy of a cycle's clone that outlives the run, as an ordinary git
//! repository (work tree plus `.git`), for a person to look at.
//!
//! The copy is made before the temporary clone is removed, file by file: regular files are
//! copied with their permission bits, symlinks are copied as symlinks (never followed: a link
//! the repository committed may point anywhere), anything else (FIFOs, sockets) is skipped.
//! The git directory becomes `DIR/.git` with the copy as its work tree.

use std::io;
use std::path::Path;

use super::git::{Workspace, WorkspaceError};

impl Workspace {
    /// Copies the work tree (uncommitted changes included) and the git directory to `dest`,
    /// which must not exist yet or be empty.
    pub async fn keep_at(&self, dest: &Path) -> Result<(), WorkspaceError> {
        let dest = dest.to_owned();
        self.run_blocking(move |workspace| {
            if dest.exists() && std::fs::read_dir(&dest)?.next().is_some() {
                return Err(WorkspaceError::Io(io::Error::other(format!(
                    "{} is not empty; the clone was not copied there",
                    dest.display()
                ))));
            }
            copy_tree(workspace.root(), &dest)?;
            copy_tree(workspace.git_dir(), &dest.join(".git"))?;
            let repo = git2::Repository::open(dest.join(".git"))?;
            let mut config = repo.config()?.open_level(git2::ConfigLevel::Local)?;
            // The copy's work tree is `dest` itself, as in any clone.
            let _ = config.remove("core.worktree");
            config.set_bool("core.bare", false)?;
            Ok(())
        })
        .await
    }
}

/// Copies the directory `from` to `to` (created), recursively, without following symlinks.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if file_type.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if file_type.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
