//! The turn loop of one cycle: ask the model, parse its `{plan, tool_calls}` batch, run the
//! calls in order, feed the results back, until `finish`, `ask_question`, a budget, or an error.
//!
//! Guarantees (DESIGN section 2): the first failing call stops its batch and the rest are
//! reported as skipped, never run; a failure goes back to the model as the call's result; an
//! invalid reply is answered with the parse error and the expected shape and counts as a turn;
//! the history sent back is always valid JSON; a call to a tool that is not enabled is
//! rejected, never executed.
//!
//! The same loop runs sub-agents ([`Agent::run`], started by [`crate::subagents`]): each level has
//! its own provider, tools and turn limit, and shares the run's budget ([`Spend`]), event sink
//! and cancellation token; every event it emits names its agent path.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::events::{Event, EventSink, Scope};
use crate::llm::tokens::TokenCounter;
use crate::llm::{CacheHints, Completion, CompletionRequest, Provider, ProviderError, StopReason};
use crate::tools::{CycleEnd, FinishStatus, ToolContext, ToolRegistry};
use execution::{ExecContext, Spend};

mod batch;
pub(crate) mod budget;
pub(crate) mod caps;
mod condense;
pub(crate) mod execution;
pub mod file_tree;
pub(crate) mod history;
#[cfg(test)]
// Shared with the integration tests through `#[path]`, whose support re-exports its items.
#[allow(unreachable_pub)]
pub(crate) mod markdown_headings;
pub(crate) mod prompt;
pub(crate) mod protocol;
mod stuck;
pub(crate) mod template;
pub(crate) mod usage;

use budget::{Limit, RunBudget};
use history::History;
/// Windows up to this size get the first request measured by the server's tokenizer, where
/// it has one: there the conservative estimate alone can refuse a request that fits.
const SMALL_WINDOW: u64 = crate::llm::window::UNKNOWN_MODEL_WINDOW;

use protocol::{EXPECTED_SHAPE, ModelReply, ReplyError, UNUSABLE_REPLY_PLACEHOLDER, parse_reply};

/// How a cycle ended.
#[derive(Debug)]
pub enum CycleOutcome {
    Finished { status: FinishStatus, summary: String },
    Question { question: String, issue: Option<u64> },
    Limit(Limit),
}

/// How an agent's turns ended: the main agent's with `finish` or `ask_question`, a
/// sub-agent's with `complete_task`, either with a budget.
#[derive(Debug)]
pub enum AgentEnd {
    Cycle(CycleEnd),
    Answer(Value),
    Limit(Limit),
}

/// Why a cycle could not go on.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    /// The interrupt or the deadline stopped the cycle (a tool's git work included).
    #[error("{0}")]
    Stopped(crate::repo::StopReason),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("the model refused to answer: {0}")]
    Refused(String),
    #[error(transparent)]
    Fatal(#[from] crate::tools::Failure),
}

pub struct Agent<'a> {
    pub provider: &'a dyn Provider,
    pub registry: &'a ToolRegistry,
    pub events: &'a EventSink,
    pub cancel: &'a CancellationToken,
    pub max_turns: u32,
    pub cycle: u32,
    /// The context window every request is fitted into, before the provider's server is asked
    /// (it may say another, see [`crate::llm::window::ContextWindow::or_from_server`]).
    pub context_window: crate::llm::window::ContextWindow,
    /// `false` only for the `--full-history` benchmark knob.
    pub masking: bool,
    /// The cycle's sub-agents, reviewer and checks; `None` runs without them.
    pub team: Option<&'a dyn Delegation>,
}

/// The cycle's sub-agents, reviewer and checks as the turn loop sees them (implemented by
/// [`crate::subagents::Team`]), so the loop runs them without depending on how they are built.
pub trait Delegation: Sync {
    /// What the tools of `agent`'s current turn reach: `delegate` and the gate before a push.
    fn level<'s, 'b>(
        &'s self,
        agent: &'s Agent<'s>,
        exec: &'s ExecContext,
        spend: &'s Spend<'b>,
        turn: u32,
    ) -> Box<dyn crate::tools::delegate::SubAgents + 's>;

    /// The price of `model` where the cycle's prices name it.
    fn price_of(&self, model: &str) -> Option<crate::settings::Price>;
}

/// The turn being worked: who works it and what it spends.
#[derive(Clone, Copy)]
struct Call<'c, 'b> {
    exec: &'c ExecContext,
    spend: &'c Spend<'b>,
    turn: u32,
    /// How this agent's model counts tokens, for usage its provider leaves out.
    counter: TokenCounter,
}

