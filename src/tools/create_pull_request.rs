//! `create_pull_request`: commit every change on a bot branch, push it, open (or update) the
//! pull request. Branch names: `upkeep/<issue>-<slug>` when working an issue, else
//! `upkeep/<slug-of-title>`. A second call in the same cycle updates the same branch and pull
//! request rather than opening another.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::branch::BranchChoice;
use super::spec::object_schema;
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};
use crate::forge::PullRequestDraft;
use crate::repo::WorkspaceError;

pub struct CreatePullRequest;

#[async_trait]
impl Tool for CreatePullRequest {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "create_pull_request",
            ToolClass::Safe,
            "Commit every change made so far on a bot branch, push it and open a pull request (or update the open one for the same branch). Call finish afterwards.",
            object_schema(&[
                ("title", "string", "pull request title, imperative and specific", true),
                ("body", "string", "what changed and why, in Markdown", true),
                ("issue", "integer", "number of the issue this resolves, if any", false),
            ]),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let title = ctx.redactor.redact(args::required_str(arguments, "title")?.trim());
        let body = ctx.redactor.redact(args::required_str(arguments, "body")?);
        if title.is_empty() {
            return Err(ToolError::model("title is empty"));
        }
        let issue = args::optional_number(arguments, "issue")?.or(ctx.default_issue);
        let branch = BranchChoice {
            cycle_branch: ctx.cycle_branch,
            issue,
            title: &title,
            task_key: ctx.task_key,
            open: ctx.open_pull_requests,
        }
        .pick();
        // An issue is its own identity; a task without one is recognised by its key.
        let task_key = ctx.task_key.filter(|_| issue.is_none()).map(str::to_owned);
        let workspace = ctx.workspace;

        let on_bot_branch = workspace.current_branch().await.map_err(fatal)? == branch;
        let message = format!("{title}\n\n{}", crate::forge::body_with_issue(&body, issue));
        let commit = match workspace.commit(&branch, &message, ctx.identity, ctx.redactor).await {
            Ok(commit) => commit,
            // The change was committed by an earlier call whose publishing failed: publish it.
            Err(WorkspaceError::NothingToCommit) if on_bot_branch => workspace.head().await.map_err(fatal)?,
            Err(WorkspaceError::NothingToCommit) => {
                return Err(ToolError::model(
                    "there are no changes to propose: make the changes with write_file or edit_file first, or call finish if nothing needs changing",
                ));
            }
            Err(WorkspaceError::SecretInChange(place)) => {
                return Err(ToolError::model(format!(
                    "{place} contains a secret value (a token or API key upkeep holds), so nothing was committed or pushed; remove it from the change and call create_pull_request again"
                )));
            }
            Err(error) => return Err(fatal(error)),
        };
        let draft = PullRequestDraft {
            branch,
            base: workspace.base_branch().to_owned(),
            title,
            body,
            issue,
            task_key,
        };
        match ctx.forge.publish(workspace, &draft).await {
            Ok(mut pull_request) => {
                // What the pull request carries is saved: `finish` may end the cycle now.
                workspace.mark_saved(commit);
                pull_request.task_key = draft.task_key.clone();
                Ok(ToolOutput::PullRequest(pull_request))
            }
            Err(error) if error.is_fatal() => Err(ToolError::Fatal(anyhow::Error::new(error))),
            Err(error) => Err(ToolError::model(format!(
                "the pull request was not published: {error}. The commit is on {} in the clone; you may fix the cause and call create_pull_request again, or ask a human with ask_question",
                draft.branch
            ))),
        }
    }
}

fn fatal(error: WorkspaceError) -> ToolError {
    ToolError::Fatal(anyhow::Error::new(error).context("committing the changes"))
}

/// What the model reads back after a successful call.
pub fn describe(pull_request: &crate::forge::PullRequest) -> String {
    json!({
        "url": pull_request.url,
        "number": pull_request.number,
        "branch": pull_request.branch,
        "updated_existing": pull_request.updated,
        "next": "call finish with status completed and a one-line summary",
    })
    .to_string()
}
