//! The model's reply contract (DESIGN.md section 2) and the parser that enforces it.
//!
//! Why this exists: the whole agent depends on turning free model text into tool calls. Providers
//! that support structured output already return strict JSON, but the rest (local models,
//! OpenAI-compatible servers, replayed traces) wrap the object in code fences or prose, use
//! single quotes, leave trailing commas or comments, or spell field names the way their
//! function-calling training taught them. Rejecting all of that would burn turns on re-asks;
//! accepting anything would run calls the model did not mean. This module draws that line in
//! one place.
//!
//! What it guarantees:
//! - [`parse_reply`] never panics, whatever the input (non-ASCII, huge, unbalanced, deeply
//!   nested): nesting is measured by a flat scan before the recursive JSON5 parser sees the text.
//! - Leniency is limited to syntax and naming that cannot change meaning: code fences, prose
//!   around the object, JSON5 syntax, field-name aliases and stringified arguments, and the
//!   repairs listed in [`Repair`] (almost-JSON, calls without the wrapper, `<tool_call>` tags,
//!   namespaced tool names), each named in [`ModelReply::repairs`]. Anything that would need a
//!   guess (two replies, a cut-off reply, arguments that are not an object) is an error whose
//!   text tells the model exactly what to fix; callers append [`EXPECTED_SHAPE`].
//! - A successful parse has at least one call, every call has a non-empty tool name and an
//!   object of arguments, and [`ModelReply::to_json`] is strict JSON that parses back to the same
//!   value, so conversation history never carries the model's sloppy original forward.

use serde_json::{Map, Value};

mod lenient;
mod repairs;
mod rewrite;
mod tags;
mod unambiguous;

pub(crate) use repairs::Repair;

use lenient::{MAX_NESTING, describe_json5_error, extract_object, fenced_blocks, is_truncation, scan_object};
use unambiguous::Unambiguous;

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ToolCall {
    pub tool_name: String,
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// A whole model reply: the plan it stated and the calls to run, in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ModelReply {
    pub plan: String,
    pub tool_calls: Vec<ToolCall>,
    /// What the parser had to repair to read the reply; never part of the history.
    #[serde(skip)]
    pub repairs: Vec<Repair>,
}

impl ModelReply {
    /// Canonical, valid JSON re-serialisation (what goes back into the conversation history).
    pub(crate) fn to_json(&self) -> String {
        // serde_json can only fail here on non-string map keys or a failing custom Serialize
        // impl, and this type has neither; the fallback exists only to keep the no-panic promise
        // without lying about the content being valid JSON.
        serde_json::to_string(self).unwrap_or_else(|_| String::from(r#"{"plan":"","tool_calls":[]}"#))
    }
}

/// Why a reply was rejected. The `Display` text is sent back to the model verbatim (followed by
/// [`EXPECTED_SHAPE`]), so each message names the exact problem and what to send instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ReplyError {
    #[error("Your reply was empty. Send exactly one JSON object with \"plan\" and \"tool_calls\".")]
    Empty,

    #[error(
        "Your reply contains no JSON object (no `{{ ... }}` was found). Send exactly one JSON \
         object with \"plan\" and \"tool_calls\", and no other text."
    )]
    NoJsonObject,

    #[error(
        "Your reply looks truncated: it ends in the middle of a JSON object (a `{{` or a string is \
         never closed), probably because it hit the output length limit. Send a shorter reply: \
         fewer tool calls at once, and for a large file use edit_file on the part that changes \
         instead of write_file with the whole file."
    )]
    Truncated,

    #[error(
        "Your reply contains {count} JSON objects. Send exactly one object and put every tool \
         call in its \"tool_calls\" array."
    )]
    MultipleObjects { count: usize },

    #[error(
        "Your reply is not valid JSON: {detail}. Send one JSON object with double-quoted keys and \
         strings, commas between items, and every bracket closed."
    )]
    InvalidJson { detail: String },

    #[error(
        "Your reply nests objects and arrays more than {limit} levels deep. Tool arguments are \
         flat values (strings, numbers, booleans); send file content as a single string."
    )]
    TooDeep { limit: usize },

    #[error("\"plan\" must be a string, but it is {found}.")]
    PlanNotString { found: String },

    #[error(
        "The JSON object has no \"tool_calls\" field. Add \"tool_calls\": an array with at least \
         one call, each {{\"tool_name\": \"...\", \"arguments\": {{...}}}}."
    )]
    MissingToolCalls,

    #[error(
        "\"tool_calls\" must be an array of call objects, but it is {found}. Wrap the calls in \
         [ ], even when there is only one."
    )]
    ToolCallsNotArray { found: String },

    #[error(
        "\"tool_calls\" is empty. Every reply must call at least one tool; when the work is done, \
         call finish with status \"completed\" (or \"no_tasks\" when there is nothing to do)."
    )]
    NoToolCalls,

    #[error(
        "tool_calls[{index}] must be an object like {{\"tool_name\": \"...\", \"arguments\": \
         {{...}}}}, but it is {found}."
    )]
    CallNotObject { index: usize, found: String },

    #[error(
        "tool_calls[{index}] has no \"tool_name\" field. Give each call \"tool_name\" (the tool \
         to run) and \"arguments\" (an object)."
    )]
    MissingToolName { index: usize },

    #[error(
        "tool_calls[{index}].tool_name must be a non-empty string naming a tool, but it is \
         {found}."
    )]
    InvalidToolName { index: usize, found: String },

    #[error(
        "tool_calls[{index}].arguments must be a JSON object mapping argument names to values, \
         but it is {found}."
    )]
    ArgumentsNotObject { index: usize, found: String },
}

