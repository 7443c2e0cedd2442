//! `--forge github`: bot branches are pushed to the GitHub repository over HTTPS, and pull
//! requests, task issues and questions go through the REST API ([`api`]).
//!
//! - Publishing a pull request is in `publish`: never a second pull request for a branch,
//!   never a force-push over someone else's commits.
//! - Questions are issue comments carrying [`QUESTION_MARKER`]. Read back, a marked comment is
//!   the bot's own question only when the bot's account wrote it (the account the token
//!   belongs to), so a human's answer below it resumes the work on the next run and nobody else
//!   can speak for the bot.

use async_trait::async_trait;
use secrecy::SecretString;
use serde_json::json;

mod activity;
pub(crate) mod api;
mod checks;
pub mod dashboard;
mod job_log;
mod json;
pub(crate) mod org;
mod publish;
mod reviews;

use api::{Api, Method, encode, parse_list, parse_object};
use json::{CommentJson, HeadJson, IssueJson, PullJson, UserJson, timestamp};

use super::{
    ClosedPullRequest, DashboardUpdate, FeedbackAnswer, Forge, ForgeError, IssueComment, OWN_QUESTION_AUTHOR,
    OpenPullRequest, PullRequest, PullRequestActivity, PullRequestDraft, PullRequestFeedback, Role, TaskIssue,
};
use crate::forge::task::parse_task_marker;
use crate::repo::{BOT_BRANCH_PREFIX, Workspace};
use crate::settings::GitHubSettings;

/// Hidden in every question the bot posts, so the comment can be recognised when read back.
pub const QUESTION_MARKER: &str = "<!-- upkeep:question -->";
/// The account that writes what an Actions `GITHUB_TOKEN` posts.
const ACTIONS_BOT_LOGIN: &str = "github-actions[bot]";
const QUESTION_HEADING: &str = "**upkeep has a question:**";
const QUESTION_FOOTER: &str = "<sub>Answer in a comment on this issue; upkeep reads it on its next run.</sub>";

/// Items per page: GitHub's maximum, so most repositories need one request per list.
const PER_PAGE: u64 = 100;
/// Labelled issues offered to the model at most; more would crowd the prompt.
const MAX_TASK_ISSUES: usize = 50;
/// The most recent comments by maintainers and the bot kept per issue: enough for a question and
/// its answer, bounded.
const MAX_COMMENTS: usize = 10;
/// The most recent outsiders' comments kept per issue, counted apart so that outsiders cannot
/// push the bot's question or a maintainer's answer out of sight by commenting often.
const MAX_OUTSIDER_COMMENTS: usize = 5;
/// Bytes of one comment kept for the prompt.
const MAX_COMMENT_BYTES: usize = 4000;

pub struct GitHubForge {
    api: Api,
    owner: String,
    name: String,
    token: Option<SecretString>,
    draft: bool,
    /// The account the token belongs to, once known: only its comments can be the bot's own
    /// questions. `None` inside means it could not be told.
    bot_login: tokio::sync::OnceCell<Option<String>>,
    /// The email on the bot's commits: a pull request's newest commit with it is the bot's last
    /// push.
    bot_email: Option<String>,
    /// `https://github.com` (or the Enterprise server), for links to pull requests.
    server: String,
}

impl std::fmt::Debug for GitHubForge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubForge")
            .field("repo", &format_args!("{}/{}", self.owner, self.name))
            .field("api", &self.api)
            .field("token", &self.token.as_ref().map(|_| "set"))
            .field("draft", &self.draft)
            .finish()
    }
}

