//! A GitHub for fleets, offline: several repositories behind one real smart-HTTP git server on
//! loopback that demands the token, and a wiremock API that serves organisation listings (with
//! topics, `archived`, `fork`, paginated by `Link` headers), pull request lists, a small
//! stateful issue tracker (list, create, edit) for the dashboard, and the git database's
//! commit list and reference creation, backed by the real repositories on the git server: a
//! reference is created with `git update-ref` against an expected "none", so a second creation
//! is refused atomically with GitHub's 422 "Reference already exists".
//!
//! Every body has the shape GitHub documents ([`super::github_bodies`], checked against the
//! published API description by `tests/suite/fleet/conformance.rs`), so the fake cannot drift
//! from the real API unnoticed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::git_http::GitHttpServer;
pub use super::github_bodies::{
    commit, git_ref, issue, minimal_repository, public_user, pull_request, repository, simple_user, validation_error,
};
use super::{RunOutput, Script, TestRepo, Upkeep, git};

/// The bot's account: what `UPKEEP_BOT_LOGIN` says and what the issues it opens carry.
pub const BOT: &str = "upkeep-bot";
const TIMESTAMP: &str = "2024-01-01T00:00:00Z";

pub struct FleetHub {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    pub git: GitHttpServer,
    pub api: MockServer,
    pub token: String,
    issues: Arc<Mutex<IssueStore>>,
    pulls: Arc<Mutex<BTreeMap<String, Vec<Value>>>>,
}

