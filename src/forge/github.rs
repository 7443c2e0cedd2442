//! `--forge github`: bot branches are pushed to the GitHub repository over HTTPS and pull
//! requests, task issues and questions go through the REST API (octocrab).
//!
//! Why it is built this way:
//! - The token reaches git only as the git transport's `Authorization` header and the API only
//!   through octocrab's `Authorization` header; it is never part of a URL, a log line or an
//!   error message, and a token that cannot be sent as a header is refused up front instead of
//!   making the client panic.
//! - Requests go through octocrab's raw methods (`_get`, `_post`, `_patch`) so that status,
//!   rate-limit headers and GitHub's own `message` are all in hand when an error is mapped to
//!   [`ForgeError`]; the typed models are not used because a missing optional field in a
//!   response must not fail a run.
//! - octocrab is built without its `retry` feature on purpose: a POST that timed out may have
//!   reached GitHub, and sending it again blindly could open a second pull request or post a
//!   question twice. Recovery is explicit instead: `publish` always looks for the branch's open
//!   pull request before creating one, so calling it again is safe.
//! - Errors are split by what can fix them: a refused token, missing permissions, an unknown
//!   repository or an exhausted rate limit end the run ([`ForgeError::is_fatal`]); a validation
//!   error (422) or a server error (5xx) goes back to the model, which can adjust or ask.
//! - Questions are issue comments carrying [`QUESTION_MARKER`]; when issues are read back, the
//!   marked comment is shown as the bot's own question, so a human's answer below it resumes the
//!   work on the next run.

use std::fmt::Write as _;
use std::time::Duration;

use async_trait::async_trait;
use octocrab::Octocrab;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Forge, ForgeError, IssueComment, OWN_QUESTION_AUTHOR, OpenPullRequest, PullRequest, PullRequestDraft, TaskIssue,
    body_with_issue,
};
use crate::config::GitHubSettings;
use crate::repo::{BOT_BRANCH_PREFIX, GitAuth, Workspace};
use crate::text::error_chain;

/// Hidden in every question the bot posts, so the comment can be recognised when read back.
pub const QUESTION_MARKER: &str = "<!-- upkeep:question -->";
const QUESTION_HEADING: &str = "**upkeep has a question:**";
const QUESTION_FOOTER: &str = "<sub>Answer in a comment on this issue; upkeep reads it on its next run.</sub>";

/// Items per page: GitHub's maximum, so most repositories need one request per list.
const PER_PAGE: u64 = 100;
/// Pages followed when listing pull requests or issues; bounds the requests of one listing.
const MAX_PAGES: usize = 10;
/// Labelled issues offered to the model at most; more would crowd the prompt.
const MAX_TASK_ISSUES: usize = 50;
/// The most recent comments shown per issue: enough for a question and its answer, bounded.
const MAX_COMMENTS: usize = 10;
/// Bytes of one comment kept for the prompt.
const MAX_COMMENT_BYTES: usize = 4000;
/// Bytes of a non-JSON error body kept in a message (a proxy's HTML page, for instance).
const MAX_ERROR_BODY_BYTES: usize = 500;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(90);

pub struct GitHubForge {
    client: Octocrab,
    owner: String,
    name: String,
    api_url: String,
    token: Option<SecretString>,
    draft: bool,
}

