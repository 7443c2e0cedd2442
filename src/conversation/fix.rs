//! Fix cycles (DESIGN section 14): what a cycle does about the failing checks of the bot's own
//! pull request, decided from the forge before the model is asked anything.
//!
//! Guarantees:
//! - Only a finished, failing set of checks starts a fix cycle; pending checks wait, passing
//!   checks leave nothing to do, and a head commit without any check waits a documented time
//!   before upkeep says so ([`super::no_checks`]).
//! - Attempts are counted from the forge ([`crate::forge::fix_attempts`]): a fix cycle runs
//!   only while fewer than `max_fix_attempts` were made and the checks do not fail exactly as
//!   they did before the last attempt.
//! - A failure outside what the bot may change (every failing check lost its runner, or every
//!   failing check points only at protected paths) starts no fix cycle.
//! - When upkeep stops, it says so on the pull request once per head commit (the note's first
//!   line is [`gave_up_marker`]), and the cycle ends `checks_failed`.

use std::fmt::Write as _;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::{ConversationError, CycleConversation};
use crate::config::RepoSettings;
use crate::forge::checks::{ChecksState, FailingCheck, failure_signature};
pub(crate) use crate::forge::fix_attempts::FixCycle;
use crate::forge::fix_attempts::{FixAttempt, FixAttempts, FixDecision, GiveUpReason, gave_up_marker};
use crate::forge::{ContinuedPullRequest, Forge, ForgeError, PullRequestInfo, postable};
use crate::repo::{GitAuth, Workspace};
use crate::text::one_line;

/// What a runner that never ran the code says, in an Actions job's log or a check's output.
const INFRASTRUCTURE_SIGNS: [&str; 5] = [
    "lost communication with the server",
    "the runner has received a shutdown signal",
    "was not acquired by runner",
    "the job was not started",
    "no runner matching the specified labels",
];

/// The checks of a pull request's head commit, for the `checks` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChecksReport {
    pub pr: u64,
    pub sha: String,
    pub state: ChecksState,
}

/// upkeep stops fixing a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GiveUp {
    pub pr: u64,
    pub sha: String,
    /// The note to post on the pull request; `None` when it was already said for this commit.
    pub note: Option<String>,
    /// Why, for people.
    pub reason: String,
    /// The fix attempts made on the pull request, and `max_fix_attempts`.
    pub made: u32,
    pub max: u32,
}

/// Checks that start no fix cycle: nothing to do now (and why), or upkeep stops working them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChecksStop {
    Nothing(String),
    GiveUp(GiveUp),
}

/// What the checks of a bot pull request call for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChecksPlan {
    Fix(FixCycle),
    /// Nothing to do now, and why.
    Nothing(String),
    GiveUp(GiveUp),
}

/// Reads the checks of `pull`'s head commit and decides. `None` report: the forge runs no checks.
pub(crate) async fn plan(
    forge: &dyn Forge,
    pull: &PullRequestInfo,
    max: u32,
    protected_paths: &[String],
) -> Result<(Option<ChecksReport>, ChecksPlan), ForgeError> {
    let number = pull.number;
    let sha = pull.head_sha.clone();
    let Some(state) = forge.checks(&sha).await? else {
        return Ok((
            None,
            ChecksPlan::Nothing(format!("the {} forge runs no checks", forge.name())),
        ));
    };
    let short = crate::text::prefix_bytes(&sha, 12).0.to_owned();
    let report = ChecksReport {
        pr: number,
        sha: sha.clone(),
        state: state.clone(),
    };
    let failing = match state {
        ChecksState::Passing => {
            return Ok((
                Some(report),
                ChecksPlan::Nothing(format!("the checks of pull request #{number} pass on {short}")),
            ));
        }
        ChecksState::Pending => {
            return Ok((
                Some(report),
                ChecksPlan::Nothing(format!(
                    "the checks of pull request #{number} are still running on {short}; nothing to do until they finish"
                )),
            ));
        }
        // Pending for a while after the commit; then upkeep stops waiting and says so.
        ChecksState::NoChecks => return Ok((Some(report), super::no_checks::plan(forge, pull, max).await?)),
        ChecksState::Failing(failing) => failing,
    };
    let attempts = forge.fix_attempts(number).await?;
    let give_up = |reason: String| {
        let note = (!attempts.gave_up(&sha)).then(|| note(&sha, &reason, &failing, &attempts));
        ChecksPlan::GiveUp(GiveUp {
            pr: number,
            sha: sha.clone(),
            note,
            reason,
            made: attempts.made,
            max,
        })
    };
    if let Some(outside) = outside_reach(&failing, protected_paths) {
        return Ok((Some(report), give_up(outside)));
    }
    let signature = failure_signature(&failing);
    let plan = match attempts.decide(&signature, max) {
        FixDecision::Attempt { attempt, max } => ChecksPlan::Fix(FixCycle {
            title: pull.title.clone(),
            attempt: FixAttempt {
                attempt,
                sha: sha.clone(),
                signature,
            },
            max,
            failing: failing.clone(),
        }),
        FixDecision::GiveUp(GiveUpReason::AttemptsExhausted { made, max }) => give_up(format!(
            "{made} fix attempt{} made, max_fix_attempts is {max}",
            if made == 1 { " was" } else { "s were" }
        )),
        FixDecision::GiveUp(GiveUpReason::SameFailureTwice { attempt }) => {
            give_up(format!("the checks fail the same way as before fix attempt {attempt}"))
        }
    };
    Ok((Some(report), plan))
}

