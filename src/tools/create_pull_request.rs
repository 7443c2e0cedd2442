//! `create_pull_request`: commit every change on a bot branch, push it, open (or update) the
//! pull request. Branch names: `upkeep/<issue>-<slug>` when working an issue, else
//! `upkeep/<slug-of-title>`. A second call in the same cycle updates the same branch and pull
//! request rather than opening another.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::spec::object_schema;
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};
use crate::forge::PullRequestDraft;
use crate::repo::{BOT_BRANCH_PREFIX, WorkspaceError};

/// Longest slug kept in a branch name; long titles make unwieldy branch names.
const MAX_SLUG_CHARS: usize = 48;

pub struct CreatePullRequest;

pub fn branch_name(issue: Option<u64>, title: &str) -> String {
    let mut slug = slug::slugify(title);
    if slug.len() > MAX_SLUG_CHARS {
        slug.truncate(MAX_SLUG_CHARS);
        slug = slug.trim_end_matches('-').to_owned();
    }
    if slug.is_empty() {
        slug = "change".into();
    }
    match issue {
        Some(number) => format!("{BOT_BRANCH_PREFIX}{number}-{slug}"),
        None => format!("{BOT_BRANCH_PREFIX}{slug}"),
    }
}

/// The branch for this call: the one already used in this cycle; else, when working an issue
/// that has an open bot pull request, that pull request's branch (so a retitled proposal updates
/// it rather than opening a duplicate); else a new name from the issue and title.
fn pick_branch(
    cycle_branch: Option<&str>,
    issue: Option<u64>,
    title: &str,
    open: &[crate::forge::OpenPullRequest],
) -> String {
    if let Some(branch) = cycle_branch {
        return branch.to_owned();
    }
    if let Some(number) = issue {
        let prefix = format!("{BOT_BRANCH_PREFIX}{number}-");
        if let Some(existing) = open.iter().find(|pr| pr.branch.starts_with(&prefix)) {
            return existing.branch.clone();
        }
    }
    branch_name(issue, title)
}

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
        let branch = pick_branch(ctx.cycle_branch, issue, &title, ctx.open_pull_requests);
        let workspace = ctx.workspace;

        let on_bot_branch = workspace.current_branch().await.map_err(fatal)? == branch;
        let message = format!("{title}\n\n{}", crate::forge::body_with_issue(&body, issue));
        match workspace.commit(&branch, &message, ctx.identity).await {
            Ok(_) => {}
            Err(WorkspaceError::NothingToCommit) if on_bot_branch => {}
            Err(WorkspaceError::NothingToCommit) => {
                return Err(ToolError::model(
                    "there are no changes to propose: make the changes with write_file or edit_file first, or call finish if nothing needs changing",
                ));
            }
            Err(error) => return Err(fatal(error)),
        }
        let draft = PullRequestDraft {
            branch,
            base: workspace.base_branch().to_owned(),
            title,
            body,
            issue,
        };
        match ctx.forge.publish(workspace, &draft).await {
            Ok(pull_request) => Ok(ToolOutput::PullRequest(pull_request)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_follow_the_contract() {
        assert_eq!(
            branch_name(Some(12), "Fix the typo in README!"),
            "upkeep/12-fix-the-typo-in-readme"
        );
        assert_eq!(branch_name(None, "Add CONTRIBUTING.md"), "upkeep/add-contributing-md");
        assert_eq!(branch_name(None, "???"), "upkeep/change");
        assert!(branch_name(None, &"very long title ".repeat(20)).len() <= BOT_BRANCH_PREFIX.len() + MAX_SLUG_CHARS);
    }

    #[test]
    fn an_issue_with_an_open_pull_request_keeps_its_branch() {
        let open = vec![crate::forge::OpenPullRequest {
            number: Some(9),
            branch: "upkeep/12-first-title".into(),
            title: "First title".into(),
            url: "u".into(),
        }];
        assert_eq!(
            pick_branch(None, Some(12), "Another title", &open),
            "upkeep/12-first-title"
        );
        assert_eq!(
            pick_branch(None, Some(13), "Another title", &open),
            "upkeep/13-another-title"
        );
        assert_eq!(pick_branch(Some("upkeep/x"), Some(12), "t", &open), "upkeep/x");
    }
}
