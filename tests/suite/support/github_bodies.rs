//! Bodies of GitHub's REST API as [`super::github_fleet`] serves them, shaped as GitHub
//! documents them (`simple-user`, `public-user`, `repository`, `minimal-repository`,
//! `pull-request-simple`, `issue`, `commit`, `git-ref`, `validation-error`): every required
//! field, with the documented types.
//! `tests/suite/fleet/conformance.rs` checks them against the published API description.

use serde_json::{Value, json};

use super::github_fleet::BOT;

const API: &str = "https://api.github.com";
const WEB: &str = "https://github.com";
const TIMESTAMP: &str = "2024-01-01T00:00:00Z";

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

/// `commit`, as `GET /repos/{owner}/{repo}/commits` lists it (`tree` and `parent` are commits'
/// and trees' SHAs; the fake does not need them to be the real ones).
pub fn commit(full_name: &str, sha: &str, tree: &str, parents: &[&str]) -> Value {
    let api = format!("{API}/repos/{full_name}");
    let git_user = json!({"name": "Test", "email": "test@example.com", "date": TIMESTAMP});
    let parents: Vec<Value> = parents
        .iter()
        .map(|parent| {
            json!({"sha": parent, "url": format!("{api}/commits/{parent}"),
                   "html_url": format!("{WEB}/{full_name}/commit/{parent}")})
        })
        .collect();
    json!({
        "url": format!("{api}/commits/{sha}"), "sha": sha, "node_id": format!("C_kwDO{}", &sha[..8]),
        "html_url": format!("{WEB}/{full_name}/commit/{sha}"),
        "comments_url": format!("{api}/commits/{sha}/comments"),
        "commit": {
            "url": format!("{api}/git/commits/{sha}"), "author": git_user.clone(),
            "committer": git_user, "message": "first", "comment_count": 0,
            "tree": {"sha": tree, "url": format!("{api}/git/trees/{tree}")},
        },
        "author": null, "committer": null, "parents": parents,
    })
}

/// `git-ref`, as `POST /repos/{owner}/{repo}/git/refs` answers a created reference.
pub fn git_ref(full_name: &str, name: &str, sha: &str) -> Value {
    let api = format!("{API}/repos/{full_name}");
    json!({
        "ref": name, "node_id": "MDM6UmVmcmVmcy9oZWFkcy9mZWF0dXJlQQ==",
        "url": format!("{api}/git/{name}"),
        "object": {"type": "commit", "sha": sha, "url": format!("{api}/git/commits/{sha}")},
    })
}

/// `validation-error` (HTTP 422), with GitHub's `message`.
pub fn validation_error(message: &str) -> Value {
    json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest/git/refs#create-a-reference",
        "status": "422",
    })
}
