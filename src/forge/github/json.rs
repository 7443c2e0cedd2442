//! The parts of GitHub's REST responses upkeep reads. Every field is defaulted where GitHub
//! may leave it out: a response is never trusted to be complete, and one odd item never fails
//! a listing.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
pub struct PullJson {
    pub number: u64,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub title: String,
    /// `null` when the pull request has no description.
    #[serde(default)]
    pub body: Option<String>,
    pub head: HeadJson,
    #[serde(default)]
    pub base: Option<BaseJson>,
}

#[derive(Debug, Deserialize)]
pub struct HeadJson {
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// `null` when the head repository (a fork) was deleted.
    #[serde(default)]
    pub repo: Option<RepoJson>,
}

#[derive(Debug, Deserialize)]
pub struct BaseJson {
    #[serde(rename = "ref")]
    pub ref_name: String,
}

#[derive(Debug, Deserialize)]
pub struct RepoJson {
    #[serde(default)]
    pub full_name: String,
}

#[derive(Debug, Deserialize)]
pub struct IssueJson {
    pub number: u64,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    /// How many comments the issue has.
    #[serde(default)]
    pub comments: u64,
    #[serde(default)]
    pub pull_request: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub struct CommentJson {
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub user: Option<UserJson>,
}

#[derive(Debug, Deserialize)]
pub struct UserJson {
    #[serde(default)]
    pub login: String,
}
