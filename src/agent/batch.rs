//! One reply's tool calls, run in order: the per-reply caps, the registry's verdict on each
//! name, the call itself (raced against the interrupt), and the result that goes back to the
//! model. The first failure stops the batch; the rest are reported as skipped, never run
//! (DESIGN section 2). Each call is one [`Invocation`]; what a call did comes back as a typed
//! [`ToolOutput`] (a pull request's bookkeeping stays with `create_pull_request`).

use serde_json::Value;

use super::caps::over_reply_caps;
use super::history::ToolResult;
use super::protocol::{self, ModelReply};
use super::{Agent, AgentEnd, Call, CycleError};
use crate::events::Event;
use crate::repo::StopReason;
use crate::tools::{Invocation, Lookup, ToolContext, ToolError, ToolOutput};

const SKIPPED_AFTER_FAILURE: &str = "skipped: not run because an earlier call in this reply failed";

/// Result of one call, as it goes back to the model.
fn result_entry(call: &protocol::ToolCall, ok: bool, output: String) -> ToolResult {
    ToolResult {
        tool: call.tool_name.clone(),
        arguments: call.arguments.clone(),
        ok,
        skipped: false,
        output,
    }
}

impl Agent<'_> {
    pub(super) async fn run_batch(
        &self,
        call_of: &Call<'_, '_>,
        reply: &ModelReply,
        ctx: &ToolContext<'_>,
    ) -> Result<(Vec<ToolResult>, Option<AgentEnd>), CycleError> {
        let redactor = self.events.redactor();
        let emit = |event: Event| self.emit(call_of, event);
        // What this agent's tools get: its context, sub-agents, and the gate before a push.
        let sub_agents = self
            .team
            .map(|team| team.level(self, call_of.exec, call_of.spend, call_of.turn));
        let sub_agents = sub_agents.as_deref();
        let mut results = Vec::with_capacity(reply.tool_calls.len());
        let mut stopped: Option<String> = None;
        let mut end = None;
        let mut delegations = 0;
        for (index, call) in reply.tool_calls.iter().enumerate() {
            let name = call.tool_name.as_str();
            if stopped.is_none() {
                stopped = over_reply_caps(index, delegations, name);
                if stopped.is_some() {
                    tracing::warn!(
                        "{} turn {}: the reply makes {} calls; those past the per-reply caps are skipped",
                        call_of.exec.path(),
                        call_of.turn,
                        reply.tool_calls.len()
                    );
                }
            }
            if let Some(reason) = &stopped {
                results.push(ToolResult {
                    skipped: true,
                    ..result_entry(call, false, reason.clone())
                });
                continue;
            }
            if name == "delegate" {
                delegations += 1;
            }
            emit(Event::ToolCall {
                tool: name.to_owned(),
                arguments: Value::Object(call.arguments.clone()),
            });
            let tool = match self.registry.lookup(name) {
                Lookup::Found(tool) => tool,
                Lookup::Rejected(reason) => {
                    emit(Event::ToolRejected {
                        tool: name.to_owned(),
                        reason: reason.clone(),
                    });
                    results.push(result_entry(call, false, reason));
                    stopped = Some(SKIPPED_AFTER_FAILURE.to_owned());
                    continue;
                }
                Lookup::Unknown(message) => {
                    emit(Event::ToolResult {
                        tool: name.to_owned(),
                        ok: false,
                        output: message.clone(),
                    });
                    results.push(result_entry(call, false, message));
                    stopped = Some(SKIPPED_AFTER_FAILURE.to_owned());
                    continue;
                }
            };
            let call_ctx = ToolContext {
                agents: sub_agents,
                ..*ctx
            };
            let invocation = Invocation {
                ctx: &call_ctx,
                args: &call.arguments,
            };
            let outcome = tokio::select! {
                () = self.cancel.cancelled() => return Err(CycleError::Stopped(StopReason::Interrupted)),
                outcome = tool.call(invocation) => outcome,
            };
            let (ok, output) = match outcome {
                Ok(ToolOutput::Text(text)) => (true, redactor.redact(&text)),
                Ok(ToolOutput::PullRequest(pull_request)) => {
                    emit(Event::PullRequest {
                        url: pull_request.url.clone(),
                        number: pull_request.number,
                        branch: pull_request.branch.clone(),
                        title: pull_request.title.clone(),
                        updated: pull_request.updated,
                    });
                    if let Some(preview) = &pull_request.preview {
                        self.events.say(preview);
                    }
                    (true, crate::tools::create_pull_request::describe(&pull_request))
                }
                Ok(ToolOutput::EndCycle(cycle_end)) => {
                    stopped = Some("skipped: not run because the cycle ended".to_owned());
                    end = Some(AgentEnd::Cycle(cycle_end));
                    (true, "the cycle ends here".to_owned())
                }
                Ok(ToolOutput::Completed(answer)) => {
                    stopped = Some("skipped: not run because the task was completed".to_owned());
                    end = Some(AgentEnd::Answer(answer));
                    (true, "the task is complete; the answer goes to the caller".to_owned())
                }
                Err(ToolError::RespondToModel(message)) => {
                    stopped = Some(SKIPPED_AFTER_FAILURE.to_owned());
                    (false, redactor.redact(&message))
                }
                Err(ToolError::Stopped(reason)) => return Err(CycleError::Stopped(reason)),
                // A sub-agent's work cut short by the interrupt is the interrupt, not a failure.
                Err(ToolError::Fatal(_)) if self.cancel.is_cancelled() => {
                    return Err(CycleError::Stopped(StopReason::Interrupted));
                }
                Err(ToolError::Fatal(error)) => return Err(CycleError::Fatal(error.within(format!("tool {name}")))),
            };
            emit(Event::ToolResult {
                tool: name.to_owned(),
                ok,
                output: output.clone(),
            });
            results.push(result_entry(call, ok, output));
        }
        Ok((results, end))
    }
}
