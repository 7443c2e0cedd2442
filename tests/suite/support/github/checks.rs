//! The stand-in's checks: check runs per commit (paginated with `Link` headers like GitHub's),
//! combined commit statuses, check run annotations, and GitHub Actions job logs behind a `302`
//! to an expiring address on another server (the "log host", another port), which serves each
//! address once and refuses it afterwards, as GitHub's signed log URLs expire. Bodies are built
//! in the full shape of GitHub's documented responses and validated like every other answer;
//! the redirect is checked to carry the headers the description names (`Location`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::github_bodies as bodies;
use super::json::{API, NAME, OWNER, TIME, WEB, user};
use super::state::State;

/// A check run to add to a commit.
#[derive(Debug, Clone, Default)]
pub struct CheckRunSpec {
    pub name: String,
    /// `queued`, `in_progress`, `completed`...
    pub status: String,
    pub conclusion: Option<String>,
    /// A GitHub Actions job (the `github-actions` app): its log is served.
    pub actions_job: bool,
    pub output_text: Option<String>,
    /// The job's log, served by the log host once per redirect.
    pub log: Option<Vec<u8>>,
    /// (path, line, message).
    pub annotations: Vec<(String, u64, String)>,
}

impl CheckRunSpec {
    pub fn completed(name: &str, conclusion: &str) -> Self {
        Self {
            name: name.into(),
            status: "completed".into(),
            conclusion: Some(conclusion.into()),
            ..Self::default()
        }
    }
}

/// What the stand-in holds about checks.
#[derive(Default)]
pub(super) struct ChecksState {
    pub(super) runs: BTreeMap<String, Vec<Value>>,
    pub(super) statuses: BTreeMap<String, Vec<Value>>,
    pub(super) annotations: BTreeMap<u64, Vec<Value>>,
    pub(super) logs: BTreeMap<u64, Vec<u8>>,
    /// Download addresses handed out: token -> (job, used).
    pub(super) grants: BTreeMap<String, (u64, bool)>,
    /// `GET .../actions/jobs/{id}/logs` answers 403, as for a token without `actions: read`.
    pub(super) logs_forbidden: bool,
    /// The log host's address (`http://127.0.0.1:port`).
    pub(super) log_host: String,
    /// The API's own address, for `Link` headers.
    pub(super) api_base: String,
}

/// One answer of the checks routes.
pub(super) enum Reply {
    Json {
        status: u16,
        body: Value,
        link: Option<String>,
    },
    Redirect(String),
}

fn app() -> Value {
    json!({
        "id": 15368, "slug": "github-actions", "node_id": "MDM6QXBwMTUzNjg=", "owner": user("github"),
        "name": "GitHub Actions", "description": "Automate your workflow from idea to production",
        "external_url": "https://help.github.com/en/actions", "html_url": "https://github.com/apps/github-actions",
        "created_at": "2018-07-30T09:30:17Z", "updated_at": "2019-12-10T19:04:12Z",
        "permissions": {"actions": "write", "checks": "write", "metadata": "read"}, "events": ["check_run"],
    })
}

impl State {
    pub(super) fn add_check_run(&mut self, sha: &str, spec: CheckRunSpec) -> u64 {
        let id = self.id();
        let url = format!("{API}/repos/{OWNER}/{NAME}/check-runs/{id}");
        let completed = spec.status == "completed";
        let run = json!({
            "id": id, "node_id": format!("CR_{id}"), "head_sha": sha, "external_id": "", "url": url,
            "html_url": format!("{WEB}/{OWNER}/{NAME}/runs/{id}"), "details_url": format!("{WEB}/{OWNER}/{NAME}/runs/{id}"),
            "status": spec.status, "conclusion": spec.conclusion, "started_at": TIME,
            "completed_at": if completed { json!(TIME) } else { Value::Null },
            "output": {"title": spec.output_text.as_ref().map(|_| "Checks failed"), "summary": spec.output_text.as_ref().map(|_| "See the text"),
                       "text": spec.output_text, "annotations_count": spec.annotations.len(),
                       "annotations_url": format!("{url}/annotations")},
            "name": spec.name, "check_suite": {"id": 5},
            "app": if spec.actions_job { app() } else { Value::Null },
            "pull_requests": [],
        });
        self.checks.runs.entry(sha.to_owned()).or_default().push(run);
        let annotations = spec
            .annotations
            .iter()
            .map(|(path, line, message)| {
                json!({
                    "path": path, "start_line": line, "end_line": line, "start_column": null, "end_column": null,
                    "annotation_level": "failure", "title": "test failed", "message": message, "raw_details": null,
                    "blob_href": format!("{WEB}/{OWNER}/{NAME}/blob/{sha}/{path}"),
                })
            })
            .collect();
        self.checks.annotations.insert(id, annotations);
        if let Some(log) = spec.log {
            self.checks.logs.insert(id, log);
        }
        id
    }

    pub(super) fn add_status(&mut self, sha: &str, context: &str, state: &str, description: &str) {
        let id = self.id();
        self.checks.statuses.entry(sha.to_owned()).or_default().push(json!({
            "url": format!("{API}/repos/{OWNER}/{NAME}/statuses/{sha}"), "avatar_url": null, "id": id,
            "node_id": format!("SC_{id}"), "state": state, "description": description,
            "target_url": format!("https://ci.example.com/builds/{id}"), "context": context,
            "created_at": TIME, "updated_at": TIME,
        }));
    }

