//! A GitHub for fleets, offline: several repositories behind one real smart-HTTP git server on
//! loopback that demands the token, and a wiremock API that serves organisation listings (with
//! topics, `archived`, `fork`, paginated by `Link` headers), pull request lists, and a small
//! stateful issue tracker (list, create, edit) for the dashboard.
//!
//! Every body has the shape GitHub documents (`simple-user`, `repository`,
//! `minimal-repository`, `pull-request-simple`, `issue`, `public-user`): every required field,
//! with the documented types. `tests/suite/fleet/conformance.rs` checks them against the
//! published API description, so the fake cannot drift from the real API unnoticed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::git_http::GitHttpServer;
use super::{TestRepo, Upkeep, git};

/// The bot's account: what `UPKEEP_BOT_LOGIN` says and what the issues it opens carry.
pub const BOT: &str = "upkeep-bot";
const API: &str = "https://api.github.com";
const WEB: &str = "https://github.com";
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
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Default)]
struct IssueStore {
    repos: BTreeMap<String, Vec<Value>>,
    next_id: u64,
    list_delay: Duration,
}

/// `GET`/`POST /repos/{owner}/{name}/issues` and `PATCH /repos/{owner}/{name}/issues/{n}`.
struct IssueTracker(Arc<Mutex<IssueStore>>);

impl Respond for IssueTracker {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let segments: Vec<&str> = request.url.path().trim_start_matches('/').split('/').collect();
        let full_name = format!("{}/{}", segments[1], segments[2]);
        let number: Option<u64> = segments.get(4).and_then(|n| n.parse().ok());
        let mut store = lock(&self.0);
        let delay = store.list_delay;
        let query = |name: &str| {
            request
                .url
                .query_pairs()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.into_owned())
        };
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
                ResponseTemplate::new(201).set_body_json(created)
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

/// `GET /repos/{owner}/{name}/pulls?state=...`.
struct PullList(Arc<Mutex<BTreeMap<String, Vec<Value>>>>);

impl Respond for PullList {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let segments: Vec<&str> = request.url.path().trim_start_matches('/').split('/').collect();
        let full_name = format!("{}/{}", segments[1], segments[2]);
        let state = request
            .url
            .query_pairs()
            .find(|(key, _)| key == "state")
            .map_or_else(|| "open".to_owned(), |(_, value)| value.into_owned());
        let listed: Vec<Value> = lock(&self.0)
            .get(&full_name)
            .into_iter()
            .flatten()
            .filter(|pull| state == "all" || pull["state"] == state.as_str())
            .cloned()
            .collect();
        ResponseTemplate::new(200).set_body_json(listed)
    }
}

fn error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": status.to_string(),
    }))
}

// ---- bodies, shaped as the REST API documents them ----

/// `simple-user`.
pub fn simple_user(login: &str, id: u64, kind: &str) -> Value {
    let mut user = json!({
        "login": login, "id": id, "node_id": format!("MDQ6VXNlcj{id}"), "gravatar_id": "",
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "url": format!("{API}/users/{login}"), "html_url": format!("{WEB}/{login}"),
        "type": kind, "site_admin": false, "user_view_type": "public",
    });
    for (key, suffix) in [
        ("followers_url", "followers"),
        ("following_url", "following{/other_user}"),
        ("gists_url", "gists{/gist_id}"),
        ("starred_url", "starred{/owner}{/repo}"),
        ("subscriptions_url", "subscriptions"),
        ("organizations_url", "orgs"),
        ("repos_url", "repos"),
        ("events_url", "events{/privacy}"),
        ("received_events_url", "received_events"),
    ] {
        user[key] = json!(format!("{API}/users/{login}/{suffix}"));
    }
    user
}

/// `public-user` (`GET /users/{username}`), for an organisation or a user.
pub fn public_user(login: &str, id: u64, kind: &str) -> Value {
    let mut user = simple_user(login, id, kind);
    for (key, value) in [
        ("name", json!(login)),
        ("company", Value::Null),
        ("blog", json!("")),
        ("location", Value::Null),
        ("email", Value::Null),
        ("hireable", Value::Null),
        ("bio", Value::Null),
        ("public_repos", json!(5)),
        ("public_gists", json!(0)),
        ("followers", json!(0)),
        ("following", json!(0)),
        ("created_at", json!(TIMESTAMP)),
        ("updated_at", json!(TIMESTAMP)),
    ] {
        user[key] = value;
    }
    user
}

