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
//!   around the object, JSON5 syntax, field-name aliases and stringified arguments. Anything that
//!   would need a guess (two replies, a cut-off reply, arguments that are not an object) is an
//!   error whose text tells the model exactly what to fix; callers append [`EXPECTED_SHAPE`].
//! - A successful parse has at least one call, every call has a non-empty tool name and an
//!   object of arguments, and [`ModelReply::to_json`] is strict JSON that parses back to the same
//!   value, so conversation history never carries the model's sloppy original forward.

use serde_json::{Map, Value};

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub tool_name: String,
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// A whole model reply: the plan it stated and the calls to run, in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelReply {
    pub plan: String,
    pub tool_calls: Vec<ToolCall>,
}

impl ModelReply {
    /// Canonical, valid JSON re-serialisation (what goes back into the conversation history).
    pub fn to_json(&self) -> String {
        // serde_json can only fail here on non-string map keys or a failing custom Serialize
        // impl, and this type has neither; the fallback exists only to keep the no-panic promise
        // without lying about the content being valid JSON.
        serde_json::to_string(self).unwrap_or_else(|_| String::from(r#"{"plan":"","tool_calls":[]}"#))
    }
}

/// Why a reply was rejected. The `Display` text is sent back to the model verbatim (followed by
/// [`EXPECTED_SHAPE`]), so each message names the exact problem and what to send instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
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

/// A one-paragraph description of the expected shape plus a minimal example, appended to re-ask messages.
pub const EXPECTED_SHAPE: &str = "Reply with exactly one JSON object and nothing else. It has two \
fields: \"plan\", a string with your short step-by-step plan, and \"tool_calls\", a non-empty \
array of calls, each an object {\"tool_name\": <tool name>, \"arguments\": {<argument name>: \
<value>, ...}}. The calls run in order and the first one that fails skips the rest. When the work \
is done, call finish. Example:\n\
{\"plan\": \"Read the README, then fix the typo.\", \"tool_calls\": [{\"tool_name\": \
\"read_file\", \"arguments\": {\"path\": \"README.md\"}}]}";

/// Deeper than any legitimate reply (reply > tool_calls > call > arguments > a few levels of
/// value), and shallow enough that the recursive JSON5 parser and `Value`'s recursive drop stay
/// far from the stack limit even on small test-thread stacks.
const MAX_NESTING: usize = 64;

/// Each `{` that never closes is rescanned from the next `{`, which is quadratic on inputs such as
/// a megabyte of `{`. Real replies have at most a few stray braces in their prose, so after this
/// many the rest of the text is not worth scanning.
const MAX_UNCLOSED_SPANS: usize = 64;

const NAME_KEYS: [&str; 4] = ["tool_name", "tool", "name", "function"];
const ARGUMENT_KEYS: [&str; 4] = ["arguments", "args", "parameters", "input"];

/// Parses one model reply: strict JSON first, then the lenient path (fences, surrounding prose,
/// JSON5), then checks the shape.
pub fn parse_reply(text: &str) -> Result<ModelReply, ReplyError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ReplyError::Empty);
    }
    // Structured-output providers land here, so the common case never touches the heuristics.
    // A JSON value that is not an object (an array of calls, a bare string) still goes through
    // the lenient path, which reports what it finds inside.
    let object = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(object)) => object,
        _ => extract_object(text)?,
    };
    reply_from_object(object)
}

/// Finds the single reply object in text that is not strict JSON.
fn extract_object(text: &str) -> Result<Map<String, Value>, ReplyError> {
    // Fenced blocks come first so that braces in the surrounding prose (`fn main() {}`) cannot
    // compete with the reply; if the fences hold no reply (say, a code sample), the reply may be
    // outside them, so the whole text is searched instead.
    let blocks: Vec<&str> = fenced_blocks(text)
        .into_iter()
        .filter(|block| block.contains('{'))
        .collect();
    if !blocks.is_empty() {
        let mut findings = Findings::default();
        for block in &blocks {
            findings.scan_region(block);
        }
        if !findings.replies.is_empty() || findings.truncated > 0 {
            return findings.decide();
        }
    }
    let mut findings = Findings::default();
    findings.scan_region(text);
    findings.decide()
}

