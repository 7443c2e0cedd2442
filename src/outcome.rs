//! How a cycle, a run or a fleet's repository ended: one enum every reporter matches on (the
//! exit code, the final summary, `cycle_finished` and `run_finished`, the Actions outputs and
//! job summary, the fleet's table and the dashboard), so they cannot disagree about an ending
//! and a new ending cannot fall into another's words.
//!
//! Its serialized names are the ones docs/events.md documents (`run_finished.outcome`, the
//! action's `outcome` output, the fleet table's column); the exit code is derived from it
//! ([`Outcome::exit_status`]), never stored beside it.

use serde::Serialize;

use crate::exit::ExitStatus;
use crate::repo::StopReason;

/// How a cycle, a run or a fleet's repository ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The last cycle finished `completed` and opened or updated a pull request.
    PullRequest,
    /// The last cycle finished `completed` without a pull request.
    Completed,
    /// Nothing to do (the model said so, an Actions event did not concern upkeep, `--pr` found
    /// no feedback waiting).
    NoTasks,
    /// Continuous mode ran `--max-cycles` cycles.
    MaxCycles,
    /// `pr_limit` bot pull requests are open: nothing new is opened.
    PrLimit,
    /// `pr_hourly_limit` bot pull requests were opened in the last hour.
    PrHourlyLimit,
    /// The moment is outside `schedule`.
    OutsideSchedule,
    /// The model asked a question: a human must answer.
    Question,
    /// upkeep stopped fixing the failing checks of its pull request (attempts used up, the same
    /// failure twice, or a failure outside what it may change): a human must look.
    ChecksFailed,
    /// A budget (`--timeout` included) cut a cycle short.
    Limit,
    /// The model made the same failing call five times in a row.
    Stuck,
    /// A runtime failure.
    Error,
    /// A usage or configuration error.
    UsageError,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// A fleet's repository whose run never began: the fleet was interrupted first.
    NotStarted,
    /// A fleet's repository whose run never began: `--fleet-max-cost` was spent.
    FleetBudget,
}

impl Outcome {
    /// Every outcome, in the order docs/events.md lists them (the fleet's two last).
    pub const ALL: [Outcome; 16] = [
        Outcome::PullRequest,
        Outcome::Completed,
        Outcome::NoTasks,
        Outcome::MaxCycles,
        Outcome::PrLimit,
        Outcome::PrHourlyLimit,
        Outcome::OutsideSchedule,
        Outcome::Question,
        Outcome::ChecksFailed,
        Outcome::Limit,
        Outcome::Stuck,
        Outcome::Error,
        Outcome::UsageError,
        Outcome::Interrupted,
        Outcome::NotStarted,
        Outcome::FleetBudget,
    ];