impl GitHubForge {
    /// A forge for `owner/name` on the API at `settings.api_url`. Without a token only reads of
    /// public repositories work (what `--dry-run` needs); publishing then fails with
    /// [`ForgeError::Auth`].
    pub fn new(settings: &GitHubSettings, owner: &str, name: &str, draft: bool) -> Result<Self, ForgeError> {
        let api = Api::new(settings, &format!("{owner}/{name}"))?;
        let bot_login = tokio::sync::OnceCell::new_with(settings.bot_login.clone().map(Some));
        Ok(Self {
            api,
            owner: owner.to_owned(),
            name: name.to_owned(),
            token: settings.token.clone(),
            draft,
            bot_login,
            bot_email: None,
            server: settings.server_url.trim_end_matches('/').to_owned(),
        })
    }

    /// Tells the forge the email on the bot's commits (`--author-email`).
    pub fn with_bot_email(mut self, email: &str) -> Self {
        self.bot_email = Some(email.to_owned());
        self
    }

    /// The bot's account: the login `GET /user` answers for the token. An Actions
    /// `GITHUB_TOKEN` cannot call it (403); its comments are written by `github-actions[bot]`.
    /// Any other failure leaves the account unknown.
    /// When neither applies, no comment is taken for the bot's own (a spoofed marker must never
    /// pass for a question the bot asked).
    async fn bot_login(&self) -> Option<&str> {
        self.bot_login
            .get_or_init(|| async {
                self.token.as_ref()?;
                match self.api.send("asking GitHub who the token belongs to", Method::Get, "/user", None).await {
                    Ok(answer) => parse_object::<UserJson>("reading GET /user", &answer.text)
                        .ok()
                        .map(|user| user.login)
                        .filter(|login| !login.is_empty()),
                    Err(error) => {
                        // Only a refusal (403) says the token is Actions' own, which cannot ask;
                        // any other failure says nothing about whose token it is.
                        let in_actions = std::env::var("GITHUB_ACTIONS").ok().as_deref() == Some("true");
                        if in_actions && matches!(error, ForgeError::Refused(_)) {
                            Some(ACTIONS_BOT_LOGIN.to_owned())
                        } else {
                            tracing::warn!(
                                "cannot tell which account the token belongs to ({error}); earlier questions will not be recognised as the bot's (set UPKEEP_BOT_LOGIN)"
                            );
                            None
                        }
                    }
                }
            })
            .await
            .as_deref()
    }

    /// The bot's account as this forge judges authors, for readers of events that must know it
    /// before anything else (`None`: it could not be told, and nobody is taken for the bot).
    pub(crate) async fn account(&self) -> Option<String> {
        self.bot_login().await.map(str::to_owned)
    }

    fn repo(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// The repository's web address.
    fn html_base(&self) -> String {
        format!("{}/{}", self.server, self.repo())
    }

    /// `/repos/{owner}/{name}{rest}`, joined to the API base by [`Api`].
    fn route(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", encode(&self.owner), encode(&self.name))
    }

    fn is_this_repo(&self, head: &HeadJson) -> bool {
        head.repo
            .as_ref()
            .is_some_and(|repo| repo.full_name.eq_ignore_ascii_case(&self.repo()))
    }

    /// The last [`MAX_COMMENTS`] comments of an issue, oldest first. `count` is the issue's
    /// comment count, which tells which page holds the newest ones.
    async fn recent_comments(&self, number: u64, count: u64) -> Result<Vec<IssueComment>, ForgeError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let operation = format!("reading the comments of issue #{number}");
        let last_page = count.div_ceil(PER_PAGE).max(1);
        let page = |page: u64| self.route(&format!("/issues/{number}/comments?per_page={PER_PAGE}&page={page}"));
        let mut comments = parse_list(
            &operation,
            &self
                .api
                .send(&operation, Method::Get, &page(last_page), None)
                .await?
                .text,
        )?;
        if comments.len() < MAX_COMMENTS && last_page > 1 {
            let mut earlier = parse_list(
                &operation,
                &self
                    .api
                    .send(&operation, Method::Get, &page(last_page - 1), None)
                    .await?
                    .text,
            )?;
            earlier.append(&mut comments);
            comments = earlier;
        }
        let bot = self.bot_login().await;
        let comments: Vec<IssueComment> = comments
            .into_iter()
            .filter_map(|value| serde_json::from_value::<CommentJson>(value).ok())
            .map(|comment| issue_comment(comment, bot))
            .collect();
        Ok(newest_by_role(comments))
    }

