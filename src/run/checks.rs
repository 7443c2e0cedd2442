//! The checks of the bot's pull request, as a cycle meets them (DESIGN section 14): the
//! `checks` event, the stop when upkeep gives up on a pull request, and the attempt a fix
//! cycle that pushed nothing still counts.

use crate::agent::CycleOutcome;
use crate::conversation::fix::{ChecksStop, GiveUp};
use crate::events::{Event, Scope};
use crate::outcome::Outcome;

use super::record::CycleRecord;
use super::shared::Run;

impl Run<'_> {
    pub(super) fn emit_checks(&self, cycle: u32, pr: u64, sha: &str, state: &crate::forge::checks::ChecksState) {
        self.events.emit(
            Scope {
                cycle: Some(cycle),
                turn: None,
            },
            Event::Checks {
                pr,
                sha: sha.to_owned(),
                state: state.label(),
                failing: state.summaries(),
            },
        );
    }

    /// A pull request's checks that start no fix cycle: nothing to do now, or upkeep stops
    /// fixing them and says so on the pull request (once per head commit).
    pub(super) async fn stop_on_checks(&self, stop: ChecksStop, done: &mut CycleRecord) -> Outcome {
        match stop {
            ChecksStop::Nothing(reason) => {
                self.events.say(&format!("nothing to do: {reason}"));
                Outcome::NoTasks
            }
            ChecksStop::GiveUp(give_up) => {
                self.say_gave_up(give_up, done).await;
                Outcome::ChecksFailed
            }
        }
    }

    /// A fix cycle that pushed nothing (the model finished, asked or ran out of budget) still
    /// used an attempt: it is recorded on the pull request like one that pushed, so the attempts
    /// stay bounded and the same failure on the next run stops the fixing.
    pub(super) async fn record_empty_fix_attempt(
        &self,
        continued: &crate::forge::ContinuedPullRequest,
        outcome: &crate::agent::CycleOutcome,
    ) {
        let Some(fix) = continued.fix.as_deref() else {
            return;
        };
        let ended = match outcome {
            CycleOutcome::Finished { summary, .. } => {
                format!("it finished: {}", crate::forge::postable(summary.trim()))
            }
            CycleOutcome::Question { question, .. } => {
                format!("it asked: {}", crate::forge::postable(question.trim()))
            }
            CycleOutcome::Limit(limit) => format!("a budget stopped it ({limit})"),
        };
        let body = crate::conversation::fix::empty_attempt_comment(fix, &ended);
        let answer = crate::forge::FeedbackAnswer {
            pull_request: continued.number,
            commit: fix.attempt.sha.clone(),
            replies: Vec::new(),
            summary: Some(self.events.redactor().redact(&body)),
        };
        if let Err(error) = self.forge.answer_feedback(&answer).await {
            self.events.alert(&format!(
                "upkeep: could not record fix attempt {} on pull request #{}: {error}",
                fix.attempt.attempt, continued.number
            ));
        }
    }

    /// Says on the pull request (once per head commit: `note` is `None` when already said) and
    /// to people that upkeep stops working its checks.
    pub(super) async fn say_gave_up(&self, give_up: GiveUp, done: &mut CycleRecord) {
        done.fix_attempts.push(crate::summary::FixAttemptReport {
            pr: give_up.pr,
            attempt: give_up.made,
            max: give_up.max,
            gave_up: true,
            why: Some(give_up.reason.clone()),
        });
        if let Some(note) = give_up.note {
            let answer = crate::forge::FeedbackAnswer {
                pull_request: give_up.pr,
                commit: give_up.sha.clone(),
                replies: Vec::new(),
                summary: Some(note),
            };
            match self.forge.answer_feedback(&answer).await {
                Ok(places) => {
                    for place in places {
                        self.events.say(&format!("said so on the pull request: {place}"));
                    }
                }
                Err(error) => self.events.alert(&format!(
                    "upkeep: could not comment on pull request #{}: {error}",
                    give_up.pr
                )),
            }
        }
        self.events.alert(&format!(
            "upkeep: stopped working the checks of pull request #{}: {}; a human needs to look",
            give_up.pr, give_up.reason
        ));
    }
}