/// What the history holds in place of a reply that could not be used. Echoing the reply back
/// (even wrapped in a JSON string) taught weak models to copy the wrapper and nest it deeper
/// each turn; this text is fixed, so there is nothing of theirs to copy, and copying it is
/// harmless: it has no calls, so it is rejected with an error that says to call finish.
pub(crate) const UNUSABLE_REPLY_PLACEHOLDER: &str = r#"{"plan": "(unusable reply omitted)", "tool_calls": []}"#;

/// A one-paragraph description of the expected shape plus a minimal example, appended to re-ask messages.
pub(crate) const EXPECTED_SHAPE: &str = "Reply with exactly one JSON object and nothing else. It has two \
fields: \"plan\", a string with your short step-by-step plan, and \"tool_calls\", a non-empty \
array of calls, each an object {\"tool_name\": <tool name>, \"arguments\": {<argument name>: \
<value>, ...}}. The calls run in order and the first one that fails skips the rest. When the work \
is done, call finish. Example:\n\
{\"plan\": \"Read the README, then fix the typo.\", \"tool_calls\": [{\"tool_name\": \
\"read_file\", \"arguments\": {\"path\": \"README.md\"}}]}";

const NAME_KEYS: [&str; 4] = ["tool_name", "tool", "name", "function"];
const ARGUMENT_KEYS: [&str; 4] = ["arguments", "args", "parameters", "input"];

/// Tool-name prefixes that function-calling formats put before the name; stripping one of
/// these leaves the name the model meant. Any other dotted name is left whole.
const NAMESPACES: [&str; 6] = [
    "functions.",
    "functions:",
    "default_api.",
    "default_api:",
    "tools.",
    "tool.",
];

/// Parses one model reply: strict JSON first, then the lenient path (fences, surrounding prose,
/// JSON5, repairs), then checks the shape.
pub(crate) fn parse_reply(text: &str) -> Result<ModelReply, ReplyError> {
    parse_text(text, true)
}

/// `unwrap_string` allows one level of a reply sent as a JSON string; the string's content is
/// parsed without it, so a string in a string is not unwrapped again.
fn parse_text(text: &str, unwrap_string: bool) -> Result<ModelReply, ReplyError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ReplyError::Empty);
    }
    // Structured-output providers land here, so the common case never touches the heuristics.
    // A JSON value that is not an object goes through the lenient path unless it is an array of
    // calls or a string holding the reply.
    match serde_json::from_str::<Unambiguous>(trimmed) {
        Ok(Unambiguous(Value::Object(object))) => return reply_from_object(object, Vec::new()),
        Ok(Unambiguous(Value::Array(items))) if items.iter().all(is_call_like) && !items.is_empty() => {
            return reply_from_calls(String::new(), items, vec![Repair::BareCallArray]);
        }
        Ok(Unambiguous(Value::String(inner))) if unwrap_string && inner.trim_start().starts_with(['{', '[', '<']) => {
            let mut reply = parse_text(&inner, false)?;
            reply.repairs.insert(0, Repair::ReplyAsString);
            return Ok(reply);
        }
        _ => {}
    }
    if let Some(reply) = tags::parse_tagged(text) {
        return reply;
    }
    if let Some(reply) = bare_call_array(trimmed) {
        return reply;
    }
    let (object, repairs) = extract_object(text)?;
    reply_from_object(object, repairs)
}

