//! How each repository of a fleet ended, and the fleet's exit code: the worst per-repository
//! outcome, in this order (worst first):
//!
//! | exit | a repository ... |
//! |---|---|
//! | 130 | was interrupted (or never started because of the interrupt) |
//! | 1 | failed (network, git, provider, a crash of its run) |
//! | 2 | had a usage or configuration error (its entry, its `.upkeep.toml`) |
//! | 4 | was cut short by a budget, its own or `--fleet-max-cost` |
//! | 3 | asked a question: a human must answer |
//! | 0 | finished: pull request, nothing to do, or held back by a limit or the schedule |
//!
//! Why this order: an interrupted fleet did not cover its repositories at all; a failure means
//! upkeep could not do its job and may hit every repository alike; a configuration error is one
//! repository's to fix; a budget stop is expected from time to time; a question is a normal
//! step of the work. A fleet-wide usage error (bad flags, an unreadable list) exits 2 before
//! any repository starts.
//!
//! Why at the top of the crate, not in `fleet/`: `fleet_finished` carries these lines and a
//! run's summary makes one, so the events and the summary read it without depending on the
//! fleet that runs repositories.

use serde::{Serialize, Serializer};

use crate::exit::ExitStatus;
use crate::llm::Usage;
use crate::outcome::Outcome;

/// Rank in the fleet's order: higher is worse.
pub(crate) fn severity(status: ExitStatus) -> u8 {
    match status {
        ExitStatus::Done => 0,
        ExitStatus::Question => 1,
        ExitStatus::Budget => 2,
        ExitStatus::Usage => 3,
        ExitStatus::Failure => 4,
        ExitStatus::Interrupted => 5,
    }
}

/// The fleet's exit status: the worst of its repositories' (done for an empty fleet).
pub(crate) fn worst(outcomes: &[RepoOutcome]) -> ExitStatus {
    outcomes
        .iter()
        .map(RepoOutcome::status)
        .max_by_key(|status| severity(*status))
        .unwrap_or(ExitStatus::Done)
}

/// One repository's line of the table and of `fleet_finished.outcomes`.
#[derive(Debug, Clone)]
pub struct RepoOutcome {
    pub repo: String,
    /// How its run ended, or [`Outcome::NotStarted`] / [`Outcome::FleetBudget`] for a
    /// repository whose run never began (interrupt, `--fleet-max-cost` spent).
    pub outcome: Outcome,
    /// URLs of the pull requests opened or updated.
    pub pull_requests: Vec<String>,
    /// Questions asked (0 or 1: a question ends the run).
    pub questions: u32,
    pub cost_usd: f64,
    pub usage: Usage,
    pub error: Option<String>,
}

impl RepoOutcome {
    /// A repository whose run never started.
    pub fn not_run(repo: &str, outcome: Outcome, error: Option<String>) -> Self {
        RepoOutcome {
            repo: repo.to_owned(),
            outcome,
            pull_requests: Vec::new(),
            questions: 0,
            cost_usd: 0.0,
            usage: Usage::default(),
            error,
        }
    }

    /// Its exit status, as its outcome gives it.
    pub fn status(&self) -> ExitStatus {
        self.outcome.exit_status()
    }
}

/// The line as `fleet_finished.outcomes` carries it: the exit code derived from the outcome,
/// written beside it.
impl Serialize for RepoOutcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Line<'a> {
            repo: &'a str,
            outcome: Outcome,
            exit_code: u8,
            pull_requests: &'a [String],
            questions: u32,
            cost_usd: f64,
            usage: Usage,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<&'a str>,
        }
        Line {
            repo: &self.repo,
            outcome: self.outcome,
            exit_code: self.status().code(),
            pull_requests: &self.pull_requests,
            questions: self.questions,
            cost_usd: self.cost_usd,
            usage: self.usage,
            error: self.error.as_deref(),
        }
        .serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_outcome_decides_in_the_documented_order() {
        // An outcome that exits with each status.
        let with = |statuses: &[ExitStatus]| {
            let outcomes: Vec<RepoOutcome> = statuses
                .iter()
                .map(|status| {
                    let outcome = Outcome::ALL
                        .into_iter()
                        .find(|outcome| outcome.exit_status() == *status)
                        .expect("an outcome for every exit status");
                    RepoOutcome::not_run("o/r", outcome, None)
                })
                .collect();
            worst(&outcomes)
        };
        let order = [
            ExitStatus::Done,
            ExitStatus::Question,
            ExitStatus::Budget,
            ExitStatus::Usage,
            ExitStatus::Failure,
            ExitStatus::Interrupted,
        ];
        for (rank, status) in order.iter().enumerate() {
            assert_eq!(with(&order[..=rank]), *status);
            assert_eq!(with(&[*status, ExitStatus::Done]), *status);
        }
        assert_eq!(with(&[]), ExitStatus::Done);
        assert_eq!(
            with(&[ExitStatus::Usage, ExitStatus::Failure, ExitStatus::Question]),
            ExitStatus::Failure
        );
    }
}
