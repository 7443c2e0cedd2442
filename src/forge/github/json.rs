//! The parts of GitHub's REST responses upkeep reads. Every field is defaulted where GitHub
//! may leave it out: a response is never trusted to be complete, and one odd item never fails
//! a listing.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
pub(super) struct PullJson {
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
    /// Who opened it; `null` for a deleted account.
    #[serde(default)]
    pub user: Option<UserJson>,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub merged_at: Option<String>,
    #[serde(default)]
    pub closed_at: Option<String>,
    /// Whether it merges into its base; `null` while GitHub computes it (only the single pull
    /// request's answer has it).
    #[serde(default)]
    pub mergeable: Option<bool>,
    /// `dirty` when it conflicts with its base.
    #[serde(default)]
    pub mergeable_state: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct HeadJson {
    #[serde(rename = "ref")]
    pub ref_name: String,
    #[serde(default)]
    pub sha: String,
    /// `null` when the head repository (a fork) was deleted.
    #[serde(default)]
    pub repo: Option<RepoJson>,
}

#[derive(Debug, Deserialize)]
pub(super) struct BaseJson {
    #[serde(rename = "ref")]
    pub ref_name: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct RepoJson {
    #[serde(default)]
    pub full_name: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct IssueJson {
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
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Who opened it; `null` for a deleted account.
    #[serde(default)]
    pub user: Option<UserJson>,
    #[serde(default)]
    pub author_association: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CommentJson {
    #[serde(default)]
    pub id: u64,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub author_association: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    /// Moves when the comment is edited.
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub user: Option<UserJson>,
}

#[derive(Debug, Deserialize)]
pub(super) struct UserJson {
    #[serde(default)]
    pub login: String,
}

/// A pull request review (`GET /repos/{owner}/{repo}/pulls/{n}/reviews`).
#[derive(Debug, Deserialize)]
pub(super) struct ReviewJson {
    pub id: u64,
    #[serde(default)]
    pub user: Option<UserJson>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub author_association: Option<String>,
    /// Absent on a pending (unsubmitted) review.
    #[serde(default)]
    pub submitted_at: Option<String>,
}

/// A review comment (`GET /repos/{owner}/{repo}/pulls/{n}/comments`).
#[derive(Debug, Deserialize)]
pub(super) struct ReviewCommentJson {
    pub id: u64,
    #[serde(default)]
    pub user: Option<UserJson>,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub path: String,
    /// `null` when the comment no longer applies to the diff.
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub original_line: Option<u64>,
    #[serde(default)]
    pub diff_hunk: String,
    #[serde(default)]
    pub in_reply_to_id: Option<u64>,
    #[serde(default)]
    pub author_association: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
}

/// A commit of a pull request (`GET /repos/{owner}/{repo}/pulls/{n}/commits`).
#[derive(Debug, Deserialize)]
pub(super) struct PullCommitJson {
    #[serde(default)]
    pub sha: String,
    pub commit: GitCommitJson,
}

#[derive(Debug, Deserialize)]
pub(super) struct GitCommitJson {
    #[serde(default)]
    pub author: Option<GitUserJson>,
    #[serde(default)]
    pub committer: Option<GitUserJson>,
    #[serde(default)]
    pub message: String,
}

/// A git identity in a commit; GitHub may send `null`.
#[derive(Debug, Deserialize)]
pub(super) struct GitUserJson {
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub date: Option<String>,
}

/// A timestamp as GitHub writes them (`2011-04-14T16:00:49Z`); anything else is unknown.
pub(super) fn timestamp(text: Option<&str>) -> Option<jiff::Timestamp> {
    text?.parse().ok()
}
