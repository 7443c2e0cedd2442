//! `replay`: scripted model replies from a JSON Lines file, served in order.
//!
//! Every line whose `type` is absent or `"model_response"` and that has a `content` string is
//! one reply; other lines are skipped, so a `--trace` file replays the run it recorded (with
//! the recorded token usage, when present). Running out of replies is an error (exit 1).
//!
//! Sub-agents (DESIGN section 12): the replies are in the order the agents asked for them. A
//! line may name its agent (`"agent": "root>explorer"`, as every `model_response` of a trace
//! does); a request is served the first unserved line that names its agent path or names none.
//! So a hand-written script in asking order works as it is, and a trace serves each agent its
//! own replies in the order they were recorded.

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use super::{Completion, CompletionRequest, Provider, ProviderError, StopReason, Usage};
use crate::settings::ConfigError;

/// One scripted reply.
#[derive(Debug)]
struct Scripted {
    /// The agent path the line names, if it names one.
    agent: Option<String>,
    content: String,
    usage: Usage,
}

pub(crate) struct Replay {
    replies: Vec<Scripted>,
    /// Which replies were served.
    served: Mutex<Vec<bool>>,
}

impl Replay {
    pub(crate) fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError::key("--replay", format!("{}: {error}", path.display())))?;
        Self::parse(&text).map_err(|problem| ConfigError::key("--replay", format!("{}: {problem}", path.display())))
    }

    /// Reads a script; `Err` names the first line that is not JSON.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
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
                let agent = value.get("agent").and_then(Value::as_str).map(str::to_owned);
                replies.push(Scripted {
                    agent,
                    content: content.to_owned(),
                    usage,
                });
            }
        }
        if replies.is_empty() {
            return Err("no model replies in it (lines with a `content` string)".into());
        }
        Ok(Self {
            served: Mutex::new(vec![false; replies.len()]),
            replies,
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

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ProviderError> {
        let agent = request.agent;
        let mut served = self.served.lock().map_err(|_| ProviderError::Config {
            provider: "replay",
            message: "replay state poisoned".into(),
        })?;
        let fits = |reply: &Scripted| match (&reply.agent, agent) {
            (None, _) => true,
            (Some(named), Some(asking)) => named == asking,
            (Some(named), None) => named == super::ROOT_AGENT,
        };
        let Some(index) = (0..self.replies.len()).find(|&index| !served[index] && fits(&self.replies[index])) else {
            let for_agent = agent.map(|path| format!(" for agent {path}")).unwrap_or_default();
            return Err(ProviderError::ReplayExhausted {
                served: served.iter().filter(|&&done| done).count(),
                for_agent,
            });
        };
        served[index] = true;
        let reply = &self.replies[index];
        Ok(Completion {
            content: reply.content.clone(),
            usage: reply.usage,
            // A script's usage is what it says: none means none, nothing was spent.
            usage_report: super::UsageReport::Reported,
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
            replay.replies[0].usage,
            Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Usage::default()
            }
        );
        assert!(Replay::parse("not json").is_err());
    }

    async fn ask(replay: &Replay, agent: &str) -> Result<String, ProviderError> {
        let schema = serde_json::json!({});
        let request = CompletionRequest {
            agent: Some(agent),
            ..CompletionRequest::new("", &[], &schema)
        };
        replay.complete(request).await.map(|completion| completion.content)
    }

    #[tokio::test]
    async fn each_agent_is_served_its_own_lines_in_order_and_unnamed_lines_in_asking_order() {
        let script = r#"{"type":"model_response","agent":"root","content":"root 1"}
{"type":"model_response","agent":"root>explorer","content":"explorer 1"}
{"type":"model_response","agent":"root>explorer","content":"explorer 2"}
{"content":"anyone"}
{"type":"model_response","agent":"root","content":"root 2"}
"#;
        let replay = Replay::parse(script).expect("parses");
        let (root, explorer) = ("root", "root>explorer");
        assert_eq!(ask(&replay, root).await.expect("served"), "root 1");
        // The root asks again before the explorer's lines are used: it gets the unnamed line.
        assert_eq!(ask(&replay, root).await.expect("served"), "anyone");
        assert_eq!(ask(&replay, explorer).await.expect("served"), "explorer 1");
        assert_eq!(ask(&replay, root).await.expect("served"), "root 2");
        assert_eq!(ask(&replay, explorer).await.expect("served"), "explorer 2");
        let error = ask(&replay, explorer).await.expect_err("exhausted").to_string();
        assert!(error.contains("for agent root>explorer"), "{error}");
    }
}