/// The URL fields every repository object carries.
fn repository_urls(full_name: &str) -> Value {
    let base = format!("{API}/repos/{full_name}");
    let mut urls = json!({"url": base.clone(), "html_url": format!("{WEB}/{full_name}")});
    for (key, suffix) in [
        ("archive_url", "{archive_format}{/ref}"),
        ("assignees_url", "assignees{/user}"),
        ("blobs_url", "git/blobs{/sha}"),
        ("branches_url", "branches{/branch}"),
        ("collaborators_url", "collaborators{/collaborator}"),
        ("comments_url", "comments{/number}"),
        ("commits_url", "commits{/sha}"),
        ("compare_url", "compare/{base}...{head}"),
        ("contents_url", "contents/{+path}"),
        ("contributors_url", "contributors"),
        ("deployments_url", "deployments"),
        ("downloads_url", "downloads"),
        ("events_url", "events"),
        ("forks_url", "forks"),
        ("git_commits_url", "git/commits{/sha}"),
        ("git_refs_url", "git/refs{/sha}"),
        ("git_tags_url", "git/tags{/sha}"),
        ("hooks_url", "hooks"),
        ("issue_comment_url", "issues/comments{/number}"),
        ("issue_events_url", "issues/events{/number}"),
        ("issues_url", "issues{/number}"),
        ("keys_url", "keys{/key_id}"),
        ("labels_url", "labels{/name}"),
        ("languages_url", "languages"),
        ("merges_url", "merges"),
        ("milestones_url", "milestones{/number}"),
        ("notifications_url", "notifications{?since,all,participating}"),
        ("pulls_url", "pulls{/number}"),
        ("releases_url", "releases{/id}"),
        ("stargazers_url", "stargazers"),
        ("statuses_url", "statuses/{sha}"),
        ("subscribers_url", "subscribers"),
        ("subscription_url", "subscription"),
        ("tags_url", "tags"),
        ("teams_url", "teams"),
        ("trees_url", "git/trees{/sha}"),
    ] {
        urls[key] = json!(format!("{base}/{suffix}"));
    }
    urls
}

fn merge(mut into: Value, from: Value) -> Value {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
    into
}

/// `minimal-repository`, as `GET /orgs/{org}/repos` lists it.
pub fn minimal_repository(full_name: &str, id: u64, topics: &[&str], archived: bool, fork: bool) -> Value {
    let (owner, name) = full_name.split_once('/').expect("owner/name");
    merge(
        repository_urls(full_name),
        json!({
            "id": id, "node_id": format!("R_kgDO{id}"), "name": name, "full_name": full_name,
            "owner": simple_user(owner, 9000, "Organization"), "private": false,
            "description": "A repository of the fleet", "fork": fork,
            "git_url": format!("git://github.com/{full_name}.git"),
            "ssh_url": format!("git@github.com:{full_name}.git"),
            "clone_url": format!("{WEB}/{full_name}.git"),
            "default_branch": "main", "topics": topics, "archived": archived, "disabled": false,
            "visibility": "public", "pushed_at": TIMESTAMP, "created_at": TIMESTAMP,
            "updated_at": TIMESTAMP, "forks_count": 0, "stargazers_count": 0,
            "watchers_count": 0, "size": 12, "open_issues_count": 0, "has_issues": true,
        }),
    )
}

/// `repository` (the full object, as a pull request's `head.repo` and `base.repo`).
pub fn repository(full_name: &str, id: u64) -> Value {
    let (owner, name) = full_name.split_once('/').expect("owner/name");
    merge(
        repository_urls(full_name),
        json!({
            "id": id, "node_id": format!("R_kgDO{id}"), "name": name, "full_name": full_name,
            "owner": simple_user(owner, 9000, "Organization"), "private": false,
            "description": null, "fork": false, "homepage": null, "language": "Rust",
            "git_url": format!("git://github.com/{full_name}.git"),
            "ssh_url": format!("git@github.com:{full_name}.git"),
            "clone_url": format!("{WEB}/{full_name}.git"),
            "svn_url": format!("{WEB}/{full_name}"), "mirror_url": null,
            "default_branch": "main", "forks": 0, "forks_count": 0, "stargazers_count": 0,
            "watchers": 0, "watchers_count": 0, "size": 12, "open_issues": 0,
            "open_issues_count": 0, "has_issues": true, "has_projects": false, "has_wiki": false,
            "has_pages": false, "has_downloads": true, "archived": false, "disabled": false,
            "license": null, "pushed_at": TIMESTAMP, "created_at": TIMESTAMP,
            "updated_at": TIMESTAMP,
        }),
    )
}

