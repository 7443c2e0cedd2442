//! `replay`: scripted model replies from a JSON Lines file, served in order.
//!
//! Every line whose `type` is absent or `"model_response"` and that has a `content` string is
//! one reply; other lines are skipped, so a `--trace` file replays the run it recorded (with
//! the recorded token usage, when present). Running out of replies is an error (exit 1).

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use super::{Completion, CompletionRequest, Provider, ProviderError, StopReason, Usage};
use crate::config::ConfigError;

pub struct Replay {
    replies: Vec<(String, Usage)>,
    next: Mutex<usize>,
}

impl Replay {
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError::key("--replay", format!("{}: {error}", path.display())))?;
        Self::parse(&text).map_err(|problem| ConfigError::key("--replay", format!("{}: {problem}", path.display())))
    }

    /// Reads a script; `Err` names the first line that is not JSON.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut replies = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: Value =
                serde_json::from_str(line).map_err(|error| format!("line {} is not JSON: {error}", index + 1))?;
            let is_reply = matches!(value.get("type").and_then(Value::as_str), None | Some("model_response"));
            if let (true, Some(content)) = (is_reply, value.get("content").and_then(Value::as_str)) {
                let usage = value
                    .get("usage")
                    .and_then(|usage| serde_json::from_value(usage.clone()).ok())
                    .unwrap_or_default();
                replies.push((content.to_owned(), usage));
            }
        }
        if replies.is_empty() {
            return Err("no model replies in it (lines with a `content` string)".into());
        }
        Ok(Self {
            replies,
            next: Mutex::new(0),
        })
    }
}

#[async_trait]
impl Provider for Replay {
    fn name(&self) -> &'static str {
        "replay"
    }

    fn model(&self) -> &str {
        "replay"
    }

    async fn complete(&self, _request: CompletionRequest<'_>) -> Result<Completion, ProviderError> {
        let mut next = self.next.lock().map_err(|_| ProviderError::Config {
            provider: "replay",
            message: "replay state poisoned".into(),
        })?;
        let Some((content, usage)) = self.replies.get(*next) else {
            return Err(ProviderError::ReplayExhausted {
                served: self.replies.len(),
            });
        };
        *next += 1;
        Ok(Completion {
            content: content.clone(),
            usage: *usage,
            stop: StopReason::Complete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_other_than_model_responses_are_skipped() {
        let script = r#"{"type":"run_started","repo":"x"}
{"type":"model_response","content":"first","usage":{"input_tokens":3,"output_tokens":4}}
{"content":"second"}
{"type":"plan","plan":"not a reply"}
"#;
        let replay = Replay::parse(script).expect("parses");
        assert_eq!(replay.replies.len(), 2);
        assert_eq!(
            replay.replies[0].1,
            Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Usage::default()
            }
        );
        assert!(Replay::parse("not json").is_err());
    }
}