    /// The documented name (what it serializes to).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::PullRequest => "pull_request",
            Outcome::Completed => "completed",
            Outcome::NoTasks => "no_tasks",
            Outcome::MaxCycles => "max_cycles",
            Outcome::PrLimit => "pr_limit",
            Outcome::PrHourlyLimit => "pr_hourly_limit",
            Outcome::OutsideSchedule => "outside_schedule",
            Outcome::Question => "question",
            Outcome::ChecksFailed => "checks_failed",
            Outcome::Limit => "limit",
            Outcome::Stuck => "stuck",
            Outcome::Error => "error",
            Outcome::UsageError => "usage_error",
            Outcome::Interrupted => "interrupted",
            Outcome::NotStarted => "not_started",
            Outcome::FleetBudget => "fleet_budget",
        }
    }

    /// The outcome named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|outcome| outcome.name() == name)
    }

    /// The exit code this ending gives (DESIGN section 1; docs/events.md's table).
    pub fn exit_status(self) -> ExitStatus {
        match self {
            Outcome::PullRequest
            | Outcome::Completed
            | Outcome::NoTasks
            | Outcome::MaxCycles
            | Outcome::PrLimit
            | Outcome::PrHourlyLimit
            | Outcome::OutsideSchedule => ExitStatus::Done,
            // Like a question, the run hands over to a human; it is neither a failure of upkeep's
            // nor a budget.
            Outcome::Question | Outcome::ChecksFailed => ExitStatus::Question,
            Outcome::Limit | Outcome::Stuck | Outcome::FleetBudget => ExitStatus::Budget,
            Outcome::Error => ExitStatus::Failure,
            Outcome::UsageError => ExitStatus::Usage,
            Outcome::Interrupted | Outcome::NotStarted => ExitStatus::Interrupted,
        }
    }

    /// Whether a fleet limit or the schedule held the cycle back before any model call.
    pub fn is_held_back(self) -> bool {
        match self {
            Outcome::PrLimit | Outcome::PrHourlyLimit | Outcome::OutsideSchedule => true,
            Outcome::PullRequest
            | Outcome::Completed
            | Outcome::NoTasks
            | Outcome::MaxCycles
            | Outcome::Question
            | Outcome::ChecksFailed
            | Outcome::Limit
            | Outcome::Stuck
            | Outcome::Error
            | Outcome::UsageError
            | Outcome::Interrupted
            | Outcome::NotStarted
            | Outcome::FleetBudget => false,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<StopReason> for Outcome {
    /// `--timeout` is a budget like the others: `limit`, exit 4.
    fn from(reason: StopReason) -> Self {
        match reason {
            StopReason::Interrupted => Outcome::Interrupted,
            StopReason::Deadline => Outcome::Limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant is in [`Outcome::ALL`] (the match fails to compile when one is added),
    /// serializes to its documented name, and is found again by it.
    #[test]
    fn every_outcome_serializes_to_its_documented_name() {
        let position = |outcome: Outcome| match outcome {
            Outcome::PullRequest => 0,
            Outcome::Completed => 1,
            Outcome::NoTasks => 2,
            Outcome::MaxCycles => 3,
            Outcome::PrLimit => 4,
            Outcome::PrHourlyLimit => 5,
            Outcome::OutsideSchedule => 6,
            Outcome::Question => 7,
            Outcome::ChecksFailed => 8,
            Outcome::Limit => 9,
            Outcome::Stuck => 10,
            Outcome::Error => 11,
            Outcome::UsageError => 12,
            Outcome::Interrupted => 13,
            Outcome::NotStarted => 14,
            Outcome::FleetBudget => 15,
        };
        for (index, outcome) in Outcome::ALL.into_iter().enumerate() {
            assert_eq!(position(outcome), index);
            assert_eq!(
                serde_json::to_value(outcome).expect("serializes"),
                serde_json::Value::String(outcome.name().to_owned())
            );
            assert_eq!(Outcome::from_name(outcome.name()), Some(outcome));
        }
        assert_eq!(Outcome::from_name("new_thing"), None);
    }

    /// The exit codes docs/events.md's table gives each outcome.
    #[test]
    fn the_exit_code_follows_the_documented_table() {
        let docs = include_str!("../docs/events.md");
        let table = docs
            .split("## Outcomes")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("the Outcomes section");
        let mut rows = 0;
        for line in table.lines() {
            let Some(rest) = line.strip_prefix("| `") else { continue };
            let mut cells = rest.split('|');
            let name = cells.next().and_then(|cell| cell.split('`').next()).expect("a name");
            let code: u8 = cells
                .next()
                .expect("an exit cell")
                .trim()
                .parse()
                .expect("an exit code");
            let outcome = Outcome::from_name(name).unwrap_or_else(|| panic!("`{name}` is an outcome"));
            assert_eq!(outcome.exit_status().code(), code, "`{name}`");
            rows += 1;
        }
        assert_eq!(rows, 14);
        assert_eq!(Outcome::NotStarted.exit_status(), ExitStatus::Interrupted);
        assert_eq!(Outcome::FleetBudget.exit_status(), ExitStatus::Budget);
    }
}
