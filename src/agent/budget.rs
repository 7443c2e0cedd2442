//! Budgets: turns per cycle; tokens, cost and wall-clock time for the whole run.
//!
//! Checked before every model call with an estimate of what the call will use, so a run stops
//! before the call that would overspend rather than after it. Spending is counted from the
//! API's usage: cached input and cache writes at their own rates (see [`pricing`]).
//! What a call counts is settled first ([`super::usage`]); sums saturate, never wrap.

use std::time::{Duration, Instant};

use crate::config::{Budgets, Price};
use crate::llm::{Usage, pricing};

/// Which budget ran out.
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    /// The agent's turns (`--max-turns`, or a sub-agent's own limit) are used up; `unusable` of
    /// its `replies` could not be used at all.
    Turns {
        max: u32,
        unusable: u32,
        replies: u32,
    },
    /// The cycle's model calls (`--max-turns`), every agent's together, are used up.
    CycleCalls(u32),
    Tokens {
        limit: u64,
        used: u64,
        next_estimate: u64,
    },
    Cost {
        limit: f64,
        spent: f64,
        next_estimate: f64,
    },
    Timeout(Duration),
    /// Not even the most squeezed request fits the model's context window.
    ContextWindow {
        window: u64,
        needed: u64,
    },
    /// The model made the same failing call `times` times in a row (`agent::stuck`); `unusable`
    /// of its `replies` in the cycle could not be used at all.
    Stuck {
        tool: String,
        times: u32,
        unusable: u32,
        replies: u32,
    },
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Turns { max, unusable, replies } => {
                write!(f, "--max-turns {max} reached before the model finished the cycle")?;
                if *unusable > 0 {
                    write!(f, "; {unusable} of its {replies} replies could not be used")?;
                }
                Ok(())
            }
            Limit::CycleCalls(n) => write!(
                f,
                "--max-turns {n} reached: the cycle made {n} model calls, sub-agents' and the reviewer's included"
            ),
            Limit::Tokens {
                limit,
                used,
                next_estimate,
            } => write!(
                f,
                "--max-tokens {limit} would be exceeded: {used} tokens used, the next call needs about {next_estimate}"
            ),
            Limit::Cost {
                limit,
                spent,
                next_estimate,
            } => write!(
                f,
                "--max-cost ${limit:.4} would be exceeded: ${spent:.4} spent, the next call costs about ${next_estimate:.4}"
            ),
            Limit::Timeout(limit) => write!(f, "--timeout {} reached", humantime::format_duration(*limit)),
            Limit::ContextWindow { window, needed } => write!(
                f,
                "the next request does not fit the model's context window of {window} tokens even with every older tool result masked (about {needed} tokens needed with the reply); raise --context-window if the model holds more"
            ),
            Limit::Stuck {
                tool,
                times,
                unusable,
                replies,
            } => {
                write!(
                    f,
                    "stuck: the model made the same failing {tool} call {times} times in a row; {unusable} of its {replies} replies in this cycle could not be used"
                )?;
                if mostly_unusable(*unusable, *replies) {
                    write!(f, "; {MOSTLY_UNUSABLE}")
                } else {
                    write!(f, "; a stronger model, or a task said more precisely, may do better")
                }
            }
        }
    }
}

/// What is said when most of a cycle's replies could not be used: the model, not the budget,
/// is what held the cycle back.
const MOSTLY_UNUSABLE: &str = "most replies were unusable: a stronger model is likely to do better";

fn mostly_unusable(unusable: u32, replies: u32) -> bool {
    unusable.saturating_mul(2) > replies
}

impl Limit {
    /// What the operator can do about this limit, for the line after "stopped: ...".
    pub fn hint(&self) -> Option<String> {
        match self {
            Limit::Turns { unusable, replies, .. } if mostly_unusable(*unusable, *replies) => Some(format!(
                "{unusable} of the {replies} replies could not be used: {MOSTLY_UNUSABLE} than more turns"
            )),
            Limit::Turns { .. } => {
                Some("raise --max-turns (or max_turns in .upkeep.toml) to give the model more turns".to_owned())
            }
            _ => None,
        }
    }
}

#[derive(Debug)]
pub struct Budget {
    limits: Budgets,
    started: Instant,
    price: Option<Price>,
    pub usage: Usage,
    pub cost_usd: f64,
    /// Model calls made so far.
    pub turns: u32,
    /// Largest reply so far: the estimate for the next reply's size.
    largest_output: u64,
    /// Calls whose usage upkeep had to estimate.
    pub estimated_calls: u32,
}

/// The run's one [`Budget`], owned by the run and lent to each cycle: every agent level spends
/// from it through [`crate::agent::execution::Spend`]. Calls never overlap (a sub-agent runs
/// inside its caller's tool call), so the lock is held only for a moment, never across an
/// `await`.
#[derive(Debug)]
pub struct RunBudget(std::sync::Mutex<Budget>);

