//! Git cannot be turned against the operator (DESIGN section 8), each case built for real: a
//! hostile user and XDG git configuration, a command that writes git files into the work tree,
//! a repository whose tree holds `.git`-like paths, a server that stalls mid-push or mid-fetch,
//! and interrupts in the middle of a large clone. The real `upkeep` binary runs against real
//! `git http-backend` servers on loopback (one of them a decoy that must never be contacted).
//!
//! This module holds the loopback hub the suites share and the test of a command writing git
//! files into the work tree; the other cases live in its submodules.

mod hostile_git;
mod interrupts;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::git_http::GitHttpServer;
use super::support::{RunOutput, Script, TestRepo, Upkeep, git, reply};

const PULLS: &str = "/repos/owner/name/pulls";

/// A bare `owner/name.git` behind a git server, and a GitHub API mock that lists nothing and
/// opens pull request #1.
struct Hub {
    _tmp: tempfile::TempDir,
    bare: PathBuf,
    server: GitHttpServer,
    api: MockServer,
    token: String,
}

impl Hub {
    async fn start(token: Option<&str>) -> Self {
        Self::serving(&TestRepo::new(), token).await
    }

    async fn serving(origin: &TestRepo, token: Option<&str>) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let bare = tmp.path().join("root/owner/name.git");
        super::support::bare_copy(origin, &bare);
        let server = GitHttpServer::start(&tmp.path().join("root"), token);
        let api = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path(PULLS))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
            .mount(&api)
            .await;
        Mock::given(method("POST"))
            .and(path(PULLS))
            .respond_with(ResponseTemplate::new(201).set_body_json(pull_json()))
            .mount(&api)
            .await;
        Self {
            _tmp: tmp,
            bare,
            server,
            api,
            token: token.unwrap_or("tok-unused").to_owned(),
        }
    }

    /// `upkeep run` on `owner/name` at `server_url`, with the token, JSON events.
    fn upkeep(&self, server_url: &str, extra: &[&str]) -> Upkeep {
        Upkeep::new()
            .env("GITHUB_SERVER_URL", server_url)
            .env("GITHUB_API_URL", self.api.uri())
            .env("GITHUB_TOKEN", &self.token)
            .args(["run", "--repo", "owner/name", "--json", "--task", "t"])
            .args(extra)
    }

    fn branches(&self) -> String {
        git(
            &self.bare,
            &["for-each-ref", "--format=%(refname)", "refs/heads/upkeep/"],
        )
    }

    async fn pull_requests_opened(&self) -> usize {
        let requests = self.api.received_requests().await.unwrap_or_default();
        requests
            .iter()
            .filter(|r| r.method.as_str() == "POST" && r.url.path() == PULLS)
            .count()
    }
}

/// `POST /repos/{owner}/{repo}/pulls`'s answer (abridged).
fn pull_json() -> Value {
    let repo = json!({"id": 1, "name": "name", "full_name": "owner/name", "private": false,
                      "owner": {"login": "owner", "id": 1, "type": "User"},
                      "html_url": "https://github.com/owner/name", "default_branch": "main"});
    json!({"url": "https://api.github.com/repos/owner/name/pulls/1", "id": 1001,
           "html_url": "https://github.com/owner/name/pull/1", "number": 1, "state": "open",
           "title": "Add notes", "body": "", "draft": false,
           "user": {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"},
           "head": {"label": "owner:upkeep/add-notes", "ref": "upkeep/add-notes",
                    "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "repo": repo},
           "base": {"label": "owner:main", "ref": "main",
                    "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "repo": repo}})
}

fn propose(extra_calls: &[(&str, Value)]) -> Script {
    let mut calls: Vec<(&str, Value)> = extra_calls.to_vec();
    calls.extend([
        ("write_file", json!({"path": "NOTES.md", "content": "notes\n"})),
        ("create_pull_request", json!({"title": "Add notes", "body": "notes"})),
        ("finish", json!({"status": "completed", "summary": "notes"})),
    ]);
    Script::new(&[reply("propose", &calls)])
}

fn result_of(out: &RunOutput, tool: &str) -> Value {
    out.events_of("tool_result")
        .into_iter()
        .find(|event| event["tool"] == tool)
        .unwrap_or_else(|| panic!("no {tool} result\n{}\n{}", out.stdout, out.stderr))
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
}

/// Fails on code whose git directory is the work tree's `.git`: the command rewrites the
/// remote, and the push (with the token) goes to the decoy.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_writing_git_files_into_the_work_tree_cannot_change_where_the_push_goes() {
    if !super::support::landlock_available() {
        eprintln!("SKIP: Landlock is not available, so commands may write anywhere upkeep can");
        return;
    }
    let token = "tok-boundary-9a7d";
    let hub = Hub::start(Some(token)).await;
    let decoy = Hub::start(None).await;
    let (real, fake) = (hub.server.url(), decoy.server.url());
    let config = format!(
        "[remote \\\"origin\\\"]\\n\\turl = {fake}/owner/name.git\\n[url \\\"{fake}/\\\"]\\n\\tinsteadOf = {real}/\\n"
    );
    let command = format!(
        "mkdir -p .git sub && printf \"{config}\" > .git/config && printf 'gitdir: /tmp\\n' > sub/.git; \
         if printf \"{config}\" >> \"$GIT_DIR/config\" 2>/dev/null; then echo WROTE-GIT-DIR; else echo git-dir-read-only; fi; \
         git log --oneline | wc -l"
    );
    let script = propose(&[("run_shell_command", json!({"command": command}))]);
    let out = hub
        .upkeep(&real, &["--allow-dangerous-tools"])
        .args(["--replay"])
        .args([script.path()])
        .run_async()
        .await;
    out.assert_code(0);
    let shell = result_of(&out, "run_shell_command");
    let output = shell["output"].as_str().unwrap_or("");
    assert!(
        output.contains("git-dir-read-only") && !output.contains("WROTE"),
        "{output}"
    );
    assert!(
        output.lines().any(|line| line.trim() == "1"),
        "history is readable: {output}"
    );

    assert_eq!(hub.branches(), "refs/heads/upkeep/add-notes");
    assert!(decoy.server.requests().is_empty(), "{:#?}", decoy.server.requests());
    let files = git(&hub.bare, &["ls-tree", "-r", "--name-only", "upkeep/add-notes"]);
    assert!(
        !files.split('\n').any(|f| f.starts_with(".git") || f.contains("/.git")),
        "{files}"
    );
}