impl std::fmt::Debug for GitHubForge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubForge")
            .field("repo", &format_args!("{}/{}", self.owner, self.name))
            .field("api_url", &self.api_url)
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
        let api_url = settings.api_url.trim_end_matches('/').to_owned();
        if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
            return Err(ForgeError::Other(format!(
                "GITHUB_API_URL {api_url:?} is not an http(s) URL"
            )));
        }
        let mut builder = Octocrab::builder()
            .base_uri(api_url.as_str())
            .map_err(|_| ForgeError::Other(format!("GITHUB_API_URL {api_url:?} is not a valid URL")))?
            .set_connect_timeout(Some(CONNECT_TIMEOUT))
            .set_read_timeout(Some(READ_TIMEOUT));
        if let Some(token) = &settings.token {
            // octocrab turns the token into a header value with `unwrap`; a token with a line
            // break (pasted from a file) would make it panic, so refuse it here with a reason.
            if !token.expose_secret().bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ForgeError::Auth(
                    "GITHUB_TOKEN (or GH_TOKEN) contains whitespace or non-ASCII characters; set it to the token alone"
                        .into(),
                ));
            }
            builder = builder.personal_token(token.clone());
        }
        let client = builder.build().map_err(|error| {
            ForgeError::Other(format!("cannot set up the GitHub API client: {}", error_chain(&error)))
        })?;
        Ok(Self {
            client,
            owner: owner.to_owned(),
            name: name.to_owned(),
            api_url,
            token: settings.token.clone(),
            draft,
        })
    }

    fn repo(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// `/repos/{owner}/{name}{rest}`, relative so that octocrab joins it to the API base (and
    /// sends the token only there).
    fn route(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", encode(&self.owner), encode(&self.name))
    }

    /// Sends one request and returns the body of a 2xx answer; anything else becomes the
    /// matching [`ForgeError`].
    async fn send(
        &self,
        operation: &str,
        method: Method,
        route: &str,
        body: Option<&Value>,
    ) -> Result<Answer, ForgeError> {
        let sent = match method {
            Method::Get => self.client._get(route).await,
            Method::Post => self.client._post(route, body).await,
            Method::Patch => self.client._patch(route, body).await,
        };
        let response = sent.map_err(|error| {
            ForgeError::Other(format!(
                "{operation}: could not reach the GitHub API at {}: {}",
                self.api_url,
                error_chain(&error)
            ))
        })?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let meta = ResponseMeta {
            ratelimit_remaining: header("x-ratelimit-remaining"),
            ratelimit_reset: header("x-ratelimit-reset"),
            retry_after: header("retry-after"),
            link: header("link"),
        };
        let text = self.client.body_to_string(response).await.map_err(|error| {
            ForgeError::Other(format!(
                "{operation}: reading GitHub's answer failed: {}",
                error_chain(&error)
            ))
        })?;
        if !(200..300).contains(&status) {
            return Err(status_error(&self.repo(), operation, status, &meta, &text));
        }
        Ok(Answer {
            next: meta.link.as_deref().and_then(next_page_route),
            text,
        })
    }

    /// Every item of a paginated list (up to [`MAX_PAGES`] pages), as raw JSON values so that a
    /// single odd item cannot fail the whole listing.
    async fn list(&self, operation: &str, first: String, limit: usize) -> Result<Vec<Value>, ForgeError> {
        let mut items = Vec::new();
        let mut route = Some(first);
        let mut pages = 0;
        while let Some(current) = route.take() {
            let answer = self.send(operation, Method::Get, &current, None).await?;
            items.extend(parse_list(operation, &answer.text)?);
            pages += 1;
            if pages < MAX_PAGES && items.len() < limit {
                route = answer.next;
            }
        }
        Ok(items)
    }

    /// Open pull requests of this repository whose head is `branch`.
    async fn find_open_pull_request(&self, branch: &str) -> Result<Option<PullJson>, ForgeError> {
        let operation = format!("looking for an open pull request for {branch}");
        let route = self.route(&format!(
            "/pulls?state=open&head={}&per_page={PER_PAGE}",
            encode(&format!("{}:{branch}", self.owner))
        ));
        let pulls = self.list(&operation, route, usize::MAX).await?;
        Ok(pulls
            .into_iter()
            .filter_map(|value| serde_json::from_value::<PullJson>(value).ok())
            .find(|pull| pull.head.ref_name == branch && self.is_this_repo(&pull.head)))
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
            &self.send(&operation, Method::Get, &page(last_page), None).await?.text,
        )?;
        if comments.len() < MAX_COMMENTS && last_page > 1 {
            let mut earlier = parse_list(
                &operation,
                &self
                    .send(&operation, Method::Get, &page(last_page - 1), None)
                    .await?
                    .text,
            )?;
            earlier.append(&mut comments);
            comments = earlier;
        }
        let skip = comments.len().saturating_sub(MAX_COMMENTS);
        Ok(comments
            .into_iter()
            .skip(skip)
            .filter_map(|value| serde_json::from_value::<CommentJson>(value).ok())
            .map(CommentJson::into_issue_comment)
            .collect())
    }
}

