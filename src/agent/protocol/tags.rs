//! Calls written as `<tool_call>{...}</tool_call>` tags (the Hermes format many small open models
//! were trained on), one tag per call, instead of one reply object.
//!
//! Why this exists: such a reply says exactly which calls to run and in which order, so asking
//! again would only cost a turn. What it guarantees: every tag must hold one readable call (or a
//! whole reply), and a reply object written next to the tags is two answers, which is an error
//! rather than a choice between them.

use serde_json::Value;

use super::lenient::{extract_object, is_reply_like};
use super::unambiguous::Unambiguous;
use super::{ModelReply, Repair, ReplyError, is_call_like, reply_from_calls, reply_from_object};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// `None` when the text has no `<tool_call>` tag; otherwise the reply the tags make, or why they
/// cannot be used. The text outside the tags is the plan.
pub(super) fn parse_tagged(text: &str) -> Option<Result<ModelReply, ReplyError>> {
    let first = text.find(OPEN)?;
    let mut outside = String::from(text.get(..first).unwrap_or_default());
    let mut calls = Vec::new();
    let mut repairs = vec![Repair::ToolCallTags];
    let mut rest = text.get(first..).unwrap_or_default();
    while let Some(at) = rest.find(OPEN) {
        outside.push_str(rest.get(..at).unwrap_or_default());
        let body = rest.get(at + OPEN.len()..).unwrap_or_default();
        // A tag left open, as in a reply cut off by the length limit, runs to the end.
        let (content, after) = match body.find(CLOSE) {
            Some(end) => (
                body.get(..end).unwrap_or_default(),
                body.get(end + CLOSE.len()..).unwrap_or_default(),
            ),
            None => (body, ""),
        };
        match tag_calls(content, &mut repairs) {
            Ok(mut found) => calls.append(&mut found),
            Err(error) => return Some(Err(error)),
        }
        rest = after;
    }
    outside.push_str(rest);
    if outside.contains('{')
        && let Ok((object, _)) = extract_object(&outside)
        && (is_reply_like(&object) || is_call_like(&Value::Object(object)))
    {
        return Some(Err(ReplyError::MultipleObjects { count: calls.len() + 1 }));
    }
    Some(reply_from_calls(outside.trim().to_owned(), calls, repairs))
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
