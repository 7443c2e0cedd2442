//! What people said to the bot on the forge, in the shape every forge reports it: who wrote a
//! comment (the bot, someone with write access, anyone else), pull request reviews and their
//! threads, and the bot's pull requests that were closed without merging.
//!
//! The forge decides who is who (DESIGN section 11, "Who is who"): [`Role::Bot`] only for the
//! account the token belongs to, [`Role::Maintainer`] only for `author_association` `OWNER`,
//! `MEMBER` or `COLLABORATOR`. Everything here is untrusted text; the prompt frames it
//! ([`crate::agent::template`]), and only feedback by maintainers starts work
//! ([`PullRequestFeedback::unaddressed`]). A review thread is settled by the bot's reply in it,
//! or by the bot's own summary comment whose first line lists it ([`ANSWERED_MARKER`]).

use jiff::Timestamp;

/// Who wrote something, as far as upkeep's trust goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The bot's own account.
    Bot,
    /// An author with write access to the repository.
    Maintainer,
    /// Anyone else: read as context at most, never as an instruction or an answer.
    Other,
}

/// The `author_association` values that mean write access.
pub(crate) const WRITE_ACCESS: &[&str] = &["OWNER", "MEMBER", "COLLABORATOR"];

impl Role {
    /// The role of `login` with GitHub's `author_association`, given the bot's login (`None`
    /// while it is unknown: then nobody is the bot).
    pub fn of(login: &str, association: Option<&str>, bot: Option<&str>) -> Self {
        if bot.is_some_and(|bot| !login.is_empty() && login.eq_ignore_ascii_case(bot)) {
            return Role::Bot;
        }
        match association {
            Some(association) if WRITE_ACCESS.iter().any(|w| w.eq_ignore_ascii_case(association)) => Role::Maintainer,
            _ => Role::Other,
        }
    }
}

/// A comment in a conversation (an issue, a pull request, a review thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub id: u64,
    pub author: String,
    pub role: Role,
    pub body: String,
    pub created_at: Option<Timestamp>,
}

