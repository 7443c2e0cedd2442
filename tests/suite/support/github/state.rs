//! The stand-in's memory and its REST routes: the issues, comments, pull requests and reviews
//! it holds, and the answer to each request as GitHub would give it, every body served or
//! received checked against the published description (violations are kept for
//! `FakeGitHub::assert_conformant`). Pull request commits are read from the bare repository.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::{Request, Respond, ResponseTemplate};

use super::super::git;
use super::super::github_conformance::{self as conformance, Body};
use super::checks::Reply;
use super::json::{API, NAME, OWNER, TIME, WEB, link, public_user, repository, user};

/// A pull request review comment to add: a new thread on `path` at `line`, or a reply to the
/// thread `in_reply_to`.
#[derive(Debug, Clone, Copy)]
pub struct ReviewComment<'a> {
    pub pull: u64,
    pub review: Option<u64>,
    pub login: &'a str,
    pub association: &'a str,
    pub path: &'a str,
    pub line: u64,
    pub hunk: &'a str,
    pub body: &'a str,
    pub in_reply_to: Option<u64>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) bot: String,
    pub(super) next_id: u64,
    pub(super) issues: BTreeMap<u64, Value>,
    pub(super) issue_comments: BTreeMap<u64, Vec<Value>>,
    pub(super) pulls: BTreeMap<u64, Value>,
    pub(super) reviews: BTreeMap<u64, Vec<Value>>,
    pub(super) review_comments: BTreeMap<u64, Vec<Value>>,
    pub(super) violations: Vec<String>,
    pub(super) bare: PathBuf,
    /// `GET /user` answers 403, as it does for a GitHub App installation token.
    pub(super) app_token: bool,
    pub(super) checks: super::checks::ChecksState,
}

impl State {
    pub(super) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(super) fn issue_comment(&mut self, number: u64, login: &str, association: &str, body: &str, at: &str) -> u64 {
        let id = self.id();
        let url = format!("{API}/repos/{OWNER}/{NAME}/issues/comments/{id}");
        self.issue_comments.entry(number).or_default().push(json!({
            "id": id, "node_id": format!("MDEyOklzc3VlQ29tbWVudA{id}"), "url": url,
            "html_url": format!("{WEB}/{OWNER}/{NAME}/issues/{number}#issuecomment-{id}"), "body": body,
            "user": user(login), "created_at": at, "updated_at": at,
            "issue_url": format!("{API}/repos/{OWNER}/{NAME}/issues/{number}"), "author_association": association,
        }));
        if let Some(issue) = self.issues.get_mut(&number) {
            issue["comments"] = json!(issue["comments"].as_u64().unwrap_or(0) + 1);
            issue["updated_at"] = json!(at);
        }
        id
    }

    pub(super) fn review_comment(&mut self, comment: &ReviewComment<'_>, at: &str) -> u64 {
        let ReviewComment {
            pull,
            review,
            login,
            association,
            path,
            line,
            hunk,
            body,
            in_reply_to,
        } = *comment;
        let id = self.id();
        let commit = self
            .pulls
            .get(&pull)
            .map(|p| p["head"]["sha"].clone())
            .unwrap_or(json!(""));
        let url = format!("{API}/repos/{OWNER}/{NAME}/pulls/comments/{id}");
        let html = format!("{WEB}/{OWNER}/{NAME}/pull/{pull}#discussion_r{id}");
        let pull_url = format!("{API}/repos/{OWNER}/{NAME}/pulls/{pull}");
        let mut comment = json!({
            "url": url, "id": id, "node_id": format!("MDI0OlB1bGxSZXF1ZXN0UmV2aWV3Q29tbWVudA{id}"),
            "pull_request_review_id": review, "diff_hunk": hunk, "path": path, "commit_id": commit,
            "original_commit_id": commit, "user": user(login), "body": body, "created_at": at, "updated_at": at,
            "html_url": html, "pull_request_url": pull_url, "author_association": association,
            "_links": {"self": link(url.clone()), "html": link(html.clone()), "pull_request": link(pull_url)},
            "line": line, "original_line": line, "side": "RIGHT", "start_line": null, "original_start_line": null,
            "start_side": null, "subject_type": "line",
        });
        if let Some(root) = in_reply_to {
            comment["in_reply_to_id"] = json!(root);
        }
        self.review_comments.entry(pull).or_default().push(comment);
        id
    }

