//! Counting a request's tokens before it is sent, to fit it into the context window.
//!
//! OpenAI's current models (gpt-4o, gpt-4.1, gpt-5, o-series) use the `o200k_base` encoding,
//! which the `tiktoken-rs` crate implements; for them the count is exact up to the few tokens of
//! chat framing per message. Loading the encoding takes a noticeable moment (it parses a 3.6 MB
//! table; see `docs/providers.md` for the measured cost), so it happens once per process, on a
//! blocking thread, and only when such a model is used. Every other model (Anthropic, Gemini,
//! local models) has no maintained Rust tokenizer, so its count is a conservative estimate: one
//! token per three bytes, more than those tokenizers produce for English and code. A count
//! that is still too low is caught by the provider's context-length error (see
//! `agent::history`).

use tiktoken_rs::CoreBPE;

/// Tokens per 5 bytes assumed where no real tokenizer is known (one per 2.5 bytes). `o200k_base`
/// averages 3.6-3.9 bytes a token on source code and prose (measured on this repository's
/// files, as they travel in a tool result), 2.6 on a `Cargo.lock` full of hashes; other
/// vendors' tokenizers are said to need up to a quarter more tokens for the same code.
const CONSERVATIVE_TOKENS_PER_5_BYTES: usize = 2;

/// How a request's text is turned into a token count.
#[derive(Clone, Copy)]
pub(crate) enum TokenCounter {
    /// OpenAI's `o200k_base` encoding.
    O200k(&'static CoreBPE),
    /// One token per 2.5 bytes (see `CONSERVATIVE_TOKENS_PER_5_BYTES`).
    Conservative,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl TokenCounter {
    /// The counter for `model` asked through `provider`. Loads `o200k_base` (once per process,
    /// off the async threads) for OpenAI's own models.
    pub(crate) async fn for_model(provider: &str, model: &str) -> Self {
        if !uses_o200k(provider, model) {
            return TokenCounter::Conservative;
        }
        match tokio::task::spawn_blocking(tiktoken_rs::o200k_base_singleton).await {
            Ok(bpe) => TokenCounter::O200k(bpe),
            Err(error) => {
                tracing::warn!("could not load the o200k tokenizer ({error}); estimating conservatively");
                TokenCounter::Conservative
            }
        }
    }

    /// Tokens in `text`.
    pub(crate) fn count(&self, text: &str) -> u64 {
        match self {
            TokenCounter::O200k(bpe) => bpe.encode_ordinary(text).len() as u64,
            TokenCounter::Conservative => (text.len() * CONSERVATIVE_TOKENS_PER_5_BYTES).div_ceil(5) as u64,
        }
    }

    /// What the `context` event and the docs call this counter.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            TokenCounter::O200k(_) => "o200k_base",
            TokenCounter::Conservative => "conservative",
        }
    }
}

/// Starts loading the tokenizer `provider`/`model` will need, in the background, so that the
/// first cycle does not wait for it.
pub(crate) fn preload(provider: &str, model: &str) {
    if uses_o200k(provider, model) {
        drop(tokio::task::spawn_blocking(tiktoken_rs::o200k_base_singleton));
    }
}

/// Whether `model`, asked through `provider`, is one of OpenAI's models on `o200k_base`.
fn uses_o200k(provider: &str, model: &str) -> bool {
    if provider != "openai" {
        return false;
    }
    let bare = model.rsplit('/').next().unwrap_or(model);
    ["gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss"]
        .iter()
        .any(|prefix| bare.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn openai_models_are_counted_exactly_and_others_conservatively() {
        let exact = TokenCounter::for_model("openai", "gpt-4.1").await;
        assert_eq!(exact.name(), "o200k_base");
        // "hello world" is two tokens in o200k_base.
        assert_eq!(exact.count("hello world"), 2);
        let other = TokenCounter::for_model("anthropic", "claude-sonnet-4-5").await;
        assert_eq!(other.name(), "conservative");
        assert_eq!(other.count("hello world"), 5);
        // The conservative count is never below the real one for code.
        let code = "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n".repeat(50);
        assert!(other.count(&code) >= exact.count(&code));
        assert_eq!(
            TokenCounter::for_model("openai", "llama3.1").await.name(),
            "conservative"
        );
    }
}
