//! Where bot branches go and pull requests live.
//!
//! A [`Forge`] lists the bot's open pull requests and the labelled issues that are tasks,
//! publishes a committed branch as a pull request (opening or updating it), and posts questions.
//! `github` pushes over HTTPS and uses the REST API, `local` keeps pull requests as branch descriptions in a local repository, `none` keeps
//! everything inside the clone, and [`dry_run::DryRun`] wraps any forge so that reads still
//! happen but nothing is pushed, opened or posted.

use async_trait::async_trait;
use serde::Serialize;

use crate::repo::{Workspace, WorkspaceError};
pub use discussion::{
    ClosedPullRequest, Comment, ContinuedPullRequest, FeedbackAnswer, PullRequestFeedback, PullRequestInfo, Review,
    ReviewThread, Role,
};

pub mod checks;
pub(crate) mod closing;
pub(crate) mod discussion;
pub(crate) mod dry_run;
pub mod fix_attempts;
pub mod github;
pub(crate) mod local;
pub mod mergeable;
pub(crate) mod none;
pub mod task;

/// What `create_pull_request` asks the forge to publish. The branch is already committed in
/// the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestDraft {
    pub branch: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub issue: Option<u64>,
    /// The task without an issue that this pull request is for (see
    /// [`task::task_key`]): the forge keeps it with the pull request.
    pub task_key: Option<String>,
    /// Set when the cycle continues this open pull request (a review follow-up, or an answered
    /// question on an issue that has one): the branch is pushed only as a fast-forward of what
    /// the forge has, and the pull request's title and description stay as they are.
    pub follow_up: Option<u64>,
    /// The review did not pass within `--max-reviews` rounds: the pull request opens as a draft
    /// (where the forge has drafts), its body listing the unresolved findings.
    pub unreviewed: bool,
    /// Set when the branch, re-done on the current base, replaces what the forge has: it is
    /// replaced only while the forge's branch still points at this commit (a lease), so a
    /// commit pushed meanwhile is never lost.
    pub lease: Option<git2::Oid>,
}

/// A published (or, in a dry run, previewed) pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PullRequest {
    pub url: String,
    pub number: Option<u64>,
    pub branch: String,
    pub title: String,
    /// True when an existing pull request for the branch was updated instead of opening one.
    pub updated: bool,
    /// The task it was opened for (see [`task::task_key`]).
    #[serde(skip)]
    pub task_key: Option<String>,
    /// For forges that send nothing anywhere: the title, body and diff that would be sent.
    #[serde(skip)]
    pub preview: Option<String>,
    /// Where the bot answered the review a follow-up commit addressed.
    #[serde(skip)]
    pub answers: Vec<String>,
}

impl PullRequest {
    /// A pull request that was not sent anywhere (a dry run, `--forge none`): `url` says where
    /// the work is instead, and the preview shows what would have been sent.
    pub(crate) fn preview(url: String, draft: &PullRequestDraft, diff: &str) -> Self {
        PullRequest {
            url,
            number: None,
            branch: draft.branch.clone(),
            title: draft.title.clone(),
            updated: false,
            preview: Some(render_preview(draft, diff)),
            answers: Vec::new(),
            task_key: None,
        }
    }
}

/// One of the bot's own open pull requests, shown to the model so it does not redo work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenPullRequest {
    pub number: Option<u64>,
    pub branch: String,
    pub title: String,
    pub url: String,
    /// The task the pull request was opened for, from the marker in its body.
    #[serde(skip)]
    pub task_key: Option<String>,
    /// Its head commit, where the forge says: notes upkeep left about an earlier head no
    /// longer describe it. Not shown to the model.
    #[serde(skip)]
    pub head_sha: Option<String>,
}

/// The author of a comment that is a question upkeep itself asked; the prompt shows such a
/// comment as the model's own question, so a human's answer after it reads as the answer.
pub const OWN_QUESTION_AUTHOR: &str = "upkeep (you)";

