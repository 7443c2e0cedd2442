//! The GitHub forge end to end, offline: the real `upkeep` binary clones from and pushes to a
//! real smart-HTTP git server on loopback that demands the token, and talks to a wiremock
//! server that answers with bodies shaped like GitHub's documented REST responses. Covers the
//! token's path (credential callback only, never on disk or in output), issue tasks, opening
//! versus updating pull requests, questions and their answers, and the API's error answers.
//!
//! This module holds the stand-in and the response bodies the suites share; the tests live in
//! its submodules by subject.

mod api_errors;
mod checks;
mod pull_requests;
mod questions;
mod targets;
mod token;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::support::git_http::GitHttpServer;
use super::support::github::SampleRemote;
use super::support::{RunOutput, Script, Upkeep, git, reply};

const OWNER: &str = "owner";
const NAME: &str = "name";
const PULLS: &str = "/repos/owner/name/pulls";
const ISSUES: &str = "/repos/owner/name/issues";

/// A GitHub stand-in: a bare repository `owner/name.git` with two commits behind a git server
/// that requires a token, and an API mock.
struct GitHub {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    git: GitHttpServer,
    api: MockServer,
    /// The token upkeep is given; unique per test so a leak cannot match by accident.
    token: String,
}

fn unique_token() -> String {
    format!("ghp_{}", uuid::Uuid::new_v4().simple())
}

impl GitHub {
    async fn start() -> Self {
        let token = unique_token();
        Self::with_tokens(&token.clone(), token).await
    }

    /// `server_token` is what the git server accepts, `token` what upkeep is given.
    async fn with_tokens(server_token: &str, token: String) -> Self {
        let SampleRemote { tmp, root, git, .. } = SampleRemote::start(server_token);
        let api = MockServer::start().await;
        Self {
            _tmp: tmp,
            root,
            git,
            api,
            token,
        }
    }

    fn bare(&self) -> PathBuf {
        self.root.join(OWNER).join(format!("{NAME}.git"))
    }

    /// Branch names under `upkeep/` in the bare repository.
    fn bot_branches(&self) -> Vec<String> {
        let out = git(
            &self.bare(),
            &["for-each-ref", "--format=%(refname:short)", "refs/heads/upkeep/"],
        );
        out.lines().map(str::to_owned).collect()
    }

    fn upkeep(&self, extra: &[&str]) -> Upkeep {
        Upkeep::new()
            .env("GITHUB_SERVER_URL", self.git.url())
            .env("GITHUB_API_URL", self.api.uri())
            .env("GITHUB_TOKEN", &self.token)
            .args(["run", "--repo", &format!("{OWNER}/{NAME}"), "--json"])
            .args(extra)
    }

    fn run(&self, script: &Script, extra: &[&str]) -> RunOutput {
        self.upkeep(extra).args(["--replay"]).args([script.path()]).run()
    }

    async fn requests(&self, verb: &str, route: &str) -> Vec<Request> {
        self.api
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|request| request.method.as_str() == verb && request.url.path() == route)
            .collect()
    }

    async fn mount(&self, verb: &str, route: &str, response: ResponseTemplate) {
        Mock::given(method(verb))
            .and(path(route))
            .respond_with(response)
            .mount(&self.api)
            .await;
    }

    /// No open pull requests and no labelled issues.
    async fn mount_empty_lists(&self) {
        self.mount("GET", PULLS, ok(json!([]))).await;
        self.mount("GET", ISSUES, ok(json!([]))).await;
    }
}