/// What a scan for `{ ... }` candidates turned up.
#[derive(Default)]
struct Findings {
    /// Complete objects with a `plan` or `tool_calls` key.
    replies: Vec<Map<String, Value>>,
    /// Complete objects that do not look like a reply (prose examples, stray `{}`).
    others: Vec<Map<String, Value>>,
    /// Regions that end inside an object which is a valid prefix of JSON5.
    truncated: usize,
    too_deep: bool,
    /// First parse failure of a candidate that mentions `tool_calls`.
    invalid_reply: Option<String>,
    /// First parse failure of any other candidate.
    invalid_other: Option<String>,
}

impl Findings {
    fn scan_region(&mut self, region: &str) {
        let bytes = region.as_bytes();
        let mut pos = 0;
        let mut unclosed = 0;
        while let Some(offset) = bytes.get(pos..).and_then(|rest| rest.iter().position(|&b| b == b'{')) {
            let start = pos + offset;
            let span = scan_object(bytes, start);
            if span.closed {
                pos = span.end;
            } else {
                // An unclosed `{` may be a stray brace in prose with the real object after it,
                // so scanning resumes just past it rather than giving up.
                pos = start + 1;
                unclosed += 1;
            }
            // Spans start and end on ASCII bytes, so they are char boundaries; `get` keeps the
            // no-panic promise even if that reasoning were ever wrong.
            let Some(candidate) = region.get(span.start..span.end) else {
                continue;
            };
            if span.max_nesting > MAX_NESTING {
                self.too_deep = true;
            } else {
                match json5::from_str::<Value>(candidate) {
                    Ok(Value::Object(object)) => {
                        if is_reply_like(&object) {
                            self.replies.push(object);
                        } else {
                            self.others.push(object);
                        }
                    }
                    Ok(_) => {}
                    Err(err) if !span.closed && is_truncation(&err, candidate) => {
                        // The unclosed span runs to the end of the region, so every later
                        // candidate is a piece of this cut-off object, not a reply of its own.
                        self.truncated += 1;
                        return;
                    }
                    Err(err) => {
                        let slot = if candidate.contains("tool_calls") {
                            &mut self.invalid_reply
                        } else {
                            &mut self.invalid_other
                        };
                        if slot.is_none() {
                            *slot = Some(describe_json5_error(&err, candidate, "the object's opening brace"));
                        }
                    }
                }
            }
            if unclosed >= MAX_UNCLOSED_SPANS {
                return;
            }
        }
    }

    fn decide(mut self) -> Result<Map<String, Value>, ReplyError> {
        // A complete reply next to a cut-off one is still two replies: picking either would be
        // a guess about what the model meant.
        let candidates = self.replies.len() + self.truncated;
        if candidates >= 2 {
            return Err(ReplyError::MultipleObjects { count: candidates });
        }
        if let Some(reply) = self.replies.pop() {
            return Ok(reply);
        }
        if self.truncated > 0 {
            return Err(ReplyError::Truncated);
        }
        if self.too_deep {
            return Err(ReplyError::TooDeep { limit: MAX_NESTING });
        }
        if let Some(detail) = self.invalid_reply {
            return Err(ReplyError::InvalidJson { detail });
        }
        if self.others.len() >= 2 {
            return Err(ReplyError::MultipleObjects {
                count: self.others.len(),
            });
        }
        // A lone object without reply fields is returned so that the shape check can say which
        // field is missing, which helps the model more than "no JSON object".
        if let Some(object) = self.others.pop() {
            return Ok(object);
        }
        if let Some(detail) = self.invalid_other {
            return Err(ReplyError::InvalidJson { detail });
        }
        Err(ReplyError::NoJsonObject)
    }
}

fn is_reply_like(object: &Map<String, Value>) -> bool {
    object.contains_key("tool_calls") || object.contains_key("plan")
}

/// Extent of one `{ ... }` candidate found by [`scan_object`].
struct Span {
    start: usize,
    end: usize,
    closed: bool,
    max_nesting: usize,
}

