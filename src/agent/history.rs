//! The history policy: what of a cycle's conversation goes into each request.
//!
//! Tool results are most of a cycle's tokens, and most of them are only needed for a turn or
//! two. So (DESIGN section 10):
//! - **Observation masking.** The results of the last [`KEEP_WHOLE_TURNS`] turns are sent
//!   whole. Older results are replaced by a one-line stub naming the call and how to get its
//!   output again. The model's own replies (plans and calls) are always kept, so it still knows
//!   what it did and why. Results too small to be worth a stub are kept as they are.
//! - **Masking in steps.** Masking a result changes the request early on, which costs a prompt
//!   cache miss on everything after it: that tail is billed again in full (OpenAI) or written
//!   to the cache again at 1.25x (Anthropic), while a result carried whole costs only a cache
//!   read (0.1x-0.25x) per turn. So stubs are not applied turn by turn. The older whole results
//!   are masked, all at once, when (a) they add up to more than [`MASK_STEP_TOKENS`] and (b) the
//!   tokens the step removes are at least the tokens it makes the provider read anew (the
//!   messages after the first one it changes, which hold the last turns' whole results): a
//!   step right after a few big reads, which would re-send those reads, waits until the
//!   following turns are light (edits, searches). Past [`MAX_CARRIED_TOKENS`] of older whole
//!   results the step is taken regardless. Between two steps the history is only appended to,
//!   so each request starts with the previous request byte for byte and the provider's cache
//!   serves it.
//! - **Fitting the window, in large steps.** Before each call the request is estimated (see
//!   [`crate::llm::tokens`]). When it does not fit the context window with room for the reply,
//!   it is squeezed in one large step, level by level, until the conversation takes at most
//!   half of the room it has (the room less the system prompt and the task): mask every result
//!   older than the last [`KEEP_WHOLE_TURNS`] turns; then every result but the last turn's;
//!   then elide large arguments (a whole file written) from the model's older replies; then
//!   leave out the oldest turns, with a note at the cut (in the first message after it, never
//!   in the task); and only when the request still does not fit, cut the last results down to
//!   what fits. Each level, once taken, stays for the rest of the cycle, and the half left free
//!   is filled by the following turns, so a small window is cut every several turns rather
//!   than every turn, and between two cuts each request extends the one before it byte for
//!   byte (a prompt cache serves it). If even the last level does not fit, the cycle ends with
//!   a limit ([`NoFit`]).
//! - **Estimates calibrated by the server.** A request's estimate is multiplied by the ratio
//!   of the server's own count to the estimate, learned from the prompt tokens a response
//!   reports (or, before the first request, from the server's tokenizer: see
//!   [`History::calibrate_text`]), bounded (see [`calibration`]). The
//!   conservative estimate is two to three times a small model's real count, so without this a
//!   4,096-token window refused requests its server would have taken.
//! - **A provider that disagrees.** When the API answers that the request is too long after
//!   all (our estimate was low for its tokenizer), [`History::tighten`] scales every later
//!   estimate up by what the error implies, and the agent asks once more with the smaller
//!   request.
//!
//! Prompt-cache hints: the first message (the cycle prompt), the last message of the masked
//! part (stable until the next step) and the last message of the request are marked as cache
//! breakpoints; Anthropic adds one on the system prompt (four in all, as its API allows).

use serde_json::Value;

pub(crate) use super::condense::ToolResult;

mod calibration;
use super::condense::{MIN_MASKED_BYTES, cut_output, elide_arguments, render_results, stub_or_output};

use crate::llm::tokens::TokenCounter;
use crate::llm::{Message, window};

/// Turns whose tool results are always sent whole.
pub(crate) const KEEP_WHOLE_TURNS: usize = 3;
/// Older whole results are masked once they add up to more than this many tokens (and the step
/// removes at least as much as it makes the provider read anew).
pub(crate) const MASK_STEP_TOKENS: u64 = 8_192;
/// Older whole results are masked once they add up to more than this, whatever the step costs.
pub(crate) const MAX_CARRIED_TOKENS: u64 = 32_768;
/// Tokens of chat framing per message (role markers, separators), added to every estimate.
const TOKENS_PER_MESSAGE: u64 = 4;

/// How far a squeeze may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SqueezeGoal {
    /// Free room for the turns to come: every level but cutting the last results.
    Headroom,
    /// Make the request fit at all: every level.
    Fit,
}

