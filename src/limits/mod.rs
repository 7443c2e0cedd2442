//! Renovate-style limits, kept in the forge (DESIGN section 13): `pr_limit` (most open bot pull
//! requests, default 5), `pr_hourly_limit` (most opened in the last hour, default 2) and
//! `schedule` (see [`schedule`]).
//!
//! Checked before every cycle, after `.upkeep.toml` is read and before any model call: a cycle
//! that a limit holds back opens nothing, the run says why, continuous mode stops, and the exit
//! code is 0 (nothing went wrong; there is just nothing to do now). The operator's schedule is
//! checked once more before the clone, so a run outside it does not even clone.
//!
//! Guarantees:
//! - No state outside the forge: the counts come from the forge on every check (bot branches
//!   and their pull requests), plus what this run opened where the forge keeps nothing
//!   (`--dry-run`, `--forge none`). A worker that crashes loses nothing, and any worker can take
//!   any repository.
//! - `pr_hourly_limit` applies where the forge records when a pull request was opened (GitHub,
//!   and dry runs against it). The local forge's pull requests are branch descriptions with no
//!   such record, on a machine whose CI nobody shares: there only `pr_limit` applies.
//! - A repository can tighten the operator's limits, never loosen them: the smaller limit wins
//!   (0 means "no limit", as in Renovate, so a repository's 0 leaves the operator's limit in
//!   place), and both the operator's and the repository's schedule must allow the moment.

use jiff::{SignedDuration, Timestamp};

pub(crate) mod schedule;

use crate::forge::{Forge, ForgeError, PullRequest};
use crate::outcome::Outcome;
use schedule::{Schedule, ScheduleKeys};

pub(crate) const DEFAULT_PR_LIMIT: u32 = 5;
pub(crate) const DEFAULT_PR_HOURLY_LIMIT: u32 = 2;

/// The limits of one repository's run, the operator's tightened by the repository's.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// `None`: no limit.
    pub pr_limit: Option<u32>,
    pub pr_hourly_limit: Option<u32>,
    /// Every schedule here must allow the moment (the operator's, the repository's).
    pub schedules: Vec<Schedule>,
}

/// What one config file says about limits: all that [`Limits::resolve`] reads of it. Config
/// builds it (`FileConfig::limit_keys`), so the limits do not depend on the file's other keys.
#[derive(Debug, Clone, Copy)]
pub struct LimitKeys<'a> {
    pub pr_limit: Option<u32>,
    pub pr_hourly_limit: Option<u32>,
    /// `schedule` and `timezone`, as checked when the file was read.
    pub schedule: &'a ScheduleKeys,
}

/// Which limit held a cycle back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldBy {
    PrLimit,
    PrHourlyLimit,
    Schedule,
}

impl HeldBy {
    /// The `limit_reached` event's `limit`: the name of the run's outcome.
    pub fn as_str(self) -> &'static str {
        Outcome::from(self).name()
    }
}

impl From<HeldBy> for Outcome {
    fn from(by: HeldBy) -> Self {
        match by {
            HeldBy::PrLimit => Outcome::PrLimit,
            HeldBy::PrHourlyLimit => Outcome::PrHourlyLimit,
            HeldBy::Schedule => Outcome::OutsideSchedule,
        }
    }
}

/// A cycle held back, and the sentence that says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub by: HeldBy,
    pub message: String,
}

/// The tighter of two limits where 0 (and absence) mean "no limit".
fn tighter(operator: Option<u32>, repository: Option<u32>) -> Option<u32> {
    [operator, repository]
        .into_iter()
        .flatten()
        .filter(|&limit| limit > 0)
        .min()
}

impl Limits {
    /// The limits of a run: the operator's file (or the defaults), tightened by the repository's.
    pub fn resolve(operator: LimitKeys<'_>, repository: LimitKeys<'_>) -> Self {
        let schedules = [
            operator.schedule.schedule(None),
            repository.schedule.schedule(Some(operator.schedule)),
        ]
        .into_iter()
        .flatten()
        .collect();
        Limits {
            pr_limit: tighter(Some(operator.pr_limit.unwrap_or(DEFAULT_PR_LIMIT)), repository.pr_limit),
            pr_hourly_limit: tighter(
                Some(operator.pr_hourly_limit.unwrap_or(DEFAULT_PR_HOURLY_LIMIT)),
                repository.pr_hourly_limit,
            ),
            schedules,
        }
    }