/// A comment on a task issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueComment {
    /// The forge's id (GitHub's grow with time); 0 when the forge has none.
    pub id: u64,
    pub author: String,
    pub body: String,
    /// Who wrote it: only a maintainer's comment after the bot's question answers it.
    pub role: Role,
    pub created_at: Option<jiff::Timestamp>,
    /// When it was last edited, if the forge says (GitHub's `updated_at`).
    pub edited_at: Option<jiff::Timestamp>,
}

impl IssueComment {
    /// A comment by someone without write access (what tests and forges without roles build).
    pub fn new(author: impl Into<String>, body: impl Into<String>) -> Self {
        Self {
            id: 0,
            author: author.into(),
            body: body.into(),
            role: Role::Other,
            created_at: None,
            edited_at: None,
        }
    }

    /// Whether this is a question the bot asked: its own account wrote it with the marker.
    pub fn is_own_question(&self) -> bool {
        self.role == Role::Bot && self.author == OWN_QUESTION_AUTHOR
    }

    /// Whether this comment was written strictly after `earlier`: by id when the forge gives
    /// both, else by time; never when neither tells (two comments in the same second are
    /// ordered by id, and a comment of unknown time answers nothing).
    pub fn written_after(&self, earlier: &IssueComment) -> bool {
        let times = self.created_at.zip(earlier.created_at);
        if self.id != 0 && earlier.id != 0 {
            // Ids decide within a second; a time that says "earlier" still wins over them.
            return self.id > earlier.id && times.is_none_or(|(this, that)| this >= that);
        }
        times.is_some_and(|(this, that)| this > that)
    }
}

/// An open issue carrying the task label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskIssue {
    pub number: u64,
    pub title: String,
    /// Who opened the issue, and their role: the body is their text.
    pub author: String,
    pub role: Role,
    pub body: String,
    pub comments: Vec<IssueComment>,
    /// When the issue last changed (an edit, a comment by anyone, a label).
    pub updated_at: Option<jiff::Timestamp>,
}

impl TaskIssue {
    /// The bot's question that is still waiting: its last question, when no maintainer has
    /// commented strictly after it.
    pub fn pending_question(&self) -> Option<&IssueComment> {
        let question = self.comments.iter().rfind(|c| c.is_own_question())?;
        let answered = self
            .comments
            .iter()
            .any(|c| c.role == Role::Maintainer && c.written_after(question));
        (!answered).then_some(question)
    }

    /// Whether a maintainer spoke on the issue after `time`: a comment written or edited
    /// strictly later. Nobody else's comment counts, and neither does the issue's `updated_at`,
    /// which any comment moves (GitHub's REST API does not say who edited an issue).
    pub fn changed_after(&self, time: jiff::Timestamp) -> bool {
        self.comments
            .iter()
            .any(|c| c.role == Role::Maintainer && [c.created_at, c.edited_at].iter().flatten().any(|t| *t > time))
    }
}

/// The bot's pull requests as the fleet limits count them (DESIGN section 13), by branch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullRequestActivity {
    /// Open bot pull requests, whatever their base.
    pub open: Vec<String>,
    /// Bot pull requests opened since the moment asked about, open or not; `None` when the
    /// forge does not record when a pull request was opened.
    pub opened_since: Option<Vec<String>>,
}

/// What [`Forge::update_dashboard`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DashboardUpdate {
    Created(String),
    Updated(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// Credentials are missing or were refused: nothing the model can do about it.
    #[error("{0}")]
    Auth(String),
    /// The API refused or failed a request; `message` is the API's own text.
    #[error("{operation} failed: HTTP {status}: {message}")]
    Api {
        operation: String,
        status: u16,
        message: String,
    },
    /// The forge refused in a way no tool call can fix (missing permissions, a repository the
    /// token cannot see, an exhausted rate limit): the run stops with the reason.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error("{0}")]
    Other(String),
}

impl ForgeError {
    /// Whether the run must stop. Anything else goes back to the model as the failed call's
    /// result, so it can adjust (for example ask a human when a push is refused).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            ForgeError::Auth(_)
                | ForgeError::Refused(_)
                | ForgeError::Workspace(
                    WorkspaceError::AuthRejected { .. }
                        | WorkspaceError::Stopped(_)
                        | WorkspaceError::UnsafeSource { .. }
                )
        )
    }
}