/// Scans from the `{` at `start` to its matching `}`, skipping strings of both quote kinds and
/// JSON5 comments, and measures nesting so that over-deep input never reaches the recursive
/// parser. Works on bytes: every delimiter is ASCII, and UTF-8 continuation bytes never equal an
/// ASCII byte, so multi-byte characters pass through untouched.
fn scan_object(bytes: &[u8], start: usize) -> Span {
    let mut braces = 0usize;
    let mut nesting = 0usize;
    let mut max_nesting = 0usize;
    let mut quote: Option<u8> = None;
    let mut i = start;
    while let Some(&b) = bytes.get(i) {
        if let Some(q) = quote {
            if b == b'\\' {
                i += 1;
            } else if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match b {
            b'"' | b'\'' => quote = Some(b),
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = find_from(bytes, i + 2, b"\n").unwrap_or(bytes.len());
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = find_from(bytes, i + 2, b"*/").map_or(bytes.len(), |at| at + 2);
                continue;
            }
            b'{' | b'[' => {
                nesting += 1;
                max_nesting = max_nesting.max(nesting);
                if b == b'{' {
                    braces += 1;
                }
            }
            b'}' | b']' => {
                nesting = nesting.saturating_sub(1);
                if b == b'}' {
                    braces = braces.saturating_sub(1);
                    if braces == 0 {
                        return Span {
                            start,
                            end: i + 1,
                            closed: true,
                            max_nesting,
                        };
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    Span {
        start,
        end: bytes.len(),
        closed: false,
        max_nesting,
    }
}

fn find_from(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|at| from + at)
}

/// True when the parser ran out of input rather than meeting a wrong character, i.e. the text is
/// a valid beginning of an object. This is what separates a cut-off reply from a stray `{` in
/// prose, which fails on the next character instead.
fn is_truncation(err: &json5::Error, text: &str) -> bool {
    use json5::ErrorCode as C;
    match err.code() {
        Some(
            C::EofParsingArray
            | C::EofParsingBool
            | C::EofParsingComment
            | C::EofParsingEscapeSequence
            | C::EofParsingIdentifier
            | C::EofParsingNull
            | C::EofParsingNumber
            | C::EofParsingObject
            | C::EofParsingString
            | C::EofParsingValue,
        ) => true,
        // A number cut mid-exponent (`1e`) is reported as a bad literal at its start; when that
        // literal is the last thing in the text it is a cut, not a mistake.
        _ => err.position().is_some_and(|position| {
            let offset = offset_of(text, position);
            text.get(offset..).is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            })
        }),
    }
}

/// Byte offset of a json5 line/column position, so the error can quote the text around it.
fn offset_of(text: &str, position: json5::Position) -> usize {
    let mut line = 0;
    let mut column = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if line == position.line && column == position.column {
            return at;
        }
        match c {
            '\r' if chars.peek().is_some_and(|&(_, next)| next == '\n') => {
                chars.next();
                line += 1;
                column = 0;
            }
            '\n' | '\r' | '\u{2028}' | '\u{2029}' => {
                line += 1;
                column = 0;
            }
            _ => column += 1,
        }
    }
    text.len()
}

/// The parser's message plus the text around the problem: line and column alone are hard for a
/// model to map back onto its own output, a quoted excerpt is not.
fn describe_json5_error(err: &json5::Error, text: &str, origin: &str) -> String {
    let Some(position) = err.position() else {
        return err.to_string();
    };
    let offset = offset_of(text, position);
    let before: String = {
        let head = text.get(..offset).unwrap_or_default();
        let mut tail: Vec<char> = head.chars().rev().take(30).collect();
        tail.reverse();
        tail.into_iter().collect()
    };
    let after: String = text.get(offset..).unwrap_or_default().chars().take(30).collect();
    let excerpt = format!("{before}{after}").replace('\r', "").replace('\n', "\\n");
    format!("{err} (counting from {origin}), near `{excerpt}`")
}

/// Contents of markdown code fences (with or without a language tag). A fence left open, as in
/// a reply cut off by the length limit, runs to the end of the text so truncation is still seen.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut open: Option<usize> = None;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let this_line = line_start;
        line_start += line.len();
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        match open {
            None => {
                let Some(rest) = trimmed.strip_prefix("```") else {
                    continue;
                };
                // Some models put the object on the fence line itself: ```json {...}```
                match rest.find('{') {
                    Some(brace) => {
                        let start = this_line + indent + 3 + brace;
                        let body = rest.get(brace..).unwrap_or_default();
                        match body.trim_end().strip_suffix("```") {
                            Some(inner) => {
                                if let Some(block) = text.get(start..start + inner.len()) {
                                    blocks.push(block);
                                }
                            }
                            None => open = Some(start),
                        }
                    }
                    None => open = Some(line_start),
                }
            }
            Some(start) => {
                let close = if trimmed.starts_with("```") {
                    Some(this_line + indent)
                } else if trimmed.ends_with("```") {
                    line.rfind("```").map(|at| this_line + at)
                } else {
                    None
                };
                if let Some(end) = close {
                    if let Some(block) = text.get(start..end) {
                        blocks.push(block);
                    }
                    open = None;
                }
            }
        }
    }
    if let Some(block) = open.and_then(|start| text.get(start..)) {
        blocks.push(block);
    }
    blocks
}

