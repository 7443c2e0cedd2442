//! What a run did, for its summary ([`RunRecord`]), and what one cycle adds to it
//! ([`CycleRecord`]). A cycle writes only its own record; the loop of cycles folds each into
//! the run's, whichever way the cycle ended, so a pull request opened before an error or an
//! interrupt is still reported.

use crate::agent::budget::Budget;
use crate::dashboard::DashboardPlan;
use crate::forge::PullRequest;
use crate::outcome::Outcome;
use crate::repo::UnsavedChanges;
use crate::summary::{FixAttemptReport, RunSummary};

/// What one cycle did besides how it ended.
#[derive(Default)]
pub(super) struct CycleRecord {
    pub(super) pull_requests: Vec<PullRequest>,
    /// Work left in the clone that no pull request carries.
    pub(super) unsaved: Option<UnsavedChanges>,
    /// The question the cycle asked.
    pub(super) question: Option<String>,
    /// Review findings its pull request opened with (section 12).
    pub(super) findings: Vec<String>,
    /// Set when the cycle read `dashboard = true`: what the dashboard after the run needs.
    pub(super) dashboard: Option<DashboardPlan>,
    /// The fix attempt it made, or the pull requests whose checks it stopped working.
    pub(super) fix_attempts: Vec<FixAttemptReport>,
}

/// What the run did so far.
#[derive(Default)]
pub(super) struct RunRecord {
    /// Cycles that started (a cycle a limit held back before it began is not counted).
    pub(super) cycles: u32,
    pub(super) pull_requests: Vec<PullRequest>,
    pub(super) question: Option<String>,
    pub(super) unsaved: Vec<UnsavedChanges>,
    pub(super) findings: Vec<String>,
    pub(super) dashboard: Option<DashboardPlan>,
    pub(super) fix_attempts: Vec<FixAttemptReport>,
}

impl RunRecord {
    /// Adds what a cycle did.
    pub(super) fn add(&mut self, cycle: CycleRecord) {
        self.pull_requests.extend(cycle.pull_requests);
        self.unsaved.extend(cycle.unsaved);
        if cycle.question.is_some() {
            self.question = cycle.question;
        }
        self.findings.extend(cycle.findings);
        if cycle.dashboard.is_some() {
            self.dashboard = cycle.dashboard;
        }
        self.fix_attempts.extend(cycle.fix_attempts);
    }

    /// What the run did, once it ended as `outcome`, with what `budget` counted.
    pub(super) fn into_summary(self, budget: Option<Budget>, outcome: Outcome, error: Option<String>) -> RunSummary {
        let (usage, cost_usd, turns) = budget
            .map(|budget| (budget.usage, budget.cost_usd, budget.turns))
            .unwrap_or_default();
        RunSummary {
            outcome,
            cycles: self.cycles,
            turns,
            usage,
            cost_usd,
            pull_requests: self.pull_requests,
            question: self.question,
            error,
            unsaved_changes: self.unsaved,
            unresolved_findings: self.findings,
            fix_attempts: self.fix_attempts,
        }
    }
}