/// An array of calls without the wrapper, alone or alone in a code fence, after repairs.
fn bare_call_array(trimmed: &str) -> Option<Result<ModelReply, ReplyError>> {
    let blocks = fenced_blocks(trimmed);
    let candidate = match blocks.as_slice() {
        [block] => block.trim(),
        _ => trimmed,
    };
    if !candidate.starts_with('[') {
        return None;
    }
    let rewritten = rewrite::rewrite(candidate);
    if rewritten.max_depth > MAX_NESTING {
        return None;
    }
    let items = match json5::from_str::<Unambiguous>(&rewritten.text) {
        Ok(Unambiguous(Value::Array(items))) => items,
        // A list of calls cut off: the calls before the cut are not all the model asked for.
        Err(err) if is_truncation(&err, &rewritten.text) => return Some(Err(ReplyError::Truncated)),
        _ => return None,
    };
    // An array that is the whole reply but holds something besides calls is answered here:
    // picking the calls out of it would be a guess about the rest.
    if let Some((index, item)) = items.iter().enumerate().find(|(_, item)| !is_call_like(item)) {
        return Some(Err(match item {
            Value::Object(_) => ReplyError::MissingToolName { index },
            other => ReplyError::CallNotObject {
                index,
                found: crate::tools::args::type_name(other).to_owned(),
            },
        }));
    }
    if items.is_empty() {
        return Some(Err(ReplyError::NoToolCalls));
    }
    let mut repairs = rewritten.repairs;
    repairs.push(Repair::BareCallArray);
    Some(reply_from_calls(String::new(), items, repairs))
}

/// An object that is one call: it names a tool under `tool_name`, or under another name key
/// next to an arguments key, or nests such an object under `function`. A lone `{"name": ...}`
/// is not enough, since plenty of objects have a name.
fn is_call_like(value: &Value) -> bool {
    let Value::Object(object) = value else {
        return false;
    };
    object.contains_key("tool_name")
        || (NAME_KEYS.iter().any(|key| object.contains_key(*key))
            && ARGUMENT_KEYS.iter().any(|key| object.contains_key(*key)))
        || object.get("function").is_some_and(|inner| {
            inner
                .as_object()
                .is_some_and(|inner| NAME_KEYS.iter().any(|key| inner.contains_key(*key)))
        })
}

/// Checks the reply shape and normalises the aliases real models use.
fn reply_from_object(mut object: Map<String, Value>, mut repairs: Vec<Repair>) -> Result<ModelReply, ReplyError> {
    let plan = match object.remove("plan") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(plan)) => plan,
        // A plan written as a list of steps carries the same meaning as the joined text.
        Some(Value::Array(steps)) if steps.iter().all(Value::is_string) => {
            steps.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n")
        }
        Some(other) => {
            return Err(ReplyError::PlanNotString {
                found: crate::tools::args::type_name(&other).to_owned(),
            });
        }
    };
    let calls = match object.remove("tool_calls") {
        None if is_call_like(&Value::Object(object.clone())) => {
            repairs.push(Repair::BareCall);
            vec![Value::Object(object)]
        }
        None => return Err(ReplyError::MissingToolCalls),
        Some(Value::Array(calls)) => calls,
        Some(call) if is_call_like(&call) => {
            repairs.push(Repair::ToolCallsObject);
            vec![call]
        }
        Some(other) => {
            return Err(ReplyError::ToolCallsNotArray {
                found: crate::tools::args::type_name(&other).to_owned(),
            });
        }
    };
    reply_from_calls(plan, calls, repairs)
}

