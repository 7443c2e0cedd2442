//! What a run did, for the exit code, the final human summary, `run_finished`, the Actions
//! outputs, the fleet's table and the dashboard: one value every reporter reads, so they cannot
//! disagree about how a run ended.

use crate::config::ConfigError;
use crate::events::Event;
use crate::exit::ExitStatus;
use crate::outcome::Outcome;
use crate::repo_outcome::RepoOutcome;

/// What a run did, for the exit code, the final summary and CI integrations.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// How the run ended (`run_finished.outcome`); the exit code follows from it.
    pub outcome: Outcome,
    pub cycles: u32,
    /// Model calls over the whole run.
    pub turns: u32,
    pub usage: crate::llm::Usage,
    pub cost_usd: f64,
    pub pull_requests: Vec<crate::forge::PullRequest>,
    pub question: Option<String>,
    /// The error that ended the run, when one did.
    pub error: Option<String>,
    /// Changes cycles left in their clones that no pull request carries (reported, not saved).
    pub unsaved_changes: Vec<crate::repo::UnsavedChanges>,
    /// Review findings pull requests were opened with after the last review round (the pull
    /// request's body lists them too).
    pub unresolved_findings: Vec<String>,
    /// The fix attempts the run made on its pull requests' failing checks, and the pull
    /// requests whose checks it stopped working (DESIGN section 14), in order.
    pub fix_attempts: Vec<FixAttemptReport>,
}

/// A fix attempt the run made, or upkeep giving up on a pull request's checks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FixAttemptReport {
    pub pr: u64,
    /// The attempt made (1 for the first); when giving up, the attempts made before.
    pub attempt: u32,
    /// `max_fix_attempts`.
    pub max: u32,
    /// upkeep stopped working this pull request's checks: a human needs to look.
    pub gave_up: bool,
    /// Why it stopped, for people (it may name checks, which the forge named).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl RunSummary {
    /// A run that a configuration error stopped before any work.
    pub fn usage_error(error: &ConfigError) -> Self {
        Self::without_work(Outcome::UsageError, Some(error.to_string()))
    }

    /// A run that ended before any cycle, as `outcome`.
    pub fn without_work(outcome: Outcome, error: Option<String>) -> Self {
        RunSummary {
            outcome,
            cycles: 0,
            turns: 0,
            usage: crate::llm::Usage::default(),
            cost_usd: 0.0,
            pull_requests: Vec::new(),
            question: None,
            error,
            unsaved_changes: Vec::new(),
            unresolved_findings: Vec::new(),
            fix_attempts: Vec::new(),
        }
    }

    /// The exit status, as the outcome gives it.
    pub fn status(&self) -> ExitStatus {
        self.outcome.exit_status()
    }

    /// The `run_finished` event that says how this run ended.
    pub fn finished_event(&self) -> Event {
        Event::RunFinished {
            outcome: self.outcome,
            exit_code: self.status().code(),
            cycles: self.cycles,
            usage: self.usage,
            cost_usd: self.cost_usd,
            error: self.error.clone(),
        }
    }

    /// This run's line of a fleet's table and of `fleet_finished.outcomes`, as `repo`.
    pub fn outcome_for(&self, repo: &str) -> RepoOutcome {
        RepoOutcome {
            repo: repo.to_owned(),
            outcome: self.outcome,
            pull_requests: self
                .pull_requests
                .iter()
                .map(|pull_request| pull_request.url.clone())
                .collect(),
            questions: u32::from(self.question.is_some()),
            cost_usd: self.cost_usd,
            usage: self.usage,
            error: self.error.clone(),
        }
    }
}
