//! The bodies the GitHub stand-in builds from a login or a number (users, the repository, an
//! issue), each in the full shape of GitHub's documented response, and the addresses they name.

use serde_json::{Value, json};

use super::super::github_bodies as bodies;

pub const OWNER: &str = "owner";
pub const NAME: &str = "name";
pub(super) const API: &str = "https://api.github.com";
pub(super) const WEB: &str = "https://github.com";
pub(super) const TIME: &str = "2024-01-01T00:00:00Z";

/// `simple-user`: a bot for `…[bot]` logins, else a user, with an id made from the login.
pub fn user(login: &str) -> Value {
    bodies::simple_user(login, user_id(login), user_kind(login))
}

fn user_id(login: &str) -> u64 {
    login.bytes().map(u64::from).sum::<u64>() + 1000
}

fn user_kind(login: &str) -> &'static str {
    if login.ends_with("[bot]") { "Bot" } else { "User" }
}

pub(super) fn public_user(login: &str) -> Value {
    bodies::public_user(login, user_id(login), user_kind(login))
}

/// `owner/name` as GitHub describes a full repository.
pub fn repository() -> Value {
    bodies::repository(&format!("{OWNER}/{NAME}"), 1296269)
}

pub(super) fn link(href: String) -> Value {
    json!({"href": href})
}

/// An issue as `GET /repos/{owner}/{repo}/issues/{n}` returns it.
pub fn issue_json(number: u64, title: &str, body: &str, labels: &[&str], updated_at: &str) -> Value {
    let url = format!("{API}/repos/{OWNER}/{NAME}/issues/{number}");
    let labels: Vec<Value> = labels
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({"id": 208045946 + i as u64, "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=",
            "url": format!("{API}/repos/{OWNER}/{NAME}/labels/{name}"), "name": name, "description": null,
            "color": "f29513", "default": false})
        })
        .collect();
    json!({
        "id": 2000 + number, "node_id": format!("MDU6SXNzdWUx{number}"), "url": url,
        "repository_url": format!("{API}/repos/{OWNER}/{NAME}"), "labels_url": format!("{url}/labels{{/name}}"),
        "comments_url": format!("{url}/comments"), "events_url": format!("{url}/events"),
        "html_url": format!("{WEB}/{OWNER}/{NAME}/issues/{number}"), "number": number, "state": "open",
        "title": title, "body": body, "user": user("alice"), "labels": labels, "assignee": null,
        "milestone": null, "locked": false, "comments": 0, "closed_at": null, "created_at": TIME,
        "updated_at": updated_at, "author_association": "OWNER",
    })
}
