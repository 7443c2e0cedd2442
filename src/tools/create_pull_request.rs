//! `create_pull_request`: commit every change on a bot branch, push it, open (or update) the
//! pull request. Branch names: `upkeep/<issue>-<slug>` when working an issue, else
//! `upkeep/<slug-of-title>`. A second call in the same cycle updates the same branch and pull
//! request rather than opening another.
//!
//! Before anything is committed, the change passes the gate of the calling agent's
//! [`SubAgents`](super::delegate::SubAgents): the operator's checks and the reviewer. A round
//! that fails is this call's error (nothing committed, the change left in the clone); after the
//! last round the pull request opens with the unresolved findings appended to its body.
//!
//! Everything this tool works from beyond the shared context is its [`PullRequestScope`]
//! (forge, identity, what the cycle is for), and the pull requests it publishes are recorded
//! there, so the generic turn loop keeps no pull-request bookkeeping.
//!
//! The `replies` argument (one answer per review thread) exists only in a cycle that follows up
//! review comments: elsewhere it is neither in the schema the model sees nor accepted.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::args::{self, WholeNumber};
use super::branch::BranchChoice;
use super::{PullRequestScope, RawInvocation, Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec};
use crate::forge::PullRequestDraft;
use crate::repo::WorkspaceError;

pub(crate) struct CreatePullRequest {
    /// The cycle follows up review comments: the `replies` argument is offered.
    review: bool,
}

impl CreatePullRequest {
    /// `create_pull_request` for a cycle that follows up review comments (`review`) or not.
    pub(crate) fn new(review: bool) -> Self {
        Self { review }
    }
}

/// The arguments outside a review follow-up.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PullRequestArgs {
    /// pull request title, imperative and specific
    title: String,
    /// what changed and why, in Markdown
    body: String,
    /// the issue this resolves: one the first message offers; leave it out to work the run's own issue
    issue: Option<WholeNumber>,
}

/// The arguments in a review follow-up: those of [`PullRequestArgs`] and the replies.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReviewFollowUpArgs {
    /// pull request title, imperative and specific
    title: String,
    /// what changed and why, in Markdown
    body: String,
    /// the issue this resolves: one the first message offers; leave it out to work the run's own issue
    issue: Option<WholeNumber>,
    /// one reply per review thread you addressed
    replies: Option<Vec<ReviewReply>>,
}

// One answer in a review thread (a plain comment: a doc comment would describe it to the model).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReviewReply {
    /// the review thread's id, as the first message names it
    comment_id: WholeNumber,
    /// what you changed for this thread
    body: String,
}

impl From<PullRequestArgs> for ReviewFollowUpArgs {
    fn from(args: PullRequestArgs) -> Self {
        Self {
            title: args.title,
            body: args.body,
            issue: args.issue,
            replies: None,
        }
    }
}

#[async_trait]
impl Tool for CreatePullRequest {
    fn spec(&self) -> ToolSpec {
        let parameters = if self.review {
            args::schema_for::<ReviewFollowUpArgs>()
        } else {
            args::schema_for::<PullRequestArgs>()
        };
        ToolSpec::new(
            "create_pull_request",
            ToolClass::Safe,
            "Commit every change made so far on a bot branch, push it and open a pull request (or update the open one for the same branch). Call finish afterwards.",
            parameters,
        )
    }

