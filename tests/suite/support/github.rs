//! A GitHub stand-in for integration tests, shared by every suite that needs one: a real
//! smart-HTTP git server on loopback ([`super::git_http`]) holding `owner/name.git`, and a REST
//! API on a wiremock server that keeps state like GitHub does: issues and their comments, pull
//! requests (open, closed, merged) with reviews, review comments (threads by
//! `in_reply_to_id`) and replies, and the authenticated user. Pull request commits are read from
//! the bare repository itself.
//!
//! Every body it serves is built in the full shape of GitHub's documented response, and every
//! body it serves or receives is validated against the published description
//! ([`super::conformance`]); violations are collected and [`FakeGitHub::assert_conformant`]
//! fails a test that produced any.
//!
//! The bodies it builds live in `json`, its state and routes in `state`.

mod checks;
mod json;
mod state;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::{Mock, MockServer};

pub use self::checks::CheckRunSpec;
use self::json::{API, TIME, WEB};
pub use self::json::{NAME, OWNER, issue_json, repository, user};
pub use self::state::ReviewComment;
use self::state::{Api, LogHost, State};
use super::git_http::GitHttpServer;
use super::{TestRepo, Upkeep, git};

/// The repository every GitHub stand-in serves: `owner/name.git` under `root`, its `main` with
/// two commits, behind a smart-HTTP git server that accepts `server_token`.
pub struct SampleRemote {
    pub tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub bare: PathBuf,
    pub git: GitHttpServer,
}

impl SampleRemote {
    pub fn start(server_token: &str) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join(OWNER)).expect("mkdir");
        let work = TestRepo::new();
        work.write("README.md", "# Sample\n\nHello, wrold.\n");
        work.commit("Second commit");
        let bare = root.join(OWNER).join(format!("{NAME}.git"));
        let bare_arg = bare.to_str().expect("utf-8 path");
        git(tmp.path(), &["init", "-q", "--bare", "-b", "main", bare_arg]);
        work.git(&["push", "-q", bare_arg, "main:main"]);
        let git = GitHttpServer::start(&root, Some(server_token));
        SampleRemote { tmp, root, bare, git }
    }
}

/// The stand-in. Dropping it stops both servers.
pub struct FakeGitHub {
    _tmp: tempfile::TempDir,
    pub git: GitHttpServer,
    pub api: MockServer,
    /// Where job logs are downloaded from after the API's redirect (another port, as GitHub's
    /// log storage is another host).
    pub log_host: MockServer,
    pub token: String,
    state: Arc<Mutex<State>>,
    bare: PathBuf,
}

impl FakeGitHub {
    /// A repository `owner/name` whose `main` has two commits, behind a git server that demands
    /// the token, and an API whose authenticated user is `bot`.
    pub async fn start(bot: &str) -> Self {
        let token = format!("ghp_{}", uuid::Uuid::new_v4().simple());
        let SampleRemote {
            tmp,
            bare,
            git: git_server,
            ..
        } = SampleRemote::start(&token);
        let api = MockServer::start().await;
        let log_host = MockServer::start().await;
        let mut state = State {
            bot: bot.to_owned(),
            next_id: 5000,
            bare: bare.clone(),
            ..State::default()
        };
        state.checks.log_host = log_host.uri();
        state.checks.api_base = api.uri();
        let state = Arc::new(Mutex::new(state));
        Mock::given(wiremock::matchers::any())
            .respond_with(Api(Arc::clone(&state)))
            .mount(&api)
            .await;
        Mock::given(wiremock::matchers::any())
            .respond_with(LogHost(Arc::clone(&state)))
            .mount(&log_host)
            .await;
        Self {
            _tmp: tmp,
            git: git_server,
            api,
            log_host,
            token,
            state,
            bare,
        }
    }

    /// Makes the token a GitHub App installation token: `GET /user` is refused (403), as GitHub
    /// refuses it to an app, and only the operator can name the bot's account.
    pub fn as_app_token(&self) {
        self.with(|s| s.app_token = true);
    }

    pub fn bare(&self) -> &Path {
        &self.bare
    }

    /// `upkeep run --repo owner/name --json` against this stand-in.
    pub fn upkeep(&self, extra: &[&str]) -> Upkeep {
        self.command("run", extra)
    }

    /// `upkeep prompt --repo owner/name --json` against this stand-in, then `extra`.
    pub fn prompt(&self, extra: &[&str]) -> Upkeep {
        self.command("prompt", extra)
    }