#[async_trait]
impl Forge for GitHubForge {
    fn name(&self) -> &'static str {
        "github"
    }

    async fn open_pull_requests(&self, base: &str) -> Result<Vec<OpenPullRequest>, ForgeError> {
        let route = self.route(&format!("/pulls?state=open&base={}&per_page={PER_PAGE}", encode(base)));
        let pulls = self.list("listing open pull requests", route, usize::MAX).await?;
        Ok(pulls
            .into_iter()
            .filter_map(|value| serde_json::from_value::<PullJson>(value).ok())
            // Only the bot's own branches in this repository: a fork's `upkeep/` branch is
            // someone else's work.
            .filter(|pull| pull.head.ref_name.starts_with(BOT_BRANCH_PREFIX) && self.is_this_repo(&pull.head))
            .map(|pull| OpenPullRequest {
                number: Some(pull.number),
                branch: pull.head.ref_name,
                title: pull.title,
                url: pull.html_url,
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
        let items = match self.list(&operation, route, MAX_TASK_ISSUES).await {
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
            let comments = self.recent_comments(issue.number, issue.comments).await?;
            tasks.push(TaskIssue {
                number: issue.number,
                title: issue.title,
                body: issue.body.unwrap_or_default(),
                comments,
            });
        }
        Ok(tasks)
    }

    async fn publish(&self, workspace: &Workspace, draft: &PullRequestDraft) -> Result<PullRequest, ForgeError> {
        let Some(token) = &self.token else {
            return Err(ForgeError::Auth(
                "GITHUB_TOKEN (or GH_TOKEN) is not set; pushing and opening pull requests on GitHub need it".into(),
            ));
        };
        let auth = GitAuth {
            token: Some(token.clone()),
        };
        workspace.push(&draft.branch, &auth).await?;

        let body = body_with_issue(&draft.body, draft.issue);
        if let Some(existing) = self.find_open_pull_request(&draft.branch).await? {
            let operation = format!("updating pull request #{}", existing.number);
            let mut update = json!({"title": draft.title, "body": body});
            // The branch was rebuilt on this run's base; point the pull request at it too.
            if existing.base.as_ref().is_some_and(|base| base.ref_name != draft.base) {
                update["base"] = json!(draft.base);
            }
            let route = self.route(&format!("/pulls/{}", existing.number));
            let answer = self.send(&operation, Method::Patch, &route, Some(&update)).await?;
            let updated = parse_object::<PullJson>(&operation, &answer.text).unwrap_or(existing);
            return Ok(PullRequest {
                url: updated.html_url,
                number: Some(updated.number),
                branch: draft.branch.clone(),
                title: draft.title.clone(),
                updated: true,
                preview: None,
            });
        }

        let operation = format!("opening the pull request for {}", draft.branch);
        let request = json!({
            "title": draft.title,
            "head": draft.branch,
            "base": draft.base,
            "body": body,
            "draft": self.draft,
        });
        let answer = self
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
        })
    }

    async fn post_question(&self, issue: Option<u64>, question: &str) -> Result<Option<String>, ForgeError> {
        let Some(number) = issue else {
            return Ok(None);
        };
        let operation = format!("commenting on issue #{number}");
        let route = self.route(&format!("/issues/{number}/comments"));
        let request = json!({"body": question_comment(question)});
        let answer = self.send(&operation, Method::Post, &route, Some(&request)).await?;
        let url = parse_object::<CommentJson>(&operation, &answer.text)
            .ok()
            .map(|comment| comment.html_url)
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| format!("issue #{number} of {}", self.repo()));
        Ok(Some(url))
    }
}

#[derive(Debug, Clone, Copy)]
enum Method {
    Get,
    Post,
    Patch,
}

