//! Fix attempts counted from the forge (DESIGN section 14, "Bounded"): each fix cycle's comment
//! on the pull request carries a hidden marker, `<!-- upkeep:fix-attempt 2 sha=<head> checks=<signature> -->`,
//! and the attempts made are read back from the comments, so stateless workers agree without
//! any store of their own.
//!
//! Guarantees: only a marker on the first line of a comment by the bot's own account
//! ([`Role::Bot`], resolved by the forge from the token) counts; model text never carries a
//! working marker ([`super::task::inert_markers`] quotes it), and a marker anyone else writes
//! is text. The count is the highest attempt number seen, so two workers that posted the same
//! attempt at once count it once, and every reader of the same comments gets the same answer.

use super::Comment;
use super::checks::FailingCheck;
use super::discussion::Role;

/// What every fix-attempt marker starts with.
pub const FIX_ATTEMPT_MARKER: &str = "<!-- upkeep:fix-attempt";

/// One fix attempt as its marker records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixAttempt {
    /// 1 for the first attempt on the pull request.
    pub attempt: u32,
    /// The head commit whose checks the attempt set out to fix.
    pub sha: String,
    /// The [`super::checks::failure_signature`] of the failure it set out to fix.
    pub signature: String,
}

/// The fix attempts the bot made on one pull request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FixAttempts {
    /// How many were made (the highest attempt number recorded).
    pub made: u32,
    /// The latest, when there was one.
    pub last: Option<FixAttempt>,
    /// The head commits on which the bot said it stopped fixing ([`gave_up_marker`]): said
    /// once per head commit.
    pub gave_up_on: Vec<String>,
    /// The head commits on which the bot said no check appeared ([`no_checks_marker`]): said
    /// once per head commit.
    pub no_checks_on: Vec<String>,
}

/// What to do about a failing pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixDecision {
    /// Run fix attempt number `attempt` (of `max`).
    Attempt { attempt: u32, max: u32 },
    /// Stop and say why on the pull request.
    GiveUp(GiveUpReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUpReason {
    /// `max_fix_attempts` were made.
    AttemptsExhausted { made: u32, max: u32 },
    /// The checks fail exactly as they did before the last attempt.
    SameFailureTwice { attempt: u32 },
}

impl FixAttempts {
    /// Whether upkeep already said it stopped fixing head commit `sha`.
    pub fn gave_up(&self, sha: &str) -> bool {
        self.gave_up_on.iter().any(|said| said.eq_ignore_ascii_case(sha))
    }

    /// Whether upkeep already said that no check appeared on head commit `sha`.
    pub fn said_no_checks(&self, sha: &str) -> bool {
        self.no_checks_on.iter().any(|said| said.eq_ignore_ascii_case(sha))
    }

    /// Whether another attempt is due for a failure with `signature`, allowing `max` in all.
    pub fn decide(&self, signature: &str, max: u32) -> FixDecision {
        if let Some(last) = self.last.as_ref().filter(|last| last.signature == signature) {
            return FixDecision::GiveUp(GiveUpReason::SameFailureTwice { attempt: last.attempt });
        }
        if self.made >= max {
            return FixDecision::GiveUp(GiveUpReason::AttemptsExhausted { made: self.made, max });
        }
        FixDecision::Attempt {
            attempt: self.made.saturating_add(1),
            max,
        }
    }
}

/// What the note that upkeep stopped fixing a pull request starts with.
pub const GAVE_UP_MARKER: &str = "<!-- upkeep:checks-gave-up";

/// The hidden first line of the note saying upkeep stopped fixing the checks of head `sha`.
pub fn gave_up_marker(sha: &str) -> String {
    format!("{GAVE_UP_MARKER} sha={sha} -->")
}

/// The head commit a comment's first line says upkeep gave up on, whoever wrote it.
pub fn parse_gave_up_marker(body: &str) -> Option<String> {
    parse_sha_marker(body, GAVE_UP_MARKER)
}

/// What the note that no check appeared on a pull request's head starts with.
pub const NO_CHECKS_MARKER: &str = "<!-- upkeep:no-checks";

/// The hidden first line of the note saying no check appeared on head `sha`.
pub fn no_checks_marker(sha: &str) -> String {
    format!("{NO_CHECKS_MARKER} sha={sha} -->")
}

/// The head commit a comment's first line says no check appeared on, whoever wrote it.
pub fn parse_no_checks_marker(body: &str) -> Option<String> {
    parse_sha_marker(body, NO_CHECKS_MARKER)
}

/// The commit of a `<marker> sha=<sha> -->` first line.
fn parse_sha_marker(body: &str, marker: &str) -> Option<String> {
    let first = body.trim_start().lines().next()?;
    let rest = first.strip_prefix(marker)?.strip_prefix(" sha=")?;
    let (sha, _) = rest.split_once(" -->")?;
    let valid = [40, 64].contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then(|| sha.to_ascii_lowercase())
}

/// The hidden first line of the comment a fix attempt posts.
pub fn fix_attempt_marker(attempt: &FixAttempt) -> String {
    format!(
        "{FIX_ATTEMPT_MARKER} {} sha={} checks={} -->",
        attempt.attempt, attempt.sha, attempt.signature
    )
}

/// The attempt a comment's first line records, whoever wrote it (the caller checks who did).
pub fn parse_fix_attempt_marker(body: &str) -> Option<FixAttempt> {
    let first = body.trim_start().lines().next()?;
    let rest = first.strip_prefix(FIX_ATTEMPT_MARKER)?.strip_prefix(' ')?;
    let (fields, _) = rest.split_once("-->")?;
    let mut words = fields.split_whitespace();
    let attempt: u32 = words.next()?.parse().ok().filter(|n| *n > 0)?;
    let sha = words.next()?.strip_prefix("sha=")?;
    let signature = words.next()?.strip_prefix("checks=")?;
    let hex =
        |text: &str, lengths: &[usize]| lengths.contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit());
    if words.next().is_some() || !hex(sha, &[40, 64]) || !hex(signature, &[16]) {
        return None;
    }
    Some(FixAttempt {
        attempt,
        sha: sha.to_ascii_lowercase(),
        signature: signature.to_ascii_lowercase(),
    })
}

