//! Publishing a bot branch as a pull request on GitHub.
//!
//! - An open pull request for the branch is always looked for first, so publishing again after
//!   a failure never opens a second one.
//! - A follow-up (`--pr`) pushes on top of what the branch has and leaves the title and
//!   description alone; a rebuilt branch replaces the remote's only when every commit on it is
//!   the bot's, so a maintainer's fix-up is never force-pushed away.

use serde_json::json;

use super::api::{Method, encode, parse_object};
use super::json::{self, PullJson};
use super::{GitHubForge, PER_PAGE};
use crate::forge::task::task_marker;
use crate::forge::{ForgeError, PullRequest, PullRequestDraft, body_with_issue};
use crate::repo::{GitAuth, Workspace};

impl GitHubForge {
    /// See the module header.
    pub(super) async fn publish_pull_request(
        &self,
        workspace: &Workspace,
        draft: &PullRequestDraft,
    ) -> Result<PullRequest, ForgeError> {
        let Some(token) = &self.token else {
            return Err(ForgeError::Auth(
                "GITHUB_TOKEN (or GH_TOKEN) is not set; pushing and opening pull requests on GitHub need it".into(),
            ));
        };
        let auth = GitAuth {
            token: Some(token.clone()),
        };
        if let Some(number) = draft.follow_up {
            // Commits on top of what the branch has: never a force-push over anyone's work, and
            // the pull request's title and description stay the maintainers' to read.
            workspace.push_on_top(&draft.branch, &auth).await?;
            let url = format!("{}/pull/{number}", self.html_base());
            return Ok(updated_pull_request(url, number, draft));
        }
        // The branch was rebuilt from the base and replaces what the remote has: never over
        // commits someone else pushed to the open pull request.
        let existing = self.find_open_pull_request(&draft.branch).await?;
        if let Some(existing) = &existing {
            self.refuse_overwriting_others(existing.number).await?;
        }
        match draft.lease {
            // Re-done on the current base: replaces the branch only while it is what was read.
            Some(lease) => workspace.push_with_lease(&draft.branch, &auth, lease).await?,
            None => workspace.push(&draft.branch, &auth).await?,
        }

        let mut body = body_with_issue(&draft.body, draft.issue);
        if let Some(key) = &draft.task_key {
            // Hidden in the rendered body; a later run of the same task finds the branch by it.
            body = format!("{}\n\n{}", body.trim_end(), task_marker(key));
        }
        if let Some(existing) = existing {
            let operation = format!("updating pull request #{}", existing.number);
            let mut update = json!({"title": draft.title, "body": body});
            // The branch was rebuilt on this run's base; point the pull request at it too.
            if existing.base.as_ref().is_some_and(|base| base.ref_name != draft.base) {
                update["base"] = json!(draft.base);
            }
            let route = self.route(&format!("/pulls/{}", existing.number));
            let answer = self.api.send(&operation, Method::Patch, &route, Some(&update)).await?;
            let updated = parse_object::<PullJson>(&operation, &answer.text).unwrap_or(existing);
            return Ok(updated_pull_request(updated.html_url, updated.number, draft));
        }

        let operation = format!("opening the pull request for {}", draft.branch);
        let request = json!({
            "title": draft.title,
            "head": draft.branch,
            "base": draft.base,
            "body": body,
            // A change the review did not pass opens as a draft, whatever `--draft` says.
            "draft": self.draft || draft.unreviewed,
        });
        let answer = self
            .api
            .send(&operation, Method::Post, &self.route("/pulls"), Some(&request))
            .await?;
        let created = parse_object::<PullJson>(&operation, &answer.text)?;
        Ok(PullRequest {
            url: created.html_url,
            number: Some(created.number),
            branch: draft.branch.clone(),
            title: draft.title.clone(),
            updated: false,
            preview: None,
            answers: Vec::new(),
            task_key: None,
        })
    }