/// Checks the clone out on the pull request's branch and makes fixing its checks the cycle's
/// work.
pub(crate) async fn start(
    workspace: &Workspace,
    auth: &GitAuth,
    pull: &PullRequestInfo,
    cycle: FixCycle,
    conversation: &mut CycleConversation,
) -> Result<(), ConversationError> {
    workspace.continue_branch(&pull.branch, auth).await?;
    conversation.continued = Some(ContinuedPullRequest {
        number: pull.number,
        branch: pull.branch.clone(),
        threads: Vec::new(),
        review: false,
        fix: Some(Box::new(cycle)),
    });
    Ok(())
}

/// What a backlog cycle found among the bot's open pull requests.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    /// The first (oldest) pull request whose checks call for a fix cycle.
    pub fix: Option<(PullRequestInfo, FixCycle)>,
    /// Pull requests upkeep stops working, whose note is still to be said.
    pub gave_up: Vec<GiveUp>,
}

/// The first of `pulls` (oldest first) whose checks fail and call for a fix cycle; pull requests
/// upkeep stopped working are skipped, and those it stops working now are collected so the run
/// says so on them. A pull request whose checks cannot be read is skipped with a notice.
pub(crate) async fn scan(
    forge: &dyn Forge,
    pulls: &[PullRequestInfo],
    settings: &RepoSettings,
    notice: &(dyn Fn(&str) + Sync),
) -> Scanned {
    let mut scanned = Scanned::default();
    for pull in pulls {
        match plan(forge, pull, settings.max_fix_attempts, &settings.protected_paths).await {
            Ok((_, ChecksPlan::Fix(cycle))) => {
                scanned.fix = Some((pull.clone(), cycle));
                break;
            }
            Ok((_, ChecksPlan::GiveUp(give_up))) => {
                if give_up.note.is_some() {
                    scanned.gave_up.push(give_up);
                }
            }
            Ok((_, ChecksPlan::Nothing(_))) => {}
            Err(error) => notice(&format!(
                "upkeep: could not read the checks of pull request #{}: {error}",
                pull.number
            )),
        }
    }
    scanned
}

/// Why the failure is outside what the bot may change, if it is: every failing check lost its
/// runner (it never ran the code), or every failing check points only at protected paths.
fn outside_reach(failing: &[FailingCheck], protected_paths: &[String]) -> Option<String> {
    if failing.is_empty() {
        return None;
    }
    if failing.iter().all(is_infrastructure) {
        return Some("the failing checks did not run the code (their runner was lost or never started): a failure of the infrastructure, not of the change".to_owned());
    }
    let protected = globs(protected_paths)?;
    let only_protected = failing.iter().all(|check| {
        !check.annotations.is_empty()
            && check
                .annotations
                .iter()
                .all(|annotation| protected.is_match(&annotation.path))
    });
    only_protected.then(|| {
        format!(
            "the failing checks point only at protected paths ({}), which upkeep may not change",
            protected_paths.join(", ")
        )
    })
}

fn is_infrastructure(check: &FailingCheck) -> bool {
    let printed = [check.log_tail.as_ref(), check.output.as_ref()]
        .into_iter()
        .flatten()
        .map(|text| text.as_str().to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("\n");
    INFRASTRUCTURE_SIGNS.iter().any(|sign| printed.contains(sign))
}

fn globs(patterns: &[String]) -> Option<GlobSet> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = GlobBuilder::new(pattern)
            .case_insensitive(true)
            .literal_separator(false)
            .build()
            .ok()?;
        builder.add(glob);
    }
    builder.build().ok()
}

/// The note upkeep posts when it stops: what failed and what it tried. Check names are the
/// repository's text, posted as the bot's: made one line, mentions and markers inert.
fn note(sha: &str, reason: &str, failing: &[FailingCheck], attempts: &FixAttempts) -> String {
    let short = crate::text::prefix_bytes(sha, 12).0;
    let mut text = format!(
        "{}\nupkeep stopped working the failing checks of this pull request: {reason}. A human needs to look.\n\nFailing on {short}:\n",
        gave_up_marker(sha)
    );
    for check in failing {
        let _ = write!(
            text,
            "\n- {} ({})",
            postable(&one_line(&check.name)),
            postable(&one_line(&check.conclusion))
        );
        if let Some(url) = &check.url {
            let _ = write!(text, ": {}", postable(&one_line(url)));
        }
    }
    let tried = match (&attempts.made, &attempts.last) {
        (0, _) | (_, None) => "upkeep made no fix attempt on this pull request.".to_owned(),
        (made, Some(last)) => format!(
            "upkeep made {made} fix attempt{} on this pull request; the last set out from {}.",
            if *made == 1 { "" } else { "s" },
            crate::text::prefix_bytes(&last.sha, 12).0
        ),
    };
    let _ = write!(text, "\n\n{tried}");
    text
}

/// The comment a fix attempt posts after pushing `commit`: the attempt's marker first (so the
/// attempts are counted from the forge), then the model's summary.
pub(crate) fn attempt_comment(fix: &FixCycle, commit: &str, summary: &str) -> String {
    let short = commit.get(..12).unwrap_or(commit);
    format!(
        "{}\nupkeep pushed {short} to fix the failing checks (fix attempt {} of {}):\n\n{}",
        crate::forge::fix_attempts::fix_attempt_marker(&fix.attempt),
        fix.attempt.attempt,
        fix.max,
        summary.trim()
    )
}

/// The comment of a fix attempt that pushed nothing: the attempt's marker first, then how the
/// cycle ended (`ended`, already made postable).
pub(crate) fn empty_attempt_comment(fix: &FixCycle, ended: &str) -> String {
    format!(
        "{}\nupkeep worked fix attempt {} of {} on the failing checks and pushed nothing; {ended}",
        crate::forge::fix_attempts::fix_attempt_marker(&fix.attempt),
        fix.attempt.attempt,
        fix.max,
    )
}

#[cfg(test)]
#[path = "fix_tests.rs"]
mod tests;