    pub(super) fn pull_json(&self, number: u64, branch: &str, title: &str, body: &str, author: &str) -> Value {
        let url = format!("{API}/repos/{OWNER}/{NAME}/pulls/{number}");
        let issue_url = format!("{API}/repos/{OWNER}/{NAME}/issues/{number}");
        let html = format!("{WEB}/{OWNER}/{NAME}/pull/{number}");
        let head_sha = rev(&self.bare, branch);
        let base_sha = rev(&self.bare, "main");
        let statuses = format!("{API}/repos/{OWNER}/{NAME}/statuses/{head_sha}");
        let links = json!({
            "self": link(url.clone()), "html": link(html.clone()), "issue": link(issue_url.clone()),
            "comments": link(format!("{issue_url}/comments")), "review_comments": link(format!("{url}/comments")),
            "review_comment": link(format!("{API}/repos/{OWNER}/{NAME}/pulls/comments{{/number}}")),
            "commits": link(format!("{url}/commits")), "statuses": link(statuses.clone()),
        });
        let head = json!({"label": format!("{OWNER}:{branch}"), "ref": branch, "sha": head_sha, "user": user(OWNER), "repo": repository()});
        let base = json!({"label": format!("{OWNER}:main"), "ref": "main", "sha": base_sha, "user": user(OWNER), "repo": repository()});
        let mut pull = json!({
            "url": url, "id": 1000 + number, "node_id": format!("MDExOlB1bGxSZXF1ZXN0{number}"), "html_url": html,
            "diff_url": format!("{html}.diff"), "patch_url": format!("{html}.patch"), "issue_url": issue_url,
            "commits_url": format!("{url}/commits"), "review_comments_url": format!("{url}/comments"),
            "review_comment_url": format!("{API}/repos/{OWNER}/{NAME}/pulls/comments{{/number}}"),
            "comments_url": format!("{issue_url}/comments"), "statuses_url": statuses,
            "number": number, "state": "open", "locked": false, "title": title, "user": user(author), "body": body,
            "labels": [], "milestone": null, "active_lock_reason": null, "created_at": TIME, "updated_at": TIME,
            "closed_at": null, "merged_at": null, "merge_commit_sha": null, "assignee": null, "assignees": [],
            "requested_reviewers": [], "requested_teams": [], "draft": false,
            "author_association": if author == self.bot { "NONE" } else { "OWNER" }, "auto_merge": null,
            "merged": false, "mergeable": null, "rebaseable": null, "mergeable_state": "unknown", "merged_by": null,
            "comments": 0, "review_comments": 0, "maintainer_can_modify": false, "commits": 1, "additions": 1,
            "deletions": 1, "changed_files": 1,
        });
        pull["_links"] = links;
        pull["head"] = head;
        pull["base"] = base;
        pull
    }

    /// The commits of a pull request, newest last, read from the bare repository.
    fn commits(&self, pull: u64) -> Vec<Value> {
        let Some(branch) = self
            .pulls
            .get(&pull)
            .and_then(|p| p["head"]["ref"].as_str().map(str::to_owned))
        else {
            return Vec::new();
        };
        let log = git(
            &self.bare,
            &["log", "--reverse", "--format=%H %ce %cI", &format!("main..{branch}")],
        );
        log.lines()
            .filter_map(|line| {
                let mut parts = line.split(' ');
                Some((parts.next()?.to_owned(), parts.next()?.to_owned(), parts.next()?.to_owned()))
            })
            .map(|(sha, email, date)| {
                let url = format!("{API}/repos/{OWNER}/{NAME}/commits/{sha}");
                let person = json!({"name": "someone", "email": email, "date": date});
                json!({
                    "url": url, "sha": sha, "node_id": format!("C_{sha}"), "html_url": format!("{WEB}/{OWNER}/{NAME}/commit/{sha}"),
                    "comments_url": format!("{url}/comments"),
                    "commit": {"url": format!("{API}/repos/{OWNER}/{NAME}/git/commits/{sha}"), "author": person.clone(),
                               "committer": person, "message": "change", "comment_count": 0,
                               "tree": {"sha": sha, "url": format!("{API}/repos/{OWNER}/{NAME}/git/trees/{sha}")}},
                    "author": null, "committer": null, "parents": [],
                })
            })
            .collect()
    }