/// A successful answer: its body and, for lists, the route of the next page.
struct Answer {
    text: String,
    next: Option<String>,
}

/// The headers an error message may need.
#[derive(Debug, Default)]
struct ResponseMeta {
    ratelimit_remaining: Option<String>,
    ratelimit_reset: Option<String>,
    retry_after: Option<String>,
    link: Option<String>,
}

// The fields upkeep reads, each defaulted where GitHub may leave it out: a response is never
// trusted to be complete.

#[derive(Debug, Deserialize)]
struct PullJson {
    number: u64,
    #[serde(default)]
    html_url: String,
    #[serde(default)]
    title: String,
    head: HeadJson,
    #[serde(default)]
    base: Option<BaseJson>,
}

#[derive(Debug, Deserialize)]
struct HeadJson {
    #[serde(rename = "ref")]
    ref_name: String,
    /// `null` when the head repository (a fork) was deleted.
    #[serde(default)]
    repo: Option<RepoJson>,
}

#[derive(Debug, Deserialize)]
struct BaseJson {
    #[serde(rename = "ref")]
    ref_name: String,
}

#[derive(Debug, Deserialize)]
struct RepoJson {
    #[serde(default)]
    full_name: String,
}

#[derive(Debug, Deserialize)]
struct IssueJson {
    number: u64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: Option<String>,
    /// How many comments the issue has.
    #[serde(default)]
    comments: u64,
    #[serde(default)]
    pull_request: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct CommentJson {
    #[serde(default)]
    html_url: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<UserJson>,
}

#[derive(Debug, Deserialize)]
struct UserJson {
    #[serde(default)]
    login: String,
}

impl CommentJson {
    fn into_issue_comment(self) -> IssueComment {
        let body = self.body.unwrap_or_default();
        if let Some(question) = own_question(&body) {
            return IssueComment {
                author: OWN_QUESTION_AUTHOR.to_owned(),
                body: crate::text::marked(crate::text::prefix_bytes(question, MAX_COMMENT_BYTES), " […]"),
            };
        }
        IssueComment {
            author: self
                .user
                .map(|user| user.login)
                .filter(|login| !login.is_empty())
                .unwrap_or_else(|| "(unknown)".into()),
            body: crate::text::marked(crate::text::prefix_bytes(&body, MAX_COMMENT_BYTES), " […]"),
        }
    }
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

fn parse_list(operation: &str, text: &str) -> Result<Vec<Value>, ForgeError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(_) => Err(ForgeError::Other(format!(
            "{operation}: GitHub answered with something other than a list"
        ))),
        Err(error) => Err(ForgeError::Other(format!(
            "{operation}: GitHub's answer is not JSON: {error}"
        ))),
    }
}

fn parse_object<T: serde::de::DeserializeOwned>(operation: &str, text: &str) -> Result<T, ForgeError> {
    serde_json::from_str(text)
        .map_err(|error| ForgeError::Other(format!("{operation}: unexpected answer from GitHub: {error}")))
}

/// Maps a non-2xx answer to the error that says what to do about it.
fn status_error(repo: &str, operation: &str, status: u16, meta: &ResponseMeta, body: &str) -> ForgeError {
    let message = api_message(body);
    let rate_limited = matches!(status, 403 | 429)
        && (meta.ratelimit_remaining.as_deref().map(str::trim) == Some("0")
            || message.to_ascii_lowercase().contains("rate limit"));
    match status {
        401 => ForgeError::Auth(format!(
            "GitHub rejected the token (401): check GITHUB_TOKEN/GH_TOKEN (while {operation}; GitHub says: {message})"
        )),
        _ if rate_limited => ForgeError::Refused(format!(
            "GitHub API rate limit exceeded while {operation} (HTTP {status}: {message}){}",
            rate_limit_wait(meta)
        )),
        403 => ForgeError::Refused(format!(
            "GitHub refused {operation} (403: {message}): the token needs contents: write, pull-requests: write and issues: write on {repo} (in GitHub Actions, grant them with a `permissions:` block in the workflow)"
        )),
        404 => ForgeError::Refused(format!(
            "repository {repo} not found, or the token cannot see it (404 while {operation}: {message})"
        )),
        _ => ForgeError::Api {
            operation: operation.to_owned(),
            status,
            message,
        },
    }
}

