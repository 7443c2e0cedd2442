//! Many repositories (DESIGN section 13).
//!
//! - [`fn@run`]: `upkeep fleet` itself: which repositories ([`list`], or an organisation through
//!   [`crate::forge::github::org`]), this worker's [`shard`] of them, each an isolated run,
//!   `--jobs` at a time, within `--fleet-max-cost` ([`budget`]), reported as a table and
//!   `fleet_finished` ([`report`], [`table`], [`crate::repo_outcome`]).
//! - `pr_limit`, `pr_hourly_limit` and `schedule` ([`crate::limits`]) and the dashboard issue
//!   ([`crate::dashboard`]) belong to every run, fleet or not, so they live beside the run.
//!
//! The engines that run fleets at scale are configuration, not code: `upkeep init --fleet`
//! writes a GitHub Actions matrix workflow, and `deploy/kubernetes/` holds an Indexed Job.
//! `docs/fleet.md` compares the three ways.

pub(crate) mod budget;
mod jobs;
pub(crate) mod list;
mod member;
pub(crate) mod overrides;
pub(crate) mod report;
pub(crate) mod shard;
pub(crate) mod table;

pub use jobs::{DEFAULT_JOBS, run};