/// `pull-request-simple`, as `GET /repos/{owner}/{repo}/pulls` lists it.
pub fn pull_request(full_name: &str, number: u64, branch: &str, created_at: &str, state: &str) -> Value {
    let owner = full_name.split_once('/').expect("owner/name").0;
    let api = format!("{API}/repos/{full_name}");
    let web = format!("{WEB}/{full_name}");
    let side = |reference: &str| {
        json!({"label": format!("{owner}:{reference}"), "ref": reference,
               "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
               "repo": repository(full_name, 1296269), "user": simple_user(owner, 9000, "Organization")})
    };
    let link = |href: String| json!({"href": href});
    let statuses = format!("{api}/statuses/6dcb09b5b57875f334f61aebed695e2e4193db5e");
    let links = json!({
        "self": link(format!("{api}/pulls/{number}")), "html": link(format!("{web}/pull/{number}")),
        "issue": link(format!("{api}/issues/{number}")),
        "comments": link(format!("{api}/issues/{number}/comments")),
        "review_comments": link(format!("{api}/pulls/{number}/comments")),
        "review_comment": link(format!("{api}/pulls/comments{{/number}}")),
        "commits": link(format!("{api}/pulls/{number}/commits")), "statuses": link(statuses.clone()),
    });
    let urls = json!({
        "url": format!("{api}/pulls/{number}"), "html_url": format!("{web}/pull/{number}"),
        "diff_url": format!("{web}/pull/{number}.diff"), "patch_url": format!("{web}/pull/{number}.patch"),
        "issue_url": format!("{api}/issues/{number}"), "commits_url": format!("{api}/pulls/{number}/commits"),
        "review_comments_url": format!("{api}/pulls/{number}/comments"),
        "review_comment_url": format!("{api}/pulls/comments{{/number}}"),
        "comments_url": format!("{api}/issues/{number}/comments"), "statuses_url": statuses,
    });
    let fields = json!({
        "id": 1000 + number, "node_id": format!("PR_kwDO{number}"),
        "number": number, "state": state, "locked": false, "title": format!("Work on {branch}"),
        "user": simple_user(BOT, 583231, "User"), "body": "Opened by upkeep.",
        "labels": [], "milestone": null, "active_lock_reason": null,
        "created_at": created_at, "updated_at": created_at,
        "closed_at": if state == "open" { Value::Null } else { json!(created_at) },
        "merged_at": null, "merge_commit_sha": null, "assignee": null, "assignees": [],
        "requested_reviewers": [], "requested_teams": [],
        "head": side(branch), "base": side("main"), "_links": links,
        "author_association": "NONE", "auto_merge": null, "draft": false,
    });
    merge(urls, fields)
}

/// `issue`, as the issues API returns it.
pub fn issue(
    full_name: &str,
    number: u64,
    id: u64,
    title: &str,
    body: Option<&str>,
    login: &str,
    labels: &[&str],
) -> Value {
    let api = format!("{API}/repos/{full_name}");
    let labels: Vec<Value> = labels
        .iter()
        .enumerate()
        .map(|(index, name)| {
            json!({"id": 208045946 + index as u64, "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=",
                   "url": format!("{api}/labels/{name}"), "name": name, "description": null,
                   "color": "f29513", "default": false})
        })
        .collect();
    json!({
        "id": 2000 + id, "node_id": format!("I_kwDO{id}"), "url": format!("{api}/issues/{number}"),
        "repository_url": api.clone(), "labels_url": format!("{api}/issues/{number}/labels{{/name}}"),
        "comments_url": format!("{api}/issues/{number}/comments"),
        "events_url": format!("{api}/issues/{number}/events"),
        "html_url": format!("{WEB}/{full_name}/issues/{number}"),
        "number": number, "state": "open", "state_reason": null, "title": title, "body": body,
        "user": simple_user(login, 583231, "User"), "labels": labels, "assignee": null,
        "assignees": [], "milestone": null, "locked": false, "active_lock_reason": null,
        "comments": 0, "closed_at": null, "created_at": TIMESTAMP, "updated_at": TIMESTAMP,
        "author_association": "MEMBER",
    })
}