#[async_trait]
pub trait Forge: Send + Sync {
    /// The forge's name as given to `--forge`.
    fn name(&self) -> &'static str;

    /// The bot's open pull requests against `base`.
    async fn open_pull_requests(&self, base: &str) -> Result<Vec<OpenPullRequest>, ForgeError>;

    /// Open issues carrying the task label. Forges without issues have none.
    async fn task_issues(&self, _label: &str) -> Result<Vec<TaskIssue>, ForgeError> {
        Ok(Vec::new())
    }

    /// Pushes the committed branch and opens (or updates) its pull request.
    async fn publish(&self, workspace: &Workspace, draft: &PullRequestDraft) -> Result<PullRequest, ForgeError>;

    /// Posts a question where a human will see it; returns a line for people saying where
    /// (and how to answer), when it was kept anywhere.
    async fn post_question(&self, issue: Option<u64>, question: &str) -> Result<Option<String>, ForgeError>;

    /// One issue, open or closed, with its recent comments (`--issue N`). Forges without issues
    /// have none.
    async fn issue(&self, _number: u64) -> Result<Option<TaskIssue>, ForgeError> {
        Ok(None)
    }

    /// The bot's pull requests against `base` that were closed without merging, newest first.
    async fn closed_pull_requests(&self, _base: &str) -> Result<Vec<ClosedPullRequest>, ForgeError> {
        Ok(Vec::new())
    }

    /// A pull request and everything said on it (`--pr N`, and the open pull requests listed in
    /// a cycle's prompt). Forges without reviews refuse.
    async fn pull_request_feedback(&self, number: u64) -> Result<PullRequestFeedback, ForgeError> {
        Err(ForgeError::Other(format!(
            "the {} forge has no pull request reviews (pull request #{number})",
            self.name()
        )))
    }

    /// Answers the feedback a follow-up commit addressed; returns where each answer went.
    async fn answer_feedback(&self, _answer: &FeedbackAnswer) -> Result<Vec<String>, ForgeError> {
        Ok(Vec::new())
    }

    /// The bot's pull requests for `pr_limit` and `pr_hourly_limit` (section 13). By default:
    /// the open ones against `base`, with no record of when they were opened.
    async fn pull_request_activity(
        &self,
        base: &str,
        _since: jiff::Timestamp,
    ) -> Result<PullRequestActivity, ForgeError> {
        let open = self.open_pull_requests(base).await?;
        Ok(PullRequestActivity {
            open: open.into_iter().map(|pull_request| pull_request.branch).collect(),
            opened_since: None,
        })
    }

    /// Writes `body` into the repository's one dashboard issue (section 13), creating it the
    /// first time. `None`: this forge keeps no dashboard.
    async fn update_dashboard(&self, _body: &str) -> Result<Option<DashboardUpdate>, ForgeError> {
        Ok(None)
    }

    /// The state of the checks on commit `sha` (a bot pull request's head), DESIGN section 14.
    /// `None`: this forge runs no checks.
    async fn checks(&self, _sha: &str) -> Result<Option<checks::ChecksState>, ForgeError> {
        Ok(None)
    }

    /// When commit `sha` was made (its committer date), to tell how long its checks have had to
    /// appear. `None`: this forge cannot tell.
    async fn commit_time(&self, _sha: &str) -> Result<Option<jiff::Timestamp>, ForgeError> {
        Ok(None)
    }

    /// The fix attempts the bot recorded on pull request `number` (its own comments' markers,
    /// [`fix_attempts::count_fix_attempts`]). Forges without comments record none.
    async fn fix_attempts(&self, _number: u64) -> Result<fix_attempts::FixAttempts, ForgeError> {
        Ok(fix_attempts::FixAttempts::default())
    }

    /// Replaces the bot branch `branch` with the clone's (rebased) one while the forge's branch
    /// still points at `lease` (DESIGN section 14, "Mergeable"). Forges that keep no branches
    /// refuse.
    async fn replace_branch(&self, _workspace: &Workspace, branch: &str, _lease: git2::Oid) -> Result<(), ForgeError> {
        Err(ForgeError::Other(format!(
            "the {} forge keeps no branch to replace ({branch})",
            self.name()
        )))
    }

