//! `--forge local`: the repository is a local path. The bot branch is written into that
//! repository and the pull request is recorded as the branch description
//! (`branch.<name>.description`: title, blank line, body), the convention `git request-pull`
//! and `git format-patch --cover-letter` read. A bot branch counts as open until it is merged
//! into the base branch. The git side (what is written into the source, and what is refused)
//! is [`crate::repo::source`].

use std::path::PathBuf;

use async_trait::async_trait;

use super::mergeable::{MergeableNotes, PullRequestRef};
use super::{Forge, ForgeError, OpenPullRequest, PullRequest, PullRequestDraft, body_with_issue};
use crate::repo::questions::LocalQuestion;
use crate::repo::source::{BranchUpdate, LocalSource};
use crate::repo::{Workspace, WorkspaceError};

#[derive(Debug)]
pub(crate) struct LocalForge {
    source: LocalSource,
    /// The run's `--task`, kept with a question about it so that answering resumes it.
    task: Option<String>,
}

impl LocalForge {
    pub(crate) fn new(source: PathBuf) -> Self {
        Self {
            source: LocalSource::new(source),
            task: None,
        }
    }

    /// The email the bot commits with: bot branches holding anyone else's commits are kept.
    pub(crate) fn with_bot_email(mut self, email: &str) -> Self {
        self.source = self.source.with_bot_email(email);
        self
    }

    /// The task the run works (`--task`), for the questions asked about it.
    pub(crate) fn with_task(mut self, task: Option<String>) -> Self {
        self.task = task;
        self
    }

    fn url(&self, branch: &str) -> String {
        format!("file://{}#{branch}", self.source.path().display())
    }
}

/// The commands that review, merge and close the local pull request at `url` (as
/// [`LocalForge`] writes it: `file://<repository>#<branch>`), for the person reading the run's
/// output: a `file://` link opens nothing. `git diff ...branch` shows what the branch adds to the
/// checked-out branch, which is the base unless `--base` named another.
pub(crate) fn review_commands(url: &str) -> Option<String> {
    let (path, branch) = url.strip_prefix("file://")?.rsplit_once('#')?;
    let repository = shlex::try_quote(path).ok()?;
    let branch = shlex::try_quote(branch).ok()?;
    Some(format!(
        "  review: git -C {repository} diff ...{branch}\n  merge:  git -C {repository} merge {branch}\n  close:  git -C {repository} branch -D {branch}"
    ))
}

#[async_trait]
impl Forge for LocalForge {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn open_pull_requests(&self, base: &str) -> Result<Vec<OpenPullRequest>, ForgeError> {
        let branches = self.source.open_bot_branches(base).await.map_err(|error| match error {
            WorkspaceError::UnsafeSource { .. } => ForgeError::Workspace(error),
            other => ForgeError::Other(format!(
                "listing bot branches in {}: {other}",
                self.source.path().display()
            )),
        })?;
        Ok(branches
            .into_iter()
            .map(|branch| OpenPullRequest {
                number: None,
                task_key: branch.task_key,
                url: self.url(&branch.name),
                branch: branch.name,
                title: branch.title,
                head_sha: None,
            })
            .collect())
    }

    async fn publish(&self, workspace: &Workspace, draft: &PullRequestDraft) -> Result<PullRequest, ForgeError> {
        let description = format!(
            "{}\n\n{}\n",
            draft.title.trim(),
            body_with_issue(&draft.body, draft.issue).trim_end()
        );
        let update = BranchUpdate {
            branch: draft.branch.clone(),
            description: Some(description),
            task_key: draft.task_key.clone(),
            lease: draft.lease,
        };
        let existed = self
            .source
            .publish(workspace, update)
            .await
            .map_err(|error| match error {
                WorkspaceError::Stopped(_) | WorkspaceError::UnsafeSource { .. } => ForgeError::Workspace(error),
                other => ForgeError::Other(format!(
                    "pushing {} into {}: {other}",
                    draft.branch,
                    self.source.path().display()
                )),
            })?;
        Ok(PullRequest {
            url: self.url(&draft.branch),
            number: None,
            branch: draft.branch.clone(),
            title: draft.title.clone(),
            updated: existed,
            preview: None,
            answers: Vec::new(),
            task_key: None,
        })
    }

    async fn post_question(&self, issue: Option<u64>, question: &str) -> Result<Option<String>, ForgeError> {
        // Kept in the repository's git config, where the next run finds it (see
        // `crate::repo::questions`).
        let task_key = self.task.as_deref().map(super::task::task_key);
        let recorded = LocalQuestion {
            key: LocalQuestion::key_for(issue, task_key.as_deref()),
            question: question.to_owned(),
            answer: None,
            issue,
            task: self.task.clone(),
            asked: Some(jiff::Timestamp::now().to_string()),
        };
        let line = crate::repo::questions::where_to_answer(self.source.path(), &recorded);
        self.source.record_question(recorded).await.map_err(|error| {
            ForgeError::Other(format!(
                "recording the question in {}: {error}",
                self.source.path().display()
            ))
        })?;
        Ok(Some(line))
    }

    async fn replace_branch(&self, workspace: &Workspace, branch: &str, lease: git2::Oid) -> Result<(), ForgeError> {
        let update = BranchUpdate {
            branch: branch.to_owned(),
            lease: Some(lease),
            ..BranchUpdate::default()
        };
        self.source
            .publish(workspace, update)
            .await
            .map(|_| ())
            .map_err(|error| match error {
                WorkspaceError::Stopped(_) | WorkspaceError::UnsafeSource { .. } => ForgeError::Workspace(error),
                other => ForgeError::Other(format!(
                    "writing {branch} into {}: {other}",
                    self.source.path().display()
                )),
            })
    }

    async fn mergeable_notes(&self, pull: &PullRequestRef) -> Result<MergeableNotes, ForgeError> {
        let markers = self
            .source
            .notes(&pull.branch)
            .await
            .map_err(|error| ForgeError::Other(format!("reading the notes on {}: {error}", pull.branch)))?;
        Ok(MergeableNotes { markers })
    }

    async fn leave_note(
        &self,
        pull: &PullRequestRef,
        _commit: &str,
        marker: &str,
        _text: &str,
    ) -> Result<Vec<String>, ForgeError> {
        // The local forge has no comments: the marker is kept beside the branch, and the run
        // says the text on its output.
        if marker.is_empty() {
            return Ok(Vec::new());
        }
        self.source
            .add_note(&pull.branch, marker)
            .await
            .map_err(|error| ForgeError::Other(format!("recording a note on {}: {error}", pull.branch)))?;
        Ok(Vec::new())
    }
}
