//! The usage a call counts, settled before the budget records it. A provider's report is not
//! taken blindly: counts it leaves out are estimated from the request and the reply (and the
//! `model_response` event says `estimated`), so `--max-tokens` and `--max-cost` bind a server
//! that reports nothing; counts larger than the call could have used are clamped, with a
//! warning, so one absurd report cannot end a run or hide its cost.

use serde_json::Value;

use crate::llm::tokens::TokenCounter;
use crate::llm::{Message, Usage, UsageReport};

/// What one call could have used, to judge (and fill in) the usage its provider reports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSize {
    /// The request as upkeep estimated it (see [`crate::llm::tokens`]).
    pub estimated_input: u64,
    /// The most input tokens the request can hold: no tokenizer makes a token of less than a
    /// byte, so its bytes plus room for the API's own framing; or the model's context window,
    /// if larger (a request is never fitted into more).
    pub max_input: u64,
    /// The reply's text as tokens, estimated like the request.
    pub estimated_output: u64,
    /// The most output tokens the call can have produced: the model's context window (hidden
    /// reasoning counts as output and is not in the text), or the reply's bytes if more.
    pub max_output: u64,
}

impl CallSize {
    /// Tokens a request may hold beyond one per byte: chat framing per message and what an API
    /// adds itself (tool and schema instructions).
    const FRAMING_TOKENS: u64 = 4_096;
    const TOKENS_PER_MESSAGE: u64 = 16;

    /// The bounds of the call that sent `messages` (after `system`, with the reply `schema`),
    /// estimated at `estimated_input` tokens, and got `reply`, for a model with a `window`-token
    /// context whose tokens `counter` counts.
    pub(crate) fn of(
        system: &str,
        messages: &[Message],
        schema: &Value,
        estimated_input: u64,
        reply: &str,
        counter: TokenCounter,
        window: u64,
    ) -> Self {
        let request_bytes =
            messages.iter().map(|m| m.content.len()).sum::<usize>() + system.len() + schema.to_string().len();
        Self::new(
            request_bytes as u64,
            messages.len() as u64 + 1,
            estimated_input,
            (reply.len() as u64, counter.count(reply)),
            window,
        )
    }

    /// The bounds of a request of `request_bytes` in `messages` messages whose reply is
    /// `reply_bytes` long, for a model with a `window`-token context.
    fn new(request_bytes: u64, messages: u64, estimated_input: u64, reply: (u64, u64), window: u64) -> Self {
        let (reply_bytes, estimated_output) = reply;
        Self {
            estimated_input,
            max_input: request_bytes
                .saturating_add(messages.saturating_mul(Self::TOKENS_PER_MESSAGE))
                .saturating_add(Self::FRAMING_TOKENS)
                .max(window),
            estimated_output,
            max_output: window.max(reply_bytes),
        }
    }
}

/// A call's usage as the budget counts it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settled {
    pub usage: Usage,
    /// Some counts were missing and are upkeep's estimate.
    pub estimated: bool,
    /// What was clamped, for a warning; empty when the report was believable.
    pub clamped: Vec<String>,
}

/// The usage to count for a call whose provider reported `usage` (`report` says whether it
/// did): missing counts estimated (never below what was reported), each count clamped to what
/// the call could have used, cached and written input within the input.
pub(crate) fn settle(usage: Usage, report: UsageReport, size: CallSize) -> Settled {
    let mut usage = usage;
    let estimated = report == UsageReport::Missing;
    if estimated {
        usage.input_tokens = usage.input_tokens.max(size.estimated_input);
        usage.output_tokens = usage.output_tokens.max(size.estimated_output);
    }
    let mut clamped = Vec::new();
    let mut clamp = |name: &str, value: &mut u64, max: u64| {
        if *value > max {
            clamped.push(format!("{name} {value} > {max}"));
            *value = max;
        }
    };
    clamp("input_tokens", &mut usage.input_tokens, size.max_input);
    clamp("output_tokens", &mut usage.output_tokens, size.max_output);
    clamp(
        "cached_input_tokens",
        &mut usage.cached_input_tokens,
        usage.input_tokens,
    );
    let room = usage.input_tokens - usage.cached_input_tokens;
    clamp("cache_write_tokens", &mut usage.cache_write_tokens, room);
    Settled {
        usage,
        estimated,
        clamped,
    }
}

/// [`settle`], with the warnings people need: once per run (`first_estimate` says whether this
/// is the run's first estimated call) that usage is estimated, and each clamp.
pub(crate) fn settle_and_warn(
    usage: Usage,
    report: UsageReport,
    size: CallSize,
    provider: &str,
    first_estimate: impl FnOnce() -> bool,
) -> Settled {
    let settled = settle(usage, report, size);
    if settled.estimated && first_estimate() {
        tracing::warn!(
            "{provider}: the provider did not report token usage; upkeep estimates it (marked \"estimated\" in model_response events) and counts the estimate against --max-tokens and --max-cost"
        );
    }
    if !settled.clamped.is_empty() {
        tracing::warn!(
            "{provider}: the provider reported more tokens than the call could use ({}); counting the most it could",
            settled.clamped.join(", ")
        );
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size() -> CallSize {
        // A 40,000-byte request estimated at 10,000 tokens; a 400-byte reply of 100 tokens; a
        // 32,000-token window.
        CallSize::new(40_000, 4, 10_000, (400, 100), 32_000)
    }

    #[test]
    fn missing_usage_is_estimated_and_never_below_what_was_reported() {
        let settled = settle(Usage::default(), UsageReport::Missing, size());
        assert!(settled.estimated && settled.clamped.is_empty());
        assert_eq!((settled.usage.input_tokens, settled.usage.output_tokens), (10_000, 100));
        let partial = Usage {
            output_tokens: 5_000,
            ..Usage::default()
        };
        let settled = settle(partial, UsageReport::Missing, size());
        assert_eq!(
            (settled.usage.input_tokens, settled.usage.output_tokens),
            (10_000, 5_000)
        );
    }

    #[test]
    fn reported_usage_is_kept_when_believable_and_clamped_when_not() {
        let real = Usage {
            input_tokens: 9_000,
            output_tokens: 120,
            cached_input_tokens: 8_000,
            cache_write_tokens: 500,
        };
        assert_eq!(
            settle(real, UsageReport::Reported, size()),
            Settled {
                usage: real,
                estimated: false,
                clamped: Vec::new()
            }
        );
        let absurd = Usage {
            input_tokens: u64::MAX,
            output_tokens: u64::MAX,
            cached_input_tokens: u64::MAX,
            cache_write_tokens: u64::MAX,
        };
        let settled = settle(absurd, UsageReport::Reported, size());
        let max_input = 40_000 + 4 * 16 + 4_096;
        assert_eq!(
            settled.usage,
            Usage {
                input_tokens: max_input,
                output_tokens: 32_000,
                cached_input_tokens: max_input,
                cache_write_tokens: 0,
            }
        );
        assert_eq!(settled.clamped.len(), 4, "{:?}", settled.clamped);
    }
}