/// What a model call came to, for the turn loop.
enum Answer {
    /// The completion, and what the parser made of its text.
    Reply(Completion, Result<ModelReply, ReplyError>),
    Limit(Limit),
}

impl Agent<'_> {
    fn scope(&self, turn: u32) -> Scope {
        Scope {
            cycle: Some(self.cycle),
            turn: Some(turn),
        }
    }

    /// Runs the main agent's turns until the cycle ends. `ctx` is rebuilt per call only for
    /// the agent's sub-agents; the pull requests the cycle publishes are recorded in its
    /// [`crate::tools::PullRequestScope`].
    pub async fn run_cycle(
        &self,
        system: &str,
        first_message: String,
        reply_schema: &Value,
        ctx: &ToolContext<'_>,
        budget: &RunBudget,
    ) -> Result<CycleOutcome, CycleError> {
        // `--max-turns` bounds every model call of the cycle, sub-agents' and the reviewer's too.
        let spend = Spend::new(budget, self.max_turns);
        let exec = ExecContext::root(self.events.run_id());
        let end = self
            .run(&exec, &spend, system, first_message, reply_schema, ctx)
            .await?;
        Ok(match end {
            AgentEnd::Cycle(CycleEnd::Finish { status, summary }) => CycleOutcome::Finished { status, summary },
            AgentEnd::Cycle(CycleEnd::Question { question, issue }) => CycleOutcome::Question { question, issue },
            AgentEnd::Limit(limit) => CycleOutcome::Limit(limit),
            AgentEnd::Answer(_) => {
                return Err(CycleError::Fatal(crate::tools::Failure::Setup(
                    "the main agent ended with complete_task, which only sub-agents hold".to_owned(),
                )));
            }
        })
    }

    /// Runs turns as the agent `exec` names, spending from `spend`, until a call ends them
    /// (`finish`, `ask_question`, `complete_task`) or a limit does (`max_turns`, a budget).
    pub async fn run(
        &self,
        exec: &ExecContext,
        spend: &Spend<'_>,
        system: &str,
        first_message: String,
        reply_schema: &Value,
        ctx: &ToolContext<'_>,
    ) -> Result<AgentEnd, CycleError> {
        let redactor = self.events.redactor();
        let system = redactor.redact(system);
        let counter = TokenCounter::for_model(self.provider.name(), self.provider.model()).await;
        let window = self.context_window.or_from_server(self.provider).await;
        let first_message = redactor.redact(&first_message);
        // On a small window the first request may only fit by the server's own count: ask its
        // tokenizer, where it has one, rather than refuse a request it would take.
        let first_count = if window.tokens <= SMALL_WINDOW {
            let text = format!("{system}\n{first_message}");
            self.provider.count_tokens(&text).await.map(|real| (real, text))
        } else {
            None
        };
        let mut history = History::new(
            counter,
            window.tokens,
            self.masking,
            &system,
            reply_schema,
            first_message,
        );
        if let Some((real, text)) = first_count {
            history.calibrate_text(real, &text);
        }
        // One key per cycle and agent: its requests share their prefix, so they share a cache.
        let cache_key = match exec.depth() {
            0 => format!("upkeep-{}-{}", self.events.run_id(), self.cycle),
            _ => format!("upkeep-{}-{}-{}", self.events.run_id(), self.cycle, exec.path()),
        };
        let mut repeats = stuck::Repeats::default();
        let mut turn = 0;
        loop {
            if turn >= self.max_turns {
                return Ok(AgentEnd::Limit(Limit::Turns {
                    max: self.max_turns,
                    unusable: repeats.unusable(),
                    replies: repeats.replies(),
                }));
            }
            turn += 1;
            let call = Call {
                exec,
                spend,
                turn,
                counter,
            };
            let (completion, parsed) = match self
                .ask(&call, &system, reply_schema, &cache_key, &mut history, window.from)
                .await?
            {
                Answer::Reply(completion, parsed) => (completion, parsed),
                Answer::Limit(limit) => return Ok(AgentEnd::Limit(limit)),
            };
            match completion.stop {
                StopReason::Refusal(reason) => return Err(CycleError::Refused(reason)),
                StopReason::Length => {
                    self.emit(
                        &call,
                        Event::ReplyRejected {
                            reason: String::from("cut off at the output length limit"),
                        },
                    );
                    repeats.unusable_reply();
                    history.push_reply(UNUSABLE_REPLY_PLACEHOLDER.to_owned());
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
            let reply = match parsed {
                Ok(reply) => reply,
                Err(error) => {
                    self.emit(
                        &call,
                        Event::ReplyRejected {
                            reason: error.to_string(),
                        },
                    );
                    // Never the reply itself: a weak model copies whatever stands for its reply.
                    repeats.unusable_reply();
                    history.push_reply(UNUSABLE_REPLY_PLACEHOLDER.to_owned());
                    history.push_note(redactor.redact(
                        &json!({"error": format!("Your reply could not be used: {error}"), "expected_shape": EXPECTED_SHAPE})
                            .to_string(),
                    ));
                    continue;
                }
            };
            // The model's own reply goes back redacted too: a secret it wrote (into a file, a
            // delegated task) never travels in a later request.
            history.push_reply(redactor.redact(&reply.to_json()));
            if !reply.plan.trim().is_empty() {
                self.emit(
                    &call,
                    Event::Plan {
                        plan: reply.plan.clone(),
                    },
                );
            }
            let (mut results, end) = self.run_batch(&call, &reply, ctx).await?;
            if let Some(end) = end {
                return Ok(end);
            }
            if let Some(stuck) = repeats.after(&mut results) {
                return Ok(AgentEnd::Limit(stuck));
            }
            history.push_results(results);
        }
    }

    /// An event of this agent's turn, naming the agent.
    fn emit(&self, call: &Call<'_, '_>, event: Event) {
        self.events.emit_as(self.scope(call.turn), call.exec.path(), event);
    }

    /// The price of this agent's model: its own where the cycle's prices name it.
    fn price(&self, spend: &Spend<'_>) -> Option<crate::settings::Price> {
        match self.team {
            Some(team) => team.price_of(self.provider.model()),
            None => spend.default_price(),
        }
    }

    /// One model call: fits the history into the window, checks the budgets, asks, and answers
    /// a context-length error by masking harder and asking once more.
    async fn ask(
        &self,
        call: &Call<'_, '_>,
        system: &str,
        reply_schema: &Value,
        cache_key: &str,
        history: &mut History,
        window_from: crate::llm::window::WindowSource,
    ) -> Result<Answer, CycleError> {
        let Call { spend, turn, .. } = *call;
        let price = self.price(spend);
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
            if let Err(limit) = spend
                .check_before_call(prepared.estimated_tokens, price)
                .and_then(|()| spend.take_call())
            {
                return Ok(Answer::Limit(limit));
            }
            self.emit(
                call,
                Event::Context {
                    estimated_tokens: prepared.estimated_tokens,
                    window: history.window(),
                    window_from,
                    masked_results: prepared.masked_results,
                },
            );
            let (usage, cost_usd) = spend.spent();
            let spinner = self.events.waiting(turn, usage, cost_usd);
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
                agent: Some(call.exec.path()),
                max_reply_tokens: Some(crate::llm::window::reply_reserve(history.window())),
            };
            let deadline = spend.deadline();
            let result = tokio::select! {
                () = self.cancel.cancelled() => return Err(CycleError::Stopped(crate::repo::StopReason::Interrupted)),
                () = sleep_until(deadline) => {
                    return Ok(Answer::Limit(spend.timeout_limit().unwrap_or(Limit::Turns {
                        max: turn,
                        unusable: 0,
                        replies: 0,
                    })));
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
                    match crate::llm::window::overflow_sizes(&message) {
                        Some(server) => history.learn(server, prepared.estimated_tokens),
                        None => history.tighten(prepared.estimated_tokens),
                    }
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
            let size = usage::CallSize::of(
                system,
                &prepared.messages,
                reply_schema,
                prepared.estimated_tokens,
                &completion.content,
                call.counter,
                history.window(),
            );
            let settled = usage::settle_and_warn(
                completion.usage,
                completion.usage_report,
                size,
                self.provider.name(),
                || spend.note_estimated(),
            );
            if !settled.estimated {
                history.calibrate(settled.usage.input_tokens);
            }
            let cost = spend.record(settled.usage, price);
            let parsed = parse_reply(&completion.content);
            // A reply cut off or refused is not used, so nothing was repaired in it.
            let repairs = match (&completion.stop, &parsed) {
                (StopReason::Complete, Ok(reply)) => reply.repairs.iter().map(|repair| repair.name()).collect(),
                _ => Vec::new(),
            };
            self.emit(
                call,
                Event::ModelResponse {
                    content: completion.content.clone(),
                    usage: crate::events::CallUsage {
                        usage: settled.usage,
                        estimated: settled.estimated,
                    },
                    cost_usd: cost,
                    repairs,
                },
            );
            return Ok(Answer::Reply(
                Completion {
                    usage: settled.usage,
                    ..completion
                },
                parsed,
            ));
        }
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}
