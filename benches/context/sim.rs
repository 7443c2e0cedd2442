//! A loopback model server for the benchmark: it serves the scripted replies in order as the
//! provider's own streamed bodies, and simulates the provider's prompt cache to report the
//! usage the real API would.
//!
//! A request is read as a sequence of blocks (the reply schema, the system prompt, then each
//! message), each counted with the o200k tokenizer (plus 4 tokens of framing). The cache:
//! - OpenAI: a request's cached tokens are its longest common prefix with any earlier request,
//!   rounded down to a multiple of 128 tokens, and none below 1,024 (OpenAI's documented
//!   granularity and minimum). No write charge.
//! - Anthropic: only prefixes ending at a `cache_control` breakpoint are written. A request
//!   reads the longest earlier-written prefix it starts with that ends within 20 blocks before
//!   one of its own breakpoints (the API's lookback), writes everything from there to its last
//!   breakpoint (when that prefix holds at least 1,024 tokens, the minimum for Sonnet), and
//!   pays the rest as plain input.
//!
//! A request larger than the window the server is given is refused with OpenAI's
//! `context_length_exceeded` error and counted.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use serde_json::{Value, json};
use wiremock::{Request, Respond, ResponseTemplate};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

/// One request as the simulated provider billed it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Billed {
    pub total: u64,
    pub cached: u64,
    pub written: u64,
}

impl Billed {
    pub fn uncached(&self) -> u64 {
        self.total - self.cached - self.written
    }
}

#[derive(Default)]
struct State {
    served: usize,
    billed: Vec<Billed>,
    over_window: usize,
    /// OpenAI: every earlier request's block hashes (prefix-chained) and cumulative tokens.
    earlier: Vec<Vec<(u64, u64)>>,
    /// Anthropic: prefix hashes written at breakpoints.
    written: HashSet<u64>,
    tokens: HashMap<u64, u64>,
}

pub struct SimModel {
    api: Api,
    replies: Vec<String>,
    window: Option<u64>,
    state: Mutex<State>,
}

/// A block of the request and whether it carries a cache breakpoint.
struct Block {
    text: String,
    marked: bool,
}

impl SimModel {
    pub fn new(api: Api, replies: Vec<String>, window: Option<u64>) -> Self {
        Self {
            api,
            replies,
            window,
            state: Mutex::new(State::default()),
        }
    }

    /// What each request was billed, in order, and how many were over the window.
    pub fn billed(&self) -> (Vec<Billed>, usize) {
        let state = self.state.lock().expect("lock");
        (state.billed.clone(), state.over_window)
    }

    fn blocks(&self, body: &Value) -> Vec<Block> {
        let mut blocks = Vec::new();
        let marked = |value: &Value| value.get("cache_control").is_some();
        match self.api {
            Api::OpenAi => {
                blocks.push(Block {
                    text: body["response_format"].to_string(),
                    marked: false,
                });
                for message in body["messages"].as_array().into_iter().flatten() {
                    let text = format!(
                        "{}\n{}",
                        message["role"].as_str().unwrap_or(""),
                        message["content"].as_str().unwrap_or("")
                    );
                    blocks.push(Block { text, marked: false });
                }
            }
            Api::Anthropic => {
                blocks.push(Block {
                    text: body["output_config"].to_string(),
                    marked: false,
                });
                for block in body["system"].as_array().into_iter().flatten() {
                    blocks.push(Block {
                        text: format!("system\n{}", block["text"].as_str().unwrap_or("")),
                        marked: marked(block),
                    });
                }
                for message in body["messages"].as_array().into_iter().flatten() {
                    for block in message["content"].as_array().into_iter().flatten() {
                        let text = format!(
                            "{}\n{}",
                            message["role"].as_str().unwrap_or(""),
                            block["text"].as_str().unwrap_or("")
                        );
                        blocks.push(Block {
                            text,
                            marked: marked(block),
                        });
                    }
                }
            }
        }
        blocks
    }