fn reply_from_calls(plan: String, calls: Vec<Value>, mut repairs: Vec<Repair>) -> Result<ModelReply, ReplyError> {
    if calls.is_empty() {
        return Err(ReplyError::NoToolCalls);
    }
    let tool_calls = calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| tool_call(index, call, &mut repairs))
        .collect::<Result<Vec<_>, _>>()?;
    repairs.sort_unstable();
    repairs.dedup();
    Ok(ModelReply {
        plan,
        tool_calls,
        repairs,
    })
}

fn tool_call(index: usize, call: Value, repairs: &mut Vec<Repair>) -> Result<ToolCall, ReplyError> {
    let Value::Object(mut call) = call else {
        return Err(ReplyError::CallNotObject {
            index,
            found: crate::tools::args::type_name(&call).to_owned(),
        });
    };
    // OpenAI's native shape nests the call: {"type": "function", "function": {"name": ...,
    // "arguments": "{...}"}}. Unwrapping one level is unambiguous, so it is not a guess.
    let nested = match call.get_mut("function") {
        Some(Value::Object(inner)) if NAME_KEYS.iter().any(|key| inner.contains_key(*key)) => {
            Some(std::mem::take(inner))
        }
        _ => None,
    };
    if let Some(inner) = nested {
        call = inner;
    }

    let name = match NAME_KEYS.iter().find_map(|key| call.remove(*key)) {
        None => return Err(ReplyError::MissingToolName { index }),
        Some(Value::String(name)) if !name.trim().is_empty() => {
            let name = name.trim();
            match NAMESPACES.iter().find_map(|prefix| name.strip_prefix(prefix)) {
                Some(bare) if !bare.trim().is_empty() => {
                    repairs.push(Repair::NamespacedToolName);
                    bare.trim().to_owned()
                }
                _ => name.to_owned(),
            }
        }
        Some(other) => {
            return Err(ReplyError::InvalidToolName {
                index,
                found: match other {
                    Value::String(_) => String::from("an empty string"),
                    other => crate::tools::args::type_name(&other).to_owned(),
                },
            });
        }
    };

    // Missing arguments are an empty object, since tools whose arguments are all optional
    // (list_files) are legitimately called without any; the tool checks what it requires.
    let arguments = match ARGUMENT_KEYS.iter().find_map(|key| call.remove(*key)) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments,
        Some(Value::String(encoded)) => stringified_arguments(index, &encoded)?,
        Some(other) => {
            return Err(ReplyError::ArgumentsNotObject {
                index,
                found: crate::tools::args::type_name(&other).to_owned(),
            });
        }
    };
    Ok(ToolCall {
        tool_name: name,
        arguments,
    })
}

/// Arguments sent as a JSON string holding an object, the OpenAI function-calling habit.
fn stringified_arguments(index: usize, encoded: &str) -> Result<Map<String, Value>, ReplyError> {
    let trimmed = encoded.trim();
    if trimmed.is_empty() {
        return Ok(Map::new());
    }
    let not_object = |found: String| ReplyError::ArgumentsNotObject { index, found };
    match serde_json::from_str::<Unambiguous>(trimmed) {
        Ok(Unambiguous(Value::Object(arguments))) => return Ok(arguments),
        Ok(Unambiguous(other)) => {
            return Err(not_object(format!(
                "a string holding {} instead of an object",
                crate::tools::args::type_name(&other).to_owned()
            )));
        }
        Err(_) => {}
    }
    if !trimmed.starts_with('{') {
        return Err(not_object(String::from("a string that does not contain a JSON object")));
    }
    if scan_object(trimmed.as_bytes(), 0).max_nesting > MAX_NESTING {
        return Err(not_object(format!(
            "a string holding JSON nested more than {MAX_NESTING} levels deep"
        )));
    }
    match json5::from_str::<Unambiguous>(trimmed) {
        Ok(Unambiguous(Value::Object(arguments))) => Ok(arguments),
        Ok(Unambiguous(other)) => Err(not_object(format!(
            "a string holding {} instead of an object",
            crate::tools::args::type_name(&other).to_owned()
        ))),
        Err(err) => Err(not_object(format!(
            "a string that is not valid JSON ({})",
            describe_json5_error(&err, trimmed, "the start of the string")
        ))),
    }
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "protocol_repair_tests.rs"]
mod repair_tests;