impl FleetHub {
    pub async fn start() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).expect("mkdir");
        let token = format!("ghp_{}", uuid::Uuid::new_v4().simple());
        let git = GitHttpServer::start(&root, Some(&token));
        let api = MockServer::start().await;
        let issues = Arc::new(Mutex::new(IssueStore::default()));
        Mock::given(path_regex(r"^/repos/[^/]+/[^/]+/issues(/[0-9]+)?$"))
            .respond_with(IssueTracker(Arc::clone(&issues)))
            .mount(&api)
            .await;
        Mock::given(path_regex(r"^/repos/[^/]+/[^/]+/(commits|git/refs)$"))
            .respond_with(GitDatabase { root: root.clone() })
            .mount(&api)
            .await;
        let pulls = Arc::new(Mutex::new(BTreeMap::new()));
        Mock::given(method("GET"))
            .and(path_regex(r"^/repos/[^/]+/[^/]+/pulls$"))
            .respond_with(PullList(Arc::clone(&pulls)))
            .mount(&api)
            .await;
        Self {
            _tmp: tmp,
            root,
            git,
            api,
            token,
            issues,
            pulls,
        }
    }

    /// A repository `owner/name` on the git server, its first commit holding `files`, and an
    /// API with no pull requests for it.
    pub async fn add_repo(&self, full_name: &str, files: &[(&str, &str)]) {
        let work = TestRepo::with_files(files);
        let bare = self.bare(full_name);
        std::fs::create_dir_all(bare.parent().expect("owner dir")).expect("mkdir");
        let bare = bare.to_str().expect("utf-8 path");
        git(&self.root, &["init", "-q", "--bare", "-b", "main", bare]);
        work.git(&["push", "-q", bare, "main:main"]);
    }

    pub fn bare(&self, full_name: &str) -> PathBuf {
        self.root.join(format!("{full_name}.git"))
    }

    /// From now on `GET /repos/{owner}/{name}/pulls` answers `pulls`, filtered by `state` as
    /// GitHub does (none until this is called).
    pub fn serve_pulls(&self, full_name: &str, pulls: Vec<Value>) {
        lock(&self.pulls).insert(full_name.to_owned(), pulls);
    }

    /// `GET /users/{org}` as an organisation, and `GET /orgs/{org}/repos` in pages of
    /// `per_page`, linked by `Link: <...>; rel="next"` as GitHub does.
    pub async fn serve_org(&self, org: &str, repos: &[Value], per_page: usize) {
        Mock::given(method("GET"))
            .and(path(format!("/users/{org}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(public_user(org, 9000, "Organization")))
            .mount(&self.api)
            .await;
        let pages: Vec<&[Value]> = repos.chunks(per_page.max(1)).collect();
        for (index, page) in pages.iter().enumerate() {
            let number = index + 1;
            let mut response = ResponseTemplate::new(200).set_body_json(Value::Array(page.to_vec()));
            if number < pages.len() {
                let next = format!(
                    "<{}/orgs/{org}/repos?type=all&per_page=100&page={}>; rel=\"next\", <{}/orgs/{org}/repos?type=all&per_page=100&page={}>; rel=\"last\"",
                    self.api.uri(),
                    number + 1,
                    self.api.uri(),
                    pages.len()
                );
                response = response.insert_header("link", next.as_str());
            }
            let mock = Mock::given(method("GET")).and(path(format!("/orgs/{org}/repos")));
            let mock = if number == 1 {
                mock.and(query_param_is_missing("page"))
            } else {
                mock.and(query_param("page", number.to_string()))
            };
            mock.respond_with(response).mount(&self.api).await;
        }
    }

    /// `upkeep` pointed at this GitHub, with the token and the bot's login.
    pub fn upkeep(&self) -> Upkeep {
        Upkeep::new()
            .env("GITHUB_SERVER_URL", self.git.url())
            .env("GITHUB_API_URL", self.api.uri())
            .env("GITHUB_TOKEN", &self.token)
            .env("UPKEEP_BOT_LOGIN", BOT)
    }

    /// `upkeep ARGS --json --replay SCRIPT` against this GitHub, on a blocking thread (the
    /// servers keep serving meanwhile).
    pub async fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], script: &Script) -> RunOutput {
        self.upkeep()
            .args(args)
            .args(["--json", "--replay"])
            .args([script.path()])
            .run_async()
            .await
    }

    /// Requests the API received with this method and path.
    pub async fn requests(&self, verb: &str, route: &str) -> Vec<Request> {
        self.api
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|request| request.method.as_str() == verb && request.url.path() == route)
            .collect()
    }

    /// The issues of `owner/name`, as the tracker holds them.
    pub fn issues(&self, full_name: &str) -> Vec<Value> {
        lock(&self.issues).repos.get(full_name).cloned().unwrap_or_default()
    }

    /// Puts an issue (see [`issue`]) into the tracker, as if someone had opened it.
    pub fn add_issue(&self, full_name: &str, issue: Value) {
        lock(&self.issues)
            .repos
            .entry(full_name.to_owned())
            .or_default()
            .push(issue);
    }

    /// Makes issue listings answer after `delay` with what the tracker held when the request
    /// arrived: two runs that list at once both see the same, as on a busy API.
    pub fn delay_issue_listings(&self, delay: Duration) {
        lock(&self.issues).list_delay = delay;
    }

    /// Makes issue creation answer after `delay` (the issue exists from the moment the request
    /// arrived): a run that lists meanwhile may or may not see it, as on a busy API.
    pub fn delay_issue_creation(&self, delay: Duration) {
        lock(&self.issues).create_delay = delay;
    }

    /// The references of `owner/name` under `prefix` (`refs/upkeep/`), as the git server holds
    /// them.
    pub fn refs(&self, full_name: &str, prefix: &str) -> Vec<String> {
        let bare = self.bare(full_name);
        git(&bare, &["for-each-ref", "--format=%(refname)", prefix])
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Default)]
struct IssueStore {
    repos: BTreeMap<String, Vec<Value>>,
    next_id: u64,
    list_delay: Duration,
    create_delay: Duration,
}

/// `GET`/`POST /repos/{owner}/{name}/issues` and `PATCH /repos/{owner}/{name}/issues/{n}`.
struct IssueTracker(Arc<Mutex<IssueStore>>);

