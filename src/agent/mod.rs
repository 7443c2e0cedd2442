//! The turn loop of one cycle: ask the model, parse its `{plan, tool_calls}` batch, run the
//! calls in order, feed the results back, until `finish`, `ask_question`, a budget, or an error.
//!
//! Guarantees (DESIGN section 2): the first failing call stops its batch and the rest are
//! reported as skipped, never run; a failure goes back to the model as the call's result; an
//! invalid reply is answered with the parse error and the expected shape and counts as a turn;
//! the history sent back is always valid JSON; a call to a tool that is not enabled is
//! rejected, never executed.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::events::{Event, EventSink, Scope};
use crate::forge::PullRequest;
use crate::llm::tokens::TokenCounter;
use crate::llm::{CacheHints, Completion, CompletionRequest, Provider, ProviderError, StopReason};
use crate::tools::{CycleEnd, FinishStatus, Lookup, ToolContext, ToolError, ToolOutput, ToolRegistry};

pub mod budget;
pub mod context;
pub mod file_tree;
pub mod prompt;
pub mod protocol;
pub mod template;

use budget::{Budget, Limit};
use context::{History, ToolResult};
use protocol::{EXPECTED_SHAPE, ModelReply, parse_reply};

/// How a cycle ended.
#[derive(Debug)]
pub enum CycleOutcome {
    Finished { status: FinishStatus, summary: String },
    Question { question: String, issue: Option<u64> },
    Limit(Limit),
}

/// Why a cycle could not go on.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    #[error("interrupted")]
    Interrupted,
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("the model refused to answer: {0}")]
    Refused(String),
    #[error(transparent)]
    Fatal(#[from] anyhow::Error),
}

pub struct Agent<'a> {
    pub provider: &'a dyn Provider,
    pub registry: &'a ToolRegistry,
    pub events: &'a EventSink,
    pub cancel: &'a CancellationToken,
    pub max_turns: u32,
    pub cycle: u32,
    /// The context window every request is fitted into.
    pub context_window: u64,
    /// `false` only for the `--full-history` benchmark knob.
    pub masking: bool,
}

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

/// What a model call came to, for the turn loop.
enum Answer {
    Reply(Completion),
    Limit(Limit),
}

