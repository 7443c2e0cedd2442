//! `create_pull_request`: commit every change on a bot branch, push it, open (or update) the
//! pull request. Branch names: `upkeep/<issue>-<slug>` when working an issue, else
//! `upkeep/<slug-of-title>`. A second call in the same cycle updates the same branch and pull
//! request rather than opening another.
//!
//! Before anything is committed, the change passes the gate of the calling agent's
//! [`SubAgents`](super::delegate::SubAgents): the operator's checks and the reviewer. A round
//! that fails is this call's error (nothing committed, the change left in the clone); after the
//! last round the pull request opens with the unresolved findings appended to its body.

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
            parameters(),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        // Which issue this is for is the run's decision ([`super::targets`]), checked before
        // anything is committed, reviewed or pushed.
        let issue = ctx.targets.issue(args::optional_number(arguments, "issue")?)?;
        // What the model wrote is posted with the bot's account: no mention in it notifies
        // anyone, and the title closes nothing (the body's closing references are settled by
        // `body_with_issue` wherever the body is sent).
        let written_title = ctx.redactor.redact(args::required_str(arguments, "title")?.trim());
        let title = crate::forge::closing::neutralise(&ctx.postable(&written_title), None);
        let body = ctx.postable(args::required_str(arguments, "body")?);
        if title.is_empty() {
            return Err(ToolError::model("title is empty"));
        }
        let replies = replies(arguments, ctx)?;
        let branch = match ctx.continued {
            // The pull request being continued takes the commit, whatever the title says.
            Some(continued) => continued.branch.clone(),
            None => BranchChoice {
                cycle_branch: ctx.cycle_branch,
                issue,
                // Named after the title as written: what is made inert does not rename it.
                title: &written_title,
                task_key: ctx.task_key,
                open: ctx.open_pull_requests,
            }
            .pick(),
        };
        if ctx.cycle_branch.is_none() && ctx.targets.closed_branch(&branch) {
            return Err(ToolError::model(format!(
                "a pull request on {branch} was closed without merging: that task is over (see \"Closed without merging\" in the first message). Pick another task, or, if this is a different task, give it a different title"
            )));
        }
        // An issue is its own identity; a task without one is recognised by its key.
        let task_key = ctx.task_key.filter(|_| issue.is_none()).map(str::to_owned);
        let workspace = ctx.workspace;
        let approval = match ctx.agents {
            Some(agents) => {
                let proposal = super::delegate::Proposal {
                    title: &title,
                    body: &body,
                    issue,
                };
                agents.approve_pull_request(&proposal, ctx).await?
            }
            None => super::delegate::Approval::Approved,
        };

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
        // The findings go into the pull request's body, where reviewers read them; the commit
        // message keeps the description alone.
        let (body, unreviewed) = match approval {
            super::delegate::Approval::Approved => (body, false),
            super::delegate::Approval::OpenWithFindings { section } => {
                (format!("{}\n\n{}", body.trim_end(), ctx.postable(&section)), true)
            }
        };
        let draft = PullRequestDraft {
            branch,
            base: workspace.base_branch().to_owned(),
            title,
            body,
            issue,
            task_key,
            follow_up: ctx.continued.map(|continued| continued.number),
            unreviewed,
        };
        match ctx.forge.publish(workspace, &draft).await {
            Ok(mut pull_request) => {
                // What the pull request carries is saved: `finish` may end the cycle now.
                workspace.mark_saved(commit);
                pull_request.task_key = draft.task_key.clone();
                if let Some(continued) = ctx.continued.filter(|continued| continued.review) {
                    answer_review(ctx, continued, &replies, &draft.body, &mut pull_request).await;
                }
                Ok(ToolOutput::PullRequest(pull_request))
            }
            Err(crate::forge::ForgeError::Workspace(WorkspaceError::Stopped(reason))) => {
                Err(ToolError::Stopped(reason))
            }
            Err(error) if error.is_fatal() => Err(ToolError::Fatal(anyhow::Error::new(error))),
            Err(error) => Err(ToolError::model(format!(
                "the pull request was not published: {error}. The commit is on {} in the clone; you may fix the cause and call create_pull_request again, or ask a human with ask_question",
                draft.branch
            ))),
        }
    }
}

/// The arguments: title, body, issue, and the review replies of a follow-up.
fn parameters() -> Value {
    let mut schema = object_schema(&[
        ("title", "string", "pull request title, imperative and specific", true),
        ("body", "string", "what changed and why, in Markdown", true),
        (
            "issue",
            "integer",
            "the issue this resolves: one the first message offers; leave it out to work the run's own issue",
            false,
        ),
    ]);
    schema["properties"]["replies"] = json!({
        "type": "array",
        "description": "review follow-up only: one reply per review thread you addressed",
        "items": {
            "type": "object",
            "properties": {
                "comment_id": {"type": "integer", "description": "the review thread's id, as the first message names it"},
                "body": {"type": "string", "description": "what you changed for this thread"},
            },
            "required": ["comment_id", "body"],
            "additionalProperties": false,
        },
    });
    schema
}

/// The `replies` argument as (thread id, text); only meaningful in a review follow-up.
fn replies(arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<Vec<(u64, String)>, ToolError> {
    let Some(value) = arguments.get("replies").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let Some(items) = value.as_array() else {
        return Err(ToolError::model(format!(
            "`replies` must be an array of {{\"comment_id\", \"body\"}} objects, not {}",
            args::type_name(value)
        )));
    };
    let threads = ctx.continued.map(|c| c.threads.as_slice()).unwrap_or_default();
    let mut replies = Vec::with_capacity(items.len());
    for item in items {
        let (Some(id), Some(body)) = (
            item.get("comment_id").and_then(Value::as_u64),
            item.get("body").and_then(Value::as_str),
        ) else {
            return Err(ToolError::model(
                "each entry of `replies` needs `comment_id` (integer) and `body` (string)",
            ));
        };
        if !threads.contains(&id) {
            return Err(ToolError::model(format!(
                "review thread {id} is not one of the threads in the first message ({}); reply only in those",
                if threads.is_empty() {
                    "there are none in this cycle".to_owned()
                } else {
                    threads.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                }
            )));
        }
        replies.push((id, ctx.postable(body)));
    }
    Ok(replies)
}

/// Answers the review after the follow-up commit was pushed. A failure to post is reported in
/// the call's result but does not undo the push (the commit is there for the maintainers).
async fn answer_review(
    ctx: &ToolContext<'_>,
    continued: &crate::forge::ContinuedPullRequest,
    replies: &[(u64, String)],
    body: &str,
    pull_request: &mut crate::forge::PullRequest,
) {
    let commit = match ctx.workspace.head_commit().await {
        Ok(commit) => commit.to_string(),
        Err(error) => {
            tracing::warn!("could not read the pushed commit: {error}");
            return;
        }
    };
    let answer = crate::conversation::follow_up::answer(continued, replies, body, &commit);
    match ctx.forge.answer_feedback(&answer).await {
        Ok(posted) => pull_request.answers = posted,
        Err(error) => pull_request.answers = vec![format!("the review was not answered: {error}")],
    }
}

fn fatal(error: WorkspaceError) -> ToolError {
    ToolError::from_git(error, "committing the changes")
}

/// What the model reads back after a successful call.
pub fn describe(pull_request: &crate::forge::PullRequest) -> String {
    json!({
        "url": pull_request.url,
        "number": pull_request.number,
        "branch": pull_request.branch,
        "updated_existing": pull_request.updated,
        "answers": pull_request.answers,
        "next": "call finish with status completed and a one-line summary",
    })
    .to_string()
}