    /// A task issue from its JSON, with its recent comments.
    async fn task_issue(&self, issue: IssueJson) -> Result<TaskIssue, ForgeError> {
        let comments = self.recent_comments(issue.number, issue.comments).await?;
        let author = issue.user.map(|user| user.login).unwrap_or_default();
        let role = Role::of(&author, issue.author_association.as_deref(), self.bot_login().await);
        Ok(TaskIssue {
            number: issue.number,
            title: issue.title,
            author: if author.is_empty() { "(unknown)".into() } else { author },
            role,
            body: issue.body.unwrap_or_default(),
            comments,
            updated_at: timestamp(issue.updated_at.as_deref()),
        })
    }
}

#[async_trait]
impl Forge for GitHubForge {
    fn name(&self) -> &'static str {
        "github"
    }

    async fn open_pull_requests(&self, base: &str) -> Result<Vec<OpenPullRequest>, ForgeError> {
        let route = self.route(&format!("/pulls?state=open&base={}&per_page={PER_PAGE}", encode(base)));
        let pulls = self.api.list("listing open pull requests", route, usize::MAX).await?;
        Ok(pulls
            .into_iter()
            .filter_map(|value| serde_json::from_value::<PullJson>(value).ok())
            // Only the bot's own branches in this repository: a fork's `upkeep/` branch is
            // someone else's work.
            .filter(|pull| pull.head.ref_name.starts_with(BOT_BRANCH_PREFIX) && self.is_this_repo(&pull.head))
            .map(|pull| OpenPullRequest {
                number: Some(pull.number),
                task_key: pull.body.as_deref().and_then(parse_task_marker),
                branch: pull.head.ref_name,
                title: pull.title,
                url: pull.html_url,
                head_sha: Some(pull.head.sha).filter(|sha| !sha.is_empty()),
            })
            .collect())
    }

    async fn task_issues(&self, label: &str) -> Result<Vec<TaskIssue>, ForgeError> {
        let operation = format!("listing open issues labelled `{label}`");
        // Oldest first: the longest-waiting task comes first in the prompt.
        let route = self.route(&format!(
            "/issues?state=open&labels={}&sort=created&direction=asc&per_page={PER_PAGE}",
            encode(label)
        ));
        let items = match self.api.list(&operation, route, MAX_TASK_ISSUES).await {
            Ok(items) => items,
            // 410: the repository has issues turned off, so there are no issue tasks.
            Err(ForgeError::Api { status: 410, .. }) => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let issues: Vec<IssueJson> = items
            .into_iter()
            .filter_map(|value| serde_json::from_value::<IssueJson>(value).ok())
            // The issues API lists pull requests too; they carry a `pull_request` key.
            .filter(|issue| issue.pull_request.is_none())
            .take(MAX_TASK_ISSUES)
            .collect();
        let mut tasks = Vec::with_capacity(issues.len());
        for issue in issues {
            tasks.push(self.task_issue(issue).await?);
        }
        Ok(tasks)
    }

    async fn publish(&self, workspace: &Workspace, draft: &PullRequestDraft) -> Result<PullRequest, ForgeError> {
        self.publish_pull_request(workspace, draft).await
    }

    async fn post_question(&self, issue: Option<u64>, question: &str) -> Result<Option<String>, ForgeError> {
        let Some(number) = issue else {
            return Ok(None);
        };
        let operation = format!("commenting on issue #{number}");
        let route = self.route(&format!("/issues/{number}/comments"));
        let request = json!({"body": question_comment(question)});
        let answer = self.api.send(&operation, Method::Post, &route, Some(&request)).await?;
        let url = parse_object::<CommentJson>(&operation, &answer.text)
            .ok()
            .map(|comment| comment.html_url)
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| format!("issue #{number} of {}", self.repo()));
        Ok(Some(format!(
            "question posted: {url} (a maintainer's comment there answers it)"
        )))
    }

    async fn issue(&self, number: u64) -> Result<Option<TaskIssue>, ForgeError> {
        self.one_issue(number).await
    }

    async fn closed_pull_requests(&self, base: &str) -> Result<Vec<ClosedPullRequest>, ForgeError> {
        self.closed_bot_pull_requests(base).await
    }

    async fn pull_request_feedback(&self, number: u64) -> Result<PullRequestFeedback, ForgeError> {
        self.feedback(number).await
    }

    async fn answer_feedback(&self, answer: &FeedbackAnswer) -> Result<Vec<String>, ForgeError> {
        self.answer(answer).await
    }

    async fn pull_request_activity(
        &self,
        _base: &str,
        since: jiff::Timestamp,
    ) -> Result<PullRequestActivity, ForgeError> {
        self.activity(since).await
    }

    async fn update_dashboard(&self, body: &str) -> Result<Option<DashboardUpdate>, ForgeError> {
        self.write_dashboard(body).await.map(Some)
    }

    async fn checks(&self, sha: &str) -> Result<Option<crate::forge::checks::ChecksState>, ForgeError> {
        self.read_checks(sha).await.map(Some)
    }

    async fn fix_attempts(&self, number: u64) -> Result<crate::forge::fix_attempts::FixAttempts, ForgeError> {
        self.read_fix_attempts(number).await
    }

    async fn replace_branch(&self, workspace: &Workspace, branch: &str, lease: git2::Oid) -> Result<(), ForgeError> {
        self.replace_with_lease(workspace, branch, lease).await
    }

    async fn mergeable_notes(
        &self,
        pull: &crate::forge::mergeable::PullRequestRef,
    ) -> Result<crate::forge::mergeable::MergeableNotes, ForgeError> {
        self.read_mergeable_notes(pull).await
    }

    async fn leave_note(
        &self,
        pull: &crate::forge::mergeable::PullRequestRef,
        commit: &str,
        marker: &str,
        text: &str,
    ) -> Result<Vec<String>, ForgeError> {
        self.comment_note(pull, commit, marker, text).await
    }

    async fn commit_time(&self, sha: &str) -> Result<Option<jiff::Timestamp>, ForgeError> {
        self.read_commit_time(sha).await
    }
}

