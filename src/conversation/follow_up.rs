//! Review follow-up: the bot works the maintainers' feedback on its own pull request.
//!
//! Guarantees: only a pull request the bot opened, from a bot branch of this repository, and
//! still open, is worked ([`check_workable`]); anything else is refused before any work. The
//! cycle starts from the pull request's branch as the remote has it; its commit goes on top and
//! is pushed as a fast-forward ([`crate::repo::Workspace::push_on_top`]). The bot answers in the
//! threads the model says it addressed (only threads it was shown), or with one comment on the
//! pull request, naming the commit, whose hidden marker lists the threads it answered so they
//! count as settled.

use super::{ConversationError, CycleConversation};
use crate::forge::discussion::answered_marker;
use crate::forge::{ContinuedPullRequest, FeedbackAnswer, Forge, PullRequestFeedback, PullRequestInfo};
use crate::repo::{BOT_BRANCH_PREFIX, GitAuth, Workspace};

/// Open bot pull requests whose feedback a backlog cycle looks at, at most.
const MAX_SCANNED: usize = 10;

/// Why the bot must not work this pull request, if it must not.
pub(crate) fn check_workable(pull: &PullRequestInfo) -> Result<(), String> {
    let number = pull.number;
    if !pull.opened_by_bot || !pull.branch.starts_with(BOT_BRANCH_PREFIX) || !pull.same_repository {
        let author = if pull.author.is_empty() {
            "someone else".to_owned()
        } else {
            crate::text::escape_control(&pull.author)
        };
        return Err(format!(
            "pull request #{number} was not opened by upkeep (opened by {author} from branch {}); upkeep works review feedback only on its own pull requests",
            crate::text::escape_control(&pull.branch)
        ));
    }
    if pull.merged {
        return Err(format!("pull request #{number} is already merged"));
    }
    if pull.state != "open" {
        return Err(format!(
            "pull request #{number} is closed; reopen it for upkeep to work its review feedback"
        ));
    }
    Ok(())
}

/// Checks the clone out on the pull request's branch and makes the feedback the cycle's work.
pub(crate) async fn start(
    workspace: &Workspace,
    auth: &GitAuth,
    waiting: &PullRequestFeedback,
    conversation: &mut CycleConversation,
) -> Result<(), ConversationError> {
    let pull = &waiting.pull_request;
    workspace.continue_branch(&pull.branch, auth).await?;
    conversation.continued = Some(ContinuedPullRequest {
        number: pull.number,
        branch: pull.branch.clone(),
        threads: waiting.threads.iter().map(|thread| thread.id).collect(),
        review: true,
        fix: None,
    });
    conversation.feedback = Some(waiting.clone());
    Ok(())
}

/// The bot's open pull requests against `base` with maintainers' feedback waiting, oldest
/// first, and every open pull request the bot may work (for the checks, [`super::fix::scan`]).
/// A pull request whose feedback cannot be read is skipped with a notice.
pub(crate) async fn scan(
    forge: &dyn Forge,
    base: &str,
    notice: &(dyn Fn(&str) + Sync),
) -> (Vec<PullRequestFeedback>, Vec<PullRequestInfo>) {
    if forge.name() != "github" {
        return (Vec::new(), Vec::new());
    }
    let open = match forge.open_pull_requests(base).await {
        Ok(open) => open,
        Err(error) => {
            notice(&format!(
                "upkeep: could not list open pull requests for review feedback: {error}"
            ));
            return (Vec::new(), Vec::new());
        }
    };
    let mut numbers: Vec<u64> = open.iter().filter_map(|pr| pr.number).collect();
    numbers.sort_unstable();
    let mut waiting = Vec::new();
    let mut workable = Vec::new();
    for number in numbers.into_iter().take(MAX_SCANNED) {
        match forge.pull_request_feedback(number).await {
            Ok(feedback) if check_workable(&feedback.pull_request).is_ok() => {
                workable.push(feedback.pull_request.clone());
                let unaddressed = feedback.unaddressed();
                if !unaddressed.is_empty() {
                    waiting.push(unaddressed);
                }
            }
            Ok(_) => {}
            Err(error) => notice(&format!(
                "upkeep: could not read the review feedback on pull request #{number}: {error}"
            )),
        }
    }
    (waiting, workable)
}

/// What the bot says after pushing `commit` for `continued`: a reply in each thread the model
/// named (threads it was not shown are ignored), and one comment on the pull request when it
/// named none. `replies` are (thread id, text) as the model gave them; `body` is its summary.
pub(crate) fn answer(
    continued: &ContinuedPullRequest,
    replies: &[(u64, String)],
    body: &str,
    commit: &str,
) -> FeedbackAnswer {
    let short = commit.get(..12).unwrap_or(commit);
    let replies: Vec<(u64, String)> = replies
        .iter()
        .filter(|(thread, text)| continued.threads.contains(thread) && !text.trim().is_empty())
        .map(|(thread, text)| {
            (
                *thread,
                format!("{}\n\n<sub>upkeep, in commit {short}</sub>", text.trim()),
            )
        })
        .collect();
    // The summary answers every thread the model was shown; its hidden marker says which, so the
    // next run counts them settled instead of following up on its own summary.
    let summary = replies.is_empty().then(|| {
        format!(
            "{}\nupkeep pushed {short} in answer to the review:\n\n{}",
            answered_marker(&continued.threads),
            body.trim()
        )
    });
    FeedbackAnswer {
        pull_request: continued.number,
        commit: commit.to_owned(),
        replies,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(author_is_bot: bool, branch: &str, state: &str) -> PullRequestInfo {
        PullRequestInfo {
            number: 9,
            title: "t".into(),
            url: "u".into(),
            author: if author_is_bot {
                "upkeep-bot".into()
            } else {
                "alice".into()
            },
            opened_by_bot: author_is_bot,
            branch: branch.into(),
            same_repository: true,
            head_sha: "abc".into(),
            base: "main".into(),
            state: state.into(),
            merged: false,
            conflicts: false,
        }
    }

    #[test]
    fn only_the_bots_own_open_pull_requests_are_worked() {
        assert!(check_workable(&info(true, "upkeep/7-x", "open")).is_ok());
        let error = check_workable(&info(false, "feature/x", "open")).expect_err("a human's");
        assert!(
            error.contains("not opened by upkeep") && error.contains("alice"),
            "{error}"
        );
        assert!(check_workable(&info(true, "feature/x", "open")).is_err());
        assert!(check_workable(&info(true, "upkeep/7-x", "closed")).is_err());
    }

    #[test]
    fn replies_go_only_to_threads_the_model_was_shown() {
        let continued = ContinuedPullRequest {
            number: 9,
            branch: "upkeep/7-x".into(),
            threads: vec![1, 2],
            review: true,
            fix: None,
        };
        let answer = answer(
            &continued,
            &[(1, "Renamed.".into()), (5, "Not shown".into())],
            "Renamed it.",
            "0123456789abcdef",
        );
        assert_eq!(answer.replies.len(), 1);
        assert!(answer.replies[0].1.contains("0123456789ab"));
        assert_eq!(answer.summary, None);
        let summary = super::answer(&continued, &[], "Renamed it.", "0123456789abcdef");
        let summary = summary.summary.expect("one comment");
        assert!(summary.contains("Renamed it."));
        assert_eq!(crate::forge::discussion::answered_threads(&summary), [1, 2]);
    }
}
