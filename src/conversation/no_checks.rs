//! A bot pull request whose head commit no check has reported on (DESIGN section 14, "Pushes
//! that start no checks"): within [`NO_CHECKS_WAIT_MINUTES`] of the commit that is "pending"
//! (CI may not have started yet); after it, upkeep stops waiting, says so on the pull request
//! once per head commit, and the dashboard lists the pull request as needing a human ("no
//! checks reported") instead of waiting forever.
//!
//! Why a check never appears, most often: the push was made with a workflow's own
//! `GITHUB_TOKEN`, and GitHub starts no workflow for such pushes. The note says so and points
//! to the setup that fixes it (a GitHub App or fine-grained token).
//!
//! Guarantees:
//! - The time is the head commit's committer date as the forge reports it; a forge that cannot
//!   tell, or a date that cannot be read, keeps the pull request pending (nothing said).
//! - Said once per head commit: the note's first line is
//!   [`crate::forge::fix_attempts::no_checks_marker`], read back from the bot's own comments.

use super::fix::{ChecksPlan, GiveUp};
use crate::forge::{Forge, ForgeError, PullRequestInfo};

/// Minutes after its head commit was made that a bot pull request with no check at all stops
/// being "pending" (docs/how-it-works.md, docs/actions.md). CI usually reports within a minute
/// or two of a push; a queue for runners can take longer, so the wait leaves room for it.
pub(crate) const NO_CHECKS_WAIT_MINUTES: i64 = 15;

/// Where the note points people: how to let upkeep's pushes start workflows.
const DOCS: &str = "https://github.com/upkeep-bot/upkeep/blob/main/docs/actions.md#pushes-that-start-no-checks";

/// What a head commit without any check calls for: wait, or stop waiting and say so.
pub(crate) async fn plan(forge: &dyn Forge, pull: &PullRequestInfo, max: u32) -> Result<ChecksPlan, ForgeError> {
    let number = pull.number;
    let sha = &pull.head_sha;
    let short = crate::text::prefix_bytes(sha, 12).0;
    let waiting = |why: &str| {
        ChecksPlan::Nothing(format!(
            "no check has reported on {short}, the head of pull request #{number}, {why}"
        ))
    };
    let committed = match forge.commit_time(sha).await {
        Ok(committed) => committed,
        // The date only decides how long to wait: unreadable, the pull request stays pending.
        Err(error) => return Ok(waiting(&format!("and its time could not be read ({error})"))),
    };
    let Some(committed) = committed else {
        return Ok(waiting("yet"));
    };
    if !waited_long_enough(committed, jiff::Timestamp::now()) {
        return Ok(waiting(&format!(
            "yet (pending: checks have {NO_CHECKS_WAIT_MINUTES} minutes after the commit to appear)"
        )));
    }
    let attempts = forge.fix_attempts(number).await?;
    let note = (!attempts.said_no_checks(sha)).then(|| note(sha));
    Ok(ChecksPlan::GiveUp(GiveUp {
        pr: number,
        sha: sha.clone(),
        note,
        reason: format!(
            "no check has reported on {short}, its head commit, within {NO_CHECKS_WAIT_MINUTES} minutes (no checks reported)"
        ),
        made: attempts.made,
        max,
    }))
}

/// Whether a head commit made at `committed` has had its time for checks to appear by `now`.
/// A date in the future (a skewed clock) has not.
fn waited_long_enough(committed: jiff::Timestamp, now: jiff::Timestamp) -> bool {
    now.duration_since(committed) > jiff::SignedDuration::from_mins(NO_CHECKS_WAIT_MINUTES)
}

/// The note upkeep posts when no check appeared on head `sha`: its marker first, then why this
/// happens and what fixes it.
fn note(sha: &str) -> String {
    let short = crate::text::prefix_bytes(sha, 12).0;
    format!(
        "{}\nNo check has reported on {short}, the head of this pull request, {NO_CHECKS_WAIT_MINUTES} minutes after it was committed, so upkeep cannot tell whether the change works and stops waiting. A human needs to look.\n\nThe usual cause: pushes made with a workflow's own `GITHUB_TOKEN` start no workflows (GitHub's rule), so CI never runs on upkeep's pushes. Let upkeep push with a GitHub App or a fine-grained token instead: {DOCS}\n\nIf this repository runs no checks at all, there is nothing to fix.",
        crate::forge::fix_attempts::no_checks_marker(sha)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_is_pending_until_the_wait_is_over() {
        let now: jiff::Timestamp = "2024-05-01T10:20:00Z".parse().expect("time");
        let ago = |minutes: i64| now - jiff::SignedDuration::from_mins(minutes);
        assert!(!waited_long_enough(ago(1), now));
        assert!(!waited_long_enough(ago(NO_CHECKS_WAIT_MINUTES), now));
        assert!(waited_long_enough(ago(NO_CHECKS_WAIT_MINUTES + 1), now));
        assert!(waited_long_enough(ago(20), now));
        assert!(
            !waited_long_enough(now + jiff::SignedDuration::from_mins(30), now),
            "a clock ahead"
        );
    }

    #[test]
    fn the_note_starts_with_its_marker_and_names_the_token_rule() {
        let sha = "a".repeat(40);
        let text = note(&sha);
        assert_eq!(
            crate::forge::fix_attempts::parse_no_checks_marker(&text).as_deref(),
            Some(sha.as_str())
        );
        assert!(text.contains("`GITHUB_TOKEN` start no workflows"), "{text}");
        assert!(text.contains(DOCS), "{text}");
    }
}
