//! Secrets known to upkeep and the redaction every outgoing string passes through.
//!
//! Tokens and API keys come only from the environment. They are held as
//! [`secrecy::SecretString`] so they cannot be printed by accident, and their values are
//! registered with a [`Redactor`] that events, logs, prompts, tool results and pull request
//! bodies pass through before they leave the process.

use secrecy::{ExposeSecret, SecretString};

/// Environment variables that hold credentials upkeep may use.
pub const SECRET_VARIABLES: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
];

/// What replaces a secret value wherever it would have appeared.
pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this are not treated as secrets: redacting "1" or "x" everywhere would
/// mangle ordinary text, and no real token is that short.
const MIN_SECRET_LEN: usize = 8;

#[derive(Clone, Default)]
pub struct Redactor {
    values: Vec<SecretString>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.values.len())
    }
}

impl Redactor {
    /// A redactor that knows every secret variable set in this process's environment.
    pub fn from_env() -> Self {
        let mut redactor = Self::default();
        for name in SECRET_VARIABLES {
            if let Ok(value) = std::env::var(name) {
                redactor.add(SecretString::from(value));
            }
        }
        redactor
    }

    pub fn add(&mut self, secret: SecretString) {
        let value = secret.expose_secret().trim();
        if value.len() >= MIN_SECRET_LEN && !self.values.iter().any(|known| known.expose_secret() == value) {
            self.values.push(SecretString::from(value.to_owned()));
        }
    }

    /// Whether no secret is known (nothing to look for).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Whether `bytes` hold a known secret value, as it is or JSON-escaped.
    pub fn contains(&self, bytes: &[u8]) -> bool {
        let holds = |needle: &[u8]| !needle.is_empty() && bytes.windows(needle.len()).any(|window| window == needle);
        self.values.iter().any(|secret| {
            let value = secret.expose_secret();
            let escaped = serde_json::to_string(value).unwrap_or_default();
            holds(value.as_bytes()) || holds(escaped.trim_matches('"').as_bytes())
        })
    }

    /// Replaces every known secret value in `text`, also in its JSON-escaped form so that a
    /// secret inside a serialised event is caught too.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.values {
            let value = secret.expose_secret();
            if out.contains(value) {
                out = out.replace(value, REDACTED);
            }
            let escaped = serde_json::to_string(value).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if escaped != value && out.contains(escaped) {
                out = out.replace(escaped, REDACTED);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_every_occurrence_and_the_json_escaped_form() {
        let mut redactor = Redactor::default();
        redactor.add(SecretString::from("ghp_secret\"value123".to_owned()));
        redactor.add(SecretString::from("x".to_owned()));
        let json = serde_json::to_string("token ghp_secret\"value123 again").expect("serialises");
        assert!(!redactor.redact(&json).contains("value123"));
        assert_eq!(redactor.redact("a ghp_secret\"value123 b"), "a [REDACTED] b");
        // Too short to be a secret: left alone.
        assert_eq!(redactor.redact("x marks"), "x marks");
    }
}