    /// The bot's notes about keeping pull request `pull` mergeable ([`mergeable`]).
    async fn mergeable_notes(
        &self,
        _pull: &mergeable::PullRequestRef,
    ) -> Result<mergeable::MergeableNotes, ForgeError> {
        Ok(mergeable::MergeableNotes::default())
    }

    /// Leaves a note on pull request `pull`: its first line is `marker`, read back by
    /// [`Forge::mergeable_notes`]; `text` is for people. Returns where it went (empty when the
    /// forge shows people nothing: the run says `text` itself).
    async fn leave_note(
        &self,
        _pull: &mergeable::PullRequestRef,
        _commit: &str,
        _marker: &str,
        _text: &str,
    ) -> Result<Vec<String>, ForgeError> {
        Ok(Vec::new())
    }
}

/// Model text as the bot posts it with its account (pull request titles and bodies, questions,
/// review replies, findings): its `@` mentions notify nobody ([`crate::text::neutralise_mentions`])
/// and the hidden markers upkeep reads back as its own word are quoted ([`task::inert_markers`]).
/// Closing keywords are settled where the body is finalised ([`body_with_issue`]).
pub fn postable(model_text: &str) -> String {
    task::inert_markers(&crate::text::neutralise_mentions(model_text))
}

/// The body a pull request and its commit carry: closing references the model wrote to
/// anything but the issue worked made inert (`closing::neutralise`), and `Closes #N` added
/// when the body does not already close the issue with a closing keyword: GitHub closes an
/// issue on merge only for `close`/`fix`/`resolve` (and their forms) before `#N`, so a body that
/// merely mentions `#N` still needs the line.
pub fn body_with_issue(body: &str, issue: Option<u64>) -> String {
    let body = closing::neutralise(body, issue);
    let Some(number) = issue else {
        return body;
    };
    let closing = regex::Regex::new(&format!(r"(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?):?\s+#{number}\b"))
        .is_ok_and(|keyword| keyword.is_match(&body));
    if closing {
        body
    } else {
        format!("{}\n\nCloses #{number}", body.trim_end())
    }
}

/// The text shown instead of sending anything: title, body, diff.
pub fn render_preview(draft: &PullRequestDraft, diff: &str) -> String {
    format!(
        "branch: {}\nbase:   {}\ntitle:  {}\n\n{}\n\n{}",
        draft.branch,
        draft.base,
        draft.title,
        body_with_issue(&draft.body, draft.issue),
        diff
    )
}

#[cfg(test)]
mod tests {
    use super::{IssueComment, body_with_issue};

    /// An answer must come strictly after the question: by id within the same second, never
    /// when its time says it came first, never when nothing tells.
    #[test]
    fn a_comment_is_written_after_another_only_when_ids_or_times_say_so() {
        let at = |id: u64, time: Option<&str>| IssueComment {
            id,
            created_at: time.map(|t| t.parse().expect("time")),
            ..IssueComment::new("a", "b")
        };
        let second = Some("2024-02-01T00:00:00Z");
        assert!(at(6, second).written_after(&at(5, second)));
        assert!(!at(5, second).written_after(&at(6, second)));
        assert!(!at(7, Some("2024-01-01T00:00:00Z")).written_after(&at(6, second)));
        assert!(at(0, Some("2024-03-01T00:00:00Z")).written_after(&at(6, second)));
        assert!(!at(0, second).written_after(&at(0, second)));
        assert!(!at(0, None).written_after(&at(0, None)));
    }

    #[test]
    fn an_issue_is_closed_by_a_keyword_even_when_the_body_mentions_it() {
        assert_eq!(
            body_with_issue("Follow-up to #7: rename.", Some(7)),
            "Follow-up to #7: rename.\n\nCloses #7"
        );
        assert_eq!(body_with_issue("Fixes #7.", Some(7)), "Fixes #7.");
        assert_eq!(body_with_issue("resolves: #7", Some(7)), "resolves: #7");
        assert_eq!(body_with_issue("Closes #70", Some(7)), "Closes (see #70)\n\nCloses #7");
        assert_eq!(body_with_issue("No issue.", None), "No issue.");
    }
}