/// Why a request cannot be made to fit the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoFit {
    pub window: u64,
    pub needed: u64,
}

/// A request ready to send.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub messages: Vec<Message>,
    pub estimated_tokens: u64,
    pub masked_results: usize,
    /// Message indexes worth a cache breakpoint, oldest first.
    pub breakpoints: Vec<usize>,
}

/// A piece of text and its token count.
#[derive(Debug, Clone)]
struct Counted {
    text: String,
    tokens: u64,
}

impl Counted {
    fn new(counter: &TokenCounter, text: String) -> Self {
        let tokens = counter.count(&text) + TOKENS_PER_MESSAGE;
        Self { text, tokens }
    }
}

#[derive(Debug)]
enum Followup {
    Results {
        results: Vec<ToolResult>,
        whole: Counted,
        masked: Option<Counted>,
        /// Set when the results had to be cut to fit the window; replaces `whole`.
        cut: Option<Counted>,
    },
    /// A message that is not tool results (a parse error, a cut-off reply): never masked.
    Note(Counted),
}

#[derive(Debug)]
struct Turn {
    reply: Counted,
    /// The reply as JSON, when it was a valid `{plan, tool_calls}` (for eliding arguments).
    reply_value: Option<Value>,
    elided: Option<Counted>,
    followup: Option<Followup>,
}

/// A cycle's conversation after the system prompt, and the policy that renders it.
#[derive(Debug)]
pub(crate) struct History {
    counter: TokenCounter,
    window: u64,
    /// `false` only for the `--full-history` benchmark knob: no masking steps.
    masking: bool,
    /// System prompt and reply schema: sent with every request.
    fixed_tokens: u64,
    first: Counted,
    /// The note at the cut, for the current `dropped_before`.
    cut_note: Option<(usize, Counted)>,
    turns: Vec<Turn>,
    masked_before: usize,
    elided_before: usize,
    dropped_before: usize,
    /// The server's count over upkeep's, the highest seen; `None` until the server counted.
    calibration: Option<f64>,
    /// Every estimate is multiplied by this too; raised by a context-length error.
    safety: f64,
    /// The last request's estimate before scaling, for [`History::calibrate`].
    last_unscaled: u64,
}

impl History {
    pub(crate) fn new(
        counter: TokenCounter,
        window: u64,
        masking: bool,
        system: &str,
        schema: &Value,
        first: String,
    ) -> Self {
        let fixed_tokens = counter.count(system) + counter.count(&schema.to_string()) + TOKENS_PER_MESSAGE;
        Self {
            first: Counted::new(&counter, first),
            counter,
            window,
            masking,
            fixed_tokens,
            cut_note: None,
            turns: Vec::new(),
            masked_before: 0,
            elided_before: 0,
            dropped_before: 0,
            calibration: None,
            safety: 1.0,
            last_unscaled: 0,
        }
    }

    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    /// The model's reply of a new turn: the canonical JSON of a usable reply, or the text that
    /// stands for an unusable one.
    pub(crate) fn push_reply(&mut self, text: String) {
        let reply_value = serde_json::from_str::<Value>(&text)
            .ok()
            .filter(|value| value.get("tool_calls").is_some());
        self.turns.push(Turn {
            reply: Counted::new(&self.counter, text),
            reply_value,
            elided: None,
            followup: None,
        });
    }

    /// The results of the last reply's calls.
    pub(crate) fn push_results(&mut self, results: Vec<ToolResult>) {
        let whole = Counted::new(&self.counter, render_results(&results, |result| result.output.clone()));
        self.set_followup(Followup::Results {
            results,
            whole,
            masked: None,
            cut: None,
        });
    }

    /// A message that answers the last reply without tool results (why it could not be used).
    pub(crate) fn push_note(&mut self, text: String) {
        let note = Counted::new(&self.counter, text);
        self.set_followup(Followup::Note(note));
    }

    fn set_followup(&mut self, followup: Followup) {
        if let Some(turn) = self.turns.last_mut() {
            turn.followup = Some(followup);
        }
    }

    /// The most a request may take after a squeeze: the prompt and task, and half of the room
    /// left for the conversation, so that the following turns fill the other half before the
    /// next squeeze.
    fn headroom_mark(&mut self) -> u64 {
        let base = self.scaled(self.fixed_tokens + self.first.tokens);
        base + self.room().saturating_sub(base) / 2
    }

