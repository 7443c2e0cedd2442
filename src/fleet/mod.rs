//! Many repositories (DESIGN section 13).
//!
//! - [`fn@run`]: `upkeep fleet` itself: which repositories ([`list`], or an organisation through
//!   [`crate::forge::github::org`]), this worker's [`shard`] of them, each an isolated run,
//!   `--jobs` at a time, within `--fleet-max-cost` ([`budget`]), reported as a table and
//!   `fleet_finished` ([`report`], [`table`], [`crate::repo_outcome`]).
//! - [`limits`] and [`schedule`]: `pr_limit`, `pr_hourly_limit` and `schedule`, checked by every
//!   run (fleet or not) before each cycle, from the forge's state alone.
//! - [`dashboard`]: the repository's dashboard issue, written after every run.
//!
//! The engines that run fleets at scale are configuration, not code: `upkeep init --fleet`
//! writes a GitHub Actions matrix workflow, and `deploy/kubernetes/` holds an Indexed Job.
//! `docs/fleet.md` compares the three ways.

pub mod budget;
pub mod dashboard;
pub mod limits;
pub mod list;
mod member;
pub mod overrides;
pub mod report;
mod run;
pub mod schedule;
pub mod shard;
pub mod table;

pub use run::{DEFAULT_JOBS, run};
