//! The GitHub Actions events that continue a conversation: a comment on an issue where the bot
//! waits for an answer (`issue_comment`), and feedback on the bot's pull request
//! (`pull_request_review` submitted, `pull_request_review_comment` created, an `issue_comment`
//! on the pull request that mentions the trigger phrase).
//!
//! The workflow's job guard admits only authors with write access, and never a bot; upkeep
//! checks the same again from the payload (a workflow can be written without the guard), so a
//! comment by anyone else starts nothing. The bot's account is resolved from the token before
//! the payload is judged ([`judge`]), and nothing that account wrote starts work, whatever
//! association it has. A comment answers the bot's question only when it was written strictly
//! after it ([`waits_for_answer`]). An event that does not concern upkeep ends the run at
//! once, doing nothing: unlike a labelled issue, a comment is no reason to work the backlog.

use serde::Deserialize;

use crate::config::{ConfigError, EventWork, RepoSource, RunSettings};
use crate::forge::{Forge, IssueComment, Role, discussion::WRITE_ACCESS};
use crate::repo::BOT_BRANCH_PREFIX;

/// The events handled here.
pub(crate) const EVENTS: &[&str] = &["issue_comment", "pull_request_review", "pull_request_review_comment"];

/// What a comment or review event means for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FeedbackEvent {
    /// Resume this issue: a maintainer answered the bot's question.
    Issue(u64),
    /// Work the feedback on this pull request of the bot's.
    PullRequest(u64),
    /// Nothing to do, and why.
    Ignored(String),
}

#[derive(Deserialize)]
struct Payload {
    action: Option<String>,
    comment: Option<Feedback>,
    review: Option<Feedback>,
    issue: Option<EventIssue>,
    pull_request: Option<EventPull>,
    repository: Option<EventRepository>,
}

#[derive(Deserialize)]
struct Feedback {
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    author_association: Option<String>,
    #[serde(default)]
    user: Option<EventUser>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    id: u64,
}

#[derive(Deserialize)]
struct EventUser {
    #[serde(default)]
    login: String,
    #[serde(rename = "type", default)]
    kind: String,
}

#[derive(Deserialize)]
struct EventIssue {
    number: u64,
    /// Present when the issue is a pull request.
    #[serde(default)]
    pull_request: Option<serde_json::Value>,
    #[serde(default)]
    state: Option<String>,
}

#[derive(Deserialize)]
struct EventPull {
    number: u64,
    #[serde(default)]
    head: Option<EventHead>,
    #[serde(default)]
    state: Option<String>,
}

#[derive(Deserialize)]
struct EventHead {
    #[serde(rename = "ref", default)]
    ref_name: String,
}

#[derive(Deserialize)]
struct EventRepository {
    full_name: String,
}

/// Reads a comment or review event payload (the webhook's documented shape) without the forge:
/// who wrote it, on what, and whether it can concern upkeep at all. An `issue_comment` on an
/// issue still needs [`waits_for_answer`] to tell whether the bot waits there.
pub(crate) fn read_feedback_event(
    event_name: &str,
    payload: &str,
    source: &RepoSource,
    trigger_phrase: &str,
    bot_login: Option<&str>,
) -> Result<FeedbackEvent, String> {
    let event: Payload = serde_json::from_str(payload)
        .map_err(|error| format!("the `{event_name}` event payload is not valid: {error}"))?;
    let ignored = |why: String| Ok(FeedbackEvent::Ignored(why));
    let action = event.action.unwrap_or_default();
    let wanted = if event_name == "pull_request_review" {
        "submitted"
    } else {
        "created"
    };
    if action != wanted {
        return ignored(format!("the `{event_name}` event is `{action}`, not `{wanted}`"));
    }
    if let (RepoSource::GitHub { owner, name, .. }, Some(repository)) = (source, &event.repository) {
        if !repository.full_name.eq_ignore_ascii_case(&format!("{owner}/{name}")) {
            return ignored(format!(
                "the event belongs to {}, not to {owner}/{name}",
                repository.full_name
            ));
        }
    }
    let feedback = match event_name {
        "pull_request_review" => event.review,
        _ => event.comment,
    }
    .ok_or_else(|| format!("the `{event_name}` event payload has no comment or review"))?;
    let login = feedback
        .user
        .as_ref()
        .map(|user| user.login.as_str())
        .unwrap_or_default();
    let is_app = feedback
        .user
        .as_ref()
        .is_some_and(|user| user.kind.eq_ignore_ascii_case("Bot"));
    let association = feedback.author_association.as_deref().unwrap_or("NONE");
    // The bot's own comments and reviews carry whatever association its account has (a
    // collaborator's token: `COLLABORATOR`), so the account is checked first: nothing the bot
    // wrote ever starts the bot.
    if Role::of(login, Some(association), bot_login) == Role::Bot {
        return ignored(format!(
            "the comment by {} is upkeep's own: nothing the bot writes starts it",
            crate::text::escape_control(login)
        ));
    }
    if is_app || Role::of(login, Some(association), bot_login) != Role::Maintainer {
        return ignored(format!(
            "the comment by {} ({association}) starts nothing: only authors with write access ({}) start work, never a bot",
            crate::text::escape_control(login),
            WRITE_ACCESS.join(", ")
        ));
    }
    match (event_name, event.issue, event.pull_request) {
        ("issue_comment", Some(issue), _) if issue.pull_request.is_none() => {
            if issue.state.as_deref() == Some("closed") {
                return ignored(format!("issue #{} is closed", issue.number));
            }
            Ok(FeedbackEvent::Issue(issue.number))
        }
        ("issue_comment", Some(issue), _) => {
            let body = feedback.body.unwrap_or_default();
            if !body.to_lowercase().contains(&trigger_phrase.to_lowercase()) {
                return ignored(format!(
                    "the comment on pull request #{} does not mention {trigger_phrase}",
                    issue.number
                ));
            }
            Ok(FeedbackEvent::PullRequest(issue.number))
        }
        (_, _, Some(pull)) => {
            let branch = pull.head.map(|head| head.ref_name).unwrap_or_default();
            if !branch.starts_with(BOT_BRANCH_PREFIX) {
                return ignored(format!(
                    "pull request #{} is not upkeep's (branch {})",
                    pull.number,
                    crate::text::escape_control(&branch)
                ));
            }
            if pull.state.as_deref() == Some("closed") {
                return ignored(format!("pull request #{} is closed", pull.number));
            }
            Ok(FeedbackEvent::PullRequest(pull.number))
        }
        _ => Err(format!(
            "the `{event_name}` event payload names no issue or pull request"
        )),
    }
}