impl Respond for IssueTracker {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let segments: Vec<&str> = request.url.path().trim_start_matches('/').split('/').collect();
        let full_name = repository_of(&segments);
        let number: Option<u64> = segments.get(4).and_then(|n| n.parse().ok());
        let mut store = lock(&self.0);
        let delay = store.list_delay;
        let create_delay = store.create_delay;
        let query = |name: &str| query_value(request, name);
        match (request.method.as_str(), number) {
            ("GET", None) => {
                let state = query("state").unwrap_or_else(|| "open".into());
                let creator = query("creator");
                let labels = query("labels");
                let listed: Vec<Value> = store
                    .repos
                    .get(&full_name)
                    .into_iter()
                    .flatten()
                    .filter(|issue| state == "all" || issue["state"] == state.as_str())
                    .filter(|issue| creator.as_deref().is_none_or(|login| issue["user"]["login"] == login))
                    .filter(|issue| {
                        labels.as_deref().is_none_or(|wanted| {
                            issue["labels"]
                                .as_array()
                                .is_some_and(|labels| labels.iter().any(|label| label["name"] == wanted))
                        })
                    })
                    .cloned()
                    .collect();
                ResponseTemplate::new(200).set_body_json(listed).set_delay(delay)
            }
            ("POST", None) => {
                let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
                    return error(400, "Problems parsing JSON");
                };
                let Some(title) = body["title"].as_str() else {
                    return error(422, "Validation Failed");
                };
                store.next_id += 1;
                let id = store.next_id;
                let issues = store.repos.entry(full_name.clone()).or_default();
                let number = issues.iter().filter_map(|i| i["number"].as_u64()).max().unwrap_or(0) + 1;
                let created = issue(&full_name, number, id, title, body["body"].as_str(), BOT, &[]);
                issues.push(created.clone());
                ResponseTemplate::new(201)
                    .set_body_json(created)
                    .set_delay(create_delay)
            }
            ("PATCH", Some(number)) => {
                let Ok(change) = serde_json::from_slice::<Value>(&request.body) else {
                    return error(400, "Problems parsing JSON");
                };
                let Some(found) = store
                    .repos
                    .get_mut(&full_name)
                    .and_then(|issues| issues.iter_mut().find(|issue| issue["number"] == number))
                else {
                    return error(404, "Not Found");
                };
                for key in ["title", "body", "state", "state_reason"] {
                    if let Some(value) = change.get(key) {
                        found[key] = value.clone();
                    }
                }
                if found["state"] == "closed" {
                    found["closed_at"] = json!(TIMESTAMP);
                }
                ResponseTemplate::new(200).set_body_json(found.clone())
            }
            _ => error(404, "Not Found"),
        }
    }
}

/// The value of query parameter `name`, if the request has it.
fn query_value(request: &Request, name: &str) -> Option<String> {
    request
        .url
        .query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// `owner/name` of a path `repos/{owner}/{name}/...` split at `/`.
fn repository_of(segments: &[&str]) -> String {
    format!("{}/{}", segments[1], segments[2])
}

/// `GET /repos/{owner}/{name}/pulls?state=...&per_page=...&page=...`, newest first (GitHub's
/// default order, and the one upkeep asks for), in pages linked by `Link: <...>; rel="next"`.
struct PullList(Arc<Mutex<BTreeMap<String, Vec<Value>>>>);

impl Respond for PullList {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let segments: Vec<&str> = request.url.path().trim_start_matches('/').split('/').collect();
        let full_name = repository_of(&segments);
        let query = |name: &str| query_value(request, name);
        let state = query("state").unwrap_or_else(|| "open".to_owned());
        let per_page: usize = query("per_page")
            .and_then(|n| n.parse().ok())
            .unwrap_or(30)
            .clamp(1, 100);
        let page: usize = query("page").and_then(|n| n.parse().ok()).unwrap_or(1).max(1);
        let mut listed: Vec<Value> = lock(&self.0)
            .get(&full_name)
            .into_iter()
            .flatten()
            .filter(|pull| state == "all" || pull["state"] == state.as_str())
            .cloned()
            .collect();
        // RFC 3339 timestamps in UTC sort as strings.
        listed.sort_by(|a, b| b["created_at"].as_str().cmp(&a["created_at"].as_str()));
        let pages = listed.len().div_ceil(per_page).max(1);
        let body: Vec<Value> = listed.into_iter().skip((page - 1) * per_page).take(per_page).collect();
        let mut response = ResponseTemplate::new(200).set_body_json(body);
        if page < pages {
            // wiremock's request URL names `localhost`; the link must name the address the
            // client used, or upkeep (rightly) refuses to follow it off the API.
            let mut next = request.url.clone();
            if let Some((host, port)) = request
                .headers
                .get("host")
                .and_then(|host| host.to_str().ok())
                .and_then(|host| host.rsplit_once(':'))
            {
                let _ = next.set_host(Some(host));
                let _ = next.set_port(port.parse().ok());
            }
            let kept: Vec<(String, String)> = next
                .query_pairs()
                .filter(|(key, _)| key != "page")
                .map(|(key, value)| (key.into_owned(), value.into_owned()))
                .collect();
            next.query_pairs_mut()
                .clear()
                .extend_pairs(kept)
                .append_pair("page", &(page + 1).to_string());
            response = response.insert_header("link", format!("<{next}>; rel=\"next\"").as_str());
        }
        response
    }
}

