//! Work no pull request carries yet: what `finish` must not leave behind, and what a cycle that
//! ends any other way reports instead of dropping.
//!
//! A cycle's saved point is the last commit a pull request of the cycle carries (the base
//! commit until one is published). Everything in the work tree that differs from it — edits,
//! new files, deletions, and commits that were never published — is unsaved.

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
    /// given up after [`REPORT_WAIT`] on a huge tree. `None` when it could not be made.
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

    /// What the work tree holds beyond the saved point: untracked files included, ignored files
    /// left out (as a commit would take them).
    pub fn unsaved_blocking(&self) -> Result<UnsavedChanges, WorkspaceError> {
        let saved = self
            .inner
            .saved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or(self.inner.base_commit);
        let repo = self.open()?;
        let tree = repo.find_commit(saved)?.tree()?;
        let mut options = git2::DiffOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .show_untracked_content(true)
            .include_ignored(false);
        let diff = repo.diff_tree_to_workdir_with_index(Some(&tree), Some(&mut options))?;
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