/// The attempts recorded in a pull request's comments: only the bot's own count. The latest is
/// the highest attempt number; between comments recording the same number, the later one
/// (by id, then by position).
pub fn count_fix_attempts(comments: &[Comment]) -> FixAttempts {
    let mut latest: Option<(u32, u64, usize, FixAttempt)> = None;
    let mut gave_up_on = Vec::new();
    let mut no_checks_on = Vec::new();
    for (position, comment) in comments.iter().enumerate() {
        if comment.role != Role::Bot {
            continue;
        }
        if let Some(sha) = parse_gave_up_marker(&comment.body) {
            gave_up_on.push(sha);
            continue;
        }
        if let Some(sha) = parse_no_checks_marker(&comment.body) {
            no_checks_on.push(sha);
            continue;
        }
        let Some(attempt) = parse_fix_attempt_marker(&comment.body) else {
            continue;
        };
        let key = (attempt.attempt, comment.id, position);
        if latest.as_ref().is_none_or(|(n, id, at, _)| key > (*n, *id, *at)) {
            latest = Some((key.0, key.1, key.2, attempt));
        }
    }
    gave_up_on.sort();
    gave_up_on.dedup();
    no_checks_on.sort();
    no_checks_on.dedup();
    match latest {
        Some((made, _, _, last)) => FixAttempts {
            made,
            last: Some(last),
            gave_up_on,
            no_checks_on,
        },
        None => FixAttempts {
            gave_up_on,
            no_checks_on,
            ..FixAttempts::default()
        },
    }
}