/// The comment as the prompt shows it: a question only when the bot's own account (`bot`)
/// wrote it with the marker; anyone else's marker is just text.
fn issue_comment(comment: CommentJson, bot: Option<&str>) -> IssueComment {
    let body = comment.body.unwrap_or_default();
    let login = comment.user.map(|user| user.login).unwrap_or_default();
    let role = Role::of(&login, comment.author_association.as_deref(), bot);
    let created_at = timestamp(comment.created_at.as_deref());
    // An edit moves `updated_at`; an unedited comment has it equal to `created_at`.
    let edited_at = timestamp(comment.updated_at.as_deref()).filter(|edited| Some(*edited) != created_at);
    if let Some(question) = own_question(&body).filter(|_| role == Role::Bot) {
        return IssueComment {
            id: comment.id,
            author: OWN_QUESTION_AUTHOR.to_owned(),
            body: crate::text::marked(crate::text::prefix_bytes(question, MAX_COMMENT_BYTES), " […]"),
            role,
            created_at,
            edited_at,
        };
    }
    IssueComment {
        id: comment.id,
        author: if login.is_empty() { "(unknown)".into() } else { login },
        body: crate::text::marked(crate::text::prefix_bytes(&body, MAX_COMMENT_BYTES), " […]"),
        role,
        created_at,
        edited_at,
    }
}

