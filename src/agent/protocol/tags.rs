//! Calls written as `<tool_call>{...}</tool_call>` tags (the Hermes format many small open models
//! were trained on), one tag per call, instead of one reply object.
//!
//! Why this exists: such a reply says exactly which calls to run and in which order, so asking
//! again would only cost a turn. What it guarantees: every tag must hold one readable call (or a
//! whole reply) and be closed, and a reply object written next to the tags is two answers, which
//! is an error rather than a choice between them. Tags have no outer bracket, so a reply cut
//! right after a closing tag looks complete; the provider's length stop reason catches that
//! case, and such a reply is never used.

use serde_json::Value;

use super::lenient::{MAX_UNCLOSED_SPANS, extract_object, is_reply_like, scan_object};
use super::unambiguous::Unambiguous;
use super::{ModelReply, Repair, ReplyError, is_call_like, reply_from_calls, reply_from_object};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// `None` when the text has no `<tool_call>` tag; otherwise the reply the tags make, or why they
/// cannot be used. The text outside the tags is the plan.
pub(super) fn parse_tagged(text: &str) -> Option<Result<ModelReply, ReplyError>> {
    if !text.contains(OPEN) {
        return None;
    }
    // A tag written inside a JSON string (a reply that writes documentation about this very
    // format) is content, not a call: only tags outside every `{ ... }` count.
    let objects = object_spans(text);
    let first = find_outside(text, OPEN, 0, &objects)?;
    let mut outside = String::from(text.get(..first).unwrap_or_default());
    let mut calls = Vec::new();
    let mut repairs = vec![Repair::ToolCallTags];
    let mut pos = first;
    while let Some(at) = find_outside(text, OPEN, pos, &objects) {
        outside.push_str(text.get(pos..at).unwrap_or_default());
        let body = at + OPEN.len();
        // A tag left open is a reply cut off: later tags may be missing, so even a complete
        // call in it is not all the model asked for.
        let Some(end) = find_outside(text, CLOSE, body, &objects) else {
            return Some(Err(ReplyError::Truncated));
        };
        match tag_calls(text.get(body..end).unwrap_or_default(), &mut repairs) {
            Ok(mut found) => calls.append(&mut found),
            Err(error) => return Some(Err(error)),
        }
        pos = (end + CLOSE.len()).min(text.len());
    }
    outside.push_str(text.get(pos..).unwrap_or_default());
    // Text that ends in the middle of another opening tag (`<tool_c`) was cut off there.
    let tail = outside.trim_end();
    if (1..OPEN.len()).any(|len| OPEN.get(..len).is_some_and(|part| tail.ends_with(part))) {
        return Some(Err(ReplyError::Truncated));
    }
    if outside.contains('{')
        && let Ok((object, _)) = extract_object(&outside)
        && (is_reply_like(&object) || is_call_like(&Value::Object(object)))
    {
        return Some(Err(ReplyError::MultipleObjects { count: calls.len() + 1 }));
    }
    Some(reply_from_calls(outside.trim().to_owned(), calls, repairs))
}

/// The byte ranges of the complete top-level `{ ... }` objects in the text, in order.
fn object_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut pos = 0;
    let mut unclosed = 0;
    while let Some(offset) = bytes.get(pos..).and_then(|rest| rest.iter().position(|&b| b == b'{')) {
        let start = pos + offset;
        let span = scan_object(bytes, start);
        if span.closed {
            spans.push((start, span.end));
            pos = span.end;
        } else {
            // Same bound as the object search: a text of stray braces is not worth rescanning.
            unclosed += 1;
            if unclosed >= MAX_UNCLOSED_SPANS {
                break;
            }
            pos = start + 1;
        }
    }
    spans
}

/// The first `needle` at or after `from` that is not inside one of `spans`.
fn find_outside(text: &str, needle: &str, from: usize, spans: &[(usize, usize)]) -> Option<usize> {
    let mut from = from;
    loop {
        let at = from + text.get(from..)?.find(needle)?;
        let inside = spans.partition_point(|&(start, _)| start <= at);
        match inside.checked_sub(1).and_then(|index| spans.get(index)) {
            Some(&(_, end)) if at < end => from = end,
            _ => return Some(at),
        }
    }
}

/// The calls of one tag: one call object, or a whole reply's calls.
fn tag_calls(content: &str, repairs: &mut Vec<Repair>) -> Result<Vec<Value>, ReplyError> {
    let content = content.trim();
    if content.is_empty() {
        return Err(ReplyError::NoJsonObject);
    }
    let object = match serde_json::from_str::<Unambiguous>(content) {
        Ok(Unambiguous(Value::Object(object))) => object,
        _ => {
            let (object, found) = extract_object(content)?;
            repairs.extend(found);
            object
        }
    };
    if object.contains_key("tool_calls") {
        let reply = reply_from_object(object, Vec::new())?;
        repairs.extend(reply.repairs);
        let calls = reply
            .tool_calls
            .into_iter()
            .map(|call| serde_json::json!({"tool_name": call.tool_name, "arguments": call.arguments}))
            .collect();
        return Ok(calls);
    }
    // In a tag, a bare `{"name": ...}` is a call: the tag says so.
    Ok(vec![Value::Object(object)])
}