/// Checks the reply shape and normalises the aliases real models use.
fn reply_from_object(mut object: Map<String, Value>) -> Result<ModelReply, ReplyError> {
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
        None => return Err(ReplyError::MissingToolCalls),
        Some(Value::Array(calls)) => calls,
        Some(other) => {
            return Err(ReplyError::ToolCallsNotArray {
                found: crate::tools::args::type_name(&other).to_owned(),
            });
        }
    };
    if calls.is_empty() {
        return Err(ReplyError::NoToolCalls);
    }
    let tool_calls = calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| tool_call(index, call))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ModelReply { plan, tool_calls })
}

fn tool_call(index: usize, call: Value) -> Result<ToolCall, ReplyError> {
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
        Some(Value::String(name)) if !name.trim().is_empty() => name.trim().to_owned(),
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
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(arguments)) => return Ok(arguments),
        Ok(other) => {
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
    match json5::from_str::<Value>(trimmed) {
        Ok(Value::Object(arguments)) => Ok(arguments),
        Ok(other) => Err(not_object(format!(
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// What a case should produce.
    enum Expect {
        /// Parsed calls as (tool name, argument key, expected string value of that argument).
        Calls(&'static [(&'static str, &'static str, &'static str)]),
        /// An error accepted by the predicate.
        Error(fn(&ReplyError) -> bool),
    }

    struct Case {
        name: &'static str,
        input: &'static str,
        expect: Expect,
    }

    const VALID: &str = r#"{"plan": "Read the README, then fix the typo.", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "README.md"}}, {"tool_name": "edit_file", "arguments": {"path": "README.md", "old_text": "teh", "new_text": "the"}}]}"#;

    fn cases() -> Vec<Case> {
        use Expect::{Calls, Error};
        vec![
            Case {
                name: "plain valid JSON",
                input: VALID,
                expect: Calls(&[("read_file", "path", "README.md"), ("edit_file", "new_text", "the")]),
            },
            Case {
                name: "fence with language tag",
                input: "```json\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}]}\n```",
                expect: Calls(&[("read_file", "path", "a.txt")]),
            },
            Case {
                name: "fence without language tag",
                input: "```\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"list_files\", \"arguments\": {\"path\": \"src\"}}]}\n```\n",
                expect: Calls(&[("list_files", "path", "src")]),
            },
            Case {
                name: "fence on a single line",
                input: "```json {\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}]}```",
                expect: Calls(&[("read_file", "path", "b")]),
            },
            Case {
                name: "prose and a code sample around a fenced reply",
                input: "Here's the fix for `fn main() {}` as requested:\n\n```json\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}]}\n```\nLet me know if that's OK.",
                expect: Calls(&[("read_file", "path", "src/main.rs")]),
            },
            Case {
                name: "fenced code sample before an unfenced reply",
                input: "The function looks like:\n```rust\nfn main() {}\n```\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}]}",
                expect: Calls(&[("read_file", "path", "src/main.rs")]),
            },
            Case {
                name: "text before and after",
                input: "Sure! I'll start by reading the file.\n{\"plan\": \"read\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"Cargo.toml\"}}]}\nI hope that's what you wanted.",
                expect: Calls(&[("read_file", "path", "Cargo.toml")]),
            },
            Case {
                name: "stray unclosed brace in prose before the reply",
                input: "I will change `fn main() {` first.\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}]}",
                expect: Calls(&[("read_file", "path", "src/main.rs")]),
            },
            Case {
                name: "single quotes",
                input: "{'plan': 'Read it', 'tool_calls': [{'tool_name': 'read_file', 'arguments': {'path': 'it\\'s.md'}}]}",
                expect: Calls(&[("read_file", "path", "it's.md")]),
            },
            Case {
                name: "trailing commas",
                input: "{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"x\",},},],}",
                expect: Calls(&[("read_file", "path", "x")]),
            },
            Case {
                name: "line and block comments",
                input: "{\n  // don't forget the plan\n  \"plan\": \"p\", /* the calls { */\n  \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"y\"}}]\n}",
                expect: Calls(&[("read_file", "path", "y")]),
            },
            Case {
                name: "unquoted keys",
                input: "{plan: 'p', tool_calls: [{tool_name: 'finish', arguments: {status: 'completed', summary: 'done'}}]}",
                expect: Calls(&[("finish", "status", "completed")]),
            },
            Case {
                name: "reply cut off mid-object",
                input: "{\"plan\": \"write it\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}, {\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"big.txt\", \"content\": \"lorem ipsum dolor",
                expect: Error(|e| matches!(e, ReplyError::Truncated)),
            },
            Case {
                name: "reply cut off inside an open fence",
                input: "```json\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"a\", \"content\": \"fn main() {\\n",
                expect: Error(|e| matches!(e, ReplyError::Truncated)),
            },
            Case {
                name: "reply cut off after a key",
                input: "{\"plan\": \"p\", \"tool_calls\"",
                expect: Error(|e| matches!(e, ReplyError::Truncated)),
            },
            Case {
                name: "two objects one after the other",
                input: "{\"plan\": \"a\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]}\n{\"plan\": \"b\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}]}",
                expect: Error(|e| matches!(e, ReplyError::MultipleObjects { count: 2 })),
            },
            Case {
                name: "two fenced objects",
                input: "```json\n{\"plan\": \"a\", \"tool_calls\": [{\"tool\": \"read_file\", \"args\": {\"path\": \"a\"}}]}\n```\nand then\n```json\n{\"plan\": \"b\", \"tool_calls\": [{\"tool\": \"read_file\", \"args\": {\"path\": \"b\"}}]}\n```",
                expect: Error(|e| matches!(e, ReplyError::MultipleObjects { count: 2 })),
            },
            Case {
                name: "a complete reply followed by a cut-off second reply",
                input: "{\"plan\": \"a\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]}\n{\"plan\": \"b\", \"tool_ca",
                expect: Error(|e| matches!(e, ReplyError::MultipleObjects { count: 2 })),
            },
            Case {
                name: "tool instead of tool_name",
                input: r#"{"plan": "p", "tool_calls": [{"tool": "read_file", "arguments": {"path": "t"}}]}"#,
                expect: Calls(&[("read_file", "path", "t")]),
            },
            Case {
                name: "name instead of tool_name",
                input: r#"{"plan": "p", "tool_calls": [{"name": "search_files", "arguments": {"pattern": "TODO"}}]}"#,
                expect: Calls(&[("search_files", "pattern", "TODO")]),
            },
            Case {
                name: "function instead of tool_name",
                input: r#"{"plan": "p", "tool_calls": [{"function": "read_file", "input": {"path": "f"}}]}"#,
                expect: Calls(&[("read_file", "path", "f")]),
            },
            Case {
                name: "args instead of arguments",
                input: r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "args": {"path": "g"}}]}"#,
                expect: Calls(&[("read_file", "path", "g")]),
            },
            Case {
                name: "parameters instead of arguments",
                input: r#"{"plan": "p", "tool_calls": [{"name": "ask_question", "parameters": {"question_text": "Which branch?"}}]}"#,
                expect: Calls(&[("ask_question", "question_text", "Which branch?")]),
            },
            Case {
                name: "stringified arguments",
                input: r##"{"plan": "p", "tool_calls": [{"tool_name": "write_file", "arguments": "{\"path\": \"a.md\", \"content\": \"# Title\\n\"}"}]}"##,
                expect: Calls(&[("write_file", "content", "# Title\n")]),
            },
            Case {
                name: "OpenAI nested function call with stringified arguments",
                input: r#"{"plan": "p", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"n.rs\"}"}}]}"#,
                expect: Calls(&[("read_file", "path", "n.rs")]),
            },
            Case {
                name: "stringified arguments that are not an object",
                input: r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": "README.md"}]}"#,
                expect: Error(|e| matches!(e, ReplyError::ArgumentsNotObject { index: 0, .. })),
            },
            Case {
                name: "arguments that are an array, in the second call",
                input: r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}, {"tool_name": "read_file", "arguments": ["b"]}]}"#,
                expect: Error(|e| matches!(e, ReplyError::ArgumentsNotObject { index: 1, .. })),
            },
            Case {
                name: "missing arguments means none",
                input: r#"{"plan": "p", "tool_calls": [{"tool_name": "list_files"}]}"#,
                expect: Calls(&[("list_files", "", "")]),
            },
            Case {
                name: "missing plan",
                input: r#"{"tool_calls": [{"tool_name": "finish", "arguments": {"status": "no_tasks", "summary": "nothing"}}]}"#,
                expect: Calls(&[("finish", "status", "no_tasks")]),
            },
            Case {
                name: "empty reply",
                input: "",
                expect: Error(|e| matches!(e, ReplyError::Empty)),
            },
            Case {
                name: "whitespace-only reply",
                input: " \n\t ",
                expect: Error(|e| matches!(e, ReplyError::Empty)),
            },
            Case {
                name: "prose only",
                input: "I have read the file and everything looks fine. Nothing to do!",
                expect: Error(|e| matches!(e, ReplyError::NoJsonObject)),
            },
            Case {
                name: "braces and escaped quotes inside strings",
                input: r#"Writing the file now: {"plan": "add a \"{\" brace", "tool_calls": [{"tool_name": "write_file", "arguments": {"path": "src/lib.rs", "content": "fn f() { let s = \"}\"; let t = '{'; }\n"}}]} done"#,
                expect: Calls(&[("write_file", "content", "fn f() { let s = \"}\"; let t = '{'; }\n")]),
            },
            Case {
                name: "braces and double quotes inside single-quoted strings",
                input: r#"{'plan': 'p', 'tool_calls': [{'tool_name': 'write_file', 'arguments': {'path': 'a.json', 'content': '{"k": "}"}',}},],}"#,
                expect: Calls(&[("write_file", "content", r#"{"k": "}"}"#)]),
            },
            Case {
                name: "non-ASCII content and prose",
                input: "Voilà — je lis le fichier : {\"plan\": \"Grüße, 世界 🚀\", \"tool_calls\": [{\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"docs/ñ.md\", \"content\": \"naïve café 🚀 {}\"}}]} ✅",
                expect: Calls(&[("write_file", "content", "naïve café 🚀 {}")]),
            },
            Case {
                name: "missing tool_calls",
                input: r#"{"plan": "I will read the README next."}"#,
                expect: Error(|e| matches!(e, ReplyError::MissingToolCalls)),
            },
            Case {
                name: "tool_calls not an array",
                input: r#"{"plan": "p", "tool_calls": {"tool_name": "read_file", "arguments": {"path": "a"}}}"#,
                expect: Error(|e| matches!(e, ReplyError::ToolCallsNotArray { .. })),
            },
            Case {
                name: "empty tool_calls",
                input: r#"{"plan": "all done", "tool_calls": []}"#,
                expect: Error(|e| matches!(e, ReplyError::NoToolCalls)),
            },
            Case {
                name: "call without a tool name",
                input: r#"{"plan": "p", "tool_calls": [{"arguments": {"path": "a"}}]}"#,
                expect: Error(|e| matches!(e, ReplyError::MissingToolName { index: 0 })),
            },
            Case {
                name: "a bare array of calls",
                input: r#"[{"tool_name": "read_file", "arguments": {"path": "a"}}]"#,
                expect: Error(|e| matches!(e, ReplyError::MissingToolCalls)),
            },
            Case {
                name: "syntax error JSON5 cannot repair",
                input: r#"{"plan": "p" "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}]}"#,
                expect: Error(|e| matches!(e, ReplyError::InvalidJson { detail } if detail.contains("tool_calls"))),
            },
            Case {
                name: "lone closing brace",
                input: "}",
                expect: Error(|e| matches!(e, ReplyError::NoJsonObject)),
            },
            Case {
                name: "lone opening brace",
                input: "{",
                expect: Error(|e| matches!(e, ReplyError::Truncated)),
            },
        ]
    }

    #[test]
    fn table_of_model_mistakes() {
        let mut failures = Vec::new();
        for case in cases() {
            let result = parse_reply(case.input);
            match (&case.expect, &result) {
                (Expect::Calls(expected), Ok(reply)) => {
                    let names: Vec<&str> = reply.tool_calls.iter().map(|c| c.tool_name.as_str()).collect();
                    let wanted: Vec<&str> = expected.iter().map(|(name, _, _)| *name).collect();
                    if names != wanted {
                        failures.push(format!("{}: calls {names:?}, wanted {wanted:?}", case.name));
                        continue;
                    }
                    for (call, (_, key, value)) in reply.tool_calls.iter().zip(expected.iter()) {
                        if key.is_empty() {
                            if !call.arguments.is_empty() {
                                failures.push(format!("{}: expected no arguments", case.name));
                            }
                        } else if call.arguments.get(*key).and_then(Value::as_str) != Some(*value) {
                            failures.push(format!(
                                "{}: {key} = {:?}, wanted {value:?}",
                                case.name,
                                call.arguments.get(*key)
                            ));
                        }
                    }
                }
                (Expect::Error(accepts), Err(err)) => {
                    if !accepts(err) {
                        failures.push(format!("{}: wrong error {err:?}", case.name));
                    }
                }
                (Expect::Calls(_), Err(err)) => {
                    failures.push(format!("{}: unexpected error: {err}", case.name));
                }
                (Expect::Error(_), Ok(reply)) => {
                    failures.push(format!("{}: unexpectedly parsed {reply:?}", case.name));
                }
            }
        }
        assert!(failures.is_empty(), "failing cases:\n{}", failures.join("\n"));
    }

    #[test]
    fn truncation_error_says_truncated_and_asks_for_shorter_reply() {
        let err =
            parse_reply(r#"{"plan": "p", "tool_calls": [{"tool_name": "write_file", "arguments": {"content": "abc"#)
                .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("truncated"), "{text}");
        assert!(text.contains("shorter"), "{text}");
    }

    #[test]
    fn error_messages_name_the_failing_call() {
        let err = parse_reply(
            r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}, {"tool_name": "read_file", "arguments": 7}]}"#,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("tool_calls[1]"), "{text}");
        assert!(text.contains("a number"), "{text}");
    }

    #[test]
    fn to_json_round_trips_through_serde_json() {
        let inputs = [
            VALID,
            "```json\n{'plan': 'Grüße \"quoted\" {braces}', tool_calls: [{tool: 'write_file', args: {path: 'a', content: 'x\\ny', issue: 12, draft: true, extra: null, nums: [1, 2.5, -3],},}],}\n```",
        ];
        for input in inputs {
            let reply = parse_reply(input).unwrap();
            let json = reply.to_json();
            let back: ModelReply = serde_json::from_str(&json).unwrap();
            assert_eq!(back, reply);
            // The canonical form is itself strict JSON, so it takes the fast path unchanged.
            assert_eq!(parse_reply(&json).unwrap(), reply);
        }
    }

    #[test]
    fn expected_shape_example_parses() {
        let example = EXPECTED_SHAPE
            .split_once("Example:")
            .map(|(_, example)| example)
            .unwrap();
        let reply = parse_reply(example).unwrap();
        assert_eq!(reply.tool_calls[0].tool_name, "read_file");
    }

    #[test]
    fn every_prefix_of_a_valid_reply_is_handled_without_panicking() {
        let samples = [
            VALID.to_owned(),
            format!("Voilà 🚀:\n```json\n{VALID}\n```\nfin ✅"),
            "{'plan': 'Grüße', /* c */ tool_calls: [{tool: 'write_file', args: {content: 'a\\'b{\"}', n: -1.5, ok: true, none: null,},},], // end\n}".to_owned(),
        ];
        for sample in &samples {
            let first_brace = sample.find('{').unwrap();
            let last_brace = sample.rfind('}').unwrap();
            for (at, _) in sample.char_indices().chain([(sample.len(), ' ')]) {
                let prefix = &sample[..at];
                let result = parse_reply(prefix);
                // Cut anywhere inside the object, the reply must be reported as truncated rather
                // than half-parsed or misdiagnosed.
                if at > first_brace && at <= last_brace {
                    assert_eq!(result, Err(ReplyError::Truncated), "prefix {prefix:?}");
                }
            }
            assert!(parse_reply(sample).is_ok());
        }
    }

    #[test]
    fn hostile_inputs_do_not_panic() {
        let deep_braces = "{".repeat(200_000);
        let deep_arrays = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let deep_object = format!("{}{}", "{\"a\":".repeat(5_000), "}".repeat(5_000));
        let deep_value = format!(
            "{{\"plan\": \"p\", \"tool_calls\": [{{\"tool_name\": \"x\", \"arguments\": {{\"a\": {}1{}}}}}]}} trailing",
            "[".repeat(1_000),
            "]".repeat(1_000)
        );
        let deep_string_args = format!(
            "{{\"plan\": \"p\", \"tool_calls\": [{{\"tool_name\": \"x\", \"arguments\": \"{}\"}}]}}",
            "{'a':".repeat(5_000)
        );
        let many_objects = "{}".repeat(50_000);
        let closing = "}]".repeat(100_000);
        let huge_content = format!(
            "```json\n{{\"plan\": \"p\", \"tool_calls\": [{{\"tool_name\": \"write_file\", \"arguments\": {{\"path\": \"big\", \"content\": \"{}\"}}}}]}}\n```",
            "é{}".repeat(300_000)
        );
        let inputs = [
            deep_braces.as_str(),
            deep_arrays.as_str(),
            deep_object.as_str(),
            deep_value.as_str(),
            deep_string_args.as_str(),
            many_objects.as_str(),
            closing.as_str(),
            huge_content.as_str(),
            "}{",
            "{{}",
            "{'",
            "{\"",
            "{/*",
            "{//",
            "{\"a\": \"\\",
            "{\"a\": \"\\u12",
            "{\"a\": 1e",
            "{\"a\": 99999999999999999999999999999999999999999999}",
            "{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"x\", \"arguments\": {\"n\": 1e999, \"m\": NaN, \"h\": 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF}}]}",
            "```",
            "```json {",
            "\u{FEFF}{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"x\"}]}",
            "\u{0}\u{1}{\u{0}}",
            "🚀{🚀}🚀",
            "'{' \"{\" {",
        ];
        for input in inputs {
            let _ = parse_reply(input);
        }
        assert_eq!(
            parse_reply(&deep_braces),
            Err(ReplyError::TooDeep { limit: MAX_NESTING })
        );
        assert!(parse_reply(&huge_content).is_ok());
        assert!(matches!(
            parse_reply(&many_objects),
            Err(ReplyError::MultipleObjects { .. })
        ));
    }
}
