//! `--forge none`: commits stay on the bot branch inside the temporary clone, which is removed
//! at the end of the run (unless `--keep-clone DIR` copies it first); the title, body and diff
//! are reported. For trying upkeep on a repository without giving it anywhere to push.

use async_trait::async_trait;

use super::{Forge, ForgeError, OpenPullRequest, PullRequest, PullRequestDraft};
use crate::repo::Workspace;

#[derive(Debug, Default)]
pub(crate) struct NoForge;

#[async_trait]
impl Forge for NoForge {
    fn name(&self) -> &'static str {
        "none"
    }

    async fn open_pull_requests(&self, _base: &str) -> Result<Vec<OpenPullRequest>, ForgeError> {
        Ok(Vec::new())
    }

    async fn publish(&self, workspace: &Workspace, draft: &PullRequestDraft) -> Result<PullRequest, ForgeError> {
        let diff = workspace.diff_from_base().await?;
        let url = format!(
            "(not published, --forge none: committed on {} in the temporary clone, which is removed at the end of the run unless --keep-clone DIR keeps a copy)",
            draft.branch
        );
        Ok(PullRequest::preview(url, draft, &diff))
    }

    async fn post_question(&self, _issue: Option<u64>, _question: &str) -> Result<Option<String>, ForgeError> {
        Ok(None)
    }
}