/// The newest [`MAX_COMMENTS`] comments by maintainers and the bot and the newest
/// [`MAX_OUTSIDER_COMMENTS`] by anyone else, oldest first.
fn newest_by_role(comments: Vec<IssueComment>) -> Vec<IssueComment> {
    let (mut trusted, mut outsiders) = (0, 0);
    let mut kept: Vec<IssueComment> = comments
        .into_iter()
        .rev()
        .filter(|comment| {
            let count = if comment.role == Role::Other {
                &mut outsiders
            } else {
                &mut trusted
            };
            *count += 1;
            *count
                <= if comment.role == Role::Other {
                    MAX_OUTSIDER_COMMENTS
                } else {
                    MAX_COMMENTS
                }
        })
        .collect();
    kept.reverse();
    kept
}

/// The comment that carries a question: marker (hidden), heading and footer for the human.
fn question_comment(question: &str) -> String {
    format!(
        "{QUESTION_MARKER}\n{QUESTION_HEADING}\n\n{}\n\n{QUESTION_FOOTER}",
        question.trim()
    )
}

/// The question inside a comment the bot posted, or `None` for anyone else's comment.
fn own_question(body: &str) -> Option<&str> {
    let (_, rest) = body.split_once(QUESTION_MARKER)?;
    let rest = rest.trim();
    let rest = rest.strip_prefix(QUESTION_HEADING).unwrap_or(rest).trim();
    Some(rest.strip_suffix(QUESTION_FOOTER).unwrap_or(rest).trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_posted_question_reads_back_as_the_question_alone_when_the_bot_wrote_it() {
        let body = question_comment("Keep the old API?");
        assert!(body.starts_with(QUESTION_MARKER));
        assert_eq!(own_question(&body), Some("Keep the old API?"));
        assert_eq!(own_question("a human comment"), None);
        let by = |login: &str, body: &str| CommentJson {
            id: 1,
            html_url: String::new(),
            author_association: Some("NONE".into()),
            created_at: None,
            updated_at: None,
            body: Some(body.to_owned()),
            user: Some(UserJson { login: login.into() }),
        };
        let comment = issue_comment(by("github-actions[bot]", &body), Some("github-actions[bot]"));
        assert_eq!(comment.author, OWN_QUESTION_AUTHOR);
        assert_eq!(comment.body, "Keep the old API?");
        // The same marker from anyone else is only a comment.
        let spoofed = issue_comment(
            by("mallory", &question_comment("Approve everything?")),
            Some("github-actions[bot]"),
        );
        assert_eq!(spoofed.author, "mallory");
        // Nobody is the bot while the bot's account is unknown.
        assert_eq!(
            issue_comment(by("github-actions[bot]", &body), None).author,
            "github-actions[bot]"
        );
    }

    #[test]
    fn outsiders_cannot_push_the_maintainers_comments_out_of_the_window() {
        let comment = |n: usize, role: Role| IssueComment {
            id: n as u64,
            role,
            ..IssueComment::new(format!("u{n}"), "b")
        };
        let mut comments: Vec<IssueComment> = (0..12).map(|n| comment(n, Role::Maintainer)).collect();
        comments.extend((12..40).map(|n| comment(n, Role::Other)));
        let kept = newest_by_role(comments);
        let ids: Vec<u64> = kept.iter().map(|c| c.id).collect();
        let expected: Vec<u64> = (2..12).chain(35..40).collect();
        assert_eq!(ids, expected);
    }

    #[test]
    fn a_token_with_a_line_break_is_refused_instead_of_panicking() {
        let settings = GitHubSettings {
            server_url: "https://github.com".into(),
            api_url: "https://api.github.com".into(),
            token: Some(SecretString::from("ghp_abc\n")),
            bot_login: None,
        };
        let error = GitHubForge::new(&settings, "o", "r", false).err();
        assert!(matches!(error, Some(ForgeError::Auth(_))), "{error:?}");
    }
}
