//! The conversation side of the GitHub forge: one issue, the bot's closed pull requests, a pull
//! request's reviews, review threads and comments, and the bot's answers to them.
//!
//! Who wrote what is decided here, once, from what GitHub says: the bot is the token's account
//! ([`GitHubForge::bot_login`]) and write access is `author_association` (see
//! [`Role::of`]). A review thread is a top-level review comment and the replies that name it
//! in `in_reply_to_id` (GitHub replies always point at the thread's first comment).

use std::collections::BTreeMap;

use serde_json::json;

use super::api::{Method, encode, parse_object};
use super::json::{CommentJson, IssueJson, PullCommitJson, PullJson, ReviewCommentJson, ReviewJson, timestamp};
use super::{GitHubForge, PER_PAGE};
use crate::forge::discussion::issue_of_branch;
use crate::forge::task::parse_task_marker;
use crate::forge::{
    ClosedPullRequest, Comment, FeedbackAnswer, ForgeError, PullRequestFeedback, PullRequestInfo, Review, ReviewThread,
    Role, TaskIssue,
};
use crate::repo::BOT_BRANCH_PREFIX;

/// Closed pull requests looked at for the bot's memory: the most recently updated ones.
const MAX_CLOSED: usize = 100;
/// Items read of each list on a pull request (reviews, review comments, comments, commits).
const MAX_ITEMS: usize = 500;

impl GitHubForge {
    /// `GET /repos/{owner}/{repo}/issues/{number}` with its recent comments; `None` when the
    /// number is a pull request.
    pub(super) async fn one_issue(&self, number: u64) -> Result<Option<TaskIssue>, ForgeError> {
        let operation = format!("reading issue #{number}");
        let answer = self
            .api
            .send(&operation, Method::Get, &self.route(&format!("/issues/{number}")), None)
            .await?;
        let issue = parse_object::<IssueJson>(&operation, &answer.text)?;
        if issue.pull_request.is_some() {
            return Ok(None);
        }
        Ok(Some(self.task_issue(issue).await?))
    }

    /// The bot's pull requests against `base` closed without merging, most recently updated
    /// first.
    pub(super) async fn closed_bot_pull_requests(&self, base: &str) -> Result<Vec<ClosedPullRequest>, ForgeError> {
        let route = self.route(&format!(
            "/pulls?state=closed&base={}&sort=updated&direction=desc&per_page={PER_PAGE}",
            encode(base)
        ));
        let pulls = self.api.list("listing closed pull requests", route, MAX_CLOSED).await?;
        Ok(pulls
            .into_iter()
            .filter_map(|value| serde_json::from_value::<PullJson>(value).ok())
            .filter(|pull| pull.merged_at.is_none())
            .filter(|pull| pull.head.ref_name.starts_with(BOT_BRANCH_PREFIX) && self.is_this_repo(&pull.head))
            .take(MAX_CLOSED)
            .map(|pull| ClosedPullRequest {
                number: pull.number,
                issue: issue_of_branch(&pull.head.ref_name),
                task_key: pull.body.as_deref().and_then(parse_task_marker),
                closed_at: timestamp(pull.closed_at.as_deref()),
                branch: pull.head.ref_name,
                title: pull.title,
                url: pull.html_url,
            })
            .collect())
    }

    /// A pull request and what was said on it.
    pub(super) async fn feedback(&self, number: u64) -> Result<PullRequestFeedback, ForgeError> {
        let operation = format!("reading pull request #{number}");
        let answer = self
            .api
            .send(&operation, Method::Get, &self.route(&format!("/pulls/{number}")), None)
            .await?;
        let pull = parse_object::<PullJson>(&operation, &answer.text)?;
        let bot = self.bot_login().await.map(str::to_owned);
        let bot = bot.as_deref();
        let author = pull.user.as_ref().map(|user| user.login.clone()).unwrap_or_default();
        let pull_request = PullRequestInfo {
            number: pull.number,
            opened_by_bot: Role::of(&author, None, bot) == Role::Bot,
            author,
            same_repository: self.is_this_repo(&pull.head),
            branch: pull.head.ref_name.clone(),
            head_sha: pull.head.sha.clone(),
            base: pull.base.as_ref().map(|base| base.ref_name.clone()).unwrap_or_default(),
            state: pull.state.clone(),
            merged: pull.merged_at.is_some(),
            // `false` only once GitHub computed it: a `null` while it computes is "not known".
            conflicts: pull.mergeable == Some(false) || pull.mergeable_state.as_deref() == Some("dirty"),
            title: pull.title,
            url: pull.html_url,
        };

        let list = |what: &str, rest: String| {
            let operation = format!("reading the {what} of pull request #{number}");
            async move { self.api.list(&operation, rest, MAX_ITEMS).await }
        };
        let reviews = list(
            "reviews",
            self.route(&format!("/pulls/{number}/reviews?per_page={PER_PAGE}")),
        )
        .await?;
        let review_comments = list(
            "review comments",
            self.route(&format!("/pulls/{number}/comments?per_page={PER_PAGE}")),
        )
        .await?;
        let comments = list(
            "comments",
            self.route(&format!("/issues/{number}/comments?per_page={PER_PAGE}")),
        )
        .await?;
        let commits = list(
            "commits",
            self.route(&format!("/pulls/{number}/commits?per_page={PER_PAGE}")),
        )
        .await?;

        let reviews = reviews
            .into_iter()
            .filter_map(|value| serde_json::from_value::<ReviewJson>(value).ok())
            // A pending review is its author's draft, not something said yet.
            .filter(|review| !review.state.eq_ignore_ascii_case("PENDING"))
            .map(|review| {
                let login = review.user.map(|user| user.login).unwrap_or_default();
                Review {
                    id: review.id,
                    role: Role::of(&login, review.author_association.as_deref(), bot),
                    author: login,
                    state: review.state,
                    body: review.body.unwrap_or_default(),
                    submitted_at: timestamp(review.submitted_at.as_deref()),
                }
            })
            .collect();
        let threads = threads(
            review_comments
                .into_iter()
                .filter_map(|value| serde_json::from_value::<ReviewCommentJson>(value).ok())
                .collect(),
            bot,
        );
        let conversation = comments_of(comments, bot);
        let last_push = self.bot_email.as_deref().and_then(|email| {
            commits
                .into_iter()
                .filter_map(|value| serde_json::from_value::<PullCommitJson>(value).ok())
                .filter_map(|commit| commit.commit.committer)
                .filter(|committer| {
                    committer
                        .email
                        .as_deref()
                        .is_some_and(|e| e.eq_ignore_ascii_case(email))
                })
                .filter_map(|committer| timestamp(committer.date.as_deref()))
                .max()
        });
        Ok(PullRequestFeedback {
            pull_request,
            reviews,
            threads,
            conversation,
            last_push,
        })
    }