    /// The operator's limits alone: what holds before the repository's file is read (the
    /// schedule check before the clone).
    pub fn operator_only(operator: LimitKeys<'_>) -> Self {
        let nothing_set = ScheduleKeys::default();
        let repository = LimitKeys {
            pr_limit: None,
            pr_hourly_limit: None,
            schedule: &nothing_set,
        };
        Self::resolve(operator, repository)
    }

    /// The first schedule that does not allow `now`.
    pub fn outside_schedule(&self, now: Timestamp) -> Option<Held> {
        let closed = self.schedules.iter().find(|schedule| !schedule.allows(now))?;
        let reopens = match closed_until(&self.schedules, now) {
            Some(moment) => format!("; it opens next at {}", closed.describe_opening(moment)),
            None => String::new(),
        };
        Some(Held {
            by: HeldBy::Schedule,
            message: format!(
                "outside the schedule {}: it is {} there, so this run does nothing{reopens}",
                closed.describe(),
                closed.local_time(now)
            ),
        })
    }

    /// Checks every limit before a cycle. `opened_this_run`: the pull requests earlier cycles of
    /// this run opened, counted where the forge does not show them.
    pub async fn check(
        &self,
        forge: &dyn Forge,
        base: &str,
        opened_this_run: &[PullRequest],
        now: Timestamp,
    ) -> Result<Option<Held>, ForgeError> {
        if let Some(held) = self.outside_schedule(now) {
            return Ok(Some(held));
        }
        if self.pr_limit.is_none() && self.pr_hourly_limit.is_none() {
            return Ok(None);
        }
        let hour_ago = now - SignedDuration::from_hours(1);
        let activity = forge.pull_request_activity(base, hour_ago).await?;
        let opened_here: Vec<&str> = opened_this_run
            .iter()
            .filter(|pull_request| !pull_request.updated)
            .map(|pull_request| pull_request.branch.as_str())
            .collect();
        let open = merged_count(&activity.open, &opened_here);
        if let Some(limit) = self.pr_limit.filter(|&limit| open >= limit as usize) {
            return Ok(Some(Held {
                by: HeldBy::PrLimit,
                message: format!(
                    "pr_limit reached: {open} bot pull requests are open (limit {limit}); nothing new is opened until some are merged or closed{}",
                    if forge.name() == "local" {
                        " (a local pull request is a branch upkeep/...: merge it, or close it with `git branch -D upkeep/<name>` in the repository)"
                    } else {
                        ""
                    }
                ),
            }));
        }
        // Only where the forge records when pull requests were opened (GitHub): a local
        // repository's branches carry no such record, and nothing there floods anyone's CI.
        let Some(opened_since) = activity.opened_since.as_deref() else {
            return Ok(None);
        };
        let recent = merged_count(opened_since, &opened_here);
        if let Some(limit) = self.pr_hourly_limit.filter(|&limit| recent >= limit as usize) {
            return Ok(Some(Held {
                by: HeldBy::PrHourlyLimit,
                message: format!(
                    "pr_hourly_limit reached: {recent} bot pull requests were opened in the last hour (limit {limit}); the next run continues"
                ),
            }));
        }
        Ok(None)
    }
}

/// Branches the forge reports plus this run's branches it does not.
fn merged_count(forge: &[String], this_run: &[&str]) -> usize {
    forge.len()
        + this_run
            .iter()
            .filter(|branch| !forge.iter().any(|known| known == *branch))
            .count()
}

/// The first moment every schedule allows, if there is one within a week.
fn closed_until(schedules: &[Schedule], now: Timestamp) -> Option<Timestamp> {
    let mut moment = now;
    // Each schedule's next opening moves the candidate on; a handful of rounds settles it.
    for _ in 0..16 {
        let next = schedules
            .iter()
            .map(|schedule| schedule.next_opening(moment))
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()?;
        if schedules.iter().all(|schedule| schedule.allows(next)) {
            return Some(next);
        }
        moment = next + SignedDuration::from_mins(1);
    }
    None
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