    /// Answers one request, as GitHub would; `None` for a route it does not serve (404).
    fn answer(
        &mut self,
        method: &str,
        path: &str,
        query: &BTreeMap<String, String>,
        body: &Value,
    ) -> Option<(u16, Value)> {
        let prefix = format!("/repos/{OWNER}/{NAME}");
        if method == "GET" && path == "/user" {
            if self.app_token {
                return Some((
                    403,
                    json!({"message": "Resource not accessible by integration",
                           "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user",
                           "status": "403"}),
                ));
            }
            return Some((200, public_user(&self.bot)));
        }
        let rest = path.strip_prefix(&prefix)?;
        let parts: Vec<&str> = rest.trim_matches('/').split('/').collect();
        let number = |i: usize| parts.get(i).and_then(|p| p.parse::<u64>().ok());
        match (method, parts.as_slice()) {
            ("GET", ["pulls"]) => {
                let state = query.get("state").map(String::as_str).unwrap_or("open");
                let list = self
                    .pulls
                    .values()
                    .filter(|p| state == "all" || p["state"] == state)
                    .filter(|p| query.get("base").is_none_or(|b| p["base"]["ref"] == b.as_str()))
                    .filter(|p| query.get("head").is_none_or(|h| p["head"]["label"] == h.as_str()))
                    .cloned()
                    .collect();
                Some((200, Value::Array(list)))
            }
            ("POST", ["pulls"]) => {
                let number = self.pulls.keys().chain(self.issues.keys()).max().copied().unwrap_or(0) + 1;
                let branch = body["head"].as_str().unwrap_or_default();
                let mut pull = self.pull_json(
                    number,
                    branch,
                    body["title"].as_str().unwrap_or_default(),
                    "",
                    &self.bot.clone(),
                );
                pull["body"] = body["body"].clone();
                self.pulls.insert(number, pull.clone());
                Some((201, pull))
            }
            ("GET", ["pulls", _]) => Some((200, self.pulls.get(&number(1)?)?.clone())),
            ("PATCH", ["pulls", _]) => {
                let pull = self.pulls.get_mut(&number(1)?)?;
                for key in ["title", "body"] {
                    if !body[key].is_null() {
                        pull[key] = body[key].clone();
                    }
                }
                Some((200, pull.clone()))
            }
            ("GET", ["pulls", _, "reviews"]) => {
                Some((200, json!(self.reviews.get(&number(1)?).cloned().unwrap_or_default())))
            }
            ("GET", ["pulls", _, "comments"]) => Some((
                200,
                json!(self.review_comments.get(&number(1)?).cloned().unwrap_or_default()),
            )),
            ("GET", ["pulls", _, "commits"]) => Some((200, json!(self.commits(number(1)?)))),
            ("POST", ["pulls", _, "comments", _, "replies"]) => {
                let (pull, root) = (number(1)?, number(3)?);
                let top = self
                    .review_comments
                    .get(&pull)?
                    .iter()
                    .find(|c| c["id"] == root)?
                    .clone();
                let location = (
                    top["path"].as_str().unwrap_or_default().to_owned(),
                    top["line"].as_u64().unwrap_or(1),
                    top["diff_hunk"].as_str().unwrap_or_default().to_owned(),
                );
                let bot = self.bot.clone();
                let reply = ReviewComment {
                    pull,
                    review: None,
                    login: &bot,
                    association: "NONE",
                    path: &location.0,
                    line: location.1,
                    hunk: &location.2,
                    body: body["body"].as_str().unwrap_or_default(),
                    in_reply_to: Some(root),
                };
                let id = self.review_comment(&reply, "2030-01-01T00:00:00Z");
                let created = self.review_comments[&pull].iter().find(|c| c["id"] == id)?.clone();
                Some((201, created))
            }
            ("GET", ["issues"]) => {
                let labels: Vec<&str> = query.get("labels").map(|l| l.split(',').collect()).unwrap_or_default();
                let list = self
                    .issues
                    .values()
                    .filter(|i| i["state"] == "open")
                    .filter(|i| {
                        labels.iter().all(|wanted| {
                            i["labels"]
                                .as_array()
                                .is_some_and(|ls| ls.iter().any(|l| l["name"] == *wanted))
                        })
                    })
                    .cloned()
                    .collect();
                Some((200, Value::Array(list)))
            }
            ("GET", ["issues", _]) => Some((200, self.issues.get(&number(1)?)?.clone())),
            ("GET", ["issues", _, "comments"]) => {
                let all = self.issue_comments.get(&number(1)?).cloned().unwrap_or_default();
                let per_page: usize = query.get("per_page").and_then(|p| p.parse().ok()).unwrap_or(30);
                let page: usize = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
                Some((
                    200,
                    json!(
                        all.into_iter()
                            .skip((page - 1) * per_page)
                            .take(per_page)
                            .collect::<Vec<_>>()
                    ),
                ))
            }
            ("POST", ["issues", _, "comments"]) => {
                let number = number(1)?;
                let bot = self.bot.clone();
                let id = self.issue_comment(
                    number,
                    &bot,
                    "NONE",
                    body["body"].as_str().unwrap_or_default(),
                    "2030-01-01T00:00:00Z",
                );
                let created = self.issue_comments[&number].iter().find(|c| c["id"] == id)?.clone();
                Some((201, created))
            }
            _ => None,
        }
    }
}

