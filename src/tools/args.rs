//! Typed tool arguments: each tool's arguments are a serde struct, and the JSON schema the model
//! sees (in the system prompt and in the structured-output schema) is generated from that very
//! struct ([`schema_for`]), so what the model is told and what the tool reads cannot drift.
//!
//! Models get arguments slightly wrong. Where the meaning is unambiguous it is accepted (an issue
//! or line number sent as `"12"` or `"#12"`, see [`WholeNumber`]); anything else is the call's
//! error, naming the argument and what was expected, so the model can correct itself on its next
//! turn. A misspelt argument is refused rather than ignored: a misspelt optional argument would
//! otherwise silently change what the call does (which issue a pull request closes, which lines
//! are read).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, Error as _, Unexpected};
use serde_json::{Map, Value, json};

use super::ToolError;

/// The schema of one tool's `arguments` object, generated from its argument struct: subschemas
/// inlined (the model reads one flat object), no meta-schema or title, optional arguments
/// neither required nor nullable (optional means "leave it out"), `required` always present,
/// and the keys in the order the prompt and the providers have always seen them.
pub(crate) fn schema_for<A: JsonSchema>() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let schema: Schema = SchemaGenerator::new(settings).into_root_schema_for::<A>();
    let mut schema = schema.to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
    }
    tidy(&mut schema);
    schema
}

/// Makes every object schema under `node` say plainly what it takes (see [`schema_for`]).
fn tidy(node: &mut Value) {
    let Some(object) = node.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(tidy);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = object.get_mut(key) {
            tidy(child);
        }
    }
    let is_object = object.contains_key("properties");
    if is_object {
        optional_without_null(object);
    }
    // The order of the keys is what providers and the prompt have always been sent.
    let mut ordered = Map::new();
    for key in KEY_ORDER {
        match object.remove(key) {
            Some(value) => {
                ordered.insert(key.to_owned(), value);
            }
            None if key == "required" && is_object => {
                ordered.insert(key.to_owned(), json!([]));
            }
            None => {}
        }
    }
    ordered.append(object);
    *object = ordered;
}

/// Keys first in every schema node, in this order; the rest follow as generated.
const KEY_ORDER: [&str; 7] = [
    "type",
    "enum",
    "description",
    "items",
    "properties",
    "required",
    "additionalProperties",
];

/// Optional properties of an object schema may be left out, not sent as `null`.
fn optional_without_null(object: &mut Map<String, Value>) {
    let required: Vec<String> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(name) {
                drop_null(property);
            }
        }
    }
}

/// `Option<T>` makes schemars allow `null`; an optional argument is one to leave out instead.
fn drop_null(property: &mut Value) {
    let Some(object) = property.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = object.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        let single = match kept.as_slice() {
            [one] => one.clone(),
            _ => Value::Array(kept),
        };
        object.insert("type".to_owned(), single);
    }
    if let Some(Value::Array(branches)) = object.get_mut("anyOf") {
        branches.retain(|branch| branch != &json!({"type": "null"}));
        if let [only] = branches.as_slice() {
            let only = only.clone();
            object.remove("anyOf");
            if let Value::Object(inner) = only {
                for (key, value) in inner {
                    object.entry(key).or_insert(value);
                }
            }
        }
    }
}

/// Reads a call's arguments into `A`. A wrong type, a missing required argument or one the tool
/// does not take is an error for the model that names the argument.
pub(crate) fn parse<A: DeserializeOwned>(arguments: &Map<String, Value>) -> Result<A, ToolError> {
    serde_path_to_error::deserialize(Value::Object(arguments.clone())).map_err(|error| {
        let at = error.path().to_string();
        let inner = error.into_inner().to_string();
        ToolError::model(explain(&at, &inner))
    })
}

/// The model's version of a deserialisation error: serde speaks of fields, the model of
/// arguments.
fn explain(at: &str, error: &str) -> String {
    let error = error
        .replace("unknown field", "unknown argument")
        .replace("missing field", "missing required argument");
    let error = error
        .replace(", expected one of", "; the arguments are")
        .replace(", expected `", "; the only argument is `");
    if at.is_empty() || at == "." {
        error
    } else {
        format!("argument `{at}`: {error}")
    }
}

/// A whole number such as an issue or a line: `12`, `"12"` and `"#12"` all mean 12, as a model
/// may write it either way; a negative, fractional or other value is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WholeNumber(pub u64);

impl<'de> Deserialize<'de> for WholeNumber {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expected = "a positive whole number";
        match Value::deserialize(deserializer)? {
            Value::Number(number) => match number.as_u64() {
                Some(value) => Ok(Self(value)),
                None => Err(D::Error::invalid_value(
                    Unexpected::Other(&number.to_string()),
                    &expected,
                )),
            },
            Value::String(text) => text
                .trim()
                .trim_start_matches('#')
                .parse()
                .map(Self)
                .map_err(|_| D::Error::invalid_value(Unexpected::Str(&text), &expected)),
            other => Err(D::Error::invalid_type(unexpected(&other), &expected)),
        }
    }
}

impl JsonSchema for WholeNumber {
    fn schema_name() -> Cow<'static, str> {
        "WholeNumber".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "integer"})
    }
}

fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(flag) => Unexpected::Bool(*flag),
        Value::Number(_) => Unexpected::Other("a number"),
        Value::String(text) => Unexpected::Str(text),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// How an argument's JSON type is named in messages to the model.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
