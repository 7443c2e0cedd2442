//! The context window of a model: how many tokens a request and its reply may take together.
//!
//! `--context-window` (or `[models."name"] context_window` in the operator's `--config`) wins;
//! otherwise what an OpenAI-compatible server says of itself ([`super::server_facts`]);
//! otherwise the built-in table below, from the vendors' model pages; otherwise
//! [`UNKNOWN_MODEL_WINDOW`], a conservative size that local models commonly hold, with a
//! warning. The window is what upkeep fits every request into (see `agent::history`), and what
//! Ollama is told as `num_ctx`; the `context` event names where it came from (`window_from`).

/// (model name prefix, window in tokens). The longest matching prefix wins.
const BUILT_IN: &[(&str, u64)] = &[
    // OpenAI: gpt-5's 400,000 include up to 128,000 of output; a request may hold 272,000.
    ("gpt-5", 272_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    // Anthropic: 200,000 for every current model (1M only behind a beta header).
    ("claude-", 200_000),
    // Gemini.
    ("gemini-2.5", 1_048_576),
    ("gemini-2.0", 1_048_576),
];

/// The window assumed for a model the table does not know (local models, compatible servers).
pub(crate) const UNKNOWN_MODEL_WINDOW: u64 = 32_768;

/// The most tokens kept free for the reply; a small window keeps a quarter of itself free.
pub(crate) const MAX_REPLY_RESERVE: u64 = 8_192;

/// Where a window came from, as the `context` event's `window_from` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// `--context-window` or the operator's `[models."name"]`.
    Operator,
    /// The server said it (see [`super::server_facts`]).
    Server,
    /// The built-in table.
    BuiltIn,
    /// [`UNKNOWN_MODEL_WINDOW`]: nobody said.
    Guess,
}

/// A window and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextWindow {
    pub tokens: u64,
    pub from: WindowSource,
}

impl ContextWindow {
    /// This window, or the one `provider`'s server publishes where nobody more authoritative
    /// (the operator) said one. The provider asks its server at most once per run.
    pub async fn or_from_server(self, provider: &dyn super::Provider) -> Self {
        if self.from == WindowSource::Operator {
            return self;
        }
        match provider.server_window().await {
            Some(server) => ContextWindow {
                tokens: server.tokens,
                from: WindowSource::Server,
            },
            None => self,
        }
    }
}

/// The built-in window of `model`, or [`UNKNOWN_MODEL_WINDOW`].
pub(crate) fn default_window(model: &str) -> u64 {
    built_in_window(model).unwrap_or(UNKNOWN_MODEL_WINDOW)
}

/// The built-in table's window for `model`, if it knows the model.
pub(crate) fn built_in_window(model: &str) -> Option<u64> {
    // Provider-qualified names (`openai/gpt-4.1` on OpenRouter, `models/gemini-2.5-pro`).
    let bare = model.rsplit('/').next().unwrap_or(model);
    BUILT_IN
        .iter()
        .filter(|(prefix, _)| bare.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}

/// The window requests are fitted into for `model`, before any server is asked: the operator's
/// (`--context-window`, `[models."name"]`), else the built-in one, else the guess. A compatible
/// server asked under OpenAI's default name (`--base-url` without `--model`) gets the guess, not
/// gpt-4.1's million tokens.
pub(crate) fn window_for(settings: &crate::settings::ProviderSettings, model: &str) -> ContextWindow {
    if let Some(tokens) = settings.context_window {
        return ContextWindow {
            tokens,
            from: WindowSource::Operator,
        };
    }
    let unnamed_compatible_server = settings.kind == crate::kinds::ProviderKind::Openai
        && settings.base_url.is_some()
        && settings.model.as_deref().is_none_or(|name| name.trim().is_empty());
    match built_in_window(model).filter(|_| !unnamed_compatible_server) {
        Some(tokens) => ContextWindow {
            tokens,
            from: WindowSource::BuiltIn,
        },
        None => ContextWindow {
            tokens: UNKNOWN_MODEL_WINDOW,
            from: WindowSource::Guess,
        },
    }
}

/// Tokens kept free for the reply in a window of `window` tokens.
pub(crate) fn reply_reserve(window: u64) -> u64 {
    MAX_REPLY_RESERVE.min(window / 4)
}

/// What an overflow error says of the server's own sizes, where it says them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverflowSizes {
    /// The tokens the server counted for the request.
    pub requested: u64,
    /// The server's context window (llama.cpp's `n_ctx`, vLLM's `max_model_len`).
    pub window: u64,
}

/// Reads the sizes out of an overflow error: llama.cpp's "request (8317 tokens) exceeds the
/// available context size (8192 tokens)" and vLLM's "maximum context length is 4096 tokens.
/// However, you requested 5000 tokens".
pub(crate) fn overflow_sizes(message: &str) -> Option<OverflowSizes> {
    static PATTERNS: std::sync::OnceLock<[regex::Regex; 2]> = std::sync::OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            regex::Regex::new(
                r"request \((?P<requested>\d+) tokens\) exceeds the available context size \((?P<window>\d+) tokens\)",
            ),
            regex::Regex::new(
                r"maximum context length is (?P<window>\d+) tokens\. However, you requested (?P<requested>\d+) tokens",
            ),
        ]
        .map(|pattern| pattern.expect("a valid pattern"))
    });
    patterns.iter().find_map(|pattern| {
        let found = pattern.captures(message)?;
        Some(OverflowSizes {
            requested: found.name("requested")?.as_str().parse().ok()?,
            window: found.name("window")?.as_str().parse().ok()?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_get_their_window_and_others_a_conservative_one() {
        assert_eq!(default_window("gpt-4.1-mini-2025-04-14"), 1_047_576);
        assert_eq!(default_window("openai/gpt-4o"), 128_000);
        assert_eq!(default_window("claude-sonnet-4-5"), 200_000);
        assert_eq!(default_window("models/gemini-2.5-pro"), 1_048_576);
        assert_eq!(default_window("llama3.1"), UNKNOWN_MODEL_WINDOW);
        assert_eq!(reply_reserve(200_000), 8_192);
        assert_eq!(reply_reserve(8_192), 2_048);
    }

    #[test]
    fn overflow_errors_of_llama_cpp_and_vllm_give_the_servers_sizes() {
        assert_eq!(
            overflow_sizes("request (8317 tokens) exceeds the available context size (8192 tokens), try increasing it"),
            Some(OverflowSizes {
                requested: 8317,
                window: 8192
            })
        );
        assert_eq!(
            overflow_sizes(
                "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion)."
            ),
            Some(OverflowSizes {
                requested: 5000,
                window: 4096
            })
        );
        assert_eq!(overflow_sizes("prompt is too long"), None);
        assert_eq!(
            overflow_sizes("request (99999999999999999999999 tokens) exceeds the available context size (1 tokens)"),
            None
        );
    }
}
