//! `--dry-run`: wraps the real forge. Reads (open pull requests, task issues) still go to it so
//! the model sees the real state; writes (push, pull request, comment) are replaced by a preview
//! of exactly what would have been sent.

use async_trait::async_trait;

use super::{
    DashboardUpdate, Forge, ForgeError, OpenPullRequest, PullRequest, PullRequestActivity, PullRequestDraft, TaskIssue,
    render_preview,
};
use crate::repo::Workspace;

pub struct DryRun {
    inner: Box<dyn Forge>,
}

impl DryRun {
    pub fn new(inner: Box<dyn Forge>) -> Self {
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
        Ok(PullRequest {
            url: format!("(dry run: not pushed) {}", draft.branch),
            number: None,
            branch: draft.branch.clone(),
            title: draft.title.clone(),
            updated: false,
            preview: Some(render_preview(draft, &diff)),
            task_key: None,
        })
    }

    async fn post_question(&self, issue: Option<u64>, _question: &str) -> Result<Option<String>, ForgeError> {
        Ok(issue.map(|number| format!("(dry run: would comment on issue #{number})")))
    }

    async fn pull_request_activity(
        &self,
        base: &str,
        since: jiff::Timestamp,
    ) -> Result<PullRequestActivity, ForgeError> {
        self.inner.pull_request_activity(base, since).await
    }

    async fn update_dashboard(&self, _body: &str) -> Result<Option<DashboardUpdate>, ForgeError> {
        // Writes nothing; the run says what it would have written.
        Ok(None)
    }
}