    /// (prefix hash, cumulative tokens) at the end of each block.
    fn prefixes(state: &mut State, blocks: &[Block]) -> Vec<(u64, u64)> {
        let bpe = tiktoken_rs::o200k_base_singleton();
        let mut chain = 0u64;
        let mut total = 0u64;
        blocks
            .iter()
            .map(|block| {
                let mut hasher = DefaultHasher::new();
                block.text.hash(&mut hasher);
                let own = hasher.finish();
                let tokens = *state
                    .tokens
                    .entry(own)
                    .or_insert_with(|| bpe.encode_ordinary(&block.text).len() as u64 + 4);
                let mut hasher = DefaultHasher::new();
                (chain, own).hash(&mut hasher);
                chain = hasher.finish();
                total += tokens;
                (chain, total)
            })
            .collect()
    }

    fn bill(&self, state: &mut State, blocks: &[Block]) -> Billed {
        let prefixes = Self::prefixes(state, blocks);
        let total = prefixes.last().map_or(0, |(_, tokens)| *tokens);
        match self.api {
            Api::OpenAi => {
                let common = state
                    .earlier
                    .iter()
                    .map(|earlier| {
                        let same = earlier.iter().zip(&prefixes).take_while(|(a, b)| a.0 == b.0).count();
                        if same == 0 { 0 } else { prefixes[same - 1].1 }
                    })
                    .max()
                    .unwrap_or(0);
                let cached = if total >= 1024 && common >= 1024 {
                    common / 128 * 128
                } else {
                    0
                };
                state.earlier.push(prefixes.clone());
                Billed {
                    total,
                    cached,
                    written: 0,
                }
            }
            Api::Anthropic => {
                let breakpoints: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].marked).collect();
                let read = breakpoints
                    .iter()
                    .flat_map(|&b| b.saturating_sub(20)..=b)
                    .filter(|&j| state.written.contains(&prefixes[j].0))
                    .map(|j| prefixes[j].1)
                    .max()
                    .unwrap_or(0);
                let last = breakpoints.last().map_or(0, |&b| prefixes[b].1);
                let written = if last >= 1024 { last.saturating_sub(read) } else { 0 };
                for &b in &breakpoints {
                    if prefixes[b].1 >= 1024 {
                        state.written.insert(prefixes[b].0);
                    }
                }
                Billed {
                    total,
                    cached: read,
                    written,
                }
            }
        }
    }

    fn reply(&self, content: &str, billed: Billed) -> ResponseTemplate {
        let body = match self.api {
            Api::OpenAi => {
                let chunk = |delta: Value, finish: Value, usage: Value| {
                    json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
                           "choices": if usage.is_null() { json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]) } else { json!([]) },
                           "usage": usage})
                };
                let usage = json!({"prompt_tokens": billed.total, "completion_tokens": 200, "total_tokens": billed.total + 200,
                                   "prompt_tokens_details": {"cached_tokens": billed.cached}});
                [
                    chunk(
                        json!({"role": "assistant", "content": content}),
                        Value::Null,
                        Value::Null,
                    ),
                    chunk(json!({}), json!("stop"), Value::Null),
                    chunk(json!({}), Value::Null, usage),
                ]
                .iter()
                .map(|event| format!("data: {event}\n\n"))
                .collect::<String>()
                    + "data: [DONE]\n\n"
            }
            Api::Anthropic => {
                let events = [
                    json!({"type": "message_start", "message": {"id": "msg_bench", "type": "message", "role": "assistant",
                        "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
                        "usage": {"input_tokens": billed.uncached(), "cache_read_input_tokens": billed.cached,
                                  "cache_creation_input_tokens": billed.written, "output_tokens": 1}}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": content}}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 200}}),
                    json!({"type": "message_stop"}),
                ];
                events
                    .iter()
                    .map(|event| format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or("")))
                    .collect()
            }
        };
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
    }
}

impl Respond for SimModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return ResponseTemplate::new(400);
        };
        let blocks = self.blocks(&body);
        let mut state = self.state.lock().expect("lock");
        let billed = self.bill(&mut state, &blocks);
        if self.window.is_some_and(|window| billed.total > window) {
            state.over_window += 1;
            return ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": format!("This model's maximum context length is {} tokens. However, your messages resulted in {} tokens.", self.window.unwrap_or(0), billed.total),
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}));
        }
        state.billed.push(billed);
        let content = self
            .replies
            .get(state.served)
            .cloned()
            .unwrap_or_else(|| json!({"plan": "stop", "tool_calls": [{"tool_name": "finish", "arguments": {"status": "completed", "summary": "script ended"}}]}).to_string());
        state.served += 1;
        self.reply(&content, billed)
    }
}