/// When the rate limit lets requests through again, from the headers GitHub sends.
fn rate_limit_wait(meta: &ResponseMeta) -> String {
    let reset = meta
        .ratelimit_reset
        .as_deref()
        .and_then(|value| value.trim().parse::<i64>().ok())
        .and_then(|seconds| jiff::Timestamp::from_second(seconds).ok());
    if let Some(reset) = reset {
        let wait = reset.as_second() - jiff::Timestamp::now().as_second();
        let wait = if wait > 0 {
            format!(" (in about {} min)", (wait + 59) / 60)
        } else {
            String::new()
        };
        return format!("; the limit resets at {reset}{wait}; run again after that");
    }
    match meta.retry_after.as_deref().map(str::trim) {
        Some(seconds) if !seconds.is_empty() => format!("; retry after {seconds} seconds"),
        _ => "; wait before running again".into(),
    }
}

/// GitHub's own `message`, with the details of a validation error (`errors`), or the start of
/// a body that is not GitHub's JSON.
fn api_message(body: &str) -> String {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(body) else {
        let text = body.trim();
        return if text.is_empty() {
            "(no message)".into()
        } else {
            crate::text::marked(crate::text::prefix_bytes(text, MAX_ERROR_BODY_BYTES), " […]")
        };
    };
    let mut message = object
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)")
        .trim()
        .to_owned();
    let details: Vec<String> = object
        .get("errors")
        .and_then(Value::as_array)
        .map(|errors| errors.iter().filter_map(describe_error_detail).collect())
        .unwrap_or_default();
    if !details.is_empty() {
        let _ = write!(message, ": {}", details.join("; "));
    }
    message
}

/// One entry of a validation error's `errors`: its `message`, or resource, field and code.
fn describe_error_detail(detail: &Value) -> Option<String> {
    if let Some(text) = detail.as_str() {
        return Some(text.to_owned());
    }
    if let Some(text) = detail.get("message").and_then(Value::as_str) {
        return Some(text.to_owned());
    }
    let part = |key: &str| detail.get(key).and_then(Value::as_str).unwrap_or("");
    let (resource, field, code) = (part("resource"), part("field"), part("code"));
    if resource.is_empty() && field.is_empty() && code.is_empty() {
        return None;
    }
    Some(format!("{resource}.{field} {code}").trim().to_owned())
}

/// The route of the `rel="next"` page in a `Link` header, made relative so octocrab joins it to
/// the API base like every other request.
fn next_page_route(link: &str) -> Option<String> {
    let target = link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|param| param.trim() == "rel=\"next\"")
            .then(|| target.trim().trim_start_matches('<').trim_end_matches('>').to_owned())
    })?;
    let url = reqwest::Url::parse(&target).ok()?;
    Some(match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    })
}