fn rev(bare: &Path, name: &str) -> String {
    let out = std::process::Command::new("git")
        .current_dir(bare)
        .args(["rev-parse", "--verify", "--quiet", name])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if sha.is_empty() { "0".repeat(40) } else { sha }
}

pub(super) struct Api(pub(super) Arc<Mutex<State>>);

impl Respond for Api {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let method = request.method.to_string();
        let path = request.url.path().to_owned();
        let query: BTreeMap<String, String> = request
            .url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let mut state = self.0.lock().expect("state");
        let operation = conformance::operation(&method, &path);
        if let (Some(operation), false) = (&operation, body.is_null()) {
            if let Err(errors) = conformance::validate(operation, Body::Request, &body) {
                state.violations.extend(errors);
            }
        }
        if let Some(reply) = state.answer_checks_at(&method, &path, &query) {
            return checks_response(&mut state, operation.as_deref(), &method, &path, reply);
        }
        match state.answer(&method, &path, &query, &body) {
            Some((status, value)) => {
                match &operation {
                    Some(operation) => {
                        if let Err(errors) =
                            conformance::validate(operation, Body::Response(&status.to_string()), &value)
                        {
                            state.violations.extend(errors);
                        }
                    }
                    None => state.violations.push(format!("{method} {path} is not in schemas.json")),
                }
                ResponseTemplate::new(status).set_body_json(value)
            }
            None => ResponseTemplate::new(404).set_body_json(json!({
                "message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"
            })),
        }
    }
}

impl State {
    fn answer_checks_at(&mut self, method: &str, path: &str, query: &BTreeMap<String, String>) -> Option<Reply> {
        let rest = path.strip_prefix(&format!("/repos/{OWNER}/{NAME}"))?;
        let parts: Vec<&str> = rest.trim_matches('/').split('/').collect();
        self.answer_checks(method, &parts, query)
    }
}

/// A checks answer, validated: a JSON body of a 2xx against its schema, a redirect for the
/// headers its description names.
fn checks_response(
    state: &mut State,
    operation: Option<&str>,
    method: &str,
    path: &str,
    reply: Reply,
) -> ResponseTemplate {
    let Some(operation) = operation else {
        state.violations.push(format!("{method} {path} is not in schemas.json"));
        return ResponseTemplate::new(500);
    };
    match reply {
        Reply::Json { status, body, link } => {
            if (200..300).contains(&status) {
                if let Err(errors) = conformance::validate(operation, Body::Response(&status.to_string()), &body) {
                    state.violations.extend(errors);
                }
            }
            let response = ResponseTemplate::new(status).set_body_json(body);
            match link {
                Some(link) => response.insert_header("link", link.as_str()),
                None => response,
            }
        }
        Reply::Redirect(location) => {
            if let Err(errors) = conformance::validate_redirect(operation, "302", &["Location"]) {
                state.violations.extend(errors);
            }
            ResponseTemplate::new(302).insert_header("location", location.as_str())
        }
    }
}

/// The log host: serves each signed address once, as the stand-in's state says.
pub(super) struct LogHost(pub(super) Arc<Mutex<State>>);

impl Respond for LogHost {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let signature = request
            .url
            .query_pairs()
            .find(|(key, _)| key == "urlSignature")
            .map(|(_, value)| value.into_owned());
        let (status, body) = self.0.lock().expect("state").download(signature.as_deref());
        ResponseTemplate::new(status)
            .set_body_bytes(body)
            .insert_header("content-type", "text/plain")
    }
}
