//! What a call costs: a built-in table of US dollar prices per million tokens for common
//! models, overridable (and extendable) by `[prices."model"]` in the config files. Unknown
//! models cost 0 and are said to be unpriced once, so `--max-cost` is never silently wrong.

use std::collections::BTreeMap;

use crate::config::Price;
use crate::llm::Usage;

/// (model name prefix, input $/Mtok, output $/Mtok). The longest matching prefix wins, so
/// `gpt-4.1-mini` is not priced as `gpt-4.1`.
const BUILT_IN: &[(&str, f64, f64)] = &[
    ("gpt-5-nano", 0.05, 0.40),
    ("gpt-5-mini", 0.25, 2.00),
    ("gpt-5", 1.25, 10.00),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4o", 2.50, 10.00),
    ("o4-mini", 1.10, 4.40),
    ("o3", 2.00, 8.00),
    ("claude-opus-4", 15.00, 75.00),
    ("claude-sonnet-4", 3.00, 15.00),
    ("claude-3-7-sonnet", 3.00, 15.00),
    ("claude-haiku-4", 1.00, 5.00),
    ("claude-3-5-haiku", 0.80, 4.00),
    ("gemini-2.5-pro", 1.25, 10.00),
    ("gemini-2.5-flash-lite", 0.10, 0.40),
    ("gemini-2.5-flash", 0.30, 2.50),
    ("gemini-2.0-flash", 0.10, 0.40),
];

/// The price of `model`: an override first, then the built-in table; `None` when unknown.
pub fn price_for(model: &str, overrides: &BTreeMap<String, Price>) -> Option<Price> {
    if let Some(price) = overrides.get(model) {
        return Some(*price);
    }
    // Provider-qualified names (`openai/gpt-4.1` on OpenRouter) are priced by their last part.
    let bare = model.rsplit('/').next().unwrap_or(model);
    BUILT_IN
        .iter()
        .filter(|(prefix, _, _)| bare.starts_with(prefix))
        .max_by_key(|(prefix, _, _)| prefix.len())
        .map(|(_, input, output)| Price {
            input_per_mtok: *input,
            output_per_mtok: *output,
        })
}

pub fn cost(price: Option<Price>, usage: Usage) -> f64 {
    price.map_or(0.0, |price| {
        (usage.input_tokens as f64 * price.input_per_mtok + usage.output_tokens as f64 * price.output_per_mtok)
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
        assert!(price_for("llama3.2", &none).is_none());
        let mut overrides = BTreeMap::new();
        overrides.insert(
            "llama3.2".to_owned(),
            Price {
                input_per_mtok: 1.0,
                output_per_mtok: 2.0,
            },
        );
        let price = price_for("llama3.2", &overrides);
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
        };
        assert!((cost(price, usage) - 2.0).abs() < 1e-9);
    }
}
