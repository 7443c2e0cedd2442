//! What `create_pull_request` works from, grouped in one value it owns rather than spread over
//! every tool's context: the forge it publishes on, the identity it commits as, what the cycle
//! is for (the bot's open pull requests, the task's key, the pull request it continues) and the
//! pull requests the cycle has published so far.
//!
//! The published list is kept here, on the tool's side, not by the generic turn loop: a second
//! `create_pull_request` in a cycle updates the branch the first one published, and the run reads
//! the list once the cycle is over (for its summary), however the cycle ended.

use std::sync::{Mutex, PoisonError};

use crate::forge::{ContinuedPullRequest, Forge, OpenPullRequest, PullRequest};
use crate::repo::Identity;

pub struct PullRequestScope<'a> {
    pub forge: &'a dyn Forge,
    /// Who the commit is by.
    pub identity: &'a Identity,
    /// The bot's open pull requests when the cycle started (this run's included): working the
    /// same issue or task updates one of them instead of opening a second.
    pub open_pull_requests: &'a [OpenPullRequest],
    /// The key of the task text, when the run was given one (see [`crate::forge::task::task_key`]).
    pub task_key: Option<&'a str>,
    /// The bot's open pull request this cycle continues (a review follow-up, or an answered
    /// question on an issue that has one): its branch takes the commit, pushed on top.
    pub continued: Option<&'a ContinuedPullRequest>,
    /// Pull requests opened or updated in this cycle.
    pub published: &'a CyclePullRequests,
    /// Set when the cycle makes a conflicting pull request's change again on the base (DESIGN
    /// section 14, "Mergeable"): its branch takes the commit and is replaced with a lease.
    pub(crate) redo: Option<&'a crate::conversation::mergeable::Redo>,
}

/// The pull requests one cycle opened or updated, in order; an update of one opened earlier in
/// the cycle replaces it.
#[derive(Debug, Default)]
pub struct CyclePullRequests(Mutex<Vec<PullRequest>>);

impl CyclePullRequests {
    /// Records a published pull request.
    pub fn record(&self, pull_request: PullRequest) {
        let mut published = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        published.retain(|earlier| earlier.branch != pull_request.branch);
        published.push(pull_request);
    }

    /// The branch this cycle last published, which a second `create_pull_request` updates.
    pub fn branch(&self) -> Option<String> {
        let published = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        published.last().map(|pull_request| pull_request.branch.clone())
    }

    /// The cycle's pull requests, for the run's summary.
    pub fn into_inner(self) -> Vec<PullRequest> {
        self.0.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}