impl Agent<'_> {
    fn scope(&self, turn: u32) -> Scope {
        Scope {
            cycle: Some(self.cycle),
            turn: Some(turn),
        }
    }

    /// Runs turns until the cycle ends. `ctx` is rebuilt per call only for `cycle_branch`.
    pub async fn run_cycle(
        &self,
        system: &str,
        first_message: String,
        reply_schema: &Value,
        ctx: &ToolContext<'_>,
        budget: &mut Budget,
        opened: &mut Vec<PullRequest>,
    ) -> Result<CycleOutcome, CycleError> {
        let redactor = self.events.redactor();
        let system = redactor.redact(system);
        let counter = TokenCounter::for_model(self.provider.name(), self.provider.model()).await;
        let mut history = History::new(
            counter,
            self.context_window,
            self.masking,
            &system,
            reply_schema,
            redactor.redact(&first_message),
        );
        // One key per cycle: the cycle's requests share their prefix, so they share a cache.
        let cache_key = format!("upkeep-{}-{}", self.events.run_id(), self.cycle);
        // Pull requests this cycle opened or updated; `opened` keeps them for the run summary
        // whichever way the cycle ends (a question or a budget after a pull request included).
        let first_of_cycle = opened.len();
        let mut turn = 0;
        loop {
            if turn >= self.max_turns {
                return Ok(CycleOutcome::Limit(Limit::Turns(self.max_turns)));
            }
            turn += 1;
            let completion = match self
                .ask(&system, reply_schema, &cache_key, &mut history, budget, turn)
                .await?
            {
                Answer::Reply(completion) => completion,
                Answer::Limit(limit) => return Ok(CycleOutcome::Limit(limit)),
            };
            match completion.stop {
                StopReason::Refusal(reason) => return Err(CycleError::Refused(reason)),
                StopReason::Length => {
                    history.push_reply(json!({"unusable_reply": "cut off at the output length limit"}).to_string());
                    history.push_note(
                        json!({
                            "error": "Your reply was cut off at the output length limit. Reply again, shorter: fewer calls in one reply, and prefer edit_file over rewriting whole files.",
                            "expected_shape": EXPECTED_SHAPE,
                        })
                        .to_string(),
                    );
                    continue;
                }
                StopReason::Complete => {}
            }
            let reply = match parse_reply(&completion.content) {
                Ok(reply) => reply,
                Err(error) => {
                    tracing::warn!("turn {turn}: unusable reply: {error}");
                    // Keep the conversation valid JSON: the raw reply travels as a JSON string.
                    history.push_reply(json!({"unusable_reply": completion.content}).to_string());
                    history.push_note(
                        json!({"error": format!("Your reply could not be used: {error}"), "expected_shape": EXPECTED_SHAPE})
                            .to_string(),
                    );
                    continue;
                }
            };
            history.push_reply(reply.to_json());
            if !reply.plan.trim().is_empty() {
                self.events.emit(
                    self.scope(turn),
                    Event::Plan {
                        plan: reply.plan.clone(),
                    },
                );
            }
            let (results, end) = self.run_batch(&reply, ctx, turn, opened, first_of_cycle).await?;
            if let Some(end) = end {
                return Ok(match end {
                    CycleEnd::Finish { status, summary } => CycleOutcome::Finished { status, summary },
                    CycleEnd::Question { question, issue } => CycleOutcome::Question { question, issue },
                });
            }
            history.push_results(results);
        }
    }

    /// One model call: fits the history into the window, checks the budgets, asks, and answers
    /// a context-length error by masking harder and asking once more.
    async fn ask(
        &self,
        system: &str,
        reply_schema: &Value,
        cache_key: &str,
        history: &mut History,
        budget: &mut Budget,
        turn: u32,
    ) -> Result<Answer, CycleError> {
        let mut retried_smaller = false;
        loop {
            let prepared = match history.prepare() {
                Ok(prepared) => prepared,
                Err(no_fit) => {
                    return Ok(Answer::Limit(Limit::ContextWindow {
                        window: no_fit.window,
                        needed: no_fit.needed,
                    }));
                }
            };
            if let Err(limit) = budget.check_before_call(prepared.estimated_tokens) {
                return Ok(Answer::Limit(limit));
            }
            self.events.emit(
                self.scope(turn),
                Event::Context {
                    estimated_tokens: prepared.estimated_tokens,
                    window: history.window(),
                    masked_results: prepared.masked_results,
                },
            );
            let spinner = self.events.waiting(turn, budget.usage, budget.cost_usd);
            let progress = |bytes: u64| {
                if let Some(spinner) = &spinner {
                    spinner.received(bytes);
                }
            };
            let request = CompletionRequest {
                system,
                messages: &prepared.messages,
                reply_schema,
                cache: CacheHints {
                    key: Some(cache_key),
                    breakpoints: &prepared.breakpoints,
                },
                progress: Some(&progress),
            };
            let deadline = budget.deadline();
            let result = tokio::select! {
                () = self.cancel.cancelled() => return Err(CycleError::Interrupted),
                () = sleep_until(deadline) => {
                    return Ok(Answer::Limit(budget.timeout_limit().unwrap_or(Limit::Turns(turn))));
                }
                result = self.provider.complete(request) => result,
            };
            drop(spinner);
            let completion = match result {
                Ok(completion) => completion,
                Err(ProviderError::ContextLength { message, .. }) if !retried_smaller => {
                    tracing::warn!(
                        "turn {turn}: the provider says the request (estimated {} tokens) does not fit: {message}; masking harder and asking once more",
                        prepared.estimated_tokens
                    );
                    retried_smaller = true;
                    history.tighten(prepared.estimated_tokens);
                    continue;
                }
                Err(ProviderError::ContextLength { message, .. }) => {
                    tracing::warn!("turn {turn}: the smaller request does not fit either: {message}");
                    return Ok(Answer::Limit(Limit::ContextWindow {
                        window: history.window(),
                        needed: prepared.estimated_tokens,
                    }));
                }
                Err(error) => return Err(error.into()),
            };
            let cost = budget.record(completion.usage);
            self.events.emit(
                self.scope(turn),
                Event::ModelResponse {
                    content: completion.content.clone(),
                    usage: completion.usage,
                    cost_usd: cost,
                },
            );
            return Ok(Answer::Reply(completion));
        }
    }

    async fn run_batch(
        &self,
        reply: &ModelReply,
        ctx: &ToolContext<'_>,
        turn: u32,
        opened: &mut Vec<PullRequest>,
        first_of_cycle: usize,
    ) -> Result<(Vec<ToolResult>, Option<CycleEnd>), CycleError> {
        let redactor = self.events.redactor();
        let scope = self.scope(turn);
        let mut results = Vec::with_capacity(reply.tool_calls.len());
        let mut stopped: Option<&'static str> = None;
        let mut end = None;
        for call in &reply.tool_calls {
            let name = call.tool_name.as_str();
            if let Some(reason) = stopped {
                results.push(ToolResult {
                    skipped: true,
                    ..result_entry(call, false, reason.to_owned())
                });
                continue;
            }
            self.events.emit(
                scope,
                Event::ToolCall {
                    tool: name.to_owned(),
                    arguments: Value::Object(call.arguments.clone()),
                },
            );
            let tool = match self.registry.lookup(name) {
                Lookup::Found(tool) => tool,
                Lookup::Rejected(reason) => {
                    self.events.emit(
                        scope,
                        Event::ToolRejected {
                            tool: name.to_owned(),
                            reason: reason.clone(),
                        },
                    );
                    results.push(result_entry(call, false, reason));
                    stopped = Some("skipped: not run because an earlier call in this reply failed");
                    continue;
                }
                Lookup::Unknown(message) => {
                    self.events.emit(
                        scope,
                        Event::ToolResult {
                            tool: name.to_owned(),
                            ok: false,
                            output: message.clone(),
                        },
                    );
                    results.push(result_entry(call, false, message));
                    stopped = Some("skipped: not run because an earlier call in this reply failed");
                    continue;
                }
            };
            let branch = opened[first_of_cycle..].last().map(|pr| pr.branch.clone());
            let call_ctx = ToolContext {
                cycle_branch: branch.as_deref(),
                ..*ctx
            };
            let outcome = tokio::select! {
                () = self.cancel.cancelled() => return Err(CycleError::Interrupted),
                outcome = tool.call(&call.arguments, &call_ctx) => outcome,
            };
            let (ok, output) = match outcome {
                Ok(ToolOutput::Text(text)) => (true, redactor.redact(&text)),
                Ok(ToolOutput::PullRequest(pull_request)) => {
                    self.events.emit(
                        scope,
                        Event::PullRequest {
                            url: pull_request.url.clone(),
                            number: pull_request.number,
                            branch: pull_request.branch.clone(),
                            title: pull_request.title.clone(),
                            updated: pull_request.updated,
                        },
                    );
                    if let Some(preview) = &pull_request.preview {
                        self.events.say(preview);
                    }
                    let text = crate::tools::create_pull_request::describe(&pull_request);
                    // An update of a pull request opened earlier in this cycle replaces it.
                    if let Some(index) =
                        (first_of_cycle..opened.len()).find(|&i| opened[i].branch == pull_request.branch)
                    {
                        opened.remove(index);
                    }
                    opened.push(pull_request);
                    (true, text)
                }
                Ok(ToolOutput::EndCycle(cycle_end)) => {
                    stopped = Some("skipped: not run because the cycle ended");
                    end = Some(cycle_end);
                    (true, "the cycle ends here".to_owned())
                }
                Err(ToolError::RespondToModel(message)) => {
                    stopped = Some("skipped: not run because an earlier call in this reply failed");
                    (false, redactor.redact(&message))
                }
                Err(ToolError::Fatal(error)) => return Err(CycleError::Fatal(error.context(format!("tool {name}")))),
            };
            self.events.emit(
                scope,
                Event::ToolResult {
                    tool: name.to_owned(),
                    ok,
                    output: output.clone(),
                },
            );
            results.push(result_entry(call, ok, output));
        }
        Ok((results, end))
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}