fn ok(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

fn repo_json() -> Value {
    json!({"id": 1296269, "name": NAME, "full_name": "owner/name", "private": false,
           "owner": {"login": OWNER, "id": 1, "type": "User"},
           "html_url": "https://github.com/owner/name", "default_branch": "main"})
}

/// A pull request object as `GET/POST /repos/{owner}/{repo}/pulls` return it (abridged).
fn pull_json(number: u64, branch: &str, title: &str) -> Value {
    json!({
        "url": format!("https://api.github.com/repos/owner/name/pulls/{number}"),
        "id": 1000 + number,
        "html_url": format!("https://github.com/owner/name/pull/{number}"),
        "number": number,
        "state": "open",
        "title": title,
        "body": "",
        "draft": false,
        "user": {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"},
        "head": {"label": format!("{OWNER}:{branch}"), "ref": branch,
                 "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "repo": repo_json()},
        "base": {"label": format!("{OWNER}:main"), "ref": "main",
                 "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "repo": repo_json()},
    })
}

/// An issue object as `GET /repos/{owner}/{repo}/issues` returns it (abridged).
fn issue_json(number: u64, title: &str, body: &str, comments: u64) -> Value {
    json!({
        "url": format!("https://api.github.com/repos/owner/name/issues/{number}"),
        "html_url": format!("https://github.com/owner/name/issues/{number}"),
        "id": 2000 + number,
        "number": number,
        "state": "open",
        "title": title,
        "body": body,
        "user": {"login": "alice", "id": 2, "type": "User"},
        "labels": [{"id": 208045946, "name": "upkeep", "color": "f29513", "default": false}],
        "comments": comments,
        "locked": false,
    })
}

/// The issues API lists pull requests too, marked by a `pull_request` key.
fn pull_request_as_issue_json(number: u64, title: &str) -> Value {
    let mut issue = issue_json(number, title, "a pull request, not a task", 0);
    issue["pull_request"] = json!({
        "url": format!("https://api.github.com/repos/owner/name/pulls/{number}"),
        "html_url": format!("https://github.com/owner/name/pull/{number}"),
        "diff_url": format!("https://github.com/owner/name/pull/{number}.diff"),
        "patch_url": format!("https://github.com/owner/name/pull/{number}.patch"),
    });
    issue
}

/// An issue comment object; `mallory` has no write access, everyone else is a collaborator.
fn comment_json(id: u64, issue: u64, body: &str, login: &str) -> Value {
    let association = if login == "mallory" { "NONE" } else { "COLLABORATOR" };
    json!({
        "id": id,
        "url": format!("https://api.github.com/repos/owner/name/issues/comments/{id}"),
        "html_url": format!("https://github.com/owner/name/issues/{issue}#issuecomment-{id}"),
        "body": body,
        "user": {"login": login, "id": id, "type": "User"},
        "author_association": association,
        "created_at": "2024-01-01T00:00:00Z",
    })
}

/// `GET /user` for the bot's own account (the authenticated user, abridged).
fn user_json(login: &str) -> Value {
    json!({"login": login, "id": 583231, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "type": "User",
           "site_admin": false, "html_url": format!("https://github.com/{login}")})
}

/// A commit of a pull request as `GET /repos/{owner}/{repo}/pulls/{n}/commits` lists it.
fn pull_commit_json(email: &str) -> Value {
    let sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e";
    let url = format!("https://api.github.com/repos/owner/name/commits/{sha}");
    let person = json!({"name": "upkeep", "email": email, "date": "2024-01-01T00:00:00Z"});
    json!({
        "url": url, "sha": sha, "node_id": "C_kwDOAAAAAA", "html_url": format!("https://github.com/owner/name/commit/{sha}"),
        "comments_url": format!("{url}/comments"),
        "commit": {"url": format!("https://api.github.com/repos/owner/name/git/commits/{sha}"), "author": person.clone(),
                   "committer": person, "message": "Fix the typo", "comment_count": 0,
                   "tree": {"sha": sha, "url": format!("https://api.github.com/repos/owner/name/git/trees/{sha}")}},
        "author": null, "committer": null, "parents": [],
    })
}

/// GitHub's error body.
fn error_json(message: &str) -> Value {
    json!({"message": message, "documentation_url": "https://docs.github.com/rest", "status": "0"})
}

fn write_and_propose(path: &str, content: &str, title: &str, issue: Option<u64>) -> String {
    let mut pr = json!({"title": title, "body": format!("Updates {path}.")});
    if let Some(issue) = issue {
        pr["issue"] = json!(issue);
    }
    reply(
        "write and propose",
        &[
            ("write_file", json!({"path": path, "content": content})),
            ("create_pull_request", pr),
            ("finish", json!({"status": "completed", "summary": title})),
        ],
    )
}

/// A run whose `create_pull_request` fails (the caller made the push or the API fail) and whose
/// model then asks: the change must be reported as unsaved, never dropped. Returns the run and
/// the failed call's result.
fn a_pull_request_that_fails(hub: &GitHub) -> (RunOutput, Value) {
    let script = Script::new(&[
        write_and_propose("NOTES.md", "notes\n", "Add notes", None),
        // `finish` would drop the unpublished change: the model has to ask instead.
        reply(
            "stuck",
            &[(
                "ask_question",
                json!({"question_text": "The pull request could not be opened. What now?"}),
            )],
        ),
    ]);
    let out = hub.run(&script, &["--task", "add notes"]);
    out.assert_code(3);
    let unsaved = out.events_of("unsaved_changes");
    assert_eq!(unsaved.len(), 1, "the change is reported, not dropped: {}", out.stdout);
    assert!(
        unsaved[0]["diff"].as_str().unwrap_or("").contains("+notes"),
        "{}",
        unsaved[0]
    );
    let result = result_of(&out, "create_pull_request");
    assert_eq!(result["ok"], false, "{result}");
    (out, result)
}

fn result_of(out: &RunOutput, tool: &str) -> Value {
    out.events_of("tool_result")
        .into_iter()
        .find(|event| event["tool"] == tool)
        .unwrap_or_else(|| panic!("no {tool} result\n{}\n{}", out.stdout, out.stderr))
}

fn body_json(request: &Request) -> Value {
    serde_json::from_slice(&request.body).expect("request body is JSON")
}

fn trace_arg(dir: &Path) -> (PathBuf, String) {
    let trace = dir.join("trace.jsonl");
    let arg = trace.to_str().expect("utf-8").to_owned();
    (trace, arg)
}
