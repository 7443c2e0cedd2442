//! How one turn's text is made smaller for the history policy ([`super::history`]): a tool
//! result replaced by a stub that says how to get it again, an output cut to its head and tail,
//! a reply's long arguments elided. Why a file of its own: these are pure functions of one
//! message, while `context` decides when to apply them to the whole conversation.

use serde_json::{Map, Value, json};

/// Results shorter than this are never masked: the stub would be as long.
pub(super) const MIN_MASKED_BYTES: usize = 400;
/// Arguments longer than this are elided from old replies at the elision level.
const MIN_ELIDED_BYTES: usize = 1_000;
/// Tools whose output the model gets again by repeating the call, with no side effect.
const READ_ONLY_TOOLS: &[&str] = &["read_file", "list_files", "search_files"];

/// One tool call's result as it goes back to the model.
#[derive(Debug, Clone)]
pub(crate) struct ToolResult {
    pub tool: String,
    pub arguments: Map<String, Value>,
    pub ok: bool,
    /// Not run because an earlier call in the batch failed or ended the cycle.
    pub skipped: bool,
    pub output: String,
}

/// The results message: `{"tool_results": [...]}`, each output as `output` makes it.
pub(super) fn render_results(results: &[ToolResult], output: impl Fn(&ToolResult) -> String) -> String {
    let entries: Vec<Value> = results
        .iter()
        .map(|result| {
            let mut entry = json!({"tool_name": result.tool, "ok": result.ok});
            if result.skipped {
                entry["skipped"] = json!(true);
            }
            entry["output"] = json!(output(result));
            entry
        })
        .collect();
    json!({"tool_results": entries}).to_string()
}

/// A result's stub when it is large enough to be worth masking, else its output.
pub(super) fn stub_or_output(result: &ToolResult) -> String {
    if result.output.len() < MIN_MASKED_BYTES {
        return result.output.clone();
    }
    let arguments = Value::Object(result.arguments.clone()).to_string();
    let arguments = crate::text::marked(crate::text::prefix_chars(&arguments, 160), "…}");
    let again = if READ_ONLY_TOOLS.contains(&result.tool.as_str()) {
        format!("call {} again with the same arguments to see it", result.tool)
    } else {
        "repeat the call if you need its output (it runs again)".to_owned()
    };
    format!(
        "[masked to save context: {} bytes of output from {} {arguments}; {again}]",
        result.output.len(),
        result.tool
    )
}

/// `output` cut to about `max` bytes: its head and tail, with a notice in between.
pub(super) fn cut_output(output: &str, max: usize) -> String {
    if output.len() <= max {
        return output.to_owned();
    }
    let half = max.saturating_sub(120) / 2;
    let (head, _) = crate::text::prefix_bytes(output, half);
    let mut tail_start = output.len().saturating_sub(half);
    while !output.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!(
        "{head}\n[… {} bytes cut to fit the model's context window; ask for a smaller part …]\n{}",
        output.len() - head.len() - (output.len() - tail_start),
        &output[tail_start..]
    )
}

/// A reply with every long string argument replaced by a note of its size.
pub(super) fn elide_arguments(reply: &Value) -> Value {
    let mut reply = reply.clone();
    if let Some(calls) = reply.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for call in calls {
            if let Some(arguments) = call.get_mut("arguments").and_then(Value::as_object_mut) {
                for value in arguments.values_mut() {
                    if let Some(text) = value.as_str().filter(|text| text.len() >= MIN_ELIDED_BYTES) {
                        *value = json!(format!("[{} bytes elided to fit the context window]", text.len()));
                    }
                }
            }
        }
    }
    reply
}
