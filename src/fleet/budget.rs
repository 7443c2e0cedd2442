//! `--fleet-max-cost`: one cost budget over every repository of the fleet.
//!
//! Runs of different repositories share nothing while they go, so the fleet hands each run a
//! share of what is left when it starts, as that run's `--max-cost` (or less, when the run's
//! own `--max-cost` is lower), and takes back what the run did not spend when it ends. A share
//! is what is neither spent nor held by running repositories, divided by the free slots
//! (`--jobs` minus the runs going), so N parallel runs split the budget evenly instead of the
//! first one taking it all. Every run stops before the call that would overspend its share
//! (the usual `--max-cost` rule), so the fleet's total stays within the budget. Once nothing is
//! left, the remaining repositories are not started: their outcome is `fleet_budget` (exit 4).

use std::sync::{Arc, Mutex};

/// Below this, a share could not pay for a single call: treat the budget as spent.
const SMALLEST_SHARE_USD: f64 = 1e-6;

#[derive(Debug, Default)]
struct Ledger {
    spent: f64,
    held: f64,
}

#[derive(Debug)]
pub(crate) struct FleetBudget {
    limit: Option<f64>,
    ledger: Mutex<Ledger>,
}

/// What a starting run may spend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Share {
    /// No fleet budget: the run's own `--max-cost`, if any, applies.
    Unlimited,
    /// At most this many US dollars.
    Capped(f64),
    /// The fleet budget is spent: the run does not start.
    Exhausted,
}

impl FleetBudget {
    pub(crate) fn new(limit: Option<f64>) -> Self {
        Self {
            limit,
            ledger: Mutex::new(Ledger::default()),
        }
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        // Each update is one arithmetic step; a poisoned lock still holds consistent numbers.
        self.ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reserves a share for a run that starts while `free_slots` slots (its own included) are
    /// free.
    pub(crate) fn reserve(&self, free_slots: usize) -> Share {
        let Some(limit) = self.limit else {
            return Share::Unlimited;
        };
        let mut ledger = self.ledger();
        let left = limit - ledger.spent - ledger.held;
        let share = left / free_slots.max(1) as f64;
        if share < SMALLEST_SHARE_USD {
            return Share::Exhausted;
        }
        ledger.held += share;
        Share::Capped(share)
    }

    /// A run that held `share` ended having spent `spent`.
    pub(crate) fn settle(&self, share: Share, spent: f64) {
        let mut ledger = self.ledger();
        if let Share::Capped(held) = share {
            ledger.held = (ledger.held - held).max(0.0);
        }
        ledger.spent += spent;
    }

    #[cfg(test)]
    pub(crate) fn spent(&self) -> f64 {
        self.ledger().spent
    }
}

/// Returns a run's share to the fleet budget when the task ends, however it ends.
pub(super) struct SettleOnDrop {
    pub(super) budget: Arc<FleetBudget>,
    pub(super) share: Share,
    pub(super) spent: f64,
}

impl SettleOnDrop {
    pub(super) fn with(mut self, spent: f64) {
        self.spent = spent;
    }
}

impl Drop for SettleOnDrop {
    fn drop(&mut self) {
        self.budget.settle(self.share, self.spent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_runs_split_what_is_left_and_return_what_they_did_not_spend() {
        let budget = FleetBudget::new(Some(1.0));
        let first = budget.reserve(4);
        assert_eq!(first, Share::Capped(0.25));
        let second = budget.reserve(3);
        assert_eq!(second, Share::Capped(0.25));
        budget.settle(first, 0.05);
        // 1.0 - 0.05 spent - 0.25 held = 0.70 over 3 free slots.
        let Share::Capped(third) = budget.reserve(3) else {
            panic!("capped")
        };
        assert!((third - 0.70 / 3.0).abs() < 1e-9, "{third}");
        assert!((budget.spent() - 0.05).abs() < 1e-12);
    }

    #[test]
    fn a_spent_budget_starts_nothing_more() {
        let budget = FleetBudget::new(Some(0.10));
        let share = budget.reserve(1);
        budget.settle(share, 0.10);
        assert_eq!(budget.reserve(1), Share::Exhausted);
        assert_eq!(FleetBudget::new(None).reserve(1), Share::Unlimited);
    }
}