    /// Refuses to rewrite pull request `number`'s branch when it holds commits the bot did not
    /// make (author or committer other than the bot's email): a maintainer's fix-up pushed to
    /// the bot's branch must never be lost to a force-push. The model can work the feedback on
    /// top of them instead (`--pr`), or ask.
    async fn refuse_overwriting_others(&self, number: u64) -> Result<(), ForgeError> {
        let operation = format!("reading the commits of pull request #{number}");
        let route = self.route(&format!("/pulls/{number}/commits?per_page={PER_PAGE}"));
        let commits = self.api.list(&operation, route, usize::MAX).await?;
        let bot = self.bot_email.as_deref().unwrap_or_default();
        let by_bot = |user: &Option<json::GitUserJson>| {
            user.as_ref()
                .and_then(|user| user.email.as_deref())
                .is_some_and(|email| !bot.is_empty() && email.eq_ignore_ascii_case(bot))
        };
        let foreign: Vec<String> = commits
            .into_iter()
            .filter_map(|value| serde_json::from_value::<json::PullCommitJson>(value).ok())
            .filter(|commit| !(by_bot(&commit.commit.author) && by_bot(&commit.commit.committer)))
            .map(|commit| {
                let who = commit
                    .commit
                    .author
                    .as_ref()
                    .and_then(|author| author.email.clone())
                    .unwrap_or_else(|| "someone".into());
                let summary = commit.commit.message.lines().next().unwrap_or_default().to_owned();
                let sha: String = commit.sha.chars().take(12).collect();
                format!("{sha} by {who}: {}", crate::text::escape_control(&summary))
            })
            .collect();
        if foreign.is_empty() {
            return Ok(());
        }
        Err(ForgeError::Other(format!(
            "pull request #{number} has commits upkeep did not make ({}), and updating it would force-push over them, so nothing was pushed. Ask a human with ask_question; a maintainer can have upkeep build on them with --pr {number}",
            foreign.join("; ")
        )))
    }

    /// Replaces bot branch `branch` with the clone's while GitHub's still points at `lease`.
    pub(super) async fn replace_with_lease(
        &self,
        workspace: &Workspace,
        branch: &str,
        lease: git2::Oid,
    ) -> Result<(), ForgeError> {
        let Some(token) = &self.token else {
            return Err(ForgeError::Auth(
                "GITHUB_TOKEN (or GH_TOKEN) is not set; pushing to GitHub needs it".into(),
            ));
        };
        let auth = GitAuth {
            token: Some(token.clone()),
        };
        Ok(workspace.push_with_lease(branch, &auth, lease).await?)
    }

    /// The number of the open pull request of this repository whose head is `branch`, if one
    /// is (a checks event that names no pull request).
    pub(crate) async fn open_pull_request_number(&self, branch: &str) -> Result<Option<u64>, ForgeError> {
        Ok(self.find_open_pull_request(branch).await?.map(|pull| pull.number))
    }

    /// Open pull requests of this repository whose head is `branch`.
    async fn find_open_pull_request(&self, branch: &str) -> Result<Option<PullJson>, ForgeError> {
        let operation = format!("looking for an open pull request for {branch}");
        let route = self.route(&format!(
            "/pulls?state=open&head={}&per_page={PER_PAGE}",
            encode(&format!("{}:{branch}", self.owner))
        ));
        let pulls = self.api.list(&operation, route, usize::MAX).await?;
        Ok(pulls
            .into_iter()
            .filter_map(|value| serde_json::from_value::<PullJson>(value).ok())
            .find(|pull| pull.head.ref_name == branch && self.is_this_repo(&pull.head)))
    }
}

/// An existing pull request that `draft` updated (pushed to, or retitled).
fn updated_pull_request(url: String, number: u64, draft: &PullRequestDraft) -> PullRequest {
    PullRequest {
        url,
        number: Some(number),
        branch: draft.branch.clone(),
        title: draft.title.clone(),
        updated: true,
        preview: None,
        answers: Vec::new(),
        task_key: None,
    }
}