    /// The next request: applies the masking step rule, then squeezes until it fits.
    pub(crate) fn prepare(&mut self) -> Result<Prepared, NoFit> {
        let len = self.turns.len();
        let keep_from = len.saturating_sub(KEEP_WHOLE_TURNS);
        if self.masking {
            let removed = self.maskable_tokens(self.masked_before, keep_from);
            if removed > MAX_CARRIED_TOKENS || (removed > MASK_STEP_TOKENS && removed >= self.resent_by_step(keep_from))
            {
                self.masked_before = keep_from;
            }
        }
        let mut estimate = self.estimate();
        if self.scaled(estimate) <= self.room() {
            return Ok(self.render(estimate));
        }
        // Over the window: one large step, so that the next turns only append.
        let mark = self.headroom_mark();
        while self.scaled(estimate) > mark && self.squeeze(SqueezeGoal::Headroom) {
            estimate = self.estimate();
        }
        while self.scaled(estimate) > self.room() {
            if !self.squeeze(SqueezeGoal::Fit) {
                return Err(NoFit {
                    window: self.window,
                    needed: self.scaled(estimate) + window::reply_reserve(self.window),
                });
            }
            estimate = self.estimate();
        }
        Ok(self.render(estimate))
    }

    /// Takes the next level of squeezing towards `goal`; `false` when none is left.
    fn squeeze(&mut self, goal: SqueezeGoal) -> bool {
        let len = self.turns.len();
        let keep_from = len.saturating_sub(KEEP_WHOLE_TURNS);
        let last = len.saturating_sub(1);
        if self.masked_before < keep_from && self.maskable_tokens(self.masked_before, keep_from) > 0 {
            self.masked_before = keep_from;
        } else if self.masked_before < last && self.maskable_tokens(self.masked_before, last) > 0 {
            self.masked_before = last;
        } else if self.elided_before < len {
            self.elided_before = len;
        } else if self.dropped_before < last {
            self.dropped_before += 1;
            self.masked_before = self.masked_before.max(self.dropped_before);
        } else {
            return goal == SqueezeGoal::Fit && self.cut_last_results();
        }
        true
    }

    /// Tokens the provider must read anew (not from its cache) after masking the results of
    /// `turns[masked_before..keep_from]`: everything after the first message that changes.
    fn resent_by_step(&mut self, keep_from: usize) -> u64 {
        let Some(first) = (self.masked_before..keep_from).find(|&index| self.maskable_tokens(index, index + 1) > 0)
        else {
            return 0;
        };
        let mut tokens = 0;
        for index in first..self.turns.len() {
            if index > first {
                tokens += self.reply(index).tokens;
            }
            tokens += self.followup_tokens(index, index < keep_from);
        }
        tokens
    }

    /// Tokens saved by masking the results of `turns[from..to]`.
    fn maskable_tokens(&mut self, from: usize, to: usize) -> u64 {
        (from..to.min(self.turns.len()))
            .map(|index| {
                let whole = self.followup_tokens(index, false);
                let masked = self.followup_tokens(index, true);
                whole.saturating_sub(masked)
            })
            .sum()
    }

    fn estimate(&mut self) -> u64 {
        let mut total = self.fixed_tokens + self.first.tokens;
        total += self.cut_note().map_or(0, |note| note.tokens);
        for index in self.dropped_before..self.turns.len() {
            total += self.reply(index).tokens;
            total += self.followup_tokens(index, index < self.masked_before);
        }
        self.last_unscaled = total;
        total
    }

    fn render(&mut self, estimated_tokens: u64) -> Prepared {
        let mut messages = vec![Message::user(self.first.text.clone())];
        let mut masked_results = 0;
        let mut mask_boundary = None;
        let mut cut_note = self.cut_note().map(|note| note.text.clone());
        for index in self.dropped_before..self.turns.len() {
            messages.push(Message::assistant(self.reply(index).text.clone()));
            let masked = index < self.masked_before;
            if let Some(mut text) = self.followup_text(index, masked) {
                // The note goes where the left-out turns were: with the first message after
                // the cut (a user message, so turns still alternate).
                if let Some(note) = cut_note.take() {
                    text = with_note(&text, note);
                }
                if masked && self.followup_tokens(index, false) > self.followup_tokens(index, true) {
                    masked_results += self.turns[index].result_count();
                    mask_boundary = Some(messages.len());
                }
                messages.push(Message::user(text));
            }
        }
        let mut breakpoints = vec![0];
        breakpoints.extend(mask_boundary);
        if messages.len() > 1 {
            breakpoints.push(messages.len() - 1);
        }
        breakpoints.dedup();
        Prepared {
            messages,
            estimated_tokens: self.scaled(estimated_tokens),
            masked_results,
            breakpoints,
        }
    }