/// The fix cycle a bot pull request gets: which attempt, and the checks it sets out to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FixCycle {
    pub(crate) title: String,
    /// The attempt as its marker records it (number, head commit, failure signature).
    pub(crate) attempt: FixAttempt,
    pub(crate) max: u32,
    pub(crate) failing: Vec<FailingCheck>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(id: u64, role: Role, body: &str) -> Comment {
        Comment {
            id,
            author: "someone".into(),
            role,
            body: body.into(),
            created_at: None,
        }
    }

    fn marker(attempt: u32, signature: &str) -> String {
        fix_attempt_marker(&FixAttempt {
            attempt,
            sha: "a".repeat(40),
            signature: signature.into(),
        })
    }

    #[test]
    fn a_marker_reads_back_and_a_malformed_one_does_not() {
        let attempt = FixAttempt {
            attempt: 2,
            sha: "0123456789abcdef0123456789abcdef01234567".into(),
            signature: "00112233aabbccdd".into(),
        };
        let body = format!("{}\nFixed the test.", fix_attempt_marker(&attempt));
        assert_eq!(parse_fix_attempt_marker(&body), Some(attempt));
        for broken in [
            "<!-- upkeep:fix-attempt 0 sha=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa checks=00112233aabbccdd -->",
            "<!-- upkeep:fix-attempt 2 sha=short checks=00112233aabbccdd -->",
            "<!-- upkeep:fix-attempt 2 sha=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa checks=zz -->",
            "<!-- upkeep:fix-attempt 99999999999 sha=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa checks=00112233aabbccdd -->",
            "text first\n<!-- upkeep:fix-attempt 2 sha=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa checks=00112233aabbccdd -->",
        ] {
            assert_eq!(parse_fix_attempt_marker(broken), None, "{broken}");
        }
    }

    /// Only the bot's own comments count: a maintainer or an outsider quoting a marker (to
    /// reset or exhaust the count) changes nothing, and neither does model text, whose markers
    /// are quoted before posting.
    #[test]
    fn only_the_bots_own_markers_count() {
        let comments = vec![
            comment(1, Role::Bot, &marker(1, "1111111111111111")),
            comment(2, Role::Other, &marker(7, "2222222222222222")),
            comment(3, Role::Maintainer, &marker(9, "3333333333333333")),
            comment(
                4,
                Role::Bot,
                &super::super::task::inert_markers(&marker(5, "4444444444444444")),
            ),
        ];
        let attempts = count_fix_attempts(&comments);
        assert_eq!(attempts.made, 1);
        assert_eq!(attempts.last.map(|a| a.signature).as_deref(), Some("1111111111111111"));
    }

    #[test]
    fn the_same_failure_twice_and_exhausted_attempts_stop_the_fixing() {
        let none = count_fix_attempts(&[]);
        assert_eq!(
            none.decide("aaaaaaaaaaaaaaaa", 3),
            FixDecision::Attempt { attempt: 1, max: 3 }
        );
        assert_eq!(
            none.decide("aaaaaaaaaaaaaaaa", 0),
            FixDecision::GiveUp(GiveUpReason::AttemptsExhausted { made: 0, max: 0 })
        );
        let one = count_fix_attempts(&[comment(1, Role::Bot, &marker(1, "aaaaaaaaaaaaaaaa"))]);
        assert_eq!(
            one.decide("aaaaaaaaaaaaaaaa", 3),
            FixDecision::GiveUp(GiveUpReason::SameFailureTwice { attempt: 1 })
        );
        assert_eq!(
            one.decide("bbbbbbbbbbbbbbbb", 3),
            FixDecision::Attempt { attempt: 2, max: 3 }
        );
        let three: Vec<Comment> = (1..=3)
            .map(|n| comment(u64::from(n), Role::Bot, &marker(n, &format!("{n}").repeat(16))))
            .collect();
        assert_eq!(
            count_fix_attempts(&three).decide("ffffffffffffffff", 3),
            FixDecision::GiveUp(GiveUpReason::AttemptsExhausted { made: 3, max: 3 })
        );
    }

    /// The note that upkeep stopped is read back per head commit, from the bot's comments only.
    #[test]
    fn the_gave_up_note_is_read_back_per_head_commit_from_the_bot_only() {
        let head = "b".repeat(40);
        let note = format!("{}\nupkeep stopped.", gave_up_marker(&head));
        let attempts = count_fix_attempts(&[
            comment(1, Role::Bot, &marker(1, "1111111111111111")),
            comment(2, Role::Maintainer, &gave_up_marker(&"c".repeat(40))),
            comment(3, Role::Bot, &note),
        ]);
        assert_eq!(attempts.made, 1, "the note is no attempt");
        assert!(attempts.gave_up(&head));
        assert!(!attempts.gave_up(&"c".repeat(40)), "a maintainer's marker is text");
        assert_eq!(parse_gave_up_marker(&format!("x\n{}", gave_up_marker(&head))), None);
        assert_eq!(parse_gave_up_marker("<!-- upkeep:checks-gave-up sha=short -->"), None);
    }

    /// Two workers that both posted attempt 2 (a race) and read the comments in any order
    /// agree: attempt 2 was made, once.
    #[test]
    fn two_readers_of_the_same_comments_agree_whatever_the_order() {
        let mut comments = vec![
            comment(10, Role::Bot, &marker(1, "1111111111111111")),
            comment(11, Role::Bot, &marker(2, "2222222222222222")),
            comment(12, Role::Bot, &marker(2, "2222222222222222")),
            comment(13, Role::Maintainer, "please fix"),
        ];
        let first = count_fix_attempts(&comments);
        comments.reverse();
        let second = count_fix_attempts(&comments);
        assert_eq!(first, second);
        assert_eq!(first.made, 2);
    }
}
