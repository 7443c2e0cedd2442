//! The execution context every model call and tool call carries: the run's trace id, the
//! delegation depth and the agent path, plus the spend all levels share.
//!
//! The path names who is acting (`root`, `root>explorer`, `root>explorer>helper`): events carry
//! it as `agent`, people see it as a prefix, and a replay file may name it on a line so each
//! agent is served its own replies. [`Spend`] is the run's one [`Budget`] plus the cycle's
//! count of model calls: a sub-agent checks and records every call against it exactly as the
//! main agent does, so `--max-turns` (for the cycle), `--max-tokens`, `--max-cost` and
//! `--timeout` bind every level together — however many sub-agents one reply starts.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use crate::agent::budget::{Budget, Limit, RunBudget};
use crate::llm::Usage;
use crate::settings::Price;

/// The name of the main agent in paths.
pub(crate) const ROOT: &str = crate::llm::ROOT_AGENT;
/// Separates the levels of an agent path.
pub(crate) const PATH_SEPARATOR: char = crate::llm::AGENT_PATH_SEPARATOR;

/// Who is acting, and where in the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecContext {
    trace_id: String,
    depth: u32,
    path: String,
}

impl ExecContext {
    /// The main agent of a run whose events carry `trace_id` as `run_id`.
    pub fn root(trace_id: &str) -> Self {
        Self {
            trace_id: trace_id.to_owned(),
            depth: 0,
            path: ROOT.to_owned(),
        }
    }

    /// The context of the sub-agent `name` this agent starts.
    pub fn child(&self, name: &str) -> Self {
        Self {
            trace_id: self.trace_id.clone(),
            depth: self.depth + 1,
            path: format!("{}{PATH_SEPARATOR}{name}", self.path),
        }
    }

    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// Delegation levels above this agent: 0 for the main agent.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// `root>explorer`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The agent's own name: the last level of the path.
    pub fn name(&self) -> &str {
        self.path.rsplit(PATH_SEPARATOR).next().unwrap_or(ROOT)
    }
}

/// What a cycle spends: the run's one budget, shared by every agent level of the cycle, and
/// the cycle's own count of model calls.
pub struct Spend<'a> {
    budget: &'a RunBudget,
    /// Model calls this cycle may make, every agent's together (`--max-turns`).
    max_calls: u32,
    /// Model calls made so far this cycle.
    calls: AtomicU32,
}

impl<'a> Spend<'a> {
    /// The spend of one cycle, which may make `max_calls` model calls in all.
    pub fn new(budget: &'a RunBudget, max_calls: u32) -> Self {
        Self {
            budget,
            max_calls,
            calls: AtomicU32::new(0),
        }
    }

    /// Takes one of the cycle's model calls, or says they are used up.
    pub fn take_call(&self) -> Result<(), Limit> {
        self.calls
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |calls| {
                (calls < self.max_calls).then_some(calls + 1)
            })
            .map(|_| ())
            .map_err(|_| Limit::CycleCalls(self.max_calls))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Budget) -> T) -> T {
        self.budget.with(f)
    }

    /// The price the budget was given for the run's model.
    pub fn default_price(&self) -> Option<Price> {
        self.with(|budget| budget.price())
    }

    /// Whether a call estimated at `request_tokens`, priced at `price`, fits what is left.
    pub fn check_before_call(&self, request_tokens: u64, price: Option<Price>) -> Result<(), Limit> {
        self.with(|budget| budget.check_before_call_at(request_tokens, price))
    }

    /// Adds a call's usage priced at `price`; returns the call's cost.
    pub fn record(&self, usage: Usage, price: Option<Price>) -> f64 {
        self.with(|budget| budget.record_at(usage, price))
    }

    /// Counts a call whose usage had to be estimated; true for the run's first such call (the
    /// one to warn about).
    pub fn note_estimated(&self) -> bool {
        self.with(|budget| {
            budget.estimated_calls = budget.estimated_calls.saturating_add(1);
            budget.estimated_calls == 1
        })
    }

    /// What was spent so far, for progress lines.
    pub fn spent(&self) -> (Usage, f64) {
        self.with(|budget| (budget.usage, budget.cost_usd))
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.with(|budget| budget.deadline())
    }

    pub fn timeout_limit(&self) -> Option<Limit> {
        self.with(|budget| budget.timeout_limit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Budgets;

    #[test]
    fn paths_name_every_level() {
        let root = ExecContext::root("run-1");
        let explorer = root.child("explorer");
        let helper = explorer.child("helper");
        assert_eq!((root.depth(), root.path(), root.name()), (0, "root", "root"));
        assert_eq!((explorer.depth(), explorer.path()), (1, "root>explorer"));
        assert_eq!(
            (helper.depth(), helper.path(), helper.name()),
            (2, "root>explorer>helper", "helper")
        );
        assert_eq!(helper.trace_id(), "run-1");
    }

    #[test]
    fn every_level_spends_from_one_budget() {
        let budget = RunBudget::new(Budget::new(
            Budgets {
                max_tokens: Some(3_000),
                ..Budgets::default()
            },
            None,
        ));
        let usage = Usage {
            input_tokens: 900,
            output_tokens: 100,
            ..Usage::default()
        };
        {
            let spend = Spend::new(&budget, 20);
            spend.record(usage, None);
            spend.record(usage, None);
            // 2,000 used; the next call needs its 100 input tokens plus the 1,000-token reply
            // estimate.
            assert!(matches!(
                spend.check_before_call(100, None),
                Err(Limit::Tokens { used: 2_000, .. })
            ));
        }
        assert_eq!(budget.into_inner().turns, 2);
    }

    #[test]
    fn the_cycle_call_limit_binds_every_caller_together() {
        let budget = RunBudget::new(Budget::new(Budgets::default(), None));
        let spend = Spend::new(&budget, 2);
        assert_eq!(spend.take_call(), Ok(()));
        assert_eq!(spend.take_call(), Ok(()));
        assert_eq!(spend.take_call(), Err(Limit::CycleCalls(2)));
        assert_eq!(spend.take_call(), Err(Limit::CycleCalls(2)));
    }
}