    /// The note said at the cut, when turns were left out.
    fn cut_note(&mut self) -> Option<&Counted> {
        let dropped = self.dropped_before;
        if dropped == 0 {
            return None;
        }
        if self.cut_note.as_ref().is_none_or(|(at, _)| *at != dropped) {
            let note = format!(
                "[Turns 1 to {dropped} of this cycle were left out here to fit the model's context window. Your replies from here on say what was done; read files again where you need their content.]"
            );
            self.cut_note = Some((dropped, Counted::new(&self.counter, note)));
        }
        self.cut_note.as_ref().map(|(_, note)| note)
    }

    fn reply(&mut self, index: usize) -> &Counted {
        let elide = index < self.elided_before;
        let counter = self.counter;
        let turn = &mut self.turns[index];
        match (&turn.reply_value, elide) {
            (Some(value), true) => turn
                .elided
                .get_or_insert_with(|| Counted::new(&counter, elide_arguments(value).to_string())),
            _ => &turn.reply,
        }
    }

    fn followup_tokens(&mut self, index: usize, masked: bool) -> u64 {
        let counter = self.counter;
        match &mut self.turns[index].followup {
            None => 0,
            Some(Followup::Note(note)) => note.tokens,
            Some(Followup::Results {
                results,
                whole,
                masked: stub,
                cut,
            }) => {
                if masked {
                    stub.get_or_insert_with(|| Counted::new(&counter, render_results(results, stub_or_output)))
                        .tokens
                } else {
                    cut.as_ref().unwrap_or(whole).tokens
                }
            }
        }
    }

    fn followup_text(&mut self, index: usize, masked: bool) -> Option<String> {
        self.followup_tokens(index, masked);
        match &self.turns[index].followup {
            None => None,
            Some(Followup::Note(note)) => Some(note.text.clone()),
            Some(Followup::Results {
                whole,
                masked: stub,
                cut,
                ..
            }) => Some(match (masked, stub) {
                (true, Some(stub)) => stub.text.clone(),
                _ => cut.as_ref().unwrap_or(whole).text.clone(),
            }),
        }
    }

    /// The last squeeze: cut the last turn's results to what is left of the room. `false`
    /// when they are already cut or nothing would be left for them.
    fn cut_last_results(&mut self) -> bool {
        let Some(last) = self.turns.len().checked_sub(1) else {
            return false;
        };
        let own = self.followup_tokens(last, false);
        let others = self.estimate().saturating_sub(own);
        let room = (self.room() as f64 / self.scale()) as u64;
        let allowed = room.saturating_sub(others);
        let counter = self.counter;
        let Some(Followup::Results {
            results, whole, cut, ..
        }) = &mut self.turns[last].followup
        else {
            return false;
        };
        if cut.is_some() || allowed < 64 {
            return false;
        }
        // Bytes per token of this very text, to turn the allowance into bytes.
        let ratio = whole.text.len() as f64 / whole.tokens.max(1) as f64;
        let overhead: usize = whole.text.len() - results.iter().map(|r| r.output.len()).sum::<usize>();
        let budget = ((allowed as f64 * ratio * 0.9) as usize).saturating_sub(overhead);
        let per_result = budget / results.len().max(1);
        let text = render_results(results, |result| cut_output(&result.output, per_result));
        *cut = Some(Counted::new(&counter, text));
        true
    }
}

/// `message` with `note` added: as a `note` field when the message is a JSON object (tool
/// results, a parse error), so that it stays one; else as a line before it.
fn with_note(message: &str, note: String) -> String {
    match serde_json::from_str::<Value>(message) {
        Ok(Value::Object(mut fields)) => {
            fields.insert("note".to_owned(), Value::String(note));
            Value::Object(fields).to_string()
        }
        _ => format!("{note}\n\n{message}"),
    }
}

impl Turn {
    fn result_count(&self) -> usize {
        match &self.followup {
            Some(Followup::Results { results, .. }) => results
                .iter()
                .filter(|result| result.output.len() >= MIN_MASKED_BYTES)
                .count(),
            _ => 0,
        }
    }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