    fn command(&self, subcommand: &str, extra: &[&str]) -> Upkeep {
        Upkeep::new()
            .env("GITHUB_SERVER_URL", self.git.url())
            .env("GITHUB_API_URL", self.api.uri())
            .env("GITHUB_TOKEN", &self.token)
            .args([subcommand, "--repo", &format!("{OWNER}/{NAME}"), "--json"])
            .args(extra)
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("state"))
    }

    pub fn add_issue(&self, issue: Value) {
        self.with(|s| {
            let number = issue["number"].as_u64().expect("number");
            s.issues.insert(number, issue);
        });
    }

    /// A comment on an issue or pull request by `login` with `association`; returns its id.
    pub fn add_issue_comment(&self, number: u64, login: &str, association: &str, body: &str, at: &str) -> u64 {
        self.with(|s| s.issue_comment(number, login, association, body, at))
    }

    /// A bot pull request from `branch` (which must exist in the bare repository), opened by
    /// `author`; `closed_at` closes it without merging.
    pub fn add_pull(&self, number: u64, branch: &str, title: &str, author: &str, closed_at: Option<&str>) {
        self.with(|s| {
            let mut pull = s.pull_json(number, branch, title, "", author);
            if let Some(at) = closed_at {
                pull["state"] = json!("closed");
                pull["closed_at"] = json!(at);
                pull["updated_at"] = json!(at);
            }
            s.pulls.insert(number, pull);
        });
    }

    /// Sets fields of pull request `number` as GitHub would report them (e.g. `mergeable`).
    pub fn set_pull_fields(&self, number: u64, fields: Value) {
        self.with(|s| {
            let pull = s.pulls.get_mut(&number).expect("the pull request exists");
            for (key, value) in fields.as_object().expect("an object") {
                pull[key] = value.clone();
            }
        });
    }

    /// A submitted review; returns its id.
    pub fn add_review(&self, pull: u64, login: &str, association: &str, state: &str, body: &str, at: &str) -> u64 {
        self.with(|s| {
            let id = s.id();
            let commit = s.pulls[&pull]["head"]["sha"].clone();
            let html = format!("{WEB}/{OWNER}/{NAME}/pull/{pull}");
            s.reviews.entry(pull).or_default().push(json!({
                "id": id, "node_id": format!("MDE3OlB1bGxSZXF1ZXN0UmV2aWV3{id}"), "user": user(login), "body": body,
                "state": state, "html_url": format!("{html}#pullrequestreview-{id}"),
                "pull_request_url": format!("{API}/repos/{OWNER}/{NAME}/pulls/{pull}"),
                "_links": {"html": {"href": format!("{html}#pullrequestreview-{id}")},
                           "pull_request": {"href": format!("{API}/repos/{OWNER}/{NAME}/pulls/{pull}")}},
                "submitted_at": at, "commit_id": commit, "author_association": association,
            }));
            id
        })
    }

    /// A review comment (a new thread, or a reply when `in_reply_to` is set); returns its id.
    pub fn add_review_comment(&self, comment: &ReviewComment<'_>) -> u64 {
        self.with(|s| s.review_comment(comment, TIME))
    }

    pub fn issue_comments(&self, number: u64) -> Vec<Value> {
        self.with(|s| s.issue_comments.get(&number).cloned().unwrap_or_default())
    }

    /// The bodies of the comments the bot's account wrote on issue or pull request `number`.
    pub fn bot_comments(&self, number: u64) -> Vec<String> {
        let bot = self.with(|s| s.bot.clone());
        self.issue_comments(number)
            .into_iter()
            .filter(|c| c["user"]["login"] == bot.as_str())
            .map(|c| c["body"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub fn review_comments(&self, pull: u64) -> Vec<Value> {
        self.with(|s| s.review_comments.get(&pull).cloned().unwrap_or_default())
    }

    pub fn pulls(&self) -> Vec<Value> {
        self.with(|s| s.pulls.values().cloned().collect())
    }

    /// A check run on commit `sha`; returns its id (an Actions job's id).
    pub fn add_check_run(&self, sha: &str, spec: CheckRunSpec) -> u64 {
        self.with(|s| s.add_check_run(sha, spec))
    }

    /// A commit status on `sha`.
    pub fn add_status(&self, sha: &str, context: &str, state: &str, description: &str) {
        self.with(|s| s.add_status(sha, context, state, description));
    }

    /// Job logs answer 403, as for a workflow token without `actions: read`.
    pub fn refuse_job_logs(&self) {
        self.with(|s| s.checks.logs_forbidden = true);
    }

    /// Fails the test when a body served or received broke GitHub's description.
    #[track_caller]
    pub fn assert_conformant(&self) {
        let violations = self.with(|s| s.violations.clone());
        assert!(
            violations.is_empty(),
            "bodies that break GitHub's description:\n{violations:#?}"
        );
    }

    /// Requests upkeep sent, as (method, path, body).
    pub async fn requests(&self) -> Vec<(String, String, Value)> {
        self.api
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                let body = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
                (r.method.to_string(), r.url.path().to_owned(), body)
            })
            .collect()
    }
}
