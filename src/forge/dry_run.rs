//! `--dry-run`: wraps the real forge. Reads (open pull requests, task issues) still go to it so
//! the model sees the real state; writes (push, pull request, comment) are replaced by a preview
//! of exactly what would have been sent.

use async_trait::async_trait;

use super::{
    ClosedPullRequest, DashboardUpdate, FeedbackAnswer, Forge, ForgeError, OpenPullRequest, PullRequest,
    PullRequestActivity, PullRequestDraft, PullRequestFeedback, TaskIssue,
};
use crate::repo::Workspace;

pub(crate) struct DryRun {
    inner: Box<dyn Forge>,
}

impl DryRun {
    pub(crate) fn new(inner: Box<dyn Forge>) -> Self {
        Self { inner }
    }
}

#[async_trait]
impl Forge for DryRun {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn open_pull_requests(&self, base: &str) -> Result<Vec<OpenPullRequest>, ForgeError> {
        self.inner.open_pull_requests(base).await
    }

    async fn task_issues(&self, label: &str) -> Result<Vec<TaskIssue>, ForgeError> {
        self.inner.task_issues(label).await
    }

    async fn publish(&self, workspace: &Workspace, draft: &PullRequestDraft) -> Result<PullRequest, ForgeError> {
        let diff = workspace.diff_from_base().await?;
        Ok(PullRequest::preview(
            format!("(dry run: not pushed) {}", draft.branch),
            draft,
            &diff,
        ))
    }

    async fn post_question(&self, issue: Option<u64>, _question: &str) -> Result<Option<String>, ForgeError> {
        Ok(issue.map(|number| format!("(dry run: would comment on issue #{number})")))
    }

    async fn issue(&self, number: u64) -> Result<Option<TaskIssue>, ForgeError> {
        self.inner.issue(number).await
    }

    async fn closed_pull_requests(&self, base: &str) -> Result<Vec<ClosedPullRequest>, ForgeError> {
        self.inner.closed_pull_requests(base).await
    }

    async fn pull_request_feedback(&self, number: u64) -> Result<PullRequestFeedback, ForgeError> {
        self.inner.pull_request_feedback(number).await
    }

    async fn answer_feedback(&self, answer: &FeedbackAnswer) -> Result<Vec<String>, ForgeError> {
        let mut would = Vec::new();
        for (thread, reply) in &answer.replies {
            would.push(format!("(dry run: would reply in review thread {thread}) {reply}"));
        }
        if let Some(summary) = &answer.summary {
            would.push(format!(
                "(dry run: would comment on pull request #{}) {summary}",
                answer.pull_request
            ));
        }
        Ok(would)
    }

    async fn pull_request_activity(
        &self,
        base: &str,
        since: jiff::Timestamp,
    ) -> Result<PullRequestActivity, ForgeError> {
        self.inner.pull_request_activity(base, since).await
    }

    async fn checks(&self, sha: &str) -> Result<Option<super::checks::ChecksState>, ForgeError> {
        self.inner.checks(sha).await
    }

    async fn fix_attempts(&self, number: u64) -> Result<super::fix_attempts::FixAttempts, ForgeError> {
        self.inner.fix_attempts(number).await
    }

    async fn commit_time(&self, sha: &str) -> Result<Option<jiff::Timestamp>, ForgeError> {
        self.inner.commit_time(sha).await
    }

    async fn update_dashboard(&self, _body: &str) -> Result<Option<DashboardUpdate>, ForgeError> {
        // Writes nothing; the run says what it would have written.
        Ok(None)
    }

    async fn replace_branch(&self, _workspace: &Workspace, branch: &str, _lease: git2::Oid) -> Result<(), ForgeError> {
        // Pushes nothing: the run says the branch was rebased in the clone only.
        Err(ForgeError::Other(format!("dry run: {branch} was not pushed")))
    }

    async fn mergeable_notes(
        &self,
        pull: &super::mergeable::PullRequestRef,
    ) -> Result<super::mergeable::MergeableNotes, ForgeError> {
        self.inner.mergeable_notes(pull).await
    }

    async fn leave_note(
        &self,
        pull: &super::mergeable::PullRequestRef,
        _commit: &str,
        _marker: &str,
        text: &str,
    ) -> Result<Vec<String>, ForgeError> {
        Ok(vec![format!("(dry run: would comment on {}) {text}", pull.branch)])
    }
}