impl RunBudget {
    pub fn new(budget: Budget) -> Self {
        Self(std::sync::Mutex::new(budget))
    }

    /// Runs `f` on the budget.
    pub fn with<T>(&self, f: impl FnOnce(&mut Budget) -> T) -> T {
        let mut budget = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut budget)
    }

    /// The budget, once the run is over.
    pub fn into_inner(self) -> Budget {
        self.0.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Assumed size of a reply before any has been seen.
const FIRST_REPLY_ESTIMATE: u64 = 1_000;

impl Budget {
    pub fn new(limits: Budgets, price: Option<Price>) -> Self {
        Self {
            limits,
            started: Instant::now(),
            price,
            usage: Usage::default(),
            cost_usd: 0.0,
            turns: 0,
            largest_output: 0,
            estimated_calls: 0,
        }
    }

    pub fn set_price(&mut self, price: Option<Price>) {
        self.price = price;
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.limits.timeout.map(|timeout| self.started + timeout)
    }

    pub fn timeout_limit(&self) -> Option<Limit> {
        self.limits.timeout.map(Limit::Timeout)
    }

    /// The price of the run's model.
    pub fn price(&self) -> Option<Price> {
        self.price
    }

    /// Whether a call whose request is estimated at `request_tokens` fits in what is left. The
    /// estimate prices every input token at the full input rate: the cache may not hit.
    pub fn check_before_call(&self, request_tokens: u64) -> Result<(), Limit> {
        self.check_before_call_at(request_tokens, self.price)
    }

    /// [`Budget::check_before_call`] for a call to a model priced at `price` (a sub-agent's
    /// cheaper model).
    pub fn check_before_call_at(&self, request_tokens: u64, price: Option<Price>) -> Result<(), Limit> {
        if let Some(timeout) = self.limits.timeout {
            if self.started.elapsed() >= timeout {
                return Err(Limit::Timeout(timeout));
            }
        }
        let next = Usage {
            input_tokens: request_tokens,
            output_tokens: self.largest_output.max(FIRST_REPLY_ESTIMATE),
            ..Usage::default()
        };
        if let Some(limit) = self.limits.max_tokens {
            if self.usage.total().saturating_add(next.total()) > limit {
                return Err(Limit::Tokens {
                    limit,
                    used: self.usage.total(),
                    next_estimate: next.total(),
                });
            }
        }
        if let Some(limit) = self.limits.max_cost {
            let next_estimate = pricing::cost(price, next);
            if self.cost_usd + next_estimate > limit {
                return Err(Limit::Cost {
                    limit,
                    spent: self.cost_usd,
                    next_estimate,
                });
            }
        }
        Ok(())
    }

    /// Adds a call's real usage; returns the call's cost.
    pub fn record(&mut self, usage: Usage) -> f64 {
        self.record_at(usage, self.price)
    }

    /// [`Budget::record`] for a call to a model priced at `price`.
    pub fn record_at(&mut self, usage: Usage, price: Option<Price>) -> f64 {
        let cost = pricing::cost(price, usage);
        self.usage += usage;
        self.cost_usd += cost;
        self.turns = self.turns.saturating_add(1);
        self.largest_output = self.largest_output.max(usage.output_tokens);
        cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_before_the_call_that_would_overspend() {
        let price = Some(Price {
            input_per_mtok: 1_000_000.0,
            output_per_mtok: 0.0,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
        });
        let budget = Budget::new(
            Budgets {
                max_cost: Some(10.0),
                ..Budgets::default()
            },
            price,
        );
        // 10 tokens ~ $10: fits exactly; 11 do not.
        assert!(budget.check_before_call(10).is_ok());
        assert!(matches!(budget.check_before_call(11), Err(Limit::Cost { .. })));
    }

    /// Regression: a provider reporting `prompt_tokens = 2^64-1` wrapped the run's counters.
    #[test]
    fn usage_sums_saturate_instead_of_wrapping() {
        let mut budget = Budget::new(
            Budgets {
                max_tokens: Some(10),
                ..Budgets::default()
            },
            None,
        );
        let huge = Usage {
            input_tokens: u64::MAX,
            output_tokens: u64::MAX,
            cached_input_tokens: u64::MAX,
            cache_write_tokens: u64::MAX,
        };
        budget.record(huge);
        budget.record(huge);
        assert_eq!(budget.usage, huge);
        assert_eq!(budget.usage.total(), u64::MAX);
        assert!(matches!(
            budget.check_before_call(u64::MAX),
            Err(Limit::Tokens { used: u64::MAX, .. })
        ));
    }
}
