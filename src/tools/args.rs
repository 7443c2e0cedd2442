//! Reading a tool call's arguments. Models get argument types slightly wrong (a number sent as
//! a string); where the meaning is unambiguous it is accepted, otherwise the error names the
//! argument and the expected type so the model can correct itself.

use serde_json::{Map, Value};

use super::ToolError;

pub fn required_str<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ToolError> {
    match args.get(name) {
        Some(Value::String(text)) => Ok(text),
        Some(other) => Err(ToolError::model(format!(
            "argument `{name}` must be a string, got {}",
            type_name(other)
        ))),
        None => Err(ToolError::model(format!("missing required argument `{name}`"))),
    }
}

pub fn optional_str<'a>(args: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => required_str(args, name).map(Some),
    }
}

/// An optional issue number: `12`, `"12"` and `"#12"` all mean issue 12.
pub fn optional_number(args: &Map<String, Value>, name: &str) -> Result<Option<u64>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number
            .as_u64()
            .map(Some)
            .ok_or_else(|| ToolError::model(format!("argument `{name}` must be a positive whole number"))),
        Some(Value::String(text)) => text.trim().trim_start_matches('#').parse().map(Some).map_err(|_| {
            ToolError::model(format!(
                "argument `{name}` must be a positive whole number, got {text:?}"
            ))
        }),
        Some(other) => Err(ToolError::model(format!(
            "argument `{name}` must be a number, got {}",
            type_name(other)
        ))),
    }
}

/// How an argument's JSON type is named in messages to the model.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