/// Everything but RFC 3986's unreserved characters is escaped in a path segment or query value.
const COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a path segment or query value.
fn encode(component: &str) -> String {
    percent_encoding::utf8_percent_encode(component, COMPONENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> ResponseMeta {
        ResponseMeta::default()
    }

    #[test]
    fn a_refused_token_is_an_auth_error_with_githubs_message() {
        let error = status_error("o/r", "listing", 401, &meta(), r#"{"message":"Bad credentials"}"#);
        assert!(matches!(error, ForgeError::Auth(_)));
        assert!(error.is_fatal());
        let text = error.to_string();
        assert!(
            text.contains("GitHub rejected the token (401): check GITHUB_TOKEN/GH_TOKEN"),
            "{text}"
        );
        assert!(text.contains("Bad credentials"), "{text}");
    }

    #[test]
    fn an_exhausted_rate_limit_names_the_reset_time_and_is_fatal() {
        let headers = ResponseMeta {
            ratelimit_remaining: Some("0".into()),
            ratelimit_reset: Some("1700000000".into()),
            ..meta()
        };
        let error = status_error(
            "o/r",
            "listing",
            403,
            &headers,
            r#"{"message":"API rate limit exceeded for x"}"#,
        );
        assert!(error.is_fatal());
        let text = error.to_string();
        assert!(text.contains("2023-11-14T22:13:20Z"), "{text}");
        assert!(text.contains("API rate limit exceeded for x"), "{text}");
        let secondary = status_error(
            "o/r",
            "posting",
            403,
            &ResponseMeta {
                retry_after: Some("60".into()),
                ..meta()
            },
            r#"{"message":"You have exceeded a secondary rate limit"}"#,
        );
        assert!(secondary.is_fatal());
        assert!(secondary.to_string().contains("retry after 60 seconds"), "{secondary}");
    }

    #[test]
    fn other_refusals_name_the_permissions_or_the_repository() {
        let error = status_error(
            "o/r",
            "opening",
            403,
            &meta(),
            r#"{"message":"Resource not accessible by integration"}"#,
        );
        assert!(error.is_fatal());
        let text = error.to_string();
        assert!(
            text.contains("pull-requests: write") && text.contains("Resource not accessible"),
            "{text}"
        );
        let error = status_error("o/r", "listing", 404, &meta(), r#"{"message":"Not Found"}"#);
        assert!(error.is_fatal());
        assert!(
            error
                .to_string()
                .contains("repository o/r not found, or the token cannot see it")
        );
    }

    #[test]
    fn validation_and_server_errors_go_back_to_the_model() {
        let body = r#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:upkeep/x."},{"resource":"Issue","field":"title","code":"missing_field"}]}"#;
        let error = status_error("o/r", "opening", 422, &meta(), body);
        assert!(!error.is_fatal());
        let text = error.to_string();
        assert!(
            text.contains(
                "Validation Failed: A pull request already exists for o:upkeep/x.; Issue.title missing_field"
            ),
            "{text}"
        );
        let error = status_error("o/r", "opening", 502, &meta(), "<html>Bad gateway</html>");
        assert!(!error.is_fatal());
        assert!(
            error.to_string().contains("HTTP 502: <html>Bad gateway</html>"),
            "{error}"
        );
    }

    #[test]
    fn a_posted_question_reads_back_as_the_question_alone() {
        let body = question_comment("Keep the old API?");
        assert!(body.starts_with(QUESTION_MARKER));
        assert_eq!(own_question(&body), Some("Keep the old API?"));
        assert_eq!(own_question("a human comment"), None);
        let comment = CommentJson {
            html_url: String::new(),
            body: Some(body),
            user: Some(UserJson {
                login: "github-actions[bot]".into(),
            }),
        }
        .into_issue_comment();
        assert_eq!(comment.author, OWN_QUESTION_AUTHOR);
        assert_eq!(comment.body, "Keep the old API?");
    }

    #[test]
    fn next_links_become_relative_routes() {
        let link = r#"<https://ghe.example.com/api/v3/repositories/1/issues?page=2>; rel="next", <https://ghe.example.com/api/v3/repositories/1/issues?page=5>; rel="last""#;
        assert_eq!(
            next_page_route(link).as_deref(),
            Some("/api/v3/repositories/1/issues?page=2")
        );
        assert_eq!(next_page_route(r#"<https://x/y?page=1>; rel="prev""#), None);
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode("owner:upkeep/7-fix"), "owner%3Aupkeep%2F7-fix");
        assert_eq!(encode("good first issue"), "good%20first%20issue");
    }

    #[test]
    fn a_token_with_a_line_break_is_refused_instead_of_panicking() {
        let settings = GitHubSettings {
            server_url: "https://github.com".into(),
            api_url: "https://api.github.com".into(),
            token: Some(SecretString::from("ghp_abc\n")),
        };
        let error = GitHubForge::new(&settings, "o", "r", false).err();
        assert!(matches!(error, Some(ForgeError::Auth(_))), "{error:?}");
    }
}