/// A submitted review of a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub id: u64,
    pub author: String,
    pub role: Role,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`...
    pub state: String,
    pub body: String,
    pub submitted_at: Option<Timestamp>,
}

/// A review comment and its replies: one thread on a line of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewThread {
    /// The id of the thread's first comment: replies go to it.
    pub id: u64,
    pub path: String,
    /// The line of the file the thread is on; `None` when the diff moved on (outdated).
    pub line: Option<u64>,
    pub diff_hunk: String,
    /// Oldest first; the first one opened the thread.
    pub comments: Vec<Comment>,
}

/// Hidden in the bot's summary comment on a pull request, listing the review threads it
/// answered: `<!-- upkeep:answered 12,15 -->`.
pub(crate) const ANSWERED_MARKER: &str = "<!-- upkeep:answered";

/// The marker that says a summary comment answered `threads`.
pub(crate) fn answered_marker(threads: &[u64]) -> String {
    let ids: Vec<String> = threads.iter().map(u64::to_string).collect();
    format!("{ANSWERED_MARKER} {} -->", ids.join(","))
}

/// The threads a comment's [`ANSWERED_MARKER`] lists (the caller checks who wrote it). Only a
/// marker on the comment's first line counts: that is where upkeep writes it, and the rest of a
/// summary is the model's text, which must not settle threads by quoting a marker.
pub(crate) fn answered_threads(body: &str) -> Vec<u64> {
    let first = body.trim_start().lines().next().unwrap_or_default();
    first
        .strip_prefix(ANSWERED_MARKER)
        .and_then(|rest| rest.split_once("-->"))
        .map(|(ids, _)| ids.split([',', ' ']).filter_map(|id| id.trim().parse().ok()).collect())
        .unwrap_or_default()
}

impl ReviewThread {
    /// Whether the thread waits for the bot: a maintainer wrote in it, and the bot has not
    /// answered since. (GitHub's REST API does not say whether a thread was resolved; the bot's
    /// reply as the last word is what marks it settled.)
    pub fn waits_for_bot(&self) -> bool {
        self.waits_for_bot_after(None)
    }

    /// [`ReviewThread::waits_for_bot`], with `summarised` the time of the bot's latest summary
    /// comment that answered this thread: a maintainer comment before it is answered too.
    pub fn waits_for_bot_after(&self, summarised: Option<Timestamp>) -> bool {
        let last_bot = self.comments.iter().rposition(|c| c.role == Role::Bot);
        self.comments.iter().enumerate().any(|(i, c)| {
            c.role == Role::Maintainer
                && last_bot.is_none_or(|bot| i > bot)
                && !matches!((summarised, c.created_at), (Some(summary), Some(at)) if at < summary)
        })
    }
}

/// One of the bot's pull requests as a review follow-up needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestInfo {
    pub number: u64,
    pub title: String,
    pub url: String,
    /// Who opened it.
    pub author: String,
    pub opened_by_bot: bool,
    /// The head branch, and whether it lives in this repository (not a fork).
    pub branch: String,
    pub same_repository: bool,
    pub head_sha: String,
    pub base: String,
    /// `open` or `closed`.
    pub state: String,
    pub merged: bool,
    /// The forge computed that it no longer merges into its base (GitHub's `mergeable: false`,
    /// `mergeable_state: "dirty"`); `false` while not known.
    pub conflicts: bool,
}

/// Everything said on a pull request that a follow-up may act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestFeedback {
    pub pull_request: PullRequestInfo,
    pub reviews: Vec<Review>,
    pub threads: Vec<ReviewThread>,
    /// Comments on the pull request's conversation tab, oldest first.
    pub conversation: Vec<Comment>,
    /// When the bot last pushed to the branch (its newest commit's date), if it ever did.
    pub last_push: Option<Timestamp>,
}

impl PullRequestFeedback {
    /// What waits for the bot, from maintainers only: reviews with something to say submitted
    /// since its last push, threads that wait for it, and conversation comments since its last
    /// push. Anything by someone without write access is left out entirely: it never starts
    /// work and never reaches the prompt as feedback.
    pub fn unaddressed(&self) -> PullRequestFeedback {
        let after_push = |time: Option<Timestamp>| match (self.last_push, time) {
            (Some(push), Some(time)) => time > push,
            _ => true,
        };
        PullRequestFeedback {
            pull_request: self.pull_request.clone(),
            reviews: self
                .reviews
                .iter()
                .filter(|r| r.role == Role::Maintainer && after_push(r.submitted_at))
                .filter(|r| !r.body.trim().is_empty() || r.state.eq_ignore_ascii_case("CHANGES_REQUESTED"))
                .cloned()
                .collect(),
            threads: self
                .threads
                .iter()
                .filter(|t| t.waits_for_bot_after(self.summarised(t.id)))
                .map(|t| ReviewThread {
                    comments: t.comments.iter().filter(|c| c.role != Role::Other).cloned().collect(),
                    ..t.clone()
                })
                .collect(),
            conversation: self
                .conversation
                .iter()
                .filter(|c| c.role == Role::Maintainer && after_push(c.created_at))
                .cloned()
                .collect(),
            last_push: self.last_push,
        }
    }

    /// When the bot's latest summary comment that lists `thread` in its [`ANSWERED_MARKER`] was
    /// written. Only the bot's own comments count: anyone can paste the marker.
    fn summarised(&self, thread: u64) -> Option<Timestamp> {
        self.conversation
            .iter()
            .filter(|c| c.role == Role::Bot && answered_threads(&c.body).contains(&thread))
            .filter_map(|c| c.created_at)
            .max()
    }

    /// Whether anything waits (call on [`PullRequestFeedback::unaddressed`]'s result).
    pub fn is_empty(&self) -> bool {
        self.reviews.is_empty() && self.threads.is_empty() && self.conversation.is_empty()
    }
}

/// A bot pull request closed without merging: its task is over until its issue changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedPullRequest {
    pub number: u64,
    pub title: String,
    pub branch: String,
    pub url: String,
    pub closed_at: Option<Timestamp>,
    /// The issue its branch was for (`upkeep/<N>-...`).
    pub issue: Option<u64>,
    /// The task key in its body, when it was for a task without an issue.
    pub task_key: Option<String>,
}

/// What the bot says after pushing a follow-up commit: replies in the threads it addressed, or
/// one comment on the pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackAnswer {
    pub pull_request: u64,
    /// The commit that carries the change.
    pub commit: String,
    /// (thread id, reply) for each addressed thread.
    pub replies: Vec<(u64, String)>,
    /// The comment on the pull request, when there is one to post.
    pub summary: Option<String>,
}

/// The bot's open pull request a cycle continues: its branch is checked out, the cycle's
/// commits go on top, and (for a review follow-up) the bot answers the threads it was shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuedPullRequest {
    pub number: u64,
    pub branch: String,
    /// The review threads shown to the model, the only ones it may reply in; empty when the
    /// cycle is not a review follow-up.
    pub threads: Vec<u64>,
    /// Whether the cycle answers review feedback (else it continues an issue's branch).
    pub review: bool,
    /// Set when the cycle fixes the pull request's failing checks (DESIGN section 14).
    pub(crate) fix: Option<Box<super::fix_attempts::FixCycle>>,
}

/// The issue number a bot branch `upkeep/<N>-...` is for.
pub(crate) fn issue_of_branch(branch: &str) -> Option<u64> {
    let rest = branch.strip_prefix(crate::repo::BOT_BRANCH_PREFIX)?;
    let (number, _) = rest.split_once('-')?;
    number.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(id: u64, role: Role) -> Comment {
        Comment {
            id,
            author: format!("user{id}"),
            role,
            body: "b".into(),
            created_at: None,
        }
    }

    #[test]
    fn roles_follow_the_author_association_and_the_bots_login() {
        assert_eq!(Role::of("alice", Some("OWNER"), Some("bot")), Role::Maintainer);
        assert_eq!(Role::of("alice", Some("collaborator"), None), Role::Maintainer);
        assert_eq!(Role::of("mallory", Some("CONTRIBUTOR"), Some("bot")), Role::Other);
        assert_eq!(Role::of("mallory", None, Some("bot")), Role::Other);
        assert_eq!(Role::of("Bot", Some("NONE"), Some("bot")), Role::Bot);
        assert_eq!(
            Role::of("bot", Some("OWNER"), None),
            Role::Maintainer,
            "unknown bot: nobody is it"
        );
    }

    #[test]
    fn a_thread_waits_until_the_bot_answers_a_maintainer() {
        let thread = |comments| ReviewThread {
            id: 1,
            path: "a".into(),
            line: Some(1),
            diff_hunk: String::new(),
            comments,
        };
        assert!(thread(vec![comment(1, Role::Maintainer)]).waits_for_bot());
        assert!(!thread(vec![comment(1, Role::Other)]).waits_for_bot());
        assert!(!thread(vec![comment(1, Role::Maintainer), comment(2, Role::Bot)]).waits_for_bot());
        assert!(
            thread(vec![
                comment(1, Role::Maintainer),
                comment(2, Role::Bot),
                comment(3, Role::Maintainer)
            ])
            .waits_for_bot()
        );
    }

    /// A summary comment settles the threads its marker lists, only when the bot wrote it, and
    /// only for what was said before it.
    #[test]
    fn a_bots_summary_settles_the_threads_it_lists() {
        let at = |t: &str| Some(t.parse::<Timestamp>().expect("time"));
        let said = |id: u64, role: Role, body: &str, when: &str| Comment {
            id,
            author: format!("user{id}"),
            role,
            body: body.into(),
            created_at: at(when),
        };
        let thread = ReviewThread {
            id: 7,
            path: "a".into(),
            line: Some(1),
            diff_hunk: String::new(),
            comments: vec![said(7, Role::Maintainer, "fix", "2024-01-01T00:00:00Z")],
        };
        let feedback = |conversation: Vec<Comment>, thread: ReviewThread| PullRequestFeedback {
            pull_request: PullRequestInfo {
                number: 3,
                title: String::new(),
                url: String::new(),
                author: String::new(),
                opened_by_bot: true,
                branch: String::new(),
                same_repository: true,
                head_sha: String::new(),
                base: String::new(),
                state: "open".into(),
                merged: false,
                conflicts: false,
            },
            reviews: Vec::new(),
            threads: vec![thread],
            conversation,
            last_push: None,
        };
        let summary = format!("{}\ndone", answered_marker(&[5, 7]));
        assert_eq!(answered_threads(&summary), [5, 7]);
        // A marker quoted further down (the model's text) settles nothing.
        assert!(answered_threads(&format!("done\n{}", answered_marker(&[7]))).is_empty());
        let bot = said(20, Role::Bot, &summary, "2024-01-02T00:00:00Z");
        assert!(feedback(vec![bot.clone()], thread.clone()).unaddressed().is_empty());
        let forged = said(21, Role::Other, &summary, "2024-01-02T00:00:00Z");
        assert!(!feedback(vec![forged], thread.clone()).unaddressed().is_empty());
        let mut again = thread.clone();
        again
            .comments
            .push(said(30, Role::Maintainer, "not yet", "2024-01-03T00:00:00Z"));
        assert!(!feedback(vec![bot], again).unaddressed().is_empty());
    }

    #[test]
    fn branches_name_their_issue() {
        assert_eq!(issue_of_branch("upkeep/12-fix-typo"), Some(12));
        assert_eq!(issue_of_branch("upkeep/fix-typo"), None);
        assert_eq!(issue_of_branch("feature/12-x"), None);
    }
}