    async fn call(&self, call: RawInvocation<'_>) -> Result<ToolOutput, ToolError> {
        let ctx = call.ctx;
        let arguments: ReviewFollowUpArgs = if self.review {
            args::parse(call.args)?
        } else {
            args::parse::<PullRequestArgs>(call.args)?.into()
        };
        let scope = ctx.pull_request;
        // Which issue this is for is the run's decision ([`super::targets`]), checked before
        // anything is committed, reviewed or pushed.
        let issue = ctx.targets.issue(arguments.issue.map(|issue| issue.0))?;
        // What the model wrote is posted with the bot's account: no mention in it notifies
        // anyone, and the title closes nothing (the body's closing references are settled by
        // `body_with_issue` wherever the body is sent).
        let written_title = ctx.redactor.redact(arguments.title.trim());
        let title = crate::forge::closing::neutralise(&ctx.postable(&written_title), None);
        let body = ctx.postable(&arguments.body);
        if title.is_empty() {
            return Err(ToolError::model("title is empty"));
        }
        let replies = replies(arguments.replies.unwrap_or_default(), ctx)?;
        let cycle_branch = scope.published.branch();
        let branch = match (scope.continued, scope.redo) {
            // The pull request being continued takes the commit, whatever the title says.
            (Some(continued), _) => continued.branch.clone(),
            // So does the one whose change is made again on the base.
            (None, Some(redo)) => redo.pull.branch.clone(),
            (None, None) => BranchChoice {
                cycle_branch: cycle_branch.as_deref(),
                issue,
                // Named after the title as written: what is made inert does not rename it.
                title: &written_title,
                task_key: scope.task_key,
                open: scope.open_pull_requests,
            }
            .pick(),
        };
        if cycle_branch.is_none() && ctx.targets.closed_branch(&branch) {
            return Err(ToolError::model(format!(
                "a pull request on {branch} was closed without merging: that task is over (see \"Closed without merging\" in the first message). Pick another task, or, if this is a different task, give it a different title"
            )));
        }
        // An issue is its own identity; a task without one is recognised by its key.
        let task_key = scope.task_key.filter(|_| issue.is_none()).map(str::to_owned);
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
        let commit = match workspace.commit(&branch, &message, scope.identity, ctx.redactor).await {
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
            follow_up: scope.continued.map(|continued| continued.number),
            unreviewed,
            lease: scope.redo.map(|redo| redo.lease),
        };
        match scope.forge.publish(workspace, &draft).await {
            Ok(mut pull_request) => {
                // What the pull request carries is saved: `finish` may end the cycle now.
                workspace.mark_saved(commit);
                pull_request.task_key = draft.task_key.clone();
                // What is said on the pull request names the commit that was pushed.
                match workspace.head_commit().await.map(|pushed| pushed.to_string()) {
                    Ok(pushed) => {
                        if let Some(continued) = scope.continued.filter(|continued| continued.review) {
                            answer_review(scope, continued, &replies, &draft.body, &pushed, &mut pull_request).await;
                        }
                        if let Some((continued, fix)) = scope
                            .continued
                            .and_then(|continued| continued.fix.as_deref().map(|fix| (continued, fix)))
                        {
                            let number = continued.number;
                            record_fix_attempt(scope, number, fix, &draft.body, &pushed, &mut pull_request).await;
                        }
                        if let Some(redo) = scope.redo {
                            record_redo(scope, redo, &pushed, &mut pull_request).await;
                        }
                    }
                    Err(error) => tracing::warn!("could not read the pushed commit: {error}"),
                }
                scope.published.record(pull_request.clone());
                Ok(ToolOutput::PullRequest(pull_request))
            }
            Err(crate::forge::ForgeError::Workspace(WorkspaceError::Stopped(reason))) => {
                Err(ToolError::Stopped(reason))
            }
            Err(error) if error.is_fatal() => Err(ToolError::Fatal(super::Failure::Forge(error))),
            Err(error) => Err(ToolError::model(format!(
                "the pull request was not published: {error}. The commit is on {} in the clone; you may fix the cause and call create_pull_request again, or ask a human with ask_question",
                draft.branch
            ))),
        }
    }
}

/// The `replies` argument as (thread id, text); only offered in a review follow-up.
fn replies(replies: Vec<ReviewReply>, ctx: &ToolContext<'_>) -> Result<Vec<(u64, String)>, ToolError> {
    let threads = ctx
        .pull_request
        .continued
        .map(|c| c.threads.as_slice())
        .unwrap_or_default();
    let mut answers = Vec::with_capacity(replies.len());
    for ReviewReply { comment_id, body } in replies {
        let id = comment_id.0;
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
        answers.push((id, ctx.postable(&body)));
    }
    Ok(answers)
}

/// Answers the review after the follow-up commit was pushed. A failure to post is reported in
/// the call's result but does not undo the push (the commit is there for the maintainers).
async fn answer_review(
    scope: &PullRequestScope<'_>,
    continued: &crate::forge::ContinuedPullRequest,
    replies: &[(u64, String)],
    body: &str,
    commit: &str,
    pull_request: &mut crate::forge::PullRequest,
) {
    let answer = crate::conversation::follow_up::answer(continued, replies, body, commit);
    match scope.forge.answer_feedback(&answer).await {
        Ok(posted) => pull_request.answers = posted,
        Err(error) => pull_request.answers = vec![format!("the review was not answered: {error}")],
    }
}

/// Leaves the re-doing's note on the pull request after the re-done branch replaced the old
/// one: its first line is the marker that counts the try, once per head commit it set out from.
async fn record_redo(
    scope: &PullRequestScope<'_>,
    redo: &crate::conversation::mergeable::Redo,
    commit: &str,
    pull_request: &mut crate::forge::PullRequest,
) {
    let marker =
        crate::forge::mergeable::mergeable_marker(crate::forge::mergeable::NoteKind::Redo, &redo.lease.to_string());
    let text = crate::conversation::mergeable::redo_comment(redo, commit);
    match scope.forge.leave_note(&redo.pull, commit, &marker, &text).await {
        Ok(posted) => pull_request.answers.extend(posted),
        Err(error) => pull_request
            .answers
            .push(format!("the re-doing was not recorded on the pull request: {error}")),
    }
}

/// Comments on the pull request after a fix cycle's commit was pushed; the comment's first line
/// is the attempt's marker, so every worker counts the attempt from the forge. A failure to post
/// is reported in the call's result but does not undo the push.
async fn record_fix_attempt(
    scope: &PullRequestScope<'_>,
    number: u64,
    fix: &crate::conversation::fix::FixCycle,
    body: &str,
    commit: &str,
    pull_request: &mut crate::forge::PullRequest,
) {
    let answer = crate::forge::FeedbackAnswer {
        pull_request: number,
        summary: Some(crate::conversation::fix::attempt_comment(fix, commit, body)),
        commit: commit.to_owned(),
        replies: Vec::new(),
    };
    match scope.forge.answer_feedback(&answer).await {
        Ok(posted) => pull_request.answers.extend(posted),
        Err(error) => pull_request
            .answers
            .push(format!("the fix attempt was not recorded on the pull request: {error}")),
    }
}

fn fatal(error: WorkspaceError) -> ToolError {
    ToolError::from_git(error, "committing the changes")
}

/// What the model reads back after a successful call.
pub(crate) fn describe(pull_request: &crate::forge::PullRequest) -> String {
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