/// `GET /repos/{owner}/{name}/commits` (the default branch's newest commits; `per_page`
/// honoured) and `POST /repos/{owner}/{name}/git/refs`, on the real repository: the request
/// body checked against GitHub's description, the reference created only if none exists.
struct GitDatabase {
    root: PathBuf,
}

impl GitDatabase {
    /// `git` in the bare repository, with its status and output.
    fn git(&self, full_name: &str, args: &[&str]) -> (bool, String) {
        let output = std::process::Command::new("git")
            .arg("-C")
            .arg(self.root.join(format!("{full_name}.git")))
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git runs");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        )
    }
}

impl Respond for GitDatabase {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let segments: Vec<&str> = request.url.path().trim_start_matches('/').split('/').collect();
        let full_name = repository_of(&segments);
        match (request.method.as_str(), segments.get(3).copied()) {
            ("GET", Some("commits")) => {
                let per_page: usize = query_value(request, "per_page")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(30)
                    .clamp(1, 100);
                let (ok, log) = self.git(
                    &full_name,
                    &["log", "-n", &per_page.to_string(), "--format=%H %T %P", "HEAD"],
                );
                if !ok {
                    return error(409, "Git Repository is empty.");
                }
                let commits: Vec<Value> = log
                    .lines()
                    .map(|line| {
                        let fields: Vec<&str> = line.split(' ').collect();
                        commit(&full_name, fields[0], fields[1], &fields[2..])
                    })
                    .collect();
                ResponseTemplate::new(200).set_body_json(commits)
            }
            ("POST", Some("git")) => {
                let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
                    return error(400, "Problems parsing JSON");
                };
                if let Err(errors) = super::github_conformance::validate(
                    "POST /repos/{owner}/{repo}/git/refs",
                    super::github_conformance::Body::Request,
                    &body,
                ) {
                    panic!("upkeep sent a body GitHub does not describe: {errors:#?}");
                }
                let (name, sha) = (
                    body["ref"].as_str().unwrap_or_default(),
                    body["sha"].as_str().unwrap_or_default(),
                );
                if !name.starts_with("refs/") || name.matches('/').count() < 2 {
                    return ResponseTemplate::new(422).set_body_json(validation_error("Reference name is invalid"));
                }
                let (exists, _) = self.git(&full_name, &["cat-file", "-e", &format!("{sha}^{{commit}}")]);
                if !exists {
                    return ResponseTemplate::new(422).set_body_json(validation_error("Object does not exist"));
                }
                // An empty old value: created only if no such reference exists, atomically.
                let (created, _) = self.git(&full_name, &["update-ref", name, sha, ""]);
                if !created {
                    return ResponseTemplate::new(422).set_body_json(validation_error("Reference already exists"));
                }
                ResponseTemplate::new(201).set_body_json(git_ref(&full_name, name, sha))
            }
            _ => error(404, "Not Found"),
        }
    }
}

fn error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": status.to_string(),
    }))
}
