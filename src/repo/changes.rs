//! Work no pull request carries yet: what `finish` must not leave behind, and what a cycle that
//! ends any other way reports instead of dropping.
//!
//! A cycle's saved point is the last commit a pull request of the cycle carries (the base
//! commit until one is published). Everything in the work tree that differs from it — edits,
//! new files, deletions, and commits that were never published — is unsaved.
//!
//! Memory: diffing the saved commit's tree against the work tree loads every tree object of the
//! repository (on 100,000 files, some 40 MB more than the clone itself needs). When HEAD is the
//! saved commit and the index on disk is one upkeep wrote holding HEAD's tree (a fresh checkout,
//! a refresh, a commit of upkeep's), the index alone answers: its recorded sizes and times tell
//! the unchanged files apart, as `git status` does. upkeep knows such an index by its checksum
//! (the last 20 bytes of the file), taken when it wrote it; anything else is diffed from the
//! tree. Commands cannot write the git directory (it is outside the work tree), and upkeep
//! writes the index only once the commit it stages succeeded, so a staged change is never
//! mistaken for a saved one.

use std::io::{Read, Seek, SeekFrom};
use std::sync::PoisonError;
use std::time::Duration;

use super::git::{Workspace, WorkspaceError, patch_text};

/// How long the end of a cycle waits for the report of unsaved changes.
const REPORT_WAIT: Duration = Duration::from_secs(10);

/// Changes in the clone that no pull request of this cycle carries.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UnsavedChanges {
    /// Paths relative to the repository root, in the order git lists them.
    pub files: Vec<String>,
    /// The changes as `git diff` prints them (new files included).
    pub diff: String,
}

impl UnsavedChanges {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

impl Workspace {
    /// Records that the index on disk, as it is now, holds HEAD's tree (see the module
    /// documentation); forgets it when the index cannot be read.
    pub(super) fn mark_index_clean(&self) {
        *self.inner.clean_index.lock().unwrap_or_else(PoisonError::into_inner) =
            index_checksum(&self.inner.layout.git_dir);
    }

    /// Forgets the recorded index: unsaved work is diffed from the tree from now on.
    pub(super) fn forget_clean_index(&self) {
        *self.inner.clean_index.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Whether the index on disk is the one [`Workspace::mark_index_clean`] recorded.
    fn index_is_clean(&self) -> bool {
        let recorded = self
            .inner
            .clean_index
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        recorded.is_some() && recorded == index_checksum(&self.inner.layout.git_dir)
    }

    /// Records that a pull request now carries `commit`: changes up to it are saved.
    pub fn mark_saved(&self, commit: git2::Oid) {
        *self.inner.saved.lock().unwrap_or_else(PoisonError::into_inner) = Some(commit);
    }

    /// The commit HEAD points at.
    pub async fn head(&self) -> Result<git2::Oid, WorkspaceError> {
        self.run_blocking(|workspace| Ok(workspace.open()?.head()?.peel_to_commit()?.id()))
            .await
    }

    /// [`Workspace::unsaved_blocking`] on a blocking thread.
    pub async fn unsaved(&self) -> Result<UnsavedChanges, WorkspaceError> {
        self.run_blocking(Workspace::unsaved_blocking).await
    }

    /// [`Workspace::unsaved_blocking`] for the report at the end of a cycle that did not finish:
    /// also after an interrupt or the deadline (the report must not be lost to them), and
    /// given up after `REPORT_WAIT` on a huge tree. `None` when it could not be made.
    pub async fn unsaved_for_report(&self) -> Option<UnsavedChanges> {
        let handle = Workspace {
            inner: std::sync::Arc::clone(&self.inner),
        };
        let task = tokio::task::spawn_blocking(move || handle.unsaved_blocking());
        match tokio::time::timeout(REPORT_WAIT, task).await {
            Ok(Ok(Ok(changes))) => Some(changes),
            _ => None,
        }
    }

    /// The change a push would carry now, for review before it is pushed, as `git diff` prints
    /// it, with new files (ignored files left out, as a commit would take them): from the base
    /// commit, or, on a continued bot branch (`continued`), from the branch's tip as the cycle
    /// found it on the remote. A continued branch may be behind the base and a shallow clone
    /// has no merge base to diff from, so there the diff is what this cycle adds to the pull
    /// request, never the base's newer commits shown as reverted.
    pub async fn proposed_diff(&self, continued: Option<&str>) -> Result<String, WorkspaceError> {
        let base = self.inner.base_commit;
        let tracking = continued.map(|branch| format!("refs/remotes/origin/{branch}"));
        self.run_blocking(move |workspace| {
            let from = match &tracking {
                Some(refname) => workspace.open()?.refname_to_id(refname)?,
                None => base,
            };
            Ok(workspace.changes_since(from)?.diff)
        })
        .await
    }

    /// What the work tree holds beyond the saved point: untracked files included, ignored files
    /// left out (as a commit would take them).
    pub fn unsaved_blocking(&self) -> Result<UnsavedChanges, WorkspaceError> {
        let saved = self
            .inner
            .saved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or(self.inner.base_commit);
        self.changes_since(saved)
    }

    /// The work tree's changes against `commit`.
    fn changes_since(&self, commit: git2::Oid) -> Result<UnsavedChanges, WorkspaceError> {
        let repo = self.open()?;
        let mut options = git2::DiffOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .show_untracked_content(true)
            .include_ignored(false);
        let index_holds_commit = repo.head()?.peel_to_commit()?.id() == commit && self.index_is_clean();
        let diff = if index_holds_commit {
            repo.diff_index_to_workdir(None, Some(&mut options))?
        } else {
            let tree = repo.find_commit(commit)?.tree()?;
            repo.diff_tree_to_workdir_with_index(Some(&tree), Some(&mut options))?
        };
        let files = diff
            .deltas()
            .filter_map(|delta| delta.new_file().path().or_else(|| delta.old_file().path()))
            .map(|path| path.display().to_string())
            .collect();
        Ok(UnsavedChanges {
            files,
            diff: patch_text(&diff)?,
        })
    }
}

/// The checksum git writes at the end of an index file (SHA-1: 20 bytes), which changes with
/// any change of its content. `None` when there is no index or it cannot be read.
fn index_checksum(git_dir: &std::path::Path) -> Option<Vec<u8>> {
    const CHECKSUM_LEN: u64 = 20;
    let mut file = std::fs::File::open(git_dir.join("index")).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.checked_sub(CHECKSUM_LEN)?)).ok()?;
    let mut checksum = Vec::with_capacity(20);
    file.take(CHECKSUM_LEN).read_to_end(&mut checksum).ok()?;
    Some(checksum)
}