    /// Posts the replies and the summary comment; returns their addresses.
    pub(super) async fn answer(&self, answer: &FeedbackAnswer) -> Result<Vec<String>, ForgeError> {
        let number = answer.pull_request;
        let mut posted = Vec::new();
        for (thread, reply) in &answer.replies {
            let operation = format!("replying to review comment {thread} on pull request #{number}");
            let route = self.route(&format!("/pulls/{number}/comments/{thread}/replies"));
            let sent = self
                .api
                .send(&operation, Method::Post, &route, Some(&json!({"body": reply})))
                .await?;
            posted.push(url_of(&operation, &sent.text, || format!("review comment {thread}")));
        }
        if let Some(summary) = &answer.summary {
            let operation = format!("commenting on pull request #{number}");
            let route = self.route(&format!("/issues/{number}/comments"));
            let sent = self
                .api
                .send(&operation, Method::Post, &route, Some(&json!({"body": summary})))
                .await?;
            posted.push(url_of(&operation, &sent.text, || format!("pull request #{number}")));
        }
        Ok(posted)
    }
}

/// The `html_url` of a created comment, or a description when GitHub sent none.
/// An issue's or pull request's comments as GitHub lists them, each with who wrote it; items
/// that are not comments are left out.
pub(super) fn comments_of(items: Vec<serde_json::Value>, bot: Option<&str>) -> Vec<Comment> {
    items
        .into_iter()
        .filter_map(|value| serde_json::from_value::<CommentJson>(value).ok())
        .map(|comment| {
            let login = comment.user.map(|user| user.login).unwrap_or_default();
            Comment {
                id: comment.id,
                role: Role::of(&login, comment.author_association.as_deref(), bot),
                author: login,
                body: comment.body.unwrap_or_default(),
                created_at: timestamp(comment.created_at.as_deref()),
            }
        })
        .collect()
}

fn url_of(operation: &str, text: &str, fallback: impl FnOnce() -> String) -> String {
    parse_object::<CommentJson>(operation, text)
        .ok()
        .map(|comment| comment.html_url)
        .filter(|url| !url.is_empty())
        .unwrap_or_else(fallback)
}

/// Review comments grouped into threads (top-level comment first, replies in order), in the
/// order their threads were opened. A reply whose thread is not in the list (more comments than
/// were read) is dropped rather than shown without its context.
fn threads(comments: Vec<ReviewCommentJson>, bot: Option<&str>) -> Vec<ReviewThread> {
    let mut threads: BTreeMap<u64, ReviewThread> = BTreeMap::new();
    let mut replies = Vec::new();
    for comment in comments {
        let login = comment.user.as_ref().map(|user| user.login.clone()).unwrap_or_default();
        let entry = Comment {
            id: comment.id,
            role: Role::of(&login, comment.author_association.as_deref(), bot),
            author: login,
            body: comment.body.clone(),
            created_at: timestamp(comment.created_at.as_deref()),
        };
        match comment.in_reply_to_id {
            Some(root) => replies.push((root, entry)),
            None => {
                threads.insert(
                    comment.id,
                    ReviewThread {
                        id: comment.id,
                        path: comment.path,
                        line: comment.line.or(comment.original_line),
                        diff_hunk: comment.diff_hunk,
                        comments: vec![entry],
                    },
                );
            }
        }
    }
    for (root, reply) in replies {
        if let Some(thread) = threads.get_mut(&root) {
            thread.comments.push(reply);
        }
    }
    let mut threads: Vec<ReviewThread> = threads.into_values().collect();
    for thread in &mut threads {
        thread.comments.sort_by_key(|c| (c.created_at, c.id));
    }
    threads
}