    /// The checks routes; `None` for any other route.
    pub(super) fn answer_checks(
        &mut self,
        method: &str,
        parts: &[&str],
        query: &BTreeMap<String, String>,
    ) -> Option<Reply> {
        if method != "GET" {
            return None;
        }
        match parts {
            ["commits", sha, "check-runs"] => {
                let all = self.checks.runs.get(*sha).cloned().unwrap_or_default();
                let per_page: usize = query
                    .get("per_page")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(30)
                    .clamp(1, 100);
                let page: usize = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1).max(1);
                let items: Vec<Value> = all.iter().skip((page - 1) * per_page).take(per_page).cloned().collect();
                let link = (page * per_page < all.len()).then(|| {
                    format!(
                        "<{}/repos/{OWNER}/{NAME}/commits/{sha}/check-runs?per_page={per_page}&page={}>; rel=\"next\"",
                        self.checks.api_base,
                        page + 1
                    )
                });
                Some(Reply::Json {
                    status: 200,
                    body: json!({"total_count": all.len(), "check_runs": items}),
                    link,
                })
            }
            ["commits", sha, "status"] => {
                let statuses = self.checks.statuses.get(*sha).cloned().unwrap_or_default();
                let state = if statuses
                    .iter()
                    .any(|s| s["state"] == "failure" || s["state"] == "error")
                {
                    "failure"
                } else if statuses.is_empty() || statuses.iter().any(|s| s["state"] == "pending") {
                    "pending"
                } else {
                    "success"
                };
                let repo = bodies::minimal_repository(&format!("{OWNER}/{NAME}"), 1296269, &[], false, false);
                Some(Reply::Json {
                    status: 200,
                    body: json!({
                        "state": state, "statuses": statuses, "sha": sha, "total_count": statuses.len(),
                        "repository": repo, "commit_url": format!("{API}/repos/{OWNER}/{NAME}/commits/{sha}"),
                        "url": format!("{API}/repos/{OWNER}/{NAME}/commits/{sha}/status"),
                    }),
                    link: None,
                })
            }
            ["git", "commits", sha] => Some(self.git_commit(sha)),
            ["check-runs", id, "annotations"] => {
                let id: u64 = id.parse().ok()?;
                let body = json!(self.checks.annotations.get(&id)?.clone());
                Some(Reply::Json {
                    status: 200,
                    body,
                    link: None,
                })
            }
            ["actions", "jobs", id, "logs"] => {
                let id: u64 = id.parse().ok()?;
                if self.checks.logs_forbidden {
                    return Some(Reply::Json {
                        status: 403,
                        body: json!({"message": "Resource not accessible by integration",
                                     "documentation_url": "https://docs.github.com/rest/actions/workflow-jobs#download-job-logs-for-a-workflow-run",
                                     "status": "403"}),
                        link: None,
                    });
                }
                self.checks.logs.get(&id)?;
                let token = uuid::Uuid::new_v4().simple().to_string();
                self.checks.grants.insert(token.clone(), (id, false));
                Some(Reply::Redirect(format!(
                    "{}/_apis/pipelines/1/jobs/{id}/signedlogcontent?urlSigningMethod=HMACV1&urlSignature={token}",
                    self.checks.log_host
                )))
            }
            _ => None,
        }
    }

    /// `git-commit` for `sha`, read from the bare repository (its committer date is the real
    /// one: a test that needs an old commit makes it with an old date); 404 as GitHub answers
    /// an unknown commit.
    fn git_commit(&self, sha: &str) -> Reply {
        let out = std::process::Command::new("git")
            .current_dir(&self.bare)
            .args([
                "show",
                "-s",
                "--format=%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%T%x00%P%x00%B",
                "--end-of-options",
                sha,
            ])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let fields: Vec<&str> = text.splitn(9, '\0').collect();
        if !out.status.success() || fields.len() < 9 {
            return Reply::Json {
                status: 404,
                body: json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest/git/commits#get-a-commit-object", "status": "404"}),
                link: None,
            };
        }
        let api = format!("{API}/repos/{OWNER}/{NAME}");
        let parents: Vec<Value> = fields[7]
            .split_whitespace()
            .map(|parent| {
                json!({"sha": parent, "url": format!("{api}/git/commits/{parent}"),
                       "html_url": format!("{WEB}/{OWNER}/{NAME}/commit/{parent}")})
            })
            .collect();
        Reply::Json {
            status: 200,
            body: json!({
                "sha": sha, "node_id": format!("C_kwDO{}", &sha[..8.min(sha.len())]),
                "url": format!("{api}/git/commits/{sha}"), "html_url": format!("{WEB}/{OWNER}/{NAME}/commit/{sha}"),
                "author": {"name": fields[0], "email": fields[1], "date": fields[2]},
                "committer": {"name": fields[3], "email": fields[4], "date": fields[5]},
                "tree": {"sha": fields[6], "url": format!("{api}/git/trees/{}", fields[6])},
                "message": fields[8].trim_end(), "parents": parents,
                "verification": {"verified": false, "reason": "unsigned", "signature": null, "payload": null, "verified_at": null},
            }),
            link: None,
        }
    }

    /// The log host's answer to a download: the log once per address, then 403 as an expired
    /// signature.
    pub(super) fn download(&mut self, signature: Option<&str>) -> (u16, Vec<u8>) {
        let grant = signature.and_then(|s| self.checks.grants.get_mut(s));
        match grant {
            Some((job, used)) if !*used => {
                *used = true;
                let job = *job;
                (200, self.checks.logs.get(&job).cloned().unwrap_or_default())
            }
            _ => (
                403,
                b"<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>AuthenticationFailed</Code><Message>Signed expiry time has passed</Message></Error>".to_vec(),
            ),
        }
    }
}
