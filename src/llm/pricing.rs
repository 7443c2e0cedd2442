//! What a call costs: a built-in table of US dollar prices per million tokens for common
//! models, overridable (and extendable) by `[prices."model"]` in the config files. Input read
//! from the provider's prompt cache and input written to it are priced at their own rates (a
//! rate left out means the input rate). Unknown models cost 0 and are said to be unpriced
//! once, so `--max-cost` is never silently wrong.
//!
//! Built-in rates are the vendors' list prices: Anthropic bills cache reads at 0.1x and
//! 5-minute cache writes at 1.25x the input price; OpenAI bills cached input at 0.25x (gpt-4.1
//! family), 0.5x (gpt-4o family, o-series before o3) or 0.1x (gpt-5 family) and cache writes at
//! the input price; Gemini bills implicit-cache hits at 0.1x (2.5 family) or 0.25x (2.0) and no
//! write premium.

use std::collections::BTreeMap;

use crate::llm::Usage;
use crate::settings::Price;

/// One row of the table: model name prefix, then input, output, cached input and cache write
/// rates in $/Mtok. The longest matching prefix wins, so `gpt-4.1-mini` is not priced as
/// `gpt-4.1`.
struct Row(&'static str, f64, f64, f64, f64);

const BUILT_IN: &[Row] = &[
    Row("gpt-5-nano", 0.05, 0.40, 0.005, 0.05),
    Row("gpt-5-mini", 0.25, 2.00, 0.025, 0.25),
    Row("gpt-5", 1.25, 10.00, 0.125, 1.25),
    Row("gpt-4.1-nano", 0.10, 0.40, 0.025, 0.10),
    Row("gpt-4.1-mini", 0.40, 1.60, 0.10, 0.40),
    Row("gpt-4.1", 2.00, 8.00, 0.50, 2.00),
    Row("gpt-4o-mini", 0.15, 0.60, 0.075, 0.15),
    Row("gpt-4o", 2.50, 10.00, 1.25, 2.50),
    Row("o4-mini", 1.10, 4.40, 0.275, 1.10),
    Row("o3", 2.00, 8.00, 0.50, 2.00),
    Row("claude-opus-4-1", 15.00, 75.00, 1.50, 18.75),
    Row("claude-opus-4-0", 15.00, 75.00, 1.50, 18.75),
    // Opus 4.0 under its dated name, claude-opus-4-20250514.
    Row("claude-opus-4-2", 15.00, 75.00, 1.50, 18.75),
    // Opus 4.5 and later: $5 / $25.
    Row("claude-opus-4", 5.00, 25.00, 0.50, 6.25),
    Row("claude-opus-5", 5.00, 25.00, 0.50, 6.25),
    Row("claude-sonnet-4", 3.00, 15.00, 0.30, 3.75),
    Row("claude-3-7-sonnet", 3.00, 15.00, 0.30, 3.75),
    Row("claude-haiku-4", 1.00, 5.00, 0.10, 1.25),
    Row("claude-3-5-haiku", 0.80, 4.00, 0.08, 1.00),
    Row("gemini-2.5-pro", 1.25, 10.00, 0.125, 1.25),
    Row("gemini-2.5-flash-lite", 0.10, 0.40, 0.01, 0.10),
    Row("gemini-2.5-flash", 0.30, 2.50, 0.03, 0.30),
    Row("gemini-2.0-flash", 0.10, 0.40, 0.025, 0.10),
];

/// The price of `model`: an override first, then the built-in table; `None` when unknown.
pub(crate) fn price_for(model: &str, overrides: &BTreeMap<String, Price>) -> Option<Price> {
    if let Some(price) = overrides.get(model) {
        return Some(*price);
    }
    // Provider-qualified names (`openai/gpt-4.1` on OpenRouter) are priced by their last part.
    let bare = model.rsplit('/').next().unwrap_or(model);
    BUILT_IN
        .iter()
        .filter(|row| bare.starts_with(row.0))
        .max_by_key(|row| row.0.len())
        .map(|row| Price {
            input_per_mtok: row.1,
            output_per_mtok: row.2,
            cached_input_per_mtok: Some(row.3),
            cache_write_per_mtok: Some(row.4),
        })
}

/// The cost of `usage` at `price`: uncached input, cached input, cache writes and output, each
/// at its rate.
pub(crate) fn cost(price: Option<Price>, usage: Usage) -> f64 {
    price.map_or(0.0, |price| {
        let cached_rate = price.cached_input_per_mtok.unwrap_or(price.input_per_mtok);
        let write_rate = price.cache_write_per_mtok.unwrap_or(price.input_per_mtok);
        (usage.uncached_input_tokens() as f64 * price.input_per_mtok
            + usage.cached_input_tokens as f64 * cached_rate
            + usage.cache_write_tokens as f64 * write_rate
            + usage.output_tokens as f64 * price.output_per_mtok)
            / 1_000_000.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_overrides_beat_the_table() {
        let none = BTreeMap::new();
        assert_eq!(
            price_for("gpt-4.1-mini-2025-04-14", &none).map(|p| p.input_per_mtok),
            Some(0.40)
        );
        assert_eq!(price_for("gpt-4.1", &none).map(|p| p.input_per_mtok), Some(2.00));
        assert_eq!(
            price_for("openai/gpt-4o", &none).map(|p| p.output_per_mtok),
            Some(10.00)
        );
        assert_eq!(
            price_for("claude-opus-4-1-20250805", &none).map(|p| p.input_per_mtok),
            Some(15.00)
        );
        assert_eq!(
            price_for("claude-opus-4-5", &none).map(|p| p.input_per_mtok),
            Some(5.00)
        );
        assert!(price_for("llama3.2", &none).is_none());
        let mut overrides = BTreeMap::new();
        overrides.insert(
            "llama3.2".to_owned(),
            Price {
                input_per_mtok: 1.0,
                output_per_mtok: 2.0,
                cached_input_per_mtok: None,
                cache_write_per_mtok: None,
            },
        );
        let price = price_for("llama3.2", &overrides);
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            ..Usage::default()
        };
        assert!((cost(price, usage) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn cached_and_written_input_have_their_own_rates() {
        let none = BTreeMap::new();
        // Anthropic: 1M input of which 600k read from the cache and 300k written to it.
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 0,
            cached_input_tokens: 600_000,
            cache_write_tokens: 300_000,
        };
        let sonnet = price_for("claude-sonnet-4-5", &none);
        // 100k * $3 + 600k * $0.30 + 300k * $3.75 = 0.30 + 0.18 + 1.125
        assert!((cost(sonnet, usage) - 1.605).abs() < 1e-9, "{}", cost(sonnet, usage));
        // A price without cache rates bills every input token at the input rate.
        let plain = Some(Price {
            input_per_mtok: 2.0,
            output_per_mtok: 8.0,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
        });
        assert!((cost(plain, usage) - 2.0).abs() < 1e-9);
    }
}