/// The comment the event is about, as the forge would list it (id and time), for
/// [`waits_for_answer`].
pub(crate) fn event_comment(payload: &str) -> IssueComment {
    let comment = serde_json::from_str::<Payload>(payload)
        .ok()
        .and_then(|event| event.comment);
    IssueComment {
        id: comment.as_ref().map_or(0, |c| c.id),
        created_at: comment
            .as_ref()
            .and_then(|c| c.created_at.as_deref())
            .and_then(|t| t.parse().ok()),
        ..IssueComment::new("", "")
    }
}

/// Whether the bot waits for an answer on `number` that `comment` (a maintainer's) gives: it was
/// written strictly after the bot's last question (a later id; a comment in the same second but
/// before the question does not answer it), and no maintainer answered in between.
pub(crate) async fn waits_for_answer(
    forge: &dyn Forge,
    number: u64,
    comment: &IssueComment,
) -> Result<Result<(), String>, crate::forge::ForgeError> {
    let Some(issue) = forge.issue(number).await? else {
        return Ok(Err(format!("#{number} is a pull request")));
    };
    let Some(question) = issue.comments.iter().rfind(|c| c.is_own_question()) else {
        return Ok(Err(format!("upkeep has no question waiting on issue #{number}")));
    };
    if !comment.written_after(question) {
        return Ok(Err(format!(
            "the comment was not written after upkeep's question on issue #{number}, so it does not answer it"
        )));
    }
    let answered_before = issue
        .comments
        .iter()
        .any(|c| c.role == Role::Maintainer && c.written_after(question) && comment.written_after(c));
    if answered_before {
        return Ok(Err(format!(
            "upkeep's question on issue #{number} was answered before this comment"
        )));
    }
    Ok(Ok(()))
}

/// What a feedback event asks of the run: the issue or pull request it works, or
/// [`EventWork::NothingToDo`] when it does not concern upkeep; a payload that is not of the
/// documented shape is a configuration error. Judged on the command line's settings, as an
/// input of [`crate::config::Config::resolve`].
pub(crate) async fn judge(settings: &RunSettings, event_name: &str, payload: &str) -> Result<EventWork, ConfigError> {
    let RepoSource::GitHub { owner, name, .. } = &settings.source else {
        return Ok(EventWork::NothingToDo(format!(
            "`{event_name}` events are read only on GitHub"
        )));
    };
    let forge = crate::forge::github::GitHubForge::new(&settings.github, owner, name, settings.draft)
        .map_err(|error| ConfigError(error.to_string()))?;
    // Who the bot is, before the event is judged: the token's account (`GET /user`), or the
    // login the operator gave for an App token.
    let Some(bot) = forge.account().await else {
        return Ok(EventWork::NothingToDo(format!(
            "cannot tell which account upkeep's token belongs to (GET /user failed), so the `{event_name}` event is not judged and starts nothing; set UPKEEP_BOT_LOGIN (the action's bot-login input)"
        )));
    };
    let event = read_feedback_event(
        event_name,
        payload,
        &settings.source,
        &settings.trigger_phrase,
        Some(&bot),
    )
    .map_err(ConfigError)?;
    Ok(match event {
        FeedbackEvent::Ignored(why) => EventWork::NothingToDo(why),
        FeedbackEvent::PullRequest(number) => EventWork::PullRequest(number),
        FeedbackEvent::Issue(number) => match waits_for_answer(&forge, number, &event_comment(payload)).await {
            Ok(Ok(())) => EventWork::AnsweredIssue(number),
            Ok(Err(why)) => EventWork::NothingToDo(why),
            Err(error) => EventWork::NothingToDo(format!("could not read issue #{number}: {error}")),
        },
    })
}

#[cfg(test)]
#[path = "triggers_tests.rs"]
mod tests;
